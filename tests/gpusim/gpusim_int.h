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
 *   gpusim_device.c   devices: count, the current one per thread, flags
 *                     (how the host waits), properties, versions, peer copies
 *   gpusim_graph.c    stream capture, graphs built node by node, their
 *                     instantiation and launch
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
 *   - GPUSIM_DEVICES devices (default 1), each with its own engines, legacy
 *     default stream and wait mode; a thread's current device (cudaSetDevice)
 *     names the device of the streams it creates and of its legacy stream.
 *   - Each device has three engines: compute (kernels, memsets, D2D copies),
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
 *     (stream, device, event) and every blocking wait wait as the device's
 *     flags say (cudaSetDeviceFlags, GPUSIM_SCHEDULE): spin on the clock
 *     (cudaDeviceScheduleSpin, and Auto while there are no more devices
 *     than CPUs, as the real runtime decides), yield the CPU between polls
 *     (Yield), or sleep with clock_nanosleep(TIMER_ABSTIME) so the scheduler
 *     sees the thread blocked (BlockingSync, and events created with
 *     cudaEventBlockingSync).
 *   - Graphs: work issued to a capturing stream is recorded as nodes, not
 *     run; a graph launch runs its nodes on the stream, each after the ones
 *     it depends on.
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
GPUSIM_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
GPUSIM_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
GPUSIM_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph);
GPUSIM_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus);
GPUSIM_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
GPUSIM_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);

/* Simulator extras (version node GPUSIM_1). Found by workloads with dlsym so
 * the same binary also runs on the real library. */
GPUSIM_API int gpusimSetKernelCost(const void *func, unsigned long long ns);
GPUSIM_API int gpusimIsDevicePointer(const void *ptr);
GPUSIM_API unsigned long long gpusimDeviceNow(void);
GPUSIM_API unsigned long long gpusimDeviceIdleAt(void);
GPUSIM_API unsigned long long gpusimTimeline(unsigned long long first, unsigned long long *start_end,
					     unsigned long long max);
GPUSIM_API unsigned long long gpusimTimelineDevices(unsigned long long first, int *dev, unsigned long long max);
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
#define GRAPH_MAGIC 0x47524150U  /* "GRAP" */
#define EXEC_MAGIC 0x47455843U   /* "GEXC" */
#define GPUSIM_MAX_DEVICES 8
/* cudaDeviceGetStreamPriorityRange: the range recent devices report. */
#define PRIORITY_LEAST 0
#define PRIORITY_GREATEST (-5)

struct vec {
	void *v;
	size_t n, cap, elt;
};

struct CUstream_st {
	uint32_t magic;
	unsigned int flags;   /* cudaStreamNonBlocking */
	int legacy;           /* the legacy default stream */
	int dev;              /* the device current when it was created */
	int priority;         /* cudaStreamCreateWithPriority; orders nothing here (see README) */
	uint64_t ready;       /* end of the last item */
	/* capture: the graph work issued to it goes to, or NULL */
	struct CUgraph_st *capture;
	enum cudaStreamCaptureMode capture_mode;
	int capture_invalid;  /* an unsafe call broke the capture: cudaStreamEndCapture fails */
	pthread_t capture_thread;
	long capture_last;    /* the node the next captured one depends on, -1 for none */
	/*
	 * A capture forked into this stream (cudaStreamWaitEvent on an event recorded in a capture):
	 * the stream whose cudaStreamEndCapture ends it (itself for the stream that began it); a
	 * second node the next captured one depends on (a join, -1 for none); whether the origin
	 * waited on this stream's latest captured work (rejoined: the capture may end).
	 */
	struct CUstream_st *capture_origin;
	long capture_join;
	int capture_rejoined;
	struct CUstream_st *next;
};

/* One node of a graph: what it runs on the device when the graph is launched. */
struct graph_node {
	enum { NODE_KERNEL, NODE_MEMSET, NODE_COPY } kind;
	int engine;           /* enum engine */
	uint64_t cost;        /* memsets and copies; a kernel's is found at each launch */
	const void *func;     /* kernels */
	dim3 grid;
	size_t ndeps;
	long deps[8];         /* indexes of the nodes it waits for (at most 8 kept; more is refused) */
	/* memsets and copies: the bytes they move at each launch */
	char *dst;
	const char *src;
	size_t dpitch, spitch, width, height;
	int value;
	int async_pinned;     /* copies: deferred to the host's next synchronisation */
};

struct CUgraph_st {
	uint32_t magic;
	struct vec nodes;     /* struct graph_node */
	struct vec handles;   /* struct CUgraphNode_st *, one a node, the same order */
};

/* A node's handle (cudaGraphNode_t): its graph and index there. */
struct CUgraphNode_st {
	struct CUgraph_st *graph;
	size_t index;
};

struct CUgraphExec_st {
	uint32_t magic;
	struct vec nodes;     /* the graph's nodes when it was instantiated */
};

struct CUevent_st {
	uint32_t magic;
	unsigned int flags;   /* cudaEventDisableTiming ... */
	int recorded;
	uint64_t ts;          /* completion time of the recorded point */
	/* recorded in a capture: its graph, the node it follows (-1: none), the stream recorded on */
	struct CUgraph_st *cap_graph;
	long cap_node;
	struct CUstream_st *cap_stream;
	struct CUevent_st *next;
};

struct range {
	uintptr_t base;
	size_t size;
	int owned;            /* 1: allocated by us (cudaMallocHost/HostAlloc) */
	int live;             /* device blocks: 0 = free for reuse */
	size_t req;           /* device blocks: size asked for (bounds checks) */
	int dev;              /* device blocks: the device they were allocated on */
};

