// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * capture/budget_plan.c on its own: the --overhead-budget parser, the plan
 * (always-on costs charged first, the hottest class turned down first), the
 * running account, and the scaled count with its bounds: against values worked
 * out by hand in the comments, and the bounds against simulated windows of
 * known rates, where the truth must fall inside about 95% of the time.
 */
#include <math.h>
#include <stdlib.h>
#include "check.h"
#include "capture/budget_plan.h"

#define NEAR(a, b, tol) (fabs((a) - (b)) <= (tol))

static void test_parse(void)
{
	static const struct { const char *s; double want; } good[] = {
		{ "1%", 0.01 }, { "0.5%", 0.005 }, { "5", 0.05 }, { "100", 1.0 }, { "100%", 1.0 }, { ".5", 0.005 },
		{ "2.", 0.02 },
	};
	static const char *const bad[] = {
		"0", "0%", "0.0", "-1", "-1%", "+1", "101", "100.01%", "", "%", "abc", "1%%", "1 %", " 1", "1e1",
		"0x10", "inf", "nan", "1.2.3", "1,5", "5x", "1000000000000000000000000000000000000",
	};
	double f;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		f = -1;
		CHECK(dl_budget_parse(good[i].s, &f) == 0 && NEAR(f, good[i].want, 1e-12), "'%s' -> %g", good[i].s, f);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(dl_budget_parse(bad[i], &f) == -1, "'%s' accepted", bad[i]);
}

static void test_plan(void)
{
	struct dl_budget_class c[2] = {
		/* launches: 100 k/s at 1 us is 100 ms of CPU per s */
		{ .rate_hz = 100000, .ns_per_event = 1000, .cyclable = true },
		/* small copies: 10 k/s at 2 us, 20 ms/s */
		{ .rate_hz = 10000, .ns_per_event = 2000, .cyclable = true },
	};
	struct dl_budget_plan p;

	/* A job of 1 CPU (1e9 ns/s), 1%: 10 ms/s. Always-on 2 ms/s leaves 8 ms/s: copies cannot all
	 * fit (20 ms/s): 8/20 = 0.4 of the time, launches nothing. */
	dl_budget_plan(0.01, 1e9, 2e6, c, 2, &p);
	CHECK(!p.always_on_over, "always-on 0.2%% of 1%%");
	CHECK(NEAR(p.on_fraction[1], 0.4, 1e-9), "copies %g", p.on_fraction[1]);
	CHECK(NEAR(p.on_fraction[0], 0, 1e-9), "launches %g", p.on_fraction[0]);
	CHECK(NEAR(p.planned_share, 0.01, 1e-9), "planned %g", p.planned_share);
	CHECK(NEAR(p.always_on_share, 0.002, 1e-12), "always-on share %g", p.always_on_share);

	/* 5%: 50 ms/s, 2 always-on: copies whole (20), launches (50 - 2 - 20) / 100 = 0.28. */
	dl_budget_plan(0.05, 1e9, 2e6, c, 2, &p);
	CHECK(NEAR(p.on_fraction[1], 1, 1e-9) && NEAR(p.on_fraction[0], 0.28, 1e-9), "5%%: %g %g",
	      p.on_fraction[0], p.on_fraction[1]);
	CHECK(NEAR(p.planned_share, 0.05, 1e-9), "planned %g", p.planned_share);

	/* Twice the job CPU (2 threads busy): twice the allowance; launches (100 - 2 - 20) / 100 = 0.78. */
	dl_budget_plan(0.05, 2e9, 2e6, c, 2, &p);
	CHECK(NEAR(p.on_fraction[0], 0.78, 1e-9), "2 CPUs: %g", p.on_fraction[0]);

	/* Room for everything: all on, planned under the budget. */
	dl_budget_plan(0.5, 1e9, 2e6, c, 2, &p);
	CHECK(p.on_fraction[0] == 1 && p.on_fraction[1] == 1, "50%%: %g %g", p.on_fraction[0], p.on_fraction[1]);
	CHECK(NEAR(p.planned_share, 0.122, 1e-9), "planned %g", p.planned_share);

	/* Always-on alone over the budget: said, and every cycled class off. */
	dl_budget_plan(0.01, 1e9, 15e6, c, 2, &p);
	CHECK(p.always_on_over && p.on_fraction[0] == 0 && p.on_fraction[1] == 0, "over: %d %g %g",
	      p.always_on_over, p.on_fraction[0], p.on_fraction[1]);
	CHECK(NEAR(p.always_on_share, 0.015, 1e-12), "always-on share %g", p.always_on_share);

	/* A class that may not be cycled is charged as always-on: copies kept whole leave 50 - 2 - 20. */
	c[1].cyclable = false;
	dl_budget_plan(0.05, 1e9, 2e6, c, 2, &p);
	CHECK(p.on_fraction[1] == 1 && NEAR(p.on_fraction[0], 0.28, 1e-9), "copies fixed: %g", p.on_fraction[0]);
	CHECK(NEAR(p.always_on_share, 0.022, 1e-12), "always-on share %g", p.always_on_share);
	c[1].cyclable = true;

	/* A class never seen yet (no rate) costs nothing known: on, so that it can be measured. */
	c[0].rate_hz = 0;
	dl_budget_plan(0.01, 1e9, 2e6, c, 2, &p);
	CHECK(p.on_fraction[0] == 1, "unmeasured launches %g", p.on_fraction[0]);
}

