/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Text the traced side controls, made safe for what dlbpf writes. A process
 * sets its own name (prctl(PR_SET_NAME), any 15 bytes), its binaries name its
 * kernels and its files have the paths it chose: none of it is known to be
 * UTF-8, and a terminal obeys what it prints (ESC[2J, OSC titles, CR/LF that
 * forge lines).
 *
 * Decoding follows the Unicode standard's well-formed UTF-8 (Table 3-7):
 * no overlong forms, no surrogates (U+D800-DFFF), nothing past U+10FFFF. An
 * ill-formed sequence is consumed as its maximal subpart, the Standard's
 * recommended practice: the same units Python's bytes.decode("utf-8",
 * "replace") turns into one U+FFFD each, so the tests can check us against it.
 */
#ifndef DLBPF_STRSAFE_H
#define DLBPF_STRSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DL_UTF8_BAD UINT32_MAX
#define DL_UTF8_REPLACEMENT "\xef\xbf\xbd"   /* U+FFFD */

/*
 * Decodes the sequence at s[0..n), n >= 1: returns how many bytes it takes and
 * sets *cp to its code point, or to DL_UTF8_BAD for an ill-formed one (then
 * the bytes returned, 1 to 3, are its maximal subpart).
 */
size_t dl_utf8_next(const char *s, size_t n, uint32_t *cp);
bool dl_utf8_valid(const char *s, size_t n);

/*
 * A code point a terminal acts on or hides rather than shows: C0, DEL, the C1
 * controls U+0080-009F, the bidirectional overrides and isolates, the line
 * and paragraph separators. (BMP only, so one \uXXXX names each.)
 */
bool dl_cp_acts(uint32_t cp);

/* A growable byte string, kept NUL-terminated (n excludes the NUL); zero-initialised is empty. */
struct dl_sbuf {
	char *v;
	size_t n, cap;
};

void dl_sbuf_free(struct dl_sbuf *b);
/* Appends p[0..k) / formatted text, as they are. */
void dl_sbuf_put(struct dl_sbuf *b, const void *p, size_t k);
void dl_sbuf_printf(struct dl_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends s[0..n) as valid UTF-8: each ill-formed sequence becomes U+FFFD. */
void dl_utf8_fix(struct dl_sbuf *b, const char *s, size_t n);

/*
 * Appends s[0..n) as text a terminal only displays: printable ASCII and
 * well-formed UTF-8 as they are; each byte of a code point that acts
 * (dl_cp_acts) and of an ill-formed sequence as "\xHH".
 * The output escapes to itself (a backslash stays a backslash), so escaping
 * twice changes nothing.
 */
enum { DL_TEXT_KEEP_LINES = 1 };   /* keep \n and \t: a library's multi-line message */
void dl_text_escape(struct dl_sbuf *b, const char *s, size_t n, unsigned flags);

/* Empties b and returns s (NUL-terminated; NULL reads as "") escaped into it, for a printf %s. */
const char *dl_text(struct dl_sbuf *b, const char *s);

#endif
