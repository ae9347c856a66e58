// SPDX-License-Identifier: MIT
/*
 * Model tests for the GPU simulator (tests/gpusim/gpusim_*.c).
 *
 * Built against the toolkit's headers and linked against the toolkit's real
 * libcudart.so.13 (no rpath); run with LD_LIBRARY_PATH pointing at the
 * simulator. The first check makes sure the simulator, not the real runtime,
 * was loaded.
 *
 * Two parts:
 *   - data tests (this file), in a forked child with the default
 *     GPUSIM_COPY_DATA=1: the bytes really move (copies, 2D copies, memsets,
 *     async + sync, concurrency from two threads), and error codes;
 *   - timing tests (test_gpusim_timing.c, which says how they stay robust
 *     on a loaded machine), in the parent with GPUSIM_COPY_DATA=0 so the
 *     host memcpy (about 15 GB/s on these VMs, slower than the 24 GB/s
 *     pinned model) does not stretch the calls.
 *
 * Prints one line per check and a final line "N passed, N failed"; exits
 * non-zero on any failure.
 */
#define _GNU_SOURCE
#include "test_gpusim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int passed, failed;
set_cost_fn set_cost;
is_dev_fn is_dev;

/* Distinct bodies, so no optimisation may fold two handles into one. */
static volatile int kern_hits;
void kern_a(void) { kern_hits += 1; }
void kern_b(void) { kern_hits += 2; }
void kern_c(void) { kern_hits += 3; }
void kern_zero(void) { kern_hits += 4; }

/* ---------------------------------------------------------------- data -- */

struct thr_arg {
	int id;
	int ok;
};

static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	cudaStream_t s;
	char host[4096], back[4096];
	void *dev;

	a->ok = 0;
	if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&dev, sizeof(host)) != cudaSuccess)
		return NULL;
	for (int i = 0; i < 200; i++) {
		memset(host, a->id * 31 + i, sizeof(host));
		if (cudaMemcpyAsync(dev, host, sizeof(host), cudaMemcpyHostToDevice, s) ||
		    launch((const void *)kern_zero, 1, s) ||
		    cudaMemcpyAsync(back, dev, sizeof(back), cudaMemcpyDeviceToHost, s) ||
		    cudaStreamSynchronize(s))
			return NULL;
		if (memcmp(host, back, sizeof(host)))
			return NULL;
	}
	cudaFree(dev);
	cudaStreamDestroy(s);
	a->ok = 1;
	return NULL;
}

