// SPDX-License-Identifier: MIT
/*
 * gpusim model: the parameters, the clocks a caller waits or spins on, and
 * the engine/stream scheduling rule every enqueued item goes through.
 *
 * Environment (read once, at the first CUDA call of the process)
 *   variable                 default  meaning
 *   GPUSIM_PINNED_GBPS       24       pinned H2D/D2H bandwidth, GB/s (1e9 B/s):
 *                                     PCIe Gen4 x16 effective
 *   GPUSIM_PAGEABLE_GBPS     8        pageable H2D/D2H bandwidth, GB/s
 *   GPUSIM_D2D_GBPS          1000     device-to-device copy bandwidth, GB/s
 *   GPUSIM_MEMSET_GBPS       2000     memset bandwidth, GB/s
 *   GPUSIM_COPY_LATENCY_US   10       fixed cost of each transfer, us
 *   GPUSIM_LAUNCH_US         5        CPU cost of one kernel launch, us
 *   GPUSIM_NS_PER_BLOCK      1000     default kernel cost per block, ns
 *   GPUSIM_KERNEL_BASE_US    2        default kernel fixed cost, us
 *   GPUSIM_DEVICE_MEM_MB     16384    device memory size (address range), MiB
 *   GPUSIM_COPY_DATA         1        0: do not move bytes (timing only)
 *   GPUSIM_TIMERSLACK_NS     1000     timer slack set on waiting threads;
 *                                     0 leaves it alone
 *   GPUSIM_COMPUTE_ENGINES   1        kernels of different streams that may
 *                                     run at once (1-8)
 *   GPUSIM_NCCL_GBPS         40       bus bandwidth of collectives, GB/s
 *   GPUSIM_NCCL_LATENCY_US   20       fixed device cost of each collective, us
 *   GPUSIM_NCCL_LAUNCH_US    8        CPU cost of one collective call, us
 *   GPUSIM_DEVICES           1        devices (1-8), each its own engines
 *   GPUSIM_PEER_GBPS         24       cudaMemcpyPeer bandwidth, GB/s
 *   GPUSIM_SCHEDULE          auto     how the host waits until a program
 *                                     calls cudaSetDeviceFlags: auto, spin,
 *                                     yield or blocking (cudaDeviceSchedule*)
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

struct gpusim_state S = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.once = PTHREAD_ONCE_INIT,
};

static _Thread_local int t_slack_set;

void *vec_push(struct vec *v)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 16;
		void *nv = realloc(v->v, cap * v->elt);
		if (!nv)
			return NULL;
		v->v = nv;
		v->cap = cap;
	}
	return (char *)v->v + v->elt * v->n++;
}

void vec_del(struct vec *v, size_t i)
{
	char *b = v->v;
	memmove(b + i * v->elt, b + (i + 1) * v->elt, (v->n - i - 1) * v->elt);
	v->n--;
}

static double env_double(const char *name, double def)
{
	const char *s = getenv(name);
	char *end;
	double v;

	if (!s || !*s)
		return def;
	v = strtod(s, &end);
	if (*end || v < 0) {
		fprintf(stderr, "gpusim: ignoring bad %s=%s\n", name, s);
		return def;
	}
	return v;
}

/* GPUSIM_SCHEDULE: the cudaDeviceSchedule* flag every device starts with. */
static unsigned int env_schedule(void)
{
	static const struct {
		const char *name;
		unsigned int flag;
	} modes[] = { { "auto", cudaDeviceScheduleAuto },
		      { "spin", cudaDeviceScheduleSpin },
		      { "yield", cudaDeviceScheduleYield },
		      { "blocking", cudaDeviceScheduleBlockingSync } };
	const char *s = getenv("GPUSIM_SCHEDULE");

	if (!s || !*s)
		return cudaDeviceScheduleAuto;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!strcmp(s, modes[i].name))
			return modes[i].flag;
	fprintf(stderr, "gpusim: ignoring bad GPUSIM_SCHEDULE=%s (auto, spin, yield or blocking)\n", s);
	return cudaDeviceScheduleAuto;
}

