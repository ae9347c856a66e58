// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "output/perfetto.h"
#include "output/timeline_writer.h"
#include "util.h"

#define PF_BODY_MAX 240           /* bigger events (long kernel names) are written at once */
#define PF_INTERN_SLOTS 4096      /* per kind; past that names are written inline */
#define PF_FLUSH_BYTES (64u << 10)
#define PF_SLOTS_FIRST 64         /* the pool's first size; it doubles up to PF_HEAP_CAP */

enum pf_class { PF_C_END = 0, PF_C_BEGIN = 1, PF_C_END_EMPTY = 2 };

struct pf_ev {
	uint64_t ts, key, seq;
	uint8_t cls;
	uint16_t len;
	uint8_t body[PF_BODY_MAX];
};

struct pf_intern {
	char *s;
	uint64_t iid;
};

struct pf_out {
	struct dl_tout base;
	struct dl_pb out;              /* packets not yet handed to stdio */
	struct dl_pb body;             /* scratch: one TrackEvent */
	/*
	 * Slots are handed out in order and the pool grows as they run out: a short
	 * recording does not pay for PF_HEAP_CAP of them. A slot's number never
	 * reaches the output (events are ordered by ev_less alone).
	 */
	struct pf_ev *pool;
	uint32_t *heap, *free_slots;
	size_t nheap, nfree, nslots, slots_cap;
	uint64_t seq, last_ts, hi_ts;
	uint64_t off_boot, off_real;   /* BOOTTIME - MONOTONIC, REALTIME - MONOTONIC */
	int snapshot_done;
	struct pf_intern intern[PF_NINTERN][PF_INTERN_SLOTS];
	DL_VEC(char *) interned;       /* the tables' strings: freed without visiting 16K mostly empty slots */
	uint64_t next_iid[PF_NINTERN];
	int err;
};

/* --- packets --- */

static void seq_fields(struct dl_pb *pb, unsigned flags)
{
	dl_pb_uint(pb, PF_PKT_SEQ_ID, PF_SEQ_ID);
	dl_pb_uint(pb, PF_PKT_SEQ_FLAGS, flags);
}

static void clock(struct dl_pb *pb, unsigned id, uint64_t ts, int incremental)
{
	dl_pb_begin(pb, 1);           /* ClockSnapshot.clocks */
	dl_pb_uint(pb, 1, id);        /* Clock.clock_id */
	dl_pb_uint(pb, 2, ts);        /* Clock.timestamp */
	if (incremental)
		dl_pb_bool(pb, 3, 1); /* Clock.is_incremental */
	dl_pb_end(pb);
}

void pf_encode_clock_snapshot(struct dl_pb *pb, uint64_t mono, uint64_t boot, uint64_t real)
{
	dl_pb_begin(pb, 1);           /* Trace.packet */
	dl_pb_uint(pb, PF_PKT_SEQ_ID, PF_SEQ_ID);
	dl_pb_begin(pb, PF_PKT_CLOCK_SNAPSHOT);
	clock(pb, PF_CLOCK_MONOTONIC, mono, 0);
	clock(pb, PF_CLOCK_BOOTTIME, boot, 0);
	clock(pb, PF_CLOCK_REALTIME, real, 0);
	/* The sequence's own clock: CLOCK_MONOTONIC ns, each packet a delta from the one before. */
	clock(pb, PF_CLOCK_INCR, mono, 1);
	dl_pb_end(pb);
	dl_pb_end(pb);
}

void pf_encode_preamble(struct dl_pb *pb)
{
	dl_pb_begin(pb, 1);
	seq_fields(pb, PF_SEQ_CLEARED | PF_SEQ_NEEDS_STATE);
	dl_pb_begin(pb, PF_PKT_DEFAULTS);
	dl_pb_uint(pb, 58, PF_CLOCK_INCR);   /* TracePacketDefaults.timestamp_clock_id */
	dl_pb_end(pb);
	dl_pb_end(pb);
}

void pf_encode_interned(struct dl_pb *pb, int kind, uint64_t iid, const char *name)
{
	dl_pb_begin(pb, 1);
	seq_fields(pb, PF_SEQ_NEEDS_STATE);
	dl_pb_begin(pb, PF_PKT_INTERNED);
	dl_pb_begin(pb, (uint32_t)kind);
	dl_pb_uint(pb, 1, iid);
	dl_pb_str(pb, 2, name);
	dl_pb_end(pb);
	dl_pb_end(pb);
	dl_pb_end(pb);
}

