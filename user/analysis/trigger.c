// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <string.h>
#include "analysis/trigger.h"

void dl_trigger_init(struct dl_trigger *t, double step_factor, bool on_verdict, uint64_t window_ns)
{
	memset(t, 0, sizeof(*t));
	t->step_factor = step_factor;
	t->on_verdict = on_verdict;
	t->period_ns = window_ns / 2 ? window_ns / 2 : 1;
}

void dl_trigger_free(struct dl_trigger *t)
{
	for (size_t i = 0; i < t->procs.n; i++)
		dl_fold_free(&t->procs.v[i].durations);
	dl_vec_free(&t->procs);
	dl_u64map_free(&t->proc_of);
}

static struct dl_trigger_proc *proc_of(struct dl_trigger *t, int pid)
{
	uint64_t i;
	struct dl_trigger_proc *p;

	if (dl_u64map_get(&t->proc_of, (uint32_t)pid, &i))
		return &t->procs.v[i];
	p = dl_vec_push(&t->procs);
	p->pid = pid;
	p->last_verdict = -1;
	dl_u64map_put(&t->proc_of, (uint32_t)pid, t->procs.n - 1);
	return p;
}

/* A period closes at the first step that ends past it; its verdict is that of its steps' time together. */
static bool verdict_changed(struct dl_trigger *t, struct dl_trigger_proc *p, const struct dl_step *st,
			    char *why, size_t len)
{
	uint64_t end = st->start_ns + st->dur_ns;
	bool changed = false;

	if (!p->period_start)
		p->period_start = st->start_ns;
	if (end - p->period_start >= t->period_ns && p->period_steps) {
		double share;
		int v = (int)dl_verdict_of(p->period_cat_ns, &share);

		if (p->last_verdict >= 0 && v != p->last_verdict) {
			snprintf(why, len, "verdict %s -> %s (pid %d)", dl_verdict_name((enum dl_verdict)p->last_verdict),
				 dl_verdict_name((enum dl_verdict)v), p->pid);
			changed = true;
		}
		p->last_verdict = v;
		p->period_start = st->start_ns;
		p->period_steps = 0;
		memset(p->period_cat_ns, 0, sizeof(p->period_cat_ns));
	}
	for (int c = 0; c < DL_CAT_COUNT; c++)
		p->period_cat_ns[c] += st->cat_ns[c];
	p->period_steps++;
	return changed;
}

bool dl_trigger_step(struct dl_trigger *t, const struct dl_step *st, char *why, size_t len)
{
	struct dl_trigger_proc *p = proc_of(t, st->pid);
	bool fire = false;

	if (t->step_factor > 0 && p->durations.n >= DL_TRIGGER_MIN_STEPS) {
		uint64_t median, p90;

		dl_fold_percentiles(&p->durations, &median, &p90);
		if ((double)st->dur_ns > t->step_factor * (double)median) {
			snprintf(why, len, "slow-step %u of pid %d: %.3f ms, %.1fx the median %.3f ms", st->index, st->pid,
				 (double)st->dur_ns / 1e6, (double)st->dur_ns / (double)median, (double)median / 1e6);
			fire = true;
		}
	}
	if (t->step_factor > 0)
		dl_fold_add(&p->durations, st, true);
	if (t->on_verdict) {
		char change[128];

		/* The period's state moves on either way; a slow step that also changed it is said as slow. */
		if (verdict_changed(t, p, st, change, sizeof(change)) && !fire) {
			snprintf(why, len, "%s", change);
			fire = true;
		}
	}
	return fire;
}
