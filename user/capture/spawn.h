/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Starting a command traced from its exec: the child is held before its exec,
 * at exec, and again at its ELF entry point, where the dynamic loader has mapped
 * every library it links (libcudart included) but no program code has run.
 */
#ifndef DLBPF_SPAWN_H
#define DLBPF_SPAWN_H

#include <sys/types.h>

struct dl_spawn {
	pid_t pid;
	unsigned long entry;
	unsigned long saved_word;
	int exec_errno;   /* why execvp failed (the command never ran); 0 otherwise */
	int status_fd;    /* until the exec: the pipe the child tells an exec failure through (-1: none) */
	const char *cmd;  /* argv[0], for messages */
	const struct dl_run_as *as;
};

/* --run-as: the user the command runs as (its groups from the group database), with its HOME, USER, LOGNAME. */
struct dl_run_as {
	const char *name, *home;
	uid_t uid;
	gid_t gid;
};

/*
 * Forks a child to run argv as the user as names (NULL: as dlbpf), held
 * before its exec: the caller puts its pid in the traced set, then
 * dl_spawn_exec lets it exec, so that what the exec reads (the program, the
 * dynamic loader) is traced as /proc/PID/io counts it. Fails with a message
 * when the child cannot become that user. While held (until
 * dl_spawn_release) the command dies with dlbpf (PTRACE_O_EXITKILL): it has
 * not started its own code yet. as must outlive the spawn.
 */
int dl_spawn_start(struct dl_spawn *sp, char **argv, const struct dl_run_as *as);
/* Lets the held child exec, and holds it at its exec; fails with a message (and exec_errno) when it cannot run. */
int dl_spawn_exec(struct dl_spawn *sp);
/* Runs the child up to its entry point and holds it there. */
int dl_spawn_run_to_entry(struct dl_spawn *sp);
/* Lets the child go: it runs on untraced by ptrace. */
int dl_spawn_release(struct dl_spawn *sp);
/* Kills a child that was never released (setup failed). */
void dl_spawn_abort(struct dl_spawn *sp);

/* Reaps the command if it has ended: its exit status as a shell gives it (128 + N for signal N); 0 otherwise. */
int dl_spawn_exit_status(struct dl_spawn *sp);

/* --ready-fd: writes "ready\n" to fd and closes it; whoever started dlbpf may start the traced work now. */
void dl_spawn_signal_ready(int fd);

#endif
