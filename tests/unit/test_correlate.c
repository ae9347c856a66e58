// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The breakdown and the correlator on synthetic streams, with exact expected partitions. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/breakdown.h"
#include "check.h"
#include "pipeline.h"
#include "records.h"
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "records/stream.h"
#include "analysis/summary.h"

#define US 1000ull
#define MS 1000000ull

static uint64_t sum_cats(const uint64_t c[DL_CAT_COUNT])
{
	uint64_t s = 0;

	for (int k = 0; k < DL_CAT_COUNT; k++)
		s += c[k];
	return s;
}

/* One check of a value over all of a process's steps (s names the step): how many differ, and the first. */
#define CHECK_STEPS(p, expr, want)                                                                      \
	do {                                                                                            \
		size_t bad_ = 0, at_ = 0;                                                               \
		unsigned long long got_ = 0, want_ = 0;                                                 \
		for (size_t i_ = 0; i_ < (p)->nsteps; i_++) {                                           \
			const struct dl_step *s = &(p)->steps[i_];                                      \
			unsigned long long g_ = (unsigned long long)(expr), w_ = (unsigned long long)(want); \
			(void)s;                                                                        \
			if (g_ != w_ && bad_++ == 0)                                                    \
				at_ = i_, got_ = g_, want_ = w_;                                        \
		}                                                                                       \
		CHECK(bad_ == 0, "%s: %zu of %zu steps differ (step %zu: %llu, want %llu)", #expr, bad_, \
		      (p)->nsteps, at_, got_, want_);                                                   \
	} while (0)

static void test_breakdown_priorities(void)
{
	/* 0..100 us: a sync call 10-40 (thread asleep inside it), a copy 40-50 (running), then:
	 * 50-60 running, 60-80 blocked D with a read in flight 70-90, 80-90 runnable, 90-100 no information. */
	struct dl_span cuda[] = { { 10 * US, 40 * US, DL_CAT_GPU_WAIT }, { 40 * US, 50 * US, DL_CAT_H2D } };
	struct dl_span sched[] = {
		{ 0, 10 * US, DL_ST_RUNNING }, { 10 * US, 45 * US, DL_ST_SLEEP }, { 45 * US, 60 * US, DL_ST_RUNNING },
		{ 60 * US, 80 * US, DL_ST_DISK }, { 80 * US, 90 * US, DL_ST_RUNQ },
	};
	struct dl_span reads[] = { { 70 * US, 90 * US, 0 } };
	struct dl_step_input in = { 0, 100 * US, cuda, 2, sched, 5, reads, 1 };
	uint64_t c[DL_CAT_COUNT];

	dl_breakdown(&in, c);
	CHECK_EQ_U64(c[DL_CAT_GPU_WAIT], 30 * US);
	CHECK_EQ_U64(c[DL_CAT_H2D], 10 * US);
	CHECK_EQ_U64(c[DL_CAT_IO_WAIT], 10 * US);     /* 70-80: D with the read in flight */
	CHECK_EQ_U64(c[DL_CAT_INPUT_WAIT], 10 * US);  /* 60-70: D without I/O */
	CHECK_EQ_U64(c[DL_CAT_RUNQ], 10 * US);
	CHECK_EQ_U64(c[DL_CAT_CPU], 30 * US);         /* 0-10, 50-60, and 90-100 unknown */
	CHECK_EQ_U64(sum_cats(c), 100 * US);
	/* The run-queue wait right after the D wake-up is wake-up latency. */
	CHECK_EQ_U64(dl_wakeup_runq(&in), 10 * US);
	sched[4].start = 81 * US;   /* not adjacent to the blocked interval: preemption */
	CHECK_EQ_U64(dl_wakeup_runq(&in), 0);
	sched[4].start = 80 * US;

	/* Clipped to the step: a call and an interval crossing both ends. */
	in.start = 20 * US;
	in.end = 65 * US;
	dl_breakdown(&in, c);
	CHECK_EQ_U64(c[DL_CAT_GPU_WAIT], 20 * US);
	CHECK_EQ_U64(c[DL_CAT_H2D], 10 * US);
	CHECK_EQ_U64(c[DL_CAT_CPU], 10 * US);
	CHECK_EQ_U64(c[DL_CAT_INPUT_WAIT], 5 * US);
	CHECK_EQ_U64(sum_cats(c), 45 * US);

	/* Overlapping CUDA pieces (clock skew) never count twice. */
	struct dl_span skew[] = { { 0, 60 * US, DL_CAT_GPU_WAIT }, { 50 * US, 100 * US, DL_CAT_LAUNCH } };
	struct dl_step_input in2 = { 0, 100 * US, skew, 2, NULL, 0, NULL, 0 };

	dl_breakdown(&in2, c);
	CHECK_EQ_U64(c[DL_CAT_GPU_WAIT], 60 * US);
	CHECK_EQ_U64(c[DL_CAT_LAUNCH], 40 * US);
	CHECK_EQ_U64(sum_cats(c), 100 * US);
}

