// SPDX-License-Identifier: MIT
/*
 * gpusim self-checks of the shapes real jobs have beyond one device and
 * sleeping waits: how a host thread waits (cudaSetDeviceFlags spin, yield,
 * blocking; cudaEventBlockingSync), several devices (each its own engines,
 * legacy stream and cudaDeviceSynchronize; peer copies on both), stream
 * priorities, stream-ordered allocation, and CUDA graphs (stream capture with
 * its documented refusals, graphs built node by node, launches).
 *
 * Run after the timing tests, with GPUSIM_DEVICES=2 and GPUSIM_COPY_DATA=0
 * (test_gpusim.c sets them). Model times come from the simulator's own timeline
 * (gpusimTimeline, gpusimTimelineDevices), so they are checked exactly; what
 * the host saw is held only to what cannot be late: a wait never returns
 * before the device's point. How a thread waited is read from its schedstat:
 * a spinning or yielding thread never sleeps, so it is on a CPU or waiting
 * for one for all of the wait; a blocked one is on a CPU only for the call's
 * own work and its wake-up (test_gpusim_timing.c: under a quarter of the
 * wait even under ASan on a busy VM). Sixteen ms of kernel make those two
 * shares far apart.
 */
#define _GNU_SOURCE
#include "test_gpusim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_NS 16000000ull
#define PEER_GBPS 24.0
#define MID_BYTES (8u << 20)

typedef unsigned long long (*timeline_fn)(unsigned long long, unsigned long long *, unsigned long long);
typedef unsigned long long (*devices_fn)(unsigned long long, int *, unsigned long long);
typedef unsigned long long (*idle_fn)(void);

static timeline_fn tl;
static devices_fn tl_dev;
static idle_fn idle_at;

/* Distinct bodies, so no optimisation may fold two handles into one. */
static volatile int hits;
static void k_wait(void) { hits += 11; }
static void k_g1(void) { hits += 12; }
static void k_g2(void) { hits += 13; }
static void k_g3(void) { hits += 14; }
static void k_long(void) { hits += 15; }

/* The timeline's item count so far (it is read whole: the items are few). */
static unsigned long long items(void)
{
	unsigned long long v[2], n = 0;

	while (tl(n, v, 1) == 1)
		n++;
	return n;
}

struct item {
	unsigned long long start, end;
	int dev;
};

static struct item item_at(unsigned long long i)
{
	unsigned long long v[2] = { 0 };
	struct item it = { 0, 0, -1 };

	if (tl(i, v, 1) == 1 && tl_dev(i, &it.dev, 1) == 1) {
		it.start = v[0];
		it.end = v[1];
	}
	return it;
}

/* ------------------------------------------------------------ waits -- */

struct waited {
	uint64_t wall, busy;   /* the wait's wall time; of it, on a CPU or waiting for one */
	int early;             /* returned before the device's point */
};

/* One WAIT_NS kernel and a wait on it (stream sync, or sync of an event made with ev_flags). */
static struct waited wait_once(int by_event, unsigned ev_flags)
{
	struct waited w = { 0, 0, 0 };
	uint64_t c0, r0, c1, r1, t0, due;
	cudaEvent_t ev = NULL;

	if (by_event && cudaEventCreateWithFlags(&ev, ev_flags) != cudaSuccess)
		return w;
	if (launch((const void *)k_wait, 1, 0) != cudaSuccess)
		return w;
	if (ev)
		cudaEventRecord(ev, 0);
	due = idle_at();
	thread_schedstat(&c0, &r0);
	t0 = now_ns();
	if (ev)
		cudaEventSynchronize(ev);
	else
		cudaStreamSynchronize(0);
	w.wall = now_ns() - t0;
	thread_schedstat(&c1, &r1);
	w.early = now_ns() < due;
	w.busy = (c1 - c0) + (r1 - r0);
	if (ev)
		cudaEventDestroy(ev);
	return w;
}

