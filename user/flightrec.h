/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `record --ring SEC -o DIR`: when to write the flight recorder's window out
 * and where. Triggers: a step slower than --trigger-step times its process's
 * running median, a change of verdict from one half window to the next, a
 * burst of dropped events, and SIGUSR1. Dumps are at least half a window
 * apart, so two of them overlap by at most half; a trigger in between waits
 * for its turn and still finds its moment in the window.
 */
#ifndef DLBPF_FLIGHTREC_H
#define DLBPF_FLIGHTREC_H

#include <stddef.h>
#include <stdint.h>
#include "dlbpf/events.h"

struct dl_flightrec;
struct dl_stream;
struct dl_step;

struct dl_flightrec_opts {
	const char *dir;          /* created (0700) when missing */
	double window_s;
	size_t budget_mb;
	double step_factor;       /* 0: no slow-step trigger */
	int encoding;             /* of the dumps: enum dl_rec_encoding (records/record.h) */
};

/* NULL with a message said when the directory cannot be used. */
struct dl_flightrec *dl_flightrec_open(const struct dl_flightrec_opts *o, struct dl_stream *s);
void dl_flightrec_step(struct dl_flightrec *f, const struct dl_step *st);
/* Asks for a dump (SIGUSR1); safe only from the thread that drains, like the rest. */
void dl_flightrec_request(struct dl_flightrec *f, const char *why);
/* After each drain: notices drop bursts and writes a dump that is due. */
void dl_flightrec_tick(struct dl_flightrec *f, uint64_t now_ns, const uint64_t drops[DL_DROP_MAX]);
/*
 * Says what was written and frees; a dump still waiting is written first.
 * Returns how many dumps failed (each said when it did): the run's exit status tells of them.
 */
unsigned dl_flightrec_close(struct dl_flightrec *f, uint64_t now_ns, const uint64_t drops[DL_DROP_MAX]);

#endif
