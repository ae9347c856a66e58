// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include "capture/aggregate.h"
#include "capture/budget.h"
#include "capture/duty.h"
#include "capture/modes.h"
#include "capture/tracer.h"
#include "util.h"

/* Per-call records: everything comes through the stream, nothing to do. */
const struct dl_mode_ops dl_mode_records = { .name = "records" };

/* --summary */
static void *agg_alloc(void)
{
	return dl_xcalloc(1, sizeof(struct dl_agg));
}

static int agg_init(void *st, const struct dl_mode_opts *o, struct dl_mode_env *env)
{
	(void)o;
	return dl_agg_init(st, dl_tracer_agg_fd(env->tracer));
}

static void agg_fill(void *st, struct dl_mode_env *env, uint64_t now)
{
	dl_agg_poll(st, env->sum, env->symbolizer, env->stream, now);
}

static void agg_report(void *st, const struct dl_mode_env *env, FILE *out)
{
	(void)env;
	dl_agg_report(out, st);
}

static void agg_free(void *st)
{
	dl_agg_free(st);
	free(st);
}

const struct dl_mode_ops dl_mode_summary = {
	.name = "summary", .alloc = agg_alloc, .init = agg_init, .fill_summary = agg_fill, .report = agg_report,
	.free = agg_free,
};

/* --duty */
static void *duty_alloc(void)
{
	return dl_xcalloc(1, sizeof(struct dl_duty));
}

static int duty_init(void *st, const struct dl_mode_opts *o, struct dl_mode_env *env)
{
	(void)st, (void)o;
	dl_tracer_split_hot(env->tracer);
	return 0;
}

static void duty_start(void *st, const struct dl_mode_opts *o, uint64_t t0, uint64_t now)
{
	dl_duty_start(st, o->duty_on_s, o->duty_period_s, t0, now);
}

static void duty_tick(void *st, struct dl_mode_env *env, uint64_t now)
{
	dl_duty_tick(st, env->tracer, now, env->sum, env->sync, env->sync_ctx);
}

static void duty_finish(void *st, struct dl_mode_env *env, uint64_t end)
{
	dl_duty_finish(st, env->tracer, end, env->sum, env->sync, env->sync_ctx);
}

static void duty_report(void *st, const struct dl_mode_env *env, FILE *out)
{
	dl_duty_report(out, st, env->sum);
}

static void duty_free(void *st)
{
	dl_duty_free(st);
	free(st);
}

const struct dl_mode_ops dl_mode_duty = {
	.name = "duty", .alloc = duty_alloc, .init = duty_init, .start = duty_start, .tick = duty_tick,
	.finish = duty_finish, .report = duty_report, .free = duty_free,
};

/* --overhead-budget */
static void *budget_alloc(void)
{
	return dl_xcalloc(1, sizeof(struct dl_budget));
}

static int budget_init(void *st, const struct dl_mode_opts *o, struct dl_mode_env *env)
{
	dl_budget_init(st, o->overhead_budget, env->tracer);
	return 0;
}

static void budget_start(void *st, const struct dl_mode_opts *o, uint64_t t0, uint64_t now)
{
	(void)o;
	dl_budget_start(st, t0, now);
}

static void budget_tick(void *st, struct dl_mode_env *env, uint64_t now)
{
	dl_budget_tick(st, env->tracer, now, env->sum, env->sync, env->sync_ctx);
}

static void budget_finish(void *st, struct dl_mode_env *env, uint64_t end)
{
	dl_budget_finish(st, env->tracer, end, env->sum, env->sync, env->sync_ctx);
}

static void budget_report(void *st, const struct dl_mode_env *env, FILE *out)
{
	(void)env;
	dl_budget_report(out, st);
}

static void budget_free(void *st)
{
	dl_budget_free(st);
	free(st);
}

const struct dl_mode_ops dl_mode_budget = {
	.name = "overhead-budget", .alloc = budget_alloc, .init = budget_init, .start = budget_start,
	.tick = budget_tick, .finish = budget_finish, .report = budget_report, .observed = dl_budget_observed,
	.free = budget_free,
};

/* --- the list --- */

static void add(struct dl_modes *m, const struct dl_mode_ops *ops)
{
	m->ops[m->n] = ops;
	m->st[m->n] = ops->alloc ? ops->alloc() : NULL;
	m->n++;
}

void dl_modes_of(struct dl_modes *m, bool summary, const struct dl_mode_opts *o)
{
	*m = (struct dl_modes){ .o = *o };
	add(m, summary ? &dl_mode_summary : &dl_mode_records);
	if (o->duty_on_s)
		add(m, &dl_mode_duty);
	if (o->overhead_budget > 0)
		add(m, &dl_mode_budget);
}

int dl_modes_init(struct dl_modes *m, struct dl_mode_env *env)
{
	for (int i = 0; i < m->n; i++) {
		int err = m->ops[i]->init ? m->ops[i]->init(m->st[i], &m->o, env) : 0;

		if (err)
			return err;
	}
	return 0;
}

void dl_modes_start(struct dl_modes *m, uint64_t t0, uint64_t now)
{
	for (int i = 0; i < m->n; i++)
		if (m->ops[i]->start)
			m->ops[i]->start(m->st[i], &m->o, t0, now);
}

void dl_modes_tick(struct dl_modes *m, struct dl_mode_env *env, uint64_t now)
{
	for (int i = 0; i < m->n; i++)
		if (m->ops[i]->tick)
			m->ops[i]->tick(m->st[i], env, now);
}

void dl_modes_finish(struct dl_modes *m, struct dl_mode_env *env, uint64_t end)
{
	for (int i = 0; i < m->n; i++)
		if (m->ops[i]->finish)
			m->ops[i]->finish(m->st[i], env, end);
}

void dl_modes_fill(struct dl_modes *m, struct dl_mode_env *env, uint64_t now)
{
	for (int i = 0; i < m->n; i++)
		if (m->ops[i]->fill_summary)
			m->ops[i]->fill_summary(m->st[i], env, now);
}

void dl_modes_report(struct dl_modes *m, const struct dl_mode_env *env, FILE *out)
{
	for (int i = 0; i < m->n; i++)
		if (m->ops[i]->report)
			m->ops[i]->report(m->st[i], env, out);
}

bool dl_modes_partial(const struct dl_modes *m)
{
	for (int i = 0; i < m->n; i++)
		if (m->ops[i]->observed)
			return true;
	return false;
}

bool dl_modes_observed(void *modes, uint64_t start_ns, uint64_t end_ns)
{
	struct dl_modes *m = modes;

	for (int i = 0; i < m->n; i++)
		if (m->ops[i]->observed && !m->ops[i]->observed(m->st[i], start_ns, end_ns))
			return false;
	return true;
}

void dl_modes_free(struct dl_modes *m)
{
	for (int i = 0; i < m->n; i++) {
		if (m->ops[i]->free)
			m->ops[i]->free(m->st[i]);
		m->st[i] = NULL;
	}
	m->n = 0;
}
