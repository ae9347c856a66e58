// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --overhead-budget: empty programs, attached for a few ms at start to a
 * function of dlbpf itself (user/capture/calib.c). What a call costs with them
 * on, less what it costs without, is the kernel's price of a uprobe and of a
 * return probe (the trap, the dispatch): the part of an event's cost that BPF
 * run-time statistics do not see.
 */
#include "common.bpf.h"

SEC("?uprobe.multi")
int calib_entry(void *ctx)
{
	return 0;
}

SEC("?uretprobe.multi")
int calib_return(void *ctx)
{
	return 0;
}

/* The twins for kernels without uprobe_multi (6.6): the price of a classic uprobe is the same trap. */
SEC("?uprobe")
int calib_entry_one(void *ctx)
{
	return 0;
}

SEC("?uretprobe")
int calib_ret_one(void *ctx)
{
	return 0;
}
