/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Records for the unit tests, built one way: each test's helpers (which
 * stream or sink they feed, which pid is theirs) wrap these.
 */
#ifndef DLBPF_TEST_RECORDS_H
#define DLBPF_TEST_RECORDS_H

#include <stdint.h>
#include <string.h>
#include "dlbpf/events.h"

/* A record's header: size and kind from the record, the rest as given. */
static inline struct dl_hdr test_hdr(size_t size, int kind, uint64_t ts, uint32_t tgid, uint32_t tid)
{
	return (struct dl_hdr){ .size = (uint16_t)size, .kind = (uint16_t)kind, .ts = ts, .tgid = tgid, .tid = tid };
}

/* A scheduler interval: tid of tgid in state for dur from ts, then next_state. */
static inline struct dl_sched_ev test_sched(uint32_t tgid, uint32_t tid, uint64_t ts, uint64_t dur, uint32_t state,
					    uint32_t next_state)
{
	struct dl_sched_ev e;

	memset(&e, 0, sizeof(e));
	e.h = test_hdr(sizeof(e), DL_EV_SCHED, ts, tgid, tid);
	e.dur_ns = dur;
	e.state = state;
	e.next_state = next_state;
	return e;
}

#endif
