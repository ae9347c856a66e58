// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A job of many CUDA processes, which takes a tracer a while to attach to:
 * N children each load LIB and wait.
 *
 *   cudafleet N LIB   prints "ready" once every child has loaded LIB; when
 *                     stdin ends, ends the children and exits 0
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc == 3 ? atoi(argv[1]) : 0, p[2];
	char c, line[16];
	pid_t *kids;

	if (n <= 0 || pipe(p)) {
		fprintf(stderr, "usage: cudafleet N LIB\n");
		return 2;
	}
	kids = calloc((size_t)n, sizeof(*kids));
	if (!kids)
		return 1;
	for (int i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 1;
		if (kids[i] == 0) {
			if (!dlopen(argv[2], RTLD_NOW | RTLD_LOCAL)) {
				fprintf(stderr, "cudafleet: %s\n", dlerror());
				_exit(1);
			}
			if (write(p[1], "x", 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
	}
	for (int i = 0; i < n; i++)
		if (read(p[0], &c, 1) != 1)
			return 1;
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	for (int i = 0; i < n; i++)
		kill(kids[i], SIGTERM);
	for (int i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	return 0;
}
