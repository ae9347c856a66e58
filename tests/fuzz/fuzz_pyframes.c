// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Python frame decoders on arbitrary bytes: a line table of either
 * format (records/pyline.c), a code record and a call record's frames as
 * a recording may hold them, and the code-object reader (capture/pyobj.c)
 * on a fake address space made of the input, where every pointer may point
 * anywhere in it: at itself (a cyclic string or table), past its end, into
 * the middle of a word, and on a BPF snapshot of a code object made of the
 * input (capture/pyobj.h). Besides "no crash, no hang, no sanitizer report": a
 * line is -1 or positive, names stay inside their buffers and end in NUL.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "capture/pyobj.h"
#include "harness.h"
#include "records/pyline.h"

#define BASE 0x10000ull

struct space {
	const uint8_t *p;
	size_t n;
};

static ssize_t space_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct space *s = ctx;

	if (addr < BASE || addr - BASE > s->n || len > s->n - (addr - BASE))
		return -1;
	memcpy(buf, s->p + (addr - BASE), len);
	return (ssize_t)len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fail_init();
	return 0;
}

static void check_name(const char *s)
{
	size_t n = strnlen(s, DL_PY_STR_MAX);

	if (n == DL_PY_STR_MAX || n == 0)
		FAIL("a name is not a string of 1 to %d bytes", DL_PY_STR_MAX - 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct space sp = { data, size };
	struct dl_pycode_info info;
	uint32_t off = 0, words;
	int line;

	if (size < 8)
		return 0;
	memcpy(&off, data, sizeof(off));
	for (unsigned fmt = 0; fmt <= 3; fmt++) {
		line = dl_pyline(fmt, data + 4, size - 4, (int32_t)(data[4] | 1), off % 4096);
		if (line < -1 || line == 0)
			FAIL("line %d", line);
	}
	/* As a code record and as a call record (the stream gives each at least its minimum size). */
	if (size >= sizeof(struct dl_pycode_ev) && size < 65536) {
		struct dl_pycode_ev *e = malloc(size);

		memcpy(e, data, size);
		e->h.size = (uint16_t)size;
		if (dl_pycode_ok(e)) {
			/* A recording's strings may be empty; they must end inside their lengths. */
			if (strnlen(dl_pycode_file(e), e->file_len) >= e->file_len ||
			    strnlen(dl_pycode_func(e), e->func_len) >= e->func_len)
				FAIL("a code record's string runs past its length");
			line = dl_pyline(e->format, dl_pycode_table(e), e->table_len, e->firstlineno, off);
			if (line < -1 || line == 0)
				FAIL("record line %d", line);
		}
		free(e);
	}
	if (size >= sizeof(struct dl_cuda_ev) && size < 65536) {
		struct dl_cuda_ev *e = malloc(size);
		struct dl_py_stack st;

		memcpy(e, data, size);
		e->h.size = (uint16_t)size;
		if (dl_py_stack_of(e, &st, &words))
			for (uint32_t k = 0; k < st.n; k++)
				if (k >= DL_PY_MAX || !st.f[k].code)
					FAIL("frame %u of %u kept (code %#llx)", k, st.n, (unsigned long long)st.f[k].code);
		free(e);
	}
	/* As a BPF snapshot of a code object: the reader on its regions, read as the process's memory. */
	if (size >= 16 && size < 65536) {
		struct dl_pysnap_ev *e = calloc(1, sizeof(*e));
		size_t n = size < sizeof(*e) ? size : sizeof(*e);
		struct dl_pysnap_mem m;
		uint64_t type;

		memcpy(e, data, n);
		e->h.size = (uint16_t)n;
		memcpy(&type, data + 8, sizeof(type));
		if (dl_pysnap_mem_init(&m, e, n))
			for (unsigned minor = 10; minor <= 13; minor++) {
				const struct dl_py_layout *l = dl_py_layout_of(3, minor);

				if (!l || dl_pycode_read(l, type, dl_pysnap_read, &m, e->code, &info))
					continue;
				check_name(info.file);
				check_name(info.func);
				/* A table pointer may lead into any region (the code object's own head): never past one. */
				if (info.table_len > DL_PYSNAP_BYTES_HEAD + DL_PYSNAP_TABLE || (info.table_len && !info.table))
					FAIL("snapshot table of %zu bytes", info.table_len);
				dl_pycode_info_free(&info);
			}
		free(e);
	}
	/* Each version's layout, reading a "code object" at a few places of the space. */
	for (unsigned minor = 10; minor <= 13; minor++) {
		const struct dl_py_layout *l = dl_py_layout_of(3, minor);
		uint64_t type;

		if (!l || size < 16)
			continue;
		memcpy(&type, data + 8, sizeof(type));
		for (uint64_t at = BASE; at < BASE + size && at < BASE + 64; at += 8) {
			if (dl_pycode_read(l, type, space_read, &sp, at, &info))
				continue;
			check_name(info.file);
			check_name(info.func);
			if (info.table_len > DL_PY_TABLE_MAX || (info.table_len && !info.table))
				FAIL("table of %zu bytes", info.table_len);
			dl_pycode_info_free(&info);
		}
	}
	return 0;
}
