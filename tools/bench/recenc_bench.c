// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Recording encoding benchmark (not a test): the records of a real recording,
 * held in memory, written and replayed in each encoding, median of interleaved
 * rounds. Prints one JSON object of records per second:
 *   encode_*    the encoder alone (verbatim: the copy it replaces);
 *   record_*    dl_recorder_sink to a file in DIR (page cache; the batches
 *               written as they fill, not the close's sync);
 *   replay_*    dl_replay of that file into a stream with no sinks (the
 *               stream's own reading and decoding of each record included);
 * and bytes per record of each file.
 *   recenc_bench RECORDING DIR [ROUNDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "records/recenc.h"
#include "records/record.h"
#include "records/stream.h"

#define MAX_ROUNDS 31

static volatile uint8_t kept;

struct held {
	uint8_t *buf;
	size_t len, cap, n;
};

static int hold(void *ctx, const struct dl_rec *r)
{
	struct held *h = ctx;
	size_t pad = (r->h->size + 7u) & ~7u;

	if (h->len + pad > h->cap) {
		h->cap = (h->len + pad) * 2;
		h->buf = realloc(h->buf, h->cap);
		if (!h->buf)
			return -1;
	}
	memcpy(h->buf + h->len, r->h, r->h->size);
	h->len += pad;
	h->n++;
	return 0;
}

static double now(void)
{
	struct timespec ts;

	/* CPU time of this thread (its write system calls included): 2 CPUs shared by many, wall time is mostly waiting. */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Each held record, in order. */
#define FOR_EACH(h, p) for (uint8_t *p = (h)->buf; p < (h)->buf + (h)->len; p += (((struct dl_hdr *)p)->size + 7u) & ~7u)

static double encode_rate(const struct held *h, enum dl_rec_encoding enc, uint8_t *out)
{
	struct dl_recenc *e = calloc(1, sizeof(*e));
	size_t at = 0;
	double t0 = now(), dt;

	dl_recenc_init(e);
	FOR_EACH(h, p) {
		if (enc == DL_REC_COMPACT) {
			at += dl_recenc_put(e, p, out + at);
		} else {
			memcpy(out + at, p, ((struct dl_hdr *)p)->size);
			at += ((struct dl_hdr *)p)->size;
		}
	}
	dt = now() - t0;
	free(e);
	kept = out[at - 1];   /* read back: the copies are not optimised away */
	return (double)h->n / dt;
}

static double record_rate(const struct held *h, enum dl_rec_encoding enc, const char *path, uint64_t *bytes)
{
	struct dl_recorder r;
	struct dl_rec rec = { 0 };
	double t0, dt;

	if (dl_recorder_open(&r, path, enc))
		exit(1);
	t0 = now();
	FOR_EACH(h, p) {
		rec.h = (const struct dl_hdr *)p;
		if (dl_recorder_sink(&r, &rec))
			exit(1);
	}
	dt = now() - t0;
	if (dl_recorder_close(&r))
		exit(1);
	*bytes = r.bytes;
	return (double)h->n / dt;
}

static double replay_rate(const char *path, size_t n)
{
	struct dl_stream s = {};
	char err[512];
	double t0 = now(), dt;

	if (dl_replay(path, &s, NULL, err, sizeof(err)) || s.seq + s.malformed != n) {
		fprintf(stderr, "recenc_bench: replay of %s: %s (%llu of %zu records)\n", path, err,
			(unsigned long long)s.seq, n);
		exit(1);
	}
	dt = now() - t0;
	dl_stream_free(&s);
	return (double)n / dt;
}

int main(int argc, char **argv)
{
	static const char *const name[2] = { "verbatim", "compact" };
	struct held h = { 0 };
	struct dl_stream in = {};
	double rate[3][2][MAX_ROUNDS];
	uint64_t bytes[2] = { 0 };
	char err[512], path[2][4096];
	int rounds = argc > 3 ? atoi(argv[3]) : 7;
	uint8_t *out;

	if (argc < 3 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: recenc_bench RECORDING DIR [ROUNDS 1-%d]\n", MAX_ROUNDS);
		return 2;
	}
	dl_stream_add(&in, hold, &h);
	if (dl_replay(argv[1], &in, NULL, err, sizeof(err)) < 0 || !h.n) {
		fprintf(stderr, "recenc_bench: %s: %s\n", argv[1], h.n ? err : "no records");
		return 1;
	}
	out = malloc(h.len * 2 + DL_RECENC_MAX_BYTES);
	for (int e = 0; e < 2; e++)
		snprintf(path[e], sizeof(path[e]), "%s/bench-%s.dlbpf", argv[2], name[e]);
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < 2; k++) {
			int e = (r + k) % 2;   /* interleaved, each first in turn */

			rate[0][e][r] = encode_rate(&h, (enum dl_rec_encoding)e, out);
			rate[1][e][r] = record_rate(&h, (enum dl_rec_encoding)e, path[e], &bytes[e]);
			rate[2][e][r] = replay_rate(path[e], h.n);
		}
	}
	printf("{\"records\": %zu, \"rounds\": %d", h.n, rounds);
	for (int e = 0; e < 2; e++) {
		printf(", \"%s_bytes_per_record\": %.2f", name[e],
		       (double)(bytes[e] - sizeof(struct dl_rec_header)) / (double)h.n);
		printf(", \"encode_%s\": %.0f, \"record_%s\": %.0f, \"replay_%s\": %.0f", name[e],
		       median(rate[0][e], rounds), name[e], median(rate[1][e], rounds), name[e],
		       median(rate[2][e], rounds));
	}
	printf("}\n");
	for (int e = 0; e < 2; e++)
		remove(path[e]);
	dl_stream_free(&in);
	free(out);
	free(h.buf);
	return 0;
}
