// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Files: which fd a traced process opened on which path (openat), each read
 * syscall on an fd (read, pread64, readv, preadv: bytes are the return value)
 * and each close, so user space can attribute reads to files. The block bytes
 * the thread submitted inside a read come with it (io.bpf.c adds them to the
 * thread's file_call), which is the share of the read the page cache did not
 * serve.
 *
 * The raw sys_enter / sys_exit tracepoints, not the per-syscall events
 * (syscalls/sys_enter_read ...): those go through perf's syscall handler,
 * which builds a record for every call before any program can say no. With
 * empty programs, 4 KiB reads of a cached file cost an untraced process
 * about 1,100 ns more each through the per-syscall events and about 100 ns
 * through the raw pair (bpftrace, kernel 6.18, this project's test machine).
 * The raw pair fires for every syscall of every process: the syscall number
 * is the first thing asked, the task-local traced mark the second.
 *
 * Optional ("?"): user space loads them where the kernel has the raw pair.
 */
#include "common.bpf.h"

/* Syscall numbers of the native ABI (the raw tracepoints pass the number, not the event). */
#if defined(__TARGET_ARCH_x86)
#define NR_READ 0
#define NR_CLOSE 3
#define NR_PREAD64 17
#define NR_READV 19
#define NR_OPENAT 257
#define NR_PREADV 295
#elif defined(__TARGET_ARCH_arm64)
#define NR_OPENAT 56
#define NR_CLOSE 57
#define NR_READ 63
#define NR_READV 65
#define NR_PREAD64 67
#define NR_PREADV 69
#else
#error "syscall numbers of this architecture are not known to files.bpf.c"
#endif

#define TS_COMPAT 0x0002   /* x86: a 32-bit syscall, numbered differently */

static __always_inline bool compat_syscall(struct task_struct *t)
{
#if defined(__TARGET_ARCH_x86)
	return t->thread_info.status & TS_COMPAT;
#else
	return false;
#endif
}

/* The path is read at exit, when openat has faulted it in: at entry an unmapped page fails the read. */
static __always_inline struct file_call *begin(struct task_struct *t, __u32 call, __s32 fd)
{
	struct file_call *fc;

	if (!dl_task_traced(t) || compat_syscall(t))
		return NULL;
	fc = bpf_task_storage_get(&file_calls, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!fc) {
		dl_count_drop(DL_DROP_INFLIGHT);
		return NULL;
	}
	fc->ts = bpf_ktime_get_ns();
	fc->call = call;
	fc->fd = fd;
	fc->disk_bytes = 0;
	return fc;
}

static __always_inline void emit_close(__s32 fd)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct dl_file_close_ev *e;

	e = dl_reserve(sizeof(*e), DL_EV_FILE_CLOSE, DL_DROP_BIO, bpf_ktime_get_ns(), id >> 32, (__u32)id);
	if (!e)
		return;
	e->fd = fd;
	e->pad = 0;
	dl_submit(e);
}

SEC("?raw_tp/sys_enter")
int BPF_PROG(file_sys_enter, struct pt_regs *regs, long nr)
{
	struct task_struct *t;
	struct file_call *fc;
	__u32 call;

	switch (nr) {
	case NR_READ: call = DL_READ_READ; break;
	case NR_PREAD64: call = DL_READ_PREAD64; break;
	case NR_READV: call = DL_READ_READV; break;
	case NR_PREADV: call = DL_READ_PREADV; break;
	case NR_OPENAT: call = FILE_CALL_OPENAT; break;
	case NR_CLOSE: call = 0; break;
	default: return 0;
	}
	t = bpf_get_current_task_btf();
	if (!call) {
		if (dl_task_traced(t) && !compat_syscall(t))
			emit_close((__s32)PT_REGS_PARM1_CORE_SYSCALL(regs));
		return 0;
	}
	/* openat(dirfd, path, flags, mode); the read family's first argument is the fd. */
	fc = begin(t, call, (__s32)PT_REGS_PARM1_CORE_SYSCALL(regs));
	if (fc && call == FILE_CALL_OPENAT) {
		fc->path = PT_REGS_PARM2_CORE_SYSCALL(regs);
		fc->open_flags = (__u32)PT_REGS_PARM3_CORE_SYSCALL(regs);
	}
	return 0;
}

static __always_inline void read_exit(struct file_call *fc, long ret)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	struct dl_file_read_ev *e;

	e = dl_reserve(sizeof(*e), DL_EV_FILE_READ, DL_DROP_BIO, fc->ts, id >> 32, (__u32)id);
	if (!e)
		return;
	e->dur_ns = now - fc->ts;
	e->ret = ret;
	e->disk_bytes = fc->disk_bytes;
	e->fd = fc->fd;
	e->call = fc->call;
	dl_submit(e);
}

static __always_inline void open_exit(struct file_call *fc, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct dl_file_open_ev *e;
	struct dentry *cwd;
	long n;

	/* A failed open names no fd: nothing to attribute. */
	if (ret < 0)
		return;
	e = dl_reserve(sizeof(*e), DL_EV_FILE_OPEN, DL_DROP_BIO, bpf_ktime_get_ns(), id >> 32, (__u32)id);
	if (!e)
		return;
	e->fd = (__s32)ret;
	e->dirfd = fc->fd;
	e->open_flags = fc->open_flags;
	e->flags = 0;
	e->pad = 0;
	/* User space joins a relative path to a cwd only if it is this directory (a chdir since is seen). */
	cwd = BPF_CORE_READ(bpf_get_current_task_btf(), fs, pwd.dentry);
	e->cwd_ino = BPF_CORE_READ(cwd, d_inode, i_ino);
	e->cwd_dev = BPF_CORE_READ(cwd, d_sb, s_dev);
	n = bpf_probe_read_user_str(e->path, sizeof(e->path), (const void *)fc->path);
	if (n < 0) {
		e->path[0] = '\0';
		e->flags |= DL_FILE_PATH_FAULT;
	} else if (n == sizeof(e->path)) {
		/* Full buffer: the path may have been longer (the helper cannot say). */
		e->flags |= DL_FILE_TRUNCATED;
	}
	dl_submit(e);
}

SEC("?raw_tp/sys_exit")
int BPF_PROG(file_sys_exit, struct pt_regs *regs, long ret)
{
	/* Only a traced thread inside one of the calls above has a file_call in flight; no storage is created. */
	struct file_call *fc = bpf_task_storage_get(&file_calls, bpf_get_current_task_btf(), 0, 0);

	if (!fc || !fc->call)
		return 0;
	if (fc->call == FILE_CALL_OPENAT)
		open_exit(fc, ret);
	else
		read_exit(fc, ret);
	fc->call = 0;
	return 0;
}
