/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A streaming JSON writer: commas, nesting and string escapes handled here. */
#ifndef DLBPF_JSON_H
#define DLBPF_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define DL_JSON_MAX_DEPTH 32

struct dl_json {
	FILE *f;
	int depth;
	bool first[DL_JSON_MAX_DEPTH];
	bool after_key;
};

void dl_json_init(struct dl_json *j, FILE *f);
void dl_json_key(struct dl_json *j, const char *key);
void dl_json_obj_begin(struct dl_json *j);
void dl_json_obj_end(struct dl_json *j);
void dl_json_arr_begin(struct dl_json *j);
void dl_json_arr_end(struct dl_json *j);
void dl_json_str(struct dl_json *j, const char *s);
void dl_json_u64(struct dl_json *j, uint64_t v);
void dl_json_i64(struct dl_json *j, int64_t v);
void dl_json_double(struct dl_json *j, double v);
void dl_json_bool(struct dl_json *j, bool v);
void dl_json_null(struct dl_json *j);
/* v / 1000 with three exact decimals (ns as µs, for trace timestamps) */
void dl_json_milli(struct dl_json *j, uint64_t v);

/* key + value shorthands */
void dl_json_kstr(struct dl_json *j, const char *key, const char *s);
void dl_json_ku64(struct dl_json *j, const char *key, uint64_t v);
void dl_json_ki64(struct dl_json *j, const char *key, int64_t v);
/* key: [v0, v1, ...] */
void dl_json_ku32s(struct dl_json *j, const char *key, const uint32_t *v, int n);

#endif
