// SPDX-License-Identifier: MIT
/*
 * Model tests for the GPU simulator (tests/gpusim/gpusim_*.c).
 *
 * Built against the toolkit's headers and linked against the toolkit's real
 * libcudart.so.13 (no rpath); run with LD_LIBRARY_PATH pointing at the
 * simulator. The first check makes sure the simulator, not the real runtime,
 * was loaded.
 *
 * Two parts:
 *   - data tests, in a forked child with the default GPUSIM_COPY_DATA=1:
 *     the bytes really move (copies, 2D copies, memsets, async + sync,
 *     concurrency from two threads);
 *   - timing tests, in the parent with GPUSIM_COPY_DATA=0 so the host memcpy
 *     (about 15 GB/s on these VMs, slower than the 24 GB/s pinned model) does
 *     not stretch the calls: each measured time is compared with the model.
 *
 * Tolerance (TOL_REL, TOL_ABS_NS): a modelled wait may not end early (the
 * simulator sleeps until the modelled time, never less) but it may end late
 * by the wake-up latency of a loaded 2-core VM, which is tens of us typically
 * and a few hundred us at worst; so a measurement passes when it lies in
 *     [0.95 * model - 20 us,  1.25 * model + 300 us].
 * CPU-time checks (launch cost) use the same window. "Returns at once"
 * checks allow 500 us against model times of several ms. Wall times are
 * taken less the thread's own run-queue time (schedstat field 2, see mark()),
 * so CPU contention from outside the test does not fail it.
 *
 * Prints one line per check and a final line "N passed, N failed"; exits
 * non-zero on any failure.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOL_REL 0.25
#define TOL_ABS_NS 300000ull
#define AT_ONCE_NS 500000ull

/* Model parameters the tests pin (set in the environment before the first
 * CUDA call, overriding whatever the caller's environment says). */
#define PINNED_GBPS 24.0
#define PAGEABLE_GBPS 8.0
#define LATENCY_NS 10000ull
#define LAUNCH_NS 5000ull
#define NS_PER_BLOCK 1000ull
#define KBASE_NS 2000ull

static int passed, failed;

#define CHECK(cond, ...)                                  \
	do {                                              \
		if (cond) {                               \
			passed++;                         \
			printf("ok   - ");                \
		} else {                                  \
			failed++;                         \
			printf("FAIL - ");                \
		}                                         \
		printf(__VA_ARGS__);                      \
		printf("\n");                             \
		fflush(stdout);                           \
	} while (0)

#define CK(call) CHECK((call) == cudaSuccess, "%s", #call)

typedef int (*set_cost_fn)(const void *, unsigned long long);
typedef int (*is_dev_fn)(const void *);
static set_cost_fn set_cost;
static is_dev_fn is_dev;

/* Distinct host functions used as kernel handles. */
static void kern_a(void) {}
static void kern_b(void) {}
static void kern_c(void) {}
static void kern_zero(void) {}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* On-CPU time of this thread as the scheduler accounts it. */
static uint64_t schedstat_oncpu_ns(void)
{
	char path[64];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/schedstat", (long)syscall(SYS_gettid));
	f = fopen(path, "r");
	if (!f)
		return thread_cpu_ns();
	if (fscanf(f, "%llu", &v) != 1)
		v = thread_cpu_ns();
	fclose(f);
	return v;
}

/* Run-queue wait of this thread so far (schedstat field 2), in ns. */
static uint64_t schedstat_runq_ns(void)
{
	static int fd = -1;
	char buf[128];
	unsigned long long a = 0, b = 0;
	ssize_t n;

	if (fd < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%ld/schedstat", (long)syscall(SYS_gettid));
		fd = open(path, O_RDONLY);
		if (fd < 0)
			return 0;
	}
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	if (sscanf(buf, "%llu %llu", &a, &b) != 2)
		return 0;
	return b;
}

/* A stopwatch reading that excludes time this thread spent runnable but not
 * running: when the CPUs are busy (other tests, CI neighbours) a thread that
 * the model wakes on time may still wait for a CPU, and that delay is the
 * scheduler's, not the simulator's. Differences of mark() are wall time
 * minus run-queue time. (The timing tests run on the main thread only.) */
