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

/* Encoded records are handed to stdio in batches of this: one fwrite per batch, not per record. */
#define REC_BATCH (256u << 10)

static const char *const encoding_names[DL_REC_ENCODING_MAX] = {
	[DL_REC_VERBATIM] = "verbatim",
	[DL_REC_COMPACT] = "compact",
};

const char *dl_rec_encoding_name(int encoding)
{
	return encoding >= 0 && encoding < DL_REC_ENCODING_MAX ? encoding_names[encoding] : NULL;
}

int dl_rec_encoding_of(const char *name)
{
	for (int i = 0; i < DL_REC_ENCODING_MAX; i++)
		if (!strcmp(name, encoding_names[i]))
			return i;
	return -1;
}

int dl_recorder_open(struct dl_recorder *r, const char *path, enum dl_rec_encoding encoding)
{
	struct dl_rec_header h;
	struct utsname u;
	int err;

	memset(r, 0, sizeof(*r));
	memset(&h, 0, sizeof(h));
	r->path = path;
	r->encoding = encoding;
	err = dl_outfile_open(&r->out, path);
	if (err) {
		dl_err("cannot write the recording to %s: %s", path, strerror(-err));
		return err;
	}
	memcpy(h.magic, DL_REC_MAGIC, sizeof(h.magic));
	h.header_size = sizeof(h);
	h.abi_version = DL_ABI_VERSION | (uint32_t)encoding << 16;
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
	r->buf = dl_xrealloc(NULL, REC_BATCH + DL_RECENC_MAX_BYTES);
	if (encoding == DL_REC_COMPACT) {
		r->enc = dl_xrealloc(NULL, sizeof(*r->enc));
		dl_recenc_init(r->enc);
	}
	return 0;
}

/* Hands the batch to stdio; the error is kept for the next call's caller. */
static int write_batch(struct dl_recorder *r)
{
	if (r->len && fwrite(r->buf, r->len, 1, r->out.f) != 1)
		r->err = errno ? errno : EIO;
	r->len = 0;
	return -r->err;
}

int dl_recorder_sink(void *ctx, const struct dl_rec *rec)
{
	struct dl_recorder *r = ctx;
	const struct dl_hdr *h = rec->h;
	size_t n;

	if (r->err)
		return -r->err;
	if (r->enc) {
		n = dl_recenc_put(r->enc, h, r->buf + r->len);
		if (!n)
			return -EINVAL;   /* the stream gives no record shorter than its header */
	} else {
		n = h->size;
		memcpy(r->buf + r->len, h, n);
	}
	r->len += n;
	r->records++;
	r->bytes += n;
	if (r->len >= REC_BATCH)
		return write_batch(r);
	return 0;
}

