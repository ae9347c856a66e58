// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Arbitrary bytes, as a traced process may name itself, its kernels and its
 * files, through each output's string path: the terminal escaper
 * (user/strsafe.c), the JSON string writer (output/json.c) and protobuf
 * strings (output/pbwriter.c, what the Perfetto trace is made of).
 *
 * Checked against a reference written here another way: UTF-8 read off the
 * Unicode Standard's Table 3-7 row by row (a maximal subpart is the longest
 * prefix of any row), so that the harness does not share the decoder it
 * tests. Besides the exact expected bytes, the invariants that make the
 * outputs safe: no control byte out of the escaper, escaping escaped text
 * changes nothing, the escape undoes to the input, the JSON string is valid
 * UTF-8 and JSON and reads back as the input with U+FFFD for what was
 * ill-formed, and so does the protobuf string.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "output/json.h"
#include "output/pbwriter.h"
#include "strsafe.h"
#include "harness.h"

/* --- the reference: well-formed UTF-8 by Table 3-7 --- */

struct row {
	int len;
	uint8_t lo[4], hi[4];
};

static const struct row rows[] = {
	{ 1, { 0x00 }, { 0x7f } },
	{ 2, { 0xc2, 0x80 }, { 0xdf, 0xbf } },
	{ 3, { 0xe0, 0xa0, 0x80 }, { 0xe0, 0xbf, 0xbf } },
	{ 3, { 0xe1, 0x80, 0x80 }, { 0xec, 0xbf, 0xbf } },
	{ 3, { 0xed, 0x80, 0x80 }, { 0xed, 0x9f, 0xbf } },
	{ 3, { 0xee, 0x80, 0x80 }, { 0xef, 0xbf, 0xbf } },
	{ 4, { 0xf0, 0x90, 0x80, 0x80 }, { 0xf0, 0xbf, 0xbf, 0xbf } },
	{ 4, { 0xf1, 0x80, 0x80, 0x80 }, { 0xf3, 0xbf, 0xbf, 0xbf } },
	{ 4, { 0xf4, 0x80, 0x80, 0x80 }, { 0xf4, 0x8f, 0xbf, 0xbf } },
};

/*
 * One unit at s[0..n): true and its code point if well-formed; *len its bytes either way.
 * The rows' first-byte ranges do not overlap, so the first row that takes s[0] is the
 * only one with a prefix at all: the search ends there.
 */
static CHECKER int ref_unit(const uint8_t *s, size_t n, size_t *len, uint32_t *cp)
{
	size_t best = 0;

	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		size_t k = 0;

		while (k < (size_t)rows[r].len && k < n && s[k] >= rows[r].lo[k] && s[k] <= rows[r].hi[k])
			k++;
		if (k == (size_t)rows[r].len) {
			static const uint8_t lead_mask[5] = { 0, 0x7f, 0x1f, 0x0f, 0x07 };

			*cp = s[0] & lead_mask[k];
			for (size_t i = 1; i < k; i++)
				*cp = *cp << 6 | (s[i] & 0x3f);
			*len = k;
			return 1;
		}
		if (k > 0) {
			best = k;
			break;
		}
	}
	*len = best ? best : 1;
	return 0;
}

/* What a terminal acts on or hides, spelled out: C0, DEL, C1, bidirectional controls, separators. */
static CHECKER int ref_acts(uint32_t cp)
{
	static const uint32_t bidi[] = { 0x061c, 0x200e, 0x200f, 0x2028, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d,
					 0x202e, 0x2066, 0x2067, 0x2068, 0x2069 };

	if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
		return 1;
	for (size_t i = 0; i < sizeof(bidi) / sizeof(bidi[0]); i++)
		if (cp == bidi[i])
			return 1;
	return 0;
}

static CHECKER int ref_valid(const uint8_t *s, size_t n)
{
	uint32_t cp;
	size_t k;

	for (size_t i = 0; i < n; i += k)
		if (!ref_unit(s + i, n - i, &k, &cp))
			return 0;
	return 1;
}

struct out {
	uint8_t *v;
	size_t n, cap;
};

static CHECKER void put(struct out *o, const void *p, size_t k)
{
	if (!k)
		return;
	if (o->n + k > o->cap) {
		o->cap = (o->n + k) * 2 + 16;
		o->v = realloc(o->v, o->cap);
		if (!o->v)
			abort();
	}
	memcpy(o->v + o->n, p, k);
	o->n += k;
}

