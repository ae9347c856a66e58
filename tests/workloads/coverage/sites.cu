// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Host functions of an nvcc-built binary (static cudart) that make a known
// number of CUDA calls each: the truth of the native call-site test. Without a
// GPU every call fails fast; the calls still happen. Prints one JSON line.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void relu(float *x, int n)
{
	int i = threadIdx.x;
	if (i < n)
		x[i] = x[i] > 0 ? x[i] : 0;
}

static float host[1024];

__attribute__((noinline)) int upload(float *d, int n)
{
	for (int i = 0; i < n; i++)
		cudaMemcpy(d, host, sizeof(host), cudaMemcpyHostToDevice);
	return n;
}

__attribute__((noinline)) int layers(float *d, int n)
{
	for (int i = 0; i < n; i++)
		relu<<<1, 32>>>(d, 32);
	return n;
}

__attribute__((noinline)) int finish(void)
{
	cudaDeviceSynchronize();
	return 1;
}

int main()
{
	float *d = nullptr;
	int up = upload(d, 5), ly = layers(d, 3), fin = finish();

	printf("{\"upload\": %d, \"layers\": %d, \"finish\": %d}\n", up, ly, fin);
	return 0;
}
