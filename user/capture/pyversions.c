// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one table of CPython layouts. Every number was taken with offsetof()
 * from each version's own internal headers (the opcodes from its opcode module) (Include/internal/pycore_*.h of
 * 3.10.13, 3.11.7, 3.12.1, 3.13.0; Debian's 3.11 gives the same), and
 * tests/integration/test_pyframes.py checks them against each interpreter
 * on the machine: a layout changes between minor versions, never within one.
 */
#include <pthread.h>
#include <string.h>
#include "capture/pyobj.h"

static const struct dl_py_layout table[] = {
	{
		/* _PyRuntime.ceval.gil holds mutex and switch_mutex before gilstate (3.10 and 3.11) */
		.major = 3, .minor = 10, .runtime_tss = 584, .runtime_mutexes = 2,
		/* PyThreadState.frame; PyFrameObject: f_back, f_code, f_lasti (an int: code units) */
		.bpf = { .tstate_frame = 24, .frame_code = 32, .frame_prev = 24, .frame_instr = 96,
			 .flags = DL_PYCFG_LASTI },
		.co_filename = 104, .co_name = 112, .co_qualname = 0, .co_firstlineno = 40, .co_linetable = 120,
		.ascii_size = 48, .compact_utf8_len = 48, .compact_utf8 = 56, .lines_format = DL_PYLINES_310,
		.op_load_const = 100, .op_make_function = 132, .co_code = 48,
	},
	{
		.major = 3, .minor = 11, .runtime_tss = 592, .runtime_mutexes = 2,
		/* PyThreadState.cframe -> _PyCFrame.current_frame; _PyInterpreterFrame: f_code, previous, prev_instr */
		.bpf = { .tstate_frame = 56, .cframe_frame = 8, .frame_code = 32, .frame_prev = 48, .frame_instr = 56,
			 .code_adaptive = 184, .flags = DL_PYCFG_CFRAME },
		.co_filename = 112, .co_name = 120, .co_qualname = 128, .co_firstlineno = 72, .co_linetable = 136,
		.ascii_size = 48, .compact_utf8_len = 48, .compact_utf8 = 56, .lines_format = DL_PYLINES_311,
		.op_load_const = 100, .op_make_function = 132,
	},
	{
		.major = 3, .minor = 12, .runtime_tss = 1544,
		/* as 3.11, the frame's fields moved; shim frames of the C stack (owner 3) are skipped */
		.bpf = { .tstate_frame = 56, .cframe_frame = 0, .frame_code = 0, .frame_prev = 8, .frame_instr = 56,
			 .frame_owner = 70, .code_adaptive = 192, .flags = DL_PYCFG_CFRAME | DL_PYCFG_OWNER },
		.co_filename = 112, .co_name = 120, .co_qualname = 128, .co_firstlineno = 68, .co_linetable = 136,
		.ascii_size = 40, .compact_utf8_len = 40, .compact_utf8 = 48, .lines_format = DL_PYLINES_311,
		.op_load_const = 100, .op_make_function = 132,
	},
	{
		.major = 3, .minor = 13, .runtime_tss = 2160,
		/* PyThreadState.current_frame; _PyInterpreterFrame: f_executable, previous, instr_ptr */
		.bpf = { .tstate_frame = 72, .frame_code = 0, .frame_prev = 8, .frame_instr = 56, .frame_owner = 70,
			 .code_adaptive = 200, .flags = DL_PYCFG_OWNER },
		.co_filename = 112, .co_name = 120, .co_qualname = 128, .co_firstlineno = 68, .co_linetable = 136,
		.ascii_size = 40, .compact_utf8_len = 40, .compact_utf8 = 48, .lines_format = DL_PYLINES_311,
		.op_load_const = 83, .op_make_function = 26,
	},
};

const struct dl_py_layout *dl_py_layout_of(unsigned major, unsigned minor)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].major == major && table[i].minor == minor)
			return &table[i];
	return NULL;
}

