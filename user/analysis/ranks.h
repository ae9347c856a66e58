/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Several ranks of one distributed job, recorded apart (on one host or many):
 * how their clocks line up, and whether one of them holds the others back.
 * Pure: fed each recording's clock snapshot and its steps' totals.
 */
#ifndef DLBPF_RANKS_H
#define DLBPF_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analysis/diagnose.h"

/*
 * The threshold: a rank computing 1.2x what every other rank computes
 * per step is what the others' collectives wait for.
 */
#define DL_STRAGGLER_RATIO 1.2
/* The others "wait in communication" when comm_wait is this share of their steps: DESIGN's moderate severity. */
#define DL_STRAGGLER_WAIT_SHARE 0.05

/* One reading of CLOCK_MONOTONIC (the records' clock) and CLOCK_REALTIME, from a recording's header. */
struct dl_rank_clock {
	uint64_t mono_ns, real_ns;
};

/*
 * What to add to a time on rank r's CLOCK_MONOTONIC to put it on base's:
 * the two are related through CLOCK_REALTIME, which hosts of one job keep in
 * step (NTP/PTP). On one host it is the two snapshots' jitter, near 0.
 */
int64_t dl_rank_offset(const struct dl_rank_clock *base, const struct dl_rank_clock *r);

/* A snapshot that cannot relate the clocks (a zero reading: written by no clock). */
bool dl_rank_clock_valid(const struct dl_rank_clock *c);

/*
 * Whether two spans (on one clock, after dl_rank_offset) share any instant:
 * ranks of one job run together; recordings that never overlap are of
 * different runs, or a clock is wrong, and no alignment of them means anything.
 */
bool dl_rank_spans_meet(uint64_t a_start, uint64_t a_end, uint64_t b_start, uint64_t b_end);

/* One rank's typical steps (outliers left out, as the report does). */
struct dl_rank_steps {
	uint64_t steps;
	uint64_t dur_ns;          /* their total */
	uint64_t comm_wait_ns;    /* of which waiting on collectives */
};

/* A rank's compute per step: the step less its wait on communication (0 without steps). */
double dl_rank_compute_per_step(const struct dl_rank_steps *r);
double dl_rank_comm_wait_per_step(const struct dl_rank_steps *r);
struct dl_step_stats;
/* A rank's typical steps, from the statistics of all its steps (dl_corr_stats of every process). */
void dl_rank_steps_of(const struct dl_step_stats *st, struct dl_rank_steps *out);

struct dl_straggler {
	int rank;                 /* -1: none */
	double ratio;             /* its compute per step over the most any other rank computes */
	double compute_ns;        /* its compute per step */
	double others_compute_ns; /* the most any other computes per step */
	double others_comm_wait_ns;   /* the least any other waits on communication per step */
	double others_wait_share;     /* and as a share of that rank's step */
};

/*
 * The straggler among n ranks: the one whose compute per step is at least
 * DL_STRAGGLER_RATIO times every other's, while every other waits on
 * communication for at least DL_STRAGGLER_WAIT_SHARE of its step. Ranks
 * without steps take no part; under two with steps there is none. The
 * figures are filled for the rank computing most even when it is not one.
 */
void dl_find_straggler(const struct dl_rank_steps *r, size_t n, struct dl_straggler *out);

/* The straggler finding (rule "straggler") of what dl_find_straggler found; false when it found none. */
bool dl_straggler_finding(const struct dl_straggler *st, size_t nranks, struct dl_finding *f);

#endif
