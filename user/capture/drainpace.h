/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* How long the run loop waits between drains of the ring buffer. */
#ifndef DL_DRAINPACE_H
#define DL_DRAINPACE_H

#include <stdint.h>

/*
 * The programs submit without waking the collector (bpf/common.bpf.h): it
 * drains on a timer. Each timer wake-up costs ~50-90 us here (a VM), the
 * larger part of the collector's CPU at 100 k records/s with a 10 ms timer.
 * So while a drain finds the buffer nearly empty the interval doubles, up to
 * max_ms; a drain that finds more brings it back to base_ms. A burst between
 * two drains is caught by the programs' forced wake-up at a quarter full.
 */
struct dl_drain_pace {
	unsigned base_ms, max_ms, cur_ms;
	uint64_t ring_bytes;
};

void dl_drain_pace_init(struct dl_drain_pace *p, unsigned base_ms, unsigned max_ms, uint64_t ring_bytes);
/* After a drain that read `bytes` of records: the timeout of the next wait, in ms. */
unsigned dl_drain_pace_next(struct dl_drain_pace *p, uint64_t bytes);

#endif