void pf_encode_event_packet(struct dl_pb *pb, uint64_t ts, int absolute, const uint8_t *body, size_t len)
{
	dl_pb_begin(pb, 1);
	dl_pb_uint(pb, PF_PKT_TIMESTAMP, ts);
	if (absolute)
		dl_pb_uint(pb, PF_PKT_CLOCK_ID, PF_CLOCK_MONOTONIC);
	seq_fields(pb, PF_SEQ_NEEDS_STATE);
	dl_pb_bytes(pb, PF_PKT_TRACK_EVENT, body, len);
	dl_pb_end(pb);
}

/* --- output --- */

static void drain(struct pf_out *o, size_t at_least)
{
	if (o->out.err && !o->err)
		o->err = o->out.err;
	if (o->out.len < at_least || o->err)
		return;
	if (fwrite(o->out.buf, 1, o->out.len, o->base.f) != o->out.len)
		o->err = errno ? -errno : -EIO;
	dl_pb_reset(&o->out);
}

static int intern_index(int kind)
{
	return kind == PF_INTERN_STRVAL ? 3 : kind - 1;
}

static uint64_t intern(struct pf_out *o, int kind, const char *s)
{
	struct pf_intern *tab = o->intern[intern_index(kind)];
	uint64_t h = 1469598103934665603ull;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	for (size_t i = 0; i < PF_INTERN_SLOTS; i++) {
		struct pf_intern *e = &tab[(h + i) % PF_INTERN_SLOTS];

		if (e->s && !strcmp(e->s, s))
			return e->iid;
		if (e->s)
			continue;
		if (i > PF_INTERN_SLOTS / 2)
			return 0;     /* table crowded: the caller writes the string inline */
		e->s = dl_xstrdup(s);
		*dl_vec_push(&o->interned) = e->s;
		e->iid = ++o->next_iid[intern_index(kind)];
		/* Interned data goes out at once: before, in file order, any packet using it. */
		pf_encode_interned(&o->out, kind, e->iid, s);
		return e->iid;
	}
	return 0;
}

static int ev_less(const struct pf_ev *a, const struct pf_ev *b)
{
	if (a->ts != b->ts)
		return a->ts < b->ts;
	if (a->cls != b->cls)
		return a->cls < b->cls;
	if (a->key != b->key)
		return a->key < b->key;
	return a->seq < b->seq;
}

static void heap_swap(struct pf_out *o, size_t i, size_t j)
{
	uint32_t x = o->heap[i];

	o->heap[i] = o->heap[j];
	o->heap[j] = x;
}

/*
 * The clock snapshot goes out with the first event, at that event's time (the
 * clocks' offsets measured at start-up), so that the deltas start small and
 * a replayed recording's past timestamps are not all "late".
 */
static void snapshot(struct pf_out *o, uint64_t base)
{
	if (o->snapshot_done)
		return;
	pf_encode_clock_snapshot(&o->out, base, base + o->off_boot, base + o->off_real);
	o->last_ts = base;
	o->snapshot_done = 1;
}

static void write_event(struct pf_out *o, uint64_t ts, int absolute, const uint8_t *body, size_t len)
{
	snapshot(o, absolute && ts > PF_WINDOW_NS ? ts - PF_WINDOW_NS : ts);
	if (absolute || ts < o->last_ts) {
		absolute = 1;
		o->base.late++;
	} else {
		uint64_t d = ts - o->last_ts;

		o->last_ts = ts;
		ts = d;
	}
	pf_encode_event_packet(&o->out, ts, absolute, body, len);
	o->base.events++;
	drain(o, PF_FLUSH_BYTES);
}

static void pop(struct pf_out *o)
{
	uint32_t top = o->heap[0];
	struct pf_ev *e = &o->pool[top];
	size_t i = 0;

	write_event(o, e->ts, 0, e->body, e->len);
	o->free_slots[o->nfree++] = top;
	o->heap[0] = o->heap[--o->nheap];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < o->nheap && ev_less(&o->pool[o->heap[l]], &o->pool[o->heap[m]]))
			m = l;
		if (r < o->nheap && ev_less(&o->pool[o->heap[r]], &o->pool[o->heap[m]]))
			m = r;
		if (m == i)
			break;
		heap_swap(o, i, m);
		i = m;
	}
}

static void grow_slots(struct pf_out *o)
{
	size_t cap = o->slots_cap ? 2 * o->slots_cap : PF_SLOTS_FIRST;

	if (cap > PF_HEAP_CAP)
		cap = PF_HEAP_CAP;
	o->pool = dl_xrealloc(o->pool, cap * sizeof(*o->pool));
	o->heap = dl_xrealloc(o->heap, cap * sizeof(*o->heap));
	o->free_slots = dl_xrealloc(o->free_slots, cap * sizeof(*o->free_slots));
	o->slots_cap = cap;
}

