// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The flight recorder's window (records/flight.c): a dump replays as a
 * recording; it holds every record of the last window, in stream order, after
 * the naming records from before it; what the byte budget pushed out early is
 * counted; the end record counts the drops since the window began. And its
 * triggers (analysis/trigger.c): a step over K times the running median once
 * the median has enough steps; a verdict that changes from one half window to
 * the next.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "analysis/trigger.h"
#include "records/flight.h"
#include "records/record.h"
#include "records/stream.h"

#define SEC 1000000000ull

struct seen {
	size_t n, cap;
	struct { uint16_t kind; uint64_t ts; } *v;
	uint64_t end_drops[DL_DROP_MAX];
};

static int collect(void *ctx, const struct dl_rec *r)
{
	struct seen *s = ctx;

	if (r->h->kind == DL_EV_TRACE_END)
		memcpy(s->end_drops, ((const struct dl_trace_end_ev *)r->h)->drops, sizeof(s->end_drops));
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			abort();
	}
	s->v[s->n].kind = r->h->kind;
	s->v[s->n].ts = r->h->ts;
	s->n++;
	return 0;
}

static void feed(struct dl_flight *f, uint64_t *seq, const void *rec)
{
	struct dl_rec r = { .h = rec, .seq = ++*seq };

	dl_flight_sink(f, &r);
}

static struct dl_sched_ev sched_at(uint64_t ts)
{
	struct dl_sched_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_SCHED, .ts = ts, .tgid = 7, .tid = 7 };
	e.dur_ns = 1000;
	e.state = DL_ST_RUNQ;
	return e;
}

static struct seen replay(const char *path)
{
	struct dl_stream s = { 0 };
	struct seen seen = { 0 };
	char err[512] = "";

	dl_stream_add(&s, collect, &seen);
	CHECK(dl_replay(path, &s, NULL, err, sizeof(err)) == 0, "the dump does not replay: %s", err);
	dl_stream_free(&s);
	return seen;
}

/* Five seconds at one record per 100 us into a one-second window: the last second whole, names kept. */
static void test_window(const char *path)
{
	struct dl_flight f;
	struct dl_procinfo_ev pi;
	uint64_t seq = 0, drops[DL_DROP_MAX] = { 0 }, newest = 5 * SEC, step = 100000, recent = 0;
	struct seen seen;
	long n;

	CHECK(dl_flight_init(&f, SEC, 4u << 20) == 0, "init");
	memset(&pi, 0, sizeof(pi));
	pi.h = (struct dl_hdr){ .size = sizeof(pi), .kind = DL_EV_PROCINFO, .ts = 1, .tgid = 7, .tid = 7 };
	memcpy(pi.comm, "job", 4);
	feed(&f, &seq, &pi);
	for (uint64_t ts = step; ts <= newest; ts += step) {
		struct dl_sched_ev e = sched_at(ts);

		feed(&f, &seq, &e);
		recent += ts >= newest - SEC;
		/* Drop counts as the collector reads them: 3 lost early on, 7 more near the end. */
		if (ts == SEC / 2 || ts == 4 * SEC + SEC / 5) {
			drops[DL_DROP_SCHED] = ts == SEC / 2 ? 3 : 10;
			dl_flight_drops(&f, ts, drops);
		}
	}
	drops[DL_DROP_SCHED] = 12;
	CHECK_EQ_U64(f.evicted_early, 0);
	n = dl_flight_dump(&f, path, DL_REC_VERBATIM, newest, drops);
	seen = replay(path);
	CHECK(n > 0 && (size_t)n == seen.n, "dump wrote %ld records, replay read %zu", n, seen.n);
	CHECK(seen.n >= 3 && seen.v[0].kind == DL_EV_PROCINFO, "the process's name is not first");
	CHECK(seen.v[seen.n - 1].kind == DL_EV_TRACE_END, "no end record last");
	uint64_t in_window = 0, prev = 0;
	bool ordered = true;

	for (size_t i = 1; i + 1 < seen.n; i++) {
		in_window += seen.v[i].ts >= newest - SEC;
		ordered &= seen.v[i].ts > prev;
		prev = seen.v[i].ts;
	}
	CHECK(in_window == recent, "%llu of the last second's %llu records dumped", (unsigned long long)in_window,
	      (unsigned long long)recent);
	CHECK(ordered, "the window is not in stream order");
	/* Whole chunks leave: at most the chunk that straddles the window's start reaches back before it. */
	CHECK(seen.v[1].ts > step, "nothing left the window: the oldest record is still there");
	/*
	 * The window's oldest record is between 4 s less a chunk and 4 s: the count at 0.5 s is the last one
	 * before it, the one at 4.2 s is after it. 12 - 3 lost while the window filled.
	 */
	CHECK_EQ_U64(seen.end_drops[DL_DROP_SCHED], 9);
	free(seen.v);
	dl_flight_free(&f);
}

