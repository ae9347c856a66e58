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

static long emit_launch(__u64 i, struct loop_ctx *c)
{
	struct dl_cuda_ev *e = dl_reserve(sizeof(*e), DL_EV_CUDA, DL_DROP_CUDA, bpf_ktime_get_ns(), c->tgid, c->tid);

	(void)i;
	if (!e)
		return 0;   /* counted by dl_reserve; the burst goes on, as a traced job would */
	e->dur_ns = 0;
	e->ret = 0;
	e->api = launch_api;
	e->flags = DL_CUDA_ENTRY_ONLY;
	e->depth = 0;
	for (int k = 0; k < DL_CUDA_NARGS; k++)
		e->arg[k] = launch_arg[k];
	e->out = 0;
	e->site = launch_site;
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
