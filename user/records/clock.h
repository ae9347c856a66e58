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

#endif
