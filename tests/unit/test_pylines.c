// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Python lines of waits and CPU samples from records: a DL_EV_PYSTACK's
 * frames are named by the code records before it, as a call's are; each
 * thread's stacks are kept apart by what they name, and ranked by samples
 * or by wait time inside a window (a wait straddling its edge counts the part
 * inside); a stack none of whose frames is named counts in the total but is
 * never a line; a wait is found by thread and time; the job's own frame is
 * the innermost outside the interpreter's library and installed packages.
 */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "analysis/summary.h"
#include "records/stream.h"
#include "util.h"

#define MS 1000000ull
#define PID 100
#define MAIN 100
#define WORKER 101
#define CODE_MAIN 0x1000ull      /* /job/train.py main, first line 10 */
#define CODE_SELECT 0x2000ull    /* selectors.py select, first line 400 */
#define CODE_STEP 0x3000ull      /* /job/train.py train_step, first line 20 */

/* A 3.11 location table: the first 8 code units on firstlineno + delta (no columns; delta < 32). */
static void code(struct dl_stream *st, uint64_t addr, const char *file, const char *func, int32_t first, int delta)
{
	const uint8_t table[] = { 0x80 | (13 << 3) | 7, (uint8_t)(delta << 1) };

	dl_emit_pycode(st, 1, PID, addr, file, func, first, DL_PYLINES_311, table, sizeof(table));
}

static void pystack(struct dl_stream *st, uint32_t tid, uint32_t why, uint64_t ts, uint64_t wait_ns, int n,
		    const uint64_t *codes)
{
	struct dl_pystack_ev e;

	memset(&e, 0, sizeof(e));
	e.h.size = sizeof(e);
	e.h.kind = DL_EV_PYSTACK;
	e.h.ts = ts;
	e.h.tgid = PID;
	e.h.tid = tid;
	e.why = why;
	e.wait_ns = wait_ns;
	e.state = why == DL_PYSTACK_WAIT ? DL_ST_SLEEP : 0;
	e.py.n = (uint16_t)n;
	for (int i = 0; i < n; i++) {
		e.py.f[i].code = codes[i];
		e.py.f[i].off = 2 * (uint32_t)i;   /* inside the first 8 code units */
	}
	CHECK(dl_stream_emit(st, &e, sizeof(e)) == 0, "a pystack record refused");
}

/* The longest overlap of tid's waits with [start, end), by a scan of every event: the index's truth. */
static const struct dl_pyevent *wait_in_by_scan(const struct dl_pylines *p, uint32_t tid, uint64_t start, uint64_t end)
{
	const struct dl_pyevent *best = NULL;
	uint64_t best_ns = 0;

	for (size_t i = 0; i < p->events.n; i++) {
		const struct dl_pyevent *w = &p->events.v[i];
		uint64_t lo = w->start > start ? w->start : start, hi = w->end < end ? w->end : end;

		if (w->tid == tid && w->end > w->start && hi > lo && hi - lo > best_ns) {
			best = w;
			best_ns = hi - lo;
		}
	}
	return best;
}

/*
 * Three threads' waits (each thread's apart in time, of random lengths and
 * gaps) and CPU samples, written interleaved and slightly out of order as
 * per-CPU buffers drain; then more after the first lookups (the index is
 * rebuilt). Every lookup of random windows names the stack of the wait a
 * scan of all the events finds.
 */
static void test_wait_index(void)
{
	struct dl_pylines p = { 0 };
	struct dl_pynamed named = { .n = 1 };
	uint64_t next[3] = { 1000, 1000, 1000 }, seed = 42;
	uint32_t mismatches = 0, found = 0;

	named.file[0] = "/job/train.py";
	named.func[0] = "train_step";
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 3000; i++) {
			struct dl_pystack_ev e;
			uint32_t t = (uint32_t)(i % 3);
			uint64_t gap, len;

			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			gap = (seed >> 33) % 5000;
			len = 1 + (seed >> 17) % 20000;
			memset(&e, 0, sizeof(e));
			e.h.tgid = PID;
			e.h.tid = MAIN + t;
			e.py.n = 1;
			named.line[0] = i % 7;   /* several stacks */
			e.why = (seed >> 11) % 4 ? DL_PYSTACK_WAIT : DL_PYSTACK_CPU;
			next[t] += gap;
			e.h.ts = next[t] + len;
			e.wait_ns = e.why == DL_PYSTACK_WAIT ? len : 0;
			next[t] += len;
			dl_pylines_add(&p, &e, &named);
		}
		for (int q = 0; q < 2000; q++) {
			uint64_t a, b, span = next[0] > next[1] ? next[0] : next[1];
			uint32_t tid;
			const struct dl_pyevent *want;
			const struct dl_pystack_stat *got;

			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			tid = MAIN + (uint32_t)((seed >> 40) % 4);   /* one thread in four has no waits at all */
			a = (seed >> 7) % span;
			b = a + (seed >> 29) % 60000;
			want = wait_in_by_scan(&p, tid, a, b);
			got = dl_pylines_wait_in(&p, tid, a, b);
			found += want != NULL;
			mismatches += want ? got != &p.stacks.v[want->stack] : got != NULL;
		}
	}
	CHECK(found > 1000, "only %u of the lookups met a wait: the test says little", found);
	CHECK_EQ_U64(mismatches, 0);
	dl_pylines_free(&p);
}

