// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Recordings: what is written replays record for record; a file cut short or
 * corrupt past its header gives every complete record before the damage and
 * says where it stopped (a zero-filled tail is cut where it starts, and
 * said); a corrupt header is refused; the stop flag ends a
 * replay between records; a recording is at its path only from its first
 * flush on, so a run that fails before leaves an older file as it was.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "records.h"
#include "records/record.h"
#include "records/stream.h"

struct collect {
	size_t n, bytes;
	size_t sizes[64];            /* of the first records, as the sink got them */
	unsigned char buf[1 << 16];
	volatile sig_atomic_t *stop_after_flag;   /* set to 15 once stop_after records came */
	size_t stop_after;
};

static int collect(void *ctx, const struct dl_rec *r)
{
	struct collect *c = ctx;
	const void *rec = r->h;
	size_t len = r->h->size;

	if (c->bytes + len <= sizeof(c->buf))
		memcpy(c->buf + c->bytes, rec, len);
	if (c->n < sizeof(c->sizes) / sizeof(c->sizes[0]))
		c->sizes[c->n] = len;
	c->bytes += len;
	c->n++;
	if (c->stop_after_flag && c->n == c->stop_after)
		*c->stop_after_flag = 15;
	return 0;
}

static long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : (long)st.st_size;
}

static int write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, n, f) == n;

	if (f && fclose(f))
		ok = 0;
	return ok ? 0 : -1;
}

static void *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	long sz = file_size(path);
	void *p = sz >= 0 ? malloc((size_t)sz + 1) : NULL;

	*n = 0;
	if (f && p)
		*n = fread(p, 1, (size_t)sz, f);
	if (f)
		fclose(f);
	return p;
}

/* Entries of dir whose name starts with prefix (temporaries left behind). */
static int count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	if (d)
		closedir(d);
	return n;
}

static struct dl_sched_ev sched_ev(uint64_t ts, uint64_t dur)
{
	return test_sched(42, 42, ts, dur, DL_ST_RUNQ, 0);
}

/*
 * A recording of a header and five sched records, the third one damaged by
 * edit(), replayed: what the sink got, and what dl_replay returned and said.
 */
struct damaged {
	int ret;
	size_t n;
	uint64_t malformed;
	char err[512];
};

static struct damaged replay_damaged(const char *path, void (*edit)(unsigned char *third, size_t *len))
{
	struct dl_rec_header h = { .magic = DL_REC_MAGIC, .header_size = sizeof(h), .abi_version = DL_ABI_VERSION };
	unsigned char buf[sizeof(h) + 5 * sizeof(struct dl_sched_ev)];
	size_t len = sizeof(h);
	struct collect *c = calloc(1, sizeof(*c));
	struct dl_stream s = {};
	struct damaged d = { 0 };

	memcpy(buf, &h, sizeof(h));
	for (int i = 0; i < 5; i++) {
		struct dl_sched_ev e = sched_ev(1000000 * (uint64_t)(i + 1), 1000);

		memcpy(buf + len, &e, sizeof(e));
		len += sizeof(e);
	}
	if (edit) {
		size_t third_len = len - (sizeof(h) + 2 * sizeof(struct dl_sched_ev));

		edit(buf + sizeof(h) + 2 * sizeof(struct dl_sched_ev), &third_len);
		len = sizeof(h) + 2 * sizeof(struct dl_sched_ev) + third_len;
	}
	if (!c || write_file(path, buf, len)) {
		d.ret = -2;
		free(c);
		return d;
	}
	dl_stream_add(&s, collect, c);
	d.ret = dl_replay(path, &s, NULL, d.err, sizeof(d.err));
	d.n = c->n;
	d.malformed = s.malformed;
	dl_stream_free(&s);
	free(c);
	return d;
}

/* The third record's size field says less than a header: nothing after it can be found. */
static void size_below_header(unsigned char *third, size_t *len)
{
	((struct dl_hdr *)third)->size = 8;
	(void)len;
}

/* A sched record of a header's size: its size can be trusted, its kind cannot be read. */
static void too_short_for_kind(unsigned char *third, size_t *len)
{
	struct dl_hdr h = *(struct dl_hdr *)third;

	h.size = sizeof(struct dl_hdr);
	memmove(third + sizeof(h), third + sizeof(struct dl_sched_ev), *len - sizeof(struct dl_sched_ev));
	memcpy(third, &h, sizeof(h));
	*len -= sizeof(struct dl_sched_ev) - sizeof(h);
}

/* 2^63-1 ns of run queue: an interval no kernel clock can end. */
static void endless(unsigned char *third, size_t *len)
{
	((struct dl_sched_ev *)third)->dur_ns = INT64_MAX;
	(void)len;
}

