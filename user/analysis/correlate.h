/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The correlator: turns the record stream into steps per process. Pure: it
 * sees only records (live or replayed), so a replay gives the same steps;
 * what a copy is (direction, pageable) comes resolved with the record.
 *
 * Per process it first learns (which thread is the main thread, what marks a
 * step), then tracks: each step is finalized once the stream's time has moved
 * past its end, so records that complete late (scheduler intervals, disk
 * requests) are in.
 */
#ifndef DLBPF_CORRELATE_H
#define DLBPF_CORRELATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "analysis/callsites.h"
#include "analysis/kdur.h"
#include "analysis/lineage.h"
#include "analysis/stepfold.h"
#include "analysis/steps.h"
#include "records/stream.h"
#include "dlbpf/copy.h"

struct dl_corr_opts {
	const char *step_on;        /* a CUDA API name, or NULL (automatic); DL_EV_MARK records always mark */
	double pcie_gbps;           /* copy bandwidth assumed until measured (default 24, PCIe Gen4 x16) */
	uint64_t finalize_delay_ns; /* default 50 ms */
	size_t keep_steps;          /* the latest steps kept in full per process (at least; 0: all); the rest folded */
	/*
	 * --overhead-budget: were launches probed over all of [start, end]? A step
	 * they were not is partial: its duration counts, its breakdown does not.
	 * NULL: every step was.
	 */
	bool (*observed)(void *ctx, uint64_t start_ns, uint64_t end_ns);
	void *observed_ctx;
};

/* DL_MARK_PERIOD: every call of one kind, the first of the main thread's repeating call sequence. */
enum dl_marker_kind { DL_MARK_NONE, DL_MARK_AFTER_SYNC, DL_MARK_API, DL_MARK_SYMBOL, DL_MARK_PERIOD };

struct dl_marker {
	enum dl_marker_kind kind;
	uint16_t api;             /* DL_MARK_AFTER_SYNC, DL_MARK_API, DL_MARK_PERIOD */
	uint8_t dir;              /* copies: direction, or 0xff for any */
	uint8_t size_log2;        /* DL_MARK_PERIOD: its bytes' bit length (analysis/steplearn.h) */
	uint64_t stream;          /* DL_MARK_PERIOD */
	uint32_t mark_id;         /* DL_MARK_SYMBOL */
};

/* How the marker was chosen. */
enum dl_learned { DL_LEARNED_NONE, DL_LEARNED_OPTION, DL_LEARNED_SYNC, DL_LEARNED_PERIOD, DL_LEARNED_AUTOGRAD };

/* How sure a learned marker is (DL_LEARNED_AUTOGRAD); DL_SURE_NONE: not told. */
enum dl_marker_sure { DL_SURE_NONE, DL_SURE_LOW, DL_SURE_MEDIUM, DL_SURE_HIGH };

/* What step learning saw of the main thread's call sequence in its window. */
struct dl_step_learning {
	enum dl_learned how;
	bool periodic;            /* a period was found (whichever marker was then chosen) */
	uint32_t period_calls;    /* its length in calls, sync points not counted */
	uint32_t periods;         /* whole periods in the window */
	uint32_t repeating;       /* periods identical to the one before (of periods - 1) */
	uint32_t synced;          /* periods holding a blocking sync */
	/* DL_LEARNED_AUTOGRAD: the backward passes in the window, what of them the main thread made, their pace */
	uint32_t marks, main_marks;
	double mark_cv;           /* of the main thread's intervals from one to the next */
	enum dl_marker_sure sure;
};

#define DL_SYNC_GAP_MAX 64
/* How often the steps hold a blocking sync, over every step. */
struct dl_sync_cadence {
	uint64_t steps, synced;   /* steps, those holding a sync point */
	uint64_t last;            /* the step number of the last synced one */
	uint64_t gaps[DL_SYNC_GAP_MAX + 1];   /* steps from one synced step to the next; [0]: longer */
};

/* Copy facts of a main thread that findings are made from. */
struct dl_copy_facts {
	uint64_t copies, bytes;
	uint64_t pageable, pageable_bytes, pageable_ns;
	uint64_t small, small_ns, small_hist[6];   /* <=256 B, <=1 KiB, <=4 KiB, <=16 KiB, <=64 KiB */
	uint64_t sync_h2d_large;                   /* synchronous H2D copies over 64 KiB */
	uint64_t misaligned_ptr, odd_size, aligned_checked;
	uint64_t copy_ns;
	double best_gbps[DL_DIR_COUNT][2];         /* measured, by direction and pageable */
};

/*
 * Steps cut by an automatic marker that then stopped recurring (a job's
 * start-up: a framework's model set-up and its loaders' start look like
 * steps of their own before the loop begins): left out of the steps, which
 * are learned again from the calls after.
 */
