// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <string.h>
#include "log.h"
#include "records/flight.h"
#include "records/record.h"

/*
 * Whole chunks leave the window, so a window keeps up to one chunk more than it
 * must: 1 MiB is under 2% of the smallest budget the option takes.
 */
#define CHUNK_BYTES (1u << 20)
#define MIN_BUDGET (4u * CHUNK_BYTES)

/* Naming records are few (processes, runtimes, kernel names): an eighth of the budget is ample. */
static size_t kept_share(size_t budget)
{
	return budget / 8;
}

int dl_flight_init(struct dl_flight *f, uint64_t window_ns, size_t budget_bytes)
{
	memset(f, 0, sizeof(*f));
	if (budget_bytes < MIN_BUDGET)
		budget_bytes = MIN_BUDGET;
	f->window_ns = window_ns;
	f->kept_budget = kept_share(budget_bytes);
	f->chunk_budget = (budget_bytes - f->kept_budget) / CHUNK_BYTES;
	/* Tracing starts with nothing dropped: the base of a dump whose window reaches back to the start. */
	dl_vec_push(&f->snaps);
	return 0;
}

void dl_flight_free(struct dl_flight *f)
{
	for (size_t i = 0; i < f->chunks.n; i++)
		free(f->chunks.v[i]);
	dl_vec_free(&f->chunks);
	for (size_t i = 0; i < f->kept.n; i++)
		free(f->kept.v[i].h);
	dl_vec_free(&f->kept);
	dl_vec_free(&f->snaps);
	memset(f, 0, sizeof(*f));
}

/* What a report needs to name the records of a window: kept whatever the window lets go. */
static bool names_something(const struct dl_hdr *h)
{
	switch (h->kind) {
	case DL_EV_TRACE_START:
	case DL_EV_PROCINFO:
	case DL_EV_LIB:
	case DL_EV_SYM:
	case DL_EV_SITE:
	case DL_EV_FILE_OPEN:
		return true;
	case DL_EV_PROC:
		return ((const struct dl_proc_ev *)h)->what != DL_PROC_EXIT;
	default:
		return false;
	}
}

static void keep(struct dl_flight *f, const struct dl_rec *rec)
{
	struct dl_flight_kept *k;

	if (f->kept_bytes + rec->h->size > f->kept_budget) {
		f->kept_refused++;
		return;
	}
	k = dl_vec_push(&f->kept);
	k->seq = rec->seq;
	k->h = dl_xrealloc(NULL, rec->h->size);
	memcpy(k->h, rec->h, rec->h->size);
	f->kept_bytes += rec->h->size;
}

static size_t entry_bytes(const struct dl_hdr *h)
{
	return sizeof(uint64_t) + (((size_t)h->size + 7) & ~(size_t)7);
}

/* Drops the chunks that hold only what is older than the window, or the oldest when over the budget. */
static void evict(struct dl_flight *f)
{
	size_t gone = 0;

	while (gone + 1 < f->chunks.n) {
		const struct dl_flight_chunk *c = f->chunks.v[gone];
		bool old = f->newest_ts > f->window_ns && c->newest_ts < f->newest_ts - f->window_ns;

		if (!old && f->chunks.n - gone <= f->chunk_budget)
			break;
		if (!old) {
			/* Pushed out by the budget: count what the window lost before its time. */
			for (size_t at = 0; at < c->used; at += entry_bytes((const struct dl_hdr *)(c->data + at + 8)))
				f->evicted_early++;
		}
		free(f->chunks.v[gone]);
		gone++;
	}
	dl_vec_drop_front(&f->chunks, gone);
	/* Drop counts older than the window's first record are no longer any dump's base; keep one before it. */
	if (f->chunks.n) {
		uint64_t oldest = f->chunks.v[0]->oldest_ts;
		size_t k = 0;

		while (k + 1 < f->snaps.n && f->snaps.v[k + 1].ts <= oldest)
			k++;
		dl_vec_drop_front(&f->snaps, k);
	}
}

