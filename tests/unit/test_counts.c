// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What was lost, counted: block bytes at submission and at completion (errors,
 * completions not seen), program runs the kernel skipped, through the
 * summary, the reports and a recording. Every expected figure is worked out
 * by hand from the records fed.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "records.h"
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "analysis/summary.h"
#include "capture/procfs.h"
#include "output/report.h"
#include "output/timeline.h"
#include "records/record.h"
#include "records/stream.h"

#define PID 100

static struct dl_bio_submit_ev submit(uint64_t ts, uint32_t bytes, uint32_t flags)
{
	struct dl_bio_submit_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_BIO_SUBMIT, .ts = ts, .tgid = PID, .tid = PID + 1 };
	e.bytes = bytes;
	e.flags = flags;
	return e;
}

static struct dl_bio_ev done(uint64_t ts, uint64_t dur, uint32_t bytes, uint32_t flags)
{
	struct dl_bio_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_BIO, .ts = ts, .tgid = PID, .tid = PID + 1 };
	e.dur_ns = dur;
	e.bytes = bytes;
	e.flags = flags;
	return e;
}

/* Records the stream refused, checked once per test (a check per record would count for nothing). */
static int refused;
#define EMIT(st, rec) (refused += dl_stream_emit((st), &(rec), sizeof(rec)) != 0)

/* The records of one traced process's disk I/O, submissions and completions. */
static void feed_io(struct dl_stream *st, bool submissions)
{
	struct dl_bio_submit_ev s;
	struct dl_bio_ev c;

	dl_emit_trace_start_flags(st, 1000, 0, submissions ? DL_TRACE_BIO_SUBMITS : 0);
	if (submissions) {
		s = submit(1100, 4096, 0);                       /* read request A starts */
		EMIT(st, s);
		s = submit(1110, 8192, DL_BIO_MERGED);           /* a bio joins A */
		EMIT(st, s);
		s = submit(1200, 65536, DL_BIO_WRITE);           /* write request W */
		EMIT(st, s);
		s = submit(1300, 4096, 0);                       /* read request B */
		EMIT(st, s);
	}
	c = done(1100, 100, 12288, 0);                          /* A, merged bio included */
	EMIT(st, c);
	c = done(1200, 200, 16384, DL_BIO_WRITE | DL_BIO_PARTIAL);  /* W: a first part */
	EMIT(st, c);
	c = done(1200, 300, 49152, DL_BIO_WRITE | DL_BIO_ERROR);    /* W: the rest, failed */
	EMIT(st, c);
	c = done(1300, 0, 4096, DL_BIO_UNSEEN);                 /* B: its completion never seen */
	EMIT(st, c);
}

static void test_io_submitted(void)
{
	struct dl_summary s;
	struct dl_stream st = {};
	struct dl_proc *p;

	dl_summary_init(&s);
	dl_stream_add(&st, dl_summary_sink, &s);
	feed_io(&st, true);
	p = dl_summary_find(&s, PID);
	CHECK(p != NULL, "process missing");
	if (p) {
		/* Submitted: A 4096 + its merged 8192 + B 4096; requests: A and B (the merge is no request). */
		CHECK_EQ_U64(p->io.read_bytes, 16384);
		CHECK_EQ_U64(p->io.read_ops, 2);
		CHECK_EQ_U64(p->io.write_bytes, 65536);
		CHECK_EQ_U64(p->io.write_ops, 1);
		/* Completed: 12288 + 16384 + 49152; B's 4096 is unseen, not completed. */
		CHECK_EQ_U64(p->io.done_bytes, 77824);
		CHECK_EQ_U64(p->io.done_ops, 2);   /* A and W: a partial completion is not a request's end */
		CHECK_EQ_U64(p->io.error_ops, 1);
		CHECK_EQ_U64(p->io.error_bytes, 49152);
		CHECK_EQ_U64(p->io.unseen_ops, 1);
		CHECK_EQ_U64(p->io.unseen_bytes, 4096);
		/* Waiting: A's 100 and W's final 300; a partial completion or an unseen one adds none. */
		CHECK_EQ_U64(p->io.wait_ns, 400);
	}
	CHECK_EQ_U64(refused, 0);
	dl_summary_free(&s);
	dl_stream_free(&st);
}

