/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The partition of one step of a main thread into categories: a pure function
 * of the thread's CUDA call pieces, its scheduler intervals and the disk reads
 * in flight. Every nanosecond of [start, end) goes to exactly one category.
 */
#ifndef DLBPF_BREAKDOWN_H
#define DLBPF_BREAKDOWN_H

#include <stddef.h>
#include <stdint.h>
#include "analysis/steps.h"

struct dl_span {
	uint64_t start, end;
	uint32_t kind;     /* enum dl_cat for CUDA pieces, enum dl_thread_state for scheduler spans */
};

struct dl_step_input {
	uint64_t start, end;
	const struct dl_span *cuda;   /* sorted by start, non-overlapping */
	size_t ncuda;
	const struct dl_span *sched;  /* sorted by start, non-overlapping */
	size_t nsched;
	const struct dl_span *reads;  /* union of reads in flight: sorted, merged */
	size_t nreads;
};

/*
 * Fills cat_ns so that it sums to end - start exactly. CUDA pieces take
 * precedence over scheduler states; time with no information counts as cpu.
 */
void dl_breakdown(const struct dl_step_input *in, uint64_t cat_ns[DL_CAT_COUNT]);
/*
 * The part of runq that directly follows a wake-up from blocking (the thread
 * had what it waited for, but no CPU); the rest of runq is preemption.
 */
uint64_t dl_wakeup_runq(const struct dl_step_input *in);

/* Sorts spans by start and merges overlapping ones into a union (in place); returns the new count. */
size_t dl_spans_union(struct dl_span *v, size_t n);
/* The first of sorted, non-overlapping spans that ends after a (n if none). */
size_t dl_spans_first_after(const struct dl_span *u, size_t n, uint64_t a);
/* Length of the part of [a, b) covered by a sorted, merged union. */
uint64_t dl_spans_overlap(const struct dl_span *u, size_t n, uint64_t a, uint64_t b);

#endif
