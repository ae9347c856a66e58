// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "output/model.h"
#include "util.h"

void dl_report_model_build(struct dl_report_model *m, const struct dl_summary *s, const struct dl_correlator *c,
			   const struct dl_diagnosis *d)
{
	memset(m, 0, sizeof(*m));
	m->sum = s;
	m->corr = c;
	m->diag = d;
	if (!c)
		return;
	m->steps = dl_xcalloc(dl_corr_nprocs(c) + 1, sizeof(*m->steps));
	for (size_t i = 0; i < dl_corr_nprocs(c); i++) {
		const struct dl_corr_proc *p = dl_corr_proc(c, i);

		if (!p->decided)
			continue;
		m->steps[m->nsteps].p = p;
		dl_corr_stats(c, p, &m->steps[m->nsteps].st);
		m->nsteps++;
	}
	dl_corr_stats(c, NULL, &m->all);
}

const struct dl_step_stats *dl_report_model_stats(const struct dl_report_model *m, const struct dl_corr_proc *p)
{
	for (size_t i = 0; i < m->nsteps; i++)
		if (m->steps[i].p == p)
			return &m->steps[i].st;
	return NULL;
}

void dl_report_model_free(struct dl_report_model *m)
{
	for (size_t i = 0; i < m->nsteps; i++)
		dl_fold_free(&m->steps[i].st.sum);
	if (m->corr)
		dl_fold_free(&m->all.sum);
	free(m->steps);
	memset(m, 0, sizeof(*m));
}
