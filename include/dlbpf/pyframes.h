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
	/* What a code object's snapshot reads (struct dl_pysnap_ev): */
	dl_u16 co_filename;    /* the code object: its file (a str) */
	dl_u16 co_name;        /* the code object: its qualified name (3.11+), else its name */
	dl_u16 co_linetable;   /* the code object: its line table (a bytes) */
	dl_u16 str_ascii;      /* a compact ASCII str: where its characters start */
	dl_u16 str_utf8_len;   /* a compact str: its UTF-8 copy's length and pointer */
	dl_u16 str_utf8;
	dl_u16 pad;
	dl_u32 epoch;          /* which of the processes with this tgid (py_seen's key): new at each setup */
	dl_u32 pad2;
};

/*
 * A code object as BPF read it at a call's probe, the first time a frame of
 * the process named it (bpf/pyframes.bpf.h): the code object's head and what
 * its pointers lead to, each region at its address in the process. The
 * collector reads it as it would the process's memory (user/capture/pycode.c)
 * and writes the DL_EV_PYCODE record; it never reaches the stream or a
 * recording. So a call's lines do not depend on the process living until the
 * collector drains: a process that exits after its last call keeps them.
 */
#define DL_PYSNAP_CODE 256        /* bytes of the code object: every field the layouts name is below */
#define DL_PYSNAP_STR_HEAD 64     /* bytes of a str object: its length, state and UTF-8 pointer */
#define DL_PYSNAP_STR 511         /* characters of a name kept (the collector's cap too) */
#define DL_PYSNAP_BYTES_HEAD 32   /* a bytes object's head: ob_size at 16, its data from 32 */
#define DL_PYSNAP_TABLE 8192      /* bytes of a line table: a longer one is cut, the lines past it not known */

struct dl_pysnap_ev {
	struct dl_hdr h;          /* kind DL_EV_PYSNAP; size: up to table_len bytes of table */
	dl_u64 code;              /* the code object's address */
	dl_u64 file, name;        /* the str objects' addresses (their heads are in file_head, name_head) */
	dl_u64 file_text, name_text; /* where their characters were read */
	dl_u64 table;             /* the line table's bytes object */
	dl_u16 file_len, name_len; /* characters read at file_text, name_text */
	dl_u32 table_len;         /* bytes read at table (its head included); 0: none */
	dl_u8 code_head[DL_PYSNAP_CODE];
	dl_u8 file_head[DL_PYSNAP_STR_HEAD];
	dl_u8 name_head[DL_PYSNAP_STR_HEAD];
	dl_u8 file_chars[DL_PYSNAP_STR + 1];
	dl_u8 name_chars[DL_PYSNAP_STR + 1];
	dl_u8 table_bytes[DL_PYSNAP_BYTES_HEAD + DL_PYSNAP_TABLE];
};

/*
 * A Python function that marks steps (--step-on NAME; user/capture/pywatch.c):
 * a hardware watchpoint on its code object's reference count, which every
 * call takes a reference on as it makes the call's frame (3.10-3.13). BPF's
 * map py_watches (key: the process and the code object) holds the count last
 * seen, so that a write is told an increment (a call, or a reference taken
 * otherwise) from a decrement.
 */
struct dl_pywatch_key {
	dl_u32 tgid;
	dl_u32 pad;
	dl_u64 code;          /* the code object's address: its ob_refcnt is watched */
};

struct dl_pywatch {
	dl_u64 refs;          /* the count after the last write seen */
	dl_u32 mark_id;       /* the DL_EV_MARK's (enum dl_mark_ids) */
	/*
	 * Instructions that take a reference on a code object without calling
	 * it: the one that loads it as a constant and the one that makes a
	 * function of it (a def). An increment while the thread's current
	 * instruction is one of these marks nothing; 0: not looked at.
	 */
	dl_u8 op_load_const, op_make_function;
	/* With DL_PYCFG_LASTI (3.10: the frame holds an index): the code object's bytecode (a bytes) */
	dl_u16 co_code;
	dl_u64 writes;        /* writes seen: user space unwatches a function written too often to be a step's */
	dl_u64 code_type;     /* &PyCode_Type: the word after the count, while the object is the code object */
};

#define DL_PY_OWNED_BY_CSTACK 3   /* FRAME_OWNED_BY_CSTACK, 3.12 and 3.13 */

#endif
