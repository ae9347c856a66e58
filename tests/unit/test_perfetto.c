// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The protobuf encoder byte for byte, the Perfetto writer's packets, and the
 * whole trace sink on a synthetic stream with synthetic steps, decoded here by
 * a small protobuf reader: timestamps, nesting, flows, counts; the JSON writer;
 * write errors.
 */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "records.h"
#include "records/cuda_api.h"
#include "output/pbwriter.h"
#include "output/perfetto.h"
#include "records/stream.h"
#include "analysis/summary.h"
#include "output/timeline.h"
#include "output/timeline_writer.h"

#define BYTES(pb, ...)                                                                \
	do {                                                                          \
		static const uint8_t want_[] = { __VA_ARGS__ };                       \
		CHECK((pb)->len == sizeof(want_) && !memcmp((pb)->buf, want_, sizeof(want_)), \
		      "encoded %zu bytes, want %zu (first %02x)", (pb)->len, sizeof(want_), \
		      (pb)->len ? (pb)->buf[0] : 0);                                  \
	} while (0)

static void test_varints(void)
{
	struct dl_pb pb;

	dl_pb_init(&pb);
	dl_pb_varint(&pb, 0);
	dl_pb_varint(&pb, 1);
	dl_pb_varint(&pb, 127);
	dl_pb_varint(&pb, 128);
	dl_pb_varint(&pb, 300);
	BYTES(&pb, 0x00, 0x01, 0x7f, 0x80, 0x01, 0xac, 0x02);
	dl_pb_reset(&pb);
	dl_pb_varint(&pb, UINT64_MAX);
	BYTES(&pb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	CHECK_EQ_U64(dl_pb_zigzag(0), 0);
	CHECK_EQ_U64(dl_pb_zigzag(-1), 1);
	CHECK_EQ_U64(dl_pb_zigzag(1), 2);
	CHECK_EQ_U64(dl_pb_zigzag(INT64_MIN), UINT64_MAX);
	dl_pb_reset(&pb);
	dl_pb_int(&pb, 4, -1);   /* int64 -1: ten bytes */
	BYTES(&pb, 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	dl_pb_reset(&pb);
	dl_pb_sint(&pb, 1, -2);
	dl_pb_fixed64(&pb, 47, 0x0102030405060708ull);
	BYTES(&pb, 0x08, 0x03, 0xf9, 0x02, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01);
	dl_pb_reset(&pb);
	dl_pb_double(&pb, 5, 1.0);
	BYTES(&pb, 0x29, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f);
	dl_pb_reset(&pb);
	dl_pb_str(&pb, 2, "ab");
	dl_pb_bool(&pb, 3, 7);
	BYTES(&pb, 0x12, 0x02, 'a', 'b', 0x18, 0x01);
	dl_pb_free(&pb);
}

static void test_nested(void)
{
	struct dl_pb pb;
	char big[5000];

	dl_pb_init(&pb);
	/* small nested messages end up with minimal lengths */
	dl_pb_begin(&pb, 1);
	dl_pb_uint(&pb, 1, 150);
	dl_pb_begin(&pb, 11);
	dl_pb_uint(&pb, 9, 2);
	dl_pb_end(&pb);
	dl_pb_end(&pb);
	BYTES(&pb, 0x0a, 0x07, 0x08, 0x96, 0x01, 0x5a, 0x02, 0x48, 0x02);
	CHECK(pb.depth == 0 && pb.err == 0, "depth %d err %d", pb.depth, pb.err);
	/* a big one keeps its reserved, padded 4-byte length: 5000 + 3 bytes = 0x138b */
	dl_pb_reset(&pb);
	memset(big, 'x', sizeof(big));
	dl_pb_begin(&pb, 1);
	dl_pb_bytes(&pb, 2, big, sizeof(big));
	dl_pb_end(&pb);
	CHECK_EQ_U64(pb.len, 1 + 4 + 3 + sizeof(big));
	CHECK(pb.buf[0] == 0x0a && pb.buf[1] == (0x8b | 0x80) && pb.buf[2] == (0x27 | 0x80) && pb.buf[3] == 0x80 &&
	      pb.buf[4] == 0x00, "padded length %02x %02x %02x %02x", pb.buf[1], pb.buf[2], pb.buf[3], pb.buf[4]);
	CHECK(pb.buf[5] == 0x12 && pb.buf[6] == 0x88 && pb.buf[7] == 0x27, "inner length");
	/* too deep: an error, not a crash */
	dl_pb_reset(&pb);
	for (int i = 0; i < DL_PB_MAX_DEPTH + 1; i++)
		dl_pb_begin(&pb, 1);
	CHECK(pb.err != 0, "nesting past the limit not reported");
	dl_pb_free(&pb);
}

static void test_packets(void)
{
	struct dl_pb pb;
	static const uint8_t body[] = { 0x48, 0x02, 0x58, 0x03 };

	dl_pb_init(&pb);
	pf_encode_interned(&pb, PF_INTERN_NAME, 5, "cudaMemcpy");
	/* packet { seq 1, flags 2, interned_data { event_names { iid 5, name } } } */
	BYTES(&pb, 0x0a, 0x16, 0x50, 0x01, 0x68, 0x02, 0x62, 0x10, 0x12, 0x0e, 0x08, 0x05, 0x12, 0x0a,
	      'c', 'u', 'd', 'a', 'M', 'e', 'm', 'c', 'p', 'y');
	dl_pb_reset(&pb);
	pf_encode_event_packet(&pb, 1000, 0, body, sizeof(body));
	BYTES(&pb, 0x0a, 0x0d, 0x40, 0xe8, 0x07, 0x50, 0x01, 0x68, 0x02, 0x5a, 0x04, 0x48, 0x02, 0x58, 0x03);
	dl_pb_reset(&pb);
	pf_encode_event_packet(&pb, 5, 1, body, sizeof(body));
	/* absolute: clock 3 (MONOTONIC) in field 58 = 0x3a8 → d0 03 */
	BYTES(&pb, 0x0a, 0x0f, 0x40, 0x05, 0xd0, 0x03, 0x03, 0x50, 0x01, 0x68, 0x02, 0x5a, 0x04, 0x48, 0x02, 0x58, 0x03);
	dl_pb_reset(&pb);
	pf_encode_preamble(&pb);
	BYTES(&pb, 0x0a, 0x0a, 0x50, 0x01, 0x68, 0x03, 0xda, 0x03, 0x03, 0xd0, 0x03, 0x40);
	dl_pb_reset(&pb);
	pf_encode_clock_snapshot(&pb, 10, 20, 30);
	BYTES(&pb, 0x0a, 0x1e, 0x50, 0x01, 0x32, 0x1a,
	      0x0a, 0x04, 0x08, 0x03, 0x10, 0x0a, 0x0a, 0x04, 0x08, 0x06, 0x10, 0x14,
	      0x0a, 0x04, 0x08, 0x01, 0x10, 0x1e, 0x0a, 0x06, 0x08, 0x40, 0x10, 0x0a, 0x18, 0x01);
	dl_pb_free(&pb);
}

/* --- a small reader for what the writer produced --- */

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t rd_varint(struct rd *r)
{
	uint64_t v = 0;

	for (int s = 0; s < 64 && r->p < r->end; s += 7) {
		uint8_t b = *r->p++;

		v |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			return v;
	}
	r->bad = 1;
	return 0;
}

/* Next field: number, wire type, value (varint/fixed64) or sub-reader (length-delimited). */
static int rd_next(struct rd *r, uint32_t *field, uint64_t *v, struct rd *sub)
{
	uint64_t tag;

	if (r->p >= r->end || r->bad)
		return 0;
	tag = rd_varint(r);
	*field = (uint32_t)(tag >> 3);
	switch (tag & 7) {
	case 0:
		*v = rd_varint(r);
		break;
	case 1:
		if (r->end - r->p < 8) {
			r->bad = 1;
			return 0;
		}
		*v = 0;
		for (int i = 0; i < 8; i++)
			*v |= (uint64_t)r->p[i] << (8 * i);
		r->p += 8;
		break;
	case 2: {
		uint64_t n = rd_varint(r);

		if ((uint64_t)(r->end - r->p) < n) {
			r->bad = 1;
			return 0;
		}
		sub->p = r->p;
		sub->end = r->p + n;
		sub->bad = 0;
		r->p += n;
		break;
	}
	default:
		r->bad = 1;
		return 0;
	}
	return !r->bad;
}

#define MAX_EVS 4096

struct ev {
	uint64_t ts, track, name_iid, flow, flow_end, pos;
	int type, nargs;
};

struct decoded {
	struct ev ev[MAX_EVS];
	int n, tracks, named_tracks, interned, absolute, bad;
	uint64_t incr_base, snap_mono, snap_boot, snap_real;
	int have_snapshot, cleared_first;
	char names[64][32];   /* event names by iid */
};

static void decode_event(struct rd *te, struct ev *e)
{
	struct rd sub;
	uint32_t f;
	uint64_t v;

	while (rd_next(te, &f, &v, &sub)) {
		if (f == PF_TE_TYPE)
			e->type = (int)v;
		else if (f == PF_TE_TRACK)
			e->track = v;
		else if (f == PF_TE_NAME_IID)
			e->name_iid = v;
		else if (f == PF_TE_FLOW)
			e->flow = v;
		else if (f == PF_TE_FLOW_END)
			e->flow_end = v;
		else if (f == PF_TE_DEBUG)
			e->nargs++;
	}
}

static void decode(const uint8_t *buf, size_t len, struct decoded *d)
{
	struct rd top = { buf, buf + len, 0 }, pkt, sub, sub2, sub3;
	uint64_t cur = 0, v;
	uint32_t f;
	int first = 1;

	memset(d, 0, sizeof(*d));
	while (rd_next(&top, &f, &v, &pkt)) {
		uint64_t ts = 0, clock = 0;
		int has_ts = 0, te = 0;
		struct ev e = { 0 };

		if (f != 1) {
			d->bad++;
			continue;
		}
		while (rd_next(&pkt, &f, &v, &sub)) {
			if (f == PF_PKT_TIMESTAMP) {
				ts = v;
				has_ts = 1;
			} else if (f == PF_PKT_CLOCK_ID) {
				clock = v;
			} else if (f == PF_PKT_SEQ_FLAGS && first) {
				d->cleared_first = (v & PF_SEQ_CLEARED) != 0;
			} else if (f == PF_PKT_CLOCK_SNAPSHOT) {
				while (rd_next(&sub, &f, &v, &sub2)) {
					uint64_t id = 0, cts = 0;

					while (rd_next(&sub2, &f, &v, &sub3))
						if (f == 1)
							id = v;
						else if (f == 2)
							cts = v;
					if (id == PF_CLOCK_MONOTONIC)
						d->snap_mono = cts;
					else if (id == PF_CLOCK_BOOTTIME)
						d->snap_boot = cts;
					else if (id == PF_CLOCK_REALTIME)
						d->snap_real = cts;
					if (id == PF_CLOCK_INCR) {
						cur = d->incr_base = cts;
						d->have_snapshot = 1;
					}
				}
			} else if (f == PF_PKT_TRACK_DESC) {
				d->tracks++;
				while (rd_next(&sub, &f, &v, &sub2))
					if (f == 2 && sub2.end > sub2.p)
						d->named_tracks++;
			} else if (f == PF_PKT_INTERNED) {
				while (rd_next(&sub, &f, &v, &sub2)) {
					uint64_t iid = 0;
					const uint8_t *s = NULL;
					size_t n = 0;
					uint32_t kind = f;

					while (rd_next(&sub2, &f, &v, &sub3)) {
						if (f == 1)
							iid = v;
						if (f == 2) {
							s = sub3.p;
							n = (size_t)(sub3.end - sub3.p);
						}
					}
					d->interned++;
					if (kind == PF_INTERN_NAME && iid < 64 && s && n < 32)
						memcpy(d->names[iid], s, n);
				}
			} else if (f == PF_PKT_TRACK_EVENT) {
				decode_event(&sub, &e);
				te = 1;
			}
		}
		first = 0;
		if (pkt.bad || !te)
			continue;
		if (!has_ts)
			d->bad++;
		if (clock == PF_CLOCK_MONOTONIC) {
			e.ts = ts;
			d->absolute++;
		} else {
			if (!d->have_snapshot)
				d->bad++;
			cur += ts;
			e.ts = cur;
		}
		if (d->n < MAX_EVS) {
			e.pos = (uint64_t)d->n;
			d->ev[d->n++] = e;
		}
	}
	if (top.bad)
		d->bad++;
}

static int ev_cmp(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->pos < y->pos ? -1 : 1;
}

/* --- the sink on a synthetic stream --- */

#define T0 5000000000ull
#define PID 100
#define TID 101
#define WORKER 200

/* The summary (when given) and the trace are fed through one stream, which decodes each record for both. */
static struct dl_stream feed_stream;
/* Records fed since feed_start, and how many of them a sink refused (checked once, by the caller). */
static unsigned fed, refused;

/* A slice as the test made it: where it starts and how long it lasts. */
struct slice {
	uint64_t ts, dur;
};

/* The slices the records fed since feed_start describe, in the order they were fed. */
static struct slice want[MAX_EVS];
static int nwant;

static void want_slice(uint64_t ts, uint64_t dur)
{
	if (nwant < MAX_EVS)
		want[nwant++] = (struct slice){ ts, dur };
}

static void feed_start(struct dl_summary *sum, struct dl_timeline *t)
{
	memset(&feed_stream, 0, sizeof(feed_stream));
	fed = refused = 0;
	nwant = 0;
	if (sum)
		dl_stream_add(&feed_stream, dl_summary_sink, sum);
	dl_stream_add(&feed_stream, dl_timeline_sink, t);
}

static void feed(struct dl_summary *sum, struct dl_timeline *t, const void *rec, size_t len)
{
	(void)sum;
	(void)t;
	feed_stream.err = 0;
	dl_stream_emit(&feed_stream, rec, len);
	fed++;
	refused += feed_stream.err != 0;
}

static int slice_cmp(const void *a, const void *b)
{
	const struct slice *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->dur < y->dur ? -1 : x->dur > y->dur;
}

/* got (n of them) equals want[0..nwant) as sets of (start, duration): one check, naming the first difference. */
static void check_slices(struct slice *got, int n, const char *what)
{
	static struct slice w[MAX_EVS];
	int i = 0;

	memcpy(w, want, sizeof(w[0]) * (size_t)nwant);
	qsort(w, (size_t)nwant, sizeof(w[0]), slice_cmp);
	qsort(got, (size_t)n, sizeof(got[0]), slice_cmp);
	while (i < n && i < nwant && !slice_cmp(&got[i], &w[i]))
		i++;
	CHECK(n == nwant && i == n, "%s: %d slices, want %d; first difference at %d: %llu+%llu, want %llu+%llu", what,
	      n, nwant, i, i < n ? (unsigned long long)got[i].ts : 0, i < n ? (unsigned long long)got[i].dur : 0,
	      i < nwant ? (unsigned long long)w[i].ts : 0, i < nwant ? (unsigned long long)w[i].dur : 0);
}

static void procinfo(struct dl_summary *sum, struct dl_timeline *t, uint32_t pid, const char *comm)
{
	struct dl_procinfo_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_PROCINFO, .ts = T0, .tgid = pid, .tid = pid };
	strcpy(e.comm, comm);
	feed(sum, t, &e, sizeof(e));
}

static void sched(struct dl_summary *sum, struct dl_timeline *t, uint32_t pid, uint32_t tid, uint64_t ts,
		  uint64_t dur, uint32_t state)
{
	struct dl_sched_ev e = test_sched(pid, tid, ts, dur, state, 0);

	feed(sum, t, &e, sizeof(e));
	want_slice(ts, dur);
}

static void cuda(struct dl_summary *sum, struct dl_timeline *t, enum dl_api_id api, uint64_t ts, uint64_t dur,
		 uint32_t depth, uint64_t bytes)
{
	struct dl_cuda_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_CUDA, .ts = ts, .tgid = PID, .tid = TID };
	e.api = api;
	e.dur_ns = dur;
	e.depth = depth;
	e.arg[0] = 0x7000;
	e.arg[1] = 0x9000;
	e.arg[2] = bytes;
	e.arg[3] = DL_DIR_H2D;
	feed(sum, t, &e, sizeof(e));
	want_slice(ts, dur);
}

