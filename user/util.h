/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The collector's toolbox: allocation, growable arrays, a u64 hash map, min/max.
 *
 * Allocation failure has one policy: dl_xrealloc and everything built on it
 * print "dlbpf: out of memory" with the size asked for and abort. The
 * collector's memory follows the size of the traced job (processes, threads,
 * kernels, in-flight steps), not the event rate, so running out means the
 * machine is out of memory; carrying on would drop data without counting it,
 * and every caller would need an error path that can do nothing better. The
 * kernel detaches every probe when the process dies.
 */
#ifndef DLBPF_UTIL_H
#define DLBPF_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *dl_xrealloc(void *p, size_t size);
void *dl_xcalloc(size_t n, size_t size);
char *dl_xstrdup(const char *s);

/*
 * Grows *v (elements of elem bytes, capacity *cap) to hold at least need
 * elements: doubling, from 16. New capacity is zeroed.
 */
void dl_grow(void **v, size_t *cap, size_t need, size_t elem);

/* A growable array of T: zero-initialised is empty. */
#define DL_VEC(T) struct { T *v; size_t n, cap; }

#define dl_vec_reserve(vec, need) \
	dl_grow((void **)&(vec)->v, &(vec)->cap, (need), sizeof(*(vec)->v))
/* Appends one zeroed element and returns a pointer to it. */
#define dl_vec_push(vec) ({ \
	__typeof__(vec) vp_ = (vec); \
	dl_vec_reserve(vp_, vp_->n + 1); \
	memset(&vp_->v[vp_->n], 0, sizeof(*vp_->v)); \
	&vp_->v[vp_->n++]; })
/* Appends k elements copied from items; returns a pointer to the first. */
#define dl_vec_append(vec, items, k) ({ \
	__typeof__(vec) va_ = (vec); \
	size_t vk_ = (k); \
	dl_vec_reserve(va_, va_->n + vk_); \
	if (vk_) \
		memcpy(&va_->v[va_->n], (items), vk_ * sizeof(*va_->v)); \
	va_->n += vk_; \
	&va_->v[va_->n - vk_]; })
/* Removes element i, moving the ones after it down (order kept). */
#define dl_vec_remove(vec, i) do { \
	__typeof__(vec) vr_ = (vec); \
	size_t vi_ = (i); \
	memmove(&vr_->v[vi_], &vr_->v[vi_ + 1], (vr_->n - vi_ - 1) * sizeof(*vr_->v)); \
	vr_->n--; } while (0)
/* Drops the first k elements (all of them if k >= n). */
#define dl_vec_drop_front(vec, k) \
	dl_drop_front((vec)->v, &(vec)->n, (k), sizeof(*(vec)->v))
/*
 * Drops the first k elements once they are a quarter of those held: a
 * history trimmed often has each element moved at most three times, not the
 * whole of it at every trim, and holds at most a third more than it needs.
 * Until then the k stay, so readers find where to start by search
 * (dl_vec_lower_bound), not at 0.
 */
#define dl_vec_drop_front_amortized(vec, k) do { \
	__typeof__(vec) vd_ = (vec); \
	size_t vdk_ = (k); \
	if (vdk_ && 4 * vdk_ >= vd_->n) \
		dl_vec_drop_front(vd_, vdk_); } while (0)
/* In a vector ordered by field: the index of the first element whose field is >= t (n if none). */
#define dl_vec_lower_bound(vec, field, t) ({ \
	__typeof__(vec) vl_ = (vec); \
	__typeof__(t) vt_ = (t); \
	size_t lo_ = 0, hi_ = vl_->n; \
	while (lo_ < hi_) { \
		size_t mid_ = lo_ + (hi_ - lo_) / 2; \
		if (vl_->v[mid_].field < vt_) \
			lo_ = mid_ + 1; \
		else \
			hi_ = mid_; \
	} \
	lo_; })
#define dl_vec_free(vec) \
	do { free((vec)->v); (vec)->v = NULL; (vec)->n = (vec)->cap = 0; } while (0)

void dl_drop_front(void *v, size_t *n, size_t k, size_t elem);

/*
 * A map from u64 keys to u64 values (typically an index into a DL_VEC):
 * open addressing, linear probing, deletion by backward shift (no tombstones).
 * Zero-initialised is empty.
 */
struct dl_u64map {
	struct dl_u64map_slot { uint64_t key, val; bool used; } *slots;
	size_t n, cap;    /* cap: a power of two, or 0 */
};

/* splitmix64's finalizer: every key bit moves every slot bit. */
static inline uint64_t dl_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Where key is, or the free slot that ends its probe sequence; the map must have slots. */
static inline size_t dl_u64map_slot(const struct dl_u64map *m, uint64_t key)
{
	size_t mask = m->cap - 1, i = (size_t)dl_mix64(key) & mask;

	while (m->slots[i].used && m->slots[i].key != key)
		i = (i + 1) & mask;
	return i;
}

/*
 * Inline: the collector looks up ~8 keys per record (its processes by pid,
 * kernels by address), and out of line those calls were ~30% of a record's
 * instructions (callgrind, records mode).
 */
static inline bool dl_u64map_get(const struct dl_u64map *m, uint64_t key, uint64_t *val)
{
	size_t i;

	if (!m->cap)
		return false;
	i = dl_u64map_slot(m, key);
	if (!m->slots[i].used)
		return false;
	if (val)
		*val = m->slots[i].val;
	return true;
}
/* Inserts or replaces. */
void dl_u64map_put(struct dl_u64map *m, uint64_t key, uint64_t val);
/* Returns true if the key was there. */
bool dl_u64map_del(struct dl_u64map *m, uint64_t key);
void dl_u64map_free(struct dl_u64map *m);
/* A well-mixed 64-bit hash of a byte string (for keys made of paths or names). */
uint64_t dl_hash_bytes(const void *p, size_t n);

static inline uint64_t dl_min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t dl_max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline int64_t dl_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t dl_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline double dl_min_dbl(double a, double b) { return a < b ? a : b; }
static inline double dl_max_dbl(double a, double b) { return a > b ? a : b; }

/* b bytes as "512 B" or "1.5 MiB": the largest binary unit under 1024 of it, one decimal. */
void dl_fmt_bytes(char *buf, size_t len, uint64_t b);

#endif
