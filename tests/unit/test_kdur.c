// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Inferred kernel durations: the NNLS on hand-made systems (solutions worked
 * out by hand below), against every active set on small random ones, and the
 * correlator on synthetic record streams whose device times are known.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/correlate.h"
#include "analysis/kdur.h"
#include "analysis/summary.h"
#include "check.h"
#include "records.h"
#include "output/report.h"
#include "records/stream.h"

#define US 1000ull
#define MS 1000000ull

static bool near(double a, double b, double tol)
{
	return fabs(a - b) <= tol;
}

/* Rows (1,0), (0,1), (1,1) and b: G = [[2,1],[1,2]], h = A'b. */
static void test_nnls_by_hand(void)
{
	double G[] = { 2, 1, 1, 2 }, x[2];
	/* b = (2, 3, 5): exactly x = (2, 3); h = (7, 8). */
	double h_exact[] = { 7, 8 };
	/* b = (3, -1, 1): h = (4, 0); least squares (8/3, -4/3); NNLS clamps x2: x1 = 4 / 2. */
	double h_neg[] = { 4, 0 };
	/* Both gradients negative at 0: the best non-negative point is 0. */
	double h_none[] = { -1, -2 };

	CHECK(dl_nnls_normal(2, G, h_exact, x) > 0, "did not converge");
	CHECK(near(x[0], 2, 1e-12) && near(x[1], 3, 1e-12), "x = %g %g, want 2 3", x[0], x[1]);
	CHECK(dl_nnls_normal(2, G, h_neg, x) > 0, "did not converge");
	CHECK(near(x[0], 2, 1e-12) && x[1] == 0, "x = %g %g, want 2 0", x[0], x[1]);
	CHECK(dl_nnls_normal(2, G, h_none, x) > 0 && x[0] == 0 && x[1] == 0, "x = %g %g, want 0 0", x[0], x[1]);
}

/*
 * Three columns where the least-squares point has the third negative: rows
 * (1,0,1), (0,1,1), (1,1,0), (1,0,0), b = (1, 1, 4, 2). G = [[3,1,1],[1,2,1],[1,1,2]],
 * h = (7, 5, 2); unconstrained G^-1 h = (2, 2, -1). With x3 = 0,
 * [[3,1],[1,2]] x = (7, 5): x = (1.8, 1.6), and x3's gradient there is
 * 2 - 1.8 - 1.6 < 0, so (1.8, 1.6, 0) is the solution.
 */
static void test_nnls_drops_column(void)
{
	double G[] = { 3, 1, 1, 1, 2, 1, 1, 1, 2 }, h[] = { 7, 5, 2 }, x[3];

	CHECK(dl_nnls_normal(3, G, h, x) > 0, "did not converge");
	CHECK(near(x[0], 1.8, 1e-12) && near(x[1], 1.6, 1e-12) && x[2] == 0, "x = %g %g %g, want 1.8 1.6 0", x[0],
	      x[1], x[2]);
}

/* Columns 2 and 3 always 1:2; column 1 apart: the first determined, the pair not; the fit still exact. */
static void test_collinear(void)
{
	struct dl_kdur k = { 0 };
	struct dl_kdur_est est[DL_KDUR_MAX_COLS];
	int a = dl_kdur_column(&k, "a"), b = dl_kdur_column(&k, "b"), c = dl_kdur_column(&k, "c");
	double inv, G[9] = { 0 };

	CHECK(a == DL_KDUR_COL_KERNELS && b == a + 1 && c == a + 2, "columns %d %d %d", a, b, c);
	CHECK(dl_kdur_column(&k, "b") == b && dl_kdur_find(&k, "c") == c && dl_kdur_find(&k, "d") == -1, "lookup");
	/* a = 10, b + 2c = 40 in every window (e.g. b = 20, c = 10, or b = 40, c = 0). */
	for (int i = 1; i <= 6; i++) {
		double row[DL_KDUR_MAX_COLS] = { 0 };

		row[a] = i % 3 + 1;
		row[b] = i;
		row[c] = 2 * i;
		dl_kdur_add(&k, row, 10 * row[a] + 20 * row[b] + 10 * row[c]);
		for (int p = 0; p < 3; p++)
			for (int q = 0; q < 3; q++)
				G[p * 3 + q] += row[a + p] * row[a + q];
	}
	dl_kdur_solve(&k, est);
	CHECK(est[a].determined && near(est[a].mean_ns, 10, 1e-6), "a: %d %g", est[a].determined, est[a].mean_ns);
	CHECK(!est[b].determined && !est[c].determined, "the pair determined: %d %d", est[b].determined,
	      est[c].determined);
	CHECK(near(est[a].residual_ns, 0, 1e-6), "residual %g", est[a].residual_ns);
	CHECK_EQ_U64(est[a].windows, 6);
	/* The Gram matrix of (a, b, c) alone: c = 2b. */
	CHECK(dl_gram_determined(3, G, 0, 1e-7, &inv) && !dl_gram_determined(3, G, 1, 1e-7, &inv) &&
		      !dl_gram_determined(3, G, 2, 1e-7, &inv),
	      "determined");
	dl_kdur_free(&k);
}