static CHECKER void ref_fix(struct out *o, const uint8_t *s, size_t n)
{
	uint32_t cp;
	size_t k;

	for (size_t i = 0; i < n; i += k) {
		if (ref_unit(s + i, n - i, &k, &cp))
			put(o, s + i, k);
		else
			put(o, "\xef\xbf\xbd", 3);
	}
}

static CHECKER void ref_text(struct out *o, const uint8_t *s, size_t n, unsigned flags)
{
	uint32_t cp;
	size_t k;

	for (size_t i = 0; i < n; i += k) {
		int wf = ref_unit(s + i, n - i, &k, &cp);

		if (wf && (!ref_acts(cp) || ((flags & DL_TEXT_KEEP_LINES) && (cp == '\n' || cp == '\t')))) {
			put(o, s + i, k);
			continue;
		}
		for (size_t j = 0; j < k; j++) {
			static const char hex[] = "0123456789abcdef";
			char e[4] = { '\\', 'x', hex[s[i + j] >> 4], hex[s[i + j] & 15] };

			put(o, e, 4);
		}
	}
}

static CHECKER void same(const char *what, const void *got, size_t ngot, const void *want, size_t nwant)
{
	if (ngot != nwant || (ngot && memcmp(got, want, ngot)))
		FAIL("%s: %zu bytes, want %zu", what, ngot, nwant);
}

/* --- the terminal escaper --- */

static CHECKER int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static CHECKER void unescape(struct out *o, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x' && hexval(s[i + 2]) >= 0 && hexval(s[i + 3]) >= 0) {
			uint8_t b = (uint8_t)(hexval(s[i + 2]) << 4 | hexval(s[i + 3]));

			put(o, &b, 1);
			i += 3;
		} else {
			put(o, s + i, 1);
		}
	}
}

static CHECKER void check_text(const uint8_t *data, size_t size, unsigned flags)
{
	struct dl_sbuf b = { 0 }, again = { 0 };
	struct out want = { 0 }, undone = { 0 };
	uint32_t cp;
	size_t k;

	dl_text_escape(&b, (const char *)data, size, flags);
	if (!b.v || b.v[b.n] != '\0' || strlen(b.v) != b.n)
		FAIL("text: not one NUL-terminated string");
	ref_text(&want, data, size, flags);
	same("text escape", b.v, b.n, want.v, want.n);
	for (size_t i = 0; i < b.n; i++) {
		uint8_t c = (uint8_t)b.v[i];

		if ((c < 0x20 && !((flags & DL_TEXT_KEEP_LINES) && (c == '\n' || c == '\t'))) || c == 0x7f)
			FAIL("text: control byte 0x%02x at %zu", c, i);
	}
	for (size_t i = 0; i < b.n; i += k) {
		if (!ref_unit((const uint8_t *)b.v + i, b.n - i, &k, &cp))
			FAIL("text: ill-formed UTF-8 at %zu", i);
		if (ref_acts(cp) && !((flags & DL_TEXT_KEEP_LINES) && (cp == '\n' || cp == '\t')))
			FAIL("text: U+%04X left at %zu", cp, i);
	}
	dl_text_escape(&again, b.v, b.n, flags);
	same("text escaped twice", again.v, again.n, b.v, b.n);
	/* A backslash is left as it is, so only input without one undoes exactly. */
	if (!memchr(data, '\\', size)) {
		unescape(&undone, b.v, b.n);
		same("text unescaped", undone.v, undone.n, data, size);
	}
	dl_sbuf_free(&b);
	dl_sbuf_free(&again);
	free(want.v);
	free(undone.v);
}

/* --- the JSON string writer --- */

