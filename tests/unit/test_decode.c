// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Record decoding and per-process aggregation on synthetic records. */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "records/cuda_api.h"
#include "records/stream.h"
#include "analysis/summary.h"

static struct dl_cuda_ev cuda_ev(enum dl_api_id api, uint64_t ts, uint64_t dur, int64_t ret)
{
	struct dl_cuda_ev e;

	memset(&e, 0, sizeof(e));
	e.h.size = sizeof(e);
	e.h.kind = DL_EV_CUDA;
	e.h.ts = ts;
	e.h.tgid = 100;
	e.h.tid = 101;
	e.api = api;
	e.dur_ns = dur;
	e.ret = ret;
	return e;
}

static void test_launch_decode(void)
{
	struct dl_cuda_ev e = cuda_ev(DL_API_LAUNCH_KERNEL, 1, 0, 0);
	struct dl_call c;

	/* grid {7,8,9}, block {32,4,2}: x and y packed in one register, z in the next. */
	e.arg[0] = 0x401000;
	e.arg[1] = 7ull | (8ull << 32);
	e.arg[2] = 9 | (0xdeadull << 32); /* upper half of the z register is garbage */
	e.arg[3] = 32ull | (4ull << 32);
	e.arg[4] = 2;
	e.arg[5] = 0x1234;
	e.arg[6] = 1024;
	e.arg[7] = 0xabc;
	e.flags = DL_CUDA_ENTRY_ONLY;
	CHECK(dl_call_decode(&e, &c) == 0, "decode failed");
	CHECK_EQ_U64(c.func, 0x401000);
	CHECK(c.grid[0] == 7 && c.grid[1] == 8 && c.grid[2] == 9, "grid %u,%u,%u", c.grid[0], c.grid[1], c.grid[2]);
	CHECK(c.block[0] == 32 && c.block[1] == 4 && c.block[2] == 2, "block %u,%u,%u", c.block[0], c.block[1],
	      c.block[2]);
	CHECK_EQ_U64(c.shmem, 1024);
	CHECK_EQ_U64(c.stream, 0xabc);
	CHECK(c.entry_only, "entry-only flag lost");
}

static void test_copy_decode(void)
{
	struct dl_cuda_ev e = cuda_ev(DL_API_MEMCPY2D_ASYNC, 1, 50, 0);
	struct dl_call c;

	e.arg[0] = 0x7000; /* dst */
	e.arg[1] = 512;    /* dpitch */
	e.arg[2] = 0x8000; /* src */
	e.arg[3] = 1024;   /* spitch */
	e.arg[4] = 256;    /* width */
	e.arg[5] = 16;     /* height */
	e.arg[6] = 2;      /* kind on the stack: device to host */
	e.arg[7] = 0x55;   /* stream on the stack */
	CHECK(dl_call_decode(&e, &c) == 0, "decode failed");
	CHECK_EQ_U64(c.bytes, 256 * 16);
	CHECK(c.dir == DL_DIR_D2H, "dir %d", c.dir);
	CHECK_EQ_U64(c.src, 0x8000);
	CHECK_EQ_U64(c.stream, 0x55);
	CHECK(c.async, "2D async not async");

	e = cuda_ev(DL_API_MEMCPY, 1, 50, 0);
	e.arg[2] = 4096;
	e.arg[3] = 9; /* not a cudaMemcpyKind */
	CHECK(dl_call_decode(&e, &c) == 0, "decode failed");
	CHECK(c.dir == DL_DIR_DEFAULT, "bad kind must decode as default, got %d", c.dir);

	e = cuda_ev(DL_API_COUNT + 5, 1, 1, 0);
	CHECK(dl_call_decode(&e, &c) == -1, "unknown API accepted");
}

