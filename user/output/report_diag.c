// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include "output/report_diag.h"
#include "output/report_lineage.h"
#include "output/report_sites.h"
#include "strsafe.h"

#define STEP_LINE_INTERVAL_NS 200000000ull

/* The categories of a step by time, largest first. */
static void top_cats(const uint64_t cat_ns[DL_CAT_COUNT], int order[DL_CAT_COUNT])
{
	for (int i = 0; i < DL_CAT_COUNT; i++)
		order[i] = i;
	for (int i = 1; i < DL_CAT_COUNT; i++)
		for (int k = i; k > 0 && cat_ns[order[k]] > cat_ns[order[k - 1]]; k--) {
			int t = order[k];

			order[k] = order[k - 1];
			order[k - 1] = t;
		}
}

void dl_print_step(void *printer, const struct dl_step *st)
{
	struct dl_step_printer *pr = printer;
	int order[DL_CAT_COUNT];

	/* Bounded by stream time, not wall time, so a replay prints the same lines. */
	if (st->index >= 3 && st->start_ns < pr->last_ts + STEP_LINE_INTERVAL_NS) {
		pr->skipped++;
		return;
	}
	pr->last_ts = st->start_ns;
	top_cats(st->cat_ns, order);
	if (pr->clear_status)
		fputs("\r\033[K", stderr);
	fprintf(pr->f, "step %4u  pid %-7d %8.2f ms ", st->index, st->pid, (double)st->dur_ns / 1e6);
	for (int i = 0; i < 3 && st->cat_ns[order[i]]; i++)
		fprintf(pr->f, " %s %2.0f%%", dl_cat_name(order[i]),
			100.0 * (double)st->cat_ns[order[i]] / (double)(st->dur_ns ? st->dur_ns : 1));
	fprintf(pr->f, "  %s", dl_verdict_name(st->verdict));
	if (pr->skipped)
		fprintf(pr->f, "  (+%" PRIu64 " steps not shown)", pr->skipped);
	fputc('\n', pr->f);
	fflush(pr->f);
	pr->skipped = 0;
}

const char *dl_step_confidence(double cv, uint64_t n)
{
	if (n < 3)
		return "low (fewer than 3 steps)";
	return cv < 0.25 ? "high" : cv < 0.5 ? "medium" : "low (irregular steps)";
}

const char *dl_marker_sure_name(enum dl_marker_sure s)
{
	return s == DL_SURE_HIGH ? "high" : s == DL_SURE_MEDIUM ? "medium" : "low";
}

static double repeat_share(const struct dl_step_learning *l)
{
	return l->periods > 1 ? (double)l->repeating / (double)(l->periods - 1) : 0;
}

/* How the steps were found, when not from syncs, and how often they sync: the two differ when a loop seldom syncs. */
static void text_learning(FILE *f, const struct dl_report_steps *rs)
{
	const struct dl_step_learning *l = &rs->p->learning;
	const struct dl_sync_cadence *sc = &rs->p->syncs;
	uint32_t every = rs->sync_every;

	if (l->how == DL_LEARNED_AUTOGRAD)
		fprintf(f, "  learned  from PyTorch's backward passes, the job calling no CUDA: confidence %s (%u of %u "
			   "backward passes on the main thread, their intervals' CV %.2f; a step is one backward pass, "
			   "--step-on FUNCTION marks another)\n", dl_marker_sure_name(l->sure), l->main_marks, l->marks,
			l->mark_cv);
	if (l->how == DL_LEARNED_PERIOD)
		fprintf(f, "  learned  from the call sequence's period, not from syncs: %u calls a step; %u of %u "
			   "periods repeat the one before (%.0f%%)\n", l->period_calls, l->repeating,
			l->periods ? l->periods - 1 : 0, 100 * repeat_share(l));
	if (!sc->steps)
		return;
	if (!sc->synced)
		fprintf(f, "  syncs    none inside the steps (a blocking sync only before or after them)\n");
	else if (every == 1)
		fprintf(f, "  syncs    every step (%" PRIu64 " of %" PRIu64 " steps hold a blocking sync)\n",
			sc->synced, sc->steps);
	else if (every)
		fprintf(f, "  syncs    every %u steps (%" PRIu64 " of %" PRIu64 " steps hold a blocking sync)\n", every,
			sc->synced, sc->steps);
	else
		fprintf(f, "  syncs    in %" PRIu64 " of %" PRIu64 " steps%s\n", sc->synced, sc->steps,
			sc->synced > 1 ? ", irregularly" : "");
}