static void test_spans_union(void)
{
	struct dl_span v[] = { { 50, 60, 0 }, { 10, 20, 0 }, { 15, 30, 0 }, { 30, 35, 0 }, { 70, 80, 0 } };
	size_t n = dl_spans_union(v, 5);

	CHECK_EQ_U64(n, 3);
	CHECK(v[0].start == 10 && v[0].end == 35, "merged %llu-%llu", (unsigned long long)v[0].start,
	      (unsigned long long)v[0].end);
	CHECK_EQ_U64(dl_spans_overlap(v, n, 0, 100), 25 + 10 + 10);
	CHECK_EQ_U64(dl_spans_overlap(v, n, 32, 55), 3 + 5);
}

/* --- a synthetic stream ----------------------------------------------------- */

struct gen {
	struct dl_stream st;
	struct dl_summary sum;
	struct dl_correlator *corr;
	struct dl_step_stage stage;
	int steps_seen;
	uint64_t enqueues, enqueue_tids_wrong;   /* DL_GS_ENQUEUE spans the steps carried, and those not the main thread's */
};

static void on_step(void *ctx, const struct dl_step *s)
{
	struct gen *g = ctx;

	g->steps_seen++;
	for (uint32_t i = 0; i < s->ngpu_spans; i++)
		if (s->gpu_spans[i].kind == DL_GS_ENQUEUE) {
			g->enqueues++;
			g->enqueue_tids_wrong += s->gpu_spans[i].tid != (uint32_t)s->tid;
		}
}

static void gen_init_keep(struct gen *g, const char *step_on, size_t keep_steps)
{
	struct dl_corr_opts o = { .step_on = step_on, .pcie_gbps = 10, .keep_steps = keep_steps };

	memset(g, 0, sizeof(*g));
	g->corr = test_pipeline(&g->st, &g->sum, &g->stage, &o, on_step, g);
}

static void gen_init(struct gen *g, const char *step_on)
{
	gen_init_keep(g, step_on, 0);
}

static void gen_free(struct gen *g)
{
	dl_corr_free(g->corr);
	dl_summary_free(&g->sum);
	dl_stream_free(&g->st);
}

static void hdr(struct dl_hdr *h, size_t size, int kind, uint64_t ts, uint32_t tid)
{
	h->size = (uint16_t)size;
	h->kind = (uint16_t)kind;
	h->ts = ts;
	h->tgid = 100;
	h->tid = tid;
}

static void cuda(struct gen *g, uint32_t tid, enum dl_api_id api, uint64_t ts, uint64_t dur, uint64_t bytes,
		 int dir)
{
	struct dl_cuda_ev e;

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_CUDA, ts, tid);
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

/* cudaHostRegister(ptr, bytes): copies from there are pinned. */
static void pin(struct gen *g, uint64_t ptr, uint64_t bytes)
{
	struct dl_cuda_ev e;

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_CUDA, 10 * US, 101);
	e.api = DL_API_HOST_REGISTER;
	e.dur_ns = 10 * US;
	e.arg[0] = ptr;
	e.arg[1] = bytes;
	dl_stream_emit(&g->st, &e, sizeof(e));
}

static void sched(struct gen *g, uint32_t tid, uint32_t state, uint64_t ts, uint64_t dur, uint32_t next)
{
	struct dl_sched_ev e = test_sched(100, tid, ts, dur, state, next);

	dl_stream_emit(&g->st, &e, sizeof(e));
}

static void mark(struct gen *g, uint32_t tid, uint64_t ts)
{
	struct dl_mark_ev e;

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_MARK, ts, tid);
	dl_stream_emit(&g->st, &e, sizeof(e));
}

static void end(struct gen *g, uint64_t ts, uint64_t dropped)
{
	uint64_t drops[DL_DROP_MAX] = { [DL_DROP_SCHED] = dropped };

	dl_emit_trace_end(&g->st, ts, drops);
}