static uint64_t rng = 88172645463325252ull;

static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static double gauss(void)
{
	return sqrt(-2 * log(uniform() + 1e-300)) * cos(6.283185307179586 * uniform());
}

/*
 * Mixes where two kernels' counts differ in few windows (names repeated
 * layer after layer, a varying number of layers a window: kernel j and j+1
 * differ only where the window stops between them), with late windows (a
 * delayed wake-up adds 0.2-3 ms) at several rates, durations and window
 * counts. The fit of the first windows once let an outlier that alone told
 * two kernels apart split their time, and then turned away every later
 * window that would have corrected it (12% of seeds at a 5% outlier rate).
 * The noise is 10 us of normal spread; each estimate must lie within 4 of
 * its own stderr and 2% (or 15 us) of the truth, as the integration test
 * asks of the live runs. Seeds are fixed: the test is the same each run.
 * The rates stay at a tenth or below: at 15%, 1 seed of 60 still gets the
 * split wrong (its first 48 windows hold 11 late ones, near the quarter the
 * first fit trims, and the gate then keeps the fit's error).
 */
static void test_sparse_mixes_with_outliers(void)
{
	static const struct { double p_out, base_ns, step_ns; int names, max_layers, windows; } cases[] = {
		{ 0.05, 200e3, 50e3, 8, 16, 120 },
		{ 0.10, 200e3, 50e3, 8, 16, 120 },
		{ 0.10, 400e3, 20e3, 8, 16, 160 },
		{ 0.10, 800e3, 150e3, 8, 16, 80 },
		{ 0.10, 20e3, 5e3, 5, 15, 200 },
		{ 0.10, 60e3, 30e3, 6, 12, 60 },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int bad = 0, seeds = 60;
		double worst = 0;

		for (int seed = 0; seed < seeds; seed++) {
			struct dl_kdur k = { 0 };
			struct dl_kdur_est e[DL_KDUR_MAX_COLS];
			int col[16];
			char name[32];
			bool wrong = false;

			rng = 0x9e3779b97f4a7c15ull * (uint64_t)(seed + 1) + c;
			for (int j = 0; j < cases[c].names; j++) {
				snprintf(name, sizeof(name), "kernel%d", j);
				col[j] = dl_kdur_column(&k, name);
			}
			for (int w = 0; w < cases[c].windows; w++) {
				double row[DL_KDUR_MAX_COLS] = { 0 }, b = 30e3 + 10e3 * gauss();
				int layers = 1 + (int)(uniform() * cases[c].max_layers);

				row[DL_KDUR_COL_WINDOW] = 1;
				for (int q = 0; q < layers; q++) {
					row[col[q % cases[c].names]] += 1;
					b += cases[c].base_ns + cases[c].step_ns * (q % cases[c].names);
				}
				if (uniform() < cases[c].p_out)
					b += 200e3 + 3e6 * uniform();
				dl_kdur_add(&k, row, b);
			}
			dl_kdur_solve(&k, e);
			for (int j = 0; j < cases[c].names; j++) {
				double want = cases[c].base_ns + cases[c].step_ns * j, got = e[col[j]].mean_ns;
				double tol = 4 * e[col[j]].stderr_ns + fmax(0.02 * want, 15e3);

				wrong |= !e[col[j]].determined || fabs(got - want) > tol;
				worst = fmax(worst, fabs(got - want) / want);
			}
			bad += wrong;
			dl_kdur_free(&k);
		}
		CHECK(bad == 0, "case %zu (%.0f%% late windows, %.0f us + %.0f us a name): %d of %d seeds off, worst %.0f%%",
		      c, cases[c].p_out * 100, cases[c].base_ns / 1e3, cases[c].step_ns / 1e3, bad, seeds, worst * 100);
	}
}