/* Steps the totals leave out: outliers, and a start-up cut by a marker given up. */
static void text_left_out(FILE *f, const struct dl_corr_proc *p, const struct dl_step_stats *st, struct dl_sbuf *esc)
{
	const struct dl_step_startup *su = &p->startup;

	if (st->outliers) {
		fprintf(f, "  outliers %" PRIu64 " step%s (%.2f ms in all; step", st->outliers, st->outliers > 1 ? "s" : "",
			(double)st->outlier_ns / 1e6);
		for (uint64_t k = 0; k < st->outliers && k < DL_OUTLIERS_LISTED; k++)
			fprintf(f, "%s %u", k ? "," : "", st->outlier_index[k]);
		fprintf(f, "%s) over %dx the p90 of the others, left out of the totals and the verdict: one-offs such "
			   "as the loaders' start, a checkpoint or a stall\n", st->outliers > DL_OUTLIERS_LISTED ? ", ..." : "",
			DL_OUTLIER_P90);
	}
	if (st->sum.partial)
		fprintf(f, "  partial  %" PRIu64 " step%s not inside a launch window (--overhead-budget): in the median "
			   "and p90, left out of the totals and the verdict\n", st->sum.partial, st->sum.partial > 1 ? "s" : "");
	if (su->relearned)
		fprintf(f, "  start-up %" PRIu64 " steps (%.2f ms) cut by a marker that then stopped recurring (%s) are "
			   "left out; the steps were learned again from the calls after them\n",
			su->steps, (double)su->dur_ns / 1e6, dl_text(esc, su->first_marker));
}

/*
 * Each device's bounds, as means over the steps listed, when the process used
 * more than one; the device the host waited on longest (the highest lower
 * bound) is the one that limits the step.
 */
static void text_devices(FILE *f, const struct dl_corr_proc *p)
{
	uint64_t lo[DL_STEP_DEVICES] = { 0 }, hi[DL_STEP_DEVICES] = { 0 };
	uint32_t ndev = p->nsteps ? p->steps[p->nsteps - 1].ndevices : 0, top = 0;

	if (!ndev)
		return;
	for (size_t i = 0; i < p->nsteps; i++)
		for (uint32_t d = 0; d < ndev && d < p->steps[i].ndevices; d++) {
			lo[d] += p->steps[i].dev_busy_lo_ns[d];
			hi[d] += p->steps[i].dev_busy_hi_ns[d];
		}
	fprintf(f, "  GPU busy per device, ms per step (the %zu steps listed):", p->nsteps);
	for (uint32_t d = 0; d < ndev; d++) {
		fprintf(f, "%s %u: %.1f-%.1f", d ? "," : "", d, (double)lo[d] / 1e6 / (double)p->nsteps,
			(double)hi[d] / 1e6 / (double)p->nsteps);
		if (lo[d] > lo[top])
			top = d;
	}
	fprintf(f, "; device %u limits (the host waits on it longest)\n", top);
}