/* A slot for one more event: a freed one, a new one, or, with PF_HEAP_CAP held, the earliest's. */
static uint32_t take_slot(struct pf_out *o)
{
	if (!o->nfree && o->nslots == PF_HEAP_CAP)
		pop(o);
	if (o->nfree)
		return o->free_slots[--o->nfree];
	if (o->nslots == o->slots_cap)
		grow_slots(o);
	return (uint32_t)o->nslots++;
}

/* Queues the TrackEvent in o->body for time ts; writes whatever the window lets go. */
static void queue(struct pf_out *o, uint64_t ts, enum pf_class cls, uint64_t key)
{
	const struct dl_pb *b = &o->body;
	struct pf_ev *e;
	size_t i;

	if (b->err) {
		o->err = o->err ? o->err : b->err;
		return;
	}
	if ((o->snapshot_done && ts < o->last_ts) || b->len > PF_BODY_MAX) {
		write_event(o, ts, 1, b->buf, b->len);
		return;
	}
	i = take_slot(o);
	e = &o->pool[i];
	e->ts = ts;
	e->cls = (uint8_t)cls;
	e->key = key;
	e->seq = o->seq++;
	e->len = (uint16_t)b->len;
	memcpy(e->body, b->buf, b->len);
	o->heap[o->nheap] = (uint32_t)i;
	for (size_t k = o->nheap++; k > 0 && ev_less(&o->pool[o->heap[k]], &o->pool[o->heap[(k - 1) / 2]]); k = (k - 1) / 2)
		heap_swap(o, k, (k - 1) / 2);
	if (ts > o->hi_ts)
		o->hi_ts = ts;
	while (o->nheap && o->pool[o->heap[0]].ts + PF_WINDOW_NS <= o->hi_ts)
		pop(o);
}

/* --- timeline_writer --- */

static struct pf_out *pf(struct dl_tout *base)
{
	return (struct pf_out *)base;
}

static void pf_track(struct dl_tout *base, const struct dl_ttrack *t)
{
	struct pf_out *o = pf(base);
	struct dl_pb *pb = &o->out;

	dl_pb_begin(pb, 1);
	seq_fields(pb, PF_SEQ_NEEDS_STATE);
	dl_pb_begin(pb, PF_PKT_TRACK_DESC);
	dl_pb_uint(pb, 1, t->uuid);
	if (t->parent)
		dl_pb_uint(pb, 5, t->parent);
	dl_pb_str(pb, 2, t->name);
	if (t->kind == DL_TT_PROCESS) {
		dl_pb_begin(pb, 3);
		dl_pb_uint(pb, 1, (uint64_t)t->pid);
		dl_pb_str(pb, 6, t->name);
		dl_pb_end(pb);
	} else if (t->kind == DL_TT_THREAD) {
		dl_pb_begin(pb, 4);
		dl_pb_uint(pb, 1, (uint64_t)t->pid);
		dl_pb_uint(pb, 2, (uint64_t)t->tid);
		dl_pb_str(pb, 5, t->name);
		dl_pb_end(pb);
	} else if (t->kind == DL_TT_COUNTER) {
		dl_pb_begin(pb, 8);
		dl_pb_end(pb);
	}
	dl_pb_end(pb);
	dl_pb_end(pb);
	drain(o, PF_FLUSH_BYTES);
}

static void name_fields(struct pf_out *o, const char *cat, const char *name)
{
	uint64_t iid;

	if (cat && (iid = intern(o, PF_INTERN_CAT, cat)))
		dl_pb_uint(&o->body, PF_TE_CATEGORY_IIDS, iid);
	if ((iid = intern(o, PF_INTERN_NAME, name)))
		dl_pb_uint(&o->body, PF_TE_NAME_IID, iid);
	else
		dl_pb_str(&o->body, PF_TE_NAME, name);
}

static void annotation(struct pf_out *o, const struct dl_targ *a)
{
	struct dl_pb *b = &o->body;
	uint64_t iid = intern(o, PF_INTERN_ANNOT, a->name);

	dl_pb_begin(b, PF_TE_DEBUG);
	if (iid)
		dl_pb_uint(b, 1, iid);      /* DebugAnnotation.name_iid */
	else
		dl_pb_str(b, 10, a->name);  /* DebugAnnotation.name */
	switch (a->type) {
	case DL_TA_U64: dl_pb_uint(b, 3, a->u); break;
	case DL_TA_I64: dl_pb_int(b, 4, a->i); break;
	case DL_TA_DBL: dl_pb_double(b, 5, a->d); break;
	case DL_TA_BOOL: dl_pb_bool(b, 2, a->u != 0); break;   /* DebugAnnotation.bool_value */
	case DL_TA_STR:
		/* Values repeat (kernel names, directions, dims): interned, inline past the table's size. */
		iid = intern(o, PF_INTERN_STRVAL, a->s ? a->s : "");
		if (iid)
			dl_pb_uint(b, PF_DA_STRING_IID, iid);
		else
			dl_pb_str(b, 6, a->s ? a->s : "");
		break;
	}
	dl_pb_end(b);
}