/* A trace too long to keep every event: the oldest half is forgotten, counted, and windows start after it. */
static void test_events_bounded(void)
{
	struct dl_pylines p = { 0 };
	struct dl_pystack_ev e;
	struct dl_pynamed named = { .n = 1 };
	size_t idx[1];
	uint64_t w[1], total, n = DL_PYLINES_EVENTS_MAX + 1ull;

	memset(&e, 0, sizeof(e));
	e.h.tgid = PID;
	e.h.tid = MAIN;
	e.why = DL_PYSTACK_CPU;
	e.py.n = 1;
	named.file[0] = "/job/train.py";
	named.func[0] = "train_step";
	named.line[0] = 22;
	for (uint64_t i = 1; i <= n; i++) {
		e.h.ts = i * 1000;
		dl_pylines_add(&p, &e, &named);
	}
	CHECK_EQ_U64(p.forgotten, DL_PYLINES_EVENTS_MAX / 2);
	CHECK_EQ_U64(p.events.n, n - DL_PYLINES_EVENTS_MAX / 2);
	CHECK_EQ_U64(p.kept_from, (DL_PYLINES_EVENTS_MAX / 2) * 1000ull);
	CHECK_EQ_U64(p.stacks.n, 1);
	CHECK_EQ_U64(p.stacks.v[0].samples, n);   /* the totals count every one */
	CHECK_EQ_U64(dl_pylines_from(&p, 0), p.kept_from);
	dl_pylines_top(&p, MAIN, DL_PYSTACK_CPU, dl_pylines_from(&p, 0), UINT64_MAX, idx, w, 1, &total);
	CHECK_EQ_U64(total, n - DL_PYLINES_EVENTS_MAX / 2);
	dl_pylines_free(&p);
}

