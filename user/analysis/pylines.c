// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/pylines.h"

static uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001b3ull;
}

static uint64_t key_of(const struct dl_pystack_ev *e, const struct dl_pynamed *named)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = mix(h, e->h.tgid);
	h = mix(h, e->h.tid);
	h = mix(h, e->why);
	for (uint32_t k = 0; k < named->n; k++) {
		h = mix(h, dl_hash_bytes(named->file[k], strlen(named->file[k])));
		h = mix(h, dl_hash_bytes(named->func[k], strlen(named->func[k])));
		h = mix(h, (uint32_t)named->line[k]);
	}
	return h;
}

static bool same(const struct dl_pystack_stat *s, const struct dl_pystack_ev *e, const struct dl_pynamed *named)
{
	if (s->tgid != e->h.tgid || s->tid != e->h.tid || s->why != e->why || s->n != named->n)
		return false;
	for (uint32_t k = 0; k < named->n; k++)
		if (s->f[k].line != named->line[k] || strcmp(s->f[k].file, named->file[k]) ||
		    strcmp(s->f[k].func, named->func[k]))
			return false;
	return true;
}

/* The stack's entry: found by its key, the next key on a collision of different stacks. */
static uint32_t stack_of(struct dl_pylines *p, const struct dl_pystack_ev *e, const struct dl_pynamed *named)
{
	uint64_t key = key_of(e, named), i;
	struct dl_pystack_stat *s;

	while (dl_u64map_get(&p->of, key, &i)) {
		if (same(&p->stacks.v[i], e, named))
			return (uint32_t)i;
		key++;
	}
	dl_u64map_put(&p->of, key, p->stacks.n);
	s = dl_vec_push(&p->stacks);
	memset(s, 0, sizeof(*s));
	s->tgid = e->h.tgid;
	s->tid = e->h.tid;
	s->why = e->why;
	s->n = named->n;
	s->partial = named->n < e->py.n || e->py.status == DL_PY_TRUNCATED || e->py.status == DL_PY_FAULT;
	for (uint32_t k = 0; k < named->n; k++) {
		s->f[k].file = dl_xstrdup(named->file[k]);
		s->f[k].func = dl_xstrdup(named->func[k]);
		s->f[k].line = named->line[k];
	}
	return (uint32_t)(p->stacks.n - 1);
}

void dl_pylines_add(struct dl_pylines *p, const struct dl_pystack_ev *e, const struct dl_pynamed *named)
{
	struct dl_pystack_stat *s;
	uint32_t i;

	if (e->why != DL_PYSTACK_CPU && e->why != DL_PYSTACK_WAIT)
		return;   /* a kind newer than this build */
	i = stack_of(p, e, named);
	s = &p->stacks.v[i];
	if (e->why == DL_PYSTACK_CPU) {
		s->samples++;
		p->samples++;
	} else {
		s->waits++;
		s->wait_ns += e->wait_ns;
		p->waits_n++;
	}
	if (p->events.n >= DL_PYLINES_EVENTS_MAX) {
		size_t half = p->events.n / 2;

		p->kept_from = p->events.v[half - 1].end;
		p->forgotten += half;
		memmove(p->events.v, p->events.v + half, (p->events.n - half) * sizeof(*p->events.v));
		p->events.n -= half;
	}
	*dl_vec_push(&p->events) = (struct dl_pyevent){
		.tid = e->h.tid, .start = e->h.ts - (e->wait_ns < e->h.ts ? e->wait_ns : e->h.ts), .end = e->h.ts,
		.stack = i,
	};
}

void dl_pylines_free(struct dl_pylines *p)
{
	for (size_t i = 0; i < p->stacks.n; i++)
		for (uint32_t k = 0; k < p->stacks.v[i].n; k++) {
			free(p->stacks.v[i].f[k].file);
			free(p->stacks.v[i].f[k].func);
		}
	dl_vec_free(&p->stacks);
	dl_vec_free(&p->events);
	free(p->wait_index);
	dl_u64map_free(&p->of);
	memset(p, 0, sizeof(*p));
}

