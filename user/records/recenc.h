/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The compact encoding of a recording's records (user/records/README.md has
 * the format byte by byte). Most of a record repeats the previous record of
 * its kind on its thread: a launch differs from the last launch in a time
 * stamp, a duration and an argument or two. So each record is coded against
 * that one, held in a slot: a bitmap of the 8-byte words that differ, then
 * each difference as a zigzag varint; the time stamp against the previous
 * record of the stream, which is time-ordered.
 *
 * The encoder picks the slot and writes its number, so the decoder needs no
 * table of threads: it only keeps the slots' last records. Records longer
 * than a slot (library paths, symbol names: rare) are stored verbatim, less
 * their runs of zeros.
 * Pure: no I/O, so the unit tests and the fuzzer drive it directly.
 */
#ifndef DLBPF_RECENC_H
#define DLBPF_RECENC_H

#include <stddef.h>
#include <stdint.h>

#define DL_RECENC_SLOTS 1024        /* the encoder starts over when more (kind, thread) pairs come */
#define DL_RECENC_SLOT_WORDS 16     /* a record of up to 128 bytes is coded against its slot */
#define DL_RECENC_MIN_SIZE 24       /* struct dl_hdr: a record carries at least its header */
#define DL_RECENC_MAX_SIZE 65535    /* dl_hdr.size is 16 bits */
/* Bytes one encoded record can take: a verbatim one behind a one-byte head. */
#define DL_RECENC_MAX_BYTES (DL_RECENC_MAX_SIZE + 1)

enum dl_recenc_mode {
	DL_RECENC_DELTA = 0,     /* against the slot's last record */
	DL_RECENC_FRESH = 1,     /* the slot starts over: against zeros, kind and size given */
	DL_RECENC_VERBATIM = 2,  /* the record as it is (longer than a slot) */
};
/* With VERBATIM: the record as literals and runs of zeros (user/records/README.md). */
#define DL_RECENC_SPARSE 4u

struct dl_recenc_slot {
	uint64_t w[DL_RECENC_SLOT_WORDS];   /* the last record, zero past its size; w[0] holds the cpu only */
	uint16_t size, kind;
};

struct dl_recenc {
	/* Written before read: the encoder clears a slot as it hands it out, the decoder fills it at FRESH. */
	struct dl_recenc_slot slot[DL_RECENC_SLOTS];
	uint8_t used[DL_RECENC_SLOTS];       /* decoder: a DELTA may name the slot */
	/* Encoder: (kind, tid) + 1 -> slot + 1, open addressing at half load; 0 is empty. */
	uint64_t key[2 * DL_RECENC_SLOTS];
	uint16_t val[2 * DL_RECENC_SLOTS];
	unsigned nslots;                     /* slots handed out since the last start-over */
	uint64_t prev_ts;
	uint64_t restarts;                   /* times the slot table filled and started over */
};

/* Both ends start from zeros but for the slots (the 140 KiB of them are left alone until used). */
void dl_recenc_init(struct dl_recenc *e);
/*
 * Encodes one record (size from its header, DL_RECENC_MIN_SIZE..MAX_SIZE) to
 * out, which has DL_RECENC_MAX_BYTES; returns the bytes written, 0 for a size
 * out of range.
 */
size_t dl_recenc_put(struct dl_recenc *e, const void *rec, uint8_t *out);
/*
 * Decodes the record at p (avail bytes) into out (DL_RECENC_MAX_SIZE bytes;
 * written with memcpy, so any alignment). Returns the bytes it took; 0 when avail ends inside the record
 * (nothing changed: call again with more); -1 when it is corrupt, with why.
 */
long dl_recdec_next(struct dl_recenc *d, const uint8_t *p, size_t avail, void *out, const char **why);

#endif
