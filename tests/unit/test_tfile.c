// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Files of the traced side (capture/tfile.c): a directory stands in for a
 * process's root, with a file of the "host" beside it. Every path is resolved
 * both ways (openat2 RESOLVE_IN_ROOT, and the component walk used where the
 * kernel lacks it) and must name the same thing: the file inside the root, or
 * nothing, never the host's file. Refused kinds come back at once (a FIFO
 * opened for reading the plain way would block this test forever).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "capture/tfile.h"

static char top[64], root[128], secret[128];
static int rootfd;
static struct stat real_st, secret_st;

static void mk(const char *rel, const char *text)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	f = fopen(p, "w");
	CHECK(f != NULL, "create %s", p);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void ln(const char *target, const char *rel)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	CHECK(symlink(target, p) == 0, "symlink %s -> %s", p, target);
}

static void setup(void)
{
	char p[PATH_MAX], target[PATH_MAX * 2];
	FILE *f;

	snprintf(top, sizeof(top), "/tmp/test_tfile.XXXXXX");
	CHECK(mkdtemp(top) != NULL, "mkdtemp");
	snprintf(root, sizeof(root), "%s/root", top);
	snprintf(secret, sizeof(secret), "%s/host-only", top);
	CHECK(mkdir(root, 0755) == 0, "mkdir root");
	f = fopen(secret, "w");
	CHECK(f != NULL, "create the host's file");
	if (f) {
		fputs("host", f);
		fclose(f);
	}
	snprintf(p, sizeof(p), "%s/lib", root);
	CHECK(mkdir(p, 0755) == 0, "mkdir lib");
	snprintf(p, sizeof(p), "%s/lib/sub", root);
	CHECK(mkdir(p, 0755) == 0, "mkdir lib/sub");
	mk("lib/real.so", "inside");
	ln("/lib/real.so", "lib/abs");                  /* absolute, inside */
	ln(secret, "lib/to-host");                      /* absolute, to the host's file */
	/* Enough ".." to reach the host's / from root/lib, then the host file's path. */
	snprintf(target, sizeof(target), "../../../../../../../../../../../..%s", secret);
	ln(target, "lib/dotdot-host");
	ln("chain2", "lib/chain1");
	ln("../lib/abs", "lib/chain2");                 /* relative, then absolute */
	ln("loop2", "lib/loop1");
	ln("loop1", "lib/loop2");
	ln("/lib", "lib/sub/up");                       /* a directory reached by a symlink */
	snprintf(p, sizeof(p), "%s/lib/fifo", root);
	CHECK(mkfifo(p, 0644) == 0, "mkfifo");
	snprintf(p, sizeof(p), "%s/lib/huge.so", root);
	f = fopen(p, "w");
	CHECK(f != NULL && ftruncate(fileno(f), (off_t)(DL_TFILE_MAX_BYTES + 1)) == 0, "sparse file");
	if (f)
		fclose(f);
	ln("/dev/zero", "lib/zero");                    /* a device only through the host's /dev: absent inside */
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(rootfd >= 0, "open root");
	snprintf(p, sizeof(p), "%s/lib/real.so", root);
	CHECK(stat(p, &real_st) == 0 && stat(secret, &secret_st) == 0, "stat");
}

/* Resolves path both ways; returns the common result: 1 the file inside, 2 the host's file, 0 other, or -errno. */
static int resolve_both(const char *path)
{
	int res[2];

	for (int walk = 0; walk < 2; walk++) {
		int fd = dl_resolve_in_root(rootfd, path, walk);
		struct stat st;

		if (fd < 0) {
			res[walk] = fd;
			continue;
		}
		res[walk] = fstat(fd, &st) ? -EIO :
			st.st_dev == real_st.st_dev && st.st_ino == real_st.st_ino ? 1 :
			st.st_dev == secret_st.st_dev && st.st_ino == secret_st.st_ino ? 2 : 0;
		close(fd);
	}
	CHECK(res[0] == res[1], "%s: openat2 gives %d, the walk %d", path, res[0], res[1]);
	return res[1];
}

static void test_resolution(void)
{
	CHECK(resolve_both("/lib/real.so") == 1, "plain path");
	CHECK(resolve_both("lib/real.so") == 1, "relative path");
	CHECK(resolve_both("//lib/./sub/../real.so") == 1, "dots and slashes");
	CHECK(resolve_both("/../../../lib/real.so") == 1, "\"..\" above the root stays at the root");
	CHECK(resolve_both("/lib/abs") == 1, "absolute symlink resolves inside the root");
	CHECK(resolve_both("/lib/chain1") == 1, "chained symlinks");
	CHECK(resolve_both("/lib/sub/up/real.so") == 1, "symlinked directory");
	CHECK(resolve_both("/lib/to-host") == -ENOENT, "absolute symlink to a host file");
	CHECK(resolve_both("/lib/dotdot-host") == -ENOENT, "\"..\" symlink to a host file");
	CHECK(resolve_both(secret) == -ENOENT, "the host file's own path");
	CHECK(resolve_both("/lib/loop1") == -ELOOP, "symlink loop");
	CHECK(resolve_both("/lib/real.so/x") == -ENOTDIR, "a file as a directory");
	CHECK(resolve_both("/lib/missing") == -ENOENT, "missing");
}

