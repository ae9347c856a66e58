/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * dlbpf event ABI: the records BPF programs write to the ring buffer and a
 * recording holds (verbatim, or coded so that they decode to these exact
 * bytes: user/records/recenc.h). Shared by BPF and user space, so fixed-width types
 * only and no kernel or libbpf headers.
 *
 * Rules that keep old recordings replayable:
 *  - every record starts with struct dl_hdr; hdr.size is the record's full size,
 *    so a reader can skip kinds it does not know;
 *  - kinds and enum values are append-only; fields are only ever appended to a
 *    record, and readers accept records longer than the struct they know;
 *  - DL_ABI_VERSION is bumped when the meaning of an existing field changes.
 * DL_EV_LAUNCH and DL_EV_CALL_SHORT are cheaper shapes of a DL_EV_CUDA for the
 * ring buffer: the collector's record stream expands them, so a recording
 * holds the DL_EV_CUDA they stand for.
 */
#ifndef DLBPF_EVENTS_H
#define DLBPF_EVENTS_H

#ifdef __BPF__
typedef __u8 dl_u8;
typedef __u16 dl_u16;
typedef __u32 dl_u32;
typedef __u64 dl_u64;
typedef __s32 dl_s32;
typedef __s64 dl_s64;
#else
#include <stdint.h>
typedef uint8_t dl_u8;
typedef uint16_t dl_u16;
typedef uint32_t dl_u32;
typedef uint64_t dl_u64;
typedef int32_t dl_s32;
typedef int64_t dl_s64;
#endif

#define DL_ABI_VERSION 1

enum dl_kind {
	DL_EV_CUDA = 1,   /* struct dl_cuda_ev: one CUDA API call */
	DL_EV_BIO = 2,    /* struct dl_bio_ev: one completed block request (or part) */
	DL_EV_SCHED = 3,  /* struct dl_sched_ev: one closed scheduler interval of a thread */
	DL_EV_PROC = 4,   /* struct dl_proc_ev: fork / exec / exit of a traced task */
	DL_EV_MARK = 5,   /* struct dl_mark_ev: a user-chosen step marker symbol was hit */
	/*
	 * Records the collector writes into the stream itself, so that a recording
	 * holds everything a report needs (replay has no /proc to look at).
	 */
	DL_EV_TRACE_START = 6, /* struct dl_trace_start_ev: tracing began */
	DL_EV_PROCINFO = 7,    /* struct dl_procinfo_ev: a process traced from the start of the trace */
	DL_EV_LIB = 8,         /* struct dl_lib_ev: a CUDA runtime attached in a process */
	DL_EV_SYM = 9,         /* struct dl_sym_ev: the name of a code address (a kernel's host stub) */
	DL_EV_TRACE_END = 10,  /* struct dl_trace_end_ev: tracing ended; final drop counts */
	DL_EV_BIO_SUBMIT = 11, /* struct dl_bio_submit_ev: bytes a traced task put into a block request */
	DL_EV_PROG = 12,       /* struct dl_prog_ev: one BPF program's runs the kernel skipped (collector) */
	DL_EV_FILE_OPEN = 13,  /* struct dl_file_open_ev: an fd of a traced process now names a file */
	DL_EV_FILE_READ = 14,  /* struct dl_file_read_ev: one read syscall of a traced task */
	DL_EV_FILE_CLOSE = 15, /* struct dl_file_close_ev: a traced process closed an fd */
	DL_EV_SITE = 16,       /* struct dl_site_ev: where a call site (a return address) is in the code */
	DL_EV_WAKE = 17,       /* struct dl_wake_ev: a task woke a traced thread (a wake-up edge) */
	DL_EV_PYCODE = 18,     /* struct dl_pycode_ev: what a CPython code object at an address is */
	DL_EV_LAUNCH = 19,     /* struct dl_launch_ev: a runtime kernel launch, one cache line (stands for a DL_EV_CUDA) */
	DL_EV_CALL_SHORT = 20, /* struct dl_call_short_ev: a call with its first arguments only (stands for a DL_EV_CUDA) */
	DL_EV_CGROUP = 21,     /* struct dl_cgroup_ev: the container, pod or Slurm job of a process (collector) */
	DL_EV_ENV = 22,        /* struct dl_env_ev: what a process's environment says of its devices (collector) */
	DL_EV_PYSTACK = 23,    /* struct dl_pystack_ev: a Python thread's frames where it waited, or a CPU sample */
	DL_EV_NET_RECV = 24,   /* struct dl_net_recv_ev: one socket receive of a traced task */
	DL_EV_KIND_MAX,
	/* BPF to the collector only, never in the stream or a recording: */
	DL_EV_PYSNAP = 64,     /* struct dl_pysnap_ev (dlbpf/pyframes.h): a code object read at a probe */
};

