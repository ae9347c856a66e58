// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * capture/duty.c on its own: the M/N parser, the on/off schedule and the
 * window bookkeeping (driven through a stand-in for the tracer's hot-probe
 * switch, which reports the attach and detach edges a test chooses), the
 * clipping of windows at the job's end, and the scaled estimate, all against
 * values worked out by hand in the comments.
 */
#include <math.h>
#include "check.h"
#include "capture/duty.h"
#include "records/clock.h"

#define S 1000000000ull
#define MS 1000000ull

/* The stand-in for the tracer: records each switch and answers with the edges the test set. */
static struct {
	int calls;
	bool last_on;
	struct dl_hot_edges next;
} hot;

int dl_tracer_set_hot(struct dl_tracer *t, bool on, struct dl_hot_edges *e)
{
	(void)t;
	hot.calls++;
	hot.last_on = on;
	*e = hot.next;
	return 0;
}

static void set_edges(uint64_t launch_lo, uint64_t launch_hi, uint64_t copy_lo, uint64_t copy_hi)
{
	hot.next.lo[DL_HOT_LAUNCH] = launch_lo;
	hot.next.hi[DL_HOT_LAUNCH] = launch_hi;
	hot.next.lo[DL_HOT_COPY] = copy_lo;
	hot.next.hi[DL_HOT_COPY] = copy_hi;
}

/* Records the collector has not drained yet: the sync callback moves them into the summary. */
struct pending {
	struct dl_summary *s;
	uint64_t launches, syncs;
	int syncs_called;
};

static void sync_pending(void *ctx)
{
	struct pending *p = ctx;
	struct dl_proc *proc = dl_summary_proc(p->s, 42);

	proc->calls[DL_API_LAUNCH_KERNEL].count += p->launches;
	proc->calls[DL_API_STREAM_SYNC].count += p->syncs;
	p->launches = p->syncs = 0;
	p->syncs_called++;
}

static bool near(double got, double want, double rel)
{
	return fabs(got - want) <= rel * fabs(want) + 1e-9;
}

#define CHECK_NEAR(got, want, rel) CHECK(near((got), (want), (rel)), "%.6f != %.6f", (double)(got), (double)(want))

static void test_parse(void)
{
	static const char *const bad[] = { "", "1", "1/", "/2", "0/4", "2/1", "3/3", "a/b", "1/0", "-1/2", "1/-2",
					   "+1/2", " 1/2", "1/ 2", "1/2 ", "1/2s", "1/86401", "4294967297/4294967298" };
	unsigned on = 7, period = 7;

	CHECK(dl_duty_parse("1/2", &on, &period) == 0 && on == 1 && period == 2, "1/2 -> %u/%u", on, period);
	CHECK(dl_duty_parse("59/86400", &on, &period) == 0 && on == 59 && period == 86400, "59/86400 -> %u/%u", on,
	      period);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		on = period = 7;
		CHECK(dl_duty_parse(bad[i], &on, &period) == -1 && on == 7 && period == 7, "'%s' accepted as %u/%u",
		      bad[i], on, period);
	}
}

/*
 * Two windows of equal length and rate: 1000 launches in [0, 1] s and 1000 in
 * [4, 5] s of an 8 s trace, edges exact. Observed 2/8 = 0.25; scaled
 * 2000 * 8 / 2 = 8000. The windows agree (both 1000/s), so the spread term is
 * 0 and only counting noise is left: 4 * C * (1 - f) / f^2 = 4 * 2000 * 0.75 /
 * 0.0625 = 96000, uncertainty sqrt(96000) = 309.8387.
 */
static void test_estimate_round_numbers(void)
{
	struct dl_duty d = { .on_s = 1, .period_s = 4, .t0 = 10 * S, .t_end = 18 * S };
	struct dl_duty_estimate e;
	uint64_t starts[2] = { 10 * S, 14 * S };

	for (int k = 0; k < 2; k++) {
		struct dl_duty_window *w = dl_vec_push(&d.windows);

		for (int c = 0; c < DL_HOT_CLASSES; c++) {
			w->start_lo[c] = w->start_hi[c] = starts[k];
			w->end_lo[c] = w->end_hi[c] = starts[k] + S;
		}
		w->v[DL_API_LAUNCH_KERNEL] = 1000;
	}
	dl_duty_estimate(&d, DL_API_LAUNCH_KERNEL, &e);
	CHECK_NEAR(e.observed, 0.25, 1e-12);
	CHECK_NEAR(e.seen, 2000, 1e-12);
	CHECK_NEAR(e.scaled, 8000, 1e-12);
	CHECK_NEAR(e.uncertainty, 309.8387, 1e-6);
	/* An API with no calls in any window scales to 0, with no bound to give. */
	dl_duty_estimate(&d, DL_API_MEMCPY, &e);
	CHECK(e.seen == 0 && e.scaled == 0, "cudaMemcpy: seen %.0f scaled %.0f", e.seen, e.scaled);
	dl_duty_free(&d);
}

