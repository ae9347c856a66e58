/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The current thread's innermost CPython frame (no maps, no global
 * functions): for the frame walker at a call's probe (pyframes.bpf.h) and for
 * the Python-function step marker (mark.bpf.c), each in its own object.
 */
#ifndef DLBPF_PYTOP_BPF_H
#define DLBPF_PYTOP_BPF_H

#include "common.bpf.h"

/* The thread's current frame through the autoTSSkey pthread key; 0 with *status set when none. */
static __always_inline __u64 py_top_frame(const struct dl_py_cfg *cfg, __u16 *status)
{
	struct task_struct *task = dl_current();
	__u64 tp = dl_arch_thread_pointer(task);
	__u32 tss[2];
	__u64 tstate = 0, frame = 0;

	if (bpf_probe_read_user(tss, sizeof(tss), (void *)cfg->tss_addr) || !tss[0]) {
		*status = DL_PY_NO_THREAD;
		return 0;
	}
	if (tss[1] >= DL_PY_KEYS_1ST) {
		*status = DL_PY_KEY_HIGH;
		return 0;
	}
	/* struct pthread_key_data { uintptr_t seq; void *data; } */
	if (bpf_probe_read_user(&tstate, sizeof(tstate), (void *)(tp + (__s32)cfg->specific_off + tss[1] * 16 + 8)) ||
	    !tstate) {
		*status = DL_PY_NO_THREAD;
		return 0;
	}
	if (bpf_probe_read_user(&frame, sizeof(frame), (void *)(tstate + cfg->tstate_frame)))
		goto fault;
	if ((cfg->flags & DL_PYCFG_CFRAME) && frame &&
	    bpf_probe_read_user(&frame, sizeof(frame), (void *)(frame + cfg->cframe_frame)))
		goto fault;
	return frame;
fault:
	*status = DL_PY_FAULT;
	return 0;
}

#endif
