// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The physical floor of a uprobe: programs that do nothing. What a probe costs
 * the traced thread with these attached is the trap and the kernel's uprobe
 * machinery, which no tracer can go below.
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

char LICENSE[] SEC("license") = "Dual BSD/GPL";
