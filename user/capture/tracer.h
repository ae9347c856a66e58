/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The BPF side's life cycle: open, feature choice, load, attach, traced set, detach. */
#ifndef DLBPF_TRACER_H
#define DLBPF_TRACER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "capture/env.h"
#include "capture/sysevents.h"
#include "capture/uprobes.h"
#include "dlbpf/events.h"
#include "util.h"

struct dl_maps;   /* capture/procfs.h: a snapshot of a process's mappings */

struct dlbpf;
struct bpf_link;

#define DL_API_SLOTS 160      /* >= DL_API_COUNT (checked in tracer.c) */

/* Probe offsets and cookies of one uprobe_multi link. */
struct dl_probe_set {
	unsigned long off[DL_API_SLOTS];
	uint64_t cookie[DL_API_SLOTS];
	size_t n;
};

/*
 * Link slots, in attach order (detached in the reverse order). A return probe
 * attached before its entry probe (and detached after it) can only miss calls,
 * never leave an entered call with no return to pop it off the in-flight
 * stack: such a frame stays under every later call made at the same stack
 * depth (a training loop's), which then all count as nested calls, not copies
 * or launches. The copy and "other entry-only" slots are used with --duty only
 * (launches and copies are then on links of their own).
 */
enum { DL_LINK_LAUNCH, DL_LINK_RETURN, DL_LINK_ENTER, DL_LINK_COPY_RETURN, DL_LINK_COPY_ENTER,
       DL_LINK_ENTRY_OTHER, DL_LINK_MAX };
_Static_assert(DL_LINK_RETURN < DL_LINK_ENTER && DL_LINK_COPY_RETURN < DL_LINK_COPY_ENTER,
	       "a return link is attached before its entry link");

/* The classes of hot probes --duty and --overhead-budget turn on and off. */
enum { DL_HOT_LAUNCH, DL_HOT_COPY, DL_HOT_CLASSES };

/* One CUDA runtime, driver or C library (dlopen) attached in one process. */
struct dl_cuda_attach {
	/*
	 * 0: the probes of a file, following it into every process that maps it (file probes);
	 * each traced process that maps it then has an entry of its own with no links and no fd.
	 */
	pid_t pid;
	int kind;                 /* enum dl_lib_kind */
	bool seen;                /* still mapped at the last scan */
	bool fresh;               /* attached by the last scan of its process, not yet told (dl_tracer_take_fresh) */
	uint64_t dev, inode;
	char path[4096];          /* as the process maps it */
	int fd;                   /* the file, opened inside the process's root (capture/tfile.h): links name it by fd */
	struct dl_plink *links[DL_LINK_MAX];
	int nsyms;
	/* --duty: the hot probes (launches, copies), attached and detached by dl_tracer_set_hot */
	struct dl_probe_set *hot_launch, *hot_copy;
};

/* A file, as its mappings name it. */
struct dl_file_id {
	uint64_t dev, inode;
};

struct dl_refused_file {
	pid_t pid;
	uint64_t dev, inode;
	int kind;                 /* enum dl_lib_kind: a CUDA library is reported (dl_tracer_take_refused) */
	int err;                  /* -errno */
	bool told;
	char path[DL_PATH_LEN];
};

/* Opaque: its fields are tracer.c's, tracer_hot.c's and tracer_maps.c's (capture/tracer_int.h). */
struct dl_tracer;

struct dl_tracer *dl_tracer_new(void);
/* Detaches, unloads and frees; NULL is fine. */
void dl_tracer_free(struct dl_tracer *t);
/* The programs are loaded (dl_tracer_open_load succeeded). */
bool dl_tracer_loaded(const struct dl_tracer *t);
/* The skeleton, for the programs attached outside the tracer (calibration, --step-on, the budget's costs). */
struct dlbpf *dl_tracer_skel(const struct dl_tracer *t);
/* What the kernel offers (after dl_tracer_open_load). */
const struct dl_features *dl_tracer_features(const struct dl_tracer *t);
/* --stacks: syncs and synchronous copies record their callers' stack (before the first scan). */
void dl_tracer_set_stacks(struct dl_tracer *t, bool on);
/* The files programs are loaded (dl_files_choose): working directories are worth keeping. */
bool dl_tracer_files(const struct dl_tracer *t);
/* Wall time the last dl_tracer_detach took. */
uint64_t dl_tracer_last_detach_ns(const struct dl_tracer *t);
/* What the files source runs on: enum dl_files_mech (capture/files.h). */
int dl_tracer_files_mech(const struct dl_tracer *t);


/* agg_mode: CUDA calls are aggregated in the kernel (bpf/agg.bpf.h), no records; files: load bpf/files.bpf.c. */
int dl_tracer_open_load(struct dl_tracer *t, unsigned ringbuf_mb, bool agg_mode, bool files, bool net);
/* Before the first scan: put launches and copies on links of their own, for --duty. */
void dl_tracer_split_hot(struct dl_tracer *t);
/*
 * Attaches (on) or detaches (off) the hot links of every runtime; returns the
 * first error. The entry probes of class c changed state within [e->lo[c], e->hi[c]].
 */