void init_once(void)
{
	unsigned int schedule_flag = env_schedule();
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);

	S.pinned_bpns = env_double("GPUSIM_PINNED_GBPS", 24.0);
	S.pageable_bpns = env_double("GPUSIM_PAGEABLE_GBPS", 8.0);
	S.d2d_bpns = env_double("GPUSIM_D2D_GBPS", 1000.0);
	S.memset_bpns = env_double("GPUSIM_MEMSET_GBPS", 2000.0);
	S.copy_latency_ns = (uint64_t)(env_double("GPUSIM_COPY_LATENCY_US", 10.0) * 1000.0);
	S.launch_ns = (uint64_t)(env_double("GPUSIM_LAUNCH_US", 5.0) * 1000.0);
	S.ns_per_block = (uint64_t)env_double("GPUSIM_NS_PER_BLOCK", 1000.0);
	S.kernel_base_ns = (uint64_t)(env_double("GPUSIM_KERNEL_BASE_US", 2.0) * 1000.0);
	S.timerslack_ns = (uint64_t)env_double("GPUSIM_TIMERSLACK_NS", 1000.0);
	S.copy_data = env_double("GPUSIM_COPY_DATA", 1.0) != 0.0;
	S.compute_engines = (unsigned)env_double("GPUSIM_COMPUTE_ENGINES", 1.0);
	S.comm_bpns = env_double("GPUSIM_NCCL_GBPS", 40.0);
	S.comm_latency_ns = (uint64_t)(env_double("GPUSIM_NCCL_LATENCY_US", 20.0) * 1000.0);
	S.comm_launch_ns = (uint64_t)(env_double("GPUSIM_NCCL_LAUNCH_US", 8.0) * 1000.0);
	S.ndev = (int)env_double("GPUSIM_DEVICES", 1.0);
	S.peer_bpns = env_double("GPUSIM_PEER_GBPS", 24.0);
	S.ncpus = ncpus > 0 ? (int)ncpus : 1;
	if (S.ndev < 1 || S.ndev > GPUSIM_MAX_DEVICES)
		S.ndev = 1;
	if (S.peer_bpns <= 0)
		S.peer_bpns = 24.0;
	if (S.comm_bpns <= 0)
		S.comm_bpns = 40.0;
	if (S.compute_engines < 1 || S.compute_engines > GPUSIM_MAX_COMPUTE)
		S.compute_engines = 1;
	if (S.pinned_bpns <= 0)
		S.pinned_bpns = 24.0;
	if (S.pageable_bpns <= 0)
		S.pageable_bpns = 8.0;
	if (S.d2d_bpns <= 0)
		S.d2d_bpns = 1000.0;
	if (S.memset_bpns <= 0)
		S.memset_bpns = 2000.0;

	S.dev_size = (size_t)env_double("GPUSIM_DEVICE_MEM_MB", 16384.0) << 20;
	/* A fixed, recognisable region when free; anywhere otherwise. */
	void *hint = (void *)(uintptr_t)0x600000000000ull;
	void *p = mmap(hint, S.dev_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		p = mmap(NULL, S.dev_size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		S.dev_base = NULL;
		S.dev_size = 0;
	} else {
		S.dev_base = p;
	}
	for (int d = 0; d < GPUSIM_MAX_DEVICES; d++) {
		S.dev[d].legacy.magic = STREAM_MAGIC;
		S.dev[d].legacy.legacy = 1;
		S.dev[d].legacy.dev = d;
		S.dev[d].legacy.capture_last = -1;
		S.dev[d].legacy.capture_join = -1;
		S.dev[d].flags = schedule_flag;
	}
	S.dev_blocks.elt = sizeof(struct range);
	S.pinned.elt = sizeof(struct range);
	S.pending.elt = sizeof(struct pending_copy);
	S.kcost.elt = sizeof(struct range);
	S.timeline.elt = sizeof(struct timeline_item);
	S.wakes.elt = sizeof(struct timeline_item);
}

