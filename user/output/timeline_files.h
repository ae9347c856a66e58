/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The input's side of the timeline: the paths its read slices name (each
 * traced process's fd table, followed from the open, close and fork records
 * as the summary follows it, analysis/files.h), and the hand-offs of a step's
 * input lineage as flows. Internal to timeline.c.
 */
#ifndef DLBPF_TIMELINE_FILES_H
#define DLBPF_TIMELINE_FILES_H

#include "analysis/steps.h"
#include "dlbpf/events.h"
#include "output/timeline_gpu.h"

struct dl_tfiles;

struct dl_tfiles *dl_tfiles_new(void);
/* An open, close or fork record: the fd tables follow it; other records are ignored. */
void dl_tfiles_note(struct dl_tfiles *f, const struct dl_hdr *h);
/* The path the read's fd names, or NULL (a pipe, a socket, an fd no record named). */
const char *dl_tfiles_path(struct dl_tfiles *f, const struct dl_file_read_ev *e);
void dl_tfiles_free(struct dl_tfiles *f);
/*
 * A flow for each hand-off of the step's input lineage: from the producer's
 * track to the main thread's at the wake-up that ended its wait, and from each
 * hop of the chain to the task it woke.
 */
void dl_tfiles_step_flows(const struct dl_tgpu_ctx *ctx, const struct dl_step *s);

#endif
