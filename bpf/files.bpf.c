// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Files: which fd a traced process opened on which path (openat), each read
 * syscall on an fd (read, pread64, readv, preadv: bytes are the return value)
 * and each close, so user space can attribute reads to files. The block bytes
 * the thread submitted inside a read come with it (io.bpf.c adds them to the
 * thread's file_call), which is the share of the read the page cache did not
 * serve.
 *
 * The two programs run at every syscall of every process on the machine:
 * entry asks the syscall number, then the count of traced processes in the
 * task's slot, before the clock or any argument; exit asks the slot first. Both are optional
 * ("?"): user space loads them where the kernel has the raw syscall
 * tracepoints (CONFIG_FTRACE_SYSCALLS).
 */
#include "common.bpf.h"

/* The path is read at exit, when openat has faulted it in: at entry an unmapped page fails the read. */
static __always_inline struct file_call *begin(__u32 call, __s32 fd)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct file_call *fc;

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

/*
 * The syscall numbers of the kernel's native ABI, set by user space from its
 * <sys/syscall.h> (the same ABI: dlbpf is built for the machine it traces).
 * -1 matches no syscall.
 */
const volatile long nr_read = -1, nr_pread64 = -1, nr_readv = -1, nr_preadv = -1;
const volatile long nr_openat = -1, nr_close = -1;

/* x86's TS_COMPAT: a 32-bit task's syscall numbers are another table's, so its calls are not read as these. */
#define DL_TS_COMPAT 0x0002

static __always_inline bool compat_syscall(struct task_struct *t)
{
#ifdef __TARGET_ARCH_x86
	if (bpf_core_field_exists(t->thread_info.status))
		return t->thread_info.status & DL_TS_COMPAT;
#endif
	return false;
}

static __always_inline void read_exit(struct file_call *fc, long ret)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	struct dl_file_read_ev *e;

	e = dl_reserve(sizeof(*e), DL_EV_FILE_READ, DL_DROP_BIO, fc->ts, id >> 32, (__u32)id);
	if (e) {
		e->dur_ns = now - fc->ts;
		e->ret = ret;
		e->disk_bytes = fc->disk_bytes;
		e->fd = fc->fd;
		e->call = fc->call;
		dl_submit(e);
	}
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

static __always_inline void file_close(__s32 fd)
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

/*
 * One program on the raw syscall entry, not one per syscall event: those are
 * perf events, and each one's detach waits for its own grace period under
 * the trace event mutex (11 of them took ~400 ms to detach, one after the
 * other), and each of their runs fills a perf record first.
 */
SEC("?tp_btf/sys_enter")
int BPF_PROG(file_sys_enter, struct pt_regs *regs, long nr)
{
	struct task_struct *t;
	struct file_call *fc;
	__u32 call;

	/* The number first: it is in a register, and most syscalls are none of these. */
	if (nr == nr_read)
		call = DL_READ_READ;
	else if (nr == nr_pread64)
		call = DL_READ_PREAD64;
	else if (nr == nr_readv)
		call = DL_READ_READV;
	else if (nr == nr_preadv)
		call = DL_READ_PREADV;
	else if (nr == nr_openat)
		call = FILE_CALL_OPENAT;
	else if (nr == nr_close)
		call = 0;
	else
		return 0;
	t = bpf_get_current_task_btf();
	if (!dl_task_traced(t) || compat_syscall(t))
		return 0;
	if (!call) {
		file_close((__s32)PT_REGS_PARM1_CORE_SYSCALL(regs));
		return 0;
	}
	fc = begin(call, (__s32)PT_REGS_PARM1_CORE_SYSCALL(regs));
	if (fc && call == FILE_CALL_OPENAT) {
		fc->path = PT_REGS_PARM2_CORE_SYSCALL(regs);
		fc->open_flags = (__u32)PT_REGS_PARM3_CORE_SYSCALL(regs);
	}
	return 0;
}

/* A thread is in one syscall at a time: a call begun at entry ends at the next exit. */
SEC("?tp_btf/sys_exit")
int BPF_PROG(file_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct file_call *fc;

	if (!*dl_traced_slot(t->tgid))
		return 0;
	fc = bpf_task_storage_get(&file_calls, t, 0, 0);
	if (!fc || !fc->call)
		return 0;
	if (fc->call == FILE_CALL_OPENAT)
		open_exit(fc, ret);
	else
		read_exit(fc, ret);
	fc->call = 0;
	return 0;
}