/*
 * The table's offsets were taken on x86-64, where glibc's pthread_mutex_t is 40 bytes; aarch64's
 * is 48 (its __SIZEOF_PTHREAD_MUTEX_T), so each mutex before autoTSSkey moves it 8 bytes there.
 * Debian's arm64 3.11 reads the key at _PyRuntime+612 (PyGILState_GetThisThreadState: ldr w0,
 * [x0, #612], the Py_tss_t's _key at +4), x86-64's at +596: 608 = 592 + 2 * 8. Every other
 * offset in the table is of pointers, ints and longs, the same on both (LP64).
 */
uint16_t dl_py_runtime_tss(const struct dl_py_layout *l)
{
	return (uint16_t)(l->runtime_tss + l->runtime_mutexes * (sizeof(pthread_mutex_t) - 40));
}

const char *dl_py_versions_supported(void)
{
	return "3.10-3.13";
}

/* Word indexes in 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h), all uint64_t. */
enum {
	DO_VERSION = 1, DO_FREE_THREADED = 2,
	DO_TSTATE_CURRENT_FRAME = 23,
	DO_FRAME_PREVIOUS = 29, DO_FRAME_EXECUTABLE = 30, DO_FRAME_INSTR_PTR = 31, DO_FRAME_OWNER = 33,
	DO_CODE_FILENAME = 35, DO_CODE_NAME = 36, DO_CODE_QUALNAME = 37, DO_CODE_LINETABLE = 38,
	DO_CODE_FIRSTLINENO = 39, DO_CODE_ADAPTIVE = 43,
	DO_WORDS = 44,
};

bool dl_py_debug_offsets(const uint8_t *raw, size_t len, struct dl_py_layout *l)
{
	uint64_t w[DO_WORDS];
	struct dl_py_layout n = *l;

	if (len < sizeof(w) || memcmp(raw, "xdebugpy", 8))
		return false;
	memcpy(w, raw, sizeof(w));
	/* PY_VERSION_HEX: 0x030d00f0 for 3.13.0 */
	if ((w[DO_VERSION] >> 24) != l->major || ((w[DO_VERSION] >> 16) & 0xff) != l->minor || w[DO_FREE_THREADED])
		return false;
	/* Every frame field is read from one DL_PY_FRAME_READ-byte read: larger offsets are not one we can use. */
	for (int k = DO_TSTATE_CURRENT_FRAME; k < DO_WORDS; k++)
		if (w[k] > 4096)
			return false;
	if (w[DO_FRAME_PREVIOUS] + 8 > DL_PY_FRAME_READ || w[DO_FRAME_EXECUTABLE] + 8 > DL_PY_FRAME_READ ||
	    w[DO_FRAME_INSTR_PTR] + 8 > DL_PY_FRAME_READ || w[DO_FRAME_OWNER] >= DL_PY_FRAME_READ)
		return false;
	n.bpf.tstate_frame = (uint16_t)w[DO_TSTATE_CURRENT_FRAME];
	n.bpf.frame_prev = (uint16_t)w[DO_FRAME_PREVIOUS];
	n.bpf.frame_code = (uint16_t)w[DO_FRAME_EXECUTABLE];
	n.bpf.frame_instr = (uint16_t)w[DO_FRAME_INSTR_PTR];
	n.bpf.frame_owner = (uint16_t)w[DO_FRAME_OWNER];
	n.bpf.code_adaptive = (uint16_t)w[DO_CODE_ADAPTIVE];
	n.co_filename = (uint16_t)w[DO_CODE_FILENAME];
	n.co_name = (uint16_t)w[DO_CODE_NAME];
	n.co_qualname = (uint16_t)w[DO_CODE_QUALNAME];
	n.co_linetable = (uint16_t)w[DO_CODE_LINETABLE];
	n.co_firstlineno = (uint16_t)w[DO_CODE_FIRSTLINENO];
	*l = n;
	return true;
}
