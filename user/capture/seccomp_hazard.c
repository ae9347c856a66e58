// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE   /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "capture/procfs.h"
#include "capture/seccomp_hazard.h"
#include "log.h"

/* x86-64's uretprobe system call; the headers of an older libc do not name it. */
#define URETPROBE_NR 335
/* The whole trial, from the fork to the child's end. */
#define TRIAL_MS 5000

int dl_seccomp_mode_from_status(FILE *f)
{
	bool at_start = true;
	char line[256];

	while (fgets(line, sizeof(line), f)) {
		bool start = at_start;
		char *p, *end;
		long mode;

		/* A line longer than the buffer (Groups:, a big machine's Cpus_allowed:) comes in pieces. */
		at_start = strchr(line, '\n') != NULL;
		/* "Seccomp:" and not "Seccomp_filters:" (5.9+), which follows it. */
		if (!start || strncmp(line, "Seccomp:", 8))
			continue;
		p = line + 8;
		errno = 0;
		mode = strtol(p, &end, 10);
		if (end == p || errno)
			return -EINVAL;
		while (*end == ' ' || *end == '\t')
			end++;
		if ((*end != '\n' && *end != '\0') || mode < 0 || mode > 2)
			return -EINVAL;
		return (int)mode;
	}
	/* No field: a kernel without CONFIG_SECCOMP, where no process can have a filter. */
	return ferror(f) ? -EIO : 0;
}

int dl_proc_seccomp_mode(pid_t pid)
{
	FILE *f = dl_proc_fopen(pid, "status");
	int mode;

	if (!f)
		return -errno;
	mode = dl_seccomp_mode_from_status(f);
	fclose(f);
	return mode;
}

const char *dl_seccomp_hazard_why(void)
{
	return "return probes would kill processes under a seccomp filter on this kernel "
	       "(no uretprobe pass-through, kernel commit cf6cb56ef244): their return probes are left out";
}

#if defined(__x86_64__)

/*
 * What the child calls through the probe: a function of this file, so of the
 * executable dlbpf runs from, never inlined (called through a volatile
 * pointer, and it has a side effect the compiler must keep).
 */
__attribute__((noinline)) static int trial_target(volatile int *v)
{
	*v += 1;
	return *v;
}

static int (*volatile trial_call)(volatile int *) = trial_target;

/* A small sysfs file into buf (NUL-terminated); 0 or -errno. */
static int read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -errno : dl_read_small_fd(fd, buf, size);

	return n < 0 ? (int)n : 0;
}

/* The uprobe PMU's dynamic type and the config bit that makes a probe a return probe. */
static int uprobe_pmu(int *type, int *ret_bit)
{
	char buf[64], *end;
	long v;
	int err;

	err = read_small("/sys/bus/event_source/devices/uprobe/type", buf, sizeof(buf));
	if (err)
		return err;
	v = strtol(buf, &end, 10);
	if (end == buf || v <= 0 || v > INT32_MAX)
		return -EINVAL;
	*type = (int)v;
	/* "config:0\n": the bit (a kernel without the file has no retprobe uprobe PMU). */
	err = read_small("/sys/bus/event_source/devices/uprobe/format/retprobe", buf, sizeof(buf));
	if (err)
		return err;
	if (strncmp(buf, "config:", 7))
		return -EINVAL;
	v = strtol(buf + 7, &end, 10);
	if (end == buf + 7 || v < 0 || v > 63)
		return -EINVAL;
	*ret_bit = (int)v;
	return 0;
}

struct target_find {
	uint64_t addr;
	uint64_t offset;
	uint64_t inode;
	char path[4096];
	bool found;
};

static int find_target(const struct dl_mapping *m, void *arg)
{
	struct target_find *t = arg;

	if (t->addr < m->start || t->addr >= m->end || m->perms[2] != 'x')
		return 0;
	t->offset = t->addr - m->start + m->offset;
	t->inode = m->inode;
	snprintf(t->path, sizeof(t->path), "%s", m->path);
	t->found = true;
	return 1;
}

/*
 * The file and file offset of trial_target: /proc/self/exe when the function
 * lives in the executable (the kernel resolves the path in our context, and a
 * fork runs the same file; the link works for a binary replaced on disk), the
 * mapping's own path when a build put it into a shared object.
 */
static int target_location(char *path, size_t size, uint64_t *offset)
{
	struct target_find t = { .addr = (uint64_t)(uintptr_t)trial_target };
	struct stat st;
	int err;

	err = dl_maps_foreach(getpid(), find_target, &t);
	if (err < 0)
		return err;
	if (!t.found)
		return -ENOENT;
	*offset = t.offset;
	if (stat("/proc/self/exe", &st) == 0 && (uint64_t)st.st_ino == t.inode)
		snprintf(path, size, "/proc/self/exe");
	else
		snprintf(path, size, "%s", t.path);
	return 0;
}

/*
 * The child: system calls only (dlbpf may have threads by now). Its filter
 * allows everything but 335, as the narrowest allowlist that omits it would.
 * All signals blocked: the terminal's Ctrl-C is for dlbpf, and a fault the
 * kernel forces on a blocked signal is delivered with the default action
 * (death), even where a sanitizer installed a handler that would exit instead.
 */
