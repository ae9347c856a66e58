// SPDX-License-Identifier: MIT
/*
 * gpusim — a GPU simulator exporting the CUDA runtime ABI (libcudart.so.13).
 *
 * A program compiled against the toolkit's cuda_runtime_api.h and linked
 * against the real libcudart.so.13 runs unchanged on this library when it is
 * found first (LD_LIBRARY_PATH=.output/gpusim). Nothing runs on a GPU: the
 * library models the *timing* of one device on CLOCK_MONOTONIC, moves the
 * bytes with memcpy, and makes the calling threads spin (launch CPU cost) or
 * sleep (synchronisation) as the real runtime would. See README.md.
 *
 * Model
 *   - One device with three engines: compute (kernels, memsets, D2D copies),
 *     an H2D copy engine and a D2H copy engine. Each engine has a "ready"
 *     time: it executes one item at a time.
 *   - Streams: each has a ready time (end of its last item). An item starts at
 *     max(now, stream dependency, engine ready) and ends at start + cost.
 *     The legacy default stream (0 / cudaStreamLegacy) waits for all blocking
 *     streams and all blocking streams wait for it; cudaStreamNonBlocking
 *     streams do not. _ptds/_ptsz entry points (and cudaStreamPerThread) use
 *     a per-thread default stream, an ordinary blocking stream.
 *   - Kernel cost: the per-function cost set with gpusimSetKernelCost(), else
 *     GPUSIM_KERNEL_BASE_US + blocks * GPUSIM_NS_PER_BLOCK.
 *   - Copy cost: GPUSIM_COPY_LATENCY_US + bytes / bandwidth, the bandwidth
 *     being pinned or pageable by the host side's range (cudaMallocHost,
 *     cudaHostAlloc and cudaHostRegister ranges are pinned; everything else
 *     is pageable). D2D copies use GPUSIM_D2D_GBPS, memsets GPUSIM_MEMSET_GBPS.
 *   - Host side: a kernel launch busy-spins GPUSIM_LAUNCH_US of the calling
 *     thread's CPU time (CLOCK_THREAD_CPUTIME_ID), then enqueues.
 *     cudaMemcpy/cudaMemcpy2D/cudaMemset-free synchronous copies and pageable
 *     cudaMemcpyAsync block the caller until the copy ends (including the wait
 *     for earlier work on the stream), as the real runtime does for pageable
 *     memory. Pinned cudaMemcpyAsync returns at once. Synchronize calls
 *     (stream, device, event) and every blocking wait SLEEP with
 *     clock_nanosleep(TIMER_ABSTIME) until the device reaches the point, so
 *     the scheduler sees the thread blocked (S), not running.
 *   - Data: synchronous copies memcpy at call time (a real pageable copy also
 *     burns host CPU staging the bytes); if that memcpy takes longer than the
 *     model, the call returns when the memcpy ends. Pinned async copies are
 *     deferred and performed, in order, when the host next synchronises
 *     (sync calls, synchronous copies, queries that report completion) or
 *     before any other data operation, so ordering is preserved.
 *   - The first wait of each thread sets that thread's timer slack to
 *     GPUSIM_TIMERSLACK_NS (default 1000) so short sleeps are not rounded
 *     up by the kernel's default 50 us slack.
 *   - Device memory comes from one reserved address range (mmap NORESERVE,
 *     GPUSIM_DEVICE_MEM_MB) so device pointers are distinguishable from host
 *     pointers (gpusimIsDevicePointer()).
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
 *
 * Thread safety: one process-wide mutex around the model; it is never held
 * while a caller sleeps or spins.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#define GPUSIM_API __attribute__((visibility("default")))

/* ---- Declarations of entry points the toolkit headers do not declare in C --
 * (prototypes copied from crt/host_runtime.h and crt/device_functions.h,
 * which are C++-only, and the _ptds/_ptsz names the header maps to under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM). */
GPUSIM_API void **__cudaRegisterFatBinary(void *fatCubin);
GPUSIM_API void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
GPUSIM_API void __cudaUnregisterFatBinary(void **fatCubinHandle);
GPUSIM_API void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
				       const char *deviceName, int thread_limit, uint3 *tid,
				       uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
GPUSIM_API void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
				  const char *deviceName, int ext, size_t size, int constant,
				  int global);
GPUSIM_API void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
					 char *deviceAddress, const char *deviceName, int ext,
					 size_t size, int constant, int global);
GPUSIM_API char __cudaInitModule(void **fatCubinHandle);
GPUSIM_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
						struct CUstream_st *stream);
GPUSIM_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
						  size_t *sharedMem, void *stream);
GPUSIM_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
GPUSIM_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					  void **args, size_t sharedMem, cudaStream_t stream);
GPUSIM_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					       void **args, size_t sharedMem, cudaStream_t stream);

GPUSIM_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
				       enum cudaMemcpyKind kind);
GPUSIM_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
					 size_t width, size_t height, enum cudaMemcpyKind kind);
GPUSIM_API cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count);
GPUSIM_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
					    enum cudaMemcpyKind kind, cudaStream_t stream);