static void test_cookies(void)
{
	const struct dl_api *launch = dl_api_by_name("cudaLaunchKernel");
	const struct dl_api *mh = dl_api_by_name("cudaMallocHost");
	const struct dl_api *sync = dl_api_by_name("cudaStreamSynchronize");

	CHECK(launch && mh && sync, "api lookup by name");
	if (!launch || !mh || !sync)
		return;
	CHECK((dl_api_cookie(launch) & DL_COOKIE_API_MASK) == launch->id, "cookie id");
	CHECK(dl_api_cookie(launch) & DL_COOKIE_STACK, "launch must read its stack arguments");
	CHECK(dl_api_cookie(mh) & DL_COOKIE_OUTPTR, "cudaMallocHost must read its out pointer");
	CHECK(!(dl_api_cookie(sync) & (DL_COOKIE_STACK | DL_COOKIE_OUTPTR)), "sync needs no extras");
	CHECK(dl_api_by_name("cudaNoSuchThing") == NULL, "unknown name found");
	CHECK(dl_api_by_id(DL_API_NONE) == NULL && dl_api_by_id(DL_API_COUNT) == NULL, "ids out of the table found");
}

/* Symbols are what uprobes attach to and what recordings are read back by: one name, one API. */
static void test_names_unique(void)
{
	unsigned dups = 0, lost = 0;
	const char *first = "";

	for (unsigned i = 1; i < DL_API_COUNT; i++) {
		const struct dl_api *a = dl_api_by_id(i);

		for (unsigned k = i + 1; k < DL_API_COUNT; k++)
			if (!strcmp(a->name, dl_api_by_id(k)->name) && dups++ == 0)
				first = a->name;
		lost += dl_api_by_name(a->name) != a;
	}
	CHECK(dups == 0 && lost == 0, "%u names given twice (first %s); %u APIs not found by their name", dups,
	      first, lost);
}

/*
 * Every API's layout against one hand-made record. The argument registers hold values whose
 * halves differ, so a field read from the wrong register or half shows; what each layout must
 * make of them is worked out by hand below, not read off the decoder.
 */
#define A0 0xa000ull
#define A1 0x0000000300000002ull   /* as dim3 {x, y}: 2, 3 */
#define A2 0xdead000000000004ull   /* as dim3 z: 4 (the upper half is garbage) */
#define A3 2ull                    /* as cudaMemcpyKind: device to host */
#define A4 0x0000000600000005ull
#define A5 7ull
#define A6 1ull                    /* as cudaMemcpyKind: host to device */
#define A7 0xb000ull
#define OUT 0xc000ull

