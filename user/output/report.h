/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Final outputs of a trace: the text report and the JSON summary (schema 1). */
#ifndef DLBPF_REPORT_H
#define DLBPF_REPORT_H

#include <stdio.h>
#include "analysis/diagnose.h"
#include "analysis/summary.h"
#include "output/json.h"

/* The JSON summary's name of a drop counter (DL_DROP_*), or NULL. */
const char *dl_drop_name(int i);
void dl_report_text(FILE *f, const struct dl_summary *s);
/* Per process, the kernel names whose mean device time the drain windows determine (marked inferred). */
void dl_report_kdur_text(FILE *f, const struct dl_summary *s, const struct dl_correlator *c);
/* The whole JSON summary; c and d may be NULL. Returns 0, or -1 when writing failed (errno set). */
int dl_report_json(FILE *f, const struct dl_summary *s, const struct dl_correlator *c,
		   const struct dl_diagnosis *d);
/* The processes' objects of the JSON summary, each with its rank when rank >= 0 (several recordings). */
void dl_report_json_procs(struct dl_json *j, const struct dl_summary *s, const struct dl_correlator *c, int rank);

#endif
