// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A fork storm of short CUDA-using children: N children, at most K alive at
 * once, each making three CUDA runtime calls (cudaMalloc, cudaMemset,
 * cudaFree: without a GPU each fails at once, the probes on them still fire)
 * and exiting. The shape of DataLoader workers re-forked each epoch, of
 * compile-worker pools, of a decoder process per file.
 *
 * Each child's start delay is measured by the workload's own clock: the
 * parent reads CLOCK_MONOTONIC just before fork(), the child reads it again as
 * the first thing it does after fork() returns (its copy of the parent's
 * memory holds the first reading), and writes both to a shared page. Prints
 * what it made as JSON: the truth the fork-storm test compares dlbpf with.
 *
 *   forkstorm [--children N] [--parallel K]
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"

#define MAX_CHILDREN 4096
#define CALLS_PER_CHILD 3

struct child_slot {
	int64_t fork_ns;     /* the parent's clock just before fork() */
	int64_t start_ns;    /* the child's first reading after fork() returned */
	int32_t pid;
	int32_t calls;       /* CUDA calls it made (returned, whatever the result) */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The child's work; its slot's start_ns is written before anything else. */
static __attribute__((noreturn)) void child_main(struct child_slot *s)
{
	void *dev = NULL;

	s->calls = 0;
	cudaMalloc(&dev, 4096);
	s->calls++;
	cudaMemset(dev, 0, 4096);
	s->calls++;
	cudaFree(dev);
	s->calls++;
	_exit(0);
}

static int reap_one(struct child_slot *slots, long made)
{
	int status;
	pid_t pid = wait(&status);

	if (pid < 0)
		return -1;
	for (long i = 0; i < made; i++)
		if (slots[i].pid == pid)
			return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
	return -1;
}

int main(int argc, char **argv)
{
	long nchildren = 200, parallel = 20, made = 0, alive = 0;
	struct child_slot *slots;
	int failed = 0;
	int64_t t0, max_delay = 0, sum_delay = 0, calls = 0;

	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && !strcmp(argv[i], "--children"))
			nchildren = atol(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--parallel"))
			parallel = atol(argv[++i]);
		else
			return unknown_argument(argv[0], argv[i]);
	}
	if (nchildren < 1 || nchildren > MAX_CHILDREN || parallel < 1) {
		fprintf(stderr, "forkstorm: --children 1..%d, --parallel >= 1\n", MAX_CHILDREN);
		return 2;
	}
	slots = mmap(NULL, sizeof(*slots) * (size_t)nchildren, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	if (slots == MAP_FAILED) {
		perror("forkstorm: mmap");
		return 1;
	}
	t0 = now_ns();
	while (made < nchildren) {
		struct child_slot *s = &slots[made];
		int64_t fork_ns;
		pid_t pid;

		if (alive == parallel) {
			failed |= reap_one(slots, made) != 0;
			alive--;
		}
		fork_ns = now_ns();
		pid = fork();
		if (pid == 0) {
			s->start_ns = now_ns();
			s->fork_ns = fork_ns;
			child_main(s);
		}
		if (pid < 0) {
			perror("forkstorm: fork");
			failed = 1;
			break;
		}
		s->pid = pid;
		made++;
		alive++;
	}
	for (; alive > 0; alive--)
		failed |= reap_one(slots, made) != 0;

	printf("{\"pid\": %d, \"children\": %ld, \"parallel\": %ld, \"wall_s\": %.6f, \"pids\": [", (int)getpid(), made,
	       parallel, (double)(now_ns() - t0) / 1e9);
	for (long i = 0; i < made; i++) {
		int64_t d = slots[i].start_ns - slots[i].fork_ns;

		max_delay = d > max_delay ? d : max_delay;
		sum_delay += d;
		calls += slots[i].calls;
		failed |= slots[i].calls != CALLS_PER_CHILD;
		printf("%s%d", i ? ", " : "", (int)slots[i].pid);
	}
	printf("], \"calls_per_child\": %d, \"calls\": %lld, \"max_start_delay_ms\": %.3f, "
	       "\"mean_start_delay_ms\": %.3f}\n",
	       CALLS_PER_CHILD, (long long)calls, (double)max_delay / 1e6, (double)sum_delay / 1e6 / (double)made);
	return failed;
}
