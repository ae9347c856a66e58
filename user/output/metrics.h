/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Prometheus text exposition (format 0.0.4) of a run so far: what the
 * summary counts per process and what the correlator's steps add up to, so
 * a scrape and the JSON summary of the same moment agree. Names follow the
 * ecosystem: a dlbpf_ prefix, base units (_seconds, _bytes), _total on
 * counters. Labels are bounded: pid, comm, api (the API table), category,
 * direction, memory; kernel names only when asked, DL_METRICS_KERNELS per
 * process.
 */
#ifndef DLBPF_METRICS_H
#define DLBPF_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include "analysis/steps.h"
#include "analysis/summary.h"
#include "output/model.h"
#include "strsafe.h"

#define DL_METRICS_KERNELS 20      /* kernel names per process with --metrics-kernels; the rest are summed */
#define DL_METRICS_PROCS 256       /* processes with series; the rest are counted in one gauge */
#define DL_METRICS_OTHER_KERNELS "__other__"

/* What only the live trace knows at the moment of a scrape (the summary gets it at the end). */
struct dl_metrics_live {
	uint64_t drops[DL_DROP_MAX];
	uint64_t recursion_misses;
	uint64_t malformed;
};

struct dl_metrics;

/* Step-time histogram bounds, ns (the exposition's and OTLP's). */
#define DL_METRICS_BUCKETS 15
extern const uint64_t dl_metrics_bucket_ns[DL_METRICS_BUCKETS];

/* What a process's steps so far add up to. */
struct dl_metrics_steps {
	pid_t pid;
	uint64_t count, sum_ns, cat_ns[DL_CAT_COUNT];
	uint64_t bucket[DL_METRICS_BUCKETS + 1];   /* not cumulative; the last is +Inf */
};

struct dl_metrics_opts {
	bool kernel_names;     /* --metrics-kernels */
	bool memory_unknown;   /* --summary: copies are not told pinned from pageable (memory="unknown") */
};

struct dl_metrics *dl_metrics_new(const struct dl_metrics_opts *o);
void dl_metrics_free(struct dl_metrics *m);
/* A step the correlator finalized (its on_step callback). */
void dl_metrics_step(struct dl_metrics *m, const struct dl_step *st);
/* pid's steps so far, or NULL. */
const struct dl_metrics_steps *dl_metrics_steps_of(const struct dl_metrics *m, pid_t pid);
/* Empties b and writes the exposition of rm's processes (their figures: a model built without steps) into it. */
void dl_metrics_render(const struct dl_metrics *m, const struct dl_report_model *rm, const struct dl_metrics_live *live,
		       struct dl_sbuf *b);

#endif