/* A recording made before submissions were recorded counts bytes as they completed. */
static void test_io_completed_only(void)
{
	struct dl_summary s;
	struct dl_stream st = {};
	struct dl_proc *p;

	dl_summary_init(&s);
	dl_stream_add(&st, dl_summary_sink, &s);
	feed_io(&st, false);
	p = dl_summary_find(&s, PID);
	CHECK(p != NULL, "process missing");
	if (p) {
		CHECK_EQ_U64(p->io.read_bytes, 12288 + 4096);
		CHECK_EQ_U64(p->io.read_ops, 2);
		CHECK_EQ_U64(p->io.write_bytes, 16384 + 49152);
		CHECK_EQ_U64(p->io.write_ops, 1);   /* the partial completion is the same request */
	}
	CHECK_EQ_U64(refused, 0);
	dl_summary_free(&s);
	dl_stream_free(&st);
}

struct out {
	char *text, *json;
	size_t text_len, json_len;
};

static void report(const struct dl_summary *s, struct out *o)
{
	struct dl_correlator *c = dl_corr_new(&(struct dl_corr_opts){ 0 });
	struct dl_diagnosis *d = calloc(1, sizeof(*d));
	struct dl_report_model m;
	FILE *f;

	dl_corr_finish(c);
	dl_diagnose(c, s, NULL, d);
	dl_report_model_build(&m, s, c, d);
	f = open_memstream(&o->json, &o->json_len);
	CHECK(dl_report_json(f, &m) == 0, "json");
	fclose(f);
	f = open_memstream(&o->text, &o->text_len);
	dl_report_text(f, &m);
	fclose(f);
	dl_report_model_free(&m);
	dl_corr_free(c);
	free(d);
}

/* The end of a trace whose programs the kernel skipped 3 and 2 times. */
static void feed_misses(struct dl_stream *st)
{
	uint64_t drops[DL_DROP_MAX] = { [DL_DROP_BIO] = 1 };

	dl_emit_trace_start_flags(st, 1000, 0, DL_TRACE_BIO_SUBMITS);
	dl_emit_procinfo(st, 1000, PID, 1, "job", PID);
	dl_emit_prog(st, 5000, "io_complete", 3);
	dl_emit_prog(st, 5000, "sched_switch", 2);
	dl_emit_trace_end_misses(st, 5000, drops, 5);
}

static void check_misses(const struct dl_summary *s, const char *how)
{
	struct out o = {};

	CHECK(s->recursion_misses == 5, "%s: %llu misses", how, (unsigned long long)s->recursion_misses);
	CHECK(s->prog_misses.n == 2, "%s: %zu programs", how, s->prog_misses.n);
	if (s->prog_misses.n == 2)
		CHECK(!strcmp(s->prog_misses.v[0].name, "io_complete") && s->prog_misses.v[0].misses == 3 &&
		      !strcmp(s->prog_misses.v[1].name, "sched_switch") && s->prog_misses.v[1].misses == 2,
		      "%s: programs %s %llu, %s %llu", how, s->prog_misses.v[0].name,
		      (unsigned long long)s->prog_misses.v[0].misses, s->prog_misses.v[1].name,
		      (unsigned long long)s->prog_misses.v[1].misses);
	report(s, &o);
	CHECK(o.text && strstr(o.text, "skipped 5 runs") && strstr(o.text, "io_complete 3, sched_switch 2"),
	      "%s: text report: %s", how, o.text);
	/* Recursion misses are not ring-buffer drops: "events" stays the drop count. */
	CHECK(o.json && strstr(o.json, "\"rule\":\"skipped-runs\""), "%s: no finding: %s", how, o.json);
	CHECK(o.json && strstr(o.json, "\"events\":1,") && strstr(o.json, "\"recursion_misses\":5,") &&
	      strstr(o.json, "\"recursion_misses_by_program\":{\"io_complete\":3,\"sched_switch\":2}"),
	      "%s: JSON: %s", how, o.json);
	free(o.text);
	free(o.json);
}

