/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The live collector: ring-buffer bytes in, enriched records out, into a
 * record stream. What only the live side can know is added here, once, while
 * the process still exists: a CUDA call's kernel and Python names
 * (capture/naming.h, capture/pycode.h), a relative path resolved against the
 * working directory it was opened from (capture/files.h), a process that
 * joined by its name introduced, the container, pod or Slurm job of a process
 * it takes and of each exec (capture/cgroup.h); loader events and holds are noted for the
 * rescan after the drain (capture/held.h). A record that is replaced (a file
 * open made absolute) enters the stream once, as its replacement.
 */
#ifndef DLBPF_COLLECTOR_H
#define DLBPF_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "capture/files.h"
#include "capture/held.h"
#include "capture/pycode.h"
#include "util.h"

struct dl_stream;
struct dl_symbolizer;

struct dl_collector {
	struct dl_stream *stream;
	struct dl_symbolizer *symbolizer;
	struct dl_pyprocs py;         /* CPython in traced processes */
	struct dl_cwds cwds;          /* for relative paths of processes gone before their records are read */
	struct dl_held held;          /* rescanned after this drain */
	struct dl_u64map containers;  /* pid -> hash of the container last written for it (capture/cgroup.h) */
	struct dl_u64map mapped;      /* the files of reads outside read calls (capture/files.h: dl_files_name_mapped) */
	bool files;                   /* file records are traced: working directories are kept */
	bool (*known)(void *ctx, pid_t pid);   /* the process is in the trace already */
	void *known_ctx;
	uint64_t drained_bytes;       /* of records read from the ring buffer, for the drain's pace */
};

/* The ring buffer's callback (ctx: a struct dl_collector). */
int dl_collector_record(void *ctx, void *data, size_t len);
/* A process the trace takes: its threads, and (files traced) its open files, into the stream. */
void dl_collector_introduce(struct dl_collector *c, pid_t pid, pid_t ppid, const char *comm, uint32_t threads);
void dl_collector_free(struct dl_collector *c);

#endif
