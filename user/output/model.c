// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "output/model.h"
#include "util.h"

/* The tracked process pid's call sites, or NULL. */
static const struct dl_sites *sites_of(const struct dl_report_model *m, pid_t pid)
{
	for (size_t i = 0; i < m->nsteps; i++)
		if (m->steps[i].p->pid == pid)
			return &m->steps[i].p->sites;
	return NULL;
}

static void build_steps(struct dl_report_model *m, const struct dl_correlator *c)
{
	size_t keep = dl_corr_options(c)->keep_steps;

	m->steps = dl_xcalloc(dl_corr_nprocs(c) + 1, sizeof(*m->steps));
	for (size_t i = 0; i < dl_corr_nprocs(c); i++) {
		const struct dl_corr_proc *p = dl_corr_proc(c, i);
		struct dl_report_steps *rs = &m->steps[m->nsteps++];

		rs->p = p;
		rs->total = dl_corr_steps_total(p);
		rs->sync_every = dl_corr_sync_every(p);
		rs->unlisted = keep && p->nsteps > keep ? p->nsteps - keep : 0;
		if (p->decided)
			dl_corr_stats(c, p, &rs->st);
	}
	dl_corr_stats(c, NULL, &m->all);
}

void dl_report_model_build(struct dl_report_model *m, const struct dl_summary *s, const struct dl_correlator *c,
			   const struct dl_diagnosis *d)
{
	memset(m, 0, sizeof(*m));
	m->sum = s;
	m->diag = d;
	m->start_ns = s->start_ts ? s->start_ts : s->first_ts;
	m->duration_ns = dl_summary_duration(s);
	m->events = dl_summary_kernel_events(s);
	m->drops_total = s->drops_total;
	memcpy(m->drops, s->drops, sizeof(m->drops));
	m->recursion_misses = s->recursion_misses;
	m->prog_misses = s->prog_misses.v;
	m->nprog_misses = s->prog_misses.n;
	m->async_io_bytes = s->async_io_bytes;
	m->async_io_ops = s->async_io_ops;
	m->async_io_unseen = s->async_io_unseen;
	m->overhead = s->overhead;
	m->no_cuda = !dl_summary_cuda_loaded(s);
	if (c)
		build_steps(m, c);
	m->procs = dl_xcalloc(s->n ? s->n : 1, sizeof(*m->procs));
	for (size_t i = 0; i < s->n; i++) {
		struct dl_report_proc *rp = &m->procs[m->nprocs++];

		rp->fig = &s->procs[i];
		rp->bystander = dl_proc_bystander(s, rp->fig);
		m->nbystanders += rp->bystander;
		rp->sites = sites_of(m, rp->fig->pid);
		rp->kdur = c ? dl_corr_kdur(c, rp->fig->pid) : NULL;
	}
}

const struct dl_proc *dl_report_model_find(const struct dl_report_model *m, pid_t pid)
{
	return m->sum ? dl_summary_find(m->sum, pid) : NULL;
}

void dl_report_model_free(struct dl_report_model *m)
{
	for (size_t i = 0; i < m->nsteps; i++)
		if (m->steps[i].p->decided)
			dl_fold_free(&m->steps[i].st.sum);
	if (m->steps)
		dl_fold_free(&m->all.sum);
	free(m->steps);
	free(m->procs);
	memset(m, 0, sizeof(*m));
}
