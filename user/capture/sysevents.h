/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Programs on syscall tracepoint events (tracefs events/syscalls/...), attached
 * through perf events dlbpf opens itself, so that it keeps a reference to each.
 *
 * Why: when the last user of such an event goes, the kernel waits for a grace
 * period while it holds the trace event lock, so eleven events took one wait
 * after the other (35-45 ms each, 313 ms of a 350 ms detach on kernel 6.18).
 * Destroying the links takes the programs off at once (the kernel only swaps
 * the event's program array); the perf events themselves, disabled and with no
 * program, are then closed by a short-lived child that outlives dlbpf, so
 * neither the detach nor dlbpf's exit waits for those grace periods.
 */
#ifndef DLBPF_CAPTURE_SYSEVENTS_H
#define DLBPF_CAPTURE_SYSEVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <bpf/libbpf.h>

#define DL_SYSEVENTS_MAX 16

/* Where tracefs may be mounted; libbpf looks in the same two places. */
#define DL_TRACEFS_ROOTS 2
extern const char *const dl_tracefs_roots[DL_TRACEFS_ROOTS];

struct dl_sysevents {
	int fd[DL_SYSEVENTS_MAX];  /* dlbpf's own reference to each event, beside the link's */
	size_t n;
	bool no_closer;            /* test hook DLBPF_TEST_NO_CLOSER (capture/hooks.h) */
};

/* The tracepoint id of events/syscalls/<event> in tracefs; -errno if there is none. */
int dl_sysevent_id(const char *event);
/* Reads a tracefs event's id file from fd, and closes it: the id, or -errno (-EINVAL: not an id). */
int dl_tracefs_id_read(int fd);
/*
 * A perf event on tracepoint id (a syscall's, a kretprobe's), on CPU 0 alone:
 * a BPF program attached to it hangs off the tracepoint itself and runs on
 * every CPU. The fd (close-on-exec), or -errno.
 */
int dl_perf_tp_open(int id);
/*
 * Attaches prog to events/syscalls/<event>; the link is the caller's to
 * destroy with the other links. NULL with errno set on failure.
 */
struct bpf_link *dl_sysevent_attach(struct dl_sysevents *s, struct bpf_program *prog, const char *event);
/*
 * After their links are destroyed: the events are disabled, and closed by a
 * child of their own that dlbpf does not wait for (here, if it cannot fork).
 */
void dl_sysevents_release(struct dl_sysevents *s);

#endif