void dl_report_steps_text(FILE *f, const struct dl_report_model *m)
{
	const struct dl_diagnosis *d = m->diag;
	struct dl_sbuf esc = { 0 };

	for (size_t i = 0; i < m->nsteps; i++) {
		const struct dl_corr_proc *p = m->steps[i].p;
		struct dl_step_stats st;
		uint64_t n, total, counted;

		if (!p->decided)
			continue;
		fprintf(f, "\nSteps of pid %d (main thread %u)\n", p->pid, p->main_tid);
		fprintf(f, "  marker   %s\n", dl_text(&esc, p->marker_desc));   /* holds a symbol's name */
		text_learning(f, &m->steps[i]);
		n = m->steps[i].total;
		if (!n) {
			fprintf(f, "  no complete step\n");
			continue;
		}
		st = m->steps[i].st;   /* the model's: not freed here */
		total = st.sum.dur_ns;
		/* Means over the steps the totals hold (outliers are left out of both). */
		counted = st.sum.n ? st.sum.n : 1;
		fprintf(f, "  steps    %" PRIu64 ", median %s%.2f ms, p90 %s%.2f ms, confidence %s (CV %.2f)\n", n,
			st.exact ? "" : "~", (double)st.median_ns / 1e6, st.exact ? "" : "~", (double)st.p90_ns / 1e6,
			dl_step_confidence(st.cv, st.sum.n), st.cv);
		text_left_out(f, p, &st, &esc);
		if (!st.exact)
			fprintf(f, "  kept     the last %zu steps in full, %" PRIu64 " older ones folded into totals "
				"(--keep-steps); ~: within %.1f%%\n", p->nsteps, p->folded.n + p->nheld, 100 * DL_FOLD_REL_ERR);
		/* A job that never loaded a CUDA runtime has no GPU to be busy or idle. */
		if (!m->no_cuda) {
			/* Bounds, not a measurement: the device-queue model's, from the host's calls alone. */
			fprintf(f, "  GPU busy %.1f-%.1f ms of %.1f per step (%.0f-%.0f%%), inferred from the host's calls\n",
				(double)st.sum.gpu_busy_lo_ns / 1e6 / (double)counted, (double)st.sum.gpu_busy_hi_ns / 1e6 / (double)counted,
				(double)total / 1e6 / (double)counted, dl_pct(st.sum.gpu_busy_lo_ns, total),
				dl_pct(st.sum.gpu_busy_hi_ns, total));
			text_devices(f, p);
			fprintf(f, "  GPU idle %.1f ms of %.1f per step: host %.1f, input %.1f, sync %.1f\n",
				(double)(total - st.sum.gpu_busy_hi_ns) / 1e6 / (double)counted, (double)total / 1e6 / (double)counted,
				(double)st.sum.gpu_idle_ns[DL_IDLE_HOST] / 1e6 / (double)counted,
				(double)st.sum.gpu_idle_ns[DL_IDLE_INPUT] / 1e6 / (double)counted,
				(double)st.sum.gpu_idle_ns[DL_IDLE_SYNC] / 1e6 / (double)counted);
		}
		fprintf(f, "  %-12s %12s %7s %12s\n", "category", "total ms", "share", "ms per step");
		for (int k = 0; k < DL_CAT_COUNT; k++) {
			if (m->no_cuda && dl_cat_gpu(k))
				continue;   /* zero without CUDA: the GPU's waits, copies and launches */
			fprintf(f, "  %-12s %12.3f %6.1f%% %12.3f\n", dl_cat_name(k), (double)st.sum.cat_ns[k] / 1e6,
				dl_pct(st.sum.cat_ns[k], total), (double)st.sum.cat_ns[k] / 1e6 / (double)counted);
		}
		dl_report_lineage_text(f, p, m->sum ? &m->sum->pylines : NULL);
		dl_report_sites_text(f, &p->sites, n);
	}
	if (!d->nsteps) {
		fprintf(f, "\nDiagnosis: no steps found, so no verdict (a step needs a repeating marker: "
			   "see --step-on)\n");
	} else {
		fprintf(f, "\nDiagnosis: %s (%s, %.0f%% of step time)\n  %s\n", dl_verdict_name(d->verdict),
			d->severity == DL_SEV_NONE ? "healthy" : dl_severity_name(d->severity), 100 * d->share,
			dl_text(&esc, d->message));
		for (int i = 0; i < d->nsecondary; i++) {
			enum dl_verdict v = d->secondary[i].verdict;
			const struct dl_diag_pylines *py = v == DL_V_INPUT ? &d->py_wait : v == DL_V_HOST ? &d->py_cpu : NULL;
			char where[400];

			fprintf(f, "  also %s: %.0f%% (%s)", dl_verdict_name(v), 100 * d->secondary[i].share,
				dl_severity_name(d->secondary[i].severity));
			if (py && dl_diag_pyline_text(py, where, sizeof(where)))
				fprintf(f, ": the main thread %s at %s", v == DL_V_INPUT ? "waited" : "computed",
					dl_text(&esc, where));
			if (v == DL_V_INPUT && dl_diag_pyline_text(&d->py_others_cpu, where, sizeof(where)))
				fprintf(f, "; the other threads (the loaders) computed most at %s", dl_text(&esc, where));
			fputc('\n', f);
		}
	}
	for (int i = 0; i < d->nfindings; i++)
		fprintf(f, "\n  [%s] %s\n", d->findings[i].rule, dl_text(&esc, d->findings[i].message));   /* names comms */
	dl_sbuf_free(&esc);
}

