// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE   /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "capture/procfs.h"
#include "capture/sysevents.h"
#include "log.h"

const char *const dl_tracefs_roots[DL_TRACEFS_ROOTS] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };

int dl_tracefs_id_read(int fd)
{
	char buf[24], *end;
	ssize_t n = dl_read_small_fd(fd, buf, sizeof(buf));
	long id;

	if (n < 0)
		return (int)n;
	id = strtol(buf, &end, 10);
	return end != buf && (*end == '\n' || *end == '\0') && id >= 0 && id <= INT32_MAX ? (int)id : -EINVAL;
}

int dl_perf_tp_open(int id)
{
	struct perf_event_attr attr = { .type = PERF_TYPE_TRACEPOINT, .size = sizeof(attr), .config = (__u64)id };
	int fd = (int)syscall(__NR_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int dl_sysevent_id(const char *event)
{
	int err = -ENOENT;

	for (size_t i = 0; i < DL_TRACEFS_ROOTS; i++) {
		char path[128];
		int fd, id;

		snprintf(path, sizeof(path), "%s/events/syscalls/%s/id", dl_tracefs_roots[i], event);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (errno != ENOENT)
				err = -errno;
			continue;
		}
		id = dl_tracefs_id_read(fd);
		if (id >= 0)
			return id;
	}
	return err;
}

struct bpf_link *dl_sysevent_attach(struct dl_sysevents *s, struct bpf_program *prog, const char *event)
{
	struct bpf_link *link;
	int id, pfd, keep, err;

	if (s->n >= DL_SYSEVENTS_MAX) {
		errno = E2BIG;
		return NULL;
	}
	id = dl_sysevent_id(event);
	if (id < 0) {
		errno = -id;
		return NULL;
	}
	pfd = dl_perf_tp_open(id);
	if (pfd < 0) {
		errno = -pfd;
		return NULL;
	}
	keep = fcntl(pfd, F_DUPFD_CLOEXEC, 0);
	if (keep < 0) {
		err = errno;
		close(pfd);
		errno = err;
		return NULL;
	}
	/* The link owns pfd once made; libbpf leaves it to the caller when it fails. */
	link = bpf_program__attach_perf_event(prog, pfd);
	if (!link) {
		err = errno;
		close(pfd);
		close(keep);
		errno = err;
		return NULL;
	}
	/*
	 * A kernel without perf links (5.15) attaches the program to the event itself (libbpf's
	 * link is then the event's own fd): it runs until the event is gone, so a reference kept
	 * for the closer would keep it running after dlbpf. The link's destroy closes it here.
	 */
	if (bpf_link__fd(link) == pfd) {
		close(keep);
		return link;
	}
	s->fd[s->n++] = keep;
	return link;
}

static bool kept(const struct dl_sysevents *s, int fd)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->fd[i] == fd)
			return true;
	return false;
}

/*
 * In a child of a multithreaded process: system calls only. The last close of
 * an event pays its wait, so this one waits for dlbpf to close its copies
 * first (EOF on go).
 */
_Noreturn static void close_in_child(const struct dl_sysevents *s, int go)
{
	int top = go;
	sigset_t all;
	char c;

	/* The terminal's Ctrl-C is for dlbpf; a kill would only move these closes into the exit. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* Nothing else of dlbpf's: a pipe reader waits for EOF, the watchdog for dlbpf's end. */
	for (size_t i = 0; i < s->n; i++)
		top = s->fd[i] > top ? s->fd[i] : top;
	for (int fd = 0; fd < top; fd++)
		if (!kept(s, fd) && fd != go)
			close(fd);
	if (syscall(__NR_close_range, (unsigned)top + 1, ~0u, 0) != 0)
		for (int fd = top + 1; fd < 4096; fd++)
			close(fd);
	while (read(go, &c, 1) < 0 && errno == EINTR)
		;
	close(go);
	for (size_t i = 0; i < s->n; i++)
		close(s->fd[i]);
	_exit(0);
}

void dl_sysevents_release(struct dl_sysevents *s)
{
	pid_t child = -1;
	int status, go[2] = { -1, -1 };

	if (!s->n)
		return;
	for (size_t i = 0; i < s->n; i++)
		ioctl(s->fd[i], PERF_EVENT_IOC_DISABLE, 0);
	if (!s->no_closer && pipe2(go, O_CLOEXEC) == 0) {
		/* Two forks: the closer is nobody's child to wait for, and no zombie of dlbpf's. */
		child = fork();
		if (child == 0) {
			close(go[1]);
			if (fork() == 0)
				close_in_child(s, go[0]);
			_exit(0);
		}
		close(go[0]);
	}
	if (child < 0)
		dl_info("no child to close the syscall events (%s): closing them here, one grace period each",
			 s->no_closer ? "test hook" : strerror(errno));
	else
		while (waitpid(child, &status, 0) < 0 && errno == EINTR)
			;
	for (size_t i = 0; i < s->n; i++)
		close(s->fd[i]);
	s->n = 0;
	/* Last: the closer's EOF. Without a closer, only the pipe itself (a fork that failed). */
	if (go[1] >= 0)
		close(go[1]);
}
