/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The correlator's own state, shared by its tracking (correlate.c) and learning (correlate_learn.c) halves. */
#ifndef DLBPF_CORRELATE_INT_H
#define DLBPF_CORRELATE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analysis/correlate.h"
#include "analysis/breakdown.h"
#include "analysis/devqueue.h"
#include "analysis/kdur.h"
#include "records/cuda_api.h"
#include "util.h"

#define LEARN_SYNCS 8                    /* sync points on one thread before deciding */
#define LEARN_MAX_RECORDS 200000         /* decide anyway past this much */
#define LEARN_AUTOGRAD_MARKS 5            /* backward passes (4 intervals) before deciding on them */
/*
 * An automatic marker given up: the main thread passed this many sync points
 * without it, and RELEARN_STEP_FACTOR times as many as any step held. A loop
 * whose steps hold many syncs (a .item() a layer) raises its own bar.
 */
#define RELEARN_SYNCS (2 * LEARN_SYNCS)
#define RELEARN_STEP_FACTOR 4
#define RELEARN_MAX 3                    /* markers given up per process, at most */
#define LAUNCH_GAP_CAP_NS 100000ull      /* a launch owns the time to the next call up to this (HTA's cutoff) */
#define BW_SAMPLE_BYTES (1u << 20)       /* copies this large measure bandwidth */
#define ALIGN_CHECK_BYTES 4096u

/* A CUDA call of a main thread, as the breakdown needs it. */
struct mcall {
	uint64_t start, end;
	uint64_t bytes, host;
	uint64_t site;            /* its call site's key (analysis/callsites.h) */
	uint16_t api;
	uint8_t cls, dir;         /* dir: resolved by the stream (never DL_DIR_DEFAULT) */
	uint8_t async, pageable, entry_only;
	uint8_t ok;               /* returned success (entry-only calls: not known, 0) */
	uint8_t waited;           /* enum dl_devq_waited: what it blocked on at entry (the device-queue model) */
	uint8_t kcol;             /* launches: the kernel name's column in the duration fit (analysis/kdur.h); 0: none */
	uint8_t captured;         /* recorded into a graph by a stream capture (or refused beside one): not run */
	uint8_t dev;              /* the device its work or wait is on (dl_devq_seen) */
	uint32_t graph_kernels;   /* graph launches: the kernels its graph holds (0: not known) */
	uint64_t stream, event;   /* handles as passed */
	uint64_t ptr, size;       /* struct dl_call's (a graph launch: ptr is its graph exec) */
};

/*
 * What the correlator keeps of a record of a process's own threads: an
 * outermost CUDA call, a scheduler interval, a marker hit. While a process
 * learns, its window is a vector of these, replayed into tracking once
 * decided; a call is kept as resolved when it came, not read again.
 */
struct cevent {
	uint16_t kind;            /* DL_EV_CUDA, DL_EV_SCHED, DL_EV_MARK */
	uint32_t tid;
	union {
		struct mcall call;
		struct {
			struct dl_span span;   /* kind = enum dl_thread_state */
			uint32_t next;         /* the state entered at its end */
		} sched;
		uint64_t mark_ts;
	} u;
};

/* A disk read or a CPU interval of some thread of the traced tree. */
struct tspan {
	uint64_t start, end, bytes;
	uint32_t tgid, tid;
	uint8_t is_read;
};

enum cp_state { CP_LEARN, CP_TRACK, CP_NONE };

struct tidcount {
	uint32_t tid, calls, syncs, api_calls, marks;
	uint32_t mark_id;         /* the last marker's kind (enum dl_mark_ids) */
};

struct pending_step {
	uint64_t start, end;
};

/*
 * A process's correlation state, in parts by owner: each file writes its
 * own part, and reads the others' only where one stage hands over to the
 * next (learning's events replayed into tracking, tracking's history
 * consumed by finalizing).
 */

/* Learning the main thread and the marker (correlate_learn.c). */
struct cp_learning {
	DL_VEC(struct cevent) events;   /* this process's events while learning */
	size_t records;                 /* records seen while learning (nested or unknown calls are not kept) */
	DL_VEC(struct tidcount) tids;
	uint64_t start;
	size_t next_infer;              /* records at which to look for a marker again */
	size_t next_period;             /* records at which to look for a period before the window is enough */
};

/* Cutting steps as the records come (correlate_track.c). */
struct cp_tracking {
	bool after_sync, have_marker;
	bool step_synced;               /* the open step holds a sync point */
	uint64_t last_marker;
	uint32_t syncs_since_marker;    /* the main thread's sync points since the marker's last hit */
	uint32_t max_step_syncs;        /* the most any step held */
	bool relearn_due;               /* the marker stopped recurring: dl_corr_relearn before the next record */
};

/* What a decided process did: appended by tracking (correlate_track.c), read by finalizing and the device bounds. */
struct cp_history {
	DL_VEC(struct mcall) calls;     /* by start */
	DL_VEC(struct dl_span) sched;   /* kind = state, by start */
	uint64_t sched_until;           /* end of the last scheduler interval */
	uint32_t sched_next;            /* state entered then */
	struct dl_devq devq;            /* every thread's calls, from the decision on */
	struct dl_devq_waits_seen waits;   /* the main thread's waits on outstanding work: slept, or polled (correlate_gpu.c) */
};

