// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The period of the main thread's call sequence. Sync points are left out of
 * the sequence: a loop that syncs every N iterations (loss logging, gradient
 * accumulation) or never runs the same calls otherwise, and cutting at syncs
 * would make a step of N iterations. Where they fell is kept, to say how often
 * the loop syncs.
 *
 * A candidate period P scores by how often each steady kind of call (one that
 * recurs from the start of the window to its end) is found again P calls
 * later, averaged over the kinds with equal weight: a run of identical
 * launches matches itself at any shift, but the one copy between the runs
 * does not, and it weighs as much as the launches. The smallest candidate
 * scoring SL_MIN_SCORE wins.
 */
#include <stdlib.h>
#include <string.h>
#include "analysis/steplearn.h"
#include "util.h"

#define SL_MAX_SIGS 256          /* kinds told apart; more are "other", never steady */
#define SL_MAX_STRIDE 4          /* a kind recurring up to this often a period proposes it */
#define SL_MAX_CANDIDATES 64     /* scoring is linear in the window per candidate */
/*
 * An occasional extra call (the allocator's, a logging copy) shifts the calls
 * after it for one period's worth of comparisons: 0.9 tolerates one such in
 * ten periods and still refuses a shift that misses a kind every period.
 */
#define SL_MIN_SCORE 0.9

struct sig {
	uint64_t stream;
	uint16_t api;
	uint8_t dir, size;
	size_t count, first, last, at;   /* at: its positions' start in pos[] */
	bool steady;
};

struct seq {
	uint16_t *q;          /* the sequence, as kinds */
	size_t *idx;          /* each one's index in the calls */
	size_t n;
	uint32_t *syncs;      /* per sync point: the position of the call after it */
	size_t nsync;
	struct sig sigs[SL_MAX_SIGS];
	size_t nsig, nsteady;
	uint32_t *pos;        /* each kind's positions, kind after kind */
};

uint8_t dl_sl_size_log2(uint64_t bytes)
{
	return bytes ? (uint8_t)(64 - __builtin_clzll(bytes)) : 0;
}

static uint16_t kind_of(struct seq *s, const struct dl_sl_call *c)
{
	for (size_t k = 0; k < s->nsig; k++) {
		const struct sig *g = &s->sigs[k];

		if (g->api == c->api && g->dir == c->dir && g->size == c->size_log2 && g->stream == c->stream)
			return (uint16_t)k;
	}
	if (s->nsig == SL_MAX_SIGS)
		return SL_MAX_SIGS;
	s->sigs[s->nsig] = (struct sig){ .stream = c->stream, .api = c->api, .dir = c->dir, .size = c->size_log2 };
	return (uint16_t)s->nsig++;
}

