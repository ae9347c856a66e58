// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The stream reads each record once for every sink: the order sinks are added
 * in changes no output byte, a replayed recording gives what the live stream
 * gave, and a copy whose direction is left to the runtime (cudaMemcpyDefault,
 * the driver's cuMemcpy) is the same copy to the summary, the steps and the
 * timeline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "records.h"
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "records/record.h"
#include "output/report.h"
#include "output/report_diag.h"
#include "records/stream.h"
#include "analysis/summary.h"
#include "output/timeline.h"
#include "util.h"

#define US 1000ull
#define MS 1000000ull
#define PID 100
#define TID 101
#define WORKER 200
#define DEV 0x7f0000000000ull      /* a cudaMalloc'ed range of 64 MiB */
#define PINNED 0x10000000ull       /* a cudaMallocHost'ed range of 4 MiB */
#define UNPINNED 0x20000000ull     /* a cudaMallocHost that failed: pageable */
#define PAGEABLE 0x30000000ull
#define KERNEL 0x401000ull
#define NSTEPS 12

/* The loop's launches and copies come as the probe writes those that fit (DL_EV_LAUNCH, DL_EV_CALL_SHORT). */
static bool probe_records;

/* How the loop's copies say their direction. */
enum variant { V_EXPLICIT, V_DEFAULT, V_DRIVER, V_DRIVER_DEFAULT, V_COUNT };

/* Records back to back, as a recording holds them (every record's size is a multiple of 8). */
typedef DL_VEC(unsigned char) recs_t;

static void put(recs_t *r, const void *rec)
{
	dl_vec_append(r, rec, ((const struct dl_hdr *)rec)->size);
}

static struct dl_cuda_ev call(enum dl_api_id api, uint32_t tid, uint64_t ts, uint64_t dur, int64_t ret)
{
	struct dl_cuda_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_CUDA, .ts = ts, .tgid = PID, .tid = tid };
	e.api = api;
	e.dur_ns = dur;
	e.ret = ret;
	return e;
}

static void alloc(recs_t *r, enum dl_api_id api, uint64_t ts, uint64_t ptr, uint64_t size, int64_t ret)
{
	struct dl_cuda_ev e = call(api, TID, ts, 10 * US, ret);

	e.out = ptr;
	e.arg[1] = size;
	put(r, &e);
}

/* e as a short call with its first nargs arguments. */
static void put_short(recs_t *r, const struct dl_cuda_ev *e, unsigned nargs)
{
	union {
		struct dl_call_short_ev s;
		unsigned char b[sizeof(struct dl_call_short_ev) + DL_CALL_SHORT_ARGS_MAX * sizeof(uint64_t)];
	} u;

	memset(&u, 0, sizeof(u));
	u.s.h = e->h;
	u.s.h.kind = DL_EV_CALL_SHORT;
	u.s.h.size = sizeof(u.s) + nargs * sizeof(uint64_t);
	u.s.dur_ns = e->dur_ns;
	u.s.site = e->site;
	u.s.ret = (int32_t)e->ret;
	u.s.api = e->api;
	u.s.flags = (uint8_t)e->flags;
	u.s.depth = (uint8_t)e->depth;
	memcpy(u.s.arg, e->arg, nargs * sizeof(uint64_t));
	put(r, &u);
}

static void copy(recs_t *r, enum variant v, uint64_t ts, uint64_t dur, uint64_t dst, uint64_t src, uint64_t bytes,
		 enum dl_dir dir)
{
	static const enum dl_api_id driver[DL_DIR_COUNT] = { [DL_DIR_H2D] = DL_API_CU_HTOD_V2,
							     [DL_DIR_D2H] = DL_API_CU_DTOH_V2 };
	struct dl_cuda_ev e = call(v == V_DRIVER ? driver[dir] : v == V_DRIVER_DEFAULT ? DL_API_CU_MEMCPY
							  : DL_API_MEMCPY, TID, ts, dur, 0);

	e.arg[0] = dst;
	e.arg[1] = src;
	e.arg[2] = bytes;
	if (v == V_EXPLICIT || v == V_DEFAULT)
		e.arg[3] = v == V_DEFAULT ? DL_DIR_DEFAULT : dir;
	if (probe_records)
		put_short(r, &e, 5);
	else
		put(r, &e);
}

static void sched(recs_t *r, uint32_t pid, uint32_t tid, uint32_t state, uint64_t ts, uint64_t dur, uint32_t next)
{
	struct dl_sched_ev e = test_sched(pid, tid, ts, dur, state, next);

	put(r, &e);
}

