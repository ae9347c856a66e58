// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The device-queue model on synthetic call streams. Each case states what the
 * device did (the truth it was built from) and checks that the model's bounds
 * hold it, and how tight they are where the calls allow it: every expected
 * number is worked out by hand from the calls below.
 */
#include <stdlib.h>
#include <string.h>
#include "analysis/devqueue.h"
#include "check.h"
#include "dlbpf/copy.h"
#include "records/cuda_api.h"

#define US 1000ull

static struct dl_devq_call launch(uint64_t t, uint64_t stream, uint32_t tid, enum dl_api_id api)
{
	return (struct dl_devq_call){ .start = t, .end = t, .stream = stream, .tid = tid, .api = api,
				      .cls = DL_CLS_LAUNCH, .async = true, .entry_only = true };
}

static struct dl_devq_call call(enum dl_api_id api, uint64_t start, uint64_t end, uint64_t stream, uint64_t event,
				uint32_t tid, bool ok)
{
	const struct dl_api *a = dl_api_by_id(api);

	return (struct dl_devq_call){ .start = start, .end = end, .stream = stream, .event = event, .tid = tid,
				      .api = api, .cls = (uint8_t)a->cls, .ok = ok };
}

static struct dl_devq_call copy(uint64_t start, uint64_t end, int dir, bool async, bool pageable)
{
	struct dl_devq_call c = call(async ? DL_API_MEMCPY_ASYNC : DL_API_MEMCPY, start, end, 0, 0, 1, true);

	c.dir = (uint8_t)dir;
	c.async = async;
	c.pageable = pageable;
	return c;
}

static enum dl_devq_waited feed(struct dl_devq *q, struct dl_devq_call c)
{
	return dl_devq_call(q, &c);
}

/*
 * Thread 1 launches on its per-thread default stream (a _ptsz launch with
 * stream 0), thread 2 on the legacy stream. The legacy stream's sync drains
 * the legacy stream only; the per-thread stream stays open until its own
 * sync, so its work may run to 80 us.
 */
static void test_legacy_vs_per_thread(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;

	feed(&q, launch(0, 0, 1, DL_API_LAUNCH_KERNEL_PTSZ));
	feed(&q, launch(10 * US, 0, 2, DL_API_LAUNCH_KERNEL));
	c = call(DL_API_STREAM_SYNC, 20 * US, 30 * US, 0, 0, 2, true);
	CHECK(dl_devq_call(&q, &c) == DL_DEVQ_COMPUTE, "the legacy sync found work outstanding");
	/* Open from 0: the whole 0-50 us may be busy (the per-thread work). */
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 50 * US), 50 * US);
	/* Thread 2's own per-thread stream (cudaStreamPerThread, 2) holds nothing: its sync waited on nothing. */
	c = call(DL_API_STREAM_SYNC, 40 * US, 41 * US, 2, 0, 2, true);
	CHECK(dl_devq_call(&q, &c) == DL_DEVQ_EMPTY, "thread 2's per-thread stream was empty");
	/* Thread 1's per-thread stream, named by cudaStreamPerThread in a plain call: drained at 80 us. */
	c = call(DL_API_STREAM_SYNC, 60 * US, 80 * US, 2, 0, 1, true);
	CHECK(dl_devq_call(&q, &c) == DL_DEVQ_COMPUTE, "thread 1's per-thread stream had work");
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 200 * US), 80 * US);
	/* Known empty after 80 us: nothing may be busy there. */
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 80 * US, 200 * US), 0);
	dl_devq_free(&q);
}

/*
 * Stream A (0xa000) runs work from 0; an event recorded on it at 10 us is
 * waited for by stream B (0xb000) at 20 us, which launches at 30 us. B's sync
 * returning at 100 us proves A's work before the record done too.
 */
static void test_event_edge_across_streams(void)
{
	for (int with_wait = 0; with_wait < 2; with_wait++) {
		struct dl_devq q = { 0 };
		struct dl_devq_call c;

		feed(&q, launch(0, 0xa000, 1, DL_API_LAUNCH_KERNEL));
		c = call(DL_API_EVENT_RECORD, 10 * US, 11 * US, 0xa000, 0xe000, 1, true);
		dl_devq_call(&q, &c);
		if (with_wait) {
			c = call(DL_API_STREAM_WAIT_EVENT, 20 * US, 21 * US, 0xb000, 0xe000, 1, true);
			dl_devq_call(&q, &c);
		}
		feed(&q, launch(30 * US, 0xb000, 1, DL_API_LAUNCH_KERNEL));
		c = call(DL_API_STREAM_SYNC, 40 * US, 100 * US, 0xb000, 0, 1, true);
		CHECK(dl_devq_call(&q, &c) == DL_DEVQ_COMPUTE, "B had work");
		/* With the edge: A is known done at 100 us. Without it, A may still run: busy to 200 us. */
		CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 200 * US), with_wait ? 100 * US : 200 * US);
		/* An event sync on A's event drains A as well. */
		c = call(DL_API_EVENT_SYNC, 150 * US, 160 * US, 0, 0xe000, 1, true);
		CHECK(dl_devq_call(&q, &c) == (with_wait ? DL_DEVQ_EMPTY : DL_DEVQ_COMPUTE),
		      "the event sync waited only where A was still open");
		CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 200 * US), with_wait ? 100 * US : 160 * US);
		dl_devq_free(&q);
	}
}