/* Faster than the budget holds the window: the oldest go early, are counted, and the newest stay. */
static void test_budget(const char *path)
{
	struct dl_flight f;
	uint64_t seq = 0, drops[DL_DROP_MAX] = { 0 }, records = 200000;
	struct seen seen;
	long n;

	dl_flight_init(&f, 60 * SEC, 4u << 20);
	for (uint64_t i = 1; i <= records; i++) {
		struct dl_sched_ev e = sched_at(i * 1000);

		feed(&f, &seq, &e);
	}
	CHECK(f.evicted_early > 0, "a window over budget lost nothing");
	n = dl_flight_dump(&f, path, DL_REC_COMPACT, records * 1000, drops);
	seen = replay(path);
	CHECK(n > 0 && (size_t)n == seen.n, "dump wrote %ld records, replay read %zu", n, seen.n);
	CHECK_EQ_U64(seen.n - 1 + f.evicted_early, records);   /* all but the end record, and the evicted */
	CHECK(seen.n >= 2 && seen.v[seen.n - 2].ts == records * 1000, "the newest record is not in the dump");
	free(seen.v);
	dl_flight_free(&f);
}

static struct dl_step step_of(uint32_t index, uint64_t start, uint64_t dur, enum dl_cat cat)
{
	struct dl_step st;

	memset(&st, 0, sizeof(st));
	st.index = index;
	st.pid = 7;
	st.start_ns = start;
	st.dur_ns = dur;
	st.cat_ns[cat] = dur;
	return st;
}

static void test_slow_step(void)
{
	struct dl_trigger t;
	char why[160];
	uint64_t at = 0;
	uint32_t i = 0, fired = 0;

	/* Slow first steps (warm-up) never fire: there is no median yet to be slow against. */
	dl_trigger_init(&t, 2.0, false, 10 * SEC);
	for (; i < DL_TRIGGER_MIN_STEPS; i++, at += 50000000) {
		struct dl_step st = step_of(i, at, i == 0 ? 500000000 : 10000000, DL_CAT_GPU_WAIT);

		fired += dl_trigger_step(&t, &st, why, sizeof(why));
	}
	CHECK_EQ_U64(fired, 0);
	/* Against a median of 10 ms: 19.9 ms is not over 2x, 20.2 ms is (the median is kept to 0.4%). */
	struct dl_step near = step_of(i++, at, 19900000, DL_CAT_GPU_WAIT), over = step_of(i++, at, 20200000, DL_CAT_GPU_WAIT);

	CHECK(!dl_trigger_step(&t, &near, why, sizeof(why)), "19.9 ms fired against a 10 ms median: %s", why);
	CHECK(dl_trigger_step(&t, &over, why, sizeof(why)) && strstr(why, "slow-step 9 of pid 7"), "20.2 ms: %s", why);
	dl_trigger_free(&t);
}

static void test_verdict_change(void)
{
	struct dl_trigger t;
	char why[160] = "";
	uint64_t at = 0, ms10 = 10000000;
	int fired = 0, fired_at = -1;

	/* A 2 s window: periods of 1 s; 3 s waiting for the GPU, then 3 s waiting for input. */
	dl_trigger_init(&t, 0, true, 2 * SEC);
	for (int i = 0; i < 600; i++, at += ms10) {
		struct dl_step st = step_of((uint32_t)i, at, ms10, i < 300 ? DL_CAT_GPU_WAIT : DL_CAT_INPUT_WAIT);

		if (dl_trigger_step(&t, &st, why, sizeof(why))) {
			fired++;
			fired_at = i;
		}
	}
	CHECK(fired == 1 && strstr(why, "gpu-bound -> input-bound"), "%d changes, last '%s'", fired, why);
	/*
	 * Seen when the first period that is mostly input waits closes: after the change at step 300, and
	 * within two periods (100 steps each) of it, whichever way the periods fall on the steps.
	 */
	CHECK(fired_at > 300 && fired_at <= 500, "the change fired at step %d", fired_at);
	dl_trigger_free(&t);
}

int main(void)
{
	char path[] = "/tmp/dlbpf-test-flight-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return 1;
	close(fd);
	test_window(path);
	test_budget(path);
	test_slow_step();
	test_verdict_change();
	unlink(path);
	return check_report("test_flight");
}