struct dl_hdr {
	dl_u16 size;  /* bytes of the whole record, header included */
	dl_u16 kind;  /* enum dl_kind */
	dl_u32 cpu;
	dl_u64 ts;    /* CLOCK_MONOTONIC ns (bpf_ktime_get_ns); start of the interval for timed records */
	dl_u32 tgid;
	dl_u32 tid;
};

/*
 * CUDA API calls. The BPF side does not decode arguments: it stores the raw
 * argument slots, in the order the calling convention assigns them
 * (bpf/arch.bpf.h): slots 1-6 in registers on both architectures, slots 7 and
 * up on the stack on x86-64 and in x6, x7 then the stack on arm64. User space
 * decodes them per API (user/cuda_api.c), so
 * adding an API needs no BPF change. The API id and probe class travel in the
 * uprobe_multi cookie.
 */
enum dl_cuda_cookie {
	DL_COOKIE_API_MASK = 0xffff,
	DL_COOKIE_STACK = 1u << 16,   /* copy argument slots 7, 8 into arg[6], arg[7] (x86-64: [sp+8], [sp+16]) */
	DL_COOKIE_OUTPTR = 1u << 17,  /* at return, read the u64 that arg[0] points to into out */
	DL_COOKIE_STACK3 = 1u << 18,  /* entry-only: copy argument slots 7, 8, 9 into arg[6], arg[7], out */
	DL_COOKIE_DEREF_CFG = 1u << 19, /* entry-only: copy 40 bytes at arg[0] (a launch config) into arg[3..7] */
	DL_COOKIE_DRIVER = 1u << 20,  /* a driver API: inside a live runtime call it counts as nested (depth) */
	DL_COOKIE_LOADER = 1u << 21,  /* dlopen: wake the consumer at return; stop the process if the
				       * name holds "cuda" until the collector has attached (DL_CUDA_STOPPED) */
	/* --summary mode (include/dlbpf/agg.h): where a copy's bytes and kind are */
	DL_COOKIE_BYTES_1D = 1u << 22, /* bytes arg[2], kind arg[3] */
	DL_COOKIE_BYTES_2D = 1u << 23, /* bytes arg[4] * arg[5], kind arg[6] */
	DL_COOKIE_AGG = 1u << 24,      /* aggregated in the kernel in --summary mode (else still a record) */
	DL_COOKIE_STACKS = 1u << 25,   /* --stacks: at return, the caller's user stack goes into the record's tail */
	DL_COOKIE_PY = 1u << 26,       /* in a CPython process (map py_procs), its frames go into the record's tail */
	DL_COOKIE_LAUNCH = 1u << 27,   /* cudaLaunchKernel's layout: a struct dl_launch_ev when it fits one */
	/* At return, a struct dl_call_short_ev with the first 2 (ARGS2) or 5 (ARGS5) arguments when it fits one */
	DL_COOKIE_ARGS2 = 1u << 28,
	DL_COOKIE_ARGS5 = 1u << 29,
	DL_COOKIE_OUT_ARG1 = 1u << 30, /* with DL_COOKIE_OUTPTR: the u64 arg[1] points to, not arg[0] */
};

enum dl_cuda_flags {
	DL_CUDA_ENTRY_ONLY = 1u << 0, /* no return probe: dur_ns and ret are not known */
	DL_CUDA_OUT_FAULT = 1u << 1,  /* the out pointer could not be read */
	DL_CUDA_ARGS_FAULT = 1u << 2, /* the stack arguments could not be read */
	DL_CUDA_STOPPED = 1u << 3,    /* the process was stopped (SIGSTOP); the collector continues it */
	DL_CUDA_IN_RUNTIME = 1u << 4, /* a driver call made inside a runtime call (depth includes it) */
	DL_CUDA_SITE_FAULT = 1u << 5, /* entry-only: the return address at entry could not be read: site is 0 */
	DL_CUDA_PY = 1u << 6,         /* the tail starts with a struct dl_py_stack (CPython frames) */
};

#define DL_CUDA_NARGS 8
#define DL_STACK_MAX 16   /* frames of a --stacks record */