/* A query that answers "not ready" proves nothing; one that answers success drains. */
static void test_query_drains(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;

	feed(&q, launch(0, 0xa000, 1, DL_API_LAUNCH_KERNEL));
	c = call(DL_API_STREAM_QUERY, 50 * US, 51 * US, 0xa000, 0, 1, false);   /* cudaErrorNotReady */
	dl_devq_call(&q, &c);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 200 * US), 200 * US);
	c = call(DL_API_STREAM_QUERY, 80 * US, 81 * US, 0xa000, 0, 1, true);
	dl_devq_call(&q, &c);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 200 * US), 81 * US);
	/* An event query too (driver twin). */
	feed(&q, launch(100 * US, 0xa000, 1, DL_API_LAUNCH_KERNEL));
	c = call(DL_API_EVENT_RECORD, 101 * US, 102 * US, 0xa000, 0xe000, 1, true);
	dl_devq_call(&q, &c);
	c = call(DL_API_CU_EVENT_QUERY, 150 * US, 151 * US, 0, 0xe000, 1, true);
	dl_devq_call(&q, &c);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 200 * US), 81 * US + 51 * US);
	dl_devq_free(&q);
}

/*
 * No drain seen (the sync failed, or the run ended first): the stream stays
 * open, and the bound is the whole interval from the enqueue: wide, never short.
 */
static void test_drain_never_seen(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;

	feed(&q, launch(10 * US, 0, 1, DL_API_LAUNCH_KERNEL));
	c = call(DL_API_DEVICE_SYNC, 20 * US, 30 * US, 0, 0, 1, false);
	CHECK(dl_devq_call(&q, &c) == DL_DEVQ_COMPUTE, "the failed sync was entered with work outstanding");
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 1000 * US), 990 * US);
	/* Work another thread enqueued while a sync was in flight is not proven done by it. */
	c = call(DL_API_DEVICE_SYNC, 5 * US, 40 * US, 0, 0, 2, true);
	dl_devq_call(&q, &c);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 1000 * US), 990 * US);
	c = call(DL_API_DEVICE_SYNC, 50 * US, 60 * US, 0, 0, 2, true);
	dl_devq_call(&q, &c);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 1000 * US), 50 * US);
	dl_devq_free(&q);
}

/*
 * Synchronous copies: one that finds the queues empty did not wait (its time
 * is the transfer's), and its return proves it done; but from pageable memory
 * to the device it returns once staged, so its stream stays open.
 */
static void test_sync_copies(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;

	c = copy(0, 10 * US, DL_DIR_H2D, false, false);
	CHECK(dl_devq_call(&q, &c) == DL_DEVQ_EMPTY, "a pinned copy to an idle device waits for nothing");
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 10 * US);
	c = copy(20 * US, 30 * US, DL_DIR_H2D, false, true);
	CHECK(dl_devq_call(&q, &c) == DL_DEVQ_EMPTY, "nor a pageable one");
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 10 * US + 80 * US);
	/* A copy behind the pageable transfer waited on the link only, and proves everything done at 45 us. */
	c = copy(40 * US, 45 * US, DL_DIR_D2H, false, false);
	CHECK(dl_devq_call(&q, &c) == DL_DEVQ_TRANSFERS, "the D2H copy waited on the staged transfer");
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 10 * US + 25 * US);
	/* An async copy enqueues and proves nothing; a host-to-host copy is no device work. */
	c = copy(60 * US, 61 * US, DL_DIR_H2H, false, false);
	dl_devq_call(&q, &c);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 35 * US);
	c = copy(70 * US, 71 * US, DL_DIR_H2D, true, false);
	dl_devq_call(&q, &c);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 35 * US + 30 * US);
	/* Behind a kernel (loss.item()), a copy waits on compute. */
	feed(&q, launch(80 * US, 0, 1, DL_API_LAUNCH_KERNEL));
	c = copy(90 * US, 95 * US, DL_DIR_D2H, false, false);
	CHECK(dl_devq_call(&q, &c) == DL_DEVQ_COMPUTE, "the loss copy waited on the kernel");
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 35 * US + 25 * US);
	dl_devq_free(&q);
}

/*
 * The lower bound from a thread's scheduler states: a wait on outstanding work
 * counts from its entry to its last wake-up (10-38 us); one that never slept
 * (spun, preempted, busy with host work: when the device finished is not
 * known), a copy that found the queues empty, or a sync with nothing
 * outstanding, nothing.
 */
static void test_lower_bound(void)
{
	struct dl_devq_wait w[] = {
		{ 10 * US, 40 * US, true, false, 0, 0, false },
		{ 50 * US, 60 * US, false, false, 0, 0, false },
		{ 90 * US, 95 * US, true, false, 0, 0, false },   /* no sleep, and host work after the device's */
	};
	struct dl_span sched[] = {
		{ 0, 12 * US, DL_ST_RUNNING }, { 12 * US, 20 * US, DL_ST_SLEEP }, { 20 * US, 21 * US, DL_ST_RUNQ },
		{ 21 * US, 38 * US, DL_ST_SLEEP }, { 38 * US, 52 * US, DL_ST_RUNQ }, { 52 * US, 58 * US, DL_ST_SLEEP },
		{ 58 * US, 100 * US, DL_ST_RUNNING },
	};

	CHECK_EQ_U64(dl_devq_woke(sched, 7, 10 * US, 40 * US), 38 * US);
	CHECK_EQ_U64(dl_devq_woke(sched, 7, 90 * US, 95 * US), 0);
	CHECK_EQ_U64(dl_devq_busy_lower(w, 3, sched, 7, 0, 100 * US), 28 * US);
	/* Clipped to the interval asked. */
	CHECK_EQ_U64(dl_devq_busy_lower(w, 3, sched, 7, 20 * US, 55 * US), 18 * US);
}

/*
 * A runtime that spins (CUDA's default while the context has a CPU to itself)
 * never sleeps in its wait: a sync or a pinned copy on its CPU for the whole
 * call counts to its return (110-130 us); the same call preempted once
 * (140-160: runnable 150-152) to its preemption, as back on its CPU for 8 us
 * it may have found the work done at its first look; a pageable copy of unknown
 * size (170-180: its staging ends in host work of unknown length), or one
 * whose states are not known for all of it (200-230: states end at 220)
 * counts nothing.
 */