/*
 * How a thread waits for device dev, from its cudaDeviceSchedule* flag.
 * Auto follows the documented heuristic: spin while the process has no more
 * active contexts (devices here) than the system has CPUs, else yield.
 */
enum wait_mode wait_mode_of(int dev)
{
	switch (S.dev[dev].flags & cudaDeviceScheduleMask) {
	case cudaDeviceScheduleSpin:
		return WAIT_SPIN;
	case cudaDeviceScheduleYield:
		return WAIT_YIELD;
	case cudaDeviceScheduleBlockingSync:
		return WAIT_BLOCK;
	default:
		return S.ndev <= S.ncpus ? WAIT_SPIN : WAIT_YIELD;
	}
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/*
 * Wait until CLOCK_MONOTONIC reaches t, called without the lock: spin on the
 * clock (vDSO, no system call), yield between reads, or sleep, so the
 * scheduler sees the thread running, runnable or blocked (S) as under the
 * real runtime.
 */
void wait_until(uint64_t t, enum wait_mode how)
{
	struct timespec ts = { .tv_sec = (time_t)(t / NSEC), .tv_nsec = (long)(t % NSEC) };

	if (how == WAIT_BLOCK && !t_slack_set) {
		t_slack_set = 1;
		if (S.timerslack_ns)
			prctl(PR_SET_TIMERSLACK, (unsigned long)S.timerslack_ns, 0, 0, 0);
	}
	while (now_ns() < t) {
		if (how == WAIT_SPIN) {
			cpu_relax();
		} else if (how == WAIT_YIELD) {
			sched_yield();
		} else {
			int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			if (r && r != EINTR)
				break;
		}
	}
}

/*
 * At the end of a call that waited for the device's point t, entered at
 * since: when the work was outstanding at entry (t > since) and the call
 * returns after t, the host saw the completion late by that much (a timer's
 * latency, a preemption, or the host's own work in the call, such as the
 * deferred copies made at a synchronisation), and the late wakes keep it.
 */
void note_late(uint64_t t, uint64_t since)
{
	struct timeline_item *w;
	uint64_t back = now_ns();

	if (t <= since || back <= t)
		return;
	lock();
	if (S.timeline_on && (w = vec_push(&S.wakes)))
		*w = (struct timeline_item){ t, back, 0, t_device };
	unlock();
}

void sleep_until(uint64_t t)
{
	uint64_t since = now_ns();

	pthread_once(&S.once, init_once);
	wait_until(t, wait_mode_of(t_device));
	note_late(t, since);
}

/* Busy-spin ns of this thread's CPU time (a launch's host cost); thread_clock.h says how. */
void spin_cpu(uint64_t ns)
{
	spin_oncpu_ns(ns);
}

/* Earliest start of a new item on s, from stream ordering only (the legacy stream of its own device). */
uint64_t stream_dep(struct CUstream_st *s)
{
	struct CUstream_st *legacy = &S.dev[s->dev].legacy;
	uint64_t t = s->ready;

	if (s->legacy) {
		for (struct CUstream_st *o = S.streams; o; o = o->next)
			if (o->dev == s->dev && !(o->flags & cudaStreamNonBlocking))
				t = max64(t, o->ready);
	} else if (!(s->flags & cudaStreamNonBlocking)) {
		t = max64(t, legacy->ready);
	}
	return t;
}

/* The engine of device dev an item runs on: a copy engine, or the compute engine free first. */
static uint64_t *engine_ready(int dev, enum engine e)
{
	struct gpusim_dev *d = &S.dev[dev];
	uint64_t *best = &d->compute_ready[0];

	switch (e) {
	case ENG_H2D:
		return &d->h2d_ready;
	case ENG_D2H:
		return &d->d2h_ready;
	case ENG_COMM:
		return &d->comm_ready;
	default:
		for (unsigned i = 1; i < S.compute_engines; i++)
			if (d->compute_ready[i] < *best)
				best = &d->compute_ready[i];
		return best;
	}
}

void timeline_add(int dev, uint64_t start, uint64_t end, int comm)
{
	struct timeline_item *it;

	if (S.timeline_on && (it = vec_push(&S.timeline)))
		*it = (struct timeline_item){ start, end, comm, dev };
}

uint64_t schedule_after(struct CUstream_st *s, enum engine e, uint64_t cost, uint64_t now, uint64_t after)
{
	uint64_t *er = engine_ready(s->dev, e);
	uint64_t start = max64(max64(now, after), *er);
	uint64_t end = start + cost;

	*er = end;
	s->ready = max64(s->ready, end);
	timeline_add(s->dev, start, end, e == ENG_COMM);
	return end;
}

/* Schedule one item of cost ns on stream s and engine e; returns its end. */
uint64_t schedule(struct CUstream_st *s, enum engine e, uint64_t cost, uint64_t now)
{
	return schedule_after(s, e, cost, now, stream_dep(s));
}

/* When all work queued on device dev ends; -1: on every device. */
uint64_t device_idle_at(int dev)
{
	uint64_t t = 0;

	for (int k = 0; k < S.ndev; k++) {
		struct gpusim_dev *d = &S.dev[k];

		if (dev >= 0 && k != dev)
			continue;
		t = max64(t, max64(max64(d->legacy.ready, d->comm_ready), max64(d->h2d_ready, d->d2h_ready)));
		for (unsigned i = 0; i < S.compute_engines; i++)
			t = max64(t, d->compute_ready[i]);
	}
	for (struct CUstream_st *s = S.streams; s; s = s->next)
		if (dev < 0 || s->dev == dev)
			t = max64(t, s->ready);
	return t;
}

/* Items first.. of v (struct timeline_item) as (start, end) pairs into out; starts recording both. */
static unsigned long long copy_items(const struct vec *v, unsigned long long first, unsigned long long *out,
				     unsigned long long max)
{
	unsigned long long n = 0;

	lock();
	S.timeline_on = 1;
	for (; first + n < v->n && n < max; n++) {
		const struct timeline_item *it = (const struct timeline_item *)v->v + first + n;

		out[2 * n] = it->start;
		out[2 * n + 1] = it->end;
	}
	unlock();
	return n;
}

/*
 * The device's own timeline, the truth a tracer's inferences are tested
 * against: items first.. as (start, end) pairs into start_end (2 * max
 * values); returns how many were copied. Recording starts at the first call
 * (pass max 0 to start it), so a program that never asks keeps nothing.
 */
GPUSIM_API unsigned long long gpusimTimeline(unsigned long long first, unsigned long long *start_end,
					     unsigned long long max)
{
	return copy_items(&S.timeline, first, start_end, max);
}

/*
 * The host's waits on the device that ended after the model's time, as (due, woke) pairs, recorded
 * from the first gpusimTimeline call: what a tracer sees of a completion is the waiting thread's
 * wake-up, and these say how late the host, not the device, made it.
 */
GPUSIM_API unsigned long long gpusimLateWakes(unsigned long long first, unsigned long long *due_woke,
					      unsigned long long max)
{
	return copy_items(&S.wakes, first, due_woke, max);
}

/* The device of each of the timeline's items first.. (gpusimTimeline's), into dev; returns how many. */
GPUSIM_API unsigned long long gpusimTimelineDevices(unsigned long long first, int *dev, unsigned long long max)
{
	unsigned long long n = 0;

	lock();
	S.timeline_on = 1;
	for (; first + n < S.timeline.n && n < max; n++)
		dev[n] = ((const struct timeline_item *)S.timeline.v)[first + n].dev;
	unlock();
	return n;
}

GPUSIM_API unsigned long long gpusimDeviceNow(void)
{
	return now_ns();
}

GPUSIM_API unsigned long long gpusimDeviceIdleAt(void)
{
	uint64_t t;

	lock();
	t = device_idle_at(-1);
	unlock();
	return t;
}