GPUSIM_API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src,
					      size_t spitch, size_t width, size_t height,
					      enum cudaMemcpyKind kind, cudaStream_t stream);
GPUSIM_API cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count,
					    cudaStream_t stream);
GPUSIM_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
					     void **args, size_t sharedMem, cudaStream_t stream);
GPUSIM_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
GPUSIM_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream);
GPUSIM_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
GPUSIM_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
						unsigned int flags);

/* Simulator extras (version node GPUSIM_1). Found by workloads with dlsym so
 * the same binary also runs on the real library. */
GPUSIM_API int gpusimSetKernelCost(const void *func, unsigned long long ns);
GPUSIM_API int gpusimIsDevicePointer(const void *ptr);
GPUSIM_API unsigned long long gpusimDeviceNow(void);
GPUSIM_API unsigned long long gpusimDeviceIdleAt(void);

/* ------------------------------------------------------------------------ */

#define NSEC 1000000000ull
#define STREAM_MAGIC 0x5354524dU /* "STRM" */
#define EVENT_MAGIC 0x45564e54U  /* "EVNT" */

struct CUstream_st {
	uint32_t magic;
	unsigned int flags;   /* cudaStreamNonBlocking */
	int legacy;           /* the legacy default stream */
	uint64_t ready;       /* end of the last item */
	struct CUstream_st *next;
};

struct CUevent_st {
	uint32_t magic;
	unsigned int flags;   /* cudaEventDisableTiming ... */
	int recorded;
	uint64_t ts;          /* completion time of the recorded point */
	struct CUevent_st *next;
};

struct range {
	uintptr_t base;
	size_t size;
	int owned;            /* 1: allocated by us (cudaMallocHost/HostAlloc) */
	int live;             /* device blocks: 0 = free for reuse */
	size_t req;           /* device blocks: size asked for (bounds checks) */
};

struct pending_copy {
	char *dst;
	const char *src;
	size_t dpitch, spitch, width, height;
	uint64_t end;
};

struct vec {
	void *v;
	size_t n, cap, elt;
};

static struct {
	pthread_mutex_t lock;
	pthread_once_t once;
	/* parameters */
	double pinned_bpns, pageable_bpns, d2d_bpns, memset_bpns; /* bytes per ns */
	uint64_t copy_latency_ns, launch_ns, ns_per_block, kernel_base_ns;
	uint64_t timerslack_ns;
	int copy_data;
	/* device */
	uint64_t compute_ready, h2d_ready, d2h_ready;
	struct CUstream_st legacy;
	struct CUstream_st *streams;   /* created streams + per-thread streams */
	struct CUevent_st *events;
	/* memory */
	char *dev_base;
	size_t dev_size, dev_used;
	struct vec dev_blocks;         /* struct range */
	struct vec pinned;             /* struct range */
	struct vec pending;            /* struct pending_copy */
	struct vec kcost;              /* struct range: base = func, size = ns */
} S = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.once = PTHREAD_ONCE_INIT,
};

static _Thread_local cudaError_t t_last_error;
static _Thread_local struct CUstream_st *t_ptds;
static _Thread_local int t_slack_set;
static _Thread_local struct {
	int depth;
	dim3 grid[4], block[4];
	size_t shmem[4];
	cudaStream_t stream[4];
} t_cfg;

static void *vec_push(struct vec *v)
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

static void vec_del(struct vec *v, size_t i)
{
	char *b = v->v;
	memmove(b + i * v->elt, b + (i + 1) * v->elt, (v->n - i - 1) * v->elt);
	v->n--;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
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

static void init_once(void)
{
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
	S.legacy.magic = STREAM_MAGIC;
	S.legacy.legacy = 1;
	S.dev_blocks.elt = sizeof(struct range);
	S.pinned.elt = sizeof(struct range);
	S.pending.elt = sizeof(struct pending_copy);
	S.kcost.elt = sizeof(struct range);
}

static void lock(void)
{
	pthread_once(&S.once, init_once);
	pthread_mutex_lock(&S.lock);
}

static void unlock(void)
{
	pthread_mutex_unlock(&S.lock);
}

static cudaError_t ret(cudaError_t e)
{
	if (e != cudaSuccess)
		t_last_error = e;
	return e;
}

/* Sleep (not spin) until CLOCK_MONOTONIC reaches t. Called without the lock. */
static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / NSEC), .tv_nsec = (long)(t % NSEC) };

	if (!t_slack_set) {
		t_slack_set = 1;
		if (S.timerslack_ns)
			prctl(PR_SET_TIMERSLACK, (unsigned long)S.timerslack_ns, 0, 0, 0);
	}
	while (now_ns() < t) {
		int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		if (r && r != EINTR)
			break;
	}
}

/* Busy-spin ns of this thread's CPU time (a launch's host cost). */
static void spin_cpu(uint64_t ns)
{
	uint64_t end;

	if (!ns)
		return;
	end = thread_cpu_ns() + ns;
	while (thread_cpu_ns() < end)
		;
}

/* ---- streams ----------------------------------------------------------- */

