// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A stand-in libcudart.so.13 that forwards to the driver API, as the real
 * runtime does: lets a test check that a runtime call and the driver calls it
 * makes are counted once. Linked against the toolkit's stub libcuda.
 */
#include <cuda.h>
#include <stddef.h>

#define EXPORT __attribute__((visibility("default"))) __attribute__((noinline))

struct dim3_ { unsigned x, y, z; };

EXPORT int cudaMemcpy(void *dst, const void *src, size_t n, int kind)
{
	int r = kind == 1 ? cuMemcpyHtoD((CUdeviceptr)dst, src, n) : cuMemcpyDtoH(dst, (CUdeviceptr)src, n);

	return r ? 35 : 0;
}

EXPORT int cudaLaunchKernel(const void *func, struct dim3_ grid, struct dim3_ block, void **args, size_t shmem,
			    void *stream)
{
	int r = cuLaunchKernel((CUfunction)func, grid.x, grid.y, grid.z, block.x, block.y, block.z,
			       (unsigned)shmem, (CUstream)stream, args, NULL);

	return r ? 35 : 0;
}

EXPORT int cudaStreamSynchronize(void *stream)
{
	return cuStreamSynchronize((CUstream)stream) ? 35 : 0;
}