static void wait_tests(void)
{
	static const struct {
		unsigned flag;
		const char *name;
		int spins;
	} modes[] = { { cudaDeviceScheduleAuto, "auto (spin, or yield with more devices than CPUs)", 1 },
		      { cudaDeviceScheduleSpin, "spin", 1 },
		      { cudaDeviceScheduleYield, "yield", 1 },
		      { cudaDeviceScheduleBlockingSync, "blocking", 0 } };
	unsigned flags = 0;

	set_cost((const void *)k_wait, WAIT_NS);
	CHECK(cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceScheduleYield) == cudaErrorInvalidValue,
	      "cudaSetDeviceFlags with two schedule flags -> cudaErrorInvalidValue");
	CHECK(cudaSetDeviceFlags(0x1000) == cudaErrorInvalidValue, "an unknown device flag -> cudaErrorInvalidValue");
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct waited w;

		CK(cudaSetDeviceFlags(modes[i].flag));
		CK(cudaGetDeviceFlags(&flags));
		CHECK(flags == (modes[i].flag | cudaDeviceMapHost), "%s: cudaGetDeviceFlags 0x%x", modes[i].name, flags);
		w = wait_once(0, 0);
		CHECK(!w.early, "%s: the sync returned no earlier than the kernel's end", modes[i].name);
		if (modes[i].spins)
			CHECK(w.busy * 4 >= w.wall * 3, "%s: the thread never slept in the sync: on a CPU or runnable "
			      "%.3f ms of %.3f", modes[i].name, w.busy / 1e6, w.wall / 1e6);
		else
			CHECK(w.busy * 4 < w.wall, "%s: the thread slept in the sync: on a CPU or runnable %.3f ms of "
			      "%.3f", modes[i].name, w.busy / 1e6, w.wall / 1e6);
	}
	CK(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
	{
		struct waited w = wait_once(1, cudaEventBlockingSync), s = wait_once(1, cudaEventDefault);

		CHECK(!w.early && w.busy * 4 < w.wall, "a cudaEventBlockingSync event on a spinning device sleeps: "
		      "%.3f ms of %.3f on a CPU or runnable", w.busy / 1e6, w.wall / 1e6);
		CHECK(!s.early && s.busy * 4 >= s.wall * 3, "a default event on a spinning device spins: %.3f ms of %.3f",
		      s.busy / 1e6, s.wall / 1e6);
	}
}

/* ---------------------------------------------------------- devices -- */

static void *device_of_new_thread(void *p)
{
	int *dev = p;

	if (cudaGetDevice(dev) != cudaSuccess)
		*dev = -1;
	return NULL;
}

static void device_tests(void)
{
	cudaStream_t s_d1 = NULL;
	void *a0 = NULL, *a1 = NULL;
	unsigned long long n0;
	struct item k1, k0, p0, p1;
	int count = 0, dev = -1, other = -1, ok = 0;
	pthread_t t;
	uint64_t after;

	CK(cudaGetDeviceCount(&count));
	CHECK(count == 2, "GPUSIM_DEVICES=2: two devices (%d)", count);
	CHECK(cudaSetDevice(2) == cudaErrorInvalidDevice, "cudaSetDevice(2) -> cudaErrorInvalidDevice");
	CK(cudaDeviceCanAccessPeer(&ok, 0, 1));
	CHECK(ok == 1, "device 0 can access device 1");
	CK(cudaMalloc(&a0, MID_BYTES));
	CK(cudaSetDevice(1));
	CK(cudaGetDevice(&dev));
	CHECK(dev == 1, "cudaGetDevice after cudaSetDevice(1): %d", dev);
	pthread_create(&t, NULL, device_of_new_thread, &other);
	pthread_join(t, NULL);
	CHECK(other == 0, "the current device is per thread: a new thread starts on device 0 (%d)", other);
	CK(cudaMalloc(&a1, MID_BYTES));
	CK(cudaStreamCreate(&s_d1));
	set_cost((const void *)k_long, 20 * WAIT_NS);
	set_cost((const void *)k_g1, WAIT_NS);

	n0 = items();
	CK(launch((const void *)k_long, 1, s_d1));   /* device 1, a blocking stream of its own */
	CK(cudaSetDevice(0));
	CK(launch((const void *)k_g1, 1, 0));        /* device 0's legacy stream */
	CK(cudaDeviceSynchronize());
	after = now_ns();
	k1 = item_at(n0);
	k0 = item_at(n0 + 1);
	CHECK(k1.dev == 1 && k0.dev == 0, "each kernel on its stream's device: %d, %d", k1.dev, k0.dev);
	CHECK(k0.start < k1.end, "device 0's legacy stream does not wait for device 1's blocking stream "
	      "(starts %.3f ms before its kernel ends)", (double)(k1.end - k0.start) / 1e6);
	CHECK(after >= k0.end && after < k1.end, "cudaDeviceSynchronize drains the current device only: returned "
	      "%.3f ms after device 0's end, %.3f ms before device 1's", (double)(after - k0.end) / 1e6,
	      (double)(k1.end - after) / 1e6);
	CHECK(k1.end - k1.start == 20 * WAIT_NS && k0.end - k0.start == WAIT_NS, "each kernel lasts its cost");

	/* A peer copy is device work on both, after each device's earlier work (device 1's long kernel). */
	CK(cudaMemcpyPeer(a1, 1, a0, 0, MID_BYTES));
	p0 = item_at(n0 + 2);
	p1 = item_at(n0 + 3);
	CHECK(p0.dev == 0 && p1.dev == 1 && p0.start == p1.start && p0.end == p1.end,
	      "cudaMemcpyPeer: one item on each device, at the same times (%d, %d)", p0.dev, p1.dev);
	CHECK(p0.start >= k1.end && p0.end - p0.start == LATENCY_NS + (uint64_t)(MID_BYTES / PEER_GBPS),
	      "after device 1's earlier work, lasting its model: %llu ns", p0.end - p0.start);
	CK(cudaSetDevice(1));
	CK(cudaDeviceSynchronize());
	CK(cudaStreamDestroy(s_d1));
	CK(cudaFree(a1));
	CK(cudaSetDevice(0));
	CK(cudaFree(a0));
}

