/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A thread's recent H2D copies and syncs, for the flows a step is drawn with
 * after it closes (its first copy, its last sync), and the flow of a batch
 * handed to the thread on to its copy and the first launch after it.
 * Internal to timeline.c.
 */
#ifndef DLBPF_TIMELINE_CALLS_H
#define DLBPF_TIMELINE_CALLS_H

#include <stdint.h>
#include "output/timeline_writer.h"

struct dl_tcall {
	uint64_t ts, dur;
	int sync;                    /* else an H2D copy */
	uint64_t launch_at;          /* a copy's: the middle of the thread's first launch after it (0: none yet) */
};

struct dl_tcalls {
	struct dl_tcall *ring;       /* allocated at the first copy or sync */
	unsigned n;                  /* total pushed */
	struct {
		uint64_t flow;       /* 0: none open */
		uint64_t handoff_ns, copy_at;
	} batch;
};

void dl_tcalls_copy(struct dl_tcalls *c, uint64_t ts, uint64_t dur);
void dl_tcalls_sync(struct dl_tcalls *c, uint64_t ts, uint64_t dur);
/* A launch on the thread whose track is track: an awaited batch flow may end on it. */
void dl_tcalls_launch(struct dl_tcalls *c, struct dl_tout *out, const struct dl_ttrack *track, uint64_t ts,
		      uint64_t dur);
/* The first copy and the last sync in [start, end) still remembered (NULL: none). */
void dl_tcalls_in(const struct dl_tcalls *c, uint64_t start, uint64_t end, const struct dl_tcall **copy,
		  const struct dl_tcall **sync);
/* The flow of a batch handed to the thread at handoff_ns, open on the hand-off's side, goes on from here. */
void dl_tcalls_batch(struct dl_tcalls *c, struct dl_tout *out, const struct dl_ttrack *track, uint64_t flow,
		     uint64_t handoff_ns);
/* At the end: a batch flow still awaiting its copy or launch ends where it got to. */
void dl_tcalls_close(struct dl_tcalls *c, struct dl_tout *out, const struct dl_ttrack *track);
void dl_tcalls_free(struct dl_tcalls *c);

#endif
