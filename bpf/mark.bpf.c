// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Step markers: a uprobe on a function of the target (--step-on SYMBOL, or
 * autograd's entry when learned), and a hardware watchpoint on a Python
 * function's code object (--step-on NAME of a Python function).
 */
#include "common.bpf.h"
#include "pytop.bpf.h"

static __always_inline void mark(__u32 mark_id)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct dl_mark_ev *e;

	e = dl_reserve(sizeof(*e), DL_EV_MARK, DL_DROP_CUDA, bpf_ktime_get_ns(), id >> 32, (__u32)id);
	if (!e)
		return;
	e->mark_id = mark_id;
	e->pad = 0;
	dl_submit(e);
}

SEC("uprobe")
int BPF_UPROBE(step_mark)
{
	/* The marker's kind (enum dl_mark_ids): where no attach cookie can carry one, 0. */
	mark(has_attach_cookie ? (__u32)bpf_get_attach_cookie(ctx) : 0);
	return 0;
}

/* The watched code objects of each process (user/capture/pywatch.c fills it). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct dl_pywatch_key);
	__type(value, struct dl_pywatch);
} py_watches SEC(".maps");

/*
 * Where the frame's current instruction is: its pointer (3.11+), or (3.10)
 * its index f_lasti, in 2-byte code units, into the code object's bytecode.
 */
static __always_inline __u64 current_instr(const struct dl_py_cfg *cfg, const struct dl_pywatch *w, __u64 frame,
					   __u64 instr)
{
	__u64 code = 0, bytes = 0;

	if (!(cfg->flags & DL_PYCFG_LASTI))
		return instr;
	if (!w->co_code || (__s32)instr < 0 ||
	    bpf_probe_read_user(&code, sizeof(code), (void *)(frame + cfg->frame_code)) ||
	    bpf_probe_read_user(&bytes, sizeof(bytes), (void *)(code + w->co_code)) || !bytes)
		return 0;
	/* A bytes object's data start 32 bytes in (pyframes.h: DL_PYSNAP_BYTES_HEAD). */
	return bytes + DL_PYSNAP_BYTES_HEAD + (__u64)(__u32)(__s32)instr * 2;
}

/*
 * A write to a watched code object's reference count: the debug exception
 * comes after the write, so the count read now is the new one. An increment
 * is a call making its frame, unless the thread's current instruction loads
 * the code object as a constant or makes a function of it (the def, which
 * runs after the code object exists and so after it can be watched).
 */
SEC("perf_event")
int py_call_watch(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct dl_pywatch_key k = { .tgid = id >> 32, .code = ctx->addr };
	const struct dl_py_cfg *cfg;
	struct dl_pywatch *w = bpf_map_lookup_elem(&py_watches, &k);
	__u64 head[2] = { 0, 0 }, refs, last, frame, instr = 0;
	__u16 status = 0;
	__u8 op = 0;

	if (!w || bpf_probe_read_user(head, sizeof(head), (void *)k.code))
		return 0;
	refs = head[0];
	__sync_fetch_and_add(&w->writes, 1);
	last = w->refs;
	w->refs = refs;
	/*
	 * 3.12+ keep the count in the low half (the high half says immortal): it
	 * moves by one. A call leaves two at least (the function's reference and
	 * the frame's): one is a code object being freed, which 3.12+ bring back
	 * to 1 to tell their code watchers.
	 */
	if ((__u32)refs != (__u32)(last + 1) || (__u32)refs < 2)
		return 0;
	/* Freed and its memory another object's (a transient copy the compiler made, say): no call of it. */
	if (head[1] != w->code_type)
		return 0;
	cfg = bpf_map_lookup_elem(&py_procs, &k.tgid);
	if (cfg && w->op_load_const && (frame = py_top_frame(cfg, &status)) &&
	    !bpf_probe_read_user(&instr, sizeof(instr), (void *)(frame + cfg->frame_instr)) &&
	    (instr = current_instr(cfg, w, frame, instr)) &&
	    !bpf_probe_read_user(&op, sizeof(op), (void *)instr) &&
	    (op == w->op_load_const || op == w->op_make_function))
		return 0;
	mark(w->mark_id);
	return 0;
}
