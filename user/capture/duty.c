// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "capture/duty.h"
#include "records/clock.h"
#include "log.h"

static bool hot_api(const struct dl_api *api)
{
	return api && (api->cls == DL_CLS_LAUNCH || api->cls == DL_CLS_COPY);
}

int dl_duty_parse(const char *s, unsigned *on_s, unsigned *period_s)
{
	char *end;
	unsigned long m, n;

	/* strtoul alone would take " 1", "+1" and "-1" (as ULONG_MAX): digits only. */
	errno = 0;
	if (!isdigit((unsigned char)*s))
		return -1;
	m = strtoul(s, &end, 10);
	if (errno || end == s || *end != '/')
		return -1;
	s = end + 1;
	if (!isdigit((unsigned char)*s))
		return -1;
	n = strtoul(s, &end, 10);
	if (errno || end == s || *end || m == 0 || n <= m || n > 86400)
		return -1;
	*on_s = (unsigned)m;
	*period_s = (unsigned)n;
	return 0;
}

static void totals(const struct dl_summary *s, uint64_t v[DL_DUTY_NVALS])
{
	memset(v, 0, DL_DUTY_NVALS * sizeof(*v));
	for (size_t i = 0; i < s->n; i++) {
		const struct dl_proc *p = &s->procs[i];

		for (int a = 1; a < DL_API_COUNT; a++)
			v[a] += p->calls[a].count;
		for (int dir = 0; dir < DL_DIR_COUNT; dir++) {
			v[DL_API_COUNT + dir] += p->copies[dir].count;
			v[DL_API_COUNT + DL_DIR_COUNT + dir] += p->copies[dir].bytes;
		}
	}
}

static void open_window(struct dl_duty *d, const struct dl_hot_edges *e)
{
	struct dl_duty_window *w = dl_vec_push(&d->windows);

	memcpy(w->start_lo, e->lo, sizeof(w->start_lo));
	memcpy(w->start_hi, e->hi, sizeof(w->start_hi));
}

void dl_duty_start(struct dl_duty *d, unsigned on_s, unsigned period_s, uint64_t t0, uint64_t attached)
{
	memset(d, 0, sizeof(*d));
	d->on_s = on_s;
	d->period_s = period_s;
	d->t0 = t0;
	d->on = true;
	struct dl_hot_edges e;

	d->next_toggle = t0 + (uint64_t)on_s * 1000000000ull;
	for (int c = 0; c < DL_HOT_CLASSES; c++) {
		e.lo[c] = t0;
		e.hi[c] = attached;
	}
	open_window(d, &e);
}

static void close_window(struct dl_duty *d, struct dl_tracer *t, const struct dl_summary *s,
			 dl_duty_sync_fn sync, void *ctx, uint64_t lo, bool detach)
{
	struct dl_duty_window *w = &d->windows.v[d->windows.n - 1];
	uint64_t now[DL_DUTY_NVALS];

	struct dl_hot_edges e;

	for (int c = 0; c < DL_HOT_CLASSES; c++)
		e.lo[c] = e.hi[c] = lo;
	if (detach) {
		int err = dl_tracer_set_hot(t, false, &e);

		if (err && !d->err)
			d->err = err;
	}
	memcpy(w->end_lo, e.lo, sizeof(w->end_lo));
	memcpy(w->end_hi, e.hi, sizeof(w->end_hi));
	/* Everything the window produced is in the ring buffer or the aggregates now. */
	sync(ctx);
	totals(s, now);
	for (int i = 0; i < DL_DUTY_NVALS; i++)
		w->v[i] = now[i] - d->snap[i];
	memcpy(d->snap, now, sizeof(now));
	d->on = false;
}

void dl_duty_tick(struct dl_duty *d, struct dl_tracer *t, uint64_t now, const struct dl_summary *s,
		  dl_duty_sync_fn sync, void *ctx)
{
	uint64_t period = (uint64_t)d->period_s * 1000000000ull, on = (uint64_t)d->on_s * 1000000000ull;

	if (now < d->next_toggle)
		return;
	if (d->on) {
		const struct dl_duty_window *w = &d->windows.v[d->windows.n - 1];

		close_window(d, t, s, sync, ctx, now, true);
		/* Phase-locked to the start: a slow detach shortens the off time, not the schedule. */
		d->next_toggle = d->t0 + ((now - d->t0) / period + 1) * period;
		dl_debug("duty: hot probes off (launch entry probes detached in %.1f ms)",
			 (double)(w->end_hi[0] - w->end_lo[0]) / 1e6);
		return;
	}
	sync(ctx);
	totals(s, d->snap);  /* cold-only counts that arrived while off are not the next window's */
	{
		struct dl_hot_edges e;
		int err = dl_tracer_set_hot(t, true, &e);

		if (err && !d->err)
			d->err = err;
		open_window(d, &e);
	}
	d->on = true;
	d->next_toggle = d->t0 + (now - d->t0) / period * period + on;
	dl_debug("duty: hot probes on");
}

void dl_duty_finish(struct dl_duty *d, struct dl_tracer *t, uint64_t end, const struct dl_summary *s,
		    dl_duty_sync_fn sync, void *ctx)
{
	uint64_t now = dl_now_ns();

	end = dl_summary_trace_end(s, d->t0, end);
	d->t_end = end < now ? end : now;
	if (d->on)
		close_window(d, t, s, sync, ctx, d->t_end, false);
	/* The job may have ended inside a window: nothing was observed past its end. */
	for (size_t i = 0; i < d->windows.n; i++) {
		struct dl_duty_window *w = &d->windows.v[i];

		for (int c = 0; c < DL_HOT_CLASSES; c++) {
			if (w->end_lo[c] > d->t_end)
				w->end_lo[c] = d->t_end;
			if (w->end_hi[c] > d->t_end)
				w->end_hi[c] = d->t_end;
			if (w->start_hi[c] > w->end_lo[c])
				w->start_hi[c] = w->end_lo[c];
			if (w->start_lo[c] > w->start_hi[c])
				w->start_lo[c] = w->start_hi[c];
		}
	}
}