static struct CUstream_st *ptds_stream(void)
{
	if (!t_ptds) {
		struct CUstream_st *s = calloc(1, sizeof(*s));
		if (!s)
			return &S.legacy;
		s->magic = STREAM_MAGIC;
		s->next = S.streams;
		S.streams = s;
		t_ptds = s;
	}
	return t_ptds;
}

/* Resolve a handle under the lock; NULL if invalid. */
static struct CUstream_st *stream_get(cudaStream_t h, int ptds)
{
	struct CUstream_st *s;

	if (h == NULL)
		return ptds ? ptds_stream() : &S.legacy;
	if (h == cudaStreamLegacy)
		return &S.legacy;
	if (h == cudaStreamPerThread)
		return ptds_stream();
	for (s = S.streams; s; s = s->next)
		if (s == h)
			return s->magic == STREAM_MAGIC ? s : NULL;
	return NULL;
}

/* Earliest start of a new item on s, from stream ordering only. */
static uint64_t stream_dep(struct CUstream_st *s)
{
	uint64_t t = s->ready;

	if (s->legacy) {
		for (struct CUstream_st *o = S.streams; o; o = o->next)
			if (!(o->flags & cudaStreamNonBlocking))
				t = max64(t, o->ready);
	} else if (!(s->flags & cudaStreamNonBlocking)) {
		t = max64(t, S.legacy.ready);
	}
	return t;
}

enum engine { ENG_COMPUTE, ENG_H2D, ENG_D2H, ENG_NONE };

static uint64_t *engine_ready(enum engine e)
{
	switch (e) {
	case ENG_H2D:
		return &S.h2d_ready;
	case ENG_D2H:
		return &S.d2h_ready;
	default:
		return &S.compute_ready;
	}
}

/* Schedule one item of cost ns on stream s and engine e; returns its end. */
static uint64_t schedule(struct CUstream_st *s, enum engine e, uint64_t cost, uint64_t now)
{
	uint64_t *er = engine_ready(e);
	uint64_t start = max64(now, max64(stream_dep(s), *er));
	uint64_t end = start + cost;

	*er = end;
	s->ready = end;
	return end;
}

static uint64_t device_idle_at(void)
{
	uint64_t t = max64(S.legacy.ready, max64(S.compute_ready, max64(S.h2d_ready, S.d2h_ready)));

	for (struct CUstream_st *s = S.streams; s; s = s->next)
		t = max64(t, s->ready);
	return t;
}

/* ---- memory ranges ----------------------------------------------------- */

static int is_dev(const void *p)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)S.dev_base;
	return S.dev_base && a >= b && a < b + S.dev_size;
}

/* Is [p, p+n) inside one live device allocation? */
static int dev_range_ok(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	struct range *r = S.dev_blocks.v;

	for (size_t i = 0; i < S.dev_blocks.n; i++)
		if (r[i].live && a >= r[i].base && a - r[i].base <= r[i].req &&
		    n <= r[i].req - (a - r[i].base))
			return 1;
	return 0;
}

static int is_pinned(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	struct range *r = S.pinned.v;

	for (size_t i = 0; i < S.pinned.n; i++)
		if (a >= r[i].base && a - r[i].base < r[i].size && n <= r[i].size - (a - r[i].base))
			return 1;
	return 0;
}

static ssize_t pinned_find(const void *base)
{
	struct range *r = S.pinned.v;

	for (size_t i = 0; i < S.pinned.n; i++)
		if (r[i].base == (uintptr_t)base)
			return (ssize_t)i;
	return -1;
}

/* ---- data movement ----------------------------------------------------- */

static void copy2d(char *dst, size_t dpitch, const char *src, size_t spitch, size_t width,
		   size_t height)
{
	if (!S.copy_data)
		return;
	if (dpitch == width && spitch == width) {
		memmove(dst, src, width * height);
		return;
	}
	for (size_t i = 0; i < height; i++)
		memmove(dst + i * dpitch, src + i * spitch, width);
}

/* Perform all deferred copies, in order (under the lock). */
static void flush_pending(void)
{
	struct pending_copy *p = S.pending.v;

	for (size_t i = 0; i < S.pending.n; i++)
		copy2d(p[i].dst, p[i].dpitch, p[i].src, p[i].spitch, p[i].width, p[i].height);
	S.pending.n = 0;
}

/* ---- copies ------------------------------------------------------------ */

/* Validate a (2D) copy and find its engine and bandwidth. */
static cudaError_t copy_classify(void *dst, const void *src, size_t dpitch, size_t spitch,
				 size_t width, size_t height, enum cudaMemcpyKind kind,
				 enum engine *eng, double *bpns, int *pinned)
{
	size_t dspan, sspan;
	int ddev, sdev;

