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
#include "output/timeline_writer.h"

struct dl_tfiles;

struct dl_tfiles *dl_tfiles_new(void);
/* An open, close or fork record: the fd tables follow it; other records are ignored. */
void dl_tfiles_note(struct dl_tfiles *f, const struct dl_hdr *h);
/* The path the read's fd names, or NULL (a pipe, a socket, an fd no record named). */
const char *dl_tfiles_path(struct dl_tfiles *f, const struct dl_file_read_ev *e);
void dl_tfiles_free(struct dl_tfiles *f);
/*
 * A disk request of a thread (not readahead) on its lane, and a read call of
 * that thread: each request is drawn as a flow into the read that waited for
 * it, whichever of the two records comes first.
 */
void dl_tfiles_bio(struct dl_tcanvas *cv, struct dl_tfiles *f, pid_t pid, pid_t tid, uint64_t ts,
		   uint64_t end, const struct dl_ttrack *lane);
void dl_tfiles_read(struct dl_tcanvas *cv, struct dl_tfiles *f, pid_t pid, pid_t tid, uint64_t ts,
		    uint64_t end);
/* A wake-up thread (pid, tid) made at ts (a hand-off, maybe): its last read before it is kept. */
void dl_tfiles_wake(struct dl_tfiles *f, pid_t pid, pid_t tid, uint64_t ts);
/* Its reads and requests are forgotten (a tid given out again starts afresh). */
void dl_tfiles_thread_exit(struct dl_tfiles *f, pid_t pid, pid_t tid);
/*
 * A flow for each hand-off of the step's input lineage, from the producer's
 * last read in its window (when it read) through its hand-off to the task it
 * woke, for the producer and each hop of the chain. The flow into the main
 * thread is returned open (0 if none was drawn): the caller carries it on to
 * the batch's copy and kernels.
 */
uint64_t dl_tfiles_step_flows(struct dl_tcanvas *cv, struct dl_tfiles *f, const struct dl_step *s);

#endif
