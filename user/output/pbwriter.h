/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A small protobuf encoder: varints, zigzag, fixed64, length-delimited fields.
 * A nested message reserves a 4-byte padded varint for its length and
 * backpatches it when closed (messages up to 256 MiB), so one pass suffices;
 * a message under DL_PB_COMPACT_MAX bytes is moved down to a minimal length.
 * Writes into a growable buffer the caller drains (dl_pb_take / dl_pb_reset).
 */
#ifndef DLBPF_PBWRITER_H
#define DLBPF_PBWRITER_H

#include <stddef.h>
#include <stdint.h>

#define DL_PB_MAX_DEPTH 16
#define DL_PB_LEN_BYTES 4  /* reserved length of a nested message */
#define DL_PB_COMPACT_MAX 4096  /* shorter messages get a minimal length when closed */

enum dl_pb_wire { DL_PB_VARINT = 0, DL_PB_I64 = 1, DL_PB_LEN = 2, DL_PB_I32 = 5 };

struct dl_pb {
	uint8_t *buf;
	size_t len, cap;
	size_t open[DL_PB_MAX_DEPTH];  /* offsets of reserved lengths */
	int depth;
	int err;                        /* -E2BIG (nesting or size), 0 */
};

void dl_pb_init(struct dl_pb *pb);
void dl_pb_free(struct dl_pb *pb);
void dl_pb_reset(struct dl_pb *pb);

/* Encodes v as a varint into out (at least 10 bytes); returns its length. */
size_t dl_pb_varint_enc(uint8_t *out, uint64_t v);
uint64_t dl_pb_zigzag(int64_t v);

void dl_pb_raw(struct dl_pb *pb, const void *p, size_t n);
void dl_pb_varint(struct dl_pb *pb, uint64_t v);
void dl_pb_tag(struct dl_pb *pb, uint32_t field, enum dl_pb_wire wire);
void dl_pb_uint(struct dl_pb *pb, uint32_t field, uint64_t v);
void dl_pb_int(struct dl_pb *pb, uint32_t field, int64_t v);    /* int64: two's complement */
void dl_pb_sint(struct dl_pb *pb, uint32_t field, int64_t v);   /* sint64: zigzag */
void dl_pb_bool(struct dl_pb *pb, uint32_t field, int v);
void dl_pb_fixed64(struct dl_pb *pb, uint32_t field, uint64_t v);
void dl_pb_double(struct dl_pb *pb, uint32_t field, double v);
void dl_pb_bytes(struct dl_pb *pb, uint32_t field, const void *p, size_t n);
/* s as valid UTF-8: an ill-formed sequence becomes U+FFFD. */
void dl_pb_str(struct dl_pb *pb, uint32_t field, const char *s);
/* Opens a nested message (or any length-delimited field) and closes the innermost one. */
void dl_pb_begin(struct dl_pb *pb, uint32_t field);
void dl_pb_end(struct dl_pb *pb);

#endif