static void bio(struct dl_summary *sum, struct dl_timeline *t, uint64_t ts, uint64_t dur)
{
	struct dl_bio_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_BIO, .ts = ts, .tgid = WORKER, .tid = WORKER };
	e.dur_ns = dur;
	e.bytes = 1 << 20;
	e.dev = 8 << 20;
	feed(sum, t, &e, sizeof(e));
	want_slice(ts, dur);
}

#define NSTEPS 20
#define STEP_NS 10000000ull

/* One step: records in the order they complete (end time), as the collector delivers them. */
static void one_step(struct dl_summary *sum, struct dl_timeline *t, unsigned i)
{
	uint64_t s = T0 + i * STEP_NS;
	struct dl_step st;

	/* two overlapping reads by the worker: they need two lanes */
	bio(sum, t, s + 100000, 3000000);
	bio(sum, t, s + 50000, 4000000);
	/* main thread: running, sleeping, running; abutting intervals */
	sched(sum, t, PID, TID, s, 2000000, DL_ST_RUNNING);
	cuda(sum, t, DL_API_MEMCPY, s + 2100000, 400000, 0, 4 << 20);         /* h2d copy */
	sched(sum, t, PID, TID, s + 2000000, 1000000, DL_ST_RUNQ);
	cuda(sum, t, DL_API_MEMCPY_ASYNC, s + 3200000, 100000, 1, 4096);     /* nested in the sync */
	cuda(sum, t, DL_API_DEVICE_SYNC, s + 3000000, 6000000, 0, 0);
	sched(sum, t, PID, TID, s + 3000000, 6000000, DL_ST_SLEEP);
	sched(sum, t, PID, TID, s + 9000000, 1000000, DL_ST_RUNNING);
	sched(sum, t, WORKER, WORKER, s, STEP_NS, DL_ST_DISK);
	memset(&st, 0, sizeof(st));
	st.index = i;
	st.pid = PID;
	st.tid = TID;
	st.start_ns = s;
	st.dur_ns = STEP_NS;
	st.cat_ns[DL_CAT_GPU_WAIT] = 6000000;
	st.cat_ns[DL_CAT_H2D] = 400000;
	st.cat_ns[DL_CAT_CPU] = STEP_NS - 6400000;
	st.verdict = DL_V_GPU;
	st.share = 0.6;
	st.h2d_bytes = 4 << 20;
	dl_timeline_step(t, &st);
	want_slice(st.start_ns, st.dur_ns);
}

