/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Maps, globals and helpers shared by every dlbpf BPF source. */
#ifndef DLBPF_COMMON_BPF_H
#define DLBPF_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "dlbpf/events.h"
#include "dlbpf/pyframes.h"
#include "arch.bpf.h"

/*
 * The sources are linked into one object by `bpftool gen object`: maps.bpf.c
 * defines the shared maps and globals, every other source sees them extern.
 * libbpf 1.4's linker resolves extern maps only when the defining object comes
 * first, so the Makefile links maps.bpf.o first.
 */
#ifdef DL_DEFINE_SHARED
#define DL_SHARED
#else
#define DL_SHARED extern
#endif

#define DL_MAX_TRACED 16384

/*
 * The CPython layout of each traced process that runs one (key: tgid), from
 * user space (user/capture/pycode.c); a fork copies the parent's here, so a
 * forked loader's first calls carry frames, and an exec drops it.
 */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct dl_py_cfg);
} py_procs SEC(".maps");

DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized by user space before load */
} rb SEC(".maps");

DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DL_DROP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* The traced process set; children of traced processes are added in the kernel. */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DL_MAX_TRACED);
	__type(key, __u32);
	__type(value, struct dl_traced);
} traced SEC(".maps");

/*
 * What the running kernel has, set by user space before load from its feature
 * probes (user/capture/env.c). Each is read as a constant by the verifier, so
 * the branch a kernel cannot take is dead code it never checks, helpers it
 * lacks included:
 * - has_task_btf: bpf_get_current_task_btf (5.11). Without it the current task
 *   is a pointer only probe reads may follow (DL_TASK_READ).
 * - has_task_storage: task-local storage from tracing programs (5.12). Without it per-thread
 *   state lives in hashes keyed by thread id, removed at thread exit.
 * - has_attach_cookie: bpf_get_attach_cookie for uprobes (5.15). Without it a
 *   probe finds its cookie by its file offset (probe_cookies).
 */
DL_SHARED const volatile bool has_task_btf;
DL_SHARED const volatile bool has_task_storage;
DL_SHARED const volatile bool has_attach_cookie;

/* The current task; where has_task_btf is false, read it with DL_TASK_READ only. */
static __always_inline struct task_struct *dl_current(void)
{
	if (has_task_btf)
		return bpf_get_current_task_btf();
	return (struct task_struct *)bpf_get_current_task();
}

/*
 * A field of a task: loaded directly from a trusted pointer (no helper call),
 * probe-read where the kernel has no trusted current task to give.
 */
#define DL_TASK_READ(t, field) (has_task_btf ? (t)->field : BPF_CORE_READ(t, field))

/*
 * Per-thread state where task-local storage is missing: entries go at thread
 * exit (proc.bpf.c). Preallocated, as 5.10 wants of maps that tracing programs
 * update (else a kernel warning at load), so sized for the threads that make
 * CUDA calls or read files at once, not for every thread: a full map counts
 * the call as lost (DL_DROP_INFLIGHT).
 */
#define DL_TID_STATES 8192

/*
 * A thread's entry of a hash keyed by tid, made from zero when create is set
 * (zero: a zeroed value of the map's size, for values too big for the stack).
 */
static __always_inline void *dl_tid_state(void *map, __u32 tid, bool create, const void *zero)
{
	void *v = bpf_map_lookup_elem(map, &tid);

	if (v || !create || !zero)
		return v;
	bpf_map_update_elem(map, &tid, zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, &tid);
}

/*
 * Where attach cookies are missing: each probed instruction's cookie, by its
 * file (device, inode) and offset, written by user space before the first
 * probe on the file and removed after the last (user/capture/uprobes.c). The
 * key does not depend on the process or on where the file is mapped, so it
 * holds for every process that maps the file, from its first instruction
 * after an exec on.
 */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct dl_probe_site);
	__type(value, __u64);
} probe_cookies SEC(".maps");

/* log2 of the page size (vm_pgoff counts pages), set by user space before load. */
DL_SHARED const volatile __u32 dl_page_shift;

