/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One report model: what a run found, built once after the diagnosis and read
 * by every format (the text report, the JSON summary, the HTML page, the
 * multi-rank report). It holds the per-process figures (the summary), the
 * steps and their statistics, computed here once per process instead of by
 * each format, and the diagnosis with its findings.
 */
#ifndef DLBPF_REPORT_MODEL_H
#define DLBPF_REPORT_MODEL_H

#include <stddef.h>
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "analysis/summary.h"
#include "output/otlp_send.h"

/* A process whose steps were decided, with their statistics. */
struct dl_report_steps {
	const struct dl_corr_proc *p;
	struct dl_step_stats st;
};

struct dl_report_model {
	const struct dl_summary *sum;        /* per-process figures */
	const struct dl_correlator *corr;    /* NULL: no steps */
	const struct dl_diagnosis *diag;     /* NULL: not diagnosed */
	struct dl_report_steps *steps;       /* each decided process, in the correlator's order */
	size_t nsteps;
	struct dl_step_stats all;            /* every process's steps together */
	const struct dl_otlp_stats *otlp;    /* --otlp: per signal (DL_OTLP_SIGNALS), once delivered; NULL: none */
};

/* Builds m from what the run made (c and d may be NULL); m reads them, so they outlive it. */
void dl_report_model_build(struct dl_report_model *m, const struct dl_summary *s, const struct dl_correlator *c,
			   const struct dl_diagnosis *d);
/* The statistics of p's steps (p decided), or NULL. */
const struct dl_step_stats *dl_report_model_stats(const struct dl_report_model *m, const struct dl_corr_proc *p);
void dl_report_model_free(struct dl_report_model *m);

#endif
