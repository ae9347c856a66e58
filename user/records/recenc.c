// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <string.h>
#include "records/recenc.h"
#include "dlbpf/events.h"

#define MAP_SIZE (2 * DL_RECENC_SLOTS)
#define VARINT_MAX 10   /* bytes of a 64-bit varint */

void dl_recenc_init(struct dl_recenc *e)
{
	/* Each replay and recording starts a codec: touching the whole table each time was most of a short one's cost. */
	memset(e->used, 0, sizeof(*e) - offsetof(struct dl_recenc, used));
}

static inline uint64_t zigzag(uint64_t d)
{
	return (d << 1) ^ (uint64_t)-(int64_t)(d >> 63);
}

static inline uint64_t unzigzag(uint64_t z)
{
	return (z >> 1) ^ (uint64_t)-(int64_t)(z & 1);
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)v | 0x80;
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* 1 and the value, 0 when the bytes end inside it, -1 past 64 bits. */
static inline int get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;
	uint64_t x = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		if (p == end)
			return 0;
		x |= (uint64_t)(*p & 0x7f) << shift;
		if (!(*p++ & 0x80)) {
			*v = x;
			*pp = p;
			return 1;
		}
	}
	return -1;
}

static inline uint64_t word_at(const uint8_t *rec, unsigned i, unsigned size)
{
	uint64_t w = 0;
	unsigned at = 8 * i;

	/* A constant length is one load; only a size's last partial word takes a variable copy. */
	if (size - at >= 8)
		memcpy(&w, rec + at, 8);
	else
		memcpy(&w, rec + at, size - at);
	return w;
}

/*
 * A long record as literals and runs of zeros: the unused rest of a
 * fixed-size path or name. Runs shorter than SPARSE_RUN stay in the literal,
 * as their two varints would cost about what they save. Verbatim when that is
 * no shorter.
 */
#define SPARSE_RUN 8

static size_t put_sparse(const uint8_t *r, size_t size, uint8_t *out)
{
	uint8_t *p = out;
	size_t at = 0;

	*p++ = DL_RECENC_VERBATIM | DL_RECENC_SPARSE;
	p = put_varint(p, size);
	while (at < size) {
		size_t lit = at, zeros;

		/* The literal ends where a run of SPARSE_RUN zeros (or the record's end) begins. */
		for (;;) {
			size_t z = 0;

			while (lit + z < size && !r[lit + z] && z < SPARSE_RUN)
				z++;
			if (lit + z == size || z == SPARSE_RUN)
				break;
			lit += z + 1;
		}
		zeros = lit;
		while (zeros < size && !r[zeros])
			zeros++;
		if ((size_t)(p - out) + 2 * VARINT_MAX + (lit - at) > 1 + size)
			goto verbatim;
		p = put_varint(p, lit - at);
		memcpy(p, r + at, lit - at);
		p += lit - at;
		p = put_varint(p, zeros - lit);
		at = zeros;
	}
	if ((size_t)(p - out) < 1 + size)
		return (size_t)(p - out);
verbatim:
	out[0] = DL_RECENC_VERBATIM;
	memcpy(out + 1, r, size);
	return 1 + size;
}

/* Reads a varint at p into x, or returns what get_varint said (in a function with p, end, got, why). */
#define NEED_VARINT(x)                                                        \
	do {                                                                  \
		got = get_varint(&p, end, &(x));                              \
		if (got <= 0) {                                               \
			*why = "a varint runs past 64 bits";                  \
			return got;                                           \
		}                                                             \
	} while (0)

/* The sparse form's body, after its head: 1 and the record, 0 for more bytes, -1 corrupt. */
static int get_sparse(const uint8_t **pp, const uint8_t *end, uint8_t *out, const char **why)
{
	const uint8_t *p = *pp;
	uint64_t size, lit, zeros, at = 0;
	uint16_t claimed;
	int got;

	NEED_VARINT(size);
	if (size < DL_RECENC_MIN_SIZE || size > DL_RECENC_MAX_SIZE) {
		*why = "a sparse record's size is out of range";
		return -1;
	}
	while (at < size) {
		NEED_VARINT(lit);
		if (lit > size - at) {
			*why = "a sparse record's bytes run past its size";
			return -1;
		}
		if ((uint64_t)(end - p) < lit)
			return 0;
		memcpy(out + at, p, lit);
		p += lit;
		at += lit;
		NEED_VARINT(zeros);
		if (zeros > size - at) {
			*why = "a sparse record's bytes run past its size";
			return -1;
		}
		if (!lit && !zeros) {
			*why = "a sparse record has an empty piece";
			return -1;
		}
		memset(out + at, 0, zeros);
		at += zeros;
	}
	memcpy(&claimed, out, sizeof(claimed));
	if (claimed != size) {
		*why = "a sparse record's header claims another size";
		return -1;
	}
	*pp = p;
	return 1;
}

