// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Step learning on synthetic streams: loops that sync every iteration, every N, never; the
 * marker from the call sequence's period, and how often the steps sync.
 */
#include <inttypes.h>
#include <string.h>
#include "check.h"
#include "pipeline.h"
#include "analysis/correlate.h"
#include "analysis/steplearn.h"
#include "records/stream.h"

#define US 1000ull
#define MS 1000000ull
#define STEP_NS (10 * MS)

struct gen {
	struct dl_stream st;
	struct dl_correlator *corr;
	struct dl_step_stage stage;
};

static void on_step(void *ctx, const struct dl_step *s)
{
	(void)ctx;
	(void)s;
}

static void gen_init_keep(struct gen *g, const char *step_on, size_t keep_steps)
{
	struct dl_corr_opts o = { .step_on = step_on, .pcie_gbps = 10, .keep_steps = keep_steps };

	memset(g, 0, sizeof(*g));
	g->corr = test_pipeline(&g->st, NULL, &g->stage, &o, on_step, g);
}

static void gen_init(struct gen *g, const char *step_on)
{
	gen_init_keep(g, step_on, 0);
}

static void gen_free(struct gen *g)
{
	dl_corr_free(g->corr);
	dl_stream_free(&g->st);
}

static void cuda(struct gen *g, enum dl_api_id api, uint64_t ts, uint64_t dur, uint64_t bytes, int dir)
{
	struct dl_cuda_ev e;

	memset(&e, 0, sizeof(e));
	e.h.size = sizeof(e);
	e.h.kind = DL_EV_CUDA;
	e.h.ts = ts;
	e.h.tgid = e.h.tid = 100;
	e.api = api;
	e.dur_ns = dur;
	if (api == DL_API_LAUNCH_KERNEL)
		e.flags = DL_CUDA_ENTRY_ONLY;
	e.arg[0] = 0x10000;
	e.arg[1] = 0x20000;
	e.arg[2] = bytes;
	e.arg[3] = (uint64_t)dir;
	dl_stream_emit(&g->st, &e, sizeof(e));
}

static void end(struct gen *g, uint64_t ts)
{
	uint64_t drops[DL_DROP_MAX] = { 0 };

	dl_emit_trace_end(&g->st, ts, drops);
}

/* How an iteration looks: first_launch puts a launch before the batch copy, so the period's first call is not unique. */
struct loop {
	int iters, sync_every;     /* sync_every 0: a device sync after the loop only */
	int launches;              /* between the batch copy and the labels' copy */
	bool first_launch;
	int extra_until;           /* an allocator call in the odd iterations before this one (warm-up) */
};

/*
 * Iteration i from t = 1 ms + i * 10 ms: [a launch,] the batch's 1 MiB H2D copy at t + 100 us,
 * launches, the labels' 256 B H2D copy, and in a syncing iteration the loss's 4 B D2H copy
 * from t + 3 ms to t + 9 ms. Every step from a batch copy to the next is 10 ms exactly.
 */
static void run_loop(struct gen *g, const struct loop *l)
{
	for (int i = 0; i < l->iters; i++) {
		uint64_t t = MS + (uint64_t)i * STEP_NS;

		if (l->first_launch)
			cuda(g, DL_API_LAUNCH_KERNEL, t, 0, 0, 0);
		cuda(g, DL_API_MEMCPY_ASYNC, t + 100 * US, 50 * US, 1 << 20, DL_DIR_H2D);
		for (int k = 0; k < l->launches; k++)
			cuda(g, DL_API_LAUNCH_KERNEL, t + 200 * US + (uint64_t)k * 10 * US, 0, 0, 0);
		if (i < l->extra_until && i % 2)
			cuda(g, DL_API_MALLOC, t + 2 * MS, 20 * US, 0, 0);
		cuda(g, DL_API_MEMCPY_ASYNC, t + 2500 * US, 10 * US, 256, DL_DIR_H2D);
		if (l->sync_every && (i + 1) % l->sync_every == 0)
			cuda(g, DL_API_MEMCPY, t + 3 * MS, 6 * MS, 4, DL_DIR_D2H);
	}
	if (!l->sync_every)
		cuda(g, DL_API_DEVICE_SYNC, MS + (uint64_t)l->iters * STEP_NS, 5 * MS, 0, 0);
	end(g, (uint64_t)(l->iters + 2) * STEP_NS);
}