static void data_tests(void)
{
	size_t n = 1 << 20;
	unsigned char *h = malloc(n), *b = malloc(n), *ph, *pb;
	void *d, *d2;
	cudaStream_t s;
	struct cudaDeviceProp prop;
	int count = -1, dev = -1;

	for (size_t i = 0; i < n; i++)
		h[i] = (unsigned char)(i * 2654435761u >> 13);

	CK(cudaGetDeviceCount(&count));
	CHECK(count == 1, "one simulated device (%d)", count);
	CK(cudaSetDevice(0));
	CK(cudaGetDevice(&dev));
	CK(cudaGetDeviceProperties(&prop, 0));
	CHECK(prop.name[0] && prop.totalGlobalMem > 0, "device properties: \"%s\"", prop.name);

	CK(cudaMalloc(&d, n));
	CK(cudaMalloc(&d2, n));
	CHECK(((uintptr_t)d & 255) == 0, "cudaMalloc returns 256-byte aligned pointers");
	CHECK(is_dev(d) && !is_dev(h), "device pointers are distinguishable from host ones");

	/* synchronous round trip */
	memset(b, 0, n);
	CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(b, d, n, cudaMemcpyDeviceToHost));
	CHECK(!memcmp(h, b, n), "sync H2D + D2H round trip preserves the bytes");

	/* D2D + cudaMemcpyDefault */
	memset(b, 0, n);
	CK(cudaMemcpy(d2, d, n, cudaMemcpyDeviceToDevice));
	CK(cudaMemcpy(b, d2, n, cudaMemcpyDefault));
	CHECK(!memcmp(h, b, n), "D2D copy and cudaMemcpyDefault preserve the bytes");

	/* pinned async round trip on a stream, visible after the sync */
	CK(cudaMallocHost((void **)&ph, n));
	CK(cudaHostAlloc((void **)&pb, n, cudaHostAllocDefault));
	memcpy(ph, h, n);
	memset(pb, 0, n);
	CK(cudaStreamCreate(&s));
	CK(cudaMemcpyAsync(d2, ph, n, cudaMemcpyHostToDevice, s));
	CK(cudaMemcpyAsync(pb, d2, n, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	CHECK(!memcmp(h, pb, n), "pinned async H2D + D2H bytes visible after cudaStreamSynchronize");

	/* memset */
	CK(cudaMemset(d, 0x5a, n / 2));
	CK(cudaMemsetAsync((char *)d + n / 2, 0xa5, n / 2, s));
	CK(cudaMemcpy(b, d, n, cudaMemcpyDeviceToHost));
	int mok = 1;
	for (size_t i = 0; i < n; i++)
		if (b[i] != (i < n / 2 ? 0x5a : 0xa5)) {
			mok = 0;
			break;
		}
	CHECK(mok, "cudaMemset / cudaMemsetAsync write the value");

	/* 2D: 64 rows of 100 bytes, source pitch 128, destination pitch 256 */
	CK(cudaMemset(d, 0, n));
	CK(cudaMemcpy2D(d, 256, h, 128, 100, 64, cudaMemcpyHostToDevice));
	memset(b, 0xff, n);
	CK(cudaMemcpy2DAsync(b, 100, d, 256, 100, 64, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	int ok2 = 1;
	for (int r = 0; r < 64 && ok2; r++)
		if (memcmp(b + r * 100, h + r * 128, 100))
			ok2 = 0;
	CHECK(ok2, "cudaMemcpy2D / cudaMemcpy2DAsync honour the pitches");

	/* Registered (pinned) malloc memory: async D2H into it, then sync. */
	memset(b, 0, n);
	CK(cudaHostRegister(b, n, cudaHostRegisterDefault));
	CK(cudaMemcpyAsync(b, d2, n, cudaMemcpyDeviceToHost, s));
	CK(cudaDeviceSynchronize());
	CHECK(!memcmp(h, b, n), "async D2H into a registered buffer is complete after cudaDeviceSynchronize");
	CK(cudaHostUnregister(b));

	/* two threads with their own streams */
	pthread_t t[2];
	struct thr_arg a[2] = { { 1, 0 }, { 2, 0 } };
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, thr_main, &a[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(a[0].ok && a[1].ok, "two threads copying and launching concurrently");

	CK(cudaStreamDestroy(s));
	CK(cudaFreeHost(ph));
	CK(cudaFreeHost(pb));
	CK(cudaFree(d));
	CK(cudaFree(d2));
	free(h);
	free(b);
}

/* -------------------------------------------------------------- errors -- */

static void error_tests(void)
{
	void *d, *p;
	char host[64];
	cudaEvent_t ev;
	cudaStream_t bogus = (cudaStream_t)(uintptr_t)0xdeadbeef;
	dim3 big = { 2048, 1, 1 };

	CK(cudaMalloc(&d, 1024));
	(void)cudaGetLastError();
	CHECK(cudaMemcpy(d, host, sizeof(host), (enum cudaMemcpyKind)42) == cudaErrorInvalidMemcpyDirection,
	      "bad copy kind -> cudaErrorInvalidMemcpyDirection");
	CHECK(cudaPeekAtLastError() == cudaErrorInvalidMemcpyDirection, "cudaPeekAtLastError sees it");
	CHECK(cudaGetLastError() == cudaErrorInvalidMemcpyDirection, "cudaGetLastError returns it");
	CHECK(cudaGetLastError() == cudaSuccess, "... and resets it");
	CHECK(cudaMemcpy(host, host + 1, 8, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
	      "H2D to a host pointer -> cudaErrorInvalidValue");
	CHECK(cudaMemcpy(d, host, 2048, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
	      "H2D past the end of the allocation -> cudaErrorInvalidValue");
	CHECK(cudaMemcpy(NULL, host, 8, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
	      "NULL destination -> cudaErrorInvalidValue");
	CHECK(cudaMemset(host, 0, 8) == cudaErrorInvalidValue, "cudaMemset on host memory -> cudaErrorInvalidValue");
	CHECK(cudaFree(host) == cudaErrorInvalidValue, "cudaFree(host pointer) -> cudaErrorInvalidValue");
	CHECK(cudaMalloc(NULL, 8) == cudaErrorInvalidValue, "cudaMalloc(NULL) -> cudaErrorInvalidValue");
	CHECK(cudaStreamSynchronize(bogus) == cudaErrorInvalidResourceHandle,
	      "sync on a bogus stream -> cudaErrorInvalidResourceHandle");
	CHECK(cudaLaunchKernel(NULL, d3(1), d3(1), NULL, 0, 0) == cudaErrorInvalidDeviceFunction,
	      "launch of NULL -> cudaErrorInvalidDeviceFunction");
	CHECK(cudaLaunchKernel((const void *)kern_zero, d3(1), big, NULL, 0, 0) == cudaErrorInvalidConfiguration,
	      "2048 threads per block -> cudaErrorInvalidConfiguration");
	CHECK(cudaLaunchKernel((const void *)kern_zero, d3(0), d3(1), NULL, 0, 0) == cudaErrorInvalidConfiguration,
	      "empty grid -> cudaErrorInvalidConfiguration");
	CHECK(cudaSetDevice(3) == cudaErrorInvalidDevice, "cudaSetDevice(3) -> cudaErrorInvalidDevice");
	p = malloc(8192);
	CK(cudaHostRegister(p, 8192, 0));
	CHECK(cudaHostRegister((char *)p + 4096, 100, 0) == cudaErrorHostMemoryAlreadyRegistered,
	      "overlapping cudaHostRegister -> cudaErrorHostMemoryAlreadyRegistered");
	CK(cudaHostUnregister(p));
	CHECK(cudaHostUnregister(p) == cudaErrorHostMemoryNotRegistered,
	      "cudaHostUnregister twice -> cudaErrorHostMemoryNotRegistered");
	CHECK(cudaFreeHost(p) == cudaErrorInvalidValue, "cudaFreeHost(malloc'd) -> cudaErrorInvalidValue");
	free(p);
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	CK(cudaEventRecord(ev, 0));
	CK(cudaEventSynchronize(ev));
	float ms;
	CHECK(cudaEventElapsedTime(&ms, ev, ev) == cudaErrorInvalidResourceHandle,
	      "cudaEventElapsedTime on a DisableTiming event fails");
	CK(cudaEventDestroy(ev));
	CHECK(cudaEventDestroy(ev) == cudaErrorInvalidResourceHandle, "double cudaEventDestroy fails");
	CHECK(!strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue"), "cudaGetErrorName");
	CHECK(!strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument"), "cudaGetErrorString");
	CHECK(!strcmp(cudaGetErrorString(cudaErrorInsufficientDriver),
		      "CUDA driver version is insufficient for CUDA runtime version"),
	      "cudaGetErrorString(35) matches the real runtime's text");
	CK(cudaFree(d));
	(void)cudaGetLastError();
}

/* The registration family must be harmless no-ops. */
extern void **__cudaRegisterFatBinary(void *fatCubin);
extern void __cudaRegisterFatBinaryEnd(void **h);
extern void __cudaUnregisterFatBinary(void **h);
extern void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName,
				   int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
extern void __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
			      size_t size, int constant, int global);

static void registration_tests(void)
{
	static char fake_fatbin[64], var[8];
	void **h = __cudaRegisterFatBinary(fake_fatbin);

	CHECK(h != NULL, "__cudaRegisterFatBinary returns a handle");
	__cudaRegisterFunction(h, (const char *)kern_a, (char *)"kern_a", "kern_a", -1, NULL, NULL, NULL, NULL, NULL);
	__cudaRegisterVar(h, var, (char *)"var", "var", 0, sizeof(var), 0, 0);
	__cudaRegisterFatBinaryEnd(h);
	__cudaUnregisterFatBinary(h);
	CHECK(cudaGetLastError() == cudaSuccess, "registration family: no-op successes");
}

static void pin_env(void)
{
	char v[32];

	snprintf(v, sizeof(v), "%g", PINNED_GBPS);
	setenv("GPUSIM_PINNED_GBPS", v, 1);
	snprintf(v, sizeof(v), "%g", PAGEABLE_GBPS);
	setenv("GPUSIM_PAGEABLE_GBPS", v, 1);
	snprintf(v, sizeof(v), "%g", LATENCY_NS / 1000.0);
	setenv("GPUSIM_COPY_LATENCY_US", v, 1);
	snprintf(v, sizeof(v), "%g", LAUNCH_NS / 1000.0);
	setenv("GPUSIM_LAUNCH_US", v, 1);
	snprintf(v, sizeof(v), "%llu", NS_PER_BLOCK);
	setenv("GPUSIM_NS_PER_BLOCK", v, 1);
	snprintf(v, sizeof(v), "%g", KBASE_NS / 1000.0);
	setenv("GPUSIM_KERNEL_BASE_US", v, 1);
	unsetenv("GPUSIM_TIMERSLACK_NS");
	unsetenv("GPUSIM_DEVICE_MEM_MB");
	unsetenv("GPUSIM_SCHEDULE");
	unsetenv("GPUSIM_DEVICES");
	unsetenv("GPUSIM_COMPUTE_ENGINES");
	setenv("GPUSIM_PEER_GBPS", "24", 1);
}

int main(void)
{
	int fds[2], st = 0, cp = 0, cf = 1;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	set_cost = (set_cost_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimSetKernelCost");
	is_dev = (is_dev_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gpusimIsDevicePointer");
	if (!set_cost || !is_dev) {
		printf("FAIL - not running on the simulator (set LD_LIBRARY_PATH to .output/gpusim)\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	passed++;
	printf("ok   - running on the simulator\n");
	pin_env();

	/* data tests in a child, with bytes moving (the default) */
	if (pipe(fds))
		return 1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		unsetenv("GPUSIM_COPY_DATA");
		passed = failed = 0;
		data_tests();
		registration_tests();
		error_tests();
		int r[2] = { passed, failed };
		if (write(fds[1], r, sizeof(r)) != sizeof(r))
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	{
		int r[2];
		if (read(fds[0], r, sizeof(r)) == sizeof(r)) {
			cp = r[0];
			cf = r[1];
		}
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			printf("FAIL - data-test child exited abnormally (status %d)\n", st);
			cf++;
		}
	}
	passed += cp;
	failed += cf;

	/* timing tests here, bytes not moved so host memcpy speed is not measured */
	setenv("GPUSIM_COPY_DATA", "0", 1);
	setenv("GPUSIM_DEVICES", "2", 1);
	timing_tests();
	shapes_tests();

	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
