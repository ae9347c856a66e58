// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Calls one CUDA runtime API in a loop, paced to a rate or as fast as it can,
 * and prints what it did as JSON: the event generator of the benchmarks
 * (tools/bench) and of the low-overhead mode tests. Built against the toolkit's
 * libcudart; without a GPU each call fails at once, and the probes still fire.
 *
 *   ratecalls [--api launch|copy|sync] [--rate N/s] [--seconds S | --count N]
 *             [--threads T] [--wait | --calling]
 *   prints {"api":..,"calls":N,"seconds":S,"ns_per_call":X,"cpu_ns_per_call":C,"rate":R,
 *           "max_lag_s":L,"after_go":G}
 *   (C: the calling threads' own CPU time per call, the probes' traps and
 *   programs included, time another process held the CPU not)
 *   (L: when paced, the furthest any call fell behind its due time; so the calls
 *   made in any interval of length D are rate * D within rate * L)
 *
 * --wait: prints "ready" and makes no call before a line comes on stdin.
 * --calling (with --count N): every thread calls from the start; "ready" is
 * printed once each has made a call, and each makes N more once a line comes
 * on stdin, then stops. G, the calls made after the line, are the ones a tracer
 * that attached before answering must see; attaching meets calls in flight.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handshake.h"

__attribute__((noinline, used)) void ratecalls_kernel(void) { __asm__ volatile(""); }

static const char *api = "launch";
static double rate, seconds = 1;
static long long count_limit;
static int threads = 1;
static int calling;            /* --calling */
static int calling_threads;    /* threads that have made a call */
static int go;                 /* the line came (--calling) */

static double clock_s(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

static void one_call(void *dev, char *host)
{
	static dim3 g = { 1, 1, 1 }, b = { 32, 1, 1 };
	void *args[1] = { NULL };

	switch (api[0]) {
	case 'l':
		cudaLaunchKernel((const void *)ratecalls_kernel, g, b, args, 0, (cudaStream_t)0);
		break;
	case 'c':
		cudaMemcpy(dev, host, 256, cudaMemcpyHostToDevice);
		break;
	default:
		cudaDeviceSynchronize();
		break;
	}
}

struct result {
	long long n;
	long long after_go;
	double max_lag;
};

static void *worker(void *arg)
{
	struct result *out = arg;
	long long n = 0;
	double max_lag = 0;
	char host[256] = { 0 };
	void *dev = (void *)0x7000000000ull;
	double start = now_s(), per = rate > 0 ? threads / rate : 0;

	if (calling) {
		one_call(dev, host);
		n++;
		__atomic_add_fetch(&calling_threads, 1, __ATOMIC_SEQ_CST);
		while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) {
			one_call(dev, host);
			n++;
		}
		for (; out->after_go < count_limit; out->after_go++)
			one_call(dev, host);
		out->n = n + out->after_go;
		return NULL;
	}
	for (;;) {
		if (count_limit ? n >= count_limit : now_s() - start >= seconds)
			break;
		if (per > 0) {
			/* Paced: call i is due at start + i * per; sleep only when well ahead. */
			double due = start + (double)n * per, ahead = due - now_s();

			if (ahead > 200e-6) {
				struct timespec ts = { 0, (long)((ahead - 100e-6) * 1e9) };

				nanosleep(&ts, NULL);
			}
			while (now_s() < due)
				;
			if (now_s() - due > max_lag)
				max_lag = now_s() - due;
		}
		one_call(dev, host);
		n++;
	}
	out->n = n;
	out->max_lag = max_lag;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[64];
	struct result n[64] = { 0 };
	long long total = 0, after_go = 0;
	double max_lag = 0;
	int wait = 0;
	double start, el, cpu_start, cpu;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--wait")) {
			wait = 1;
		} else if (!strcmp(a, "--calling")) {
			calling = 1;
		} else if (v && !strcmp(a, "--api")) {
			api = v, i++;
		} else if (v && !strcmp(a, "--rate")) {
			rate = atof(v), i++;
		} else if (v && !strcmp(a, "--seconds")) {
			seconds = atof(v), i++;
		} else if (v && !strcmp(a, "--count")) {
			count_limit = atoll(v), i++;
		} else if (v && !strcmp(a, "--threads")) {
			threads = atoi(v), i++;
		} else {
			fprintf(stderr, "usage: %s [--api launch|copy|sync] [--rate N] [--seconds S | --count N] "
				"[--threads T] [--wait | --calling]\n", argv[0]);
			return 2;
		}
	}
	if (threads < 1 || threads > 64 || strchr("lcs", api[0]) == NULL || (calling && (wait || count_limit <= 0)))
		return 2;
	if (wait && ready_then_wait())
		return 1;
	start = now_s();
	cpu_start = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	for (int t = 0; t < threads; t++)
		if (pthread_create(&th[t], NULL, worker, &n[t]))
			return 1;
	if (calling) {
		while (__atomic_load_n(&calling_threads, __ATOMIC_SEQ_CST) < threads)
			sched_yield();
		if (ready_then_wait())
			return 1;
		__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	}
	for (int t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		total += n[t].n;
		after_go += n[t].after_go;
		if (n[t].max_lag > max_lag)
			max_lag = n[t].max_lag;
	}
	el = now_s() - start;
	cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
	printf("{\"api\":\"%s\",\"calls\":%lld,\"seconds\":%.6f,\"ns_per_call\":%.1f,\"cpu_ns_per_call\":%.1f,"
	       "\"rate\":%.0f,\"max_lag_s\":%.6f,\"after_go\":%lld}\n",
	       api[0] == 'l' ? "cudaLaunchKernel" : api[0] == 'c' ? "cudaMemcpy" : "cudaDeviceSynchronize",
	       total, el, total ? el * 1e9 * threads / (double)total : 0, total ? cpu * 1e9 / (double)total : 0,
	       total / el, max_lag, after_go);
	return 0;
}
