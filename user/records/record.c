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

	memset(r, 0, sizeof(*r));
	memset(&h, 0, sizeof(h));
	r->path = path;
	r->f = fopen(path, "wb");
	if (!r->f) {
		dl_err("cannot write the recording to %s: %s", path, strerror(errno));
		return -errno;
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
	if (fwrite(&h, sizeof(h), 1, r->f) != 1) {
		r->err = errno ? errno : EIO;
		dl_err("writing %s failed: %s", path, strerror(r->err));
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
	if (fwrite(h, h->size, 1, r->f) != 1) {
		r->err = errno ? errno : EIO;
		return -r->err;
	}
	r->records++;
	r->bytes += h->size;
	return 0;
}

int dl_recorder_close(struct dl_recorder *r)
{
	if (!r->f)
		return r->err ? -r->err : 0;
	if (fflush(r->f) && !r->err)
		r->err = errno ? errno : EIO;
	if (!r->err && fsync(fileno(r->f)) && errno != EINVAL && errno != EROFS)
		r->err = errno;
	if (fclose(r->f) && !r->err)
		r->err = errno ? errno : EIO;
	r->f = NULL;
	return r->err ? -r->err : 0;
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
	if (fread((char *)h + fixed, 1, sizeof(*h) - fixed, f) != sizeof(*h) - fixed ||
	    fseeko(f, (off_t)h->header_size, SEEK_SET)) {
		snprintf(err, errlen, "%s: truncated header", path);
		return -1;
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

int dl_replay(const char *path, struct dl_stream *s, struct dl_rec_header *hdr, char *err, size_t errlen)
{
	union {
		struct dl_hdr h;
		unsigned char buf[1 << 16];
	} *rec = dl_xrealloc(NULL, sizeof(*rec));
	struct dl_rec_header h;
	struct dl_rec_in in;
	uint64_t offset, n = 0;
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
		size_t got = fread(&rec->h, 1, sizeof(rec->h), f);

		if (got == 0 && feof(f))
			break;
		if (got != sizeof(rec->h) || rec->h.size < sizeof(rec->h)) {
			snprintf(err, errlen, "%s: %s record header at byte %" PRIu64 " (after %" PRIu64
				 " records): the file is %s", path, got != sizeof(rec->h) ? "truncated" : "invalid",
				 offset, n, got != sizeof(rec->h) ? "truncated" : "corrupt");
			goto out;
		}
		if (fread(rec->buf + sizeof(rec->h), 1, rec->h.size - sizeof(rec->h), f) !=
		    rec->h.size - sizeof(rec->h)) {
			snprintf(err, errlen, "%s: record at byte %" PRIu64 " (after %" PRIu64 " records) is cut short: "
				 "the file is truncated", path, offset, n);
			goto out;
		}
		/* The same reading as a live record's: a recording holds only records that passed it. */
		if (dl_stream_read(s, &in, rec->buf, rec->h.size)) {
			snprintf(err, errlen, "%s: record at byte %" PRIu64 " (kind %u, %u bytes) is malformed: the "
				 "file is corrupt", path, offset, rec->h.kind, rec->h.size);
			goto out;
		}
		dl_stream_put(s, &in);
		offset += rec->h.size;
		n++;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "reading %s failed: %s", path, strerror(errno));
		goto out;
	}
	ret = 0;
out:
	fclose(f);
	free(rec);
	return ret;
}