static double objective(size_t n, const double *G, const double *h, const double *x)
{
	double f = 0;

	for (size_t i = 0; i < n; i++) {
		f -= 2 * h[i] * x[i];
		for (size_t j = 0; j < n; j++)
			f += x[i] * G[i * n + j] * x[j];
	}
	return f;
}

/* Gaussian elimination on the subset's normal equations; false when singular. */
static bool solve_subset(size_t n, const double *G, const double *h, unsigned mask, double *x)
{
	double a[4][5];
	size_t idx[4], m = 0;

	for (size_t i = 0; i < n; i++)
		x[i] = 0;
	for (size_t i = 0; i < n; i++)
		if (mask & (1u << i))
			idx[m++] = i;
	for (size_t i = 0; i < m; i++) {
		for (size_t j = 0; j < m; j++)
			a[i][j] = G[idx[i] * n + idx[j]];
		a[i][m] = h[idx[i]];
	}
	for (size_t p = 0; p < m; p++) {
		if (fabs(a[p][p]) < 1e-12)
			return false;
		for (size_t i = 0; i < m; i++)
			if (i != p) {
				double f = a[i][p] / a[p][p];

				for (size_t j = p; j <= m; j++)
					a[i][j] -= f * a[p][j];
			}
	}
	for (size_t i = 0; i < m; i++)
		x[idx[i]] = a[i][m] / a[i][i];
	return true;
}

/* On random 4-column systems (some with negative truths), NNLS reaches the best feasible active set. */
static void test_nnls_random(void)
{
	enum { N = 4, ROWS = 7 };
	int worse = 0;

	for (int t = 0; t < 200; t++) {
		double A[ROWS][N], b[ROWS], G[N * N] = { 0 }, h[N] = { 0 }, x[N], best = INFINITY;

		for (int r = 0; r < ROWS; r++) {
			b[r] = 0;
			for (int c = 0; c < N; c++) {
				A[r][c] = floor(uniform() * 4);
				b[r] += A[r][c] * (uniform() * 20 - 5);
			}
			b[r] += uniform() - 0.5;
		}
		for (int i = 0; i < N; i++)
			for (int r = 0; r < ROWS; r++) {
				h[i] += A[r][i] * b[r];
				for (int j = 0; j < N; j++)
					G[i * N + j] += A[r][i] * A[r][j];
			}
		for (unsigned mask = 0; mask < (1u << N); mask++) {
			double y[N];
			bool ok = solve_subset(N, G, h, mask, y);

			for (int i = 0; ok && i < N; i++)
				ok = y[i] >= 0;
			if (ok && objective(N, G, h, y) < best)
				best = objective(N, G, h, y);
		}
		CHECK(dl_nnls_normal(N, G, h, x) > 0, "system %d did not converge", t);
		for (int i = 0; i < N; i++)
			CHECK(x[i] >= 0, "system %d: x%d = %g", t, i, x[i]);
		worse += objective(N, G, h, x) > best + 1e-7 * (fabs(best) + 1);
	}
	CHECK(worse == 0, "%d systems short of the best active set", worse);
}

/* --- the correlator on a synthetic stream ----------------------------------- */

#define PID 100
#define TID 101
#define KA 0x4000
#define KB 0x5000
#define KC 0x6000

struct gen {
	struct dl_stream st;
	struct dl_summary sum;
	struct dl_correlator *corr;
};

static void hdr(struct dl_hdr *h, size_t size, int kind, uint64_t ts)
{
	h->size = (uint16_t)size;
	h->kind = (uint16_t)kind;
	h->ts = ts;
	h->tgid = PID;
	h->tid = TID;
}