static void json_step(struct dl_json *j, const struct dl_step *st, const struct dl_sites *sites,
		      const struct dl_report_model *m, int rank)
{
	const struct dl_proc *proc = dl_report_model_find(m, st->pid);

	dl_json_obj_begin(j);
	if (rank >= 0)
		dl_json_ki64(j, "rank", rank);
	dl_json_ku64(j, "index", st->index);
	dl_json_ki64(j, "pid", st->pid);
	dl_json_ki64(j, "tid", st->tid);
	dl_json_ku64(j, "start_ns", st->start_ns);
	dl_json_ku64(j, "dur_ns", st->dur_ns);
	if (st->partial) {
		dl_json_key(j, "partial");
		dl_json_bool(j, true);
	}
	dl_json_key(j, "breakdown_ns");
	dl_json_obj_begin(j);
	for (int k = 0; k < DL_CAT_COUNT; k++)
		dl_json_ku64(j, dl_cat_name(k), st->cat_ns[k]);
	dl_json_obj_end(j);
	dl_json_ku64(j, "io_read_bytes", st->io_read_bytes);
	dl_json_ku64(j, "io_read_ops", st->io_read_ops);
	dl_json_ku64(j, "io_ns", st->io_ns);
	dl_json_ku64(j, "workers_cpu_ns", st->workers_cpu_ns);
	dl_json_ku64(j, "h2d_bytes", st->h2d_bytes);
	dl_json_ku64(j, "d2h_bytes", st->d2h_bytes);
	dl_json_ku64(j, "h2d_copies", st->h2d_copies);
	dl_json_ku64(j, "d2h_copies", st->d2h_copies);
	dl_json_key(j, "h2d_gbps");
	dl_json_double(j, st->cat_ns[DL_CAT_H2D] ? (double)st->h2d_bytes / (double)st->cat_ns[DL_CAT_H2D] : 0);
	dl_json_ku64(j, "small_copies", st->small_copies);
	dl_json_ku64(j, "pageable_copies", st->pageable_copies);
	dl_json_ku64(j, "kernels", st->kernels);
	dl_json_ku64(j, "graph_launches", st->graph_launches);
	dl_json_ku64(j, "graph_kernels", st->graph_kernels);
	dl_json_ku64(j, "collectives", st->collectives);
	dl_json_ku64(j, "comm_bytes", st->comm_bytes);
	dl_json_ku64(j, "comm_wait_after_compute_ns", st->comm_after_compute_ns);
	dl_json_ku64(j, "wakeup_runq_ns", st->wakeup_runq_ns);
	if (!m->no_cuda) {
		/* Bounds on a device: a job that never loaded a CUDA runtime has none. */
		dl_json_key(j, "gpu_busy_ns");
		dl_json_arr_begin(j);
		dl_json_u64(j, st->gpu_busy_lo_ns);
		dl_json_u64(j, st->gpu_busy_hi_ns);
		dl_json_arr_end(j);
	}
	if (st->ndevices) {
		dl_json_key(j, "devices");
		dl_json_arr_begin(j);
		for (uint32_t d = 0; d < st->ndevices; d++) {
			char id[DL_VISIBLE_LEN];

			dl_json_obj_begin(j);
			dl_json_ku64(j, "device", d);
			if (proc && dl_proc_visible_id(proc, d, id, sizeof(id)))
				dl_json_kstr(j, "visible_id", id);
			dl_json_key(j, "gpu_busy_ns");
			dl_json_arr_begin(j);
			dl_json_u64(j, st->dev_busy_lo_ns[d]);
			dl_json_u64(j, st->dev_busy_hi_ns[d]);
			dl_json_arr_end(j);
			dl_json_obj_end(j);
		}
		dl_json_arr_end(j);
	}
	if (!m->no_cuda) {
		dl_json_key(j, "gpu_idle_ns");
		dl_json_obj_begin(j);
		for (int k = 0; k < DL_IDLE_COUNT; k++)
			dl_json_ku64(j, dl_idle_name(k), st->gpu_idle_ns[k]);
		dl_json_obj_end(j);
	}
	dl_json_kstr(j, "verdict", dl_verdict_name(st->verdict));
	dl_json_kstr(j, "severity", dl_severity_name(dl_severity_of(st->verdict, st->share)));
	dl_json_key(j, "share");
	dl_json_double(j, st->share);
	dl_report_step_sites_json(j, st, sites);
	dl_report_step_input_json(j, st, m);
	dl_json_obj_end(j);
}