/*
 * One step of a training loop, 10 ms from t: input wait (asleep) 0-4, CPU 4-5,
 * async H2D 5-5.1, three launches 5.1-5.4, CPU 5.4-6, a 4-byte sync D2H copy
 * 6-10 that waits for the GPU (asleep inside it from 6.1 to its return).
 */
static void loop_step(struct gen *g, uint64_t t)
{
	sched(g, 101, DL_ST_SLEEP, t, 4 * MS, DL_ST_RUNNING);
	cuda(g, 101, DL_API_MEMCPY_ASYNC, t + 5 * MS, 100 * US, 1 << 20, DL_DIR_H2D);
	for (int k = 0; k < 3; k++)
		cuda(g, 101, DL_API_LAUNCH_KERNEL, t + 5 * MS + 100 * US + (uint64_t)k * 100 * US, 0, 0, 0);
	sched(g, 101, DL_ST_RUNNING, t + 4 * MS, 2 * MS + 100 * US, DL_ST_SLEEP);
	sched(g, 101, DL_ST_SLEEP, t + 6 * MS + 100 * US, 3 * MS + 900 * US, DL_ST_RUNNING);
	cuda(g, 101, DL_API_MEMCPY, t + 6 * MS, 4 * MS, 4, DL_DIR_D2H);
	/* A worker thread of the same process that never calls CUDA, busy 2 ms a step. */
	sched(g, 102, DL_ST_RUNNING, t + 1 * MS, 2 * MS, DL_ST_SLEEP);
}

static void test_auto_marker_loop(void)
{
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, NULL);
	/* A setup call first, which is not a step. */
	cuda(&g, 101, DL_API_MALLOC, 50 * US, 10 * US, 0, 0);
	for (int i = 0; i < 12; i++)
		loop_step(&g, MS + (uint64_t)i * 10 * MS);
	end(&g, 200 * MS, 0);
	CHECK_EQ_U64(dl_corr_nprocs(g.corr), 1);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->decided, "not decided");
	if (!p)
		goto out;
	CHECK_EQ_U64(p->main_tid, 101);
	CHECK(strstr(p->marker_desc, "cudaMemcpyAsync (h2d)") != NULL, "marker '%s'", p->marker_desc);
	/* 12 copies mark 12 step starts: 11 complete steps. */
	CHECK_EQ_U64(p->nsteps, 11);
	CHECK_EQ_U64(g.steps_seen, 11);
	/* A flow for each of a step's five enqueues (its batch copy, three launches, the loss copy), the main thread's. */
	CHECK_EQ_U64(g.enqueues, 11 * 5);
	CHECK_EQ_U64(g.enqueue_tids_wrong, 0);
	CHECK_STEPS(p, s->dur_ns, 10 * MS);
	CHECK_STEPS(p, sum_cats(s->cat_ns), s->dur_ns);
	CHECK_STEPS(p, s->cat_ns[DL_CAT_H2D], 100 * US);
	CHECK_STEPS(p, s->cat_ns[DL_CAT_LAUNCH], 300 * US);
	/*
	 * The loss copy (6-10 ms) is 4 bytes behind queued kernels: no copy of 1 MiB or more has
	 * measured a D2H bandwidth, so they are taken at pcie_gbps (10, given above), a third of it
	 * from pageable memory: 4 B / 3.33 B/ns = 1.2 ns, 1 in whole ns. The rest of its 4 ms waited
	 * for the GPU.
	 */
	CHECK_STEPS(p, s->cat_ns[DL_CAT_D2H], 1);
	CHECK_STEPS(p, s->cat_ns[DL_CAT_GPU_WAIT], 4 * MS - 1);
	/*
	 * Device busy: at most from the batch's copy (the step's start) to the loss copy's wake-up
	 * (5 ms: its return, here), the queue then known empty to the step's end; at least the loss
	 * copy's wait on the kernels, from its entry to its wake-up (4 ms).
	 */
	CHECK_STEPS(p, s->gpu_busy_hi_ns, 5 * MS);
	CHECK_STEPS(p, s->gpu_busy_lo_ns, 4 * MS);
	/*
	 * Idle the other 5 ms, from the loss copy's wake-up (its return: nothing of it is left as sync
	 * overhead): the next batch's wait asleep (4 ms) is input, the CPU after it (1 ms) host.
	 */
	CHECK_STEPS(p, s->gpu_idle_ns[DL_IDLE_INPUT], 4 * MS);
	CHECK_STEPS(p, s->gpu_idle_ns[DL_IDLE_HOST], 1 * MS);
	CHECK_STEPS(p, s->gpu_idle_ns[DL_IDLE_SYNC], 0);
	CHECK_STEPS(p, s->cat_ns[DL_CAT_INPUT_WAIT], 4 * MS);
	CHECK_STEPS(p, s->cat_ns[DL_CAT_CPU], 1 * MS + 600 * US);
	CHECK_STEPS(p, s->kernels, 3);
	CHECK_STEPS(p, s->h2d_bytes, 1 << 20);
	CHECK_STEPS(p, s->workers_cpu_ns, 2 * MS);
	CHECK_STEPS(p, s->verdict, DL_V_INPUT);
	{
		struct dl_diagnosis d;

		dl_diagnose(g.corr, &g.sum, NULL, &d);
		CHECK(d.verdict == DL_V_INPUT && d.severity == DL_SEV_HIGH, "diagnosis %s %s",
		      dl_verdict_name(d.verdict), dl_severity_name(d.severity));
		CHECK(d.share > 0.39 && d.share < 0.41, "share %f", d.share);
		CHECK_EQ_U64(d.nsteps, 11);
	}
