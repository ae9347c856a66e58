// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reads by file through the record stream and the summary: the fd table
 * (open, close, reuse, inherited at fork), the per-path counts, the bound on
 * paths kept, reads of fds no record named, block reads outside read calls
 * (page faults of mapped files), the small-reads finding, and the JSON. Every expected figure is worked out by hand from the records fed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "analysis/files.h"
#include "analysis/summary.h"
#include "output/report.h"
#include "records/stream.h"

#define PID 100
#define CHILD 200

static struct dl_stream st;
static struct dl_summary sum;

static void feed(const void *rec, size_t len)
{
	CHECK(dl_stream_emit(&st, rec, len) == 0, "record refused");
}

static void open_fd(pid_t pid, int fd, const char *path)
{
	struct dl_file_open_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_FILE_OPEN, .ts = 1, .tgid = pid, .tid = pid };
	e.fd = fd;
	snprintf(e.path, sizeof(e.path), "%s", path);
	feed(&e, sizeof(e));
}

static void close_fd(pid_t pid, int fd)
{
	struct dl_file_close_ev e = { .h = { .size = sizeof(e), .kind = DL_EV_FILE_CLOSE, .ts = 2, .tgid = pid, .tid = pid },
				      .fd = fd };

	feed(&e, sizeof(e));
}

static void read_fd(pid_t pid, uint32_t tid, int fd, int64_t ret, uint64_t dur, uint64_t disk)
{
	struct dl_file_read_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_FILE_READ, .ts = 10, .tgid = pid, .tid = tid };
	e.fd = fd;
	e.ret = ret;
	e.dur_ns = dur;
	e.disk_bytes = disk;
	e.call = DL_READ_READ;
	feed(&e, sizeof(e));
}

static const struct dl_file_stat *file(pid_t pid, const char *path)
{
	struct dl_proc *p = dl_summary_find(&sum, pid);

	for (size_t i = 0; p && i < p->files.files.n; i++)
		if (!strcmp(p->files.files.v[i].path, path))
			return &p->files.files.v[i];
	return NULL;
}

static void test_fd_table(void)
{
	const struct dl_file_stat *a, *b, *c;
	struct dl_proc *p;
	struct dl_proc_ev fork_ev;

	open_fd(PID, 3, "/data/a");
	read_fd(PID, PID, 3, 1 << 20, 1000, 1 << 20);
	read_fd(PID, PID, 3, 0, 10, 0);           /* end of file: a call, no bytes */
	close_fd(PID, 3);
	read_fd(PID, PID, 3, 100, 5, 0);          /* closed: an fd no record names */
	open_fd(PID, 3, "/data/b");               /* the number reused */
	read_fd(PID, PID + 1, 3, 4096, 20, 0);
	read_fd(PID, PID + 1, 3, -11, 20, 0);     /* an error: not a read of b */
	open_fd(PID, 4, "/data/c");
	a = file(PID, "/data/a");
	b = file(PID, "/data/b");
	CHECK(a && b, "files missing");
	if (!a || !b)
		return;
	CHECK_EQ_U64(a->read_bytes, 1 << 20);
	CHECK_EQ_U64(a->reads, 2);
	CHECK_EQ_U64(a->read_ns, 1010);
	CHECK_EQ_U64(a->disk_bytes, 1 << 20);
	CHECK_EQ_U64(a->small_reads, 0);
	CHECK_EQ_U64(b->read_bytes, 4096);
	CHECK_EQ_U64(b->reads, 1);
	CHECK_EQ_U64(b->small_reads, 1);
	p = dl_summary_find(&sum, PID);
	CHECK_EQ_U64(p->files.unknown.reads, 1);
	CHECK_EQ_U64(p->files.unknown.read_bytes, 100);
	CHECK_EQ_U64(p->files.read_errors, 1);

	/* A child forked now holds fds 3 (b) and 4 (c); its reads are its own. */
	memset(&fork_ev, 0, sizeof(fork_ev));
	fork_ev.h = (struct dl_hdr){ .size = sizeof(fork_ev), .kind = DL_EV_PROC, .ts = 20, .tgid = CHILD, .tid = CHILD };
	fork_ev.what = DL_PROC_FORK;
	fork_ev.ppid = PID;
	feed(&fork_ev, sizeof(fork_ev));
	read_fd(CHILD, CHILD, 4, 7, 3, 0);
	c = file(CHILD, "/data/c");
	CHECK(c && c->read_bytes == 7 && c->reads == 1, "child's read of the inherited fd 4");
	CHECK(!file(PID, "/data/c") || file(PID, "/data/c")->reads == 0, "the child's read counted in the parent");
}

