// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "capture/watchdog.h"
#include "log.h"

#define MAX_HELD 4096           /* the held map's size (bpf/cuda.bpf.c) */
#define SOCK_FD 3
#define HELD_FD 4

static uint64_t mono_ns(void)
{
	struct timespec ts;

	/* The clock of bpf_ktime_get_ns, which stamps each stop. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Continues the held processes: all of them, or those held past the bound.
 * The keys are gathered first: while dlbpf lives, each SIGCONT takes its
 * entry out of the map under the walk. Returns how many were continued.
 */
static int continue_held(bool all, pid_t parent)
{
	static uint32_t pids[MAX_HELD];
	static uint64_t since[MAX_HELD];
	uint32_t key, next, off = 0;
	uint64_t now = mono_ns();
	size_t n = 0;
	int done = 0;

	for (int steps = 0; n < MAX_HELD && steps < 2 * MAX_HELD; steps++) {
		uint64_t t;

		if (bpf_map_get_next_key(HELD_FD, steps ? &key : NULL, &next))
			break;
		key = next;
		/* Key 0 is the "hold off" mark, no process (and kill(0) would signal a process group). */
		if (!key || bpf_map_lookup_elem(HELD_FD, &key, &t))
			continue;
		if (all || (now > t && now - t > DL_HOLD_MAX_NS)) {
			since[n] = now > t ? now - t : 0;
			pids[n++] = key;
		}
	}
	/* dlbpf is not answering: no one else is held from now on. */
	if (n && !all && !bpf_map_update_elem(HELD_FD, &off, &now, BPF_ANY))
		dl_warn("watchdog: dlbpf is not continuing the processes it holds: the dlopen hold is off from now on");
	for (size_t i = 0; i < n; i++) {
		if (kill((pid_t)pids[i], SIGCONT))
			continue;
		done++;
		if (!all)
			dl_warn("watchdog: pid %u held stopped for %.1f s (longer than %llu s): continued",
				pids[i], (double)since[i] / 1e9, DL_HOLD_MAX_NS / 1000000000ull);
		else if (parent)
			dl_warn("watchdog: dlbpf (pid %d) ended with pid %u held stopped: continued", (int)parent, pids[i]);
	}
	return done;
}

/* Only what it needs: the socket and the map at known numbers, /dev/null for stdin and stdout, stderr kept. */
static void keep_only(int sock, int held_fd)
{
	int a = fcntl(sock, F_DUPFD, 16), b = fcntl(held_fd, F_DUPFD, 16), null = open("/dev/null", O_RDWR);

	if (a < 0 || b < 0 || dup2(a, SOCK_FD) < 0 || dup2(b, HELD_FD) < 0)
		_exit(1);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
	}
	if (syscall(SYS_close_range, HELD_FD + 1, ~0u, 0)) {
		long max = sysconf(_SC_OPEN_MAX);

		for (long fd = HELD_FD + 1; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
			close((int)fd);
	}
}

/* Waits until every thread of parent has exited, its descriptors with it. */
static void wait_gone(pid_t parent, int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	if (pidfd >= 0) {
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
		return;
	}
	/* No pidfd (before Linux 5.3): a child is given another parent once the whole parent has exited. */
	while (getppid() == parent)
		usleep(10000);
}

__attribute__((noreturn)) static void watch(pid_t parent, int sock, int held_fd)
{
	static const int quiet[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU };
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigset_t none;
	int pidfd, fd;

	prctl(PR_SET_NAME, "dlbpf-watchdog");
	/* Out of dlbpf's session and process group: Ctrl-C, Ctrl-Z, a hangup or kill -PGID reach dlbpf alone. */
	setsid();
	for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++)
		sigaction(quiet[i], &ign, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	keep_only(sock, held_fd);
	/* Smaller than anything it guards: the OOM killer should never pick it. */
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "-1000", 5) != 5)
			dl_debug("watchdog: oom_score_adj: %s", strerror(errno));
		close(fd);
	}
	pidfd = (int)syscall(SYS_pidfd_open, parent, 0);
	/* dlbpf may have died before the pidfd named it (its pid then reused): its child has another parent then. */
	if (getppid() != parent) {
		continue_held(true, parent);
		_exit(0);
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = SOCK_FD, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
		int r = poll(p, pidfd >= 0 ? 2 : 1, 1000);
		char c;

		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0) {
			continue_held(false, 0);
			continue;
		}
		if (p[0].revents) {
			if (read(SOCK_FD, &c, 1) == 1) {
				/* dlbpf detached every probe: nothing can be stopped any more; what is left was missed. */
				continue_held(true, 0);
				_exit(0);
			}
			/* End of file without a word: dlbpf died, and is being torn down. */
			break;
		}
		if (p[1].revents)
			break;
	}
	wait_gone(parent, pidfd);
	continue_held(true, parent);
	_exit(0);
}

int dl_watchdog_start(struct dl_watchdog *w, int held_fd)
{
	pid_t parent = getpid(), pid;
	int p[2];

	w->pid = 0;
	w->fd = -1;
	/* A socket, not a pipe: a write to a watchdog that is gone fails instead of raising SIGPIPE. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p))
		return -errno;
	/* stdio buffers would be written twice. */
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		int err = -errno;

		close(p[0]);
		close(p[1]);
		return err;
	}
	if (pid == 0) {
		close(p[1]);
		watch(parent, p[0], held_fd);
	}
	close(p[0]);
	w->pid = pid;
	w->fd = p[1];
	return 0;
}

void dl_watchdog_stop(struct dl_watchdog *w)
{
	ssize_t n;

	if (w->pid <= 0)
		return;
	do
		n = send(w->fd, "q", 1, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	close(w->fd);
	while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
		;
	w->pid = 0;
	w->fd = -1;
}

void dl_watchdog_keep(struct dl_watchdog *w, int held_fd)
{
	int status, err;

	if (w->pid <= 0 || waitpid(w->pid, &status, WNOHANG) != w->pid)
		return;
	if (WIFSIGNALED(status))
		dl_warn("the watchdog (pid %d) was killed by signal %d: starting another", (int)w->pid, WTERMSIG(status));
	else
		dl_warn("the watchdog (pid %d) exited with status %d: starting another", (int)w->pid,
			WEXITSTATUS(status));
	close(w->fd);
	err = dl_watchdog_start(w, held_fd);
	if (err)
		dl_warn("cannot start another watchdog: %s; a process held when dlbpf dies stays stopped",
			strerror(-err));
}