/* ---------------------------------------------- streams and memory -- */

static void stream_memory_tests(void)
{
	int least = 1, greatest = 1, prio = 1;
	unsigned flags = 0;
	cudaStream_t s = NULL;
	void *p = NULL, *q = NULL;
	size_t free0, free1, total;
	unsigned long long n0;

	CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
	CHECK(least == 0 && greatest < 0, "priority range %d (least) .. %d (greatest)", least, greatest);
	CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest - 100));
	CK(cudaStreamGetPriority(s, &prio));
	CK(cudaStreamGetFlags(s, &flags));
	CHECK(prio == greatest && flags == cudaStreamNonBlocking, "a priority beyond the range is clamped to it (%d), "
	      "flags kept (%u)", prio, flags);
	CHECK(cudaStreamCreateWithPriority(&s, 0x8, 0) == cudaErrorInvalidValue, "unknown stream flags refused");

	CK(cudaMemGetInfo(&free0, &total));
	n0 = items();
	CK(cudaMallocAsync(&p, MID_BYTES, s));
	CHECK(p && is_dev(p), "cudaMallocAsync gives device memory");
	CK(cudaMemGetInfo(&free1, &total));
	CHECK(free0 - free1 == MID_BYTES, "it is counted in use (%zu bytes)", free0 - free1);
	CK(cudaMemsetAsync(p, 0, MID_BYTES, s));
	CK(cudaFreeAsync(p, s));
	CHECK(items() == n0 + 1, "allocation and free take no device time: only the memset is an item");
	CK(cudaMallocAsync(&q, MID_BYTES, s));
	CHECK(q == p, "a freed block is reused");
	CK(cudaFreeAsync(q, s));
	CHECK(cudaFreeAsync(q, s) == cudaErrorInvalidValue, "freeing it twice -> cudaErrorInvalidValue");
	CK(cudaStreamSynchronize(s));
	CK(cudaStreamDestroy(s));
	cudaGetLastError();
}

/* ----------------------------------------------------------- graphs -- */

struct try_malloc {
	cudaError_t got;
};

static void *malloc_in_thread(void *p)
{
	struct try_malloc *m = p;
	void *d = NULL;

	m->got = cudaMalloc(&d, 256);
	if (m->got == cudaSuccess)
		cudaFree(d);
	return NULL;
}

static cudaError_t malloc_from_other_thread(void)
{
	struct try_malloc m = { cudaErrorUnknown };
	pthread_t t;

	pthread_create(&t, NULL, malloc_in_thread, &m);
	pthread_join(t, NULL);
	return m.got;
}

/* The capture modes' rules on potentially unsafe calls, and the other refusals. */
static void capture_rule_tests(cudaStream_t s, cudaStream_t nb)
{
	cudaGraph_t g = NULL;
	void *d = NULL;
	enum cudaStreamCaptureStatus st;

	CHECK(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported,
	      "the legacy stream cannot be captured");
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaErrorIllegalState,
	      "a capturing stream cannot begin again");
	CK(cudaStreamIsCapturing(s, &st));
	CHECK(st == cudaStreamCaptureStatusActive, "capturing: active");
	CHECK(malloc_from_other_thread() == cudaErrorStreamCaptureUnsupported,
	      "global mode: cudaMalloc in another thread is refused");
	CK(cudaStreamIsCapturing(s, &st));
	CHECK(st == cudaStreamCaptureStatusInvalidated, "and the capture is invalidated");
	CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated && g == NULL,
	      "cudaStreamEndCapture of an invalidated capture fails with no graph");

	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	CK(malloc_from_other_thread());
	CHECK(cudaMalloc(&d, 256) == cudaErrorStreamCaptureUnsupported,
	      "thread-local mode: another thread may cudaMalloc, the capturing one may not");
	cudaStreamEndCapture(s, &g);

	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
	CK(cudaMalloc(&d, 256));
	CK(cudaFree(d));
	CHECK(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported, "relaxed mode allows cudaMalloc; a "
	      "capturing stream still cannot be synchronised");
	cudaStreamEndCapture(s, &g);

	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
	CHECK(launch((const void *)k_g1, 1, 0) == cudaErrorStreamCaptureImplicit,
	      "work on the legacy stream while a blocking stream captures -> cudaErrorStreamCaptureImplicit");
	CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated, "and it invalidated the capture");
	CK(cudaStreamBeginCapture(nb, cudaStreamCaptureModeRelaxed));
	CK(launch((const void *)k_g1, 1, 0));
	CK(cudaStreamEndCapture(nb, &g));
	CHECK(g != NULL, "a non-blocking stream's capture is not broken by the legacy stream");
	CK(cudaGraphDestroy(g));
	CK(cudaDeviceSynchronize());
	cudaGetLastError();
}

