/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Recordings: a header (magic, ABI version and encoding, clock snapshot,
 * host, kernel) followed by the stream's records, exactly as they came (verbatim)
 * or coded against the previous record of their thread (compact, recenc.h).
 * `dlbpf report FILE` replays them through the same sinks as a live run.
 */
#ifndef DLBPF_RECORD_H
#define DLBPF_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "outfile.h"
#include "records/recenc.h"
#include "records/stream.h"

#define DL_REC_MAGIC "DLBPFREC"
#define DL_REC_HEADER_MAX 65536   /* header_size beyond this is corrupt, not a longer header */

struct dl_rec_header {
	char magic[8];
	uint32_t header_size;      /* bytes of this header: later versions may append fields */
	uint32_t abi_version;      /* DL_ABI_VERSION of the records | enum dl_rec_encoding << 16 */
	uint64_t mono_ns;          /* the same instant on CLOCK_MONOTONIC (records' clock), */
	uint64_t real_ns;          /* CLOCK_REALTIME */
	uint64_t boot_ns;          /* and CLOCK_BOOTTIME */
	char host[64];
	char kernel[64];
	char version[32];          /* dlbpf that wrote it */
};

/*
 * The encoding rides in abi_version's high half rather than a field of its
 * own: a dlbpf from before the compact encoding (verbatim, high half 0) reads
 * a compact recording's version as a newer ABI and refuses it ("use a newer
 * dlbpf"), instead of reading its bytes as records.
 */
#define DL_REC_ABI(v) ((v) & 0xffffu)
#define DL_REC_ENCODING(v) ((v) >> 16)

enum dl_rec_encoding {
	DL_REC_VERBATIM = 0,       /* each record as the stream gave it */
	DL_REC_COMPACT = 1,        /* records/recenc.h */
	DL_REC_ENCODING_MAX,
};

/* The encoding's name (verbatim, compact), or NULL; and back, -1 for a name that is none. */
const char *dl_rec_encoding_name(int encoding);
int dl_rec_encoding_of(const char *name);

/*
 * A recording is written to a temporary beside its path (outfile.h) and put
 * at its path by the first dl_recorder_flush, once tracing has begun: a run
 * that fails before that leaves an existing file of that name as it was; one
 * killed after it leaves a recording of everything up to the last flush,
 * which dl_replay reads up to its last complete record.
 */
struct dl_recorder {
	struct dl_outfile out;
	const char *path;
	uint64_t records, bytes;   /* bytes: of the file, header included */
	int err;                   /* first write error (errno) */
	bool published;            /* at its path (the first flush) */
	enum dl_rec_encoding encoding;
	struct dl_recenc *enc;     /* compact: the encoder's slots */
	uint8_t *buf;              /* encoded records not yet handed to stdio */
	size_t len;
};

/* Creates the temporary and writes the header; fails with a message. */
int dl_recorder_open(struct dl_recorder *r, const char *path, enum dl_rec_encoding encoding);
/* A stream sink: appends one record. */
int dl_recorder_sink(void *recorder, const struct dl_rec *rec);
/* Hands what is buffered to the kernel (it survives dlbpf's death) and, the first time, puts the file at its path. */
int dl_recorder_flush(struct dl_recorder *r);
/* Flushes, syncs and closes the complete recording at its path; 0, or -errno of the first failed write. */
int dl_recorder_close(struct dl_recorder *r);
/* A run that failed: the temporary is removed, or a published recording closed as it is. */
void dl_recorder_abort(struct dl_recorder *r);

/* Reads a recording's header (to show its clocks, say); -1 with a message as dl_replay's. */
int dl_rec_header_read(const char *path, struct dl_rec_header *hdr, char *err, size_t errlen);
/*
 * Replays a recording into s. Returns 0 when every record was read; 1 when
 * it stopped early, every complete record before that point replayed, with
 * the reason in err (where the file is cut short or corrupt: the byte offset
 * and the records read; or s->stop was set); -1 with a message in err when
 * the file is refused: it cannot be read, it is not a recording, its header is
 * corrupt or from a newer ABI. A malformed record whose size can be trusted is
 * counted by the stream and skipped, as a live one would be. Records of kinds
 * newer than this build are skipped.
 */
int dl_replay(const char *path, struct dl_stream *s, struct dl_rec_header *hdr, char *err, size_t errlen);

/*
 * The same reading, one record at a time, for a reader that interleaves
 * several recordings (multirank.c). open: NULL with a message when the
 * file is refused. next: 1 with *rec valid until the next call; 0 at the end;
 * -1 when it stopped early as dl_replay's 1 (why in err), -2 on a read error.
 */
struct dl_replayer;
struct dl_replayer *dl_replay_open(const char *path, struct dl_rec_header *hdr, char *err, size_t errlen);
int dl_replay_next(struct dl_replayer *r, const volatile sig_atomic_t *stop, const struct dl_hdr **rec, char *err,
		   size_t errlen);
void dl_replay_close(struct dl_replayer *r);

#endif