/*
 * The per-thread cache of recently found VMAs (3.15 to 6.0; gone from newer
 * kernels, and from vmlinux.h). A uprobe's trap handler has just looked up the
 * VMA that holds the probed address, so that VMA is in it.
 */
struct vmacache___dl {
	__u64 seqnum;
	struct vm_area_struct *vmas[4];
} __attribute__((preserve_access_index));
struct task_struct___dl {
	struct vmacache___dl vmacache;
} __attribute__((preserve_access_index));
struct mm_struct___dl {
	__u64 vmacache_seqnum;
} __attribute__((preserve_access_index));

/*
 * The cookie of a classic uprobe at ip by its file offset: ip's VMA from the
 * thread's VMA cache (valid while its sequence number is the mm's: an unmap
 * in between makes it a miss), then the VMA's file and offset. 0 when unknown.
 */
static __always_inline __u64 dl_site_cookie(__u64 ip)
{
	struct task_struct___dl *t = (void *)bpf_get_current_task();
	struct vm_area_struct *vma = NULL;
	struct dl_probe_site k = {};
	struct mm_struct *mm;
	__u64 *c;

	if (!bpf_core_field_exists(t->vmacache))
		return 0;
	mm = BPF_CORE_READ((struct task_struct *)t, mm);
	if (!mm || BPF_CORE_READ(t, vmacache.seqnum) != BPF_CORE_READ((struct mm_struct___dl *)mm, vmacache_seqnum))
		return 0;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		struct vm_area_struct *v = BPF_CORE_READ(t, vmacache.vmas[i]);

		if (v && BPF_CORE_READ(v, vm_start) <= ip && ip < BPF_CORE_READ(v, vm_end)) {
			vma = v;
			break;
		}
	}
	if (!vma)
		return 0;
	k.ino = BPF_CORE_READ(vma, vm_file, f_inode, i_ino);
	k.dev = BPF_CORE_READ(vma, vm_file, f_inode, i_sb, s_dev);
	k.offset = ip - BPF_CORE_READ(vma, vm_start) + (BPF_CORE_READ(vma, vm_pgoff) << dl_page_shift);
	c = bpf_map_lookup_elem(&probe_cookies, &k);
	return c ? *c : 0;
}

/* The cookie of the probe that fired at entry (the ip is the probed address then); 0 when unknown. */
static __always_inline __u64 dl_entry_cookie(struct pt_regs *ctx)
{
	if (has_attach_cookie)
		return bpf_get_attach_cookie(ctx);
	return dl_site_cookie(PT_REGS_IP(ctx));
}

/* A load the compiler must make where it stands (not a value it kept in a register). */
#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))

/*
 * Raw tracepoint argument a or b of ctx, as first says, each loaded at a
 * constant offset on its own branch. A select folded into one load at a
 * computed offset is refused before 5.12 ("dereference of modified ctx ptr");
 * loading both is refused at attach where the tracepoint has fewer arguments
 * (max_ctx_offset). The verifier sees first as a constant and keeps one branch.
 */
static __always_inline __u64 dl_ctx_pick(const __u64 *ctx, bool first, const int a, const int b)
{
	__u64 v;

	if (first) {
		v = ctx[a];
		barrier_var(v);
		return v;
	}
	v = ctx[b];
	barrier_var(v);
	return v;
}

#define DL_MAX_DEPTH 4

struct call_frame {
	__u64 ts;
	__u64 arg[DL_CUDA_NARGS];
	__u64 sp;      /* at entry: where the return address is, unique to the call while it runs */
	__u32 cookie;
	__u32 flags;
};

struct call_stack {
	__u32 depth;   /* calls in flight, the ones past DL_MAX_DEPTH (no frame) included */
	__u32 pad;
	__u64 deep_sp; /* entry sp of the outermost call without a frame, while depth > DL_MAX_DEPTH */
	/*
	 * The last entry-only runtime call (a launch) of the thread: its entry sp,
	 * frame tag and return address (bpf/arch.bpf.h). While [rt_sp] still holds
	 * rt_tag and a driver probe fires deeper in the stack, the driver call is
	 * part of that launch.
	 */
	__u64 rt_sp, rt_tag, rt_site;
	/* Set by a return that left a frame of its own entry sp on top: that frame's return comes next (cuda.bpf.c). */
	__u64 tail_sp;
	struct call_frame f[DL_MAX_DEPTH];
};