static void gen_init(struct gen *g)
{
	struct dl_corr_opts o = { .step_on = "cudaMemcpyAsync" };
	static const struct { uint64_t addr; const char *name; } syms[] = {
		{ KA, "k_alpha" }, { KB, "k_beta" }, { KC, "k_gamma" } };

	memset(g, 0, sizeof(*g));
	dl_summary_init(&g->sum);
	g->corr = dl_corr_new(&o);
	dl_stream_add(&g->st, dl_summary_sink, &g->sum);
	dl_stream_add(&g->st, dl_corr_sink, g->corr);
	dl_emit_trace_start(&g->st, 1, 0);
	for (size_t i = 0; i < 3; i++) {
		union {
			struct dl_sym_ev e;
			char buf[sizeof(struct dl_sym_ev) + 16];
		} sym;

		memset(&sym, 0, sizeof(sym));
		hdr(&sym.e.h, sizeof(sym), DL_EV_SYM, 10 * US);
		sym.e.addr = syms[i].addr;
		strcpy(sym.e.name, syms[i].name);
		dl_stream_emit(&g->st, &sym, sizeof(sym));
	}
}

static void gen_free(struct gen *g)
{
	dl_corr_free(g->corr);
	dl_summary_free(&g->sum);
	dl_stream_free(&g->st);
}

static void cuda(struct gen *g, enum dl_api_id api, uint64_t ts, uint64_t dur, uint64_t a0, uint64_t a2, uint64_t a3,
		 uint64_t a4)
{
	struct dl_cuda_ev e;

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_CUDA, ts);
	e.api = api;
	e.dur_ns = dur;
	e.arg[0] = a0;
	e.arg[1] = 0x20000;
	e.arg[2] = a2;
	e.arg[3] = a3;
	e.arg[4] = a4;
	if (api == DL_API_LAUNCH_KERNEL) {
		e.flags = DL_CUDA_ENTRY_ONLY;
		e.arg[1] = 64 | 1ull << 32;
		e.arg[2] = 1;
		e.arg[3] = 256 | 1ull << 32;
		e.arg[4] = 1;
		e.arg[5] = 0;
		e.arg[7] = a4;   /* the stream */
	}
	dl_stream_emit(&g->st, &e, sizeof(e));
}

static void sched(struct gen *g, uint32_t state, uint64_t ts, uint64_t dur, uint32_t next)
{
	struct dl_sched_ev e = test_sched(PID, TID, ts, dur, state, next);

	dl_stream_emit(&g->st, &e, sizeof(e));
}

/*
 * One step of 10 ms from t: an async 1 MiB H2D copy at 1 ms (the marker),
 * launches of the kernels given every 20 us from 1.1 ms, then a synchronous
 * 4-byte D2H copy from 1.3 ms, the thread asleep in it until dev_ns past the
 * H2D copy's entry (the device's time for the window), and 150 us more in
 * the call (the return path, which the window must not hold). With stream2,
 * the first kernel goes there, and a stream sync drains it after.
 */
static void step(struct gen *g, uint64_t t, const uint64_t *funcs, size_t n, uint64_t dev_ns, uint64_t stream2)
{
	uint64_t copy = t + MS, launch = copy + 100 * US, d2h = copy + 300 * US, woke = copy + dev_ns;

	sched(g, DL_ST_RUNNING, t, d2h - t, DL_ST_SLEEP);
	cuda(g, DL_API_MEMCPY_ASYNC, copy, 50 * US, 0x10000, 1 << 20, DL_DIR_H2D, 0);
	for (size_t i = 0; i < n; i++)
		cuda(g, DL_API_LAUNCH_KERNEL, launch + i * 20 * US, 0, funcs[i], 0, 0, i == 0 ? stream2 : 0);
	sched(g, DL_ST_SLEEP, d2h, woke - d2h, DL_ST_RUNNING);
	sched(g, DL_ST_RUNNING, woke, t + 10 * MS - woke, DL_ST_SLEEP);
	cuda(g, DL_API_MEMCPY, d2h, woke + 150 * US - d2h, 0x20000, 4, DL_DIR_D2H, 0);
	if (stream2)
		cuda(g, DL_API_STREAM_SYNC, woke + 200 * US, 10 * US, stream2, 0, 0, 0);
}