	if (width > dpitch || width > spitch)
		return cudaErrorInvalidPitchValue;
	if (!width || !height)
		return cudaSuccess;
	if (!dst || !src)
		return cudaErrorInvalidValue;
	dspan = dpitch * (height - 1) + width;
	sspan = spitch * (height - 1) + width;
	ddev = is_dev(dst);
	sdev = is_dev(src);
	if (kind == cudaMemcpyDefault)
		kind = ddev ? (sdev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
			    : (sdev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
	switch (kind) {
	case cudaMemcpyHostToHost:
		if (ddev || sdev)
			return cudaErrorInvalidValue;
		*eng = ENG_NONE;
		*bpns = 0;
		*pinned = 0;
		return cudaSuccess;
	case cudaMemcpyHostToDevice:
		if (!dev_range_ok(dst, dspan) || sdev)
			return cudaErrorInvalidValue;
		*eng = ENG_H2D;
		*pinned = is_pinned(src, sspan);
		break;
	case cudaMemcpyDeviceToHost:
		if (!dev_range_ok(src, sspan) || ddev)
			return cudaErrorInvalidValue;
		*eng = ENG_D2H;
		*pinned = is_pinned(dst, dspan);
		break;
	case cudaMemcpyDeviceToDevice:
		if (!dev_range_ok(src, sspan) || !dev_range_ok(dst, dspan))
			return cudaErrorInvalidValue;
		*eng = ENG_COMPUTE;
		*pinned = 1;
		*bpns = S.d2d_bpns;
		return cudaSuccess;
	default:
		return cudaErrorInvalidMemcpyDirection;
	}
	*bpns = *pinned ? S.pinned_bpns : S.pageable_bpns;
	return cudaSuccess;
}

/* The common copy path. sync: cudaMemcpy semantics (the caller waits for the
 * copy, and so for earlier work on the stream). */
static cudaError_t do_copy(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
			   size_t height, enum cudaMemcpyKind kind, cudaStream_t hs, int ptds,
			   int sync)
{
	enum engine eng = ENG_NONE;
	double bpns = 0;
	int pinned = 0;
	cudaError_t e;
	struct CUstream_st *s;
	uint64_t end, bytes = (uint64_t)width * height;

	lock();
	s = stream_get(hs, ptds);
	if (!s) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	e = copy_classify(dst, src, dpitch, spitch, width, height, kind, &eng, &bpns, &pinned);
	if (e != cudaSuccess || bytes == 0) {
		unlock();
		return ret(e);
	}
	if (eng == ENG_NONE) { /* host to host: a plain synchronous memcpy */
		flush_pending();
		copy2d(dst, dpitch, src, spitch, width, height);
		unlock();
		return cudaSuccess;
	}
	end = schedule(s, eng, S.copy_latency_ns + (uint64_t)((double)bytes / bpns), now_ns());
	if (!sync && pinned) { /* asynchronous: defer the bytes, return at once */
		struct pending_copy *p = vec_push(&S.pending);
		if (!p) {
			unlock();
			return ret(cudaErrorMemoryAllocation);
		}
		*p = (struct pending_copy){ dst, src, dpitch, spitch, width, height, end };
		unlock();
		return cudaSuccess;
	}
	flush_pending();
	copy2d(dst, dpitch, src, spitch, width, height);
	unlock();
	sleep_until(end);
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return do_copy(dst, count, src, count, count, 1, kind, NULL, 0, 1);
}

GPUSIM_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
				       enum cudaMemcpyKind kind)
{
	return do_copy(dst, count, src, count, count, 1, kind, NULL, 1, 1);
}

GPUSIM_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
				       enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return do_copy(dst, count, src, count, count, 1, kind, stream, 0, 0);
}

GPUSIM_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
					    enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return do_copy(dst, count, src, count, count, 1, kind, stream, 1, 0);
}

GPUSIM_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
				    size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return do_copy(dst, dpitch, src, spitch, width, height, kind, NULL, 0, 1);
}

GPUSIM_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
					 size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return do_copy(dst, dpitch, src, spitch, width, height, kind, NULL, 1, 1);
}

GPUSIM_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
					 size_t width, size_t height, enum cudaMemcpyKind kind,
					 cudaStream_t stream)
{
	return do_copy(dst, dpitch, src, spitch, width, height, kind, stream, 0, 0);
}

GPUSIM_API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src,
					      size_t spitch, size_t width, size_t height,
					      enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return do_copy(dst, dpitch, src, spitch, width, height, kind, stream, 1, 0);
}

/* ---- memset ------------------------------------------------------------ */

static cudaError_t do_memset(void *p, int value, size_t count, cudaStream_t hs, int ptds)
{
	struct CUstream_st *s;

	lock();
	s = stream_get(hs, ptds);
	if (!s) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	if (!count) {
		unlock();
		return cudaSuccess;
	}
	if (!p || !dev_range_ok(p, count)) {
		unlock();
		return ret(cudaErrorInvalidValue);
	}
	flush_pending();
	if (S.copy_data)
		memset(p, value, count);
	/* Asynchronous with respect to the host for device memory. */
	schedule(s, ENG_COMPUTE, S.kernel_base_ns + (uint64_t)((double)count / S.memset_bpns),
		 now_ns());
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	return do_memset(devPtr, value, count, NULL, 0);
}

GPUSIM_API cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
	return do_memset(devPtr, value, count, NULL, 1);
}

GPUSIM_API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	return do_memset(devPtr, value, count, stream, 0);
}