/*
 * CUDA calls in flight per thread; a stack because the runtime may call itself.
 * Task-local storage: found from the current task without hashing (a hash
 * lookup by tid cost ~50 ns of a ~310 ns entry-only probe, measured with
 * kernel.bpf_stats_enabled: tools/bench/README.md), and freed by the kernel when the thread exits.
 */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct call_stack);
} calls SEC(".maps");

/* calls where task-local storage is missing (has_task_storage), and a zeroed value to create from. */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DL_TID_STATES);
	__type(key, __u32);
	__type(value, struct call_stack);
} calls_by_tid SEC(".maps");

DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct call_stack);
} calls_zero SEC(".maps");

/* task: the current one (dl_current), tid its thread id. */
static __always_inline struct call_stack *dl_calls(struct task_struct *task, __u32 tid, bool create)
{
	__u32 zero = 0;

	if (has_task_storage)
		return bpf_task_storage_get(&calls, task, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	return dl_tid_state(&calls_by_tid, tid, create, create ? bpf_map_lookup_elem(&calls_zero, &zero) : NULL);
}

/*
 * bpf_get_current_pid_tgid's answer from the task: each helper call costs
 * ~20 ns on a host whose returns go through a mitigation thunk (bpf_stats), and
 * a probe that needs the task for its storage then needs no second call.
 */
static __always_inline __u64 dl_task_ids(struct task_struct *task)
{
	if (!has_task_btf)
		return bpf_get_current_pid_tgid();
	return (__u64)task->tgid << 32 | (__u32)task->pid;
}

/*
 * Bumped whenever a running process joins the traced set (user space adds it,
 * or it execs under a --comm name): a task's cached answer to "is my process
 * traced?" older than this is asked again. A forked child needs no bump: its
 * tasks are new and have no answer cached.
 */
DL_SHARED volatile __u32 traced_gen;

/*
 * Set by user space, never cleared, before it first probes a CUDA driver
 * library (driver_probed) or writes py_procs (py_known). Until then a runtime
 * launch keeps no frame for driver calls to nest in, and a call's return asks
 * py_procs nothing: that hash lookup, a miss in every process without Python,
 * ran on each copy and sync.
 */
DL_SHARED volatile __u32 driver_probed;
DL_SHARED volatile __u32 py_known;

/* Switch-ins rebuilt by resume_missed_run: read at the end and logged. */
DL_SHARED volatile __u64 missed_switch_ins;

struct traced_mark {
	__u32 gen;     /* traced_gen + 1 when cached: a fresh, zeroed mark never matches */
	__u32 traced;
};

/*
 * The scheduler's programs run for every task on the machine: a task-local
 * mark answers for the untraced ones without hashing (each hash lookup of a
 * tgid, two per switch, was most of what dlbpf cost untraced processes).
 */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct traced_mark);
} traced_marks SEC(".maps");

/*
 * The syscall of the files source (files.bpf.c) a traced thread is inside:
 * its entry, what exit needs of its arguments, and the block bytes the thread
 * submitted meanwhile (io.bpf.c adds them). Task-local so a submission finds it
 * without a lookup by tid; the kernel frees it with the thread.
 */
struct file_call {
	__u64 ts;
	__u64 path;        /* openat: the user pointer to the path */
	__u64 disk_bytes;
	__s32 fd;          /* read family: the fd; openat: the dirfd */
	__u32 call;        /* enum dl_read_call, FILE_CALL_OPENAT, or 0 when none is in flight */
	__u32 open_flags;
	__u32 pad;
};

#define FILE_CALL_OPENAT 100

DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct file_call);
} file_calls SEC(".maps");

/* file_calls where task-local storage is missing (has_task_storage). */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DL_TID_STATES);
	__type(key, __u32);
	__type(value, struct file_call);
} file_calls_by_tid SEC(".maps");