/* The fields an API of this layout must decode from the record above; 0 if the test has no answer. */
static int layout_expect(const struct dl_api *api, struct dl_call *w)
{
	enum dl_api_layout l = api->layout;

	switch (l) {
	case DL_L_MEMCPY_ASYNC:
		w->stream = A4, w->async = true;
		/* fallthrough */
	case DL_L_MEMCPY:
		w->dst = A0, w->src = A1, w->bytes = A2, w->dir = DL_DIR_D2H;
		return 1;
	case DL_L_MEMCPY2D_ASYNC:
		w->stream = A7, w->async = true;
		/* fallthrough */
	case DL_L_MEMCPY2D:
		/* width a4 x height a5: 0x600000005 * 7 = 0x2a00000023 */
		w->dst = A0, w->src = A2, w->bytes = 0x2a00000023ull, w->dir = DL_DIR_H2D;
		return 1;
	case DL_L_MEMSET_ASYNC:
		w->stream = A3, w->async = true;
		/* fallthrough */
	case DL_L_MEMSET:
		w->dst = A0, w->bytes = A2, w->dir = DL_DIR_D2D;
		return 1;
	case DL_L_LAUNCH:
		/* grid {2, 3} and z 4; block {x, y} from a3 = {2, 0}, z from a4's low half = 5 */
		w->func = A0, w->shmem = A6, w->stream = A7, w->async = true;
		w->grid[0] = 2, w->grid[1] = 3, w->grid[2] = 4;
		w->block[0] = 2, w->block[1] = 0, w->block[2] = 5;
		return 1;
	case DL_L_STREAM:
		w->stream = A0;
		return 1;
	case DL_L_NONE:
		return 1;
	case DL_L_EVENT:
		w->event = A0;
		return 1;
	case DL_L_EVENT_STREAM:
		w->event = A0, w->stream = A1;
		return 1;
	case DL_L_STREAM_EVENT:
		w->stream = A0, w->event = A1;
		return 1;
	case DL_L_OUT_SIZE:
		/* cudaStreamCreate has no flags: its stream is a blocking one whatever a1 holds */
		w->ptr = OUT, w->size = api->id == DL_API_STREAM_CREATE ? 0 : A1;
		return 1;
	case DL_L_STREAM_OUT1:
		w->stream = A0, w->ptr = OUT;
		return 1;
	case DL_L_PTR:
	case DL_L_CTX:
		w->ptr = A0;
		return 1;
	case DL_L_PEER:
	case DL_L_CU_PEER:
		/* the runtime's devices are ints (a1's low half: 2, a3's: 2); the driver's contexts handles */
		w->dst = A0, w->src = A2, w->bytes = A4, w->dir = DL_DIR_D2D;
		w->ptr = l == DL_L_PEER ? 2 : A1, w->size = l == DL_L_PEER ? 2 : A3;
		if (strstr(api->name, "Async"))
			w->stream = A5, w->async = true;
		return 1;
	case DL_L_CTX_OUT_DEV:
		/* the device: Retain's a1 (low half 2), cuCtxCreate[_v2]'s a2 (4), _v3's a4 (5), _v4's a3 (2) */
		w->ptr = OUT;
		w->size = api->id == DL_API_CU_PRIMARY_CTX_RETAIN ? 2
			  : api->id == DL_API_CU_CTX_CREATE_V3   ? 5
			  : api->id == DL_API_CU_CTX_CREATE_V4   ? 2
								   : 4;
		return 1;
	case DL_L_CTX_OUT:
		w->ptr = OUT;
		return 1;
	case DL_L_PTR_SIZE:
		w->ptr = A0, w->size = A1;
		return 1;
	case DL_L_LAUNCH_EXC:
	case DL_L_CU_LAUNCH_EX:
		/* The config copied into a3..a7 as 32-bit words: grid 2, 0, 5; block 6, 7, 0; then the
		 * shared memory (1) and the stream (a7). */
		w->func = A1, w->shmem = 1, w->stream = A7, w->async = true;
		w->grid[0] = 2, w->grid[1] = 0, w->grid[2] = 5;
		w->block[0] = 6, w->block[1] = 7, w->block[2] = 0;
		return 1;
	case DL_L_GRAPH:
		w->func = A0, w->stream = A1, w->async = true;
		return 1;
	case DL_L_GET_KERNEL:
		w->func = OUT, w->host = A1;
		return 1;
	case DL_L_REGISTER_FUNC:
		w->host = A1, w->func = A1, w->name_ptr = A3;
		return 1;
	case DL_L_CU_LAUNCH:
		/* Each dimension a register of its own (low halves): grid 2, 4, 2; block 5, 7, 1; shared
		 * memory a7's low half; the stream is the third stack slot, kept in out. */
		w->func = A0, w->shmem = A7, w->stream = OUT, w->async = true;
		w->grid[0] = 2, w->grid[1] = 4, w->grid[2] = 2;
		w->block[0] = 5, w->block[1] = 7, w->block[2] = 1;
		return 1;
	case DL_L_CU_COPY_ASYNC:
	case DL_L_CU_HTOD_ASYNC:
	case DL_L_CU_DTOH_ASYNC:
	case DL_L_CU_DTOD_ASYNC:
		w->stream = A3, w->async = true;
		/* fallthrough */
	case DL_L_CU_COPY:
	case DL_L_CU_HTOD:
	case DL_L_CU_DTOH:
	case DL_L_CU_DTOD:
		w->dst = A0, w->src = A1, w->bytes = A2;
		w->dir = l == DL_L_CU_HTOD || l == DL_L_CU_HTOD_ASYNC	? DL_DIR_H2D
			 : l == DL_L_CU_DTOH || l == DL_L_CU_DTOH_ASYNC ? DL_DIR_D2H
			 : l == DL_L_CU_DTOD || l == DL_L_CU_DTOD_ASYNC ? DL_DIR_D2D
									: DL_DIR_DEFAULT;
		return 1;
	case DL_L_GET_FUNC:
		w->func = OUT, w->name_ptr = A2;
		return 1;
	case DL_L_NCCL_COLL:
	case DL_L_NCCL_GATHER:
	case DL_L_NCCL_REDUCE:
		/* datatype a3 = 2 (ncclInt32, 4 bytes): 0xdead000000000004 * 4 wraps to 0x7ab4000000000010 */
		w->src = A0, w->dst = A1, w->count = A2, w->dtype = 2, w->bytes = 0x7ab4000000000010ull, w->async = true;
		w->peer = -1;
		if (l == DL_L_NCCL_GATHER) {
			w->comm = A4, w->stream = A5;
		} else if (l == DL_L_NCCL_REDUCE) {
			w->op = 5, w->peer = 7, w->comm = A6, w->stream = A7;
		} else {
			if (api->id == DL_API_NCCL_BROADCAST)
				w->peer = 5;
			else
				w->op = 5;
			w->comm = A5, w->stream = A6;
		}
		return 1;
	case DL_L_NCCL_P2P:
		/* count a1, datatype a2's low half = 4 (ncclInt64, 8 bytes), peer a3 = 2 */
		w->src = w->dst = A0, w->count = A1, w->dtype = 4, w->bytes = 0x0000001800000010ull, w->peer = 2;
		w->comm = A4, w->stream = A5, w->async = true;
		return 1;
	case DL_L_NCCL_INIT_RANK:
		w->comm = OUT, w->nranks = 2, w->rank = 4;
		return 1;
	case DL_L_NCCL_INIT_ALL:
		w->comm = OUT, w->nranks = 2;
		return 1;
	case DL_L_NCCL_VERSION:
		w->size = (uint32_t)OUT;
		return 1;
	}
	return 0;
}

