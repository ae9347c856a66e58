// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "output/pbwriter.h"
#include "strsafe.h"
#include "util.h"

void dl_pb_init(struct dl_pb *pb)
{
	memset(pb, 0, sizeof(*pb));
}

void dl_pb_free(struct dl_pb *pb)
{
	free(pb->buf);
	memset(pb, 0, sizeof(*pb));
}

void dl_pb_reset(struct dl_pb *pb)
{
	pb->len = 0;
	pb->depth = 0;
}

size_t dl_pb_varint_enc(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

uint64_t dl_pb_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static uint8_t *room(struct dl_pb *pb, size_t n)
{
	if (pb->err)
		return NULL;
	if (pb->len + n > pb->cap)
		dl_grow((void **)&pb->buf, &pb->cap, pb->len + n, 1);
	return pb->buf + pb->len;
}

void dl_pb_raw(struct dl_pb *pb, const void *p, size_t n)
{
	uint8_t *d = room(pb, n);

	if (!d)
		return;
	if (n)
		memcpy(d, p, n);
	pb->len += n;
}

void dl_pb_varint(struct dl_pb *pb, uint64_t v)
{
	uint8_t *d = room(pb, 10);

	if (d)
		pb->len += dl_pb_varint_enc(d, v);
}

void dl_pb_tag(struct dl_pb *pb, uint32_t field, enum dl_pb_wire wire)
{
	dl_pb_varint(pb, (uint64_t)field << 3 | wire);
}

void dl_pb_uint(struct dl_pb *pb, uint32_t field, uint64_t v)
{
	dl_pb_tag(pb, field, DL_PB_VARINT);
	dl_pb_varint(pb, v);
}

void dl_pb_int(struct dl_pb *pb, uint32_t field, int64_t v)
{
	dl_pb_uint(pb, field, (uint64_t)v);
}

void dl_pb_sint(struct dl_pb *pb, uint32_t field, int64_t v)
{
	dl_pb_uint(pb, field, dl_pb_zigzag(v));
}

void dl_pb_bool(struct dl_pb *pb, uint32_t field, int v)
{
	dl_pb_uint(pb, field, v ? 1 : 0);
}

void dl_pb_fixed64(struct dl_pb *pb, uint32_t field, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));   /* little-endian on the wire */
	dl_pb_tag(pb, field, DL_PB_I64);
	dl_pb_raw(pb, b, sizeof(b));
}

void dl_pb_double(struct dl_pb *pb, uint32_t field, double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	dl_pb_fixed64(pb, field, u);
}

void dl_pb_bytes(struct dl_pb *pb, uint32_t field, const void *p, size_t n)
{
	dl_pb_tag(pb, field, DL_PB_LEN);
	dl_pb_varint(pb, n);
	dl_pb_raw(pb, p, n);
}

/* A protobuf string must be UTF-8 (decoders refuse the message otherwise); names are the traced side's bytes. */
void dl_pb_str(struct dl_pb *pb, uint32_t field, const char *s)
{
	size_t n = strlen(s);
	struct dl_sbuf fixed = { 0 };

	if (dl_utf8_valid(s, n)) {
		dl_pb_bytes(pb, field, s, n);
		return;
	}
	dl_utf8_fix(&fixed, s, n);
	dl_pb_bytes(pb, field, fixed.v, fixed.n);
	dl_sbuf_free(&fixed);
}

void dl_pb_begin(struct dl_pb *pb, uint32_t field)
{
	static const uint8_t zero[DL_PB_LEN_BYTES] = { 0x80, 0x80, 0x80, 0x00 };

	dl_pb_tag(pb, field, DL_PB_LEN);
	if (pb->depth >= DL_PB_MAX_DEPTH) {
		pb->err = pb->err ? pb->err : -E2BIG;
		return;
	}
	pb->open[pb->depth++] = pb->len;
	dl_pb_raw(pb, zero, sizeof(zero));
}

void dl_pb_end(struct dl_pb *pb)
{
	size_t at, n;
	uint8_t *d;

	if (pb->err || pb->depth == 0)
		return;
	at = pb->open[--pb->depth];
	n = pb->len - at - DL_PB_LEN_BYTES;
	if (n >= 1u << 28) {
		pb->err = -E2BIG;
		return;
	}
	d = pb->buf + at;
	if (n < DL_PB_COMPACT_MAX) {
		/* Small message: shift it down over the unused reserved bytes (cheap, and saves 2-3 bytes a message). */
		uint8_t v[DL_PB_LEN_BYTES];
		size_t k = dl_pb_varint_enc(v, n);

		memmove(d + k, d + DL_PB_LEN_BYTES, n);
		memcpy(d, v, k);
		pb->len -= DL_PB_LEN_BYTES - k;
		return;
	}
	/* A padded varint: continuation bits on the first three bytes whatever the value. */
	d[0] = (uint8_t)(n | 0x80);
	d[1] = (uint8_t)(n >> 7 | 0x80);
	d[2] = (uint8_t)(n >> 14 | 0x80);
	d[3] = (uint8_t)(n >> 21);
}