/* The current thread's file call; made when create is set. */
static __always_inline struct file_call *dl_file_call(bool create)
{
	struct file_call zero = {};

	if (has_task_storage)
		return bpf_task_storage_get(&file_calls, bpf_get_current_task_btf(), 0,
					    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	return dl_tid_state(&file_calls_by_tid, (__u32)bpf_get_current_pid_tgid(), create, &zero);
}

/* A thread exits: its state in the hashes that stand in for task-local storage goes. */
static __always_inline void dl_tid_states_free(__u32 tid)
{
	if (has_task_storage)
		return;
	bpf_map_delete_elem(&calls_by_tid, &tid);
	bpf_map_delete_elem(&file_calls_by_tid, &tid);
}

/* A traced task submitted bytes for a read: they belong to the read syscall it is in, if any. */
/* A read request the current task submits: counted in its read call in flight, if any (then true). */
static __always_inline bool dl_note_read_submit(__u32 bytes)
{
	struct file_call *fc = dl_file_call(false);

	if (!fc || !fc->call || fc->call == FILE_CALL_OPENAT)
		return false;
	fc->disk_bytes += bytes;
	return true;
}

struct thread_state {
	__u64 since;
	__u32 state;
	__u32 tgid;
};

/* Scheduler state of each traced thread; shared so an exiting thread closes its last interval. */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct thread_state);
} threads SEC(".maps");

/*
 * Processes a hold stopped (a dlopen of CUDA's, an exec, the dynamic linker's
 * first consistent link map after an exec) and nobody has continued yet, with
 * the time of the stop: an entry goes in before the SIGSTOP is sent and goes
 * out when the process is sent SIGCONT (or SIGKILL), by anyone. The collector's
 * watchdog keeps the map after the collector is gone and continues every
 * process left in it (user/capture/watchdog.c). A process is stopped only once
 * it is in the map: a full map holds no one. Key 0 (no process's) is the
 * watchdog's: once there, the hold is off (the collector stopped answering).
 */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} held SEC(".maps");

/*
 * Processes that exec'd while traced and whose libraries the collector has not
 * seen mapped yet: the dynamic linker's _dl_debug_state, called once its link
 * map changed, holds them again, until the collector finds their C library
 * mapped (and so every library the program was linked with) and takes them out.
 */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} exec_pending SEC(".maps");

/* The kernel's signal numbers (x86-64 and every architecture BPF runs on here). */
#define DL_SIGKILL 9
#define DL_SIGCONT 18
#define DL_SIGSTOP 19

/*
 * Stops the current process until the collector continues it; false when it
 * is not held (the watchdog turned holds off, the map is full, or it is being
 * ptraced: a debugger, or dlbpf's own hold of a command it starts, would be
 * handed the SIGSTOP instead).
 */
static __always_inline bool dl_hold_current(__u32 tgid, __u64 now)
{
	struct task_struct *task = dl_current();
	__u32 off = 0;

	if (DL_TASK_READ(task, ptrace) || bpf_map_lookup_elem(&held, &off) || bpf_map_update_elem(&held, &tgid, &now, BPF_ANY))
		return false;
	if (bpf_send_signal(DL_SIGSTOP)) {
		bpf_map_delete_elem(&held, &tgid);
		return false;
	}
	return true;
}

/* Past this much unread data a submission wakes the consumer instead of waiting for its timer. */
DL_SHARED const volatile __u64 wakeup_bytes;

/*
 * Nonzero while the consumer sleeps in epoll_wait: user space sets it around
 * the wait (memory-mapped). A forced wake-up is an irq_work that wakes no one
 * while the consumer is draining, yet it cost each submission that sent one
 * ~2-5 us in a VM: a consumer slower than its producer (2.2 us per record)
 * had every 16th submission send one, and a sync's return probe cost 430-620
 * ns against 306 without (kernel.bpf_stats_enabled). A map, not a global, so
 * that a producer of another object (tools/bench/drain.bpf.c) shares it.
 */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} consumer_asleep SEC(".maps");

static __always_inline bool dl_consumer_asleep(void)
{
	__u32 zero = 0;
	__u32 *asleep = bpf_map_lookup_elem(&consumer_asleep, &zero);

	return asleep && *asleep;
}