static void check_steps(const struct dl_corr_proc *p, const struct loop *l, const char *what)
{
	size_t bad = 0;

	CHECK(p->nsteps == (size_t)l->iters - 1, "%s: %zu steps of %d iterations", what, p->nsteps, l->iters);
	for (size_t i = 0; i < p->nsteps; i++)
		bad += p->steps[i].dur_ns != STEP_NS || p->steps[i].start_ns != MS + i * STEP_NS + 100 * US;
	CHECK(bad == 0, "%s: %zu steps not the 10 ms from one batch copy to the next", what, bad);
}

/* The steps a loop syncing every n iterations holds a sync in: iterations n-1, 2n-1, ... but the last, open one. */
static uint64_t synced_steps(const struct loop *l)
{
	return l->sync_every ? (uint64_t)(l->iters - 1) / (uint64_t)l->sync_every : 0;
}

static void test_sync_every_step_as_before(void)
{
	struct loop l = { .iters = 30, .sync_every = 1, .launches = 3 };
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, NULL);
	run_loop(&g, &l);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->decided, "not decided");
	if (!p)
		goto out;
	CHECK(!strcmp(p->marker_desc, "automatic: the first cudaMemcpyAsync (h2d) after a blocking sync"),
	      "marker '%s'", p->marker_desc);
	CHECK(p->learning.how == DL_LEARNED_SYNC, "learned %d", p->learning.how);
	/* The period is seen all the same: 5 calls, the sync left out, a sync in each. */
	CHECK(p->learning.periodic && p->learning.period_calls == 5, "period %u", p->learning.period_calls);
	check_steps(p, &l, "every step");
	CHECK_EQ_U64(p->syncs.synced, 29);
	CHECK_EQ_U64(dl_corr_sync_every(p), 1);
out:
	gen_free(&g);
}

static void test_sync_every_n(void)
{
	static const int ns[] = { 2, 3, 5, 7 };

	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
		/* first_launch on odd n: the marker is the first call of its kind once a period, not the first call. */
		struct loop l = { .iters = 12 * ns[k] + 1, .sync_every = ns[k], .launches = 2 + ns[k],
				  .first_launch = ns[k] & 1 };
		struct gen g;
		const struct dl_corr_proc *p;
		char what[32];

		snprintf(what, sizeof(what), "sync every %d", ns[k]);
		gen_init(&g, NULL);
		run_loop(&g, &l);
		p = dl_corr_proc(g.corr, 0);
		CHECK(p && p->decided, "%s: not decided", what);
		if (!p)
			goto next;
		CHECK(p->learning.how == DL_LEARNED_PERIOD, "%s: learned %d, marker '%s'", what, p->learning.how,
		      p->marker_desc);
		CHECK(strstr(p->marker_desc, "each cudaMemcpyAsync (h2d, 1 MiB to under 2 MiB, the legacy stream)"),
		      "%s: marker '%s'", what, p->marker_desc);
		CHECK(p->learning.period_calls == (uint32_t)(l.launches + 2 + l.first_launch), "%s: period %u calls",
		      what, p->learning.period_calls);
		/* Every period equal to the one before: the syncs are left out of the sequence. */
		CHECK(p->learning.periods >= 8 && p->learning.repeating == p->learning.periods - 1, "%s: %u of %u",
		      what, p->learning.repeating, p->learning.periods);
		check_steps(p, &l, what);
		CHECK(p->syncs.synced == synced_steps(&l), "%s: %" PRIu64 " synced steps", what, p->syncs.synced);
		CHECK(dl_corr_sync_every(p) == (uint32_t)ns[k], "%s: syncs every %u", what, dl_corr_sync_every(p));
next:
		gen_free(&g);
	}
}

static void test_never_syncs(void)
{
	struct loop l = { .iters = 40, .sync_every = 0, .launches = 4 };
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, NULL);
	run_loop(&g, &l);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->decided && p->learning.how == DL_LEARNED_PERIOD, "marker '%s'", p ? p->marker_desc : "");
	if (!p)
		goto out;
	check_steps(p, &l, "never");
	CHECK_EQ_U64(p->syncs.synced, 0);
	CHECK_EQ_U64(dl_corr_sync_every(p), 0);
out:
	gen_free(&g);
}