/*
 * A capture forked into a second stream through an event (the programming
 * guide's cross-stream capture): k_g1 on s, then k_g2 and k_g3 on nb after
 * it, joined back into s before a last k_g1. The graph holds all 4; its
 * launch runs k_g2 and k_g3 after the first k_g1 and the last after both.
 * A fork not joined back fails the capture's end (cudaErrorStreamCaptureUnjoined).
 */
static void fork_tests(cudaStream_t s, cudaStream_t nb)
{
	cudaEvent_t fork, join;
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	enum cudaStreamCaptureStatus st;
	size_t nn = 0;
	unsigned long long n0;
	int ok = 1;

	CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	ok &= launch((const void *)k_g1, 1, s) == cudaSuccess;
	CK(cudaEventRecord(fork, s));
	CK(cudaStreamWaitEvent(nb, fork, 0));
	CK(cudaStreamIsCapturing(nb, &st));
	CHECK(st == cudaStreamCaptureStatusActive, "a stream that waits on a captured event joins the capture");
	ok &= launch((const void *)k_g2, 1, nb) == cudaSuccess;
	ok &= launch((const void *)k_g3, 1, nb) == cudaSuccess;
	CK(cudaEventRecord(join, nb));
	CK(cudaStreamWaitEvent(s, join, 0));
	ok &= launch((const void *)k_g1, 1, s) == cudaSuccess;
	n0 = items();
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaStreamIsCapturing(nb, &st));
	CHECK(ok && st == cudaStreamCaptureStatusNone && items() == n0,
	      "the forked stream leaves the capture at its end; nothing ran");
	CK(cudaGraphGetNodes(g, NULL, &nn));
	CHECK(nn == 4, "the graph holds the kernels of both streams (%zu of 4)", nn);
	CK(cudaGraphInstantiate(&x, g, 0));
	CK(cudaGraphDestroy(g));
	n0 = items();
	CK(cudaGraphLaunch(x, s));
	CK(cudaStreamSynchronize(s));
	{
		struct item a = item_at(n0), b = item_at(n0 + 1), c = item_at(n0 + 2), d = item_at(n0 + 3);

		CHECK(items() - n0 == 4 && b.start >= a.end && c.start >= b.end && d.start >= c.end,
		      "the forked nodes run after the fork point, the last after the join");
	}
	/* Forked and never joined back: the capture's end fails. */
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CK(cudaEventRecord(fork, s));
	CK(cudaStreamWaitEvent(nb, fork, 0));
	ok = launch((const void *)k_g2, 1, nb) == cudaSuccess;
	CHECK(ok && cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureUnjoined,
	      "a fork not joined back -> cudaErrorStreamCaptureUnjoined");
	CK(cudaStreamIsCapturing(nb, &st));
	CHECK(st == cudaStreamCaptureStatusNone, "and its stream no longer captures");
	cudaGetLastError();
	CK(cudaGraphExecDestroy(x));
	CK(cudaEventDestroy(fork));
	CK(cudaEventDestroy(join));
}