static uint64_t mark(void)
{
	return now_ns() - schedstat_runq_ns();
}

static uint64_t copy_model(size_t bytes, double gbps)
{
	return LATENCY_NS + (uint64_t)((double)bytes / gbps);
}

static int within(uint64_t got, uint64_t model)
{
	double lo = 0.95 * (double)model - 20000.0;
	double hi = (1.0 + TOL_REL) * (double)model + (double)TOL_ABS_NS;
	return (double)got >= lo && (double)got <= hi;
}

#define CHECK_TIME(got, model, what)                                                   \
	CHECK(within((got), (model)), "%s: %.3f ms (model %.3f ms)", (what), (got) / 1e6, \
	      (model) / 1e6)

static dim3 d3(unsigned x)
{
	dim3 d = { x, 1, 1 };
	return d;
}

static cudaError_t launch(const void *f, unsigned blocks, cudaStream_t s)
{
	return cudaLaunchKernel(f, d3(blocks), d3(128), NULL, 0, s);
}

/* ---------------------------------------------------------------- data -- */

struct thr_arg {
	int id;
	int ok;
};

static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	cudaStream_t s;
	char host[4096], back[4096];
	void *dev;

	a->ok = 0;
	if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&dev, sizeof(host)) != cudaSuccess)
		return NULL;
	for (int i = 0; i < 200; i++) {
		memset(host, a->id * 31 + i, sizeof(host));
		if (cudaMemcpyAsync(dev, host, sizeof(host), cudaMemcpyHostToDevice, s) ||
		    launch((const void *)kern_zero, 1, s) ||
		    cudaMemcpyAsync(back, dev, sizeof(back), cudaMemcpyDeviceToHost, s) ||
		    cudaStreamSynchronize(s))
			return NULL;
		if (memcmp(host, back, sizeof(host)))
			return NULL;
	}
	cudaFree(dev);
	cudaStreamDestroy(s);
	a->ok = 1;
	return NULL;
}

