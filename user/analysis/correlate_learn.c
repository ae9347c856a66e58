// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Learning, per process: which thread is the main thread and what marks a
 * step, from the first records; then the records seen so far are replayed
 * into tracking.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/correlate_int.h"
#include "analysis/steplearn.h"

/* Linear: only the few threads that call CUDA or hit a marker are counted. */
static struct tidcount *tid_of(struct cproc *p, uint32_t tid)
{
	struct tidcount *t;

	for (size_t i = 0; i < p->learn.tids.n; i++)
		if (p->learn.tids.v[i].tid == tid)
			return &p->learn.tids.v[i];
	t = dl_vec_push(&p->learn.tids);
	t->tid = tid;
	return t;
}

static const struct tidcount *busiest(const struct cproc *p, bool by_marks)
{
	const struct tidcount *t = p->learn.tids.v, *best = NULL;

	for (size_t i = 0; i < p->learn.tids.n; i++) {
		uint32_t v = by_marks ? t[i].marks : t[i].calls, b = best ? (by_marks ? best->marks : best->calls) : 0;

		if (v > b)
			best = &t[i];
	}
	return best;
}

/* The automatic marker: the call that most often comes first after a sync point on the main thread. */
static bool infer_marker(struct cproc *p)
{
	struct sig {
		uint16_t api;
		uint8_t dir;
		uint32_t n;
	} sigs[32];
	size_t nsig = 0, best = 0;
	bool after = true;

	for (size_t i = 0; i < p->learn.events.n; i++) {
		const struct cevent *e = &p->learn.events.v[i];
		const struct mcall *m = &e->u.call;
		size_t s;

		if (e->kind != DL_EV_CUDA || e->tid != p->pub.main_tid)
			continue;
		/* Calls that only set the model's state (a current device, a stream, a capture, a graph) mark no step. */
		if (m->cls == DL_CLS_DEVICE || m->cls == DL_CLS_STREAM_CREATE || m->cls == DL_CLS_CAPTURE ||
		    m->cls == DL_CLS_GRAPH_BUILD)
			continue;
		if (after) {
			for (s = 0; s < nsig && (sigs[s].api != m->api || sigs[s].dir != m->dir); s++)
				;
			if (s == nsig && nsig < 32)
				sigs[nsig++] = (struct sig){ m->api, m->dir, 0 };
			if (s < nsig)
				sigs[s].n++;
		}
		after = dl_corr_is_sync_point(m);
	}
	for (size_t s = 1; s < nsig; s++)
		if (sigs[s].n > sigs[best].n)
			best = s;
	if (!nsig || sigs[best].n < 2)
		return false;
	p->pub.marker = (struct dl_marker){ .kind = DL_MARK_AFTER_SYNC, .api = sigs[best].api, .dir = sigs[best].dir };
	{
		const struct dl_api *api = dl_api_by_id(sigs[best].api);

		if (api->cls == DL_CLS_COPY)
			snprintf(p->pub.marker_desc, sizeof(p->pub.marker_desc),
				 "automatic: the first %s (%s) after a blocking sync", api->name,
				 dl_dir_name(sigs[best].dir));
		else
			snprintf(p->pub.marker_desc, sizeof(p->pub.marker_desc),
				 "automatic: the first %s after a blocking sync", api->name);
	}
	return true;
}

/* A size as people read it: 4 KiB, 2 MiB. */
static void size_text(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (u < 4 && bytes >= 1024 && !(bytes & 1023)) {
		bytes >>= 10;
		u++;
	}
	snprintf(buf, len, "%llu %s", (unsigned long long)bytes, units[u]);
}

