// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/breakdown.h"
#include "analysis/correlate_int.h"
#include "analysis/steplearn.h"
#include "records/stream.h"

struct dl_correlator *dl_corr_new(const struct dl_corr_opts *opts)
{
	struct dl_correlator *c = dl_xcalloc(1, sizeof(*c));

	if (opts)
		c->opts = *opts;
	if (!(c->opts.pcie_gbps > 0))
		c->opts.pcie_gbps = 24;
	if (!c->opts.finalize_delay_ns)
		c->opts.finalize_delay_ns = 50000000ull;
	if (c->opts.step_on) {
		const struct dl_api *api = dl_api_by_name(c->opts.step_on);

		c->step_on_api = api ? (int)api->id : 0;
	}
	return c;
}

size_t dl_corr_take_steps(struct dl_correlator *c, dl_step_fn fn, void *ctx)
{
	size_t n = c->closed.n;

	for (size_t i = 0; i < n; i++) {
		if (fn)
			fn(ctx, &c->closed.v[i]);
		free((void *)c->closed.v[i].gpu_spans);
	}
	c->closed.n = 0;
	return n;
}

int dl_step_stage_sink(void *stage, const struct dl_rec *r)
{
	struct dl_step_stage *st = stage;

	(void)r;
	dl_corr_take_steps(st->corr, st->fn, st->ctx);
	return 0;
}

void dl_corr_free(struct dl_correlator *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->procs.n; i++) {
		struct cproc *p = &c->procs.v[i];

		dl_vec_free(&p->learn.events);
		dl_vec_free(&p->learn.tids);
		dl_vec_free(&p->hist.calls);
		dl_vec_free(&p->hist.sched);
		dl_vec_free(&p->fin.pending);
		dl_devq_free(&p->hist.devq);
		dl_kdur_free(&p->pub.kdur);
		dl_vec_free(&p->kdur.windows);
		free(p->pub.steps);
		free(p->pub.held);
		dl_fold_free(&p->pub.folded);
		dl_sites_free(&p->pub.sites);
	}
	dl_corr_take_steps(c, NULL, NULL);
	dl_vec_free(&c->closed);
	dl_vec_free(&c->procs);
	dl_u64map_free(&c->proc_of);
	dl_vec_free(&c->tree);
	dl_lineage_free(&c->lin);
	free(c);
}

static struct cproc *proc_of(struct dl_correlator *c, pid_t pid, bool create)
{
	struct cproc *p;
	uint64_t i;

	if (dl_u64map_get(&c->proc_of, (uint32_t)pid, &i))
		return &c->procs.v[i];
	if (!create)
		return NULL;
	dl_u64map_put(&c->proc_of, (uint32_t)pid, c->procs.n);
	p = dl_vec_push(&c->procs);
	p->pub.pid = pid;
	p->st = CP_LEARN;
	return p;
}

/* --- steps ---------------------------------------------------------------- */

static void copy_bw(const struct cproc *p, const struct dl_correlator *c, const struct mcall *m, double *gbps)
{
	double best = p->pub.copy.best_gbps[m->dir][m->pageable];

	/* Until measured: the link's peak, a third of it from pageable memory (staging copy). */
	*gbps = best > 0 ? best : c->opts.pcie_gbps / (m->pageable ? 3 : 1);
}

/*
 * The pieces of one call in the breakdown. A blocking call is gpu_wait only
 * when device work was outstanding at its entry (the device-queue model); a
 * synchronous copy behind such work is gpu_wait but for the time its bytes
 * need at the best bandwidth known, and one that found the queue empty is the
 * transfer from end to end.
 */
