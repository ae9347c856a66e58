// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/callsites.h"
#include "dlbpf/copy.h"

/* A frame's name, or its address when no site record named it (buf holds it then). */
static const char *frame_func(const struct dl_call *c, uint32_t k, char *buf, size_t len)
{
	uint64_t addr;

	if (k == 0 && c->site_func)
		return c->site_func;
	if (k > 0 && c->stack_func[k])
		return c->stack_func[k];
	if (k == 0) {
		addr = c->site;
	} else {
		memcpy(&addr, &c->stack[k], sizeof(addr));   /* the record may sit at any offset */
	}
	snprintf(buf, len, "0x%" PRIx64, addr);
	return buf;
}

static const char *frame_obj(const struct dl_call *c, uint32_t k)
{
	const char *obj = k == 0 ? c->site_obj : c->stack_obj[k];

	return obj ? obj : "";
}

/* Python frames name a site when the innermost is named: by file, function and line. */
static bool python_site(const struct dl_call *c)
{
	return c->has_py && c->npy_named > 0;
}

static uint64_t python_key(const struct dl_call *c)
{
	uint64_t key = 0x7079;   /* apart from native keys of the same strings */

	for (uint32_t k = 0; k < c->npy_named; k++) {
		const char *f = c->py_file[k], *fn = c->py_func[k];
		int32_t line = c->py_line[k];

		key = (key ^ dl_hash_bytes(f, strlen(f))) * 0x9e3779b97f4a7c15ull ^ dl_hash_bytes(fn, strlen(fn));
		key = (key ^ dl_hash_bytes(&line, sizeof(line))) * 0x9e3779b97f4a7c15ull;
	}
	return key;
}

uint64_t dl_site_key(const struct dl_call *c)
{
	uint32_t n = c->nstack > 1 ? c->nstack : 1;
	uint64_t key = 0;
	char addr[32];

	if (python_site(c)) {
		key = python_key(c);
		return key == DL_SITE_NONE || key == DL_SITE_UNKNOWN ? key ^ 1 : key;
	}
	if (c->site_fault)
		return DL_SITE_UNKNOWN;
	if (!c->site)
		return DL_SITE_NONE;
	/* By what each frame names, not where: a site keeps one entry across a reload at another address. */
	for (uint32_t k = 0; k < n; k++) {
		const char *f = frame_func(c, k, addr, sizeof(addr)), *o = frame_obj(c, k);

		key = (key ^ dl_hash_bytes(f, strlen(f))) * 0x9e3779b97f4a7c15ull ^ dl_hash_bytes(o, strlen(o));
	}
	/* The two reserved keys are not sites'. */
	return key == DL_SITE_NONE || key == DL_SITE_UNKNOWN ? key ^ 1 : key;
}

const struct dl_site_stat *dl_sites_find(const struct dl_sites *s, uint64_t key)
{
	uint64_t i;

	return dl_u64map_get(&s->of, key, &i) ? &s->v.v[i] : NULL;
}

static struct dl_site_stat *site_of(struct dl_sites *s, uint64_t key, const struct dl_call *c)
{
	struct dl_site_stat *st = (struct dl_site_stat *)dl_sites_find(s, key);
	char addr[32];

	if (st)
		return st;
	dl_u64map_put(&s->of, key, s->v.n);
	st = dl_vec_push(&s->v);
	memset(st, 0, sizeof(*st));
	st->key = key;
	if (key == DL_SITE_UNKNOWN)
		return st;
	if (python_site(c)) {
		st->python = true;
		st->func = dl_xstrdup(c->py_func[0]);
		st->obj = dl_xstrdup(c->py_file[0]);
		st->line = c->py_line[0];
		st->ncallers = c->npy_named - 1;
		st->callers = st->ncallers ? dl_xcalloc(st->ncallers, sizeof(*st->callers)) : NULL;
		for (uint32_t k = 1; k < c->npy_named; k++)
			st->callers[k - 1] = (struct dl_site_frame){ dl_xstrdup(c->py_func[k]), dl_xstrdup(c->py_file[k]),
								     c->py_line[k] };
		return st;
	}
	st->func = dl_xstrdup(frame_func(c, 0, addr, sizeof(addr)));
	st->obj = dl_xstrdup(frame_obj(c, 0));
	if (c->nstack > 1) {
		st->ncallers = c->nstack - 1;
		st->callers = dl_xcalloc(st->ncallers, sizeof(*st->callers));
		for (uint32_t k = 1; k < c->nstack; k++) {
			st->callers[k - 1].func = dl_xstrdup(frame_func(c, k, addr, sizeof(addr)));
			st->callers[k - 1].obj = dl_xstrdup(frame_obj(c, k));
		}
	}
	return st;
}

void dl_sites_count(struct dl_sites *s, const struct dl_call *c, uint64_t key)
{
	struct dl_site_stat *st;

	if (key == DL_SITE_NONE)
		return;
	st = site_of(s, key, c);
	st->calls++;
	st->total_ns += c->dur_ns;
	if (c->api->cls == DL_CLS_COPY) {
		st->copies++;
		st->small_copies += c->bytes < DL_SMALL_COPY_BYTES;
		st->sync_copies += !c->async;
		st->sync_h2d_large += !c->async && c->dir == DL_DIR_H2D && c->bytes > DL_SMALL_COPY_BYTES;
	}
}

