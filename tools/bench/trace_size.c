// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Trace writer benchmark (not a test): a synthetic training job's record
 * stream — per 10 ms step a main thread with kernel launches, copies, a sync
 * and scheduler intervals, and data-loader workers reading from disk — fed to
 * the summary and the trace sink, written to a file for each format. Prints
 * bytes per record, bytes per trace event and events per second.
 *   tools/bench/trace_size.sh [STEPS] [WORKERS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "records/cuda_api.h"
#include "records/stream.h"
#include "analysis/summary.h"
#include "output/timeline.h"

#define MAX_BATCH 512
#define STEP_NS 10000000ull
#define PID 1000

union rec {
	struct dl_hdr h;
	struct dl_cuda_ev cuda;
	struct dl_bio_ev bio;
	struct dl_sched_ev sched;
	struct dl_procinfo_ev info;
};

static union rec batch[MAX_BATCH];
static uint64_t batch_end[MAX_BATCH];
static int nbatch;
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return n ? rng % n : 0;
}

static union rec *add(enum dl_kind kind, size_t size, uint64_t ts, uint64_t dur, uint32_t pid, uint32_t tid)
{
	union rec *r = &batch[nbatch];

	memset(r, 0, sizeof(*r));
	r->h = (struct dl_hdr){ .size = (uint16_t)size, .kind = (uint16_t)kind, .ts = ts, .tgid = pid, .tid = tid };
	batch_end[nbatch++] = ts + dur;
	return r;
}

static void cuda(enum dl_api_id api, uint64_t ts, uint64_t dur, uint64_t bytes, enum dl_dir dir)
{
	union rec *r = add(DL_EV_CUDA, sizeof(struct dl_cuda_ev), ts, dur, PID, PID);

	r->cuda.api = api;
	r->cuda.dur_ns = dur;
	r->cuda.ret = 0;
	if (api == DL_API_LAUNCH_KERNEL) {
		r->cuda.arg[0] = 0x401000 + 0x100 * rnd(8);
		r->cuda.arg[1] = 256 | (1ull << 32);
		r->cuda.arg[2] = 1;
		r->cuda.arg[3] = 128 | (1ull << 32);
		r->cuda.arg[4] = 1;
	} else {
		r->cuda.arg[0] = 0x7f0000000000;
		r->cuda.arg[1] = 0x7e0000000000;
		r->cuda.arg[2] = bytes;
		r->cuda.arg[3] = dir;
	}
}

static void sched(uint32_t pid, uint32_t tid, uint64_t ts, uint64_t dur, uint32_t state)
{
	union rec *r = add(DL_EV_SCHED, sizeof(struct dl_sched_ev), ts, dur, pid, tid);

	r->sched.dur_ns = dur;
	r->sched.state = state;
}

/* One step's records, main thread and workers. */
static void make_step(uint64_t s, int workers)
{
	uint64_t t = s;

	nbatch = 0;
	sched(PID, PID, s, 600000, DL_ST_RUNNING);
	cuda(DL_API_MEMCPY, s + 100000, 300000, 8 << 20, DL_DIR_H2D);
	for (int k = 0; k < 20; k++) {
		t = s + 600000 + (uint64_t)k * 150000;
		cuda(DL_API_LAUNCH_KERNEL, t, 5000 + rnd(3000), 0, 0);
	}
	sched(PID, PID, s + 600000, 3000000, DL_ST_RUNNING);
	sched(PID, PID, s + 3600000, 50000 + rnd(50000), DL_ST_RUNQ);
	cuda(DL_API_DEVICE_SYNC, s + 3700000, 5000000, 0, 0);
	sched(PID, PID, s + 3700000, 5000000, DL_ST_SLEEP);
	cuda(DL_API_MEMCPY, s + 8800000, 20000, 4, DL_DIR_D2H);
	sched(PID, PID, s + 8700000, STEP_NS - 8700000, DL_ST_RUNNING);
	for (int w = 0; w < workers; w++) {
		uint32_t pid = PID + 1 + (uint32_t)w;
		uint64_t at = s;

		for (int k = 0; k < 4; k++) {
			union rec *r;
			uint64_t d = 200000 + rnd(300000);

			sched(pid, pid, at, 100000, DL_ST_RUNNING);
			r = add(DL_EV_BIO, sizeof(struct dl_bio_ev), at + 100000, d, pid, pid);
			r->bio.dur_ns = d;
			r->bio.bytes = 128 << 10;
			r->bio.sector = rnd(1u << 30);
			r->bio.dev = 8 << 20;
			sched(pid, pid, at + 100000, d, DL_ST_DISK);
			at += 100000 + d;
		}
		sched(pid, pid, at, s + STEP_NS - at, DL_ST_SLEEP);
	}
}