static int set_clocks;

static size_t run_synthetic(enum dl_timeline_format fmt, char **buf, struct dl_timeline_stats *stats)
{
	struct dl_summary sum;
	struct dl_timeline *t;
	size_t len = 0;
	FILE *f = open_memstream(buf, &len);
	int err;

	dl_summary_init(&sum);
	t = dl_timeline_new(f, fmt);
	CHECK(t != NULL, "no trace");
	feed_start(&sum, t);
	if (set_clocks)
		dl_timeline_set_clocks(t, 1000, 0, 1000 + 1700000000000000000ull);
	procinfo(&sum, t, PID, "train");
	procinfo(&sum, t, WORKER, "loader");
	for (unsigned i = 0; i < NSTEPS; i++)
		one_step(&sum, t, i);
	err = dl_timeline_finish(t, stats);
	CHECK(err == 0 && refused == 0, "finish: %d, %u of %u records refused", err, refused, fed);
	/* Every record reached the trace: 2 process records, then 10 a step (one_step). */
	CHECK(stats->records == fed && fed == 2 + NSTEPS * 10, "trace saw %llu records of %u fed",
	      (unsigned long long)stats->records, fed);
	fclose(f);
	dl_summary_free(&sum);
	dl_stream_free(&feed_stream);
	return len;
}