static void procinfo(recs_t *r, uint32_t pid, const char *comm)
{
	struct dl_procinfo_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_PROCINFO, .ts = MS, .tgid = pid, .tid = pid };
	e.nspid = pid;
	strcpy(e.comm, comm);
	put(r, &e);
}

/*
 * A training loop, one step per 10 ms from t: the main thread waits 2 ms for
 * input, copies a 1 MiB batch from pinned memory to the device, launches three
 * kernels, works until 3.6 ms, then reads the 4-byte loss back into pageable
 * memory, which waits 6.4 ms for the GPU. A loader process works meanwhile.
 * extras: the loader reads the disk, and each step also copies 256 KiB from
 * memory whose pinning failed.
 */
static void loop(recs_t *r, enum variant v, bool extras)
{
	struct dl_trace_start_ev ts = { .h = { .size = sizeof(ts), .kind = DL_EV_TRACE_START, .ts = MS } };
	struct dl_trace_end_ev te = { .h = { .size = sizeof(te), .kind = DL_EV_TRACE_END, .ts = 200 * MS } };
	union {
		struct dl_sym_ev e;
		char buf[sizeof(struct dl_sym_ev) + 16];
	} sym = { .e = { .h = { .size = sizeof(sym), .kind = DL_EV_SYM, .ts = MS, .tgid = PID, .tid = PID },
			 .addr = KERNEL } };

	strcpy(sym.e.name, "k_forward");
	put(r, &ts);
	procinfo(r, PID, "train");
	procinfo(r, WORKER, "loader");
	put(r, &sym);
	alloc(r, DL_API_MALLOC, 2 * MS, DEV, 64 << 20, 0);
	alloc(r, DL_API_MALLOC_HOST, 2 * MS + 20 * US, PINNED, 4 << 20, 0);
	/* Without a GPU every allocation fails: it must not make its range pinned. */
	alloc(r, DL_API_MALLOC_HOST, 2 * MS + 40 * US, UNPINNED, 4 << 20, 2);
	for (unsigned i = 0; i < NSTEPS; i++) {
		uint64_t t = 5 * MS + i * 10 * MS;

		sched(r, PID, TID, DL_ST_SLEEP, t, 2 * MS, DL_ST_RUNNING);
		copy(r, v, t + 2 * MS, 200 * US, DEV + (i << 20), PINNED, 1 << 20, DL_DIR_H2D);
		for (unsigned k = 0; k < 3; k++) {
			struct dl_cuda_ev e = call(DL_API_LAUNCH_KERNEL, TID, t + 2200 * US + k * 100 * US, 0, 0);

			e.flags = DL_CUDA_ENTRY_ONLY;
			e.arg[0] = KERNEL;
			e.arg[1] = 64 | 1ull << 32;
			e.arg[2] = 1;
			e.arg[3] = 256 | 1ull << 32;
			e.arg[4] = 1;
			if (probe_records) {
				struct dl_launch_ev l = { .h = e.h, .func = KERNEL, .grid_x = 64, .grid_y = 1, .grid_z = 1,
							  .api = DL_API_LAUNCH_KERNEL,
							  .block_depth = 256 | 1u << DL_LAUNCH_BX_BITS |
									 1u << (DL_LAUNCH_BX_BITS + DL_LAUNCH_BY_BITS) };

				l.h.size = sizeof(l);
				l.h.kind = DL_EV_LAUNCH;
				put(r, &l);
				continue;
			}
			put(r, &e);
		}
		/* Staged through the failed pinned allocation: a pageable copy. */
		if (extras)
			copy(r, v, t + 2500 * US, 50 * US, DEV, UNPINNED, 256 << 10, DL_DIR_H2D);
		sched(r, PID, TID, DL_ST_RUNNING, t + 2 * MS, 1600 * US, DL_ST_SLEEP);
		copy(r, v, t + 3600 * US, 6400 * US, PAGEABLE, DEV + (i << 20), 4, DL_DIR_D2H);
		sched(r, PID, TID, DL_ST_SLEEP, t + 3600 * US, 6400 * US, DL_ST_RUNNING);
		sched(r, WORKER, WORKER, DL_ST_RUNNING, t, 3 * MS, DL_ST_DISK);
		if (extras) {
			struct dl_bio_ev b = { .h = { .size = sizeof(b), .kind = DL_EV_BIO, .ts = t + 3 * MS,
						      .tgid = WORKER, .tid = WORKER },
					       .dur_ns = 2 * MS, .bytes = 1 << 20, .dev = 8 << 20 };

			put(r, &b);
		}
	}
	put(r, &te);
}

