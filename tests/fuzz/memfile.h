/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A fuzz input as a file: dlbpf reads recordings and ELF files by path or
 * descriptor, so the harnesses hand it a memfd, through /proc/self/fd/N like
 * any path. One memfd per harness, rewritten for each input: no disk I/O.
 */
#ifndef DLBPF_FUZZ_MEMFILE_H
#define DLBPF_FUZZ_MEMFILE_H

/* memfd_create needs _GNU_SOURCE, defined by the harness before its first include. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct memfile {
	int fd;
	char path[32];
};

static inline void memfile_open(struct memfile *m, const char *name)
{
	m->fd = memfd_create(name, MFD_CLOEXEC);
	if (m->fd < 0) {
		perror("memfd_create");
		abort();
	}
	snprintf(m->path, sizeof(m->path), "/proc/self/fd/%d", m->fd);
}

/* Makes the file hold exactly data[0..size). */
static inline void memfile_put(struct memfile *m, const uint8_t *data, size_t size)
{
	size_t done = 0;

	if (ftruncate(m->fd, 0)) {
		perror("ftruncate");
		abort();
	}
	while (done < size) {
		ssize_t n = pwrite(m->fd, data + done, size - done, (off_t)done);

		if (n <= 0) {
			perror("pwrite");
			abort();
		}
		done += (size_t)n;
	}
}

#endif
