// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The inferred device timeline of a step (analysis/gputime.h) on synthetic
 * spans: the idle split and the busy/maybe slices per stream, every expected
 * number worked out by hand from the spans below.
 */
#include <stdlib.h>
#include <string.h>
#include "analysis/gputime.h"
#include "check.h"
#include "dlbpf/events.h"

#define US 1000ull
#define KEY_A 0xa000ull
#define KEY_B 0xb000ull

static const uint64_t keys[] = { KEY_A, KEY_B };

static uint64_t idle_sum(const uint64_t idle[DL_IDLE_COUNT])
{
	return idle[DL_IDLE_HOST] + idle[DL_IDLE_INPUT] + idle[DL_IDLE_SYNC];
}

static void check_span(const struct dl_gpu_span *got, uint64_t start, uint64_t end, uint8_t kind, uint64_t stream,
		       uint8_t idle)
{
	CHECK(got->start == start && got->end == end && got->kind == kind && got->stream == stream &&
		      (kind != DL_GS_IDLE || got->idle == idle),
	      "span %llu-%llu kind %u stream %llx idle %u, want %llu-%llu kind %u stream %llx idle %u",
	      (unsigned long long)got->start, (unsigned long long)got->end, got->kind, (unsigned long long)got->stream,
	      got->idle, (unsigned long long)start, (unsigned long long)end, kind, (unsigned long long)stream, idle);
}

/*
 * A step of 0-100 us, every idle part in it. Stream A opens at a launch at 10
 * and is drained by a sync 20-50 whose thread slept 22-40 (the span ends at
 * the wake-up, 40; the sync waited from its entry, so 20-40 is the lower bound).
 *   0-10   running, no call           idle, host       10
 *  10-40   stream A may hold work     busy             30 (10-20 maybe, 20-40 certain)
 *  40-50   still inside the sync      idle, sync       10
 *  50-60   running                    idle, host       10
 *  60-65   cudaMalloc (not blocking)  idle, host        5
 *  65-90   asleep outside any call    idle, input      25
 *  90-95   runnable                   idle, host        5
 *  95-100  no scheduler record        idle, host        5
 * Idle: host 35, input 25, sync 10 = 70 = 100 - 30.
 */
static void test_each_part(void)
{
	struct dl_span streams[] = { { 10 * US, 40 * US, 0 } };
	struct dl_span lower[] = { { 20 * US, 40 * US, 0 } };
	struct dl_span blocking[] = { { 20 * US, 50 * US, 0 } };
	struct dl_span cuda[] = { { 10 * US, 12 * US, DL_CAT_LAUNCH }, { 20 * US, 50 * US, DL_CAT_GPU_WAIT },
				  { 60 * US, 65 * US, DL_CAT_CUDA_OTHER } };
	struct dl_span sched[] = { { 0, 22 * US, DL_ST_RUNNING }, { 22 * US, 40 * US, DL_ST_SLEEP },
				   { 40 * US, 65 * US, DL_ST_RUNNING }, { 65 * US, 90 * US, DL_ST_SLEEP },
				   { 90 * US, 95 * US, DL_ST_RUNQ } };
	struct dl_gpu_input in = { .start = 0, .end = 100 * US, .streams = streams, .nstreams = 1, .keys = keys,
				   .lower = lower, .nlower = 1, .blocking = blocking, .nblocking = 1, .cuda = cuda,
				   .ncuda = 3, .sched = sched, .nsched = 5 };
	uint64_t idle[DL_IDLE_COUNT];
	struct dl_gpu_span *v;
	size_t n = dl_gpu_timeline(&in, idle, &v);

	CHECK_EQ_U64(idle[DL_IDLE_HOST], 35 * US);
	CHECK_EQ_U64(idle[DL_IDLE_INPUT], 25 * US);
	CHECK_EQ_U64(idle[DL_IDLE_SYNC], 10 * US);
	CHECK_EQ_U64(idle_sum(idle), 100 * US - 30 * US);
	/* Neighbours of one kind are one slice: 50-60 running and 60-65 in cudaMalloc are both host. */
	CHECK_EQ_U64(n, 7);
	if (n == 7) {
		check_span(&v[0], 0, 10 * US, DL_GS_IDLE, 0, DL_IDLE_HOST);
		check_span(&v[1], 10 * US, 20 * US, DL_GS_MAYBE, KEY_A, 0);
		check_span(&v[2], 20 * US, 40 * US, DL_GS_BUSY, KEY_A, 0);
		check_span(&v[3], 40 * US, 50 * US, DL_GS_IDLE, 0, DL_IDLE_SYNC);
		check_span(&v[4], 50 * US, 65 * US, DL_GS_IDLE, 0, DL_IDLE_HOST);
		check_span(&v[5], 65 * US, 90 * US, DL_GS_IDLE, 0, DL_IDLE_INPUT);
		check_span(&v[6], 90 * US, 100 * US, DL_GS_IDLE, 0, DL_IDLE_HOST);
	}
	free(v);

	/* The same spans cut at 30-70 us: busy 30-40; idle 40-50 sync, 50-65 host, 65-70 input: 30 = 40 - 10. */
	in.start = 30 * US;
	in.end = 70 * US;
	n = dl_gpu_timeline(&in, idle, &v);
	CHECK_EQ_U64(idle[DL_IDLE_SYNC], 10 * US);
	CHECK_EQ_U64(idle[DL_IDLE_HOST], 15 * US);
	CHECK_EQ_U64(idle[DL_IDLE_INPUT], 5 * US);
	/* Slices stay inside the cut: the busy one starts at 30, the last idle one ends at 70. */
	CHECK_EQ_U64(n, 4);
	if (n == 4) {
		check_span(&v[0], 30 * US, 40 * US, DL_GS_BUSY, KEY_A, 0);
		check_span(&v[3], 65 * US, 70 * US, DL_GS_IDLE, 0, DL_IDLE_INPUT);
	}
	free(v);
}