_Noreturn static void trial_child(pid_t parent, int ready, int go)
{
	struct sock_filter insns[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, URETPROBE_NR, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(insns) / sizeof(insns[0]), .filter = insns };
	static const int faults[] = { SIGSEGV, SIGILL, SIGBUS, SIGTRAP, SIGSYS };
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	volatile int v = 0;
	unsigned char c;
	sigset_t all;
	ssize_t n;

	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		sigaction(faults[i], &dfl, NULL);
	/* Never outlive dlbpf; it may have died before the request took hold. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(4);
	c = 0;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		c = errno > 0 && errno < 256 ? (unsigned char)errno : EINVAL;
	while (write(ready, &c, 1) < 0 && errno == EINTR)
		;
	if (c)
		_exit(3);
	/* The go, or EOF: dlbpf gave up (no probe), and nothing is to be called. */
	while ((n = read(go, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		_exit(4);
	trial_call(&v);
	_exit(0);
}

static long ms_left(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

/* The child's byte on ready: 0 (filter in place), an errno, or -errno of our own. */
static int wait_ready(int ready, const struct timespec *deadline)
{
	struct pollfd p = { .fd = ready, .events = POLLIN };
	unsigned char c;
	ssize_t n;
	long left;
	int r;

	for (;;) {
		left = ms_left(deadline);
		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		break;
	}
	while ((n = read(ready, &c, 1)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return -errno;
	/* EOF: the child died before it had a filter (an inherited filter that kills on prctl?). */
	if (n == 0)
		return -ECHILD;
	return c ? -(int)c : 0;
}

/* Reaps child by the deadline; 0 with *status, -ETIMEDOUT, or -errno. */
static int wait_child(pid_t child, int *status, const struct timespec *deadline)
{
	const struct timespec tick = { 0, 1000000 };
	pid_t r;

	for (;;) {
		r = waitpid(child, status, WNOHANG);
		if (r == child)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (ms_left(deadline) <= 0)
			return -ETIMEDOUT;
		nanosleep(&tick, NULL);
	}
}

int dl_uretprobe_seccomp_hazard(void)
{
	int ready[2] = { -1, -1 }, go[2] = { -1, -1 };
	int type, ret_bit, status = 0, pfd = -1, err;
	struct perf_event_attr attr;
	struct timespec deadline;
	bool reaped = false;
	char path[4096];
	uint64_t offset, hits = 0;
	pid_t parent = getpid(), child = -1;

	err = uprobe_pmu(&type, &ret_bit);
	if (err)
		goto cleanup;
	err = target_location(path, sizeof(path), &offset);
	if (err)
		goto cleanup;
	if (pipe2(ready, O_CLOEXEC) || pipe2(go, O_CLOEXEC)) {
		err = -errno;
		goto cleanup;
	}
	/* Flushed now, or the child's copy of the buffers could be written twice (it never exits through stdio). */
	fflush(NULL);
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += TRIAL_MS / 1000;
	child = fork();
	if (child < 0) {
		err = -errno;
		goto cleanup;
	}
	if (child == 0) {
		close(ready[0]);
		close(go[1]);
		trial_child(parent, ready[1], go[0]);
	}
	close(ready[1]);
	close(go[0]);
	ready[1] = go[0] = -1;

	/* The probe goes on only once the filter is in place: the trial is of the return under it. */
	err = wait_ready(ready[0], &deadline);
	if (err) {
		dl_debug("uretprobe trial: the child has no seccomp filter (%s)", strerror(-err));
		goto cleanup;
	}
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = (uint32_t)type;
	attr.config = 1ull << ret_bit;
	attr.uprobe_path = (uint64_t)(uintptr_t)path;
	attr.probe_offset = offset;
	/* No BPF: a plain perf event counts the returns, and the trial needs nothing else. */
	pfd = (int)syscall(__NR_perf_event_open, &attr, child, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0) {
		err = -errno;
		dl_debug("uretprobe trial: perf_event_open of a return probe on %s+0x%llx: %s", path,
			 (unsigned long long)offset, strerror(errno));
		goto cleanup;
	}
	while (write(go[1], "g", 1) < 0 && errno == EINTR)
		;

	err = wait_child(child, &status, &deadline);
	/* ECHILD: SIGCHLD ignored, the kernel reaped it (status unknown); its pid is no longer ours to kill. */
	reaped = err == 0 || err == -ECHILD;
	if (err)
		goto cleanup;
	if (read(pfd, &hits, sizeof(hits)) != (ssize_t)sizeof(hits))
		hits = 0;
	if (WIFSIGNALED(status)) {
		/* SIGKILL is never the probe's doing (nor ours: that is the timeout, above). */
		err = WTERMSIG(status) == SIGKILL ? -EINTR : 1;
		if (err == 1)
			dl_debug("uretprobe trial: the child died of signal %d on its return", WTERMSIG(status));
	} else if (WEXITSTATUS(status) != 0) {
		err = -EPROTO;
	} else {
		/* Returned unharmed, and through the probe: the return probe fired. */
		err = hits ? 0 : -ENODATA;
	}

cleanup:
	if (pfd >= 0)
		close(pfd);
	/* A child not reaped is waiting for the go, or stuck past the deadline: ours, so killed, and reaped. */
	if (child > 0 && !reaped) {
		kill(child, SIGKILL);
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
	}
	for (int i = 0; i < 2; i++) {
		if (ready[i] >= 0)
			close(ready[i]);
		if (go[i] >= 0)
			close(go[i]);
	}
	return err;
}

#else

/* The uretprobe system call, and so the hazard, is x86-64's alone: no trial. */
int dl_uretprobe_seccomp_hazard(void)
{
	return 0;
}

#endif