/* Reads one JSON string (RFC 8259) back to its UTF-8 bytes; aborts on anything a parser would refuse. */
static CHECKER void json_read_string(struct out *o, const uint8_t *s, size_t n)
{
	size_t i = 1;

	if (n < 2 || s[0] != '"' || s[n - 1] != '"')
		FAIL("json: not one quoted string");
	while (i < n - 1) {
		uint8_t c = s[i];

		if (c < 0x20)
			FAIL("json: raw control 0x%02x at %zu", c, i);
		if (c == '"')
			FAIL("json: unescaped quote at %zu", i);
		if (c != '\\') {
			put(o, &c, 1);
			i++;
			continue;
		}
		if (i + 1 >= n - 1)
			FAIL("json: escape at the end");
		switch (s[i + 1]) {
		case '"': case '\\': case '/': put(o, &s[i + 1], 1); i += 2; break;
		case 'b': put(o, "\b", 1); i += 2; break;
		case 'f': put(o, "\f", 1); i += 2; break;
		case 'n': put(o, "\n", 1); i += 2; break;
		case 'r': put(o, "\r", 1); i += 2; break;
		case 't': put(o, "\t", 1); i += 2; break;
		case 'u': {
			uint32_t v = 0;
			uint8_t u[3];

			if (i + 6 > n - 1)
				FAIL("json: short \\u at %zu", i);
			for (int d = 0; d < 4; d++) {
				int h = hexval((char)s[i + 2 + d]);

				if (h < 0)
					FAIL("json: bad \\u at %zu", i);
				v = v << 4 | (uint32_t)h;
			}
			if (v >= 0xd800 && v <= 0xdfff)
				FAIL("json: \\u surrogate at %zu", i);  /* the writer never needs one */
			if (v < 0x80) {
				u[0] = (uint8_t)v;
				put(o, u, 1);
			} else if (v < 0x800) {
				u[0] = (uint8_t)(0xc0 | v >> 6);
				u[1] = (uint8_t)(0x80 | (v & 0x3f));
				put(o, u, 2);
			} else {
				u[0] = (uint8_t)(0xe0 | v >> 12);
				u[1] = (uint8_t)(0x80 | (v >> 6 & 0x3f));
				u[2] = (uint8_t)(0x80 | (v & 0x3f));
				put(o, u, 3);
			}
			i += 6;
			break;
		}
		default:
			FAIL("json: unknown escape \\%c at %zu", s[i + 1], i);
		}
	}
}

/* want: the input with U+FFFD for what is ill-formed (ref_fix). */
static CHECKER void check_json(const char *s, const struct out *want)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct dl_json j;
	struct out back = { 0 };
	uint32_t cp;
	size_t k;

	if (!f)
		abort();
	dl_json_init(&j, f);
	dl_json_str(&j, s);
	fclose(f);
	if (!ref_valid((const uint8_t *)buf, len))
		FAIL("json: output is not UTF-8");
	for (size_t i = 0; i < len; i += k)
		if (ref_unit((const uint8_t *)buf + i, len - i, &k, &cp) && ref_acts(cp))
			FAIL("json: U+%04X written raw at %zu", cp, i);
	json_read_string(&back, (const uint8_t *)buf, len);
	same("json read back", back.v, back.n, want->v, want->n);
	free(buf);
	free(back.v);
}

/* --- protobuf strings --- */

static CHECKER void check_pb(const char *s, const struct out *want)
{
	struct dl_pb pb;
	uint64_t len = 0;
	size_t at = 1;
	int shift = 0;

	dl_pb_init(&pb);
	dl_pb_str(&pb, 2, s);
	if (pb.err || pb.len < 2 || pb.buf[0] != (2 << 3 | DL_PB_LEN))
		FAIL("pb: no string field");
	do {
		if (at >= pb.len || shift > 63)
			FAIL("pb: bad length");
		len |= (uint64_t)(pb.buf[at] & 0x7f) << shift;
		shift += 7;
	} while (pb.buf[at++] & 0x80);
	if (at + len != pb.len)
		FAIL("pb: length %llu for %zu bytes", (unsigned long long)len, pb.len - at);
	if (!ref_valid(pb.buf + at, (size_t)len))
		FAIL("pb: string is not UTF-8");
	same("pb string", pb.buf + at, (size_t)len, want->v, want->n);
	dl_pb_free(&pb);
}

static CHECKER void check_fix(const char *s, size_t n)
{
	struct dl_sbuf once = { 0 }, twice = { 0 };
	struct out want = { 0 };

	if (dl_utf8_valid(s, n) != ref_valid((const uint8_t *)s, n))
		FAIL("dl_utf8_valid disagrees with the reference");
	dl_utf8_fix(&once, s, n);
	ref_fix(&want, (const uint8_t *)s, n);
	same("fix", once.v, once.n, want.v, want.n);
	dl_utf8_fix(&twice, once.v, once.n);
	same("fix twice", twice.v, twice.n, once.v, once.n);
	dl_sbuf_free(&once);
	dl_sbuf_free(&twice);
	free(want.v);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fail_init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The JSON and protobuf writers take C strings: the input up to its first NUL. */
	size_t n = strnlen((const char *)data, size);
	char *s = malloc(n + 1);
	struct out fixed = { 0 };

	if (!s)
		abort();
	memcpy(s, data, n);
	s[n] = '\0';
	check_text(data, size, 0);
	check_text(data, size, DL_TEXT_KEEP_LINES);
	check_fix((const char *)data, size);
	ref_fix(&fixed, (const uint8_t *)s, n);
	check_json(s, &fixed);
	check_pb(s, &fixed);
	free(fixed.v);
	free(s);
	return 0;
}