struct dl_hot_edges {
	uint64_t lo[DL_HOT_CLASSES], hi[DL_HOT_CLASSES];
};
int dl_tracer_set_hot(struct dl_tracer *t, bool on, struct dl_hot_edges *e);
/* The same for one class only (--overhead-budget turns launches alone on and off); edges in e->lo[c], e->hi[c]. */
int dl_tracer_set_hot_class(struct dl_tracer *t, int c, bool on, struct dl_hot_edges *e);
int dl_tracer_agg_fd(const struct dl_tracer *t);
/* BPF map py_procs: the CPython layout of each traced process that runs one (capture/pycode.h). */
int dl_tracer_py_fd(const struct dl_tracer *t);
/* Why the loaded CUDA programs walk no Python frames on this kernel; NULL when they do. */
const char *dl_tracer_py_no_walk(const struct dl_tracer *t);
/* Starts the Python lines of waits and CPU time (capture/pylines.h): at the first CPython process (a dl_pyprocs hook). */
void dl_tracer_pylines_start(void *tracer);
/* BPF's flag that py_procs may hold an entry (dl_pyprocs.bpf_known). */
volatile uint32_t *dl_tracer_py_known(struct dl_tracer *t);
/*
 * After an exec the dynamic linker holds the process again at each change of
 * its link map (bpf/cuda.bpf.c, exec_pending), until this finds the C library
 * attached in it: then every library it was linked with is mapped and traced.
 */
void dl_tracer_exec_settled(struct dl_tracer *t, pid_t pid);
/* The processes the dlopen hold stopped and nobody continued yet: pid -> time of the stop (bpf/cuda.bpf.c). */
int dl_tracer_held_fd(const struct dl_tracer *t);
/* Attaches every program but the CUDA uprobes (dl_tracer_scan_cuda) and --step-on's (marker.c). */
int dl_tracer_attach_auto(struct dl_tracer *t);
/* Adds a process to the traced set (the kernel adds its future children). */
int dl_tracer_trace_pid(struct dl_tracer *t, pid_t pid, pid_t ppid);
/*
 * Attaches to every CUDA runtime mapped by pid not attached yet; returns how
 * many were newly attached, or -errno when the process cannot be read.
 */
int dl_tracer_scan_cuda(struct dl_tracer *t, pid_t pid, const struct dl_maps *maps);
/*
 * Calls fn for each CUDA runtime, driver or NCCL of pid that is mapped but
 * could not be read or probed, once: the report says why it has no calls.
 */
void dl_tracer_take_refused(struct dl_tracer *t, pid_t pid,
			    void (*fn)(pid_t pid, const char *path, int err, void *ctx), void *ctx);
/* Calls fn for each attachment of pid the scans made since the last call (loaders included). */
void dl_tracer_take_fresh(struct dl_tracer *t, pid_t pid, void (*fn)(const struct dl_cuda_attach *a, void *ctx),
			  void *ctx);
/* Traces every process that execs with this name from now on (BPF side). */
int dl_tracer_watch_comm(struct dl_tracer *t, const char *comm);
/* True when pid maps a CUDA runtime or driver (by name, or a runtime linked into a file). */
bool dl_tracer_maps_cuda(struct dl_tracer *t, pid_t pid);
/* CUDA runtimes and drivers attached in pid (the C library's loader not counted). */
int dl_tracer_cuda_count(const struct dl_tracer *t, pid_t pid);
/* Forgets the attachments of a process that exited. */
void dl_tracer_forget_pid(struct dl_tracer *t, pid_t pid);
/*
 * child was forked by parent and not held (probes that follow the file): it maps what its parent
 * maps, which it is told as fresh (dl_tracer_take_fresh) without a read of its mappings. Returns
 * how many files; 0 where probes are per process (a child is held and scanned instead).
 */
int dl_tracer_inherit(struct dl_tracer *t, pid_t child, pid_t parent);
int dl_tracer_ringbuf_fd(const struct dl_tracer *t);
/*
 * Around the consumer's wait for records: while it is awake, BPF sends it no
 * forced wake-up (bpf/common.bpf.h, dl_submit). After load.
 */
void dl_tracer_consumer_sleeps(struct dl_tracer *t, bool asleep);
/* Unread bytes past which BPF wakes a sleeping consumer. */
uint64_t dl_tracer_wakeup_bytes(const struct dl_tracer *t);
/* Sums the per-CPU drop counters. */
int dl_tracer_read_drops(const struct dl_tracer *t, uint64_t out[DL_DROP_MAX]);
/*
 * Switch-ins of traced threads that no program saw (the programs do not run in
 * some tasks' context), each rebuilt from the scheduler's run-time accounting
 * once the thread was next seen on a CPU.
 */
uint64_t dl_tracer_missed_switch_ins(const struct dl_tracer *t);
/*
 * Runs of dlbpf's programs the kernel's recursion guard skipped (a program's
 * tracepoint fired while it ran on that CPU): calls fn, if given, for each
 * program with any, and returns the total.
 */
uint64_t dl_tracer_recursion_misses(const struct dl_tracer *t,
				    void (*fn)(const char *prog, uint64_t misses, void *ctx), void *ctx);
struct dl_rq_start;
/* Calls fn for each block request left in the BPF side's table: started, no completion seen. */
void dl_tracer_unfinished_requests(const struct dl_tracer *t, void (*fn)(const struct dl_rq_start *rq, void *ctx),
				   void *ctx);
/* Removes every probe: nothing more is produced, the maps stay readable. */
void dl_tracer_detach(struct dl_tracer *t);
void dl_tracer_destroy(struct dl_tracer *t);

#endif