static size_t call_pieces(const struct dl_correlator *c, const struct cproc *p, const struct mcall *m,
			  uint64_t end, struct dl_span out[2])
{
	uint32_t copy_cat = m->dir == DL_DIR_H2D ? DL_CAT_H2D : m->dir == DL_DIR_D2H ? DL_CAT_D2H : DL_CAT_CUDA_OTHER;
	uint32_t wait_cat = m->waited == DL_DEVQ_COMM || m->waited == DL_DEVQ_COMM_AFTER ? DL_CAT_COMM_WAIT
											     : DL_CAT_GPU_WAIT;
	uint64_t dur = end - m->start, explained;
	double gbps;

	switch (m->cls) {
	case DL_CLS_SYNC:
		out[0] = (struct dl_span){ m->start, end, m->waited == DL_DEVQ_EMPTY ? DL_CAT_CUDA_OTHER : wait_cat };
		return 1;
	case DL_CLS_LAUNCH:
	case DL_CLS_GRAPH:
	case DL_CLS_COMM: /* a collective's call enqueues its kernel: launch cost, whatever its wait later */
		/* Recorded into a graph by a capture: building it, not launching work of the step. */
		out[0] = (struct dl_span){ m->start, end, m->captured ? DL_CAT_CUDA_OTHER : DL_CAT_LAUNCH };
		return 1;
	case DL_CLS_COPY:
		/* Behind transfers only, a copy waits on the link: its own kind of time. */
		if (m->async || copy_cat == DL_CAT_CUDA_OTHER || m->waited < DL_DEVQ_COMM) {
			out[0] = (struct dl_span){ m->start, end, copy_cat };
			return 1;
		}
		copy_bw(p, c, m, &gbps);
		explained = dl_min_u64(dur, (uint64_t)((double)m->bytes / gbps));
		if (explained == dur) {
			out[0] = (struct dl_span){ m->start, end, copy_cat };
			return 1;
		}
		out[0] = (struct dl_span){ m->start, end - explained, wait_cat };
		out[1] = (struct dl_span){ end - explained, end, copy_cat };
		return 2 - (explained == 0);
	default:
		out[0] = (struct dl_span){ m->start, end, DL_CAT_CUDA_OTHER };
		return 1;
	}
}

/*
 * Entry-only launches: a launch owns the time to the next call of its thread,
 * up to a cap of on-CPU time (a preempted launch is still inside the call).
 */
static uint64_t launch_end(const struct cproc *p, size_t i, uint64_t step_end)
{
	const struct mcall *calls = p->hist.calls.v;
	const struct dl_span *sc = p->hist.sched.v;
	uint64_t s = calls[i].start, e = step_end, off = 0;

	if (i + 1 < p->hist.calls.n)
		e = dl_min_u64(e, dl_max_u64(s, calls[i + 1].start));
	for (size_t k = p->fin.sched_from; k < p->hist.sched.n && sc[k].start < e; k++)
		if (sc[k].kind != DL_ST_RUNNING && sc[k].end > s)
			off += dl_min_u64(sc[k].end, e) - dl_max_u64(sc[k].start, s);
	if (e - s - off <= LAUNCH_GAP_CAP_NS)
		return e;
	return dl_min_u64(e, s + LAUNCH_GAP_CAP_NS + off);
}

/*
 * A call's pieces, clipped to the step, are its site's share of the step: the
 * breakdown gives CUDA pieces their time before any scheduler state.
 */
static void attribute_site(struct cproc *p, struct dl_step_sites *by_site, const struct mcall *m,
			   const struct dl_span *pieces, size_t n, uint64_t start, uint64_t end)
{
	uint32_t calls = m->start >= start;

	if (m->site == DL_SITE_NONE)
		return;
	for (size_t k = 0; k < n; k++) {
		uint64_t s = dl_max_u64(pieces[k].start, start), e = dl_min_u64(pieces[k].end, end);
		uint64_t ns = e > s ? e - s : 0;

		dl_step_sites_add(by_site, m->site, pieces[k].kind, ns, calls);
		dl_sites_add_cat(&p->pub.sites, m->site, pieces[k].kind, ns);
		calls = 0;
	}
}

static void attribute_tree(struct dl_step *st, uint32_t main_tid, const struct tspan *t)
{
	uint64_t s = dl_max_u64(t->start, st->start_ns), e = dl_min_u64(t->end, st->start_ns + st->dur_ns);

	if (t->is_read) {
		if (t->end >= st->start_ns && t->end < st->start_ns + st->dur_ns) {
			st->io_read_bytes += t->bytes;
			st->io_read_ops++;
		}
	} else if (e > s && t->tid != main_tid) {
		st->workers_cpu_ns += e - s;
	}
}

