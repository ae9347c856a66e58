/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What timeline.c hands a timeline writer: tracks, slices, counters, flow markers. Internal. */
#ifndef DLBPF_TIMELINE_WRITER_H
#define DLBPF_TIMELINE_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

enum dl_ttrack_kind { DL_TT_PROCESS, DL_TT_THREAD, DL_TT_PLAIN, DL_TT_COUNTER };

struct dl_ttrack {
	uint64_t uuid, parent;       /* small integers from 1; parent 0 = none */
	enum dl_ttrack_kind kind;
	pid_t pid, tid;              /* JSON: where the track's events go (tid: a pseudo id for plain tracks) */
	const char *name;
};

enum dl_targ_type { DL_TA_U64, DL_TA_I64, DL_TA_STR, DL_TA_DBL, DL_TA_BOOL /* in u */ };

struct dl_targ {
	const char *name;
	enum dl_targ_type type;
	uint64_t u;
	int64_t i;
	double d;
	const char *s;
};

#define DL_TMAX_ARGS 16

struct dl_tslice {
	const struct dl_ttrack *track;
	uint64_t ts, dur;
	const char *cat, *name;      /* static or interned-by-content strings */
	const struct dl_targ *args;
	int nargs;
	uint64_t flow_out;           /* flow started or continued at this slice (0: none) */
	uint64_t flow_end;           /* flow terminated at this slice */
};

struct dl_tout {
	void (*track)(struct dl_tout *o, const struct dl_ttrack *t);
	void (*slice)(struct dl_tout *o, const struct dl_tslice *s);
	/* a zero-length marker carrying a flow, bound to the slice enclosing ts on the track */
	void (*flow_mark)(struct dl_tout *o, const struct dl_ttrack *t, uint64_t ts, const char *name,
			  uint64_t flow, int terminate);
	void (*counter)(struct dl_tout *o, const struct dl_ttrack *t, uint64_t ts, double v);
	/* The clocks' relation (offsets from CLOCK_MONOTONIC); before the first event. NULL: not needed. */
	void (*clocks)(struct dl_tout *o, uint64_t mono, uint64_t boot, uint64_t real);
	/* Writes what is still held; returns 0 or -errno of the first write error. */
	int (*finish)(struct dl_tout *o);
	void (*destroy)(struct dl_tout *o);
	FILE *f;
	uint64_t events, late;
};

/* mono, boot, real: one reading of CLOCK_MONOTONIC, BOOTTIME and REALTIME (for the clock snapshot). */
/*
 * What every part of one timeline draws on: its writer, the ids of its tracks
 * and flows, and the counts of what was drawn. The timeline owns it; its parts
 * (timeline_gpu.c, timeline_files.c) draw through it, and find a thread's
 * track (where its calls lie) through it.
 */
struct dl_tcanvas {
	struct dl_tout *out;
	uint64_t next_uuid, next_flow;     /* the last given */
	uint64_t tracks, slices, counters, flows;
	/* The track of a thread's CUDA calls; NULL: none. */
	const struct dl_ttrack *(*thread_track)(void *tl, pid_t pid, pid_t tid);
	void *tl;
};

/* JSON tids of tracks that are not a thread's count down from here (a thread's state track is above it). */
#define DL_TPSEUDO_TID 0x20000000

static inline uint64_t dl_tcanvas_uuid(struct dl_tcanvas *c)
{
	return ++c->next_uuid;
}

static inline uint64_t dl_tcanvas_flow(struct dl_tcanvas *c)
{
	c->flows++;
	return ++c->next_flow;
}

static inline void dl_tcanvas_track(struct dl_tcanvas *c, const struct dl_ttrack *t)
{
	c->out->track(c->out, t);
	c->tracks++;
}

static inline void dl_tcanvas_slice(struct dl_tcanvas *c, const struct dl_tslice *s)
{
	c->out->slice(c->out, s);
	c->slices++;
}

static inline void dl_tcanvas_counter(struct dl_tcanvas *c, const struct dl_ttrack *t, uint64_t ts, double v)
{
	c->out->counter(c->out, t, ts, v);
	c->counters++;
}

static inline const struct dl_ttrack *dl_tcanvas_thread(const struct dl_tcanvas *c, pid_t pid, pid_t tid)
{
	return c->thread_track ? c->thread_track(c->tl, pid, tid) : NULL;
}

struct dl_tout *dl_perfetto_out(FILE *f, uint64_t mono_ts, uint64_t boot_ts, uint64_t real_ts);
struct dl_tout *dl_chrome_json_out(FILE *f);

#endif
