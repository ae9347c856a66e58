// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loads and unloads a CUDA library with dlopen/dlclose, over and over.
 *
 *   dlopen_loop LIB [--cycles N] [--alt NAME] [--calls K] [--sleep-ms MS]
 *     (no --cycles)  prints "ready", then loops until stdin closes: each load
 *                    is one the dlopen hold stops until dlbpf has attached. A
 *                    thread of its own answers each line on stdin with
 *                    "alive N" (N loads so far), which a stopped process
 *                    cannot do.
 *     --cycles N     N loads, then prints how many cycles and calls it made,
 *                    and how many times the library was still mapped after
 *                    its dlclose (it must not be, for a test of reloads to
 *                    mean anything)
 *     --alt NAME     every other cycle loads this one instead: each load then
 *                    comes with the other's unload in the same rescan
 *     --calls K      cudaDeviceSynchronize calls while it is loaded (default 0)
 *     --sleep-ms MS  pause after each dlclose (default 0)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handshake.h"

static atomic_ulong loads;

static void *answer(void *arg)
{
	char line[64];

	(void)arg;
	while (fgets(line, sizeof(line), stdin)) {
		printf("alive %lu\n", (unsigned long)atomic_load(&loads));
		fflush(stdout);
	}
	exit(0);
}

/* True while a mapping of a file named name is in /proc/self/maps. */
static int mapped(const char *name)
{
	char line[4352];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	const char *lib, *alt = NULL;
	long cycles = 0, calls = 0, still_mapped = 0, sleep_ms = 0, per_load = 0, i;
	pthread_t th;

	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: %s LIB [--cycles N] [--alt NAME] [--calls K] [--sleep-ms MS]\n", argv[0]);
		return 2;
	}
	lib = argv[1];
	for (int a = 2; a < argc; a++) {
		if (!strcmp(argv[a], "--cycles") && a + 1 < argc && (cycles = atol(argv[a + 1])) > 0)
			a++;
		else if (!strcmp(argv[a], "--alt") && a + 1 < argc)
			alt = argv[++a];
		else if (!strcmp(argv[a], "--calls") && a + 1 < argc)
			per_load = atol(argv[++a]);
		else if (!strcmp(argv[a], "--sleep-ms") && a + 1 < argc)
			sleep_ms = atol(argv[++a]);
		else
			return unknown_argument(argv[0], argv[a]);
	}
	if (!cycles) {
		printf("ready\n");
		fflush(stdout);
		if (pthread_create(&th, NULL, answer, NULL))
			return 1;
	}
	for (i = 0; !cycles || i < cycles; i++) {
		const char *name = alt && i % 2 ? alt : lib;
		void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
		int (*sync)(void) = NULL;

		if (!h) {
			fprintf(stderr, "dlopen_loop: %s\n", dlerror());
			return 1;
		}
		atomic_fetch_add(&loads, 1);
		if (per_load)
			sync = (int (*)(void))dlsym(h, "cudaDeviceSynchronize");
		for (long k = 0; sync && k < per_load; k++) {
			sync();   /* fails without a GPU; a call all the same */
			calls++;
		}
		dlclose(h);
		/* Only where it is reported: a read of /proc each load would slow the endless loop. */
		if (cycles)
			still_mapped += mapped(name) > 0;
		if (sleep_ms)
			nanosleep(&(struct timespec){ sleep_ms / 1000, (sleep_ms % 1000) * 1000000 }, NULL);
	}
	printf("{\"cycles\":%ld,\"calls\":%ld,\"still_mapped\":%ld}\n", i, calls, still_mapped);
	return 0;
}
