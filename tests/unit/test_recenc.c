// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The compact encoding: any record stream encodes and decodes bit-exact
 * (every kind, sizes from a bare header to 64 KiB, time going backwards,
 * more threads than slots); a record cut anywhere asks for more bytes and
 * changes nothing; corrupt heads are refused. Then the recording around it:
 * a compact recording replays what a verbatim one of the same stream does,
 * re-recorded either way gives the same bytes, a cut one replays every whole
 * record before the cut and says where, and old headers still read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "records/recenc.h"
#include "records/record.h"
#include "records/stream.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Records back to back, each 8-aligned (as dl_replay and the stream hold them). */
struct recs {
	uint8_t *buf;
	size_t *at, n, len, cap;
};

static uint8_t *recs_add(struct recs *r, size_t size)
{
	size_t pad = (size + 7) & ~(size_t)7;

	if (r->len + pad > r->cap) {
		r->cap = (r->len + pad) * 2;
		r->buf = realloc(r->buf, r->cap);
	}
	if (r->n % 1024 == 0)
		r->at = realloc(r->at, (r->n + 1024) * sizeof(*r->at));
	r->at[r->n++] = r->len;
	memset(r->buf + r->len, 0, pad);
	r->len += pad;
	return r->buf + r->len - pad;
}

static void recs_free(struct recs *r)
{
	free(r->buf);
	free(r->at);
}

/*
 * A stream of n records on nthreads threads: each record is the previous one
 * of its kind and thread with a few words changed (what the encoding bets on)
 * or, one time in eight, all new bytes (what it must survive). Sizes include
 * a bare header, odd sizes, both sides of a slot's 128 bytes and the largest.
 */
static void make_stream(struct recs *r, size_t n, unsigned nthreads, bool ts_backwards)
{
	static const uint16_t sizes[] = { 24, 25, 31, 32, 48, 56, 96, 120, 127, 128, 129, 288, 1057, 65535 };
	static uint8_t last[DL_EV_KIND_MAX + 2][64][128];
	uint64_t ts = 1000000000;

	memset(last, 0, sizeof(last));
	for (size_t i = 0; i < n; i++) {
		uint16_t kind = (uint16_t)(1 + rnd() % (DL_EV_KIND_MAX + 1));   /* one past DL_EV_KIND_MAX too: unknown */
		uint32_t tid = (uint32_t)(1000 + rnd() % nthreads);
		uint16_t size = rnd() % 4 ? (uint16_t)(24 + 8 * (kind % 13)) : sizes[rnd() % (sizeof(sizes) / 2)];
		uint8_t *p = recs_add(r, size), *prev = last[kind][tid % 64];
		struct dl_hdr h;

		if (rnd() % 8) {
			memcpy(p, prev, size < 128 ? size : 128);
			for (int k = (int)(rnd() % 4); k > 0; k--) {
				size_t at = rnd() % size;

				p[at] = (uint8_t)rnd();
			}
		} else {
			for (size_t b = 0; b < size; b++)
				p[b] = (uint8_t)rnd();
		}
		ts += rnd() % 100000;
		if (ts_backwards && rnd() % 5 == 0)
			ts -= rnd() % 2000000;
		if (rnd() % 97 == 0)
			ts = rnd();   /* any 64-bit value, wrap-around included */
		memcpy(&h, p, sizeof(h));
		h.size = size;
		h.kind = kind;
		h.ts = ts;
		h.tid = tid;
		memcpy(p, &h, sizeof(h));
		memcpy(prev, p, size < 128 ? size : 128);
	}
}

