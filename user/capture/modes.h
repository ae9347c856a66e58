/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a live run counts with, and when its probes are on: one interface for
 * per-call records (the default), --summary (counts aggregated in the kernel,
 * capture/aggregate.h), --duty (launch and copy probes on part of the time,
 * capture/duty.h) and --overhead-budget (as many launch windows as the budget
 * buys, capture/budget.h). --summary goes with either of the other two, so a
 * run has a list of modes (dl_modes_of), each called in that order.
 */
#ifndef DLBPF_MODES_H
#define DLBPF_MODES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct dl_stream;
struct dl_summary;
struct dl_symbolizer;
struct dl_tracer;

/* What a mode sees of the live run. */
struct dl_mode_env {
	struct dl_tracer *tracer;
	struct dl_summary *sum;
	struct dl_symbolizer *symbolizer;
	struct dl_stream *stream;
	/* Drains the ring buffer and fills the summary from every mode (dl_modes_fill). */
	void (*sync)(void *ctx);
	void *sync_ctx;
};

struct dl_mode_opts {
	unsigned duty_on_s, duty_period_s;   /* --duty M/N */
	double overhead_budget;              /* --overhead-budget P */
};

struct dl_mode_ops {
	const char *name;
	/* After the programs are loaded, before any probe is attached; 0 or -errno. */
	int (*init)(void *st, const struct dl_mode_opts *o, struct dl_mode_env *env);
	/* t0: the traced command's first instruction (or the attach); now: every probe attached. */
	void (*start)(void *st, const struct dl_mode_opts *o, uint64_t t0, uint64_t now);
	/* After each drain. */
	void (*tick)(void *st, struct dl_mode_env *env, uint64_t now);
	/* The run is over (end: now); the counts are scaled to the run. */
	void (*finish)(void *st, struct dl_mode_env *env, uint64_t end);
	/* What the kernel holds, into the summary. */
	void (*fill_summary)(void *st, struct dl_mode_env *env, uint64_t now);
	/* Its own part of the text report. */
	void (*report)(void *st, const struct dl_mode_env *env, FILE *out);
	/* --overhead-budget: whether the launch probes were on for all of [start, end]. */
	bool (*observed)(void *st, uint64_t start_ns, uint64_t end_ns);
	void (*free)(void *st);
	void *(*alloc)(void);
};

extern const struct dl_mode_ops dl_mode_records, dl_mode_summary, dl_mode_duty, dl_mode_budget;

#define DL_MODES_MAX 3

struct dl_modes {
	const struct dl_mode_ops *ops[DL_MODES_MAX];
	void *st[DL_MODES_MAX];
	int n;
	struct dl_mode_opts o;
};

/* The modes a run asked for: records or --summary, then --duty or --overhead-budget. */
void dl_modes_of(struct dl_modes *m, bool summary, const struct dl_mode_opts *o);
/* Each mode's call, in order; a mode without it is skipped. */
int dl_modes_init(struct dl_modes *m, struct dl_mode_env *env);
void dl_modes_start(struct dl_modes *m, uint64_t t0, uint64_t now);
void dl_modes_tick(struct dl_modes *m, struct dl_mode_env *env, uint64_t now);
void dl_modes_finish(struct dl_modes *m, struct dl_mode_env *env, uint64_t end);
void dl_modes_fill(struct dl_modes *m, struct dl_mode_env *env, uint64_t now);
void dl_modes_report(struct dl_modes *m, const struct dl_mode_env *env, FILE *out);
/* The mode that knows when the probes were on (NULL: always), for the correlator. */
bool dl_modes_observed(void *modes, uint64_t start_ns, uint64_t end_ns);
bool dl_modes_partial(const struct dl_modes *m);
void dl_modes_free(struct dl_modes *m);

#endif
