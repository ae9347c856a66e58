// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A process's calls, scheduler spans and markers as they come, once its step
 * marker is known: the device model is fed, step boundaries are cut at the
 * marker, and the copy facts and sync cadence are counted. What is kept here
 * the steps' finalize (correlate.c) reads back.
 */
#include "analysis/correlate_int.h"
#include "analysis/steplearn.h"

static bool marker_matches(const struct dl_marker *mk, const struct mcall *m, bool after_sync)
{
	if (mk->kind == DL_MARK_API)
		return m->api == mk->api;
	if (mk->kind == DL_MARK_AFTER_SYNC)
		return after_sync && m->api == mk->api && (mk->dir == 0xff || m->dir == mk->dir);
	if (mk->kind == DL_MARK_PERIOD)
		return m->api == mk->api && m->dir == mk->dir && m->stream == mk->stream &&
		       dl_sl_size_log2(m->bytes) == mk->size_log2;
	return false;
}

static void note_step_sync(struct dl_sync_cadence *c, bool synced)
{
	c->steps++;
	if (!synced)
		return;
	if (c->synced++) {
		uint64_t gap = c->steps - c->last;

		c->gaps[gap <= DL_SYNC_GAP_MAX ? gap : 0]++;
	}
	c->last = c->steps;
}

uint32_t dl_corr_sync_every(const struct dl_corr_proc *p)
{
	uint32_t best = 0;

	for (uint32_t g = 1; g <= DL_SYNC_GAP_MAX; g++)
		if (p->syncs.gaps[g] > p->syncs.gaps[best])
			best = g;
	return best;
}

static void on_marker(struct cproc *p, uint64_t ts)
{
	p->track.max_step_syncs = p->track.syncs_since_marker > p->track.max_step_syncs ? p->track.syncs_since_marker : p->track.max_step_syncs;
	p->track.syncs_since_marker = 0;
	if (p->track.have_marker && ts > p->track.last_marker) {
		*dl_vec_push(&p->fin.pending) = (struct pending_step){ p->track.last_marker, ts };
		note_step_sync(&p->pub.syncs, p->track.step_synced);
	}
	if (!p->track.have_marker || ts > p->track.last_marker)
		p->track.step_synced = false;
	p->track.have_marker = true;
	p->track.last_marker = ts;
}

static void note_bandwidth(struct cproc *p, const struct mcall *m)
{
	double gbps;

	/* A pinned async copy returns before the transfer: its call time says nothing of bandwidth. */
	if (m->bytes < BW_SAMPLE_BYTES || m->end <= m->start || (m->async && !m->pageable))
		return;
	gbps = (double)m->bytes / (double)(m->end - m->start);
	if (gbps > p->pub.copy.best_gbps[m->dir][m->pageable])
		p->pub.copy.best_gbps[m->dir][m->pageable] = gbps;
}

static void note_copy_facts(struct dl_copy_facts *f, const struct mcall *m)
{
	static const uint64_t bounds[] = { 256, 1024, 4096, 16384, 65536 };
	uint64_t dur = m->end > m->start ? m->end - m->start : 0;

	f->copies++;
	f->bytes += m->bytes;
	f->copy_ns += dur;
	if (m->pageable) {
		f->pageable++;
		f->pageable_bytes += m->bytes;
		f->pageable_ns += dur;
	}
	if (m->bytes < DL_SMALL_COPY_BYTES) {
		int b = 0;

		while (b < 5 && m->bytes > bounds[b])
			b++;
		f->small++;
		f->small_ns += dur;
		f->small_hist[b]++;
	}
	if (m->dir == DL_DIR_H2D && !m->async && m->bytes > DL_SMALL_COPY_BYTES)
		f->sync_h2d_large++;
	if (m->bytes >= ALIGN_CHECK_BYTES && m->host) {
		f->aligned_checked++;
		f->misaligned_ptr += (m->host & 63) != 0;
		f->odd_size += (m->bytes & 15) != 0;
	}
}