/* The p90 of p's steps kept in full (0: none). */
static uint64_t kept_p90(const struct dl_corr_proc *p)
{
	uint64_t *d = dl_xcalloc(p->nsteps + 1, sizeof(*d)), median = 0, p90 = 0;

	for (size_t s = 0; s < p->nsteps; s++)
		d[s] = p->steps[s].dur_ns;
	if (p->nsteps)
		dl_durations_percentiles(d, p->nsteps, &median, &p90);
	free(d);
	return p90;
}

/*
 * A step folded away can no more be left out of the totals, so one that may
 * prove an outlier (over half the cut the kept steps give now: the p90 moves
 * as the run goes on) is held whole until dl_corr_stats judges it; past
 * DL_OUTLIERS_HELD, the shortest held is folded.
 */
static void fold_or_hold(struct dl_corr_proc *p, const struct dl_step *st, uint64_t hold_over)
{
	size_t shortest = 0;

	if (st->dur_ns <= hold_over) {
		dl_fold_add(&p->folded, st, true);
		return;
	}
	if (p->nheld < DL_OUTLIERS_HELD) {
		if (!p->held)
			p->held = dl_xcalloc(DL_OUTLIERS_HELD, sizeof(*p->held));
		p->held[p->nheld++] = *st;
		return;
	}
	for (size_t i = 1; i < p->nheld; i++)
		if (p->held[i].dur_ns < p->held[shortest].dur_ns)
			shortest = i;
	if (p->held[shortest].dur_ns >= st->dur_ns) {
		dl_fold_add(&p->folded, st, true);
		return;
	}
	dl_fold_add(&p->folded, &p->held[shortest], true);
	p->held[shortest] = *st;
}

/*
 * Past twice --keep-steps, the older half is folded: each step is moved once,
 * and at least keep_steps stay in full. A step is folded keep_steps steps after
 * its end, long after the last late record (a data loader's span, a disk
 * completion) could still be given to it.
 */
static void fold_old_steps(struct dl_correlator *c, struct dl_corr_proc *p)
{
	size_t keep = c->opts.keep_steps, old;
	uint64_t p90, hold_over;

	if (!keep || p->nsteps < 2 * keep)
		return;
	p90 = kept_p90(p);
	hold_over = p90 && p90 < UINT64_MAX / DL_OUTLIER_P90 ? p90 * DL_OUTLIER_P90 / 2 : UINT64_MAX;
	old = p->nsteps - keep;
	for (size_t i = 0; i < old; i++)
		fold_or_hold(p, &p->steps[i], hold_over);
	memmove(p->steps, p->steps + old, keep * sizeof(*p->steps));
	p->nsteps = keep;
}

/*
 * The calls and intervals before the first not finalized go in bulk (see
 * dl_vec_drop_front_amortized): at a step a call, moving all held at every
 * step cost a third of the collector's CPU.
 */
static void forget_finalized(struct cproc *p)
{
	size_t n = p->hist.calls.n;

	dl_vec_drop_front_amortized(&p->hist.calls, p->fin.calls_from);
	if (p->hist.calls.n != n)
		p->fin.calls_from = 0;
	n = p->hist.sched.n;
	dl_vec_drop_front_amortized(&p->hist.sched, p->fin.sched_from);
	if (p->hist.sched.n != n)
		p->fin.sched_from = 0;
}