GPUSIM_API cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count,
					    cudaStream_t stream)
{
	return do_memset(devPtr, value, count, stream, 1);
}

/* ---- kernels ----------------------------------------------------------- */

GPUSIM_API int gpusimSetKernelCost(const void *func, unsigned long long ns)
{
	struct range *r;

	if (!func)
		return -1;
	lock();
	r = S.kcost.v;
	for (size_t i = 0; i < S.kcost.n; i++)
		if (r[i].base == (uintptr_t)func) {
			r[i].size = ns;
			unlock();
			return 0;
		}
	r = vec_push(&S.kcost);
	if (r)
		*r = (struct range){ .base = (uintptr_t)func, .size = ns };
	unlock();
	return r ? 0 : -1;
}

static cudaError_t do_launch(const void *func, dim3 grid, dim3 block, cudaStream_t hs, int ptds)
{
	struct CUstream_st *s;
	struct range *r;
	uint64_t cost, blocks;

	pthread_once(&S.once, init_once);
	if (!func)
		return ret(cudaErrorInvalidDeviceFunction);
	if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z ||
	    (uint64_t)block.x * block.y * block.z > 1024 || block.z > 64 || grid.y > 65535 ||
	    grid.z > 65535)
		return ret(cudaErrorInvalidConfiguration);
	/* The host-side cost of a launch: CPU time on the calling thread. */
	spin_cpu(S.launch_ns);
	lock();
	s = stream_get(hs, ptds);
	if (!s) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	blocks = (uint64_t)grid.x * grid.y * grid.z;
	cost = S.kernel_base_ns + blocks * S.ns_per_block;
	r = S.kcost.v;
	for (size_t i = 0; i < S.kcost.n; i++)
		if (r[i].base == (uintptr_t)func) {
			cost = r[i].size;
			break;
		}
	schedule(s, ENG_COMPUTE, cost, now_ns());
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
					size_t sharedMem, cudaStream_t stream)
{
	(void)args;
	(void)sharedMem;
	return do_launch(func, gridDim, blockDim, stream, 0);
}

GPUSIM_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
					     void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)args;
	(void)sharedMem;
	return do_launch(func, gridDim, blockDim, stream, 1);
}

/* nvcc 13 host stubs: __cudaGetKernel(&handle, stub) then __cudaLaunchKernel.
 * The handle is the host stub's address, so costs set by stub apply. */
GPUSIM_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
	if (!kernel || !func)
		return ret(cudaErrorInvalidValue);
	*kernel = (cudaKernel_t)(uintptr_t)func;
	return cudaSuccess;
}

GPUSIM_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					  void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)args;
	(void)sharedMem;
	return do_launch((const void *)kernel, gridDim, blockDim, stream, 0);
}

GPUSIM_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					       void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)args;
	(void)sharedMem;
	return do_launch((const void *)kernel, gridDim, blockDim, stream, 1);
}

GPUSIM_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
						struct CUstream_st *stream)
{
	int d = t_cfg.depth;

	if (d >= 4)
		return 1;
	t_cfg.grid[d] = gridDim;
	t_cfg.block[d] = blockDim;
	t_cfg.shmem[d] = sharedMem;
	t_cfg.stream[d] = stream;
	t_cfg.depth = d + 1;
	return 0;
}

GPUSIM_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
						  size_t *sharedMem, void *stream)
{
	int d = t_cfg.depth - 1;

	if (d < 0)
		return ret(cudaErrorMissingConfiguration);
	t_cfg.depth = d;
	*gridDim = t_cfg.grid[d];
	*blockDim = t_cfg.block[d];
	*sharedMem = t_cfg.shmem[d];
	*(cudaStream_t *)stream = t_cfg.stream[d];
	return cudaSuccess;
}

/* ---- registration family: no-op successes ------------------------------ */

static void *fatbin_handle_storage;

GPUSIM_API void **__cudaRegisterFatBinary(void *fatCubin)
{
	(void)fatCubin;
	return &fatbin_handle_storage;
}

GPUSIM_API void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
	(void)fatCubinHandle;
}

GPUSIM_API void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
	(void)fatCubinHandle;
}

GPUSIM_API void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
				       const char *deviceName, int thread_limit, uint3 *tid,
				       uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
	(void)fatCubinHandle, (void)hostFun, (void)deviceFun, (void)deviceName;
	(void)thread_limit, (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

GPUSIM_API void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
				  const char *deviceName, int ext, size_t size, int constant,
				  int global)
{
	(void)fatCubinHandle, (void)hostVar, (void)deviceAddress, (void)deviceName;
	(void)ext, (void)size, (void)constant, (void)global;
}

GPUSIM_API void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
					 char *deviceAddress, const char *deviceName, int ext,
					 size_t size, int constant, int global)
{
	(void)fatCubinHandle, (void)hostVarPtrAddress, (void)deviceAddress, (void)deviceName;
	(void)ext, (void)size, (void)constant, (void)global;
}

GPUSIM_API char __cudaInitModule(void **fatCubinHandle)
{
	(void)fatCubinHandle;
	return 1;
}