/* A loop that never syncs is decided once its window shows the period often enough, not at the end. */
static void test_never_syncs_decided_live(void)
{
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, NULL);
	for (int i = 0; i < 1500; i++) {
		uint64_t t = MS + (uint64_t)i * STEP_NS;

		cuda(&g, DL_API_MEMCPY_ASYNC, t + 100 * US, 50 * US, 1 << 20, DL_DIR_H2D);
		cuda(&g, DL_API_LAUNCH_KERNEL, t + 200 * US, 0, 0, 0);
		cuda(&g, DL_API_LAUNCH_KERNEL, t + 300 * US, 0, 0, 0);
	}
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->decided && p->learning.how == DL_LEARNED_PERIOD, "undecided before the end");
	end(&g, 1600 * STEP_NS);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->nsteps == 1499, "steps %zu", p ? p->nsteps : 0);
	gen_free(&g);
}

/* Runs of launches match themselves at any shift; the copies between them decide the period. */
static void test_launch_runs(void)
{
	struct loop l = { .iters = 25, .sync_every = 3, .launches = 200 };
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, NULL);
	run_loop(&g, &l);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->learning.how == DL_LEARNED_PERIOD && p->learning.period_calls == 202, "period %u, marker '%s'",
	      p ? p->learning.period_calls : 0, p ? p->marker_desc : "");
	if (p)
		check_steps(p, &l, "launch runs");
	gen_free(&g);
}

/*
 * Allocator calls in three iterations of the warm-up: the period holds, and its repeat share
 * says it was not exact. (A kind that recurs to the window's end but not in every period, a
 * call every tenth iteration, weighs as much as the others and makes the period ten iterations:
 * it does repeat with that period.)
 */
static void test_occasional_extra_call(void)
{
	struct loop l = { .iters = 60, .sync_every = 4, .launches = 3, .extra_until = 6 };
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, NULL);
	run_loop(&g, &l);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->learning.how == DL_LEARNED_PERIOD && p->learning.period_calls == 5, "period %u, marker '%s'",
	      p ? p->learning.period_calls : 0, p ? p->marker_desc : "");
	if (!p)
		goto out;
	check_steps(p, &l, "extra call");
	/* Each of the 3 extra calls breaks the equality with the period before and the one after. */
	CHECK(p->learning.repeating < p->learning.periods - 1 &&
	      p->learning.repeating + 2 * 3 >= p->learning.periods - 1,
	      "%u of %u periods repeat", p->learning.repeating, p->learning.periods);
	CHECK_EQ_U64(dl_corr_sync_every(p), 4);
out:
	gen_free(&g);
}

/* --step-on still wins, and the sync cadence is counted for it too. */
static void test_step_on_keeps_its_marker(void)
{
	struct loop l = { .iters = 31, .sync_every = 5, .launches = 3 };
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, "cudaLaunchKernel");
	run_loop(&g, &l);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->learning.how == DL_LEARNED_OPTION && p->marker.kind == DL_MARK_API, "marker '%s'",
	      p ? p->marker_desc : "");
	/* Three launches an iteration: three steps each, and a sync in one step of 15. */
	CHECK(p && p->nsteps == 31 * 3 - 1, "steps %zu", p ? p->nsteps : 0);
	CHECK(p && dl_corr_sync_every(p) == 15, "syncs every %u", p ? dl_corr_sync_every(p) : 0);
	gen_free(&g);
}

/* The sequence alone: no steady kinds, one kind only, or too few periods give no period. */
static void test_no_period(void)
{
	struct dl_sl_call v[64];
	struct dl_sl_period per;

	memset(v, 0, sizeof(v));
	for (int i = 0; i < 64; i++)
		v[i].api = DL_API_LAUNCH_KERNEL;
	dl_steplearn(v, 64, &per);
	CHECK(!per.found, "a run of one kind has a period of %u", per.calls);
	/* Two periods of [copy, launch x 20] are not enough to compare neighbours twice. */
	for (int i = 0; i < 63; i++)
		v[i] = (struct dl_sl_call){ .api = i % 21 ? DL_API_LAUNCH_KERNEL : DL_API_MEMCPY_ASYNC };
	dl_steplearn(v, 42, &per);
	CHECK(!per.found, "two periods gave %u", per.calls);
	dl_steplearn(v, 63, &per);
	CHECK(per.found && per.calls == 21 && per.marker == 0, "three periods: found %d, %u calls", per.found,
	      per.calls);
	CHECK_EQ_U64(dl_sl_size_log2(0), 0);
	CHECK_EQ_U64(dl_sl_size_log2(4096), 13);
	CHECK_EQ_U64(dl_sl_size_log2(8191), 13);
}