static void finalize(struct dl_correlator *c, struct cproc *p, uint64_t start, uint64_t end)
{
	const struct mcall *calls = p->hist.calls.v;
	const struct tspan *tree = c->tree.v;
	/*
	 * The calls and intervals held run the finalize delay past the step: only
	 * those starting in it (and intervals to its last call's return) are its,
	 * so a step's cost does not grow with the call rate.
	 */
	size_t c0 = p->fin.calls_from, c1 = dl_max_u64(c0, dl_vec_lower_bound(&p->hist.calls, start, end)), s1;
	uint64_t sched_to = end;
	struct dl_span *cuda = dl_xcalloc(2 * (c1 - c0) + 1, sizeof(*cuda));
	struct dl_span *sched;
	/* None ending before the step touches it: a step's cost does not grow with the spans kept. */
	size_t tree_from = dl_vec_lower_bound(&c->tree, end, start);
	struct dl_span *reads = dl_xcalloc(c->tree.n - tree_from + 1, sizeof(*reads));
	size_t ncuda = 0, nsched = 0, nreads = 0, nspans;
	struct dl_gpu_span *spans;
	struct dl_step st = { 0 };
	struct dl_step_sites by_site = { 0 };
	struct dl_step_input in;

	st.index = (uint32_t)(p->fin.index_base + dl_corr_steps_total(&p->pub));
	st.pid = p->pub.pid;
	st.tid = (pid_t)p->pub.main_tid;
	st.start_ns = start;
	st.dur_ns = end - start;
	for (size_t i = c0; i < c1; i++)
		if (!calls[i].entry_only)
			sched_to = dl_max_u64(sched_to, calls[i].end);
	s1 = dl_max_u64(p->fin.sched_from, dl_vec_lower_bound(&p->hist.sched, start, sched_to));
	sched = dl_xcalloc(s1 - p->fin.sched_from + 1, sizeof(*sched));

	for (size_t i = c0; i < c1; i++) {
		const struct mcall *m = &calls[i];
		uint64_t e = m->entry_only ? launch_end(p, i, end) : m->end;

		size_t np;

		if (e <= start || m->start >= end)
			continue;
		np = call_pieces(c, p, m, e, &cuda[ncuda]);
		attribute_site(p, &by_site, m, &cuda[ncuda], np, start, end);
		/* The main thread's outermost calls never overlap: a comm_wait piece is the step's as it is. */
		for (size_t k = 0; m->waited == DL_DEVQ_COMM_AFTER && k < np; k++)
			if (cuda[ncuda + k].kind == DL_CAT_COMM_WAIT)
				st.comm_after_compute_ns += dl_spans_overlap(&cuda[ncuda + k], 1, start, end);
		ncuda += np;
		if (m->start < start)
			continue;
		/* Per-step counts go to the step the call starts in. */
		if (m->cls == DL_CLS_LAUNCH && !m->captured)
			st.kernels++;
		if (m->cls == DL_CLS_GRAPH && !m->captured) {
			st.graph_launches++;
			st.graph_kernels += m->graph_kernels;
		}
		if (m->cls == DL_CLS_COMM) {
			st.collectives++;
			st.comm_bytes += m->bytes;
		}
		if (m->cls != DL_CLS_COPY)
			continue;
		if (m->dir == DL_DIR_H2D) {
			st.h2d_bytes += m->bytes;
			st.h2d_copies++;
		} else if (m->dir == DL_DIR_D2H) {
			st.d2h_bytes += m->bytes;
			st.d2h_copies++;
		}
		st.small_copies += m->bytes < DL_SMALL_COPY_BYTES;
		st.pageable_copies += m->pageable;
	}
	{
		const struct dl_span *sc = p->hist.sched.v;

		for (size_t i = p->fin.sched_from; i < s1; i++)
			sched[nsched++] = sc[i];
		/* After its last closed interval the thread is in the state it entered then. */
		if (p->hist.sched_next && p->hist.sched_until < end)
			sched[nsched++] = (struct dl_span){ dl_max_u64(p->hist.sched_until, start), end, p->hist.sched_next };
	}
	for (size_t i = tree_from; i < c->tree.n; i++) {
		attribute_tree(&st, p->pub.main_tid, &tree[i]);
		if (tree[i].is_read && tree[i].end > start && tree[i].start < end)
			reads[nreads++] = (struct dl_span){ tree[i].start, tree[i].end, 0 };
	}
	nreads = dl_spans_union(reads, nreads);
	st.io_ns = dl_spans_overlap(reads, nreads, start, end);

	in = (struct dl_step_input){ .start = start, .end = end, .cuda = cuda, .ncuda = ncuda,
				     .sched = sched, .nsched = nsched, .reads = reads, .nreads = nreads };
	dl_breakdown(&in, st.cat_ns);
	st.wakeup_runq_ns = dl_wakeup_runq(&in);
	{
		struct dl_lin_query q = { .pid = (uint32_t)p->pub.pid, .main_tid = p->pub.main_tid, .start = start,
					  .end = end, .cuda = cuda, .ncuda = ncuda, .sched = sched, .nsched = nsched,
					  .disk = reads, .ndisk = nreads };
		uint64_t from = start;

		dl_lineage_step(&c->lin, &q, &st.input);
		if (st.input.producer)
			from = dl_min_u64(from, st.input.since_ns);
		for (uint32_t i = 0; i < st.input.nchain; i++)
			from = dl_min_u64(from, st.input.chain[i].since_ns);
		/*
		 * The producers' windows reach back before the step: their time in D is a disk wait where
		 * the tree's reads were in flight then, so again with those. Only the reads since the windows
		 * began are visited (the tree is by end), not all that is kept.
		 */
		if (from < start) {
			size_t k = dl_vec_lower_bound(&c->tree, end, from);
			struct dl_span *kept = dl_xcalloc(c->tree.n - k + 1, sizeof(*kept));
			size_t nkept = 0;

			for (; k < c->tree.n; k++)
				if (tree[k].is_read && tree[k].start < end)
					kept[nkept++] = (struct dl_span){ tree[k].start, tree[k].end, 0 };
			q.disk = kept;
			q.ndisk = dl_spans_union(kept, nkept);
			dl_lineage_step(&c->lin, &q, &st.input);
			free(kept);
		}
		dl_lin_totals_add(&p->pub.lineage, &st.input, (uint32_t)p->pub.pid);
	}
	nspans = dl_corr_device(c, p, c0, c1, &st, cuda, ncuda, sched, nsched, &spans);
	dl_corr_kdur_finalize(p, sched, nsched, end);
	st.verdict = dl_verdict_of(st.cat_ns, &st.share);
	st.partial = c->opts.observed && !c->opts.observed(c->opts.observed_ctx, st.start_ns, st.start_ns + st.dur_ns);
	dl_step_sites_take(&by_site, &st);
	free(cuda);
	free(sched);
	free(reads);

	if (!p->pub.steps_from_ns || st.start_ns < p->pub.steps_from_ns)
		p->pub.steps_from_ns = st.start_ns;
	if (st.start_ns + st.dur_ns > p->pub.steps_to_ns)
		p->pub.steps_to_ns = st.start_ns + st.dur_ns;
	dl_grow((void **)&p->pub.steps, &p->pub.cap, p->pub.nsteps + 1, sizeof(*p->pub.steps));
	p->pub.steps[p->pub.nsteps++] = st;
	st.gpu_spans = spans;
	st.ngpu_spans = (uint32_t)nspans;
	/* Closed: the step stage hands it on after the record (dl_corr_take_steps). */
	*dl_vec_push(&c->closed) = st;
	fold_old_steps(c, &p->pub);

	/* What ended before this step's end is no longer needed by later steps. */
	{
		size_t k = c1;
		const struct mcall *mc = p->hist.calls.v;
		const struct dl_span *sc = p->hist.sched.v;

		/* A call running across the boundary is the next step's too. */
		if (k > c0 && !mc[k - 1].entry_only && mc[k - 1].end > end)
			k--;
		p->fin.calls_from = k;
		for (k = p->fin.sched_from; k < p->hist.sched.n && sc[k].end <= end; k++)
			;
		p->fin.sched_from = k;
		forget_finalized(p);
	}
	dl_devq_forget_before(&p->hist.devq, end);
}

