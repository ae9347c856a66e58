/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Recordings: a header (magic, ABI version, clock snapshot, host, kernel)
 * followed by the stream's records exactly as they came. `dlbpf report FILE`
 * replays them through the same sinks as a live run.
 */
#ifndef DLBPF_RECORD_H
#define DLBPF_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "records/stream.h"

#define DL_REC_MAGIC "DLBPFREC"

struct dl_rec_header {
	char magic[8];
	uint32_t header_size;      /* bytes of this header: later versions may append fields */
	uint32_t abi_version;      /* DL_ABI_VERSION of the records */
	uint64_t mono_ns;          /* the same instant on CLOCK_MONOTONIC (records' clock), */
	uint64_t real_ns;          /* CLOCK_REALTIME */
	uint64_t boot_ns;          /* and CLOCK_BOOTTIME */
	char host[64];
	char kernel[64];
	char version[32];          /* dlbpf that wrote it */
};

struct dl_recorder {
	FILE *f;
	const char *path;
	uint64_t records, bytes;
	int err;                   /* first write error (errno) */
};

/* Creates the file and writes the header; fails with a message. */
int dl_recorder_open(struct dl_recorder *r, const char *path);
/* A stream sink: appends one record. */
int dl_recorder_sink(void *recorder, const struct dl_rec *rec);
/* Flushes and closes; 0, or -errno of the first failed write. */
int dl_recorder_close(struct dl_recorder *r);

/* Reads a recording's header (to show its clocks, say); -1 with a message as dl_replay's. */
int dl_rec_header_read(const char *path, struct dl_rec_header *hdr, char *err, size_t errlen);
/*
 * Replays a recording into s. Returns 0, or -1 with a message in err: not a
 * recording, a newer ABI, a corrupt or truncated record. Records of kinds
 * newer than this build are skipped.
 */
int dl_replay(const char *path, struct dl_stream *s, struct dl_rec_header *hdr, char *err, size_t errlen);

#endif
