// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include "output/timeline_calls.h"
#include "util.h"

#define RECENT 64                /* per thread: enough for a step's copies and syncs */

static void push(struct dl_tcalls *c, uint64_t ts, uint64_t dur, int sync)
{
	if (!c->ring)
		c->ring = dl_xcalloc(RECENT, sizeof(*c->ring));
	c->ring[c->n++ % RECENT] = (struct dl_tcall){ ts, dur, sync, 0 };
}

void dl_tcalls_copy(struct dl_tcalls *c, uint64_t ts, uint64_t dur)
{
	push(c, ts, dur, 0);
	if (c->batch.flow && !c->batch.copy_at && ts >= c->batch.handoff_ns)
		c->batch.copy_at = ts + dur / 2;
}

void dl_tcalls_sync(struct dl_tcalls *c, uint64_t ts, uint64_t dur)
{
	push(c, ts, dur, 1);
}

/* The batch's flow ends at the last of hand-off, copy and launch known (at = 0: not known). */
static void batch_end(struct dl_tcalls *c, struct dl_tout *out, const struct dl_ttrack *track, uint64_t launch_at)
{
	uint64_t copy_at = c->batch.copy_at, flow = c->batch.flow;

	if (!flow)
		return;
	out->flow_mark(out, track, c->batch.handoff_ns, "hand-off", flow, !copy_at);
	if (copy_at)
		out->flow_mark(out, track, copy_at, "batch to device", flow, !launch_at);
	if (launch_at)
		out->flow_mark(out, track, launch_at, "batch's kernels", flow, 1);
	c->batch.flow = 0;
}

/* The copies since the last launch or sync lead to this launch; an awaited batch flow ends on it. */
void dl_tcalls_launch(struct dl_tcalls *c, struct dl_tout *out, const struct dl_ttrack *track, uint64_t ts,
		      uint64_t dur)
{
	uint64_t at = ts + dur / 2;

	for (unsigned i = c->n; c->ring && i > 0 && i + RECENT > c->n; i--) {
		struct dl_tcall *r = &c->ring[(i - 1) % RECENT];

		if (r->sync || r->launch_at)
			break;
		r->launch_at = at;
	}
	if (c->batch.flow && c->batch.copy_at && ts >= c->batch.copy_at)
		batch_end(c, out, track, at);
}

void dl_tcalls_in(const struct dl_tcalls *c, uint64_t start, uint64_t end, const struct dl_tcall **copy,
		  const struct dl_tcall **sync)
{
	*copy = *sync = NULL;
	for (unsigned i = c->n > RECENT ? c->n - RECENT : 0; c->ring && i < c->n; i++) {
		const struct dl_tcall *r = &c->ring[i % RECENT];

		if (r->ts < start || r->ts >= end)
			continue;
		if (!r->sync && (!*copy || r->ts < (*copy)->ts))
			*copy = r;
		if (r->sync && (!*sync || r->ts > (*sync)->ts))
			*sync = r;
	}
}

/*
 * Steps are written after they close, so the batch's copy and launch may be
 * among the recent calls already; else they are awaited (a batch waited for
 * in one step is often copied at the start of the next).
 */
void dl_tcalls_batch(struct dl_tcalls *c, struct dl_tout *out, const struct dl_ttrack *track, uint64_t flow,
		     uint64_t handoff_ns)
{
	const struct dl_tcall *copy = NULL, *sync;

	batch_end(c, out, track, 0);
	c->batch.flow = flow;
	c->batch.handoff_ns = handoff_ns;
	c->batch.copy_at = 0;
	dl_tcalls_in(c, handoff_ns, UINT64_MAX, &copy, &sync);
	if (!copy)
		return;
	c->batch.copy_at = copy->ts + copy->dur / 2;
	if (copy->launch_at)
		batch_end(c, out, track, copy->launch_at);
}

void dl_tcalls_close(struct dl_tcalls *c, struct dl_tout *out, const struct dl_ttrack *track)
{
	batch_end(c, out, track, 0);
}

void dl_tcalls_free(struct dl_tcalls *c)
{
	free(c->ring);
	c->ring = NULL;
}
