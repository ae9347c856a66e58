/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The correlator's own state, shared by its tracking (correlate.c) and learning (correlate_learn.c) halves. */
#ifndef DLBPF_CORRELATE_INT_H
#define DLBPF_CORRELATE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analysis/correlate.h"
#include "records/cuda_api.h"

#define LEARN_SYNCS 8                    /* sync points on one thread before deciding */
#define LEARN_MAX_RECORDS 200000         /* decide anyway past this much */
#define LAUNCH_GAP_CAP_NS 100000ull      /* a launch owns the time to the next call up to this (HTA's cutoff) */
#define COPY_LATENCY_NS 10000ull         /* fixed cost of a transfer */
#define BW_SAMPLE_BYTES (1u << 20)       /* copies this large measure bandwidth */
#define ALIGN_CHECK_BYTES 4096u

/* A CUDA call of a main thread, as the breakdown needs it. */
struct mcall {
	uint64_t start, end;
	uint64_t bytes, host;
	uint16_t api;
	uint8_t cls, dir;
	uint8_t async, pageable, entry_only, pad;
};

/* A disk read or a CPU interval of some thread of the traced tree. */
struct tspan {
	uint64_t start, end, bytes;
	uint32_t tgid, tid;
	uint8_t is_read;
};

struct vec {
	void *v;
	size_t n, cap, elem;
};

enum cp_state { CP_LEARN, CP_TRACK, CP_NONE };

struct tidcount {
	uint32_t tid, calls, syncs, api_calls, marks;
};

struct pending_step {
	uint64_t start, end;
};

struct cproc {
	struct dl_corr_proc pub;
	enum cp_state st;
	struct vec learn;           /* this process's records while learning, back to back (bytes) */
	size_t nlearn;              /* records in it */
	struct vec tids;            /* struct tidcount */
	uint64_t learn_start;
	size_t next_infer;          /* learn.n at which to look for a marker again */
	/* tracking */
	bool after_sync, have_marker;
	uint64_t last_marker;
	struct vec calls;           /* struct mcall, by start */
	struct vec sched;           /* struct dl_span (kind = state), by start */
	uint64_t sched_until;       /* end of the last scheduler interval */
	uint32_t sched_next;        /* state entered then */
	struct vec pending;         /* struct pending_step: closed, not finalized */
};

struct dl_correlator {
	struct dl_corr_opts opts;
	const struct dl_summary *sum;
	dl_step_fn on_step;
	void *ctx;
	struct cproc *procs;
	size_t nprocs, pcap;
	struct vec tree;            /* struct tspan, unordered */
	uint64_t watermark;
	int step_on_api;            /* enum dl_api_id, or 0 */
};

void *dl_vec_push(struct vec *v, const void *item);
/* Appends n items at once. */
void *dl_vec_append(struct vec *v, const void *items, size_t n);
/* Drops the first k items. */
void dl_vec_drop_front(struct vec *v, size_t k);
void dl_vec_free(struct vec *v);

/* Records in the learning window are kept 8-byte aligned: each takes its size rounded up. */
static inline size_t dl_learn_span(const struct dl_hdr *h)
{
	return ((size_t)h->size + 7) & ~(size_t)7;
}

#define DL_FOR_EACH_LEARNED(p, h) \
	for (size_t _off = 0; _off < (p)->learn.n && ((h) = (const void *)((char *)(p)->learn.v + _off)); \
	     _off += dl_learn_span(h))

/* A blocking synchronization, or a synchronous copy back to the host (loss.item()). */
bool dl_corr_is_sync_point(const struct dl_call *k);
/* Feeds a record of a decided process's main thread to its steps. */
void dl_corr_track_record(struct dl_correlator *c, struct cproc *p, const struct dl_hdr *h);
/* Keeps a record of a process still learning; decides when the window is enough. */
void dl_corr_learn_record(struct dl_correlator *c, struct cproc *p, const struct dl_hdr *h);
/* Decides main thread and marker (final: with whatever was seen); true when decided. */
bool dl_corr_try_decide(struct dl_correlator *c, struct cproc *p, bool final);

#endif