/* One run of a stream: its sinks and everything they write. */
struct run {
	struct dl_stream st;
	struct dl_summary sum;
	struct dl_correlator *corr;
	struct dl_step_stage stage;
	struct dl_timeline *tl;
	struct dl_step_printer printer;
	FILE *steps_f, *tl_f;
	char *steps_buf, *tl_buf, *json_buf, *text_buf;
	size_t steps_len, tl_len, json_len, text_len;
};

static void on_step(void *ctx, const struct dl_step *s)
{
	struct run *r = ctx;

	dl_print_step(&r->printer, s);
	dl_timeline_step(r->tl, s);
}

enum sink { S_SUMMARY, S_CORR, S_TIMELINE, S_RECORDER, S_COUNT };

static void run_start(struct run *r, enum dl_timeline_format fmt)
{
	memset(r, 0, sizeof(*r));
	dl_summary_init(&r->sum);
	r->corr = dl_corr_new(&(struct dl_corr_opts){ .pcie_gbps = 10 });
	r->stage = (struct dl_step_stage){ .corr = r->corr, .fn = on_step, .ctx = r };
	r->tl_f = open_memstream(&r->tl_buf, &r->tl_len);
	r->tl = dl_timeline_new(r->tl_f, fmt);
	dl_timeline_set_clocks(r->tl, 1000, 2000, 1700000000000000000ull);
	r->steps_f = open_memstream(&r->steps_buf, &r->steps_len);
	r->printer.f = r->steps_f;
}

static void run_add(struct run *r, enum sink k, struct dl_recorder *rec)
{
	switch (k) {
	case S_SUMMARY:
		dl_stream_add(&r->st, dl_summary_sink, &r->sum);
		break;
	case S_CORR:
		dl_stream_add(&r->st, dl_corr_sink, r->corr);
		break;
	case S_TIMELINE:
		dl_stream_add(&r->st, dl_timeline_sink, r->tl);
		break;
	default:
		if (rec)
			dl_stream_add(&r->st, dl_recorder_sink, rec);
		break;
	}
}

/* The step stage, after the sinks in whatever order they came: steps after each record. */
static void run_stage(struct run *r)
{
	dl_stream_add(&r->st, dl_step_stage_sink, &r->stage);
}

/* Plays the records into the run's stream; how many it refused. */
static size_t play(struct run *r, const recs_t *recs)
{
	size_t rejected = 0;

	run_stage(r);

	for (size_t off = 0; off < recs->n; off += ((const struct dl_hdr *)&recs->v[off])->size)
		rejected += dl_stream_emit(&r->st, &recs->v[off], recs->n - off) != 0;
	return rejected;
}

/* Writes the run's outputs; how many of the JSON report and the timeline failed. */
static int run_finish(struct run *r, struct dl_diagnosis *d)
{
	FILE *f;
	struct dl_report_model m;
	int failed = 0;

	dl_corr_finish(r->corr);
	dl_corr_take_steps(r->corr, on_step, r);
	dl_diagnose(r->corr, &r->sum, NULL, d);
	dl_report_model_build(&m, &r->sum, r->corr, d);
	f = open_memstream(&r->json_buf, &r->json_len);
	failed += dl_report_json(f, &m) != 0;
	fclose(f);
	f = open_memstream(&r->text_buf, &r->text_len);
	dl_report_text(f, &m);
	dl_report_steps_text(f, &m);
	fclose(f);
	dl_report_model_free(&m);
	failed += dl_timeline_finish(r->tl, NULL) != 0;
	fclose(r->tl_f);
	fclose(r->steps_f);
	return failed;
}

static void run_free(struct run *r)
{
	dl_corr_free(r->corr);
	dl_summary_free(&r->sum);
	dl_stream_free(&r->st);
	free(r->steps_buf);
	free(r->tl_buf);
	free(r->json_buf);
	free(r->text_buf);
}

static bool same(const char *a, size_t na, const char *b, size_t nb)
{
	return na == nb && !memcmp(a, b, na);
}

/* Which outputs of two runs differ: a bit each for the JSON, the report, the step lines, the timeline. */
static unsigned differs(const struct run *a, const struct run *b)
{
	unsigned d = 0;

	d |= same(a->json_buf, a->json_len, b->json_buf, b->json_len) ? 0 : 1;
	d |= same(a->text_buf, a->text_len, b->text_buf, b->text_len) ? 0 : 2;
	d |= same(a->steps_buf, a->steps_len, b->steps_buf, b->steps_len) ? 0 : 4;
	d |= same(a->tl_buf, a->tl_len, b->tl_buf, b->tl_len) ? 0 : 8;
	return d;
}

