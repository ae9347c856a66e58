// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "log.h"
#include "records/clock.h"
#include "records/record.h"
#include "util.h"
#include "version.h"

int dl_recorder_open(struct dl_recorder *r, const char *path)
{
	struct dl_rec_header h;
	struct utsname u;
	int err;

	memset(r, 0, sizeof(*r));
	memset(&h, 0, sizeof(h));
	r->path = path;
	err = dl_outfile_open(&r->out, path);
	if (err) {
		dl_err("cannot write the recording to %s: %s", path, strerror(-err));
		return err;
	}
	memcpy(h.magic, DL_REC_MAGIC, sizeof(h.magic));
	h.header_size = sizeof(h);
	h.abi_version = DL_ABI_VERSION;
	h.mono_ns = dl_clock_ns(CLOCK_MONOTONIC);
	h.real_ns = dl_clock_ns(CLOCK_REALTIME);
	h.boot_ns = dl_clock_ns(CLOCK_BOOTTIME);
	if (uname(&u) == 0) {
		memcpy(h.host, u.nodename, strnlen(u.nodename, sizeof(h.host) - 1));
		memcpy(h.kernel, u.release, strnlen(u.release, sizeof(h.kernel) - 1));
	}
	snprintf(h.version, sizeof(h.version), "%s", DLBPF_VERSION);
	if (fwrite(&h, sizeof(h), 1, r->out.f) != 1) {
		r->err = errno ? errno : EIO;
		dl_err("writing %s failed: %s", path, strerror(r->err));
		dl_outfile_abort(&r->out);
		return -r->err;
	}
	r->bytes = sizeof(h);
	return 0;
}

int dl_recorder_sink(void *ctx, const struct dl_rec *rec)
{
	struct dl_recorder *r = ctx;
	const struct dl_hdr *h = rec->h;

	if (r->err)
		return -r->err;
	if (fwrite(h, h->size, 1, r->out.f) != 1) {
		r->err = errno ? errno : EIO;
		return -r->err;
	}
	r->records++;
	r->bytes += h->size;
	return 0;
}

int dl_recorder_flush(struct dl_recorder *r)
{
	int err;

	if (!r->out.f || r->err)
		return r->err ? -r->err : 0;
	if (!r->published) {
		err = dl_outfile_publish(&r->out);
		if (err) {
			r->err = -err;
			return err;
		}
		r->published = true;
		return 0;
	}
	if (fflush(r->out.f)) {
		r->err = errno ? errno : EIO;
		return -r->err;
	}
	return 0;
}

int dl_recorder_close(struct dl_recorder *r)
{
	int err;

	if (!r->out.f)
		return r->err ? -r->err : 0;
	if (r->err) {
		dl_recorder_abort(r);
		return -r->err;
	}
	err = dl_outfile_commit(&r->out);
	if (err)
		r->err = -err;
	return err;
}

void dl_recorder_abort(struct dl_recorder *r)
{
	if (!r->out.f)
		return;
	/* Published, it is what a killed run would have left: kept, and readable to its last record. */
	if (r->published)
		dl_outfile_commit(&r->out);
	else
		dl_outfile_abort(&r->out);
}

/* Reads and checks the header; leaves f at the first record. */
static int read_header(FILE *f, const char *path, struct dl_rec_header *h, char *err, size_t errlen)
{
	const size_t fixed = offsetof(struct dl_rec_header, mono_ns);

	memset(h, 0, sizeof(*h));
	if (fread(h, 1, fixed, f) != fixed || memcmp(h->magic, DL_REC_MAGIC, sizeof(h->magic))) {
		snprintf(err, errlen, "%s is not a dlbpf recording (no %s header)", path, DL_REC_MAGIC);
		return -1;
	}
	if (h->abi_version > DL_ABI_VERSION) {
		snprintf(err, errlen, "%s was recorded with event ABI %u; this dlbpf reads ABI %d and older: "
			 "use a newer dlbpf to report it", path, h->abi_version, DL_ABI_VERSION);
		return -1;
	}
	if (h->header_size < sizeof(*h)) {
		snprintf(err, errlen, "%s: header of %u bytes is too short (corrupt file)", path, h->header_size);
		return -1;
	}
	/* Fields a later version appended are skipped; a header of megabytes is a corrupt size. */
	if (h->header_size > DL_REC_HEADER_MAX) {
		snprintf(err, errlen, "%s: header of %u bytes is too long (corrupt file)", path, h->header_size);
		return -1;
	}
	if (fread((char *)h + fixed, 1, sizeof(*h) - fixed, f) != sizeof(*h) - fixed) {
		snprintf(err, errlen, "%s: truncated header", path);
		return -1;
	}
	/* Read, not sought past: a recording may come through a pipe (report <(zcat run.dlbpf.gz)). */
	for (size_t left = h->header_size - sizeof(*h); left;) {
		char skip[512];
		size_t n = fread(skip, 1, left < sizeof(skip) ? left : sizeof(skip), f);

		if (!n) {
			snprintf(err, errlen, "%s: truncated header", path);
			return -1;
		}
		left -= n;
	}
	return 0;
}