out:
	gen_free(&g);
}

/*
 * A synchronous copy behind queued work is the transfer its bytes explain at the bandwidth
 * measured so far, after a wait for the GPU; one that finds the queue empty is the transfer from
 * end to end. Every number below is worked out by hand from the records.
 */
static void test_copy_explained_at_measured_bandwidth(void)
{
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, "cudaDeviceSynchronize");
	/* Before the first step: 32 MiB D2H in 4 ms measures 33554432 B / 4000000 ns = 8.388608 B/ns. */
	cuda(&g, 101, DL_API_MEMCPY, 1 * MS, 4 * MS, 32 << 20, DL_DIR_D2H);
	/* A pageable H2D copy returns once staged: the device may still be busy with it at the first sync. */
	cuda(&g, 101, DL_API_MEMCPY, 6 * MS, 1 * MS, 1 << 20, DL_DIR_H2D);
	for (int i = 0; i < 6; i++) {
		uint64_t t = 10 * MS + (uint64_t)i * 10 * MS;

		/* 10 ms steps from each sync: the sync (1 ms) on the previous pageable copy, a launch, a
		 * 4 MiB D2H copy behind it taking 3 ms (at 1.4 B/ns it measures no better bandwidth), an
		 * 8 MiB H2D copy taking 0.5 ms to an idle device. */
		cuda(&g, 101, DL_API_DEVICE_SYNC, t, 1 * MS, 0, 0);
		cuda(&g, 101, DL_API_LAUNCH_KERNEL, t + 1500 * US, 0, 0, 0);
		cuda(&g, 101, DL_API_MEMCPY, t + 2 * MS, 3 * MS, 4 << 20, DL_DIR_D2H);
		cuda(&g, 101, DL_API_MEMCPY, t + 6 * MS, 500 * US, 8 << 20, DL_DIR_H2D);
	}
	end(&g, 80 * MS, 0);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->nsteps == 5, "steps %zu", p ? p->nsteps : 0);
	if (!p)
		goto out;
	/* The 4 MiB copy: 4194304 B / 8.388608 B/ns = 500 us of transfer. */
	CHECK_STEPS(p, s->cat_ns[DL_CAT_D2H], 500 * US);
	/* The sync's 1 ms and the copy's other 3000 - 500 = 2500 us. */
	CHECK_STEPS(p, s->cat_ns[DL_CAT_GPU_WAIT], 1 * MS + 2500 * US);
	/* The H2D copy found the queue empty (the D2H copy's return drained it): transfer throughout. */
	CHECK_STEPS(p, s->cat_ns[DL_CAT_H2D], 500 * US);
	/* The launch owns the time to the next call, up to 100 us. */
	CHECK_STEPS(p, s->cat_ns[DL_CAT_LAUNCH], 100 * US);
	/* No scheduler records: the rest is the thread's own, 10 - 3.5 - 0.5 - 0.5 - 0.1 = 5.4 ms. */
	CHECK_STEPS(p, s->cat_ns[DL_CAT_CPU], 5400 * US);
out:
	gen_free(&g);
}

/*
 * Many small synchronous pinned copies to an idle device (the copy-bound loop): every
 * one found the queue empty, so none of it is gpu_wait, and the device was busy at most inside
 * the copies (20 x 50 us of each 2 ms step), at least nowhere the thread was seen asleep.
 */
