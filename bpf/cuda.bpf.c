// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CUDA runtime uprobes. One entry and one return program serve every API: the
 * probe's cookie carries the API id and how to capture its arguments, and
 * user space decodes the raw registers (user/records/cuda_api.h).
 *
 * Each program has twins, one of which user space loads (SEC("?..."),
 * user/capture/tracer.c): on uprobe_multi links (6.6+), or one classic uprobe
 * per function, its cookie from the attach cookie (5.15+) or from the probed
 * file offset (probe_cookies); "np" twins leave out the CPython frames, for
 * kernels whose verifier cannot check py_walk as a global function (pointer
 * arguments, 5.12+).
 */
#include "common.bpf.h"
#include "agg.bpf.h"
#include "pyframes.bpf.h"

/*
 * Set by user space when the probes follow the library file (uprobe_multi
 * with pid 0, classic uprobes with pid -1) rather than one process: they
 * fire in every process that maps the file, and only the traced set's calls
 * go on. The entry probes decide: a return finds no frame in a process whose
 * entry was turned away (on_return).
 */
const volatile bool file_probes = false;

/* Whether a probe fired in a process dlbpf does not trace (only probes that follow the file can). */
static __always_inline bool untraced_here(struct task_struct *task)
{
	return file_probes && !dl_cur_traced(task);
}

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
	/* Slots 7 and 8: the stack on x86-64, x6 and x7 on arm64 (bpf/arch.bpf.h). */
	if (dl_arch_stack_args(ctx, PT_REGS_SP(ctx), &arg[6], 2))
		return DL_CUDA_ARGS_FAULT;
	return 0;
}

/* The current thread's in-flight stack (task-local storage, common.bpf.h). */
static __always_inline struct call_stack *stack_of(struct task_struct *task, __u32 tid, bool create)
{
	struct call_stack *st = dl_calls(task, tid, create);

	if (!st && create)
		dl_count_drop(DL_DROP_INFLIGHT);
	return st;
}

/*
 * Forgets the calls that returned without their return probe firing: the
 * kernel installs no return probe past 64 nested ones per thread, and a
 * longjmp or an exception skips it. The stack grows down, so a call still
 * running has its entry sp at or above sp (at, when it tail-called the
 * next); one below has returned. Without this a missed return would leave
 * every later call of the thread nested inside it. Each forgotten frame is
 * a call never recorded: counted with the calls too deep for a frame. A call
 * made on another stack above the live frames (a signal handler on a
 * sigaltstack mapped higher) makes them look returned: they are lost and
 * counted the same way, never nested wrongly.
 */
static __always_inline void unwind(struct call_stack *st, __u64 sp)
{
	if (st->depth > DL_MAX_DEPTH) {
		if (st->deep_sp >= sp)
			return;
		/* The calls without a frame were counted when they were entered. */
		st->depth = DL_MAX_DEPTH;
	}
	for (int i = 0; i < DL_MAX_DEPTH; i++) {
		__u32 d = st->depth, top;

		if (d == 0 || d > DL_MAX_DEPTH)
			break;
		top = d - 1;
		/*
		 * Checked again after the subtraction: 6.1's verifier loses the
		 * bound of d - 1 once widened for the index ("R3 unbounded memory
		 * access"); every kernel accepts it checked here.
		 */
		barrier_var(top);
		if (top >= DL_MAX_DEPTH || st->f[top].sp >= sp)
			break;
		st->depth = top;
		dl_count_drop(DL_DROP_DEPTH);
	}
}

/*
 * A return that leaves a frame of the same entry sp on top ends a tail call
 * (the outer call jumped to the inner one): the outer call's return fires
 * next, in the same pass of the kernel's return trampoline, with no user code
 * between. An entry that comes first shows that return will never come (its
 * probe was not installed: the kernel could not, or the return link came
 * after the entry link). Kept, the frame would hold every later call made at
 * that stack depth, a training loop's, nested in it: it goes, counted as a
 * call lost like those unwind forgets.
 */
static __always_inline void drop_stale_tail(struct call_stack *st)
{
	__u64 tail = st->tail_sp;
	__u32 d;

	if (!tail)
		return;
	st->tail_sp = 0;
	d = st->depth;
	if (d == 0 || d > DL_MAX_DEPTH)
		return;
	d -= 1;
	/* The verifier must see the index checked after the subtraction. */
	barrier_var(d);
	if (d >= DL_MAX_DEPTH || st->f[d].sp != tail)
		return;
	st->depth = d;
	dl_count_drop(DL_DROP_DEPTH);
}

