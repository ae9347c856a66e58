// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Writes the fuzzers' starting inputs: small recordings of a made-up training
 * job (for fuzz_replay) and the same records back to back without the file
 * header (for fuzz_decode). Built from the ABI's own structs, so the seeds
 * follow events.h as it changes. Each recording is written in both encodings
 * (NAME-compact.dlbpf too), so fuzz_replay starts inside the compact decoder
 * as well. Usage: seedgen DIR (writes NAME.dlbpf files in DIR/replay, NAME.bin
 * files in DIR/decode).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "records/cuda_api.h"
#include "records/record.h"
#include "records/stream.h"

#define PID 100
#define LOADER 101
#define WORKER 200
#define KERNEL_FN 0x401000ull
#define DEV_BUF 0x7f0000000000ull
#define PINNED 0x10000000ull
#define PAGEABLE 0x20000000ull
#define MS 1000000ull

struct raw {
	FILE *f;
	bool skip;                   /* the record the sinks get is not the one read (launch()) */
};

static int raw_sink(void *ctx, const struct dl_rec *r)
{
	struct raw *w = ctx;

	if (!w->f || w->skip)
		return 0;
	return fwrite(r->h, r->h->size, 1, w->f) == 1 ? 0 : -EIO;
}

struct seed {
	bool submits;                /* block bytes come as submissions (the live side's choice) */
	struct dl_stream s;
	struct dl_recorder rec;
	struct raw raw;
};

/* The records' raw bytes go to DIR/decode once, with the verbatim recording. */
static void seed_open(struct seed *sd, const char *dir, const char *name, enum dl_rec_encoding enc)
{
	char path[4096];

	memset(sd, 0, sizeof(*sd));
	snprintf(path, sizeof(path), "%s/replay/%s%s.dlbpf", dir, name, enc == DL_REC_COMPACT ? "-compact" : "");
	if (dl_recorder_open(&sd->rec, path, enc))
		exit(1);
	dl_stream_add(&sd->s, dl_recorder_sink, &sd->rec);
	dl_stream_add(&sd->s, raw_sink, &sd->raw);
	if (enc == DL_REC_COMPACT)
		return;
	snprintf(path, sizeof(path), "%s/decode/%s.bin", dir, name);
	sd->raw.f = fopen(path, "wb");
	if (!sd->raw.f) {
		perror(path);
		exit(1);
	}
}

static void seed_close(struct seed *sd)
{
	if (dl_recorder_close(&sd->rec) || (sd->raw.f && fclose(sd->raw.f)) || sd->s.err || sd->s.malformed) {
		fprintf(stderr, "seedgen: writing a seed failed\n");
		exit(1);
	}
	dl_stream_free(&sd->s);
}

static void hdr(struct dl_hdr *h, size_t size, enum dl_kind kind, uint64_t ts, uint32_t pid, uint32_t tid)
{
	h->size = (uint16_t)size;
	h->kind = (uint16_t)kind;
	h->ts = ts;
	h->tgid = pid;
	h->tid = tid;
}

static void cuda(struct seed *sd, enum dl_api_id api, uint64_t ts, uint64_t dur, uint32_t tid, const uint64_t args[8],
		 uint64_t out)
{
	struct dl_cuda_ev e;
	const struct dl_api *a = dl_api_by_id(api);

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_CUDA, ts, PID, tid);
	e.api = (uint16_t)api;
	e.dur_ns = dur;
	if (a && dl_api_entry_only(a)) {
		e.flags = DL_CUDA_ENTRY_ONLY;
		e.dur_ns = 0;
	}
	if (a && a->driver) {
		e.depth = 1;
		e.flags |= DL_CUDA_IN_RUNTIME;
	}
	if (args)
		memcpy(e.arg, args, sizeof(e.arg));
	e.out = out;
	dl_stream_emit(&sd->s, &e, sizeof(e));
}

/*
 * A launch as the probe writes one that fits a cache line (DL_EV_LAUNCH): the
 * stream hands sinks, and so the recordings, the dl_cuda_ev it stands for;
 * the raw seed gets the launch record itself, as the ring buffer would.
 */