/*
 * Two streams in 0-100 us: A may hold work 10-60, B 30-50; a host thread was
 * blocked on work 20-55. Certain only where one stream alone may hold work:
 * A 20-30 and 50-55; 30-50 either may have run (maybe on both). Idle 0-10 and
 * 60-100 with nothing known of the thread: host 50 = 100 - 50 (the union 10-60).
 */
static void test_overlapping_streams(void)
{
	struct dl_span streams[] = { { 10 * US, 60 * US, 0 }, { 30 * US, 50 * US, 1 } };
	struct dl_span lower[] = { { 20 * US, 55 * US, 0 } };
	struct dl_gpu_input in = { .start = 0, .end = 100 * US, .streams = streams, .nstreams = 2, .keys = keys,
				   .lower = lower, .nlower = 1 };
	uint64_t idle[DL_IDLE_COUNT];
	struct dl_gpu_span *v;
	size_t n = dl_gpu_timeline(&in, idle, &v);

	CHECK_EQ_U64(idle[DL_IDLE_HOST], 50 * US);
	CHECK_EQ_U64(idle_sum(idle), 50 * US);
	CHECK_EQ_U64(n, 8);
	if (n == 8) {
		/* By start; at 30 us A's before B's (stream keys in order). */
		check_span(&v[0], 0, 10 * US, DL_GS_IDLE, 0, DL_IDLE_HOST);
		check_span(&v[1], 10 * US, 20 * US, DL_GS_MAYBE, KEY_A, 0);
		check_span(&v[2], 20 * US, 30 * US, DL_GS_BUSY, KEY_A, 0);
		check_span(&v[3], 30 * US, 50 * US, DL_GS_MAYBE, KEY_A, 0);
		check_span(&v[4], 30 * US, 50 * US, DL_GS_MAYBE, KEY_B, 0);
		check_span(&v[5], 50 * US, 55 * US, DL_GS_BUSY, KEY_A, 0);
		check_span(&v[6], 55 * US, 60 * US, DL_GS_MAYBE, KEY_A, 0);
		check_span(&v[7], 60 * US, 100 * US, DL_GS_IDLE, 0, DL_IDLE_HOST);
	}
	free(v);
}

/*
 * A sync on empty queues 40-60 us, asleep in it 45-60 (a blocking runtime
 * sleeps even with nothing to wait for): every queue known empty, so all of
 * it is sync overhead, and the thread's sleep inside the call is not input.
 * Nothing else is known: host 80. No busy slice.
 */
static void test_sync_on_empty_queue(void)
{
	struct dl_span blocking[] = { { 40 * US, 60 * US, 0 } };
	struct dl_span cuda[] = { { 40 * US, 60 * US, DL_CAT_CUDA_OTHER } };
	struct dl_span sched[] = { { 45 * US, 60 * US, DL_ST_SLEEP } };
	struct dl_gpu_input in = { .start = 0, .end = 100 * US, .keys = keys, .blocking = blocking, .nblocking = 1,
				   .cuda = cuda, .ncuda = 1, .sched = sched, .nsched = 1 };
	uint64_t idle[DL_IDLE_COUNT];
	struct dl_gpu_span *v;
	size_t n = dl_gpu_timeline(&in, idle, &v);

	CHECK_EQ_U64(idle[DL_IDLE_SYNC], 20 * US);
	CHECK_EQ_U64(idle[DL_IDLE_INPUT], 0);
	CHECK_EQ_U64(idle[DL_IDLE_HOST], 80 * US);
	CHECK_EQ_U64(n, 3);
	if (n == 3)
		check_span(&v[1], 40 * US, 60 * US, DL_GS_IDLE, 0, DL_IDLE_SYNC);
	free(v);
}

/*
 * The enqueues that began spans, inside the step only: A's at 10 by thread 7
 * becomes a mark on A at 10; one at 120, past the step's end, is left out.
 * The mark keeps A's 10-40 span whole (it is added after the merge).
 */
static void test_enqueue_marks(void)
{
	struct dl_span streams[] = { { 10 * US, 40 * US, 0 } };
	struct dl_devq_open opens[] = { { 10 * US, 0, 7 }, { 120 * US, 0, 7 } };
	struct dl_gpu_input in = { .start = 0, .end = 100 * US, .streams = streams, .nstreams = 1, .keys = keys,
				   .opens = opens, .nopens = 2 };
	uint64_t idle[DL_IDLE_COUNT];
	struct dl_gpu_span *v;
	size_t n = dl_gpu_timeline(&in, idle, &v), marks = 0, maybe = 0;

	for (size_t i = 0; i < n; i++) {
		if (v[i].kind == DL_GS_ENQUEUE) {
			marks++;
			CHECK(v[i].start == 10 * US && v[i].end == 10 * US && v[i].stream == KEY_A && v[i].tid == 7,
			      "the mark at A's enqueue");
		}
		if (v[i].kind == DL_GS_MAYBE) {
			maybe++;
			CHECK(v[i].start == 10 * US && v[i].end == 40 * US, "A's span whole");
		}
	}
	CHECK_EQ_U64(marks, 1);
	CHECK_EQ_U64(maybe, 1);
	/* Sorted by start: the idle 0-10 first. */
	CHECK(n == 4 && v[0].kind == DL_GS_IDLE && v[0].end == 10 * US, "by start");
	CHECK_EQ_U64(idle[DL_IDLE_HOST], 70 * US);
	free(v);
}

int main(void)
{
	test_enqueue_marks();
	test_each_part();
	test_overlapping_streams();
	test_sync_on_empty_queue();
	return check_report("test_gputime");
}