/*
 * True when a driver API is entered inside an entry-only runtime call (a
 * launch the runtime forwards to the driver): that launch's frame is still
 * live above us. Calls with a return probe are nested through depth instead.
 */
static __always_inline bool inside_runtime_launch(struct pt_regs *ctx, struct call_stack *st, __u64 sp)
{
	return st && dl_arch_inside(ctx, sp, st->rt_sp, st->rt_tag, st->rt_site);
}

/* Keeps a runtime launch entered at sp with return address ra as the frame driver calls nest in. */
static __always_inline void keep_runtime_launch(struct call_stack *st, __u64 sp, __u64 ra)
{
	st->rt_site = ra;
	st->rt_sp = dl_arch_frame_tag(sp, ra, &st->rt_tag) ? 0 : sp;
}

/*
 * The dynamic linker's _dl_debug_state, called whenever its link map changed:
 * after an exec the process is held here until the collector has seen the
 * libraries it was linked with mapped (exec_pending), so that calls made
 * before main() are traced. Else nothing: a dlopen of CUDA's has its own hold.
 */
static __always_inline int loader_changed(__u64 id, __u64 cookie)
{
	__u32 tgid = id >> 32;
	__u64 now = bpf_ktime_get_ns();
	struct dl_cuda_ev *e;

	if (!bpf_map_lookup_elem(&exec_pending, &tgid) || !dl_hold_current(tgid, now))
		return 0;
	e = dl_reserve(sizeof(*e), DL_EV_CUDA, DL_DROP_CUDA, now, tgid, (__u32)id);
	if (!e) {
		/* No one would continue it: let it go at once. */
		bpf_map_delete_elem(&held, &tgid);
		bpf_send_signal(DL_SIGCONT);
		return 0;
	}
	__builtin_memset(&e->dur_ns, 0, sizeof(*e) - sizeof(e->h));
	e->api = cookie & DL_COOKIE_API_MASK;
	e->flags = DL_CUDA_ENTRY_ONLY | DL_CUDA_STOPPED;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/*
 * The caller's stack, from the frame pointers, at word skip of the tail (past
 * the Python frames). At return the callee has restored the caller's frame
 * pointer, so the walk gives the callers' return addresses; its first is the
 * return address, the ip at return (set again, should the walk have failed).
 * The record's size says how many frames it holds.
 */
static __always_inline void add_stack(struct pt_regs *ctx, struct dl_cuda_ev *e, __u32 skip)
{
	__u64 *stack = (__u64 *)((char *)e->stack + skip);
	long n = bpf_get_stack(ctx, stack, DL_STACK_MAX * sizeof(__u64), BPF_F_USER_STACK);

	stack[0] = PT_REGS_IP(ctx);
	if (n < (long)sizeof(__u64))
		n = sizeof(__u64);
	e->h.size = sizeof(*e) + skip + (n & ~7l);
}

/*
 * The process's CPython layout when the call is one that carries Python
 * frames, else NULL; always NULL in an "np" twin (py_ok false, a constant:
 * the call to py_walk is then compiled out).
 */
static __always_inline const struct dl_py_cfg *py_cfg_for(__u64 cookie, __u32 tgid, const bool py_ok)
{
	return py_ok && (cookie & DL_COOKIE_PY) && py_known ? bpf_map_lookup_elem(&py_procs, &tgid) : NULL;
}

/*
 * Reserves a call's record with room for what its tail will hold; four
 * reservations, each of a size the verifier sees as constant.
 */
static __always_inline struct dl_cuda_ev *reserve_call(bool stacks, const struct dl_py_cfg *py, __u64 ts,
						       __u32 tgid, __u32 tid)
{
	const __u32 s = DL_STACK_MAX * sizeof(__u64), p = sizeof(struct dl_py_stack);
	struct dl_cuda_ev *e;

	if (stacks && py)
		e = dl_reserve(sizeof(*e) + p + s, DL_EV_CUDA, DL_DROP_CUDA, ts, tgid, tid);
	else if (stacks)
		e = dl_reserve(sizeof(*e) + s, DL_EV_CUDA, DL_DROP_CUDA, ts, tgid, tid);
	else if (py)
		e = dl_reserve(sizeof(*e) + p, DL_EV_CUDA, DL_DROP_CUDA, ts, tgid, tid);
	else
		e = dl_reserve(sizeof(*e), DL_EV_CUDA, DL_DROP_CUDA, ts, tgid, tid);
	return e;
}

/* Fills the tail reserve_call made room for; the flags come after (the callers set e->flags). */
static __always_inline __u16 fill_tail(struct pt_regs *ctx, struct dl_cuda_ev *e, bool stacks,
				       const struct dl_py_cfg *py)
{
	__u32 skip = py ? sizeof(struct dl_py_stack) : 0;

	if (py) {
		__u32 slot = DL_PY_SLOT_CALL;
		struct dl_py_stack *walked = bpf_map_lookup_elem(&py_stack_buf, &slot);
		struct dl_py_stack *out = (struct dl_py_stack *)e->stack;

		if (walked) {
			__builtin_memcpy(out, walked, sizeof(*out));
		} else {
			out->n = 0;
			out->status = DL_PY_FAULT;
		}
		e->h.size = sizeof(*e) + skip;
	}
	if (stacks)
		add_stack(ctx, e, skip);
	return py ? DL_CUDA_PY : 0;
}

/* An entry-only call's record but for its arguments and site; the Python frames, if any, are walked here. */
static __always_inline void fill_entry(struct pt_regs *ctx, struct dl_cuda_ev *e, __u64 cookie,
				       const struct dl_py_cfg *py, __u32 depth)
{
	e->dur_ns = 0;
	e->ret = 0;
	e->api = cookie & DL_COOKIE_API_MASK;
	e->flags = DL_CUDA_ENTRY_ONLY | fill_tail(ctx, e, false, py);
	e->depth = depth;
	e->out = 0;
}

/*
 * Writes a runtime launch as a struct dl_launch_ev, one cache line, when its
 * arguments fit one (include/dlbpf/events.h); false when they do not, and
 * the caller writes the dl_cuda_ev. frame: the return address and argument
 * slots 7 and 8 at entry (dl_arch_launch_frame).
 */
static __always_inline bool put_launch(struct pt_regs *ctx, __u64 cookie, __u64 id, __u32 depth, __u64 ts,
				       const __u64 *frame)
{
	/* dim3 by value: {x, y} in one register, z in the low half of the next. */
	__u64 grid = PT_REGS_PARM2(ctx), gz = PT_REGS_PARM3(ctx), block = PT_REGS_PARM4(ctx), bz = PT_REGS_PARM5(ctx);
	__u32 bx = (__u32)block, by = block >> 32;
	struct dl_launch_ev *e;

	if ((grid >> 48) || (__u32)gz > 0xffff || (bx >> DL_LAUNCH_BX_BITS) || (by >> DL_LAUNCH_BY_BITS) ||
	    ((__u32)bz >> DL_LAUNCH_BZ_BITS) || frame[1] > 0xffff || (depth >> DL_LAUNCH_DEPTH_BITS))
		return false;
	e = dl_reserve(sizeof(*e), DL_EV_LAUNCH, DL_DROP_CUDA, ts, id >> 32, (__u32)id);
	if (!e)
		return true;   /* counted, as the full record's would be */
	e->func = PT_REGS_PARM1(ctx);
	e->stream = frame[2];
	e->site = frame[0];
	e->grid_x = (__u32)grid;
	e->grid_y = grid >> 32;
	e->grid_z = gz;
	e->api = cookie & DL_COOKIE_API_MASK;
	e->shmem = frame[1];
	e->block_depth = bx | by << DL_LAUNCH_BX_BITS | (__u32)bz << (DL_LAUNCH_BX_BITS + DL_LAUNCH_BY_BITS) |
			 depth << (DL_LAUNCH_BX_BITS + DL_LAUNCH_BY_BITS + DL_LAUNCH_BZ_BITS);
	dl_submit(e);
	return true;
}

static __always_inline int on_entry_only(struct pt_regs *ctx, __u64 cookie, const bool py_ok)
{
	struct task_struct *task = dl_current();
	__u64 id = dl_task_ids(task);
	__u32 tid = (__u32)id;
	__u64 sp = PT_REGS_SP(ctx);
	bool driver = cookie & DL_COOKIE_DRIVER;
	/*
	 * A runtime launch is the frame a driver call made inside it nests in:
	 * kept once a driver library is probed. Before, a thread that made no
	 * call with a return probe gets no stack, and a launch in --summary
	 * mode reads no return address (a user read, ~90 ns: tools/bench/README.md).
	 */
	bool keep_rt = !driver && driver_probed;
	const struct dl_py_cfg *py;
	struct call_stack *st;
	struct dl_cuda_ev *e;
	__u64 ts;
	__u32 depth;

	if (untraced_here(task))
		return 0;
	if (!cookie) {
		/* A probe whose site has no cookie (probe_cookies): a call not recorded. */
		dl_count_drop(DL_DROP_INFLIGHT);
		return 0;
	}
	if (cookie & DL_COOKIE_LOADER)
		return loader_changed(id, cookie);
	st = stack_of(task, tid, keep_rt);
	if (st) {
		drop_stale_tail(st);
		unwind(st, sp);
	}
	depth = st ? st->depth : 0;
	if (agg_mode && (cookie & DL_COOKIE_AGG)) {
		__u64 arg[DL_CUDA_NARGS] = {};

		/* The kernel handle; a launch-config API (DEREF_CFG) passes it second. */
		__u64 p1 = PT_REGS_PARM1(ctx), p2 = PT_REGS_PARM2(ctx);

		/* Both loaded first: the verifier refuses a ctx load at a computed offset. */
		barrier_var(p1);
		barrier_var(p2);
		arg[0] = (cookie & DL_COOKIE_DEREF_CFG) ? p2 : p1;
		if (driver) {
			if (inside_runtime_launch(ctx, st, sp))
				depth += 1;
		} else if (st && keep_rt) {
			__u64 ra = 0;

			st->rt_sp = 0;
			if (!dl_arch_return_address(ctx, sp, &ra))
				keep_runtime_launch(st, sp, ra);
		}
		dl_agg_add(id >> 32, cookie, arg, depth, 0, true, 0);
		return 0;
	}
	/* Python frames only on launches with --stacks (the cookie says): the dearest probe stays cheap. */
	py = py_cfg_for(cookie, id >> 32, py_ok);
	/* Before the call's reservation: the snapshots of new code objects go out ahead of it (fill_tail copies the walk). */
	if (py)
		py_frames(py, id >> 32, DL_PY_SLOT_CALL);
	ts = bpf_ktime_get_ns();
	if (!driver && (cookie & DL_COOKIE_STACK) && !(cookie & DL_COOKIE_STACK3)) {
		/*
		 * A runtime launch: its return address (the call site, and for
		 * nesting below) and argument slots 7 and 8, read at once (one
		 * user read on x86-64, the dearest part of this probe: bpf/arch.bpf.h).
		 */
		__u64 frame[3];
		bool fault = dl_arch_launch_frame(ctx, sp, frame);

		if (fault)
			frame[0] = frame[1] = frame[2] = 0;
		if (st && keep_rt) {
			st->rt_sp = 0;
			if (!fault)
				keep_runtime_launch(st, sp, frame[0]);
		}
		if (!fault && !py && (cookie & DL_COOKIE_LAUNCH) && put_launch(ctx, cookie, id, depth, ts, frame))
			return 0;
		e = reserve_call(false, py, ts, id >> 32, tid);
		if (!e)
			return 0;
		fill_entry(ctx, e, cookie, py, depth);
		capture_args(ctx, cookie & ~(__u64)DL_COOKIE_STACK, e->arg);
		e->arg[6] = frame[1];
		e->arg[7] = frame[2];
		e->site = frame[0];
		if (fault)
			e->flags |= DL_CUDA_ARGS_FAULT | DL_CUDA_SITE_FAULT;
		dl_submit(e);
		return 0;
	}
	e = reserve_call(false, py, ts, id >> 32, tid);
	if (!e)
		return 0;
	fill_entry(ctx, e, cookie, py, depth);
	e->arg[6] = e->arg[7] = 0;
	/* The call site; a runtime call also keeps it for nesting below. Zeroed on a fault. */
	if (dl_arch_return_address(ctx, sp, &e->site))
		e->flags |= DL_CUDA_SITE_FAULT;
	e->flags |= capture_args(ctx, cookie, e->arg);
	/* arg[6], arg[7] and out are adjacent (include/dlbpf/events.h). */
	if ((cookie & DL_COOKIE_STACK3) && dl_arch_stack_args(ctx, sp, &e->arg[6], 3))
		e->flags |= DL_CUDA_ARGS_FAULT;
	/* A launch config struct: grid, block, shared memory, stream (40 bytes in both APIs). */
	if ((cookie & DL_COOKIE_DEREF_CFG) &&
	    (!e->arg[0] || bpf_probe_read_user(&e->arg[3], 5 * sizeof(__u64), (void *)e->arg[0])))
		e->flags |= DL_CUDA_ARGS_FAULT;
	if (driver) {
		if (inside_runtime_launch(ctx, st, sp)) {
			e->depth += 1;
			e->flags |= DL_CUDA_IN_RUNTIME;
		}
	} else if (st && keep_rt) {
		st->rt_sp = 0;
		if (!(e->flags & DL_CUDA_SITE_FAULT))
			keep_runtime_launch(st, sp, e->site);
	}
	dl_submit(e);
	return 0;
}

SEC("?uprobe.multi")
int BPF_UPROBE(cuda_entry_only)
{
	return on_entry_only(ctx, bpf_get_attach_cookie(ctx), true);
}

SEC("?uprobe")
int BPF_UPROBE(cuda_eo_one)
{
	return on_entry_only(ctx, dl_entry_cookie(ctx), true);
}

SEC("?uprobe")
int BPF_UPROBE(cuda_eo_onenp)
{
	return on_entry_only(ctx, dl_entry_cookie(ctx), false);
}

static __always_inline int on_enter(struct pt_regs *ctx, __u64 cookie)
{
	struct task_struct *task = dl_current();
	struct call_stack *st;
	__u64 sp = PT_REGS_SP(ctx);
	struct call_frame *f;
	__u32 d;

	if (untraced_here(task))
		return 0;
	st = stack_of(task, (__u32)dl_task_ids(task), true);
	if (!st)
		return 0;
	if (!cookie) {
		/* No cookie for this site (probe_cookies): the frame still goes on, for its return to pop. */
		dl_count_drop(DL_DROP_INFLIGHT);
	}
	drop_stale_tail(st);
	unwind(st, sp);
	/*
	 * Loaded again, not carried over from unwind: 6.1's verifier follows the
	 * impossible path where unwind left depth above DL_MAX_DEPTH and this
	 * check below it (umin 5, umax 3), and rejects the index there.
	 */
	d = READ_ONCE(st->depth);
	if (d >= DL_MAX_DEPTH) {
		/* Still counted so the return probe pops in step; the call itself is lost, and says so. */
		if (d == DL_MAX_DEPTH)
			st->deep_sp = sp;
		st->depth = d + 1;
		dl_count_drop(DL_DROP_DEPTH);
		return 0;
	}
	f = &st->f[d];
	f->cookie = cookie;
	f->sp = sp;
	f->flags = capture_args(ctx, cookie, f->arg);
	if ((cookie & DL_COOKIE_DRIVER) && inside_runtime_launch(ctx, st, sp))
		f->flags |= DL_CUDA_IN_RUNTIME;
	st->depth = d + 1;
	/* Last, so the recorded duration excludes the capture above. */
	f->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("?uprobe.multi")
int BPF_UPROBE(cuda_enter)
{
	return on_enter(ctx, bpf_get_attach_cookie(ctx));
}

SEC("?uprobe")
int BPF_UPROBE(cuda_enter_one)
{
	return on_enter(ctx, dl_entry_cookie(ctx));
}


/* A SIGCONT (or SIGKILL) for a held process, from anyone: it is held no more. */
SEC("raw_tp/signal_generate")
int BPF_PROG(hold_released, int sig, struct kernel_siginfo *info, struct task_struct *task)
{
	__u32 tgid;

	if (sig != DL_SIGCONT && sig != DL_SIGKILL)
		return 0;
	tgid = BPF_CORE_READ(task, tgid);
	bpf_map_delete_elem(&held, &tgid);
	return 0;
}

/* Per-CPU scratch for the name dlopen was given. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, char[256]);
} dlopen_name SEC(".maps");

/* True when the C string at uaddr holds "cuda" (libcudart, libcuda, libtorch_cuda, ...) or "nccl". */
static __always_inline bool name_mentions_cuda(__u64 uaddr)
{
	__u32 zero = 0;
	char *s = bpf_map_lookup_elem(&dlopen_name, &zero);
	long n;

	if (!s || !uaddr)
		return false;
	n = bpf_probe_read_user_str(s, 256, (void *)uaddr);
	if (n < 4)
		return false;
	for (int i = 0; i < 252; i++) {
		if (i + 4 > n)
			break;
		if (s[i] == 'c' && s[i + 1] == 'u' && s[i + 2] == 'd' && s[i + 3] == 'a')
			return true;
		if (s[i] == 'n' && s[i + 1] == 'c' && s[i + 2] == 'c' && s[i + 3] == 'l')
			return true;
	}
	return false;
}

/*
 * Writes a returning call as a struct dl_call_short_ev with its first nargs
 * arguments (a constant: one reservation of a size the verifier sees), when
 * the call fits one (include/dlbpf/events.h); false when it does not, and the
 * caller writes the dl_cuda_ev. d: the frame's index, its depth at entry.
 */
static __always_inline bool put_short(struct pt_regs *ctx, __u64 cookie, __u64 id, const struct call_frame *f,
				      __u32 d, __u64 now, const int nargs)
{
	__s64 ret = PT_REGS_RC(ctx);
	__u32 depth = d + !!(f->flags & DL_CUDA_IN_RUNTIME);
	struct dl_call_short_ev *e;

	if ((__s64)(__s32)ret != ret || f->flags > 0xff || depth > 0xff)
		return false;
	e = dl_reserve(sizeof(*e) + nargs * sizeof(__u64), DL_EV_CALL_SHORT, DL_DROP_CUDA, f->ts, id >> 32, (__u32)id);
	if (!e)
		return true;   /* counted, as the full record's would be */
	e->dur_ns = now - f->ts;
	/* The call site: the kernel set the ip to the return address (see cuda_return). */
	e->site = PT_REGS_IP(ctx);
	e->ret = ret;
	e->api = cookie & DL_COOKIE_API_MASK;
	e->flags = f->flags;
	e->depth = depth;
	for (int i = 0; i < nargs; i++)
		e->arg[i] = f->arg[i];
	dl_submit(e);
	return true;
}

/*
 * cookie_known false: the probe cannot tell its cookie (no attach cookies), so
 * the frame's, written at entry by the same function's probe, stands for it.
 */
static __always_inline int on_return(struct pt_regs *ctx, __u64 cookie, const bool cookie_known, const bool py_ok)
{
	__u64 now = bpf_ktime_get_ns();
	struct task_struct *task = dl_current();
	__u64 id = dl_task_ids(task);
	__u32 tid = (__u32)id;
	struct call_stack *st = dl_calls(task, tid, false);
	/* x86-64's return popped the return address; arm64's sp is the entry's (bpf/arch.bpf.h). */
	__u64 entry_sp = dl_arch_entry_sp(ctx);
	const struct dl_py_cfg *py;
	struct call_frame *f;
	struct dl_cuda_ev *e;
	__u16 tail;
	__u32 d;

	if (!st)
		return 0;
	unwind(st, entry_sp);
	if (st->depth > DL_MAX_DEPTH) {
		/* A call without a frame; the outermost of them leaves the frames' calls in flight. */
		if (entry_sp != st->deep_sp) {
			st->depth -= 1;
			return 0;
		}
		st->depth = DL_MAX_DEPTH;
		st->tail_sp = st->f[DL_MAX_DEPTH - 1].sp == entry_sp ? entry_sp : 0;
		return 0;
	}
	if (st->depth == 0)
		return 0; /* entered before we attached */
	d = st->depth - 1;
	/* The compiler knows d < DL_MAX_DEPTH from above; the verifier must see it checked. */
	barrier_var(d);
	if (d >= DL_MAX_DEPTH)
		return 0;
	f = &st->f[d];
	if (f->sp != entry_sp)
		return 0; /* a call with no frame (its entry probe came later, or found no stack): keep the others */
	st->depth = d;
	st->tail_sp = 0;
	if (d > 0) {
		__u32 below = d - 1;

		barrier_var(below);
		if (below < DL_MAX_DEPTH && st->f[below].sp == entry_sp)
			st->tail_sp = entry_sp;
	}
	if (!cookie_known)
		cookie = f->cookie;
	if (!cookie)
		return 0;   /* its entry counted the loss */
	if ((f->cookie & DL_COOKIE_API_MASK) != (cookie & DL_COOKIE_API_MASK))
		return 0; /* the same call under two names: nothing reliable to emit */
	if (!(cookie & DL_COOKIE_LOADER) &&
	    dl_agg_add(id >> 32, cookie, f->arg, d + !!(f->flags & DL_CUDA_IN_RUNTIME), now - f->ts, false,
		       PT_REGS_RC(ctx)))
		return 0;

	py = py_cfg_for(cookie, id >> 32, py_ok);
	/* Before the call's reservation: the snapshots of new code objects go out ahead of it (fill_tail copies the walk). */
	if (py)
		py_frames(py, id >> 32, DL_PY_SLOT_CALL);
	if (!py && !(cookie & (DL_COOKIE_STACKS | DL_COOKIE_LOADER))) {
		if ((cookie & DL_COOKIE_ARGS2) && put_short(ctx, cookie, id, f, d, now, 2))
			return 0;
		if ((cookie & DL_COOKIE_ARGS5) && put_short(ctx, cookie, id, f, d, now, 5))
			return 0;
	}
	/*
	 * One reservation and fill per stack choice, each with it constant: 6.1's
	 * verifier did not link a flag tested for the reservation with its copy
	 * tested for the fill, and walked a stack into a record without room.
	 */
	if (cookie & DL_COOKIE_STACKS) {
		e = reserve_call(true, py, f->ts, id >> 32, tid);
		if (!e)
			return 0;
		tail = fill_tail(ctx, e, true, py);
	} else {
		e = reserve_call(false, py, f->ts, id >> 32, tid);
		if (!e)
			return 0;
		tail = fill_tail(ctx, e, false, py);
	}
	e->dur_ns = now - f->ts;
	e->ret = PT_REGS_RC(ctx);
	e->api = cookie & DL_COOKIE_API_MASK;
	e->flags = f->flags | tail;
	e->depth = d + !!(f->flags & DL_CUDA_IN_RUNTIME);
	__builtin_memcpy(e->arg, f->arg, sizeof(e->arg));
	e->out = 0;
	/*
	 * The call site, for free: before running return probes the kernel
	 * sets the ip to the return address it had saved from the stack
	 * (handle_trampoline). A user read at entry for it costs ~90 ns (tools/bench/README.md).
	 */
	e->site = PT_REGS_IP(ctx);
	if (cookie & DL_COOKIE_OUTPTR) {
		__u64 outp = cookie & DL_COOKIE_OUT_ARG1 ? f->arg[1] : f->arg[0];

		if (outp && bpf_probe_read_user(&e->out, sizeof(e->out), (void *)outp))
			e->flags |= DL_CUDA_OUT_FAULT;
	}
	if (cookie & DL_COOKIE_LOADER) {
		/*
		 * A CUDA library just loaded: stop the process until the collector
		 * has attached to it, so its first call after the load is traced.
		 * The collector continues it (SIGCONT) after its rescan.
		 */
		if (e->ret && name_mentions_cuda(f->arg[0])) {
			__u32 tgid = id >> 32;

			if (dl_hold_current(tgid, now))
				e->flags |= DL_CUDA_STOPPED;
		}
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
		return 0;
	}
	dl_submit(e);
	return 0;
}

SEC("?uretprobe.multi")
int BPF_URETPROBE(cuda_return)
{
	return on_return(ctx, bpf_get_attach_cookie(ctx), true, true);
}

SEC("?uretprobe")
int BPF_URETPROBE(cuda_ret_one)
{
	return on_return(ctx, has_attach_cookie ? bpf_get_attach_cookie(ctx) : 0, has_attach_cookie, true);
}

SEC("?uretprobe")
int BPF_URETPROBE(cuda_ret_onenp)
{
	return on_return(ctx, has_attach_cookie ? bpf_get_attach_cookie(ctx) : 0, has_attach_cookie, false);
}