/* Encodes r, decodes it, compares; returns the encoded bytes (0 on a mismatch, reported). */
static size_t round_trip(const struct recs *r, const char *what, uint64_t *restarts)
{
	struct dl_recenc *e = calloc(1, sizeof(*e)), *d = calloc(1, sizeof(*d));
	uint8_t *enc = malloc(r->n * 64 + r->len + DL_RECENC_MAX_BYTES);
	uint64_t *out = malloc(DL_RECENC_MAX_SIZE + 8);
	size_t len = 0, at = 0, bad = 0;

	dl_recenc_init(e);
	dl_recenc_init(d);
	for (size_t i = 0; i < r->n; i++) {
		size_t k = dl_recenc_put(e, r->buf + r->at[i], enc + len);

		if (!k && !bad++)
			CHECK(0, "%s: record %zu not encoded", what, i);
		len += k;
	}
	for (size_t i = 0; i < r->n && !bad; i++) {
		const char *why = NULL;
		const uint8_t *want = r->buf + r->at[i];
		uint16_t size;
		long k = dl_recdec_next(d, enc + at, len - at, out, &why);

		memcpy(&size, want, sizeof(size));
		if (k <= 0 || memcmp(out, want, size)) {
			CHECK(0, "%s: record %zu of %zu decodes %s (%ld: %s)", what, i, r->n, k > 0 ? "differently" : "not",
			      k, why ? why : "");
			bad++;
		}
		at += k > 0 ? (size_t)k : 0;
	}
	CHECK(bad || at == len, "%s: %zu of %zu encoded bytes decoded", what, at, len);
	if (restarts)
		*restarts = e->restarts;
	free(e);
	free(d);
	free(enc);
	free(out);
	return bad ? 0 : len;
}

static void test_round_trips(void)
{
	struct recs a = { 0 }, b = { 0 }, c = { 0 };
	uint64_t restarts = 0;

	make_stream(&a, 200000, 12, false);
	round_trip(&a, "random, 12 threads", NULL);
	make_stream(&b, 100000, 40, true);
	round_trip(&b, "time going backwards", NULL);
	/* Three times the slots' worth of threads: the table starts over, again and again. */
	make_stream(&c, 60000, 3 * DL_RECENC_SLOTS, true);
	round_trip(&c, "slot table overflow", &restarts);
	CHECK(restarts >= 2, "3072 threads on %d slots: the table started over %" PRIu64 " times", DL_RECENC_SLOTS,
	      restarts);
	recs_free(&a);
	recs_free(&b);
	recs_free(&c);
}

/*
 * Every prefix of every record of a stream is "need more", with the decoder
 * left as it was: the next full try decodes it right (a recording read from
 * a pipe, in pieces, or cut short by a killed recorder).
 */
static void test_prefixes(void)
{
	struct recs r = { 0 };
	struct dl_recenc *e = calloc(1, sizeof(*e)), *d = calloc(1, sizeof(*d));
	uint8_t *enc;
	uint64_t *out = malloc(DL_RECENC_MAX_SIZE + 8);
	size_t len = 0, at = 0, asked = 0;

	make_stream(&r, 2000, 6, true);
	enc = malloc(r.n * 64 + r.len);
	for (size_t i = 0; i < r.n; i++)
		len += dl_recenc_put(e, r.buf + r.at[i], enc + len);
	for (size_t i = 0; i < r.n; i++) {
		const char *why;
		long k = 0;

		for (size_t avail = 0; avail <= len - at; avail++) {
			k = dl_recdec_next(d, enc + at, avail, out, &why);
			if (k)
				break;
			asked++;
			/* Past what a head, kind, size and bitmap take, a long verbatim record is only its length. */
			if (avail == 256 && len - at > 512)
				avail = len - at - 256;
		}
		if (k <= 0 || memcmp(out, r.buf + r.at[i], ((const struct dl_hdr *)(r.buf + r.at[i]))->size)) {
			CHECK(0, "record %zu: read in pieces, it decodes %s", i, k <= 0 ? "not" : "differently");
			break;
		}
		at += (size_t)k;
	}
	CHECK(at == len && asked > r.n, "prefixes: %zu of %zu bytes, %zu short reads", at, len, asked);
	recs_free(&r);
	free(e);
	free(d);
	free(enc);
	free(out);
}

static long decode_bytes(const uint8_t *p, size_t n, const char **why)
{
	static uint64_t out[DL_RECENC_MAX_SIZE / 8 + 1];
	struct dl_recenc *d = calloc(1, sizeof(*d));
	long k = dl_recdec_next(d, p, n, out, why);

	free(d);
	return k;
}