/* The period of the main thread's calls in the window; the marker it gives is pmk. */
static void find_period(struct cproc *p, struct dl_marker *pmk)
{
	DL_VEC(struct dl_sl_call) v = { 0 };
	DL_VEC(const struct mcall *) of = { 0 };
	struct dl_step_learning *l = &p->pub.learning;
	struct dl_sl_period per;

	for (size_t i = 0; i < p->learn.events.n; i++) {
		const struct cevent *e = &p->learn.events.v[i];
		const struct mcall *m = &e->u.call;

		if (e->kind != DL_EV_CUDA || e->tid != p->pub.main_tid)
			continue;
		*dl_vec_push(&v) = (struct dl_sl_call){
			.stream = m->stream, .api = m->api, .dir = m->dir, .size_log2 = dl_sl_size_log2(m->bytes),
			.sync = dl_corr_is_sync_point(m),
		};
		*dl_vec_push(&of) = m;
	}
	dl_steplearn(v.v, v.n, &per);
	*l = (struct dl_step_learning){ .periodic = per.found };
	if (per.found) {
		const struct mcall *m = of.v[per.marker];

		l->period_calls = per.calls;
		l->periods = per.periods;
		l->repeating = per.repeating;
		l->synced = per.synced;
		*pmk = (struct dl_marker){ .kind = DL_MARK_PERIOD, .api = m->api, .dir = m->dir,
					   .size_log2 = dl_sl_size_log2(m->bytes), .stream = m->stream };
	}
	dl_vec_free(&v);
	dl_vec_free(&of);
}

/* Syncs in every period (but perhaps one at the window's edge): the first call after a sync cuts the same steps. */
static bool syncs_every_period(const struct dl_step_learning *l)
{
	return l->synced + 1 >= l->periods;
}

static void use_period(struct cproc *p, const struct dl_marker *mk)
{
	const struct dl_api *api = dl_api_by_id(mk->api);
	char what[96] = "", lo[24], hi[24], stream[32] = "the legacy stream";

	p->pub.marker = *mk;
	p->pub.learning.how = DL_LEARNED_PERIOD;
	if (mk->size_log2) {
		size_text(lo, sizeof(lo), 1ull << (mk->size_log2 - 1));
		size_text(hi, sizeof(hi), mk->size_log2 < 64 ? 1ull << mk->size_log2 : 0);
		snprintf(what, sizeof(what), "%s%s%s to under %s, ", api->cls == DL_CLS_COPY ? dl_dir_name(mk->dir) : "",
			 api->cls == DL_CLS_COPY ? ", " : "", lo, hi);
	}
	if (mk->stream)
		snprintf(stream, sizeof(stream), "stream 0x%llx", (unsigned long long)mk->stream);
	/* Too long for the field (a wide stream handle): the kind's name alone still tells the reader. */
	if (snprintf(p->pub.marker_desc, sizeof(p->pub.marker_desc),
		     "automatic: each %s (%s%s), the first call of the main thread's repeating call sequence",
		     api->name, what, stream) >= (int)sizeof(p->pub.marker_desc))
		snprintf(p->pub.marker_desc, sizeof(p->pub.marker_desc),
			 "automatic: each %s, the first call of the main thread's repeating call sequence", api->name);
}

/*
 * The marker from the window: the call sequence's period where syncs do not
 * fall in every period; else the first call after a sync, as it always was.
 */
static bool learn_marker(struct cproc *p)
{
	struct dl_marker pmk;

	find_period(p, &pmk);
	if (p->pub.learning.periodic && !syncs_every_period(&p->pub.learning)) {
		use_period(p, &pmk);
		return true;
	}
	if (infer_marker(p)) {
		p->pub.learning.how = DL_LEARNED_SYNC;
		return true;
	}
	if (p->pub.learning.periodic) {
		use_period(p, &pmk);
		return true;
	}
	return false;
}

/*
 * Before any thread has synced enough: a loop that seldom or never syncs is
 * decided by its period once it has shown as many periods as a sync loop
 * shows syncs. Looked at as the window doubles, so the looking stays linear.
 */
static bool period_early(struct cproc *p, const struct tidcount *t)
{
	struct dl_marker pmk;

	if (p->learn.records < (p->learn.next_period ? p->learn.next_period : 4096))
		return false;
	p->learn.next_period = 2 * p->learn.records;
	p->pub.main_tid = t->tid;
	find_period(p, &pmk);
	if (p->pub.learning.periodic && p->pub.learning.periods >= LEARN_SYNCS &&
	    !syncs_every_period(&p->pub.learning)) {
		use_period(p, &pmk);
		return true;
	}
	p->pub.main_tid = 0;
	p->pub.learning = (struct dl_step_learning){ 0 };
	return false;
}