static void test_sync_copies_to_idle_device(void)
{
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, "cudaStreamSynchronize");
	pin(&g, 0x20000, 1 << 20);
	for (int i = 0; i < 6; i++) {
		uint64_t t = MS + (uint64_t)i * 2 * MS;

		cuda(&g, 101, DL_API_STREAM_SYNC, t, 10 * US, 0, 0);
		for (int k = 0; k < 20; k++)
			cuda(&g, 101, DL_API_MEMCPY, t + 100 * US + (uint64_t)k * 80 * US, 50 * US, 4096, DL_DIR_H2D);
	}
	end(&g, 20 * MS, 0);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->nsteps == 5, "steps %zu", p ? p->nsteps : 0);
	if (!p)
		goto out;
	CHECK_STEPS(p, s->cat_ns[DL_CAT_H2D], 20 * 50 * US);
	CHECK_STEPS(p, s->cat_ns[DL_CAT_GPU_WAIT], 0);
	/* The sync found every queue empty: CUDA time, not the GPU's. */
	CHECK_STEPS(p, s->cat_ns[DL_CAT_CUDA_OTHER], 10 * US);
	CHECK_STEPS(p, s->verdict, DL_V_COPY);
	CHECK_STEPS(p, s->gpu_busy_hi_ns, 20 * 50 * US);
	CHECK_STEPS(p, s->gpu_busy_lo_ns, 0);
	/* Idle 2000 - 1000 us: inside the sync on empty queues (10 us) sync overhead; the rest (no scheduler records) host. */
	CHECK_STEPS(p, s->gpu_idle_ns[DL_IDLE_SYNC], 10 * US);
	CHECK_STEPS(p, s->gpu_idle_ns[DL_IDLE_HOST], 990 * US);
	CHECK_STEPS(p, s->gpu_idle_ns[DL_IDLE_INPUT], 0);
out:
	gen_free(&g);
}

/*
 * Records lost (the trace end counts CUDA records dropped): a lost launch may have kept the
 * device busy where the model saw an empty queue, so every step's upper bound becomes the step.
 */
static void test_lost_records_widen_bounds(void)
{
	uint64_t drops[DL_DROP_MAX] = { [DL_DROP_CUDA] = 3 };
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, NULL);
	for (int i = 0; i < 12; i++)
		loop_step(&g, MS + (uint64_t)i * 10 * MS);
	dl_emit_trace_end(&g.st, 200 * MS, drops);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->nsteps == 11, "steps %zu", p ? p->nsteps : 0);
	if (!p)
		goto out;
	CHECK_STEPS(p, s->gpu_busy_hi_ns, s->dur_ns);
	/* So no time is known idle. */
	CHECK_STEPS(p, s->gpu_idle_ns[DL_IDLE_HOST] + s->gpu_idle_ns[DL_IDLE_INPUT] + s->gpu_idle_ns[DL_IDLE_SYNC], 0);
	/* The lower bound stands: it rests on waits that were seen. */
	CHECK_STEPS(p, s->gpu_busy_lo_ns, 4 * MS);
out:
	gen_free(&g);
}

static void test_symbol_marker_cuts_mid_call(void)
{
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, "train_step");
	/* Markers at 0, 10, 20 ms; a 6 ms sync call from 7 to 13 ms straddles the second. */
	mark(&g, 101, 0);
	sched(&g, 101, DL_ST_RUNNING, 0, 7 * MS, DL_ST_SLEEP);
	mark(&g, 101, 10 * MS);
	cuda(&g, 101, DL_API_STREAM_SYNC, 7 * MS, 6 * MS, 0, 0);
	sched(&g, 101, DL_ST_SLEEP, 7 * MS, 6 * MS, DL_ST_RUNNING);
	mark(&g, 101, 20 * MS);
	end(&g, 21 * MS, 0);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->nsteps == 2, "steps %zu", p ? p->nsteps : 0);
	if (p && p->nsteps == 2) {
		/* Nothing was enqueued: the sync found the queue empty, CUDA time, not the GPU's. */
		CHECK_EQ_U64(p->steps[0].cat_ns[DL_CAT_CUDA_OTHER], 3 * MS);
		CHECK_EQ_U64(p->steps[0].cat_ns[DL_CAT_CPU], 7 * MS);
		CHECK_EQ_U64(p->steps[1].cat_ns[DL_CAT_CUDA_OTHER], 3 * MS);
		/* After the sync the thread runs (its last interval's next state) to the end. */
		CHECK_EQ_U64(p->steps[1].cat_ns[DL_CAT_CPU], 7 * MS);
		CHECK(strstr(p->marker_desc, "train_step") != NULL, "marker '%s'", p->marker_desc);
	}
	gen_free(&g);
}

