// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The correlator's view of the device in a step: its busy bounds, idle split and timeline. */
#include <stdlib.h>
#include "analysis/correlate_int.h"
#include "analysis/gputime.h"

/* Enqueue flows drawn per step, past the openers: a step of thousands of launches keeps the trace usable. */
#define MAX_ENQUEUE_FLOWS 1024

/*
 * Besides the calls that opened a span, every enqueue of the main thread in
 * the step is a flow to its stream's track (it falls inside its stream's open
 * span, so inside a slice of it); *opens grows. Returns the new count.
 */
static size_t main_enqueues(const struct cproc *p, size_t c0, size_t c1, uint64_t start, uint64_t end,
			    struct dl_devq_open **opens, size_t nopens)
{
	size_t extra = 0, n = nopens;
	struct dl_devq_open *v;

	for (size_t i = c0; i < c1; i++)
		extra += p->hist.calls.v[i].start >= start && p->hist.calls.v[i].start < end;
	v = dl_xrealloc(*opens, (nopens + dl_min_u64(extra, MAX_ENQUEUE_FLOWS) + 1) * sizeof(*v));
	for (size_t i = c0, drawn = 0; i < c1 && drawn < MAX_ENQUEUE_FLOWS; i++) {
		const struct mcall *m = &p->hist.calls.v[i];
		struct dl_devq_call dc = { .stream = m->stream, .tid = p->pub.main_tid, .api = m->api, .cls = m->cls,
					   .dir = m->dir, .async = m->async, .ok = m->ok };
		uint64_t key;
		size_t s, k;

		if (m->start < start || m->start >= end || !dl_devq_enqueues(&dc))
			continue;
		key = dl_devq_stream_key(&dc);
		for (s = 0; s < p->hist.devq.streams.n && p->hist.devq.streams.v[s].key != key; s++)
			;
		if (s == p->hist.devq.streams.n)
			continue;
		for (k = 0; k < nopens && !(v[k].at == m->start && v[k].stream == s); k++)
			;
		if (k < nopens)
			continue;   /* it opened the span: drawn already */
		v[n++] = (struct dl_devq_open){ m->start, (uint32_t)s, p->pub.main_tid };
		drawn++;
	}
	*opens = v;
	return n;
}

/*
 * Each device's bounds, when the process used more than one: the upper, the
 * union of the spans of its streams; the lower, of the waits on it.
 */
static void device_bounds(const struct cproc *p, struct dl_step *st, const struct dl_span *streams, size_t nstreams,
			  const struct dl_devq_wait *w, size_t n, const struct dl_span *sched, size_t nsched,
			  bool lost)
{
	uint64_t start = st->start_ns, end = st->start_ns + st->dur_ns;
	struct dl_span *v = dl_xcalloc(nstreams + 1, sizeof(*v)), *lower;

	st->ndevices = p->hist.devq.devices > 1 ? dl_min_u64(p->hist.devq.devices, DL_STEP_DEVICES) : 0;
	for (uint32_t d = 0; d < st->ndevices; d++) {
		size_t k = 0, nlower;

		for (size_t i = 0; i < nstreams; i++)
			if (dl_devq_stream_dev(&p->hist.devq, streams[i].kind) == d)
				v[k++] = streams[i];
		k = dl_spans_union(v, k);
		st->dev_busy_hi_ns[d] = lost ? st->dur_ns : dl_spans_overlap(v, k, start, end);
		nlower = dl_devq_lower_spans_dev(w, n, sched, nsched, start, end, (int)d, &lower);
		st->dev_busy_lo_ns[d] = dl_min_u64(st->dev_busy_hi_ns[d], dl_spans_overlap(lower, nlower, start, end));
		free(lower);
	}
	free(v);
}

/*
 * Lost records may have held an enqueue the model never saw, so with any lost
 * the upper bound is the whole step: no time is known idle, nothing is drawn.
 */
size_t dl_corr_device(const struct dl_correlator *c, struct cproc *p, size_t c0, size_t c1, struct dl_step *st,
		      const struct dl_span *cuda, size_t ncuda, const struct dl_span *sched, size_t nsched,
		      struct dl_gpu_span **spans)
{
	uint64_t start = st->start_ns, end = st->start_ns + st->dur_ns;
	struct dl_devq_wait *w = dl_xcalloc(c1 - c0 + 1, sizeof(*w));
	struct dl_span *blocking = dl_xcalloc(c1 - c0 + 1, sizeof(*blocking));
	uint64_t *keys = dl_xcalloc(p->hist.devq.streams.n + 1, sizeof(*keys));
	struct dl_span *streams, *lower;
	struct dl_devq_open *opens;
	size_t n = 0, nstreams, nlower, nopens, nspans = 0;

	*spans = NULL;
	for (size_t i = c0; i < c1; i++) {
		const struct mcall *m = &p->hist.calls.v[i];
		struct dl_devq_call dc = { .cls = m->cls, .dir = m->dir, .async = m->async };

		if (m->entry_only || m->end <= start || m->start >= end || !dl_devq_blocking(&dc))
			continue;
		blocking[n] = (struct dl_span){ m->start, m->end, 0 };
		w[n] = (struct dl_devq_wait){ m->start, m->end, m->waited != DL_DEVQ_EMPTY,
					      dl_devq_returns_when_done(&dc, m->pageable), m->pageable ? m->bytes : 0,
					      m->dev, false };
		/* Waits are judged in order: whether the runtime polls, by what its waits showed up to this one. */
		if (w[n].waited)
			w[n].polling = dl_devq_note_wait(&p->hist.waits, sched, nsched, &w[n]);
		n++;
		if (m->ok)
			dl_devq_drained_by(&p->hist.devq, m->end, dl_devq_woke(sched, nsched, m->start, m->end));
	}
	for (size_t i = 0; i < p->hist.devq.streams.n; i++)
		keys[i] = p->hist.devq.streams.v[i].key;
	nstreams = dl_devq_stream_spans(&p->hist.devq, start, end, &streams);
	nlower = dl_devq_lower_spans(w, n, sched, nsched, start, end, &lower);
	nopens = dl_devq_opens(&p->hist.devq, start, end, &opens);
	nopens = main_enqueues(p, c0, c1, start, end, &opens, nopens);
	if (c->calls_lost) {
		st->gpu_busy_hi_ns = st->dur_ns;
	} else {
		struct dl_gpu_input in = { .start = start, .end = end, .streams = streams, .nstreams = nstreams,
					   .keys = keys, .lower = lower, .nlower = nlower, .blocking = blocking,
					   .nblocking = n, .cuda = cuda, .ncuda = ncuda, .sched = sched, .nsched = nsched,
					   .opens = opens, .nopens = nopens };
		uint64_t idle = 0;

		nspans = dl_gpu_timeline(&in, st->gpu_idle_ns, spans);
		for (int k = 0; k < DL_IDLE_COUNT; k++)
			idle += st->gpu_idle_ns[k];
		/* The same spans' union as dl_devq_busy_upper's: the idle split is the step less the upper bound. */
		st->gpu_busy_hi_ns = st->dur_ns - idle;
	}
	st->gpu_busy_lo_ns = dl_min_u64(st->gpu_busy_hi_ns, dl_spans_overlap(lower, nlower, start, end));
	device_bounds(p, st, streams, nstreams, w, n, sched, nsched, c->calls_lost);
	free(w);
	free(blocking);
	free(keys);
	free(streams);
	free(lower);
	free(opens);
	return nspans;
}