/*
 * How sure the marker of backward passes is: each is a step where the loop
 * runs one backward pass an iteration, which their pace shows: a steady one
 * (intervals within half their mean, as sd), all on the main thread, is sure;
 * an uneven one (several backward passes an iteration, or none in some)
 * less so. Fewer than 4 intervals say little.
 */
static enum dl_marker_sure autograd_sure(const struct dl_step_learning *l)
{
	if (l->main_marks < LEARN_AUTOGRAD_MARKS)
		return DL_SURE_LOW;
	if (l->mark_cv <= 0.5 && l->main_marks == l->marks)
		return DL_SURE_HIGH;
	return l->mark_cv <= 1 ? DL_SURE_MEDIUM : DL_SURE_LOW;
}

/*
 * Without --step-on, in a process that called no CUDA but ran PyTorch's
 * backward passes (the autograd marker, capture/marker.h): a step is a
 * backward pass, on the thread that ran most of them.
 */
static bool learn_autograd(struct cproc *p, bool final)
{
	const struct tidcount *v = p->learn.tids.v, *t = busiest(p, true);
	struct dl_step_learning *l = &p->pub.learning;
	uint64_t prev = 0;
	double sum = 0, sq = 0;
	uint32_t n = 0, marks = 0;

	for (size_t i = 0; i < p->learn.tids.n; i++) {
		if (v[i].calls)
			return false;   /* a CUDA job: its calls tell its steps */
		marks += v[i].marks;
	}
	if (!t || t->marks < (final ? 2 : LEARN_AUTOGRAD_MARKS))
		return false;
	for (size_t i = 0; i < p->learn.events.n; i++) {
		const struct cevent *e = &p->learn.events.v[i];

		if (e->kind != DL_EV_MARK || e->tid != t->tid)
			continue;
		if (prev) {
			double d = (double)(e->u.mark_ts - prev);

			sum += d;
			sq += d * d;
			n++;
		}
		prev = e->u.mark_ts;
	}
	*l = (struct dl_step_learning){ .how = DL_LEARNED_AUTOGRAD, .marks = marks, .main_marks = t->marks };
	if (n && sum > 0) {
		double mean = sum / n, var = sq / n - mean * mean;

		l->mark_cv = var > 0 ? sqrt(var) / mean : 0;
	}
	l->sure = autograd_sure(l);
	p->pub.main_tid = t->tid;
	p->pub.marker = (struct dl_marker){ .kind = DL_MARK_SYMBOL };
	snprintf(p->pub.marker_desc, sizeof(p->pub.marker_desc),
		 "automatic: each backward pass (autograd's entry, THPEngine_run_backward); the job calls no CUDA");
	return true;
}

static void forget_learned(struct cproc *p)
{
	dl_vec_free(&p->learn.events);
	p->learn.records = 0;
}

static void start_tracking(struct cproc *p)
{
	p->st = CP_TRACK;
	p->pub.decided = true;
	dl_corr_track_begin(p);
	for (size_t i = 0; i < p->learn.events.n; i++)
		dl_corr_track(p, &p->learn.events.v[i]);
	forget_learned(p);
}

void dl_corr_relearn(struct cproc *p)
{
	struct dl_corr_proc *pub = &p->pub;
	struct dl_step_startup *su = &pub->startup;
	uint64_t dur = pub->folded.dur_ns;

	for (size_t i = 0; i < pub->nsteps; i++)
		dur += pub->steps[i].dur_ns;
	for (size_t i = 0; i < pub->nheld; i++)
		dur += pub->held[i].dur_ns;
	if (!su->relearned++)
		snprintf(su->first_marker, sizeof(su->first_marker), "%s", pub->marker_desc);
	su->steps += dl_corr_steps_total(pub) + pending_count(p);
	su->dur_ns += dur + fin_forget(p, dl_corr_steps_total(pub));
	pub->nsteps = 0;
	pub->nheld = 0;
	dl_fold_free(&pub->folded);
	memset(&pub->folded, 0, sizeof(pub->folded));
	memset(&pub->syncs, 0, sizeof(pub->syncs));
	memset(&pub->lineage, 0, sizeof(pub->lineage));
	memset(&pub->learning, 0, sizeof(pub->learning));
	memset(&pub->marker, 0, sizeof(pub->marker));
	pub->marker_desc[0] = 0;
	pub->main_tid = 0;
	pub->decided = false;
	dl_corr_track_end(p);
	p->learn.tids.n = 0;
	forget_learned(p);
	p->learn.next_infer = 0;
	p->learn.next_period = 0;
	p->st = CP_LEARN;
}

