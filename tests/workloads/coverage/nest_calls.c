// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Runtime calls that go through the driver, and driver calls made directly. Prints its counts. */
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>

struct dim3_ { unsigned x, y, z; };
int cudaMemcpy(void *dst, const void *src, size_t n, int kind);
int cudaLaunchKernel(const void *func, struct dim3_ grid, struct dim3_ block, void **args, size_t shmem,
		     void *stream);
int cudaStreamSynchronize(void *stream);

static char buf[8192];

int main(void)
{
	struct dim3_ g = { 2, 1, 1 }, b = { 32, 1, 1 };
	void *dev = (void *)0x700000000ull;
	int rt_h2d = 5, rt_d2h = 2, rt_launch = 4, rt_sync = 3, drv_h2d = 2, drv_launch = 3;

	for (int i = 0; i < rt_h2d; i++)
		cudaMemcpy(dev, buf, 1024, 1);
	for (int i = 0; i < rt_d2h; i++)
		cudaMemcpy(buf, dev, 2048, 2);
	for (int i = 0; i < rt_launch; i++)
		cudaLaunchKernel((const void *)0xabc0, g, b, NULL, 0, NULL);
	for (int i = 0; i < rt_sync; i++)
		cudaStreamSynchronize(NULL);
	for (int i = 0; i < drv_h2d; i++)
		cuMemcpyHtoD((CUdeviceptr)dev, buf, 4096);
	for (int i = 0; i < drv_launch; i++)
		cuLaunchKernel((CUfunction)0xdef0, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL);
	printf("{\"rt_h2d\": %d, \"rt_d2h\": %d, \"rt_launch\": %d, \"rt_sync\": %d, \"drv_h2d\": %d, "
	       "\"drv_launch\": %d}\n", rt_h2d, rt_d2h, rt_launch, rt_sync, drv_h2d, drv_launch);
	return 0;
}