static void json_learning(struct dl_json *j, const struct dl_report_steps *rs)
{
	const struct dl_corr_proc *p = rs->p;
	static const char *const how[] = { "none", "option", "sync", "period", "autograd" };
	const struct dl_step_learning *l = &p->learning;

	dl_json_kstr(j, "learned_from", how[l->how]);
	dl_json_key(j, "marker_confidence");
	if (l->sure == DL_SURE_NONE) {
		dl_json_null(j);
	} else {
		dl_json_obj_begin(j);
		dl_json_kstr(j, "level", dl_marker_sure_name(l->sure));
		dl_json_ku64(j, "marks", l->marks);
		dl_json_ku64(j, "main_thread_marks", l->main_marks);
		dl_json_key(j, "interval_cv");
		dl_json_double(j, l->mark_cv);
		dl_json_obj_end(j);
	}
	dl_json_key(j, "period");
	if (l->how != DL_LEARNED_PERIOD) {
		dl_json_null(j);
	} else {
		dl_json_obj_begin(j);
		dl_json_ku64(j, "calls", l->period_calls);
		dl_json_ku64(j, "periods", l->periods);
		dl_json_ku64(j, "repeating", l->repeating);
		dl_json_key(j, "repeat_share");
		dl_json_double(j, repeat_share(l));
		dl_json_ku64(j, "synced", l->synced);
		dl_json_obj_end(j);
	}
	dl_json_ku64(j, "synced_steps", p->syncs.synced);
	dl_json_ku64(j, "sync_every_steps", rs->sync_every);
}

static void json_left_out(struct dl_json *j, const struct dl_corr_proc *p, const struct dl_step_stats *st)
{
	const struct dl_step_startup *su = &p->startup;

	dl_json_key(j, "outliers");
	dl_json_obj_begin(j);
	dl_json_ku64(j, "steps", st->outliers);
	dl_json_ku64(j, "dur_ns", st->outlier_ns);
	dl_json_key(j, "cut_ns");
	if (st->outlier_cut_ns == UINT64_MAX)
		dl_json_null(j);
	else
		dl_json_u64(j, st->outlier_cut_ns);
	dl_json_key(j, "indexes");
	dl_json_arr_begin(j);
	for (uint64_t k = 0; k < st->outliers && k < DL_OUTLIERS_LISTED; k++)
		dl_json_u64(j, st->outlier_index[k]);
	dl_json_arr_end(j);
	dl_json_obj_end(j);
	dl_json_key(j, "startup");
	if (!su->relearned) {
		dl_json_null(j);
		return;
	}
	dl_json_obj_begin(j);
	dl_json_ku64(j, "relearned", su->relearned);
	dl_json_ku64(j, "steps", su->steps);
	dl_json_ku64(j, "dur_ns", su->dur_ns);
	dl_json_kstr(j, "first_marker", su->first_marker);
	dl_json_obj_end(j);
}