/* nccl.h's sizes and names, by hand; values past the enum have none. */
static void test_nccl_types(void)
{
	static const struct {
		unsigned v, size;
		const char *name;
	} want[] = { { 0, 1, "int8" }, { 3, 4, "uint32" }, { 6, 2, "float16" }, { 7, 4, "float32" },
		     { 8, 8, "float64" }, { 9, 2, "bfloat16" }, { 11, 1, "float8e5m2" }, { 12, 0, NULL } };
	unsigned wrong = 0;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const char *n = dl_nccl_type_name(want[i].v);

		wrong += dl_nccl_type_size(want[i].v) != want[i].size || (n == NULL) != (want[i].name == NULL) ||
			 (n && strcmp(n, want[i].name));
	}
	CHECK(wrong == 0, "%u NCCL datatypes sized or named wrongly", wrong);
	CHECK(!strcmp(dl_nccl_op_name(2), "max") && !strcmp(dl_nccl_op_name(4), "avg") && !dl_nccl_op_name(5),
	      "NCCL op names");
	/* The 7- and 8-argument collectives read their stream (and communicator) from the stack. */
	CHECK((dl_api_cookie(dl_api_by_name("ncclAllReduce")) & DL_COOKIE_STACK) &&
	      (dl_api_cookie(dl_api_by_name("ncclReduce")) & DL_COOKIE_STACK) &&
	      !(dl_api_cookie(dl_api_by_name("ncclSend")) & DL_COOKIE_STACK) &&
	      (dl_api_cookie(dl_api_by_name("ncclCommInitRank")) & DL_COOKIE_OUTPTR),
	      "NCCL cookies");
	CHECK(!dl_api_entry_only(dl_api_by_name("ncclAllReduce")), "a collective must have its return probed");
}

static void test_every_layout_decodes(void)
{
	static const uint64_t args[8] = { A0, A1, A2, A3, A4, A5, A6, A7 };
	unsigned wrong = 0, unknown = 0;
	const char *first = "";

	for (unsigned id = 1; id < DL_API_COUNT; id++) {
		const struct dl_api *api = dl_api_by_id(id);
		struct dl_cuda_ev e = cuda_ev((enum dl_api_id)id, 77, 55, -3);
		struct dl_call got, want;

		memcpy(e.arg, args, sizeof(args));
		e.out = OUT;
		e.depth = 2;
		e.flags = DL_CUDA_ARGS_FAULT;
		memset(&want, 0, sizeof(want));
		want.api = api, want.ts = 77, want.dur_ns = 55, want.ret = -3, want.tgid = 100, want.tid = 101;
		want.depth = 2, want.args_fault = true;
		if (!layout_expect(api, &want)) {
			unknown++;
			continue;
		}
		if ((dl_call_decode(&e, &got) != 0 || memcmp(&got, &want, sizeof(got))) && wrong++ == 0)
			first = api->name;
	}
	CHECK(wrong == 0 && unknown == 0, "%u APIs decode the hand-made record wrongly (first %s); %u layouts "
	      "the test has no answer for", wrong, first, unknown);
}