/*
 * The decoded events (sorted by time) paired into slices, track by track: an end closes the
 * innermost open begin of its track. Counts what does not pair (an end with nothing open, a
 * begin left open, a track out of range) in *unpaired, and the deepest nesting in *maxdepth.
 */
static int pair_slices(const struct decoded *d, struct slice *out, int *unpaired, int *maxdepth)
{
	enum { TRACKS = 64, DEPTH = 8 };
	static uint64_t open_ts[TRACKS][DEPTH];
	int depth[TRACKS] = { 0 }, n = 0;

	*unpaired = *maxdepth = 0;
	for (int i = 0; i < d->n; i++) {
		const struct ev *e = &d->ev[i];
		int *dp = e->track < TRACKS ? &depth[e->track] : NULL;

		if (e->type != PF_TYPE_BEGIN && e->type != PF_TYPE_END)
			continue;
		if (!dp || (e->type == PF_TYPE_BEGIN && *dp == DEPTH) || (e->type == PF_TYPE_END && *dp == 0)) {
			(*unpaired)++;
			continue;
		}
		if (e->type == PF_TYPE_BEGIN) {
			open_ts[e->track][(*dp)++] = e->ts;
			if (*dp > *maxdepth)
				*maxdepth = *dp;
		} else {
			uint64_t ts = open_ts[e->track][--(*dp)];

			out[n++] = (struct slice){ ts, e->ts - ts };
		}
	}
	for (int k = 0; k < TRACKS; k++)
		*unpaired += depth[k];
	return n;
}