void dl_report_steps_items(struct dl_json *j, const struct dl_report_model *m, int rank)
{
	for (size_t i = 0; i < m->nsteps; i++) {
		const struct dl_corr_proc *p = m->steps[i].p;

		for (size_t k = m->steps[i].unlisted; k < p->nsteps; k++)
			json_step(j, &p->steps[k], &p->sites, m, rank);
	}
}

void dl_report_markers_items(struct dl_json *j, const struct dl_report_model *m, int rank)
{
	for (size_t i = 0; i < m->nsteps; i++) {
		const struct dl_corr_proc *p = m->steps[i].p;
		struct dl_step_stats st;

		if (!p->decided)
			continue;
		st = m->steps[i].st;   /* the model's: not freed here */
		dl_json_obj_begin(j);
		if (rank >= 0)
			dl_json_ki64(j, "rank", rank);
		dl_json_ki64(j, "pid", p->pid);
		dl_json_ku64(j, "main_tid", p->main_tid);
		dl_json_kstr(j, "marker", p->marker_desc);
		dl_json_ku64(j, "steps", st.sum.n + st.outliers + st.sum.partial);
		dl_json_ku64(j, "steps_partial", st.sum.partial);
		dl_json_ku64(j, "steps_listed", p->nsteps - m->steps[i].unlisted);
		dl_json_ku64(j, "median_ns", st.median_ns);
		dl_json_ku64(j, "p90_ns", st.p90_ns);
		dl_json_key(j, "percentiles_exact");
		dl_json_bool(j, st.exact);
		dl_json_key(j, "cv");
		dl_json_double(j, st.cv);
		dl_json_kstr(j, "confidence", dl_step_confidence(st.cv, st.sum.n));
		json_learning(j, &m->steps[i]);
		json_left_out(j, p, &st);
		dl_json_obj_end(j);
	}
}

void dl_report_finding_json(struct dl_json *j, const struct dl_finding *x, int rank)
{
	dl_json_obj_begin(j);
	if (rank >= 0)
		dl_json_ki64(j, "rank", rank);
	dl_json_kstr(j, "rule", x->rule);
	dl_json_kstr(j, "message", x->message);
	dl_json_key(j, "evidence");
	dl_json_obj_begin(j);
	for (int e = 0; e < x->nev; e++) {
		dl_json_key(j, x->ev[e].key);
		if (x->ev[e].text)
			dl_json_str(j, x->ev[e].text);
		else if (x->ev[e].value == floor(x->ev[e].value) && fabs(x->ev[e].value) < 9e15)
			dl_json_i64(j, (int64_t)x->ev[e].value);
		else
			dl_json_double(j, x->ev[e].value);
	}
	dl_json_obj_end(j);
	dl_json_obj_end(j);
}