/* The table's driver column: libcuda's cu* functions, not the runtime's cuda* nor __cuda* nor libc's. */
static void test_driver_column(void)
{
	unsigned drivers = 0, wrong = 0, cookie = 0;
	const char *first = "";

	for (unsigned id = 1; id < DL_API_COUNT; id++) {
		const struct dl_api *api = dl_api_by_id(id);
		bool cu = !strncmp(api->name, "cu", 2) && strncmp(api->name, "cuda", 4);

		if (api->driver != cu && wrong++ == 0)
			first = api->name;
		cookie += !(dl_api_cookie(api) & DL_COOKIE_DRIVER) != !api->driver;
		drivers += api->driver;
	}
	CHECK(wrong == 0 && cookie == 0, "%u APIs in the wrong column (first %s), %u cookies disagree", wrong,
	      first, cookie);
	CHECK(dl_api_by_name("cuMemcpy")->driver && !dl_api_by_name("cudaMemcpy")->driver &&
	      !dl_api_by_name("__cudaLaunchKernel")->driver && !dl_api_by_name("dlopen")->driver, "driver column");
	CHECK_EQ_U64(drivers, 70);
}

/* The summary is fed through a stream, which resolves copies against the allocations seen. */
static struct dl_stream feed_stream;

/* Records the stream refused since feed_start: checked once, in feed_end. */
static unsigned feed_refused;

static void feed_start(struct dl_summary *s)
{
	feed_refused = 0;
	dl_summary_init(s);
	memset(&feed_stream, 0, sizeof(feed_stream));
	dl_stream_add(&feed_stream, dl_summary_sink, s);
}

static void feed_end(struct dl_summary *s)
{
	CHECK(feed_refused == 0, "%u records refused", feed_refused);
	dl_summary_free(s);
	dl_stream_free(&feed_stream);
}

static void feed(struct dl_summary *s, const void *rec)
{
	const struct dl_hdr *h = rec;

	(void)s;
	if (dl_stream_emit(&feed_stream, rec, h->size) != 0)
		feed_refused++;
}

