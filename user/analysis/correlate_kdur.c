// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Drain windows for the inferred kernel durations (analysis/kdur.h).
 *
 * A window runs from the first enqueue after the device was last known empty
 * (every stream of the device model drained) to the call that drains it
 * again. It is an equation only when:
 *   - one stream held its work: kernels of two streams may overlap on the
 *     device, and then the elapsed time says nothing of their sum;
 *   - every item is a column: kernels by name and copies by bytes; graph
 *     launches, memsets and collectives have no column, so their windows go;
 *   - the drain is a blocking call of the main thread that found kernels
 *     outstanding at its entry (the device was still running them), whose
 *     thread's last wake-up inside it is known from its scheduler states.
 * Its device time b is from the first enqueue to that wake-up. That is the
 * device's time only if it ran the window's work back to back from the first
 * enqueue, i.e. the host queued it faster than the device ran it -- the case
 * in which a blocking call finds work outstanding, but not proven by it: a
 * host that launched slower than the device ran leaves idle gaps in b, and
 * the estimates are then high. What every window holds besides (its copies'
 * fixed cost, launch latency, the time from the device's completion to the
 * thread's wake-up) is the constant column; a spread of it across windows is
 * the fit's residual.
 */
#include <stdio.h>
#include <string.h>
#include "analysis/correlate_int.h"

#define MAX_PENDING_WINDOWS 4096   /* closed windows waiting for steps to finalize; more are skipped */
#define KDUR_OFFCPU_DIV 50         /* the host off-CPU over 1/50 of a window's time while enqueuing: skipped */

int dl_corr_kdur_column(struct cproc *p, const struct dl_call *k)
{
	char hex[32];
	int col;

	/* Named as the summary names it at its first launch, so the report finds it by name. */
	if (!k->kernel)
		snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)k->func);
	col = dl_kdur_column(&p->pub.kdur, k->kernel ? k->kernel : hex);
	return col < 0 ? 0 : col;
}

static size_t open_streams(const struct dl_devq *q, uint64_t *key, uint64_t *since)
{
	size_t n = 0;

	for (size_t i = 0; i < q->streams.n; i++) {
		const struct dl_devq_stream *s = &q->streams.v[i];

		if (!s->open)
			continue;
		if (!n || s->open_since < *since)
			*since = s->open_since;
		*key = s->key;
		n++;
	}
	return n;
}

static void add_enqueue(struct dl_kdur_open *w, const struct mcall *m)
{
	switch (m->cls) {
	case DL_CLS_LAUNCH:
		if (m->kcol)
			w->row[m->kcol] += 1;
		else
			w->unusable = true;
		break;
	case DL_CLS_COPY:
		if (m->ok && m->dir >= DL_DIR_H2D && m->dir <= DL_DIR_D2D)
			w->row[DL_KDUR_COL_BYTES + m->dir - DL_DIR_H2D] += (double)m->bytes / (1 << 20);
		break;
	case DL_CLS_GRAPH:
		w->unusable = true;
		break;
	case DL_CLS_MEMSET:
	case DL_CLS_COMM:
		w->unusable |= m->ok;
		break;
	default:
		break;
	}
}

void dl_corr_kdur_call(struct cproc *p, const struct cevent *e, const struct mcall *m)
{
	struct dl_kdur_open *w = &p->kdur.open;
	struct dl_devq_call dc = { .cls = m->cls, .dir = m->dir, .async = m->async };
	uint64_t key = 0, since = 0;
	size_t nopen = open_streams(&p->hist.devq, &key, &since);
	struct dl_kdur_window *kw;

	if (!w->open) {
		if (!nopen)
			return;
		memset(w, 0, sizeof(*w));
		w->open = true;
		w->key = key;
		w->since = since;
	}
	if (nopen > 1 || (nopen == 1 && key != w->key))
		w->unusable = true;
	add_enqueue(w, m);
	if (nopen)
		return;
	w->open = false;
	if (w->unusable || e->tid != p->pub.main_tid || !m->ok || m->waited != DL_DEVQ_COMPUTE ||
	    !dl_devq_blocking(&dc)) {
		p->pub.kdur.skipped++;
		return;
	}
	if (p->kdur.windows.n >= MAX_PENDING_WINDOWS) {
		p->pub.kdur.skipped++;
		return;
	}
	kw = dl_vec_push(&p->kdur.windows);
	kw->since = w->since;
	kw->start = m->start;
	kw->end = m->end;
	memcpy(kw->row, w->row, sizeof(kw->row));
	kw->row[DL_KDUR_COL_WINDOW] = 1;
}

/* The main thread's time off-CPU (runnable, asleep, in D) in [a, b). */
static uint64_t off_cpu(const struct dl_span *sched, size_t nsched, uint64_t a, uint64_t b)
{
	uint64_t off = 0;

	for (size_t k = dl_spans_first_after(sched, nsched, a); k < nsched && sched[k].start < b; k++)
		if (sched[k].kind != DL_ST_RUNNING)
			off += dl_min_u64(sched[k].end, b) - dl_max_u64(sched[k].start, a);
	return off;
}

/* When the window's work was done (dl_devq_done); 0: not known. */
static uint64_t window_done(const struct dl_kdur_window *w, const struct dl_span *sched, size_t nsched)
{
	return dl_devq_done(sched, nsched, w->start, w->end, true, 0, false);
}

void dl_corr_kdur_finalize(struct cproc *p, const struct dl_span *sched, size_t nsched, uint64_t end)
{
	size_t k;

	for (k = 0; k < p->kdur.windows.n && p->kdur.windows.v[k].end <= end; k++) {
		const struct dl_kdur_window *w = &p->kdur.windows.v[k];
		uint64_t done = window_done(w, sched, nsched), b = done > w->since ? done - w->since : 0;

		/*
		 * A host off its CPU while it enqueued may have let the device run
		 * dry: the window would hold that idle time. Beyond a small share of
		 * it the window goes.
		 */
		if (!b || off_cpu(sched, nsched, w->since, w->start) * KDUR_OFFCPU_DIV > b) {
			p->pub.kdur.skipped++;
			continue;
		}
		dl_kdur_add(&p->pub.kdur, w->row, (double)b);
	}
	dl_vec_drop_front(&p->kdur.windows, k);
}

const struct dl_kdur *dl_corr_kdur(const struct dl_correlator *c, pid_t pid)
{
	for (size_t i = 0; i < c->procs.n; i++)
		if (c->procs.v[i].pub.pid == pid)
			return c->calls_lost ? NULL : &c->procs.v[i].pub.kdur;
	return NULL;
}
