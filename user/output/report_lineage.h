/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The input lineage of steps (analysis/lineage.h) in the JSON summary and the text report. */
#ifndef DLBPF_REPORT_LINEAGE_H
#define DLBPF_REPORT_LINEAGE_H

#include <stdio.h>
#include "analysis/correlate.h"
#include "analysis/pylines.h"
#include "output/json.h"
#include "output/model.h"

/* A step's "input" object; the model names the waker's process. */
void dl_report_step_input_json(struct dl_json *j, const struct dl_step *st, const struct dl_report_model *m);
/* The process's "input" line: which workers its steps waited on, and what they were doing. */
/* py: the Python lines of waits (NULL: none), for the line each longest wait blocked at. */
void dl_report_lineage_text(FILE *f, const struct dl_corr_proc *p, const struct dl_pylines *py);

#endif