static void test_sink_pftrace(void)
{
	static struct decoded d;
	static struct slice got[MAX_EVS];
	struct dl_timeline_stats st;
	char *buf = NULL;
	size_t len = run_synthetic(DL_TIMELINE_PFTRACE, &buf, &st);
	int named_step = 0, flows = 0, counters = 0, nslices, unpaired, maxd;
	uint64_t first_ts = UINT64_MAX;

	decode((const uint8_t *)buf, len, &d);
	CHECK(d.bad == 0, "%d malformed packets", d.bad);
	CHECK(d.cleared_first, "first packet does not clear the sequence's state");
	CHECK(d.have_snapshot, "no clock snapshot with the incremental clock");
	CHECK(d.tracks > 0 && d.tracks == d.named_tracks, "%d tracks, %d named", d.tracks, d.named_tracks);
	CHECK_EQ_U64(d.n, st.events);
	CHECK(d.absolute == 0, "%d events out of order in a stream that fits the window", d.absolute);
	qsort(d.ev, (size_t)d.n, sizeof(d.ev[0]), ev_cmp);
	for (int i = 0; i < d.n; i++) {
		const struct ev *e = &d.ev[i];

		if (e->ts < first_ts)
			first_ts = e->ts;
		if (e->type == PF_TYPE_BEGIN && e->name_iid < 64 && !strcmp(d.names[e->name_iid], "gpu-bound"))
			named_step++;
		counters += e->type == PF_TYPE_COUNTER;
		flows += (e->flow != 0) + (e->flow_end != 0);
	}
	/* slices: per step 2 bio + 4 sched main + 1 sched worker + 3 cuda + 1 step, each as long as
	 * its record or step said */
	nslices = pair_slices(&d, got, &unpaired, &maxd);
	CHECK(unpaired == 0, "%d begin/end events do not pair", unpaired);
	CHECK_EQ_U64(nwant, NSTEPS * 11);
	check_slices(got, nslices, "pftrace");
	CHECK_EQ_U64(st.slices, NSTEPS * 11);
	CHECK_EQ_U64(named_step, NSTEPS);
	/* each step: flow out of the step slice, through the copy, ends in the sync */
	CHECK_EQ_U64(flows, NSTEPS * 3);
	CHECK_EQ_U64(st.flows, NSTEPS);
	CHECK(counters > 0 && (uint64_t)counters == st.counters, "%d counter events, stats %llu", counters,
	      (unsigned long long)st.counters);
	CHECK_EQ_U64(first_ts, T0);   /* the incremental clock adds up to the records' own times */
	/* the only nesting: the async copy inside the sync on the main thread */
	CHECK_EQ_U64(maxd, 2);
	/* the snapshot, at the first event: the incremental clock is CLOCK_MONOTONIC itself */
	CHECK(d.snap_mono == d.incr_base && d.snap_boot != 0 && d.snap_real > d.snap_mono,
	      "snapshot mono %llu boot %llu real %llu incr %llu", (unsigned long long)d.snap_mono,
	      (unsigned long long)d.snap_boot, (unsigned long long)d.snap_real, (unsigned long long)d.incr_base);
	free(buf);
	/* a replay's clocks: boot unknown → same as mono; realtime offset as given */
	set_clocks = 1;
	len = run_synthetic(DL_TIMELINE_PFTRACE, &buf, &st);
	set_clocks = 0;
	decode((const uint8_t *)buf, len, &d);
	CHECK(d.snap_boot == d.snap_mono && d.snap_real - d.snap_mono == 1700000000000000000ull,
	      "replay clocks: mono %llu boot %llu real %llu", (unsigned long long)d.snap_mono,
	      (unsigned long long)d.snap_boot, (unsigned long long)d.snap_real);
	printf("synthetic pftrace: %zu bytes, %llu events, %.1f B/event\n", len, (unsigned long long)st.events,
	       (double)len / (double)st.events);
	free(buf);
}

