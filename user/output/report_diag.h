/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Output of steps and the diagnosis: live step lines, the final report, the JSON parts. */
#ifndef DLBPF_REPORT_DIAG_H
#define DLBPF_REPORT_DIAG_H

#include <stdbool.h>
#include <stdio.h>
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "output/json.h"
#include "output/model.h"

struct dl_step_printer {
	FILE *f;
	bool clear_status;    /* a status line may be on the terminal: clear it before a step line */
	uint64_t last_ts;     /* stream time of the last printed line */
	uint64_t skipped;
};

/* A dl_step_fn: one line per step, at most five a second of stream time. */
void dl_print_step(void *printer, const struct dl_step *st);

/* How regular the steps of a run are, in words, from their spread (CV) and count. */
const char *dl_step_confidence(double cv, uint64_t n);
/* A learned marker's confidence as the report and the JSON say it: "high", "medium", "low". */
const char *dl_marker_sure_name(enum dl_marker_sure s);
void dl_report_steps_text(FILE *f, const struct dl_report_model *m);
/* The steps, their markers and the diagnosis; the summary names the processes of the steps' input lineage. */
void dl_report_steps_json(struct dl_json *j, const struct dl_report_model *m);

/* The parts of it, for several recordings in one summary (output/ranks.h): rank >= 0 is written in each object. */
void dl_report_steps_items(struct dl_json *j, const struct dl_report_model *m, int rank);
void dl_report_markers_items(struct dl_json *j, const struct dl_report_model *m, int rank);
void dl_report_finding_json(struct dl_json *j, const struct dl_finding *x, int rank);
/* The "diagnosis" object (its key is the caller's). */
void dl_report_diagnosis_json(struct dl_json *j, const struct dl_diagnosis *d);

#endif