/* The slot of (kind, tid): the one it had, or a new one, coded FRESH. */
static unsigned slot_of(struct dl_recenc *e, uint16_t kind, uint32_t tid, int *fresh)
{
	uint64_t key = ((uint64_t)kind << 32 | tid) + 1;
	unsigned h = (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 53) & (MAP_SIZE - 1);

	for (;; h = (h + 1) & (MAP_SIZE - 1)) {
		if (e->key[h] == key) {
			*fresh = 0;
			return e->val[h] - 1u;
		}
		if (!e->key[h])
			break;
	}
	/* Full: start over rather than track which pair is coldest; each pair's next record is FRESH. */
	if (e->nslots == DL_RECENC_SLOTS) {
		memset(e->key, 0, sizeof(e->key));
		e->nslots = 0;
		e->restarts++;
		return slot_of(e, kind, tid, fresh);
	}
	e->key[h] = key;
	e->val[h] = (uint16_t)(e->nslots + 1);
	*fresh = 1;
	return e->nslots++;
}

size_t dl_recenc_put(struct dl_recenc *e, const void *rec, uint8_t *out)
{
	const uint8_t *r = rec;
	struct dl_hdr h;
	struct dl_recenc_slot *s;
	uint64_t v[DL_RECENC_SLOT_WORDS], bitmap = 0;
	uint8_t *p = out, *bits;
	unsigned n, nb, slot;
	int fresh;

	memcpy(&h, r, sizeof(h));
	if (h.size < DL_RECENC_MIN_SIZE)
		return 0;
	if (h.size > 8 * DL_RECENC_SLOT_WORDS) {
		e->prev_ts = h.ts;
		return put_sparse(r, h.size, out);
	}
	slot = slot_of(e, h.kind, h.tid, &fresh);
	s = &e->slot[slot];
	if (fresh) {
		memset(s, 0, sizeof(*s));
		p = put_varint(p, (uint64_t)slot << 3 | DL_RECENC_FRESH);
		p = put_varint(p, h.kind);
		p = put_varint(p, h.size);
	} else if (h.size != s->size) {
		p = put_varint(p, (uint64_t)slot << 3 | 1u << 2 | DL_RECENC_DELTA);
		p = put_varint(p, h.size);
	} else {
		p = put_varint(p, (uint64_t)slot << 3 | DL_RECENC_DELTA);
	}
	n = (h.size + 7u) / 8;
	nb = (n + 7) / 8;
	bits = p;
	p += nb;
	v[0] = h.cpu;
	v[1] = h.ts;
	for (unsigned i = 2; i < n; i++)
		v[i] = word_at(r, i, h.size);
	for (unsigned i = 0; i < n; i++) {
		uint64_t pred = i == 1 ? e->prev_ts : s->w[i];

		if (v[i] != pred) {
			bitmap |= 1ull << i;
			p = put_varint(p, zigzag(v[i] - pred));
		}
	}
	/*
	 * Slot 0's exact repeat would be all zero bytes, which a reader cannot tell from the zeros a
	 * crash leaves at a file's end (record.c cuts those): its first field is written, unchanged,
	 * instead. It decodes the same, one byte longer.
	 */
	if (!bitmap && out[0] == 0) {
		bitmap = 1;
		p = put_varint(p, zigzag(0));
	}
	for (unsigned b = 0; b < nb; b++)
		bits[b] = (uint8_t)(bitmap >> (8 * b));
	memcpy(s->w, v, n * sizeof(v[0]));
	memset(s->w + n, 0, (DL_RECENC_SLOT_WORDS - n) * sizeof(v[0]));
	s->size = h.size;
	s->kind = h.kind;
	e->prev_ts = h.ts;
	return (size_t)(p - out);
}