/* ---- synchronisation --------------------------------------------------- */

static cudaError_t stream_sync(cudaStream_t hs, int ptds)
{
	struct CUstream_st *s;
	uint64_t t;

	lock();
	s = stream_get(hs, ptds);
	if (!s) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	t = s->ready;
	unlock();
	sleep_until(t);
	lock();
	flush_pending();
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	return stream_sync(stream, 0);
}

GPUSIM_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	return stream_sync(stream, 1);
}

static cudaError_t stream_query(cudaStream_t hs, int ptds)
{
	struct CUstream_st *s;
	cudaError_t e = cudaSuccess;

	lock();
	s = stream_get(hs, ptds);
	if (!s)
		e = cudaErrorInvalidResourceHandle;
	else if (now_ns() < s->ready)
		e = cudaErrorNotReady; /* not an error for cudaGetLastError */
	else
		flush_pending();
	unlock();
	return e == cudaErrorNotReady ? e : ret(e);
}

GPUSIM_API cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	return stream_query(stream, 0);
}

GPUSIM_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream)
{
	return stream_query(stream, 1);
}

GPUSIM_API cudaError_t cudaDeviceSynchronize(void)
{
	uint64_t t;

	lock();
	t = device_idle_at();
	unlock();
	sleep_until(t);
	lock();
	flush_pending();
	unlock();
	return cudaSuccess;
}

/* ---- streams API ------------------------------------------------------- */

GPUSIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	struct CUstream_st *s;

	if (!pStream)
		return ret(cudaErrorInvalidValue);
	if (flags & ~(unsigned)cudaStreamNonBlocking)
		return ret(cudaErrorInvalidValue);
	s = calloc(1, sizeof(*s));
	if (!s)
		return ret(cudaErrorMemoryAllocation);
	s->magic = STREAM_MAGIC;
	s->flags = flags;
	lock();
	s->next = S.streams;
	S.streams = s;
	unlock();
	*pStream = s;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

GPUSIM_API cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	struct CUstream_st **pp;

	if (!stream || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
		return ret(cudaErrorInvalidResourceHandle);
	lock();
	for (pp = &S.streams; *pp; pp = &(*pp)->next)
		if (*pp == stream && stream != t_ptds)
			break;
	if (!*pp) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	/* Pending work still completes (its times are on the engines). */
	*pp = stream->next;
	stream->magic = 0;
	unlock();
	free(stream);
	return cudaSuccess;
}

/* ---- events ------------------------------------------------------------ */

static struct CUevent_st *event_get(cudaEvent_t h)
{
	for (struct CUevent_st *e = S.events; e; e = e->next)
		if (e == h)
			return e->magic == EVENT_MAGIC ? e : NULL;
	return NULL;
}

GPUSIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	struct CUevent_st *e;

	if (!event)
		return ret(cudaErrorInvalidValue);
	if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
		return ret(cudaErrorInvalidValue);
	e = calloc(1, sizeof(*e));
	if (!e)
		return ret(cudaErrorMemoryAllocation);
	e->magic = EVENT_MAGIC;
	e->flags = flags;
	lock();
	e->next = S.events;
	S.events = e;
	unlock();
	*event = e;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	return cudaEventCreateWithFlags(event, cudaEventDefault);
}

GPUSIM_API cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	struct CUevent_st **pp;

	lock();
	for (pp = &S.events; *pp; pp = &(*pp)->next)
		if (*pp == event)
			break;
	if (!event || !*pp) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	*pp = event->next;
	event->magic = 0;
	unlock();
	free(event);
	return cudaSuccess;
}

static cudaError_t event_record(cudaEvent_t he, cudaStream_t hs, int ptds)
{
	struct CUevent_st *e;
	struct CUstream_st *s;

	lock();
	e = event_get(he);
	s = stream_get(hs, ptds);
	if (!e || !s) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	/* The event completes when all earlier work the stream depends on has. */
	e->ts = max64(stream_dep(s), now_ns());
	e->recorded = 1;
	s->ready = max64(s->ready, e->ts);
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	return event_record(event, stream, 0);
}

GPUSIM_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
	return event_record(event, stream, 1);
}

GPUSIM_API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	struct CUevent_st *e;
	uint64_t t;

	lock();
	e = event_get(event);
	if (!e) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	t = e->recorded ? e->ts : 0;
	unlock();
	sleep_until(t);
	lock();
	flush_pending();
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaEventQuery(cudaEvent_t event)
{
	struct CUevent_st *e;
	cudaError_t r = cudaSuccess;

	lock();
	e = event_get(event);
	if (!e)
		r = cudaErrorInvalidResourceHandle;
	else if (e->recorded && now_ns() < e->ts)
		r = cudaErrorNotReady;
	else
		flush_pending();
	unlock();
	return r == cudaErrorNotReady ? r : ret(r);
}

