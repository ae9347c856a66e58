// SPDX-License-Identifier: MIT
/*
 * train_truth.c — the workload's own account of where step time went: one
 * JSON line per step and a summary line (--truth FILE), which the tests judge
 * dlbpf's breakdown against, and the one-line summary on stderr.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>

#include "train.h"

const char *const phase_names[NPH] = { "input_wait", "host_cpu", "h2d", "launch", "gpu_wait", "other" };

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int totals_init(struct run_totals *t, int steps)
{
	memset(t, 0, sizeof(*t));
	t->step_ns = calloc((size_t)steps, sizeof(*t->step_ns));
	return t->step_ns ? 0 : -1;
}

void totals_add(struct run_totals *t, const struct step_record *r)
{
	uint64_t dur = r->end_ns - r->start_ns;

	for (int i = 0; i < NPH; i++)
		t->ph[i] += r->ph[i];
	t->runq += r->runq_ns;
	t->oncpu += r->oncpu_ns;
	t->step += dur;
	t->step_ns[t->done++] = dur;
}

void totals_free(struct run_totals *t)
{
	free(t->step_ns);
	t->step_ns = NULL;
}

/* Shares are of the summed step time; sorts t->step_ns for the median. */
void summarize(struct run_totals *t, struct run_summary *s)
{
	double best = 0;

	qsort(t->step_ns, (size_t)t->done, sizeof(*t->step_ns), cmp_u64);
	s->steps = t->done;
	s->median_ns = t->done ? t->step_ns[t->done / 2] : 0;
	s->runq_share = t->step ? (double)t->runq / (double)t->step : 0;
	s->oncpu_share = t->step ? (double)t->oncpu / (double)t->step : 0;
	s->dominant = "none";
	for (int i = 0; i < NPH; i++) {
		s->share[i] = t->step ? (double)t->ph[i] / (double)t->step : 0;
		if (s->share[i] > best) {
			best = s->share[i];
			s->dominant = phase_names[i];
		}
	}
	/* runq is no phase of the loop: contention shows as time spent runnable */
	s->expect_share = -1;
	if (O.expect) {
		if (!strcmp(O.expect, "runq"))
			s->expect_share = s->runq_share;
		for (int i = 0; i < NPH; i++)
			if (!strcmp(O.expect, phase_names[i]))
				s->expect_share = s->share[i];
	}
}

/* The dataset's absolute path, as a tracer resolves it (JSON: the tests' paths need no escaping). */
static const char *data_path(void)
{
	static char abs[PATH_MAX];

	if (!abs[0] && !realpath(O.data, abs))
		snprintf(abs, sizeof(abs), "%s", O.data);
	return abs;
}

void truth_write_step(FILE *f, const struct step_record *r)
{
	fprintf(f, "{\"step\":%d,\"start_ns\":%llu,\"end_ns\":%llu,\"h2d_start_ns\":%llu,\"begin_ns\":%llu,"
		"\"loss_copy_ns\":%llu,\"sync_ns\":%llu,\"phases_ns\":{",
		r->step, (unsigned long long)r->start_ns, (unsigned long long)r->end_ns,
		(unsigned long long)r->h2d_start_ns, (unsigned long long)r->begin_ns, (unsigned long long)r->loss_copy_ns,
		(unsigned long long)r->sync_ns);
	for (int i = 0; i < NPH; i++)
		fprintf(f, "%s\"%s\":%llu", i ? "," : "", phase_names[i], (unsigned long long)r->ph[i]);
	fprintf(f,
		"},\"io_read_bytes\":%llu,\"h2d_bytes\":%zu,\"h2d_copies\":%d,\"kernels\":%d,"
		"\"worker\":%d,\"worker_cpu_ns\":%llu,\"worker_read_ns\":%llu,"
		"\"producer\":{\"batch\":%llu,\"pid\":%d,\"tid\":%d,\"posted_ns\":%llu,"
		"\"cpu_since_post_ns\":%llu,\"first_post\":%s},"
		"\"sched\":{\"oncpu_ns\":%llu,\"runq_ns\":%llu},\"pin_wait_ns\":%llu,"
		"\"read\":{\"path\":\"%s\",\"offset\":%llu,\"bytes\":%llu},"
		"\"fetch\":{\"tid\":%d,\"posted_ns\":%llu,\"decode_wait_ns\":%llu}}\n",
		(unsigned long long)r->hdr.io_bytes, r->h2d_bytes,
		(int)((r->h2d_bytes + r->h2d_chunk - 1) / r->h2d_chunk), kernels_of_step(r->step), r->hdr.worker,
		(unsigned long long)r->hdr.worker_cpu_ns, (unsigned long long)r->hdr.read_ns,
		(unsigned long long)r->hdr.batch, r->hdr.worker_pid, r->hdr.worker_tid,
		(unsigned long long)r->hdr.posted_ns, (unsigned long long)r->hdr.cpu_since_post_ns,
		r->hdr.first_post ? "true" : "false", (unsigned long long)r->oncpu_ns, (unsigned long long)r->runq_ns,
		(unsigned long long)r->pin_wait_ns, data_path(), (unsigned long long)r->hdr.read_off,
		(unsigned long long)r->hdr.io_bytes, r->hdr.fetch_tid, (unsigned long long)r->hdr.fetched_ns,
		(unsigned long long)r->hdr.decode_wait_ns);
}

