// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include "log.h"
#include "capture/procfs.h"
#include "capture/spawn.h"
#include "util.h"

/* "KEY=value", allocated. */
static char *env_entry(const char *key, const char *value)
{
	size_t n = strlen(key) + strlen(value) + 2;
	char *e = dl_xcalloc(n, 1);

	snprintf(e, n, "%s=%s", key, value);
	return e;
}

/* What the user's command gets: everything but HOME, USER and LOGNAME from dlbpf's environment, those the user's. */
static char **user_environ(const struct dl_run_as *as)
{
	static const char *const own[] = { "HOME=", "USER=", "LOGNAME=" };
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = dl_xcalloc(n + 4, sizeof(*env));
	for (size_t i = 0; i < n; i++) {
		bool replaced = false;

		for (size_t o = 0; o < sizeof(own) / sizeof(own[0]); o++)
			replaced |= !strncmp(environ[i], own[o], strlen(own[o]));
		if (!replaced)
			env[k++] = environ[i];
	}
	env[k++] = env_entry("HOME", as->home);
	env[k++] = env_entry("USER", as->name);
	env[k++] = env_entry("LOGNAME", as->name);
	return env;
}

static void user_environ_free(char **env)
{
	size_t n = 0;

	if (!env)
		return;
	while (env[n])
		n++;
	/* The last three are ours; the rest are environ's. */
	for (size_t i = n >= 3 ? n - 3 : 0; i < n; i++)
		free(env[i]);
	free(env);
}

/* as's supplementary groups, from the group database (read here: not in the child, after fork). */
static gid_t *user_groups(const struct dl_run_as *as, int *n)
{
	int cap = 64;
	gid_t *g = dl_xcalloc((size_t)cap, sizeof(*g));

	*n = cap;
	while (getgrouplist(as->name, as->gid, g, n) < 0 && *n > cap) {
		cap = *n;
		g = dl_xrealloc(g, (size_t)cap * sizeof(*g));
	}
	return g;
}

/* A getdents64 entry, as the kernel writes it. */
struct fd_dirent {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/*
 * In the child, between fork and exec: closes every descriptor of dlbpf's (all close-on-exec, so the exec
 * would close them anyway) but keep. The child waits stopped before its exec: held there, it must not hold
 * dlbpf's BPF links or its outputs' locked temporaries past a dlbpf that was killed meanwhile. What the
 * command inherits (not close-on-exec) stays. Only async-signal-safe calls: dlbpf has threads.
 */
static void close_own_fds(int keep)
{
	char buf[2048] __attribute__((aligned(8)));
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n;

	if (dfd < 0)
		return;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
		for (long at = 0; at < n;) {
			const struct fd_dirent *d = (const void *)(buf + at);
			int fd = 0, flags;

			at += d->reclen;
			if (d->name[0] < '0' || d->name[0] > '9')
				continue;
			for (const char *c = d->name; *c >= '0' && *c <= '9'; c++)
				fd = fd * 10 + (*c - '0');
			if (fd <= STDERR_FILENO || fd == keep || fd == dfd)
				continue;
			flags = fcntl(fd, F_GETFD);
			if (flags >= 0 && (flags & FD_CLOEXEC))
				close(fd);
		}
	}
	close(dfd);
}

/* What the child tells through the pipe when it cannot run the command: which step, and errno. */
struct child_failure {
	int step;   /* 0: exec (or ptrace), 1: becoming the --run-as user */
	int err;
};

