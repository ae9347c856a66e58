// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Drives deep_cudart.c: one chain of cudaStreamSynchronize nested DEPTH calls
 * deep, then single calls, then kernel launches whose launch configuration is
 * readable (OK of them) or unmapped (FAULT of them), and cudaMalloc with an
 * unmapped out pointer (FAULT). Prints what it did as JSON.
 *
 *   deep_calls [--depth D] [--after N] [--launches OK] [--faults FAULT]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int cudaStreamSynchronize(void *levels_below);
int cudaLaunchKernelExC(const void *config, const void *func, void **args);
int cudaMalloc(void **out, size_t size);

/* cudaLaunchConfig_t's leading fields, as the runtime lays them out. */
struct launch_config {
	unsigned grid[3], block[3];
	size_t shmem;
	void *stream;
	void *attrs;
	unsigned nattrs;
};

__attribute__((noinline, used)) void deep_kernel(void) { __asm__ volatile(""); }

/* An address no mapping covers: a page mapped, then unmapped. */
static void *unmapped_page(void)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || munmap(p, (size_t)page))
		exit(1);
	return p;
}

int main(int argc, char **argv)
{
	long depth = 10, after = 3, ok = 5, faults = 4;
	struct launch_config cfg = { { 3, 2, 1 }, { 64, 1, 1 }, 128, NULL, NULL, 0 };
	void *bad;

	for (int i = 1; i + 1 < argc; i += 2) {
		long v = atol(argv[i + 1]);

		if (!strcmp(argv[i], "--depth"))
			depth = v;
		else if (!strcmp(argv[i], "--after"))
			after = v;
		else if (!strcmp(argv[i], "--launches"))
			ok = v;
		else if (!strcmp(argv[i], "--faults"))
			faults = v;
		else
			return 2;
	}
	if (depth < 1 || after < 0 || ok < 0 || faults < 0)
		return 2;
	bad = unmapped_page();
	/* depth calls in one chain: the outermost and depth - 1 inside it */
	cudaStreamSynchronize((void *)(uintptr_t)(depth - 1));
	for (long i = 0; i < after; i++)
		cudaStreamSynchronize(NULL);
	for (long i = 0; i < ok; i++)
		cudaLaunchKernelExC(&cfg, (const void *)deep_kernel, NULL);
	for (long i = 0; i < faults; i++)
		cudaLaunchKernelExC(bad, (const void *)deep_kernel, NULL);
	for (long i = 0; i < faults; i++)
		cudaMalloc(bad, 256);
	printf("{\"nested_chain\": %ld, \"single_syncs\": %ld, \"launch_ok\": %ld, \"launch_fault\": %ld, "
	       "\"malloc_fault\": %ld, \"grid\": [3, 2, 1], \"block\": [64, 1, 1], \"shmem\": 128}\n",
	       depth, after, ok, faults, faults);
	return 0;
}
