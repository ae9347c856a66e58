// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Starts many short threads, a batch at a time, and prints how many
 * pthread_create calls succeeded: the count dlbpf's "threads" must give
 * (plus the main thread). More threads than pid_max makes thread ids repeat.
 *
 *   threads N [--batch B] [--hold K] [--wait]
 *     N          threads to start in all
 *     --batch B  started together, then joined (default 64)
 *     --hold K   K more threads started first, alive until the end (present when
 *                a tracer attaches after "ready"); printed as "held"
 *     --wait     print "ready" and read one line from stdin first
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "handshake.h"

static void *body(void *arg)
{
	/* Its tid, so the workload can say how many distinct ids its threads had. */
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	return NULL;
}

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;

static void *held(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&hold_lock);   /* until main unlocks it at the end */
	pthread_mutex_unlock(&hold_lock);
	return NULL;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long n, batch = 64, created = 0, failed = 0, distinct = 0, hold = 0, holding = 0;
	int wait = 0;
	pthread_t *th, *hth = NULL;
	pid_t *tids;

	if (argc < 2 || (n = atol(argv[1])) <= 0) {
		fprintf(stderr, "usage: %s N [--batch B] [--hold K] [--wait]\n", argv[0]);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = atol(argv[++i]);
		else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
			hold = atol(argv[++i]);
		else if (!strcmp(argv[i], "--wait"))
			wait = 1;
		else
			return unknown_argument(argv[0], argv[i]);
	}
	if (batch <= 0)
		batch = 1;
	th = calloc((size_t)batch, sizeof(*th));
	tids = calloc((size_t)n, sizeof(*tids));
	if (!th || !tids)
		return 1;
	pthread_mutex_lock(&hold_lock);
	if (hold > 0 && !(hth = calloc((size_t)hold, sizeof(*hth))))
		return 1;
	for (; holding < hold; holding++)
		if (pthread_create(&hth[holding], NULL, held, NULL))
			break;
	if (wait && ready_then_wait())
		return 1;
	while (created + failed < n) {
		long started = 0;

		while (started < batch && created + failed < n) {
			if (pthread_create(&th[started], NULL, body, &tids[created])) {
				failed++;
				break;
			}
			started++;
			created++;
		}
		for (long i = 0; i < started; i++)
			pthread_join(th[i], NULL);
	}
	pthread_mutex_unlock(&hold_lock);
	for (long i = 0; i < holding; i++)
		pthread_join(hth[i], NULL);
	qsort(tids, (size_t)created, sizeof(*tids), cmp_pid);
	for (long i = 0; i < created; i++)
		distinct += i == 0 || tids[i] != tids[i - 1];
	printf("{\"pid\":%d,\"created\":%ld,\"failed\":%ld,\"distinct_tids\":%ld,\"held\":%ld}\n", (int)getpid(),
	       created, failed, distinct, holding);
	return failed || holding < hold ? 1 : 0;
}
