// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Process tree: children of traced processes join the traced set here, in the
 * kernel, before they run, so data-loader workers forked at any time are traced
 * from their first instruction.
 */
#include "common.bpf.h"

/* Set by user space from the BTF of btf_trace_sched_process_exit (group_dead argument). */
const volatile bool exit_has_group_dead = true;

static __always_inline struct dl_proc_ev *proc_event(__u32 what, __u32 tgid, __u32 tid)
{
	struct dl_proc_ev *e;

	e = dl_reserve(sizeof(*e), DL_EV_PROC, DL_DROP_PROC, bpf_ktime_get_ns(), tgid, tid);
	if (!e)
		return NULL;
	e->what = what;
	e->ppid = 0;
	e->group_dead = 0;
	e->exit_code = 0;
	e->flags = 0;
	e->cgroup_ino = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

/*
 * Processes with CUDA probes of their own (user space adds each one it
 * attached to, an exec or an exit takes it out): a child one of them forks is
 * held until the collector has attached to it, since the probes of a
 * process do not fire in its children.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DL_MAX_TRACED);
	__type(key, __u32);
	__type(value, __u8);
} fork_hold SEC(".maps");

/*
 * The kfunc (6.13), declared here as bpftool declares it in a vmlinux.h dumped from a kernel that has
 * it: a vmlinux.h from an older kernel (arm64's is 6.12's) does not.
 */
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type, u64 value) __weak __ksym;

/*
 * Stops a new child process before it runs an instruction of its own (the
 * stop is taken on its way to user space); false when it is not held: it
 * shares its parent's memory (vfork, posix_spawn: it execs, and is held
 * there), a debugger follows it, the watchdog turned holds off, or the map
 * is full.
 */
static __always_inline bool hold_child(struct task_struct *parent, struct task_struct *child, __u32 tgid, __u64 now)
{
	__u32 off = 0;

	if (BPF_CORE_READ(child, ptrace) || BPF_CORE_READ(child, mm) == BPF_CORE_READ(parent, mm) ||
	    bpf_map_lookup_elem(&held, &off) || bpf_map_update_elem(&held, &tgid, &now, BPF_ANY))
		return false;
	if (bpf_send_signal_task(child, DL_SIGSTOP, PIDTYPE_TGID, 0)) {
		bpf_map_delete_elem(&held, &tgid);
		return false;
	}
	return true;
}

static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child, const bool can_hold)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid), cpid = BPF_CORE_READ(child, pid);
	struct dl_traced t = { .ppid = ptgid };
	struct dl_proc_ev *e;

	if (!dl_is_traced(ptgid))
		return 0;
	if (ctgid != ptgid && dl_traced_insert(ctgid, &t, BPF_NOEXIST)) {
		dl_count_drop(DL_DROP_TRACED);
		return 0;
	}
	if (ctgid != ptgid) {
		struct dl_py_cfg *py = bpf_map_lookup_elem(&py_procs, &ptgid);

		if (py)
			bpf_map_update_elem(&py_procs, &ctgid, py, BPF_ANY);
	}
	e = proc_event(ctgid != ptgid ? DL_PROC_FORK : DL_PROC_THREAD, ctgid, cpid);
	if (!e)
		return 0;
	e->ppid = ptgid;
	if (can_hold && ctgid != ptgid && bpf_map_lookup_elem(&fork_hold, &ptgid) &&
	    hold_child(parent, child, ctgid, e->h.ts)) {
		e->flags |= DL_PROC_STOPPED;
		/* The collector has work at once: a process held. */
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
		return 0;
	}
	dl_submit(e);
	return 0;
}

/* Kernels without bpf_send_signal_task (6.13): a child is attached to at the collector's next scan. */
SEC("?raw_tp/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child, false);
}

