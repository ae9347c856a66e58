// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A traced process that names itself and its kernel with bytes meant for the
 * terminal of whoever traces it, and with bytes that are not UTF-8: what the
 * escaping of every output is tested against. Prints its truth as JSON, the
 * names in hex, since they are the point.
 *
 *   hostile_names NAME CHILD_NAME
 *     renames itself NAME (prctl(PR_SET_NAME): the kernel keeps 15 bytes),
 *     prints "ready" and waits for a line; a thread (named NAME too: it is
 *     cloned with it) makes the CUDA calls, launching a kernel whose symbol
 *     is KERNEL_SYM; then it renames itself CHILD_NAME and forks a child
 *     that exits at once, so the fork event carries CHILD_NAME.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handshake.h"

/* OSC title, BEL, CR, C1 CSI, an overlong '/', a UTF-8 surrogate, a right-to-left override, e acute, FF. */
#define KERNEL_SYM "k\033]0;pwn\a\r\xc2\x9b\xc0\xaf\xed\xa0\x80\xe2\x80\xae\xc3\xa9\xff"

/*
 * The host function standing in for a kernel. GNU as takes any bytes in a
 * quoted name, and gcc passes the label as written; clang quotes it itself.
 */
#ifdef __clang__
#define ASM_NAME(s) s
#else
#define ASM_NAME(s) "\"" s "\""
#endif
void hostile_kernel(void) __asm__(ASM_NAME(KERNEL_SYM));
__attribute__((noinline, used)) void hostile_kernel(void) { __asm__ volatile(""); }

#define H2D_N 3
#define H2D_BYTES (64u << 10)
#define LAUNCH_N 2
#define SYNC_N 2

static char host[H2D_BYTES];

static void *calls(void *arg)
{
	void *dev = NULL;
	dim3 g = { 4, 1, 1 }, b = { 32, 1, 1 };
	void *args[1] = { NULL };

	(void)arg;
	if (cudaMalloc(&dev, H2D_BYTES) != cudaSuccess)
		dev = (void *)0x7000000000ull;
	for (int i = 0; i < H2D_N; i++)
		cudaMemcpy(dev, host, H2D_BYTES, cudaMemcpyHostToDevice);
	for (int i = 0; i < LAUNCH_N; i++)
		cudaLaunchKernel((const void *)hostile_kernel, g, b, args, 0, 0);
	for (int i = 0; i < SYNC_N; i++)
		cudaDeviceSynchronize();
	cudaFree(dev);
	return NULL;
}

static void hex(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		printf("%02x", *p);
}

int main(int argc, char **argv)
{
	pthread_t t;
	pid_t child;
	int status;

	if (argc != 3) {
		fprintf(stderr, "usage: %s NAME CHILD_NAME\n", argv[0]);
		return 2;
	}
	if (prctl(PR_SET_NAME, argv[1]) != 0) {
		perror("prctl");
		return 1;
	}
	if (ready_then_wait())
		return 1;
	if (pthread_create(&t, NULL, calls, NULL) != 0 || pthread_join(t, NULL) != 0)
		return 1;
	if (prctl(PR_SET_NAME, argv[2]) != 0) {
		perror("prctl");
		return 1;
	}
	fflush(stdout);
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0)
		_exit(0);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status))
		return 1;
	printf("{\"pid\":%d,\"child\":%d,\"kernel_hex\":\"", (int)getpid(), (int)child);
	hex(KERNEL_SYM);
	printf("\",\"calls\":{\"cudaMalloc\":1,\"cudaMemcpy\":%d,\"cudaLaunchKernel\":%d,"
	       "\"cudaDeviceSynchronize\":%d,\"cudaFree\":1},\"h2d\":{\"count\":%d,\"bytes\":%u}}\n",
	       H2D_N, LAUNCH_N, SYNC_N, H2D_N, H2D_N * H2D_BYTES);
	return 0;
}