/* Heads no encoder writes are refused, each with its reason. */
static void test_corrupt(void)
{
	static const struct {
		uint8_t b[16];
		size_t n;
		const char *needle;
	} cases[] = {
		{ { 3 }, 1, "names no encoding" },
		{ { 0x80 | (0 << 3), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 }, 11, "64 bits" },
		{ { 0x80, 0x80, 0x01 }, 3, "past the table" },               /* slot 2048 */
		{ { 0 }, 1, "holds none" },                                  /* delta against slot 0, never filled */
		{ { 1, 3, 8 }, 3, "out of range" },                          /* fresh: size 8 */
		{ { 1, 3, 48, 0x40 }, 4, "past its size" },                  /* 6 words, bit 6 */
		{ { 2, 8, 0 }, 3, "less than its header" },                  /* verbatim of 8 bytes */
		{ { 2 | 8 }, 1, "bits set" },                                /* verbatim with a slot */
		{ { 1 | 4, 3, 48 }, 3, "size bit" },
		{ { 6, 8 }, 2, "size is out of range" },                    /* sparse of 8 bytes */
		{ { 6, 0xc8, 0x01, 0, 0 }, 5, "empty piece" },              /* sparse 200: 0 literal, 0 zeros */
		{ { 6, 0xc8, 0x01, 0, 0xc9, 0x01 }, 6, "past its size" },   /* 201 zeros of 200 */
		{ { 6, 24, 2, 25, 0, 22 }, 6, "another size" },             /* header says 25, pieces make 24 */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *why = "";
		long k = decode_bytes(cases[i].b, cases[i].n, &why);

		CHECK(k == -1 && strstr(why, cases[i].needle), "corrupt case %zu: %ld (%s), expected -1 (%s)", i, k, why,
		      cases[i].needle);
	}
}

/* What a repeat costs, from the format: head 1, bitmap 2, the time stamp's delta 1 (< 64 ns). */
static void test_repeat_is_small(void)
{
	struct dl_recenc *e = calloc(1, sizeof(*e));
	uint8_t out[DL_RECENC_MAX_BYTES];
	struct dl_cuda_ev ev;
	size_t first, again;

	memset(&ev, 0, sizeof(ev));
	ev.h = (struct dl_hdr){ .size = sizeof(ev), .kind = DL_EV_CUDA, .ts = 5000, .tgid = 7, .tid = 7 };
	ev.arg[0] = 0x7f0012345678ull;
	first = dl_recenc_put(e, &ev, out);
	ev.h.ts += 50;
	again = dl_recenc_put(e, &ev, out);
	CHECK(first < sizeof(ev) && again == 4, "a launch: %zu bytes, repeated 50 ns later: %zu", first, again);

	/*
	 * The same record again at the same nanosecond, in slot 0: no field changed, and yet not all zero
	 * bytes, which a reader takes for the zeros a crash leaves at a file's end. It decodes the same.
	 */
	{
		struct dl_recenc *d = calloc(1, sizeof(*d));
		uint8_t in[DL_RECENC_MAX_BYTES], dec[sizeof(ev) + 8];
		size_t n, zeros = 0;
		const char *why = NULL;
		long used;

		dl_recenc_init(e);
		dl_recenc_init(d);
		n = dl_recenc_put(e, &ev, in);
		CHECK(dl_recdec_next(d, in, n, dec, &why) == (long)n, "the first record decodes");
		n = dl_recenc_put(e, &ev, in);
		for (size_t i = 0; i < n; i++)
			zeros += !in[i];
		CHECK(in[0] == 0 && zeros < n, "slot 0's exact repeat: %zu bytes, %zu of them zero", n, zeros);
		used = dl_recdec_next(d, in, n, dec, &why);
		CHECK(used == (long)n && !memcmp(dec, &ev, sizeof(ev)), "the repeat decodes to the record (%ld of %zu bytes)",
		      used, n);
		free(d);
	}

	/* A long record with a short path: head 1, size 2, then header and fields, path, tail as pieces. */
	struct dl_file_open_ev fo;
	static const char path[] = "/data/shard-00017.bin";
	size_t sparse;

	memset(&fo, 0, sizeof(fo));
	fo.h = (struct dl_hdr){ .size = sizeof(fo), .kind = DL_EV_FILE_OPEN, .ts = 6000, .tgid = 7, .tid = 7 };
	fo.fd = 5;
	fo.dirfd = -100;
	memcpy(fo.path, path, sizeof(path));
	fo.cwd_ino = 1234567;
	fo.cwd_dev = 8 << 20 | 1;
	sparse = dl_recenc_put(e, &fo, out);
	/*
	 * At most: head and size 3, the bytes up to the path's end, the 16 after the path, and no more than
	 * three pieces (fields, path, cwd) of two varints of at most 2 bytes each.
	 */
	CHECK(sparse <= 3 + offsetof(struct dl_file_open_ev, path) + strlen(path) + 16 + 3 * 4 && sparse < 100,
	      "a %zu-byte open of a %zu-byte path: %zu bytes", sizeof(fo), sizeof(path), sparse);
	free(e);
}