static void build(struct seq *s, const struct dl_sl_call *v, size_t n)
{
	size_t at = 0;

	s->q = dl_xcalloc(n + 1, sizeof(*s->q));
	s->idx = dl_xcalloc(n + 1, sizeof(*s->idx));
	s->syncs = dl_xcalloc(n + 1, sizeof(*s->syncs));
	s->pos = dl_xcalloc(n + 1, sizeof(*s->pos));
	for (size_t i = 0; i < n; i++) {
		uint16_t k;

		if (v[i].sync) {
			s->syncs[s->nsync++] = (uint32_t)s->n;
			continue;
		}
		k = kind_of(s, &v[i]);
		s->q[s->n] = k;
		s->idx[s->n] = i;
		if (k < SL_MAX_SIGS) {
			if (!s->sigs[k].count)
				s->sigs[k].first = s->n;
			s->sigs[k].count++;
			s->sigs[k].last = s->n;
		}
		s->n++;
	}
	/* Steady: seen in the window's first third and its last; set-up and tear-down calls are not. */
	for (size_t k = 0; k < s->nsig; k++) {
		struct sig *g = &s->sigs[k];

		g->steady = g->count >= 3 && g->first * 3 < s->n && g->last * 3 >= 2 * s->n;
		s->nsteady += g->steady;
		g->at = at;
		at += g->count;
		g->count = 0;
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->q[i] < SL_MAX_SIGS) {
			struct sig *g = &s->sigs[s->q[i]];

			s->pos[g->at + g->count++] = (uint32_t)i;
		}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The most common value of v[0..n) (sorted in place), the smallest on a tie. */
static uint32_t mode_u32(uint32_t *v, size_t n)
{
	uint32_t best = 0;
	size_t run = 0, best_run = 0;

	qsort(v, n, sizeof(*v), cmp_u32);
	for (size_t i = 0; i < n; i++) {
		run = i && v[i] == v[i - 1] ? run + 1 : 1;
		if (run > best_run) {
			best_run = run;
			best = v[i];
		}
	}
	return best;
}

/* Periods proposed by the steady kinds: the usual distance from an occurrence to the m-th next. */
static size_t candidates(const struct seq *s, uint32_t *out)
{
	size_t n = 0, u = 0;
	uint32_t *gaps = dl_xcalloc(s->n + 1, sizeof(*gaps));

	for (size_t k = 0; k < s->nsig; k++) {
		const struct sig *g = &s->sigs[k];

		for (size_t m = 1; g->steady && m <= SL_MAX_STRIDE && m < g->count; m++) {
			const uint32_t *p = s->pos + g->at;
			uint32_t gap;

			for (size_t j = 0; j + m < g->count; j++)
				gaps[j] = p[j + m] - p[j];
			gap = mode_u32(gaps, g->count - m);
			/* Three periods at least: two pairs of neighbours to compare. */
			if (gap && (size_t)gap * 3 <= s->n)
				out[n++] = gap;
		}
	}
	free(gaps);
	qsort(out, n, sizeof(*out), cmp_u32);
	for (size_t i = 0; i < n; i++)
		if (!u || out[i] != out[u - 1])
			out[u++] = out[i];
	return u < SL_MAX_CANDIDATES ? u : SL_MAX_CANDIDATES;
}

static double score(const struct seq *s, size_t period)
{
	double sum = 0;
	size_t kinds = 0;

	for (size_t k = 0; k < s->nsig; k++) {
		const struct sig *g = &s->sigs[k];
		size_t hits = 0, seen = 0;

		if (!g->steady)
			continue;
		for (size_t j = 0; j < g->count && s->pos[g->at + j] + period < s->n; j++) {
			seen++;
			hits += s->q[s->pos[g->at + j] + period] == k;
		}
		if (seen) {
			sum += (double)hits / (double)seen;
			kinds++;
		}
	}
	return kinds ? sum / (double)kinds : 0;
}

/*
 * Where periods start: right after a sync, at the phase most syncs fall at
 * (the loop's own end of an iteration; an extra call earlier shifts the
 * phase of those before it), else at the first steady call.
 */
static size_t first_steady(const struct seq *s)
{
	size_t start = 0;

	while (start < s->n && !(s->q[start] < SL_MAX_SIGS && s->sigs[s->q[start]].steady))
		start++;
	return start;
}

static size_t first_start(const struct seq *s, size_t period)
{
	size_t start = first_steady(s);

	if (s->nsync) {
		uint32_t *ph = dl_xcalloc(s->nsync, sizeof(*ph));
		uint32_t phase;

		for (size_t i = 0; i < s->nsync; i++)
			ph[i] = (uint32_t)(s->syncs[i] % period);
		phase = mode_u32(ph, s->nsync);
		free(ph);
		/* Three periods after it at least; else (one sync, at the end) its phase from the start. */
		for (size_t i = 0; i < s->nsync; i++)
			if (s->syncs[i] >= start && s->syncs[i] % period == phase && s->syncs[i] + 3 * period <= s->n)
				return s->syncs[i];
		return start + (phase + period - start % period) % period;
	}
	return start;
}

/* The first call of the period at r0 whose kind is steady and comes once a period; n when none. */
static size_t marker_at(const struct seq *s, size_t r0, size_t period)
{
	size_t cnt[SL_MAX_SIGS + 1] = { 0 }, kinds = 0;

	for (size_t i = r0; i < r0 + period; i++)
		if (!cnt[s->q[i]]++ && s->q[i] < SL_MAX_SIGS && s->sigs[s->q[i]].steady)
			kinds++;
	/* One kind repeated has no boundary to find: any cut in the run is as good as another. */
	if (kinds < 2)
		return s->n;
	for (size_t i = r0; i < r0 + period; i++)
		if (cnt[s->q[i]] == 1 && s->q[i] < SL_MAX_SIGS && s->sigs[s->q[i]].steady)
			return i;
	return s->n;
}

/*
 * Periods counted from the first steady call: two neighbours are equal when
 * the calls repeat with the period across both, whatever the phase, so an
 * extra call anywhere counts against the repeat share.
 */
static void describe(const struct seq *s, size_t r0, size_t period, struct dl_sl_period *out)
{
	size_t k = (s->n - r0) / period;
	uint8_t *synced = dl_xcalloc(k + 1, 1);

	out->periods = (uint32_t)k;
	for (size_t i = 1; i < k; i++)
		out->repeating += !memcmp(s->q + r0 + (i - 1) * period, s->q + r0 + i * period,
					  period * sizeof(*s->q));
	/* A sync belongs to the period of the call before it. */
	for (size_t i = 0; i < s->nsync; i++) {
		size_t at = s->syncs[i];

		if (at > r0 && (at - 1 - r0) / period < k && !synced[(at - 1 - r0) / period]++)
			out->synced++;
	}
	free(synced);
}

void dl_steplearn(const struct dl_sl_call *v, size_t n, struct dl_sl_period *out)
{
	struct seq *s = dl_xcalloc(1, sizeof(*s));
	uint32_t *cand;
	size_t nc;

	memset(out, 0, sizeof(*out));
	build(s, v, n);
	cand = dl_xcalloc(s->nsig * SL_MAX_STRIDE + 1, sizeof(*cand));
	nc = s->nsteady >= 2 ? candidates(s, cand) : 0;
	for (size_t i = 0; i < nc && !out->found; i++) {
		double sc = score(s, cand[i]);
		size_t r0, m;

		if (sc < SL_MIN_SCORE)
			continue;
		r0 = first_start(s, cand[i]);
		if (r0 + 3 * (size_t)cand[i] > s->n)
			continue;
		m = marker_at(s, r0, cand[i]);
		if (m == s->n)
			continue;
		out->found = true;
		out->calls = cand[i];
		out->score = sc;
		out->marker = s->idx[m];
		describe(s, first_steady(s), cand[i], out);
	}
	free(cand);
	free(s->q);
	free(s->idx);
	free(s->syncs);
	free(s->pos);
	free(s);
}