static void test_account(void)
{
	struct dl_budget_account a = { .budget = 0.01 };

	/* 1 s of job CPU measured with 5 ms of it dlbpf's: 995 ms untraced, 9.95 ms allowed, 5 spent. */
	dl_budget_charge(&a, 1e9, 5e6);
	CHECK(NEAR(a.job_cpu_ns, 995e6, 1) && NEAR(a.balance_ns, 4.95e6, 1), "balance %g", a.balance_ns);
	/* A window that cost 30 ms in 1 s: overspent, to be repaid. */
	dl_budget_charge(&a, 1e9, 30e6);
	CHECK(a.balance_ns < 0 && NEAR(a.balance_ns, 4.95e6 + 9.7e6 - 30e6, 1), "balance %g", a.balance_ns);
	/* The cap: an idle stretch of the probes cannot save more than it. */
	a.cap_ns = 2e6;
	for (int i = 0; i < 10; i++)
		dl_budget_charge(&a, 1e9, 0);
	CHECK(NEAR(a.balance_ns, 2e6, 1e-6), "capped balance %g", a.balance_ns);
	/* Cost beyond the job's CPU (the scheduler's programs run for other tasks too) allows nothing. */
	dl_budget_charge(&a, 1e6, 3e6);
	CHECK(NEAR(a.balance_ns, -1e6, 1e-6), "balance %g", a.balance_ns);

	CHECK(dl_budget_off_ns(100, 0.2) == 400, "off %g", dl_budget_off_ns(100, 0.2));
	CHECK(dl_budget_off_ns(100, 1) == 0 && isinf(dl_budget_off_ns(100, 0)), "off at 1 and 0");
}

static void test_scale_by_hand(void)
{
	/* Two windows of 1 s at 1000 and 3000 counts: rate 2000/s; 10 s in all: 4000 + 2000 x 8 = 20000. */
	struct dl_budget_window w[2] = { { 1e9, 1000 }, { 1e9, 3000 } };
	struct dl_budget_scaled s;

	dl_budget_scale(w, 2, 10e9, &s);
	CHECK(NEAR(s.observed, 0.2, 1e-12) && s.seen == 4000 && NEAR(s.scaled, 20000, 1e-6), "%g %g %g",
	      s.observed, s.seen, s.scaled);
	/*
	 * Rates 1000 and 3000 per 1 s window: s^2 = (1000^2 + 1000^2) / 1 = 2e6 (per s^2 of a
	 * window); se^2 = 1e6; unseen 8 windows: 8^2 x 1e6 + 8 x 2e6 = 80e6; t(1 dof) 12.706:
	 * half-width 12.706 x 8944.3 = 113645.
	 */
	CHECK(NEAR(s.hi - s.scaled, 12.706 * sqrt(80e6), 1), "half-width %g", s.hi - s.scaled);
	CHECK(s.lo == 4000, "lo clipped at what was seen: %g", s.lo);

	/* Every window alike: only counting noise. 10 windows of 100 ms at 500: rate 5000/s over 1 s seen,
	 * 9 s unseen; se^2 = rate/W = 5000 / 1 s^2: 81 x 5000 = 405000, t(9) = 2.262. */
	struct dl_budget_window same[10];
	for (int i = 0; i < 10; i++)
		same[i] = (struct dl_budget_window){ 100e6, 500 };
	dl_budget_scale(same, 10, 10e9, &s);
	CHECK(NEAR(s.scaled, 50000, 1e-6), "scaled %g", s.scaled);
	CHECK(NEAR(s.hi - s.scaled, 2.262 * sqrt(81.0 * 5000), 1), "half-width %g", s.hi - s.scaled);

	/* Nothing observed: what was seen (nothing) and no upper bound. */
	dl_budget_scale(NULL, 0, 10e9, &s);
	CHECK(s.scaled == 0 && isinf(s.hi) && s.observed == 0, "empty");
	/* One window of part of the time: an estimate, no upper bound (its rate's spread is unknown). */
	dl_budget_scale(w, 1, 10e9, &s);
	CHECK(NEAR(s.scaled, 10000, 1e-6) && s.lo == 1000 && isinf(s.hi), "one window: %g [%g, %g]", s.scaled, s.lo,
	      s.hi);
	/* Observed throughout: exact. */
	struct dl_budget_window all = { 10e9, 12345 };
	dl_budget_scale(&all, 1, 10e9, &s);
	CHECK(s.scaled == 12345 && s.lo == 12345 && s.hi == 12345, "whole: %g [%g, %g]", s.scaled, s.lo, s.hi);

	/* The probes slowed probed steps 1.5x: the unseen part ran 1.5x the windows' rate. */
	dl_budget_scale(w, 2, 10e9, &s);
	dl_budget_correct(&s, 1.5, 0);
	CHECK(NEAR(s.scaled, 4000 + 16000 * 1.5, 1e-6) && s.lo == 4000, "corrected %g [%g", s.scaled, s.lo);
	CHECK(NEAR(s.hi, 4000 + (20000 + 12.706 * sqrt(80e6) - 4000) * 1.5, 1e-3), "corrected hi %g", s.hi);
	/* The ratio known to 5%: the bounds widen by two of it, the estimate stays. */
	struct dl_budget_window tight[10];
	for (int i = 0; i < 10; i++)
		tight[i] = (struct dl_budget_window){ 100e6, 500 };
	dl_budget_scale(tight, 10, 10e9, &s);
	double lo0 = s.lo, hi0 = s.hi;
	dl_budget_correct(&s, 2, 0.05);
	CHECK(NEAR(s.scaled, 5000 + 45000 * 2, 1e-6), "scaled %g", s.scaled);
	CHECK(NEAR(s.hi, 5000 + (hi0 - 5000) * 2 * 1.1, 1e-6) && NEAR(s.lo, 5000 + (lo0 - 5000) * 2 * 0.9, 1e-6),
	      "widened [%g, %g]", s.lo, s.hi);
	/* Nothing observed stays unknown; a ratio that is no ratio changes nothing. */
	dl_budget_scale(NULL, 0, 10e9, &s);
	dl_budget_correct(&s, 2, 0);
	CHECK(s.scaled == 0 && isinf(s.hi), "empty corrected");
	dl_budget_scale(w, 2, 10e9, &s);
	dl_budget_correct(&s, NAN, 0);
	CHECK(NEAR(s.scaled, 20000, 1e-6), "NaN ratio: %g", s.scaled);

	CHECK(NEAR(dl_student_t975(1), 12.706, 1e-9) && NEAR(dl_student_t975(30), 2.042, 1e-9) &&
	      NEAR(dl_student_t975(45), 2.021, 1e-9) && dl_student_t975(1000) == 1.96, "t table");
}

