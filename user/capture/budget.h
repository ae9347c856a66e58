/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --overhead-budget P: the live controller. Kernel launches, the hottest
 * probes, are turned on in windows and off between them, so that what every
 * probe costs stays within P of the traced job's CPU. Syncs, copies, the
 * scheduler and I/O stay on, and their cost is charged first.
 *
 * The cost is measured, not assumed: BPF run-time statistics give each
 * program's run time and runs live (bpf_enable_stats, in the job's own cache
 * state), and each uprobe event adds the kernel's trap, timed at start
 * (capture/calib.h). A running account (capture/budget_plan.h) holds the
 * allowance, P of the job's CPU (utime + stime of the traced processes) as it
 * is used, less the cost so far: a window opens only when the plan's off time
 * has passed and the account is not overdrawn, so a cost higher than planned
 * delays the next window by as much.
 *
 * Launch counts are scaled by the observed fraction with bounds over the
 * windows; a step that was not inside one window is left out of the
 * breakdown and the verdict (its duration still counts), as its launches were
 * not seen.
 */
#ifndef DLBPF_BUDGET_H
#define DLBPF_BUDGET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "analysis/summary.h"
#include "capture/budget_plan.h"
#include "capture/calib.h"
#include "capture/tracer.h"
#include "util.h"

#define DL_BUDGET_APIS 16     /* launch-class APIs scaled (cuda_api.def has fewer) */
#define DL_BUDGET_PROGS 64
#define DL_BUDGET_STEPS 1024  /* step durations kept per side (inside windows, outside them), the latest */

/* The latest step durations of one side: launches probed all through the step, or not at all. */
struct dl_budget_steps {
	uint64_t dur[DL_BUDGET_STEPS];
	size_t n;              /* ever added; the last DL_BUDGET_STEPS are kept */
};

struct dl_budget_window_rec {
	uint64_t start_lo, start_hi, end_lo, end_hi;   /* attach and detach edges of the launch entry probes */
	uint64_t v[DL_BUDGET_APIS];                    /* launch calls counted inside, per API */
};

struct dl_budget_prog {
	int fd;
	int kind;               /* 0: tracepoint, 1: uprobe (entry), 2: uretprobe */
	bool launch;            /* the entry-only program launches run */
	uint64_t run_ns, cnt;   /* at the last reading */
	uint64_t total_ns, total_cnt;
};

/* A per-process counter's last reading, by summary process (UINT64_MAX: not read yet). */
typedef DL_VEC(uint64_t) dl_budget_counters;

struct dl_budget {
	double budget;
	uint64_t t0, t_end, window_ns;
	bool on;
	uint64_t next_open;          /* the plan's earliest next window */
	uint64_t last_close;         /* when the last window closed */
	DL_VEC(struct dl_budget_window_rec) windows;
	uint16_t apis[DL_BUDGET_APIS];
	int napis;
	uint64_t snap[DL_BUDGET_APIS];
	struct dl_calib calib;
	int stats_fd;
	int files_mech;                 /* what the files source runs on (enum dl_files_mech): how its cost falls */
	double sys_before[2];           /* dl_calib_syscalls' read and write before the programs attach */
	double files_run_ns;            /* charged per run of a files program beside its run time */
	double syscall_tax_ns;          /* charged per system call of the job: the tracepoint fallback's path */
	dl_budget_counters proc_syscalls; /* per summary process: syscr + syscw at the last reading */
	double tax_ns;                  /* the fallback's path, charged so far */
	struct dl_budget_prog progs[DL_BUDGET_PROGS];
	int nprogs;
	dl_budget_counters proc_cpu;   /* per summary process: utime + stime at the last reading, ns */
	uint64_t last_account;
	struct dl_budget_account acct;
	/* The cost split, over the run: launch probes, and everything else (always on). */
	double launch_ns, always_ns;
	uint64_t launches_accounted;   /* launch calls the cost was charged for */
	/* The launch class as the last window measured it. */
	double rate_on_hz, ns_per_launch, job_cpu_rate, always_rate;
	double window_cost_ns;       /* what the next window should cost, by the plan's figures */
	struct dl_budget_plan plan;
	bool planned;
	int err;
	struct dl_overhead figures;   /* filled at the end */
	/*
	 * Steps with launches probed, against steps with none: their ratio is the
	 * slowdown the probes caused, measured on the job itself. It corrects the
	 * rate seen in windows to the faster rate between them, and checks the
	 * cost model (a launch costing more than the model says raises the cost
	 * planned with).
	 */
	struct dl_budget_steps steps_in, steps_out;
	double slowdown;         /* median step inside / outside - 1; 0 until both sides have 3 steps */
	double slowdown_rel_se;  /* the ratio's relative standard error, from the two medians' */
	double ns_per_launch_steps;   /* what a launch cost by that slowdown; 0: unknown */
};

/* Makes everything read so far visible in the summary (drain the ring buffer, read aggregates). */
typedef void (*dl_budget_sync_fn)(void *ctx);

/* Before the first scan: launches on links of their own, the calibration, the statistics. */
int dl_budget_init(struct dl_budget *b, double budget, struct dl_tracer *t);
/* Tracing began at t0, launches on: the first window is open. */
void dl_budget_start(struct dl_budget *b, uint64_t t0, uint64_t attached);
/* Accounts the cost so far and turns launches on or off when due. */
void dl_budget_tick(struct dl_budget *b, struct dl_tracer *t, uint64_t now, const struct dl_summary *s,
		    dl_budget_sync_fn sync, void *ctx);
/* Closes the last window, and gives the summary the figures (s->overhead, for the JSON). */
void dl_budget_finish(struct dl_budget *b, struct dl_tracer *t, uint64_t end, struct dl_summary *s,
		      dl_budget_sync_fn sync, void *ctx);
/* For the correlator (dl_corr_opts.observed): was [start, end] inside one launch window? Notes its duration. */
bool dl_budget_observed(void *budget, uint64_t start_ns, uint64_t end_ns);
void dl_budget_report(FILE *f, struct dl_budget *b);
/* The JSON's overhead_budget object, for the summary to carry (analysis/summary.h). */
void dl_budget_fill(struct dl_budget *b, struct dl_overhead *o);
void dl_budget_free(struct dl_budget *b);

#endif
