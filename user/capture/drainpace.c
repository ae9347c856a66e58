// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "capture/drainpace.h"

/*
 * The interval stretches only while a drain reads under 1/32 of the buffer:
 * at double the interval the same rate reads under 1/16, four times below
 * the quarter-full forced wake-up, so a rate may rise fourfold before that
 * wake-up rather than the timer must catch it. From 1/16 up it snaps back;
 * in between it is kept, so a steady rate settles instead of oscillating.
 */
#define STRETCH_BELOW_DIV 32
#define SNAP_BACK_DIV 16

void dl_drain_pace_init(struct dl_drain_pace *p, unsigned base_ms, unsigned max_ms, uint64_t ring_bytes)
{
	p->base_ms = base_ms ? base_ms : 1;
	p->max_ms = max_ms > p->base_ms ? max_ms : p->base_ms;
	p->cur_ms = p->base_ms;
	p->ring_bytes = ring_bytes;
}

unsigned dl_drain_pace_next(struct dl_drain_pace *p, uint64_t bytes)
{
	if (bytes >= p->ring_bytes / SNAP_BACK_DIV)
		p->cur_ms = p->base_ms;
	else if (bytes < p->ring_bytes / STRETCH_BELOW_DIV && p->cur_ms < p->max_ms)
		p->cur_ms = p->cur_ms * 2 < p->max_ms ? p->cur_ms * 2 : p->max_ms;
	return p->cur_ms;
}
