// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A stand-in libcudart.so.13 for the paths a real runtime rarely takes: calls
 * that nest inside each other as deep as the caller asks, and calls whose
 * pointer arguments point nowhere. It touches none of its pointer arguments,
 * so the caller can pass unmapped addresses without crashing.
 */
#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default"), noinline))

/* Each level calls the next through the exported (probed) symbol: a probed call inside a probed call. */
EXPORT int cudaStreamSynchronize(void *levels_below)
{
	uintptr_t n = (uintptr_t)levels_below;
	int r = 0;

	if (n)
		r = cudaStreamSynchronize((void *)(n - 1));
	/* Keeps the call a call: a tail call would reuse this frame and return once for two. */
	__asm__ volatile("" : "+r"(r) : : "memory");
	return r;
}

EXPORT int cudaLaunchKernelExC(const void *config, const void *func, void **args)
{
	(void)func;
	(void)args;
	return config ? 0 : 1;
}

/* Writes no result: a caller testing a bad out pointer gets cudaErrorInvalidValue. */
EXPORT int cudaMalloc(void **out, size_t size)
{
	(void)out;
	(void)size;
	return 1;
}
