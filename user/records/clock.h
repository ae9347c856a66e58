/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef DLBPF_CLOCK_H
#define DLBPF_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on a clock; CLOCK_MONOTONIC is the records' clock (bpf_ktime_get_ns). */
static inline uint64_t dl_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t dl_now_ns(void)
{
	return dl_clock_ns(CLOCK_MONOTONIC);
}

/*
 * The time, read at its first use (ns 0: not yet). A record's naming stamps what it writes with
 * it but mostly writes nothing: on a VM's clock source a read per record was a fifth of the
 * collector's time at millions of records a second.
 */
struct dl_lazy_now {
	uint64_t ns;
};

static inline uint64_t dl_lazy_now(struct dl_lazy_now *t)
{
	if (!t->ns)
		t->ns = dl_now_ns();
	return t->ns;
}

#endif
