// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A process tree held open: N children and T threads, all alive at once,
 * blocked on one pipe until the parent closes it; then every one exits. Prints
 * what it made as JSON: the truth the full-map tests compare with.
 *
 *   fanout [--children N] [--threads T] [--hold]
 *     --hold  make the children first, print "ready" and wait for a line on
 *             stdin (a tracer attaches then), then release them
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handshake.h"

static int gate[2];

static void wait_gate(void)
{
	char c;

	/* End of file once the parent closes its end: every waiter wakes at once. */
	while (read(gate[0], &c, 1) > 0)
		;
}

static void *thread_main(void *arg)
{
	(void)arg;
	wait_gate();
	return NULL;
}

int main(int argc, char **argv)
{
	long nchildren = 4, nthreads = 0, made = 0, threads = 0;
	int hold = 0, failed = 0;
	pid_t kids[1024];
	pthread_t th[1024];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--hold"))
			hold = 1;
		else if (i + 1 < argc && !strcmp(argv[i], "--children"))
			nchildren = atol(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--threads"))
			nthreads = atol(argv[++i]);
		else
			return 2;
	}
	if (nchildren < 0 || nchildren > 1024 || nthreads < 0 || nthreads > 1024 || pipe(gate))
		return 2;
	for (; made < nchildren; made++) {
		pid_t pid = fork();

		if (pid < 0)
			break;
		if (pid == 0) {
			close(gate[1]);
			wait_gate();
			_exit(0);
		}
		kids[made] = pid;
	}
	for (; threads < nthreads; threads++)
		if (pthread_create(&th[threads], NULL, thread_main, NULL))
			break;
	if (hold && ready_then_wait())
		failed = 1;
	printf("{\"pid\": %d, \"children\": %ld, \"threads\": %ld}\n", (int)getpid(), made, threads);
	fflush(stdout);
	close(gate[1]);
	for (long i = 0; i < made; i++)
		failed |= waitpid(kids[i], NULL, 0) != kids[i];
	for (long i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	return failed || made != nchildren || threads != nthreads;
}