struct dl_cuda_ev {
	struct dl_hdr h;              /* ts = entry */
	dl_u64 dur_ns;                /* entry to return */
	dl_s64 ret;                   /* rax at return (cudaError_t) */
	dl_u16 api;                   /* enum dl_cuda_api (user/cuda_api.h) */
	dl_u16 flags;                 /* enum dl_cuda_flags */
	dl_u32 depth;                 /* nesting of probed calls on this thread at entry */
	dl_u64 arg[DL_CUDA_NARGS];    /* argument slots 1-8: x86-64 rdi rsi rdx rcx r8 r9 [sp+8] [sp+16]; arm64 x0-x7 */
	dl_u64 out;                   /* *(u64 *)arg[0] at return (DL_COOKIE_OUTPTR); slot 9 (DL_COOKIE_STACK3) */
	/* Appended: older recordings end before it (their h.size says so), and have no call sites. */
	/* the return address into the caller: at entry (entry-only calls: x86-64 [sp], arm64 x30), the ip at return (the others) */
	dl_u64 site;                  /* 0 with DL_CUDA_SITE_FAULT */
	/*
	 * --stacks (DL_COOKIE_STACKS): (h.size - sizeof) / 8 return addresses,
	 * innermost first: stack[0] is site, then its callers' as their frame
	 * pointers give them (at most DL_STACK_MAX). Absent otherwise.
	 * With DL_CUDA_PY a struct dl_py_stack comes first (its full size), and
	 * the return addresses, if any, after it.
	 */
	dl_u64 stack[];
};

/*
 * A runtime kernel launch (DL_COOKIE_LAUNCH: cudaLaunchKernel's layout) in 64
 * bytes, against a dl_cuda_ev's 120: its writes fill one cache line, not two,
 * on the hottest probe. It holds what decoding a launch reads of the
 * dl_cuda_ev it stands for, in the widths the CUDA runtime accepts; a launch
 * that does not fit them (grid y or z past 65535, block x or y past 2047 or
 * z past 127, dynamic shared memory past 65535 bytes: launches the runtime
 * refuses, bar large shared memory), nests deeper than 7, or faults is written
 * as a dl_cuda_ev. The record stream expands it
 * (user/records/stream.c): sinks and recordings see that dl_cuda_ev, with
 * flags DL_CUDA_ENTRY_ONLY, arg[5] (the kernel's argument array, which no
 * decoding reads) 0 and the registers' upper halves that hold no field of a
 * dim3 0.
 */
#define DL_LAUNCH_BX_BITS 11
#define DL_LAUNCH_BY_BITS 11
#define DL_LAUNCH_BZ_BITS 7
#define DL_LAUNCH_DEPTH_BITS 3

struct dl_launch_ev {
	struct dl_hdr h;              /* ts = entry */
	dl_u64 func;                  /* arg[0]: the kernel's host stub (or handle) */
	dl_u64 stream;                /* arg[7], [sp+16] at entry */
	dl_u64 site;                  /* [sp] at entry: the return address into the caller */
	dl_u32 grid_x;                /* arg[1] low half */
	dl_u16 grid_y;                /* arg[1] high half */
	dl_u16 grid_z;                /* arg[2] low half */
	dl_u16 api;                   /* enum dl_cuda_api (user/cuda_api.h) */
	dl_u16 shmem;                 /* arg[6], [sp+8] at entry */
	/* block x (arg[3] low half), y (arg[3] high half), z (arg[4] low half), then depth, low bits first */
	dl_u32 block_depth;
};

/*
 * A call with a return probe whose decoding reads no more than its first
 * register arguments (DL_COOKIE_ARGS2: synchronizations, events, streams,
 * frees; DL_COOKIE_ARGS5: copies and memsets without stack arguments):
 * (h.size - sizeof) / 8 of them, at most 6, in arg. 64 bytes (one cache
 * line) with 2, 88 with 5, against a dl_cuda_ev's 120. A call whose return
 * value is not a sign-extended 32-bit one (cudaError_t), whose flags or
 * depth pass 255, or that carries a tail (--stacks, Python frames) is
 * written as a dl_cuda_ev. The record stream expands it (user/records/stream.c):
 * sinks and recordings see the dl_cuda_ev it stands for, with the arguments
 * it does not hold and out 0.
 */
#define DL_CALL_SHORT_ARGS_MAX 6

