// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reads a file from disk, buffered and then with O_DIRECT, after dropping it
 * from the page cache, and prints the /proc/self/io read_bytes delta: the
 * kernel's own account the block-I/O test compares dlbpf with.
 *
 *   ioread FILE [--wait] [--fork] [--rounds N] [--write MIB]
 *     --wait       print "ready" and read one line from stdin before reading
 *     --fork       do the reading in a child forked after that line (process-tree test)
 *     --rounds N   N children one after the other, each reading (implies --fork)
 *     --write MIB  each child also writes MIB MiB with O_DIRECT and MIB MiB
 *                  buffered then fsync'd, to FILE.w<pid> (removed after), and
 *                  prints write_bytes_delta (/proc/self/io write_bytes)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handshake.h"

#define CHUNK (1 << 20)

struct io_acct {
	long long read_bytes, write_bytes;
};

static int io_acct(struct io_acct *a)
{
	char line[128];
	FILE *f = fopen("/proc/self/io", "r");

	a->read_bytes = a->write_bytes = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "read_bytes: %lld", &a->read_bytes);
		sscanf(line, "write_bytes: %lld", &a->write_bytes);
	}
	fclose(f);
	return a->read_bytes < 0 || a->write_bytes < 0 ? -1 : 0;
}

static int drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -1;
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return 0;
}

static long long read_all(const char *path, int flags)
{
	long long total = 0;
	ssize_t n;
	void *buf;
	int fd;

	if (posix_memalign(&buf, 4096, CHUNK))
		return -1;
	fd = open(path, O_RDONLY | flags);
	if (fd < 0) {
		perror(path);
		free(buf);
		return -1;
	}
	while ((n = read(fd, buf, CHUNK)) > 0)
		total += n;
	close(fd);
	free(buf);
	return n < 0 ? -1 : total;
}

/* Writes mib MiB to path with flags (O_DIRECT, or 0 and then fsync); returns the bytes written. */
static long long write_all(const char *path, int flags, int mib)
{
	long long total = 0;
	void *buf;
	int fd;

	if (posix_memalign(&buf, 4096, CHUNK))
		return -1;
	memset(buf, 0x5a, CHUNK);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | flags, 0600);
	if (fd < 0) {
		perror(path);
		free(buf);
		return -1;
	}
	for (int i = 0; i < mib; i++) {
		if (write(fd, buf, CHUNK) != CHUNK) {
			total = -1;
			break;
		}
		total += CHUNK;
	}
	if (total >= 0 && !flags && fsync(fd))
		total = -1;
	close(fd);
	free(buf);
	return total;
}

#define RESULT_FMT "{\"pid\":%d,\"ppid\":%d,\"read_bytes_delta\":%lld,\"buffered\":%lld,\"direct\":%lld"

/*
 * Code the process runs for the first time can fault its pages in from disk,
 * which is read I/O too: everything used around the measured window runs once
 * before it, so the only reads in the window are the file's.
 */
static void warm_up(const char *path, int write_mib)
{
	struct io_acct a;
	char buf[512];

	io_acct(&a);
	drop_cache(path);
	snprintf(buf, sizeof(buf), RESULT_FMT ",\"write_bytes_delta\":%lld}\n", getpid(), getppid(), 1LL, 1LL, 1LL,
		 1LL);
	if (write_mib) {
		snprintf(buf, sizeof(buf), "%s.w%d", path, (int)getpid());
		write_all(buf, O_DIRECT, 1);
		write_all(buf, 0, 1);
		unlink(buf);
	}
}

/*
 * One measured window: the reads, and the writes when asked. Both deltas
 * cover the whole window, so what the writes read (file system metadata)
 * is in the read delta, as it is in what dlbpf sees of the process.
 */
static int do_io(const char *path, int write_mib)
{
	long long buffered, direct, wdirect = 0, wbuffered = 0;
	struct io_acct before, after;
	char out[512], wpath[4200];
	int n;

	if (drop_cache(path) || io_acct(&before))
		return 1;
	buffered = read_all(path, 0);
	if (drop_cache(path))
		return 1;
	direct = read_all(path, O_DIRECT);
	if (write_mib) {
		snprintf(wpath, sizeof(wpath), "%s.w%d", path, (int)getpid());
		wdirect = write_all(wpath, O_DIRECT, write_mib);
		wbuffered = write_all(wpath, 0, write_mib);
	}
	if (io_acct(&after) || buffered < 0 || direct < 0 || wdirect < 0 || wbuffered < 0)
		return 1;
	n = snprintf(out, sizeof(out), RESULT_FMT, getpid(), getppid(), after.read_bytes - before.read_bytes,
		     buffered, direct);
	if (write_mib)
		n += snprintf(out + n, sizeof(out) - (size_t)n,
			      ",\"write_bytes_delta\":%lld,\"written_direct\":%lld,\"written_buffered\":%lld",
			      after.write_bytes - before.write_bytes, wdirect, wbuffered);
	n += snprintf(out + n, sizeof(out) - (size_t)n, "}\n");
	if (write_mib)
		unlink(wpath);   /* after the window: freeing blocks is no write of this process's data */
	return write(STDOUT_FILENO, out, (size_t)n) == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	int wait = 0, rounds = 0, write_mib = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE [--wait] [--fork] [--rounds N] [--write MIB]\n", argv[0]);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--wait"))
			wait = 1;
		else if (!strcmp(argv[i], "--fork"))
			rounds = 1;
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--write") && i + 1 < argc)
			write_mib = atoi(argv[++i]);
		else
			return unknown_argument(argv[0], argv[i]);
	}
	warm_up(argv[1], write_mib);
	if (wait && ready_then_wait())
		return 1;
	for (int r = 0; r < rounds; r++) {
		int status;
		pid_t pid = fork();

		if (pid < 0)
			return 1;
		if (pid == 0)
			_exit(do_io(argv[1], write_mib));
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
			return 1;
	}
	if (rounds)
		return 0;
	/* _exit: no exit-time code runs after the measured window. */
	_exit(do_io(argv[1], write_mib));
}
