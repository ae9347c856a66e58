// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Files: which fd a traced process opened on which path (openat), each read
 * syscall on an fd (read, pread64, readv, preadv: bytes are the return value)
 * and each close, so user space can attribute reads to files. The block bytes
 * the thread submitted inside a read come with it (io.bpf.c adds them to the
 * thread's file_call), which is the share of the read the page cache did not
 * serve.
 *
 * These tracepoints fire for every syscall of every process on the machine:
 * the task-local traced mark is the first thing each program asks, before it
 * reads the clock or any argument. All are optional ("?"): user space loads
 * them where tracefs has the syscall events.
 */
#include "common.bpf.h"

/* The path is read at exit, when openat has faulted it in: at entry an unmapped page fails the read. */
static __always_inline struct file_call *begin(__u32 call, __s32 fd)
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
	fc->fd = fd;
	fc->disk_bytes = 0;
	return fc;
}

/* The thread's call in flight, if it is the one this exit ends; ended. */
static __always_inline struct file_call *end(bool openat)
{
	struct file_call *fc;

	/* Untraced tasks never got a file_call: no mark check needed, and no storage is created. */
	fc = dl_file_call(false);
	if (!fc || !fc->call || (fc->call == FILE_CALL_OPENAT) != openat)
		return NULL;
	return fc;
}

static __always_inline int read_enter(struct trace_event_raw_sys_enter *ctx, __u32 call)
{
	begin(call, (__s32)ctx->args[0]);
	return 0;
}

static __always_inline int read_exit(struct trace_event_raw_sys_exit *ctx)
{
	struct file_call *fc = end(false);
	__u64 id = bpf_get_current_pid_tgid(), now;
	struct dl_file_read_ev *e;

	if (!fc)
		return 0;
	now = bpf_ktime_get_ns();
	e = dl_reserve(sizeof(*e), DL_EV_FILE_READ, DL_DROP_BIO, fc->ts, id >> 32, (__u32)id);
	if (e) {
		e->dur_ns = now - fc->ts;
		e->ret = ctx->ret;
		e->disk_bytes = fc->disk_bytes;
		e->fd = fc->fd;
		e->call = fc->call;
		dl_submit(e);
	}
	fc->call = 0;
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
	return read_exit(ctx);
}

SEC("?tp/syscalls/sys_exit_pread64")
int file_pread_exit(struct trace_event_raw_sys_exit *ctx)
{
	return read_exit(ctx);
}

SEC("?tp/syscalls/sys_exit_readv")
int file_readv_exit(struct trace_event_raw_sys_exit *ctx)
{
	return read_exit(ctx);
}

SEC("?tp/syscalls/sys_exit_preadv")
int file_preadv_exit(struct trace_event_raw_sys_exit *ctx)
{
	return read_exit(ctx);
}

SEC("?tp/syscalls/sys_enter_openat")
int file_open_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct file_call *fc = begin(FILE_CALL_OPENAT, (__s32)ctx->args[0]);

	if (fc) {
		fc->path = ctx->args[1];
		fc->open_flags = (__u32)ctx->args[2];
	}
	return 0;
}

SEC("?tp/syscalls/sys_exit_openat")
int file_open_exit(struct trace_event_raw_sys_exit *ctx)
{
	struct file_call *fc = end(true);
	__u64 id = bpf_get_current_pid_tgid();
	struct dl_file_open_ev *e;
	struct dentry *cwd;
	long n;

	if (!fc)
		return 0;
	fc->call = 0;
	/* A failed open names no fd: nothing to attribute. */
	if (ctx->ret < 0)
		return 0;
	e = dl_reserve(sizeof(*e), DL_EV_FILE_OPEN, DL_DROP_BIO, bpf_ktime_get_ns(), id >> 32, (__u32)id);
	if (!e)
		return 0;
	e->fd = (__s32)ctx->ret;
	e->dirfd = fc->fd;
	e->open_flags = fc->open_flags;
	e->flags = 0;
	e->pad = 0;
	/* User space joins a relative path to a cwd only if it is this directory (a chdir since is seen). */
	cwd = BPF_CORE_READ(dl_current(), fs, pwd.dentry);
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
	return 0;
}

SEC("?tp/syscalls/sys_enter_close")
int file_close(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct dl_file_close_ev *e;

	if (!dl_current_traced())
		return 0;
	e = dl_reserve(sizeof(*e), DL_EV_FILE_CLOSE, DL_DROP_BIO, bpf_ktime_get_ns(), id >> 32, (__u32)id);
	if (!e)
		return 0;
	e->fd = (__s32)ctx->args[0];
	e->pad = 0;
	dl_submit(e);
	return 0;
}
