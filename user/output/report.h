/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Final outputs of a trace: the text report and the JSON summary (schema 1). */
#ifndef DLBPF_REPORT_H
#define DLBPF_REPORT_H

#include <stdio.h>
#include "analysis/diagnose.h"
#include "analysis/summary.h"
#include "output/json.h"
#include "output/model.h"

/* The JSON summary's name of a drop counter (DL_DROP_*), or NULL. */
const char *dl_drop_name(int i);
/* The text report of the model's processes (the summary's figures). */
void dl_report_text(FILE *f, const struct dl_report_model *m);
/* Per process, the kernel names whose mean device time the drain windows determine (marked inferred). */
void dl_report_kdur_text(FILE *f, const struct dl_report_model *m);
/* The whole JSON summary. Returns 0, or -1 when writing failed (errno set). */
int dl_report_json(FILE *f, const struct dl_report_model *m);
/* The processes' objects of the JSON summary, each with its rank when rank >= 0 (several recordings). */
void dl_report_json_procs(struct dl_json *j, const struct dl_report_model *m, int rank);

#endif