/* What the sinks got, in order. */
struct digest {
	uint64_t n, hash;
};

static int digest_sink(void *ctx, const struct dl_rec *r)
{
	struct digest *d = ctx;
	const uint8_t *p = (const uint8_t *)r->h;

	d->n++;
	for (size_t i = 0; i < r->h->size; i++)
		d->hash = (d->hash ^ p[i]) * 0x100000001b3ull;
	return 0;
}

struct rerecord {
	struct dl_recorder *rec;
	struct digest *d;
};

static int both_sink(void *ctx, const struct dl_rec *r)
{
	struct rerecord *rr = ctx;

	digest_sink(rr->d, r);
	return dl_recorder_sink(rr->rec, r);
}

/* Replays src into a new recording of enc at dst; the digest of what was replayed. */
static struct digest rerecord(const char *src, const char *dst, enum dl_rec_encoding enc)
{
	struct dl_recorder rec;
	struct digest d = { 0 };
	struct rerecord rr = { &rec, &d };
	struct dl_stream s = {};
	char err[512] = "";

	CHECK(dl_recorder_open(&rec, dst, enc) == 0, "open %s", dst);
	dl_stream_add(&s, both_sink, &rr);
	CHECK(dl_replay(src, &s, NULL, err, sizeof(err)) == 0, "replay %s: %s", src, err);
	CHECK(dl_recorder_close(&rec) == 0, "close %s", dst);
	dl_stream_free(&s);
	return d;
}

/* The file past its header (the header's clocks are each recorder's own). */
static uint8_t *body_of(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p = malloc(64 << 20);

	*n = 0;
	if (f && p && !fseek(f, (long)sizeof(struct dl_rec_header), SEEK_SET))
		*n = fread(p, 1, 64 << 20, f);
	if (f)
		fclose(f);
	return p;
}

static bool same_body(const char *a, const char *b)
{
	size_t na, nb;
	uint8_t *pa = body_of(a, &na), *pb = body_of(b, &nb);
	bool same = na == nb && na && !memcmp(pa, pb, na);

	free(pa);
	free(pb);
	return same;
}

/*
 * Records as the stream holds them (valid kinds: the stream gives a sink no
 * malformed record), written both ways at once, then each replayed and
 * re-recorded the other way.
 */
