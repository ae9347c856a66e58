// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The timeline's counters over long gaps: a gap of 1000 s between two
 * intervals gives exactly the samples a bin-by-bin walk gives (hand-computed
 * below), and an interval ending 146 years later (a corrupt duration that is
 * still a valid clock value) is written in a handful of samples instead of a
 * walk through 4.6e11 bins (which took over 10 minutes of CPU before).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "records/stream.h"
#include "output/timeline.h"

#define MS 1000000ull
#define S 1000000000ull

struct sample {
	double ts_us, value;
};

static void runq(struct dl_stream *s, uint64_t ts, uint64_t dur)
{
	struct dl_sched_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_SCHED, .ts = ts, .tgid = 7, .tid = 7 };
	e.dur_ns = dur;
	e.state = DL_ST_RUNQ;
	CHECK(dl_stream_emit(s, &e, sizeof(e)) == 0, "record at %llu refused", (unsigned long long)ts);
}

/* Feeds two run-queue intervals to a Chrome JSON timeline; returns its run-queue samples, in order. */
static size_t run(uint64_t ts1, uint64_t dur1, uint64_t ts2, uint64_t dur2, struct sample *out, size_t cap)
{
	FILE *f = tmpfile();
	struct dl_timeline *t = f ? dl_timeline_new(f, DL_TIMELINE_JSON) : NULL;
	struct dl_stream s = {};
	struct dl_timeline_stats st;
	char line[1024];
	size_t n = 0;

	CHECK(t != NULL, "timeline");
	if (!t)
		return 0;
	dl_stream_add(&s, dl_timeline_sink, t);
	runq(&s, ts1, dur1);
	runq(&s, ts2, dur2);
	CHECK(dl_timeline_finish(t, &st) == 0, "finish");
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		const char *ts = strstr(line, "\"ts\":"), *v = strstr(line, "\"value\":");

		if (!strstr(line, "\"ph\":\"C\"") || !strstr(line, "run-queue") || !ts || !v)
			continue;
		if (n < cap)
			out[n] = (struct sample){ strtod(ts + 5, NULL), strtod(v + 8, NULL) };
		n++;
	}
	CHECK_EQ_U64(st.counters, n);
	fclose(f);
	dl_stream_free(&s);
	return n;
}

int main(void)
{
	struct sample got[16];
	size_t n;

	/*
	 * 5 ms runnable at 1 s and at 1001 s: in 10 ms bins that is half a thread
	 * runnable in [1.000, 1.010) s and in [1001.000, 1001.010) s, none between:
	 * 0.5 at 1 s, 0 at 1.01 s, 0.5 at 1001 s, 0 at 1001.01 s (timestamps in us).
	 */
	n = run(1 * S, 5 * MS, 1001 * S, 5 * MS, got, 16);
	CHECK_EQ_U64(n, 4);
	if (n == 4) {
		const struct sample want[4] = { { 1e6, 0.5 }, { 1.01e6, 0 }, { 1001e6, 0.5 }, { 1001.01e6, 0 } };

		for (int i = 0; i < 4; i++)
			CHECK(got[i].ts_us == want[i].ts_us && got[i].value == want[i].value, "sample %d: %.3f us = %g, "
			      "expected %.3f us = %g", i, got[i].ts_us, got[i].value, want[i].ts_us, want[i].value);
	}

	/*
	 * Runnable from 2 s for 2^62 ns: one thread runnable in every bin it
	 * covers, so after the first interval's 0.5 and 0 the series rises to 1,
	 * drops to the share of the last bin the interval covers, then to 0; what
	 * lies between is a flat 1 and writes nothing. It ends at 2e9 + 2^62 ns =
	 * 4611686020427387904 ns, 7387904 ns into its 10 ms bin: 0.7387904.
	 */
	n = run(1 * S, 5 * MS, 2 * S, 1ull << 62, got, 16);
	CHECK_EQ_U64(n, 5);
	if (n == 5) {
		CHECK(got[0].ts_us == 1e6 && got[0].value == 0.5 && got[1].ts_us == 1.01e6 && got[1].value == 0,
		      "first interval: %.3f = %g, %.3f = %g", got[0].ts_us, got[0].value, got[1].ts_us, got[1].value);
		/* The JSON writer prints 6 significant digits: 0.73879, within 5e-6 of the truth. */
		CHECK(got[2].value == 1 && got[3].value > 0.7387904 - 5e-6 && got[3].value < 0.7387904 + 5e-6 &&
		      got[4].value == 0, "long interval: %g, %g, %g", got[2].value, got[3].value, got[4].value);
		/* The last bin starts at the end rounded down to 10 ms: 4611686020420000 us. */
		CHECK(got[3].ts_us == 4611686020420000.0 && got[2].ts_us < got[3].ts_us, "at %.3f, %.3f us",
		      got[2].ts_us, got[3].ts_us);
	}
	return check_report("test_timeline_bins");
}