int dl_flight_sink(void *ctx, const struct dl_rec *rec)
{
	struct dl_flight *f = ctx;
	const struct dl_hdr *h = rec->h;
	struct dl_flight_chunk *c = f->chunks.n ? f->chunks.v[f->chunks.n - 1] : NULL;
	size_t need = entry_bytes(h);

	if (names_something(h))
		keep(f, rec);
	if (!c || c->used + need > CHUNK_BYTES) {
		c = dl_xrealloc(NULL, sizeof(*c) + CHUNK_BYTES);
		c->used = 0;
		c->oldest_ts = UINT64_MAX;
		c->newest_ts = 0;
		*dl_vec_push(&f->chunks) = c;
	}
	memcpy(c->data + c->used, &rec->seq, sizeof(uint64_t));
	memcpy(c->data + c->used + sizeof(uint64_t), h, h->size);
	c->used += need;
	if (h->ts < c->oldest_ts)
		c->oldest_ts = h->ts;
	if (h->ts > c->newest_ts)
		c->newest_ts = h->ts;
	if (h->ts > f->newest_ts)
		f->newest_ts = h->ts;
	evict(f);
	return 0;
}

void dl_flight_drops(struct dl_flight *f, uint64_t now_ns, const uint64_t drops[DL_DROP_MAX])
{
	struct dl_flight_snap *s;

	if (f->snaps.n > 1 && now_ns - f->snaps.v[f->snaps.n - 1].ts < 1000000000ull)
		return;
	s = dl_vec_push(&f->snaps);
	s->ts = now_ns;
	memcpy(s->drops, drops, sizeof(s->drops));
}

void dl_flight_span(const struct dl_flight *f, uint64_t *oldest, uint64_t *newest)
{
	*oldest = *newest = 0;
	for (size_t i = 0; i < f->chunks.n; i++) {
		const struct dl_flight_chunk *c = f->chunks.v[i];

		if (!c->used)
			continue;
		if (!*oldest || c->oldest_ts < *oldest)
			*oldest = c->oldest_ts;
		if (c->newest_ts > *newest)
			*newest = c->newest_ts;
	}
}

static int put(struct dl_recorder *r, const struct dl_hdr *h, uint64_t seq, long *n)
{
	struct dl_rec rec = { .h = h, .seq = seq };

	(*n)++;
	return dl_recorder_sink(r, &rec);
}

long dl_flight_dump(const struct dl_flight *f, const char *path, int encoding, uint64_t now_ns,
		    const uint64_t drops[DL_DROP_MAX])
{
	struct dl_recorder r;
	uint64_t first_seq = UINT64_MAX, lost[DL_DROP_MAX];
	struct dl_trace_end_ev end;
	size_t k = 0;
	long n = 0;
	int err;

	err = dl_recorder_open(&r, path, (enum dl_rec_encoding)encoding);
	if (err)
		return err;
	if (f->chunks.n && f->chunks.v[0]->used)
		memcpy(&first_seq, f->chunks.v[0]->data, sizeof(first_seq));
	/* Naming records from before the window first, then the window in stream order, its own among them. */
	for (; k < f->kept.n && f->kept.v[k].seq < first_seq && !r.err; k++)
		put(&r, f->kept.v[k].h, f->kept.v[k].seq, &n);
	for (size_t i = 0; i < f->chunks.n && !r.err; i++) {
		const struct dl_flight_chunk *c = f->chunks.v[i];

		for (size_t at = 0; at < c->used && !r.err;) {
			const struct dl_hdr *h = (const struct dl_hdr *)(c->data + at + sizeof(uint64_t));
			uint64_t seq;

			memcpy(&seq, c->data + at, sizeof(seq));
			put(&r, h, seq, &n);
			at += entry_bytes(h);
		}
	}
	/* What was lost while the window filled: the counts now less those when its oldest record came. */
	for (int i = 0; i < DL_DROP_MAX; i++)
		lost[i] = drops[i] - (f->snaps.n && f->snaps.v[0].drops[i] <= drops[i] ? f->snaps.v[0].drops[i] : 0);
	memset(&end, 0, sizeof(end));
	end.h.size = sizeof(end);
	end.h.kind = DL_EV_TRACE_END;
	end.h.ts = now_ns;
	memcpy(end.drops, lost, sizeof(lost));
	put(&r, &end.h, 0, &n);
	err = dl_recorder_close(&r);
	if (err) {
		dl_err("writing the flight recording %s failed: %s", path, strerror(-err));
		return err;
	}
	return n;
}
