// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/breakdown.h"
#include "dlbpf/events.h"

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static int cmp_start(const void *a, const void *b)
{
	const struct dl_span *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

size_t dl_spans_union(struct dl_span *v, size_t n)
{
	size_t w = 0;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_start);
	for (size_t i = 1; i < n; i++) {
		if (v[i].start <= v[w].end)
			v[w].end = max_u64(v[w].end, v[i].end);
		else
			v[++w] = v[i];
	}
	return w + 1;
}

size_t dl_spans_first_after(const struct dl_span *u, size_t n, uint64_t a)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (u[mid].end <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t dl_spans_overlap(const struct dl_span *u, size_t n, uint64_t a, uint64_t b)
{
	uint64_t sum = 0;

	for (size_t i = dl_spans_first_after(u, n, a); i < n && u[i].start < b; i++) {
		uint64_t s = max_u64(a, u[i].start), e = min_u64(b, u[i].end);

		if (e > s)
			sum += e - s;
	}
	return sum;
}

/* Gives [a, b) of a scheduler state to its category. */
static void add_state(const struct dl_step_input *in, uint32_t state, uint64_t a, uint64_t b,
		      uint64_t cat_ns[DL_CAT_COUNT])
{
	uint64_t len = b - a, io;

	switch (state) {
	case DL_ST_RUNNING:
		cat_ns[DL_CAT_CPU] += len;
		break;
	case DL_ST_RUNQ:
		cat_ns[DL_CAT_RUNQ] += len;
		break;
	case DL_ST_DISK:
		/* Blocked in D while the job's reads are in flight is waiting for the disk. */
		io = dl_spans_overlap(in->reads, in->nreads, a, b);
		cat_ns[DL_CAT_IO_WAIT] += io;
		cat_ns[DL_CAT_INPUT_WAIT] += len - io;
		break;
	case DL_ST_SLEEP:
		cat_ns[DL_CAT_INPUT_WAIT] += len;
		break;
	default:
		break;   /* unknown: left to the remainder */
	}
}

/* Gives the scheduler spans' time outside the CUDA pieces to categories; only spans accepted by keep. */
static void fill_states(const struct dl_step_input *in, uint64_t cat_ns[DL_CAT_COUNT],
			bool (*keep)(const struct dl_step_input *in, size_t i))
{
	size_t c = 0;

	for (size_t i = 0; i < in->nsched; i++) {
		uint64_t s = max_u64(in->sched[i].start, in->start), e = min_u64(in->sched[i].end, in->end);

		if (e <= s || (keep && !keep(in, i)))
			continue;
		while (c < in->ncuda && in->cuda[c].end <= s)
			c++;
		for (size_t k = c; s < e; k++) {
			uint64_t gap_end = k < in->ncuda ? min_u64(e, in->cuda[k].start) : e;

			if (gap_end > s)
				add_state(in, in->sched[i].kind, s, gap_end, cat_ns);
			if (k >= in->ncuda)
				break;
			s = max_u64(s, in->cuda[k].end);
		}
	}
}

static bool after_wakeup(const struct dl_step_input *in, size_t i)
{
	return in->sched[i].kind == DL_ST_RUNQ && i > 0 && in->sched[i - 1].end == in->sched[i].start &&
	       (in->sched[i - 1].kind == DL_ST_SLEEP || in->sched[i - 1].kind == DL_ST_DISK);
}

uint64_t dl_wakeup_runq(const struct dl_step_input *in)
{
	uint64_t cat_ns[DL_CAT_COUNT] = { 0 };

	fill_states(in, cat_ns, after_wakeup);
	return cat_ns[DL_CAT_RUNQ];
}

void dl_breakdown(const struct dl_step_input *in, uint64_t cat_ns[DL_CAT_COUNT])
{
	uint64_t total = in->end > in->start ? in->end - in->start : 0, sum = 0, covered = in->start;

	memset(cat_ns, 0, DL_CAT_COUNT * sizeof(*cat_ns));
	for (size_t i = 0; i < in->ncuda; i++) {
		/* Clipped to the step and to the previous piece, so nothing counts twice. */
		uint64_t s = max_u64(max_u64(in->cuda[i].start, in->start), covered);
		uint64_t e = min_u64(in->cuda[i].end, in->end);

		if (e > s && in->cuda[i].kind < DL_CAT_COUNT) {
			cat_ns[in->cuda[i].kind] += e - s;
			covered = e;
		}
	}
	/* Scheduler states fill what the CUDA pieces leave. */
	fill_states(in, cat_ns, NULL);
	for (int k = 0; k < DL_CAT_COUNT; k++)
		sum += cat_ns[k];
	if (sum <= total) {
		cat_ns[DL_CAT_CPU] += total - sum;
		return;
	}
	/* Overlapping input (clock skew between sources): trim the lowest-priority categories. */
	for (int k = DL_CAT_COUNT - 1; k >= 0 && sum > total; k--) {
		uint64_t cut = min_u64(cat_ns[k], sum - total);

		cat_ns[k] -= cut;
		sum -= cut;
	}
}
