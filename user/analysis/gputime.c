// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/gputime.h"
#include "dlbpf/events.h"
#include "util.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_time(const void *a, const void *b)
{
	const struct dl_gpu_span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* Each track's pieces together (the idle ones, then each stream's), in time order. */
static int cmp_track(const void *a, const void *b)
{
	const struct dl_gpu_span *x = a, *y = b;
	bool xi = x->kind == DL_GS_IDLE, yi = y->kind == DL_GS_IDLE;

	if (xi != yi)
		return xi ? -1 : 1;
	if (x->stream != y->stream)
		return x->stream < y->stream ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* A sorted union of a copy of the spans; only_blocked: of the scheduler states blocked (S, D) only. */
static size_t union_of(const struct dl_span *v, size_t n, bool only_blocked, struct dl_span **out)
{
	struct dl_span *u = dl_xcalloc(n + 1, sizeof(*u));
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (!only_blocked || v[i].kind == DL_ST_SLEEP || v[i].kind == DL_ST_DISK)
			u[k++] = v[i];
	*out = u;
	return dl_spans_union(u, k);
}

/* Whether the elementary interval starting at x (no boundary of u inside it) lies in the union u. */
static bool covers(const struct dl_span *u, size_t n, uint64_t x)
{
	size_t i = dl_spans_first_after(u, n, x);

	return i < n && u[i].start <= x;
}

static void push(struct dl_gpu_span **v, size_t *n, size_t *cap, struct dl_gpu_span s)
{
	dl_grow((void **)v, cap, *n + 1, sizeof(**v));
	(*v)[(*n)++] = s;
}

/* Pieces of one track that touch and say the same become one slice (left by track, not by time). */
static size_t merge(struct dl_gpu_span *v, size_t n)
{
	size_t w = 0;

	qsort(v, n, sizeof(*v), cmp_track);
	for (size_t i = 0; i < n; i++) {
		struct dl_gpu_span *last = w ? &v[w - 1] : NULL;
		bool same_track = last && (last->kind == DL_GS_IDLE) == (v[i].kind == DL_GS_IDLE) &&
				  last->stream == v[i].stream;

		if (same_track && last->end == v[i].start && last->kind == v[i].kind && last->idle == v[i].idle)
			last->end = v[i].end;
		else
			v[w++] = v[i];
	}
	return w;
}

size_t dl_gpu_timeline(const struct dl_gpu_input *in, uint64_t idle[DL_IDLE_COUNT], struct dl_gpu_span **out)
{
	struct dl_span *busy, *blocking, *cuda, *blocked;
	size_t nbusy = union_of(in->streams, in->nstreams, false, &busy);
	size_t nblocking = union_of(in->blocking, in->nblocking, false, &blocking);
	size_t ncuda = union_of(in->cuda, in->ncuda, false, &cuda);
	size_t nblocked = union_of(in->sched, in->nsched, true, &blocked);
	size_t ncut = 0, nout = 0, cap = 0, ngroups = 0;
	size_t total = 2 * (2 * in->nstreams + in->nlower + in->nblocking + in->ncuda + in->nsched) + 2;
	uint64_t *cut = dl_xcalloc(total, sizeof(*cut));
	size_t *group = dl_xcalloc(in->nstreams + 1, sizeof(*group));   /* first span of each stream */
	struct dl_gpu_span *v = NULL;
	const struct dl_span *sets[] = { busy, in->lower, blocking, cuda, blocked, in->streams };
	size_t counts[] = { nbusy, in->nlower, nblocking, ncuda, nblocked, in->nstreams };

	memset(idle, 0, DL_IDLE_COUNT * sizeof(*idle));
	cut[ncut++] = in->start;
	cut[ncut++] = in->end;
	for (size_t s = 0; s < sizeof(counts) / sizeof(counts[0]); s++)
		for (size_t i = 0; i < counts[s]; i++) {
			if (sets[s][i].start > in->start && sets[s][i].start < in->end)
				cut[ncut++] = sets[s][i].start;
			if (sets[s][i].end > in->start && sets[s][i].end < in->end)
				cut[ncut++] = sets[s][i].end;
		}
	qsort(cut, ncut, sizeof(*cut), cmp_u64);
	for (size_t i = 0; i < in->nstreams; i++)
		if (!i || in->streams[i].kind != in->streams[i - 1].kind)
			group[ngroups++] = i;
	group[ngroups] = in->nstreams;

	for (size_t c = 0; c + 1 < ncut; c++) {
		uint64_t x = cut[c], y = cut[c + 1];
		size_t holding = 0, only = 0;
		bool certain;

		if (y <= x)
			continue;
		if (!covers(busy, nbusy, x)) {
			/* The rule of enum dl_idle, in its order. */
			enum dl_idle k = covers(blocking, nblocking, x) ? DL_IDLE_SYNC
				       : covers(cuda, ncuda, x)         ? DL_IDLE_HOST
				       : covers(blocked, nblocked, x)   ? DL_IDLE_INPUT
									: DL_IDLE_HOST;

			idle[k] += y - x;
			push(&v, &nout, &cap, (struct dl_gpu_span){ x, y, 0, 0, DL_GS_IDLE, (uint8_t)k });
			continue;
		}
		for (size_t g = 0; g < ngroups; g++)
			if (covers(&in->streams[group[g]], group[g + 1] - group[g], x)) {
				holding++;
				only = g;
			}
		certain = holding == 1 && covers(in->lower, in->nlower, x);
		for (size_t g = 0; g < ngroups; g++)
			if (covers(&in->streams[group[g]], group[g + 1] - group[g], x))
				push(&v, &nout, &cap,
				     (struct dl_gpu_span){ x, y, in->keys[in->streams[group[g]].kind], 0,
							   (uint8_t)(certain && g == only ? DL_GS_BUSY : DL_GS_MAYBE), 0 });
	}
	nout = merge(v, nout);
	/* After the merge: a zero-length mark between two pieces would keep them apart. */
	for (size_t i = 0; i < in->nopens; i++)
		if (in->opens[i].at >= in->start && in->opens[i].at < in->end)
			push(&v, &nout, &cap, (struct dl_gpu_span){ in->opens[i].at, in->opens[i].at,
								    in->keys[in->opens[i].stream], in->opens[i].tid,
								    DL_GS_ENQUEUE, 0 });
	qsort(v, nout, sizeof(*v), cmp_time);
	free(cut);
	free(group);
	free(busy);
	free(blocking);
	free(cuda);
	free(blocked);
	*out = v;
	return nout;
}
