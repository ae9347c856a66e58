/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython frames of the current thread, for a call's record. Every read is of
 * the traced process's memory and may fail or be garbage; the walk is bounded
 * (a cyclic chain ends at DL_PY_WALK_MAX) and user space names a frame only
 * from a code object it has checked (user/capture/pycode.c).
 */
#ifndef DLBPF_PYFRAMES_BPF_H
#define DLBPF_PYFRAMES_BPF_H

#include "common.bpf.h"

/* One frame read whole; 8 more bytes so a masked offset plus its field stays inside. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, char[DL_PY_FRAME_READ + 8]);
} py_frame_buf SEC(".maps");

static __always_inline __u64 py_u64(const char *buf, __u32 off)
{
	__u64 v;

	__builtin_memcpy(&v, buf + (off & (DL_PY_FRAME_READ - 1)), sizeof(v));
	return v;
}

/* The thread's current frame through the autoTSSkey pthread key; 0 with out->status set when none. */
static __always_inline __u64 py_top_frame(const struct dl_py_cfg *cfg, struct dl_py_stack *out)
{
	struct task_struct *task = dl_current();
	__u64 tp = dl_arch_thread_pointer(task);
	__u32 tss[2];
	__u64 tstate = 0, frame = 0;

	if (bpf_probe_read_user(tss, sizeof(tss), (void *)cfg->tss_addr) || !tss[0]) {
		out->status = DL_PY_NO_THREAD;
		return 0;
	}
	if (tss[1] >= DL_PY_KEYS_1ST) {
		out->status = DL_PY_KEY_HIGH;
		return 0;
	}
	/* struct pthread_key_data { uintptr_t seq; void *data; } */
	if (bpf_probe_read_user(&tstate, sizeof(tstate), (void *)(tp + (__s32)cfg->specific_off + tss[1] * 16 + 8)) ||
	    !tstate) {
		out->status = DL_PY_NO_THREAD;
		return 0;
	}
	if (bpf_probe_read_user(&frame, sizeof(frame), (void *)(tstate + cfg->tstate_frame)))
		goto fault;
	if ((cfg->flags & DL_PYCFG_CFRAME) && frame &&
	    bpf_probe_read_user(&frame, sizeof(frame), (void *)(frame + cfg->cframe_frame)))
		goto fault;
	return frame;
fault:
	out->status = DL_PY_FAULT;
	return 0;
}

/*
 * Fills out (n, status, frames) for the current thread of a process in
 * py_procs. A global function: the verifier checks it once, not once per path
 * of each probe that calls it (inlined, the walk's loop made the entry probe
 * pass the verifier's limit of a million instructions).
 */
__noinline int py_walk(const struct dl_py_cfg *cfg, struct dl_py_stack *out)
{
	__u32 zero = 0;
	char *buf = bpf_map_lookup_elem(&py_frame_buf, &zero);
	__u64 frame;

	if (!out)
		return 0;
	out->n = 0;
	out->status = DL_PY_OK;
	out->pad = 0;
	if (!buf || !cfg)
		return 0;
	frame = py_top_frame(cfg, out);
	/*
	 * One counter for the loop and the slot: a shim frame of the C stack
	 * takes a slot as code 0 (readers skip it). With a second counter the
	 * verifier's states per (frame, slot) pair passed its limit.
	 */
	for (int i = 0; i < DL_PY_MAX; i++) {
		__u64 code, instr;
		__u32 off;

		if (!frame) {
			out->n = i;
			return i;
		}
		if (bpf_probe_read_user(buf, DL_PY_FRAME_READ, (void *)frame)) {
			out->status = DL_PY_FAULT;
			out->n = i;
			return i;
		}
		code = py_u64(buf, cfg->frame_code);
		frame = py_u64(buf, cfg->frame_prev);
		instr = py_u64(buf, cfg->frame_instr);
		if (cfg->flags & DL_PYCFG_LASTI)
			off = (__u32)(__s32)instr * 2;   /* f_lasti counts 2-byte code units */
		else
			off = (__u32)(instr - code - cfg->code_adaptive);
		if ((cfg->flags & DL_PYCFG_OWNER) &&
		    buf[cfg->frame_owner & (DL_PY_FRAME_READ - 1)] == DL_PY_OWNED_BY_CSTACK)
			code = 0;
		out->f[i].code = code;
		out->f[i].off = off;
		out->f[i].pad = 0;
	}
	out->n = DL_PY_MAX;
	if (frame)
		out->status = DL_PY_TRUNCATED;
	return DL_PY_MAX;
}

#endif
