// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loads and unloads the CUDA runtime in a loop: dlopen, one cudaDeviceSynchronize,
 * dlclose.
 * Prints how many cycles and calls it made, and how many times the library
 * was still mapped after its dlclose (it must not be, for the test to mean
 * anything).
 *
 *   dlloop N [--lib NAME] [--alt NAME] [--calls K] [--sleep-ms MS] [--wait]
 *     --lib NAME     the library to dlopen (default libcudart.so.13, found on
 *                    LD_LIBRARY_PATH: the toolkit's or the simulator's)
 *     --alt NAME     every other cycle loads this one instead: each load then
 *                    comes with the other's unload in the same rescan
 *     --calls K      calls made while it is loaded (default 1)
 *     --sleep-ms MS  pause after each dlclose (default 0)
 *     --wait         print "ready" and read one line from stdin first
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
	const char *lib = "libcudart.so.13", *alt = NULL;
	long n, cycles = 0, calls = 0, still_mapped = 0, sleep_ms = 0, per_cycle = 1;
	int wait = 0;

	if (argc < 2 || (n = atol(argv[1])) <= 0) {
		fprintf(stderr, "usage: %s N [--lib NAME] [--alt NAME] [--calls K] [--sleep-ms MS] [--wait]\n", argv[0]);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--lib") && i + 1 < argc)
			lib = argv[++i];
		else if (!strcmp(argv[i], "--alt") && i + 1 < argc)
			alt = argv[++i];
		else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
			per_cycle = atol(argv[++i]);
		else if (!strcmp(argv[i], "--sleep-ms") && i + 1 < argc)
			sleep_ms = atol(argv[++i]);
		else if (!strcmp(argv[i], "--wait"))
			wait = 1;
		else {
			fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], argv[i]);
			return 2;
		}
	}
	if (wait) {
		char line[16];

		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	for (long i = 0; i < n; i++) {
		const char *name = alt && i % 2 ? alt : lib;
		void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
		int (*sync)(void);

		if (!h) {
			fprintf(stderr, "dlopen %s: %s\n", name, dlerror());
			return 1;
		}
		sync = (int (*)(void))dlsym(h, "cudaDeviceSynchronize");
		for (long k = 0; sync && k < per_cycle; k++) {
			sync();   /* fails without a GPU; a call all the same */
			calls++;
		}
		dlclose(h);
		cycles++;
		still_mapped += mapped(name) > 0;
		if (sleep_ms)
			nanosleep(&(struct timespec){ sleep_ms / 1000, (sleep_ms % 1000) * 1000000 }, NULL);
	}
	printf("{\"cycles\":%ld,\"calls\":%ld,\"still_mapped\":%ld}\n", cycles, calls, still_mapped);
	return 0;
}