static void graph_tests(void)
{
	cudaStream_t s = NULL, nb = NULL;
	cudaGraph_t g = NULL, h = NULL;
	cudaGraphExec_t x = NULL, y = NULL;
	cudaGraphNode_t a, b, c, dn, deps[2];
	struct cudaKernelNodeParams kp;
	unsigned long long n0, n1;
	uint64_t kcost[3] = { 1000000, 2000000, 3000000 };
	const void *kf[3] = { (const void *)k_g1, (const void *)k_g2, (const void *)k_g3 };
	size_t nn = 0;
	void *buf = NULL;
	int ok;

	CK(cudaStreamCreate(&s));
	CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
	CK(cudaMalloc(&buf, MID_BYTES));
	for (int i = 0; i < 3; i++)
		set_cost(kf[i], kcost[i]);
	capture_rule_tests(s, nb);

	/* Capture: 6 kernels and a memset recorded, nothing run. */
	CK(cudaStreamSynchronize(s));
	n0 = items();
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	ok = 1;
	for (int i = 0; i < 6; i++)
		ok &= launch(kf[i % 3], 1, s) == cudaSuccess;
	ok &= cudaMemsetAsync(buf, 1, MID_BYTES, s) == cudaSuccess;
	CK(cudaStreamEndCapture(s, &g));
	CHECK(ok && items() == n0, "captured work is recorded, not run: no device item (%llu)", items() - n0);
	CK(cudaGraphGetNodes(g, NULL, &nn));
	CHECK(nn == 7, "the graph holds the 7 captured nodes (%zu)", nn);
	CK(cudaGraphInstantiate(&x, g, 0));
	for (int rep = 0; rep < 2; rep++) {
		uint64_t due;

		n0 = items();
		CK(cudaGraphLaunch(x, s));
		n1 = items();
		due = idle_at();
		CK(cudaStreamSynchronize(s));
		CHECK(now_ns() >= due, "launch %d: the sync waits for the graph's last node", rep);
		CHECK(n1 - n0 == 7, "launch %d: each node an item (%llu)", rep, n1 - n0);
		ok = 1;
		for (int i = 0; i < 6; i++) {
			struct item it = item_at(n0 + (unsigned long long)i), prev = item_at(n0 + (unsigned long long)i - 1);

			ok &= it.end - it.start == kcost[i % 3] && (i == 0 || it.start == prev.end);
		}
		CHECK(ok, "launch %d: the kernels run in capture order, back to back, each its cost", rep);
	}

	/* Built node by node: a; b and c after a; d after b and c. */
	CK(cudaGraphCreate(&h, 0));
	memset(&kp, 0, sizeof(kp));
	kp.gridDim = d3(1);
	kp.blockDim = d3(128);
	kp.func = (void *)k_g1;
	CK(cudaGraphAddKernelNode(&a, h, NULL, 0, &kp));
	kp.func = (void *)k_g2;
	CK(cudaGraphAddKernelNode(&b, h, &a, 1, &kp));
	kp.func = (void *)k_g3;
	CK(cudaGraphAddKernelNode(&c, h, &a, 1, &kp));
	deps[0] = b;
	deps[1] = c;
	kp.func = (void *)k_g1;
	CK(cudaGraphAddKernelNode(&dn, h, deps, 2, &kp));
	kp.func = NULL;
	CHECK(cudaGraphAddKernelNode(&dn, h, NULL, 0, &kp) == cudaErrorInvalidDeviceFunction,
	      "a kernel node without a function is refused");
	CK(cudaGraphInstantiate(&y, h, 0));
	n0 = items();
	CK(cudaGraphLaunch(y, nb));
	CK(cudaStreamSynchronize(nb));
	{
		struct item ia = item_at(n0), ib = item_at(n0 + 1), ic = item_at(n0 + 2), id = item_at(n0 + 3);

		CHECK(items() - n0 == 4 && ib.start >= ia.end && ic.start >= ia.end &&
		      id.start >= (ib.end > ic.end ? ib.end : ic.end),
		      "node by node: each node after those it depends on");
		CHECK(ib.end - ib.start == kcost[1] && ic.end - ic.start == kcost[2], "each node its kernel's cost");
	}
	CHECK(cudaGraphLaunch(NULL, s) == cudaErrorInvalidValue, "launching no graph -> cudaErrorInvalidValue");
	fork_tests(s, nb);
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphExecDestroy(y));
	CK(cudaGraphDestroy(g));
	CK(cudaGraphDestroy(h));
	CK(cudaFree(buf));
	CK(cudaStreamDestroy(s));
	CK(cudaStreamDestroy(nb));
	cudaGetLastError();
}

void shapes_tests(void)
{
	tl = (timeline_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimTimeline");
	tl_dev = (devices_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimTimelineDevices");
	idle_at = (idle_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimDeviceIdleAt");
	CHECK(tl && tl_dev && idle_at, "gpusimTimeline, gpusimTimelineDevices and gpusimDeviceIdleAt are exported");
	if (!tl || !tl_dev || !idle_at)
		return;
	tl(0, NULL, 0);
	wait_tests();
	device_tests();
	stream_memory_tests();
	graph_tests();
}