static void test_recursion_misses(void)
{
	struct dl_summary s;
	struct dl_stream st = {};

	dl_summary_init(&s);
	dl_stream_add(&st, dl_summary_sink, &s);
	feed_misses(&st);
	check_misses(&s, "live");
	CHECK_EQ_U64(refused, 0);
	dl_summary_free(&s);
	dl_stream_free(&st);
}

/* Written to a recording and replayed, the counts come back. */
static void test_misses_replayed(void)
{
	char path[] = "/tmp/dlbpf-test-counts-XXXXXX", err[512];
	struct dl_recorder r;
	struct dl_stream out = {}, in = {};
	struct dl_summary s;
	int fd = mkstemp(path);

	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return;
	close(fd);
	CHECK(dl_recorder_open(&r, path, DL_REC_COMPACT) == 0, "open");
	dl_stream_add(&out, dl_recorder_sink, &r);
	feed_misses(&out);
	CHECK(dl_recorder_close(&r) == 0, "close");
	dl_summary_init(&s);
	dl_stream_add(&in, dl_summary_sink, &s);
	CHECK(dl_replay(path, &in, NULL, err, sizeof(err)) == 0, "replay: %s", err);
	check_misses(&s, "replayed");
	unlink(path);
	dl_summary_free(&s);
	dl_stream_free(&out);
	dl_stream_free(&in);
}

/* A trace end as versions before recursion_misses wrote it: read, with no misses. */
static void test_old_trace_end(void)
{
	struct dl_summary s;
	struct dl_stream st = {};
	struct dl_trace_end_ev e;
	struct out o = {};

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = offsetof(struct dl_trace_end_ev, recursion_misses), .kind = DL_EV_TRACE_END,
			       .ts = 2000 };
	e.drops[DL_DROP_SCHED] = 4;
	e.recursion_misses = 99;   /* past h.size: not the record's */
	dl_summary_init(&s);
	dl_stream_add(&st, dl_summary_sink, &s);
	CHECK(dl_stream_emit(&st, &e, e.h.size) == 0, "old trace end refused");
	CHECK_EQ_U64(st.malformed, 0);
	CHECK_EQ_U64(s.drops_total, 4);
	CHECK_EQ_U64(s.recursion_misses, 0);
	report(&s, &o);
	CHECK(o.text && !strstr(o.text, "skipped"), "a warning with no misses: %s", o.text);
	free(o.text);
	free(o.json);
	CHECK_EQ_U64(refused, 0);
	dl_summary_free(&s);
	dl_stream_free(&st);
}

static struct dl_proc_ev proc_ev(uint32_t what, uint32_t tgid, uint32_t tid)
{
	struct dl_proc_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_PROC, .ts = 1500, .tgid = tgid, .tid = tid };
	e.what = what;
	e.ppid = 1;
	return e;
}

static struct dl_sched_ev sched_ev(uint32_t tgid, uint32_t tid)
{
	return test_sched(tgid, tid, 1600, 10, DL_ST_RUNNING, 0);
}

/* Threads are starts: a tid that comes back is another thread. */
static void test_thread_starts(void)
{
	struct dl_summary s;
	struct dl_stream st = {};
	struct dl_procinfo_ev old;
	struct dl_proc_ev e;
	struct dl_sched_ev sc;
	struct dl_proc *p;

	dl_summary_init(&s);
	dl_stream_add(&st, dl_summary_sink, &s);
	/* Attached with 3 threads; then 2 starts, the second reusing the first's tid. */
	dl_emit_procinfo_threads(&st, 1000, 100, 1, "job", 100, 3);
	e = proc_ev(DL_PROC_THREAD, 100, 150);
	EMIT(&st, e);
	sc = sched_ev(100, 150);
	EMIT(&st, sc);
	e = proc_ev(DL_PROC_EXIT, 100, 150);
	EMIT(&st, e);
	e = proc_ev(DL_PROC_THREAD, 100, 150);
	EMIT(&st, e);
	/* Forked while traced: its first thread, then one start. */
	e = proc_ev(DL_PROC_FORK, 200, 200);
	EMIT(&st, e);
	e = proc_ev(DL_PROC_THREAD, 200, 201);
	EMIT(&st, e);
	/* A procinfo as older versions wrote it (no thread count): the distinct tids seen. */
	memset(&old, 0, sizeof(old));
	old.h = (struct dl_hdr){ .size = offsetof(struct dl_procinfo_ev, threads), .kind = DL_EV_PROCINFO, .ts = 1000,
				 .tgid = 300, .tid = 300 };
	CHECK(dl_stream_emit(&st, &old, old.h.size) == 0, "old procinfo refused");
	for (uint32_t tid = 300; tid < 304; tid++) {
		sc = sched_ev(300, tid);
		EMIT(&st, sc);
		EMIT(&st, sc);
	}
	p = dl_summary_find(&s, 100);
	CHECK(p && p->threads == 5, "attached with 3, 2 starts: %u", p ? p->threads : 0);
	p = dl_summary_find(&s, 200);
	CHECK(p && p->threads == 2, "forked, 1 start: %u", p ? p->threads : 0);
	p = dl_summary_find(&s, 300);
	CHECK(p && p->threads == 4, "old recording, 4 tids: %u", p ? p->threads : 0);
	CHECK_EQ_U64(refused, 0);
	dl_summary_free(&s);
	dl_stream_free(&st);
}

