// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A thread that alternates spinning and sleeping, pinned to CPU 0, and
 * reports its own /proc/self/task/TID/schedstat (on-CPU ns, run-queue wait ns)
 * together with the main thread's since main() began: the kernel's account the
 * scheduler test compares dlbpf with. (Not since the process began: dlbpf
 * traces a command it starts from its entry point on, and the exec and the
 * dynamic loader before it, a few ms of CPU on a loaded machine, are not in
 * the trace.)
 *
 * With --main the main thread itself spins and sleeps, and the account is
 * its own since main() began: a thread that existed before the process was
 * traced (a worker thread is new, so traced from its first switch).
 *
 *   spinsleep [--seconds S] [--spin-ms N] [--sleep-ms N] [--main]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double seconds = 2.0, spin_ms = 5, sleep_ms = 5;

struct schedstat {
	unsigned long long oncpu, runq, slices;
};

static int read_schedstat(pid_t tid, struct schedstat *s)
{
	char path[96];
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fscanf(f, "%llu %llu %llu", &s->oncpu, &s->runq, &s->slices);
	fclose(f);
	return n == 3 ? 0 : -1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct schedstat worker_stat;

static void *worker(void *arg)
{
	double end = now_s() + seconds;
	struct timespec nap = { 0, (long)(sleep_ms * 1e6) };
	volatile unsigned long sink = 0;
	cpu_set_t cpus;

	(void)arg;
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
	while (now_s() < end) {
		double stop = now_s() + spin_ms / 1e3;

		while (now_s() < stop)
			sink++;
		nanosleep(&nap, NULL);
	}
	read_schedstat((pid_t)syscall(SYS_gettid), &worker_stat);
	return NULL;
}

int main(int argc, char **argv)
{
	struct schedstat main0, mainst;
	pthread_t t;

	if (read_schedstat((pid_t)syscall(SYS_gettid), &main0))
		return 1;
	int on_main = 0;

	for (int i = 1; i < argc; i += 2) {
		if (!strcmp(argv[i], "--main")) {
			on_main = 1;
			i--;
			continue;
		}
		if (i + 1 >= argc)
			break;
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--spin-ms"))
			spin_ms = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--sleep-ms"))
			sleep_ms = atof(argv[i + 1]);
	}
	if (on_main) {
		worker(NULL);
		if (read_schedstat((pid_t)syscall(SYS_gettid), &mainst))
			return 1;
		/* worker_stat is the main thread's since the process began: only the part since main() counts. */
		worker_stat.oncpu = mainst.oncpu - main0.oncpu;
		worker_stat.runq = mainst.runq - main0.runq;
		printf("{\"pid\":%d,\"oncpu_ns\":%llu,\"runq_ns\":%llu,\"worker_oncpu_ns\":%llu,\"worker_runq_ns\":%llu}\n",
		       getpid(), worker_stat.oncpu, worker_stat.runq, worker_stat.oncpu, worker_stat.runq);
		return 0;
	}
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	pthread_join(t, NULL);
	if (read_schedstat((pid_t)syscall(SYS_gettid), &mainst))
		return 1;
	printf("{\"pid\":%d,\"oncpu_ns\":%llu,\"runq_ns\":%llu,\"worker_oncpu_ns\":%llu,\"worker_runq_ns\":%llu}\n",
	       getpid(), mainst.oncpu - main0.oncpu + worker_stat.oncpu, mainst.runq - main0.runq + worker_stat.runq,
	       worker_stat.oncpu, worker_stat.runq);
	return 0;
}