/* A JSON time in microseconds with three decimals ("5000000.123") back to nanoseconds, exactly. */
static uint64_t json_us_to_ns(const char *p)
{
	uint64_t us = 0, frac = 0;
	int digits = 0;

	while (*p >= '0' && *p <= '9')
		us = us * 10 + (uint64_t)(*p++ - '0');
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9' && digits < 3; p++, digits++)
			frac = frac * 10 + (uint64_t)(*p - '0');
	for (; digits < 3; digits++)
		frac *= 10;
	return us * 1000 + frac;
}

/* The complete ("X") events of a Chrome JSON trace as slices; -1 for one without ts or dur. */
static int json_slices(const char *buf, struct slice *out, int max)
{
	int n = 0;

	for (const char *p = buf; (p = strstr(p, "\"ph\":\"X\"")); p++) {
		const char *end = strchr(p, '}'), *ts = strstr(p, "\"ts\":"), *dur = strstr(p, "\"dur\":");

		if (!end || !ts || !dur || ts > end || dur > end || n == max)
			return -1;
		out[n++] = (struct slice){ json_us_to_ns(ts + 5), json_us_to_ns(dur + 6) };
	}
	return n;
}

static void test_sink_json(void)
{
	struct dl_timeline_stats st;
	char *buf = NULL;
	size_t len = run_synthetic(DL_TIMELINE_JSON, &buf, &st), x = 0, flows = 0;

	CHECK(len > 0 && buf[0] == '{', "not a JSON object");
	for (const char *p = buf; (p = strstr(p, "\"ph\":\"X\"")); p++)
		x++;
	for (const char *p = buf; (p = strstr(p, "\"cat\":\"flow\"")); p++)
		flows++;
	CHECK_EQ_U64(x, NSTEPS * 11);
	{
		static struct slice got[MAX_EVS];
		int n = json_slices(buf, got, MAX_EVS);

		CHECK(n >= 0, "a complete event without ts or dur");
		if (n >= 0)
			check_slices(got, n, "json");
	}
	CHECK_EQ_U64(flows, NSTEPS * 3);
	CHECK(strstr(buf, "\"name\":\"thread_name\"") && strstr(buf, "\"name\":\"process_name\""), "no names");
	CHECK(strstr(buf, "\"displayTimeUnit\":\"ns\"}") != NULL, "not closed");
	/* exact nanoseconds: T0 = 5 s → 5000000.000 µs */
	CHECK(strstr(buf, "\"ts\":5000000.000") != NULL, "timestamps not in µs with ns decimals");
	free(buf);
}