static void test_lower_bound_spin(void)
{
	struct dl_devq_wait w[] = {
		{ 110 * US, 130 * US, true, true, 0, 0, true },
		{ 140 * US, 160 * US, true, true, 0, 0, true },
		{ 170 * US, 180 * US, true, false, 0, 0, true },
		{ 200 * US, 230 * US, true, true, 0, 0, true },
	};
	struct dl_span sched[] = {
		{ 100 * US, 150 * US, DL_ST_RUNNING }, { 150 * US, 152 * US, DL_ST_RUNQ },
		{ 152 * US, 220 * US, DL_ST_RUNNING },
	};
	struct dl_devq_call sync = { .cls = DL_CLS_SYNC }, copy = { .cls = DL_CLS_COPY, .dir = DL_DIR_D2H };

	CHECK_EQ_U64(dl_devq_busy_lower(w, 4, sched, 3, 100 * US, 240 * US), 20 * US + 10 * US);
	CHECK_EQ_U64(dl_devq_done(sched, 3, 110 * US, 130 * US, false, 0, true), 0);
	CHECK(dl_devq_returns_when_done(&sync, true) && dl_devq_returns_when_done(&copy, false) &&
	      !dl_devq_returns_when_done(&copy, true), "syncs and pinned copies return when their work is done");
}

/*
 * A pageable copy that never slept (a spinning runtime's loss.item()): the
 * device's part ended no later than its host tail before the return, the
 * on-CPU time to stage its bytes at the slowest host copy rate. 4 bytes: a
 * few ns before the return. 4 MB: that much on-CPU time back, across a
 * preemption (runnable 150-152) that it does not count. A tail longer than
 * the call, or a state other than running or runnable, counts nothing.
 */
static void test_lower_bound_spin_pageable(void)
{
	struct dl_span sched[] = {
		{ 100 * US, 150 * US, DL_ST_RUNNING }, { 150 * US, 152 * US, DL_ST_RUNQ },
		{ 152 * US, 220 * US, DL_ST_RUNNING }, { 220 * US, 230 * US, DL_ST_SLEEP },
		{ 230 * US, 300 * US, DL_ST_RUNNING },
	};
	uint64_t tail4 = dl_devq_host_tail_ns(4), tail = dl_devq_host_tail_ns(8000);

	CHECK(tail4 > 0 && tail4 < 100 && tail > 4 * US && tail < 10 * US, "a tail of 4 bytes: %llu ns, 8 kB: %llu",
	      (unsigned long long)tail4, (unsigned long long)tail);
	CHECK_EQ_U64(dl_devq_done(sched, 5, 110 * US, 130 * US, false, 4, true), 130 * US - tail4);
	/* 152-160 is 8 us on the CPU, under the tail: the rest of it reaches back past the preemption. */
	CHECK_EQ_U64(dl_devq_done(sched, 5, 140 * US, 160 * US, false, 8000, true), 150 * US - (tail - 8 * US));
	CHECK_EQ_U64(dl_devq_done(sched, 5, 140 * US, 160 * US, false, 1000000000, true), 0);
	CHECK_EQ_U64(dl_devq_done(sched, 5, 210 * US, 240 * US, false, 4, true), 230 * US);   /* slept: its wake-up */
	CHECK_EQ_U64(dl_devq_host_tail_ns(0), UINT64_MAX);
}

/*
 * Whether a runtime polls is learnt from its waits: none slept and two ran
 * on their CPU for a ms beyond their host tail (a blocking runtime with work
 * outstanding sleeps at once). A short wait, or a preempted one, is no
 * evidence. Until then, and once one slept, a wait that never slept counts
 * only when it returns when done and was on its CPU throughout (a runtime that
 * sleeps in its waits and did not sleep in this one did host work of its own
 * or found the work done).
 */
static void test_polling_learnt(void)
{
	struct dl_devq_waits_seen seen = { 0, 0 };
	struct dl_span sched[] = {
		{ 100 * US, 150 * US, DL_ST_RUNNING }, { 150 * US, 152 * US, DL_ST_RUNQ },
		{ 152 * US, 400 * US, DL_ST_RUNNING }, { 400 * US, 5000 * US, DL_ST_RUNQ },
		{ 5000 * US, 8000 * US, DL_ST_RUNNING }, { 8000 * US, 9000 * US, DL_ST_SLEEP },
	};
	struct dl_devq_wait shortw = { 110 * US, 130 * US, true, true, 0, 0, false },
			    preempted = { 390 * US, 5010 * US, true, true, 0, 0, false },
			    spun = { 5000 * US, 7000 * US, true, true, 0, 0, false },
			    pageable = { 5000 * US, 7000 * US, true, false, 1500000, 0, false },
			    slept = { 7500 * US, 8500 * US, true, true, 0, 0, false };

	CHECK(!dl_devq_note_wait(&seen, sched, 6, &shortw) && !dl_devq_note_wait(&seen, sched, 6, &preempted) &&
	      !dl_devq_note_wait(&seen, sched, 6, &pageable) && seen.polled == 0,
	      "short, preempted or host-bound waits are no evidence (%u)", seen.polled);
	CHECK(!dl_devq_note_wait(&seen, sched, 6, &spun), "one wait on its CPU for 2 ms is not enough");
	CHECK(dl_devq_note_wait(&seen, sched, 6, &spun), "two are");
	CHECK(!dl_devq_note_wait(&seen, sched, 6, &slept) && !dl_devq_note_wait(&seen, sched, 6, &spun),
	      "one that slept ends it");
	CHECK_EQ_U64(dl_devq_done(sched, 3, 140 * US, 300 * US, true, 0, false), 0);   /* preempted */
	CHECK_EQ_U64(dl_devq_done(sched, 3, 110 * US, 130 * US, true, 0, false), 130 * US);
	CHECK_EQ_U64(dl_devq_done(sched, 3, 110 * US, 130 * US, false, 4, false), 0);  /* a pageable copy */
}