static __always_inline void dl_count_drop(__u32 src)
{
	__u64 *n = bpf_map_lookup_elem(&drops, &src);

	if (n)
		*n += 1;
}

/*
 * How many of traced's entries hash to each slot (tgid modulo the slots): one more before an entry
 * is inserted, one less after one is deleted, so a slot is never below its entries. A zero slot
 * answers "not traced" with one load, before any helper: the scheduler and block programs run for
 * every task on the machine, and untraced tasks' lookups were most of what they cost (bench table
 * 7). A slot shared with a traced process, or one an overwriting insert left counted, only sends
 * the question on to the map. XADD: no atomic with fetch needed.
 */
DL_SHARED volatile __u32 traced_slots[DL_TRACED_SLOTS];

static __always_inline volatile __u32 *dl_traced_slot(__u32 tgid)
{
	return &traced_slots[tgid & (DL_TRACED_SLOTS - 1)];
}

static __always_inline bool dl_is_traced(__u32 tgid)
{
	if (!*dl_traced_slot(tgid))
		return false;
	return bpf_map_lookup_elem(&traced, &tgid) != NULL;
}

/* Inserts tgid into traced (flags as bpf_map_update_elem), its slot counted first; returns 0 or < 0. */
static __always_inline long dl_traced_insert(__u32 tgid, struct dl_traced *t, __u64 flags)
{
	long err;

	__sync_fetch_and_add(dl_traced_slot(tgid), 1);
	err = bpf_map_update_elem(&traced, &tgid, t, flags);
	if (err)
		__sync_fetch_and_add(dl_traced_slot(tgid), -1);
	return err;
}

static __always_inline void dl_traced_delete(__u32 tgid)
{
	if (!bpf_map_delete_elem(&traced, &tgid))
		__sync_fetch_and_add(dl_traced_slot(tgid), -1);
}

/* Whether t's process is traced; t must be a trusted task pointer (tp_btf arguments, current). */
static __always_inline bool dl_task_traced(struct task_struct *t)
{
	struct traced_mark *m;
	__u32 gen;
	bool yes;

	if (!*dl_traced_slot(t->tgid))
		return false;
	if (!has_task_storage)
		return dl_is_traced(t->tgid);
	m = bpf_task_storage_get(&traced_marks, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	gen = traced_gen + 1;
	if (m && m->gen == gen)
		return m->traced;
	/* No mark (storage busy on this CPU, or out of memory): the map answers, as always. */
	yes = dl_is_traced(t->tgid);
	if (m) {
		m->traced = yes;
		m->gen = gen;
	}
	return yes;
}

/* Whether the process of cur, the current task (dl_current), is traced. */
static __always_inline bool dl_cur_traced(struct task_struct *cur)
{
	if (has_task_btf)
		return dl_task_traced(cur);
	return dl_is_traced(bpf_get_current_pid_tgid() >> 32);
}

static __always_inline bool dl_current_traced(void)
{
	return dl_cur_traced(dl_current());
}

static __always_inline void *dl_reserve(__u32 size, __u16 kind, __u32 drop_src,
					__u64 ts, __u32 tgid, __u32 tid)
{
	struct dl_hdr *h = bpf_ringbuf_reserve(&rb, size, 0);

	if (!h) {
		dl_count_drop(drop_src);
		return NULL;
	}
	h->size = size;
	h->kind = kind;
	h->cpu = bpf_get_smp_processor_id();
	h->ts = ts;
	h->tgid = tgid;
	h->tid = tid;
	return h;
}

/*
 * Submissions per CPU, so that one in 16 checks the buffer's fill: a per-CPU
 * array lookup is inlined by the verifier, bpf_get_prandom_u32 is a call.
 */
DL_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} submits SEC(".maps");

/*
 * Submissions do not wake the consumer, which drains on a timer: a wake-up per
 * event costs the traced thread ~1.7 us against ~0.5 us (measured on kernel 6.18). A
 * consumer that falls behind is woken so the buffer does not fill.
 */
