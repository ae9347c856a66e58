/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Starting a command traced from its first instruction: the child is held at
 * exec, and again at its ELF entry point, where the dynamic loader has mapped
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
};

/* --run-as: the user the command runs as (its groups from the group database), with its HOME, USER, LOGNAME. */
struct dl_run_as {
	const char *name, *home;
	uid_t uid;
	gid_t gid;
};

/*
 * Forks and execs argv held at its exec, as the user as names (NULL: as
 * dlbpf); fails with a message (and exec_errno) when the command cannot run.
 * While held (until dl_spawn_release) the command dies with dlbpf
 * (PTRACE_O_EXITKILL): it has not started its own code yet.
 */
int dl_spawn_start(struct dl_spawn *sp, char **argv, const struct dl_run_as *as);
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
