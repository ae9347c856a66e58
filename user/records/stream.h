/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The record stream: every record, from the kernel or written by the collector,
 * goes through here to each sink (summary, correlator, recorder, trace writer).
 * Live tracing and replay of a recording feed the same stream, so they give the
 * same results.
 *
 * The stream reads each record once for all sinks: it checks the record's size
 * against its kind (a malformed record is counted and reaches no sink), decodes
 * a CUDA call and resolves it against what earlier records said about the
 * process's memory and code (records/addrspace.h). No sink reads another's
 * state, so the order sinks are added in changes nothing.
 */
#ifndef DLBPF_STREAM_H
#define DLBPF_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include "records/addrspace.h"
#include "records/cuda_api.h"
#include "dlbpf/events.h"

#define DL_STREAM_MAX_SINKS 8

/* A record as a sink gets it. */
struct dl_rec {
	const struct dl_hdr *h;       /* as it came: h->size bytes, at least its kind's size */
	const struct dl_call *call;   /* a DL_EV_CUDA of an API this build knows, decoded and resolved; else NULL */
	const struct dl_pynamed *py;  /* a DL_EV_PYSTACK's frames named; else NULL */
	uint64_t seq;                 /* its position in the stream, from 1 */
};

typedef int (*dl_sink_fn)(void *ctx, const struct dl_rec *r);

struct dl_stream {
	struct {
		dl_sink_fn fn;
		void *ctx;
	} sinks[DL_STREAM_MAX_SINKS];
	int n;
	int err;                      /* first error a sink returned */
	uint64_t malformed;           /* records whose size does not fit their kind, given to no sink */
	uint64_t seq;                 /* records given to the sinks */
	/* Set (by a signal handler): a reader of the stream (dl_replay) stops between records. NULL: never. */
	const volatile sig_atomic_t *stop;
	struct dl_addrspaces mem;
};

/* A record read into the stream, not yet given to the sinks: the collector looks at it in between. */
struct dl_rec_in {
	const struct dl_hdr *h;       /* the record read, or full when it stands for a dl_cuda_ev */
	bool is_call;                 /* call holds its decoded CUDA call (not yet resolved) */
	struct dl_call call;
	struct dl_cuda_ev full;       /* a DL_EV_LAUNCH or DL_EV_CALL_SHORT as the dl_cuda_ev it stands for */
};

void dl_stream_add(struct dl_stream *s, dl_sink_fn fn, void *ctx);
/* Frees what the stream learnt of the processes; the sinks are the caller's. */
void dl_stream_free(struct dl_stream *s);
/*
 * Checks a record and decodes its CUDA call; -1 for a malformed record
 * (counted). in->h is the record to use from here on: a DL_EV_LAUNCH or
 * DL_EV_CALL_SHORT is expanded into in->full, so in must stay where it is
 * until it is put.
 */
int dl_stream_read(struct dl_stream *s, struct dl_rec_in *in, const void *rec, size_t len);
/* Resolves a read record's call, notes what it says about the process, and gives it to every sink. */
void dl_stream_put(struct dl_stream *s, struct dl_rec_in *in);
/* dl_stream_read, then dl_stream_put; -1 for a malformed record. */
int dl_stream_emit(struct dl_stream *s, const void *rec, size_t len);

/* Records the collector writes (h.ts is CLOCK_MONOTONIC now, like the kernel's). */
void dl_emit_trace_start(struct dl_stream *s, uint64_t ts, uint32_t pcie_mbps);
/* flags: enum dl_trace_flags (what the live side records, e.g. block submissions). */
void dl_emit_trace_start_flags(struct dl_stream *s, uint64_t ts, uint32_t pcie_mbps, uint32_t flags);
void dl_emit_procinfo(struct dl_stream *s, uint64_t ts, pid_t pid, pid_t ppid, const char *comm, pid_t nspid);
/* threads: how many it has as tracing of it begins (its later ones come as DL_PROC_THREAD); 0 if not known. */
void dl_emit_procinfo_threads(struct dl_stream *s, uint64_t ts, pid_t pid, pid_t ppid, const char *comm, pid_t nspid,
			      uint32_t threads);
/* flags DL_LIB_NOT_PROBED: nsyms is the errno that kept path from being probed. */
/* The container, pod or Slurm job of pid (c checked: dl_container_ok). */
void dl_emit_cgroup(struct dl_stream *s, uint64_t ts, pid_t pid, const struct dl_container *c);
/* A process's CUDA_VISIBLE_DEVICES (DL_EV_ENV). */
void dl_emit_env(struct dl_stream *s, uint64_t ts, pid_t pid, const char *cuda_visible_devices);
/* Every field of c NUL-terminated and of the bytes its kind allows (include/dlbpf/events.h). */
bool dl_container_ok(const struct dl_container *c);
void dl_emit_lib(struct dl_stream *s, uint64_t ts, pid_t pid, const char *path, unsigned nsyms, unsigned flags);
void dl_emit_sym(struct dl_stream *s, uint64_t ts, pid_t pid, uint64_t addr, const char *name);
/* Where return address addr is: func "name+0xOFF" (or "0xOFF" in the file), obj the mapped path (or ""). */
void dl_emit_site(struct dl_stream *s, uint64_t ts, pid_t pid, uint64_t addr, const char *func, const char *obj);
/*
 * A Python code object (DL_EV_PYCODE): file and function cut to what fits,
 * the line table to what fits after them (DL_PYCODE_TABLE_CUT then).
 */
void dl_emit_pycode(struct dl_stream *s, uint64_t ts, pid_t pid, uint64_t addr, const char *file, const char *func,
		    int32_t firstlineno, unsigned format, const uint8_t *table, size_t table_len);
void dl_emit_trace_end(struct dl_stream *s, uint64_t ts, const uint64_t drops[DL_DROP_MAX]);
void dl_emit_trace_end_misses(struct dl_stream *s, uint64_t ts, const uint64_t drops[DL_DROP_MAX],
			      uint64_t recursion_misses);
/* One BPF program's runs skipped by the kernel's recursion guard (before the trace end). */
void dl_emit_prog(struct dl_stream *s, uint64_t ts, const char *name, uint64_t recursion_misses);
/* A block request still outstanding when tracing stopped (DL_BIO_UNSEEN is added to flags). */
void dl_emit_bio_unseen(struct dl_stream *s, uint64_t ts, pid_t tgid, pid_t tid, uint64_t sector, uint32_t bytes,
			uint32_t dev, uint32_t flags);

#endif