int dl_spawn_start(struct dl_spawn *sp, char **argv, const struct dl_run_as *as)
{
	int pipefd[2], status, ngroups = 0;
	struct child_failure cf = { 0 };
	char **env = as ? user_environ(as) : NULL;
	gid_t *groups = as ? user_groups(as, &ngroups) : NULL;
	pid_t pid;

	memset(sp, 0, sizeof(*sp));
	sp->status_fd = -1;
	sp->cmd = argv[0];
	sp->as = as;
	if (pipe2(pipefd, O_CLOEXEC)) {
		cf.err = -errno;
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		cf.err = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		goto out;
	}
	if (pid == 0) {
		close(pipefd[0]);
		/* The command must not inherit dlbpf's blocked signals. */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		close_own_fds(pipefd[1]);
		/* Groups, then the group, then the user: each step needs the privilege the next one drops. */
		if (as && (setgroups((size_t)ngroups, groups) || setgid(as->gid) || setuid(as->uid))) {
			cf = (struct child_failure){ .step = 1, .err = errno };
		} else {
			/*
			 * Stopped before the exec, until dlbpf has put this pid in the
			 * traced set: the exec reads the program (and the kernel the
			 * dynamic loader), which /proc/PID/io counts as this process's.
			 */
			if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0 && raise(SIGSTOP) == 0) {
				if (env)
					execvpe(argv[0], argv, env);
				else
					execvp(argv[0], argv);
			}
			cf.err = errno;
		}
		if (write(pipefd[1], &cf, sizeof(cf)) < 0)
			_exit(126);
		_exit(127);
	}
	close(pipefd[1]);
	sp->status_fd = pipefd[0];
	user_environ_free(env);
	free(groups);
	env = NULL;
	groups = NULL;
	sp->pid = pid;
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
		int err = errno == EINTR ? -EINTR : -ECHILD;

		/* It could not become the --run-as user (or ptrace failed): the pipe says why. */
		if (read(sp->status_fd, &cf, sizeof(cf)) == sizeof(cf)) {
			err = -cf.err;
			if (cf.step == 1)
				dl_err("cannot run '%s' as %s (uid %u, gid %u): %s", argv[0], as->name, (unsigned)as->uid,
				       (unsigned)as->gid, strerror(cf.err));
			else
				dl_err("cannot run '%s': %s", argv[0], strerror(cf.err));
		} else {
			dl_err("'%s' did not start%s", argv[0], err == -EINTR ? ": interrupted" : "");
		}
		dl_spawn_abort(sp);
		return err;
	}
	/*
	 * Until it is released the command is held (before its exec, at exec,
	 * then at its entry point with a breakpoint planted there): if dlbpf dies
	 * meanwhile, the kernel kills it, as none of its own code has run.
	 * Without this it would go on, hit the breakpoint with no tracer and die
	 * of SIGTRAP.
	 */
	if (ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL)) {
		int err = -errno;

		dl_err("cannot hold '%s' at its start: %s", argv[0], strerror(errno));
		dl_spawn_abort(sp);
		return err;
	}
	return 0;
out:
	user_environ_free(env);
	free(groups);
	return cf.err;
}

int dl_spawn_exec(struct dl_spawn *sp)
{
	struct child_failure cf = { 0 };
	int status, err;

	/* The SIGSTOP it stopped itself with is not passed on: it goes on to its exec. */
	if (ptrace(PTRACE_CONT, sp->pid, NULL, NULL)) {
		err = -errno;
		dl_spawn_abort(sp);
		return err;
	}
	/* The pipe closes on a successful exec, or tells why the command did not run. */
	if (read(sp->status_fd, &cf, sizeof(cf)) == sizeof(cf)) {
		sp->exec_errno = cf.err;
		dl_err("cannot run '%s'%s%s: %s", sp->cmd, sp->as ? " as " : "", sp->as ? sp->as->name : "",
		       strerror(cf.err));
		dl_spawn_abort(sp);
		return -cf.err;
	}
	close(sp->status_fd);
	sp->status_fd = -1;
	/* Held at the exec (the SIGTRAP a traced exec stops with). */
	if (waitpid(sp->pid, &status, 0) != sp->pid || !WIFSTOPPED(status)) {
		err = errno == EINTR ? -EINTR : -ECHILD;
		dl_err("'%s' did not start%s", sp->cmd, err == -EINTR ? ": interrupted" : "");
		dl_spawn_abort(sp);
		return err;
	}
	return 0;
}

static int read_entry(pid_t pid, unsigned long *entry)
{
	Elf64_auxv_t av;
	int fd = dl_proc_open(pid, "auxv"), err = -ENOENT;

	if (fd < 0)
		return fd;
	while (read(fd, &av, sizeof(av)) == sizeof(av) && av.a_type != AT_NULL) {
		if (av.a_type == AT_ENTRY) {
			*entry = av.a_un.a_val;
			err = 0;
			break;
		}
	}
	close(fd);
	return err;
}

