// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Scheduler intervals of traced threads. Each thread is in one state at a time
 * (running, runnable, blocked S, blocked D); when it leaves a state, the closed
 * interval is emitted. Only intervals of traced processes reach the ring buffer.
 * Also the wake-up edges between traced threads (sched_waking).
 */
#include "common.bpf.h"

#define DL_PF_EXITING 0x00000004

/*
 * A thread past its exit record (proc.bpf.c closed its last interval and
 * deleted its state) still switches out and in until it is dead: no state is
 * made for it anew, or its last switch would write an interval after its exit,
 * even after its parent reaped it (and a flight dump cut before then would
 * miss that record's drop).
 */
static __always_inline bool gone(struct task_struct *t, struct thread_state *ts)
{
	return !ts && (t->flags & DL_PF_EXITING);
}

/* ts: the thread's entry, looked up by the caller (NULL: none yet). */
static __always_inline void enter_state(__u32 tgid, __u32 tid, struct thread_state *ts, __u32 state, __u64 now,
					__u32 waker)
{
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
		prev_state = dl_switch_prev_state(ctx, prev);
		struct thread_state *ts = bpf_map_lookup_elem(&threads, &tid);

		if (ts)
			resume_missed_run(prev, ts, now);
		if (prev_state & TASK_DEAD) {
			if (ts) {
				emit_interval(prev_tgid, tid, ts, now, 0, 0);
				bpf_map_delete_elem(&threads, &tid);
			}
		} else if (!gone(prev, ts)) {
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
			enter_state(prev_tgid, tid, ts, state, now, 0);
		}
	}
	if (next_traced) {
		__u32 ntid = next->pid;
		struct thread_state *nts = bpf_map_lookup_elem(&threads, &ntid);

		if (!gone(next, nts))
			enter_state(next->tgid, ntid, nts, DL_ST_RUNNING, now, 0);
	}
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
	if ((ts && ts->state != DL_ST_SLEEP && ts->state != DL_ST_DISK) || gone(p, ts))
		return 0;
	enter_state(tgid, tid, ts, DL_ST_RUNQ, bpf_ktime_get_ns(), (__u32)bpf_get_current_pid_tgid());
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	return on_wakeup(p);
}

#define DL_PF_KTHREAD 0x00200000

/*
 * Which interrupt context each CPU is in. The preempt count would say it, but
 * it is a per-CPU variable, and this kernel's kallsyms names no per-CPU
 * variable, so a typed ksym of it cannot load: the interrupt tracepoints keep
 * flags instead. They run for every interrupt on the machine, a per-CPU store
 * each (tools/bench table 7 measures it). Flags, not counts: handlers of one
 * kind do not nest on a CPU, and an exit missed while the programs attach
 * (entry seen, exit not yet attached) is undone by the next exit there, where
 * a count would stay wrong for the rest of the trace. Interrupts that pass
 * none of these tracepoints (IPIs of x86's system vectors) are not seen: a
 * wake-up from one counts as the interrupted task's.
 */
struct irq_flags {
	__u8 hard, soft, timer, pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_flags);
} irq_flags SEC(".maps");

static __always_inline struct irq_flags *this_irq_flags(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&irq_flags, &zero);
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(irq_enter, int irq, struct irqaction *action)
{
	struct irq_flags *f = this_irq_flags();

	if (f)
		f->hard = 1;
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(irq_exit, int irq, struct irqaction *action, int ret)
{
	struct irq_flags *f = this_irq_flags();

	if (f)
		f->hard = 0;
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(softirq_enter, unsigned int vec)
{
	struct irq_flags *f = this_irq_flags();

	if (f)
		f->soft = 1;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(softirq_exit, unsigned int vec)
{
	struct irq_flags *f = this_irq_flags();

	if (f)
		f->soft = 0;
	return 0;
}

/*
 * An expiring hrtimer runs its callback (hrtimer_wakeup of a sleep with a
 * timeout) from the local timer interrupt, which passes no irq_handler
 * tracepoint: counted as a hard interrupt, so the task it interrupted is not
 * taken for the waker. (Soft hrtimers run inside a softirq, seen there too.)
 */
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(hrtimer_enter, struct hrtimer *timer, ktime_t *now)
{
	struct irq_flags *f = this_irq_flags();

	if (f)
		f->timer = 1;
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(hrtimer_exit, struct hrtimer *timer)
{
	struct irq_flags *f = this_irq_flags();

	if (f)
		f->timer = 0;
	return 0;
}

static __always_inline __u32 wake_context(struct task_struct *cur)
{
	struct irq_flags *f = this_irq_flags();

	/* A hard interrupt may interrupt a softirq: hard is the inner one then. */
	if (f && (f->hard || f->timer))
		return DL_WAKE_HARDIRQ;
	if (f && f->soft)
		return DL_WAKE_SOFTIRQ;
	/* The idle task is one too: an interrupt that found the CPU idle and was not seen above. */
	if (DL_TASK_READ(cur, flags) & DL_PF_KTHREAD)
		return DL_WAKE_KTHREAD;
	return DL_WAKE_TASK;
}

/*
 * Wake-up edges. sched_waking, not sched_wakeup, because it runs where the
 * waker runs: a wake-up onto an idle CPU is finished there, from an IPI, and
 * sched_wakeup then sees that CPU's idle task as current. The scheduler
 * intervals stay on sched_wakeup: it comes after the wakee is enqueued (and
 * after its switch-out, which sched_waking may precede when the wakee is
 * still leaving its CPU), so the run-queue time matches schedstat's.
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	struct task_struct *cur;
	struct dl_wake_ev *e;
	__u32 wctx, pstate;

	/* What every untraced wake-up pays: the same task-local mark as the other programs. */
	if (!dl_task_traced(p))
		return 0;
	cur = dl_current();
	if (cur == p)
		return 0;
	pstate = task_state_of(p);
	wctx = wake_context(cur);
	if (wctx == DL_WAKE_TASK) {
		__u32 ctid = DL_TASK_READ(cur, pid);
		struct thread_state *ts;

		if (!dl_cur_traced(cur))
			return 0;
		/* A hand-off is made on a CPU: the waker's run is part of its producer's window. */
		ts = bpf_map_lookup_elem(&threads, &ctid);
		if (ts)
			resume_missed_run(cur, ts, bpf_ktime_get_ns());
	} else if (!(pstate & TASK_UNINTERRUPTIBLE)) {
		/* A timer or a signal from interrupt context: no I/O of the job's ended. */
		return 0;
	}
	e = dl_reserve(sizeof(*e), DL_EV_WAKE, DL_DROP_SCHED, bpf_ktime_get_ns(), p->tgid, p->pid);
	if (!e)
		return 0;
	e->waker_tgid = DL_TASK_READ(cur, tgid);
	e->waker_tid = DL_TASK_READ(cur, pid);
	e->wakee_tgid = p->tgid;
	e->wakee_tid = p->pid;
	e->ctx = wctx;
	e->wakee_state = pstate & TASK_UNINTERRUPTIBLE ? DL_ST_DISK : DL_ST_SLEEP;
	dl_submit(e);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	return on_wakeup(p);
}