static const struct dl_kdur *run_steps(struct gen *g, unsigned steps, uint64_t da, uint64_t db, uint64_t fixed,
				       bool fixed_mix, bool two_streams, unsigned late_every)
{
	gen_init(g);
	for (unsigned i = 0; i < steps; i++) {
		/* Mixes of 1-3 alpha and 1-4 beta, differing step to step unless fixed_mix (2 and 1). */
		size_t na = fixed_mix ? 2 : 1 + i % 3, nb = fixed_mix ? 1 : 1 + (i / 3) % 4, n = 0;
		uint64_t funcs[8];

		for (size_t k = 0; k < na; k++)
			funcs[n++] = KA;
		for (size_t k = 0; k < nb; k++)
			funcs[n++] = KB;
		/* The device's time: the fixed part plus the kernels; the sync starts before it is done. */
		/* late_every: that step's wake-up 3 ms late, as a host that woke late (or a stalled device) has it. */
		step(g, MS + i * 10 * MS, funcs, n,
		     fixed + na * da + nb * db + (late_every && i % late_every == 1 ? 3 * MS : 0),
		     two_streams && i % 2 ? 0x7000 : 0);
	}
	dl_emit_trace_end(&g->st, (steps + 10) * 10 * MS, (uint64_t[DL_DROP_MAX]){ 0 });
	return dl_corr_kdur(g->corr, PID);
}

static const struct dl_kdur *run_loop(struct gen *g, uint64_t da, uint64_t db, uint64_t fixed, bool fixed_mix,
				      bool two_streams)
{
	return run_steps(g, 24, da, db, fixed, fixed_mix, two_streams, 0);
}

static void test_correlator_mixes(void)
{
	struct gen g;
	struct dl_kdur_est est[DL_KDUR_MAX_COLS];
	const struct dl_kdur *kd = run_loop(&g, 300 * US, 700 * US, 150 * US, false, false);
	int a, b;

	CHECK(kd != NULL, "no fit");
	if (!kd)
		goto out;
	a = dl_kdur_find(kd, "k_alpha");
	b = dl_kdur_find(kd, "k_beta");
	CHECK(a >= 0 && b >= 0, "columns %d %d", a, b);
	if (a < 0 || b < 0)
		goto out;
	dl_kdur_solve(kd, est);
	/* The last step's window closes after the last marker: 23 steps, 23 windows. */
	CHECK_EQ_U64(kd->windows, 23);
	CHECK(est[a].determined && near(est[a].mean_ns, 300e3, 1e-3), "alpha %d %.3f", est[a].determined,
	      est[a].mean_ns);
	CHECK(est[b].determined && near(est[b].mean_ns, 700e3, 1e-3), "beta %d %.3f", est[b].determined,
	      est[b].mean_ns);
	/* Every window copies the same bytes: the fixed part and the copies' cost are not told apart. */
	CHECK(!est[DL_KDUR_COL_WINDOW].determined && !est[DL_KDUR_COL_BYTES].determined, "fixed part %d, H2D %d",
	      est[DL_KDUR_COL_WINDOW].determined, est[DL_KDUR_COL_BYTES].determined);
	CHECK(near(est[a].residual_ns, 0, 1), "residual %g", est[a].residual_ns);
	CHECK(dl_kdur_find(kd, "k_gamma") < 0, "a kernel never launched has a column");
out:
	gen_free(&g);
}

/* The same mix each step: alpha and beta only ever 2:1, with the window's fixed part: nothing determined. */
static void test_correlator_fixed_mix(void)
{
	struct gen g;
	struct dl_kdur_est est[DL_KDUR_MAX_COLS];
	const struct dl_kdur *kd = run_loop(&g, 300 * US, 700 * US, 150 * US, true, false);
	int a = kd ? dl_kdur_find(kd, "k_alpha") : -1, b = kd ? dl_kdur_find(kd, "k_beta") : -1;

	CHECK(kd && a >= 0 && b >= 0, "no fit");
	if (kd && a >= 0 && b >= 0) {
		dl_kdur_solve(kd, est);
		CHECK(kd->windows == 23 && !est[a].determined && !est[b].determined, "windows %llu, determined %d %d",
		      (unsigned long long)kd->windows, est[a].determined, est[b].determined);
	}
	gen_free(&g);
}