/* Cut 5 bytes into the third record's header, as a killed recorder's last write may leave it. */
static void cut_in_header(unsigned char *third, size_t *len)
{
	(void)third;
	*len = 5;
}

static void test_damaged(const char *path)
{
	struct damaged d;
	char where[64];

	/* The byte offset of the third record: the header, then two 48-byte records. */
	snprintf(where, sizeof(where), "at byte %zu;", sizeof(struct dl_rec_header) + 2 * 48);

	d = replay_damaged(path, NULL);
	CHECK(d.ret == 0 && d.n == 5 && d.malformed == 0, "undamaged: ret %d, %zu records", d.ret, d.n);

	d = replay_damaged(path, size_below_header);
	CHECK(d.ret == 1, "a size below the header: ret %d (%s)", d.ret, d.err);
	CHECK_EQ_U64(d.n, 2);
	CHECK(strstr(d.err, where) && strstr(d.err, "the 2 records before it") && strstr(d.err, "corrupt"),
	      "message: %s", d.err);

	d = replay_damaged(path, too_short_for_kind);
	CHECK(d.ret == 0, "a malformed record of a good size: ret %d (%s)", d.ret, d.err);
	CHECK_EQ_U64(d.n, 4);
	CHECK_EQ_U64(d.malformed, 1);

	d = replay_damaged(path, endless);
	CHECK(d.ret == 0, "an endless interval: ret %d (%s)", d.ret, d.err);
	CHECK_EQ_U64(d.n, 4);
	CHECK_EQ_U64(d.malformed, 1);

	d = replay_damaged(path, cut_in_header);
	CHECK(d.ret == 1, "cut in a record header: ret %d (%s)", d.ret, d.err);
	CHECK_EQ_U64(d.n, 2);
	CHECK(strstr(d.err, where) && strstr(d.err, "5 bytes into a record header") && strstr(d.err, "cut short"),
	      "message: %s", d.err);
}

/* A corrupt header is refused, not salvaged: nothing says what the records are. */
static void test_bad_headers(const char *path)
{
	struct dl_rec_header h = { .magic = DL_REC_MAGIC, .header_size = sizeof(h), .abi_version = DL_ABI_VERSION };
	struct dl_stream s = {};
	char err[512];

	CHECK(write_file(path, &h, 20) == 0, "write");
	CHECK(dl_replay(path, &s, NULL, err, sizeof(err)) == -1 && strstr(err, "truncated header"), "cut header: %s", err);
	h.header_size = 8;
	CHECK(write_file(path, &h, sizeof(h)) == 0, "write");
	CHECK(dl_replay(path, &s, NULL, err, sizeof(err)) == -1 && strstr(err, "too short"), "short header: %s", err);
	h.header_size = sizeof(h);
	h.magic[0] = 'X';
	CHECK(write_file(path, &h, sizeof(h)) == 0, "write");
	CHECK(dl_replay(path, &s, NULL, err, sizeof(err)) == -1 && strstr(err, "not a dlbpf recording"),
	      "bad magic: %s", err);
	CHECK_EQ_U64(s.seq, 0);
	dl_stream_free(&s);
}

/* The stop flag ends the replay between records: the records before it went to every sink. */
static void test_stop(const char *path)
{
	struct dl_recorder r;
	struct dl_stream out = {}, in = {};
	struct collect *c = calloc(1, sizeof(*c));
	volatile sig_atomic_t flag = 0;
	char err[512];

	CHECK(c && dl_recorder_open(&r, path, DL_REC_VERBATIM) == 0, "open");
	dl_stream_add(&out, dl_recorder_sink, &r);
	for (int i = 0; i < 10; i++)
		dl_emit_trace_start(&out, (uint64_t)i + 1, 0);
	CHECK(dl_recorder_close(&r) == 0, "close");
	if (!c)
		return;
	c->stop_after_flag = &flag;
	c->stop_after = 4;
	in.stop = &flag;
	dl_stream_add(&in, collect, c);
	CHECK(dl_replay(path, &in, NULL, err, sizeof(err)) == 1, "stopped replay: %s", err);
	CHECK_EQ_U64(c->n, 4);
	/* Each trace-start record is 32 bytes: the fifth starts 4 * 32 bytes past the header. */
	CHECK(strstr(err, "stopped by signal 15") != NULL, "message: %s", err);
	{
		char where[64];

		snprintf(where, sizeof(where), "at byte %zu;", sizeof(struct dl_rec_header) + 4 * 32);
		CHECK(strstr(err, where) != NULL, "message: %s", err);
	}
	dl_stream_free(&out);
	dl_stream_free(&in);
	free(c);
}