/*
 * A spinning sync preempted near its end: back on its CPU at 158, it returned
 * at 160 or 175. It may have found the work done at its first look there and
 * spent the rest on its way out, so the work is known undone only to the
 * preemption at 150. Back for 142 us before returning at 300, it looked
 * long enough. Preempted from its entry (runnable 140-158), nothing is known.
 */
static void test_lower_bound_spin_resumed(void)
{
	struct dl_span sched[] = {
		{ 100 * US, 150 * US, DL_ST_RUNNING }, { 150 * US, 158 * US, DL_ST_RUNQ },
		{ 158 * US, 400 * US, DL_ST_RUNNING },
	};
	struct dl_span late[] = { { 100 * US, 140 * US, DL_ST_RUNNING }, { 140 * US, 158 * US, DL_ST_RUNQ },
				  { 158 * US, 220 * US, DL_ST_RUNNING } };

	CHECK_EQ_U64(dl_devq_done(sched, 3, 140 * US, 160 * US, true, 0, true), 150 * US);
	CHECK_EQ_U64(dl_devq_done(sched, 3, 140 * US, 175 * US, true, 0, true), 150 * US);
	CHECK_EQ_U64(dl_devq_done(sched, 3, 140 * US, 300 * US, true, 0, true), 300 * US);
	CHECK_EQ_U64(dl_devq_done(late, 3, 140 * US, 160 * US, true, 0, true), 0);
}

static struct dl_devq_call with(struct dl_devq_call c, uint64_t ptr, uint64_t size)
{
	c.ptr = ptr;
	c.size = size;
	return c;
}

/*
 * Two devices: thread 1 on device 1 launches on its legacy stream (0-40 us),
 * thread 2 on device 0 on its own (10-20). Device 0's cudaDeviceSynchronize
 * drains device 0 only; device 1's queue stays open until its own sync. Each
 * stream knows its device.
 */
static void test_devices(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;
	struct dl_devq_seen seen;

	feed(&q, with(call(DL_API_SET_DEVICE, 0, 1 * US, 0, 0, 1, true), 1, 0));
	c = launch(2 * US, 0, 1, DL_API_LAUNCH_KERNEL);
	feed(&q, c);
	seen = dl_devq_seen(&q, &c);
	CHECK(seen.dev == 1 && !seen.captured, "a launch after cudaSetDevice(1) is device 1's (%u)", seen.dev);
	feed(&q, launch(10 * US, 0, 2, DL_API_LAUNCH_KERNEL));
	c = call(DL_API_DEVICE_SYNC, 15 * US, 20 * US, 0, 0, 2, true);
	CHECK(feed(&q, c) == DL_DEVQ_COMPUTE, "device 0's sync waited on its kernel");
	CHECK_EQ_U64(q.devices, 2);
	/* Device 1's stream is still open at 100: busy 2-100; device 0's 10-20. */
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 98 * US);
	c = call(DL_API_DEVICE_SYNC, 30 * US, 40 * US, 0, 0, 1, true);
	CHECK(feed(&q, c) == DL_DEVQ_COMPUTE, "device 1's sync waited on its kernel");
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 38 * US);
	for (size_t i = 0; i < q.streams.n; i++)
		CHECK(dl_devq_stream_dev(&q, i) == (q.streams.v[i].key == 1 ? 0u : 1u), "stream %zu's device", i);
	dl_devq_free(&q);
}

/*
 * Stream flags: a blocking stream (cudaStreamCreate) and a non-blocking one,
 * each with a kernel (0, 5 us); a synchronous copy on the legacy stream at
 * 10-30 waits for the blocking one only, so it drains that one and leaves the
 * non-blocking one open.
 */
static void test_stream_flags(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;

	feed(&q, with(call(DL_API_STREAM_CREATE, 0, 0, 0, 0, 1, true), 0x1000, 0));
	feed(&q, with(call(DL_API_STREAM_CREATE_FLAGS, 0, 0, 0, 0, 1, true), 0x2000, 1));
	feed(&q, launch(0, 0x1000, 1, DL_API_LAUNCH_KERNEL));
	feed(&q, launch(5 * US, 0x2000, 1, DL_API_LAUNCH_KERNEL));
	c = copy(10 * US, 30 * US, DL_DIR_D2H, false, true);
	feed(&q, c);
	/* Blocking: 0-30; non-blocking: 5-100 (open); the copy's own legacy span 10-30. */
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 100 * US);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 4 * US), 4 * US);
	{
		struct dl_span *v;
		size_t n = dl_devq_stream_spans(&q, 0, 100 * US, &v), open = 0;

		for (size_t i = 0; i < n; i++)
			open += v[i].end == 100 * US;
		CHECK(n == 3 && open == 1, "%zu spans, %zu open: only the non-blocking stream stays open", n, open);
		free(v);
	}
	dl_devq_free(&q);
}

/*
 * Capture: between begin and end, 3 launches on the capturing stream are
 * recorded (no device work, seen as captured); its graph (0x9000) holds 3
 * kernels, the exec instantiated from it (0xa000) too, plus one added node
 * in a graph built by hand (0xb000 -> exec 0xc000). A launch of the legacy
 * stream beside a capturing blocking stream is refused; beside a known
 * non-blocking one it runs. Graph launches are device work with their counts.
 */
