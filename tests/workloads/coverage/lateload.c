// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loads a CUDA runtime with dlopen only when told to (after dlbpf attached),
 * then calls it at once: cudaMemcpy N times, cudaStreamSynchronize once.
 * usage: lateload LIBPATH N   (prints "ready", waits for a line on stdin)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*memcpy_fn)(void *, const void *, size_t, int);
typedef int (*sync_fn)(void *);

static char buf[4096];

int main(int argc, char **argv)
{
	char line[16];
	int n = argc > 2 ? atoi(argv[2]) : 5;

	if (argc < 2)
		return 2;
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	memcpy_fn cp = (memcpy_fn)dlsym(h, "cudaMemcpy");
	sync_fn sync = (sync_fn)dlsym(h, "cudaStreamSynchronize");
	if (!cp || !sync)
		return 1;
	for (int i = 0; i < n; i++)
		cp(buf, buf + 1024, 512, 1);
	sync(NULL);
	printf("{\"cudaMemcpy\": %d, \"cudaStreamSynchronize\": 1}\n", n);
	fflush(stdout);
	/* Stay a moment so dlclose's rescan and the exit are seen in order. */
	dlclose(h);
	if (fgets(line, sizeof(line), stdin) == NULL)
		return 0;
	return 0;
}
