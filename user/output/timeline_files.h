/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The paths the timeline's read slices name: each traced process's fd table,
 * followed from the open, close and fork records as the summary follows it
 * (analysis/files.h). Internal to timeline.c.
 */
#ifndef DLBPF_TIMELINE_FILES_H
#define DLBPF_TIMELINE_FILES_H

#include "dlbpf/events.h"

struct dl_tfiles;

struct dl_tfiles *dl_tfiles_new(void);
/* An open, close or fork record: the fd tables follow it; other records are ignored. */
void dl_tfiles_note(struct dl_tfiles *f, const struct dl_hdr *h);
/* The path the read's fd names, or NULL (a pipe, a socket, an fd no record named). */
const char *dl_tfiles_path(struct dl_tfiles *f, const struct dl_file_read_ev *e);
void dl_tfiles_free(struct dl_tfiles *f);

#endif