static void test_capture(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;
	struct dl_devq_seen seen;

	feed(&q, with(call(DL_API_STREAM_CREATE_FLAGS, 0, 0, 0, 0, 1, true), 0x1000, 1));
	feed(&q, call(DL_API_BEGIN_CAPTURE, 1 * US, 2 * US, 0x1000, 0, 1, true));
	for (int i = 0; i < 3; i++) {
		c = launch((3 + (uint64_t)i) * US, 0x1000, 1, DL_API_LAUNCH_KERNEL);
		feed(&q, c);
		seen = dl_devq_seen(&q, &c);
		CHECK(seen.captured, "launch %d recorded, not run", i);
	}
	c = launch(7 * US, 0, 1, DL_API_LAUNCH_KERNEL);
	feed(&q, c);
	CHECK(!dl_devq_seen(&q, &c).captured, "the legacy stream beside a non-blocking capture runs");
	feed(&q, with(call(DL_API_END_CAPTURE, 8 * US, 9 * US, 0x1000, 0, 1, true), 0x9000, 0));
	feed(&q, with(call(DL_API_GRAPH_INSTANTIATE, 10 * US, 11 * US, 0, 0, 1, true), 0xa000, 0x9000));
	feed(&q, with(call(DL_API_GRAPH_ADD_KERNEL_NODE, 12 * US, 13 * US, 0, 0, 1, true), 0xd000, 0xb000));
	feed(&q, with(call(DL_API_GRAPH_INSTANTIATE, 14 * US, 15 * US, 0, 0, 1, true), 0xc000, 0xb000));
	/* Only the legacy launch at 7 was device work so far. */
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 8 * US), 1 * US);
	c = with(launch(20 * US, 0x1000, 1, DL_API_GRAPH_LAUNCH), 0xa000, 0);
	c.cls = DL_CLS_GRAPH;
	feed(&q, c);
	seen = dl_devq_seen(&q, &c);
	CHECK(!seen.captured && seen.graph_kernels == 3, "the captured graph's launch holds 3 kernels (%u)",
	      seen.graph_kernels);
	c.ptr = 0xc000;
	CHECK(dl_devq_seen(&q, &c).graph_kernels == 1, "the hand-built graph's, 1");
	/* A blocking stream's capture refuses the legacy stream's work. */
	feed(&q, with(call(DL_API_STREAM_CREATE, 30 * US, 30 * US, 0, 0, 1, true), 0x3000, 0));
	feed(&q, call(DL_API_BEGIN_CAPTURE, 31 * US, 32 * US, 0x3000, 0, 1, true));
	c = launch(33 * US, 0, 1, DL_API_LAUNCH_KERNEL);
	feed(&q, c);
	CHECK(dl_devq_seen(&q, &c).captured, "the legacy stream beside a blocking capture is refused");
	dl_devq_free(&q);
}

/* A drain's call woke at 38 us and returned at 45: the work it proved done ended by 38. */
static void test_drained_by_wake_up(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;

	feed(&q, launch(0, 0, 1, DL_API_LAUNCH_KERNEL));
	c = call(DL_API_DEVICE_SYNC, 10 * US, 45 * US, 0, 0, 1, true);
	dl_devq_call(&q, &c);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 45 * US);
	dl_devq_drained_by(&q, 45 * US, 38 * US);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 38 * US);
	/* Never woken (spinning): nothing moves. */
	dl_devq_drained_by(&q, 38 * US, 0);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 38 * US);
	dl_devq_free(&q);
}

static struct dl_devq_call collective(uint64_t start, uint64_t end, uint64_t stream, bool ok)
{
	return call(DL_API_NCCL_ALL_REDUCE, start, end, stream, 0, 1, ok);
}

/*
 * What a wait waits for last decides gpu_wait or comm_wait. On the legacy
 * stream: a collective alone, then a collective behind kernels (comm, but
 * part of it may be compute), then kernels behind a collective (compute).
 * Every drain is a stream sync that returned; a failed collective enqueues
 * nothing; a collective on a side stream joined by an event is what a
 * sync of the legacy stream waits on last, unless kernels follow the join.
 */
static void test_collectives(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call sync;

	feed(&q, collective(0, 5 * US, 0, true));
	sync = call(DL_API_STREAM_SYNC, 10 * US, 100 * US, 0, 0, 1, true);
	CHECK(dl_devq_call(&q, &sync) == DL_DEVQ_COMM, "a collective alone: comm");
	/* Busy at most from its enqueue to the sync's return. */
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 200 * US), 100 * US);

	feed(&q, launch(200 * US, 0, 1, DL_API_LAUNCH_KERNEL));
	feed(&q, collective(210 * US, 215 * US, 0, true));
	sync = call(DL_API_STREAM_SYNC, 220 * US, 300 * US, 0, 0, 1, true);
	CHECK(dl_devq_call(&q, &sync) == DL_DEVQ_COMM_AFTER, "a collective behind a kernel: comm, after compute");

	feed(&q, collective(400 * US, 405 * US, 0, true));
	feed(&q, launch(410 * US, 0, 1, DL_API_LAUNCH_KERNEL));
	sync = call(DL_API_STREAM_SYNC, 420 * US, 500 * US, 0, 0, 1, true);
	CHECK(dl_devq_call(&q, &sync) == DL_DEVQ_COMPUTE, "a kernel behind a collective: compute");

	feed(&q, collective(600 * US, 601 * US, 0, false));
	sync = call(DL_API_STREAM_SYNC, 610 * US, 611 * US, 0, 0, 1, true);
	CHECK(dl_devq_call(&q, &sync) == DL_DEVQ_EMPTY, "a collective that failed enqueued nothing");

	/* NCCL's own stream (0xc000), joined to stream 0xa000 by an event: a sync of 0xa000 waits on it. */
	feed(&q, collective(700 * US, 705 * US, 0xc000, true));
	feed(&q, call(DL_API_EVENT_RECORD, 706 * US, 707 * US, 0xc000, 0xe1, 1, true));
	feed(&q, call(DL_API_STREAM_WAIT_EVENT, 708 * US, 709 * US, 0xa000, 0xe1, 1, true));
	sync = call(DL_API_STREAM_SYNC, 710 * US, 800 * US, 0xa000, 0, 1, true);
	CHECK(dl_devq_call(&q, &sync) == DL_DEVQ_COMM, "the joined collective is what the stream waited on");
	/* The sync proved the collective done: the NCCL stream is empty after it. */
	sync = call(DL_API_STREAM_SYNC, 810 * US, 811 * US, 0xc000, 0, 1, true);
	CHECK(dl_devq_call(&q, &sync) == DL_DEVQ_EMPTY, "the NCCL stream drained through the event");
	/* Kernels on the stream after the join: compute is what it waits on last. */
	feed(&q, collective(900 * US, 905 * US, 0xc000, true));
	feed(&q, call(DL_API_EVENT_RECORD, 906 * US, 907 * US, 0xc000, 0xe1, 1, true));
	feed(&q, call(DL_API_STREAM_WAIT_EVENT, 908 * US, 909 * US, 0xa000, 0xe1, 1, true));
	feed(&q, launch(910 * US, 0xa000, 1, DL_API_LAUNCH_KERNEL));
	sync = call(DL_API_STREAM_SYNC, 920 * US, 990 * US, 0xa000, 0, 1, true);
	CHECK(dl_devq_call(&q, &sync) == DL_DEVQ_COMPUTE, "kernels after the join: compute");
	dl_devq_free(&q);
}