static void pf_slice(struct dl_tout *base, const struct dl_tslice *s)
{
	struct pf_out *o = pf(base);
	struct dl_pb *b = &o->body;

	dl_pb_reset(b);
	dl_pb_uint(b, PF_TE_TYPE, PF_TYPE_BEGIN);
	dl_pb_uint(b, PF_TE_TRACK, s->track->uuid);
	name_fields(o, s->cat, s->name);
	for (int i = 0; i < s->nargs; i++)
		annotation(o, &s->args[i]);
	if (s->flow_out)
		dl_pb_fixed64(b, PF_TE_FLOW, s->flow_out);
	if (s->flow_end)
		dl_pb_fixed64(b, PF_TE_FLOW_END, s->flow_end);
	/* At one instant: ends before begins; outer slices begin first and end last. */
	queue(o, s->ts, PF_C_BEGIN, UINT64_MAX - s->dur);
	dl_pb_reset(b);
	dl_pb_uint(b, PF_TE_TYPE, PF_TYPE_END);
	dl_pb_uint(b, PF_TE_TRACK, s->track->uuid);
	queue(o, s->ts + s->dur, s->dur ? PF_C_END : PF_C_END_EMPTY, UINT64_MAX - s->ts);
}

static void pf_flow_mark(struct dl_tout *base, const struct dl_ttrack *t, uint64_t ts, const char *name,
			 uint64_t flow, int terminate)
{
	struct pf_out *o = pf(base);
	struct dl_pb *b = &o->body;

	dl_pb_reset(b);
	dl_pb_uint(b, PF_TE_TYPE, PF_TYPE_INSTANT);
	dl_pb_uint(b, PF_TE_TRACK, t->uuid);
	name_fields(o, "flow", name);
	dl_pb_fixed64(b, terminate ? PF_TE_FLOW_END : PF_TE_FLOW, flow);
	queue(o, ts, PF_C_BEGIN, 0);
}

static void pf_counter(struct dl_tout *base, const struct dl_ttrack *t, uint64_t ts, double v)
{
	struct pf_out *o = pf(base);
	struct dl_pb *b = &o->body;

	dl_pb_reset(b);
	dl_pb_uint(b, PF_TE_TYPE, PF_TYPE_COUNTER);
	dl_pb_uint(b, PF_TE_TRACK, t->uuid);
	dl_pb_double(b, PF_TE_DOUBLE_COUNTER, v);
	queue(o, ts, PF_C_BEGIN, 0);
}

static void pf_clocks(struct dl_tout *base, uint64_t mono, uint64_t boot, uint64_t real)
{
	struct pf_out *o = pf(base);

	if (o->snapshot_done)
		return;   /* too late: the snapshot is out */
	o->off_boot = boot - mono;
	o->off_real = real - mono;
}

static int pf_finish(struct dl_tout *base)
{
	struct pf_out *o = pf(base);

	while (o->nheap && !o->err)
		pop(o);
	drain(o, 0);
	if (!o->err && fflush(o->base.f))
		o->err = errno ? -errno : -EIO;
	if (!o->err && ferror(o->base.f))
		o->err = -EIO;
	return o->err;
}

static void pf_destroy(struct dl_tout *base)
{
	struct pf_out *o = pf(base);

	for (size_t i = 0; i < o->interned.n; i++)
		free(o->interned.v[i]);
	dl_vec_free(&o->interned);
	dl_pb_free(&o->out);
	dl_pb_free(&o->body);
	free(o->pool);
	free(o->heap);
	free(o->free_slots);
	free(o);
}

struct dl_tout *dl_perfetto_out(FILE *f, uint64_t mono, uint64_t boot, uint64_t real)
{
	struct pf_out *o = dl_xcalloc(1, sizeof(*o));

	o->base = (struct dl_tout){ .track = pf_track, .slice = pf_slice, .flow_mark = pf_flow_mark,
				    .counter = pf_counter, .clocks = pf_clocks, .finish = pf_finish, .destroy = pf_destroy, .f = f };
	dl_pb_init(&o->out);
	dl_pb_init(&o->body);
	o->off_boot = boot - mono;
	o->off_real = real - mono;
	pf_encode_preamble(&o->out);
	return &o->base;
}
