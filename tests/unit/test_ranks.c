// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The ranks' alignment and the straggler rule (analysis/ranks.h), on figures made up here. */
#include <string.h>
#include "analysis/ranks.h"
#include "check.h"

#define MS 1000000ull

static void offsets(void)
{
	/* One host: MONOTONIC and REALTIME read a few ns apart in each recording. */
	struct dl_rank_clock a = { .mono_ns = 1000 * MS, .real_ns = 1700000000000 * MS };
	struct dl_rank_clock b = { .mono_ns = 2500 * MS + 40, .real_ns = 1700000001500 * MS + 40 };
	/* Another host booted 3 s later: its MONOTONIC is 3 s behind for one REALTIME instant. */
	struct dl_rank_clock c = { .mono_ns = 500 * MS, .real_ns = 1700000002500 * MS };

	CHECK(dl_rank_offset(&a, &b) == 0, "one host: offset %lld", (long long)dl_rank_offset(&a, &b));
	CHECK(dl_rank_offset(&a, &c) == 3000 * (int64_t)MS, "%lld", (long long)dl_rank_offset(&a, &c));
	CHECK(dl_rank_offset(&c, &a) == -3000 * (int64_t)MS, "%lld", (long long)dl_rank_offset(&c, &a));
	CHECK(dl_rank_offset(&a, &a) == 0, "itself");
	/* c's instant 600 ms on its clock is a's 3600 ms: the same REALTIME. */
	CHECK(600 * MS + dl_rank_offset(&a, &c) - a.mono_ns + a.real_ns == 600 * MS - c.mono_ns + c.real_ns, "same instant");
	CHECK(dl_rank_clock_valid(&a), "valid");
	CHECK(!dl_rank_clock_valid(&(struct dl_rank_clock){ .mono_ns = 5 }), "no realtime");
	CHECK(!dl_rank_clock_valid(&(struct dl_rank_clock){ .real_ns = 5 }), "no monotonic");
	CHECK(dl_rank_spans_meet(0, 10, 10, 20), "touching spans meet");
	CHECK(dl_rank_spans_meet(5, 6, 0, 20), "inside");
	CHECK(!dl_rank_spans_meet(0, 10, 11, 20), "apart");
	CHECK(!dl_rank_spans_meet(11, 20, 0, 10), "apart, other order");
}

static struct dl_rank_steps rank(uint64_t steps, double step_ms, double comm_ms)
{
	return (struct dl_rank_steps){ .steps = steps, .dur_ns = (uint64_t)(step_ms * MS) * steps,
				       .comm_wait_ns = (uint64_t)(comm_ms * MS) * steps };
}

static void straggler(void)
{
	struct dl_straggler s;
	struct dl_finding f;

	/* Rank 1 computes 30 ms, the others 20 ms and wait 10 ms: 1.5x. */
	struct dl_rank_steps r[3] = { rank(10, 30, 10), rank(10, 32, 2), rank(10, 30, 10) };
	dl_find_straggler(r, 3, &s);
	CHECK(s.rank == 1, "straggler %d", s.rank);
	CHECK(s.ratio > 1.499 && s.ratio < 1.501, "ratio %f", s.ratio);
	CHECK(s.others_comm_wait_ns == 10 * MS, "%f", s.others_comm_wait_ns);
	CHECK(dl_straggler_finding(&s, 3, &f) && !strcmp(f.rule, "straggler"), "finding");
	CHECK(strstr(f.message, "rank 1 computes 30.00 ms") != NULL, "%s", f.message);

	/* Just under the ratio: none, the figures still said. */
	r[1] = rank(10, 23.8, 0);   /* 23.8 / 20 = 1.19 */
	dl_find_straggler(r, 3, &s);
	CHECK(s.rank == -1 && s.ratio > 1.18 && s.ratio < 1.20, "%d %f", s.rank, s.ratio);
	CHECK(!dl_straggler_finding(&s, 3, &f), "no finding");
	r[1] = rank(10, 24, 0);     /* 1.2 exactly */
	dl_find_straggler(r, 3, &s);
	CHECK(s.rank == 1, "at the ratio: %d (%f)", s.rank, s.ratio);

	/* The others do not wait on communication (under 5% of their step): no straggler. */
	struct dl_rank_steps quiet[2] = { rank(10, 20, 0.5), rank(10, 40, 0) };
	dl_find_straggler(quiet, 2, &s);
	CHECK(s.rank == -1 && s.ratio > 2, "%d %f", s.rank, s.ratio);

	/* Equal ranks: none. Two slow ranks: none either (each is not 1.2x the other). */
	struct dl_rank_steps eq[4] = { rank(5, 30, 10), rank(5, 30, 10), rank(5, 30, 10), rank(5, 30, 10) };
	dl_find_straggler(eq, 4, &s);
	CHECK(s.rank == -1 && s.ratio > 0.999 && s.ratio < 1.001, "%d %f", s.rank, s.ratio);
	struct dl_rank_steps two[3] = { rank(5, 40, 1), rank(5, 40, 1), rank(5, 30, 10) };
	dl_find_straggler(two, 3, &s);
	CHECK(s.rank == -1, "%d", s.rank);

	/* A rank without steps takes no part; one rank with steps: nothing to compare. */
	struct dl_rank_steps some[3] = { rank(0, 0, 0), rank(10, 30, 10), rank(10, 45, 0) };
	dl_find_straggler(some, 3, &s);
	CHECK(s.rank == 2, "%d", s.rank);
	dl_find_straggler(some, 2, &s);
	CHECK(s.rank == -1 && s.ratio == 0, "%d", s.rank);

	/* comm_wait past the step (corrupt) leaves compute 0, not a wrapped huge number. */
	struct dl_rank_steps bad = { .steps = 1, .dur_ns = 10, .comm_wait_ns = 20 };
	CHECK(dl_rank_compute_per_step(&bad) == 0, "%f", dl_rank_compute_per_step(&bad));
}

int main(void)
{
	offsets();
	straggler();
	return check_report("test_ranks");
}