/* A 1/4 s schedule from B, on from the start with edges [B, B + 10 ms], the stand-in switch reset:
 * the schedule, what drives it, and the summary its sync callback fills. */
struct rig {
	struct dl_summary s;
	struct dl_tracer *t;   /* never read: dl_tracer_set_hot is the stand-in above */
	struct dl_duty d;
	struct pending p;
};

static void rig_start(struct rig *r, uint64_t B)
{
	memset(r, 0, sizeof(*r));
	dl_summary_init(&r->s);
	r->p.s = &r->s;
	memset(&hot, 0, sizeof(hot));
	dl_duty_start(&r->d, 1, 4, B, B + 10 * MS);
}

static void rig_tick(struct rig *r, uint64_t now)
{
	dl_duty_tick(&r->d, r->t, now, &r->s, sync_pending, &r->p);
}

static void rig_finish(struct rig *r, uint64_t now)
{
	dl_duty_finish(&r->d, r->t, now, &r->s, sync_pending, &r->p);
}

static void rig_free(struct rig *r)
{
	dl_duty_free(&r->d);
	dl_summary_free(&r->s);
}

/*
 * 1/4 s from B, driven by ticks. The stand-in switch reports these edges:
 *   window 0: on from dl_duty_start: [B, B+10ms]; off at tick B+1s: launches
 *             [B+1.000, B+1.030], copies [B+1.030, B+1.050]
 *   window 1: on at tick B+4.2s: [B+4.200, B+4.250] both; off at tick B+5s:
 *             launches [B+5.000, B+5.040], copies [B+5.040, B+5.060]
 * 1000 launches arrive in window 0, 5 more drain while off (late records of
 * window 0: they must not count in window 1), 2000 in window 1.
 * Launch windows, narrow (end_lo - start_hi): 0.990 + 0.750 = 1.740 s; wide
 * (end_hi - start_lo): 1.030 + 0.840 = 1.870 s. Trace 8 s. Scaled
 * 3000 * 8 / 1.740 = 13793.103; the edge term (24000/1.740 - 24000/1.870) / 2
 * = (13793.103 - 12834.225) / 2 = 479.439.
 */
static void test_schedule_and_windows(uint64_t B)
{
	struct rig r;
	struct dl_duty_estimate e;

	rig_start(&r, B);
	CHECK(r.d.on && r.d.windows.n == 1, "not on after start");
	CHECK_EQ_U64(r.d.next_toggle, B + S);

	r.p.launches = 1000;
	rig_tick(&r, B + 500 * MS);
	CHECK(hot.calls == 0 && r.p.syncs_called == 0, "toggled before the window's end");
	set_edges(B + 1000 * MS, B + 1030 * MS, B + 1030 * MS, B + 1050 * MS);
	rig_tick(&r, B + S);
	CHECK(hot.calls == 1 && !hot.last_on && !r.d.on, "window 0 not closed");
	CHECK_EQ_U64(r.d.windows.v[0].v[DL_API_LAUNCH_KERNEL], 1000);
	CHECK_EQ_U64(r.d.windows.v[0].end_lo[DL_HOT_LAUNCH], B + 1000 * MS);
	CHECK_EQ_U64(r.d.windows.v[0].end_hi[DL_HOT_COPY], B + 1050 * MS);
	/* Phase-locked to B: back on at B + 4 s whatever the detach took. */
	CHECK_EQ_U64(r.d.next_toggle, B + 4 * S);

	r.p.launches = 5;
	r.p.syncs = 7;
	rig_tick(&r, B + 2 * S);
	CHECK(hot.calls == 1, "toggled while off before the period's end");
	set_edges(B + 4200 * MS, B + 4250 * MS, B + 4200 * MS, B + 4250 * MS);
	rig_tick(&r, B + 4200 * MS);
	CHECK(hot.calls == 2 && hot.last_on && r.d.on && r.d.windows.n == 2, "window 1 not opened");
	/* Opened late (at 4.2 s): it still closes on the schedule, at 4 + 1 s. */
	CHECK_EQ_U64(r.d.next_toggle, B + 5 * S);
	CHECK_EQ_U64(r.d.windows.v[1].start_lo[DL_HOT_LAUNCH], B + 4200 * MS);

	r.p.launches = 2000;
	set_edges(B + 5000 * MS, B + 5040 * MS, B + 5040 * MS, B + 5060 * MS);
	rig_tick(&r, B + 5 * S);
	CHECK_EQ_U64(r.d.windows.v[1].v[DL_API_LAUNCH_KERNEL], 2000);
	CHECK_EQ_U64(r.d.windows.v[1].v[DL_API_STREAM_SYNC], 0);

	/* The job is still running (no exit seen): the trace ends at the given end. */
	rig_finish(&r, B + 8 * S);
	CHECK_EQ_U64(r.d.t_end, B + 8 * S);
	CHECK(hot.calls == 3, "finish switched the probes while they were off");
	dl_duty_estimate(&r.d, DL_API_LAUNCH_KERNEL, &e);
	CHECK_NEAR(e.observed, 1.740 / 8, 1e-9);
	CHECK_NEAR(e.seen, 3000, 1e-12);
	CHECK_NEAR(e.scaled, 13793.103448, 1e-9);
	/* The bound holds the edge term and more (the windows' rates differ: 1010/s and 2667/s). */
	CHECK(e.uncertainty > 479.439 && e.uncertainty < e.scaled, "uncertainty %.1f", e.uncertainty);
	rig_free(&r);
}

