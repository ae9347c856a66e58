/* SPDX-License-Identifier: MIT */
/*
 * The clocks the workloads and the simulator's tests measure themselves
 * with: the monotonic clock, the calling thread's CPU time, and its
 * schedstat (what the scheduler accounts it, on the CPU and waiting for one).
 */
#ifndef TESTS_THREAD_CLOCK_H
#define TESTS_THREAD_CLOCK_H

#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Inline: they time every phase and sit in the CPU-burning loops. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Spins until the loop itself has run for ns, with no system call in it, as a
 * real driver's launch or a framework's host work makes none. Polling
 * CLOCK_THREAD_CPUTIME_ID (a system call) made a simulated launch mostly
 * kernel time (8 system calls per 5 us launch, 775 k/s on the launch
 * scenario), so whatever a tracer adds to every system call was charged to
 * launches. The monotonic clock is read in the vDSO. An interval between two
 * reads longer than 8 times the fastest one seen (and at least 1 us) held
 * something else, an interrupt or another task: it does not count, so, like
 * real work, the spin takes longer when interrupted and takes ns of CPU under
 * contention. Relative to the fastest read, so that a clock read that is a
 * system call after all (no vDSO for this clock source, or under ptrace)
 * still ends the spin.
 */
#define SPIN_GAP_MIN_NS 1000ull

static inline void spin_oncpu_ns(uint64_t ns)
{
	uint64_t t = now_ns(), fastest = UINT64_MAX;

	while (ns) {
		uint64_t t2 = now_ns(), d = t2 - t, gap;

		t = t2;
		fastest = d < fastest ? d : fastest;
		gap = fastest * 8 > SPIN_GAP_MIN_NS ? fastest * 8 : SPIN_GAP_MIN_NS;
		if (d < gap)
			ns = d >= ns ? 0 : ns - d;
	}
}

/* The calling thread's schedstat fields 1 and 2: on-CPU ns, run-queue wait
 * ns. Both 0 and -1 when /proc does not say. */
static inline int thread_schedstat(uint64_t *oncpu_ns, uint64_t *runq_ns)
{
	char path[64];
	unsigned long long a, b;
	int got = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/schedstat", (long)syscall(SYS_gettid));
	f = fopen(path, "r");
	if (f) {
		got = fscanf(f, "%llu %llu", &a, &b) == 2;
		fclose(f);
	}
	*oncpu_ns = got ? a : 0;
	*runq_ns = got ? b : 0;
	return got ? 0 : -1;
}

#endif