struct dl_call_short_ev {
	struct dl_hdr h;              /* ts = entry */
	dl_u64 dur_ns;                /* entry to return */
	dl_u64 site;                  /* the ip at return: the return address into the caller */
	dl_s32 ret;                   /* eax at return, sign-extended in the dl_cuda_ev */
	dl_u16 api;                   /* enum dl_cuda_api (user/cuda_api.h) */
	dl_u8 flags;                  /* enum dl_cuda_flags */
	dl_u8 depth;                  /* nesting of probed calls on this thread at entry */
	dl_u64 arg[];                 /* the dl_cuda_ev's arg[0], arg[1], ... */
};

/*
 * CPython frames of the thread that made a call, innermost first: each the
 * code object's address and the byte offset in its bytecode of the
 * instruction that was running (the call). Written in BPF from the
 * interpreter's own frame chain, so nothing here is trusted: a reader takes
 * min(n, DL_PY_MAX) frames and names one only from a DL_EV_PYCODE record
 * for its code address. A frame of code 0 is a shim the interpreter puts
 * where C called into Python (3.12+): it takes a slot, readers skip it.
 */
#define DL_PY_MAX 16

enum dl_py_status {
	DL_PY_OK = 0,          /* the frames are the whole chain */
	DL_PY_TRUNCATED = 1,   /* more frames than DL_PY_MAX: the outermost are left out */
	DL_PY_NO_THREAD = 2,   /* the thread has no Python thread state (a native thread): n = 0 */
	DL_PY_FAULT = 3,       /* a read of the interpreter's memory failed: the frames up to it */
	DL_PY_KEY_HIGH = 4,    /* the thread-state key is past glibc's first block: n = 0 */
};

struct dl_py_frame {
	dl_u64 code;           /* the code object's address */
	dl_u32 off;            /* bytes into its bytecode of the instruction running */
	dl_u32 pad;
};

struct dl_py_stack {
	dl_u16 n;              /* frames filled */
	dl_u16 status;         /* enum dl_py_status */
	dl_u32 pad;
	struct dl_py_frame f[DL_PY_MAX];
};

enum dl_bio_flags {
	DL_BIO_WRITE = 1u << 0,
	DL_BIO_ASYNC = 1u << 1,   /* submitted by a kernel thread for a file a traced task dirtied (writeback) */
	DL_BIO_ERROR = 1u << 2,
	DL_BIO_PARTIAL = 1u << 3, /* completion of part of the request; more follow */
	/*
	 * No completion was seen for the request: it ended where no BPF program
	 * ran (its pointer came back as a new request), or it was still in flight
	 * when tracing stopped. bytes is what was outstanding; dur_ns is 0.
	 */
	DL_BIO_UNSEEN = 1u << 4,
	DL_BIO_MERGED = 1u << 5,  /* dl_bio_submit_ev: a bio that joined a request already started */
	DL_BIO_META = 1u << 6,    /* file system metadata (REQ_META) */
	DL_BIO_IN_READ = 1u << 7, /* dl_bio_submit_ev: inside a read call of the task (its disk_bytes count it) */
};

struct dl_bio_ev {
	struct dl_hdr h;          /* ts = request start; tgid/tid = submitter */
	dl_u64 dur_ns;            /* start to (this) completion */
	dl_u64 sector;
	dl_u32 bytes;             /* bytes completed by this completion */
	dl_u32 dev;               /* kernel dev_t: major << 20 | minor */
	dl_u32 flags;             /* enum dl_bio_flags */
	dl_u32 complete_cpu;
};

/*
 * Bytes a traced task submitted: a request it started (the request's first
 * bio), or a bio of its that joined a request already started (DL_BIO_MERGED).
 * Written where the submitter runs, so it is there even when the request's
 * completion is not seen; the sum is what /proc/PID/io counts for reads.
 * A read outside any read call (a page fault in a mapped file, readahead
 * from madvise) names its file by the inode whose page cache it fills: the
 * inode of an open record of the process (the fd it mapped), or else of its
 * mappings, which the collector writes as a DL_EV_FILE_OPEN (DL_FILE_MAPPED)
 * before the first such read.
 */
struct dl_bio_submit_ev {
	struct dl_hdr h;          /* ts = submission; tgid/tid = submitter */
	dl_u64 sector;
	dl_u32 bytes;
	dl_u32 dev;               /* kernel dev_t: major << 20 | minor */
	dl_u32 flags;             /* DL_BIO_WRITE, DL_BIO_MERGED, DL_BIO_META, DL_BIO_IN_READ */
	/* Low 32 bits of the regular file's inode its first page belongs to (0: none: direct I/O, metadata, swap). */
	dl_u32 ino32;
};

