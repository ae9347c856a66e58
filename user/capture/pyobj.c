// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "capture/pyobj.h"
#include "util.h"

/* Enough of a code object for every field of the table (the largest is below 256). */
#define CODE_HEAD 256
/* Bytes objects and strings: ob_size / length at 16, as PyVarObject has it in every version. */
#define VAR_SIZE 16
#define BYTES_DATA 32
#define STR_STATE 32

static uint64_t word_at(const uint8_t *b, size_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static bool read_all(dl_pymem_fn rd, void *ctx, uint64_t addr, void *buf, size_t len)
{
	return addr && rd(ctx, addr, buf, len) == (ssize_t)len;
}

/*
 * A str as UTF-8: compact ASCII inline, else the utf8 copy when the
 * interpreter made one. Anything else (or garbage) gives "?": a name is
 * never read past DL_PY_STR_MAX - 1 bytes.
 */
void dl_pystr_read(const struct dl_py_layout *l, dl_pymem_fn rd, void *ctx, uint64_t addr, char *out)
{
	uint8_t h[64];
	uint64_t len, data;
	uint32_t state;

	strcpy(out, "?");
	if (!read_all(rd, ctx, addr, h, sizeof(h)))
		return;
	len = word_at(h, VAR_SIZE);
	memcpy(&state, h + STR_STATE, sizeof(state));
	/* interned:2 kind:3 compact:1 ascii:1, in every version in the table */
	if (!(state & (1u << 5)))
		return;
	if (state & (1u << 6)) {
		data = addr + l->ascii_size;
	} else {
		len = word_at(h, l->compact_utf8_len);
		data = word_at(h, l->compact_utf8);
	}
	if (len >= DL_PY_STR_MAX)
		len = DL_PY_STR_MAX - 1;
	if (!len || !read_all(rd, ctx, data, out, (size_t)len)) {
		strcpy(out, "?");
		return;
	}
	out[len] = '\0';
	/* A NUL inside is not a name Python made: cut there, and never an empty one. */
	if (!out[0])
		strcpy(out, "?");
}

int dl_pycode_identity(const struct dl_py_layout *l, uint64_t code_type, dl_pymem_fn rd, void *ctx, uint64_t addr,
		       struct dl_pycode_info *out)
{
	uint8_t h[CODE_HEAD];
	int32_t first;

	memset(out, 0, sizeof(*out));
	if (!read_all(rd, ctx, addr, h, sizeof(h)))
		return -1;
	/* ob_type: only a code object is read as one (a frame's f_executable may be something else). */
	if (word_at(h, 8) != code_type)
		return -1;
	out->id_filename = word_at(h, l->co_filename);
	out->id_name = word_at(h, l->co_qualname ? l->co_qualname : l->co_name);
	out->id_linetable = word_at(h, l->co_linetable);
	memcpy(&first, h + l->co_firstlineno, sizeof(first));
	out->firstlineno = first;
	return 0;
}

int dl_pycode_read(const struct dl_py_layout *l, uint64_t code_type, dl_pymem_fn rd, void *ctx, uint64_t addr,
		   struct dl_pycode_info *out)
{
	uint8_t h[BYTES_DATA];
	uint64_t n;
	ssize_t got;

	if (dl_pycode_identity(l, code_type, rd, ctx, addr, out))
		return -1;
	dl_pystr_read(l, rd, ctx, out->id_filename, out->file);
	dl_pystr_read(l, rd, ctx, out->id_name, out->func);
	if (!read_all(rd, ctx, out->id_linetable, h, sizeof(h)))
		return 0;
	n = word_at(h, VAR_SIZE);
	/*
	 * A table past the cap, or read short (a snapshot keeps its first bytes),
	 * is cut: the table is read in order, so the lines it gives are right and
	 * those past its end are not known, never wrong.
	 */
	if (n > DL_PY_TABLE_MAX)
		n = DL_PY_TABLE_MAX;
	if (!n)
		return 0;
	out->table = dl_xcalloc(1, (size_t)n);
	got = out->id_linetable <= UINT64_MAX - BYTES_DATA ? rd(ctx, out->id_linetable + BYTES_DATA, out->table, (size_t)n)
							   : -1;
	if (got <= 0 || (uint64_t)got > n) {
		free(out->table);
		out->table = NULL;
		return 0;
	}
	out->table_len = (size_t)got;
	out->table_short = (uint64_t)got < n;
	return 0;
}

void dl_pycode_info_free(struct dl_pycode_info *i)
{
	free(i->table);
	i->table = NULL;
	i->table_len = 0;
	i->table_short = false;
}

static void snap_region(struct dl_pysnap_mem *m, uint64_t addr, const uint8_t *b, size_t len)
{
	if (addr && len && addr <= UINT64_MAX - len) {
		m->r[m->n].addr = addr;
		m->r[m->n].len = len;
		m->r[m->n].b = b;
		m->n++;
	}
}

bool dl_pysnap_mem_init(struct dl_pysnap_mem *m, const struct dl_pysnap_ev *ev, size_t len)
{
	const size_t head = offsetof(struct dl_pysnap_ev, table_bytes);

	m->n = 0;
	if (len < head || ev->h.size != len || ev->table_len > len - head || ev->file_len > DL_PYSNAP_STR ||
	    ev->name_len > DL_PYSNAP_STR)
		return false;
	snap_region(m, ev->code, ev->code_head, sizeof(ev->code_head));
	/* A str's head only where its characters were read (its read failed otherwise, or it was not one). */
	if (ev->file_text) {
		snap_region(m, ev->file, ev->file_head, sizeof(ev->file_head));
		snap_region(m, ev->file_text, ev->file_chars, ev->file_len);
	}
	if (ev->name_text) {
		snap_region(m, ev->name, ev->name_head, sizeof(ev->name_head));
		snap_region(m, ev->name_text, ev->name_chars, ev->name_len);
	}
	snap_region(m, ev->table, ev->table_bytes, ev->table_len);
	return true;
}

ssize_t dl_pysnap_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct dl_pysnap_mem *m = ctx;
	size_t best = 0;
	int at = -1;

	/* Regions may overlap (a compact str's head and its characters): the one that holds the most from addr. */
	for (int k = 0; k < m->n; k++) {
		size_t have;

		if (addr < m->r[k].addr || addr - m->r[k].addr >= m->r[k].len)
			continue;
		have = m->r[k].len - (size_t)(addr - m->r[k].addr);
		if (have > best) {
			best = have;
			at = k;
		}
	}
	if (at < 0)
		return -1;
	if (best > len)
		best = len;
	memcpy(buf, m->r[at].b + (addr - m->r[at].addr), best);
	return (ssize_t)best;
}

bool dl_pycode_name_matches(const char *want, const char *file, const char *qual, bool has_qualname, bool *exact)
{
	const char *colon = strrchr(want, ':'), *name = colon ? colon + 1 : want, *dot;
	size_t flen = colon ? (size_t)(colon - want) : 0, nlen = strlen(name), qlen = strlen(qual), len;

	*exact = false;
	if (!nlen)
		return false;
	if (flen) {
		len = strlen(file);
		/* The file as given, or its end after a slash: "train.py" is /work/train.py. */
		if (len < flen || strncmp(file + len - flen, want, flen) || (len > flen && file[len - flen - 1] != '/'))
			return false;
	}
	if (!has_qualname) {
		/* Only the name: the qualified name's last component is held against it. */
		dot = strrchr(name, '.');
		return !strcmp(qual, dot ? dot + 1 : name);
	}
	if (!strcmp(qual, name)) {
		*exact = true;
		return true;
	}
	/* "step" for "Trainer.step", "train_step" for "main.<locals>.train_step". */
	return qlen > nlen && qual[qlen - nlen - 1] == '.' && !strcmp(qual + qlen - nlen, name);
}
