/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The trace sink (-o FILE): turns the record stream and the correlator's steps
 * into a timeline of tracks, slices, counters and flows, written as it goes
 * (memory bounded, whatever the trace length) by one of two writers: native
 * Perfetto protobuf (perfetto.c) or Chrome JSON Trace Event Format (chrome_json.c).
 */
#ifndef DLBPF_TIMELINE_H
#define DLBPF_TIMELINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "analysis/steps.h"
#include "records/stream.h"

enum dl_timeline_format { DL_TIMELINE_PFTRACE, DL_TIMELINE_JSON };

/* "pftrace"/"perfetto"/"json" → format; -1 if unknown. */
int dl_timeline_format_parse(const char *name);
/* The format implied by a file name (.json → JSON, anything else → pftrace). */
enum dl_timeline_format dl_timeline_format_of_path(const char *path);

struct dl_timeline_stats {
	uint64_t records;      /* stream records seen */
	uint64_t slices, counters, flows, tracks;
	uint64_t events;       /* trace events written (begin, end, instant, counter, complete) */
	uint64_t late;         /* protobuf events written with an absolute timestamp (out of order) */
	uint64_t lane_overflow;  /* disk requests left out: more in flight than lanes */
	uint64_t clipped;        /* thread-state intervals overlapping the previous one, cut to fit */
	uint64_t threads_max;    /* most threads held at once (exited ones are forgotten) */
	uint64_t bytes;        /* bytes written */
};

struct dl_timeline;

/*
 * Several recordings in one timeline (multirank.c): rank K's process and
 * thread ids are moved to a range of their own, above any the kernel gives
 * (PID_MAX_LIMIT, 2^22), so that the processes of two hosts never share a
 * track; such a process is named "rank K: comm pid", with its own pid.
 */
#define DL_TIMELINE_RANK_SHIFT 22
#define DL_TIMELINE_MAX_RANKS 255    /* ids stay under the timeline's tree-wide pseudo pid */
static inline uint32_t dl_timeline_rank_id(int rank, uint32_t id)
{
	return id ? (uint32_t)(rank + 1) << DL_TIMELINE_RANK_SHIFT | (id & ((1u << DL_TIMELINE_RANK_SHIFT) - 1)) : 0;
}

/* Writes to f (not closed by the trace). */
struct dl_timeline *dl_timeline_new(FILE *f, enum dl_timeline_format fmt);
/*
 * For replay: the recording's clock relation (one reading of CLOCK_MONOTONIC and
 * CLOCK_REALTIME; boot 0 if unknown: trace time is then CLOCK_MONOTONIC). Call it
 * before the first record; by default the host's clocks at dl_timeline_new.
 */
void dl_timeline_set_clocks(struct dl_timeline *t, uint64_t mono, uint64_t boot, uint64_t real);
/* Stream sink: returns -EIO once a write has failed. */
int dl_timeline_sink(void *trace, const struct dl_rec *r);
/* Step callback (dl_step_fn). */
void dl_timeline_step(void *trace, const struct dl_step *step);
/* Flushes everything still held and frees the trace; 0, or -errno of the first write error. */
int dl_timeline_finish(struct dl_timeline *t, struct dl_timeline_stats *stats);

/* A trace written to path (through a temporary, outfile.h); NULL with *err = -errno on failure. */
struct dl_timeline *dl_timeline_open(const char *path, enum dl_timeline_format fmt, int *err);
/*
 * dl_timeline_finish, then the file dl_timeline_open made is synced and put
 * at its path; after any write error it is removed instead (path left as it was).
 */
int dl_timeline_close(struct dl_timeline *t, struct dl_timeline_stats *stats);
/* A run that failed: the trace is freed and its file removed, path left as it was. */
void dl_timeline_discard(struct dl_timeline *t);

#endif