static void submit(pid_t pid, uint32_t tid, uint32_t ino32, uint32_t bytes, uint32_t flags)
{
	struct dl_bio_submit_ev e = { .h = { .size = sizeof(e), .kind = DL_EV_BIO_SUBMIT, .ts = 30, .tgid = pid, .tid = tid },
				      .bytes = bytes, .dev = 8 << 20, .flags = flags, .ino32 = ino32 };

	feed(&e, sizeof(e));
}

/*
 * Block reads outside read calls: by the inode, a file the process opened
 * (named by its open record even after the close, the fd gone, as np.memmap
 * leaves it) or one the collector found among its mappings (fd -1); a read
 * call's own submissions, writes, and inodes no record named are not faults.
 */
static void test_page_faults(void)
{
	const struct dl_file_stat *m, *lib;
	struct dl_file_open_ev e;
	struct dl_proc_ev fork_ev;
	struct dl_proc *p;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_FILE_OPEN, .ts = 25, .tgid = PID + 2, .tid = PID + 2 };
	e.fd = 7;
	e.ino32 = 0xabc;
	snprintf(e.path, sizeof(e.path), "/data/shard-0");
	feed(&e, sizeof(e));
	close_fd(PID + 2, 7);
	e.fd = -1;
	e.flags = DL_FILE_MAPPED;
	e.ino32 = 0xdef;
	snprintf(e.path, sizeof(e.path), "/lib/libmapped.so");
	feed(&e, sizeof(e));

	submit(PID + 2, PID + 2, 0xabc, 1 << 20, 0);
	submit(PID + 2, PID + 3, 0xabc, 4096, DL_BIO_MERGED);          /* another thread's, merged: its too */
	submit(PID + 2, PID + 2, 0xabc, 8192, DL_BIO_IN_READ);         /* a read call's: counted by the call */
	submit(PID + 2, PID + 2, 0xabc, 8192, DL_BIO_WRITE);           /* a write */
	submit(PID + 2, PID + 2, 0x123, 4096, 0);                      /* an inode no record named */
	submit(PID + 2, PID + 2, 0xdef, 65536, 0);
	m = file(PID + 2, "/data/shard-0");
	lib = file(PID + 2, "/lib/libmapped.so");
	CHECK(m && lib, "mapped files missing");
	if (!m || !lib)
		return;
	CHECK_EQ_U64(m->fault_bytes, (1 << 20) + 4096);
	CHECK_EQ_U64(m->reads, 0);
	CHECK_EQ_U64(m->read_bytes, 0);
	CHECK_EQ_U64(m->disk_bytes, 0);
	CHECK_EQ_U64(lib->fault_bytes, 65536);
	p = dl_summary_find(&sum, PID + 2);
	/* The process's disk reads count every submission, faults or not. */
	CHECK_EQ_U64(p->io.read_bytes, (1 << 20) + 4096 + 8192 + 4096 + 65536);

	/* A forked child inherits the mappings: its faults name the same files, in its own table. */
	memset(&fork_ev, 0, sizeof(fork_ev));
	fork_ev.h = (struct dl_hdr){ .size = sizeof(fork_ev), .kind = DL_EV_PROC, .ts = 31, .tgid = PID + 4, .tid = PID + 4 };
	fork_ev.what = DL_PROC_FORK;
	fork_ev.ppid = PID + 2;
	feed(&fork_ev, sizeof(fork_ev));
	submit(PID + 4, PID + 4, 0xdef, 4096, 0);
	CHECK(file(PID + 4, "/lib/libmapped.so") && file(PID + 4, "/lib/libmapped.so")->fault_bytes == 4096,
	      "the child's fault of an inherited mapping");
	CHECK_EQ_U64(lib->fault_bytes, 65536);
}

static void test_bounded(void)
{
	char path[64];
	struct dl_proc *p;

	for (int i = 0; i < DL_FILES_TRACKED + 10; i++) {
		snprintf(path, sizeof(path), "/many/%d", i);
		open_fd(PID + 1, 5, path);
		read_fd(PID + 1, PID + 1, 5, 2, 1, 0);
	}
	p = dl_summary_find(&sum, PID + 1);
	CHECK_EQ_U64(p->files.files.n, DL_FILES_TRACKED);
	CHECK_EQ_U64(p->files.more.files, 10);
	CHECK_EQ_U64(p->files.more.reads, 10);
	CHECK_EQ_U64(p->files.more.read_bytes, 20);
}

