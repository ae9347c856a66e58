/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Python lines of waits and of CPU time (DL_EV_PYSTACK records): each
 * thread's distinct named stacks, with the CPU samples that landed in each
 * and the waits (count, time off the CPU) that blocked in each; and every
 * wait by thread and time, so an analysis that knows a wait (a step's input
 * wait, a lineage hop) looks up the line it blocked at.
 */
#ifndef DLBPF_ANALYSIS_PYLINES_H
#define DLBPF_ANALYSIS_PYLINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "records/addrspace.h"
#include "util.h"
#include "dlbpf/events.h"

struct dl_pyframe_name {
	char *file, *func;
	int32_t line;
};

struct dl_pystack_stat {
	uint32_t tgid, tid;
	uint32_t why;                 /* enum dl_pystack_why */
	struct dl_pyframe_name f[DL_PY_MAX];   /* innermost first */
	uint32_t n;                   /* frames named (0: none could be) */
	bool partial;                 /* frames above f[n - 1] were walked but not named, or not walked (too deep) */
	uint64_t samples;             /* DL_PYSTACK_CPU, over the whole trace */
	uint64_t waits, wait_ns;      /* DL_PYSTACK_WAIT, over the whole trace */
};

/* A wait (start < end) or a CPU sample (start == end). */
struct dl_pyevent {
	uint32_t tid;
	uint64_t start, end;
	uint32_t stack;               /* index in stacks */
};

struct dl_pywait_key {
	uint32_t tid;
	uint64_t start;
	size_t event;                 /* index in events */
};

/*
 * Events kept for windows and lookups by time: 24 MiB. A long trace forgets
 * its oldest half when full (a week at 49 Hz on 2 CPUs and 100 long waits a
 * second is about 100 M): the stacks' totals still count every one, and
 * windows start no earlier than kept_from.
 */
#define DL_PYLINES_EVENTS_MAX (1u << 20)

struct dl_pylines {
	DL_VEC(struct dl_pystack_stat) stacks;
	struct dl_u64map of;          /* hash of (thread, why, frames) -> index in stacks */
	DL_VEC(struct dl_pyevent) events;   /* in the order they were written (a wait's at its end) */
	uint64_t samples, waits_n;    /* every record of each kind */
	uint64_t forgotten;           /* events no longer kept (the oldest, DL_PYLINES_EVENTS_MAX) */
	uint64_t kept_from;           /* the end of the last one forgotten: windows start there at the earliest */
	/*
	 * The waits by thread and start, for dl_pylines_wait_in: built at its
	 * first call after the events changed (a report asks once per step).
	 */
	struct dl_pywait_key *wait_index;
	size_t wait_index_n;
	uint64_t wait_index_of;       /* events.n + forgotten when it was built */
};

/* A window's start, no earlier than the events kept (kept_from). */
uint64_t dl_pylines_from(const struct dl_pylines *p, uint64_t from);
void dl_pylines_add(struct dl_pylines *p, const struct dl_pystack_ev *e, const struct dl_pynamed *named);
void dl_pylines_free(struct dl_pylines *p);
/* The stack thread tid was blocked in over [start, end) the longest, or NULL. */
const struct dl_pystack_stat *dl_pylines_wait_in(const struct dl_pylines *p, uint32_t tid, uint64_t start,
						 uint64_t end);
/*
 * Thread tid's stacks of kind why over [from, to) (a wait: the part inside
 * it), most first: their indexes and weights (samples, or wait ns), at most
 * max; *total: the thread's samples or wait time of that kind then.
 */
size_t dl_pylines_top(const struct dl_pylines *p, uint32_t tid, uint32_t why, uint64_t from, uint64_t to,
		      size_t *idx, uint64_t *weight, size_t max, uint64_t *total);
/*
 * Every thread's but skip_tid's stacks of kind why over [from, to), by the
 * line of their own frame (dl_pystack_own_frame), most first: a stack of each
 * line (idx), the line's weight summed over every thread and stack, at most
 * max; *total: those threads' samples or wait time then. What the loaders'
 * CPU went to, whichever worker or thread it was.
 */
size_t dl_pylines_top_others(const struct dl_pylines *p, uint32_t skip_tid, uint32_t why, uint64_t from, uint64_t to,
			     size_t *idx, uint64_t *weight, size_t max, uint64_t *total);
/*
 * What thread tid's stacks of kind why whose own frame (dl_pystack_own_frame)
 * is the same line as s's weigh over [from, to): a line's share, whatever
 * the frames inside it.
 */
uint64_t dl_pylines_line_weight(const struct dl_pylines *p, const struct dl_pystack_stat *s, uint64_t from,
				uint64_t to);
/*
 * The frame of s that is the job's own code: the innermost one whose file is
 * not the interpreter's library or an installed package (site-packages,
 * dist-packages, frozen modules); 0 when every frame is.
 */
uint32_t dl_pystack_own_frame(const struct dl_pystack_stat *s);
/* Frame k of s as a report names a line: "train.py:22 (train_step)", the file's base name; snprintf's return. */
int dl_pyframe_text(const struct dl_pystack_stat *s, uint32_t k, char *buf, size_t len);

#endif
