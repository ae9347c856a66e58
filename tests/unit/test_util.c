// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The toolbox against plain references: the hash map against a flat array, vectors against hand-computed contents. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "util.h"

#define KEYS 4096

/* Random puts, gets and deletes over a key space small enough to collide often. */
static void test_map_matches_reference(void)
{
	static uint64_t ref[KEYS];
	static bool present[KEYS];
	struct dl_u64map m = { 0 };
	unsigned seed = 12345, mismatches = 0;
	size_t n = 0;

	for (int op = 0; op < 200000; op++) {
		uint64_t k = (uint64_t)(rand_r(&seed) % KEYS) * 0x10000;   /* strided keys: the hash must spread them */
		size_t ki = (size_t)(k / 0x10000);
		int what = rand_r(&seed) % 3;
		uint64_t v;

		if (what == 0) {
			v = (uint64_t)rand_r(&seed);
			dl_u64map_put(&m, k, v);
			n += !present[ki];
			present[ki] = true;
			ref[ki] = v;
		} else if (what == 1) {
			bool had = dl_u64map_del(&m, k);

			mismatches += had != present[ki];
			n -= present[ki];
			present[ki] = false;
		} else {
			bool got = dl_u64map_get(&m, k, &v);

			mismatches += got != present[ki] || (got && v != ref[ki]);
		}
	}
	for (size_t i = 0; i < KEYS; i++) {
		uint64_t v;
		bool got = dl_u64map_get(&m, (uint64_t)i * 0x10000, &v);

		mismatches += got != present[i] || (got && v != ref[i]);
	}
	CHECK(mismatches == 0, "%u lookups disagree with the reference", mismatches);
	CHECK_EQ_U64(m.n, n);
	dl_u64map_free(&m);
	CHECK(!dl_u64map_get(&m, 0, NULL), "a freed map is empty");
}

static void test_vec(void)
{
	DL_VEC(int) v = { 0 };
	int three[3] = { 7, 8, 9 }, sum = 0;

	for (int i = 0; i < 100; i++)
		*dl_vec_push(&v) = i;
	dl_vec_append(&v, three, 3);
	dl_vec_drop_front(&v, 10);
	dl_vec_remove(&v, 0);      /* drops 10 */
	for (size_t i = 0; i < v.n; i++)
		sum += v.v[i];
	/* 11..99 is 4895, plus 7 + 8 + 9 */
	CHECK(v.n == 92 && sum == 4895 + 24 && v.v[0] == 11 && v.v[v.n - 1] == 9, "n %zu sum %d", v.n, sum);
	dl_vec_drop_front(&v, 1000);
	CHECK(v.n == 0, "dropping more than n empties it");
	dl_vec_free(&v);
	CHECK(v.v == NULL && v.cap == 0, "freed");
}

struct stamped {
	uint64_t ts;
	int id;
};

/* The lower bound against a linear scan, on runs of equal keys, at both ends and between keys. */
static void test_lower_bound(void)
{
	DL_VEC(struct stamped) v = { 0 };
	unsigned bad = 0;

	CHECK(dl_vec_lower_bound(&v, ts, (uint64_t)5) == 0, "empty: 0");
	for (int i = 0; i < 300; i++)
		*dl_vec_push(&v) = (struct stamped){ (uint64_t)(i / 3) * 10 + 10, i };   /* 10,10,10,20,... */
	for (uint64_t t = 0; t <= 1020; t++) {
		size_t want = 0;

		while (want < v.n && v.v[want].ts < t)
			want++;
		bad += dl_vec_lower_bound(&v, ts, t) != want;
	}
	CHECK(bad == 0, "%u of 1021 keys placed wrong", bad);
	dl_vec_free(&v);
}

/*
 * A sliding window of the last W stamps, trimmed after every push: the
 * elements at or after the window's start (found by search) are always
 * exactly the window, and the vector never holds more than twice it.
 */
