/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Per-process aggregates of the event stream: the "processes" part of the
 * JSON summary and of the final report. Pure: fed records, no system access
 * (kernel names come through a callback).
 */
#ifndef DLBPF_SUMMARY_H
#define DLBPF_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "analysis/files.h"
#include "analysis/pylines.h"
#include "analysis/net.h"
#include "records/cuda_api.h"
#include "records/stream.h"
#include "dlbpf/events.h"
#include "util.h"

struct dl_api_stat {
	uint64_t count, total_ns, errors;
	uint64_t args_faults;   /* calls whose pointed-to arguments BPF could not read */
};

/*
 * Copy sizes by powers of 4 from 1 KiB: < 1 KiB, [1 KiB, 4 KiB), ... [16 MiB,
 * 64 MiB), >= 64 MiB. Four to a decade of bytes is coarse enough to read at a
 * glance and fine enough to tell a 4 KiB page copy from a batch.
 */
#define DL_COPY_SIZE_BUCKETS 10

struct dl_copy_stat {
	uint64_t count, bytes, total_ns, pageable, small;
	uint64_t sizes[DL_COPY_SIZE_BUCKETS];   /* per-call copies only: --summary counts carry no sizes */
	uint64_t pageable_bytes;   /* bytes of the pageable ones */
};

struct dl_kernel_stat {
	uint64_t func;
	uint32_t grid[3], block[3];
	uint64_t shmem;
	uint64_t count;
	char *name;
	bool unnamed;          /* name is the address: no symbol record yet */
	size_t same_func;      /* index + 1 of the previous stat of this func (another shape); 0 if none */
};

struct dl_graph_stat {
	uint64_t graph;        /* the cudaGraphExec_t / CUgraphExec launched */
	uint64_t count;
};

struct dl_proc {
	pid_t pid, ppid;
	pid_t nspid;           /* inside its pid namespace; 0 when unknown */
	struct dl_container container;   /* its container, pod, Slurm job (DL_EV_CGROUP; a fork's is its parent's) */
	char cuda_visible[DL_VISIBLE_LEN];   /* its CUDA_VISIBLE_DEVICES (DL_EV_ENV; a fork's is its parent's); "": not set */
	char comm[DL_COMM_LEN];
	bool seen_start;       /* forked while traced (else: already running at attach) */
	bool exited;
	int exit_code;
	uint64_t exit_ts;
	/*
	 * Threads: those it had when tracing of it began (or 1, forked while
	 * traced) plus every thread start since. In recordings that do not say
	 * how many it had, the distinct thread ids seen (tids wrap at pid_max).
	 */
	uint32_t threads;
	bool threads_known;    /* threads counts starts (else: distinct tids, kept in tids) */
	int cuda_libs;         /* distinct CUDA runtimes and drivers attached in this process (by path) */
	int unprobed;          /* CUDA libraries mapped but not probed, the first's path and errno */
	int unprobed_errno;
	char unprobed_path[256];
	struct dl_u64map lib_paths;    /* hashes of the paths counted in cuda_libs */
	uint64_t driver_inner; /* driver calls made inside runtime calls (not counted again) */
	struct dl_api_stat calls[DL_API_COUNT];
	struct dl_copy_stat copies[DL_DIR_COUNT];   /* by resolved direction: DL_DIR_DEFAULT stays 0 */
	/* Arrays grown with dl_grow: read by name elsewhere (duty.c, the tests). In order of first launch. */
	struct dl_kernel_stat *kernels;
	size_t nkernels, kcap;
	struct dl_u64map kernel_of;    /* func -> index + 1 of its latest stat */
	struct dl_graph_stat *graphs;
	size_t ngraphs, gcap;
	/*
	 * Bytes and requests as submitted by the process's tasks (what
	 * /proc/PID/io counts for reads), or as completed in recordings made
	 * before submissions were recorded. The rest is what the completions
	 * said: bytes completed (an error included), those with an error, and
	 * requests whose completion was not seen (DL_BIO_UNSEEN). write_meta_bytes
	 * is the part of write_bytes that was file system metadata (REQ_META),
	 * which /proc/PID/io's write_bytes leaves out.
	 */
	struct {
		uint64_t read_bytes, read_ops, write_bytes, write_ops, wait_ns;
		uint64_t done_bytes, done_ops, error_ops, error_bytes, unseen_ops, unseen_bytes, write_meta_bytes;
	} io;
	struct {
		uint64_t oncpu_ns, runq_ns, blocked_ns, sleep_ns, disk_ns, switches;
	} sched;
	struct dl_u64map tids; /* !threads_known: the set of threads seen (values unused) */
	struct dl_proc_files files;   /* reads by file (analysis/files.h) */
	struct dl_proc_net net;       /* socket receives by endpoint (analysis/net.h) */
};

struct dl_prog_miss {
	char name[DL_PROG_NAME_LEN];
	uint64_t misses;
};

/*
 * --overhead-budget: what the live controller (capture/budget.c) measured and
 * scaled, carried for the JSON's overhead_budget object. Shares are of the
 * traced job's CPU with dlbpf's cost taken out (what it would use untraced).
 */