static int by_tid_start(const void *a, const void *b)
{
	const struct dl_pywait_key *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* The waits sorted by thread and start; a cache of the events, so built on a const store. */
static void wait_index(const struct dl_pylines *cp)
{
	struct dl_pylines *p = (struct dl_pylines *)cp;
	size_t n = 0;

	if (p->wait_index && p->wait_index_of == p->events.n + p->forgotten)
		return;
	free(p->wait_index);
	p->wait_index = dl_xcalloc(p->events.n ? p->events.n : 1, sizeof(*p->wait_index));
	for (size_t i = 0; i < p->events.n; i++)
		if (p->events.v[i].end > p->events.v[i].start)
			p->wait_index[n++] = (struct dl_pywait_key){ p->events.v[i].tid, p->events.v[i].start, i };
	qsort(p->wait_index, n, sizeof(*p->wait_index), by_tid_start);
	p->wait_index_n = n;
	p->wait_index_of = p->events.n + p->forgotten;
}

const struct dl_pystack_stat *dl_pylines_wait_in(const struct dl_pylines *p, uint32_t tid, uint64_t start,
						 uint64_t end)
{
	const struct dl_pyevent *best = NULL;
	uint64_t best_ns = 0;
	size_t lo = 0, hi;

	wait_index(p);
	/* The first of tid's waits that starts at start or later: one thread is blocked in one wait at a time, */
	hi = p->wait_index_n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct dl_pywait_key *k = &p->wait_index[mid];

		if (k->tid < tid || (k->tid == tid && k->start < start))
			lo = mid + 1;
		else
			hi = mid;
	}
	/* so only the one before it can reach into [start, end); the rest start inside it. */
	if (lo && p->wait_index[lo - 1].tid == tid)
		lo--;
	for (size_t i = lo; i < p->wait_index_n && p->wait_index[i].tid == tid && p->wait_index[i].start < end; i++) {
		const struct dl_pyevent *w = &p->events.v[p->wait_index[i].event];
		uint64_t a = w->start > start ? w->start : start, b = w->end < end ? w->end : end;

		if (b > a && b - a > best_ns) {
			best = w;
			best_ns = b - a;
		}
	}
	return best ? &p->stacks.v[best->stack] : NULL;
}

/* An event's weight inside [from, to): a sample 1, a wait the ns of it inside. */
static uint64_t weight_in(const struct dl_pyevent *e, uint64_t from, uint64_t to)
{
	/* Callers' windows are clipped to what is kept (dl_pylines_from). */
	uint64_t lo = e->start > from ? e->start : from, hi = e->end < to ? e->end : to;

	if (e->start == e->end)
		return e->start >= from && e->start < to;
	return hi > lo ? hi - lo : 0;
}

/* Inserts (i, w) into the max heaviest kept in idx/weight, most first; returns how many are kept. */
static size_t keep_top(size_t *idx, uint64_t *weight, size_t n, size_t max, size_t i, uint64_t w)
{
	size_t at;

	for (at = n; at > 0 && weight[at - 1] < w; at--)
		if (at < max) {
			idx[at] = idx[at - 1];
			weight[at] = weight[at - 1];
		}
	if (at < max) {
		idx[at] = i;
		weight[at] = w;
		if (n < max)
			n++;
	}
	return n;
}

size_t dl_pylines_top(const struct dl_pylines *p, uint32_t tid, uint32_t why, uint64_t from, uint64_t to,
		      size_t *idx, uint64_t *weight, size_t max, uint64_t *total)
{
	uint64_t *w = dl_xcalloc(p->stacks.n ? p->stacks.n : 1, sizeof(*w));
	size_t n = 0;

	*total = 0;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct dl_pyevent *e = &p->events.v[i];

		if (e->tid == tid && p->stacks.v[e->stack].why == why)
			w[e->stack] += weight_in(e, from, to);
	}
	for (size_t i = 0; i < p->stacks.n; i++) {
		*total += w[i];
		/* A stack no frame of which was named counts in the total only. */
		if (w[i] && p->stacks.v[i].n)
			n = keep_top(idx, weight, n, max, i, w[i]);
	}
	free(w);
	return n;
}