static void test_no_marker_and_drops(void)
{
	struct gen g;
	const struct dl_corr_proc *p;
	struct dl_diagnosis d;

	gen_init(&g, NULL);
	/* Launches and copies in no repeating order (an LCG's high bit), never a blocking sync: nothing marks a step. */
	uint32_t x = 12345;

	for (int i = 0; i < 100; i++) {
		x = x * 1103515245u + 12345u;
		if (x >> 31)
			cuda(&g, 101, DL_API_LAUNCH_KERNEL, (uint64_t)i * MS, 0, 0, 0);
		else
			cuda(&g, 101, DL_API_MEMCPY_ASYNC, (uint64_t)i * MS, 10 * US, 4096, DL_DIR_H2D);
	}
	end(&g, 60 * MS, 5);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->decided && p->nsteps == 0, "steps found without markers");
	CHECK(p && strstr(p->marker_desc, "none found"), "marker '%s'", p ? p->marker_desc : "");
	dl_diagnose(g.corr, &g.sum, NULL, &d);
	CHECK_EQ_U64(d.nsteps, 0);
	CHECK(d.nfindings == 1 && !strcmp(d.findings[0].rule, "dropped-events"), "findings %d %s", d.nfindings,
	      d.nfindings ? d.findings[0].rule : "");
	gen_free(&g);
}

static void test_learning_window_bounded(void)
{
	struct gen g;
	const struct dl_corr_proc *p;

	gen_init(&g, NULL);
	/* A stream that never syncs: the correlator gives up after its window, before the end. */
	for (uint64_t i = 0; i < 210000; i++)
		cuda(&g, 101, DL_API_LAUNCH_KERNEL, i * 10 * US, 0, 0, 0);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->decided && p->nsteps == 0, "undecided after a full learning window");
	end(&g, 3000 * MS, 0);
	gen_free(&g);
}

static void test_api_marker_and_findings(void)
{
	struct gen g;
	const struct dl_corr_proc *p;
	struct dl_diagnosis d;
	int small = 0, pageable = 0, sync = 0;

	gen_init(&g, "cudaDeviceSynchronize");
	/* Each 5 ms step: 40 small pageable H2D copies of 1000 bytes (misaligned size), then a device sync. */
	for (int i = 0; i < 6; i++) {
		uint64_t t = (uint64_t)i * 5 * MS;

		cuda(&g, 101, DL_API_DEVICE_SYNC, t, 1 * MS, 0, 0);
		for (int k = 0; k < 40; k++)
			cuda(&g, 101, DL_API_MEMCPY, t + MS + (uint64_t)k * 50 * US, 50 * US, k ? 1000 : 8 << 20,
			     DL_DIR_H2D);
	}
	end(&g, 40 * MS, 0);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->nsteps == 5, "steps %zu", p ? p->nsteps : 0);
	dl_diagnose(g.corr, &g.sum, NULL, &d);
	for (int i = 0; i < d.nfindings; i++) {
		small += !strcmp(d.findings[i].rule, "small-copies");
		pageable += !strcmp(d.findings[i].rule, "pageable-copies");
		sync += !strcmp(d.findings[i].rule, "sync-copies");
	}
	CHECK(small == 1 && pageable == 1 && sync == 1, "small %d pageable %d sync %d", small, pageable, sync);
	gen_free(&g);
}

/* The durations' histogram: every value within DL_FOLD_REL_ERR of its bucket's midpoint, buckets in order. */
static void test_fold_buckets(void)
{
	uint64_t worst_off = 0, v = 1, prev_b = 0;
	double worst_rel = 0;
	bool ordered = true, in_range = true;

	/* Every value below 2^10, then a geometric walk with odd strides over the whole u64 range. */
	for (uint64_t x = 0; x < 1024; x++) {
		uint32_t b = dl_fold_bucket(x);
		uint64_t mid = dl_fold_bucket_mid(b);

		ordered &= b >= prev_b;
		prev_b = b;
		if (x < 128)
			worst_off = mid > x ? mid - x : x - mid;
		else
			worst_rel = fmax(worst_rel, fabs((double)mid - (double)x) / (double)x);
	}
	prev_b = 0;
	for (int i = 0; i < 200000 && v < UINT64_MAX / 2; i++, v += v / 97 + 13) {
		uint32_t b = dl_fold_bucket(v);

		in_range &= b < DL_FOLD_BUCKETS;
		ordered &= b >= prev_b;
		prev_b = b;
		worst_rel = fmax(worst_rel, fabs((double)dl_fold_bucket_mid(b) - (double)v) / (double)v);
	}
	in_range &= dl_fold_bucket(UINT64_MAX) == DL_FOLD_BUCKETS - 1;
	CHECK(worst_off == 0, "a duration under 128 ns is not its own bucket (off by %" PRIu64 ")", worst_off);
	CHECK(worst_rel <= DL_FOLD_REL_ERR, "a duration %.4f%% from its bucket's midpoint", 100 * worst_rel);
	CHECK(ordered && in_range, "buckets out of order or out of range");
}