static void test_drop_front_amortized(void)
{
	enum { W = 100, N = 5000 };
	DL_VEC(struct stamped) v = { 0 };
	size_t most = 0, drops = 0, before;
	unsigned wrong = 0;

	for (int i = 0; i < N; i++) {
		uint64_t from = i >= W ? (uint64_t)(i - W + 1) : 0;
		size_t k;

		*dl_vec_push(&v) = (struct stamped){ (uint64_t)i, i };
		before = v.n;
		dl_vec_drop_front_amortized(&v, dl_vec_lower_bound(&v, ts, from));
		drops += v.n != before;
		k = dl_vec_lower_bound(&v, ts, from);
		wrong += v.n - k != (size_t)(i < W ? i + 1 : W) || v.v[k].id != (int)from;
		most = v.n > most ? v.n : most;
	}
	CHECK(wrong == 0, "%u windows wrong", wrong);
	/* Dropped once a quarter of it is stale: W live plus at most W / 3 stale. */
	CHECK(most <= W + W / 3 + 1, "held %zu for a window of %d", most, W);
	/* Once full, a drop per W / 3 pushes (rounded either way), not one per push. */
	CHECK(drops >= (N - W) / (W / 3 + 1) - 2 && drops <= N / (W / 3) + 2, "%zu drops over %d pushes", drops, N);
	dl_vec_free(&v);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * dl_hash_bytes reads eight bytes at a time: the same bytes hash the same at any alignment and
 * length split; a changed bit anywhere, or trailing zero bytes, give another value; and the names
 * the collector hashes (call sites, kernels: short, alike, differing in their last bytes) do not
 * collide in 64 bits.
 */
static void test_hash_bytes(void)
{
	enum { LEN = 45, NAMES = 200000 };
	static char buf[LEN + 16], names[NAMES][24];
	static uint64_t h[NAMES];
	unsigned misaligned = 0, unchanged = 0, dup = 0;
	uint64_t ref;

	for (int i = 0; i < LEN; i++)
		buf[8 + i] = (char)(i * 37 + 11);
	ref = dl_hash_bytes(buf + 8, LEN);
	for (int off = 0; off < 8; off++) {
		char copy[LEN + 16];

		memcpy(copy + off, buf + 8, LEN);
		misaligned += dl_hash_bytes(copy + off, LEN) != ref;
	}
	CHECK(misaligned == 0, "%u of 8 alignments hash differently", misaligned);
	for (int i = 0; i < LEN * 8; i++) {
		buf[8 + i / 8] ^= (char)(1 << (i % 8));
		unchanged += dl_hash_bytes(buf + 8, LEN) == ref;
		buf[8 + i / 8] ^= (char)(1 << (i % 8));
	}
	CHECK(unchanged == 0, "%u of %d one-bit changes kept the hash", unchanged, LEN * 8);
	memset(buf, 0, sizeof(buf));
	CHECK(dl_hash_bytes(buf, 3) != dl_hash_bytes(buf, 4) && dl_hash_bytes(buf, 8) != dl_hash_bytes(buf, 9) &&
	      dl_hash_bytes(buf, 0) != dl_hash_bytes(buf, 1), "trailing zero bytes change the hash");
	for (int i = 0; i < NAMES; i++) {
		snprintf(names[i], sizeof(names[i]), "train_step+0x%x", i);
		h[i] = dl_hash_bytes(names[i], strlen(names[i]));
	}
	qsort(h, NAMES, sizeof(h[0]), cmp_u64);
	for (int i = 1; i < NAMES; i++)
		dup += h[i] == h[i - 1];
	CHECK(dup == 0, "%u of %d alike names collide", dup, NAMES);
}

int main(void)
{
	test_hash_bytes();
	test_map_matches_reference();
	test_vec();
	test_lower_bound();
	test_drop_front_amortized();
	return check_report("test_util");
}