/* Oldest time a step not yet finalized starts from (at most from, the watermark). */
static uint64_t steps_frontier(const struct dl_correlator *c)
{
	uint64_t f = c->watermark;

	for (size_t i = 0; i < c->procs.n; i++) {
		const struct cproc *p = &c->procs.v[i];

		if (p->st == CP_LEARN && p->learn.records)
			f = dl_min_u64(f, p->learn.start);
		else if (p->st == CP_TRACK && pending_first(p))
			f = dl_min_u64(f, pending_first(p)->start);
		else if (p->st == CP_TRACK && p->track.have_marker)
			f = dl_min_u64(f, p->track.last_marker);
	}
	return f;
}

/* Oldest time any process may still need tree spans from: 10 s back, for windows that reach before their step. */
static uint64_t tree_frontier(const struct dl_correlator *c)
{
	uint64_t f = steps_frontier(c);

	return dl_min_u64(f, c->watermark > 10000000000ull ? c->watermark - 10000000000ull : 0);
}

static void trim_tree(struct dl_correlator *c)
{
	uint64_t f = tree_frontier(c);

	dl_vec_drop_front_amortized(&c->tree, dl_vec_lower_bound(&c->tree, end, f));
	uint64_t settled = steps_frontier(c);

	/* A dead thread's last records (its exit's wake-ups) may still come from other CPUs until then. */
	settled = settled > c->opts.finalize_delay_ns ? settled - c->opts.finalize_delay_ns : 0;
	dl_lineage_forget_before(&c->lin, f, settled);
}