/* Before its first flush the recording is a temporary: an older file at its path stays until then. */
static void test_publish(const char *dir)
{
	char path[512], err[512];
	static const char old[] = "an older file";
	struct dl_recorder r;
	struct dl_stream out = {}, in = {};
	struct stat st;
	size_t n;
	char *got;

	snprintf(path, sizeof(path), "%s/rec.dlbpf", dir);
	CHECK(write_file(path, old, sizeof(old)) == 0, "write");
	CHECK(dl_recorder_open(&r, path, DL_REC_VERBATIM) == 0, "open");
	dl_stream_add(&out, dl_recorder_sink, &r);
	dl_emit_trace_start(&out, 1, 0);
	CHECK_EQ_U64((uint64_t)file_size(path), sizeof(old));
	CHECK(count_prefixed(dir, ".rec.dlbpf.") == 1, "no temporary beside it");
	dl_recorder_abort(&r);
	got = read_file(path, &n);
	CHECK(got && n == sizeof(old) && !memcmp(got, old, n), "a failed run changed the older file");
	free(got);
	CHECK(count_prefixed(dir, ".rec.dlbpf.") == 0, "the temporary is left behind");

	/* Published at the first flush, then written on: what a SIGKILL would leave is there. */
	CHECK(dl_recorder_open(&r, path, DL_REC_VERBATIM) == 0, "open");
	dl_emit_trace_start(&out, 1, 0);
	CHECK(dl_recorder_flush(&r) == 0, "flush");
	CHECK_EQ_U64((uint64_t)file_size(path), sizeof(struct dl_rec_header) + 32);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode %o", st.st_mode & 0777);
	dl_emit_trace_start(&out, 2, 0);
	CHECK(dl_recorder_flush(&r) == 0, "flush");
	CHECK_EQ_U64((uint64_t)file_size(path), sizeof(struct dl_rec_header) + 64);
	dl_emit_trace_start(&out, 3, 0);
	/* A run that fails after publishing keeps what it recorded. */
	dl_recorder_abort(&r);
	CHECK_EQ_U64((uint64_t)file_size(path), sizeof(struct dl_rec_header) + 96);
	CHECK(count_prefixed(dir, ".rec.dlbpf.") == 0, "a temporary is left behind");
	CHECK(dl_replay(path, &in, NULL, err, sizeof(err)) == 0 && in.seq == 3, "replay: %s", err);
	unlink(path);
	dl_stream_free(&out);
	dl_stream_free(&in);
}

/* The four records of main's recording, written in encoding enc to path; its size. */
static long record_four(const char *path, enum dl_rec_encoding enc)
{
	uint64_t drops[DL_DROP_MAX] = { 0 };
	struct dl_stream out = {};
	struct dl_recorder r;

	if (dl_recorder_open(&r, path, enc))
		return -1;
	dl_stream_add(&out, dl_recorder_sink, &r);
	dl_emit_trace_start(&out, 10, 12345);
	dl_emit_procinfo(&out, 11, 42, 1, "job", 0);
	dl_emit_sym(&out, 12, 42, 0xabc, "a_kernel_name_of_odd_length");
	dl_emit_trace_end(&out, 13, drops);
	dl_stream_free(&out);
	return dl_recorder_close(&r) ? -1 : file_size(path);
}

/* path grows by n zero bytes, then by the byte after (none when after is 0). */
static int append_zeros(const char *path, size_t n, unsigned char after)
{
	FILE *f = fopen(path, "ab");
	static const unsigned char zero[4096];
	int err = !f;

	for (size_t done = 0; f && done < n; done += sizeof(zero))
		err |= fwrite(zero, 1, n - done < sizeof(zero) ? n - done : sizeof(zero), f) == 0;
	if (f && after)
		err |= fputc(after, f) == EOF;
	if (f)
		err |= fclose(f);
	return err ? -1 : 0;
}

/*
 * A zero-filled tail (what a crash leaves: blocks allocated, never written), in either encoding and
 * longer than the reader's buffer too: cut where the zeros start, said with their length, the records
 * before them all replayed. Zeros past a buffer's worth that give way to data again are corrupt.
 */
