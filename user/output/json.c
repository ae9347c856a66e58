// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include "output/json.h"
#include "strsafe.h"

void dl_json_init(struct dl_json *j, FILE *f)
{
	j->f = f;
	j->depth = 0;
	j->first[0] = true;
	j->after_key = false;
}

/* Separator before a value or key at the current level. */
static void sep(struct dl_json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (!j->first[j->depth])
		fputc(',', j->f);
	j->first[j->depth] = false;
}

/*
 * Strings come from the traced side as bytes: the file stays valid UTF-8 (an
 * ill-formed sequence becomes U+FFFD) and what a terminal would act on
 * (dl_cp_acts: controls, C1 included, bidirectional overrides) is \uXXXX, the
 * same string to a JSON reader, so that printing the file obeys none of it.
 */
static void put_escaped(FILE *f, const char *s)
{
	size_t n = strlen(s);
	uint32_t cp;

	fputc('"', f);
	for (size_t i = 0, k; i < n; i += k) {
		size_t run = i;

		while (run < n && (unsigned char)s[run] >= 0x20 && (unsigned char)s[run] < 0x7f && s[run] != '"' &&
		       s[run] != '\\')
			run++;
		if (run > i) {
			fwrite(s + i, 1, run - i, f);
			k = run - i;
			continue;
		}
		k = dl_utf8_next(s + i, n - i, &cp);
		switch (cp) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		case DL_UTF8_BAD: fputs(DL_UTF8_REPLACEMENT, f); break;
		default:
			if (dl_cp_acts(cp))
				fprintf(f, "\\u%04x", (unsigned)cp);
			else
				fwrite(s + i, 1, k, f);
		}
	}
	fputc('"', f);
}

void dl_json_key(struct dl_json *j, const char *key)
{
	sep(j);
	put_escaped(j->f, key);
	fputc(':', j->f);
	j->after_key = true;
}

static void open_level(struct dl_json *j, char c)
{
	sep(j);
	fputc(c, j->f);
	if (j->depth < DL_JSON_MAX_DEPTH - 1)
		j->depth++;
	j->first[j->depth] = true;
}

static void close_level(struct dl_json *j, char c)
{
	if (j->depth > 0)
		j->depth--;
	fputc(c, j->f);
}

void dl_json_obj_begin(struct dl_json *j) { open_level(j, '{'); }
void dl_json_obj_end(struct dl_json *j) { close_level(j, '}'); }
void dl_json_arr_begin(struct dl_json *j) { open_level(j, '['); }
void dl_json_arr_end(struct dl_json *j) { close_level(j, ']'); }

void dl_json_str(struct dl_json *j, const char *s)
{
	sep(j);
	put_escaped(j->f, s ? s : "");
}

void dl_json_u64(struct dl_json *j, uint64_t v)
{
	sep(j);
	fprintf(j->f, "%" PRIu64, v);
}

void dl_json_i64(struct dl_json *j, int64_t v)
{
	sep(j);
	fprintf(j->f, "%" PRId64, v);
}

void dl_json_double(struct dl_json *j, double v)
{
	sep(j);
	/* JSON has no NaN or infinity. */
	if (isfinite(v))
		fprintf(j->f, "%.6g", v);
	else
		fputs("null", j->f);
}

void dl_json_null(struct dl_json *j)
{
	sep(j);
	fputs("null", j->f);
}

void dl_json_milli(struct dl_json *j, uint64_t v)
{
	sep(j);
	fprintf(j->f, "%" PRIu64 ".%03" PRIu64, v / 1000, v % 1000);
}

void dl_json_bool(struct dl_json *j, bool v)
{
	sep(j);
	fputs(v ? "true" : "false", j->f);
}

void dl_json_kstr(struct dl_json *j, const char *key, const char *s)
{
	dl_json_key(j, key);
	dl_json_str(j, s);
}

void dl_json_ku64(struct dl_json *j, const char *key, uint64_t v)
{
	dl_json_key(j, key);
	dl_json_u64(j, v);
}

void dl_json_ki64(struct dl_json *j, const char *key, int64_t v)
{
	dl_json_key(j, key);
	dl_json_i64(j, v);
}

void dl_json_ku32s(struct dl_json *j, const char *key, const uint32_t *v, int n)
{
	dl_json_key(j, key);
	dl_json_arr_begin(j);
	for (int i = 0; i < n; i++)
		dl_json_u64(j, v[i]);
	dl_json_arr_end(j);
}