/*
 * A job's start-up before its loop (a framework loading a model: a 4 B D2H
 * read back, an allocation, a parameter copy, n times from t = 1 ms, every
 * 2 ms) makes "the first cudaMalloc after a sync" the marker; the loop (from
 * base, as run_loop's iterations) never allocates. The marker is given up
 * once the loop has passed RELEARN_SYNCS (16) sync points without it, the
 * steps it cut are left out, and the loop's steps are learned again: each
 * 10 ms from one batch copy to the next, the first ones of the loop (before
 * the re-learning: 17 iterations, and the open one) left out with them.
 */
static void test_startup_marker_given_up(void)
{
	const int startup = 12, iters = 60;
	uint64_t base = 1 * MS + (uint64_t)startup * 2 * MS;
	struct gen g;
	const struct dl_corr_proc *p;
	size_t bad = 0, first;

	gen_init(&g, NULL);
	for (int i = 0; i < startup; i++) {
		uint64_t t = MS + (uint64_t)i * 2 * MS;

		cuda(&g, DL_API_MEMCPY, t, 100 * US, 4, DL_DIR_D2H);
		cuda(&g, DL_API_MALLOC, t + 200 * US, 50 * US, 0, 0);
		cuda(&g, DL_API_MEMCPY_ASYNC, t + 400 * US, 50 * US, 4096, DL_DIR_H2D);
	}
	for (int i = 0; i < iters; i++) {
		uint64_t t = base + (uint64_t)i * STEP_NS;

		cuda(&g, DL_API_MEMCPY_ASYNC, t + 100 * US, 50 * US, 1 << 20, DL_DIR_H2D);
		cuda(&g, DL_API_LAUNCH_KERNEL, t + 200 * US, 0, 0, 0);
		cuda(&g, DL_API_MEMCPY, t + 3 * MS, 6 * MS, 4, DL_DIR_D2H);
	}
	end(&g, base + (uint64_t)(iters + 1) * STEP_NS);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->decided, "not decided");
	if (!p)
		goto out;
	CHECK(p->startup.relearned == 1 && strstr(p->startup.first_marker, "cudaMalloc"),
	      "given up %u times, first marker '%s'", p->startup.relearned, p->startup.first_marker);
	CHECK(!strcmp(p->marker_desc, "automatic: the first cudaMemcpyAsync (h2d) after a blocking sync"),
	      "marker learned again: '%s'", p->marker_desc);
	first = p->nsteps ? (size_t)((p->steps[0].start_ns - base - 100 * US) / STEP_NS) : 0;
	for (size_t i = 0; i < p->nsteps; i++)
		bad += p->steps[i].dur_ns != STEP_NS || p->steps[i].start_ns != base + (first + i) * STEP_NS + 100 * US;
	CHECK(bad == 0 && p->nsteps == (size_t)iters - 1 - first && first == 2 * 8 + 1,
	      "%zu steps from iteration %zu, %zu not the loop's 10 ms", p->nsteps, first, bad);
	/* The start-up's steps, then the loop's up to the re-learning, left out; indexes go on from theirs. */
	/* They run from the first allocation to the last: 2 ms apart. */
	CHECK_EQ_U64(p->startup.dur_ns, (uint64_t)(startup - 1) * 2 * MS);
	CHECK(p->startup.steps == (uint64_t)startup - 1 && p->nsteps && p->steps[0].index == p->startup.steps,
	      "%" PRIu64 " start-up steps left out, first index %u", p->startup.steps, p->nsteps ? p->steps[0].index : 0);
out:
	gen_free(&g);
}

/*
 * A loop of 40 steps of 10 ms with a 2 s stall in iteration 20: the stalled
 * step is an outlier, left out of the totals (and so of the verdict), listed
 * apart; the totals hold the other 38 steps' 10 ms each. A loop whose slow
 * steps come every other time (25 ms and 5 ms) has none: p90 is a slow one.
 */