struct pending_copy {
	char *dst;
	const char *src;
	size_t dpitch, spitch, width, height;
	uint64_t end;
};

/* One item a device ran: its device start and end, whether it was a collective, and the device. */
struct timeline_item {
	uint64_t start, end;
	int comm;
	int dev;
};

/* One device: its engines, its legacy default stream and how a host thread waits for it. */
struct gpusim_dev {
	uint64_t compute_ready[GPUSIM_MAX_COMPUTE], h2d_ready, d2h_ready, comm_ready;
	struct CUstream_st legacy;
	unsigned int flags;   /* cudaSetDeviceFlags: cudaDeviceSchedule* and the rest as given */
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
	/* devices */
	struct gpusim_dev dev[GPUSIM_MAX_DEVICES];
	int ndev;                      /* GPUSIM_DEVICES */
	double peer_bpns;              /* GPUSIM_PEER_GBPS: cudaMemcpyPeer bandwidth */
	unsigned long long peer_copies;   /* peer copies done, of either API (gpusimPeerCopies) */
	int ncpus;                     /* online CPUs: cudaDeviceScheduleAuto spins while ndev <= ncpus */
	double comm_bpns;              /* GPUSIM_NCCL_GBPS: bus bandwidth of collectives */
	uint64_t comm_latency_ns, comm_launch_ns;
	unsigned compute_engines;      /* GPUSIM_COMPUTE_ENGINES: kernels that may run at once */
	int timeline_on;               /* gpusimTimeline was called: every item is kept */
	struct vec timeline;           /* struct timeline_item, in scheduling order */
	/* struct timeline_item: each host wait that slept, from when the model said it was done to when
	 * the waiting thread ran again (a timer wakes it late: an interrupt's latency, a halted vCPU) */
	struct vec wakes;
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

/* How a host thread waits for the device (cudaDeviceSchedule*, resolved). */
enum wait_mode { WAIT_SPIN, WAIT_YIELD, WAIT_BLOCK };

/* The calling thread's current device (cudaSetDevice), 0 until it sets one. */
extern _Thread_local int t_device;

/* gpusim_model.c */
void init_once(void);
void *vec_push(struct vec *v);
void vec_del(struct vec *v, size_t i);
enum wait_mode wait_mode_of(int dev);
void wait_until(uint64_t t, enum wait_mode how);
void note_late(uint64_t t, uint64_t since);
/* Waits for the current device's point t the way its flags say. */
void sleep_until(uint64_t t);
void spin_cpu(uint64_t ns);
uint64_t stream_dep(struct CUstream_st *s);
uint64_t schedule(struct CUstream_st *s, enum engine e, uint64_t cost, uint64_t now);
/* The same, starting no earlier than after, in place of the stream's own ordering (a graph's nodes). */
uint64_t schedule_after(struct CUstream_st *s, enum engine e, uint64_t cost, uint64_t now, uint64_t after);
/* A peer copy's item on device dev, from start to end (it occupies that device's copy engine e). */
void timeline_add(int dev, uint64_t start, uint64_t end, int comm);
uint64_t device_idle_at(int dev);

/* gpusim_streams.c */
struct CUstream_st *stream_get(cudaStream_t h, int ptds);
/*
 * Under the lock: whether a potentially unsafe call (one that may synchronise
 * implicitly) is prohibited on this thread by a capture under way, as
 * cudaThreadExchangeStreamCaptureMode describes; such a call fails with
 * cudaErrorStreamCaptureUnsupported and invalidates those captures.
 */
int capture_forbids_unsafe(void);
/* Under the lock: work for the legacy stream s while a blocking stream of its device captures. */
int capture_breaks_legacy(struct CUstream_st *s);
struct CUstream_st *lock_stream(cudaStream_t h, int ptds);
cudaError_t stream_sync(cudaStream_t hs, int ptds);
/* The end of every synchronising call: wait (without the lock) until t, then make the deferred copies. */
void sync_until(uint64_t t, enum wait_mode how, uint64_t since);
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
uint64_t memset_cost(size_t count);
void node_move_bytes(const struct graph_node *n, uint64_t end);

/* gpusim_kernels.c */
cudaError_t do_launch(const void *func, dim3 grid, dim3 block, cudaStream_t hs, int ptds);
uint64_t kernel_cost(const void *func, dim3 grid);

/* gpusim_memory.c */
cudaError_t dev_alloc(void **devPtr, size_t size, int dev);
cudaError_t dev_free(void *devPtr);

/* gpusim_graph.c: under the lock, a node captured on s (which is capturing) */
cudaError_t capture_node(struct CUstream_st *s, const struct graph_node *n);
cudaError_t graph_launch(cudaGraphExec_t exec, cudaStream_t hs, int ptds);
cudaError_t begin_capture(cudaStream_t hs, enum cudaStreamCaptureMode mode, int ptds);
/* gpusim_graph.c: under the lock, s waits on an event recorded in a capture (a fork or a join) */
cudaError_t capture_wait(struct CUstream_st *s, struct CUevent_st *e);
cudaError_t end_capture(cudaStream_t hs, cudaGraph_t *pGraph, int ptds);
cudaError_t is_capturing(cudaStream_t hs, enum cudaStreamCaptureStatus *status, int ptds);
cudaError_t malloc_async(void **devPtr, size_t size, cudaStream_t hs, int ptds);
cudaError_t free_async(void *devPtr, cudaStream_t hs, int ptds);

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
