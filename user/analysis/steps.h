/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Steps: what the correlator produces. A step is the interval between two
 * consecutive step markers on a process's main thread; each nanosecond of it
 * is given to exactly one category (doc/manual.md's "The breakdown" lists them by priority).
 */
#ifndef DLBPF_STEPS_H
#define DLBPF_STEPS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* In priority order: an instant in several goes to the first. */
enum dl_cat {
	DL_CAT_GPU_WAIT,
	DL_CAT_COMM_WAIT,     /* the same as gpu_wait, the work waited for last being NCCL collectives */
	DL_CAT_H2D,
	DL_CAT_D2H,
	DL_CAT_LAUNCH,
	DL_CAT_CUDA_OTHER,
	DL_CAT_IO_WAIT,
	DL_CAT_INPUT_WAIT,
	DL_CAT_RUNQ,
	DL_CAT_CPU,
	DL_CAT_COUNT,
};

enum dl_verdict {
	DL_V_GPU,          /* gpu-bound: healthy, the host waits on the device */
	DL_V_COMM,         /* comm-bound: comm_wait, the host waits on communication */
	DL_V_INPUT,        /* input-bound: io_wait + input_wait */
	DL_V_COPY,         /* copy-bound: h2d + d2h */
	DL_V_LAUNCH,       /* launch-bound */
	DL_V_HOST,         /* host-compute-bound: cpu + cuda_other */
	DL_V_CONTENTION,   /* cpu-contention: runq */
	DL_V_COUNT,
};

/*
 * The step's GPU-idle time (the step less the busy upper bound: every queue
 * known empty), by what the main thread was doing meanwhile. Each idle
 * nanosecond goes to the first that holds: inside a blocking CUDA call (a sync
 * or synchronous copy that had nothing left to wait for) is sync_overhead;
 * inside any other CUDA call, host_wait; blocked outside CUDA calls (the
 * breakdown's io_wait and input_wait), input; anything else (cpu, runq,
 * unknown), host_wait. The three sum to dur_ns - gpu_busy_hi_ns exactly.
 */
enum dl_idle {
	DL_IDLE_HOST,
	DL_IDLE_INPUT,
	DL_IDLE_SYNC,
	DL_IDLE_COUNT,
};

/* What the step's device timeline looked like, for sinks that draw it (the Perfetto trace). */
enum dl_gpu_span_kind {
	DL_GS_BUSY,              /* on stream: work was certainly running (a host thread blocked on it) */
	DL_GS_MAYBE,             /* on stream: work may have been queued (inside the upper bound only) */
	DL_GS_IDLE,              /* every queue known empty; idle: enum dl_idle */
	DL_GS_ENQUEUE,           /* on stream, start == end: thread tid's call there enqueued work (opened a span, or joined one) */
};

struct dl_gpu_span {
	uint64_t start, end;
	uint64_t stream;         /* but DL_GS_IDLE: the model's stream key (analysis/devqueue.h) */
	uint32_t tid;            /* DL_GS_ENQUEUE */
	uint8_t kind, idle;
};

enum dl_severity { DL_SEV_NONE, DL_SEV_LOW, DL_SEV_MODERATE, DL_SEV_HIGH };

/* A call site's share of a step (analysis/callsites.h): the sites with the most time are kept. */
#define DL_STEP_TOP_SITES 3

struct dl_step_site {
	uint64_t key;              /* the process's call site (struct dl_site_stat) */
	uint64_t calls;            /* its outermost calls that started in the step */
	uint64_t ns;               /* the sum of cat_ns */
	uint64_t cat_ns[DL_CAT_COUNT];
};

/* The step's input lineage (analysis/lineage.h): who ended its input waits, what that producer did. */
#define DL_LIN_FILES 4            /* files listed per step, most bytes first */
#define DL_LIN_ENDPOINTS 2        /* network endpoints listed per step, most time waited first */
#define DL_LIN_EP_NAME 64         /* an endpoint's name, as analysis/net.h writes it (DL_NET_NAME_LEN) */

/* A network endpoint the producer's process received from in the window (socket receives, analysis/net.h). */
struct dl_lin_endpoint {
	char name[DL_LIN_EP_NAME];    /* "tcp 10.0.0.5:443" */
	uint64_t bytes, recvs;        /* receives that returned in the window */
	uint64_t wait_ns;             /* the producer thread's time blocked (S or D) in its receives from it, in the window */
};

struct dl_lin_file {
	const char *path;             /* the lineage store's copy: valid while the store lives */
	uint64_t read_bytes, reads;
	uint64_t disk_bytes;          /* submitted to block devices from inside those reads */
	uint64_t fault_bytes;         /* read from block devices by page faults of the process's mappings of it */
};

/* One hop up the input chain: who ended the producer's (or the previous hop's) own waits, and what it did. */
#define DL_LIN_HOPS 2             /* hops past the producer: the chain is up to 3 tasks long */

struct dl_lin_hop {
	uint32_t pid, tid;            /* the thread that did the work (tid) */
	uint32_t waker_tid;           /* the thread of pid whose wake-up handed it on (a feeder): tid, or a relay of it */
	uint64_t ended_ns;            /* the downstream task's blocked time in its window this hop's wake-ups ended */
	bool traced;                  /* its activity below is known */
	uint64_t since_ns, handoff_ns;
	uint64_t oncpu_ns, io_wait_ns, runq_ns, other_wait_ns, idle_ns;
	uint64_t read_bytes, reads, disk_bytes;
	uint64_t fault_bytes;         /* its process's block reads into mapped files, outside read calls */
};

struct dl_step_lineage {
	uint64_t wait_ns;             /* the main thread blocked outside CUDA calls in the step */
	uint32_t waits;               /* blocked intervals that made it */
	bool woken;                   /* an edge ended some of it: waker_* hold its waker */
	uint32_t waker_pid, waker_tid, waker_ctx;   /* waker_ctx: enum dl_wake_ctx; pid and tid 0 if not a task */
	uint64_t woken_wait_ns;       /* the part of wait_ns this waker's wake-ups ended */
	bool producer;                /* the waker is a traced task: its activity below is known */
	/*
	 * The thread that did the work: the waker, or the busiest thread of the
	 * waker's process that handed the batch to it (a worker's main thread
	 * behind its queue's feeder thread).
	 */
	uint32_t producer_tid;
	bool after_handoff;           /* since_ns is its previous hand-off (else the first of it kept) */
	uint64_t since_ns, handoff_ns;
	uint64_t oncpu_ns, io_wait_ns, runq_ns, other_wait_ns;   /* io_wait: in D with the tree's reads in flight */
	uint64_t idle_ns;             /* of the window, blocked until the consumer's process handed it work: none of the above */
	uint64_t read_bytes, reads;   /* the read calls of the producer's process in the window (its other threads too) */
	uint64_t disk_bytes;          /* what those reads submitted to block devices */
	uint64_t fault_bytes;         /* its process's block reads outside read calls, into files it maps (page faults) */
	uint64_t net_bytes, net_recvs;  /* its process's socket receives that returned in the window (as its reads) */
	uint64_t net_wait_ns;           /* the producer thread's time blocked in its own receives in the window */
	uint32_t nendpoints;
	struct dl_lin_endpoint endpoints[DL_LIN_ENDPOINTS];
	uint32_t nfiles;
	struct dl_lin_file files[DL_LIN_FILES];
	uint32_t nchain;
	struct dl_lin_hop chain[DL_LIN_HOPS];
};

#define DL_STEP_DEVICES 8   /* devices whose bounds a step holds (more are in the union only) */

struct dl_step {
	uint32_t index;            /* 0-based, per process */
	pid_t pid, tid;            /* the process and its main thread */
	uint64_t start_ns, dur_ns; /* CLOCK_MONOTONIC */
	uint64_t cat_ns[DL_CAT_COUNT];   /* sums to dur_ns exactly */
	/* the whole traced tree during the step */
	uint64_t io_read_bytes, io_read_ops, io_ns, workers_cpu_ns;
	/* the main thread's CUDA work in the step */
	uint64_t h2d_bytes, d2h_bytes, h2d_copies, d2h_copies;
	uint64_t small_copies, pageable_copies, kernels;
	uint64_t graph_launches, graph_kernels;   /* CUDA graphs launched in the step, and the kernels they hold */
	uint64_t collectives, comm_bytes;   /* NCCL calls that started in the step, and their bytes (count x type) */
	uint64_t comm_after_compute_ns;     /* the part of comm_wait behind kernels enqueued before the collective */
	uint64_t wakeup_runq_ns;   /* the part of runq right after a wake-up from blocking */
	/* inferred by the device-queue model (analysis/devqueue.h): the truth lies between */
	uint64_t gpu_busy_lo_ns, gpu_busy_hi_ns;
	/* each device's bounds, when the process used more than one (the above are their union) */
	uint32_t ndevices;
	uint64_t dev_busy_lo_ns[DL_STEP_DEVICES], dev_busy_hi_ns[DL_STEP_DEVICES];
	uint64_t gpu_idle_ns[DL_IDLE_COUNT];   /* sums to dur_ns - gpu_busy_hi_ns exactly */
	/*
	 * The device timeline inside the step, sorted by start: per stream,
	 * disjoint; idle spans disjoint from every busy one. Valid only while the
	 * step is handed on (dl_corr_take_steps); NULL in the steps kept.
	 */
	const struct dl_gpu_span *gpu_spans;
	uint32_t ngpu_spans;
	enum dl_verdict verdict;
	double share;              /* of the verdict's categories in the step */
	bool partial;              /* --overhead-budget: launches were not probed all through it (duration only) */
	uint64_t first_event;      /* stream position of the marker; for sinks that link */
	uint32_t nsites;           /* of top_sites */
	struct dl_step_site top_sites[DL_STEP_TOP_SITES];   /* most time first */
	struct dl_step_lineage input;
};

const char *dl_cat_name(enum dl_cat c);
/* A category only CUDA calls fill (the GPU's waits, copies, launches): zero in a job without CUDA. */
static inline bool dl_cat_gpu(enum dl_cat c)
{
	return c <= DL_CAT_CUDA_OTHER;
}
const char *dl_verdict_name(enum dl_verdict v);
const char *dl_severity_name(enum dl_severity s);
const char *dl_idle_name(enum dl_idle i);

/* Time of a step's categories that make up a verdict. */
uint64_t dl_verdict_ns(const uint64_t cat_ns[DL_CAT_COUNT], enum dl_verdict v);
/* The verdict whose categories take the most time, and their share. */
enum dl_verdict dl_verdict_of(const uint64_t cat_ns[DL_CAT_COUNT], double *share);
enum dl_severity dl_severity_of(enum dl_verdict v, double share);
/* part as a percentage of total; 0 of a total of 0. */
double dl_pct(uint64_t part, uint64_t total);

typedef void (*dl_step_fn)(void *ctx, const struct dl_step *step);

#endif