/*
 * 40 steps of uneven length through two correlators, one keeping every step and one keeping 4
 * (folding the rest): the same totals to the nanosecond, the same diagnosis, the spread to
 * double rounding, the median and p90 to the histogram's resolution, and the latest steps in full.
 */
static void test_fold_matches_full(void)
{
	struct gen full, folded;
	struct dl_step_stats a, b;
	const struct dl_corr_proc *p, *q;
	struct dl_diagnosis da, db;

	gen_init_keep(&full, NULL, 0);
	gen_init_keep(&folded, NULL, 4);
	for (int k = 0; k < 2; k++) {
		struct gen *g = k ? &folded : &full;
		uint64_t t = MS;

		cuda(g, 101, DL_API_MALLOC, 50 * US, 10 * US, 0, 0);
		for (int i = 0; i < 41; i++) {
			loop_step(g, t);
			t += 10 * MS + (uint64_t)(i * 7919 % 13) * 311 * US;
		}
		end(g, t + 100 * MS, 0);
	}
	p = dl_corr_proc(full.corr, 0);
	q = dl_corr_proc(folded.corr, 0);
	CHECK(p && q, "no process");
	if (!p || !q)
		goto out;
	CHECK_EQ_U64(p->nsteps, 40);
	CHECK_EQ_U64(dl_corr_steps_total(q), 40);
	/* A fold at 8 kept steps leaves 4: between 4 and 7 stay in full. */
	CHECK(q->nsteps >= 4 && q->nsteps < 8 && q->folded.n == 40 - q->nsteps, "%zu kept, %" PRIu64 " folded",
	      q->nsteps, q->folded.n);
	CHECK(!memcmp(&q->steps[q->nsteps - 1], &p->steps[39], sizeof(p->steps[39])), "the last step differs");
	dl_corr_stats(full.corr, NULL, &a);
	dl_corr_stats(folded.corr, NULL, &b);
	CHECK(a.exact && !b.exact, "exact: %d and %d", a.exact, b.exact);
	CHECK(!memcmp(a.sum.cat_ns, b.sum.cat_ns, sizeof(a.sum.cat_ns)) && a.sum.dur_ns == b.sum.dur_ns &&
		      a.sum.kernels == b.sum.kernels && a.sum.h2d_bytes == b.sum.h2d_bytes &&
		      a.sum.workers_cpu_ns == b.sum.workers_cpu_ns &&
		      !memcmp(a.sum.verdicts, b.sum.verdicts, sizeof(a.sum.verdicts)),
	      "totals differ once folded");
	/* The same 40 durations summed in another order: double rounding, ~1e-16 a step. */
	CHECK(a.cv > 0.05 && fabs(a.cv - b.cv) <= 1e-12, "CV %.15f and %.15f", a.cv, b.cv);
	CHECK(fabs((double)b.median_ns - (double)a.median_ns) <= DL_FOLD_REL_ERR * (double)a.median_ns &&
		      fabs((double)b.p90_ns - (double)a.p90_ns) <= DL_FOLD_REL_ERR * (double)a.p90_ns,
	      "median %" PRIu64 " vs %" PRIu64 ", p90 %" PRIu64 " vs %" PRIu64, b.median_ns, a.median_ns, b.p90_ns,
	      a.p90_ns);
	dl_diagnose(full.corr, &full.sum, NULL, &da);
	dl_diagnose(folded.corr, &folded.sum, NULL, &db);
	CHECK(da.verdict == db.verdict && da.share == db.share && da.nsteps == db.nsteps && da.nsteps == 40,
	      "diagnosis %s %.6f (%zu steps) vs %s %.6f (%zu)", dl_verdict_name(da.verdict), da.share, da.nsteps,
	      dl_verdict_name(db.verdict), db.share, db.nsteps);
	dl_fold_free(&a.sum);
	dl_fold_free(&b.sum);
out:
	gen_free(&full);
	gen_free(&folded);
}

