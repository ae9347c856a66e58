/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Input lineage: for a step of a main thread, who ended its input waits and
 * what that producer did for the batch. The wait is the main thread's blocked
 * time outside CUDA calls; the wake-up edge (DL_EV_WAKE) that ended each
 * blocked interval names the waker. The waker may only pass the batch on (a
 * multiprocessing.Queue's feeder thread): the thread that did the work is
 * the one of the waker's process that worked most (on a CPU or in D) in
 * the window.
 * The batch's production window runs from the process's previous hand-off to
 * the consumer, or from when it was last handed work by the consumer's
 * process (the batch's indexes) if later, to this hand-off; the producer's
 * scheduler intervals in it, and the reads of its process, are what the
 * batch cost.
 *
 * Pure: fed records (scheduler intervals of every traced thread, wake-up
 * edges, file opens, reads and closes, forks), so a replay gives the same.
 */
#ifndef DLBPF_LINEAGE_H
#define DLBPF_LINEAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analysis/breakdown.h"
#include "analysis/files.h"
#include "dlbpf/events.h"
#include "util.h"

#define DL_LIN_WAKERS 8           /* wakers told apart in a process's totals; the rest are "others" */
#define DL_LIN_WINDOWS 64         /* a waker's latest producer windows kept, for its time per batch */
/*
 * sched_waking runs before the wakee's switch-out is recorded when the wakee
 * is still leaving its CPU (the wake-up races its sleep): an edge this much
 * before a blocked interval's start still ended it. The race lasts the
 * switch itself, microseconds.
 */
#define DL_LIN_RACE_NS 1000000ull

struct dl_lin_edge {
	uint64_t ts;
	uint32_t waker_tgid, waker_tid, wakee_tgid, wakee_tid, ctx;
};

struct dl_lin_read {
	uint64_t ts, bytes, disk_bytes;
	uint64_t fault_bytes;         /* a block read outside read calls into a mapped file (bytes, disk_bytes 0) */
	const char *path;             /* NULL: an fd no record named */
};

/* A socket receive: its entry, its time blocked and copying, and the endpoint's name (the lineage's copy). */
struct dl_lin_recv {
	uint64_t ts, dur_ns, bytes;
	const char *endpoint;
};

struct dl_lin_thread {
	uint32_t tid, tgid;
	DL_VEC(struct dl_span) spans;       /* closed scheduler intervals, by start; kind = enum dl_thread_state */
	uint64_t first_ts, until;           /* its first record; the end of its last closed interval */
	uint32_t next;                      /* the state it entered at until (0: none or exited) */
	uint64_t exit_ts;                   /* its exit record's (0: alive); forgotten once the frontier passes it */
	DL_VEC(struct dl_lin_edge) woken;   /* wake-ups of it, by time */
	DL_VEC(struct dl_lin_edge) gave;    /* wake-ups it made in task context, by time */
	DL_VEC(struct dl_lin_read) reads;   /* by time */
	DL_VEC(struct dl_lin_recv) recvs;   /* by entry; a thread's receives never overlap */
};

struct dl_lin_proc {
	uint32_t pid;
	struct dl_proc_files files;         /* its fd table, for the paths of reads */
};

struct dl_lineage {
	DL_VEC(struct dl_lin_thread) threads;
	struct dl_u64map by_tid;
	DL_VEC(struct dl_lin_proc) procs;
	struct dl_u64map by_pid;
	DL_VEC(char *) endpoints;           /* endpoint names, each once */
	struct dl_u64map by_endpoint;       /* hash of a name -> index in endpoints */
};

/* A step to explain: the main thread's CUDA pieces and scheduler spans in it, as the breakdown takes them. */
struct dl_lin_query {
	uint32_t pid, main_tid;
	uint64_t start, end;
	const struct dl_span *cuda;   /* sorted, non-overlapping */
	size_t ncuda;
	const struct dl_span *sched;  /* sorted, non-overlapping */
	size_t nsched;
	const struct dl_span *disk;   /* the tree's disk reads in flight: sorted, merged */
	size_t ndisk;
};

/* What a process's steps waited on, summed over its steps (for the report's line and the findings). */
struct dl_lin_totals {
	uint64_t wait_ns;             /* every step's wait_ns */
	struct {
		uint32_t pid;
		uint32_t tid;                 /* a thread of the consumer's own process (thread loaders); 0: by process */
		uint64_t wait_ns, steps;
		uint64_t windows;             /* its producer windows (hand-off to hand-off) */
		uint64_t window_ns[DL_LIN_WINDOWS];   /* the latest of them, windows % DL_LIN_WINDOWS next */
	} wakers[DL_LIN_WAKERS];      /* by the waker's process, or thread in the consumer's; most wait first once sorted */
	uint32_t nwakers;
	uint64_t other_wait_ns;       /* ended by interrupts, kernel threads, wakers past the table, or no edge seen */
	uint64_t irq_wait_ns;         /* of that, ended from interrupt or kernel-thread context */
	uint64_t producers;
	/* The producers' windows by what they went to, each weighed by the consumer's wait it ended (shares only) */
	uint64_t oncpu_ns, io_wait_ns, runq_ns, other_ns;
	uint64_t read_bytes, disk_bytes;
	uint64_t fault_bytes;         /* read from disk by page faults of mapped files */
	/* Each window's disk bytes (read calls' and faults') per ns of it, weighed as the parts above */
	double disk_rate_weighed;
	uint64_t net_wait_ns;         /* of other_ns (and io_wait_ns), blocked in socket receives */
	uint64_t net_bytes, net_recvs;
	struct {
		char name[DL_LIN_EP_NAME];
		uint64_t wait_ns, bytes, recvs;
	} endpoints[DL_LIN_ENDPOINTS];   /* the endpoints the producers waited on most, summed over the steps */
	uint32_t nendpoints;
	uint64_t endpoints_more_wait_ns; /* waits on endpoints past the table */
};

void dl_lineage_free(struct dl_lineage *l);
/*
 * A record of the stream: scheduler intervals, wake-ups, file records (block
 * reads of mapped files among them) and forks are kept; the rest ignored.
 */
void dl_lineage_note(struct dl_lineage *l, const struct dl_hdr *h);
/* The lineage of one step. */
void dl_lineage_step(const struct dl_lineage *l, const struct dl_lin_query *q, struct dl_step_lineage *out);
/*
 * Forgets what ended before t (kept: each thread's last state and the paths, which later reads name),
 * and threads that exited before dead_before, when no step still to explain reaches back to them.
 */
void dl_lineage_forget_before(struct dl_lineage *l, uint64_t t, uint64_t dead_before);

/* A step of process pid: its wakers told apart by process, or by thread within pid itself. */
void dl_lin_totals_add(struct dl_lin_totals *t, const struct dl_step_lineage *s, uint32_t pid);
/* The wakers by wait, most first. */
void dl_lin_totals_sort(struct dl_lin_totals *t);

const char *dl_wake_ctx_name(uint32_t ctx);

#endif