static void launch(struct seed *sd, enum dl_api_id api, uint64_t ts, uint32_t tid, uint32_t gx, uint16_t bx,
		   uint16_t shmem, uint64_t stream, uint32_t depth)
{
	struct dl_launch_ev e;

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_LAUNCH, ts, PID, tid);
	e.func = KERNEL_FN;
	e.stream = stream;
	e.site = KERNEL_FN + 0x40;
	e.grid_x = gx;
	e.grid_y = 2;
	e.grid_z = 1;
	e.api = (uint16_t)api;
	e.shmem = shmem;
	e.block_depth = bx | 2u << DL_LAUNCH_BX_BITS | 1u << (DL_LAUNCH_BX_BITS + DL_LAUNCH_BY_BITS) |
			depth << (DL_LAUNCH_BX_BITS + DL_LAUNCH_BY_BITS + DL_LAUNCH_BZ_BITS);
	sd->raw.skip = true;
	dl_stream_emit(&sd->s, &e, sizeof(e));
	sd->raw.skip = false;
	if (sd->raw.f && fwrite(&e, sizeof(e), 1, sd->raw.f) != 1)
		sd->s.err = -EIO;
}

/* A returning call as the probe writes one that fits (DL_EV_CALL_SHORT): nargs arguments of args. */
static void cuda_short(struct seed *sd, enum dl_api_id api, uint64_t ts, uint64_t dur, uint32_t tid,
		       const uint64_t args[8], unsigned nargs, int32_t ret)
{
	union {
		struct dl_call_short_ev e;
		unsigned char b[sizeof(struct dl_call_short_ev) + DL_CALL_SHORT_ARGS_MAX * sizeof(uint64_t)];
	} u;

	memset(&u, 0, sizeof(u));
	hdr(&u.e.h, sizeof(u.e) + nargs * sizeof(uint64_t), DL_EV_CALL_SHORT, ts, PID, tid);
	u.e.dur_ns = dur;
	u.e.site = KERNEL_FN + 0x80;
	u.e.ret = ret;
	u.e.api = (uint16_t)api;
	u.e.depth = (uint8_t)(api % 3);
	if (args)
		memcpy(u.e.arg, args, nargs * sizeof(uint64_t));
	sd->raw.skip = true;
	dl_stream_emit(&sd->s, &u, u.e.h.size);
	sd->raw.skip = false;
	if (sd->raw.f && fwrite(&u, u.e.h.size, 1, sd->raw.f) != 1)
		sd->s.err = -EIO;
}

static void sched(struct seed *sd, uint32_t pid, uint32_t tid, uint64_t ts, uint64_t dur, uint32_t state, uint32_t next)
{
	struct dl_sched_ev e;

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_SCHED, ts, pid, tid);
	e.dur_ns = dur;
	e.state = state;
	e.next_state = next;
	e.waker_tid = state == DL_ST_SLEEP ? LOADER : 0;
	dl_stream_emit(&sd->s, &e, sizeof(e));
}

static void bio(struct seed *sd, uint32_t pid, uint32_t tid, uint64_t ts, uint64_t dur, uint32_t bytes, uint32_t flags)
{
	struct dl_bio_ev e;

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_BIO, ts, pid, tid);
	e.dur_ns = dur;
	e.sector = ts / 512;
	e.bytes = bytes;
	e.dev = 8u << 20 | 16;
	e.flags = flags;
	dl_stream_emit(&sd->s, &e, sizeof(e));
}

static void bio_submit(struct seed *sd, uint32_t pid, uint32_t tid, uint64_t ts, uint32_t bytes, uint32_t flags)
{
	struct dl_bio_submit_ev e;

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_BIO_SUBMIT, ts, pid, tid);
	e.sector = ts / 512;
	e.bytes = bytes;
	e.dev = 8u << 20 | 16;
	e.flags = flags;
	dl_stream_emit(&sd->s, &e, sizeof(e));
}

static void proc(struct seed *sd, enum dl_proc_what what, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t ppid,
		 const char *comm)
{
	struct dl_proc_ev e;

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_PROC, ts, pid, tid);
	e.what = what;
	e.ppid = ppid;
	e.group_dead = what == DL_PROC_EXIT;
	snprintf(e.comm, sizeof(e.comm), "%s", comm);
	dl_stream_emit(&sd->s, &e, sizeof(e));
}