static void track_call(struct cproc *p, const struct mcall *m)
{
	/* The marker is the first call of its kind since the last sync point. */
	if (marker_matches(&p->pub.marker, m, p->track.after_sync)) {
		on_marker(p, m->start);
		p->track.after_sync = false;
	}
	if (dl_corr_is_sync_point(m)) {
		bool automatic = p->pub.marker.kind == DL_MARK_AFTER_SYNC || p->pub.marker.kind == DL_MARK_PERIOD;

		p->track.after_sync = true;
		p->track.step_synced |= p->track.have_marker;
		p->track.syncs_since_marker++;
		if (automatic && p->pub.startup.relearned < RELEARN_MAX && p->track.syncs_since_marker > RELEARN_SYNCS &&
		    p->track.syncs_since_marker > RELEARN_STEP_FACTOR * p->track.max_step_syncs)
			p->track.relearn_due = true;
	}
	if (m->cls == DL_CLS_COPY) {
		note_bandwidth(p, m);
		note_copy_facts(&p->pub.copy, m);
	}
	*dl_vec_push(&p->hist.calls) = *m;
}

static void track_sched(struct cproc *p, const struct cevent *e)
{
	struct dl_span s = e->u.sched.span;

	if (p->hist.sched.n && s.start < p->hist.sched.v[p->hist.sched.n - 1].end)
		s.start = p->hist.sched.v[p->hist.sched.n - 1].end;
	if (s.end > s.start)
		*dl_vec_push(&p->hist.sched) = s;
	p->hist.sched_until = dl_max_u64(p->hist.sched_until, s.end);
	p->hist.sched_next = e->u.sched.next;
}

/* Every thread's calls go to the device model; the main thread's, with what the model said, to the steps. */
static void track_device(struct cproc *p, const struct cevent *e)
{
	const struct mcall *m = &e->u.call;
	struct dl_devq_call dc = {
		.start = m->start, .end = m->end, .stream = m->stream, .event = m->event, .ptr = m->ptr,
		.size = m->size, .tid = e->tid, .api = m->api, .cls = m->cls, .dir = m->dir, .async = m->async,
		.pageable = m->pageable, .entry_only = m->entry_only, .ok = m->ok,
	};
	struct mcall mc = *m;
	struct dl_devq_seen seen;

	mc.waited = (uint8_t)dl_devq_call(&p->hist.devq, &dc);
	seen = dl_devq_seen(&p->hist.devq, &dc);
	mc.captured = seen.captured;
	mc.dev = (uint8_t)seen.dev;
	mc.graph_kernels = seen.graph_kernels;
	dl_corr_kdur_call(p, e, &mc);
	if (e->tid == p->pub.main_tid)
		track_call(p, &mc);
	/* Steps forget the model's old spans as they finalize; while none closes, what they will not need goes. */
	if (p->hist.devq.busy_max.n >= 4096 && !(p->hist.devq.busy_max.n & 1023))
		dl_devq_forget_before(&p->hist.devq, pending_first(p) ? pending_first(p)->start : p->track.last_marker);
}

void dl_corr_track_begin(struct cproc *p)
{
	/* The thread's first call of the marker's kind starts the first step. */
	p->track = (struct cp_tracking){ .after_sync = true };
}

void dl_corr_track_end(struct cproc *p)
{
	p->track = (struct cp_tracking){ 0 };
}

void dl_corr_track(struct cproc *p, const struct cevent *e)
{
	if (e->kind == DL_EV_CUDA) {
		track_device(p, e);
		return;
	}
	if (e->tid != p->pub.main_tid)
		return;
	switch (e->kind) {
	case DL_EV_SCHED:
		track_sched(p, e);
		break;
	case DL_EV_MARK:
		if (p->pub.marker.kind == DL_MARK_SYMBOL)
			on_marker(p, e->u.mark_ts);
		break;
	default:
		break;
	}
}
