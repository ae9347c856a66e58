/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Call sites in the report and the JSON summary (analysis/callsites.h). */
#ifndef DLBPF_REPORT_SITES_H
#define DLBPF_REPORT_SITES_H

#include <stdio.h>
#include "analysis/correlate.h"
#include "output/json.h"

/* "call_sites": [...] of a process, most time first (an empty list for NULL). */
void dl_report_sites_json(struct dl_json *j, const struct dl_sites *s);
/* "top_call_sites": [...] of a step. */
void dl_report_step_sites_json(struct dl_json *j, const struct dl_step *st, const struct dl_sites *s);
/* Per category, the sites with the most of it, in ms per step of nsteps. */
void dl_report_sites_text(FILE *f, const struct dl_sites *s, uint64_t nsteps);

#endif