static void mark(struct seed *sd, uint64_t ts)
{
	struct dl_mark_ev e;

	memset(&e, 0, sizeof(e));
	hdr(&e.h, sizeof(e), DL_EV_MARK, ts, PID, PID);
	dl_stream_emit(&sd->s, &e, sizeof(e));
}

static void preamble(struct seed *sd)
{
	uint64_t a[8] = { 0 };

	dl_emit_trace_start_flags(&sd->s, 1 * MS, 16000, sd->submits ? DL_TRACE_BIO_SUBMITS : 0);
	dl_emit_procinfo_threads(&sd->s, 1 * MS, PID, 1, "python3", 7, 2);
	/* Where it runs: the JSON, the report and the metrics read it (capture/cgroup.h). */
	dl_emit_cgroup(&sd->s, 1 * MS, PID, &(struct dl_container){
		.runtime = "containerd", .id = "4f0d1c2b3a4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8",
		.pod_uid = "3c9a5d6e-1b2f-4c3d-9e8f-0a1b2c3d4e5f", .slurm_job = "4242" });
	dl_emit_lib(&sd->s, 1 * MS, PID, "/usr/local/cuda/lib64/libcudart.so.13", 40, 0);
	dl_emit_sym(&sd->s, 1 * MS, PID, KERNEL_FN, "_Z10sgemm_nn_kPfS_S_i");
	a[1] = 4u << 20;
	cuda(sd, DL_API_MALLOC, 2 * MS, 50000, PID, a, DEV_BUF);
	a[0] = PINNED;
	cuda(sd, DL_API_HOST_REGISTER, 3 * MS, 40000, PID, a, 0);
}

/*
 * One training step of the main thread: wait for a batch the loader reads from
 * disk, copy it to the device, launch kernels, synchronize.
 */
static void step(struct seed *sd, uint64_t t0, int i, int marks)
{
	uint64_t a[8] = { 0 };

	if (marks)
		mark(sd, t0);
	if (sd->submits)
		bio_submit(sd, PID, LOADER, t0, 1u << 19, i % 4 == 3 ? DL_BIO_MERGED : 0);
	bio(sd, PID, LOADER, t0, 2 * MS, 1u << 19, i % 3 == 2 ? DL_BIO_PARTIAL : 0);
	sched(sd, PID, LOADER, t0, 2 * MS, DL_ST_DISK, DL_ST_RUNNING);
	sched(sd, PID, PID, t0, 3 * MS, DL_ST_SLEEP, DL_ST_RUNNING);
	a[0] = DEV_BUF;
	a[1] = i % 2 ? PAGEABLE : PINNED;
	a[2] = 1u << 20;
	a[3] = DL_DIR_H2D;
	cuda(sd, DL_API_MEMCPY_ASYNC, t0 + 3 * MS, 100000, PID, a, 0);
	memset(a, 0, sizeof(a));
	a[0] = KERNEL_FN;
	a[1] = 64ull | 1ull << 32;
	a[2] = 1;
	a[3] = 256ull | 1ull << 32;
	a[4] = 1;
	cuda(sd, DL_API_LAUNCH_KERNEL, t0 + 4 * MS, 0, PID, a, 0);
	for (int k = 1; k < 3; k++)
		launch(sd, DL_API_LAUNCH_KERNEL, t0 + 4 * MS + k * 10000ull, PID, 64, 256, k == 2 ? 4096 : 0, 0, 0);
	cuda_short(sd, DL_API_STREAM_SYNC, t0 + 4 * MS + 40000, 5 * MS, PID, NULL, 2, 0);
	sched(sd, PID, PID, t0 + 3 * MS, 2 * MS, DL_ST_RUNNING, DL_ST_RUNQ);
	sched(sd, PID, PID, t0 + 5 * MS, 100000, DL_ST_RUNQ, DL_ST_RUNNING);
}

static void trace_end(struct seed *sd, uint64_t ts)
{
	uint64_t drops[DL_DROP_MAX] = { 0 };

	if (sd->submits) {
		dl_emit_bio_unseen(&sd->s, ts, PID, LOADER, 4096, 1u << 16, 8u << 20 | 16, 0);
		dl_emit_prog(&sd->s, ts, "on_sched_switch", 3);
		dl_emit_trace_end_misses(&sd->s, ts, drops, 3);
		return;
	}
	dl_emit_trace_end(&sd->s, ts, drops);
}

