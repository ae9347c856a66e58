// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loads and unloads a CUDA library with dlopen/dlclose, over and over: each
 * load is one the dlopen hold stops until dlbpf has attached. A thread of its
 * own answers each line on stdin with "alive N" (N loads so far), which a
 * stopped process cannot do.
 *
 *   dlopen_loop LIB   prints "ready", then loops until stdin closes
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

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

int main(int argc, char **argv)
{
	pthread_t th;

	if (argc != 2) {
		fprintf(stderr, "usage: dlopen_loop LIB\n");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	if (pthread_create(&th, NULL, answer, NULL))
		return 1;
	for (;;) {
		void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);

		if (!h) {
			fprintf(stderr, "dlopen_loop: %s\n", dlerror());
			return 1;
		}
		atomic_fetch_add(&loads, 1);
		dlclose(h);
	}
}