static void test_write_error(void)
{
	for (int fmt = DL_TIMELINE_PFTRACE; fmt <= DL_TIMELINE_JSON; fmt++) {
		struct dl_summary sum;
		int err = 0;
		struct dl_timeline *t = dl_timeline_open("/dev/full", (enum dl_timeline_format)fmt, &err);

		CHECK(t != NULL, "cannot open /dev/full: %d", err);
		if (!t)
			continue;
		dl_summary_init(&sum);
		feed_start(NULL, t);
		procinfo(&sum, t, PID, "train");
		for (unsigned i = 0; i < 3; i++)
			sched(&sum, t, PID, TID, T0 + i * 1000, 1000, DL_ST_RUNNING);
		err = dl_timeline_close(t, NULL);
		CHECK(err != 0, "format %d: a write to /dev/full reported no error", fmt);
		dl_summary_free(&sum);
		dl_stream_free(&feed_stream);
	}
	{
		int err = 0;

		CHECK(dl_timeline_open("/nonexistent-dir/x.pftrace", DL_TIMELINE_PFTRACE, &err) == NULL && err < 0,
		      "a bad path opened");
	}
	CHECK(dl_timeline_format_of_path("a.json") == DL_TIMELINE_JSON, "json by extension");
	CHECK(dl_timeline_format_of_path("a.pftrace") == DL_TIMELINE_PFTRACE, "pftrace by default");
	CHECK(dl_timeline_format_parse("json") == DL_TIMELINE_JSON && dl_timeline_format_parse("x") < 0, "format names");
}

