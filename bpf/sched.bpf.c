// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Scheduler intervals of traced threads. Each thread is in one state at a time
 * (running, runnable, blocked S, blocked D); when it leaves a state, the closed
 * interval is emitted. Only intervals of traced processes reach the ring buffer.
 */
#include "common.bpf.h"

#define TASK_RUNNING 0x0000
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_DEAD 0x0080

/* Set by user space from the BTF of btf_trace_sched_switch: the prev_state argument exists since 5.18. */
const volatile bool switch_has_prev_state = true;

struct task_struct___pre_5_14 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state_of(struct task_struct *t)
{
	struct task_struct___pre_5_14 *old = (void *)t;

	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ(old, state);
}

static __always_inline void enter_state(__u32 tgid, __u32 tid, __u32 state, __u64 now, __u32 waker)
{
	struct thread_state *ts = bpf_map_lookup_elem(&threads, &tid);
	struct thread_state fresh = { .since = now, .state = state, .tgid = tgid };

	if (ts) {
		if (ts->state == state)
			return;
		emit_interval(tgid, tid, ts, now, waker, state);
		ts->since = now;
		ts->state = state;
		return;
	}
	if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST))
		dl_count_drop(DL_DROP_INFLIGHT);
}

/*
 * tp_btf, not raw_tp: the task pointers are typed, so they are read directly
 * (no probe-read helper per field) and can key the task-local traced mark.
 * The clock is read only once a task is known to be traced.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	bool prev_traced = dl_task_traced(prev), next_traced = dl_task_traced(next);
	__u32 prev_state, state;
	__u64 now;

	if (!prev_traced && !next_traced)
		return 0;
	now = bpf_ktime_get_ns();
	if (prev_traced) {
		__u32 tid = prev->pid, prev_tgid = prev->tgid;

		/* The fourth argument, where the tracepoint has it (switch_has_prev_state). */
		prev_state = switch_has_prev_state ? (__u32)ctx[3] : task_state_of(prev);
		if (prev_state & TASK_DEAD) {
			struct thread_state *ts = bpf_map_lookup_elem(&threads, &tid);

			if (ts) {
				emit_interval(prev_tgid, tid, ts, now, 0, 0);
				bpf_map_delete_elem(&threads, &tid);
			}
		} else {
			/*
			 * A preempted task stays runnable even when it had set a
			 * sleeping state on its way to schedule() (as the
			 * tracepoint's own "R+" output says).
			 */
			if (preempt || prev_state == TASK_RUNNING)
				state = DL_ST_RUNQ;
			else if (prev_state & TASK_UNINTERRUPTIBLE)
				state = DL_ST_DISK;
			else
				state = DL_ST_SLEEP;
			enter_state(prev_tgid, tid, state, now, 0);
		}
	}
	if (next_traced)
		enter_state(next->tgid, next->pid, DL_ST_RUNNING, now, 0);
	return 0;
}

static __always_inline int on_wakeup(struct task_struct *p)
{
	__u32 tgid, tid;
	struct thread_state *ts;

	if (!dl_task_traced(p))
		return 0;
	tgid = p->tgid;
	tid = p->pid;
	ts = bpf_map_lookup_elem(&threads, &tid);
	/* A wake-up of a running or already runnable task changes nothing. */
	if (ts && ts->state != DL_ST_SLEEP && ts->state != DL_ST_DISK)
		return 0;
	enter_state(tgid, tid, DL_ST_RUNQ, bpf_ktime_get_ns(), (__u32)bpf_get_current_pid_tgid());
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	return on_wakeup(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	return on_wakeup(p);
}