/* The stepping thread's Python lines behind the verdict (analysis/diagnose.h), each with its frames. */
static void json_verdict_lines(struct dl_json *j, const struct dl_diag_pylines *py)
{
	bool wait = py->why == DL_PYSTACK_WAIT;

	dl_json_key(j, wait ? "waits" : py->others ? "others_cpu_samples" : "cpu_samples");
	dl_json_obj_begin(j);
	dl_json_ki64(j, "pid", py->pid);
	dl_json_ki64(j, py->others ? "but_tid" : "tid", py->tid);
	dl_json_ku64(j, "from_ns", py->from);
	dl_json_ku64(j, "to_ns", py->to);
	dl_json_ku64(j, wait ? "wait_ns" : "samples", py->total);
	dl_json_key(j, "lines");
	dl_json_arr_begin(j);
	for (size_t i = 0; i < py->n; i++) {
		const struct dl_pystack_stat *s = py->top[i];

		dl_json_obj_begin(j);
		dl_json_ku64(j, wait ? "wait_ns" : "samples", py->weight[i]);
		dl_json_key(j, "share");
		dl_json_double(j, py->total ? (double)py->weight[i] / (double)py->total : 0);
		dl_json_key(j, "own_line_share");
		dl_json_double(j, py->total ? (double)py->line_weight[i] / (double)py->total : 0);
		dl_json_ki64(j, "own_frame", dl_pystack_own_frame(s));
		dl_json_key(j, "partial");
		dl_json_bool(j, s->partial);
		dl_json_key(j, "frames");
		dl_json_arr_begin(j);
		for (uint32_t k = 0; k < s->n; k++) {
			dl_json_obj_begin(j);
			dl_json_kstr(j, "file", s->f[k].file);
			dl_json_kstr(j, "func", s->f[k].func);
			dl_json_ki64(j, "line", s->f[k].line);
			dl_json_obj_end(j);
		}
		dl_json_arr_end(j);
		dl_json_obj_end(j);
	}
	dl_json_arr_end(j);
	dl_json_obj_end(j);
}

void dl_report_diagnosis_json(struct dl_json *j, const struct dl_diagnosis *d)
{
	dl_json_obj_begin(j);
	if (d && d->nsteps) {
		dl_json_kstr(j, "verdict", dl_verdict_name(d->verdict));
		dl_json_kstr(j, "severity", dl_severity_name(d->severity));
		dl_json_key(j, "share");
		dl_json_double(j, d->share);
		dl_json_kstr(j, "message", d->message);
		dl_json_key(j, "breakdown_ns");
		dl_json_obj_begin(j);
		for (int k = 0; k < DL_CAT_COUNT; k++)
			dl_json_ku64(j, dl_cat_name(k), d->cat_ns[k]);
		dl_json_obj_end(j);
		dl_json_key(j, "secondary");
		dl_json_arr_begin(j);
		for (int i = 0; i < d->nsecondary; i++) {
			dl_json_obj_begin(j);
			dl_json_kstr(j, "verdict", dl_verdict_name(d->secondary[i].verdict));
			dl_json_kstr(j, "severity", dl_severity_name(d->secondary[i].severity));
			dl_json_key(j, "share");
			dl_json_double(j, d->secondary[i].share);
			dl_json_obj_end(j);
		}
		dl_json_arr_end(j);
		dl_json_key(j, "python_lines");
		dl_json_obj_begin(j);
		if (d->py_wait.total)
			json_verdict_lines(j, &d->py_wait);
		if (d->py_cpu.total)
			json_verdict_lines(j, &d->py_cpu);
		if (d->py_others_cpu.total)
			json_verdict_lines(j, &d->py_others_cpu);
		dl_json_obj_end(j);
	}
	dl_json_key(j, "findings");
	dl_json_arr_begin(j);
	for (int i = 0; d && i < d->nfindings; i++)
		dl_report_finding_json(j, &d->findings[i], -1);
	dl_json_arr_end(j);
	dl_json_obj_end(j);
}

void dl_report_steps_json(struct dl_json *j, const struct dl_report_model *m)
{
	dl_json_key(j, "steps");
	dl_json_arr_begin(j);
	dl_report_steps_items(j, m, -1);
	dl_json_arr_end(j);
	dl_json_key(j, "step_markers");
	dl_json_arr_begin(j);
	dl_report_markers_items(j, m, -1);
	dl_json_arr_end(j);
	dl_json_key(j, "diagnosis");
	dl_report_diagnosis_json(j, m->diag);
}
