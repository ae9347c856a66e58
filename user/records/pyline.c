// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "records/pyline.h"

/* 3.10 (PEP 626): pairs of (bytes of code, signed line delta); -128: the range has no line. */
static int64_t line_310(const uint8_t *t, size_t len, int64_t line, uint32_t off)
{
	uint64_t start = 0, end = 0;
	int64_t cur = -1;
	size_t i = 0;

	while (end <= off) {
		/* Empty ranges (a jump of more than 254 bytes is split so) move on to the next pair. */
		do {
			int8_t ldelta;

			if (i + 2 > len)
				return -1;
			start = end;
			end += t[i];
			ldelta = (int8_t)t[i + 1];
			i += 2;
			if (ldelta == -128) {
				cur = -1;
			} else {
				line += ldelta;
				cur = line;
			}
		} while (start == end);
	}
	return cur;
}

/* 6-bit chunks, low first, 0x40 continues: at most 6 chunks make the 32 bits CPython writes. */
static bool varint(const uint8_t *t, size_t len, size_t *i, uint32_t *out)
{
	uint32_t v = 0;

	for (int shift = 0; shift < 36; shift += 6) {
		uint8_t b;

		if (*i >= len)
			return false;
		b = t[(*i)++];
		v |= (uint32_t)(b & 63) << shift;
		if (!(b & 64)) {
			*out = v;
			return true;
		}
	}
	return false;
}

/*
 * 3.11 and later (PEP 657): entries of one start byte (bit 7 set; bits 3-6
 * the form, bits 0-2 code units - 1) and the form's bytes. Only the line
 * delta matters here: forms 13 and 14 start with it (a signed varint), 11
 * and 12 move one or two lines, 15 has no location, the short forms none.
 */
static int64_t line_311(const uint8_t *t, size_t len, int64_t line, uint32_t off)
{
	uint64_t end = 0;
	int64_t cur = -1;
	size_t i = 0;

	while (end <= off) {
		uint8_t first;
		int code;

		if (i >= len || !(t[i] & 0x80))
			return -1;
		first = t[i++];
		code = (first >> 3) & 15;
		end += ((uint64_t)(first & 7) + 1) * 2;
		if (code == 15) {
			cur = -1;
		} else if (code == 13 || code == 14) {
			uint32_t u;
			size_t j = i;

			if (!varint(t, len, &j, &u))
				return -1;
			/* In 64 bits: a corrupt table's deltas (up to 2^31 each, 64 KiB of them) cannot wrap. */
			line += (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
			cur = line;
		} else if (code == 11 || code == 12) {
			line += code - 10;
			cur = line;
		} else {
			cur = line;
		}
		/* The entry's other bytes (columns) up to the next start byte. */
		while (i < len && !(t[i] & 0x80))
			i++;
	}
	return cur;
}

int dl_pyline(unsigned format, const uint8_t *table, size_t len, int32_t firstlineno, uint32_t byte_off)
{
	int64_t line;

	if (!table || firstlineno < 0)
		return -1;
	if (format == DL_PYLINES_310)
		line = line_310(table, len, firstlineno, byte_off);
	else if (format == DL_PYLINES_311)
		line = line_311(table, len, firstlineno, byte_off);
	else
		return -1;
	/* A corrupt table can run the line below 1 (or wrap): no line, rather than a wrong one. */
	return line > 0 && line <= INT32_MAX ? (int)line : -1;
}

bool dl_pycode_ok(const struct dl_pycode_ev *e)
{
	size_t len, need;

	if (e->h.size < offsetof(struct dl_pycode_ev, text))
		return false;
	len = e->h.size - offsetof(struct dl_pycode_ev, text);
	need = (size_t)e->file_len + e->func_len + e->table_len;
	return e->file_len >= 1 && e->func_len >= 1 && need <= len && e->text[e->file_len - 1] == '\0' &&
	       e->text[e->file_len + e->func_len - 1] == '\0';
}

const char *dl_pycode_file(const struct dl_pycode_ev *e)
{
	return e->text;
}

const char *dl_pycode_func(const struct dl_pycode_ev *e)
{
	return e->text + e->file_len;
}

const uint8_t *dl_pycode_table(const struct dl_pycode_ev *e)
{
	return (const uint8_t *)e->text + e->file_len + e->func_len;
}

bool dl_py_stack_of(const struct dl_cuda_ev *ev, struct dl_py_stack *out, uint32_t *native_words)
{
	const size_t need = sizeof(*ev) + sizeof(*out);
	uint32_t n, k = 0;

	*native_words = 0;
	if (!(ev->flags & DL_CUDA_PY) || ev->h.size < need)
		return false;
	memcpy(out, ev->stack, sizeof(*out));
	n = out->n < DL_PY_MAX ? out->n : DL_PY_MAX;
	/* Shims of the C stack (code 0) are no frame of the program's. */
	for (uint32_t i = 0; i < n; i++)
		if (out->f[i].code)
			out->f[k++] = out->f[i];
	out->n = (uint16_t)k;
	*native_words = sizeof(*out) / sizeof(uint64_t);
	return true;
}