static __always_inline void dl_submit(void *ev)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	/*
	 * The query reads the consumer position, a cache line the consumer writes
	 * from another CPU: ~10 ns of a ~260 ns entry-only probe here
	 * (kernel.bpf_stats_enabled run_time_ns: tools/bench/README.md). One submission in 16 checks; the threshold is a quarter of the buffer,
	 * thousands of records below full, so checking late by a few is harmless. A consumer that is awake
	 * drains without being woken: a submission that saw it awake just before it slept is late by the
	 * same few.
	 */
	__u32 zero = 0, *n = bpf_map_lookup_elem(&submits, &zero);

	if (n && !(++*n & 15) && dl_consumer_asleep() && bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(ev, flags);
}

static __always_inline void emit_interval(__u32 tgid, __u32 tid, struct thread_state *ts,
					  __u64 now, __u32 waker, __u32 next_state)
{
	struct dl_sched_ev *e;

	e = dl_reserve(sizeof(*e), DL_EV_SCHED, DL_DROP_SCHED, ts->since, tgid, tid);
	if (!e)
		return;
	e->dur_ns = now - ts->since;
	e->state = ts->state;
	e->waker_tid = waker;
	e->next_state = next_state;
	e->pad = 0;
	dl_submit(e);
}

#define DL_SCHED_NORMAL 0
#define DL_SCHED_BATCH 3
#define DL_SCHED_IDLE 5

/*
 * A task seen on a CPU (switching out, waking another, exiting) whose last
 * known state is not running had a switch-in no program saw: on this kernel,
 * in a VM, no BPF program runs in the context of pid 1's threads, and
 * sched_switch runs in prev's, so a task switched in from one of them is
 * missed (its run was then taken for run-queue time up to its exit). It has
 * been on the CPU since its switch-in for what the fair class accounts since
 * then (sum_exec_runtime less its value at set_next_entity): exact at a
 * switch-out, which accounts first, and short by what ran since the last tick
 * elsewhere. Other classes do not keep that mark, and keep the old state.
 */
static __always_inline void resume_missed_run(struct task_struct *t, struct thread_state *ts, __u64 now)
{
	__u32 policy = DL_TASK_READ(t, policy);
	__u64 ran, span = now - ts->since;

	if (ts->state == DL_ST_RUNNING)
		return;
	if (policy != DL_SCHED_NORMAL && policy != DL_SCHED_BATCH && policy != DL_SCHED_IDLE)
		return;
	ran = DL_TASK_READ(t, se.sum_exec_runtime) - DL_TASK_READ(t, se.prev_sum_exec_runtime);
	if (ran == 0 || (__s64)ran < 0)
		return;
	if (ran < span)
		emit_interval(DL_TASK_READ(t, tgid), DL_TASK_READ(t, pid), ts, now - ran, 0, DL_ST_RUNNING);
	else
		ran = span;
	ts->since = now - ran;
	ts->state = DL_ST_RUNNING;
	__sync_fetch_and_add(&missed_switch_ins, 1);
}

#define TASK_RUNNING 0x0000
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_DEAD 0x0080

/* Set by user space from the BTF of btf_trace_sched_switch: the prev_state argument exists since 5.18. */
DL_SHARED const volatile bool switch_has_prev_state;

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

/* The state prev leaves the CPU in at sched_switch (ctx: the tracepoint's arguments). */
static __always_inline __u32 dl_switch_prev_state(const __u64 *ctx, struct task_struct *prev)
{
	return switch_has_prev_state ? (__u32)ctx[3] : task_state_of(prev);
}

/*
 * A read-family or receive call begins on the current thread (files.bpf.c,
 * net.bpf.c): its state, made for a traced thread; NULL for any other.
 */
static __always_inline struct file_call *dl_file_call_begin(__u32 call)
{
	struct file_call *fc;

	if (!dl_current_traced())
		return NULL;
	fc = dl_file_call(true);
	if (!fc) {
		dl_count_drop(DL_DROP_INFLIGHT);
		return NULL;
	}
	fc->ts = bpf_ktime_get_ns();
	fc->call = call;
	fc->disk_bytes = 0;
	return fc;
}

#endif /* DLBPF_COMMON_BPF_H */