static void test_recordings(const char *dir)
{
	char verb[512], comp[512], verb2[512], comp2[512];
	struct dl_recorder rv, rc;
	struct dl_stream s = {};
	struct digest given = { 0 }, dv, dc;
	uint64_t drops[DL_DROP_MAX] = { 3 };
	size_t nc;

	snprintf(verb, sizeof(verb), "%s/v.dlbpf", dir);
	snprintf(comp, sizeof(comp), "%s/c.dlbpf", dir);
	snprintf(verb2, sizeof(verb2), "%s/v2.dlbpf", dir);
	snprintf(comp2, sizeof(comp2), "%s/c2.dlbpf", dir);
	CHECK(dl_recorder_open(&rv, verb, DL_REC_VERBATIM) == 0 && dl_recorder_open(&rc, comp, DL_REC_COMPACT) == 0,
	      "open");
	dl_stream_add(&s, dl_recorder_sink, &rv);
	dl_stream_add(&s, dl_recorder_sink, &rc);
	dl_stream_add(&s, digest_sink, &given);
	dl_emit_trace_start(&s, 10, 12345);
	dl_emit_procinfo(&s, 11, 42, 1, "job", 42);
	dl_emit_lib(&s, 12, 42, "/opt/lib/libcudart.so.13", 90, 0);
	for (int i = 0; i < 50000; i++) {
		struct dl_sched_ev e;

		memset(&e, 0, sizeof(e));
		e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_SCHED, .cpu = (uint32_t)(rnd() % 2),
				       .ts = 100 + 1000 * (uint64_t)i, .tgid = 42, .tid = 42 + (uint32_t)(i % 5) };
		e.dur_ns = rnd() % 1000;
		e.state = 1 + (uint32_t)(rnd() % 4);
		e.next_state = 1 + (uint32_t)(rnd() % 4);
		dl_stream_emit(&s, &e, sizeof(e));
		if (i % 1000 == 0)
			dl_emit_sym(&s, e.h.ts, 42, 0x400000 + (uint64_t)i, "a_kernel_name_of_some_length");
	}
	dl_emit_trace_end(&s, 1u << 30, drops);
	CHECK(dl_recorder_close(&rv) == 0 && dl_recorder_close(&rc) == 0, "close");
	CHECK(s.malformed == 0 && rv.records == given.n && rc.records == given.n, "written: %" PRIu64 " and %" PRIu64
	      " of %" PRIu64, rv.records, rc.records, given.n);
	CHECK(rc.bytes * 4 < rv.bytes, "compact %" PRIu64 " bytes, verbatim %" PRIu64, rc.bytes, rv.bytes);
	dl_stream_free(&s);

	dc = rerecord(comp, verb2, DL_REC_VERBATIM);
	dv = rerecord(verb, comp2, DL_REC_COMPACT);
	CHECK(dc.n == given.n && dc.hash == given.hash, "compact replays %" PRIu64 " records of %" PRIu64
	      ", or other bytes", dc.n, given.n);
	CHECK(dv.n == given.n && dv.hash == given.hash, "verbatim replays %" PRIu64 " of %" PRIu64, dv.n, given.n);
	CHECK(same_body(verb, verb2), "compact re-recorded verbatim differs from the verbatim recording");
	CHECK(same_body(comp, comp2), "verbatim re-recorded compact differs from the compact recording");

	/* Cut short anywhere in its last records: every record before the cut, and where it stopped. */
	{
		uint8_t *body = body_of(comp, &nc);
		struct dl_stream in = {};
		struct digest got;
		uint64_t ends[4], at = 0, k = 0;
		char err[512], where[96];

		dl_stream_add(&in, digest_sink, &got);
		/* Where the last records end: the body decoded record by record. */
		{
			struct dl_recenc *d = calloc(1, sizeof(*d));
			static uint64_t out[DL_RECENC_MAX_SIZE / 8 + 1];
			const char *why;
			long used;

			while ((used = dl_recdec_next(d, body + at, nc - at, out, &why)) > 0) {
				at += (uint64_t)used;
				ends[k++ % 4] = at;
			}
			CHECK(at == nc && k == given.n, "the body decodes to %" PRIu64 " records, %" PRIu64 " of %zu bytes",
			      k, at, nc);
			free(d);
		}
		for (uint64_t cut = ends[(k - 3) % 4] - 1; cut > ends[(k - 4) % 4]; cut--) {
			FILE *f = fopen(comp2, "wb"), *src = fopen(comp, "rb");
			uint8_t head[sizeof(struct dl_rec_header)];
			int ret;

			CHECK(f && src && fread(head, 1, sizeof(head), src) == sizeof(head), "copy");
			if (!f || !src)
				break;
			fwrite(head, 1, sizeof(head), f);
			fwrite(body, 1, cut, f);
			fclose(f);
			fclose(src);
			memset(&got, 0, sizeof(got));
			ret = dl_replay(comp2, &in, NULL, err, sizeof(err));
			snprintf(where, sizeof(where), "at byte %zu; the %" PRIu64 " records before it",
				 sizeof(struct dl_rec_header) + (size_t)ends[(k - 4) % 4], k - 3);
			CHECK(ret == 1 && got.n == k - 3 && strstr(err, where) && strstr(err, "cut short"),
			      "cut at %" PRIu64 ": ret %d, %" PRIu64 " records: %s (expected %s)", cut, ret, got.n, err, where);
		}
		dl_stream_free(&in);
		free(body);
	}
	unlink(verb);
	unlink(comp);
	unlink(verb2);
	unlink(comp2);
}

