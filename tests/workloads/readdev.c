// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reads a block device with O_DIRECT, 1 MiB at a time, going on past reads
 * that fail, and prints what read() returned and the /proc/self/io
 * read_bytes delta (the kernel counts a read's bytes as they are submitted,
 * whether the device delivers them or not).
 *
 * A tracer that starts at exec also sees the reads of the process's own code
 * and libraries where their pages had left the page cache (3 pages once, in a
 * full test run). Those are done before the window: everything mapped is
 * locked in first (read in, if it must be, and never again), and the
 * /proc/self/io total then ("start_read_bytes") bounds them, as the total at
 * the end ("end_read_bytes") bounds all the process read.
 *
 *   readdev DEV MIB    read the first MIB MiB of DEV
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHUNK (1 << 20)

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

int main(int argc, char **argv)
{
	long long start, before, after, end, ok = 0;
	long mib, failed = 0, eio = 0;
	void *buf;
	int fd;

	if (argc != 3 || (mib = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: %s DEV MIB\n", argv[0]);
		return 2;
	}
	if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
		perror("mlockall");
		return 1;
	}
	start = read_bytes();
	if (posix_memalign(&buf, 4096, CHUNK))
		return 1;
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	/* Everything the window uses runs once before it (first calls can fault code in from disk). */
	read_bytes();
	pread(fd, buf, 0, 0);
	before = read_bytes();
	for (long i = 0; i < mib; i++) {
		ssize_t n = pread(fd, buf, CHUNK, (off_t)i * CHUNK);

		if (n < 0) {
			failed++;
			eio += errno == EIO;
		} else {
			ok += n;
		}
	}
	after = read_bytes();
	close(fd);
	end = read_bytes();
	printf("{\"pid\":%d,\"read_bytes_delta\":%lld,\"start_read_bytes\":%lld,\"end_read_bytes\":%lld,"
	       "\"ok_bytes\":%lld,\"failed_reads\":%ld,\"eio\":%ld}\n",
	       (int)getpid(), after - before, start, end, ok, failed, eio);
	return 0;
}
