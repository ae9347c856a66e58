/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --overhead-budget: what the kernel charges a thread for a uprobe and for a
 * return probe, beside the BPF program's own run time (which BPF run-time
 * statistics measure live). Measured at start, as `make bench` measures its
 * floor: a function of dlbpf itself, called with empty programs attached and
 * without, the difference of the median call. It begins with the instruction
 * the CUDA runtime's entry points begin with (push %rbp): the kernel runs the
 * probed instruction out of line or emulates it by its kind, and that decides
 * much of the price. Calls are timed both hot (back to back) and after the
 * caches were flushed by a walk through a buffer larger than a core's L2: a
 * training step runs much code between two CUDA calls, so the cold figure is
 * the one charged.
 */
#ifndef DLBPF_CALIB_H
#define DLBPF_CALIB_H

#include "capture/tracer.h"

struct dl_calib {
	double uprobe_ns, uretprobe_ns;           /* cold: charged per event */
	double uprobe_hot_ns, uretprobe_hot_ns;   /* back to back, for the report */
	uint64_t took_ns;
};

/* 0, or -errno when the probes cannot be attached (the figures are then 0). */
int dl_calib_run(struct dl_tracer *t, struct dl_calib *out);

/*
 * The median read(-1) and write(-1) of this thread, in ns: two system calls that fail at once
 * (EBADF), one whose handler the files source probes and one it never does. Taken before and
 * after the files programs attach, their changes are what a task dlbpf does not trace pays per
 * read (its programs' entry and exit, each run and dropped) and, on the syscall-tracepoint
 * fallback, per system call of any kind (the kernel's traced syscall path).
 */
void dl_calib_syscalls(double *read_ns, double *write_ns);

#endif