/*
 * Per-stream spans: A (0xa000) opens at 0 and is synced 40-50 us, B (0xb000)
 * opens at 20 and stays open. In 0-100 us: A 0-50 (the sync's return), B
 * 20-100 (open to the interval's end); the union, 0-100, is the upper bound.
 * A second launch on A at 60 and a sync 70-80: A's spans stay apart, 0-50
 * and 60-80. Forgetting before 55 drops A's first span only (B is open).
 */
static void test_stream_spans(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;
	struct dl_span *v;
	size_t n;

	feed(&q, launch(0, 0xa000, 1, DL_API_LAUNCH_KERNEL));
	feed(&q, launch(20 * US, 0xb000, 1, DL_API_LAUNCH_KERNEL));
	c = call(DL_API_STREAM_SYNC, 40 * US, 50 * US, 0xa000, 0, 1, true);
	dl_devq_call(&q, &c);
	feed(&q, launch(60 * US, 0xa000, 1, DL_API_LAUNCH_KERNEL));
	c = call(DL_API_STREAM_SYNC, 70 * US, 80 * US, 0xa000, 0, 1, true);
	dl_devq_call(&q, &c);
	n = dl_devq_stream_spans(&q, 0, 100 * US, &v);
	CHECK_EQ_U64(n, 3);
	if (n == 3) {
		/* By stream (A is index 0, B index 1), then start. */
		CHECK(v[0].kind == 0 && v[0].start == 0 && v[0].end == 50 * US, "A's first span");
		CHECK(v[1].kind == 0 && v[1].start == 60 * US && v[1].end == 80 * US, "A's second span");
		CHECK(v[2].kind == 1 && v[2].start == 20 * US && v[2].end == 100 * US, "B open to the end");
		CHECK(q.streams.v[v[2].kind].key == 0xb000, "kind names B's index");
	}
	free(v);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 100 * US), 100 * US);
	/* The enqueues that began them, by stream: A's at 0 and 60 (thread 1's launches), B's at 20; in 10-100, not A's first. */
	{
		struct dl_devq_open *o;
		size_t no = dl_devq_opens(&q, 0, 100 * US, &o);

		CHECK(no == 3 && o[0].at == 0 && o[1].at == 60 * US && o[2].at == 20 * US && o[2].stream == 1 &&
			      o[0].tid == 1,
		      "opens");
		free(o);
		no = dl_devq_opens(&q, 10 * US, 100 * US, &o);
		CHECK(no == 2 && o[0].at == 60 * US, "opens from 10 us");
		free(o);
	}
	/* Clipped to 30-65: A 30-50 and 60-65, B 30-65. */
	n = dl_devq_stream_spans(&q, 30 * US, 65 * US, &v);
	CHECK(n == 3 && v[0].start == 30 * US && v[0].end == 50 * US && v[1].end == 65 * US && v[2].start == 30 * US,
	      "clipped spans");
	free(v);
	dl_devq_forget_before(&q, 55 * US);
	n = dl_devq_stream_spans(&q, 0, 100 * US, &v);
	CHECK(n == 2 && v[0].start == 60 * US && v[1].kind == 1, "forgotten: A's first span only");
	free(v);
	dl_devq_free(&q);
}

/* The most busy time [a, b) of device dev's streams. */
static uint64_t dev_upper(const struct dl_devq *q, uint64_t a, uint64_t b, uint32_t dev)
{
	struct dl_span *v;
	size_t n = dl_devq_stream_spans(q, a, b, &v), w = 0;
	uint64_t busy;

	for (size_t i = 0; i < n; i++)
		if (dl_devq_stream_dev(q, v[i].kind) == dev)
			v[w++] = (struct dl_span){ v[i].start, v[i].end, 0 };
	w = dl_spans_union(v, w);
	busy = dl_spans_overlap(v, w, a, b);
	free(v);
	return busy;
}

static struct dl_devq_call peer(enum dl_api_id api, uint64_t start, uint64_t end, uint64_t stream, uint32_t dst,
				uint32_t src)
{
	struct dl_devq_call c = with(call(api, start, end, stream, 0, 1, true), dst, src);

	c.dir = DL_DIR_D2D;
	c.async = api == DL_API_MEMCPY_PEER_ASYNC || api == DL_API_CU_MEMCPY_PEER_ASYNC;
	return c;
}