enum dl_thread_state {
	DL_ST_RUNNING = 1,   /* on CPU */
	DL_ST_RUNQ = 2,      /* runnable, waiting for a CPU */
	DL_ST_SLEEP = 3,     /* blocked interruptible (S) */
	DL_ST_DISK = 4,      /* blocked uninterruptible (D) */
};

struct dl_sched_ev {
	struct dl_hdr h;     /* ts = interval start */
	dl_u64 dur_ns;
	dl_u32 state;        /* enum dl_thread_state */
	dl_u32 waker_tid;    /* for blocked intervals: the task that woke it (0 if unknown) */
	dl_u32 next_state;   /* the state entered at ts + dur_ns; 0 when the thread exited */
	dl_u32 pad;
};

/*
 * What was running when a wake-up was issued. A wake-up from interrupt
 * context (a block completion waking a reader blocked on disk) or from a
 * kernel thread was caused by no task of the job: the interrupted task in
 * waker_tgid/tid is whoever happened to be on that CPU.
 */
enum dl_wake_ctx {
	DL_WAKE_TASK = 0,     /* a task, in its own context: waker_tgid/tid woke the wakee (futex, pipe, ...) */
	DL_WAKE_HARDIRQ = 1,  /* a hardware interrupt handler (or NMI) */
	DL_WAKE_SOFTIRQ = 2,  /* a softirq (block completion, timers, network), on any task or ksoftirqd */
	DL_WAKE_KTHREAD = 3,  /* a kernel thread in task context (kworker, threaded interrupt handler) */
};

/*
 * A wake-up edge, from the sched_waking tracepoint: it runs on the waker's
 * CPU, in the waker's context, before the wakee is enqueued (the
 * DL_EV_SCHED intervals still end at sched_wakeup, so the run-queue time is
 * measured from the enqueue as schedstat does). Written only when the wakee
 * is traced and the waker is a traced task, or the wake-up came from
 * interrupt or kernel-thread context to a wakee blocked in D (its I/O).
 */
struct dl_wake_ev {
	struct dl_hdr h;          /* ts = the wake-up; tgid/tid = the wakee; cpu = the waker's CPU */
	dl_u32 waker_tgid;        /* the task running the wake-up (with DL_WAKE_TASK, the one that caused it) */
	dl_u32 waker_tid;
	dl_u32 wakee_tgid;        /* the same as h.tgid/h.tid, so the record reads alone */
	dl_u32 wakee_tid;
	dl_u32 ctx;               /* enum dl_wake_ctx */
	dl_u32 wakee_state;       /* what the wakee is woken from: DL_ST_SLEEP (S) or DL_ST_DISK (D) */
};

/*
 * The CPython frames of a traced Python thread (bpf/pylines.bpf.c), read
 * where it is: as it blocks, kept for a wait that turns out long (written as
 * it runs again); or at a CPU sample (a cpu-clock perf event per CPU), so
 * that samples of a thread count its CPU time by line.
 */
enum dl_pystack_why {
	DL_PYSTACK_CPU = 1,       /* a CPU sample: h.ts is when it was taken */
	DL_PYSTACK_WAIT = 2,      /* a wait: h.ts is when the thread ran again, wait_ns how long it was off the CPU */
};

struct dl_pystack_ev {
	struct dl_hdr h;
	dl_u64 wait_ns;           /* DL_PYSTACK_WAIT: h.ts - wait_ns is when it blocked; 0 for a sample */
	dl_u32 why;               /* enum dl_pystack_why */
	dl_u32 state;             /* DL_PYSTACK_WAIT: DL_ST_SLEEP (S) or DL_ST_DISK (D); 0 for a sample */
	struct dl_py_stack py;
};

enum dl_proc_what {
	DL_PROC_FORK = 1,     /* new process (h.tgid = child); parent in ppid */
	DL_PROC_THREAD = 2,   /* new thread of a traced process (h.tid = new thread) */
	DL_PROC_EXEC = 3,
	DL_PROC_EXIT = 4,     /* a thread exited; group_dead when the whole process did */
};

#define DL_COMM_LEN 16