static void test_outlier_steps(void)
{
	struct gen g;
	const struct dl_corr_proc *p;
	struct dl_step_stats st;

	/*
	 * Kept in full; and with --keep-steps 8, where the stalled step is folded with the steps
	 * before it: held whole (it lasts over half the cut of the steps kept then), it is judged
	 * the same at the end.
	 */
	for (size_t keep = 0; keep <= 8; keep += 8) {
		gen_init_keep(&g, NULL, keep);
		for (int i = 0; i < 40; i++) {
			uint64_t t = MS + (uint64_t)i * STEP_NS + (i > 20 ? 2000 * MS : 0);

			cuda(&g, DL_API_MEMCPY_ASYNC, t + 100 * US, 50 * US, 1 << 20, DL_DIR_H2D);
			cuda(&g, DL_API_MEMCPY, t + 3 * MS, 6 * MS, 4, DL_DIR_D2H);
		}
		end(&g, 50 * STEP_NS + 2000 * MS);
		p = dl_corr_proc(g.corr, 0);
		CHECK(p && dl_corr_steps_total(p) == 39 && (keep ? p->nsteps < 2 * keep : p->nsteps == 39),
		      "keep %zu: steps %zu", keep, p ? p->nsteps : 0);
		if (!p)
			goto out;
		dl_corr_stats(g.corr, p, &st);
		CHECK(st.outliers == 1 && st.outlier_index[0] == 20 && st.outlier_ns == 2000 * MS + STEP_NS,
		      "keep %zu: outliers %" PRIu64 " (first %u, %" PRIu64 " ns)", keep, st.outliers, st.outlier_index[0],
		      st.outlier_ns);
		CHECK(st.sum.n == 38 && st.sum.dur_ns == 38 * STEP_NS, "keep %zu: totals of %" PRIu64 " steps, %" PRIu64 " ns",
		      keep, st.sum.n, st.sum.dur_ns);
		/* Every step but the outlier lasts STEP_NS: exact kept, within the fold's half bucket (0.39%) folded. */
		CHECK(st.median_ns >= STEP_NS - STEP_NS / 256 && st.median_ns <= STEP_NS + STEP_NS / 256 &&
		      st.p90_ns >= STEP_NS - STEP_NS / 256 && st.p90_ns <= STEP_NS + STEP_NS / 256 &&
		      (keep || (st.median_ns == STEP_NS && st.p90_ns == STEP_NS)),
		      "keep %zu: median %" PRIu64 ", p90 %" PRIu64, keep, st.median_ns, st.p90_ns);
		CHECK(!keep || p->nheld == 1, "keep %zu: %zu steps held", keep, p->nheld);
		CHECK(st.outlier_cut_ns >= 10 * (STEP_NS - STEP_NS / 256) && st.outlier_cut_ns <= 10 * (STEP_NS + STEP_NS / 256),
		      "keep %zu: cut %" PRIu64, keep, st.outlier_cut_ns);
		dl_fold_free(&st.sum);
		gen_free(&g);
	}

	gen_init(&g, NULL);
	for (int i = 0; i < 40; i++) {
		uint64_t t = MS + (uint64_t)(i / 2) * 30 * MS + (i % 2 ? 25 * MS : 0);

		cuda(&g, DL_API_MEMCPY_ASYNC, t + 100 * US, 50 * US, 1 << 20, DL_DIR_H2D);
		cuda(&g, DL_API_MEMCPY, t + 1 * MS, 2 * MS, 4, DL_DIR_D2H);
	}
	end(&g, 700 * MS);
	p = dl_corr_proc(g.corr, 0);
	dl_corr_stats(g.corr, p, &st);
	CHECK(st.outliers == 0 && st.sum.n == 39, "two modes: %" PRIu64 " outliers of %" PRIu64 " steps", st.outliers,
	      st.sum.n + st.outliers);
	dl_fold_free(&st.sum);
out:
	gen_free(&g);
}

int main(void)
{
	test_startup_marker_given_up();
	test_outlier_steps();
	test_sync_every_step_as_before();
	test_sync_every_n();
	test_never_syncs();
	test_never_syncs_decided_live();
	test_launch_runs();
	test_occasional_extra_call();
	test_step_on_keeps_its_marker();
	test_no_period();
	return check_report("test_steplearn");
}