static void test_pinned_classification(void)
{
	struct dl_summary s;
	struct dl_cuda_ev e;
	struct dl_proc *p;

	feed_start(&s);
	/* A failed cudaMallocHost (as without a GPU) must not mark its range pinned. */
	e = cuda_ev(DL_API_MALLOC_HOST, 10, 5, 35);
	e.out = 0x10000;
	e.arg[1] = 0x1000;
	feed(&s, &e);
	e = cuda_ev(DL_API_MEMCPY, 20, 5, 0);
	e.arg[0] = 0xd0000;
	e.arg[1] = 0x10010;
	e.arg[2] = 16;
	e.arg[3] = 1;
	feed(&s, &e);
	/* A successful one does. */
	e = cuda_ev(DL_API_MALLOC_HOST, 30, 5, 0);
	e.out = 0x20000;
	e.arg[1] = 0x1000;
	feed(&s, &e);
	e = cuda_ev(DL_API_MEMCPY, 40, 5, 0);
	e.arg[0] = 0xd0000;
	e.arg[1] = 0x20ff0;
	e.arg[2] = 1 << 20;
	e.arg[3] = 1;
	feed(&s, &e);
	/* One past the end of the range is pageable again. */
	e.arg[1] = 0x21000;
	feed(&s, &e);
	/* Registered host memory, then unregistered. */
	e = cuda_ev(DL_API_HOST_REGISTER, 50, 5, 0);
	e.arg[0] = 0x40000;
	e.arg[1] = 0x2000;
	feed(&s, &e);
	e = cuda_ev(DL_API_MEMCPY, 60, 5, 0);
	e.arg[0] = 0x40100;
	e.arg[1] = 0xd0000;
	e.arg[2] = 64;
	e.arg[3] = 2;
	feed(&s, &e);
	e = cuda_ev(DL_API_HOST_UNREGISTER, 70, 5, 0);
	e.arg[0] = 0x40000;
	feed(&s, &e);
	e = cuda_ev(DL_API_MEMCPY, 80, 5, 0);
	e.arg[0] = 0x40100;
	e.arg[1] = 0xd0000;
	e.arg[2] = 64;
	e.arg[3] = 2;
	feed(&s, &e);

	p = dl_summary_find(&s, 100);
	CHECK(p != NULL, "process missing");
	if (p) {
		CHECK_EQ_U64(p->copies[DL_DIR_H2D].count, 3);
		CHECK_EQ_U64(p->copies[DL_DIR_H2D].pageable, 2);
		CHECK_EQ_U64(p->copies[DL_DIR_H2D].small, 1);
		CHECK_EQ_U64(p->copies[DL_DIR_H2D].bytes, 16 + 2 * (1 << 20));
		/* 16 B under 1 KiB; 1 MiB opens [1 MiB, 4 MiB), the sixth power-of-4 bucket after [0, 1 KiB). */
		CHECK_EQ_U64(p->copies[DL_DIR_H2D].sizes[0], 1);
		CHECK_EQ_U64(p->copies[DL_DIR_H2D].sizes[6], 2);
		CHECK_EQ_U64(dl_copy_size_bucket_floor(6), 1 << 20);
		CHECK_EQ_U64(dl_copy_size_bucket((1 << 20) - 1), 5);
		CHECK_EQ_U64(dl_copy_size_bucket(UINT64_MAX), DL_COPY_SIZE_BUCKETS - 1);
		CHECK_EQ_U64(p->copies[DL_DIR_D2H].count, 2);
		CHECK_EQ_U64(p->copies[DL_DIR_D2H].pageable, 1);
		CHECK_EQ_U64(p->calls[DL_API_MALLOC_HOST].count, 2);
		CHECK_EQ_U64(p->calls[DL_API_MALLOC_HOST].errors, 1);
		CHECK_EQ_U64(p->calls[DL_API_MEMCPY].total_ns, 25);
	}
	feed_end(&s);
}

static void test_default_direction_and_nesting(void)
{
	struct dl_summary s;
	struct dl_cuda_ev e;
	struct dl_proc *p;

	feed_start(&s);
	e = cuda_ev(DL_API_MALLOC, 1, 1, 0);
	e.out = 0x900000;
	e.arg[1] = 0x100000;
	feed(&s, &e);
	e = cuda_ev(DL_API_MEMCPY, 2, 1, 0);
	e.arg[0] = 0x1000;   /* host */
	e.arg[1] = 0x900100; /* device */
	e.arg[2] = 100;
	e.arg[3] = 4;        /* cudaMemcpyDefault */
	feed(&s, &e);
	/* Called from inside another probed call: counted as a call, not again as a copy. */
	e.depth = 1;
	feed(&s, &e);
	p = dl_summary_find(&s, 100);
	CHECK(p != NULL, "process missing");
	if (p) {
		CHECK_EQ_U64(p->copies[DL_DIR_D2H].count, 1);
		CHECK_EQ_U64(p->copies[DL_DIR_H2H].count, 0);
		CHECK_EQ_U64(p->calls[DL_API_MEMCPY].count, 2);
	}
	feed_end(&s);
}

