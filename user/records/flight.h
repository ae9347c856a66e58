/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The flight recorder (`record --ring SEC`): the stream's last SEC seconds kept
 * in memory, within a byte budget, and written out as a normal recording when
 * something worth keeping happened. What a report needs to name what it saw
 * (the start of tracing, the processes, their runtimes, kernel names, forks and
 * execs) is kept apart from the window, so a dump made an hour in still says
 * whose records it holds.
 */
#ifndef DLBPF_FLIGHT_H
#define DLBPF_FLIGHT_H

#include <stddef.h>
#include <stdint.h>
#include "dlbpf/events.h"
#include "records/stream.h"
#include "util.h"

struct dl_flight_kept {
	uint64_t seq;          /* its place in the stream, to put it back in order */
	struct dl_hdr *h;      /* a copy, h->size bytes */
};

struct dl_flight_snap {
	uint64_t ts, drops[DL_DROP_MAX];
};

/* A piece of the window: records (each after its stream position) back to back, 8-byte aligned. */
struct dl_flight_chunk {
	size_t used;
	uint64_t oldest_ts, newest_ts;
	unsigned char data[];
};

struct dl_flight {
	uint64_t window_ns;
	/* The window, oldest chunk first: whole chunks go once all they hold is older than the window. */
	DL_VEC(struct dl_flight_chunk *) chunks;
	size_t chunk_budget;           /* chunks the window may hold */
	uint64_t newest_ts;
	/* Records that name things, kept for every dump, within kept_budget bytes. */
	DL_VEC(struct dl_flight_kept) kept;
	size_t kept_bytes, kept_budget;
	uint64_t evicted_early;        /* records the byte budget pushed out before their time */
	uint64_t kept_refused;         /* naming records over their budget: missing from dumps */
	/* Drop counts about once a second, back to the window's oldest record. */
	DL_VEC(struct dl_flight_snap) snaps;
};

/* 0, or -ENOMEM; budget_bytes is split between the window and the naming records. */
int dl_flight_init(struct dl_flight *f, uint64_t window_ns, size_t budget_bytes);
void dl_flight_free(struct dl_flight *f);
/* A stream sink: copies the record into the window (and into the kept set when it names something). */
int dl_flight_sink(void *flight, const struct dl_rec *rec);
/* The drop counts now: a dump's end record says what was lost during its window. */
void dl_flight_drops(struct dl_flight *f, uint64_t now_ns, const uint64_t drops[DL_DROP_MAX]);
/*
 * Writes the naming records and the window to path as a recording in encoding
 * (enum dl_rec_encoding; the outfile rules: a temporary renamed once complete),
 * ending with the drops counted since the window's start; returns the records
 * written, or -errno with a message said.
 */
long dl_flight_dump(const struct dl_flight *f, const char *path, int encoding, uint64_t now_ns,
		    const uint64_t drops[DL_DROP_MAX]);
/* The time stamps of the window's oldest and newest records (0, 0 when empty). */
void dl_flight_span(const struct dl_flight *f, uint64_t *oldest, uint64_t *newest);

#endif
