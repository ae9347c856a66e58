/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Inferred per-kernel-name mean device durations, from the host's side only.
 *
 * Each drain window (work enqueued on one stream since the device was last
 * known empty, ended by a blocking call that found it outstanding) gives one
 * equation: sum over its columns of count * duration = the window's device
 * time. Over many windows with different mixes the durations are the
 * non-negative least-squares fit. Only the normal equations (A^T A, A^T b,
 * b^T b) are kept, for at most DL_KDUR_MAX_COLS columns, so memory does not
 * grow with the trace.
 *
 * Columns: one constant per window (what every window holds besides its
 * kernels: the host's wake-up after the drain, launch latency, small copies),
 * the bytes copied per direction, then kernel names. A kernel name is
 * determined only where its column is not a combination of the others (a
 * name always launched with another in the same ratio, or a fixed mix each
 * step, is not): then no estimate is given.
 */
#ifndef DLBPF_KDUR_H
#define DLBPF_KDUR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DL_KDUR_MAX_COLS 64
#define DL_KDUR_COL_WINDOW 0        /* 1 per window */
#define DL_KDUR_COL_BYTES 1         /* + direction - 1 (H2D, D2H, D2D): MiB copied */
#define DL_KDUR_COL_KERNELS 4       /* the first kernel name's */

/* Normal equations of the windows fitted. */
struct dl_kdur_ne {
	double *ata;                    /* DL_KDUR_MAX_COLS^2, row-major; allocated at the first window */
	double atb[DL_KDUR_MAX_COLS], btb;
	uint64_t col_windows[DL_KDUR_MAX_COLS];   /* windows whose column is not 0 */
	uint64_t n;                     /* windows */
};

#define DL_KDUR_BOOT_MIN 48         /* windows kept whole before the first fit; then only the equations */
#define DL_KDUR_BOOT 192            /* and more, up to this, while one window alone tells kernels apart */

struct dl_kdur {
	size_t ncols;
	char *names[DL_KDUR_MAX_COLS];  /* kernel columns' names (others NULL) */
	uint64_t name_hash[DL_KDUR_MAX_COLS];
	struct dl_kdur_ne fit;          /* windows within the gate */
	struct { double row[DL_KDUR_MAX_COLS], b; } *boot;   /* the first windows, until gated */
	size_t nboot;
	bool gated;                     /* x and scale fitted; later windows are checked against them */
	double x[DL_KDUR_MAX_COLS], scale;
	double *basis;                  /* nbasis orthonormal rows (stride DL_KDUR_MAX_COLS) spanning the fit's windows */
	size_t nbasis, basis_cols;      /* basis_cols: ncols when it was made */
	uint32_t since_fit;
	uint64_t windows;               /* equations offered */
	uint64_t outliers;              /* of those, too far from the fit (a late wake-up, a stalled device) */
	uint64_t skipped;               /* windows not usable (several streams, unnamed work, no wake-up) */
	uint64_t names_dropped;         /* kernel names past DL_KDUR_MAX_COLS */
};

struct dl_kdur_est {
	bool determined;
	double mean_ns;           /* >= 0 */
	double stderr_ns;         /* the fit's residual times sqrt((A^T A)^-1 kk): how far noise alone moves it */
	double residual_ns;       /* RMS of the whole fit, per window */
	uint64_t windows;         /* windows that held this column */
};

/* The correlator's window being filled: the equation's row so far. */
struct dl_kdur_open {
	bool open, unusable;
	uint64_t key;             /* the one stream holding its work */
	uint64_t since;           /* its first enqueue */
	double row[DL_KDUR_MAX_COLS];
};

/* A window closed by a blocking call that found its work outstanding. */
struct dl_kdur_window {
	uint64_t since, start, end;   /* first enqueue; the drain call's entry and return */
	double row[DL_KDUR_MAX_COLS];
};

/* The column of a kernel name, added at its first sight; -1 when the table is full. */
int dl_kdur_column(struct dl_kdur *k, const char *name);
/* The column of a name already added, or -1. */
int dl_kdur_find(const struct dl_kdur *k, const char *name);
/*
 * One equation: row[ncols] . d = b (ns). The first DL_KDUR_BOOT are kept and
 * fitted trimmed of outliers; each later one joins the fit only within a
 * gate around it, unless its mix is new to the fit (then it cannot be judged).
 */
void dl_kdur_add(struct dl_kdur *k, const double *row, double b);
/* The estimate of every column (out[ncols]); undetermined ones zero. */
void dl_kdur_solve(const struct dl_kdur *k, struct dl_kdur_est *out);
void dl_kdur_free(struct dl_kdur *k);

/*
 * Non-negative least squares on the normal equations: minimises
 * x'Gx - 2h'x over x >= 0 (Lawson-Hanson's active set), G n x n symmetric
 * positive semi-definite, row-major. A column that is a combination of
 * others already in the passive set is left at 0. Returns the iterations, or
 * -1 when it did not converge (x is then the last feasible point).
 */
int dl_nnls_normal(size_t n, const double *G, const double *h, double *x);
/*
 * Whether column k of G is independent of the others (its part not explained
 * by them is more than a relative tol of it), and if so (G^-1)kk.
 */
bool dl_gram_determined(size_t n, const double *G, size_t k, double tol, double *inv_kk);

#endif