/* A Poisson count of mean m (Knuth's method for small m, a normal approximation above). */
static double poisson(double m, unsigned *seed)
{
	if (m > 50) {
		double u1 = (rand_r(seed) + 1.0) / ((double)RAND_MAX + 2.0), u2 = (rand_r(seed) + 1.0) / ((double)RAND_MAX + 2.0);

		return fmax(0, round(m + sqrt(m) * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2)));
	}
	double l = exp(-m), p = 1;
	int k = 0;

	do {
		k++;
		p *= (rand_r(seed) + 1.0) / ((double)RAND_MAX + 2.0);
	} while (p > l);
	return k - 1;
}

/*
 * The bounds' coverage: a job whose rate drifts from span to span (a step mix
 * that changes), observed 10% of the time in windows; the true whole-run
 * count must lie inside the bounds in about 95% of runs. 400 runs: at 95%
 * coverage the count inside is 380 +- 9 (binomial sd 4.4); under 360 (90%)
 * would be a bound too narrow, at 400 of 400 a bound too wide is not caught
 * (checked apart: the mean half-width against the truth's spread).
 */
static void test_scale_coverage(void)
{
	unsigned seed = 12345;
	int inside = 0, runs = 400;
	double sum_half = 0, sum_err2 = 0;

	for (int r = 0; r < runs; r++) {
		struct dl_budget_window w[20];
		double truth = 0;
		size_t nw = 0;

		/* 200 spans of 50 ms; a window every 10th; rate 1e5/s drifting by +-30% span to span. */
		for (int s = 0; s < 200; s++) {
			double rate = 1e5 * (1 + 0.3 * sin(s * 0.37 + r) * ((rand_r(&seed) % 1000) / 1000.0));
			double n = poisson(rate * 0.05, &seed);

			truth += n;
			if (s % 10 == 3)
				w[nw++] = (struct dl_budget_window){ 50e6, n };
		}
		struct dl_budget_scaled e;

		dl_budget_scale(w, nw, 10e9, &e);
		inside += e.lo <= truth && truth <= e.hi;
		sum_half += (e.hi - e.lo) / 2;
		sum_err2 += (e.scaled - truth) * (e.scaled - truth);
	}
	CHECK(inside >= 360, "truth inside the bounds in %d of %d runs", inside, runs);
	/* A 95% half-width is about 2 standard errors: under 4 of them, it is not a bound made wide to pass. */
	CHECK(sum_half / runs < 4 * sqrt(sum_err2 / runs), "mean half-width %g against rms error %g", sum_half / runs,
	      sqrt(sum_err2 / runs));
}

int main(void)
{
	test_parse();
	test_plan();
	test_account();
	test_scale_by_hand();
	test_scale_coverage();
	return check_report("test_budget_plan");
}