/*
 * The encoding is abi_version's high half: a header with none (every recording
 * before the compact encoding) is verbatim; one this build does not know is
 * refused, as an older dlbpf refuses a compact one (its ABI looks newer).
 */
static void test_headers(const char *dir)
{
	struct dl_rec_header h = { .magic = DL_REC_MAGIC, .header_size = sizeof(h), .abi_version = DL_ABI_VERSION };
	struct dl_rec_header got;
	struct dl_sched_ev e;
	struct digest d = { 0 };
	struct dl_stream s = {};
	char path[512], err[512] = "";
	FILE *f;

	CHECK(sizeof(h) == 200, "the header is %zu bytes: it is the one of every earlier recording", sizeof(h));
	snprintf(path, sizeof(path), "%s/old.dlbpf", dir);
	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_SCHED, .ts = 1000, .tgid = 9, .tid = 9 };
	e.dur_ns = 10;
	e.state = DL_ST_RUNQ;
	f = fopen(path, "wb");
	CHECK(f != NULL, "write %s", path);
	if (!f)
		return;
	fwrite(&h, 1, sizeof(h), f);
	for (int i = 0; i < 3; i++)
		fwrite(&e, 1, sizeof(e), f);
	fclose(f);
	dl_stream_add(&s, digest_sink, &d);
	CHECK(dl_replay(path, &s, NULL, err, sizeof(err)) == 0 && d.n == 3, "a header without an encoding: %" PRIu64
	      " records: %s", d.n, err);

	h.abi_version = DL_ABI_VERSION | 7u << 16;
	f = fopen(path, "wb");
	if (f) {
		fwrite(&h, 1, sizeof(h), f);
		fclose(f);
	}
	CHECK(dl_replay(path, &s, NULL, err, sizeof(err)) == -1 && strstr(err, "encoding 7") && strstr(err, "newer"),
	      "encoding 7: %s", err);

	/* What the recorder writes says compact, and the event ABI as before. */
	{
		struct dl_recorder r;

		CHECK(dl_recorder_open(&r, path, DL_REC_COMPACT) == 0 && dl_recorder_close(&r) == 0, "write");
		CHECK(dl_rec_header_read(path, &got, err, sizeof(err)) == 0 &&
		      DL_REC_ABI(got.abi_version) == DL_ABI_VERSION && DL_REC_ENCODING(got.abi_version) == DL_REC_COMPACT,
		      "header abi_version %#x: %s", got.abi_version, err);
	}
	CHECK(dl_rec_encoding_of("compact") == DL_REC_COMPACT && dl_rec_encoding_of("zstd") == -1 &&
	      !strcmp(dl_rec_encoding_name(DL_REC_VERBATIM), "verbatim"), "encoding names");
	dl_stream_free(&s);
	unlink(path);
}

int main(void)
{
	char dir[] = "/tmp/dlbpf-test-recenc-XXXXXX";

	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	test_round_trips();
	test_prefixes();
	test_corrupt();
	test_repeat_is_small();
	test_recordings(dir);
	test_headers(dir);
	rmdir(dir);
	return check_report("test_recenc");
}
