/* SPDX-License-Identifier: MIT */
/*
 * gpusim — a GPU simulator exporting the CUDA runtime ABI (libcudart.so.13).
 *
 * This header is private to the library: the state and helpers its files
 * share. The files, one job each:
 *   gpusim_model.c    parameters, clocks and waiting, engines, scheduling
 *   gpusim_streams.c  stream and event handles, ordering, synchronisation
 *   gpusim_memory.c   device allocator, pinned host ranges, range checks
 *   gpusim_copy.c     copies and memsets, deferred pinned copies
 *   gpusim_kernels.c  launches, kernel costs, call configuration,
 *                     fatbinary registration
 *   gpusim_api.c      entry points that only map onto the above
 *                     (legacy / per-thread stream variants, defaults)
 *   gpusim_errors.c   last error, error names and strings
 *   gpusim_device.c   device count, ordinal, properties, versions
 *   gpusim_comm.c     collectives (the simulated libnccl.so.2 calls in)
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
 *     time: it executes one item at a time. GPUSIM_COMPUTE_ENGINES (default
 *     1) compute engines let kernels of different streams run at once: an
 *     item takes the one free first.
 *   - Streams: each has a ready time (end of its last item). An item starts at
 *     max(now, stream dependency, engine ready) and ends at start + cost.
 *     The legacy default stream (0 / cudaStreamLegacy) waits for all blocking
 *     streams and all blocking streams wait for it; cudaStreamNonBlocking
 *     streams do not. _ptds/_ptsz entry points (and cudaStreamPerThread) use
 *     a per-thread default stream, an ordinary blocking stream.
 *   - Collectives (gpusimCollective, from the simulated libnccl.so.2) run
 *     on a communication engine of their own, in stream order, and cost
 *     GPUSIM_NCCL_LATENCY_US + bus bytes / GPUSIM_NCCL_GBPS.
 *   - Kernel cost: the per-function cost set with gpusimSetKernelCost(), else
 *     GPUSIM_KERNEL_BASE_US + blocks * GPUSIM_NS_PER_BLOCK.
 *   - Copy cost: GPUSIM_COPY_LATENCY_US + bytes / bandwidth, the bandwidth
 *     being pinned or pageable by the host side's range (cudaMallocHost,
 *     cudaHostAlloc and cudaHostRegister ranges are pinned; everything else
 *     is pageable). D2D copies use GPUSIM_D2D_GBPS, memsets GPUSIM_MEMSET_GBPS.
 *   - Host side: a kernel launch busy-spins GPUSIM_LAUNCH_US of the calling
 *     thread's CPU time (spin_oncpu_ns, no system call), then enqueues.
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
 * Environment: the GPUSIM_* variables, documented where they are read
 * (gpusim_model.c).
 *
 * Thread safety: one process-wide mutex around the model; it is never held
 * while a caller sleeps or spins.
 */
#ifndef GPUSIM_INT_H
#define GPUSIM_INT_H

#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include "thread_clock.h"

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
GPUSIM_API unsigned long long gpusimTimeline(unsigned long long first, unsigned long long *start_end,
					     unsigned long long max);
GPUSIM_API int gpusimCollective(cudaStream_t stream, double bus_bytes);
GPUSIM_API unsigned long long gpusimCommTimeline(unsigned long long first, unsigned long long *start_end,
						 unsigned long long max);

/* ---- Internals --------------------------------------------------------- *
 * Hidden on the declarations too, not only by -fvisibility=hidden on the
 * definitions: the compiler then knows a shared name resolves inside the
 * library and reaches it directly rather than through the GOT. */
#pragma GCC visibility push(hidden)

#define NSEC 1000000000ull
#define GPUSIM_MAX_COMPUTE 8
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

/* One item the device ran: its device start and end, and whether it was a collective. */
struct timeline_item {
	uint64_t start, end;
	int comm;
};

struct vec {
	void *v;
	size_t n, cap, elt;
};