static void finalize_ready(struct dl_correlator *c, bool all)
{
	bool any = false;

	for (size_t i = 0; i < c->procs.n; i++) {
		struct cproc *p = &c->procs.v[i];

		size_t k;

		for (k = p->fin.pending_done; k < p->fin.pending.n; k++) {
			struct pending_step ps = p->fin.pending.v[k];

			if (!all && c->watermark < ps.end + c->opts.finalize_delay_ns)
				break;
			finalize(c, p, ps.start, ps.end);
			any = true;
		}
		if (k && 4 * k >= p->fin.pending.n) {
			dl_vec_drop_front(&p->fin.pending, k);
			k = 0;
		}
		p->fin.pending_done = k;
	}
	if (any)
		trim_tree(c);
}

/* --- the sink ------------------------------------------------------------- */

static void add_tree(struct dl_correlator *c, const struct tspan *t)
{
	/* Steps already finalized get their share now; later ones at their finalization. */
	for (size_t i = 0; i < c->procs.n; i++) {
		struct dl_corr_proc *p = &c->procs.v[i].pub;

		for (size_t k = p->nsteps; k-- > 0;) {
			struct dl_step *st = &p->steps[k];

			if (st->start_ns + st->dur_ns <= t->start)
				break;
			attribute_tree(st, p->main_tid, t);
		}
	}
	{
		size_t i;

		(void)dl_vec_push(&c->tree);
		/* Kept ordered by end; records come nearly in that order (written at the switch away or completion). */
		for (i = c->tree.n - 1; i && c->tree.v[i - 1].end > t->end; i--)
			c->tree.v[i] = c->tree.v[i - 1];
		c->tree.v[i] = *t;
	}
}

/* The correlator's view of a record of a process: false for one it has no use for (nested, unknown API). */
static bool event_of(const struct dl_rec *r, uint64_t site, struct cevent *e)
{
	const struct dl_hdr *h = r->h;

	memset(e, 0, sizeof(*e));
	e->kind = h->kind;
	e->tid = h->tid;
	switch (h->kind) {
	case DL_EV_CUDA: {
		const struct dl_call *k = r->call;
		struct mcall *m = &e->u.call;

		if (!k || k->depth > 0)
			return false;
		m->start = k->ts;
		m->end = k->entry_only ? k->ts : k->ts + k->dur_ns;
		m->api = (uint16_t)k->api->id;
		m->cls = (uint8_t)k->api->cls;
		m->dir = (uint8_t)k->dir;
		m->bytes = k->bytes;
		m->async = k->async;
		m->entry_only = k->entry_only;
		m->ok = !k->entry_only && k->ret == 0;
		m->stream = k->stream;
		m->event = k->event;
		m->ptr = m->cls == DL_CLS_GRAPH ? k->func : k->ptr;
		m->size = k->size;
		m->site = site;
		if (m->cls == DL_CLS_COPY) {
			m->pageable = k->pageable;
			/*
			 * An async copy to pageable host memory returns only once the copy has
			 * completed (the runtime's documented synchronization behavior): for the
			 * model it is a synchronous copy, waiting for its stream's earlier work.
			 */
			if (m->async && m->pageable && m->dir == DL_DIR_D2H)
				m->async = 0;
			m->host = k->host_mem;
		}
		return true;
	}
	case DL_EV_SCHED: {
		const struct dl_sched_ev *ev = (const void *)h;

		e->u.sched.span = (struct dl_span){ h->ts, h->ts + ev->dur_ns, ev->state };
		e->u.sched.next = ev->next_state;
		return true;
	}
	case DL_EV_MARK:
		e->u.mark_ts = h->ts;
		return true;
	default:
		return false;
	}
}

