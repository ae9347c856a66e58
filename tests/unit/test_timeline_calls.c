// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A batch's flow on the thread that took it: from the hand-off on to the
 * first H2D copy after it and the first launch after that copy, whether the
 * two came before the step was written (the same step) or come after (the
 * next step's start), ending where it got to when they never come; and a
 * step's first copy and last sync among the recent calls.
 */
#include <stdint.h>
#include <string.h>
#include "check.h"
#include "output/timeline_calls.h"

struct mark {
	uint64_t ts, flow;
	int terminate;
	char name[32];
};

struct rec_out {
	struct dl_tout base;
	struct mark m[16];
	int n;
};

static void flow_mark(struct dl_tout *o, const struct dl_ttrack *t, uint64_t ts, const char *name, uint64_t flow,
		      int terminate)
{
	struct rec_out *r = (struct rec_out *)o;

	(void)t;
	if (r->n < 16) {
		r->m[r->n] = (struct mark){ .ts = ts, .flow = flow, .terminate = terminate };
		strncpy(r->m[r->n].name, name, sizeof(r->m[r->n].name) - 1);
		r->n++;
	}
}

static const struct dl_ttrack track = { .uuid = 1, .kind = DL_TT_THREAD, .pid = 10, .tid = 10 };

/* The marks say: hand-off at h, copy at c, launch at l (0: absent), the last one terminating. */
static void check_path(const char *what, const struct rec_out *o, uint64_t flow, uint64_t h, uint64_t c, uint64_t l)
{
	int want = 1 + (c != 0) + (l != 0);
	uint64_t at[3] = { h, c, l };
	const char *names[3] = { "hand-off", "batch to device", "batch's kernels" };

	CHECK(o->n == want, "%s: %d marks, want %d", what, o->n, want);
	for (int i = 0; i < o->n && i < want; i++) {
		CHECK(o->m[i].flow == flow && o->m[i].ts == at[i] && !strcmp(o->m[i].name, names[i]) &&
			      o->m[i].terminate == (i == want - 1),
		      "%s: mark %d '%s' at %llu flow %llu end %d", what, i, o->m[i].name, (unsigned long long)o->m[i].ts,
		      (unsigned long long)o->m[i].flow, o->m[i].terminate);
	}
}

static void test_batch_after(void)
{
	struct rec_out o = { .base = { .flow_mark = flow_mark } };
	struct dl_tcalls c = { 0 };

	dl_tcalls_copy(&c, 100, 10);   /* before the hand-off: an older batch's */
	dl_tcalls_batch(&c, &o.base, &track, 7, 500);
	CHECK(o.n == 0, "awaiting: %d marks", o.n);
	dl_tcalls_launch(&c, &o.base, &track, 600, 0);   /* a launch before any copy: not the batch's */
	CHECK(o.n == 0, "a launch before the copy ended the flow");
	dl_tcalls_copy(&c, 700, 20);
	dl_tcalls_copy(&c, 730, 20);
	dl_tcalls_launch(&c, &o.base, &track, 800, 4);
	check_path("copy and launch after", &o, 7, 500, 710, 802);
	dl_tcalls_launch(&c, &o.base, &track, 900, 4);
	CHECK(o.n == 3, "a second launch drew more: %d marks", o.n);
	dl_tcalls_free(&c);
}

static void test_batch_before(void)
{
	struct rec_out o = { .base = { .flow_mark = flow_mark } };
	struct dl_tcalls c = { 0 };
	const struct dl_tcall *copy, *sync;

	dl_tcalls_sync(&c, 50, 30);
	dl_tcalls_copy(&c, 200, 10);
	dl_tcalls_copy(&c, 220, 10);
	dl_tcalls_launch(&c, &o.base, &track, 300, 0);
	dl_tcalls_sync(&c, 400, 60);
	dl_tcalls_in(&c, 100, 1000, &copy, &sync);
	CHECK(copy && copy->ts == 200 && sync && sync->ts == 400, "step's first copy and last sync");
	dl_tcalls_in(&c, 0, 100, &copy, &sync);
	CHECK(!copy && sync && sync->ts == 50, "a step before the copies");
	/* The step is written after its copy and launch: the flow is drawn at once. */
	dl_tcalls_batch(&c, &o.base, &track, 9, 150);
	check_path("copy and launch before", &o, 9, 150, 205, 300);
	dl_tcalls_free(&c);
}

static void test_batch_never_copied(void)
{
	struct rec_out o = { .base = { .flow_mark = flow_mark } };
	struct dl_tcalls c = { 0 };

	dl_tcalls_batch(&c, &o.base, &track, 3, 100);
	dl_tcalls_copy(&c, 150, 10);
	/* The next batch comes before any launch: the first ends at its copy. */
	dl_tcalls_batch(&c, &o.base, &track, 4, 200);
	check_path("replaced before its launch", &o, 3, 100, 155, 0);
	o.n = 0;
	dl_tcalls_close(&c, &o.base, &track);
	check_path("closed with no copy", &o, 4, 200, 0, 0);
	dl_tcalls_free(&c);
}

int main(void)
{
	test_batch_after();
	test_batch_before();
	test_batch_never_copied();
	return check_report("test_timeline_calls");
}