/* The whole model, one instance, behind one lock (see "Thread safety"). */
struct gpusim_state {
	pthread_mutex_t lock;
	pthread_once_t once;
	/* parameters */
	double pinned_bpns, pageable_bpns, d2d_bpns, memset_bpns; /* bytes per ns */
	uint64_t copy_latency_ns, launch_ns, ns_per_block, kernel_base_ns;
	uint64_t timerslack_ns;
	int copy_data;
	/* device */
	uint64_t compute_ready[GPUSIM_MAX_COMPUTE], h2d_ready, d2h_ready, comm_ready;
	double comm_bpns;              /* GPUSIM_NCCL_GBPS: bus bandwidth of collectives */
	uint64_t comm_latency_ns, comm_launch_ns;
	unsigned compute_engines;      /* GPUSIM_COMPUTE_ENGINES: kernels that may run at once */
	int timeline_on;               /* gpusimTimeline was called: every item is kept */
	struct vec timeline;           /* struct timeline_item, in scheduling order */
	/* struct timeline_item: each host wait that slept, from when the model said it was done to when
	 * the waiting thread ran again (a timer wakes it late: an interrupt's latency, a halted vCPU) */
	struct vec wakes;
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
};

extern struct gpusim_state S;

enum engine { ENG_COMPUTE, ENG_H2D, ENG_D2H, ENG_COMM, ENG_NONE };

/* gpusim_model.c */
void init_once(void);
void *vec_push(struct vec *v);
void vec_del(struct vec *v, size_t i);
void sleep_until(uint64_t t);
void spin_cpu(uint64_t ns);
uint64_t stream_dep(struct CUstream_st *s);
uint64_t schedule(struct CUstream_st *s, enum engine e, uint64_t cost, uint64_t now);
uint64_t device_idle_at(void);

/* gpusim_streams.c */
struct CUstream_st *stream_get(cudaStream_t h, int ptds);
struct CUstream_st *lock_stream(cudaStream_t h, int ptds);
cudaError_t stream_sync(cudaStream_t hs, int ptds);
cudaError_t stream_query(cudaStream_t hs, int ptds);
cudaError_t event_record(cudaEvent_t he, cudaStream_t hs, int ptds);
cudaError_t stream_wait_event(cudaStream_t hs, cudaEvent_t he, unsigned int flags, int ptds);

/* gpusim_memory.c */
int is_dev(const void *p);
int dev_range_ok(const void *p, size_t n);
int is_pinned(const void *p, size_t n);

/* gpusim_copy.c */
void flush_pending(void);
cudaError_t do_copy(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
		    size_t height, enum cudaMemcpyKind kind, cudaStream_t hs, int ptds, int sync);
cudaError_t do_memset(void *p, int value, size_t count, cudaStream_t hs, int ptds);

/* gpusim_kernels.c */
cudaError_t do_launch(const void *func, dim3 grid, dim3 block, cudaStream_t hs, int ptds);

/* gpusim_errors.c: the per-thread last error (sticky until read). */
extern _Thread_local cudaError_t t_last_error;

/* Inline: on every call's path, and each is a line or two (now_ns: thread_clock.h). */
static inline uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* Every failing call returns through here so cudaGetLastError sees it.
 * Inline on purpose: called out of line, GCC shrink-wraps the entry points
 * that can fail early, so they no longer begin with push %rbp, the
 * instruction uprobes emulate rather than single-step (GPUSIM_LIB_FLAGS in
 * gpusim.mk). */
static inline cudaError_t ret(cudaError_t e)
{
	if (e != cudaSuccess)
		t_last_error = e;
	return e;
}

static inline void lock(void)
{
	pthread_once(&S.once, init_once);
	pthread_mutex_lock(&S.lock);
}

static inline void unlock(void)
{
	pthread_mutex_unlock(&S.lock);
}

#pragma GCC visibility pop

#endif /* GPUSIM_INT_H */
