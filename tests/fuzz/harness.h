/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What every harness needs: a place to say why it failed, and inputs as files. */
#ifndef DLBPF_FUZZ_HARNESS_H
#define DLBPF_FUZZ_HARNESS_H

/* memfd_create and program_invocation_short_name need _GNU_SOURCE, defined before the first include. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * run-fuzz.sh passes -close_fd_mask=3, which drops the collector's messages on
 * stderr once the harness is initialized; a copy of stderr taken before that
 * keeps the harness's own verdict in the log.
 */
static int fail_fd = 2;

static inline void fail_init(void)
{
	int fd = dup(2);

	if (fd >= 0)
		fail_fd = fd;
}

/*
 * A harness's own checkers and reference implementations: their branches are not
 * the code under test, and SanitizerCoverage's trace of every comparison in them
 * cost more than the code they check. ASan and UBSan still instrument them; not
 * inlined, since an inlined body is traced as part of its caller.
 */
#define CHECKER __attribute__((no_sanitize("coverage"), noinline))

/* A broken invariant: said, then abort(), which libFuzzer reports with the input. */
#define FAIL(...) do { \
		dprintf(fail_fd, "%s: ", program_invocation_short_name); \
		dprintf(fail_fd, __VA_ARGS__); \
		dprintf(fail_fd, "\n"); \
		abort(); \
	} while (0)

/*
 * A fuzz input as a file: dlbpf reads recordings and ELF files by path or
 * descriptor, so the harnesses hand it a memfd, through /proc/self/fd/N like
 * any path. One memfd per harness, rewritten for each input: no disk I/O.
 */
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

/* What the file holds now (written through its path by the code under test); free() it. */
static inline char *memfile_get(struct memfile *m, size_t *size)
{
	struct stat st;
	char *buf;
	size_t done = 0;

	if (fstat(m->fd, &st)) {
		perror("fstat");
		abort();
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		abort();
	while (done < (size_t)st.st_size) {
		ssize_t n = pread(m->fd, buf + done, (size_t)st.st_size - done, (off_t)done);

		if (n <= 0) {
			perror("pread");
			abort();
		}
		done += (size_t)n;
	}
	buf[done] = '\0';
	*size = done;
	return buf;
}

/*
 * An output file: dlbpf writes each output to a temporary beside its path and
 * renames it over the path when complete, so outputs cannot be memfds. They are
 * real files in a private directory (tmpfs where /dev/shm is), read back by
 * path, and removed at exit.
 */
struct outpath {
	char path[320];
};

static char outpath_dir[256];
static struct outpath *outpath_all[8];
static int outpath_n;

static inline void outpath_cleanup(void)
{
	for (int i = 0; i < outpath_n; i++)
		unlink(outpath_all[i]->path);
	rmdir(outpath_dir);
}

static inline void outpath_open(struct outpath *o, const char *name)
{
	if (!outpath_dir[0]) {
		snprintf(outpath_dir, sizeof(outpath_dir), "%s/dlbpf-fuzz-XXXXXX",
			 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		if (!mkdtemp(outpath_dir)) {
			perror("mkdtemp");
			abort();
		}
		atexit(outpath_cleanup);
	}
	if (outpath_n == (int)(sizeof(outpath_all) / sizeof(outpath_all[0])))
		abort();
	outpath_all[outpath_n++] = o;
	snprintf(o->path, sizeof(o->path), "%s/%s", outpath_dir, name);
}

/* What the code under test wrote at the path; free() it. */
static inline char *outpath_get(const struct outpath *o, size_t *size)
{
	struct memfile m = { .fd = open(o->path, O_RDONLY | O_CLOEXEC) };
	char *buf;

	if (m.fd < 0) {
		perror(o->path);
		abort();
	}
	buf = memfile_get(&m, size);
	close(m.fd);
	return buf;
}

#endif