static void data_tests(void)
{
	size_t n = 1 << 20;
	unsigned char *h = malloc(n), *b = malloc(n), *ph, *pb;
	void *d, *d2;
	cudaStream_t s;
	struct cudaDeviceProp prop;
	int count = -1, dev = -1;

	for (size_t i = 0; i < n; i++)
		h[i] = (unsigned char)(i * 2654435761u >> 13);

	CK(cudaGetDeviceCount(&count));
	CHECK(count == 1, "one simulated device (%d)", count);
	CK(cudaSetDevice(0));
	CK(cudaGetDevice(&dev));
	CK(cudaGetDeviceProperties(&prop, 0));
	CHECK(prop.name[0] && prop.totalGlobalMem > 0, "device properties: \"%s\"", prop.name);

	CK(cudaMalloc(&d, n));
	CK(cudaMalloc(&d2, n));
	CHECK(((uintptr_t)d & 255) == 0, "cudaMalloc returns 256-byte aligned pointers");
	CHECK(is_dev(d) && !is_dev(h), "device pointers are distinguishable from host ones");

	/* synchronous round trip */
	memset(b, 0, n);
	CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(b, d, n, cudaMemcpyDeviceToHost));
	CHECK(!memcmp(h, b, n), "sync H2D + D2H round trip preserves the bytes");

	/* D2D + cudaMemcpyDefault */
	memset(b, 0, n);
	CK(cudaMemcpy(d2, d, n, cudaMemcpyDeviceToDevice));
	CK(cudaMemcpy(b, d2, n, cudaMemcpyDefault));
	CHECK(!memcmp(h, b, n), "D2D copy and cudaMemcpyDefault preserve the bytes");

	/* pinned async round trip on a stream, visible after the sync */
	CK(cudaMallocHost((void **)&ph, n));
	CK(cudaHostAlloc((void **)&pb, n, cudaHostAllocDefault));
	memcpy(ph, h, n);
	memset(pb, 0, n);
	CK(cudaStreamCreate(&s));
	CK(cudaMemcpyAsync(d2, ph, n, cudaMemcpyHostToDevice, s));
	CK(cudaMemcpyAsync(pb, d2, n, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	CHECK(!memcmp(h, pb, n), "pinned async H2D + D2H bytes visible after cudaStreamSynchronize");

	/* memset */
	CK(cudaMemset(d, 0x5a, n / 2));
	CK(cudaMemsetAsync((char *)d + n / 2, 0xa5, n / 2, s));
	CK(cudaMemcpy(b, d, n, cudaMemcpyDeviceToHost));
	int mok = 1;
	for (size_t i = 0; i < n; i++)
		if (b[i] != (i < n / 2 ? 0x5a : 0xa5)) {
			mok = 0;
			break;
		}
	CHECK(mok, "cudaMemset / cudaMemsetAsync write the value");

	/* 2D: 64 rows of 100 bytes, source pitch 128, destination pitch 256 */
	CK(cudaMemset(d, 0, n));
	CK(cudaMemcpy2D(d, 256, h, 128, 100, 64, cudaMemcpyHostToDevice));
	memset(b, 0xff, n);
	CK(cudaMemcpy2DAsync(b, 100, d, 256, 100, 64, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	int ok2 = 1;
	for (int r = 0; r < 64 && ok2; r++)
		if (memcmp(b + r * 100, h + r * 128, 100))
			ok2 = 0;
	CHECK(ok2, "cudaMemcpy2D / cudaMemcpy2DAsync honour the pitches");

	/* Registered (pinned) malloc memory: async D2H into it, then sync. */
	memset(b, 0, n);
	CK(cudaHostRegister(b, n, cudaHostRegisterDefault));
	CK(cudaMemcpyAsync(b, d2, n, cudaMemcpyDeviceToHost, s));
	CK(cudaDeviceSynchronize());
	CHECK(!memcmp(h, b, n), "async D2H into a registered buffer is complete after cudaDeviceSynchronize");
	CK(cudaHostUnregister(b));

	/* two threads with their own streams */
	pthread_t t[2];
	struct thr_arg a[2] = { { 1, 0 }, { 2, 0 } };
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, thr_main, &a[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(a[0].ok && a[1].ok, "two threads copying and launching concurrently");

	CK(cudaStreamDestroy(s));
	CK(cudaFreeHost(ph));
	CK(cudaFreeHost(pb));
	CK(cudaFree(d));
	CK(cudaFree(d2));
	free(h);
	free(b);
}

/* -------------------------------------------------------------- timing -- */

static uint64_t median3(uint64_t a, uint64_t b, uint64_t c)
{
	if (a > b) {
		uint64_t t = a;
		a = b;
		b = t;
	}
	if (b > c)
		b = c;
	return a > b ? a : b;
}

static void timing_tests(void)
{
	size_t big = 64u << 20, mid = 16u << 20;
	void *d, *pinned, *pageable;
	cudaStream_t s1, s2;
	cudaEvent_t e1, e2;
	uint64_t t0, t[3], c0, model;
	float ms = 0;

	CK(cudaMalloc(&d, big));
	CK(cudaMallocHost(&pinned, big));
	pageable = malloc(big);
	CK(cudaStreamCreate(&s1));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreate(&e1));
	CK(cudaEventCreate(&e2));

	/* copies: median of three */
	for (int i = 0; i < 3; i++) {
		t0 = mark();
		cudaMemcpy(d, pinned, big, cudaMemcpyHostToDevice);
		t[i] = mark() - t0;
	}
	CHECK_TIME(median3(t[0], t[1], t[2]), copy_model(big, PINNED_GBPS), "cudaMemcpy 64 MiB H2D pinned");
	for (int i = 0; i < 3; i++) {
		t0 = mark();
		cudaMemcpy(d, pageable, big, cudaMemcpyHostToDevice);
		t[i] = mark() - t0;
	}
	CHECK_TIME(median3(t[0], t[1], t[2]), copy_model(big, PAGEABLE_GBPS), "cudaMemcpy 64 MiB H2D pageable");
	for (int i = 0; i < 3; i++) {
		t0 = mark();
		cudaMemcpy(pinned, d, mid, cudaMemcpyDeviceToHost);
		t[i] = mark() - t0;
	}
	CHECK_TIME(median3(t[0], t[1], t[2]), copy_model(mid, PINNED_GBPS), "cudaMemcpy 16 MiB D2H pinned");

	/* pinned async returns at once; the sync then waits for the copy */
	t0 = mark();
	CK(cudaMemcpyAsync(d, pinned, big, cudaMemcpyHostToDevice, 0));
	uint64_t ret_ns = mark() - t0;
	CHECK(ret_ns < AT_ONCE_NS, "cudaMemcpyAsync 64 MiB pinned returns at once: %.3f ms (copy %.3f ms)",
	      ret_ns / 1e6, copy_model(big, PINNED_GBPS) / 1e6);
	c0 = schedstat_oncpu_ns();
	CK(cudaStreamSynchronize(0));
	CHECK_TIME(mark() - t0, copy_model(big, PINNED_GBPS), "... cudaStreamSynchronize completes with the copy");

	/* pageable async blocks the caller for the copy */
	t0 = mark();
	CK(cudaMemcpyAsync(d, pageable, big, cudaMemcpyHostToDevice, s1));
	CHECK_TIME(mark() - t0, copy_model(big, PAGEABLE_GBPS), "cudaMemcpyAsync 64 MiB pageable blocks the caller");

	/* registration makes a malloc'd range pinned; unregistering undoes it */
	CK(cudaHostRegister(pageable, mid, cudaHostRegisterDefault));
	t0 = mark();
	CK(cudaMemcpy(d, pageable, mid, cudaMemcpyHostToDevice));
	CHECK_TIME(mark() - t0, copy_model(mid, PINNED_GBPS), "copy from a cudaHostRegister'ed range is pinned");
	t0 = mark();
	CK(cudaMemcpyAsync(d, (char *)pageable + 4096, mid - 4096, cudaMemcpyHostToDevice, 0));
	CHECK(mark() - t0 < AT_ONCE_NS, "async copy from inside a registered range returns at once");
	CK(cudaDeviceSynchronize());
	CK(cudaHostUnregister(pageable));
	t0 = mark();
	CK(cudaMemcpy(d, pageable, mid, cudaMemcpyHostToDevice));
	CHECK_TIME(mark() - t0, copy_model(mid, PAGEABLE_GBPS), "after cudaHostUnregister it is pageable again");

	/* many small copies: each pays the fixed latency */
	t0 = mark();
	for (int i = 0; i < 100; i++)
		cudaMemcpy(d, pinned, 4096, cudaMemcpyHostToDevice);
	model = 100 * copy_model(4096, PINNED_GBPS);
	{
		/* 100 separate sleeps: each may wake late, so allow 100 us per call. */
		uint64_t got = mark() - t0;
		CHECK(got >= model * 95 / 100 && got <= model + 100 * 100000ull,
		      "100 x 4 KiB pinned cudaMemcpy: %.3f ms (model %.3f ms, +100 us/call allowed)",
		      got / 1e6, model / 1e6);
	}

	/* a long kernel: the sync blocks for its duration, the thread sleeps */
	set_cost((const void *)kern_a, 50000000ull);
	t0 = mark();
	CK(launch((const void *)kern_a, 1, 0));
	c0 = schedstat_oncpu_ns();
	uint64_t ts = mark();
	CK(cudaStreamSynchronize(0));
	uint64_t wait = mark() - ts, oncpu = schedstat_oncpu_ns() - c0;
	CHECK_TIME(mark() - t0, 50000000ull + LAUNCH_NS, "50 ms kernel + cudaStreamSynchronize");
	CHECK(oncpu < 2000000ull && oncpu * 20 < wait,
	      "the thread is blocked during the sync: on CPU %.3f ms of %.3f ms", oncpu / 1e6, wait / 1e6);

	/* launch CPU cost */
	set_cost((const void *)kern_zero, 0);
	c0 = thread_cpu_ns();
	t0 = mark();
	for (int i = 0; i < 1000; i++)
		launch((const void *)kern_zero, 1, 0);
	CHECK_TIME(thread_cpu_ns() - c0, 1000 * LAUNCH_NS, "1000 launches: CPU time of the caller");
	CHECK_TIME(mark() - t0, 1000 * LAUNCH_NS, "1000 launches: wall time of the caller, less run-queue time");
	CK(cudaDeviceSynchronize());

	/* default kernel cost from the grid size */
	t0 = mark();
	CK(launch((const void *)kern_c, 10000, 0));
	CK(cudaDeviceSynchronize());
	CHECK_TIME(mark() - t0, KBASE_NS + 10000 * NS_PER_BLOCK + LAUNCH_NS, "grid-size model: 10000 blocks");

	/* legacy default stream semantics */
	set_cost((const void *)kern_b, 30000000ull);
	t0 = mark();
	CK(launch((const void *)kern_b, 1, s1));           /* blocking stream */
	CK(launch((const void *)kern_zero, 1, 0));         /* legacy: waits for s1 */
	CK(cudaStreamSynchronize(0));
	CHECK_TIME(mark() - t0, 30000000ull + 2 * LAUNCH_NS, "stream 0 waits for a blocking stream's kernel");

	t0 = mark();
	CK(launch((const void *)kern_b, 1, s2));           /* non-blocking stream */
	CK(cudaStreamSynchronize(0));
	CHECK(mark() - t0 < AT_ONCE_NS + LAUNCH_NS,
	      "stream 0 does not wait for a non-blocking stream: %.3f ms", (mark() - t0) / 1e6);
	CK(cudaStreamSynchronize(s2));
	CHECK_TIME(mark() - t0, 30000000ull + LAUNCH_NS, "cudaStreamSynchronize(non-blocking stream)");

	/* blocking stream waits for the legacy stream; a non-blocking one does not
	 * (the copy engine is free while the kernel runs) */
	t0 = mark();
	CK(launch((const void *)kern_b, 1, 0));
	CK(cudaMemcpyAsync(d, pinned, mid, cudaMemcpyHostToDevice, s2));
	CK(cudaStreamSynchronize(s2));
	CHECK_TIME(mark() - t0, LAUNCH_NS + copy_model(mid, PINNED_GBPS),
		   "non-blocking stream's copy overlaps a stream-0 kernel");
	CK(cudaMemcpyAsync(d, pinned, mid, cudaMemcpyHostToDevice, s1));
	CK(cudaEventRecord(e1, s1));
	CK(cudaEventSynchronize(e1));
	CHECK_TIME(mark() - t0, 30000000ull + LAUNCH_NS + copy_model(mid, PINNED_GBPS),
		   "blocking stream's copy waits for the stream-0 kernel (cudaEventSynchronize)");

	/* events: elapsed time and cross-stream waits */
	CK(cudaEventRecord(e1, s1));
	CK(launch((const void *)kern_b, 1, s1));
	CK(cudaEventRecord(e2, s1));
	CHECK(cudaEventQuery(e2) == cudaErrorNotReady, "cudaEventQuery: not ready while the kernel runs");
	CK(cudaEventSynchronize(e2));
	CK(cudaEventElapsedTime(&ms, e1, e2));
	CHECK(ms >= 30.0f && ms < 30.0f * 1.01f + 0.01f, "cudaEventElapsedTime: %.3f ms (model 30.005)", ms);
	CK(cudaEventQuery(e2));

	t0 = mark();
	CK(launch((const void *)kern_b, 1, s1));
	CK(cudaEventRecord(e1, s1));
	CK(cudaStreamWaitEvent(s2, e1, 0));
	CK(cudaMemcpyAsync(d, pinned, mid, cudaMemcpyHostToDevice, s2));
	CK(cudaStreamSynchronize(s2));
	CHECK_TIME(mark() - t0, LAUNCH_NS + 30000000ull + copy_model(mid, PINNED_GBPS),
		   "cudaStreamWaitEvent orders a non-blocking stream after the event");

	/* device sync waits for every stream; kernels share the compute engine */
	t0 = mark();
	CK(launch((const void *)kern_b, 1, s1));
	CK(launch((const void *)kern_b, 1, s2));
	CK(cudaDeviceSynchronize());
	CHECK_TIME(mark() - t0, 60000000ull + LAUNCH_NS, "cudaDeviceSynchronize: two 30 ms kernels on two streams");

	CK(cudaEventDestroy(e1));
	CK(cudaEventDestroy(e2));
	CK(cudaStreamDestroy(s1));
	CK(cudaStreamDestroy(s2));
	CK(cudaFreeHost(pinned));
	CK(cudaFree(d));
	free(pageable);
}

/* -------------------------------------------------------------- errors -- */

static void error_tests(void)
{
	void *d, *p;
	char host[64];
	cudaEvent_t ev;
	cudaStream_t bogus = (cudaStream_t)(uintptr_t)0xdeadbeef;
	dim3 big = { 2048, 1, 1 };

	CK(cudaMalloc(&d, 1024));
	(void)cudaGetLastError();
	CHECK(cudaMemcpy(d, host, sizeof(host), (enum cudaMemcpyKind)42) == cudaErrorInvalidMemcpyDirection,
	      "bad copy kind -> cudaErrorInvalidMemcpyDirection");
	CHECK(cudaPeekAtLastError() == cudaErrorInvalidMemcpyDirection, "cudaPeekAtLastError sees it");
	CHECK(cudaGetLastError() == cudaErrorInvalidMemcpyDirection, "cudaGetLastError returns it");
	CHECK(cudaGetLastError() == cudaSuccess, "... and resets it");
	CHECK(cudaMemcpy(host, host + 1, 8, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
	      "H2D to a host pointer -> cudaErrorInvalidValue");
	CHECK(cudaMemcpy(d, host, 2048, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
	      "H2D past the end of the allocation -> cudaErrorInvalidValue");
	CHECK(cudaMemcpy(NULL, host, 8, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
	      "NULL destination -> cudaErrorInvalidValue");
	CHECK(cudaMemset(host, 0, 8) == cudaErrorInvalidValue, "cudaMemset on host memory -> cudaErrorInvalidValue");
	CHECK(cudaFree(host) == cudaErrorInvalidValue, "cudaFree(host pointer) -> cudaErrorInvalidValue");
	CHECK(cudaMalloc(NULL, 8) == cudaErrorInvalidValue, "cudaMalloc(NULL) -> cudaErrorInvalidValue");
	CHECK(cudaStreamSynchronize(bogus) == cudaErrorInvalidResourceHandle,
	      "sync on a bogus stream -> cudaErrorInvalidResourceHandle");
	CHECK(cudaLaunchKernel(NULL, d3(1), d3(1), NULL, 0, 0) == cudaErrorInvalidDeviceFunction,
	      "launch of NULL -> cudaErrorInvalidDeviceFunction");
	CHECK(cudaLaunchKernel((const void *)kern_zero, d3(1), big, NULL, 0, 0) == cudaErrorInvalidConfiguration,
	      "2048 threads per block -> cudaErrorInvalidConfiguration");
	CHECK(cudaLaunchKernel((const void *)kern_zero, d3(0), d3(1), NULL, 0, 0) == cudaErrorInvalidConfiguration,
	      "empty grid -> cudaErrorInvalidConfiguration");
	CHECK(cudaSetDevice(3) == cudaErrorInvalidDevice, "cudaSetDevice(3) -> cudaErrorInvalidDevice");
	p = malloc(8192);
	CK(cudaHostRegister(p, 8192, 0));
	CHECK(cudaHostRegister((char *)p + 4096, 100, 0) == cudaErrorHostMemoryAlreadyRegistered,
	      "overlapping cudaHostRegister -> cudaErrorHostMemoryAlreadyRegistered");
	CK(cudaHostUnregister(p));
	CHECK(cudaHostUnregister(p) == cudaErrorHostMemoryNotRegistered,
	      "cudaHostUnregister twice -> cudaErrorHostMemoryNotRegistered");
	CHECK(cudaFreeHost(p) == cudaErrorInvalidValue, "cudaFreeHost(malloc'd) -> cudaErrorInvalidValue");
	free(p);
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	CK(cudaEventRecord(ev, 0));
	CK(cudaEventSynchronize(ev));
	float ms;
	CHECK(cudaEventElapsedTime(&ms, ev, ev) == cudaErrorInvalidResourceHandle,
	      "cudaEventElapsedTime on a DisableTiming event fails");
	CK(cudaEventDestroy(ev));
	CHECK(cudaEventDestroy(ev) == cudaErrorInvalidResourceHandle, "double cudaEventDestroy fails");
	CHECK(!strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue"), "cudaGetErrorName");
	CHECK(!strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument"), "cudaGetErrorString");
	CHECK(!strcmp(cudaGetErrorString(cudaErrorInsufficientDriver),
		      "CUDA driver version is insufficient for CUDA runtime version"),
	      "cudaGetErrorString(35) matches the real runtime's text");
	CK(cudaFree(d));
	(void)cudaGetLastError();
}

/* The registration family must be harmless no-ops. */
extern void **__cudaRegisterFatBinary(void *fatCubin);
extern void __cudaRegisterFatBinaryEnd(void **h);
extern void __cudaUnregisterFatBinary(void **h);
extern void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName,
				   int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
extern void __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
			      size_t size, int constant, int global);

static void registration_tests(void)
{
	static char fake_fatbin[64], var[8];
	void **h = __cudaRegisterFatBinary(fake_fatbin);

	CHECK(h != NULL, "__cudaRegisterFatBinary returns a handle");
	__cudaRegisterFunction(h, (const char *)kern_a, (char *)"kern_a", "kern_a", -1, NULL, NULL, NULL, NULL, NULL);
	__cudaRegisterVar(h, var, (char *)"var", "var", 0, sizeof(var), 0, 0);
	__cudaRegisterFatBinaryEnd(h);
	__cudaUnregisterFatBinary(h);
	CHECK(cudaGetLastError() == cudaSuccess, "registration family: no-op successes");
}

static void pin_env(void)
{
	char v[32];

	snprintf(v, sizeof(v), "%g", PINNED_GBPS);
	setenv("GPUSIM_PINNED_GBPS", v, 1);
	snprintf(v, sizeof(v), "%g", PAGEABLE_GBPS);
	setenv("GPUSIM_PAGEABLE_GBPS", v, 1);
	snprintf(v, sizeof(v), "%g", LATENCY_NS / 1000.0);
	setenv("GPUSIM_COPY_LATENCY_US", v, 1);
	snprintf(v, sizeof(v), "%g", LAUNCH_NS / 1000.0);
	setenv("GPUSIM_LAUNCH_US", v, 1);
	snprintf(v, sizeof(v), "%llu", NS_PER_BLOCK);
	setenv("GPUSIM_NS_PER_BLOCK", v, 1);
	snprintf(v, sizeof(v), "%g", KBASE_NS / 1000.0);
	setenv("GPUSIM_KERNEL_BASE_US", v, 1);
	unsetenv("GPUSIM_TIMERSLACK_NS");
	unsetenv("GPUSIM_DEVICE_MEM_MB");
}

int main(void)
{
	int fds[2], st = 0, cp = 0, cf = 1;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	set_cost = (set_cost_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimSetKernelCost");
	is_dev = (is_dev_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimIsDevicePointer");
	if (!set_cost || !is_dev) {
		printf("FAIL - not running on the simulator (set LD_LIBRARY_PATH to .output/gpusim)\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	passed++;
	printf("ok   - running on the simulator\n");
	pin_env();

	/* data tests in a child, with bytes moving (the default) */
	if (pipe(fds))
		return 1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		unsetenv("GPUSIM_COPY_DATA");
		passed = failed = 0;
		data_tests();
		registration_tests();
		error_tests();
		int r[2] = { passed, failed };
		if (write(fds[1], r, sizeof(r)) != sizeof(r))
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	{
		int r[2];
		if (read(fds[0], r, sizeof(r)) == sizeof(r)) {
			cp = r[0];
			cf = r[1];
		}
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			printf("FAIL - data-test child exited abnormally (status %d)\n", st);
			cf++;
		}
	}
	passed += cp;
	failed += cf;

	/* timing tests here, bytes not moved so host memcpy speed is not measured */
	setenv("GPUSIM_COPY_DATA", "0", 1);
	timing_tests();

	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
