// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reads a file from disk, buffered and then with O_DIRECT, after dropping it
 * from the page cache, and prints the /proc/self/io read_bytes delta: the
 * kernel's own account the block-I/O test compares dlbpf with.
 *
 *   ioread FILE [--wait] [--fork]
 *     --wait  print "ready" and read one line from stdin before reading
 *     --fork  do the reading in a child forked after that line (process-tree test)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static long long read_bytes(void)
{
	char line[128];
	long long v = -1;
	FILE *f = fopen("/proc/self/io", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "read_bytes: %lld", &v) == 1)
			break;
	fclose(f);
	return v;
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
	const size_t chunk = 1 << 20;
	long long total = 0;
	ssize_t n;
	void *buf;
	int fd;

	if (posix_memalign(&buf, 4096, chunk))
		return -1;
	fd = open(path, O_RDONLY | flags);
	if (fd < 0) {
		perror(path);
		free(buf);
		return -1;
	}
	while ((n = read(fd, buf, chunk)) > 0)
		total += n;
	close(fd);
	free(buf);
	return n < 0 ? -1 : total;
}

#define RESULT_FMT "{\"pid\":%d,\"ppid\":%d,\"read_bytes_delta\":%lld,\"buffered\":%lld,\"direct\":%lld}\n"

/*
 * Code the process runs for the first time can fault its pages in from disk,
 * which is read I/O too: everything used around the measured window runs once
 * before it, so the only reads in the window are the file's.
 */
static void warm_up(const char *path)
{
	char buf[256];

	read_bytes();
	drop_cache(path);
	snprintf(buf, sizeof(buf), RESULT_FMT, getpid(), getppid(), 1LL, 1LL, 1LL);
}

static int do_reads(const char *path)
{
	long long before, after, buffered, direct;
	char out[256];
	int n;

	if (drop_cache(path))
		return 1;
	before = read_bytes();
	buffered = read_all(path, 0);
	if (drop_cache(path))
		return 1;
	direct = read_all(path, O_DIRECT);
	after = read_bytes();
	if (before < 0 || after < 0 || buffered < 0 || direct < 0)
		return 1;
	n = snprintf(out, sizeof(out), RESULT_FMT, getpid(), getppid(), after - before, buffered, direct);
	return write(STDOUT_FILENO, out, (size_t)n) == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	int wait = 0, forking = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE [--wait] [--fork]\n", argv[0]);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--wait"))
			wait = 1;
		else if (!strcmp(argv[i], "--fork"))
			forking = 1;
	}
	warm_up(argv[1]);
	if (wait) {
		char line[16];

		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	if (forking) {
		int status;
		pid_t pid = fork();

		if (pid < 0)
			return 1;
		if (pid == 0)
			_exit(do_reads(argv[1]));
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
			return 1;
		return WEXITSTATUS(status);
	}
	/* _exit: no exit-time code runs after the measured window. */
	_exit(do_reads(argv[1]));
}