/* A process renamed (exec) after the process table has grown: its track is described with the new name. */
static void test_rename_after_growth(void)
{
	struct dl_proc_ev e;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct dl_timeline *t = dl_timeline_new(f, DL_TIMELINE_JSON);

	feed_start(NULL, t);
	for (uint32_t pid = PID; pid < PID + 40; pid++) {
		procinfo(NULL, t, pid, "before");
		sched(NULL, t, pid, pid + 1000, T0, 1000, DL_ST_RUNNING);
	}
	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_PROC, .ts = T0 + 2000, .tgid = PID, .tid = PID };
	e.what = DL_PROC_EXEC;
	strcpy(e.comm, "after");
	feed(NULL, t, &e, sizeof(e));
	e.what = DL_PROC_THREAD;
	e.h.tid = PID + 1000;
	strcpy(e.comm, "worker");
	feed(NULL, t, &e, sizeof(e));
	CHECK(dl_timeline_finish(t, NULL) == 0 && refused == 0, "finish; %u of %u records refused", refused, fed);
	fclose(f);
	CHECK(strstr(buf, "\"name\":\"after 100\"") != NULL, "renamed process not described");
	CHECK(strstr(buf, "\"name\":\"worker 1100\"") != NULL, "named thread not described");
	dl_stream_free(&feed_stream);
	free(buf);
}

/* Overlapping intervals of one thread (should the kernel side ever produce them) are cut to nest. */
static void test_state_clipping(void)
{
	static struct decoded d;
	struct dl_timeline_stats st;
	struct dl_summary sum;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct dl_timeline *t;
	int unpaired = 0, maxd = 0;

	dl_summary_init(&sum);
	t = dl_timeline_new(f, DL_TIMELINE_PFTRACE);
	feed_start(&sum, t);
	sched(&sum, t, PID, TID, T0, 1000, DL_ST_RUNNING);
	sched(&sum, t, PID, TID, T0 + 500, 1000, DL_ST_RUNQ);      /* overlaps: starts at T0 + 1000 */
	sched(&sum, t, PID, TID, T0 + 600, 100, DL_ST_SLEEP);      /* inside the last: dropped */
	sched(&sum, t, PID, TID, T0 + 1500, 1000, DL_ST_RUNNING);
	CHECK(dl_timeline_finish(t, &st) == 0, "finish");
	fclose(f);
	CHECK_EQ_U64(st.clipped, 2);
	CHECK_EQ_U64(st.slices, 3);
	decode((const uint8_t *)buf, len, &d);
	qsort(d.ev, (size_t)d.n, sizeof(d.ev[0]), ev_cmp);
	{
		static struct slice got[MAX_EVS];
		int n = pair_slices(&d, got, &unpaired, &maxd);

		CHECK(maxd == 1 && unpaired == 0, "state slices nest: max depth %d, %d unpaired", maxd, unpaired);
		/* What is left: the first whole, the second from the first's end (T0 + 1000, 500 ns of
		 * its 1000), the third whole; the sleep inside the second is gone. */
		nwant = 0;
		want_slice(T0, 1000);
		want_slice(T0 + 1000, 500);
		want_slice(T0 + 1500, 1000);
		check_slices(got, n, "clipped states");
	}
	dl_summary_free(&sum);
	dl_stream_free(&feed_stream);
	free(buf);
}

/*
 * Events that arrive newest first, more of them than the writer holds, all inside the window:
 * it holds PF_HEAP_CAP of them, so each one past that finds a later one already written and
 * goes out late, with an absolute timestamp.
 */
static void test_heap_cap(void)
{
	enum { EXTRA = 100, N = PF_HEAP_CAP + EXTRA };
	static struct decoded d;
	const struct dl_ttrack track = { .uuid = 1, .kind = DL_TT_COUNTER, .name = "load" };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct dl_tout *o = dl_perfetto_out(f, T0, T0, T0);
	uint64_t events, late;

	o->track(o, &track);
	for (uint64_t i = 0; i < N; i++)
		o->counter(o, &track, T0 + N - i, (double)i);
	CHECK(o->finish(o) == 0, "finish");
	events = o->events;
	late = o->late;
	o->destroy(o);
	fclose(f);
	CHECK_EQ_U64(events, N);
	CHECK_EQ_U64(late, EXTRA);
	decode((const uint8_t *)buf, len, &d);
	CHECK(d.bad == 0, "%d malformed packets", d.bad);
	CHECK_EQ_U64(d.absolute, EXTRA);
	free(buf);
}

int main(void)
{
	test_varints();
	test_nested();
	test_packets();
	test_sink_pftrace();
	test_sink_json();
	test_write_error();
	test_state_clipping();
	test_rename_after_growth();
	test_heap_cap();
	return check_report("test_perfetto");
}