struct dl_step_startup {
	uint32_t relearned;       /* markers given up */
	uint64_t steps, dur_ns;   /* the steps they cut, left out */
	char first_marker[160];   /* the first marker given up */
};

struct dl_corr_proc {
	pid_t pid;
	uint32_t main_tid;
	struct dl_marker marker;
	char marker_desc[160];
	bool decided;
	struct dl_step *steps;     /* the latest steps, oldest first; grown with dl_grow */
	uint64_t steps_from_ns, steps_to_ns;   /* the first step's start, the last one's end (folded ones too) */
	size_t nsteps, cap;
	struct dl_step_fold folded;   /* the steps before those (--keep-steps), but those held */
	/* Folded steps that may be outliers: held whole until dl_corr_stats judges them (DL_OUTLIER_P90). */
	struct dl_step *held;
	size_t nheld;
	struct dl_copy_facts copy;
	struct dl_sites sites;     /* where its outermost calls come from (every thread's) */
	struct dl_lin_totals lineage;   /* what its steps' input waits waited on, every step's */
	struct dl_step_learning learning;
	struct dl_step_startup startup;
	struct dl_sync_cadence syncs;
	struct dl_kdur kdur;       /* inferred kernel durations: the fit's normal equations */
};

struct dl_correlator;

struct dl_correlator *dl_corr_new(const struct dl_corr_opts *opts);
/*
 * Steps are a stage after records: the correlator queues the steps a record
 * (or dl_corr_finish) closes, and this hands them to fn (NULL: dropped),
 * oldest first, once that record has been through every sink. Returns how many.
 */
size_t dl_corr_take_steps(struct dl_correlator *c, dl_step_fn fn, void *ctx);
/* The step stage as a stream sink, added after every other: after each record, dl_corr_take_steps. */
struct dl_step_stage {
	struct dl_correlator *corr;
	dl_step_fn fn;
	void *ctx;
};
int dl_step_stage_sink(void *stage, const struct dl_rec *r);
void dl_corr_free(struct dl_correlator *c);
/* A stream sink. */
int dl_corr_sink(void *correlator, const struct dl_rec *r);
/* End of the stream: decide what is undecided, finalize every pending step. */
void dl_corr_finish(struct dl_correlator *c);

/* How many CPUs the traced tree was seen running on (0 without scheduler records). */
unsigned dl_corr_cpus(const struct dl_correlator *c);
size_t dl_corr_nprocs(const struct dl_correlator *c);
const struct dl_corr_proc *dl_corr_proc(const struct dl_correlator *c, size_t i);
const struct dl_corr_opts *dl_corr_options(const struct dl_correlator *c);

/* A process's kernel-duration fit, or NULL where records of calls were lost (a window may lack an enqueue). */
const struct dl_kdur *dl_corr_kdur(const struct dl_correlator *c, pid_t pid);

/* Steps of a process, kept and folded. */
static inline uint64_t dl_corr_steps_total(const struct dl_corr_proc *p)
{
	return p->folded.n + p->nheld + p->nsteps;
}

/* The steps from one synced step to the next, most often (1: every step syncs); 0: too few synced, or irregular. */
uint32_t dl_corr_sync_every(const struct dl_corr_proc *p);

/*
 * A step that lasts over this many times the p90 of its process's steps is
 * an outlier: a one-off (the loaders' start before
 * the first batch, a checkpoint, a stall), at most a tenth of the steps and
 * an order of magnitude past the slowest of the rest. Outliers are left out
 * of the totals and the verdict, which describe the typical step, and are
 * listed apart; every step keeps its own breakdown and verdict.
 */
#define DL_OUTLIER_P90 10
#define DL_OUTLIERS_LISTED 8
#define DL_OUTLIERS_HELD 64      /* folded steps held for judging, per process: the longest */

/* What every step of a run adds up to. */
struct dl_step_stats {
	struct dl_step_fold sum;   /* its histogram is the caller's: dl_fold_free */
	uint64_t median_ns, p90_ns;
	double cv;                 /* coefficient of variation of the durations */
	bool exact;                /* median and p90 of every step; else to DL_FOLD_REL_ERR (steps were folded) */
	uint64_t outliers, outlier_ns;             /* outlier steps, left out of all the above, and their time */
	uint64_t outlier_cut_ns;                   /* the longest a step may last and count (one process: its own) */
	uint32_t outlier_index[DL_OUTLIERS_LISTED];   /* the first outliers' step indexes */
};

/* Every step of one process (only), or of every process (only NULL). */
void dl_corr_stats(const struct dl_correlator *c, const struct dl_corr_proc *only, struct dl_step_stats *out);

#endif