static void check_same(const struct run *a, const struct run *b, const char *what)
{
	unsigned d = differs(a, b);

	CHECK(d == 0, "%s:%s%s%s%s differ", what, d & 1 ? " JSON" : "", d & 2 ? " report" : "",
	      d & 4 ? " step lines" : "", d & 8 ? " timeline" : "");
}

/* Fills perm with the n-th ordering of the sinks (base S_COUNT digits); false if one repeats. */
static bool ordering(unsigned n, enum sink perm[S_COUNT])
{
	unsigned seen = 0;

	for (int k = 0; k < S_COUNT; k++, n /= S_COUNT) {
		perm[k] = (enum sink)(n % S_COUNT);
		if (seen & 1u << perm[k])
			return false;
		seen |= 1u << perm[k];
	}
	return true;
}

/* Every order of the four sinks writes the same bytes, and the recording replays to them too. */
static void test_sinks_in_any_order(void)
{
	static const enum dl_timeline_format fmts[] = { DL_TIMELINE_PFTRACE, DL_TIMELINE_JSON };
	char path[] = "/tmp/dlbpf-test-stream-XXXXXX", err[256];
	recs_t recs = { 0 };
	int fd = mkstemp(path);

	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return;
	close(fd);
	loop(&recs, V_DEFAULT, true);
	for (size_t f = 0; f < sizeof(fmts) / sizeof(fmts[0]); f++) {
		struct run first, replay;
		struct dl_diagnosis d;
		enum sink perm[S_COUNT];
		int orders = 0, broken = 0, unequal = 0;
		unsigned what = 0;

		/* Each order's failures are counted, and checked once for all 24 of them. */
		for (unsigned n = 0; n < S_COUNT * S_COUNT * S_COUNT * S_COUNT; n++) {
			struct dl_recorder rec;
			struct run r;
			int bad;

			if (!ordering(n, perm))
				continue;
			run_start(&r, fmts[f]);
			bad = dl_recorder_open(&rec, path, DL_REC_COMPACT) != 0;
			for (int k = 0; k < S_COUNT; k++)
				run_add(&r, perm[k], &rec);
			bad += play(&r, &recs) != 0;
			bad += dl_recorder_close(&rec) != 0;
			bad += rec.records != r.st.seq;
			bad += run_finish(&r, &d);
			broken += bad != 0;
			if (orders++) {
				unsigned dd = differs(&first, &r);

				unequal += dd != 0;
				what |= dd;
				run_free(&r);
				continue;
			}
			first = r;
			CHECK(d.nsteps == NSTEPS - 1, "steps %zu", d.nsteps);
		}
		CHECK_EQ_U64(orders, 24);
		CHECK(broken == 0, "%d orders refused a record, failed to record all of them or to write", broken);
		CHECK(unequal == 0, "%d orders wrote other bytes than the first (mask %#x: JSON, report, steps, "
		      "timeline)", unequal, what);
		/* The last order's recording through the same stream: the same bytes again. */
		run_start(&replay, fmts[f]);
		run_add(&replay, S_TIMELINE, NULL);
		run_add(&replay, S_CORR, NULL);
		run_add(&replay, S_SUMMARY, NULL);
		run_stage(&replay);
		CHECK(dl_replay(path, &replay.st, NULL, err, sizeof(err)) == 0, "replay: %s", err);
		CHECK(run_finish(&replay, &d) == 0, "replay: writing failed");
		check_same(&first, &replay, "replay");
		run_free(&replay);
		run_free(&first);
	}
	unlink(path);
	dl_vec_free(&recs);
}

static struct run *run_loop(enum variant v, struct dl_diagnosis *d)
{
	struct run *r = dl_xcalloc(1, sizeof(*r));
	recs_t recs = { 0 };
	size_t refused;
	int failed;

	loop(&recs, v, false);
	run_start(r, DL_TIMELINE_JSON);
	for (int k = 0; k < S_RECORDER; k++)
		run_add(r, (enum sink)k, NULL);
	refused = play(r, &recs);
	failed = run_finish(r, d);
	CHECK(refused == 0 && failed == 0, "variant %d: %zu records refused, %d outputs failed", v, refused, failed);
	dl_vec_free(&recs);
	return r;
}