/* Continues the tracee until it stops with SIGTRAP, passing other signals on. */
static int cont_until_trap(pid_t pid)
{
	int sig = 0, status;

	for (;;) {
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig))
			return -errno;
		if (waitpid(pid, &status, 0) != pid)
			return -errno;
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return -ESRCH;
		sig = WSTOPSIG(status);
		if (sig == SIGTRAP)
			return 0;
	}
}

/*
 * The breakpoint planted at the entry: its bytes in the low end of the word
 * there (both targets are little-endian), and how far past the breakpoint the
 * pc is when it traps. x86-64: int3, one byte, reports the next instruction;
 * arm64: brk #0, one instruction, reports its own address.
 */
#if defined(__x86_64__)
#define BREAK_INSN 0xccul
#define BREAK_MASK 0xfful
#define BREAK_PC_AFTER 1
#define REGS_PC(r) ((r).rip)
#elif defined(__aarch64__)
#define BREAK_INSN 0xd4200000ul
#define BREAK_MASK 0xfffffffful
#define BREAK_PC_AFTER 0
#define REGS_PC(r) ((r).pc)
#else
#error "spawn.c knows the breakpoints of x86-64 and arm64 only"
#endif

int dl_spawn_run_to_entry(struct dl_spawn *sp)
{
	struct user_regs_struct regs;
	/* The general registers through PTRACE_GETREGSET: arm64 has no PTRACE_GETREGS. */
	struct iovec iov = { .iov_base = &regs, .iov_len = sizeof(regs) };
	unsigned long word;
	int err;

	err = read_entry(sp->pid, &sp->entry);
	if (err)
		return err;
	errno = 0;
	word = (unsigned long)ptrace(PTRACE_PEEKTEXT, sp->pid, (void *)sp->entry, NULL);
	if (errno)
		return -errno;
	sp->saved_word = word;
	if (ptrace(PTRACE_POKETEXT, sp->pid, (void *)sp->entry, (void *)((word & ~BREAK_MASK) | BREAK_INSN)))
		return -errno;
	err = cont_until_trap(sp->pid);
	if (err)
		return err;
	/* Undo the breakpoint and step back onto the entry instruction. */
	if (ptrace(PTRACE_POKETEXT, sp->pid, (void *)sp->entry, (void *)sp->saved_word) ||
	    ptrace(PTRACE_GETREGSET, sp->pid, (void *)NT_PRSTATUS, &iov))
		return -errno;
	if (REGS_PC(regs) != sp->entry + BREAK_PC_AFTER)
		return -EPROTO;
	REGS_PC(regs) = sp->entry;
	if (ptrace(PTRACE_SETREGSET, sp->pid, (void *)NT_PRSTATUS, &iov))
		return -errno;
	return 0;
}

int dl_spawn_release(struct dl_spawn *sp)
{
	if (ptrace(PTRACE_DETACH, sp->pid, NULL, NULL))
		return -errno;
	return 0;
}

void dl_spawn_abort(struct dl_spawn *sp)
{
	if (sp->status_fd >= 0) {
		close(sp->status_fd);
		sp->status_fd = -1;
	}
	if (sp->pid > 0) {
		kill(sp->pid, SIGKILL);
		/* SIGKILL ends it at once: the wait cannot hang, but a signal for dlbpf can interrupt it. */
		while (waitpid(sp->pid, NULL, 0) < 0 && errno == EINTR)
			;
		sp->pid = 0;
	}
}

int dl_spawn_exit_status(struct dl_spawn *sp)
{
	int status;

	if (sp->pid <= 0 || waitpid(sp->pid, &status, WNOHANG) != sp->pid)
		return 0;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 0;
}

void dl_spawn_signal_ready(int fd)
{
	static const char msg[] = "ready\n";
	ssize_t n;

	do
		n = write(fd, msg, sizeof(msg) - 1);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(msg) - 1)
		dl_warn("--ready-fd %d: %s", fd, n < 0 ? strerror(errno) : "short write");
	close(fd);
}
