// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/kdur.h"
#include "util.h"

#define M DL_KDUR_MAX_COLS
/* A column whose part not explained by the others is below this share of it is taken as their combination. */
#define DEPENDENT_TOL 1e-7
#define GATE_SIGMAS 4.0      /* a window further from the fit than this many robust spreads is an outlier */
#define GATE_REL 0.01        /* and than this share of its time: a fit with no spread keeps windows to 1% */
#define GATE_FLOOR_NS 1000.0 /* and than this: host clock reads apart */
#define SPAN_TOL 1e-6        /* a row's part outside the fit's span, relative to it, that makes it new */
#define LEVERAGE_MAX 0.4     /* above: fewer than 3 windows share the mix (2 alike have 1/2 each) */
#define REFIT_EVERY 32       /* windows between refits of the gate's fit */
#define NNLS_MAX_ITER(n) ((int)(6 * (n) + 10))

int dl_kdur_find(const struct dl_kdur *k, const char *name)
{
	uint64_t h = dl_hash_bytes(name, strlen(name));

	for (size_t i = DL_KDUR_COL_KERNELS; i < k->ncols; i++)
		if (k->name_hash[i] == h && !strcmp(k->names[i], name))
			return (int)i;
	return -1;
}

int dl_kdur_column(struct dl_kdur *k, const char *name)
{
	int i = dl_kdur_find(k, name);

	if (i >= 0)
		return i;
	if (k->ncols < DL_KDUR_COL_KERNELS)
		k->ncols = DL_KDUR_COL_KERNELS;
	if (k->ncols >= M) {
		k->names_dropped++;
		return -1;
	}
	k->names[k->ncols] = dl_xstrdup(name);
	k->name_hash[k->ncols] = dl_hash_bytes(name, strlen(name));
	return (int)k->ncols++;
}

void dl_kdur_free(struct dl_kdur *k)
{
	for (size_t i = 0; i < M; i++)
		free(k->names[i]);
	free(k->fit.ata);
	free(k->boot);
	free(k->basis);
	memset(k, 0, sizeof(*k));
}

/*
 * Symmetric elimination of G's columns in order but k (k = n: none),
 * skipping those the earlier ones explain; what is left of column k is its
 * part outside their span (the Schur complement). Returns the independent
 * columns eliminated: with k = n, G's rank.
 */
static size_t eliminate_others(size_t n, const double *G, size_t k, double tol, double *left_kk)
{
	double *a = dl_xcalloc(n * n + 1, sizeof(*a));
	bool *done = dl_xcalloc(n + 1, sizeof(*done));
	size_t rank = 0;

	memcpy(a, G, n * n * sizeof(*a));
	for (size_t p = 0; p < n; p++) {
		double piv = a[p * n + p];

		if (p == k)
			continue;
		done[p] = true;
		if (!(piv > tol * G[p * n + p]) || !(G[p * n + p] > 0))
			continue;
		rank++;
		for (size_t i = 0; i < n; i++) {
			double f;

			if (done[i] || a[i * n + p] == 0)
				continue;
			f = a[i * n + p] / piv;
			for (size_t j = 0; j < n; j++)
				if (!done[j])
					a[i * n + j] -= f * a[p * n + j];
		}
	}
	if (k < n)
		*left_kk = a[k * n + k];
	free(a);
	free(done);
	return rank;
}

bool dl_gram_determined(size_t n, const double *G, size_t k, double tol, double *inv_kk)
{
	double left;

	if (k >= n || !(G[k * n + k] > 0))
		return false;
	eliminate_others(n, G, k, tol, &left);
	if (!(left > tol * G[k * n + k]))
		return false;
	*inv_kk = 1 / left;
	return true;
}

