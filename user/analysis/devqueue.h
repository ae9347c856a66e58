/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The device-queue model of one process: what its host calls say of the
 * device, without looking at the device. Per stream it knows whether work
 * was enqueued (kernels, graph launches, async copies, memsets, NCCL
 * collectives) since the last
 * point that proves the stream done: a sync's return, a synchronous copy's
 * return, a query that answered success. From that, per interval:
 *   - upper bound of device-busy time: the time some stream may hold work,
 *     from the first enqueue after its last drain to its next drain;
 *   - whether a blocking call waited on device work (the breakdown's gpu_wait),
 *     on communication (comm_wait: the last work it waits for on each stream
 *     is a collective; what was queued ahead of it is counted with it, as
 *     the host cannot see where on the device one ended and the next began),
 *     or found every queue it waits on empty.
 * The lower bound needs the waiting thread's scheduler states and is made by
 * the correlator (dl_devq_busy_lower).
 *
 * Every rule errs wide: a drain is only believed when CUDA's semantics make it
 * certain (a stream whose flags are unknown is not assumed to synchronize
 * with the legacy stream; a pageable H2D copy's return does not prove its
 * own transfer done), so the true busy time lies inside the bounds. Pure:
 * fed calls in stream order, so a replay gives the same bounds.
 */
#ifndef DLBPF_DEVQUEUE_H
#define DLBPF_DEVQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analysis/breakdown.h"
#include "util.h"

/* One outermost CUDA call of any thread of the process, as the model needs it. */
struct dl_devq_call {
	uint64_t start, end;      /* end == start for entry-only calls */
	uint64_t stream, event;   /* handles as passed */
	uint64_t ptr, size;       /* struct dl_call's: a device ordinal, a created stream and its flags, a graph ... */
	uint32_t tid;
	uint16_t api;             /* enum dl_api_id */
	uint8_t cls, dir;         /* enum dl_api_class; copies: resolved direction */
	bool async, pageable, entry_only, ok;   /* ok: returned success (unknown for entry-only: false) */
};

struct dl_devq_dep {
	uint64_t stream;          /* key of the stream waited on */
	uint64_t upto;            /* its work enqueued before this time */
	uint64_t at;              /* when the wait was enqueued */
};

struct dl_devq_stream {
	uint64_t key;
	bool open;                /* may hold work */
	uint64_t open_since;      /* the first enqueue since it was last known empty */
	uint32_t open_tid;        /* the thread that made it */
	uint64_t last_enq;        /* the latest enqueue's entry */
	bool compute;             /* what it may hold is not only transfers (kernels, graphs, memsets, collectives) */
	bool comm_last;           /* of that work, the latest enqueued is an NCCL collective */
	bool comm_ahead;          /* and kernels, graphs or memsets were enqueued before it */
	bool has_kernels;         /* kernels, graphs or memsets were enqueued since it was last known empty */
	uint64_t last_work;       /* when that latest one was enqueued */
	DL_VEC(struct dl_devq_dep) deps;   /* cudaStreamWaitEvent since the last drain */
	uint32_t dev;             /* its device: current at its creation, or at its first use when not seen created */
	bool legacy;              /* a device's legacy default stream */
	bool flags_known;         /* its creation was seen: */
	bool nonblocking;         /* cudaStreamNonBlocking (it does not synchronize with the legacy stream) */
	bool peer_side;           /* stands for the peer copies of other devices' streams that reach this one */
	bool capturing;           /* between a stream capture's begin and end: its work is recorded, not run */
	uint32_t captured;        /* kernels recorded by the capture under way */
	uint64_t capture_origin;  /* capturing: the key of the stream that began the capture (its own for that one) */
};

struct dl_devq_event {
	uint64_t handle, stream, at;   /* recorded on stream (key) at time at */
	uint64_t capture_origin;       /* recorded in a capture: the key of the stream that began it; else 0 */
};

/* An interval in which a stream may have held work, and the enqueue that began it. */
struct dl_devq_span {
	uint64_t start, end;
	uint32_t stream;          /* index in streams */
	uint32_t tid;             /* the thread whose call enqueued at start */
};

struct dl_devq {
	DL_VEC(struct dl_devq_stream) streams;
	DL_VEC(struct dl_devq_event) events;
	struct dl_u64map event_of;        /* handle -> index in events (frameworks record thousands) */
	DL_VEC(struct dl_devq_span) busy_max;   /* closed ones */
	struct dl_u64map dev_of_tid;      /* a thread's current device (cudaSetDevice, a current context), when not 0 */
	struct dl_u64map ctx_dev;         /* a driver context -> its device (cuCtxCreate, cuDevicePrimaryCtxRetain) */
	struct dl_u64map ctx_below;       /* a thread's devices under its current one (cuCtxPushCurrent), packed */
	struct dl_u64map graph_kernels;   /* graph -> the kernels captured into it or added to it */
	struct dl_u64map exec_kernels;    /* instantiated graph -> its kernels */
	uint32_t devices;                 /* 1 + the highest device any call used */
};

/* What a blocking call found queued, on the streams it waits for, at its entry. */
enum dl_devq_waited {
	DL_DEVQ_EMPTY,            /* every queue it waits on known empty (and every non-blocking call) */
	DL_DEVQ_TRANSFERS,        /* transfers only: a copy behind copies waits on the link, not on compute */
	DL_DEVQ_COMM,             /* the last device work it waits for is a collective (communication) */
	DL_DEVQ_COMM_AFTER,       /* the same, behind kernels enqueued before it: part of the wait may be compute */
	DL_DEVQ_COMPUTE,          /* it waits for kernels, graphs or memsets last */
};

void dl_devq_free(struct dl_devq *q);
/* Feeds one call; returns what it waited on. */
enum dl_devq_waited dl_devq_call(struct dl_devq *q, const struct dl_devq_call *c);
/*
 * What the model made of a call just fed: the device its work or wait is on
 * (a device sync: the thread's current one); whether it went to a capturing
 * stream (recorded into a graph: no device work, no launch time); for a graph
 * launch, the kernels its graph holds (0: not known).
 */
struct dl_devq_seen {
	uint32_t dev;
	bool captured;
	uint32_t graph_kernels;
};
struct dl_devq_seen dl_devq_seen(const struct dl_devq *q, const struct dl_devq_call *c);
/* The device of streams[i]. */
static inline uint32_t dl_devq_stream_dev(const struct dl_devq *q, size_t i)
{
	return q->streams.v[i].dev;
}
/* Whether the call blocks the host until device work is done (syncs, synchronous D2H/H2D copies). */
bool dl_devq_blocking(const struct dl_devq_call *c);
/* The most device-busy time [a, b) can hold, by what is known now (streams still open count as busy). */
uint64_t dl_devq_busy_upper(const struct dl_devq *q, uint64_t a, uint64_t b);
/*
 * The spans of [a, b) in which each stream may have held work, clipped to it:
 * kind is the stream's index in q->streams; sorted by stream, then start; a
 * stream's spans disjoint. Their union is what dl_devq_busy_upper measures.
 * *out is allocated (free it).
 */
size_t dl_devq_stream_spans(const struct dl_devq *q, uint64_t a, uint64_t b, struct dl_span **out);
/* A blocking call of the thread whose scheduler states are known. */
struct dl_devq_wait {
	uint64_t start, end;
	bool waited;              /* dl_devq_call said it waited on outstanding work (of any kind) */
	bool done_at_return;      /* dl_devq_returns_when_done */
	uint64_t host_bytes;      /* not done_at_return: the bytes its host side stages (a pageable copy's); 0: unknown */
	uint32_t dev;             /* the device it waited on (dl_devq_seen); dl_devq_lower_spans_dev picks by it */
	bool polling;             /* its runtime is known to poll in its waits (dl_devq_done) */
};

/*
 * When the thread last woke from sleep (S) inside [start, end), or 0 if it
 * never slept there. A runtime that blocks for the device (blocking-sync mode,
 * the simulator) is woken once the work is done, so the work it waited for
 * was complete then; one that spins never sleeps. The model assumes a
 * blocking call's last sleep is its wait for the device.
 */
uint64_t dl_devq_woke(const struct dl_span *sched, size_t nsched, uint64_t start, uint64_t end);
/*
 * Whether a blocking call returns as soon as the work it waited for is done,
 * with no host work of its own after it: a sync, or a copy of pinned memory
 * (a pageable copy ends with the host copying out of its staging buffer).
 */
bool dl_devq_returns_when_done(const struct dl_devq_call *c, bool pageable);
/*
 * When the work a blocking call waited for was known done: its last wake-up
 * from sleep (dl_devq_woke). A runtime that spins or yields (CUDA's default
 * while a context has a CPU to itself) never sleeps: it looks at the device
 * while on its CPU, so the work was not done while the thread ran inside the
 * call before its host work after the device's. That host work is nothing
 * for a sync or a pinned copy (done_at_return); for a pageable copy, at most
 * the on-CPU time to stage host_bytes (dl_devq_host_tail_ns). So the work
 * was done no earlier than where that tail begins, when the thread ran long
 * enough before it to have looked; else than its last preemption before.
 * 0: not known (a state other than running or runnable, states unknown for
 * part of the call, a tail of unknown size or longer than the call).
 * That holds for a runtime known to poll (polling): one whose waits never
 * sleep. A call of a runtime that sleeps in its waits that did not sleep did
 * not wait, or did host work of its own (the deferred copies a simulator
 * moves): it counts to its return only when it was on its CPU throughout and
 * returns when its work is done, as before the runtime's way was told apart.
 */
uint64_t dl_devq_done(const struct dl_span *sched, size_t nsched, uint64_t start, uint64_t end, bool done_at_return,
		      uint64_t host_bytes, bool polling);
/* The most on-CPU time a host takes to copy bytes (a pageable copy staging them); UINT64_MAX for 0 bytes (unknown). */
uint64_t dl_devq_host_tail_ns(uint64_t bytes);
/*
 * What a process's waits on outstanding work showed so far: the runtime polls
 * when none of them slept and at least DL_DEVQ_POLL_EVIDENCE ran on their CPU
 * for DL_DEVQ_POLL_ONCPU_NS beyond their host tail, and for most of the call,
 * without sleeping. A
 * runtime that blocks sleeps at once in a wait with work outstanding; one
 * whose wait found the work done, or was preempted, is on its CPU briefly.
 */
#define DL_DEVQ_POLL_EVIDENCE 2
#define DL_DEVQ_POLL_ONCPU_NS 1000000ull
struct dl_devq_waits_seen {
	uint32_t slept, polled;
};
/* Notes one such wait; returns whether the runtime is known to poll. */
bool dl_devq_note_wait(struct dl_devq_waits_seen *s, const struct dl_span *sched, size_t nsched,
		       const struct dl_devq_wait *w);

/*
 * A drain whose call returned at done, its thread woken at woke (dl_devq_woke):
 * the work it proved done was done by woke, so the busy spans it closed end
 * there. The time to the return was the host's (wake-up latency, run queue).
 */
void dl_devq_drained_by(struct dl_devq *q, uint64_t done, uint64_t woke);
/*
 * The least device-busy time [a, b) holds: while the thread was blocked on
 * work outstanding, the device was running it. A wait counts from its entry
 * to when its work was known done (dl_devq_done); a wait that never slept
 * and was preempted, or that does host work of its own after the device's
 * (staging), counts nothing: the device may have finished at any point. A copy that found
 * the queues empty counts nothing either: its call is mostly host time around
 * a transfer of unknown length. waits sorted by start, sched as the
 * breakdown's.
 */
uint64_t dl_devq_busy_lower(const struct dl_devq_wait *w, size_t n, const struct dl_span *sched, size_t nsched,
			    uint64_t a, uint64_t b);
/* An enqueue that opened a stream (began one of its spans), for a trace's flows. */
struct dl_devq_open {
	uint64_t at;
	uint32_t stream, tid;     /* stream: index in streams */
};

/* The model's key of the stream a call works on (streams[].key). */
uint64_t dl_devq_stream_key(const struct dl_devq_call *c);
/* Whether the call put work on its stream's queue. */
bool dl_devq_enqueues(const struct dl_devq_call *c);
/* The enqueues in [a, b) that opened a stream, by stream then time; *out allocated. */
size_t dl_devq_opens(const struct dl_devq *q, uint64_t a, uint64_t b, struct dl_devq_open **out);
/* The spans dl_devq_busy_lower measures, as a sorted union (not clipped to [a, b)); *out allocated. */
size_t dl_devq_lower_spans(const struct dl_devq_wait *w, size_t n, const struct dl_span *sched, size_t nsched,
			   uint64_t a, uint64_t b, struct dl_span **out);
/* The same, of the waits on device dev only (dev < 0: all). */
size_t dl_devq_lower_spans_dev(const struct dl_devq_wait *w, size_t n, const struct dl_span *sched, size_t nsched,
			       uint64_t a, uint64_t b, int dev, struct dl_span **out);
/* Forgets what no interval starting at or after t needs. */
void dl_devq_forget_before(struct dl_devq *q, uint64_t t);

#endif
