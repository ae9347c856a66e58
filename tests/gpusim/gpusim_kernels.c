// SPDX-License-Identifier: MIT
/*
 * gpusim kernels: what a launch costs (host CPU, then device time on the
 * compute engine), the call-configuration stack nvcc's <<<>>> stubs push and
 * pop, and the fatbinary registration calls, which the simulator accepts and
 * ignores because no device code ever runs.
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

static _Thread_local struct {
	int depth;
	dim3 grid[4], block[4];
	size_t shmem[4];
	cudaStream_t stream[4];
} t_cfg;

/* Under the lock: the cost entry set for func, or NULL. */
static struct range *kcost_find(const void *func)
{
	struct range *r = S.kcost.v;

	for (size_t i = 0; i < S.kcost.n; i++)
		if (r[i].base == (uintptr_t)func)
			return &r[i];
	return NULL;
}

GPUSIM_API int gpusimSetKernelCost(const void *func, unsigned long long ns)
{
	struct range *r;

	if (!func)
		return -1;
	lock();
	r = kcost_find(func);
	if (r) {
		r->size = ns;
		unlock();
		return 0;
	}
	r = vec_push(&S.kcost);
	if (r)
		*r = (struct range){ .base = (uintptr_t)func, .size = ns };
	unlock();
	return r ? 0 : -1;
}

/* Under the lock: a launch's device time, the cost set for func or the grid-size model. */
uint64_t kernel_cost(const void *func, dim3 grid)
{
	struct range *r = kcost_find(func);

	return r ? r->size : S.kernel_base_ns + (uint64_t)grid.x * grid.y * grid.z * S.ns_per_block;
}

cudaError_t do_launch(const void *func, dim3 grid, dim3 block, cudaStream_t hs, int ptds)
{
	struct CUstream_st *s;
	cudaError_t e = cudaSuccess;

	pthread_once(&S.once, init_once);
	if (!func)
		return ret(cudaErrorInvalidDeviceFunction);
	if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z ||
	    (uint64_t)block.x * block.y * block.z > 1024 || block.z > 64 || grid.y > 65535 ||
	    grid.z > 65535)
		return ret(cudaErrorInvalidConfiguration);
	/* The host-side cost of a launch: CPU time on the calling thread. */
	spin_cpu(S.launch_ns);
	s = lock_stream(hs, ptds);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	if (s->capture) {
		struct graph_node n = { .kind = NODE_KERNEL, .engine = ENG_COMPUTE, .func = func, .grid = grid };

		e = capture_node(s, &n);
	} else if (capture_breaks_legacy(s)) {
		e = cudaErrorStreamCaptureImplicit;
	} else {
		schedule(s, ENG_COMPUTE, kernel_cost(func, grid), now_ns());
	}
	unlock();
	return ret(e);
}

/* nvcc 13 host stubs: __cudaGetKernel(&handle, stub) then __cudaLaunchKernel.
 * The handle is the host stub's address, so costs set by stub apply. */
GPUSIM_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
	if (!kernel || !func)
		return ret(cudaErrorInvalidValue);
	*kernel = (cudaKernel_t)(uintptr_t)func;
	return cudaSuccess;
}

GPUSIM_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
						struct CUstream_st *stream)
{
	int d = t_cfg.depth;

	if (d >= 4)
		return 1;
	t_cfg.grid[d] = gridDim;
	t_cfg.block[d] = blockDim;
	t_cfg.shmem[d] = sharedMem;
	t_cfg.stream[d] = stream;
	t_cfg.depth = d + 1;
	return 0;
}

GPUSIM_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
						  size_t *sharedMem, void *stream)
{
	int d = t_cfg.depth - 1;

	if (d < 0)
		return ret(cudaErrorMissingConfiguration);
	t_cfg.depth = d;
	*gridDim = t_cfg.grid[d];
	*blockDim = t_cfg.block[d];
	*sharedMem = t_cfg.shmem[d];
	*(cudaStream_t *)stream = t_cfg.stream[d];
	return cudaSuccess;
}

/* ---- registration family: no-op successes ------------------------------ */

static void *fatbin_handle_storage;

GPUSIM_API void **__cudaRegisterFatBinary(void *fatCubin)
{
	(void)fatCubin;
	return &fatbin_handle_storage;
}

GPUSIM_API void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
	(void)fatCubinHandle;
}

GPUSIM_API void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
	(void)fatCubinHandle;
}

GPUSIM_API void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
				       const char *deviceName, int thread_limit, uint3 *tid,
				       uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
	(void)fatCubinHandle, (void)hostFun, (void)deviceFun, (void)deviceName;
	(void)thread_limit, (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

GPUSIM_API void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
				  const char *deviceName, int ext, size_t size, int constant,
				  int global)
{
	(void)fatCubinHandle, (void)hostVar, (void)deviceAddress, (void)deviceName;
	(void)ext, (void)size, (void)constant, (void)global;
}

GPUSIM_API void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
					 char *deviceAddress, const char *deviceName, int ext,
					 size_t size, int constant, int global)
{
	(void)fatCubinHandle, (void)hostVarPtrAddress, (void)deviceAddress, (void)deviceName;
	(void)ext, (void)size, (void)constant, (void)global;
}

GPUSIM_API char __cudaInitModule(void **fatCubinHandle)
{
	(void)fatCubinHandle;
	return 1;
}
