// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdarg.h>
#include <stdio.h>
#include "strsafe.h"
#include "util.h"

size_t dl_utf8_next(const char *str, size_t n, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char b = s[0], lo = 0x80, hi = 0xbf;
	size_t need;
	uint32_t c;

	if (b < 0x80) {
		*cp = b;
		return 1;
	}
	/* The second byte's range is what rules out overlong forms, surrogates and > U+10FFFF. */
	if (b >= 0xc2 && b <= 0xdf) {
		need = 1;
		c = b & 0x1f;
	} else if (b >= 0xe0 && b <= 0xef) {
		need = 2;
		c = b & 0x0f;
		if (b == 0xe0)
			lo = 0xa0;
		else if (b == 0xed)
			hi = 0x9f;
	} else if (b >= 0xf0 && b <= 0xf4) {
		need = 3;
		c = b & 0x07;
		if (b == 0xf0)
			lo = 0x90;
		else if (b == 0xf4)
			hi = 0x8f;
	} else {
		*cp = DL_UTF8_BAD;   /* a continuation byte, C0/C1 (overlong) or F5-FF */
		return 1;
	}
	for (size_t i = 1; i <= need; i++) {
		if (i >= n || s[i] < lo || s[i] > hi) {
			*cp = DL_UTF8_BAD;
			return i;
		}
		c = c << 6 | (s[i] & 0x3f);
		lo = 0x80;
		hi = 0xbf;
	}
	*cp = c;
	return need + 1;
}

bool dl_utf8_valid(const char *s, size_t n)
{
	uint32_t cp;

	for (size_t i = 0; i < n;) {
		if (!((unsigned char)s[i] & 0x80)) {
			i++;
			continue;
		}
		i += dl_utf8_next(s + i, n - i, &cp);
		if (cp == DL_UTF8_BAD)
			return false;
	}
	return true;
}

void dl_sbuf_free(struct dl_sbuf *b)
{
	free(b->v);
	*b = (struct dl_sbuf){ 0 };
}

void dl_sbuf_put(struct dl_sbuf *b, const void *p, size_t k)
{
	dl_grow((void **)&b->v, &b->cap, b->n + k + 1, 1);
	memcpy(b->v + b->n, p, k);
	b->n += k;
	b->v[b->n] = '\0';
}

void dl_sbuf_printf(struct dl_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (k <= 0)
		return;
	dl_grow((void **)&b->v, &b->cap, b->n + (size_t)k + 1, 1);
	va_start(ap, fmt);
	vsnprintf(b->v + b->n, (size_t)k + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)k;
}

void dl_utf8_fix(struct dl_sbuf *b, const char *s, size_t n)
{
	uint32_t cp;

	dl_sbuf_put(b, "", 0);
	for (size_t i = 0, k; i < n; i += k) {
		k = dl_utf8_next(s + i, n - i, &cp);
		if (cp == DL_UTF8_BAD)
			dl_sbuf_put(b, DL_UTF8_REPLACEMENT, 3);
		else
			dl_sbuf_put(b, s + i, k);
	}
}

bool dl_cp_acts(uint32_t cp)
{
	/*
	 * Bidirectional formatting reorders what the terminal shows (text that
	 * reads one way and is another); separators break lines in some
	 * terminals and viewers. Both are "printable", so they are named here.
	 */
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
	       (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

static bool text_keeps(uint32_t cp, unsigned flags)
{
	if (cp == DL_UTF8_BAD)
		return false;
	if ((flags & DL_TEXT_KEEP_LINES) && (cp == '\n' || cp == '\t'))
		return true;
	return !dl_cp_acts(cp);
}

void dl_text_escape(struct dl_sbuf *b, const char *s, size_t n, unsigned flags)
{
	static const char hex[] = "0123456789abcdef";
	uint32_t cp;

	dl_sbuf_put(b, "", 0);
	for (size_t i = 0, k; i < n; i += k) {
		size_t run = i;

		/* Plain printable ASCII, the usual case, goes in one piece. */
		while (run < n && (unsigned char)s[run] >= 0x20 && (unsigned char)s[run] < 0x7f)
			run++;
		if (run > i) {
			dl_sbuf_put(b, s + i, run - i);
			k = run - i;
			continue;
		}
		k = dl_utf8_next(s + i, n - i, &cp);
		if (text_keeps(cp, flags)) {
			dl_sbuf_put(b, s + i, k);
			continue;
		}
		for (size_t j = 0; j < k; j++) {
			unsigned char c = (unsigned char)s[i + j];
			char e[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };

			dl_sbuf_put(b, e, sizeof(e));
		}
	}
}

const char *dl_text(struct dl_sbuf *b, const char *s)
{
	b->n = 0;
	if (!s)
		s = "";
	dl_text_escape(b, s, strlen(s), 0);
	return b->v;
}
