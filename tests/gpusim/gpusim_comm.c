// SPDX-License-Identifier: MIT
/*
 * gpusim_comm.c — collectives. The simulated libnccl.so.2 (gpusim_nccl.c)
 * turns each NCCL call into bus bytes and hands them here: one item on the
 * stream, on the communication engine, so communication overlaps kernels of
 * other streams but not other collectives (one network, as NCCL's channels
 * share it). The caller's CPU pays GPUSIM_NCCL_LAUNCH_US, as a real
 * collective launches a kernel.
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

GPUSIM_API int gpusimCollective(cudaStream_t hs, double bus_bytes)
{
	struct CUstream_st *s;
	uint64_t cost;

	spin_cpu(S.comm_launch_ns);
	s = lock_stream(hs, 0);
	if (!s)
		return -1;   /* not a stream: lock_stream let go of the lock */
	cost = S.comm_latency_ns + (uint64_t)(bus_bytes > 0 ? bus_bytes / S.comm_bpns : 0);
	schedule(s, ENG_COMM, cost, now_ns());
	unlock();
	return 0;
}

/* The collectives of the device's timeline (gpusimTimeline's items that ran on the communication engine). */
GPUSIM_API unsigned long long gpusimCommTimeline(unsigned long long first, unsigned long long *start_end,
						 unsigned long long max)
{
	unsigned long long n = 0, seen = 0;

	lock();
	S.timeline_on = 1;
	for (size_t i = 0; i < S.timeline.n && n < max; i++) {
		const struct timeline_item *it = (const struct timeline_item *)S.timeline.v + i;

		if (!it->comm || seen++ < first)
			continue;
		start_end[2 * n] = it->start;
		start_end[2 * n + 1] = it->end;
		n++;
	}
	unlock();
	return n;
}