static void seed_steps(const char *dir, const char *name, int marks, bool submits, enum dl_rec_encoding enc)
{
	struct seed sd;
	uint64_t t = 10 * MS;

	seed_open(&sd, dir, name, enc);
	sd.submits = submits;
	preamble(&sd);
	for (int i = 0; i < 8; i++, t += 10 * MS)
		step(&sd, t, i, marks);
	trace_end(&sd, t);
	seed_close(&sd);
}

/* Every API once, with arguments shaped as its layout says, then every kind, a newer kind and a newer API. */
static void seed_kinds(const char *dir, enum dl_rec_encoding enc)
{
	struct seed sd;
	uint64_t t = 10 * MS, a[8];
	union {
		struct dl_hdr h;
		unsigned char b[64];
	} future;

	seed_open(&sd, dir, "kinds", enc);
	preamble(&sd);
	for (unsigned id = 1; id < DL_API_COUNT; id++, t += MS) {
		for (int k = 0; k < 8; k++)
			a[k] = k == 0 ? DEV_BUF : 16ull << k;
		cuda(&sd, (enum dl_api_id)id, t, 20000, PID, a, PINNED);
	}
	cuda(&sd, (enum dl_api_id)DL_API_COUNT, t, 1000, PID, NULL, 0);
	/* Short calls: of each API that has them, with the arguments the probe keeps, and of a newer API. */
	for (unsigned id = 1; id <= DL_API_COUNT; id++, t += MS) {
		const struct dl_api *api = dl_api_by_id(id);
		unsigned n = api ? dl_api_reg_args(api) : 2;

		for (int k = 0; k < 8; k++)
			a[k] = k == 0 ? DEV_BUF : 16ull << k;
		if (n <= 5)
			cuda_short(&sd, (enum dl_api_id)id, t, 20000, PID, a, n <= 2 ? 2 : 5, id % 2 ? -1 : 0);
	}
	/* Launch records: of each API of the launch layout, and of an API newer than this build. */
	for (unsigned id = 1; id <= DL_API_COUNT; id++, t += MS) {
		const struct dl_api *api = dl_api_by_id(id);

		if (!api || api->layout == DL_L_LAUNCH)
			launch(&sd, (enum dl_api_id)id, t, PID, 1u << 31, 1024, 0xffff, 0x5000 + id, id % 8);
	}
	proc(&sd, DL_PROC_FORK, t, WORKER, WORKER, PID, "python3");
	proc(&sd, DL_PROC_EXEC, t + 1, WORKER, WORKER, PID, "pt_data_worker");
	proc(&sd, DL_PROC_THREAD, t + 2, PID, LOADER, PID, "pin_memory");
	bio(&sd, WORKER, WORKER, t, MS, 4096, DL_BIO_ASYNC | DL_BIO_WRITE | DL_BIO_ERROR);
	sched(&sd, WORKER, WORKER, t, MS, DL_ST_RUNQ, DL_ST_RUNNING);
	mark(&sd, t + MS);
	bio_submit(&sd, WORKER, WORKER, t, 4096, DL_BIO_WRITE | DL_BIO_META);
	proc(&sd, DL_PROC_EXIT, t + 2 * MS, WORKER, WORKER, PID, "pt_data_worker");
	memset(&future, 0, sizeof(future));
	hdr(&future.h, sizeof(future), (enum dl_kind)(DL_EV_KIND_MAX + 3), t + 3 * MS, PID, PID);
	dl_stream_emit(&sd.s, &future, sizeof(future));
	trace_end(&sd, t + 4 * MS);
	seed_close(&sd);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seedgen DIR (DIR/replay and DIR/decode must exist)\n");
		return 2;
	}
	for (int enc = 0; enc < DL_REC_ENCODING_MAX; enc++) {
		seed_steps(argv[1], "steps", 0, false, (enum dl_rec_encoding)enc);
		seed_steps(argv[1], "marks", 1, false, (enum dl_rec_encoding)enc);
		seed_steps(argv[1], "submits", 0, true, (enum dl_rec_encoding)enc);
		seed_kinds(argv[1], (enum dl_rec_encoding)enc);
	}
	return 0;
}
