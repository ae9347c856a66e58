// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Files: which fd a traced process opened on which path (openat), each read
 * syscall on an fd (read, pread64, readv, preadv: bytes are the return value)
 * and each close, so user space can attribute reads to files. The block bytes
 * the thread submitted inside a read come with it (io.bpf.c adds them to the
 * thread's file_call), which is the share of the read the page cache did not
 * serve.
 *
 * Three twin sets see the same system calls, chosen before load by what the
 * kernel allows (user/capture/files.c; all are optional, "?"):
 * - fentry/fexit on the syscalls' handlers (__x64_sys_read, __arm64_sys_read,
 *   ...: dlbpf/syscall_handler.h; 5.5+, where
 *   the kernel lets tracing programs attach): a BPF trampoline on six functions.
 * - kprobes/kretprobes on the same handlers.
 * - the syscall tracepoints (syscalls/sys_enter_read, ...). Attaching any
 *   program to one puts every task on the machine on the kernel's traced
 *   syscall path, for every system call it makes: the fallback only.
 * The handlers, not the VFS below them (vfs_read, do_sys_openat2, filp_close):
 * they take the fd the records name and see exactly the calls the tracepoints
 * see (the VFS sees files, not fds; it also sees a stacked file system's own
 * reads, overlayfs's vfs_iter_read of its backing file, and open/creat/openat2).
 *
 * Every one of them runs for every task on the machine that makes the call:
 * whether the task is traced is the first thing each asks (one load where no
 * traced process shares its slot), before the clock or any argument.
 */
#include "common.bpf.h"
#include "dlbpf/syscall_handler.h"

/* The thread's call in flight, if it is the one this exit ends. */
static __always_inline struct file_call *end(bool openat)
{
	struct task_struct *cur = dl_current();
	struct file_call *fc;

	/*
	 * Untraced tasks never got a file_call: where no traced process shares the task's slot, one
	 * load says so before any storage lookup (a shared slot looks, and finds none).
	 */
	if (!*dl_traced_slot(DL_TASK_READ(cur, tgid)))
		return NULL;
	fc = dl_file_call(false);
	if (!fc || !fc->call || (fc->call == FILE_CALL_OPENAT) != openat)
		return NULL;
	return fc;
}

static __always_inline void read_end(long ret)
{
	struct file_call *fc = end(false);
	__u64 id, now;
	struct dl_file_read_ev *e;

	if (!fc)
		return;
	id = bpf_get_current_pid_tgid();
	now = bpf_ktime_get_ns();
	e = dl_reserve(sizeof(*e), DL_EV_FILE_READ, DL_DROP_BIO, fc->ts, id >> 32, (__u32)id);
	if (e) {
		e->dur_ns = now - fc->ts;
		e->ret = ret;
		e->disk_bytes = fc->disk_bytes;
		e->fd = fc->fd;
		e->call = fc->call;
		dl_submit(e);
	}
	fc->call = 0;
}

/* The low 32 bits of the inode the current task's fd names (0: none): how a block read outside read calls finds it. */
static __always_inline __u32 fd_ino32(long fd)
{
	struct fdtable *fdt = BPF_CORE_READ(dl_current(), files, fdt);
	struct file **fds, *file = NULL;

	if (!fdt || fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	fds = BPF_CORE_READ(fdt, fd);
	if (!fds || bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return 0;
	return (__u32)BPF_CORE_READ(file, f_inode, i_ino);
}

/*
 * An open that returned ret, of path (a user pointer) relative to dirfd. The path is read at the
 * exit, when openat has faulted it in: at entry an unmapped page fails the read.
 */
static __always_inline void open_end(__s32 dirfd, __u64 path, __u32 flags, long ret)
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
	e->dirfd = dirfd;
	e->open_flags = flags;
	e->flags = 0;
	e->ino32 = fd_ino32(ret);
	/* User space joins a relative path to a cwd only if it is this directory (a chdir since is seen). */
	cwd = BPF_CORE_READ(dl_current(), fs, pwd.dentry);
	e->cwd_ino = BPF_CORE_READ(cwd, d_inode, i_ino);
	e->cwd_dev = BPF_CORE_READ(cwd, d_sb, s_dev);
	n = bpf_probe_read_user_str(e->path, sizeof(e->path), (const void *)path);
	if (n < 0) {
		e->path[0] = '\0';
		e->flags |= DL_FILE_PATH_FAULT;
	} else if (n == sizeof(e->path)) {
		/* Full buffer: the path may have been longer (the helper cannot say). */
		e->flags |= DL_FILE_TRUNCATED;
	}
	dl_submit(e);
}

/* The thread's openat in flight (its arguments saved at entry) ended with ret. */
static __always_inline void open_exit(long ret)
{
	struct file_call *fc = end(true);

	if (!fc)
		return;
	fc->call = 0;
	open_end(fc->fd, fc->path, fc->open_flags, ret);
}

static __always_inline void close_ev(__s32 fd)
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
 * --- fentry/fexit on the handlers. regs: the registers the task entered the kernel with (the
 * call's first three arguments: x86-64 di, si, dx; arm64 orig_x0, x1, x2, orig_x0 being x0 as it
 * came in), read as the kernel's own selftests read them (PT_REGS_PARM1_CORE_SYSCALL: a probe
 * read, only ever for a traced task). Names: the kernel keeps 15
 * characters of a program's name (bpftool, bench table 7).
 */
#define FENTRY_READ(name, fn, call)					\
SEC("?fentry/" fn)							\
int BPF_PROG(name##_fentry, const struct pt_regs *regs)			\
{									\
	struct file_call *fc = dl_file_call_begin(call);				\
									\
	if (fc)								\
		fc->fd = (__s32)PT_REGS_PARM1_CORE_SYSCALL(regs);		\
	return 0;							\
}									\
SEC("?fexit/" fn)							\
int BPF_PROG(name##_fexit, const struct pt_regs *regs, long ret)	\
{									\
	read_end(ret);							\
	return 0;							\
}

FENTRY_READ(fread, DL_SYSCALL_HANDLER("read"), DL_READ_READ)
FENTRY_READ(fpread, DL_SYSCALL_HANDLER("pread64"), DL_READ_PREAD64)
FENTRY_READ(freadv, DL_SYSCALL_HANDLER("readv"), DL_READ_READV)
FENTRY_READ(fpreadv, DL_SYSCALL_HANDLER("preadv"), DL_READ_PREADV)

/* The arguments are still in regs at the exit: one program, no state between entry and exit. */
SEC("?fexit/" DL_SYSCALL_HANDLER("openat"))
int BPF_PROG(fopen_fexit, const struct pt_regs *regs, long ret)
{
	if (!dl_current_traced())
		return 0;
	open_end((__s32)PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs), (__u32)PT_REGS_PARM3_CORE_SYSCALL(regs), ret);
	return 0;
}

SEC("?fentry/" DL_SYSCALL_HANDLER("close"))
int BPF_PROG(fclose_fentry, const struct pt_regs *regs)
{
	if (dl_current_traced())
		close_ev((__s32)PT_REGS_PARM1_CORE_SYSCALL(regs));
	return 0;
}

/*
 * --- kprobes/kretprobes on the same handlers. The handler's first argument is the saved
 * registers, read with probe reads; at the return it is gone, so openat saves them at entry.
 */
static __always_inline __u64 sys_arg(struct pt_regs *ctx, int i)
{
	struct pt_regs *regs = (struct pt_regs *)PT_REGS_PARM1(ctx);

	return i == 0 ? PT_REGS_PARM1_CORE_SYSCALL(regs) : i == 1 ? PT_REGS_PARM2_CORE_SYSCALL(regs) :
			PT_REGS_PARM3_CORE_SYSCALL(regs);
}

#define KPROBE_READ(name, fn, call)					\
SEC("?kprobe/" fn)							\
int name##_kprobe(struct pt_regs *ctx)					\
{									\
	struct file_call *fc = dl_file_call_begin(call);				\
									\
	if (fc)								\
		fc->fd = (__s32)sys_arg(ctx, 0);			\
	return 0;							\
}									\
SEC("?kretprobe/" fn)							\
int name##_kret(struct pt_regs *ctx)					\
{									\
	read_end(PT_REGS_RC(ctx));					\
	return 0;							\
}

KPROBE_READ(kread, DL_SYSCALL_HANDLER("read"), DL_READ_READ)
KPROBE_READ(kpread, DL_SYSCALL_HANDLER("pread64"), DL_READ_PREAD64)
KPROBE_READ(kreadv, DL_SYSCALL_HANDLER("readv"), DL_READ_READV)
KPROBE_READ(kpreadv, DL_SYSCALL_HANDLER("preadv"), DL_READ_PREADV)

SEC("?kprobe/" DL_SYSCALL_HANDLER("openat"))
int kopen_kprobe(struct pt_regs *ctx)
{
	struct file_call *fc = dl_file_call_begin(FILE_CALL_OPENAT);

	if (fc) {
		fc->fd = (__s32)sys_arg(ctx, 0);
		fc->path = sys_arg(ctx, 1);
		fc->open_flags = (__u32)sys_arg(ctx, 2);
	}
	return 0;
}

SEC("?kretprobe/" DL_SYSCALL_HANDLER("openat"))
int kopen_kret(struct pt_regs *ctx)
{
	open_exit(PT_REGS_RC(ctx));
	return 0;
}

SEC("?kprobe/" DL_SYSCALL_HANDLER("close"))
int kclose_kprobe(struct pt_regs *ctx)
{
	if (dl_current_traced())
		close_ev((__s32)sys_arg(ctx, 0));
	return 0;
}

/* --- the syscall tracepoints: the fallback (user space attaches them, capture/sysevents.h) --- */

static __always_inline int read_enter(struct trace_event_raw_sys_enter *ctx, __u32 call)
{
	struct file_call *fc = dl_file_call_begin(call);

	if (fc)
		fc->fd = (__s32)ctx->args[0];
	return 0;
}

SEC("?tp/syscalls/sys_enter_read")
int file_read_enter(struct trace_event_raw_sys_enter *ctx)
{
	return read_enter(ctx, DL_READ_READ);
}

SEC("?tp/syscalls/sys_enter_pread64")
int file_pread_enter(struct trace_event_raw_sys_enter *ctx)
{
	return read_enter(ctx, DL_READ_PREAD64);
}

SEC("?tp/syscalls/sys_enter_readv")
int file_readv_enter(struct trace_event_raw_sys_enter *ctx)
{
	return read_enter(ctx, DL_READ_READV);
}

SEC("?tp/syscalls/sys_enter_preadv")
int file_preadv_enter(struct trace_event_raw_sys_enter *ctx)
{
	return read_enter(ctx, DL_READ_PREADV);
}

SEC("?tp/syscalls/sys_exit_read")
int file_read_exit(struct trace_event_raw_sys_exit *ctx)
{
	read_end(ctx->ret);
	return 0;
}

SEC("?tp/syscalls/sys_exit_pread64")
int file_pread_exit(struct trace_event_raw_sys_exit *ctx)
{
	read_end(ctx->ret);
	return 0;
}

SEC("?tp/syscalls/sys_exit_readv")
int file_readv_exit(struct trace_event_raw_sys_exit *ctx)
{
	read_end(ctx->ret);
	return 0;
}

SEC("?tp/syscalls/sys_exit_preadv")
int file_preadv_exit(struct trace_event_raw_sys_exit *ctx)
{
	read_end(ctx->ret);
	return 0;
}

SEC("?tp/syscalls/sys_enter_openat")
int file_open_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct file_call *fc = dl_file_call_begin(FILE_CALL_OPENAT);

	if (fc) {
		fc->fd = (__s32)ctx->args[0];
		fc->path = ctx->args[1];
		fc->open_flags = (__u32)ctx->args[2];
	}
	return 0;
}

SEC("?tp/syscalls/sys_exit_openat")
int file_open_exit(struct trace_event_raw_sys_exit *ctx)
{
	open_exit(ctx->ret);
	return 0;
}

SEC("?tp/syscalls/sys_enter_close")
int file_close(struct trace_event_raw_sys_enter *ctx)
{
	if (dl_current_traced())
		close_ev((__s32)ctx->args[0]);
	return 0;
}
