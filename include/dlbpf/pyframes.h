/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How BPF finds a CPython thread's frames: the value of map py_procs (key:
 * tgid), filled by user space from the offsets of the process's CPython
 * version (user/capture/pyversions.c). Fixed-width types only (shared with BPF).
 *
 * The thread state is looked up through the pthread key CPython keeps for
 * its GIL-state API (autoTSSkey): every thread that ever ran Python holds it,
 * with the GIL or without (ctypes and PyTorch release the GIL around native
 * calls, where the interpreter's "current thread" variable is cleared).
 */
#ifndef DLBPF_PYFRAMES_H
#define DLBPF_PYFRAMES_H

#include "dlbpf/events.h"

/* A frame is read whole into this many bytes; every frame offset is below it. */
#define DL_PY_FRAME_READ 128
/* Frames looked at, shims of the C stack included (they are skipped, not recorded). */
#define DL_PY_WALK_MAX (DL_PY_MAX + 8)
/* glibc keeps the first 32 pthread keys' values in struct pthread itself. */
#define DL_PY_KEYS_1ST 32

enum dl_py_cfg_flags {
	DL_PYCFG_LASTI = 1u << 0,   /* frame_instr is an int: the instruction's index (3.10) */
	DL_PYCFG_CFRAME = 1u << 1,  /* tstate_frame is a _PyCFrame *, and cframe_frame its current frame (3.11, 3.12) */
	DL_PYCFG_OWNER = 1u << 2,   /* frame_owner is the frame's owner byte: shims of the C stack are skipped (3.12+) */
};

struct dl_py_cfg {
	dl_u64 tss_addr;       /* the process's Py_tss_t autoTSSkey: {int initialized; unsigned key} */
	dl_u32 specific_off;   /* glibc: struct pthread's specific_1stblock from the thread pointer, signed (glibctsd.h) */
	dl_u32 flags;          /* enum dl_py_cfg_flags */
	dl_u16 tstate_frame;   /* PyThreadState: the frame pointer (or the cframe pointer) */
	dl_u16 cframe_frame;   /* _PyCFrame: current_frame */
	dl_u16 frame_code;     /* the frame: the code object */
	dl_u16 frame_prev;     /* the frame: the one it was called from */
	dl_u16 frame_instr;    /* the frame: the instruction pointer (or f_lasti) */
	dl_u16 frame_owner;    /* the frame: owner (with DL_PYCFG_OWNER) */
	dl_u16 code_adaptive;  /* the code object: where its bytecode starts */
	dl_u16 pad;
};

#define DL_PY_OWNED_BY_CSTACK 3   /* FRAME_OWNED_BY_CSTACK, 3.12 and 3.13 */

#endif
