// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CUDA runtime uprobes. One entry and one return program serve every API: the
 * uprobe_multi cookie carries the API id and how to capture its arguments, and
 * user space decodes the raw registers (user/cuda_api.c).
 */
#include "common.bpf.h"
#include "agg.bpf.h"

static __always_inline __u32 capture_args(struct pt_regs *ctx, __u64 cookie, __u64 *arg)
{
	arg[0] = PT_REGS_PARM1(ctx);
	arg[1] = PT_REGS_PARM2(ctx);
	arg[2] = PT_REGS_PARM3(ctx);
	arg[3] = PT_REGS_PARM4(ctx);
	arg[4] = PT_REGS_PARM5(ctx);
	arg[5] = PT_REGS_PARM6(ctx);
	if (!(cookie & DL_COOKIE_STACK))
		return 0;
	/* At entry [sp] is the return address: stack arguments start at sp+8. */
	if (bpf_probe_read_user(&arg[6], 2 * sizeof(__u64), (void *)(PT_REGS_SP(ctx) + 8)))
		return DL_CUDA_ARGS_FAULT;
	return 0;
}

SEC("uprobe.multi")
int BPF_KPROBE(cuda_entry_only)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call_stack *st = dl_calls(false);
	struct dl_cuda_ev *e;

	if (summary_mode && (cookie & DL_COOKIE_AGG)) {
		__u64 arg[DL_CUDA_NARGS] = {};

		arg[0] = PT_REGS_PARM1(ctx);
		dl_agg_add(id >> 32, cookie, arg, st ? st->depth : 0, 0, true, 0);
		return 0;
	}
	e = dl_reserve(sizeof(*e), DL_EV_CUDA, DL_DROP_CUDA, bpf_ktime_get_ns(), id >> 32, tid);
	if (!e)
		return 0;
	e->dur_ns = 0;
	e->ret = 0;
	e->api = cookie & DL_COOKIE_API_MASK;
	e->flags = DL_CUDA_ENTRY_ONLY;
	e->depth = st ? st->depth : 0;
	e->arg[6] = e->arg[7] = 0;
	e->flags |= capture_args(ctx, cookie, e->arg);
	e->out = 0;
	dl_submit(e);
	return 0;
}

SEC("uprobe.multi")
int BPF_KPROBE(cuda_enter)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct call_stack *st = dl_calls(true);  /* zero-filled when created */
	struct call_frame *f;
	__u32 d;

	if (!st) {
		dl_count_drop(DL_DROP_INFLIGHT);
		return 0;
	}
	d = st->depth;
	if (d >= DL_MAX_DEPTH) {
		/* Still counted so the return probe pops in step. */
		st->depth = d + 1;
		dl_count_drop(DL_DROP_INFLIGHT);
		return 0;
	}
	f = &st->f[d];
	f->cookie = cookie;
	f->flags = capture_args(ctx, cookie, f->arg);
	st->depth = d + 1;
	/* Last, so the recorded duration excludes the capture above. */
	f->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("uretprobe.multi")
int BPF_KRETPROBE(cuda_return)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call_stack *st = dl_calls(false);
	struct call_frame *f;
	struct dl_cuda_ev *e;
	__u32 d;

	if (!st || st->depth == 0)
		return 0; /* entered before we attached */
	d = --st->depth;
	if (d >= DL_MAX_DEPTH)
		return 0;
	f = &st->f[d];
	if ((f->cookie & DL_COOKIE_API_MASK) != (cookie & DL_COOKIE_API_MASK))
		return 0; /* unbalanced (a longjmp, or attach mid-call): nothing reliable to emit */
	if (dl_agg_add(id >> 32, cookie, f->arg, d, now - f->ts, false, PT_REGS_RC(ctx)))
		return 0;

	e = dl_reserve(sizeof(*e), DL_EV_CUDA, DL_DROP_CUDA, f->ts, id >> 32, tid);
	if (!e)
		return 0;
	e->dur_ns = now - f->ts;
	e->ret = PT_REGS_RC(ctx);
	e->api = cookie & DL_COOKIE_API_MASK;
	e->flags = f->flags;
	e->depth = d;
	__builtin_memcpy(e->arg, f->arg, sizeof(e->arg));
	e->out = 0;
	if ((cookie & DL_COOKIE_OUTPTR) && f->arg[0] &&
	    bpf_probe_read_user(&e->out, sizeof(e->out), (void *)f->arg[0]))
		e->flags |= DL_CUDA_OUT_FAULT;
	dl_submit(e);
	return 0;
}