static void test_kernels_sched_io_proc(void)
{
	struct dl_summary s;
	struct dl_cuda_ev e;
	struct dl_sched_ev se;
	struct dl_bio_ev be;
	struct dl_proc_ev pe;
	struct dl_proc *p;

	feed_start(&s);
	e = cuda_ev(DL_API_LAUNCH_KERNEL, 1, 0, 0);
	e.flags = DL_CUDA_ENTRY_ONLY;
	e.arg[0] = 0x1111;
	e.arg[1] = 1ull | 1ull << 32;
	e.arg[2] = 1;
	e.arg[3] = 128ull | 1ull << 32;
	e.arg[4] = 1;
	for (int i = 0; i < 4; i++)
		feed(&s, &e);
	e.arg[3] = 64ull | 1ull << 32; /* same kernel, other shape */
	feed(&s, &e);

	memset(&se, 0, sizeof(se));
	se.h.size = sizeof(se);
	se.h.kind = DL_EV_SCHED;
	se.h.tgid = 100;
	se.h.tid = 102;
	se.state = DL_ST_RUNNING;
	se.dur_ns = 1000;
	feed(&s, &se);
	se.state = DL_ST_RUNQ;
	se.dur_ns = 300;
	feed(&s, &se);
	se.state = DL_ST_DISK;
	se.dur_ns = 50;
	feed(&s, &se);
	se.state = DL_ST_SLEEP;
	se.dur_ns = 7;
	feed(&s, &se);

	memset(&be, 0, sizeof(be));
	be.h.size = sizeof(be);
	be.h.kind = DL_EV_BIO;
	be.h.tgid = 100;
	be.bytes = 4096;
	be.dur_ns = 70;
	be.flags = DL_BIO_PARTIAL;
	feed(&s, &be);
	be.flags = 0;
	feed(&s, &be);
	be.flags = DL_BIO_ASYNC;
	feed(&s, &be);

	memset(&pe, 0, sizeof(pe));
	pe.h.size = sizeof(pe);
	pe.h.kind = DL_EV_PROC;
	pe.h.tgid = 200;
	pe.h.tid = 200;
	pe.what = DL_PROC_FORK;
	pe.ppid = 100;
	strcpy(pe.comm, "worker");
	feed(&s, &pe);
	pe.what = DL_PROC_EXIT;
	pe.group_dead = 1;
	pe.exit_code = 3 << 8;
	feed(&s, &pe);

	p = dl_summary_find(&s, 100);
	CHECK(p != NULL, "process missing");
	if (p) {
		CHECK_EQ_U64(p->nkernels, 2);
		CHECK_EQ_U64(p->kernels[0].count, 4);
		CHECK_EQ_U64(p->kernels[1].block[0], 64);
		CHECK_EQ_U64(p->sched.oncpu_ns, 1000);
		CHECK_EQ_U64(p->sched.runq_ns, 300);
		CHECK_EQ_U64(p->sched.blocked_ns, 57);
		CHECK_EQ_U64(p->sched.disk_ns, 50);
		CHECK_EQ_U64(p->sched.switches, 1);
		CHECK_EQ_U64(p->io.read_bytes, 8192);
		CHECK_EQ_U64(p->io.read_ops, 1);
		CHECK_EQ_U64(p->io.wait_ns, 70);
		CHECK_EQ_U64(p->threads, 2);
	}
	CHECK_EQ_U64(s.async_io_bytes, 4096);
	p = dl_summary_find(&s, 200);
	CHECK(p && p->ppid == 100 && p->exited && !strcmp(p->comm, "worker"), "forked child not recorded");
	feed_end(&s);
}

