// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <signal.h>
#include "capture/held.h"

void dl_held_note(struct dl_held *h, pid_t pid, bool stopped)
{
	/* A handful of processes per drain: a scan is cheaper than a map. */
	for (size_t i = 0; i < h->procs.n; i++) {
		if (h->procs.v[i].pid == pid) {
			h->procs.v[i].stopped |= stopped;
			return;
		}
	}
	*dl_vec_push(&h->procs) = (struct dl_held_proc){ .pid = pid, .stopped = stopped };
}

void dl_held_rescan_continue(struct dl_held *h, void (*fn)(pid_t pid, void *arg), void *arg)
{
	for (size_t i = 0; i < h->procs.n; i++) {
		fn(h->procs.v[i].pid, arg);
		if (h->procs.v[i].stopped)
			kill(h->procs.v[i].pid, SIGCONT);
	}
	h->procs.n = 0;
}

void dl_held_note_fork(struct dl_held *h, pid_t child, pid_t parent)
{
	*dl_vec_push(&h->forks) = (struct dl_held_fork){ .child = child, .parent = parent };
}

void dl_held_take_forks(struct dl_held *h, void (*fn)(pid_t child, pid_t parent, void *arg), void *arg)
{
	for (size_t i = 0; i < h->forks.n; i++)
		fn(h->forks.v[i].child, h->forks.v[i].parent, arg);
	h->forks.n = 0;
}

void dl_held_continue_all(struct dl_held *h)
{
	for (size_t i = 0; i < h->procs.n; i++)
		if (h->procs.v[i].stopped)
			kill(h->procs.v[i].pid, SIGCONT);
	dl_vec_free(&h->procs);
	dl_vec_free(&h->forks);
}