struct dl_proc_ev {
	struct dl_hdr h;
	dl_u32 what;          /* enum dl_proc_what */
	dl_u32 ppid;
	dl_u32 group_dead;
	dl_s32 exit_code;
	char comm[DL_COMM_LEN];
	/* Appended: older recordings end before it (their h.size says so). */
	dl_u32 flags;         /* enum dl_proc_flags */
	/*
	 * At an exec, the low 32 bits of the task's cgroup v2 id (its directory's
	 * inode number): the collector reads /proc later, by which time the new
	 * program may have moved itself elsewhere. 0 elsewhere and in older
	 * recordings; the collector's only.
	 */
	dl_u32 cgroup_ino;
};

enum dl_proc_flags {
	DL_PROC_STOPPED = 1u << 0,   /* exec, fork: stopped (SIGSTOP) until the collector has attached; it continues it */
};

struct dl_mark_ev {
	struct dl_hdr h;
	dl_u32 mark_id;       /* enum dl_mark_ids: what kind of marker fired */
	dl_u32 pad;
};

/* What a DL_EV_MARK's marker is (recordings before these have 0 throughout). */
enum dl_mark_ids {
	DL_MARK_ID_SYMBOL = 0,   /* --step-on a function of the program (a uprobe) */
	DL_MARK_ID_PYFUNC = 1,   /* --step-on a Python function (a watchpoint on its code object) */
	DL_MARK_ID_AUTOGRAD = 2, /* no --step-on: autograd's entry, where PyTorch is loaded (a uprobe) */
};

enum dl_trace_flags {
	/* Block bytes are counted at submission (DL_EV_BIO_SUBMIT); without it, at completion. */
	DL_TRACE_BIO_SUBMITS = 1u << 0,
};

struct dl_trace_start_ev {
	struct dl_hdr h;          /* ts = start of tracing */
	dl_u32 flags;             /* enum dl_trace_flags */
	dl_u32 pcie_mbps;         /* fastest GPU PCIe link in sysfs, MB/s; 0 if none */
};

struct dl_procinfo_ev {
	struct dl_hdr h;          /* tgid = the process */
	dl_u32 ppid;
	dl_u32 flags;
	char comm[DL_COMM_LEN];
	dl_u32 nspid;             /* its pid inside its own pid namespace (= tgid outside containers) */
	dl_u32 pad;
	/* Appended: older recordings end before it (their h.size says so). */
	dl_u32 threads;           /* threads it had when tracing of it began; 0 if not known */
	dl_u32 pad2;
};

/*
 * Where a process runs, from its /proc/PID/cgroup (the collector reads it when
 * it takes a process and after each exec). Each field is NUL-terminated and
 * holds only the bytes its kind allows (stream.c checks): a container id and
 * a pod uid are hex digits and dashes, a runtime and a Slurm job are
 * [a-z0-9_.-]; an empty field is not known.
 */
#define DL_CONTAINER_RUNTIME_LEN 16
#define DL_CONTAINER_ID_LEN 72     /* 64 hex digits: docker, containerd, cri-o */
#define DL_POD_UID_LEN 40          /* a UUID, 36 characters */
#define DL_SLURM_JOB_LEN 24

struct dl_container {
	char runtime[DL_CONTAINER_RUNTIME_LEN];   /* containerd, crio, docker, podman; empty: not told (cgroupfs) */
	char id[DL_CONTAINER_ID_LEN];
	char pod_uid[DL_POD_UID_LEN];             /* with dashes, as the API server writes it */
	char slurm_job[DL_SLURM_JOB_LEN];
};

struct dl_cgroup_ev {
	struct dl_hdr h;          /* tgid = the process; ts = when it was read */
	struct dl_container c;    /* all empty: in no container, pod or job (after an exec that left one) */
};

/*
 * CUDA_VISIBLE_DEVICES as a process had it when it was taken (and after each
 * exec): its devices' ordinals name the physical devices, or the UUIDs, it
 * lists. Written only where the variable is set (cut at DL_VISIBLE_LEN - 1).
 */
#define DL_VISIBLE_LEN 256
struct dl_env_ev {
	struct dl_hdr h;          /* tgid = the process; ts = when it was read */
	char cuda_visible_devices[DL_VISIBLE_LEN];   /* NUL-terminated */
};

#define DL_PATH_LEN 256

/*
 * Key of the BPF map probe_cookies (kernels without attach cookies for
 * uprobes): a probed instruction by its file and offset.
 */
struct dl_probe_site {
	dl_u64 ino;
	dl_u32 dev;               /* the kernel's encoding: major << 20 | minor */
	dl_u32 pad;
	dl_u64 offset;            /* in the file */
};

/* dl_lib_ev.flags: the library is mapped but could not be read or probed; nsyms holds the errno. */
#define DL_LIB_NOT_PROBED 1u