/*
 * The job exits at B + 4.1 s, inside no window, and the collector notices at
 * B + 6 s with window 1 open since B + 4.2 s (it opened after the exit). The
 * trace ends at the exit: window 1 is clipped to nothing, and only window 0's
 * 0.990 s observed 1000 launches of a 4.1 s trace: 1000 * 4.1 / 0.990 =
 * 4141.414.
 */
static void test_finish_clips_at_exit(uint64_t B)
{
	struct rig r;
	struct dl_duty_estimate e;
	struct dl_proc *proc;

	rig_start(&r, B);
	r.p.launches = 1000;
	set_edges(B + 1000 * MS, B + 1030 * MS, B + 1000 * MS, B + 1030 * MS);
	rig_tick(&r, B + S);
	set_edges(B + 4200 * MS, B + 4250 * MS, B + 4200 * MS, B + 4250 * MS);
	rig_tick(&r, B + 4200 * MS);
	proc = dl_summary_proc(&r.s, 42);
	proc->exited = true;
	proc->exit_ts = B + 4100 * MS;
	rig_finish(&r, B + 6 * S);
	CHECK_EQ_U64(r.d.t_end, B + 4100 * MS);
	CHECK(!r.d.on, "window 1 left open");
	for (int c = 0; c < DL_HOT_CLASSES; c++) {
		const struct dl_duty_window *w = &r.d.windows.v[1];

		CHECK(w->start_lo[c] <= w->start_hi[c] && w->start_hi[c] <= w->end_lo[c] && w->end_lo[c] <= w->end_hi[c] &&
		      w->end_hi[c] <= r.d.t_end, "window 1 class %d: [%llu %llu] [%llu %llu]", c,
		      (unsigned long long)w->start_lo[c], (unsigned long long)w->start_hi[c],
		      (unsigned long long)w->end_lo[c], (unsigned long long)w->end_hi[c]);
		CHECK_EQ_U64(w->end_lo[c] - w->start_hi[c], 0);
	}
	dl_duty_estimate(&r.d, DL_API_LAUNCH_KERNEL, &e);
	CHECK_NEAR(e.observed, 0.990 / 4.1, 1e-9);
	CHECK_NEAR(e.scaled, 4141.414141, 1e-9);
	rig_free(&r);
}

int main(void)
{
	uint64_t now = dl_now_ns();

	test_parse();
	test_estimate_round_numbers();
	/* dl_duty_finish never lets the trace end after the real clock's now: keep the made-up times before it. */
	CHECK(now > 30 * S, "CLOCK_MONOTONIC at %llu ns: too early for made-up times 20 s back", (unsigned long long)now);
	if (now > 30 * S) {
		test_schedule_and_windows(now - 20 * S);
		test_finish_clips_at_exit(now - 20 * S);
	}
	return check_report("test_duty");
}
