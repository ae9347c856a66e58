// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/kdur.h"
#include "util.h"

#define M DL_KDUR_MAX_COLS
/* A column whose part not explained by the others is below this share of it is taken as their combination. */
#define DEPENDENT_TOL 1e-7
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

void dl_kdur_add(struct dl_kdur *k, const double *row, double b)
{
	if (k->ncols < DL_KDUR_COL_KERNELS)
		k->ncols = DL_KDUR_COL_KERNELS;
	if (!k->ata)
		k->ata = dl_xcalloc(M * M, sizeof(*k->ata));
	for (size_t i = 0; i < k->ncols; i++) {
		if (row[i] == 0)
			continue;
		k->col_windows[i]++;
		k->atb[i] += row[i] * b;
		for (size_t j = 0; j < k->ncols; j++)
			k->ata[i * M + j] += row[i] * row[j];
	}
	k->btb += b * b;
	k->windows++;
}

void dl_kdur_free(struct dl_kdur *k)
{
	for (size_t i = 0; i < M; i++)
		free(k->names[i]);
	free(k->ata);
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

void dl_kdur_solve(const struct dl_kdur *k, struct dl_kdur_est *out)
{
	size_t n = k->ncols;
	double *G = dl_xcalloc(n * n + 1, sizeof(*G)), *x = dl_xcalloc(n + 1, sizeof(*x));
	double r2, rms, inv;
	size_t rank;

	memset(out, 0, n * sizeof(*out));
	if (!k->ata || !k->windows) {
		free(G);
		free(x);
		return;
	}
	for (size_t i = 0; i < n; i++)
		memcpy(&G[i * n], &k->ata[i * M], n * sizeof(*G));
	dl_nnls_normal(n, G, k->atb, x);
	r2 = k->btb;
	for (size_t i = 0; i < n; i++) {
		double gx = 0;

		for (size_t j = 0; j < n; j++)
			gx += G[i * n + j] * x[j];
		r2 += x[i] * gx - 2 * x[i] * k->atb[i];
	}
	r2 = fmax(r2, 0);
	rms = sqrt(r2 / (double)k->windows);
	rank = eliminate_others(n, G, n, DEPENDENT_TOL, NULL);
	for (size_t i = 0; i < n; i++) {
		out[i].windows = k->col_windows[i];
		out[i].residual_ns = rms;
		/* As many windows as unknowns fit exactly: the residual, and so the estimate's spread, unknown. */
		if (k->windows <= rank || !dl_gram_determined(n, G, i, DEPENDENT_TOL, &inv))
			continue;
		out[i].determined = true;
		out[i].mean_ns = x[i];
		out[i].stderr_ns = sqrt(r2 / (double)(k->windows - rank) * inv);
	}
	free(G);
	free(x);
}