/* Steps finalized before the loss was known: their upper bounds may be short, so they become the whole step. */
static void widen_lost(struct dl_correlator *c)
{
	for (size_t i = 0; c->calls_lost && i < c->procs.n; i++) {
		struct dl_corr_proc *p = &c->procs.v[i].pub;

		for (size_t k = 0; k < p->nsteps; k++) {
			p->steps[k].gpu_busy_hi_ns = p->steps[k].dur_ns;
			memset(p->steps[k].gpu_idle_ns, 0, sizeof(p->steps[k].gpu_idle_ns));
		}
		p->folded.gpu_busy_hi_ns = p->folded.dur_ns;
		memset(p->folded.gpu_idle_ns, 0, sizeof(p->folded.gpu_idle_ns));
	}
}

int dl_corr_sink(void *ctx, const struct dl_rec *r)
{
	struct dl_correlator *c = ctx;
	const struct dl_hdr *h = r->h;
	struct cproc *p;
	struct cevent e;
	uint64_t end = h->ts;
	bool keep;

	c->seq = r->seq;
	if (h->kind == 0 || h->kind >= DL_EV_KIND_MAX)
		return 0;
	switch (h->kind) {
	case DL_EV_CUDA:
		end += ((const struct dl_cuda_ev *)h)->dur_ns;
		break;
	case DL_EV_SCHED: {
		const struct dl_sched_ev *ev = (const void *)h;

		end += ev->dur_ns;
		if (ev->state == DL_ST_RUNNING) {
			struct tspan t = { h->ts, end, 0, h->tgid, h->tid, 0 };

			add_tree(c, &t);
			/* Written at the switch away, on the CPU the interval ran on. */
			if (h->cpu < DL_CORR_CPUS)
				c->cpus_ran[h->cpu / 64] |= 1ull << (h->cpu % 64);
		}
		break;
	}
	case DL_EV_BIO: {
		const struct dl_bio_ev *ev = (const void *)h;

		end += ev->dur_ns;
		if (!(ev->flags & (DL_BIO_WRITE | DL_BIO_ASYNC))) {
			struct tspan t = { h->ts, end, ev->bytes, h->tgid, h->tid, 1 };

			add_tree(c, &t);
		}
		break;
	}
	case DL_EV_TRACE_END: {
		const struct dl_trace_end_ev *ev = (const void *)h;

		/* A call's record lost to a full ring buffer or in-flight map: the device model may lack it. */
		c->calls_lost |= ev->drops[DL_DROP_CUDA] || ev->drops[DL_DROP_INFLIGHT];
		widen_lost(c);
		dl_corr_finish(c);
		return 0;
	}
	default:
		break;
	}
	if (end > c->watermark)
		c->watermark = end;
	/* Block submissions too (a read outside read calls, a mapped file's page faults, is a read of its file), and receives. */
	if (h->kind == DL_EV_SCHED || h->kind == DL_EV_WAKE || h->kind == DL_EV_PROC || h->kind == DL_EV_BIO_SUBMIT ||
	    h->kind == DL_EV_NET_RECV || (h->kind >= DL_EV_FILE_OPEN && h->kind <= DL_EV_FILE_CLOSE))
		dl_lineage_note(&c->lin, h);

	if (h->kind == DL_EV_CUDA || h->kind == DL_EV_SCHED || h->kind == DL_EV_MARK) {
		/* Hashed once: the site's names, for its count here and the call's share of the steps. */
		uint64_t site = r->call && r->call->depth == 0 ? dl_site_key(r->call) : DL_SITE_NONE;

		keep = event_of(r, site, &e);
		/* Processes without CUDA calls are workers: only their tree spans matter. */
		p = proc_of(c, (pid_t)h->tgid, h->kind != DL_EV_SCHED);
		if (p && keep && e.kind == DL_EV_CUDA && e.u.call.cls == DL_CLS_LAUNCH)
			e.u.call.kcol = (uint8_t)dl_corr_kdur_column(p, r->call);
		if (p && site != DL_SITE_NONE)
			dl_sites_count(&p->pub.sites, r->call, site);
		if (p && p->st == CP_LEARN)
			dl_corr_learn(c, p, keep ? &e : NULL, h);
		else if (p && p->st == CP_TRACK && keep)
			dl_corr_track(p, &e);
		if (p && p->track.relearn_due)
			dl_corr_relearn(p);
	}
	finalize_ready(c, false);
	if (c->tree.n > 4096 && !(c->tree.n & 1023))
		trim_tree(c);
	return 0;
}

