/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The record stream: every record, from the kernel or written by the collector,
 * goes through here to each sink (summary, correlator, recorder, trace writer).
 * Live tracing and replay of a recording feed the same stream, so they give the
 * same results.
 */
#ifndef DLBPF_STREAM_H
#define DLBPF_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "dlbpf/events.h"

#define DL_STREAM_MAX_SINKS 8

typedef int (*dl_record_fn)(void *ctx, const void *rec, size_t len);

struct dl_stream {
	struct {
		dl_record_fn fn;
		void *ctx;
	} sinks[DL_STREAM_MAX_SINKS];
	int n;
	int err;      /* first error a sink returned */
};

void dl_stream_add(struct dl_stream *s, dl_record_fn fn, void *ctx);
void dl_stream_emit(struct dl_stream *s, const void *rec, size_t len);

/* Records the collector writes (h.ts is CLOCK_MONOTONIC now, like the kernel's). */
void dl_emit_trace_start(struct dl_stream *s, uint64_t ts, uint32_t pcie_mbps);
void dl_emit_procinfo(struct dl_stream *s, uint64_t ts, pid_t pid, pid_t ppid, const char *comm, pid_t nspid);
void dl_emit_lib(struct dl_stream *s, uint64_t ts, pid_t pid, const char *path, unsigned nsyms);
void dl_emit_sym(struct dl_stream *s, uint64_t ts, pid_t pid, uint64_t addr, const char *name);
void dl_emit_trace_end(struct dl_stream *s, uint64_t ts, const uint64_t drops[DL_DROP_MAX]);

/* Checks the size a record claims against its kind; 0 if it can be read as that kind. */
int dl_record_check(const void *rec, size_t len);

#endif
