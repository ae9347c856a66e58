/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One report model: what a run found, built once after the diagnosis and read
 * by every format (the text report, the JSON summary, the HTML page, the
 * Prometheus exposition, the multi-rank report). The formats read values
 * here and walk no analysis stage: the run's totals, each process's figures
 * with its call sites and drain windows, each process's steps with their
 * statistics (computed here once instead of by each format), and the
 * diagnosis with its findings.
 */
#ifndef DLBPF_REPORT_MODEL_H
#define DLBPF_REPORT_MODEL_H

#include <stddef.h>
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "analysis/summary.h"
#include "output/otlp_send.h"

/* One traced process, as every format shows it. */
struct dl_report_proc {
	const struct dl_proc *fig;           /* its figures: calls, copies, kernels, disk, scheduler, files */
	bool bystander;                      /* no CUDA, no disk, under 1% of a CPU: folded unless -v */
	const struct dl_sites *sites;        /* its launches by call site; NULL: no steps tracked */
	const struct dl_kdur *kdur;          /* its drain windows for kernel device times; NULL: none */
};

/* One process the correlator tracked, with its steps' statistics. */
struct dl_report_steps {
	const struct dl_corr_proc *p;
	struct dl_step_stats st;             /* p->decided only */
	uint64_t total;                      /* complete steps, folded and left out included */
	uint32_t sync_every;                 /* steps per sync point (0: none synced) */
	size_t unlisted;                     /* kept steps past --keep-steps, not listed one by one */
};

struct dl_report_model {
	/* The run as a whole. */
	uint64_t start_ns, duration_ns;      /* on the recording's CLOCK_MONOTONIC */
	uint64_t events;                     /* the kernel's events (records less the collector's own) */
	uint64_t drops_total, drops[DL_DROP_MAX];
	uint64_t recursion_misses;
	const struct dl_prog_miss *prog_misses;   /* by program, in the order they came */
	size_t nprog_misses;
	uint64_t async_io_bytes, async_io_ops, async_io_unseen;
	const struct dl_overhead *overhead;  /* --overhead-budget; NULL otherwise */
	/* Each traced process, in the order first seen; nbystanders of them are bystanders. */
	struct dl_report_proc *procs;
	size_t nprocs, nbystanders;
	/* Each process the correlator tracked, in its order (none without a correlator). */
	struct dl_report_steps *steps;
	size_t nsteps;
	struct dl_step_stats all;            /* every decided process's steps together */
	const struct dl_diagnosis *diag;     /* NULL: not diagnosed */
	bool no_cuda;                        /* no process loaded a CUDA runtime: no GPU or PCIe figures */
	const struct dl_otlp_stats *otlp;    /* --otlp: per signal (DL_OTLP_SIGNALS), once delivered; NULL: none */
	const struct dl_summary *sum;        /* for dl_report_model_find only */
};

/* Builds m from what the run made (c and d may be NULL); m reads them, so they outlive it. */
void dl_report_model_build(struct dl_report_model *m, const struct dl_summary *s, const struct dl_correlator *c,
			   const struct dl_diagnosis *d);
/* The figures of process pid, or NULL (a waker or another thread's process named beside a step). */
const struct dl_proc *dl_report_model_find(const struct dl_report_model *m, pid_t pid);
void dl_report_model_free(struct dl_report_model *m);

#endif