static bool library_file(const char *f)
{
	return !strncmp(f, "<frozen ", 8) || strstr(f, "/site-packages/") || strstr(f, "/dist-packages/") ||
	       strstr(f, "/lib/python3");
}

int dl_pyframe_text(const struct dl_pystack_stat *s, uint32_t k, char *buf, size_t len)
{
	const char *base = strrchr(s->f[k].file, '/');

	return snprintf(buf, len, "%s:%d (%s)", base ? base + 1 : s->f[k].file, s->f[k].line, s->f[k].func);
}

uint32_t dl_pystack_own_frame(const struct dl_pystack_stat *s)
{
	for (uint32_t k = 0; k < s->n; k++)
		if (!library_file(s->f[k].file))
			return k;
	return 0;
}

static bool same_line(const struct dl_pyframe_name *a, const struct dl_pyframe_name *b)
{
	return a->line == b->line && !strcmp(a->file, b->file) && !strcmp(a->func, b->func);
}

uint64_t dl_pylines_line_weight(const struct dl_pylines *p, const struct dl_pystack_stat *s, uint64_t from,
				uint64_t to)
{
	const struct dl_pyframe_name *own;
	uint64_t sum = 0;

	if (!s->n)
		return 0;
	own = &s->f[dl_pystack_own_frame(s)];
	for (size_t i = 0; i < p->events.n; i++) {
		const struct dl_pyevent *e = &p->events.v[i];
		const struct dl_pystack_stat *o = &p->stacks.v[e->stack];

		if (e->tid == s->tid && o->why == s->why && o->n && same_line(&o->f[dl_pystack_own_frame(o)], own))
			sum += weight_in(e, from, to);
	}
	return sum;
}

size_t dl_pylines_top_others(const struct dl_pylines *p, uint32_t skip_tid, uint32_t why, uint64_t from, uint64_t to,
			     size_t *idx, uint64_t *weight, size_t max, uint64_t *total)
{
	/* Per stack: the first stack of its own line (itself when it is the first), and the line's weight there. */
	size_t *line_of = dl_xcalloc(p->stacks.n ? p->stacks.n : 1, sizeof(*line_of));
	uint64_t *w = dl_xcalloc(p->stacks.n ? p->stacks.n : 1, sizeof(*w));
	size_t n = 0;

	struct dl_u64map first = { 0 };   /* hash of (kind, own line) -> its first stack */

	for (size_t i = 0; i < p->stacks.n; i++) {
		const struct dl_pystack_stat *s = &p->stacks.v[i];
		const struct dl_pyframe_name *own;
		uint64_t key, k;

		line_of[i] = i;
		if (!s->n)
			continue;
		own = &s->f[dl_pystack_own_frame(s)];
		key = mix(mix(mix(dl_hash_bytes(own->file, strlen(own->file)), dl_hash_bytes(own->func, strlen(own->func))),
			      (uint32_t)own->line), s->why);
		/* Another line or kind on the same key: the next key. */
		while (dl_u64map_get(&first, key, &k) && (p->stacks.v[k].why != s->why ||
		       !same_line(&p->stacks.v[k].f[dl_pystack_own_frame(&p->stacks.v[k])], own)))
			key++;
		if (dl_u64map_get(&first, key, &k))
			line_of[i] = k;
		else
			dl_u64map_put(&first, key, i);
	}
	*total = 0;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct dl_pyevent *e = &p->events.v[i];
		uint64_t x;

		if (e->tid == skip_tid || p->stacks.v[e->stack].why != why)
			continue;
		x = weight_in(e, from, to);
		*total += x;
		if (p->stacks.v[e->stack].n)
			w[line_of[e->stack]] += x;
	}
	for (size_t i = 0; i < p->stacks.n; i++)
		if (w[i])
			n = keep_top(idx, weight, n, max, i, w[i]);
	dl_u64map_free(&first);
	free(line_of);
	free(w);
	return n;
}

uint64_t dl_pylines_from(const struct dl_pylines *p, uint64_t from)
{
	return from > p->kept_from ? from : p->kept_from;
}