static size_t count(const char *buf, size_t len, const char *needle)
{
	size_t n = 0;

	for (const char *p = buf; p && p < buf + len && (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/*
 * Copies that leave the direction to the runtime, to and from a known device
 * allocation: the summary, the steps (breakdown, the D2H as the sync that ends
 * a step, the automatic marker) and the timeline see what they see for the
 * same loop with explicit directions.
 */
static void test_default_copies_agree(void)
{
	static const char *const names[V_COUNT] = { "explicit kinds", "cudaMemcpyDefault", "cuMemcpyHtoD/DtoH",
						     "cuMemcpy" };
	struct dl_diagnosis d[V_COUNT];
	const struct dl_corr_proc *ref;
	struct run *r[V_COUNT];

	for (int v = 0; v < V_COUNT; v++)
		r[v] = run_loop((enum variant)v, &d[v]);
	ref = dl_corr_proc(r[V_EXPLICIT]->corr, 0);
	for (int v = 0; v < V_COUNT; v++) {
		const struct dl_proc *p = dl_summary_find(&r[v]->sum, PID);
		const struct dl_corr_proc *cp = dl_corr_proc(r[v]->corr, 0);
		const char *n = names[v];

		CHECK(p && cp && ref, "%s: process missing", n);
		if (!p || !cp || !ref)
			continue;
		/* summary */
		CHECK(p->copies[DL_DIR_H2D].count == NSTEPS && p->copies[DL_DIR_H2D].pageable == 0,
		      "%s: h2d %llu copies, %llu pageable", n, (unsigned long long)p->copies[DL_DIR_H2D].count,
		      (unsigned long long)p->copies[DL_DIR_H2D].pageable);
		CHECK(p->copies[DL_DIR_D2H].count == NSTEPS && p->copies[DL_DIR_D2H].pageable == NSTEPS,
		      "%s: d2h %llu copies, %llu pageable", n, (unsigned long long)p->copies[DL_DIR_D2H].count,
		      (unsigned long long)p->copies[DL_DIR_D2H].pageable);
		CHECK(!p->copies[DL_DIR_H2H].count && !p->copies[DL_DIR_DEFAULT].count, "%s: h2h/default copies", n);
		/* steps: the loss copy is the sync, the batch copy after it the marker */
		CHECK(cp->nsteps == NSTEPS - 1, "%s: %zu steps (%s)", n, cp->nsteps, cp->marker_desc);
		CHECK(strstr(cp->marker_desc, "(h2d) after a blocking sync") != NULL, "%s: marker '%s'", n,
		      cp->marker_desc);
		CHECK(d[v].nsteps == NSTEPS - 1 && d[v].verdict == DL_V_GPU, "%s: %zu steps, verdict %s", n,
		      d[v].nsteps, dl_verdict_name(d[v].verdict));
		{
			/* Over all steps, one check each: the first step that fails is named. */
			size_t copies = 0, cats = 0, unlike = 0, at[3] = { 0 };

			for (size_t i = 0; i < cp->nsteps; i++) {
				const struct dl_step *s = &cp->steps[i];

				if (!(s->h2d_copies == 1 && s->d2h_copies == 1 && s->pageable_copies == 1) &&
				    copies++ == 0)
					at[0] = i;
				if (!(s->cat_ns[DL_CAT_H2D] == 200 * US && s->cat_ns[DL_CAT_D2H] > 0 &&
				      s->cat_ns[DL_CAT_GPU_WAIT] > 6 * MS && s->cat_ns[DL_CAT_CUDA_OTHER] == 0) &&
				    cats++ == 0)
					at[1] = i;
				if ((i >= ref->nsteps || memcmp(s->cat_ns, ref->steps[i].cat_ns, sizeof(s->cat_ns)) ||
				     s->verdict != ref->steps[i].verdict) && unlike++ == 0)
					at[2] = i;
			}
			CHECK(copies == 0, "%s: %zu steps without one h2d, one d2h, one pageable copy (first %zu)", n,
			      copies, at[0]);
			CHECK(cats == 0, "%s: %zu steps with another h2d, d2h, gpu_wait or cuda_other (first %zu)", n,
			      cats, at[1]);
			CHECK(unlike == 0, "%s: %zu steps differ from explicit kinds (first %zu)", n, unlike, at[2]);
		}
		/* timeline */
		CHECK(count(r[v]->tl_buf, r[v]->tl_len, "\"direction\":\"h2d\"") == NSTEPS &&
		      count(r[v]->tl_buf, r[v]->tl_len, "\"direction\":\"d2h\"") == NSTEPS,
		      "%s: timeline directions", n);
		CHECK(!count(r[v]->tl_buf, r[v]->tl_len, "\"direction\":\"default\"") &&
		      !count(r[v]->tl_buf, r[v]->tl_len, "\"direction\":\"h2h\""), "%s: unresolved copies", n);
		CHECK(count(r[v]->tl_buf, r[v]->tl_len, "\"host memory\":\"pinned\"") == NSTEPS &&
		      count(r[v]->tl_buf, r[v]->tl_len, "\"host memory\":\"pageable\"") == NSTEPS,
		      "%s: timeline host memory", n);
	}
	/* cudaMemcpyDefault differs from explicit kinds only in an argument no output shows. */
	check_same(r[V_EXPLICIT], r[V_DEFAULT], "cudaMemcpyDefault against explicit kinds");
	for (int v = 0; v < V_COUNT; v++) {
		run_free(r[v]);
		free(r[v]);
	}
}

/* A process's container: kept by the summary, inherited by a fork, refused with bytes of another kind. */
static void test_cgroup_records(void)
{
	struct dl_stream st = { 0 };
	struct dl_summary sum;
	struct dl_container c = { .runtime = "containerd", .pod_uid = "3c9a5d6e-1b2f-4c3d-9e8f-0a1b2c3d4e5f" };
	struct dl_proc_ev fork = { .h = { .size = sizeof(fork), .kind = DL_EV_PROC, .ts = 2 * MS, .tgid = 101,
					  .tid = 101 }, .what = DL_PROC_FORK, .ppid = 100, .comm = "child" };
	struct dl_cgroup_ev bad;

	memset(c.id, 'a', 64);
	dl_summary_init(&sum);
	dl_stream_add(&st, dl_summary_sink, &sum);
	dl_emit_procinfo(&st, MS, 100, 1, "train", 100);
	dl_emit_cgroup(&st, MS, 100, &c);
	CHECK(dl_stream_emit(&st, &fork, sizeof(fork)) == 0, "fork");
	CHECK(!memcmp(&dl_summary_find(&sum, 100)->container, &c, sizeof(c)), "the container of pid 100");
	CHECK(!memcmp(&dl_summary_find(&sum, 101)->container, &c, sizeof(c)), "a fork's is its parent's");
	static const struct { const char *field; const char *v; } hostile[] = {
		{ "id", "4F0D" }, { "id", "4f0d/../x" }, { "pod", "3c9a\n" }, { "runtime", "docker\x1b[2J" },
		{ "runtime", "Docker" }, { "job", "12 34" },
	};
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		memset(&bad, 0, sizeof(bad));
		bad.h = (struct dl_hdr){ .size = sizeof(bad), .kind = DL_EV_CGROUP, .ts = 3 * MS, .tgid = 100, .tid = 100 };
		char *f = !strcmp(hostile[i].field, "id") ? bad.c.id : !strcmp(hostile[i].field, "pod") ? bad.c.pod_uid
			: !strcmp(hostile[i].field, "runtime") ? bad.c.runtime : bad.c.slurm_job;
		memcpy(f, hostile[i].v, strlen(hostile[i].v));
		CHECK(dl_stream_emit(&st, &bad, sizeof(bad)) == -1, "%s '%s' accepted", hostile[i].field, hostile[i].v);
	}
	/* Unterminated: every byte of the id a hex digit, no NUL. */
	memset(&bad, 0, sizeof(bad));
	bad.h = (struct dl_hdr){ .size = sizeof(bad), .kind = DL_EV_CGROUP, .ts = 3 * MS, .tgid = 100, .tid = 100 };
	memset(bad.c.id, 'b', sizeof(bad.c.id));
	CHECK(dl_stream_emit(&st, &bad, sizeof(bad)) == -1, "an unterminated id accepted");
	CHECK_EQ_U64(st.malformed, sizeof(hostile) / sizeof(hostile[0]) + 1);
	CHECK(!memcmp(&dl_summary_find(&sum, 100)->container, &c, sizeof(c)), "a refused record changed it");
	dl_summary_free(&sum);
	dl_stream_free(&st);
}

/*
 * CUDA_VISIBLE_DEVICES: kept by the summary, inherited by a fork; an ordinal
 * names its entry of a plain list (indexes or GPU-/MIG- UUIDs), nothing past
 * its end, and nothing of a list the runtime would parse its own way.
 */
static void test_env_records(void)
{
	struct dl_stream st = { 0 };
	struct dl_summary sum;
	struct dl_proc_ev fork = { .h = { .size = sizeof(fork), .kind = DL_EV_PROC, .ts = 2 * MS, .tgid = 101,
					  .tid = 101 }, .what = DL_PROC_FORK, .ppid = 100, .comm = "child" };
	struct dl_env_ev bad;
	static const struct {
		const char *v;
		uint32_t dev;
		const char *want;   /* NULL: none */
	} cases[] = {
		{ "0,2", 1, "2" }, { "0,2", 0, "0" }, { "0,2", 2, NULL }, { "3", 0, "3" },
		{ "GPU-8b7f2a44-1c2d-4e5f-9a0b-1c2d3e4f5a6b,1", 0, "GPU-8b7f2a44-1c2d-4e5f-9a0b-1c2d3e4f5a6b" },
		{ "MIG-GPU-8b7f2a44/1/0", 0, "MIG-GPU-8b7f2a44/1/0" }, { "0,,1", 1, NULL }, { "0, 1", 1, NULL },
		{ "-1", 0, NULL }, { "", 0, NULL }, { "0,x", 0, NULL },
	};
	char id[DL_VISIBLE_LEN];

	dl_summary_init(&sum);
	dl_stream_add(&st, dl_summary_sink, &sum);
	dl_emit_procinfo(&st, MS, 100, 1, "train", 100);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool got;

		dl_emit_env(&st, MS, 100, cases[i].v);
		got = dl_proc_visible_id(dl_summary_find(&sum, 100), cases[i].dev, id, sizeof(id));
		CHECK(cases[i].want ? got && !strcmp(id, cases[i].want) : !got, "'%s' ordinal %u: %s, want %s",
		      cases[i].v, cases[i].dev, got ? id : "none", cases[i].want ? cases[i].want : "none");
	}
	dl_emit_env(&st, MS, 100, "1,0");
	CHECK(dl_stream_emit(&st, &fork, sizeof(fork)) == 0, "fork");
	CHECK(dl_proc_visible_id(dl_summary_find(&sum, 101), 0, id, sizeof(id)) && !strcmp(id, "1"),
	      "a fork's is its parent's");
	memset(&bad, 'x', sizeof(bad));
	bad.h = (struct dl_hdr){ .size = sizeof(bad), .kind = DL_EV_ENV, .ts = 3 * MS, .tgid = 100, .tid = 100 };
	CHECK(dl_stream_emit(&st, &bad, sizeof(bad)) == -1, "an unterminated value accepted");
	dl_summary_free(&sum);
	dl_stream_free(&st);
}

/* A malformed record is counted once, by the stream, and no sink sees it. */
static void test_malformed_counted_once(void)
{
	struct run r;
	struct dl_diagnosis d;
	struct dl_cuda_ev e = call(DL_API_MEMCPY, TID, MS, US, 0);

	run_start(&r, DL_TIMELINE_JSON);
	for (int k = 0; k < S_RECORDER; k++)
		run_add(&r, (enum sink)k, NULL);
	e.h.size = sizeof(struct dl_hdr) + 8;
	CHECK(dl_stream_emit(&r.st, &e, sizeof(e)) == -1, "malformed record accepted");
	e.h.size = sizeof(e);
	e.h.kind = DL_EV_SYM;                 /* a symbol record without its terminating NUL */
	memset(&e.dur_ns, 'x', sizeof(e) - sizeof(e.h));
	CHECK(dl_stream_emit(&r.st, &e, sizeof(e)) == -1, "unterminated symbol accepted");
	/* A program's name is its C function's (the JSON's keys promise it): anything else is corrupt. */
	static const char *const bad_names[] = { "", "9lives", "a.b", "sp ace", "\xff", "sixteen_bytes_xx" };
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		struct dl_prog_ev p;

		memset(&p, 0, sizeof(p));
		p.h = (struct dl_hdr){ .size = sizeof(p), .kind = DL_EV_PROG, .ts = MS };
		memcpy(p.name, bad_names[i], strlen(bad_names[i]));
		CHECK(dl_stream_emit(&r.st, &p, sizeof(p)) == -1, "program name '%s' accepted", bad_names[i]);
	}
	run_finish(&r, &d);
	CHECK_EQ_U64(r.st.malformed, 2 + sizeof(bad_names) / sizeof(bad_names[0]));
	CHECK_EQ_U64(r.st.seq, 0);
	CHECK_EQ_U64(r.sum.n, 0);
	CHECK_EQ_U64(dl_corr_nprocs(r.corr), 0);
	run_free(&r);
}