/*
 * The timeline forgets a thread at its exit, unless it made CUDA calls (steps
 * may still be drawn on it); a tid that comes back is a new thread's track.
 */
static void test_timeline_forgets_threads(void)
{
	struct dl_timeline_stats ts;
	struct dl_stream st = {};
	struct dl_cuda_ev c;
	struct dl_timeline *t;
	struct dl_proc_ev e;
	struct dl_sched_ev sc;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	t = dl_timeline_new(f, DL_TIMELINE_JSON);
	dl_stream_add(&st, dl_timeline_sink, t);
	dl_emit_procinfo_threads(&st, 1000, 100, 1, "job", 100, 1);
	/* A thread that calls CUDA, then exits: kept. */
	memset(&c, 0, sizeof(c));
	c.h = (struct dl_hdr){ .size = sizeof(c), .kind = DL_EV_CUDA, .ts = 1100, .tgid = 100, .tid = 101 };
	c.api = DL_API_DEVICE_SYNC;
	c.dur_ns = 5;
	EMIT(&st, c);
	e = proc_ev(DL_PROC_EXIT, 100, 101);
	EMIT(&st, e);
	/* 1000 short threads, one after the other, every one with the same tid. */
	for (int i = 0; i < 1000; i++) {
		e = proc_ev(DL_PROC_THREAD, 100, 150);
		EMIT(&st, e);
		sc = sched_ev(100, 150);
		sc.h.ts = 2000 + 100 * (uint64_t)i;
		EMIT(&st, sc);
		e = proc_ev(DL_PROC_EXIT, 100, 150);
		EMIT(&st, e);
	}
	CHECK(dl_timeline_finish(t, &ts) == 0, "finish");
	fclose(f);
	/* Held at once: the CUDA thread and one short one. */
	CHECK_EQ_U64(ts.threads_max, 2);
	/* Tracks: the process, the CUDA thread's and each short thread's pair (thread, state). */
	CHECK_EQ_U64(ts.tracks, 1 + 2 + 2 * 1000);
	CHECK_EQ_U64(ts.slices, 1 + 1000);
	CHECK_EQ_U64(refused, 0);
	free(buf);
	dl_stream_free(&st);
}

/* num_threads, the 20th field of /proc/PID/stat. */
static void test_stat_threads(void)
{
	struct dl_proc_stat ps;

	CHECK(dl_stat_parse("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 37 0 123 456 78",
			    &ps) == 0 && ps.threads == 37 && ps.ppid == 1, "threads %d ppid %d", ps.threads, ps.ppid);
	CHECK(dl_stat_parse("4242 (job) R 1 4242", &ps) == 0 && ps.threads == 0, "short line: threads %d", ps.threads);
}

int main(void)
{
	test_thread_starts();
	test_timeline_forgets_threads();
	test_stat_threads();
	test_io_submitted();
	test_io_completed_only();
	test_recursion_misses();
	test_misses_replayed();
	test_old_trace_end();
	return check_report("test_counts");
}
