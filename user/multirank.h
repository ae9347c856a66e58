/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `dlbpf report r0.dlbpf r1.dlbpf ...`: the recordings of a distributed job's
 * ranks (one per rank, in rank order), reported as one. Each rank is a
 * session of its own (session.h), exactly as `report` would replay it alone,
 * so its figures are its single report's; this merger reads the recordings
 * together, record by record in the order of their times on one clock (the
 * first recording's CLOCK_MONOTONIC, the others moved onto it through their
 * CLOCK_REALTIME snapshots), so the one timeline holds every rank in step,
 * each rank's processes a group of their own (output/ranks.h writes it).
 */
#ifndef DLBPF_MULTIRANK_H
#define DLBPF_MULTIRANK_H

#include <signal.h>
#include <stdio.h>

struct dl_config;

/*
 * Writes the report to out and the files cfg asks for; the exit status dlbpf
 * ends with: 0, 1 when a recording is refused (not one, the same one twice,
 * clocks that cannot be aligned) or an output fails, 128+N when signal N
 * stopped it (what was read is reported).
 */
int dl_multirank_report(const struct dl_config *cfg, const volatile sig_atomic_t *stop, FILE *out);

#endif
