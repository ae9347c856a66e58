/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --summary mode: reads the in-kernel CUDA aggregates (include/dlbpf/agg.h)
 * into the same summary structures the per-event records fill, so the text
 * and JSON reports are unchanged. Read periodically (status line) and at the
 * end; each read adds what changed since the previous one.
 */
#ifndef DLBPF_AGGREGATE_H
#define DLBPF_AGGREGATE_H

#include <stdio.h>
#include "dlbpf/agg.h"
#include "records/stream.h"
#include "analysis/summary.h"
#include "capture/symbolize.h"
#include "util.h"

struct dl_agg_entry {
	struct dl_agg_key key;
	struct dl_agg_val val;    /* summed over CPUs, as of the last read */
};

struct dl_agg {
	int map_fd;
	int ncpu;
	struct dl_agg_entry *v;     /* v, n, cap: a DL_VEC, in the order keys were first read */
	size_t n, cap;
	struct dl_u64map index;     /* hash of a key -> index in v */
	struct dl_agg_val *percpu;  /* lookup buffer */
};

int dl_agg_init(struct dl_agg *a, int map_fd);
void dl_agg_free(struct dl_agg *a);
/*
 * Adds to s what the map gained since the last call. Kernels seen for the
 * first time are named through sz and a symbol record on stream (may be NULL).
 */
int dl_agg_poll(struct dl_agg *a, struct dl_summary *s, struct dl_symbolizer *sz, struct dl_stream *stream,
		uint64_t now);
/* Text section: log2 duration histograms per process and API. */
void dl_agg_report(FILE *f, const struct dl_agg *a);

#endif