/* Finalizing closed steps once the watermark passes them (correlate.c). */
struct cp_finalizing {
	size_t calls_from, sched_from;  /* the first of each history not yet finalized (older ones go in bulk) */
	/*
	 * Closed steps: pending.v[pending_done..n) are not finalized yet; the
	 * finalized ones before them go once they are a quarter of those held, so
	 * a backlog of many short steps is not moved once per step finalized.
	 */
	DL_VEC(struct pending_step) pending;
	size_t pending_done;
	uint64_t index_base;            /* steps left out before these (struct dl_step_startup) */
};

/* Drain windows for kernel device times (correlate_kdur.c). */
struct cp_kdur {
	struct dl_kdur_open open;       /* the window being filled */
	DL_VEC(struct dl_kdur_window) windows;   /* closed, waiting for the scheduler states of their drain */
};

struct cproc {
	struct dl_corr_proc pub;
	enum cp_state st;
	struct cp_learning learn;
	struct cp_tracking track;
	struct cp_history hist;
	struct cp_finalizing fin;
	struct cp_kdur kdur;
};

/* The oldest closed step not finalized yet, or NULL; and how many there are. */
static inline const struct pending_step *pending_first(const struct cproc *p)
{
	return p->fin.pending.n > p->fin.pending_done ? &p->fin.pending.v[p->fin.pending_done] : NULL;
}

static inline size_t pending_count(const struct cproc *p)
{
	return p->fin.pending.n - p->fin.pending_done;
}

/*
 * When the marker is learned again, its steps so far are left out: the
 * finalized ones (given) and the closed ones not finalized, dropped here.
 * Returns the time of those dropped.
 */
static inline uint64_t fin_forget(struct cproc *p, uint64_t finalized)
{
	uint64_t dur = 0;

	for (size_t i = p->fin.pending_done; i < p->fin.pending.n; i++)
		dur += p->fin.pending.v[i].end - p->fin.pending.v[i].start;
	p->fin.index_base += finalized + pending_count(p);
	p->fin.pending.n = 0;
	p->fin.pending_done = 0;
	return dur;
}

#define DL_CORR_CPUS 4096          /* CPUs told apart in cpus_ran (the kernel's usual NR_CPUS cap is 8192) */

struct dl_correlator {
	struct dl_corr_opts opts;
	DL_VEC(struct dl_step) closed;   /* closed steps not yet taken (dl_corr_take_steps), each owning its gpu_spans */
	DL_VEC(struct cproc) procs;
	struct dl_u64map proc_of;   /* pid -> index in procs */
	DL_VEC(struct tspan) tree;  /* ordered by end */
	struct dl_lineage lin;      /* every traced thread's intervals, wake-ups and reads */
	uint64_t watermark;
	uint64_t seq;               /* stream position of the record being read (or the last one) */
	int step_on_api;            /* enum dl_api_id, or 0 */
	bool calls_lost;            /* the trace end counted CUDA records lost: device bounds cannot be trusted */
	uint64_t cpus_ran[DL_CORR_CPUS / 64];   /* the CPUs the traced tree ran on */
};

/* A blocking synchronization, or a synchronous copy back to the host (loss.item()). */
static inline bool dl_corr_is_sync_point(const struct mcall *m)
{
	return m->cls == DL_CLS_SYNC || (m->cls == DL_CLS_COPY && !m->async && m->dir == DL_DIR_D2H);
}
/* Feeds an event of a decided process to its steps (only its main thread's count). */
void dl_corr_track(struct cproc *p, const struct cevent *e);
/* Tracking begins at a decision (the marker's next call starts the first step), and ends when it is learned again. */
void dl_corr_track_begin(struct cproc *p);
void dl_corr_track_end(struct cproc *p);
/*
 * A record of a process still learning: counted, and its event e kept (NULL:
 * a call of no use to steps); decides when the window is enough.
 */
void dl_corr_learn(struct dl_correlator *c, struct cproc *p, const struct cevent *e, const struct dl_hdr *h);
/* A launch's kernel-name column (0: the table is full). */
int dl_corr_kdur_column(struct cproc *p, const struct dl_call *k);
/* The duration fit's view of a call of any thread: fed in stream order, with what the device model said. */
void dl_corr_kdur_call(struct cproc *p, const struct cevent *e, const struct mcall *m);
/* Windows whose drain returned by end become equations (sched: the main thread's states). */
void dl_corr_kdur_finalize(struct cproc *p, const struct dl_span *sched, size_t nsched, uint64_t end);
/*
 * The step's device-busy bounds and idle split, from the model and the main
 * thread's pieces and states (as the breakdown's); returns the step's device
 * timeline (*spans allocated: steps.h, struct dl_gpu_span). p's calls
 * [c0, c1) are those not finalized that start before the step's end.
 */
size_t dl_corr_device(const struct dl_correlator *c, struct cproc *p, size_t c0, size_t c1, struct dl_step *st,
		      const struct dl_span *cuda, size_t ncuda, const struct dl_span *sched, size_t nsched,
		      struct dl_gpu_span **spans);
/* Gives up the marker: the steps cut so far are left out, and the process learns again. */
void dl_corr_relearn(struct cproc *p);
/* Decides main thread and marker (final: with whatever was seen); true when decided. */
bool dl_corr_try_decide(struct dl_correlator *c, struct cproc *p, bool final);

#endif