/* Solves G[P,P] z = h[P] by Cholesky; false when G[P,P] is not positive definite to tolerance. */
static bool solve_passive(size_t n, const double *G, const double *h, const size_t *P, size_t np, double *z)
{
	double *L = dl_xcalloc(np * np + 1, sizeof(*L));
	bool ok = true;

	for (size_t i = 0; i < np && ok; i++)
		for (size_t j = 0; j <= i; j++) {
			double s = G[P[i] * n + P[j]];

			for (size_t q = 0; q < j; q++)
				s -= L[i * np + q] * L[j * np + q];
			if (i == j) {
				if (!(s > DEPENDENT_TOL * G[P[i] * n + P[i]])) {
					ok = false;
					break;
				}
				L[i * np + i] = sqrt(s);
			} else {
				L[i * np + j] = s / L[j * np + j];
			}
		}
	for (size_t i = 0; i < np && ok; i++) {
		double s = h[P[i]];

		for (size_t q = 0; q < i; q++)
			s -= L[i * np + q] * z[q];
		z[i] = s / L[i * np + i];
	}
	for (size_t i = np; ok && i-- > 0;) {
		double s = z[i];

		for (size_t q = i + 1; q < np; q++)
			s -= L[q * np + i] * z[q];
		z[i] = s / L[i * np + i];
	}
	free(L);
	return ok;
}

int dl_nnls_normal(size_t n, const double *G, const double *h, double *x)
{
	bool *in_p = dl_xcalloc(n + 1, sizeof(*in_p)), *rejected = dl_xcalloc(n + 1, sizeof(*rejected));
	size_t *P = dl_xcalloc(n + 1, sizeof(*P));
	double *z = dl_xcalloc(n + 1, sizeof(*z));
	double hmax = 0, tol;
	int iter = 0, ret = -1;

	for (size_t i = 0; i < n; i++) {
		x[i] = 0;
		hmax = fmax(hmax, fabs(h[i]));
	}
	/* The gradient's scale is h's: below this share of it a column cannot lower the residual. */
	tol = 1e-12 * (hmax > 0 ? hmax : 1);
	while (iter++ < NNLS_MAX_ITER(n)) {
		size_t j = n;
		double best = tol;
		bool first = true;

		for (size_t i = 0; i < n; i++) {
			double w = h[i];

			for (size_t q = 0; q < n; q++)
				w -= G[i * n + q] * x[q];
			if (!in_p[i] && !rejected[i] && w > best) {
				best = w;
				j = i;
			}
		}
		if (j == n) {
			ret = iter;
			break;
		}
		in_p[j] = true;
		for (;; first = false) {
			size_t np = 0, hit = n;
			double alpha = INFINITY;

			for (size_t i = 0; i < n; i++)
				if (in_p[i])
					P[np++] = i;
			/* A column the passive ones already explain stays out, and so does one entering at <= 0. */
			if (!solve_passive(n, G, h, P, np, z)) {
				in_p[j] = false;
				rejected[j] = true;
				break;
			}
			/* Entering at <= 0 while the gradient says it lowers the residual: rounding; it stays out. */
			for (size_t i = 0; first && i < np; i++)
				if (P[i] == j && !(z[i] > 0)) {
					in_p[j] = false;
					rejected[j] = true;
				}
			if (!in_p[j] && first)
				break;
			for (size_t i = 0; i < np; i++)
				if (!(z[i] > 0) && x[P[i]] - z[i] > 0 && x[P[i]] / (x[P[i]] - z[i]) < alpha) {
					alpha = x[P[i]] / (x[P[i]] - z[i]);
					hit = P[i];
				}
			/* No column on its way below 0: z is feasible (one exactly at 0 leaves). */
			if (hit == n) {
				for (size_t i = 0; i < np; i++) {
					x[P[i]] = z[i] > 0 ? z[i] : 0;
					in_p[P[i]] = z[i] > 0;
				}
				break;
			}
			/* Along the segment from x to z, as far as the first column that reaches 0; it leaves. */
			for (size_t i = 0; i < np; i++) {
				x[P[i]] += alpha * (z[i] - x[P[i]]);
				if (P[i] == hit || x[P[i]] <= 0) {
					x[P[i]] = 0;
					in_p[P[i]] = false;
				}
			}
		}
	}
	free(in_p);
	free(rejected);
	free(P);
	free(z);
	return ret;
}