GPUSIM_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	struct CUevent_st *a, *b;
	uint64_t now;

	if (!ms)
		return ret(cudaErrorInvalidValue);
	lock();
	a = event_get(start);
	b = event_get(end);
	if (!a || !b || (a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming)) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	if (!a->recorded || !b->recorded) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	now = now_ns();
	if (now < a->ts || now < b->ts) {
		unlock();
		return cudaErrorNotReady;
	}
	*ms = (float)(((double)b->ts - (double)a->ts) / 1e6);
	unlock();
	return cudaSuccess;
}

static cudaError_t stream_wait_event(cudaStream_t hs, cudaEvent_t he, unsigned int flags, int ptds)
{
	struct CUstream_st *s;
	struct CUevent_st *e;

	lock();
	s = stream_get(hs, ptds);
	e = event_get(he);
	if (!s || !e) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	if (flags & ~(unsigned)cudaEventWaitExternal) {
		unlock();
		return ret(cudaErrorInvalidValue);
	}
	if (e->recorded)
		s->ready = max64(s->ready, e->ts);
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
					   unsigned int flags)
{
	return stream_wait_event(stream, event, flags, 0);
}

GPUSIM_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
						unsigned int flags)
{
	return stream_wait_event(stream, event, flags, 1);
}

/* ---- device memory ----------------------------------------------------- */

GPUSIM_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	struct range *r, *best = NULL;
	size_t want;

	if (!devPtr)
		return ret(cudaErrorInvalidValue);
	if (!size) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	want = (size + 255) & ~(size_t)255; /* cudaMalloc aligns to 256 bytes */
	if (want < size)
		return ret(cudaErrorMemoryAllocation);
	lock();
	r = S.dev_blocks.v;
	for (size_t i = 0; i < S.dev_blocks.n; i++) /* first fit among freed blocks */
		if (!r[i].live && r[i].size >= want && (!best || r[i].size < best->size))
			best = &r[i];
	if (best) {
		best->live = 1;
		best->req = size;
		*devPtr = (void *)best->base;
		unlock();
		return cudaSuccess;
	}
	if (!S.dev_base || want > S.dev_size - S.dev_used) {
		unlock();
		return ret(cudaErrorMemoryAllocation);
	}
	r = vec_push(&S.dev_blocks);
	if (!r) {
		unlock();
		return ret(cudaErrorMemoryAllocation);
	}
	*r = (struct range){ .base = (uintptr_t)S.dev_base + S.dev_used, .size = want, .live = 1,
			      .req = size };
	S.dev_used += want;
	*devPtr = (void *)r->base;
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaFree(void *devPtr)
{
	struct range *r;

	if (!devPtr)
		return cudaSuccess;
	lock();
	r = S.dev_blocks.v;
	for (size_t i = 0; i < S.dev_blocks.n; i++)
		if (r[i].base == (uintptr_t)devPtr && r[i].live) {
			flush_pending();
			r[i].live = 0;
			if (r[i].size >= (1u << 20))
				madvise((void *)r[i].base, r[i].size, MADV_DONTNEED);
			unlock();
			return cudaSuccess;
		}
	unlock();
	return ret(cudaErrorInvalidValue);
}

GPUSIM_API int gpusimIsDevicePointer(const void *ptr)
{
	pthread_once(&S.once, init_once);
	return is_dev(ptr);
}

GPUSIM_API unsigned long long gpusimDeviceNow(void)
{
	return now_ns();
}

GPUSIM_API unsigned long long gpusimDeviceIdleAt(void)
{
	uint64_t t;

	lock();
	t = device_idle_at();
	unlock();
	return t;
}

GPUSIM_API cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
	size_t live = 0;
	struct range *r;

	if (!free || !total)
		return ret(cudaErrorInvalidValue);
	lock();
	r = S.dev_blocks.v;
	for (size_t i = 0; i < S.dev_blocks.n; i++)
		if (r[i].live)
			live += r[i].size;
	*total = S.dev_size;
	*free = S.dev_size - live;
	unlock();
	return cudaSuccess;
}

/* ---- pinned host memory ------------------------------------------------ */

static cudaError_t pinned_add(void *p, size_t size, int owned)
{
	struct range *r = vec_push(&S.pinned);

	if (!r)
		return cudaErrorMemoryAllocation;
	*r = (struct range){ .base = (uintptr_t)p, .size = size, .owned = owned, .live = 1 };
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	void *p;
	cudaError_t e;

	if (!pHost)
		return ret(cudaErrorInvalidValue);
	if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped |
				cudaHostAllocWriteCombined))
		return ret(cudaErrorInvalidValue);
	if (!size) {
		*pHost = NULL;
		return cudaSuccess;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return ret(cudaErrorMemoryAllocation);
	lock();
	e = pinned_add(p, size, 1);
	unlock();
	if (e != cudaSuccess) {
		munmap(p, size);
		return ret(e);
	}
	*pHost = p;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

GPUSIM_API cudaError_t cudaFreeHost(void *ptr)
{
	ssize_t i;
	struct range r;

	if (!ptr)
		return cudaSuccess;
	lock();
	i = pinned_find(ptr);
	if (i < 0 || !((struct range *)S.pinned.v)[i].owned) {
		unlock();
		return ret(cudaErrorInvalidValue);
	}
	flush_pending();
	r = ((struct range *)S.pinned.v)[i];
	vec_del(&S.pinned, (size_t)i);
	unlock();
	munmap((void *)r.base, r.size);
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	uintptr_t a = (uintptr_t)ptr;
	struct range *r;
	cudaError_t e;

	if (!ptr || !size)
		return ret(cudaErrorInvalidValue);
	if (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped |
				cudaHostRegisterIoMemory | cudaHostRegisterReadOnly))
		return ret(cudaErrorInvalidValue);
	lock();
	if (is_dev(ptr)) {
		unlock();
		return ret(cudaErrorInvalidValue);
	}
	r = S.pinned.v;
	for (size_t i = 0; i < S.pinned.n; i++)
		if (a < r[i].base + r[i].size && r[i].base < a + size) {
			unlock();
			return ret(cudaErrorHostMemoryAlreadyRegistered);
		}
	e = pinned_add(ptr, size, 0);
	unlock();
	return ret(e);
}