struct dl_lib_ev {
	struct dl_hdr h;          /* tgid = the process */
	dl_u32 nsyms;             /* functions probed in it (the errno with DL_LIB_NOT_PROBED) */
	dl_u32 flags;
	char path[DL_PATH_LEN];   /* as the process maps it, truncated */
};

#define DL_SYM_NAME_MAX 1024

/* Variable size: h.size = offsetof(name) + strlen(name) + 1, rounded up to 8. */
struct dl_sym_ev {
	struct dl_hdr h;          /* tgid = the process whose address space addr is in */
	dl_u64 addr;
	char name[];
};

/*
 * Where a call site is, written by the collector the first time a return
 * address is seen in a process (and again once other code is mapped there),
 * before the first call that returns to it. Variable size:
 * text = function "\0" object "\0", h.size = offsetof(text) + both, rounded
 * up to 8. function is "name+0xOFF" (OFF: bytes from the symbol's start), or
 * "0xOFF" (OFF: offset in the object's file) when no symbol holds it; object
 * is the file's path as the process maps it, "" when no mapping holds it.
 */
struct dl_site_ev {
	struct dl_hdr h;          /* tgid = the process whose address space addr is in */
	dl_u64 addr;
	dl_u32 func_len;          /* bytes of function, its NUL included */
	dl_u32 flags;
	char text[];
};

/*
 * A CPython code object, written by the collector from the process's memory
 * the first time its address is in a call's frames (and again once another
 * code object lives there), before the first call that names it. Variable
 * size: text = file "\0" function "\0" then table_len bytes of line table,
 * h.size = offsetof(text) + all, rounded up to 8. function is the qualified
 * name (3.11+; the name in 3.10).
 */
enum dl_pycode_format {
	DL_PYLINES_310 = 1,    /* co_linetable of 3.10: (bytes delta, signed line delta) pairs (PEP 626) */
	DL_PYLINES_311 = 2,    /* co_linetable of 3.11 and later: the location table (PEP 657) */
};

enum dl_pycode_flags {
	DL_PYCODE_TABLE_CUT = 1u << 0,  /* the line table did not fit: lines past its end are not known */
};

struct dl_pycode_ev {
	struct dl_hdr h;          /* tgid = the process whose address space addr is in */
	dl_u64 addr;
	dl_s32 firstlineno;
	dl_u16 format;            /* enum dl_pycode_format */
	dl_u16 flags;             /* enum dl_pycode_flags */
	dl_u16 file_len;          /* bytes of file, its NUL included */
	dl_u16 func_len;          /* bytes of function, its NUL included */
	dl_u32 table_len;
	char text[];
};

/* Indexes of the per-CPU drop counters (map "drops"). */
enum dl_drop_src {
	DL_DROP_CUDA = 0,     /* ring buffer full */
	DL_DROP_BIO = 1,      /* block, file and network records */
	DL_DROP_SCHED = 2,
	DL_DROP_PROC = 3,
	DL_DROP_INFLIGHT = 4, /* an in-flight map (calls, requests, thread states) was full, or a probe's
			       * address had no cookie (kernels without attach cookies) */
	DL_DROP_TRACED = 5,   /* the traced-process set was full: a child is not traced */
	DL_DROP_AGG = 6,      /* --summary mode: the aggregation map was full */
	DL_DROP_DEPTH = 7,    /* a CUDA call nested deeper than BPF keeps frames for: not recorded */
	DL_DROP_MAX = 8,
};

struct dl_trace_end_ev {
	struct dl_hdr h;          /* ts = end of tracing */
	dl_u64 drops[DL_DROP_MAX];
	/* Appended: older recordings end before it (their h.size says so). */
	dl_u64 recursion_misses;  /* runs of dlbpf's BPF programs the kernel's recursion guard skipped */
};

#define DL_PROG_NAME_LEN 16   /* BPF_OBJ_NAME_LEN */

/* Written before DL_EV_TRACE_END for each program whose runs the kernel skipped. */
struct dl_prog_ev {
	struct dl_hdr h;          /* ts = end of tracing */
	dl_u64 recursion_misses;
	char name[DL_PROG_NAME_LEN];
};

/*
 * Files. The syscall tracepoints of openat, the read family and close, for
 * traced processes only; the collector also writes a DL_EV_FILE_OPEN for each
 * fd a process held before tracing began (DL_FILE_PREEXISTING, from
 * /proc/PID/fd), so a replay knows those files too.
 */
