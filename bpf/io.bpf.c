// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Block I/O. A request is attributed to the task that starts it and counted at
 * completion: counting at issue over-counts on this kernel (requests are
 * reissued, and issue may run in kblockd's kworker), while bytes counted at
 * completion keyed by the request from block_io_start equal /proc/PID/io
 * read_bytes (measured on kernel 6.18). Completion runs in interrupt context, so the
 * submitter is whatever was saved at start.
 */
#include "common.bpf.h"

#define PF_KTHREAD 0x00200000
#define REQ_OP_MASK 0xff
#define REQ_OP_READ 0
#define REQ_OP_WRITE 1

struct rq_start {
	__u64 ts;
	__u32 tgid;
	__u32 tid;
	__u32 flags;
	__u32 remaining;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct rq_start);
} requests SEC(".maps");

static __always_inline int on_start(struct request *rq, bool only_if_new)
{
	__u64 key = (__u64)rq, id = bpf_get_current_pid_tgid();
	struct task_struct *task = (void *)bpf_get_current_task();
	struct rq_start s = {};
	__u32 op, tgid = id >> 32;

	if (only_if_new && bpf_map_lookup_elem(&requests, &key))
		return 0;
	op = BPF_CORE_READ(rq, cmd_flags) & REQ_OP_MASK;
	if (op != REQ_OP_READ && op != REQ_OP_WRITE)
		return 0;
	if (BPF_CORE_READ(task, flags) & PF_KTHREAD)
		s.flags |= DL_BIO_ASYNC;
	else if (!dl_is_traced(tgid))
		return 0;
	if (op == REQ_OP_WRITE)
		s.flags |= DL_BIO_WRITE;
	s.ts = bpf_ktime_get_ns();
	s.tgid = tgid;
	s.tid = (__u32)id;
	s.remaining = BPF_CORE_READ(rq, __data_len);
	if (bpf_map_update_elem(&requests, &key, &s, BPF_ANY))
		dl_count_drop(DL_DROP_INFLIGHT);
	return 0;
}

/* Twins: user space enables block_io_start where the kernel has it (BTF probe), the pair below elsewhere. */
SEC("?raw_tp/block_io_start")
int BPF_PROG(io_start, struct request *rq)
{
	return on_start(rq, false);
}

SEC("?raw_tp/block_rq_insert")
int BPF_PROG(io_insert, struct request *rq)
{
	return on_start(rq, false);
}

/* Requests issued directly (no scheduler insert) are seen first here. */
SEC("?raw_tp/block_rq_issue")
int BPF_PROG(io_issue, struct request *rq)
{
	return on_start(rq, true);
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(io_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq, now = bpf_ktime_get_ns();
	struct rq_start *s = bpf_map_lookup_elem(&requests, &key);
	struct dl_bio_ev *e;
	__u32 flags;

	if (!s)
		return 0;
	flags = s->flags;
	if (error)
		flags |= DL_BIO_ERROR;
	if (nr_bytes < s->remaining)
		flags |= DL_BIO_PARTIAL;
	e = dl_reserve(sizeof(*e), DL_EV_BIO, DL_DROP_BIO, s->ts, s->tgid, s->tid);
	if (e) {
		e->dur_ns = now - s->ts;
		e->sector = BPF_CORE_READ(rq, __sector);
		e->bytes = nr_bytes;
		e->dev = BPF_CORE_READ(rq, part, bd_dev);
		e->flags = flags;
		e->complete_cpu = bpf_get_smp_processor_id();
		dl_submit(e);
	}
	if (flags & DL_BIO_PARTIAL)
		s->remaining -= nr_bytes;
	else
		bpf_map_delete_elem(&requests, &key);
	return 0;
}