/* simulator: the runtime is the GPU simulator (it has gpusimSetKernelCost). */
void truth_write_summary(FILE *f, const struct run_summary *s, uint64_t duration_ns, int nspinners,
			 int cuda_errors, int simulator)
{
	fprintf(f, "{\"summary\":true,\"steps\":%d,\"median_step_ns\":%llu,\"scenario\":\"%s\","
		"\"duration_ns\":%llu,\"phase_share\":{",
		s->steps, (unsigned long long)s->median_ns, O.scenario, (unsigned long long)duration_ns);
	for (int i = 0; i < NPH; i++)
		fprintf(f, "%s\"%s\":%.4f", i ? "," : "", phase_names[i], s->share[i]);
	fprintf(f, "},\"runq_share\":%.4f,\"oncpu_share\":%.4f,\"dominant\":\"%s\",", s->runq_share,
		s->oncpu_share, s->dominant);
	if (O.expect)
		fprintf(f, "\"expected\":\"%s\",\"expected_share\":%.4f,", O.expect, s->expect_share);
	fprintf(f, "\"sync_every\":%d,\"kernel_cost_ns\":{", O.sync_every);
	for (int k = 0; k < 8; k++)
		fprintf(f, "%s\"%s\":%lld", k ? "," : "", kernel_names[k], kernel_cost_us(k) * 1000ll);
	fprintf(f, "},");
	fprintf(f, "\"peer_copies\":%d,\"simulator_peer_copies\":%lld,\"driver_calls\":{", peer_copies, sim_peer_copies);
	for (int i = 0; O.driver_ctx && i < DRV_NCALLS; i++)
		fprintf(f, "%s\"%s\":%d", i ? "," : "", driver_call_names[i], driver_calls[i]);
	fprintf(f, "},");
	fprintf(f, "\"workers\":%d,\"spinners\":%d,\"pinned\":%s,\"cuda_errors\":%d,\"simulator\":%s,\"pin_tid\":%d}\n",
		O.workers, nspinners, O.pinned ? "true" : "false", cuda_errors, simulator ? "true" : "false", (int)pin_tid);
}

void print_summary(const struct run_summary *s, uint64_t duration_ns, int cuda_errors)
{
	fprintf(stderr, "train: scenario %s: %d steps, median %.2f ms, total %.2f s;", O.scenario, s->steps,
		s->median_ns / 1e6, duration_ns / 1e9);
	for (int i = 0; i < NPH; i++)
		fprintf(stderr, " %s %.0f%%", phase_names[i], 100 * s->share[i]);
	fprintf(stderr, "; runq %.0f%%", 100 * s->runq_share);
	if (cuda_errors)
		fprintf(stderr, "; %d CUDA errors ignored", cuda_errors);
	fprintf(stderr, "\n");
}
