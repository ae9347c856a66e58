// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Python lines for waits and for CPU time, from the frame walker the CUDA
 * probes use (pyframes.bpf.h):
 * - py_wait_switch: a traced Python thread that blocks (not preempted) has
 *   its frames walked at sched_switch, where it is still current and its
 *   memory readable; the walk is kept in the thread's slot and written as a
 *   DL_EV_PYSTACK only when the thread runs again after py_wait_min_ns or
 *   more, so short waits (the GIL's hand-offs, a condition variable) cost a
 *   walk but no record.
 * - py_cpu_sample: a cpu-clock perf event per CPU (user space opens it at
 *   tens of Hz); a sample that lands in a traced Python thread walks its
 *   frames, so samples count a thread's CPU time by line.
 * Both are optional ("?"): user space loads them where the walker loads (the
 * kernel's verifier checks global functions with pointer arguments) and
 * attaches them once a traced process runs CPython. A block's cost is bounded:
 * one walk of at most DL_PY_MAX frames, each one read of the frame and one
 * array lookup for its code object's snapshot (sent the first time only).
 */
#include "common.bpf.h"
#include "pyframes.bpf.h"

/* Waits shorter than this are walked but not written (user space sets it). */
const volatile __u64 py_wait_min_ns = 1000000;

/* A thread's walk at its last block, until it runs again. */
struct py_blocked {
	__u64 since;               /* when it blocked; 0: nothing pending */
	__u32 state;               /* DL_ST_SLEEP or DL_ST_DISK */
	__u32 tgid;
	struct dl_py_stack py;
};

/* By thread id; LRU: a thread that exits leaves its slot to be reused, never a full map. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct py_blocked);
} py_blocked SEC(".maps");

/* A zeroed value to make a slot from (too big for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_blocked);
} py_blocked_zero SEC(".maps");

static __always_inline struct dl_pystack_ev *py_reserve(__u64 ts, __u32 tgid, __u32 tid, __u32 why)
{
	struct dl_pystack_ev *e = dl_reserve(sizeof(*e), DL_EV_PYSTACK, DL_DROP_SCHED, ts, tgid, tid);

	if (e)
		e->why = why;
	return e;
}

/* prev, the current task, blocks: its frames are walked into its slot. */
static __always_inline void note_block(struct task_struct *prev, __u32 prev_state, __u64 now)
{
	__u32 tgid = prev->tgid, tid = prev->pid, zero = 0;
	const struct dl_py_cfg *cfg;
	struct py_blocked *b;
	void *fresh;

	if (!py_known)
		return;
	cfg = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!cfg)
		return;
	fresh = bpf_map_lookup_elem(&py_blocked_zero, &zero);
	b = dl_tid_state(&py_blocked, tid, true, fresh);
	if (!b)
		return;
	py_walk(cfg, &b->py, DL_PY_SLOT_SWITCH);
	if (!b->py.n) {
		b->since = 0;   /* a thread without Python frames: nothing to name */
		return;
	}
	py_name_frames(cfg, &b->py, tgid, DL_PY_SLOT_SWITCH);
	b->since = now;
	b->tgid = tgid;
	b->state = (prev_state & TASK_UNINTERRUPTIBLE) ? DL_ST_DISK : DL_ST_SLEEP;
}

/* next runs again: its wait is written if it was long enough. */
static __always_inline void note_resume(struct task_struct *next, __u64 now)
{
	__u32 tid = next->pid;
	struct py_blocked *b = bpf_map_lookup_elem(&py_blocked, &tid);
	struct dl_pystack_ev *e;
	__u64 since;

	if (!b || !b->since)
		return;
	since = b->since;
	b->since = 0;
	if (now - since < py_wait_min_ns)
		return;
	e = py_reserve(now, b->tgid, tid, DL_PYSTACK_WAIT);
	if (!e)
		return;
	e->wait_ns = now - since;
	e->state = b->state;
	__builtin_memcpy(&e->py, &b->py, sizeof(e->py));
	dl_submit(e);
}

SEC("?tp_btf/sched_switch")
int BPF_PROG(py_wait_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	bool prev_traced = dl_task_traced(prev), next_traced = dl_task_traced(next);
	__u32 prev_state;
	__u64 now;

	if (!prev_traced && !next_traced)
		return 0;
	now = bpf_ktime_get_ns();
	if (prev_traced && !preempt) {
		prev_state = dl_switch_prev_state(ctx, prev);
		/* A sleep (S) or an uninterruptible wait (D); not a preemption, not an exit. */
		if (prev_state != TASK_RUNNING && !(prev_state & TASK_DEAD))
			note_block(prev, prev_state, now);
	}
	if (next_traced)
		note_resume(next, now);
	return 0;
}

SEC("?perf_event")
int py_cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = dl_current();
	const struct dl_py_cfg *cfg;
	struct dl_py_stack *st;
	struct dl_pystack_ev *e;
	__u64 id;
	__u32 tgid;

	if (!py_known || !dl_cur_traced(task))
		return 0;
	id = bpf_get_current_pid_tgid();
	tgid = id >> 32;
	cfg = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!cfg)
		return 0;
	st = py_frames(cfg, tgid, DL_PY_SLOT_SAMPLE);
	/* A thread of the process that never ran Python (a BLAS pool's): nothing to name. */
	if (!st || !st->n)
		return 0;
	e = py_reserve(bpf_ktime_get_ns(), tgid, (__u32)id, DL_PYSTACK_CPU);
	if (!e)
		return 0;
	e->wait_ns = 0;
	e->state = 0;
	__builtin_memcpy(&e->py, st, sizeof(e->py));
	dl_submit(e);
	return 0;
}