int main(void)
{
	struct dl_stream st = { 0 };
	struct dl_summary s;
	const uint64_t waited[] = { CODE_SELECT, CODE_MAIN }, stepped[] = { CODE_STEP, CODE_MAIN },
		       unnamed[] = { 0x9000, CODE_MAIN }, bare[] = { CODE_MAIN };
	size_t idx[3];
	uint64_t w[3], total;
	const struct dl_pystack_stat *at;
	size_t n;

	dl_summary_init(&s);
	dl_stream_add(&st, dl_summary_sink, &s);
	code(&st, CODE_MAIN, "/job/train.py", "main", 10, 30);
	code(&st, CODE_SELECT, "/usr/lib/python3.11/selectors.py", "select", 400, 15);
	code(&st, CODE_STEP, "/job/train.py", "train_step", 20, 2);

	/* The main thread: 3 waits in select under main, 40 ms in all; one of 10 ms at main alone. */
	pystack(&st, MAIN, DL_PYSTACK_WAIT, 110 * MS, 10 * MS, 2, waited);
	pystack(&st, MAIN, DL_PYSTACK_WAIT, 130 * MS, 10 * MS, 2, waited);
	pystack(&st, MAIN, DL_PYSTACK_WAIT, 160 * MS, 20 * MS, 2, waited);
	pystack(&st, MAIN, DL_PYSTACK_WAIT, 175 * MS, 10 * MS, 1, bare);
	/* A frame no code record names: the stack is cut there (a caller is never shown above a gap). */
	pystack(&st, MAIN, DL_PYSTACK_WAIT, 190 * MS, 5 * MS, 2, unnamed);
	/* Its samples: 3 in train_step, 1 in main; the worker's apart. */
	for (int i = 0; i < 3; i++)
		pystack(&st, MAIN, DL_PYSTACK_CPU, (115 + i) * MS, 0, 2, stepped);
	pystack(&st, MAIN, DL_PYSTACK_CPU, 150 * MS, 0, 1, bare);
	pystack(&st, WORKER, DL_PYSTACK_CPU, 150 * MS, 0, 2, stepped);

	CHECK_EQ_U64(s.pylines.waits_n, 5);
	CHECK_EQ_U64(s.pylines.samples, 5);
	/* Distinct stacks: waited, bare, unnamed (cut to none), each kind and thread apart: 3 + 2 + 1. */
	CHECK_EQ_U64(s.pylines.stacks.n, 6);

	n = dl_pylines_top(&s.pylines, MAIN, DL_PYSTACK_WAIT, 0, UINT64_MAX, idx, w, 3, &total);
	CHECK_EQ_U64(n, 2);
	CHECK_EQ_U64(total, 55 * MS);   /* the unnamed stack's 5 ms in the total, never a line */
	CHECK_EQ_U64(w[0], 40 * MS);
	CHECK_EQ_U64(w[1], 10 * MS);
	at = &s.pylines.stacks.v[idx[0]];
	CHECK(at->n == 2 && !strcmp(at->f[0].func, "select") && at->f[0].line == 415 && at->f[1].line == 40 &&
	      !strcmp(at->f[1].file, "/job/train.py"), "the top wait: %s:%d <- %s:%d", at->f[0].func, at->f[0].line,
	      at->n > 1 ? at->f[1].func : "-", at->n > 1 ? at->f[1].line : -1);
	CHECK_EQ_U64(dl_pystack_own_frame(at), 1);
	CHECK_EQ_U64(at->waits, 3);
	/* Its line (main:40) is also the wait at main alone: 40 + 10 ms; the unnamed stack is no line. */
	CHECK_EQ_U64(dl_pylines_line_weight(&s.pylines, at, 0, UINT64_MAX), 50 * MS);
	CHECK(!at->partial, "a whole walk, every frame named, is not partial");
	for (size_t i = 0; i < s.pylines.stacks.n; i++)
		if (s.pylines.stacks.v[i].n == 0)
			CHECK(s.pylines.stacks.v[i].partial, "a stack cut at an unnamed frame is partial");

	/* A window from 125 to 155 ms: the second wait whole (120-130: 5 ms inside), the third's 140-155. */
	n = dl_pylines_top(&s.pylines, MAIN, DL_PYSTACK_WAIT, 125 * MS, 155 * MS, idx, w, 3, &total);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(w[0], 5 * MS + 15 * MS);
	CHECK_EQ_U64(total, 20 * MS);

	/* Samples: the window keeps the ones inside it only. */
	n = dl_pylines_top(&s.pylines, MAIN, DL_PYSTACK_CPU, 0, UINT64_MAX, idx, w, 1, &total);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(total, 4);
	CHECK_EQ_U64(w[0], 3);
	at = &s.pylines.stacks.v[idx[0]];
	CHECK(!strcmp(at->f[0].func, "train_step") && at->f[0].line == 22, "top sample %s:%d", at->f[0].func,
	      at->f[0].line);
	CHECK_EQ_U64(dl_pystack_own_frame(at), 0);
	n = dl_pylines_top(&s.pylines, MAIN, DL_PYSTACK_CPU, 140 * MS, 160 * MS, idx, w, 3, &total);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(total, 1);
	CHECK(!strcmp(s.pylines.stacks.v[idx[0]].f[0].func, "main"), "the sample at 150 ms is in main");
	n = dl_pylines_top(&s.pylines, WORKER, DL_PYSTACK_WAIT, 0, UINT64_MAX, idx, w, 3, &total);
	CHECK(n == 0 && total == 0, "the worker waited nowhere: %zu lines, %llu ns", n, (unsigned long long)total);

	/* Every other thread's samples by line: the worker's one; the main thread's by line, most first. */
	n = dl_pylines_top_others(&s.pylines, MAIN, DL_PYSTACK_CPU, 0, UINT64_MAX, idx, w, 3, &total);
	CHECK(n == 1 && w[0] == 1 && total == 1, "others of main: %zu lines, %llu samples", n, (unsigned long long)total);
	n = dl_pylines_top_others(&s.pylines, WORKER, DL_PYSTACK_CPU, 0, UINT64_MAX, idx, w, 3, &total);
	CHECK_EQ_U64(n, 2);
	CHECK_EQ_U64(total, 4);
	CHECK(w[0] == 3 && !strcmp(s.pylines.stacks.v[idx[0]].f[0].func, "train_step"), "others of the worker: "
	      "train_step first");
	/* Waits by line: select-under-main and main alone are one line (main:40); the unnamed stack none. */
	n = dl_pylines_top_others(&s.pylines, WORKER, DL_PYSTACK_WAIT, 0, UINT64_MAX, idx, w, 3, &total);
	CHECK(n == 1 && w[0] == 50 * MS && total == 55 * MS, "waits by line: %zu lines, %llu of %llu ns", n,
	      (unsigned long long)w[0], (unsigned long long)total);

	/* By thread and time: the wait that covers most of the span. */
	at = dl_pylines_wait_in(&s.pylines, MAIN, 168 * MS, 172 * MS);
	CHECK(at && at->n == 1 && !strcmp(at->f[0].func, "main"), "the wait over 168-172 ms is at main alone");
	at = dl_pylines_wait_in(&s.pylines, MAIN, 145 * MS, 150 * MS);
	CHECK(at && at->n == 2 && !strcmp(at->f[0].func, "select"), "the wait over 145-150 ms is in select");
	CHECK(!dl_pylines_wait_in(&s.pylines, MAIN, 95 * MS, 99 * MS), "no wait before the first (100-110 ms)");
	CHECK(dl_pylines_wait_in(&s.pylines, MAIN, 100 * MS, 100 * MS + 1), "the first wait begins at 100 ms");
	CHECK(!dl_pylines_wait_in(&s.pylines, WORKER, 100 * MS, 200 * MS), "the worker never waited");

	dl_summary_free(&s);
	dl_stream_free(&st);
	test_events_bounded();
	test_wait_index();
	return check_report("test_pylines");
}