void dl_sites_add_cat(struct dl_sites *s, uint64_t key, enum dl_cat cat, uint64_t ns)
{
	uint64_t i;

	if (cat < DL_CAT_COUNT && dl_u64map_get(&s->of, key, &i))
		s->v.v[i].cat_ns[cat] += ns;
}

void dl_sites_free(struct dl_sites *s)
{
	for (size_t i = 0; i < s->v.n; i++) {
		struct dl_site_stat *st = &s->v.v[i];

		for (uint32_t k = 0; k < st->ncallers; k++) {
			free(st->callers[k].func);
			free(st->callers[k].obj);
		}
		free(st->callers);
		free(st->func);
		free(st->obj);
	}
	dl_vec_free(&s->v);
	dl_u64map_free(&s->of);
}

static uint64_t time_in(const struct dl_site_stat *st, enum dl_cat cat)
{
	return cat < DL_CAT_COUNT ? st->cat_ns[cat] : st->total_ns;
}

size_t dl_sites_top(const struct dl_sites *s, enum dl_cat cat, size_t *idx, size_t max)
{
	size_t n = 0;

	/* Insertion into a short sorted list: max is a handful, the sites of a process a few hundred. */
	for (size_t i = 0; i < s->v.n; i++) {
		uint64_t t = time_in(&s->v.v[i], cat);
		size_t k;

		if (!t)
			continue;
		for (k = n; k > 0 && time_in(&s->v.v[idx[k - 1]], cat) < t; k--)
			if (k < max)
				idx[k] = idx[k - 1];
		if (k < max) {
			idx[k] = i;
			if (n < max)
				n++;
		}
	}
	return n;
}

void dl_site_label(const char *func, const char *obj, char *buf, size_t len)
{
	const char *base;

	if (!func) {
		snprintf(buf, len, "unknown (return address unreadable)");
		return;
	}
	base = obj ? strrchr(obj, '/') : NULL;
	base = base ? base + 1 : obj ? obj : "";
	if (*base)
		snprintf(buf, len, "%s (%s)", func, base);
	else
		snprintf(buf, len, "%s", func);
}

void dl_py_frame_label(const char *file, const char *func, int32_t line, char *buf, size_t len)
{
	const char *base = strrchr(file, '/');

	base = base ? base + 1 : file;
	if (line > 0)
		snprintf(buf, len, "%s:%d %s", base, (int)line, func);
	else
		snprintf(buf, len, "%s:? %s", base, func);
}

void dl_site_stat_label(const struct dl_site_stat *st, char *buf, size_t len)
{
	size_t n;

	if (st && st->python) {
		dl_py_frame_label(st->obj, st->func, st->line, buf, len);
		n = strlen(buf);
		if (st->ncallers && n + 4 < len) {
			memcpy(buf + n, " <- ", 5);
			dl_py_frame_label(st->callers[0].obj, st->callers[0].func, st->callers[0].line, buf + n + 4,
					  len - n - 4);
		}
		return;
	}
	dl_site_label(st ? st->func : NULL, st ? st->obj : NULL, buf, len);
	n = strlen(buf);
	if (st && st->ncallers && n + 4 < len) {
		memcpy(buf + n, " <- ", 5);
		dl_site_label(st->callers[0].func, st->callers[0].obj, buf + n + 4, len - n - 4);
	}
}

void dl_step_sites_add(struct dl_step_sites *t, uint64_t key, enum dl_cat cat, uint64_t ns, uint32_t calls)
{
	struct dl_step_site *ss;
	uint64_t i;

	if (key == DL_SITE_NONE || cat >= DL_CAT_COUNT)
		return;
	if (dl_u64map_get(&t->of, key, &i)) {
		ss = &t->v.v[i];
	} else {
		dl_u64map_put(&t->of, key, t->v.n);
		ss = dl_vec_push(&t->v);
		memset(ss, 0, sizeof(*ss));
		ss->key = key;
	}
	ss->calls += calls;
	ss->cat_ns[cat] += ns;
	ss->ns += ns;
}

void dl_step_sites_take(struct dl_step_sites *t, struct dl_step *st)
{
	st->nsites = 0;
	for (size_t i = 0; i < t->v.n; i++) {
		const struct dl_step_site *ss = &t->v.v[i];
		uint32_t k;

		if (!ss->ns && !ss->calls)
			continue;
		for (k = st->nsites; k > 0 && st->top_sites[k - 1].ns < ss->ns; k--)
			if (k < DL_STEP_TOP_SITES)
				st->top_sites[k] = st->top_sites[k - 1];
		if (k < DL_STEP_TOP_SITES) {
			st->top_sites[k] = *ss;
			if (st->nsites < DL_STEP_TOP_SITES)
				st->nsites++;
		}
	}
	dl_vec_free(&t->v);
	dl_u64map_free(&t->of);
}