static void test_collector_records(void)
{
	struct dl_summary s;
	struct dl_stream st = {};
	struct dl_cuda_ev e = cuda_ev(DL_API_LAUNCH_KERNEL, 5, 0, 0);
	uint64_t drops[DL_DROP_MAX] = { [DL_DROP_CUDA] = 3, [DL_DROP_SCHED] = 4 };
	struct dl_proc *p;
	char longname[2000];

	dl_summary_init(&s);
	dl_stream_add(&st, dl_summary_sink, &s);
	dl_emit_trace_start(&st, 1000, 0);
	dl_emit_procinfo(&st, 1000, 100, 7, "trainer-with-a-long-name", 3);
	dl_emit_lib(&st, 1001, 100, "/x/libcudart.so.13", 31, 0);
	dl_emit_sym(&st, 1002, 100, 0x4000, "my_kernel");
	memset(longname, 'k', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	dl_emit_sym(&st, 1002, 100, 0x5000, longname);
	e.flags = DL_CUDA_ENTRY_ONLY;
	e.arg[0] = 0x4000;
	dl_stream_emit(&st, &e, sizeof(e));
	e.arg[0] = 0x5000;
	dl_stream_emit(&st, &e, sizeof(e));
	e.arg[0] = 0x6000;
	dl_stream_emit(&st, &e, sizeof(e));
	/* 0x7000's name is found only after its first launch (a retried lookup): the next launch names it. */
	e.arg[0] = 0x7000;
	dl_stream_emit(&st, &e, sizeof(e));
	dl_emit_sym(&st, 1003, 100, 0x7000, "late_kernel");
	dl_stream_emit(&st, &e, sizeof(e));
	/* Two launches of one graph, one of another. */
	e = cuda_ev(DL_API_GRAPH_LAUNCH, 6, 0, 0);
	e.flags = DL_CUDA_ENTRY_ONLY;
	e.arg[0] = 0x9000;
	dl_stream_emit(&st, &e, sizeof(e));
	dl_stream_emit(&st, &e, sizeof(e));
	e.arg[0] = 0x9100;
	dl_stream_emit(&st, &e, sizeof(e));
	dl_emit_trace_end(&st, 5000, drops);

	p = dl_summary_find(&s, 100);
	CHECK(p != NULL, "process missing");
	if (p) {
		CHECK(p->ppid == 7 && !strcmp(p->comm, "trainer-with-a-"), "procinfo: ppid %d comm '%s'", p->ppid,
		      p->comm);
		CHECK(p->cuda_libs == 1, "lib records: %d", p->cuda_libs);
		CHECK(p->nspid == 3, "nspid %d", p->nspid);
		CHECK(p->nkernels == 4, "kernels %zu", p->nkernels);
		CHECK(p->ngraphs == 2 && p->graphs[0].graph == 0x9000 && p->graphs[0].count == 2, "graphs %zu",
		      p->ngraphs);
		if (p->nkernels == 4) {
			CHECK(!strcmp(p->kernels[0].name, "my_kernel"), "name '%s'", p->kernels[0].name);
			CHECK(strlen(p->kernels[1].name) == DL_SYM_NAME_MAX - 1, "long name kept to %zu",
			      strlen(p->kernels[1].name));
			CHECK(!strcmp(p->kernels[2].name, "0x6000"), "unnamed kernel '%s'", p->kernels[2].name);
			CHECK(!strcmp(p->kernels[3].name, "late_kernel") && p->kernels[3].count == 2,
			      "late-named kernel '%s' x%llu", p->kernels[3].name, (unsigned long long)p->kernels[3].count);
		}
	}
	CHECK_EQ_U64(dl_summary_duration(&s), 4000);
	CHECK_EQ_U64(s.drops_total, 7);
	CHECK_EQ_U64(st.malformed, 0);
	dl_summary_free(&s);
	dl_stream_free(&st);
}

static void test_malformed(void)
{
	struct dl_summary s;
	struct dl_stream st = {};
	struct dl_cuda_ev e = cuda_ev(DL_API_MEMCPY, 1, 1, 0);
	unsigned char junk[8] = { 0 };

	dl_summary_init(&s);
	dl_stream_add(&st, dl_summary_sink, &s);
	/* The stream checks each record once: a malformed one is counted there and reaches no sink. */
	CHECK(dl_stream_emit(&st, junk, sizeof(junk)) == -1, "short record accepted");
	e.h.size = sizeof(struct dl_hdr) + 4; /* claims to be a CUDA record, too short for one */
	CHECK(dl_stream_emit(&st, &e, sizeof(e)) == -1, "truncated CUDA record accepted");
	e.h.size = sizeof(e) + 64;            /* longer than the buffer */
	CHECK(dl_stream_emit(&st, &e, sizeof(e)) == -1, "overlong size accepted");
	CHECK_EQ_U64(st.malformed, 3);
	CHECK_EQ_U64(s.records[DL_EV_CUDA], 0);
	e.h.size = sizeof(e);
	e.h.kind = 999;                       /* a kind from a newer version: skipped, counted */
	CHECK(dl_stream_emit(&st, &e, sizeof(e)) == 0, "unknown kind rejected");
	CHECK_EQ_U64(s.unknown_records, 1);
	CHECK_EQ_U64(st.malformed, 3);
	dl_summary_free(&s);
	dl_stream_free(&st);
}

int main(void)
{
	test_launch_decode();
	test_copy_decode();
	test_cookies();
	test_names_unique();
	test_every_layout_decodes();
	test_nccl_types();
	test_driver_column();
	test_pinned_classification();
	test_default_direction_and_nesting();
	test_kernels_sched_io_proc();
	test_collector_records();
	test_malformed();
	return check_report("test_decode");
}