/* With it: a child of a probed process is held until it is attached to, so its first CUDA call is traced. */
SEC("?tp_btf/sched_process_fork")
int BPF_PROG(proc_fork_hold, struct task_struct *parent, struct task_struct *child)
{
	if (!parent || !child)
		return 0;
	return on_fork(parent, child, true);
}

/* --comm NAME: a process that execs with one of these names joins the traced set here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, char[DL_COMM_LEN]);
	__type(value, __u32);
} comm_watch SEC(".maps");

SEC("raw_tp/sched_process_exec")
int BPF_PROG(proc_exec, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct dl_proc_ev *e;
	bool joined = false;

	/* Another program now: the interpreter's layout (if any) and its probes are found again by user space. */
	bpf_map_delete_elem(&py_procs, &tgid);
	bpf_map_delete_elem(&fork_hold, &tgid);
	/* A thread other than the leader exec'd: it took the leader's id, and its old one never exits. */
	if ((__u32)ctx[1] != (__u32)id)
		dl_tid_states_free((__u32)ctx[1]);
	if (!dl_is_traced(tgid)) {
		char comm[DL_COMM_LEN] = {};
		struct dl_traced t = {};

		bpf_get_current_comm(comm, sizeof(comm));
		if (!bpf_map_lookup_elem(&comm_watch, comm))
			return 0;
		t.ppid = BPF_CORE_READ(p, real_parent, tgid);
		if (dl_traced_insert(tgid, &t, BPF_NOEXIST)) {
			dl_count_drop(DL_DROP_TRACED);
			return 0;
		}
		/* This task was running untraced: its cached answer (dl_task_traced) is stale now. */
		__sync_fetch_and_add(&traced_gen, 1);
		joined = true;
	}
	e = proc_event(DL_PROC_EXEC, tgid, (__u32)id);
	if (!e)
		return 0;
	if (joined)
		e->ppid = BPF_CORE_READ(p, real_parent, tgid);
	e->cgroup_ino = (__u32)bpf_get_current_cgroup_id();
	/*
	 * The new program runs nothing of its own before the collector has
	 * attached to what the exec mapped (a static CUDA runtime, the dynamic
	 * linker); the linker then holds it again once the libraries it was
	 * linked with are mapped (exec_pending, cuda.bpf.c's loader_changed).
	 */
	if (bpf_map_update_elem(&exec_pending, &tgid, &(__u8){ 1 }, BPF_ANY) == 0) {
		if (dl_hold_current(tgid, e->h.ts))
			e->flags |= DL_PROC_STOPPED;
		else
			bpf_map_delete_elem(&exec_pending, &tgid);
	}
	if (joined || (e->flags & DL_PROC_STOPPED)) {
		/* The collector has work at once: a new process, or one held. */
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
		return 0;
	}
	dl_submit(e);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(proc_exit, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct thread_state *ts;
	struct dl_proc_ev *e;
	bool group_dead;

	if (!dl_is_traced(tgid))
		return 0;
	/* Raw tracepoint arguments are u64 slots; group_dead is the second. */
	if (exit_has_group_dead)
		group_dead = (bool)ctx[1];
	else
		group_dead = BPF_CORE_READ(p, signal, live.counter) == 0;
	ts = bpf_map_lookup_elem(&threads, &tid);
	if (ts) {
		__u64 now = bpf_ktime_get_ns();

		resume_missed_run(dl_current(), ts, now);
		emit_interval(tgid, tid, ts, now, 0, 0);
		bpf_map_delete_elem(&threads, &tid);
	}
	dl_tid_states_free(tid);
	e = proc_event(DL_PROC_EXIT, tgid, tid);
	if (e) {
		e->group_dead = group_dead;
		e->exit_code = BPF_CORE_READ(p, exit_code);
		dl_submit(e);
	}
	if (group_dead) {
		dl_traced_delete(tgid);
		bpf_map_delete_elem(&exec_pending, &tgid);
		bpf_map_delete_elem(&fork_hold, &tgid);
	}
	return 0;
}
