/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The files source on the collector's side: whether the kernel has the
 * syscall tracepoints it needs, the fds a process held before tracing began
 * (/proc/PID/fd), and relative openat paths made absolute as the process sees
 * them.
 */
#ifndef DLBPF_CAPTURE_FILES_H
#define DLBPF_CAPTURE_FILES_H

#include <stdbool.h>
#include <sys/types.h>
#include "records/stream.h"
#include "dlbpf/events.h"

struct dlbpf;

/* Loads the files programs where tracefs has every syscall event they attach to; false if not. */
bool dl_files_choose(struct dlbpf *skel);
/* Writes a DL_EV_FILE_OPEN (DL_FILE_PREEXISTING) for each fd of pid that names a path; how many. */
int dl_files_snapshot(struct dl_stream *s, pid_t pid);
/*
 * A relative path of an open record joined to the cwd (or the dirfd's
 * directory) the process has now, as the process sees it; the record is
 * copied into out. False when the record needs no change or it cannot be
 * resolved (the process is gone): it stays as it came.
 */
bool dl_files_resolve(const struct dl_file_open_ev *e, struct dl_file_open_ev *out);

#endif