long dl_recdec_next(struct dl_recenc *d, const uint8_t *p0, size_t avail, void *out, const char **why)
{
	const uint8_t *p = p0, *end = p0 + avail;
	struct dl_recenc_slot *s, base;
	uint64_t head, kind, size, bitmap = 0, v[DL_RECENC_SLOT_WORDS];
	unsigned n, nb, slot;
	struct dl_hdr h;
	int got;

	NEED_VARINT(head);
	if ((head & 3) == DL_RECENC_VERBATIM) {
		uint16_t sz;

		if (head == (DL_RECENC_VERBATIM | DL_RECENC_SPARSE)) {
			got = get_sparse(&p, end, out, why);
			if (got <= 0)
				return got;
			memcpy(&d->prev_ts, (uint8_t *)out + offsetof(struct dl_hdr, ts), sizeof(d->prev_ts));
			return p - p0;
		}
		if (head != DL_RECENC_VERBATIM) {
			*why = "a verbatim record's head has bits set";
			return -1;
		}
		if (end - p < 2)
			return 0;
		memcpy(&sz, p, 2);
		if (sz < DL_RECENC_MIN_SIZE) {
			*why = "a record claims less than its header";
			return -1;
		}
		if ((size_t)(end - p) < sz)
			return 0;
		memcpy(out, p, sz);
		memcpy(&d->prev_ts, p + offsetof(struct dl_hdr, ts), sizeof(d->prev_ts));
		return (long)(p - p0) + sz;
	}
	if ((head & 3) == 3) {
		*why = "a record's head names no encoding";
		return -1;
	}
	if (head >> 3 >= DL_RECENC_SLOTS) {
		*why = "a record names a slot past the table";
		return -1;
	}
	slot = (unsigned)(head >> 3);
	s = &d->slot[slot];
	if ((head & 3) == DL_RECENC_FRESH) {
		if (head & 4) {
			*why = "a fresh slot's head has the size bit set";
			return -1;
		}
		NEED_VARINT(kind);
		NEED_VARINT(size);
		memset(&base, 0, sizeof(base));
	} else {
		if (!d->used[slot]) {
			*why = "a record is coded against a slot that holds none";
			return -1;
		}
		kind = s->kind;
		size = s->size;
		if (head & 4)
			NEED_VARINT(size);
		base = *s;
	}
	if (kind > UINT16_MAX || size < DL_RECENC_MIN_SIZE || size > 8 * DL_RECENC_SLOT_WORDS) {
		*why = "a record's kind or size is out of range";
		return -1;
	}
	n = (unsigned)(size + 7) / 8;
	nb = (n + 7) / 8;
	if ((size_t)(end - p) < nb)
		return 0;
	for (unsigned b = 0; b < nb; b++)
		bitmap |= (uint64_t)p[b] << (8 * b);
	p += nb;
	if (bitmap >> n) {
		*why = "a record's bitmap names words past its size";
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		uint64_t z;

		v[i] = i == 1 ? d->prev_ts : base.w[i];
		if (bitmap & (1ull << i)) {
			NEED_VARINT(z);
			v[i] += unzigzag(z);
		}
	}
#undef NEED_VARINT
	/* Bytes past the size would make this slot differ from the encoder's, which holds zeros there. */
	v[0] = (uint32_t)v[0];
	if (size % 8)
		v[n - 1] &= ~0ull >> (64 - 8 * (size % 8));
	h = (struct dl_hdr){ .size = (uint16_t)size, .kind = (uint16_t)kind, .cpu = (uint32_t)v[0], .ts = v[1] };
	memcpy(out, &h, offsetof(struct dl_hdr, tgid));
	memcpy((uint8_t *)out + 16, v + 2, size - 16);
	memcpy(s->w, v, n * sizeof(v[0]));
	memset(s->w + n, 0, (DL_RECENC_SLOT_WORDS - n) * sizeof(v[0]));
	s->size = (uint16_t)size;
	s->kind = (uint16_t)kind;
	d->used[slot] = 1;
	d->prev_ts = v[1];
	return p - p0;
}
