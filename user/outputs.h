/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A run's output files (--json, --html, -o) and where its steps go. The files
 * are opened before anything is traced, so an unwritable path fails first;
 * each is a temporary until complete (outfile.h), so a run that fails leaves
 * an existing file of that name as it was.
 */
#ifndef DLBPF_OUTPUTS_H
#define DLBPF_OUTPUTS_H

#include "cli.h"
#include "outfile.h"

/* Named only: this header wires the stages and includes none of them (tests/unit/test_layout.py). */
struct dl_correlator;
struct dl_diagnosis;
struct dl_flightrec;
struct dl_metrics;
struct dl_step;
struct dl_step_printer;
struct dl_summary;
struct dl_timeline;

struct dl_outputs {
	const struct dl_config *cfg;
	struct dl_outfile json, html;
	struct dl_timeline *trace;   /* -o: the timeline (records through the stream, steps through dl_steps_put) */
};

/* Opens what cfg asks for; an error is said, and nothing is left open. */
int dl_outputs_open(struct dl_outputs *o, const struct dl_config *cfg);
/* Writes the reports, closes the timeline and puts every file in place; -EIO when one failed (said). */
int dl_outputs_finish(struct dl_outputs *o, const struct dl_summary *sum, const struct dl_correlator *corr,
		      const struct dl_diagnosis *diag);
/* Whatever is still open is removed (a failed run). */
void dl_outputs_abort(struct dl_outputs *o);

/* Where closed steps go: the live lines, the timeline, the flight recorder, the metrics (NULL: not there). */
struct dl_step_sinks {
	struct dl_step_printer *printer;
	struct dl_timeline *trace;
	struct dl_flightrec *flight;
	struct dl_metrics *metrics;
};
/* The correlator's step callback; ctx: a struct dl_step_sinks. */
void dl_steps_put(void *ctx, const struct dl_step *st);

#endif