/* Decides main thread and marker once the learning window is enough; returns true when decided. */
bool dl_corr_try_decide(struct dl_correlator *c, struct cproc *p, bool final)
{
	const struct tidcount *t;

	if (c->opts.step_on && !c->step_on_api) {
		/* A symbol marker: its thread is the main thread. */
		t = busiest(p, true);
		if (!t || (!final && t->marks < 2))
			return false;
		p->pub.main_tid = t->tid;
		p->pub.marker = (struct dl_marker){ .kind = DL_MARK_SYMBOL };
		p->pub.learning.how = DL_LEARNED_OPTION;
		snprintf(p->pub.marker_desc, sizeof(p->pub.marker_desc), t->mark_id == DL_MARK_ID_PYFUNC ?
			 "--step-on %s (a Python function: each call, seen by a watchpoint on its code object)" :
			 "--step-on %s (uprobe)", c->opts.step_on);
	} else if (c->step_on_api) {
		const struct tidcount *v = p->learn.tids.v;

		t = NULL;
		for (size_t i = 0; i < p->learn.tids.n; i++)
			if (!t || v[i].api_calls > t->api_calls)
				t = &v[i];
		if (!t || !t->api_calls || (!final && t->api_calls < 3))
			return false;
		p->pub.main_tid = t->tid;
		p->pub.marker = (struct dl_marker){ .kind = DL_MARK_API, .api = (uint16_t)c->step_on_api, .dir = 0xff };
		p->pub.learning.how = DL_LEARNED_OPTION;
		snprintf(p->pub.marker_desc, sizeof(p->pub.marker_desc), "--step-on %s", c->opts.step_on);
	} else if (learn_autograd(p, final)) {
		/* decided */
	} else {
		const struct tidcount *v = p->learn.tids.v;
		bool enough = final || p->learn.records >= LEARN_MAX_RECORDS;

		for (size_t i = 0; i < p->learn.tids.n && !enough; i++)
			enough = v[i].syncs >= LEARN_SYNCS;
		t = busiest(p, false);
		if (!enough) {
			if (!t || !period_early(p, t))
				return false;
			start_tracking(p);
			return true;
		}
		if (!t || (!final && p->learn.records < p->learn.next_infer))
			return false;
		p->pub.main_tid = t->tid;
		if (!learn_marker(p)) {
			/* Scanning the window is linear: look again only after it has grown. */
			p->learn.next_infer = p->learn.records + 1024;
			if (!final && p->learn.records < LEARN_MAX_RECORDS)
				return false;
			snprintf(p->pub.marker_desc, sizeof(p->pub.marker_desc),
				 "none found: no call repeats after the blocking syncs and the call sequence has no "
				 "period (use --step-on SYMBOL)");
			p->st = CP_NONE;
			p->pub.decided = true;
			forget_learned(p);
			return true;
		}
	}
	start_tracking(p);
	return true;
}

void dl_corr_learn(struct dl_correlator *c, struct cproc *p, const struct cevent *e, const struct dl_hdr *h)
{
	if (h->kind == DL_EV_CUDA) {
		struct tidcount *t = tid_of(p, h->tid);

		if (e) {
			t->calls++;
			t->syncs += dl_corr_is_sync_point(&e->u.call);
			t->api_calls += c->step_on_api && e->u.call.api == (unsigned)c->step_on_api;
		}
	} else if (h->kind == DL_EV_MARK) {
		struct tidcount *t = tid_of(p, h->tid);

		t->marks++;
		if (h->size >= sizeof(struct dl_mark_ev))
			t->mark_id = ((const struct dl_mark_ev *)h)->mark_id;
	} else if (h->kind != DL_EV_SCHED) {
		return;
	}
	if (!p->learn.records)
		p->learn.start = h->ts;
	if (e)
		*dl_vec_push(&p->learn.events) = *e;
	p->learn.records++;
	if (h->kind != DL_EV_SCHED)
		dl_corr_try_decide(c, p, false);
}
