// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A producer of dlbpf records that is not a uprobe: one BPF_PROG_TEST_RUN of
 * `produce` writes ctx->n launch records in a bpf_loop and returns how many it
 * could reserve, so the drain rate of
 * the collector can be measured past what uprobe traps on two cores can feed
 * it (tools/bench/README.md, table 8).
 *
 * The records are dlbpf's own (struct dl_cuda_ev, as cuda_entry_only writes
 * a launch), reserved and submitted with common.bpf.h's dl_reserve and
 * dl_submit: the same drop counter and the same wake-up policy. The rb and
 * drops maps are a running dlbpf's (bpf_map__reuse_fd in drainprod.c).
 */
#define DL_DEFINE_SHARED
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by drainprod.c before load: the launch every record describes. */
const volatile __u16 launch_api;
const volatile __u64 launch_arg[DL_CUDA_NARGS];
/* Where the launches return to: one call site, as a training loop's launch line is (an unset one reads stale ring memory). */
const volatile __u64 launch_site;

struct produce_args {
	__u32 n;       /* records to write in this run */
};

struct loop_ctx {
	__u32 tgid, tid, written;
};

/* A launch record's payload after its header: the launch drainprod.c set, entry-only, at one site. */
static __always_inline void launch_payload(struct dl_cuda_ev *e)
{
	e->dur_ns = 0;
	e->ret = 0;
	e->api = launch_api;
	e->flags = DL_CUDA_ENTRY_ONLY;
	e->depth = 0;
	for (int k = 0; k < DL_CUDA_NARGS; k++)
		e->arg[k] = launch_arg[k];
	e->out = 0;
	e->site = launch_site;
}

static long emit_launch(__u64 i, struct loop_ctx *c)
{
	struct dl_cuda_ev *e = dl_reserve(sizeof(*e), DL_EV_CUDA, DL_DROP_CUDA, bpf_ktime_get_ns(), c->tgid, c->tid);

	(void)i;
	if (!e)
		return 0;   /* counted by dl_reserve; the burst goes on, as a traced job would */
	launch_payload(e);
	dl_submit(e);
	c->written++;
	return 0;
}

SEC("syscall")
int produce(struct produce_args *a)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct loop_ctx c = { .tgid = id >> 32, .tid = (__u32)id };

	bpf_loop(a->n, emit_launch, &c, 0);
	return c.written;   /* the rest were counted as drops */
}

/*
 * Issue 13's proposal, per-CPU batching, as far as the producer goes (tools/bench/batchcost.c):
 * the same launch records, B per ring-buffer reservation. "staged" is the design a probe could
 * use: each record is written to a per-CPU staging array and, every B-th, the B are copied into
 * one reservation and submitted once; "direct" writes B records straight into one reservation,
 * the saving's upper bound (a probe has one record at a time, so it cannot). Both stamp every
 * record as dl_reserve does. Neither keeps the collector's order (a staged record waits behind
 * later unstaged ones): this measures what the order would be traded for.
 */
#define BATCH_B 16

struct stage_buf {
	__u32 n;
	__u32 pad;
	struct dl_cuda_ev ev[BATCH_B];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stage_buf);
} staging SEC(".maps");

/* A whole launch record, its header stamped as dl_reserve stamps one. */
static __always_inline void fill_launch(struct dl_cuda_ev *e, struct loop_ctx *c)
{
	e->h.size = sizeof(*e);
	e->h.kind = DL_EV_CUDA;
	e->h.cpu = bpf_get_smp_processor_id();
	e->h.ts = bpf_ktime_get_ns();
	e->h.tgid = c->tgid;
	e->h.tid = c->tid;
	launch_payload(e);
}

static long emit_staged(__u64 i, struct loop_ctx *c)
{
	__u32 zero = 0, n;
	struct dl_cuda_ev *out;
	struct stage_buf *st;

	(void)i;
	st = bpf_map_lookup_elem(&staging, &zero);
	if (!st)
		return 1;
	n = st->n;
	if (n >= BATCH_B)
		n = 0;
	fill_launch(&st->ev[n], c);
	st->n = ++n;
	if (n < BATCH_B)
		return 0;
	st->n = 0;
	out = bpf_ringbuf_reserve(&rb, sizeof(st->ev), 0);
	if (!out) {
		dl_count_drop(DL_DROP_CUDA);
		return 0;
	}
	for (int k = 0; k < BATCH_B; k++)
		__builtin_memcpy(&out[k], &st->ev[k], sizeof(out[k]));
	dl_submit(out);
	c->written += BATCH_B;
	return 0;
}

static long emit_direct(__u64 i, struct loop_ctx *c)
{
	struct dl_cuda_ev *out = bpf_ringbuf_reserve(&rb, BATCH_B * sizeof(*out), 0);

	(void)i;
	if (!out) {
		dl_count_drop(DL_DROP_CUDA);
		return 0;
	}
	for (int k = 0; k < BATCH_B; k++)
		fill_launch(&out[k], c);
	dl_submit(out);
	c->written += BATCH_B;
	return 0;
}

SEC("?syscall")
int produce_staged(struct produce_args *a)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct loop_ctx c = { .tgid = id >> 32, .tid = (__u32)id };

	bpf_loop(a->n, emit_staged, &c, 0);
	return c.written;
}

SEC("?syscall")
int produce_direct(struct produce_args *a)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct loop_ctx c = { .tgid = id >> 32, .tid = (__u32)id };

	bpf_loop(a->n / BATCH_B, emit_direct, &c, 0);
	return c.written;
}

/*
 * The ring's positions (bytes ever written, bytes ever read): the collector
 * has read a burst once its position passes where the burst ended. Empty is
 * no test: this process's own sleeps while it waits write scheduler records.
 */
__u64 prod_pos, cons_pos;

SEC("syscall")
int positions(void *ctx)
{
	(void)ctx;
	prod_pos = bpf_ringbuf_query(&rb, BPF_RB_PROD_POS);
	cons_pos = bpf_ringbuf_query(&rb, BPF_RB_CONS_POS);
	return 0;
}
