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

char LICENSE[] SEC("license") = "Dual BSD/GPL";
