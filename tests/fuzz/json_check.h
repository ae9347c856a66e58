/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Whether bytes are one JSON document (RFC 8259 grammar): what a corrupt
 * recording must still give in --json and -o trace.json. Strings are checked
 * for escapes and control bytes; their UTF-8 is fuzz_escape's to check.
 */
#ifndef DLBPF_FUZZ_JSON_CHECK_H
#define DLBPF_FUZZ_JSON_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include "harness.h"

struct jc {
	const char *p, *end;
	const char *why;
};

static CHECKER bool jc_value(struct jc *j, int depth);

static CHECKER void jc_ws(struct jc *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static CHECKER bool jc_fail(struct jc *j, const char *why)
{
	if (!j->why)
		j->why = why;
	return false;
}

static CHECKER bool jc_lit(struct jc *j, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n))
		return jc_fail(j, "not a value");
	j->p += n;
	return true;
}

static CHECKER bool jc_digits(struct jc *j)
{
	const char *s = j->p;

	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > s || jc_fail(j, "a number without digits");
}

static CHECKER bool jc_number(struct jc *j)
{
	if (j->p < j->end && *j->p == '-')
		j->p++;
	if (j->p < j->end && *j->p == '0')
		j->p++;
	else if (!jc_digits(j))
		return false;
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		if (!jc_digits(j))
			return false;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (!jc_digits(j))
			return false;
	}
	return true;
}

static CHECKER bool jc_string(struct jc *j)
{
	j->p++;   /* the opening quote */
	while (j->p < j->end && *j->p != '"') {
		unsigned char c = (unsigned char)*j->p++;

		if (c < 0x20)
			return jc_fail(j, "a control byte inside a string");
		if (c != '\\')
			continue;
		if (j->p >= j->end)
			break;
		c = (unsigned char)*j->p++;
		if (c == 'u') {
			for (int i = 0; i < 4; i++, j->p++)
				if (j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p) || !*j->p)
					return jc_fail(j, "a bad \\u escape");
		} else if (!strchr("\"\\/bfnrt", c) || !c) {
			return jc_fail(j, "a bad escape");
		}
	}
	if (j->p >= j->end)
		return jc_fail(j, "an unterminated string");
	j->p++;
	return true;
}

/* Objects and arrays: members separated by commas, no trailing comma. */
static CHECKER bool jc_container(struct jc *j, int depth, char close)
{
	j->p++;
	jc_ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return true;
	}
	for (;;) {
		jc_ws(j);
		if (close == '}') {
			if (j->p >= j->end || *j->p != '"')
				return jc_fail(j, "an object key that is not a string");
			if (!jc_string(j))
				return false;
			jc_ws(j);
			if (j->p >= j->end || *j->p++ != ':')
				return jc_fail(j, "a key without ':'");
		}
		if (!jc_value(j, depth + 1))
			return false;
		jc_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == close) {
			j->p++;
			return true;
		}
		return jc_fail(j, "a missing ',' or close");
	}
}

static CHECKER bool jc_value(struct jc *j, int depth)
{
	if (depth > 64)
		return jc_fail(j, "nested too deep");
	jc_ws(j);
	if (j->p >= j->end)
		return jc_fail(j, "the document ends early");
	switch (*j->p) {
	case '{': return jc_container(j, depth, '}');
	case '[': return jc_container(j, depth, ']');
	case '"': return jc_string(j);
	case 't': return jc_lit(j, "true");
	case 'f': return jc_lit(j, "false");
	case 'n': return jc_lit(j, "null");
	default: return jc_number(j);
	}
}

/* NULL if buf[0..n) is one JSON document, else what is wrong; *at: where. */
static inline CHECKER const char *json_check(const char *buf, size_t n, size_t *at)
{
	struct jc j = { buf, buf + n, NULL };

	if (jc_value(&j, 0)) {
		jc_ws(&j);
		if (j.p != j.end)
			jc_fail(&j, "bytes after the document");
	}
	*at = (size_t)(j.p - buf);
	return j.why;
}

#endif
