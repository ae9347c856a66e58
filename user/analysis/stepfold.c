// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/stepfold.h"
#include "util.h"

uint32_t dl_fold_bucket(uint64_t ns)
{
	const unsigned sub = 1u << DL_FOLD_SUB_BITS;
	unsigned e;

	if (ns < sub)
		return (uint32_t)ns;
	e = 63 - (unsigned)__builtin_clzll(ns);   /* ns in [2^e, 2^(e+1)), e >= DL_FOLD_SUB_BITS */
	return sub * (e - DL_FOLD_SUB_BITS + 1) + (uint32_t)((ns >> (e - DL_FOLD_SUB_BITS)) & (sub - 1));
}

uint64_t dl_fold_bucket_mid(uint32_t b)
{
	const unsigned sub = 1u << DL_FOLD_SUB_BITS;
	unsigned shift;
	uint64_t lo;

	if (b < sub)
		return b;
	shift = b / sub - 1;
	lo = ((uint64_t)sub + b % sub) << shift;
	return lo + ((1ull << shift) >> 1);
}

/* A fold of one step: what dl_fold_merge adds (its mean is the step's, its M2 zero). */
static void fold_of_step(struct dl_step_fold *one, const struct dl_step *st)
{
	*one = (struct dl_step_fold){
		.n = 1, .dur_ns = st->dur_ns, .io_read_bytes = st->io_read_bytes, .io_read_ops = st->io_read_ops,
		.io_ns = st->io_ns, .workers_cpu_ns = st->workers_cpu_ns, .h2d_bytes = st->h2d_bytes,
		.d2h_bytes = st->d2h_bytes, .h2d_copies = st->h2d_copies, .d2h_copies = st->d2h_copies,
		.small_copies = st->small_copies, .pageable_copies = st->pageable_copies, .kernels = st->kernels,
		.collectives = st->collectives, .comm_bytes = st->comm_bytes,
		.comm_after_compute_ns = st->comm_after_compute_ns, .wakeup_runq_ns = st->wakeup_runq_ns, .gpu_busy_lo_ns = st->gpu_busy_lo_ns,
		.gpu_busy_hi_ns = st->gpu_busy_hi_ns, .mean = (double)st->dur_ns,
	};
	memcpy(one->cat_ns, st->cat_ns, sizeof(one->cat_ns));
	memcpy(one->gpu_idle_ns, st->gpu_idle_ns, sizeof(one->gpu_idle_ns));
	if (st->verdict < DL_V_COUNT)
		one->verdicts[st->verdict] = 1;
	/* Over a millisecond of reads in flight: a shorter window says more about caches than the disk. */
	if (st->io_ns > 1000000)
		one->io_peak_mbps = (double)st->io_read_bytes * 1e3 / (double)st->io_ns;
}

void dl_fold_add(struct dl_step_fold *f, const struct dl_step *st, bool with_hist)
{
	struct dl_step_fold one;

	if (st->partial) {
		f->partial++;
		return;
	}
	fold_of_step(&one, st);
	dl_fold_merge(f, &one);
	if (with_hist) {
		if (!f->hist)
			f->hist = dl_xcalloc(DL_FOLD_BUCKETS, sizeof(*f->hist));
		f->hist[dl_fold_bucket(st->dur_ns)]++;
	}
}

void dl_fold_merge(struct dl_step_fold *to, const struct dl_step_fold *from)
{
	uint64_t n = to->n + from->n;
	double d = from->mean - to->mean;

	to->partial += from->partial;
	if (!from->n)
		return;
	/* Chan et al.'s pairwise update of the mean and the sum of squares. */
	to->m2 += from->m2 + d * d * (double)to->n * (double)from->n / (double)n;
	to->mean += d * (double)from->n / (double)n;
	to->n = n;
	to->dur_ns += from->dur_ns;
	for (int k = 0; k < DL_CAT_COUNT; k++)
		to->cat_ns[k] += from->cat_ns[k];
	to->io_read_bytes += from->io_read_bytes;
	to->io_read_ops += from->io_read_ops;
	to->io_ns += from->io_ns;
	to->workers_cpu_ns += from->workers_cpu_ns;
	to->h2d_bytes += from->h2d_bytes;
	to->d2h_bytes += from->d2h_bytes;
	to->h2d_copies += from->h2d_copies;
	to->d2h_copies += from->d2h_copies;
	to->small_copies += from->small_copies;
	to->pageable_copies += from->pageable_copies;
	to->kernels += from->kernels;
	to->collectives += from->collectives;
	to->comm_bytes += from->comm_bytes;
	to->comm_after_compute_ns += from->comm_after_compute_ns;
	to->wakeup_runq_ns += from->wakeup_runq_ns;
	to->gpu_busy_lo_ns += from->gpu_busy_lo_ns;
	to->gpu_busy_hi_ns += from->gpu_busy_hi_ns;
	for (int k = 0; k < DL_IDLE_COUNT; k++)
		to->gpu_idle_ns[k] += from->gpu_idle_ns[k];
	for (int v = 0; v < DL_V_COUNT; v++)
		to->verdicts[v] += from->verdicts[v];
	to->io_peak_mbps = dl_max_dbl(to->io_peak_mbps, from->io_peak_mbps);
	if (from->hist) {
		if (!to->hist)
			to->hist = dl_xcalloc(DL_FOLD_BUCKETS, sizeof(*to->hist));
		for (uint32_t b = 0; b < DL_FOLD_BUCKETS; b++)
			to->hist[b] += from->hist[b];
	}
}

void dl_fold_free(struct dl_step_fold *f)
{
	free(f->hist);
	f->hist = NULL;
}

double dl_fold_cv(const struct dl_step_fold *f)
{
	if (f->n < 2 || f->mean <= 0)
		return 0;
	return sqrt(f->m2 / (double)(f->n - 1)) / f->mean;
}

/* The duration of rank r (0-based, ascending) in the histogram. */
static uint64_t ranked(const struct dl_step_fold *f, uint64_t r)
{
	uint64_t seen = 0;

	for (uint32_t b = 0; b < DL_FOLD_BUCKETS; b++) {
		seen += f->hist[b];
		if (seen > r)
			return dl_fold_bucket_mid(b);
	}
	return 0;
}

void dl_fold_percentiles(const struct dl_step_fold *f, uint64_t *median, uint64_t *p90)
{
	uint64_t n = f->n;

	*median = *p90 = 0;
	if (!n || !f->hist)
		return;
	*median = n % 2 ? ranked(f, n / 2) : (ranked(f, n / 2 - 1) + ranked(f, n / 2)) / 2;
	*p90 = ranked(f, (uint64_t)((double)(n - 1) * 0.9 + 0.5));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void dl_durations_percentiles(uint64_t *d, size_t n, uint64_t *median, uint64_t *p90)
{
	*median = *p90 = 0;
	if (!n)
		return;
	qsort(d, n, sizeof(*d), cmp_u64);
	*median = n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
	*p90 = d[(size_t)((double)(n - 1) * 0.9 + 0.5)];
}
