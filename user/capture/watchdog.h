/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Nothing dlbpf holds stays held without dlbpf. The dlopen hold stops a
 * process until dlbpf has attached to the library it loaded (capture/held.h);
 * if dlbpf is killed (SIGKILL, the OOM killer, a crash) or stops answering
 * (Ctrl-Z, a stall), that process would stay stopped, and with it a training
 * job.
 *
 * The watchdog is a small child process that keeps the BPF side's map of held
 * processes (a pid is in it from just before its SIGSTOP until anyone sends it
 * SIGCONT). It continues:
 *  - every process left in the map once dlbpf is gone: dead, its descriptors
 *    closed, so no probe can stop another one;
 *  - any process held longer than DL_HOLD_MAX_NS while dlbpf lives: dlbpf
 *    is not answering, so the hold is turned off for the rest of the run.
 * It leaves dlbpf's session, so the terminal's signals and a kill of dlbpf's
 * process group do not take it, and exits once dlbpf has ended (dlbpf tells
 * it, or it sees dlbpf gone). It holds no other descriptor of dlbpf's: none of
 * dlbpf's probes outlives dlbpf because of it.
 */
#ifndef DLBPF_WATCHDOG_H
#define DLBPF_WATCHDOG_H

#include <sys/types.h>

/*
 * The longest a process stays held: a hold normally lasts while dlbpf reads
 * the new library's symbols and attaches, 10-100 ms; a framework library of
 * 1-2 GiB read for a linked-in runtime can take seconds on a busy machine.
 * Past this, tracing the first calls after the load is not worth a frozen job.
 */
#define DL_HOLD_MAX_NS 10000000000ull

/* Zero-initialised: not started. */
struct dl_watchdog {
	pid_t pid;
	int fd;          /* dlbpf's end of a socket pair: a byte says "done", end of file says dlbpf died */
};

/* Starts the watchdog over the held map (dl_tracer_held_fd); before any probe is attached. */
int dl_watchdog_start(struct dl_watchdog *w, int held_fd);
/* A watchdog that is gone (someone killed it) is said and replaced; from the housekeeping. */
void dl_watchdog_keep(struct dl_watchdog *w, int held_fd);
/* Every probe is detached: the watchdog continues what is left held, and exits; reaped here. */
void dl_watchdog_stop(struct dl_watchdog *w);

#endif
