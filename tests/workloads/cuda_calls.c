// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Makes a known set of CUDA runtime calls and prints what it made as JSON: the
 * independent truth the attach/decoding tests compare dlbpf against. Built
 * against the toolkit's headers and library; without a GPU every call fails
 * at once, but the calls (and the probes on them) still happen.
 *
 *   cuda_calls [--wait] [--pinned]
 *     --wait    read one line from stdin before the calls (for --pid tests)
 *     --pinned  also copy from cudaMallocHost / cudaHostRegister memory (the
 *               GPU simulator makes those succeed)
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handshake.h"

/* Host functions standing in for kernels: their addresses are the launch handles. */
__attribute__((noinline, used)) void kernel_alpha(void) { __asm__ volatile(""); }
__attribute__((noinline, used)) void kernel_beta(void) { __asm__ volatile(""); }

#define H2D_N 7
#define H2D_BYTES (1u << 20)
#define D2H_N 3
#define D2H_BYTES 4096u
#define ASYNC_N 2
#define ASYNC_BYTES (256u << 10)

int main(int argc, char **argv)
{
	int wait = 0, pinned = 0, pinned_ok = 0, registered_ok = 0;
	static char host[H2D_BYTES] __attribute__((aligned(64)));
	char *pin = NULL, *reg = NULL;
	void *dev = (void *)0x7000000000ull; /* never dereferenced without a GPU */
	cudaStream_t stream = (cudaStream_t)0;
	unsigned long long pinned_h2d = 0;
	int alpha = 0, beta = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait"))
			wait = 1;
		else if (!strcmp(argv[i], "--pinned"))
			pinned = 1;
		else {
			fprintf(stderr, "usage: %s [--wait] [--pinned]\n", argv[0]);
			return 2;
		}
	}
	if (wait && ready_then_wait())
		return 1;
	memset(host, 1, sizeof(host));
	if (cudaMalloc(&dev, H2D_BYTES) != cudaSuccess)
		dev = (void *)0x7000000000ull;

	for (int i = 0; i < H2D_N; i++)
		cudaMemcpy(dev, host, H2D_BYTES, cudaMemcpyHostToDevice);
	for (int i = 0; i < D2H_N; i++)
		cudaMemcpy(host, dev, D2H_BYTES, cudaMemcpyDeviceToHost);
	for (int i = 0; i < ASYNC_N; i++)
		cudaMemcpyAsync(dev, host, ASYNC_BYTES, cudaMemcpyHostToDevice, stream);
	cudaMemcpy2D(dev, 512, host, 1024, 256, 16, cudaMemcpyHostToDevice);
	cudaMemcpy2DAsync(host, 1024, dev, 512, 128, 8, cudaMemcpyDeviceToHost, stream);
	cudaMemset(dev, 0, 4096);
	cudaMemsetAsync(dev, 0, 8192, stream);

	dim3 g1 = { 64, 2, 1 }, b1 = { 256, 1, 1 }, g2 = { 7, 8, 9 }, b2 = { 32, 4, 2 };
	void *args[1] = { NULL };
	for (int i = 0; i < 5; i++, alpha++)
		cudaLaunchKernel((const void *)kernel_alpha, g1, b1, args, 0, stream);
	for (int i = 0; i < 3; i++, beta++)
		cudaLaunchKernel((const void *)kernel_beta, g2, b2, args, 1024, stream);

	for (int i = 0; i < 4; i++)
		cudaDeviceSynchronize();
	for (int i = 0; i < 2; i++)
		cudaStreamSynchronize(stream);

	if (pinned) {
		if (cudaMallocHost((void **)&pin, H2D_BYTES) == cudaSuccess) {
			pinned_ok = 1;
			cudaMemcpy(dev, pin, H2D_BYTES, cudaMemcpyHostToDevice);
			pinned_h2d++;
			cudaFreeHost(pin);
		}
		reg = aligned_alloc(4096, H2D_BYTES);
		if (reg && cudaHostRegister(reg, H2D_BYTES, cudaHostRegisterDefault) == cudaSuccess) {
			registered_ok = 1;
			cudaMemcpy(dev, reg + 4096, 8192, cudaMemcpyHostToDevice);
			pinned_h2d++;
			cudaHostUnregister(reg);
			/* After unregistering, the same memory is pageable again. */
			cudaMemcpy(dev, reg, 8192, cudaMemcpyHostToDevice);
		}
		free(reg);
	}
	cudaFree(dev);

	printf("{\"h2d\":{\"count\":%d,\"bytes\":%llu},\"d2h\":{\"count\":%d,\"bytes\":%llu},"
	       "\"pinned_h2d\":%llu,\"pinned_alloc_ok\":%d,\"register_ok\":%d,"
	       "\"kernels\":[{\"name\":\"kernel_alpha\",\"count\":%d,\"grid\":[64,2,1],\"block\":[256,1,1],\"shmem\":0},"
	       "{\"name\":\"kernel_beta\",\"count\":%d,\"grid\":[7,8,9],\"block\":[32,4,2],\"shmem\":1024}],"
	       "\"calls\":{\"cudaMemcpy\":%d,\"cudaMemcpyAsync\":%d,\"cudaMemcpy2D\":1,\"cudaMemcpy2DAsync\":1,"
	       "\"cudaMemset\":1,\"cudaMemsetAsync\":1,\"cudaLaunchKernel\":%d,\"cudaDeviceSynchronize\":4,"
	       "\"cudaStreamSynchronize\":2,\"cudaMalloc\":1,\"cudaFree\":1}}\n",
	       H2D_N + ASYNC_N + 1 + (int)pinned_h2d + registered_ok,
	       (unsigned long long)H2D_N * H2D_BYTES + ASYNC_N * ASYNC_BYTES + 256 * 16 +
		       (pinned_ok ? H2D_BYTES : 0) + (registered_ok ? 2 * 8192 : 0),
	       D2H_N + 1, (unsigned long long)D2H_N * D2H_BYTES + 128 * 8,
	       pinned_h2d, pinned_ok, registered_ok, alpha, beta,
	       H2D_N + D2H_N + (int)pinned_h2d + registered_ok, ASYNC_N, alpha + beta);
	return 0;
}