/*
 * Peer copies are work on both devices. cudaMemcpyPeer (1 -> 0) at 6 us runs
 * after both legacy streams' kernels (device 1's at 2, device 0's at 4) and
 * returns at once; device 1's sync (10-30) proves it done, and with it device
 * 0's kernel before it: device 0 is busy at most 4-30, device 1 2-30 (without
 * the copy's tie device 0 would stay open to 100). cudaMemcpyPeerAsync (0 ->
 * 1) on a stream of device 0 at 45, behind its kernel at 40: device 1's side
 * of it stays open past device 1's own sync (50-55, which may not wait for
 * another device's stream) and ends with its stream's sync (60-70).
 */
static void test_peer_copies(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;

	feed(&q, with(call(DL_API_SET_DEVICE, 0, 1 * US, 0, 0, 1, true), 1, 0));
	feed(&q, launch(2 * US, 0, 1, DL_API_LAUNCH_KERNEL));
	feed(&q, with(call(DL_API_SET_DEVICE, 3 * US, 3 * US, 0, 0, 1, true), 0, 0));
	feed(&q, launch(4 * US, 0, 1, DL_API_LAUNCH_KERNEL));
	CHECK(feed(&q, peer(DL_API_MEMCPY_PEER, 6 * US, 7 * US, 0, 0, 1)) == DL_DEVQ_EMPTY,
	      "cudaMemcpyPeer does not block");
	feed(&q, with(call(DL_API_SET_DEVICE, 8 * US, 8 * US, 0, 0, 1, true), 1, 0));
	CHECK(feed(&q, call(DL_API_DEVICE_SYNC, 10 * US, 30 * US, 0, 0, 1, true)) == DL_DEVQ_COMPUTE,
	      "device 1's sync waits on its kernel and the copy");
	CHECK_EQ_U64(dev_upper(&q, 0, 35 * US, 1), 28 * US);
	CHECK_EQ_U64(dev_upper(&q, 0, 35 * US, 0), 26 * US);

	feed(&q, with(call(DL_API_SET_DEVICE, 36 * US, 36 * US, 0, 0, 1, true), 0, 0));
	feed(&q, with(call(DL_API_STREAM_CREATE, 37 * US, 38 * US, 0, 0, 1, true), 0x1000, 0));
	feed(&q, launch(40 * US, 0x1000, 1, DL_API_LAUNCH_KERNEL));
	feed(&q, peer(DL_API_MEMCPY_PEER_ASYNC, 45 * US, 46 * US, 0x1000, 1, 0));
	feed(&q, with(call(DL_API_SET_DEVICE, 47 * US, 47 * US, 0, 0, 1, true), 1, 0));
	CHECK(feed(&q, call(DL_API_DEVICE_SYNC, 50 * US, 55 * US, 0, 0, 1, true)) == DL_DEVQ_TRANSFERS,
	      "device 1 holds the copy's side");
	CHECK_EQ_U64(dev_upper(&q, 36 * US, 100 * US, 1), 55 * US);
	feed(&q, call(DL_API_STREAM_SYNC, 60 * US, 70 * US, 0x1000, 0, 1, true));
	CHECK_EQ_U64(dev_upper(&q, 36 * US, 100 * US, 1), 25 * US);
	CHECK_EQ_U64(dev_upper(&q, 36 * US, 100 * US, 0), 30 * US);
	/* The driver's copy names contexts: one never seen made gives the copy no second device. */
	c = peer(DL_API_CU_MEMCPY_PEER_ASYNC, 80 * US, 81 * US, 0x1000, 0xc1, 0xc0);
	feed(&q, c);
	CHECK_EQ_U64(dev_upper(&q, 80 * US, 100 * US, 1), 0);
	CHECK_EQ_U64(dev_upper(&q, 80 * US, 100 * US, 0), 20 * US);
	dl_devq_free(&q);
}

/*
 * A capture that forks: stream 0x1000 captures 1 kernel, records event 0xe1
 * (in the capture), 0x2000 waits on it and so joins: its 2 kernels are
 * recorded too (no device work), then joins back (0xe2 recorded on it, waited
 * on by 0x1000), 1 more kernel on 0x1000; the graph ends with all 4. After
 * the end, 0x2000's kernels run again. An event recorded outside a capture
 * still makes an ordinary edge.
 */
