/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Return probes and seccomp. On x86-64 since 6.11 a uretprobe returns through
 * a trampoline that makes the uretprobe system call (335). A seccomp filter
 * that does not list it (Docker's default profile is an allowlist that answers
 * EPERM to anything unlisted) made it fail, and the traced process died on the
 * first traced return, until the kernel let the call through every filter
 * (cf6cb56ef244 "seccomp: passthrough uretprobe systemcall without filtering",
 * v6.14; backported to 6.12.14 and 6.13.3; distribution kernels at their own
 * pace). A version cannot tell which kernel this is: only a trial can.
 */
#ifndef DLBPF_SECCOMP_HAZARD_H
#define DLBPF_SECCOMP_HAZARD_H

#include <stdio.h>
#include <sys/types.h>

/*
 * The Seccomp: field of /proc/PID/status: 0 (none), 1 (strict) or 2
 * (filter); 0 when the field is absent (a kernel without CONFIG_SECCOMP);
 * -errno when the file cannot be read (-ENOENT: pid is gone), -EINVAL when the
 * field is there but not a mode.
 */
int dl_proc_seccomp_mode(pid_t pid);
/* The same, from an open status file (read to its end or to the field). */
int dl_seccomp_mode_from_status(FILE *f);

/*
 * The trial: in a child of ours under a seccomp filter that denies system
 * call 335 (EPERM) and allows everything else, a return probe on a function
 * of this executable, without BPF (a perf uprobe event). 1 when the child died
 * of it (a kernel without the pass-through: return probes would kill
 * processes under such a filter), 0 when it returned through the probe
 * unharmed (or on an architecture without the uretprobe system call: no
 * trial), -errno when the trial could not run or proved nothing: -EACCES or
 * -ENOENT from perf_event_open (no uprobe PMU, no right to it), -ETIMEDOUT
 * (the child took over 5 s: killed), -ENODATA (the child returned but the
 * probe never fired), -EINTR (the child was killed from outside). Never
 * leaves a child behind. Takes a few milliseconds; call it once, before any
 * traced process is touched.
 */
int dl_uretprobe_seccomp_hazard(void);

/* One line for the start-up message when the trial returned 1. */
const char *dl_seccomp_hazard_why(void);

#endif
