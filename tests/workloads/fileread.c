// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reads files the ways a data loader does, and prints what it did per
 * process and per file: the truth the files test compares dlbpf with. Every
 * path is opened relative to DIR (chdir first), the way the test checks that
 * dlbpf names files as the process sees them.
 *
 *   fileread DIR [--wait] [--io-kb N]
 *     DIR holds held.dat, a.dat, b.dat, c.dat, d.dat and e.dat (the test
 *     writes them);
 *     --wait opens held.dat, prints "ready" and reads one line from stdin
 *     before anything else, so a tracer attached in between finds held.dat
 *     already open; and once done, reads a second line before it exits, so
 *     the tracer reads its records while it still runs (a data loader does);
 *     --io-kb N reads in N KiB calls (64; a multiple of 4, for O_DIRECT).
 *
 * Then: held.dat is read through the fd opened before the line; a.dat is
 * dropped from the page cache and read (uncached); b.dat is opened on the fd
 * number a.dat had (fd reuse) and read with readv and preadv; a child
 * forked then reads c.dat through an fd its parent opened, and reads a.dat
 * again (cached: the parent just read it). Before the fork, d.dat is read
 * uncached with O_DIRECT in pread64 calls (the page cache never sees it),
 * and e.dat is mapped and each of its pages touched: no read call, so
 * nothing dlbpf can attribute to it ("mmap": true, reads and bytes 0; its
 * io_delta is what the faults brought from disk). /proc/self/io read_bytes
 * around each file's reads is printed as io_delta: what the task submitted
 * to the disk meanwhile, the kernel's own count.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handshake.h"

struct file_truth {
	char path[4096];
	long long read_bytes, reads, io_delta;
	int fd;
	bool mmap;
};

static char *buf;
static size_t io_bytes = 64 << 10;

static long long io_read_bytes(void)
{
	char line[128];
	long long v = -1;
	FILE *f = fopen("/proc/self/io", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		sscanf(line, "read_bytes: %lld", &v);
	fclose(f);
	return v;
}

enum how { PLAIN, VECTOR, DIRECT };

/* Reads fd to its end, counting each call (the one at end of file too). */
static int read_to_end(int fd, enum how how, struct file_truth *t)
{
	long long before = io_read_bytes(), off = 0;
	ssize_t n;

	do {
		if (how == PLAIN) {
			n = read(fd, buf, io_bytes);
		} else if (how == DIRECT) {
			/* buf is page-aligned and io_bytes a multiple of a page: what O_DIRECT asks. */
			n = pread(fd, buf, io_bytes, off);
		} else {
			/* readv and preadv in turn, two iovecs each: not a plain read in disguise. */
			struct iovec iov[2] = { { buf, io_bytes / 2 }, { buf + io_bytes / 2, io_bytes - io_bytes / 2 } };

			n = t->reads & 1 ? preadv(fd, iov, 2, off) : readv(fd, iov, 2);
		}
		if (n < 0) {
			perror(t->path);
			return -1;
		}
		t->reads++;
		t->read_bytes += n;
		off += n;
		/* preadv leaves the offset where it was: the next readv goes on from here. */
		if (how == VECTOR)
			lseek(fd, off, SEEK_SET);
	} while (n > 0);
	t->io_delta = io_read_bytes() - before;
	return 0;
}

static int open_flags(const char *dir, const char *name, struct file_truth *t, int flags)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->path, sizeof(t->path), "%s/%s", dir, name);
	t->fd = open(name, O_RDONLY | flags);
	if (t->fd < 0)
		perror(name);
	return t->fd;
}

static int open_file(const char *dir, const char *name, struct file_truth *t)
{
	return open_flags(dir, name, t, 0);
}

/* Maps name and touches each page: the bytes come in by page faults, never by a read call. */
static int map_file(const char *dir, const char *name, struct file_truth *t)
{
	long long before = io_read_bytes();
	volatile unsigned char sum = 0;
	long page = sysconf(_SC_PAGESIZE);
	struct stat st;
	unsigned char *p;

	if (open_file(dir, name, t) < 0 || fstat(t->fd, &st))
		return -1;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, t->fd, 0);
	if (p == MAP_FAILED) {
		perror(name);
		return -1;
	}
	for (off_t o = 0; o < st.st_size; o += page)
		sum += p[o];
	munmap(p, (size_t)st.st_size);
	close(t->fd);
	t->mmap = true;
	t->io_delta = io_read_bytes() - before;
	return 0;
}

static void drop_cache(const char *name)
{
	int fd = open(name, O_RDONLY);

	if (fd >= 0) {
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
}

static void print_truth(const struct file_truth *t, int n)
{
	printf("{\"pid\":%d,\"files\":[", (int)getpid());
	for (int i = 0; i < n; i++)
		printf("%s{\"path\":\"%s\",\"fd\":%d,\"read_bytes\":%lld,\"reads\":%lld,\"io_delta\":%lld%s}",
		       i ? "," : "", t[i].path, t[i].fd, t[i].read_bytes, t[i].reads, t[i].io_delta,
		       t[i].mmap ? ",\"mmap\":true" : "");
	printf("]}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct file_truth held, a, b, c, d, e, again;
	char dir[4096];
	bool wait = false;
	pid_t child;
	int status;

	if (argc < 2)
		return unknown_argument(argv[0], "(DIR missing)");
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--wait"))
			wait = true;
		else if (!strcmp(argv[i], "--io-kb") && i + 1 < argc)
			io_bytes = (size_t)atol(argv[++i]) << 10;
		else
			return unknown_argument(argv[0], argv[i]);
	}
	if (!io_bytes || io_bytes % 4096 || chdir(argv[1]) || !getcwd(dir, sizeof(dir)) ||
	    posix_memalign((void **)&buf, 4096, io_bytes))
		return 1;
	if (open_file(dir, "held.dat", &held) < 0)
		return 1;
	if (wait && ready_then_wait())
		return 1;
	if (read_to_end(held.fd, PLAIN, &held))
		return 1;
	drop_cache("a.dat");
	if (open_file(dir, "a.dat", &a) < 0 || read_to_end(a.fd, PLAIN, &a))
		return 1;
	close(a.fd);
	/* The lowest free fd: the number a.dat had, now naming b.dat. */
	if (open_file(dir, "b.dat", &b) < 0 || read_to_end(b.fd, VECTOR, &b))
		return 1;
	close(b.fd);
	drop_cache("d.dat");
	if (open_flags(dir, "d.dat", &d, O_DIRECT) < 0 || read_to_end(d.fd, DIRECT, &d))
		return 1;
	close(d.fd);
	drop_cache("e.dat");
	if (map_file(dir, "e.dat", &e))
		return 1;
	if (open_file(dir, "c.dat", &c) < 0)
		return 1;
	print_truth((struct file_truth[]){ held, a, b, d, e }, 5);
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		if (read_to_end(c.fd, PLAIN, &c) || open_file(dir, "a.dat", &again) < 0 ||
		    read_to_end(again.fd, PLAIN, &again))
			_exit(1);
		print_truth((struct file_truth[]){ c, again }, 2);
		_exit(0);
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	if (wait)
		ready_then_wait();
	return 0;
}
