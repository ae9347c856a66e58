// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where a process's glibc keeps pthread key values, from its libthread_db
 * descriptors: the same as measured by setting a key (this process, another
 * of its threads, a child), and by hand for glibcs of other layouts
 * (fake_glibc.c, built three ways by tests/tests.mk).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "capture/glibctsd.h"

static void *measure_in_thread(void *arg)
{
	*(uint32_t *)arg = dl_glibc_keys_off_self();
	return NULL;
}

static void test_this_glibc(void)
{
	uint32_t self = dl_glibc_keys_off_self(), other = 0;
	int pipefd[2];
	pthread_t t;
	pid_t child;
	char go;

	CHECK(self > 0 && self % 8 == 0, "measured: +%u", self);
	CHECK(dl_glibc_keys_off_of(getpid(), NULL) == self, "descriptors of this process's glibc: +%u, measured +%u",
	      dl_glibc_keys_off_of(getpid(), NULL), self);
	CHECK(pthread_create(&t, NULL, measure_in_thread, &other) == 0 && pthread_join(t, NULL) == 0, "thread");
	CHECK(other == self, "measured in another thread: +%u, in main +%u", other, self);

	CHECK(pipe(pipefd) == 0, "pipe");
	child = fork();
	if (child == 0) {
		close(pipefd[1]);
		(void)!read(pipefd[0], &go, 1);
		_exit(0);
	}
	close(pipefd[0]);
	CHECK(dl_glibc_keys_off_of(child, NULL) == self, "a child's: +%u", dl_glibc_keys_off_of(child, NULL));
	close(pipefd[1]);
	waitpid(child, NULL, 0);
	CHECK(dl_glibc_keys_off_of(child, NULL) == 0, "a process gone: +%u", dl_glibc_keys_off_of(child, NULL));
}

static int from_file(const char *dir, const char *name, uint32_t *off)
{
	char path[PATH_MAX];
	int fd, err;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -EBADF;
	err = dl_glibc_keys_off_fd(fd, off);
	close(fd);
	return err;
}

static void test_other_glibcs(void)
{
	char exe[PATH_MAX] = "", *dir;
	uint32_t off = 0;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int err;

	CHECK(n > 0, "readlink /proc/self/exe");
	exe[n > 0 ? n : 0] = '\0';
	dir = dirname(exe);
	/* specific[] at 2000, after a first block of 32 keys of 16 bytes: 2000 - 512. */
	err = from_file(dir, "fake-glibc-1488.so", &off);
	CHECK(err == 0 && off == 1488, "a glibc of another layout: %d, +%u", err, off);
	err = from_file(dir, "fake-glibc-entry24.so", &off);
	CHECK(err == -ENOTSUP, "24-byte key entries, which BPF does not read: %d", err);
	err = from_file(dir, "fake-glibc-none.so", &off);
	CHECK(err == -ENOENT, "a library without the descriptors: %d", err);
	err = from_file("/proc/self", "status", &off);
	CHECK(err == -ENOENT, "not an ELF file: %d", err);
}

int main(void)
{
	test_this_glibc();
	test_other_glibcs();
	return check_report("test_glibctsd");
}
