/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --overhead-budget P: the pure part of the controller (capture/budget.c runs
 * it live). What a class of probes costs the job is its event rate while its
 * probes are on times its cost per event; the budget is a fraction P of the
 * CPU the traced job would use untraced. Classes that must stay on (syncs,
 * copies, the scheduler, I/O) are charged first; what is left is given to the
 * classes that may be cycled, the coldest first, so that the hottest (kernel
 * launches) is the one turned down.
 */
#ifndef DLBPF_BUDGET_PLAN_H
#define DLBPF_BUDGET_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#define DL_BUDGET_MAX_CLASSES 8

/* Parses "1%", "0.5%" or "5" (a percentage, the sign optional) into a fraction in (0, 1]; 0 or -1. */
int dl_budget_parse(const char *s, double *frac);

/* A class of probes, as measured while its probes were on. */
struct dl_budget_class {
	double rate_hz;        /* its events per second of wall time while on */
	double ns_per_event;   /* what an event costs the job (trap and program) */
	bool cyclable;         /* may be turned off part of the time */
};

struct dl_budget_plan {
	double on_fraction[DL_BUDGET_MAX_CLASSES];   /* of the time each class should be on */
	double always_on_share;    /* always-on cost / untraced job CPU */
	double planned_share;      /* the cost the plan gives, / untraced job CPU */
	bool always_on_over;       /* always-on costs alone exceed the budget: cycled classes are off */
};

/*
 * job_cpu: the untraced job's CPU per second (ns/s); always_on: the cost per
 * second of what is never cycled (ns/s), beside the classes. Classes are in the
 * order they are turned down: c[0] first.
 */
void dl_budget_plan(double budget, double job_cpu, double always_on, const struct dl_budget_class *c, size_t n,
		    struct dl_budget_plan *out);

/*
 * The allowance left, as a running account: the budget of the job CPU seen
 * so far, less what the probes cost so far. Negative: overspent (a window
 * that cost more than planned); the controller then waits until it is repaid.
 */
struct dl_budget_account {
	double budget;
	double job_cpu_ns;      /* the job's CPU, dlbpf's cost in it left out */
	double spent_ns;        /* what dlbpf's probes cost */
	double balance_ns;
	double cap_ns;          /* most the balance may hold (0: no cap), so an idle job cannot save up a burst */
};

/* job_cpu_ns: the job's CPU over an interval, measured (dlbpf's cost on its threads included); spent_ns: the cost. */
void dl_budget_charge(struct dl_budget_account *a, double job_cpu_ns, double spent_ns);

/* How long a cycled class stays off after a window of window_ns, to be on fraction f of the time; 0 f: never. */
double dl_budget_off_ns(double window_ns, double f);

/* A window a cycled class was on: its length and what it counted. */
struct dl_budget_window {
	double on_ns;
	double count;
};

struct dl_budget_scaled {
	double observed;   /* fraction of the time on */
	double seen;       /* counted while on */
	double scaled;     /* estimate over the whole time */
	double lo, hi;     /* about 95% bounds of the whole time's count */
	size_t windows;
};

/*
 * The count over total_ns from windows that saw part of it: their rate times
 * the unobserved time, plus what they saw. The bounds are a prediction
 * interval with Student's t over the windows: the rate's standard error, and
 * the spread of counts over spans as long as a window in the time not seen;
 * never narrower than counting noise (Poisson) of what was seen. A single
 * window that did not see all of the time bounds nothing above (hi infinite).
 */
void dl_budget_scale(const struct dl_budget_window *w, size_t n, double total_ns, struct dl_budget_scaled *out);

/*
 * The probes slow what they watch: with launches probed a launch-bound step
 * takes longer, so the windows saw a lower rate than ran between them. ratio:
 * a step's duration with the probes over without (measured on the job's own
 * steps); the unseen part of the count and its bounds are scaled by it, the
 * bounds widened by two of the ratio's relative standard errors (rel_se).
 */
void dl_budget_correct(struct dl_budget_scaled *e, double ratio, double rel_se);

/* Student's t, two-sided 95% (the 0.975 quantile), for dof degrees of freedom (dof >= 1). */
double dl_student_t975(size_t dof);

#endif
