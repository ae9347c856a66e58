// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util.h"

static void out_of_memory(size_t size)
{
	fprintf(stderr, "dlbpf: out of memory (allocating %zu bytes)\n", size);
	abort();
}

void *dl_xrealloc(void *p, size_t size)
{
	void *q = realloc(p, size ? size : 1);

	if (!q)
		out_of_memory(size);
	return q;
}

void *dl_xcalloc(size_t n, size_t size)
{
	void *q = calloc(n ? n : 1, size ? size : 1);

	if (!q)
		out_of_memory(n * size);
	return q;
}

char *dl_xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(dl_xrealloc(NULL, n), s, n);
}

void dl_grow(void **v, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 16;

	if (need <= *cap)
		return;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2 / elem)
			out_of_memory(SIZE_MAX);
		ncap *= 2;
	}
	*v = dl_xrealloc(*v, ncap * elem);
	memset((char *)*v + *cap * elem, 0, (ncap - *cap) * elem);
	*cap = ncap;
}

void dl_drop_front(void *v, size_t *n, size_t k, size_t elem)
{
	if (!k)
		return;   /* callers drop what is ready, often nothing: not a move of everything onto itself */
	if (k >= *n) {
		*n = 0;
		return;
	}
	memmove(v, (char *)v + k * elem, (*n - k) * elem);
	*n -= k;
}

/*
 * Eight bytes a step, not one: names are hashed per record (a call site's frames, a kernel's name),
 * and byte-wise FNV was a quarter of the collector's time at 5 M launches/s. The length goes into
 * the seed so that trailing zero bytes still make another key. Values are never stored or compared
 * across builds or machines, so the byte order of the words does not matter.
 */
uint64_t dl_hash_bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull ^ ((uint64_t)n * 0x9e3779b97f4a7c15ull), w;

	for (; n >= 8; b += 8, n -= 8) {
		memcpy(&w, b, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 29;
	}
	w = 0;
	for (size_t i = 0; i < n; i++)
		w |= (uint64_t)b[i] << (8 * i);
	return dl_mix64(h ^ w);
}

static void rehash(struct dl_u64map *m, size_t cap)
{
	struct dl_u64map old = *m;

	m->slots = dl_xcalloc(cap, sizeof(*m->slots));
	m->cap = cap;
	m->n = 0;
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].used)
			dl_u64map_put(m, old.slots[i].key, old.slots[i].val);
	free(old.slots);
}

void dl_u64map_put(struct dl_u64map *m, uint64_t key, uint64_t val)
{
	size_t i;

	/* At most 3/4 full, so a probe sequence always ends at a free slot. */
	if ((m->n + 1) * 4 > m->cap * 3)
		rehash(m, m->cap ? m->cap * 2 : 16);
	i = dl_u64map_slot(m, key);
	if (!m->slots[i].used) {
		m->slots[i].used = true;
		m->slots[i].key = key;
		m->n++;
	}
	m->slots[i].val = val;
}

bool dl_u64map_del(struct dl_u64map *m, uint64_t key)
{
	size_t mask, i, j;

	if (!m->cap)
		return false;
	mask = m->cap - 1;
	i = dl_u64map_slot(m, key);
	if (!m->slots[i].used)
		return false;
	/* Backward shift: pull later members of the probe run into the hole. */
	for (j = (i + 1) & mask; m->slots[j].used; j = (j + 1) & mask) {
		size_t home = (size_t)dl_mix64(m->slots[j].key) & mask;

		/* j stays if its home lies cyclically in (i, j]. */
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		m->slots[i] = m->slots[j];
		i = j;
	}
	m->slots[i].used = false;
	m->n--;
	return true;
}

void dl_u64map_free(struct dl_u64map *m)
{
	free(m->slots);
	m->slots = NULL;
	m->n = m->cap = 0;
}

void dl_fmt_bytes(char *buf, size_t len, uint64_t b)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", b);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
}