int dl_rec_header_read(const char *path, struct dl_rec_header *hdr, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	int ret;

	if (!f) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	ret = read_header(f, path, hdr, err, errlen);
	fclose(f);
	return ret;
}

/* The replay stopped before the end: every complete record up to offset was read. */
static int stopped(char *err, size_t errlen, const char *path, uint64_t offset, uint64_t n, const char *why)
{
	snprintf(err, errlen, "%s: %s at byte %" PRIu64 "; the %" PRIu64 " records before it are reported",
		 path, why, offset, n);
	return 1;
}

int dl_replay(const char *path, struct dl_stream *s, struct dl_rec_header *hdr, char *err, size_t errlen)
{
	union {
		struct dl_hdr h;
		unsigned char buf[1 << 16];
	} *rec = dl_xrealloc(NULL, sizeof(*rec));
	struct dl_rec_header h;
	struct dl_rec_in in;
	uint64_t offset, n = 0;
	char why[160];
	FILE *f;
	int ret = -1;

	f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		free(rec);
		return -1;
	}
	if (read_header(f, path, &h, err, errlen))
		goto out;
	if (hdr)
		*hdr = h;
	offset = h.header_size;
	for (;;) {
		size_t got, body;

		if (s->stop && *s->stop) {
			snprintf(why, sizeof(why), "stopped by signal %d", (int)*s->stop);
			ret = stopped(err, errlen, path, offset, n, why);
			goto out;
		}
		got = fread(&rec->h, 1, sizeof(rec->h), f);
		if (ferror(f))
			break;   /* a read error, or a signal (from a pipe): said below */
		if (got == 0)
			break;
		/* Cut short by a killed or crashed recorder or a full disk: what came before is whole. */
		if (got != sizeof(rec->h)) {
			snprintf(why, sizeof(why), "the file ends %zu bytes into a record header (cut short)", got);
			ret = stopped(err, errlen, path, offset, n, why);
			goto out;
		}
		/* No size to skip by: nothing after it can be found. */
		if (rec->h.size < sizeof(rec->h)) {
			snprintf(why, sizeof(why), "a record claims %u bytes, less than its header (corrupt from there)",
				 rec->h.size);
			ret = stopped(err, errlen, path, offset, n, why);
			goto out;
		}
		body = rec->h.size - sizeof(rec->h);
		got = fread(rec->buf + sizeof(rec->h), 1, body, f);
		if (ferror(f))
			break;
		if (got != body) {
			snprintf(why, sizeof(why), "the file ends %zu bytes into a record of %u bytes (cut short)",
				 got + sizeof(rec->h), rec->h.size);
			ret = stopped(err, errlen, path, offset, n, why);
			goto out;
		}
		/* The same reading as a live record's: a malformed one is counted by the stream and skipped. */
		if (dl_stream_read(s, &in, rec->buf, rec->h.size) == 0)
			dl_stream_put(s, &in);
		offset += rec->h.size;
		n++;
	}
	if (!ferror(f)) {
		ret = 0;
	} else if (s->stop && *s->stop) {
		snprintf(why, sizeof(why), "stopped by signal %d", (int)*s->stop);
		ret = stopped(err, errlen, path, offset, n, why);
	} else {
		snprintf(err, errlen, "reading %s failed at byte %" PRIu64 ": %s", path, offset, strerror(errno));
	}
out:
	fclose(f);
	free(rec);
	return ret;
}