/*
 * A launch or short call record is read as the dl_cuda_ev it stands for,
 * byte for byte (what sinks and recordings get); one of a size or an API it
 * cannot be is malformed, one of an API newer than this build stays a bare
 * record.
 */
static void test_probe_records(void)
{
	struct dl_cuda_ev full = call(DL_API_LAUNCH_KERNEL_PTSZ, TID, MS, 0, 0);
	struct dl_launch_ev l = { .h = full.h, .func = KERNEL, .stream = 0x5000, .site = KERNEL + 0x40,
				  .grid_x = 0x7fffffff, .grid_y = 0xffff, .grid_z = 3, .api = DL_API_LAUNCH_KERNEL_PTSZ,
				  .shmem = 0xffff,
				  .block_depth = 1024 | 2047u << DL_LAUNCH_BX_BITS |
						 127u << (DL_LAUNCH_BX_BITS + DL_LAUNCH_BY_BITS) |
						 7u << (DL_LAUNCH_BX_BITS + DL_LAUNCH_BY_BITS + DL_LAUNCH_BZ_BITS) };
	struct dl_stream s = { 0 };
	struct dl_rec_in in;
	struct dl_diagnosis d[2];
	struct run *r[2];

	full.flags = DL_CUDA_ENTRY_ONLY;
	full.depth = 7;
	full.arg[0] = KERNEL;
	full.arg[1] = 0x7fffffff | 0xffffull << 32;
	full.arg[2] = 3;
	full.arg[3] = 1024 | 2047ull << 32;
	full.arg[4] = 127;
	full.arg[6] = 0xffff;
	full.arg[7] = 0x5000;
	full.site = KERNEL + 0x40;
	l.h.size = sizeof(l);
	l.h.kind = DL_EV_LAUNCH;
	CHECK(dl_stream_read(&s, &in, &l, sizeof(l)) == 0 && in.is_call, "launch record refused");
	CHECK(in.h->size == sizeof(full) && !memcmp(in.h, &full, sizeof(full)), "launch record expanded otherwise");
	CHECK(in.call.grid[0] == 0x7fffffff && in.call.grid[1] == 0xffff && in.call.grid[2] == 3 &&
	      in.call.block[0] == 1024 && in.call.block[1] == 2047 && in.call.block[2] == 127 &&
	      in.call.shmem == 0xffff && in.call.stream == 0x5000 && in.call.depth == 7 && in.call.entry_only,
	      "launch record decoded otherwise");
	l.h.size = sizeof(l) - 8;
	CHECK(dl_stream_read(&s, &in, &l, sizeof(l)) == -1, "short launch record accepted");
	l.h.size = sizeof(l);
	l.api = DL_API_MEMCPY;
	CHECK(dl_stream_read(&s, &in, &l, sizeof(l)) == -1, "launch record of a copy accepted");
	l.api = DL_API_COUNT;
	CHECK(dl_stream_read(&s, &in, &l, sizeof(l)) == 0 && !in.is_call && in.h->kind == DL_EV_CUDA,
	      "launch record of a newer API not kept bare");

	/* A stream synchronization's two arguments, a negative error, nested in a runtime call. */
	full = call(DL_API_STREAM_SYNC, TID, MS, 5 * US, -2);
	full.flags = DL_CUDA_IN_RUNTIME;
	full.depth = 3;
	full.arg[0] = 0x5000;
	full.arg[1] = 0x77;
	full.site = KERNEL + 0x80;
	{
		recs_t one = { 0 };
		struct dl_call_short_ev *sh;

		put_short(&one, &full, 2);
		sh = (struct dl_call_short_ev *)one.v;
		CHECK(sh->h.size == 64, "a short call of 2 arguments is %u bytes", sh->h.size);
		CHECK(dl_stream_read(&s, &in, sh, sh->h.size) == 0 && in.is_call, "short call refused");
		CHECK(in.h->size == sizeof(full) && !memcmp(in.h, &full, sizeof(full)), "short call expanded otherwise");
		CHECK(in.call.stream == 0x5000 && in.call.ret == -2 && in.call.depth == 3 && in.call.dur_ns == 5 * US,
		      "short call decoded otherwise");
		sh->h.size = sizeof(*sh) - 8;
		CHECK(dl_stream_read(&s, &in, sh, sizeof(*sh) + 16) == -1, "short call record too short accepted");
		sh->h.size = 64;
		sh->api = DL_API_MEMCPY;   /* its decoding reads 4 arguments */
		CHECK(dl_stream_read(&s, &in, sh, sh->h.size) == -1, "short call of a copy with 2 arguments accepted");
		sh->api = DL_API_COUNT;
		CHECK(dl_stream_read(&s, &in, sh, sh->h.size) == 0 && !in.is_call && in.h->kind == DL_EV_CUDA,
		      "short call of a newer API not kept bare");
		dl_vec_free(&one);
	}
	CHECK_EQ_U64(s.malformed, 4);
	dl_stream_free(&s);

	/* The loop with its launches and copies as the probe writes them: every output the same. */
	for (int i = 0; i < 2; i++) {
		probe_records = i;
		r[i] = run_loop(V_EXPLICIT, &d[i]);
	}
	probe_records = false;
	check_same(r[0], r[1], "launch and short call records against full ones");
	for (int i = 0; i < 2; i++) {
		run_free(r[i]);
		free(r[i]);
	}
}

int main(void)
{
	test_sinks_in_any_order();
	test_default_copies_agree();
	test_malformed_counted_once();
	test_cgroup_records();
	test_env_records();
	test_probe_records();
	return check_report("test_stream");
}