static void test_capture_fork(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;
	int captured = 0;

	feed(&q, with(call(DL_API_STREAM_CREATE, 0, 0, 0, 0, 1, true), 0x1000, 0));
	feed(&q, with(call(DL_API_STREAM_CREATE, 0, 0, 0, 0, 1, true), 0x2000, 0));
	feed(&q, call(DL_API_BEGIN_CAPTURE, 1 * US, 2 * US, 0x1000, 0, 1, true));
	c = launch(3 * US, 0x1000, 1, DL_API_LAUNCH_KERNEL);
	feed(&q, c);
	captured += dl_devq_seen(&q, &c).captured;
	feed(&q, call(DL_API_EVENT_RECORD, 4 * US, 4 * US, 0x1000, 0xe1, 1, true));
	feed(&q, call(DL_API_STREAM_WAIT_EVENT, 5 * US, 5 * US, 0x2000, 0xe1, 1, true));
	for (int i = 0; i < 2; i++) {
		c = launch((6 + (uint64_t)i) * US, 0x2000, 1, DL_API_LAUNCH_KERNEL);
		feed(&q, c);
		captured += dl_devq_seen(&q, &c).captured;
	}
	feed(&q, call(DL_API_EVENT_RECORD, 8 * US, 8 * US, 0x2000, 0xe2, 1, true));
	feed(&q, call(DL_API_STREAM_WAIT_EVENT, 9 * US, 9 * US, 0x1000, 0xe2, 1, true));
	c = launch(10 * US, 0x1000, 1, DL_API_LAUNCH_KERNEL);
	feed(&q, c);
	captured += dl_devq_seen(&q, &c).captured;
	CHECK(captured == 4, "the 4 kernels of both streams recorded, not run (%d)", captured);
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 0, 11 * US), 0);
	feed(&q, with(call(DL_API_END_CAPTURE, 11 * US, 12 * US, 0x1000, 0, 1, true), 0x9000, 0));
	feed(&q, with(call(DL_API_GRAPH_INSTANTIATE, 13 * US, 14 * US, 0, 0, 1, true), 0xa000, 0x9000));
	c = with(launch(20 * US, 0x1000, 1, DL_API_GRAPH_LAUNCH), 0xa000, 0);
	c.cls = DL_CLS_GRAPH;
	feed(&q, c);
	CHECK(dl_devq_seen(&q, &c).graph_kernels == 4, "the graph holds the forked kernels too (%u of 4)",
	      dl_devq_seen(&q, &c).graph_kernels);
	c = launch(30 * US, 0x2000, 1, DL_API_LAUNCH_KERNEL);
	feed(&q, c);
	CHECK(!dl_devq_seen(&q, &c).captured, "the forked stream left the capture with it");
	/* Outside a capture an event is an edge: 0x1000's sync (40-50) drains 0x2000's kernel at 30 too, so of
	 * [25, 100) only 25-50 may be busy (the graph from 20, the kernel from 30). */
	feed(&q, call(DL_API_EVENT_RECORD, 31 * US, 31 * US, 0x2000, 0xe3, 1, true));
	feed(&q, call(DL_API_STREAM_WAIT_EVENT, 32 * US, 32 * US, 0x1000, 0xe3, 1, true));
	feed(&q, call(DL_API_STREAM_SYNC, 40 * US, 50 * US, 0x1000, 0, 1, true));
	CHECK_EQ_U64(dl_devq_busy_upper(&q, 25 * US, 100 * US), 25 * US);
	dl_devq_free(&q);
}

/*
 * The driver's current context: primary contexts of devices 1 (0xc1) and 0
 * (0xc0) retained, 0xc1 pushed: launches and streams are device 1's; a
 * context created on device 2 is pushed on top; pops come back down to
 * device 1, then 0; setting 0xc1 makes it 1 again, and setting NULL pops an
 * empty stack (nothing changes).
 */
static void test_contexts(void)
{
	struct dl_devq q = { 0 };
	struct dl_devq_call c;
	uint32_t want[] = { 1, 2, 1, 0, 1, 1 };
	size_t k = 0;

#define LAUNCH_DEV()                                                                                         \
	do {                                                                                                   \
		c = launch((10 + k) * US, 0, 1, DL_API_LAUNCH_KERNEL);                                         \
		feed(&q, c);                                                                                   \
		CHECK(dl_devq_seen(&q, &c).dev == want[k], "launch %zu on device %u (%u)", k, want[k],         \
		      dl_devq_seen(&q, &c).dev);                                                               \
		k++;                                                                                           \
	} while (0)
	feed(&q, with(call(DL_API_CU_PRIMARY_CTX_RETAIN, 0, 0, 0, 0, 1, true), 0xc1, 1));
	feed(&q, with(call(DL_API_CU_PRIMARY_CTX_RETAIN, 0, 0, 0, 0, 1, true), 0xc0, 0));
	feed(&q, with(call(DL_API_CU_CTX_PUSH_CURRENT_V2, 1 * US, 1 * US, 0, 0, 1, true), 0xc1, 0));
	feed(&q, with(call(DL_API_CU_STREAM_CREATE, 2 * US, 2 * US, 0, 0, 1, true), 0x1000, 0));
	LAUNCH_DEV();
	feed(&q, with(call(DL_API_CU_CTX_CREATE_V4, 3 * US, 3 * US, 0, 0, 1, true), 0xc2, 2));
	LAUNCH_DEV();
	feed(&q, call(DL_API_CU_CTX_POP_CURRENT_V2, 4 * US, 4 * US, 0, 0, 1, true));
	LAUNCH_DEV();
	feed(&q, call(DL_API_CU_CTX_POP_CURRENT_V2, 5 * US, 5 * US, 0, 0, 1, true));
	LAUNCH_DEV();
	feed(&q, with(call(DL_API_CU_CTX_SET_CURRENT, 6 * US, 6 * US, 0, 0, 1, true), 0xc1, 0));
	LAUNCH_DEV();
	feed(&q, with(call(DL_API_CU_CTX_SET_CURRENT, 7 * US, 7 * US, 0, 0, 1, true), 0, 0));
	LAUNCH_DEV();
#undef LAUNCH_DEV
	for (size_t i = 0; i < q.streams.n; i++)
		if (q.streams.v[i].key == 0x1000)
			CHECK(dl_devq_stream_dev(&q, i) == 1, "the stream made under 0xc1 is device 1's");
	CHECK_EQ_U64(q.devices, 3);
	/* A push of a context never seen made keeps the device; its pop comes back to it. */
	feed(&q, with(call(DL_API_CU_CTX_PUSH_CURRENT_V2, 30 * US, 30 * US, 0, 0, 1, true), 0xdead, 0));
	c = launch(31 * US, 0, 1, DL_API_LAUNCH_KERNEL);
	feed(&q, c);
	CHECK(dl_devq_seen(&q, &c).dev == 1, "an unknown context leaves the device");
	dl_devq_free(&q);
}

int main(void)
{
	test_stream_spans();
	test_legacy_vs_per_thread();
	test_lower_bound_spin();
	test_lower_bound_spin_pageable();
	test_lower_bound_spin_resumed();
	test_polling_learnt();
	test_devices();
	test_stream_flags();
	test_capture();
	test_peer_copies();
	test_capture_fork();
	test_contexts();
	test_event_edge_across_streams();
	test_query_drains();
	test_drain_never_seen();
	test_sync_copies();
	test_lower_bound();
	test_drained_by_wake_up();
	test_collectives();
	return check_report("test_devqueue");
}