enum dl_file_flags {
	DL_FILE_PREEXISTING = 1u << 0, /* written by the collector from /proc/PID/fd */
	DL_FILE_RESOLVED = 1u << 1,    /* a relative path the collector joined to the cwd or dirfd */
	DL_FILE_TRUNCATED = 1u << 2,   /* the path did not fit (or could not be read whole) */
	DL_FILE_PATH_FAULT = 1u << 3,  /* the path could not be read from the process's memory */
	/* Written by the collector: a file the process mapped before any open record named it (/proc/PID/maps), fd -1. */
	DL_FILE_MAPPED = 1u << 4,
};

struct dl_file_open_ev {
	struct dl_hdr h;          /* ts = return of openat */
	dl_s32 fd;                /* what openat returned (only successes are recorded) */
	dl_s32 dirfd;             /* openat's dirfd (AT_FDCWD = -100) */
	dl_u32 flags;             /* enum dl_file_flags */
	dl_u32 open_flags;        /* openat's flags (O_DIRECT and the like) */
	char path[DL_PATH_LEN];   /* as passed to openat, or resolved (DL_FILE_RESOLVED); NUL-terminated */
	/* The opener's cwd then, so a relative path is joined only to that directory (0: not known). */
	dl_u64 cwd_ino;
	dl_u32 cwd_dev;           /* kernel dev_t: major << 20 | minor */
	dl_u32 ino32;             /* the low 32 bits of the file's inode (0: not known; recordings before it) */
};

enum dl_read_call {
	DL_READ_READ = 1,
	DL_READ_PREAD64 = 2,
	DL_READ_READV = 3,
	DL_READ_PREADV = 4,
	DL_READ_RECVFROM = 5,     /* recvfrom (and recv, which glibc makes a recvfrom): network only */
	DL_READ_RECVMSG = 6,      /* recvmsg: network only */
};

struct dl_file_read_ev {
	struct dl_hdr h;          /* ts = syscall entry */
	dl_u64 dur_ns;            /* entry to exit */
	dl_s64 ret;               /* bytes read, or -errno */
	dl_u64 disk_bytes;        /* bytes the task submitted to block devices inside this call */
	dl_s32 fd;
	dl_u32 call;              /* enum dl_read_call */
};

struct dl_file_close_ev {
	struct dl_hdr h;          /* ts = entry of close */
	dl_s32 fd;
	dl_u32 pad;
};

/*
 * Network receives: each return of the kernel's sock_recvmsg in a traced task
 * (a read, readv, recv, recvfrom or recvmsg on a socket, or io_uring's recv
 * made inline), with the socket's endpoints as the kernel holds them. A read
 * on a socket is recorded here only, not as a DL_EV_FILE_READ.
 */
enum dl_net_flags {
	DL_NET_NO_START = 1u << 0,    /* the call's entry was not seen: ts is the return, dur_ns 0 */
	DL_NET_AFTER_SEND = 1u << 1,  /* the first receive on the socket since the task sent on it (a response) */
	DL_NET_PEEK = 1u << 2,        /* MSG_PEEK: the bytes stay queued (not counted as received) */
};

struct dl_net_recv_ev {
	struct dl_hdr h;          /* ts = syscall entry (DL_NET_NO_START: the return) */
	dl_u64 dur_ns;            /* entry to return: the time blocked waiting for the data, and its copy */
	dl_s64 ret;               /* bytes received, or -errno */
	dl_u8 raddr[16];          /* the peer: IPv4 in the first 4 bytes; all 0 if not connected (UDP) */
	dl_u8 laddr[16];          /* this end */
	dl_u16 family;            /* AF_INET 2, AF_INET6 10 */
	dl_u16 protocol;          /* IPPROTO_TCP 6, IPPROTO_UDP 17 */
	dl_u16 rport;             /* host order; 0 if not connected */
	dl_u16 lport;
	dl_u32 call;              /* enum dl_read_call; 0 when the entry was not seen */
	dl_u32 flags;             /* enum dl_net_flags */
	dl_u32 srtt_us;           /* TCP: the kernel's smoothed round-trip time then (0: not TCP) */
	dl_u32 pad;
};

/* Slots of the traced set's count per tgid (bpf/common.bpf.h, traced_slots): a power of two. */
#define DL_TRACED_SLOTS 8192

/* Value of the "traced" map (key: tgid). */
struct dl_traced {
	dl_u32 ppid;
	dl_u32 flags;
};

#endif /* DLBPF_EVENTS_H */