GPUSIM_API cudaError_t cudaHostUnregister(void *ptr)
{
	ssize_t i;

	lock();
	i = pinned_find(ptr);
	if (!ptr || i < 0 || ((struct range *)S.pinned.v)[i].owned) {
		unlock();
		return ret(cudaErrorHostMemoryNotRegistered);
	}
	flush_pending();
	vec_del(&S.pinned, (size_t)i);
	unlock();
	return cudaSuccess;
}

/* ---- errors ------------------------------------------------------------ */

GPUSIM_API cudaError_t cudaGetLastError(void)
{
	cudaError_t e = t_last_error;

	t_last_error = cudaSuccess;
	return e;
}

GPUSIM_API cudaError_t cudaPeekAtLastError(void)
{
	return t_last_error;
}

static const struct {
	cudaError_t code;
	const char *name, *msg;
} errtab[] = {
#define E(c, m) { c, #c, m }
	E(cudaSuccess, "no error"),
	E(cudaErrorInvalidValue, "invalid argument"),
	E(cudaErrorMemoryAllocation, "out of memory"),
	E(cudaErrorInitializationError, "initialization error"),
	E(cudaErrorMissingConfiguration, "__global__ function call is not configured"),
	E(cudaErrorInvalidPitchValue, "invalid pitch argument"),
	E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
	E(cudaErrorInvalidConfiguration, "invalid configuration argument"),
	E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
	E(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"),
	E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
	E(cudaErrorInvalidDevice, "invalid device ordinal"),
	E(cudaErrorInvalidDeviceFunction, "invalid device function"),
	E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
	E(cudaErrorNotReady, "device not ready"),
	E(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped"),
	E(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region"),
	E(cudaErrorNotSupported, "operation not supported"),
	E(cudaErrorUnknown, "unknown error"),
#undef E
};

GPUSIM_API const char *cudaGetErrorName(cudaError_t error)
{
	for (size_t i = 0; i < sizeof(errtab) / sizeof(errtab[0]); i++)
		if (errtab[i].code == error)
			return errtab[i].name;
	return "cudaErrorUnknown";
}

GPUSIM_API const char *cudaGetErrorString(cudaError_t error)
{
	for (size_t i = 0; i < sizeof(errtab) / sizeof(errtab[0]); i++)
		if (errtab[i].code == error)
			return errtab[i].msg;
	return "unrecognized error code";
}

/* ---- device management ------------------------------------------------- */

static _Thread_local int t_device;

GPUSIM_API cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return ret(cudaErrorInvalidValue);
	*count = 1;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaSetDevice(int device)
{
	if (device != 0)
		return ret(cudaErrorInvalidDevice);
	t_device = device;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGetDevice(int *device)
{
	if (!device)
		return ret(cudaErrorInvalidValue);
	*device = t_device;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	if (!prop)
		return ret(cudaErrorInvalidValue);
	if (device != 0)
		return ret(cudaErrorInvalidDevice);
	pthread_once(&S.once, init_once);
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "gpusim simulated GPU (PCIe Gen4 x16)");
	prop->totalGlobalMem = S.dev_size;
	prop->sharedMemPerBlock = 48 << 10;
	prop->regsPerBlock = 65536;
	prop->warpSize = 32;
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsDim[0] = 1024;
	prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 0x7fffffff;
	prop->maxGridSize[1] = 65535;
	prop->maxGridSize[2] = 65535;
	prop->totalConstMem = 64 << 10;
	prop->major = 8;
	prop->minor = 0;
	prop->multiProcessorCount = 108;
	prop->canMapHostMemory = 1;
	prop->concurrentKernels = 1;
	prop->pciBusID = 1;
	prop->asyncEngineCount = 2;
	prop->unifiedAddressing = 1;
	prop->memoryBusWidth = 5120;
	prop->l2CacheSize = 40 << 20;
	prop->maxThreadsPerMultiProcessor = 2048;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return ret(cudaErrorInvalidValue);
	*runtimeVersion = CUDART_VERSION;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return ret(cudaErrorInvalidValue);
	*driverVersion = CUDART_VERSION;
	return cudaSuccess;
}
