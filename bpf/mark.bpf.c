// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Step markers chosen by the user (--step-on SYMBOL): a uprobe on any function of the target. */
#include "common.bpf.h"

SEC("uprobe")
int BPF_UPROBE(step_mark)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct dl_mark_ev *e;

	e = dl_reserve(sizeof(*e), DL_EV_MARK, DL_DROP_CUDA, bpf_ktime_get_ns(), id >> 32, (__u32)id);
	if (!e)
		return 0;
	/* The marker's id (0 today): where no attach cookie can carry one, 0. */
	e->mark_id = has_attach_cookie ? (__u32)bpf_get_attach_cookie(ctx) : 0;
	e->pad = 0;
	dl_submit(e);
	return 0;
}
