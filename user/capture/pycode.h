/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython in traced processes: which ones run it (the interpreter's binary:
 * the executable or a libpython), with which layout (pyobj.h); BPF's map
 * py_procs gets each one's offsets, so its calls carry Python frames. The
 * code objects those frames name are read from the process once per address
 * and written into the stream as DL_EV_PYCODE records (replay has no process
 * to read them from); one whose identity changed (freed, another made at the
 * same address) is read and written again.
 */
#ifndef DLBPF_PYCODE_H
#define DLBPF_PYCODE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "records/clock.h"
#include "records/cuda_api.h"
#include "util.h"
#include "capture/pyobj.h"

struct dl_maps;   /* capture/procfs.h: a snapshot of a process's mappings */

struct dl_stream;
struct dl_pyproc;
struct dl_pysnap_ev;

struct dl_pyprocs {
	int map_fd;                 /* BPF map py_procs; -1: none (tests) */
	const char *no_walk;        /* why this kernel's BPF walks no Python frames; NULL: it does */
	volatile uint32_t *bpf_known; /* BPF's py_known, set before the map's first entry; NULL: none (tests) */
	/* Called once, as the first process is set up (the Python lines' programs start then); NULL: none. */
	void (*first_python)(void *ctx);
	void *first_python_ctx;
	bool python_seen;
	uint32_t specific_off;      /* glibc's pthread keys, measured in dlbpf (capture/glibctsd.h) */
	bool own_glibc_agrees;      /* a glibc's descriptors say what was measured: each process's own are read */
	DL_VEC(struct dl_pyproc *) v;
	struct dl_u64map by_pid;    /* pid -> index in v */
	uint64_t recheck_ns;        /* how long a code object read stays trusted before its identity is checked */
	uint32_t epochs;            /* processes set up so far: each one's dl_py_cfg.epoch */
	uint64_t snapshots;         /* BPF's snapshots of code objects read */
	uint64_t snapshots_refused; /* ... and refused: malformed, or of a process not set up */
};

void dl_pyprocs_init(struct dl_pyprocs *pp, int map_fd);
void dl_pyprocs_free(struct dl_pyprocs *pp);
/* Looks at pid's mappings (held by the caller's rescan) for a CPython it was not set up for yet. */
void dl_pyprocs_scan(struct dl_pyprocs *pp, pid_t pid, const struct dl_maps *maps);
/* A fork: the child runs the parent's interpreter at the same addresses. */
void dl_pyprocs_fork(struct dl_pyprocs *pp, pid_t child, pid_t parent);
/* An exec or an exit: what was known of pid's interpreter is no longer so. */
void dl_pyprocs_forget(struct dl_pyprocs *pp, pid_t pid);
/*
 * A code object as BPF read it at a probe (dlbpf/pyframes.h): its record is
 * written from that, so a process that is gone by now keeps its lines.
 */
void dl_pyprocs_snapshot(struct dl_pyprocs *pp, struct dl_stream *st, const struct dl_pysnap_ev *ev, size_t len);
/* Writes the code records frames of tgid need and the stream has not had (before their record reaches the sinks). */
void dl_pyprocs_name_frames(struct dl_pyprocs *pp, struct dl_stream *st, pid_t tgid, const struct dl_py_stack *py,
			    struct dl_lazy_now *now);
/* Writes the code records a call's frames need and the stream has not had (before the call reaches the sinks). */
void dl_pyprocs_name_call(struct dl_pyprocs *pp, struct dl_stream *st, const struct dl_call *c,
			  struct dl_lazy_now *now);

/* How to read a set-up CPython's objects (its layout, its code type, its memory). */
struct dl_pyreader {
	const struct dl_py_layout *layout;
	uint64_t code_type;       /* &PyCode_Type in the process */
	dl_pymem_fn rd;
	void *ctx;
};
/* False when pid runs no CPython whose frames BPF walks (not yet, or not one dlbpf reads). */
bool dl_pyprocs_reader(struct dl_pyprocs *pp, pid_t pid, struct dl_pyreader *out);

#endif