static void test_json(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	/* A name the traced side chose: a space, a newline, a quote and a byte that is no UTF-8. */
	open_fd(PID, 9, "/data/my shard\n\"1\".\xff");
	read_fd(PID, PID, 9, 3, 1, 0);
	f = open_memstream(&buf, &len);
	{
		struct dl_report_model m;

		dl_report_model_build(&m, &sum, NULL, NULL);
		CHECK(dl_report_json(f, &m) == 0, "json");
		dl_report_model_free(&m);
	}
	fclose(f);
	CHECK(strstr(buf, "\"path\":\"/data/my shard\\n\\\"1\\\".\xef\xbf\xbd\"") != NULL,
	      "the hostile path escaped (newline, quotes) and fixed (U+FFFD) in the JSON");
	CHECK(strstr(buf, "\"path\":\"/data/a\",\"read_bytes\":1048576,\"reads\":2,\"read_ns\":1010,"
			  "\"disk_bytes\":1048576") != NULL, "file a in the JSON");
	/* 64 listed of 4096 kept: the others are in files_more with the 10 past the bound. */
	CHECK(strstr(buf, "\"files_more\":{\"files\":4042,\"reads\":4042,\"read_bytes\":8084") != NULL,
	      "files_more of the bounded process");
	free(buf);
}

static void test_small_reads(void)
{
	struct dl_summary s2;
	struct dl_stream st2 = { 0 };
	struct dl_diagnosis *d = calloc(1, sizeof(*d));
	struct dl_correlator *c = dl_corr_new(&(struct dl_corr_opts){ 0 });
	struct dl_sched_ev run;
	bool found = false;

	dl_summary_init(&s2);
	dl_stream_add(&st2, dl_summary_sink, &s2);
	st = st2;
	/* The reader ran for 1 ms; 9 reads of 4 KiB took 90 us of it (9%): flagged. */
	memset(&run, 0, sizeof(run));
	run.h = (struct dl_hdr){ .size = sizeof(run), .kind = DL_EV_SCHED, .ts = 0, .tgid = 300, .tid = 301 };
	run.dur_ns = 1000000;
	run.state = DL_ST_RUNNING;
	open_fd(300, 3, "/data/small");
	for (int i = 0; i < 9; i++)
		read_fd(300, 301, 3, 4096, 10000, 0);
	read_fd(300, 301, 3, 0, 100, 0);
	CHECK(dl_stream_emit(&st, &run, sizeof(run)) == 0, "sched");
	dl_diagnose(c, &s2, &(struct dl_diag_opts){ 0 }, d);
	for (int i = 0; i < d->nfindings; i++)
		if (!strcmp(d->findings[i].rule, "small-reads")) {
			found = true;
			CHECK(d->findings[i].ev[0].value == 9, "small_reads %g", d->findings[i].ev[0].value);
			CHECK(d->findings[i].ev[1].value == 10, "reads %g", d->findings[i].ev[1].value);
		}
	CHECK(found, "small-reads not raised");
	free(d);
	dl_corr_free(c);
	dl_summary_free(&s2);
	dl_stream_free(&st);
}

/* A path with no NUL in its 256 bytes is malformed: sinks read it as a C string. */
static void test_malformed_path(void)
{
	struct dl_stream s = { 0 };
	struct dl_file_open_ev e;

	memset(&e, 'x', sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_FILE_OPEN, .ts = 1, .tgid = PID, .tid = PID };
	CHECK(dl_stream_emit(&s, &e, sizeof(e)) == -1, "an unterminated path was accepted");
	CHECK_EQ_U64(s.malformed, 1);
	e.path[DL_PATH_LEN - 1] = '\0';
	e.h.ts = 1;
	e.cwd_ino = 0;
	e.cwd_dev = 0;
	e.ino32 = 0;
	CHECK(dl_stream_emit(&s, &e, sizeof(e)) == 0, "a terminated path was refused");
	dl_stream_free(&s);
}

int main(void)
{
	test_malformed_path();
	dl_summary_init(&sum);
	dl_stream_add(&st, dl_summary_sink, &sum);
	test_fd_table();
	test_page_faults();
	test_bounded();
	test_json();
	dl_stream_free(&st);
	dl_summary_free(&sum);
	test_small_reads();
	return check_report("test_files");
}
