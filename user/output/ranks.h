/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `dlbpf report r0.dlbpf r1.dlbpf ...`: the recordings of a distributed job's
 * ranks (one per rank, in rank order), reported as one. Each rank is replayed
 * through its own summary and correlator, exactly as `report` would replay
 * it alone, so its figures are its single report's; the recordings are read
 * together, record by record in the order of their times on one clock (the
 * first recording's CLOCK_MONOTONIC, the others moved onto it through their
 * CLOCK_REALTIME snapshots), so the one timeline holds every rank in step,
 * each rank's processes a group of their own.
 */
#ifndef DLBPF_RANKS_REPORT_H
#define DLBPF_RANKS_REPORT_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "output/timeline.h"

struct dl_ranks_opts {
	const char *const *paths;     /* the recordings, rank 0 first */
	size_t n;
	const char *json_path;        /* NULL: none */
	const char *timeline_path;    /* NULL: none */
	enum dl_timeline_format timeline_format;
	struct dl_corr_opts corr;
	struct dl_diag_opts diag;
	const volatile sig_atomic_t *stop;   /* a signal stops the replay between records */
};

/*
 * Writes the report to out and the files asked for; the exit status dlbpf
 * ends with: 0, 1 when a recording is refused (not one, the same one twice,
 * clocks that cannot be aligned) or an output fails, 128+N when signal N
 * stopped it (what was read is reported).
 */
int dl_ranks_report(const struct dl_ranks_opts *o, FILE *out);

#endif