#define DL_OVERHEAD_APIS 16
struct dl_overhead {
	double budget, achieved;       /* the cost set, and the cost measured over the run */
	double always_on, launches;    /* achieved, split: what stays on, and the launch probes */
	bool always_on_over;           /* always-on costs alone exceed the budget */
	double job_cpu_ns, cost_ns;
	double uprobe_ns, uretprobe_ns;    /* the kernel's trap, timed at start */
	double ns_per_launch;          /* trap plus the launch program's measured run time */
	double observed;               /* fraction of the time launches were probed */
	double launches_probed;        /* launch events the probes ran for */
	double slowdown;               /* median step with launches probed / without - 1 (0: not measured) */
	uint64_t steps_in, steps_out;  /* the steps that measured it */
	uint64_t windows;
	int napis;
	struct { uint16_t api; double seen, scaled, lo, hi; } apis[DL_OVERHEAD_APIS];
};

struct dl_summary {
	struct dl_proc *procs; /* grown with dl_grow; main.c and duty.c walk procs[0..n) */
	size_t n, cap;
	struct dl_u64map proc_of;   /* pid -> index in procs */
	uint64_t records[DL_EV_KIND_MAX];
	uint64_t unknown_records;     /* kinds or APIs newer than this build */
	uint64_t async_io_bytes, async_io_ops;   /* kernel-thread requests, not attributed (completions seen) */
	uint64_t async_io_unseen;     /* kernel-thread requests whose completion was not seen */
	uint64_t first_ts, last_ts;
	uint64_t start_ts, end_ts;    /* from DL_EV_TRACE_START / DL_EV_TRACE_END */
	uint32_t pcie_mbps;           /* from DL_EV_TRACE_START */
	uint64_t drops[DL_DROP_MAX];
	uint64_t drops_total;
	bool bio_submits;             /* DL_TRACE_BIO_SUBMITS: block bytes counted at submission */
	uint64_t recursion_misses;    /* program runs the kernel's recursion guard skipped */
	DL_VEC(struct dl_prog_miss) prog_misses;   /* from DL_EV_PROG, in the order they came */
	const struct dl_overhead *overhead;   /* --overhead-budget, live runs only; NULL otherwise */
	struct dl_pylines pylines;    /* Python lines of waits and CPU samples (DL_EV_PYSTACK) */
};

static inline bool dl_container_known(const struct dl_container *c)
{
	return c->id[0] || c->pod_uid[0] || c->slurm_job[0];
}

void dl_summary_init(struct dl_summary *s);
/*
 * When the trace ended: end, or the last exit when every process exited
 * after t0 and before end (a job that exited ended the trace then, not
 * when the collector noticed).
 */
uint64_t dl_summary_trace_end(const struct dl_summary *s, uint64_t t0, uint64_t end);
void dl_summary_free(struct dl_summary *s);
/*
 * The physical device (an index or a UUID, as listed) that ordinal dev of p
 * is, by its CUDA_VISIBLE_DEVICES, into out: true only when the variable is
 * a plain list (comma-separated indexes, or GPU-/MIG- UUIDs) that has that
 * many entries.
 */
bool dl_proc_visible_id(const struct dl_proc *p, uint32_t dev, char *out, size_t len);
/* Finds or adds a process. */
struct dl_proc *dl_summary_proc(struct dl_summary *s, pid_t pid);
struct dl_proc *dl_summary_find(const struct dl_summary *s, pid_t pid);
/*
 * The stats of a kernel launched with a shape, added (with *fresh set and no
 * name yet) at its first launch. --summary passes a zero shape.
 */
struct dl_kernel_stat *dl_proc_kernel(struct dl_proc *p, uint64_t func, const uint32_t grid[3],
				      const uint32_t block[3], uint64_t shmem, bool *fresh);
/* The sizes[] bucket of a copy of bytes, and the smallest size in bucket b. */
unsigned dl_copy_size_bucket(uint64_t bytes);
uint64_t dl_copy_size_bucket_floor(unsigned b);
/* A stream sink: counts one record. */
int dl_summary_sink(void *summary, const struct dl_rec *r);
uint64_t dl_summary_duration(const struct dl_summary *s);
/*
 * A launch through wrappers (pyenv shims, `bash -c`, env) traces each of them:
 * listed at length they bury the job. A bystander made no CUDA call, did no
 * disk I/O and ran under 1% of one CPU over the trace (a data-loader worker
 * that only decodes on the CPU is no bystander), and its parent was traced too
 * (what the user named, a pid or a command, never is). Reports fold them.
 */
bool dl_proc_bystander(const struct dl_summary *s, const struct dl_proc *p);
/*
 * Whether any traced process loaded a CUDA runtime (probed, or mapped but not
 * probed): without one the job has no GPU, and the reports say nothing of one
 * (no GPU busy or idle, no PCIe hop in the paper sketch, no GPU tracks).
 */
bool dl_summary_cuda_loaded(const struct dl_summary *s);
/* Records the kernel wrote (the collector's own excluded): what drops are a share of. */
uint64_t dl_summary_kernel_events(const struct dl_summary *s);

#endif
