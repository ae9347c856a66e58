// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * capture/seccomp_hazard: the Seccomp: field of /proc/PID/status (parsed from
 * made-up files, and read from this process and from children in strict and
 * in filter mode), and the uretprobe trial, which on this kernel (6.12.14+,
 * 6.13.3+, 6.14+ let system call 335 through every filter) must find no
 * hazard, leave no child and no descriptor behind, and take well under its
 * 5 s limit. Needs the right to the uprobe PMU (root); without it, that one
 * check is skipped, said so.
 */
#define _GNU_SOURCE   /* fmemopen */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "check.h"
#include "capture/seccomp_hazard.h"

static int mode_of_text(const char *text)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int mode;

	if (!f)
		return -1000;
	mode = dl_seccomp_mode_from_status(f);
	fclose(f);
	return mode;
}

static void test_status_text(void)
{
	CHECK(mode_of_text("Name:\tx\nNoNewPrivs:\t0\nSeccomp:\t0\nSeccomp_filters:\t0\n") == 0, "mode 0");
	CHECK(mode_of_text("Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t3\n") == 2, "mode 2");
	CHECK(mode_of_text("Seccomp:\t1\n") == 1, "mode 1");
	CHECK(mode_of_text("Seccomp:   2  \n") == 2, "spaces around the value");
	CHECK(mode_of_text("Seccomp:\t2") == 2, "last line without its newline");
	/* A kernel without CONFIG_SECCOMP has neither field: no process can have a filter. */
	CHECK(mode_of_text("Name:\tx\nState:\tS (sleeping)\n") == 0, "no field");
	CHECK(mode_of_text("") == 0, "empty file");
	/* The filter count is not the mode. */
	CHECK(mode_of_text("Seccomp_filters:\t2\n") == 0, "Seccomp_filters taken for Seccomp");
	/* A piece of a long line that happens to start like the field is not the field. */
	{
		char text[1024];

		snprintf(text, sizeof(text), "Groups:\t%0*d Seccomp:\t2\nSeccomp:\t1\n", 254 - 8, 0);
		CHECK(mode_of_text(text) == 1, "a long line's piece taken for the field: %d", mode_of_text(text));
	}
	CHECK(mode_of_text("Seccomp:\tx\n") == -EINVAL, "not a number");
	CHECK(mode_of_text("Seccomp:\t\n") == -EINVAL, "no value");
	CHECK(mode_of_text("Seccomp:\t3\n") == -EINVAL, "no such mode");
	CHECK(mode_of_text("Seccomp:\t-1\n") == -EINVAL, "negative");
	CHECK(mode_of_text("Seccomp:\t2x\n") == -EINVAL, "trailing garbage");
}

/* This process's mode read independently: what the tests expect of it (2 inside a container). */
static int own_mode(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	int mode = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp: %d", &mode) == 1)
			break;
	if (f)
		fclose(f);
	return mode;
}

/*
 * A child in the given mode (1 strict, 2 a filter that allows everything),
 * asked for its mode while it waits; then let go and reaped.
 */
static int child_mode(int mode)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { .len = 1, .filter = &allow };
	int ready[2], go[2], got = -1000, status;
	pid_t child;
	char c = 0;

	if (pipe(ready) || pipe(go))
		return -1001;
	child = fork();
	if (child == 0) {
		int ok = mode == 1 ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) == 0 :
				     prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
					     prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;

		c = ok ? 'r' : 'f';
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
			c = 0;
		/* exit, not exit_group: strict mode allows only read, write, exit and sigreturn. */
		syscall(SYS_exit, 0);
		_exit(0);
	}
	if (child > 0 && read(ready[0], &c, 1) == 1 && c == 'r')
		got = dl_proc_seccomp_mode(child);
	if (child > 0) {
		if (write(go[1], "g", 1) != 1)
			kill(child, SIGKILL);
		waitpid(child, &status, 0);
	}
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	return c == 'r' ? got : -1002;
}

static void test_proc_mode(void)
{
	int status;
	pid_t gone;

	CHECK(dl_proc_seccomp_mode(getpid()) == own_mode(), "own mode %d, read %d", dl_proc_seccomp_mode(getpid()),
	      own_mode());
	if (own_mode() == 0)
		CHECK(dl_proc_seccomp_mode(getpid()) == 0, "no filter here, mode %d", dl_proc_seccomp_mode(getpid()));
	CHECK(child_mode(2) == 2, "filtered child: mode %d", child_mode(2));
	CHECK(child_mode(1) == 1, "strict child: mode %d", child_mode(1));
	/* A reaped child's pid: gone (reuse within these lines is not a worry). */
	gone = fork();
	if (gone == 0)
		_exit(0);
	waitpid(gone, &status, 0);
	CHECK(dl_proc_seccomp_mode(gone) == -ENOENT, "gone pid: %d", dl_proc_seccomp_mode(gone));
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static void test_trial(void)
{
	struct timespec t0, t1;
	int fds = count_fds(), hazard;
	double ms;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	hazard = dl_uretprobe_seccomp_hazard();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	if (hazard == -EACCES || hazard == -EPERM) {
		printf("test_seccomp_hazard: SKIP the trial: no right to the uprobe PMU (%s)\n", strerror(-hazard));
	} else {
		CHECK(hazard == 0, "trial on this kernel: %d (%s)", hazard,
		      hazard < 0 ? strerror(-hazard) : dl_seccomp_hazard_why());
		printf("test_seccomp_hazard: trial %d in %.1f ms\n", hazard, ms);
	}
	CHECK(ms < 5000, "trial took %.0f ms", ms);
	/* No child left, reaped or not, and no descriptor. */
	CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, "a child left behind");
	CHECK(count_fds() == fds, "descriptors %d before, %d after", fds, count_fds());
	/* A second trial in the same process finds the same. */
	CHECK(dl_uretprobe_seccomp_hazard() == hazard, "second trial differs");
	CHECK(dl_seccomp_hazard_why()[0] != '\0', "no text");
}

int main(void)
{
	test_status_text();
	test_proc_mode();
	test_trial();
	return check_report("test_seccomp_hazard");
}
