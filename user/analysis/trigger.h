/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * When the flight recorder writes its window out, as steps close: a step slower
 * than a factor of its process's running median (--trigger-step), or a change
 * of verdict between one half of the window and the next (--trigger-verdict).
 */
#ifndef DLBPF_TRIGGER_H
#define DLBPF_TRIGGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analysis/stepfold.h"
#include "util.h"

/* Steps before a running median is trusted: the first steps of a job (warm-up, autotuning) are often slow. */
#define DL_TRIGGER_MIN_STEPS 8

struct dl_trigger_proc {
	int pid;
	struct dl_step_fold durations;    /* the running median, from its histogram */
	uint64_t period_start, period_cat_ns[DL_CAT_COUNT];
	uint32_t period_steps;
	int last_verdict;                 /* of the previous period; -1 before one closed */
};

struct dl_trigger {
	double step_factor;               /* 0: no slow-step trigger */
	bool on_verdict;
	uint64_t period_ns;               /* half the window */
	DL_VEC(struct dl_trigger_proc) procs;
	struct dl_u64map proc_of;
};

void dl_trigger_init(struct dl_trigger *t, double step_factor, bool on_verdict, uint64_t window_ns);
void dl_trigger_free(struct dl_trigger *t);
/*
 * Takes a closed step; true when it is a reason to dump, said in why:
 * "slow-step" with the step and the median, or "verdict" with the old and new.
 */
bool dl_trigger_step(struct dl_trigger *t, const struct dl_step *st, char *why, size_t len);

#endif