int dl_recorder_flush(struct dl_recorder *r)
{
	int err;

	if (!r->out.f || r->err)
		return r->err ? -r->err : 0;
	if (write_batch(r))
		return -r->err;
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

static void recorder_free(struct dl_recorder *r)
{
	free(r->buf);
	free(r->enc);
	r->buf = NULL;
	r->enc = NULL;
}

int dl_recorder_close(struct dl_recorder *r)
{
	int err;

	if (!r->out.f) {
		recorder_free(r);
		return r->err ? -r->err : 0;
	}
	if (!r->err)
		write_batch(r);
	if (r->err) {
		dl_recorder_abort(r);
		return -r->err;
	}
	recorder_free(r);
	err = dl_outfile_commit(&r->out);
	if (err)
		r->err = -err;
	return err;
}

void dl_recorder_abort(struct dl_recorder *r)
{
	if (!r->out.f) {
		recorder_free(r);
		return;
	}
	/* Published, it is what a killed run would have left and more: kept, readable to its last record. */
	if (r->published && !r->err)
		write_batch(r);
	recorder_free(r);
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
	if (DL_REC_ABI(h->abi_version) > DL_ABI_VERSION) {
		snprintf(err, errlen, "%s was recorded with event ABI %u; this dlbpf reads ABI %d and older: "
			 "use a newer dlbpf to report it", path, DL_REC_ABI(h->abi_version), DL_ABI_VERSION);
		return -1;
	}
	if (DL_REC_ENCODING(h->abi_version) >= DL_REC_ENCODING_MAX) {
		snprintf(err, errlen, "%s was written in record encoding %u; this dlbpf reads verbatim (0) and "
			 "compact (1): use a newer dlbpf to report it", path, DL_REC_ENCODING(h->abi_version));
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

/* Bytes of the recording read but not yet replayed. */
struct replay_buf {
	uint8_t *p;
	size_t at, len;
	bool eof;
};

/* Reads more behind what is left; false on a read error (or a signal), said by the caller. */
static bool refill(struct replay_buf *b, FILE *f)
{
	const size_t cap = REC_BATCH + DL_RECENC_MAX_BYTES;
	size_t got;

	memmove(b->p, b->p + b->at, b->len - b->at);
	b->len -= b->at;
	b->at = 0;
	got = fread(b->p + b->len, 1, cap - b->len, f);
	b->len += got;
	if (ferror(f))
		return false;
	b->eof = got == 0;
	return true;
}

/*
 * The next record at p (avail bytes), verbatim, into rec: its bytes, 0 when
 * the bytes end inside it, -1 when it is corrupt (why says so).
 */
static long next_verbatim(const uint8_t *p, size_t avail, void *rec, char *why, size_t whylen)
{
	uint16_t size;

	if (avail < sizeof(struct dl_hdr))
		return 0;
	memcpy(&size, p, sizeof(size));
	/* No size to skip by: nothing after it can be found. */
	if (size < sizeof(struct dl_hdr)) {
		snprintf(why, whylen, "a record claims %u bytes, less than its header (corrupt from there)", size);
		return -1;
	}
	if (avail < size)
		return 0;
	memcpy(rec, p, size);
	return size;
}

/* What a cut-short file's last bytes were. */
static void cut_short(char *why, size_t whylen, enum dl_rec_encoding enc, const uint8_t *p, size_t avail)
{
	uint16_t size;

	if (enc == DL_REC_COMPACT) {
		snprintf(why, whylen, "the file ends %zu bytes into a record (cut short)", avail);
	} else if (avail < sizeof(struct dl_hdr)) {
		snprintf(why, whylen, "the file ends %zu bytes into a record header (cut short)", avail);
	} else {
		memcpy(&size, p, sizeof(size));
		snprintf(why, whylen, "the file ends %zu bytes into a record of %u bytes (cut short)", avail, size);
	}
}

/* How many of p's n bytes are zeros before the first that is not. */
static size_t leading_zeros(const uint8_t *p, size_t n)
{
	static const uint8_t zero[4096];
	size_t i = 0;

	while (n - i >= sizeof(zero) && !memcmp(p + i, zero, sizeof(zero)))
		i += sizeof(zero);
	while (i < n && !p[i])
		i++;
	return i;
}

/* A recording being read, one record at a time (dl_replay_open). */
struct dl_replayer {
	FILE *f;
	const char *path;
	struct replay_buf b;
	struct dl_recenc *dec;        /* compact: the decoder's slots; NULL: verbatim */
	enum dl_rec_encoding encoding;
	uint64_t offset, n;           /* where the next record starts; records read */
	uint64_t zeros_dropped;       /* zeros at offset already read past (a run longer than the buffer) */
	union {
		struct dl_hdr h;
		uint64_t align;
		unsigned char buf[DL_RECENC_MAX_BYTES];
	} rec;
};

struct dl_replayer *dl_replay_open(const char *path, struct dl_rec_header *hdr, char *err, size_t errlen)
{
	struct dl_replayer *r = dl_xcalloc(1, sizeof(*r));
	struct dl_rec_header h;

	r->path = path;
	r->f = fopen(path, "rb");
	if (!r->f) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		free(r);
		return NULL;
	}
	if (read_header(r->f, path, &h, err, errlen)) {
		fclose(r->f);
		free(r);
		return NULL;
	}
	if (hdr)
		*hdr = h;
	r->b.p = dl_xrealloc(NULL, REC_BATCH + DL_RECENC_MAX_BYTES);
	r->encoding = (enum dl_rec_encoding)DL_REC_ENCODING(h.abi_version);
	if (r->encoding == DL_REC_COMPACT) {
		r->dec = dl_xrealloc(NULL, sizeof(*r->dec));
		dl_recenc_init(r->dec);
	}
	r->offset = h.header_size;
	return r;
}

int dl_replay_next(struct dl_replayer *r, const volatile sig_atomic_t *stop, const struct dl_hdr **rec, char *err,
		   size_t errlen)
{
	char why[200];

	for (;;) {
		size_t avail = r->b.len - r->b.at;
		const char *cwhy = NULL;
		long used;

		if (stop && *stop) {
			snprintf(why, sizeof(why), "stopped by signal %d", (int)*stop);
			return -stopped(err, errlen, r->path, r->offset, r->n, why);
		}
		/*
		 * Zeros where a record starts: what a crash leaves at the end of a file (blocks allocated, never
		 * written). A verbatim record never starts with two (its size), and no compact record is all
		 * zeros (recenc.c writes slot 0's exact repeat with one field): a run of them to the end of the
		 * file is a tail to cut, not records (a 2 GiB tail read as 2-byte records took 54 s and claimed
		 * a billion).
		 */
		if (avail && !r->b.p[r->b.at]) {
			const size_t cap = REC_BATCH + DL_RECENC_MAX_BYTES;
			size_t z = leading_zeros(r->b.p + r->b.at, avail);

			if (z == avail && !r->b.eof) {
				/* A whole buffer of them is no recording's: read past it, counting. */
				if (r->b.at == 0 && r->b.len == cap) {
					r->zeros_dropped += z;
					r->b.at = r->b.len;
				}
				if (!refill(&r->b, r->f))
					break;
				continue;
			}
			if (z == avail) {
				snprintf(why, sizeof(why), "the file ends in %" PRIu64 " bytes of zeros (what a crash can "
					 "leave): cut", r->zeros_dropped + z);
				return -stopped(err, errlen, r->path, r->offset, r->n, why);
			}
			if (r->zeros_dropped) {
				snprintf(why, sizeof(why), "%" PRIu64 " bytes of zeros, then data again (corrupt from there)",
					 r->zeros_dropped + z);
				return -stopped(err, errlen, r->path, r->offset, r->n, why);
			}
		}
		if (r->dec) {
			used = dl_recdec_next(r->dec, r->b.p + r->b.at, avail, r->rec.buf, &cwhy);
			if (used < 0)
				snprintf(why, sizeof(why), "%s (corrupt from there)", cwhy);
		} else {
			used = next_verbatim(r->b.p + r->b.at, avail, r->rec.buf, why, sizeof(why));
		}
		if (used < 0)
			return -stopped(err, errlen, r->path, r->offset, r->n, why);
		if (used == 0) {
			if (!r->b.eof) {
				if (!refill(&r->b, r->f))
					break;   /* a read error, or a signal (from a pipe): said below */
				continue;
			}
			if (!avail)
				return 0;
			/* Cut short by a killed or crashed recorder or a full disk: what came before is whole. */
			cut_short(why, sizeof(why), r->encoding, r->b.p + r->b.at, avail);
			return -stopped(err, errlen, r->path, r->offset, r->n, why);
		}
		r->b.at += (size_t)used;
		r->offset += (uint64_t)used;
		r->n++;
		*rec = &r->rec.h;
		return 1;
	}
	if (stop && *stop) {
		snprintf(why, sizeof(why), "stopped by signal %d", (int)*stop);
		return -stopped(err, errlen, r->path, r->offset, r->n, why);
	}
	snprintf(err, errlen, "reading %s failed at byte %" PRIu64 ": %s", r->path, r->offset, strerror(errno));
	return -2;
}

void dl_replay_close(struct dl_replayer *r)
{
	if (!r)
		return;
	fclose(r->f);
	free(r->dec);
	free(r->b.p);
	free(r);
}

int dl_replay(const char *path, struct dl_stream *s, struct dl_rec_header *hdr, char *err, size_t errlen)
{
	struct dl_replayer *r = dl_replay_open(path, hdr, err, errlen);
	const struct dl_hdr *rec;
	struct dl_rec_in in;
	int ret;

	if (!r)
		return -1;
	while ((ret = dl_replay_next(r, s->stop, &rec, err, errlen)) == 1) {
		/* The same reading as a live record's: a malformed one is counted by the stream and skipped. */
		if (dl_stream_read(s, &in, rec, rec->size) == 0)
			dl_stream_put(s, &in);
	}
	dl_replay_close(r);
	return ret == 0 ? 0 : ret == -1 ? 1 : -1;
}