/* Every other step puts its first kernel on a second stream: those windows are skipped, the rest still fit. */
static void test_correlator_two_streams(void)
{
	struct gen g;
	struct dl_kdur_est est[DL_KDUR_MAX_COLS];
	const struct dl_kdur *kd = run_loop(&g, 300 * US, 700 * US, 150 * US, false, true);
	int a = kd ? dl_kdur_find(kd, "k_alpha") : -1;

	CHECK(kd && a >= 0, "no fit");
	if (kd && a >= 0) {
		dl_kdur_solve(kd, est);
		/* Steps 0, 2, .. 22 on one stream: 12 windows (step 23's drain is past the last marker). */
		CHECK_EQ_U64(kd->windows, 12);
		CHECK(kd->skipped >= 11, "skipped %llu", (unsigned long long)kd->skipped);
		CHECK(est[a].determined && near(est[a].mean_ns, 300e3, 1e-3), "alpha %.3f", est[a].mean_ns);
	}
	gen_free(&g);
}

/*
 * Every 6th window 3 ms late: least squares would follow them (alpha and beta
 * off by hundreds of us); the first 48 windows' trimmed fit drops them, and the
 * gate keeps the later ones out: 10 of 59 windows, the rest exact.
 */
static void test_correlator_outliers(void)
{
	struct gen g;
	struct dl_kdur_est est[DL_KDUR_MAX_COLS];
	const struct dl_kdur *kd = run_steps(&g, 60, 300 * US, 700 * US, 150 * US, false, false, 6);
	int a = kd ? dl_kdur_find(kd, "k_alpha") : -1, b = kd ? dl_kdur_find(kd, "k_beta") : -1;

	CHECK(kd && a >= 0 && b >= 0, "no fit");
	if (kd && a >= 0 && b >= 0) {
		dl_kdur_solve(kd, est);
		CHECK(kd->gated && kd->windows == 59 && kd->outliers == 10, "gated %d, windows %llu, outliers %llu",
		      kd->gated, (unsigned long long)kd->windows, (unsigned long long)kd->outliers);
		CHECK(est[a].determined && near(est[a].mean_ns, 300e3, 1e-3), "alpha %.3f", est[a].mean_ns);
		CHECK(est[b].determined && near(est[b].mean_ns, 700e3, 1e-3), "beta %.3f", est[b].mean_ns);
		CHECK_EQ_U64(est[a].windows, 49);
	}
	gen_free(&g);
}

/* What the text report and the JSON say of a stream: its kernels' estimates, or why there are none. */
static char *reports(struct gen *g)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct dl_report_model m;

	dl_report_model_build(&m, &g->sum, g->corr, NULL);
	dl_report_kdur_text(f, &m);
	dl_report_json(f, &m);
	dl_report_model_free(&m);
	fclose(f);
	return buf;
}

static void test_reports(void)
{
	struct gen g;
	char *out;

	run_loop(&g, 300 * US, 700 * US, 150 * US, false, false);
	out = reports(&g);
	CHECK(strstr(out, "k_alpha                                  inferred mean      300.0 us") != NULL &&
		      strstr(out, "k_beta                                   inferred mean      700.0 us") != NULL,
	      "text: %s", out);
	CHECK(strstr(out, "\"name\":\"k_alpha\"") && strstr(out, "\"inferred_ns\":{\"mean\":300000"),
	      "json: %s", out);
	free(out);
	gen_free(&g);
	run_loop(&g, 300 * US, 700 * US, 150 * US, true, false);
	out = reports(&g);
	CHECK(strstr(out, "kernel device times not inferred: in its 23 drain windows") != NULL, "text: %s", out);
	CHECK(strstr(out, "\"inferred_ns\":null") && !strstr(out, "\"inferred_ns\":{"), "json: %s", out);
	free(out);
	gen_free(&g);
}

int main(void)
{
	test_nnls_by_hand();
	test_nnls_drops_column();
	test_collinear();
	test_nnls_random();
	test_correlator_mixes();
	test_correlator_fixed_mix();
	test_correlator_two_streams();
	test_correlator_outliers();
	test_sparse_mixes_with_outliers();
	test_reports();
	return check_report("test_kdur");
}