void dl_corr_finish(struct dl_correlator *c)
{
	for (size_t i = 0; i < c->procs.n; i++)
		if (c->procs.v[i].st == CP_LEARN)
			dl_corr_try_decide(c, &c->procs.v[i], true);
	finalize_ready(c, true);
}

unsigned dl_corr_cpus(const struct dl_correlator *c)
{
	unsigned n = 0;

	for (size_t i = 0; i < DL_CORR_CPUS / 64; i++)
		n += (unsigned)__builtin_popcountll(c->cpus_ran[i]);
	return n;
}

size_t dl_corr_nprocs(const struct dl_correlator *c)
{
	return c->procs.n;
}

const struct dl_corr_proc *dl_corr_proc(const struct dl_correlator *c, size_t i)
{
	return i < c->procs.n ? &c->procs.v[i].pub : NULL;
}

const struct dl_corr_opts *dl_corr_options(const struct dl_correlator *c)
{
	return &c->opts;
}

/*
 * The longest a step of p may last and count in the totals (DL_OUTLIER_P90);
 * UINT64_MAX: no cut. Of every step: exact while none was folded, else from
 * the fold's histogram, the held steps and the kept ones (to its 0.39%).
 */
static uint64_t outlier_cut(const struct dl_corr_proc *p)
{
	uint64_t median = 0, p90;

	if (!p->folded.n && !p->nheld) {
		p90 = kept_p90(p);
	} else {
		struct dl_step_fold all = { 0 };

		dl_fold_merge(&all, &p->folded);
		for (size_t s = 0; s < p->nheld; s++)
			dl_fold_add(&all, &p->held[s], true);
		for (size_t s = 0; s < p->nsteps; s++)
			dl_fold_add(&all, &p->steps[s], true);
		dl_fold_percentiles(&all, &median, &p90);
		dl_fold_free(&all);
	}
	return p90 && p90 <= UINT64_MAX / DL_OUTLIER_P90 ? p90 * DL_OUTLIER_P90 : UINT64_MAX;
}

/* Into out: the step, or its count among the outliers. */
static void stats_add(struct dl_step_stats *out, const struct dl_step *st, uint64_t cut, bool with_hist, uint64_t *durs,
		      size_t *k)
{
	if (st->dur_ns > cut) {
		if (out->outliers < DL_OUTLIERS_LISTED)
			out->outlier_index[out->outliers] = st->index;
		out->outliers++;
		out->outlier_ns += st->dur_ns;
		return;
	}
	/* A partial step's duration is true (its markers are always probed): it is in the percentiles. */
	dl_fold_add(&out->sum, st, with_hist);
	if (durs)
		durs[(*k)++] = st->dur_ns;
}

void dl_corr_stats(const struct dl_correlator *c, const struct dl_corr_proc *only, struct dl_step_stats *out)
{
	bool folded = false;
	size_t n = 0, k = 0;
	uint64_t *durs;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < c->procs.n; i++) {
		const struct dl_corr_proc *p = &c->procs.v[i].pub;

		if (!only || p == only) {
			folded |= p->folded.n + p->nheld > 0;
			n += p->nsteps;
		}
	}
	durs = folded ? NULL : dl_xcalloc(n + 1, sizeof(*durs));
	for (size_t i = 0; i < c->procs.n; i++) {
		const struct dl_corr_proc *p = &c->procs.v[i].pub;
		uint64_t cut;

		if (only && p != only)
			continue;
		cut = outlier_cut(p);
		out->outlier_cut_ns = cut;
		dl_fold_merge(&out->sum, &p->folded);
		for (size_t s = 0; s < p->nheld; s++)
			stats_add(out, &p->held[s], cut, true, NULL, &k);
		for (size_t s = 0; s < p->nsteps; s++)
			stats_add(out, &p->steps[s], cut, folded, durs, &k);
	}
	out->cv = dl_fold_cv(&out->sum);
	out->exact = !folded;
	if (durs)
		dl_durations_percentiles(durs, k, &out->median_ns, &out->p90_ns);
	else
		dl_fold_percentiles(&out->sum, &out->median_ns, &out->p90_ns);
	free(durs);
}
