// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Named functions that make a known number of CUDA calls each, step after
 * step: the truth of the call-site tests. Each function's calls return into
 * it, so dlbpf must name it (function+offset, this executable) with exactly
 * these counts. Prints one JSON line: per function, per API, the calls made.
 *
 *   callsites [--steps N] [--unreadable N]
 *     --steps N       training steps (default 20)
 *     --unreadable N  also enter cudaLaunchKernel N times with the stack
 *                     pointer on a page that cannot be read, so its return
 *                     address is unreadable at entry (x86-64): the first
 *                     push faults, and the SIGSEGV handler (on its own
 *                     stack) jumps back. dlbpf must count them as unknown.
 *
 * Run it with the GPU simulator (LD_LIBRARY_PATH) for timing; with the real
 * runtime and no GPU every call fails fast but is still made.
 */
#include <cuda_runtime_api.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "handshake.h"

#define BATCH_COPIES 2
#define BATCH_BYTES (1u << 20)
#define LAYERS 6
#define LOSS_BYTES 4u

__attribute__((noinline, used)) void layer_kernel(void) { __asm__ volatile(""); }

static unsigned long long n_batch, n_layers, n_sync, n_loss, n_unreadable;

__attribute__((noinline)) void load_batch(void *dev, const void *host)
{
	for (int i = 0; i < BATCH_COPIES; i++, n_batch++)
		cudaMemcpy(dev, host, BATCH_BYTES, cudaMemcpyHostToDevice);
}

__attribute__((noinline)) void forward(void)
{
	void *args[1] = { NULL };

	for (int i = 0; i < LAYERS; i++, n_layers++)
		cudaLaunchKernel((const void *)layer_kernel, (dim3){ 64, 1, 1 }, (dim3){ 256, 1, 1 }, args, 0, 0);
}

__attribute__((noinline)) void wait_gpu(void)
{
	n_sync++;
	cudaDeviceSynchronize();
}

/* A loss.item(): a small copy back behind the queued work. */
__attribute__((noinline)) void read_loss(void *host, const void *dev)
{
	n_loss++;
	cudaMemcpy(host, dev, LOSS_BYTES, cudaMemcpyDeviceToHost);
}

static sigjmp_buf back;

static void on_fault(int sig)
{
	(void)sig;
	siglongjmp(back, 1);
}

/* Enters fn with rsp at the start of a page that cannot be read: [rsp] (its return address) is unreadable. */
static int enter_unreadable(void *fn, char *top)
{
	if (sigsetjmp(back, 1))
		return 0;
#if defined(__x86_64__)
	__asm__ volatile("mov %0, %%rsp\n\tjmp *%1" : : "r"(top), "r"(fn) : "memory");
#else
	/* x86-64 only: arm64's return address is x30, never read from the stack (--unreadable fails). */
	(void)fn;
	(void)top;
#endif
	return -1;
}

static int unreadable_calls(int n)
{
	static char altstack[64 << 10];
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	struct sigaction sa, old_segv, old_bus;
	char *page = mmap(NULL, 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (page == MAP_FAILED || sigaltstack(&ss, NULL))
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fault;
	sa.sa_flags = SA_ONSTACK | SA_NODEFER;
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	for (int i = 0; i < n; i++, n_unreadable++)
		if (enter_unreadable((void *)cudaLaunchKernel, page + 4096))
			return -1;
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	munmap(page, 2 * 4096);
	return 0;
}

int main(int argc, char **argv)
{
	static char host[BATCH_BYTES] __attribute__((aligned(64)));
	int steps = 20, unreadable = 0, wait = 0;
	void *dev = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--unreadable") && i + 1 < argc)
			unreadable = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--wait"))
			wait = 1;
		else
			return unknown_argument(argv[0], argv[i]);
	}
	if (wait && ready_then_wait())
		return 1;
	if (cudaMalloc(&dev, BATCH_BYTES) != cudaSuccess)
		dev = (void *)0x7000000000ull; /* no GPU: never dereferenced */
	for (int s = 0; s < steps; s++) {
		load_batch(dev, host);
		forward();
		read_loss(host, dev);
		wait_gpu();
	}
	if (unreadable && unreadable_calls(unreadable)) {
		fprintf(stderr, "callsites: could not make the unreadable-stack calls\n");
		return 1;
	}
	printf("{\"sites\": {\"load_batch\": {\"cudaMemcpy\": %llu}, \"forward\": {\"cudaLaunchKernel\": %llu}, "
	       "\"read_loss\": {\"cudaMemcpy\": %llu}, \"wait_gpu\": {\"cudaDeviceSynchronize\": %llu}}, "
	       "\"unreadable\": %llu, \"steps\": %d}\n",
	       n_batch, n_layers, n_loss, n_sync, n_unreadable, steps);
	return 0;
}