/*
 * loop_step's loop (its input wait 2 ms, not 4) with a gradient all-reduce of 1,000 float32 (ncclFloat32 = 7: 4,000 bytes) on
 * the legacy stream at 5.9 ms, after the launches (or, with kernels 0, none): the loss copy's
 * wait is comm_wait, all of it behind kernels in the first run and none in the second; the
 * verdict comm-bound, the finding's bytes and collectives per step the loop's.
 */
static void comm_loop(bool kernels)
{
	struct dl_diag_opts dopts = { 0 };
	struct dl_diagnosis *d = dl_xcalloc(1, sizeof(*d));
	const struct dl_corr_proc *p;
	const struct dl_finding *f = NULL;
	struct gen g;

	gen_init(&g, NULL);
	for (int i = 0; i < 12; i++) {
		uint64_t t = MS + (uint64_t)i * 10 * MS;

		sched(&g, 101, DL_ST_SLEEP, t, 2 * MS, DL_ST_RUNNING);
		cuda(&g, 101, DL_API_MEMCPY_ASYNC, t + 5 * MS, 100 * US, 1 << 20, DL_DIR_H2D);
		for (int k = 0; kernels && k < 3; k++)
			cuda(&g, 101, DL_API_LAUNCH_KERNEL, t + 5 * MS + 100 * US + (uint64_t)k * 100 * US, 0, 0, 0);
		cuda(&g, 101, DL_API_NCCL_ALL_REDUCE, t + 5 * MS + 900 * US, 50 * US, 1000, 7);
		sched(&g, 101, DL_ST_RUNNING, t + 2 * MS, 4 * MS + 100 * US, DL_ST_SLEEP);
		sched(&g, 101, DL_ST_SLEEP, t + 6 * MS + 100 * US, 3 * MS + 900 * US, DL_ST_RUNNING);
		cuda(&g, 101, DL_API_MEMCPY, t + 6 * MS, 4 * MS, 4, DL_DIR_D2H);
	}
	end(&g, 200 * MS, 0);
	p = dl_corr_proc(g.corr, 0);
	CHECK(p && p->nsteps == 11, "11 steps");
	if (!p)
		goto out;
	/* As in test_auto_marker_loop: 1 ns of the 4-byte copy is its transfer at a third of 10 GB/s. */
	CHECK_STEPS(p, s->cat_ns[DL_CAT_COMM_WAIT], 4 * MS - 1);
	CHECK_STEPS(p, s->cat_ns[DL_CAT_GPU_WAIT], 0);
	CHECK_STEPS(p, s->comm_after_compute_ns, kernels ? 4 * MS - 1 : 0);
	CHECK_STEPS(p, s->collectives, 1);
	CHECK_STEPS(p, s->comm_bytes, 4000);
	CHECK_STEPS(p, sum_cats(s->cat_ns), s->dur_ns);
	dl_diagnose(g.corr, &g.sum, &dopts, d);
	CHECK(d->verdict == DL_V_COMM, "verdict %s", dl_verdict_name(d->verdict));
	for (int i = 0; i < d->nfindings; i++)
		if (!strcmp(d->findings[i].rule, "exposed-communication"))
			f = &d->findings[i];
	CHECK(f != NULL, "no exposed-communication finding");
	if (f) {
		/* Evidence: share, ms per step, bytes, collectives, GB/s (4,000 B in 4 ms - 1 ns), after-compute share. */
		CHECK(f->nev == 6 && f->ev[2].value == 4000 && f->ev[3].value == 1 &&
			      fabs(f->ev[4].value - 4000.0 / (4e6 - 1)) < 1e-12 && f->ev[5].value == (kernels ? 1 : 0),
		      "evidence %g B, %g collectives, %g GB/s, %g after compute", f->ev[2].value, f->ev[3].value,
		      f->ev[4].value, f->ev[5].value);
	}
out:
	free(d);
	gen_free(&g);
}

static void test_comm_wait(void)
{
	comm_loop(true);
	comm_loop(false);
}

int main(void)
{
	test_breakdown_priorities();
	test_comm_wait();
	test_spans_union();
	test_auto_marker_loop();
	test_copy_explained_at_measured_bandwidth();
	test_sync_copies_to_idle_device();
	test_lost_records_widen_bounds();
	test_symbol_marker_cuts_mid_call();
	test_no_marker_and_drops();
	test_api_marker_and_findings();
	test_learning_window_bounded();
	test_fold_buckets();
	test_fold_matches_full();
	return check_report("test_correlate");
}
