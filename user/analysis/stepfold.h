/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Steps folded into sums: what a process's whole run of steps adds up to, in
 * memory that does not grow with the run. The correlator keeps the latest
 * steps in full (--keep-steps) and folds older ones here, so a trace of a day
 * costs what a trace of a minute does.
 *
 * Totals and counts fold exactly; the spread (coefficient of variation) folds
 * with Welford's running mean and sum of squares; the median and p90 of
 * folded steps come from a log-linear histogram of durations whose buckets
 * are 1/128 of their octave wide (DL_FOLD_REL_ERR: a bucket's midpoint is
 * within 0.4% of any duration in it).
 */
#ifndef DLBPF_STEPFOLD_H
#define DLBPF_STEPFOLD_H

#include <stdbool.h>
#include <stdint.h>
#include "analysis/steps.h"

#define DL_FOLD_SUB_BITS 7
#define DL_FOLD_BUCKETS ((1u << DL_FOLD_SUB_BITS) * (65 - DL_FOLD_SUB_BITS))
/* Largest relative distance of a duration from its bucket's midpoint. */
#define DL_FOLD_REL_ERR (0.5 / (1u << DL_FOLD_SUB_BITS))

struct dl_step_fold {
	uint64_t n;
	uint64_t dur_ns, cat_ns[DL_CAT_COUNT];
	uint64_t io_read_bytes, io_read_ops, io_ns, workers_cpu_ns;
	uint64_t h2d_bytes, d2h_bytes, h2d_copies, d2h_copies;
	uint64_t small_copies, pageable_copies, kernels, wakeup_runq_ns;
	uint64_t collectives, comm_bytes, comm_after_compute_ns;
	uint64_t gpu_busy_lo_ns, gpu_busy_hi_ns;   /* sums of the steps' inferred bounds */
	uint64_t gpu_idle_ns[DL_IDLE_COUNT];       /* and of their idle split */
	uint64_t verdicts[DL_V_COUNT];
	/*
	 * Partial steps (--overhead-budget: launches not probed all through them),
	 * counted apart from n: their breakdown would hold launch time as CPU.
	 */
	uint64_t partial;
	double io_peak_mbps;       /* fastest disk throughput over a step's reads in flight (> 1 ms of them) */
	double mean, m2;           /* of dur_ns: Welford's running mean and sum of squared deviations */
	uint32_t *hist;            /* durations, DL_FOLD_BUCKETS; NULL until a step is folded with it */
};

/* Adds a step (a partial one is only counted); with_hist: its duration goes to the histogram too (allocated on first use). */
void dl_fold_add(struct dl_step_fold *f, const struct dl_step *st, bool with_hist);
/* Adds every count of from into to (to's histogram is allocated if from has one). */
void dl_fold_merge(struct dl_step_fold *to, const struct dl_step_fold *from);
void dl_fold_free(struct dl_step_fold *f);
/* Coefficient of variation of the durations (sample standard deviation / mean); 0 under two steps. */
double dl_fold_cv(const struct dl_step_fold *f);
/* Median and p90 of the histogram's durations, as dl_durations_percentiles defines them, to DL_FOLD_REL_ERR. */
void dl_fold_percentiles(const struct dl_step_fold *f, uint64_t *median, uint64_t *p90);

/* Median and p90 of n durations, exactly (d is sorted in place): the mean of the middle two for an
 * even n; p90 the nearest rank to 0.9 (n - 1). */
void dl_durations_percentiles(uint64_t *d, size_t n, uint64_t *median, uint64_t *p90);

/* The histogram's bucket of a duration, and the midpoint of a bucket (for tests). */
uint32_t dl_fold_bucket(uint64_t ns);
uint64_t dl_fold_bucket_mid(uint32_t b);

#endif
