// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The physical floor of a uprobe: programs that do nothing. What a probe costs
 * the traced thread with these attached is the trap and the kernel's uprobe
 * machinery, which no tracer can go below. The same for the scheduler's
 * and the syscall events, which dlbpf's sched and files programs
 * share with every task.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "dlbpf/syscall_handler.h"

SEC("uprobe.multi")
int ref_entry(void *ctx)
{
	return 0;
}

SEC("uretprobe.multi")
int ref_return(void *ctx)
{
	return 0;
}

/*
 * The least a tracer pays to record what dlbpf records of a call, with nothing
 * else (reftrace --record): no in-flight stack, no traced-set or Python check,
 * no drop counter. A launch: its clock, ids, which function (the cookie), its
 * register arguments and one user read of the return address and both stack
 * arguments, in one 64-byte ring-buffer record. A call with a return: its entry
 * time and arguments kept in task storage, and a record at return.
 */

struct ref_record {
	__u64 ts, id, cookie, arg[5];
};

struct ref_call {
	__u64 ts, arg[5];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} ref_rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ref_call);
} ref_calls SEC(".maps");

SEC("?uprobe.multi")
int BPF_KPROBE(ref_rec_launch)
{
	struct ref_record *r = bpf_ringbuf_reserve(&ref_rb, sizeof(*r), 0);

	if (!r)
		return 0;
	r->ts = bpf_ktime_get_ns();
	r->id = bpf_get_current_pid_tgid();
	r->cookie = bpf_get_attach_cookie(ctx);
	r->arg[0] = PT_REGS_PARM1(ctx);
	/* dlbpf packs grid and block into two words, as here. */
	r->arg[1] = PT_REGS_PARM2(ctx) ^ PT_REGS_PARM3(ctx) << 48;
	if (bpf_probe_read_user(&r->arg[2], 3 * sizeof(__u64), (void *)PT_REGS_SP(ctx)))
		r->arg[2] = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("?uprobe.multi")
int BPF_KPROBE(ref_rec_enter)
{
	struct ref_call *c = bpf_task_storage_get(&ref_calls, bpf_get_current_task_btf(), 0,
						  BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!c)
		return 0;
	c->arg[0] = PT_REGS_PARM1(ctx);
	c->arg[1] = PT_REGS_PARM2(ctx);
	c->arg[2] = PT_REGS_PARM3(ctx);
	c->arg[3] = PT_REGS_PARM4(ctx);
	c->arg[4] = PT_REGS_PARM5(ctx);
	c->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("?uretprobe.multi")
int BPF_KRETPROBE(ref_rec_return)
{
	__u64 now = bpf_ktime_get_ns();
	struct ref_call *c = bpf_task_storage_get(&ref_calls, bpf_get_current_task_btf(), 0, 0);
	struct ref_record *r;

	if (!c || !c->ts)
		return 0;
	r = bpf_ringbuf_reserve(&ref_rb, sizeof(*r), 0);
	if (!r)
		return 0;
	r->ts = c->ts;
	r->id = bpf_get_current_pid_tgid();
	r->cookie = bpf_get_attach_cookie(ctx) | (now - c->ts) << 16;
	__builtin_memcpy(r->arg, c->arg, sizeof(r->arg));
	r->arg[4] ^= PT_REGS_RC(ctx);
	c->ts = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* The floor of the scheduler tracepoints every task on the machine runs through (reftrace --sched). */
SEC("?raw_tp/sched_switch")
int ref_switch(void *ctx)
{
	return 0;
}

SEC("?raw_tp/sched_wakeup")
int ref_wakeup(void *ctx)
{
	return 0;
}

SEC("?raw_tp/sched_waking")
int ref_waking(void *ctx)
{
	return 0;
}

SEC("?raw_tp/sched_wakeup_new")
int ref_wakeup_new(void *ctx)
{
	return 0;
}

/* The floor of the syscall events the files source attaches to (reftrace --syscalls). */
SEC("?tp/syscalls/sys_enter_read")
int ref_sys_enter_read(void *ctx)
{
	return 0;
}

SEC("?tp/syscalls/sys_enter_pread64")
int ref_sys_enter_pread64(void *ctx)
{
	return 0;
}

SEC("?tp/syscalls/sys_enter_readv")
int ref_sys_enter_readv(void *ctx)
{
	return 0;
}

SEC("?tp/syscalls/sys_enter_preadv")
int ref_sys_enter_preadv(void *ctx)
{
	return 0;
}

SEC("?tp/syscalls/sys_enter_openat")
int ref_sys_enter_openat(void *ctx)
{
	return 0;
}

SEC("?tp/syscalls/sys_enter_close")
int ref_sys_enter_close(void *ctx)
{
	return 0;
}

SEC("?tp/syscalls/sys_exit_read")
int ref_sys_exit_read(void *ctx)
{
	return 0;
}

SEC("?tp/syscalls/sys_exit_pread64")
int ref_sys_exit_pread64(void *ctx)
{
	return 0;
}

SEC("?tp/syscalls/sys_exit_readv")
int ref_sys_exit_readv(void *ctx)
{
	return 0;
}

SEC("?tp/syscalls/sys_exit_preadv")
int ref_sys_exit_preadv(void *ctx)
{
	return 0;
}

SEC("?tp/syscalls/sys_exit_openat")
int ref_sys_exit_openat(void *ctx)
{
	return 0;
}

/*
 * The floor of the files source's cheaper mechanisms: empty programs on the same syscall handlers
 * (reftrace --fentry, --kprobes), what every task's read, openat and close pays for the mechanism
 * itself before dlbpf's programs do anything.
 */
#define REF_FENTRY(name, fn)				\
SEC("?fentry/" fn)					\
int ref_fe_##name(void *ctx) { return 0; }		\
SEC("?fexit/" fn)					\
int ref_fx_##name(void *ctx) { return 0; }
#define REF_KPROBE(name, fn)				\
SEC("?kprobe/" fn)					\
int ref_kp_##name(void *ctx) { return 0; }		\
SEC("?kretprobe/" fn)					\
int ref_kr_##name(void *ctx) { return 0; }

/* Both mechanisms on each handler (dlbpf/syscall_handler.h names it for the target). */
#define REF_BOTH(name, sys) REF_FENTRY(name, DL_SYSCALL_HANDLER(sys)) REF_KPROBE(name, DL_SYSCALL_HANDLER(sys))

REF_BOTH(read, "read")
REF_BOTH(pread, "pread64")
REF_BOTH(readv, "readv")
REF_BOTH(preadv, "preadv")
REF_BOTH(openat, "openat")
REF_BOTH(close, "close")

char LICENSE[] SEC("license") = "Dual BSD/GPL";