static void test_zero_tails(const char *path)
{
	static const size_t runs[] = { 1, 2, 4096, 1 << 20 };
	struct collect *c = calloc(1, sizeof(*c));
	struct dl_stream in = {};
	char err[512], want[160];

	dl_stream_add(&in, collect, c);
	for (int enc = DL_REC_VERBATIM; enc <= DL_REC_COMPACT && c; enc++) {
		for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
			long size = record_four(path, (enum dl_rec_encoding)enc);
			int ret;

			CHECK(size > 0 && append_zeros(path, runs[i], 0) == 0, "write");
			memset(c, 0, sizeof(*c));
			ret = dl_replay(path, &in, NULL, err, sizeof(err));
			snprintf(want, sizeof(want), "the file ends in %zu bytes of zeros (what a crash can leave): cut at "
				 "byte %ld; the 4 records before it are reported", runs[i], size);
			CHECK(ret == 1 && strstr(err, want) && c->n == 4, "encoding %d, %zu zeros: ret %d, %zu records: %s",
			      enc, runs[i], ret, c->n, err);
		}
		record_four(path, (enum dl_rec_encoding)enc);
		CHECK(append_zeros(path, 1 << 20, 0x41) == 0, "write");
		memset(c, 0, sizeof(*c));
		CHECK(dl_replay(path, &in, NULL, err, sizeof(err)) == 1 && c->n == 4 &&
		      strstr(err, "1048576 bytes of zeros, then data again (corrupt from there)"),
		      "encoding %d, zeros then data: %zu records: %s", enc, c ? c->n : 0, err);
	}
	dl_stream_free(&in);
	free(c);
}

int main(void)
{
	char path[] = "/tmp/dlbpf-test-record-XXXXXX", dir[] = "/tmp/dlbpf-test-recdir-XXXXXX", err[512];
	struct dl_recorder r;
	struct dl_stream out = {}, in = {};
	struct collect *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	struct dl_rec_header h;
	uint64_t drops[DL_DROP_MAX] = { 1, 2 };
	int fd = mkstemp(path);
	size_t first3;
	int ret;

	CHECK(fd >= 0 && a && b && mkdtemp(dir), "setup");
	if (fd < 0 || !a || !b)
		return 1;
	close(fd);
	CHECK(dl_recorder_open(&r, path, DL_REC_VERBATIM) == 0, "open");
	dl_stream_add(&out, dl_recorder_sink, &r);
	dl_stream_add(&out, collect, a);
	dl_emit_trace_start(&out, 10, 12345);
	dl_emit_procinfo(&out, 11, 42, 1, "job", 0);
	dl_emit_sym(&out, 12, 42, 0xabc, "a_kernel_name_of_odd_length");
	dl_emit_trace_end(&out, 13, drops);
	CHECK(dl_recorder_close(&r) == 0, "close");
	CHECK_EQ_U64(r.records, 4);
	CHECK_EQ_U64((uint64_t)file_size(path), sizeof(struct dl_rec_header) + a->bytes);

	dl_stream_add(&in, collect, b);
	CHECK(dl_replay(path, &in, &h, err, sizeof(err)) == 0, "replay: %s", err);
	CHECK(!memcmp(h.magic, DL_REC_MAGIC, 8) && h.abi_version == DL_ABI_VERSION, "header");
	CHECK(h.real_ns > h.mono_ns, "clock snapshot");
	CHECK(b->n == a->n && b->bytes == a->bytes && !memcmp(a->buf, b->buf, a->bytes), "records differ");

	/* Truncated mid-record: the records before the cut, and where it stopped. */
	CHECK(truncate(path, (off_t)(sizeof(struct dl_rec_header) + a->bytes - 3)) == 0, "truncate");
	memset(b, 0, sizeof(*b));
	ret = dl_replay(path, &in, NULL, err, sizeof(err));
	CHECK(ret == 1, "truncated file: ret %d (%s)", ret, err);
	CHECK(strstr(err, "cut short") != NULL && strstr(err, "the 3 records before it") != NULL, "message: %s", err);
	first3 = sizeof(struct dl_rec_header) + a->sizes[0] + a->sizes[1] + a->sizes[2];
	{
		char where[64];

		snprintf(where, sizeof(where), "at byte %zu;", first3);
		CHECK(strstr(err, where) != NULL, "message: %s (expected %s)", err, where);
	}
	CHECK_EQ_U64(b->n, 3);
	CHECK(b->bytes == first3 - sizeof(struct dl_rec_header) && !memcmp(a->buf, b->buf, b->bytes),
	      "salvaged records differ");

	test_damaged(path);
	test_bad_headers(path);
	test_stop(path);
	test_publish(dir);
	test_zero_tails(path);

	CHECK(dl_recorder_open(&r, "/nonexistent-dir/x.dlbpf", DL_REC_VERBATIM) < 0, "unwritable path opened");
	CHECK(dl_recorder_open(&r, "/dev/full", DL_REC_COMPACT) == 0, "open /dev/full");
	for (int i = 0; i < 5000; i++)
		dl_emit_trace_start(&(struct dl_stream){ .sinks = { { dl_recorder_sink, &r } }, .n = 1 }, 1, 0);
	CHECK(dl_recorder_close(&r) < 0, "a full disk went unnoticed");
	unlink(path);
	rmdir(dir);
	dl_stream_free(&out);
	dl_stream_free(&in);
	free(a);
	free(b);
	return check_report("test_record");
}