/* The collector delivers records as they complete: sort the step's batch by end time. */
static void sort_batch(int *order)
{
	for (int i = 0; i < nbatch; i++) {
		int j = i;

		order[i] = i;
		while (j > 0 && batch_end[order[j - 1]] > batch_end[order[j]]) {
			int x = order[j];

			order[j] = order[j - 1];
			order[j - 1] = x;
			j--;
		}
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void feed_info(struct dl_stream *stream, uint32_t pid, const char *comm)
{
	struct dl_procinfo_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_PROCINFO, .ts = 1, .tgid = pid, .tid = pid };
	snprintf(e.comm, sizeof(e.comm), "%s", comm);
	dl_stream_emit(stream, &e, sizeof(e));
}

/* Returns seconds spent; fills stats when writing a trace. */
static double run(const char *path, int fmt, int steps, int workers, struct dl_timeline_stats *st, uint64_t *records)
{
	struct dl_summary sum;
	struct dl_stream stream = { 0 };
	struct dl_timeline *t = NULL;
	int order[MAX_BATCH], err = 0;
	double t0;

	dl_summary_init(&sum);
	if (path) {
		t = dl_timeline_open(path, (enum dl_timeline_format)fmt, &err);
		if (!t) {
			fprintf(stderr, "cannot open %s\n", path);
			exit(1);
		}
	}
	dl_stream_add(&stream, dl_summary_sink, &sum);
	if (t)
		dl_stream_add(&stream, dl_timeline_sink, t);
	rng = 88172645463325252ull;
	*records = 0;
	t0 = now_s();
	feed_info(&stream, PID, "train");
	for (int w = 0; w < workers; w++)
		feed_info(&stream, PID + 1 + (uint32_t)w, "loader");
	for (int i = 0; i < steps; i++) {
		make_step(1000000000ull + (uint64_t)i * STEP_NS, workers);
		sort_batch(order);
		for (int k = 0; k < nbatch; k++) {
			union rec *r = &batch[order[k]];

			dl_stream_emit(&stream, r, r->h.size);
		}
		*records += (uint64_t)nbatch;
		if (t) {
			struct dl_step s = { .index = (uint32_t)i, .pid = PID, .tid = PID,
					     .start_ns = 1000000000ull + (uint64_t)i * STEP_NS, .dur_ns = STEP_NS,
					     .verdict = DL_V_GPU, .share = 0.5 };

			s.cat_ns[DL_CAT_GPU_WAIT] = 5000000;
			s.cat_ns[DL_CAT_CPU] = STEP_NS - 5000000;
			dl_timeline_step(t, &s);
		}
	}
	if (t && dl_timeline_close(t, st)) {
		fprintf(stderr, "writing %s failed\n", path);
		exit(1);
	}
	t0 = now_s() - t0;
	dl_stream_free(&stream);
	dl_summary_free(&sum);
	return t0;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 20000, workers = argc > 2 ? atoi(argv[2]) : 4;
	const char *dir = argc > 3 ? argv[3] : "/tmp";
	static const char *const names[] = { "pftrace", "json" };
	struct dl_timeline_stats st;
	uint64_t records;
	double base = run(NULL, 0, steps, workers, &st, &records);

	printf("%d steps, %d workers: %llu records (summary alone %.3f s)\n", steps, workers,
	       (unsigned long long)records, base);
	for (int fmt = 0; fmt < 2; fmt++) {
		char path[512];
		double s;

		snprintf(path, sizeof(path), "%s/dlbpf-bench.%s", dir, names[fmt]);
		s = run(path, fmt, steps, workers, &st, &records) - base;
		printf("%-8s %10llu bytes  %6.1f B/record  %5.1f B/event  %llu events (%llu late)  "
		       "%.2f M events/s  %.2f M records/s\n",
		       names[fmt], (unsigned long long)st.bytes, (double)st.bytes / (double)records,
		       (double)st.bytes / (double)st.events, (unsigned long long)st.events, (unsigned long long)st.late,
		       (double)st.events / s / 1e6, (double)records / s / 1e6);
		remove(path);
	}
	return 0;
}
