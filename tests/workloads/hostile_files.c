// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reads files a traced process may throw at dlbpf: names with a space, a
 * newline, bytes that are not UTF-8 and a terminal escape; a file deleted
 * while open; and a child killed in the middle of its reads. Prints what it
 * read as JSON (paths hex-encoded: they are not text), the truth of the
 * files test's bad-input case.
 *
 *   hostile_files DIR
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 8192

static const struct {
	const char *name;
	long size;
} files[] = {
	{ "with space.dat", 100003 }, { "new\nline.dat", 50001 }, { "bad\xff\xfe.dat", 70007 },
	{ "esc\x1b[2J.dat", 33333 }, { "gone.dat", 40009 },
};
#define NFILES (sizeof(files) / sizeof(files[0]))

static int make(const char *name, long size)
{
	static char block[4096];
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return -1;
	memset(block, 'x', sizeof(block));
	for (long left = size; left > 0;) {
		ssize_t n = write(fd, block, left < (long)sizeof(block) ? (size_t)left : sizeof(block));

		if (n <= 0) {
			close(fd);
			return -1;
		}
		left -= n;
	}
	return close(fd);
}

static void hex(const char *s, char *out)
{
	for (; *s; s++, out += 2)
		sprintf(out, "%02x", (unsigned char)*s);
	*out = '\0';
}

int main(int argc, char **argv)
{
	static char buf[CHUNK];
	long long bytes[NFILES] = { 0 }, calls[NFILES] = { 0 };
	char dir[4096], h[256];
	int fds[NFILES], pipefd[2], status;
	pid_t child;

	if (argc != 2 || chdir(argv[1]) || !getcwd(dir, sizeof(dir))) {
		fprintf(stderr, "usage: %s DIR (an existing directory)\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < NFILES; i++)
		if (make(files[i].name, files[i].size) || (fds[i] = open(files[i].name, O_RDONLY)) < 0) {
			perror(files[i].name);
			return 1;
		}
	/* Deleted while open: its reads still name the path it was opened by. */
	unlink("gone.dat");
	for (size_t i = 0; i < NFILES; i++) {
		ssize_t n;

		do {
			n = read(fds[i], buf, sizeof(buf));
			if (n < 0)
				return 1;
			calls[i]++;
			bytes[i] += n;
		} while (n > 0);
		close(fds[i]);
	}
	/* A child reads three chunks, then blocks on a pipe nobody writes: killed there, mid-read. */
	if (pipe(pipefd))
		return 1;
	child = fork();
	if (child == 0) {
		int fd = open(files[0].name, O_RDONLY);

		for (int k = 0; k < 3; k++)
			if (read(fd, buf, 4096) != 4096)
				_exit(1);
		read(pipefd[0], buf, 1);
		_exit(0);
	}
	if (child < 0)
		return 1;
	nanosleep(&(struct timespec){ 0, 300 * 1000 * 1000 }, NULL);
	kill(child, SIGKILL);
	if (waitpid(child, &status, 0) != child || !WIFSIGNALED(status))
		return 1;
	printf("{\"pid\":%d,\"dir\":\"", (int)getpid());
	hex(dir, h);
	printf("%s\",\"files\":[", h);
	for (size_t i = 0; i < NFILES; i++) {
		hex(files[i].name, h);
		printf("%s{\"hex\":\"%s\",\"read_bytes\":%lld,\"reads\":%lld}", i ? "," : "", h, bytes[i], calls[i]);
	}
	hex(files[0].name, h);
	printf("],\"child\":{\"pid\":%d,\"hex\":\"%s\",\"read_bytes\":12288,\"reads\":3}}\n", (int)child, h);
	unlink(files[0].name), unlink(files[1].name), unlink(files[2].name), unlink(files[3].name);
	return 0;
}
