/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The BPF side's life cycle: open, feature choice, load, attach, traced set, detach. */
#ifndef DLBPF_TRACER_H
#define DLBPF_TRACER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "env.h"
#include "dlbpf/events.h"

struct dlbpf;
struct bpf_link;

/* One CUDA runtime, driver or C library (dlopen) attached in one process. */
struct dl_cuda_attach {
	pid_t pid;
	int kind;                 /* enum dl_lib_kind */
	bool seen;                /* still mapped at the last scan */
	uint64_t dev, inode;
	char path[4096];          /* as the process maps it */
	struct bpf_link *links[3];
	int nsyms;
};

struct dl_tracer {
	struct dlbpf *skel;
	struct dl_features feat;
	struct dl_cuda_attach *cuda;
	size_t ncuda, cuda_cap;
	struct bpf_link **tp_links;
	size_t ntp;
	/* Files whose symbols hold no CUDA runtime: not read again (dev, inode pairs). */
	uint64_t (*plain)[2];
	size_t nplain, plain_cap;
};

int dl_tracer_open_load(struct dl_tracer *t, unsigned ringbuf_mb);
int dl_tracer_attach_tracepoints(struct dl_tracer *t);
/* Adds a process to the traced set (the kernel adds its future children). */
int dl_tracer_trace_pid(struct dl_tracer *t, pid_t pid, pid_t ppid);
/*
 * Attaches to every CUDA runtime mapped by pid not attached yet; returns how
 * many were newly attached, or -errno when the process cannot be read.
 */
int dl_tracer_scan_cuda(struct dl_tracer *t, pid_t pid);
/* Traces every process that execs with this name from now on (BPF side). */
int dl_tracer_watch_comm(struct dl_tracer *t, const char *comm);
/* True when pid maps a CUDA runtime or driver (by name, or a runtime linked into a file). */
bool dl_tracer_maps_cuda(struct dl_tracer *t, pid_t pid);
/* CUDA runtimes and drivers attached in pid (the C library's loader not counted). */
int dl_tracer_cuda_count(const struct dl_tracer *t, pid_t pid);
/* Forgets the attachments of a process that exited. */
void dl_tracer_forget_pid(struct dl_tracer *t, pid_t pid);
int dl_tracer_ringbuf_fd(const struct dl_tracer *t);
/* Sums the per-CPU drop counters. */
int dl_tracer_read_drops(const struct dl_tracer *t, uint64_t out[DL_DROP_MAX]);
/* Removes every probe: nothing more is produced, the maps stay readable. */
void dl_tracer_detach(struct dl_tracer *t);
void dl_tracer_destroy(struct dl_tracer *t);

#endif