static void ne_add(struct dl_kdur_ne *ne, size_t ncols, const double *row, double b)
{
	if (!ne->ata)
		ne->ata = dl_xcalloc(M * M, sizeof(*ne->ata));
	for (size_t i = 0; i < ncols; i++) {
		if (row[i] == 0)
			continue;
		ne->col_windows[i]++;
		ne->atb[i] += row[i] * b;
		for (size_t j = 0; j < ncols; j++)
			ne->ata[i * M + j] += row[i] * row[j];
	}
	ne->btb += b * b;
	ne->n++;
}

static void ne_clear(struct dl_kdur_ne *ne)
{
	double *ata = ne->ata;

	if (ata)
		memset(ata, 0, M * M * sizeof(*ata));
	memset(ne, 0, sizeof(*ne));
	ne->ata = ata;
}

/* G (n x n, packed) of the normal equations and their NNLS solution. */
static void ne_solve(const struct dl_kdur_ne *ne, size_t n, double *G, double *x)
{
	for (size_t i = 0; i < n; i++)
		memcpy(&G[i * n], &ne->ata[i * M], n * sizeof(*G));
	dl_nnls_normal(n, G, ne->atb, x);
}

static double predict(const double *row, const double *x, size_t n)
{
	double p = 0;

	for (size_t i = 0; i < n; i++)
		p += row[i] * x[i];
	return p;
}

