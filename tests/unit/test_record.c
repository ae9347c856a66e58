// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Recordings: what is written replays record for record; damaged files fail with a reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "records/record.h"
#include "records/stream.h"

struct collect {
	size_t n, bytes;
	unsigned char buf[1 << 16];
};

static int collect(void *ctx, const struct dl_rec *r)
{
	struct collect *c = ctx;
	const void *rec = r->h;
	size_t len = r->h->size;

	if (c->bytes + len <= sizeof(c->buf))
		memcpy(c->buf + c->bytes, rec, len);
	c->bytes += len;
	c->n++;
	return 0;
}

static long file_size(const char *path)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fclose(f);
	return n;
}

int main(void)
{
	char path[] = "/tmp/dlbpf-test-record-XXXXXX", err[512];
	struct dl_recorder r;
	struct dl_stream out = {}, in = {};
	struct collect *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	struct dl_rec_header h;
	uint64_t drops[DL_DROP_MAX] = { 1, 2 };
	int fd = mkstemp(path);

	CHECK(fd >= 0 && a && b, "setup");
	if (fd < 0 || !a || !b)
		return 1;
	close(fd);
	CHECK(dl_recorder_open(&r, path) == 0, "open");
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

	/* Truncated mid-record: an error naming it, nothing past the cut emitted. */
	CHECK(truncate(path, (off_t)(sizeof(struct dl_rec_header) + a->bytes - 3)) == 0, "truncate");
	memset(b, 0, sizeof(*b));
	CHECK(dl_replay(path, &in, NULL, err, sizeof(err)) == -1, "truncated file replayed");
	CHECK(strstr(err, "truncated") != NULL, "message: %s", err);
	CHECK_EQ_U64(b->n, 3);

	CHECK(dl_recorder_open(&r, "/nonexistent-dir/x.dlbpf") < 0, "unwritable path opened");
	CHECK(dl_recorder_open(&r, "/dev/full") == 0, "open /dev/full");
	for (int i = 0; i < 5000; i++)
		dl_emit_trace_start(&(struct dl_stream){ .sinks = { { dl_recorder_sink, &r } }, .n = 1 }, 1, 0);
	CHECK(dl_recorder_close(&r) < 0, "a full disk went unnoticed");
	unlink(path);
	dl_stream_free(&out);
	dl_stream_free(&in);
	free(a);
	free(b);
	return check_report("test_record");
}
