/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `dlbpf report r0.dlbpf r1.dlbpf ...`, written: each rank's report as
 * `report` writes one recording's, the table of ranks and the straggler, and
 * the one JSON summary of the job. The ranks are replayed and merged by
 * multirank.h; this only reads what each rank's session made.
 */
#ifndef DLBPF_RANKS_REPORT_H
#define DLBPF_RANKS_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "analysis/ranks.h"
#include "output/model.h"
#include "records/record.h"

/* What the report reads of one rank. */
struct dl_rank_view {
	int index;
	const char *path;
	const struct dl_rec_header *hdr;
	int64_t offset;               /* onto rank 0's CLOCK_MONOTONIC */
	const struct dl_report_model *model;   /* its session's */
	struct dl_rank_steps steps;
};

/* Each rank's text report, then the table of ranks and the straggler (sg, sf: dl_find_straggler's). */
void dl_ranks_text(FILE *f, const struct dl_rank_view *a, size_t n, const struct dl_straggler *sg,
		   const struct dl_finding *sf);
/* The job's JSON summary (schema 1, every object with its rank); 0 or -errno. */
int dl_ranks_json(FILE *f, const struct dl_rank_view *a, size_t n, const struct dl_finding *sf, int straggler);

#endif