/* How far from the fit a window may lie: GATE_SIGMAS robust spreads, plus a floor for clock and rounding. */
static double gate(double scale, double pred)
{
	return GATE_SIGMAS * scale + GATE_REL * fabs(pred) + GATE_FLOOR_NS;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void refit(const struct dl_kdur *k, const bool *keep, struct dl_kdur_ne *ne, double *G, double *x, double *r)
{
	ne_clear(ne);
	for (size_t i = 0; i < k->nboot; i++)
		if (keep[i])
			ne_add(ne, k->ncols, k->boot[i].row, k->boot[i].b);
	ne_solve(ne, k->ncols, G, x);
	for (size_t i = 0; i < k->nboot; i++)
		r[i] = k->boot[i].b - predict(k->boot[i].row, x, k->ncols);
}

/* The q-th smallest of |v[0..n)| (n > 0). */
static double quantile(const double *v, size_t n, size_t q, bool absolute)
{
	double a[DL_KDUR_BOOT];

	for (size_t i = 0; i < n; i++)
		a[i] = absolute ? fabs(v[i]) : v[i];
	qsort(a, n, sizeof(*a), cmp_double);
	return a[q < n ? q : n - 1];
}

static double abs_quantile(const double *v, size_t n, size_t q)
{
	return quantile(v, n, q, true);
}

/*
 * Takes from v (n long) its projections on the m orthonormal vectors at
 * basis, stride apart (Gram-Schmidt); returns v's squared norm after.
 */
static double project_out(double *v, const double *basis, size_t m, size_t stride, size_t n)
{
	double norm = 0;

	for (size_t b = 0; b < m; b++) {
		const double *e = &basis[b * stride];
		double d = 0;

		for (size_t i = 0; i < n; i++)
			d += e[i] * v[i];
		for (size_t i = 0; i < n; i++)
			v[i] -= d * e[i];
	}
	for (size_t i = 0; i < n; i++)
		norm += v[i] * v[i];
	return norm;
}

/*
 * Adds row to the orthonormal rows of basis (m of them, stride M) when it
 * lies outside their span; true if it did.
 */
static bool span_add(double *basis, size_t *m, const double *row, size_t n)
{
	double *q = &basis[*m * M], norm0 = 0, norm;

	for (size_t i = 0; i < n; i++) {
		q[i] = row[i];
		norm0 += q[i] * q[i];
	}
	norm = project_out(q, basis, *m, M, n);
	if (!(norm > SPAN_TOL * SPAN_TOL * norm0))
		return false;
	norm = sqrt(norm);
	for (size_t i = 0; i < n; i++)
		q[i] /= norm;
	(*m)++;
	return true;
}

/* The dimension of the span of the windows in keep (all: keep NULL). */
static size_t boot_rank(const struct dl_kdur *k, const bool *keep, double *basis)
{
	size_t m = 0;

	for (size_t i = 0; i < k->nboot && m < k->ncols; i++)
		if (!keep || keep[i])
			span_add(basis, &m, k->boot[i].row, k->ncols);
	return m;
}

/*
 * The h windows least above the fit (ties at the cut may keep a few more),
 * and then as many of the next as it takes for them to span what all the
 * windows span. Only windows above the fit are trimmed: delays only add to a
 * window, so one far below the fit says the fit is wrong, not the window
 * (a fit led by an outlier, which alone told two kernels apart, puts the
 * windows that tell them apart rightly far below it). And trimming may not
 * take away every window that tells two kernels apart: without them the fit
 * could split the two's time at will, which costs the trimmed sum nothing.
 */
static bool trim_nearest(const struct dl_kdur *k, bool *keep, size_t h, const double *r, size_t rank, double *basis)
{
	size_t n = k->nboot, order[DL_KDUR_BOOT], m;
	double cut = quantile(r, n, h - 1, false);
	bool changed = false;

	for (size_t i = 0; i < n; i++) {
		bool in = r[i] <= cut;

		changed |= in != keep[i];
		keep[i] = in;
		order[i] = i;
	}
	m = boot_rank(k, keep, basis);
	if (m >= rank)
		return changed;
	/* Insertion sort by distance: n is at most DL_KDUR_BOOT. */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && r[order[j]] < r[order[j - 1]]; j--) {
			size_t t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (size_t j = 0; j < n && m < rank; j++) {
		size_t i = order[j];

		if (!keep[i] && span_add(basis, &m, k->boot[i].row, k->ncols)) {
			keep[i] = true;
			changed = true;
		}
	}
	return changed;
}

/*
 * Concentration steps of least trimmed squares from the windows in keep:
 * refitted on those trim_nearest keeps until that set stays. Returns the
 * sum of squares of the h least above the fit; x and r are the fit's.
 */
static double concentrate(const struct dl_kdur *k, bool *keep, size_t h, size_t rank, double *basis,
			  struct dl_kdur_ne *ne, double *G, double *x, double *r)
{
	size_t n = k->nboot;
	double cut, sum = 0;

	refit(k, keep, ne, G, x, r);
	for (int it = 0; it < 16; it++) {
		if (!trim_nearest(k, keep, h, r, rank, basis))
			break;
		refit(k, keep, ne, G, x, r);
	}
	cut = quantile(r, n, h - 1, false);
	for (size_t i = 0; i < n; i++)
		if (r[i] <= cut)
			sum += r[i] * r[i];
	return sum;
}

/*
 * Whether some window alone tells kernels apart: its leverage in the fit of
 * all is 1 (the fit passes through it whatever its time), so nothing can
 * judge it, late or not, and a fit made then would judge later windows by
 * it. The leverage is the squared norm of the window's row of an orthonormal
 * basis of the columns (windows projected on the rows' span).
 */
static bool some_window_alone(const struct dl_kdur *k, double *basis)
{
	size_t n = k->nboot, m = boot_rank(k, NULL, basis);
	double *u = dl_xcalloc(n * m + 1, sizeof(*u));
	bool alone = false;

	for (size_t j = 0; j < m; j++)
		for (size_t i = 0; i < n; i++)
			u[j * n + i] = predict(k->boot[i].row, &basis[j * M], k->ncols);
	for (size_t j = 0; j < m; j++) {
		double *uj = &u[j * n], norm = project_out(uj, u, j, n, n);

		norm = norm > 0 ? sqrt(norm) : 1;
		for (size_t i = 0; i < n; i++)
			uj[i] /= norm;
	}
	for (size_t i = 0; i < n && !alone; i++) {
		double lev = 0;

		for (size_t j = 0; j < m; j++)
			lev += u[j * n + i] * u[j * n + i];
		alone = lev > LEVERAGE_MAX;
	}
	free(u);
	return alone;
}

/* A fixed generator: the same windows give the same fit, live and in a replay. */
static uint64_t next_random(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

/*
 * The fit of the first windows, robust to outliers: the host's delays only
 * ever add to a window (a late wake-up, a simulator's device thread
 * preempted), so a few windows are off by milliseconds where the rest agree
 * to microseconds, and least squares would follow them. Least trimmed
 * squares on 3/4 of the windows, by concentration steps from several starts
 * (Rousseeuw and Van Driessen's FAST-LTS): from all windows, and from random
 * sets of one window more than the columns in use. One start alone ends
 * where the outliers steer it: a window that alone tells two kernels apart
 * (the only mixes where their counts differ) can be trimmed for its
 * distance from an outlier-led fit, after which the fit splits their time at
 * will and the gate turns away every later window that would tell them
 * apart (trim_nearest keeps the span for that). The best start has the
 * least trimmed sum of squares. Then the spread is 1.4826 times the median
 * absolute residual of all (the normal distribution's standard deviation for
 * that median, which outliers under half do not move), and the fit is made
 * of every window within the gate.
 */
#define LTS_STARTS 48

static void trimmed_fit(const struct dl_kdur *k, struct dl_kdur_ne *ne, double *G, double *x, double *scale,
			size_t *dropped)
{
	bool keep[DL_KDUR_BOOT] = { 0 }, best_keep[DL_KDUR_BOOT] = { 0 };
	double r[DL_KDUR_BOOT] = { 0 }, best = INFINITY;
	double *basis = dl_xcalloc(M * M, sizeof(*basis));
	size_t n = k->nboot, h = (3 * n + 3) / 4, rank = boot_rank(k, NULL, basis), pick;
	uint64_t state = 0x9e3779b97f4a7c15ull;

	pick = rank + 1 < n ? rank + 1 : n;
	for (int start = 0; start <= LTS_STARTS && n; start++) {
		double sum;

		for (size_t i = 0; i < n; i++)
			keep[i] = !start;
		for (size_t m = 0; start && m < pick;) {
			size_t i = (size_t)(next_random(&state) % n);

			m += !keep[i];
			keep[i] = true;
		}
		sum = concentrate(k, keep, h, rank, basis, ne, G, x, r);
		if (sum < best) {
			best = sum;
			memcpy(best_keep, keep, sizeof(keep));
		}
	}
	refit(k, best_keep, ne, G, x, r);
	*scale = n ? 1.4826 * (abs_quantile(r, n, (n - 1) / 2) + abs_quantile(r, n, n / 2)) / 2 : 0;
	*dropped = 0;
	for (size_t i = 0; i < n; i++) {
		keep[i] = fabs(r[i]) <= gate(*scale, k->boot[i].b - r[i]);
		*dropped += !keep[i];
	}
	free(basis);
	refit(k, keep, ne, G, x, r);
}

/*
 * An orthonormal basis of the span of the windows fitted (the columns of G
 * span it): a window whose row lies outside it has a kernel mix the fit has
 * not seen, so its prediction is not determined and the gate cannot judge it.
 */
static void fit_basis(struct dl_kdur *k, const double *G)
{
	size_t n = k->ncols, m = 0;

	if (!k->basis)
		k->basis = dl_xcalloc(M * M, sizeof(*k->basis));
	for (size_t c = 0; c < n; c++) {
		double col[M];

		for (size_t i = 0; i < n; i++)
			col[i] = G[i * n + c];
		span_add(k->basis, &m, col, n);
	}
	k->nbasis = m;
	k->basis_cols = n;
}

static bool in_fit_span(const struct dl_kdur *k, const double *row)
{
	double r[M], norm0 = 0;
	size_t n = k->ncols;

	/* A column added since the basis was made is outside it wherever the row holds it. */
	for (size_t i = k->basis_cols; i < n; i++)
		if (row[i] != 0)
			return false;
	for (size_t i = 0; i < n; i++) {
		r[i] = row[i];
		norm0 += r[i] * r[i];
	}
	return project_out(r, k->basis, k->nbasis, M, n) <= SPAN_TOL * SPAN_TOL * norm0;
}

void dl_kdur_add(struct dl_kdur *k, const double *row, double b)
{
	size_t n;

	if (k->ncols < DL_KDUR_COL_KERNELS)
		k->ncols = DL_KDUR_COL_KERNELS;
	n = k->ncols;
	k->windows++;
	if (!k->gated) {
		double G[M * M], scale;
		size_t dropped;

		if (!k->boot)
			k->boot = dl_xcalloc(DL_KDUR_BOOT, sizeof(*k->boot));
		memcpy(k->boot[k->nboot].row, row, sizeof(k->boot[0].row));
		k->boot[k->nboot++].b = b;
		if (k->nboot < DL_KDUR_BOOT_MIN)
			return;
		if (k->nboot < DL_KDUR_BOOT) {
			double *basis = dl_xcalloc(M * M, sizeof(*basis));
			bool wait = some_window_alone(k, basis);

			free(basis);
			if (wait)
				return;
		}
		/* Enough to fit: from here windows are gated against it, and only the equations are kept. */
		trimmed_fit(k, &k->fit, G, k->x, &scale, &dropped);
		fit_basis(k, G);
		k->scale = scale;
		k->outliers = dropped;
		k->gated = true;
		free(k->boot);
		k->boot = NULL;
		k->nboot = 0;
		return;
	}
	{
		double pred = predict(row, k->x, n);

		if (in_fit_span(k, row) && fabs(b - pred) > gate(k->scale, pred)) {
			k->outliers++;
			return;
		}
	}
	ne_add(&k->fit, n, row, b);
	/* Refitted now and then: new kernel names get their estimates, the rest sharpen. */
	if (++k->since_fit >= REFIT_EVERY) {
		double G[M * M];

		k->since_fit = 0;
		ne_solve(&k->fit, n, G, k->x);
		fit_basis(k, G);
	}
}

void dl_kdur_solve(const struct dl_kdur *k, struct dl_kdur_est *out)
{
	size_t n = k->ncols;
	double *G = dl_xcalloc(n * n + 1, sizeof(*G)), *x = dl_xcalloc(n + 1, sizeof(*x));
	struct dl_kdur_ne boot = { 0 };
	const struct dl_kdur_ne *ne = &k->fit;
	double r2, rms, inv, scale;
	size_t rank, dropped;

	memset(out, 0, n * sizeof(*out));
	if (!k->windows) {
		free(G);
		free(x);
		return;
	}
	if (k->gated) {
		ne_solve(ne, n, G, x);
	} else {
		trimmed_fit(k, &boot, G, x, &scale, &dropped);
		ne = &boot;
	}
	r2 = ne->btb;
	for (size_t i = 0; i < n; i++) {
		double gx = 0;

		for (size_t j = 0; j < n; j++)
			gx += G[i * n + j] * x[j];
		r2 += x[i] * gx - 2 * x[i] * ne->atb[i];
	}
	r2 = fmax(r2, 0);
	rms = ne->n ? sqrt(r2 / (double)ne->n) : 0;
	rank = eliminate_others(n, G, n, DEPENDENT_TOL, NULL);
	for (size_t i = 0; i < n; i++) {
		out[i].windows = ne->col_windows[i];
		out[i].residual_ns = rms;
		/* As many windows as unknowns fit exactly: the residual, and so the estimate's spread, unknown. */
		if (ne->n <= rank || !dl_gram_determined(n, G, i, DEPENDENT_TOL, &inv))
			continue;
		out[i].determined = true;
		out[i].mean_ns = x[i];
		out[i].stderr_ns = sqrt(r2 / (double)(ne->n - rank) * inv);
	}
	free(boot.ata);
	free(G);
	free(x);
}
