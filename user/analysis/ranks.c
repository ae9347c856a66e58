// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <string.h>
#include "analysis/correlate.h"
#include "analysis/ranks.h"

int64_t dl_rank_offset(const struct dl_rank_clock *base, const struct dl_rank_clock *r)
{
	/* Differences first: each term is small, where the readings themselves near 2^63. */
	int64_t rank_gap = (int64_t)(r->real_ns - r->mono_ns), base_gap = (int64_t)(base->real_ns - base->mono_ns);

	return rank_gap - base_gap;
}

bool dl_rank_clock_valid(const struct dl_rank_clock *c)
{
	return c->mono_ns && c->real_ns;
}

bool dl_rank_spans_meet(uint64_t a_start, uint64_t a_end, uint64_t b_start, uint64_t b_end)
{
	return a_start <= b_end && b_start <= a_end;
}

double dl_rank_compute_per_step(const struct dl_rank_steps *r)
{
	uint64_t wait = r->comm_wait_ns < r->dur_ns ? r->comm_wait_ns : r->dur_ns;

	return r->steps ? (double)(r->dur_ns - wait) / (double)r->steps : 0;
}

double dl_rank_comm_wait_per_step(const struct dl_rank_steps *r)
{
	return r->steps ? (double)r->comm_wait_ns / (double)r->steps : 0;
}

void dl_find_straggler(const struct dl_rank_steps *r, size_t n, struct dl_straggler *out)
{
	size_t with_steps = 0;
	int top = -1;

	*out = (struct dl_straggler){ .rank = -1 };
	for (size_t i = 0; i < n; i++) {
		if (!r[i].steps)
			continue;
		with_steps++;
		if (top < 0 || dl_rank_compute_per_step(&r[i]) > dl_rank_compute_per_step(&r[top]))
			top = (int)i;
	}
	if (with_steps < 2)
		return;
	out->compute_ns = dl_rank_compute_per_step(&r[top]);
	out->others_wait_share = -1;
	bool all_wait = true;

	for (size_t i = 0; i < n; i++) {
		double wait, share;

		if (!r[i].steps || (int)i == top)
			continue;
		if (dl_rank_compute_per_step(&r[i]) > out->others_compute_ns)
			out->others_compute_ns = dl_rank_compute_per_step(&r[i]);
		wait = dl_rank_comm_wait_per_step(&r[i]);
		share = r[i].dur_ns ? (double)r[i].comm_wait_ns / (double)r[i].dur_ns : 0;
		if (out->others_wait_share < 0 || share < out->others_wait_share) {
			out->others_wait_share = share;
			out->others_comm_wait_ns = wait;
		}
		all_wait = all_wait && share >= DL_STRAGGLER_WAIT_SHARE;
	}
	/* Others that compute nothing: any compute is infinitely more, and says nothing. */
	out->ratio = out->others_compute_ns > 0 ? out->compute_ns / out->others_compute_ns : 0;
	if (all_wait && out->ratio >= DL_STRAGGLER_RATIO)
		out->rank = top;
}

bool dl_straggler_finding(const struct dl_straggler *st, size_t nranks, struct dl_finding *f)
{
	memset(f, 0, sizeof(*f));
	if (st->rank < 0)
		return false;
	f->rule = "straggler";
	snprintf(f->message, sizeof(f->message),
		 "rank %d computes %.2f ms per step, %.2fx the most any of the other %zu rank%s computes (%.2f ms), while "
		 "they wait at least %.2f ms per step (%.0f%% of their steps) on collectives: the job runs at rank %d's "
		 "pace. Find what rank %d does more of (its input, a slower GPU or link, other work on its host), or "
		 "give it less work.",
		 st->rank, st->compute_ns / 1e6, st->ratio, nranks - 1, nranks == 2 ? "" : "s",
		 st->others_compute_ns / 1e6, st->others_comm_wait_ns / 1e6, 100 * st->others_wait_share, st->rank,
		 st->rank);
	f->ev[f->nev++] = (struct dl_evidence){ .key = "rank", .value = st->rank };
	f->ev[f->nev++] = (struct dl_evidence){ .key = "ratio", .value = st->ratio };
	f->ev[f->nev++] = (struct dl_evidence){ .key = "compute_ms_per_step", .value = st->compute_ns / 1e6 };
	f->ev[f->nev++] = (struct dl_evidence){ .key = "others_compute_ms_per_step", .value = st->others_compute_ns / 1e6 };
	f->ev[f->nev++] = (struct dl_evidence){ .key = "others_comm_wait_ms_per_step",
						.value = st->others_comm_wait_ns / 1e6 };
	f->ev[f->nev++] = (struct dl_evidence){ .key = "others_comm_wait_share", .value = st->others_wait_share };
	return true;
}

void dl_rank_steps_of(const struct dl_step_stats *st, struct dl_rank_steps *out)
{
	*out = (struct dl_rank_steps){ .steps = st->sum.n, .dur_ns = st->sum.dur_ns,
				       .comm_wait_ns = st->sum.cat_ns[DL_CAT_COMM_WAIT] };
}