void dl_duty_estimate(const struct dl_duty *d, int i, struct dl_duty_estimate *e)
{
	double T = (double)(d->t_end - d->t0), W = 0, Wlo = 0, Whi = 0, C = 0, rbar, var = 0, samp, hb;
	const struct dl_api *api = i < DL_API_COUNT ? dl_api_by_id((unsigned)i) : NULL;
	int c = api && api->cls == DL_CLS_LAUNCH ? DL_HOT_LAUNCH : DL_HOT_COPY;
	size_t used = 0;

	memset(e, 0, sizeof(*e));
	for (size_t k = 0; k < d->windows.n; k++) {
		const struct dl_duty_window *w = &d->windows.v[k];

		Wlo += (double)(w->end_lo[c] - w->start_hi[c]);
		Whi += (double)(w->end_hi[c] - w->start_lo[c]);
		C += (double)w->v[i];
	}
	if (T <= 0)
		return;
	/*
	 * The kernel installs a uprobe_multi link's breakpoints at the end of the
	 * attach and removes them at the start of the detach (the rest of a
	 * 22-76 ms detach waits for a grace period): a window is on from the end of
	 * its attach to the start of its detach. Measured: the counts seen match that
	 * span within a fraction of a percent (tests/integration/test_modes.py).
	 * Half the full bracket is kept as the boundary uncertainty.
	 */
	W = Wlo;
	if (W <= 0)
		return;
	e->observed = W / T;
	e->seen = C;
	e->scaled = C * T / W;
	hb = (C * T / Wlo - C * T / Whi) / 2;
	/* The unobserved time is estimated from the windows' rates: their spread bounds the error. */
	rbar = C / W;
	for (size_t k = 0; k < d->windows.n; k++) {
		const struct dl_duty_window *w = &d->windows.v[k];
		double wd = (double)(w->end_lo[c] - w->start_hi[c]);

		if (wd < 0.2 * (double)d->on_s * 1e9 || wd <= 0)
			continue;  /* a window cut short by the end of the job says little about the rate */
		var += (C ? ((double)w->v[i] / wd - rbar) * ((double)w->v[i] / wd - rbar) : 0);
		used++;
	}
	if (used >= 2) {
		double se = sqrt(var / (double)(used - 1) / (double)used);

		samp = 2 * se * T * sqrt(1 - (e->observed < 1 ? e->observed : 1));
	} else {
		samp = 0;
	}
	/* Counting noise, as if calls were independent: a floor when windows agree exactly. */
	samp = sqrt(samp * samp + 4 * C * (1 - (e->observed < 1 ? e->observed : 1)) / (e->observed * e->observed));
	e->uncertainty = sqrt(hb * hb + samp * samp);
}

void dl_duty_report(FILE *f, const struct dl_duty *d, const struct dl_summary *s)
{
	struct dl_duty_estimate e;
	bool any = false;

	(void)s;
	if (!d->windows.n)
		return;
	dl_duty_estimate(d, DL_API_COUNT, &e);
	fprintf(f, "\nduty cycle %u/%u s: launches and copies observed %.1f%% of %.2f s (%zu windows); "
		"their counts above are as observed, scaled here (about 95%% bounds):\n",
		d->on_s, d->period_s, e.observed * 100, (double)(d->t_end - d->t0) / 1e9, d->windows.n);
	for (int a = 1; a < DL_API_COUNT; a++) {
		const struct dl_api *api = dl_api_by_id((unsigned)a);

		dl_duty_estimate(d, a, &e);
		if (!hot_api(api) || !e.seen)
			continue;
		fprintf(f, "  duty-scaled %-28s seen %10.0f  scaled %12.0f +- %.0f\n", api->name, e.seen, e.scaled,
			e.uncertainty);
		any = true;
	}
	for (int dir = 0; dir < DL_DIR_COUNT; dir++) {
		struct dl_duty_estimate b;

		dl_duty_estimate(d, DL_API_COUNT + dir, &e);
		dl_duty_estimate(d, DL_API_COUNT + DL_DIR_COUNT + dir, &b);
		if (!e.seen)
			continue;
		fprintf(f, "  duty-scaled memcpy %-4s copies %.0f +- %.0f, bytes %.0f +- %.0f\n", dl_dir_name(dir),
			e.scaled, e.uncertainty, b.scaled, b.uncertainty);
		any = true;
	}
	if (!any)
		fprintf(f, "  no launches or copies seen while the probes were on\n");
	fprintf(f, "  fully observed windows (s from start):");
	for (size_t k = 0; k < d->windows.n; k++)
		fprintf(f, " [%.3f-%.3f]", (double)(d->windows.v[k].start_hi[DL_HOT_COPY] - d->t0) / 1e9,
			(double)(d->windows.v[k].end_lo[DL_HOT_COPY] - d->t0) / 1e9);
	fputc('\n', f);
	if (d->err)
		fprintf(f, "  warning: attaching or detaching the hot probes failed (%s): estimates are low\n",
			strerror(-d->err));
}

void dl_duty_free(struct dl_duty *d)
{
	dl_vec_free(&d->windows);
	memset(d, 0, sizeof(*d));
}
