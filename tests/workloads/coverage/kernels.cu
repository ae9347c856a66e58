// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Named kernels launched a known number of times, the way nvcc 13 binaries
// launch them (<<<>>> -> host stub -> __cudaGetKernel + __cudaLaunchKernel), plus
// the explicit entry points. Without a GPU every call fails fast; the launches
// still happen. Prints its own counts as one JSON line (the ground truth).
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

namespace nn {
__global__ void relu(float *x, int n)
{
	int i = threadIdx.x;
	if (i < n)
		x[i] = x[i] > 0 ? x[i] : 0;
}
} // namespace nn

template <typename T> __global__ void scale(T *x, T a) { x[threadIdx.x] *= a; }

__global__ void plain(int *p) { p[0] = 1; }

int main(int argc, char **argv)
{
	int relu_n = 3, scale_f = 2, scale_d = 4, plain_n = 1, explicit_n = 2;
	float *d = nullptr;

	(void)argc;
	(void)argv;
	for (int i = 0; i < relu_n; i++)
		nn::relu<<<2, 32>>>(d, 4);
	for (int i = 0; i < scale_f; i++)
		scale<float><<<1, 64>>>(d, 2.0f);
	for (int i = 0; i < scale_d; i++)
		scale<double><<<dim3(1, 2, 3), dim3(64, 2)>>>((double *)d, 2.0);
	for (int i = 0; i < plain_n; i++)
		plain<<<3, 1>>>((int *)d);
	/* The explicit runtime entry points, with the host stub as the function. */
	void *args[] = { &d };
	for (int i = 0; i < explicit_n; i++)
		cudaLaunchKernel((const void *)plain, dim3(4), dim3(8), args, 16, 0);
	cudaLaunchConfig_t cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDim = dim3(5, 6, 7);
	cfg.blockDim = dim3(8, 9, 2);
	cfg.dynamicSmemBytes = 256;
	cfg.stream = (cudaStream_t)0x4321;
	cudaLaunchKernelExC(&cfg, (const void *)plain, args);
	cudaGraphLaunch((cudaGraphExec_t)0x777000, 0);
	cudaError_t e = cudaDeviceSynchronize();
	printf("{\"launches\": {\"_ZN2nn4reluEPfi\": %d, \"_Z5scaleIfEvPT_S0_\": %d, \"_Z5scaleIdEvPT_S0_\": %d, "
	       "\"_Z5plainPi\": %d}, \"explicit\": %d, \"exc\": 1, \"graph\": 1, \"sync_error\": %d}\n",
	       relu_n, scale_f, scale_d, plain_n + explicit_n + 1, explicit_n, (int)e);
	return 0;
}
