/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Processes waiting for a rescan after the drain: one loaded a library
 * (dlopen returned) or joined by its name at exec. A dlopen probe stops the
 * process when the library is CUDA's, so that its first call after the load
 * is traced; it is held stopped until it was rescanned, then continued.
 */
#ifndef DLBPF_HELD_H
#define DLBPF_HELD_H

#include <stdbool.h>
#include <sys/types.h>
#include "util.h"

struct dl_held_proc {
	pid_t pid;
	bool stopped;    /* a probe stopped it: SIGCONT once rescanned */
};

/* A child forked and not held: it runs under its parent's probes that follow their files. */
struct dl_held_fork {
	pid_t child, parent;
};

/* Zero-initialised is empty. */
struct dl_held {
	DL_VEC(struct dl_held_proc) procs;   /* each pid once, in the order noted */
	DL_VEC(struct dl_held_fork) forks;   /* in the order forked */
};

void dl_held_note(struct dl_held *h, pid_t pid, bool stopped);
/* Rescans every noted process with fn, continues the stopped ones, and empties the set. */
void dl_held_rescan_continue(struct dl_held *h, void (*fn)(pid_t pid, void *arg), void *arg);
void dl_held_note_fork(struct dl_held *h, pid_t child, pid_t parent);
/* Gives every noted fork to fn, and empties the list. */
void dl_held_take_forks(struct dl_held *h, void (*fn)(pid_t child, pid_t parent, void *arg), void *arg);
/* Tracing is over: continues the stopped ones, with nothing more to attach, and frees the set. */
void dl_held_continue_all(struct dl_held *h);

#endif
