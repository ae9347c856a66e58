/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython's layouts per version (the one table: pyversions.c) and the
 * reading of a code object out of a process's memory. The reads go through a
 * callback, so that the reader runs on a buffer in the fuzz harness: the
 * memory is the traced side's and may hold anything (a code object freed
 * and reused, strings that point at themselves).
 */
#ifndef DLBPF_PYOBJ_H
#define DLBPF_PYOBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "dlbpf/pyframes.h"

struct dl_py_layout {
	unsigned major, minor;
	uint16_t runtime_tss;     /* _PyRuntime: the Py_tss_t autoTSSkey, in x86-64's build (dl_py_runtime_tss) */
	uint8_t runtime_mutexes;  /* glibc pthread_mutex_t's in _PyRuntimeState before it */
	struct dl_py_cfg bpf;     /* BPF's offsets (tss_addr and specific_off are the process's: 0 here) */
	/* PyCodeObject */
	uint16_t co_filename, co_name, co_qualname, co_firstlineno, co_linetable;
	/* str: compact ASCII data follows PyASCIIObject; PyCompactUnicodeObject's utf8 copy otherwise */
	uint16_t ascii_size, compact_utf8_len, compact_utf8;
	unsigned lines_format;    /* enum dl_pycode_format */
	/* Opcodes that take a reference on a code object without calling it (struct dl_pywatch); 0: not told */
	uint8_t op_load_const, op_make_function;
	uint16_t co_code;         /* 3.10: PyCodeObject's bytecode (a bytes), where the frame has only an index */
};

/* The layout of CPython major.minor, or NULL when the table has none. */
const struct dl_py_layout *dl_py_layout_of(unsigned major, unsigned minor);
/*
 * _PyRuntime's autoTSSkey offset in this architecture's build of CPython: the
 * table's are x86-64's, and glibc's pthread_mutex_t is larger on aarch64.
 */
uint16_t dl_py_runtime_tss(const struct dl_py_layout *l);
/* "3.10-3.13": what the table holds, for messages. */
const char *dl_py_versions_supported(void);
/*
 * 3.13's _Py_DebugOffsets, the runtime's own description of its structs (the
 * first bytes of _PyRuntime): overrides the frame and code offsets of *l with
 * what the running interpreter says. False when raw is not that (no cookie,
 * another version, a free-threaded build), *l unchanged.
 */
bool dl_py_debug_offsets(const uint8_t *raw, size_t len, struct dl_py_layout *l);

/* Reads up to len bytes at addr of the process; the number read (fewer where its memory ends), or -1. */
typedef ssize_t (*dl_pymem_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

#define DL_PY_STR_MAX 512
#define DL_PY_TABLE_MAX 65536

struct dl_pycode_info {
	/* what stays the same while the code object lives: a change says another one lives at its address */
	uint64_t id_filename, id_name, id_linetable;
	int32_t firstlineno;
	char file[DL_PY_STR_MAX], func[DL_PY_STR_MAX];
	uint8_t *table;           /* malloc'd; NULL with table_len 0 when unreadable */
	size_t table_len;
	bool table_short;         /* fewer bytes than the table has, below DL_PY_TABLE_MAX: a fuller read may come */
};

/*
 * Reads the identity fields of the code object at addr (cheap: one read),
 * checking that its type is code_type; 0 or -1.
 */
int dl_pycode_identity(const struct dl_py_layout *l, uint64_t code_type, dl_pymem_fn rd, void *ctx, uint64_t addr,
		       struct dl_pycode_info *out);
/* The identity, the names and the line table; 0 or -1 (nothing to free then). */
int dl_pycode_read(const struct dl_py_layout *l, uint64_t code_type, dl_pymem_fn rd, void *ctx, uint64_t addr,
		   struct dl_pycode_info *out);
void dl_pycode_info_free(struct dl_pycode_info *i);
/* The str at addr as UTF-8 into out (DL_PY_STR_MAX bytes): "?" when it is not one that can be read. */
void dl_pystr_read(const struct dl_py_layout *l, dl_pymem_fn rd, void *ctx, uint64_t addr, char *out);

/*
 * A code object as BPF read it at a probe (struct dl_pysnap_ev, from the ring
 * buffer: its lengths are checked here) as memory to read it from with
 * dl_pycode_read: each region at its address in the process.
 */
struct dl_pysnap_mem {
	int n;
	struct {
		uint64_t addr;
		size_t len;
		const uint8_t *b;    /* inside the record */
	} r[6];
};
/* False when the len bytes of ev are not a snapshot. */
bool dl_pysnap_mem_init(struct dl_pysnap_mem *m, const struct dl_pysnap_ev *ev, size_t len);
/* A dl_pymem_fn over a struct dl_pysnap_mem: what its regions hold from addr on, or -1. */
ssize_t dl_pysnap_read(void *ctx, uint64_t addr, void *buf, size_t len);

/*
 * Whether want, as --step-on takes a Python function (capture/pywatch.h),
 * names the function whose code object has file and qualified name qual
 * (3.10's code objects have only the name: the last component of want is
 * held against it then). *exact: the whole qualified name matched, not only
 * its end after a dot.
 */
bool dl_pycode_name_matches(const char *want, const char *file, const char *qual, bool has_qualname, bool *exact);

#endif
