/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A mutator that knows records: byte-level mutation mostly breaks the size
 * in a record's header, so the stream stops at the first record and what
 * lies behind it (steps, timelines, reports) is seldom reached. Most of the
 * time this one works on whole records instead: mutates a record's fields
 * but not its size, duplicates, drops or moves one, or plants a value that
 * breaks arithmetic (0, 2^63 - 1, 2^64 - 1, another record's timestamp).
 * The rest of the time it leaves the bytes to libFuzzer, size fields too.
 */
#ifndef DLBPF_FUZZ_MUTATE_RECORDS_H
#define DLBPF_FUZZ_MUTATE_RECORDS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "dlbpf/events.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

#define MUT_MAX_RECORDS 4096

static inline uint64_t mut_next(uint64_t *s)
{
	/* xorshift64*: libFuzzer gives the seed, so a mutation can be replayed */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static inline uint16_t mut_size_at(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Mutates records laid end to end from data + start (what lies before is a file header). */
static inline size_t mutate_records(uint8_t *data, size_t size, size_t max_size, unsigned seed, size_t start)
{
	static const uint64_t odd[] = { 0, 1, 0x7fffffffffffffffull, 0xffffffffffffffffull, 0x8000000000000000ull,
					0xffffffffull, 0x100000000ull };
	static size_t off[MUT_MAX_RECORDS + 1];
	uint64_t r = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t n = 0, at = start, i, j, len;

	while (n < MUT_MAX_RECORDS && at + sizeof(struct dl_hdr) <= size) {
		uint16_t sz = mut_size_at(data + at);

		if (sz < sizeof(struct dl_hdr) || at + sz > size)
			break;
		off[n++] = at;
		at += sz;
	}
	off[n] = at;
	if (!n || mut_next(&r) % 4 == 0)
		return LLVMFuzzerMutate(data, size, max_size);
	i = mut_next(&r) % n;
	len = off[i + 1] - off[i];
	switch (mut_next(&r) % 6) {
	case 0: /* fields, not the size or kind */
		if (len > 4)
			LLVMFuzzerMutate(data + off[i] + 4, len - 4, len - 4);
		return size;
	case 1: /* a value that breaks arithmetic, at a field-aligned place after the size and kind */
		if (len >= 16) {
			uint64_t v = odd[mut_next(&r) % (sizeof(odd) / sizeof(odd[0]))];
			size_t k = 8 + 8 * (mut_next(&r) % ((len - 8) / 8));

			if (mut_next(&r) % 3 == 0)   /* another record's start time: zero-length or reversed spans */
				memcpy(&v, data + off[mut_next(&r) % n] + 8, sizeof(v));
			memcpy(data + off[i] + k, &v, sizeof(v));   /* k + 8 <= len */
		}
		return size;
	case 2: /* the record again, right after itself */
		if (size + len > max_size)
			return size;
		memmove(data + off[i + 1] + len, data + off[i + 1], size - off[i + 1]);
		memcpy(data + off[i + 1], data + off[i], len);
		return size + len;
	case 3: /* dropped */
		memmove(data + off[i], data + off[i + 1], size - off[i + 1]);
		return size - len;
	case 4: { /* moved before another: time runs backwards */
		uint8_t tmp[1 << 16];

		j = mut_next(&r) % n;
		if (j >= i)
			return size;
		memcpy(tmp, data + off[i], len);
		memmove(data + off[j] + len, data + off[j], off[i] - off[j]);
		memcpy(data + off[j], tmp, len);
		return size;
	}
	default: { /* another kind, same bytes: a record too short for what it now claims to be */
		uint16_t kind = (uint16_t)(1 + mut_next(&r) % (DL_EV_KIND_MAX + 1));

		memcpy(data + off[i] + 2, &kind, sizeof(kind));
		return size;
	}
	}
}

#endif