static void test_open(void)
{
	struct dl_tfile f;
	char why[160];
	int err;

	err = dl_tfile_open_in(rootfd, "/lib/abs", &f, why, sizeof(why));
	CHECK(err == 0 && f.fd >= 0, "open the library: %d %s", err, why);
	if (!err) {
		char buf[16] = { 0 }, self[32];

		CHECK(read(f.fd, buf, sizeof(buf) - 1) == 6 && !strcmp(buf, "inside"), "read '%s'", buf);
		CHECK(f.st.st_ino == real_st.st_ino, "fstat of another file");
		snprintf(self, sizeof(self), "/proc/self/fd/%d", f.fd);
		CHECK(!strcmp(f.self_path, self), "self path %s", f.self_path);
		dl_tfile_close(&f);
		CHECK(f.fd == -1, "closed");
	}
	err = dl_tfile_open_in(rootfd, "/lib/fifo", &f, why, sizeof(why));
	CHECK(err == -EINVAL && strstr(why, "FIFO") && f.fd == -1, "FIFO: %d %s", err, why);
	err = dl_tfile_open_in(rootfd, "/lib", &f, why, sizeof(why));
	CHECK(err == -EINVAL && strstr(why, "directory"), "directory: %d %s", err, why);
	err = dl_tfile_open_in(rootfd, "/lib/huge.so", &f, why, sizeof(why));
	CHECK(err == -EFBIG && strstr(why, "16 GiB"), "sparse file over the bound: %d %s", err, why);
	err = dl_tfile_open_in(rootfd, "/lib/zero", &f, why, sizeof(why));
	CHECK(err == -ENOENT, "/dev/zero reached from inside the root: %d %s", err, why);
	err = dl_tfile_open_in(rootfd, "/lib/to-host", &f, why, sizeof(why));
	CHECK(err == -ENOENT && f.fd == -1, "host file opened: %d %s", err, why);
	CHECK(!dl_tfile_transient(-ENOENT) && !dl_tfile_transient(-EINVAL) && dl_tfile_transient(-EMFILE),
	      "transient errors");
}

static void test_devices_by_pid(void)
{
	struct dl_tfile f;
	char why[160];
	int err;

	/* This process's own root is the host's: /dev/zero is there, and refused for what it is. */
	err = dl_tfile_open(getpid(), "/dev/zero", &f, why, sizeof(why));
	CHECK(err == -EINVAL && strstr(why, "character device"), "char device: %d %s", err, why);
	err = dl_tfile_open(getpid(), secret, &f, why, sizeof(why));
	CHECK(err == 0, "a file in this process's root: %d %s", err, why);
	dl_tfile_close(&f);
	CHECK(dl_tfile_paths_ours(getpid()), "this process's paths are its own");
	err = dl_tfile_open(0x7ffffff0, "/dev/zero", &f, why, sizeof(why));
	CHECK(err == -ENOENT && f.fd == -1, "a pid that does not exist: %d", err);
}

/*
 * A file this process maps, then deletes and replaces by another at its name: map_files opens the
 * mapped one (as root), by path only the new one is there, and a " (deleted)" path is refused by path.
 */
static void test_mapped(void)
{
	char path[PATH_MAX], why[160], gone[PATH_MAX + 16];
	struct stat mapped_st;
	struct dl_tfile f;
	void *p;
	int fd, err;

	snprintf(path, sizeof(path), "%s/mapped.so", top);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && write(fd, "mapped\n", 7) == 7 && fstat(fd, &mapped_st) == 0, "create %s", path);
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	CHECK(p != MAP_FAILED, "map %s", path);
	close(fd);
	CHECK(unlink(path) == 0, "delete %s", path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && write(fd, "the new one\n", 12) == 12, "replace %s", path);
	close(fd);
	if (p == MAP_FAILED)
		return;
	snprintf(gone, sizeof(gone), "%s (deleted)", path);
	CHECK(dl_tfile_path_deleted(gone) && !dl_tfile_path_deleted(path) && !dl_tfile_path_deleted(" (deleted"),
	      "the deleted mark");
	err = dl_tfile_open_mapped(getpid(), (uint64_t)(uintptr_t)p, (uint64_t)(uintptr_t)p + 4096, gone, &f, why,
				   sizeof(why));
	if (geteuid() == 0) {
		CHECK(err == 0 && f.st.st_ino == mapped_st.st_ino && f.st.st_size == 7,
		      "map_files opens the mapped file, not the one now at its name: %d %s", err, why);
		dl_tfile_close(&f);
	}
	dl_tfile_force_paths(true);
	err = dl_tfile_open_mapped(getpid(), (uint64_t)(uintptr_t)p, (uint64_t)(uintptr_t)p + 4096, gone, &f, why,
				   sizeof(why));
	CHECK(err == -ENOENT && strstr(why, "deleted since it was mapped") && f.fd == -1, "by path, deleted: %d %s",
	      err, why);
	err = dl_tfile_open_mapped(getpid(), (uint64_t)(uintptr_t)p, (uint64_t)(uintptr_t)p + 4096, path, &f, why,
				   sizeof(why));
	CHECK(err == 0 && f.st.st_ino != mapped_st.st_ino && f.st.st_size == 12, "by path, the file now there: %d %s",
	      err, why);
	dl_tfile_close(&f);
	dl_tfile_force_paths(false);
	munmap(p, 4096);
}

static void cleanup(void)
{
	char cmd[PATH_MAX + 16];

	close(rootfd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	CHECK(system(cmd) == 0, "rm %s", top);
}

int main(void)
{
	setup();
	test_resolution();
	test_open();
	test_devices_by_pid();
	test_mapped();
	cleanup();
	return check_report("test_tfile");
}
