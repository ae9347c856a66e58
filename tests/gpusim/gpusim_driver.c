// SPDX-License-Identifier: MIT
/*
 * gpusim_driver.c — libcuda.so.1 for the GPU simulator: the driver API's
 * contexts and peer copies, so a program that switches devices through the
 * driver (as frameworks that bind a context per thread do) runs on the
 * simulated libcudart.so.13 beside it, through LD_LIBRARY_PATH=.output/gpusim.
 *
 * A context is a device's: each device has one primary context
 * (cuDevicePrimaryCtxRetain), and cuCtxCreate makes more. Each thread has a
 * context stack, as the driver documents it: cuCtxCreate and cuCtxPushCurrent
 * push, cuCtxPopCurrent pops, cuCtxSetCurrent replaces the top (NULL pops
 * it). Whenever the top changes, the thread's current device in the
 * simulator becomes the new top's (gpusimSetCurrentDevice), so the runtime's
 * calls that follow (launches, stream creation, cudaDeviceSynchronize) are
 * that device's. cudaSetDevice does not touch this stack (a simplification:
 * the real runtime makes the device's primary context current). Peer copies
 * and stream creation are the runtime's, called with the contexts' devices.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>

#define DRV_API __attribute__((visibility("default")))
#define CTX_MAGIC 0x43545853u   /* "SXTC" */
#define MAX_DEVICES 8
#define STACK_MAX 32

int gpusimSetCurrentDevice(int device);

struct CUctx_st {
	unsigned magic;
	int dev;
};

static struct CUctx_st primary[MAX_DEVICES];
static _Thread_local CUcontext stack[STACK_MAX];
static _Thread_local int depth;

static CUresult of(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return CUDA_SUCCESS;
	case cudaErrorInvalidDevice:
		return CUDA_ERROR_INVALID_DEVICE;
	case cudaErrorInvalidResourceHandle:
		return CUDA_ERROR_INVALID_HANDLE;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static int ctx_ok(CUcontext c)
{
	return c && c->magic == CTX_MAGIC;
}

static int device_ok(CUdevice dev)
{
	int n = 0;

	return cudaGetDeviceCount(&n) == cudaSuccess && dev >= 0 && dev < n && dev < MAX_DEVICES;
}

/* The top of the stack is the current context: the simulator's current device follows it. */
static void top_changed(void)
{
	if (depth)
		gpusimSetCurrentDevice(stack[depth - 1]->dev);
}

DRV_API CUresult cuInit(unsigned int flags)
{
	return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

DRV_API CUresult cuDriverGetVersion(int *version)
{
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = CUDA_VERSION;
	return CUDA_SUCCESS;
}

DRV_API CUresult cuDeviceGetCount(int *count)
{
	return count ? of(cudaGetDeviceCount(count)) : CUDA_ERROR_INVALID_VALUE;
}

DRV_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (!device_ok(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

DRV_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!device_ok(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	primary[dev] = (struct CUctx_st){ CTX_MAGIC, dev };
	*pctx = &primary[dev];
	return CUDA_SUCCESS;
}

DRV_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return device_ok(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult push(CUcontext ctx)
{
	if (!ctx_ok(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (depth == STACK_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	stack[depth++] = ctx;
	top_changed();
	return CUDA_SUCCESS;
}

/* A new context of dev, pushed (the driver's documented behaviour); the create parameters are not modelled. */
DRV_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
	CUcontext c;
	CUresult r;

	(void)params;
	(void)flags;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!device_ok(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*c = (struct CUctx_st){ CTX_MAGIC, dev };
	r = push(c);
	if (r != CUDA_SUCCESS) {
		free(c);
		return r;
	}
	*pctx = c;
	return CUDA_SUCCESS;
}

/* A created context (a primary one is released, not destroyed); taken off this thread's stack where it is. */
DRV_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	int w = 0;

	if (!ctx_ok(ctx) || (ctx >= primary && ctx < primary + MAX_DEVICES))
		return CUDA_ERROR_INVALID_CONTEXT;
	for (int i = 0; i < depth; i++)
		if (stack[i] != ctx)
			stack[w++] = stack[i];
	depth = w;
	top_changed();
	ctx->magic = 0;
	free(ctx);
	return CUDA_SUCCESS;
}

DRV_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	return push(ctx);
}

DRV_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	depth--;
	if (pctx)
		*pctx = stack[depth];
	top_changed();
	return CUDA_SUCCESS;
}

DRV_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	if (!ctx) {
		if (depth)
			depth--;
		top_changed();
		return CUDA_SUCCESS;
	}
	if (!ctx_ok(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!depth)
		return push(ctx);
	stack[depth - 1] = ctx;
	top_changed();
	return CUDA_SUCCESS;
}

DRV_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = depth ? stack[depth - 1] : NULL;
	return CUDA_SUCCESS;
}

DRV_API CUresult cuCtxGetDevice(CUdevice *device)
{
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	*device = stack[depth - 1]->dev;
	return CUDA_SUCCESS;
}

DRV_API CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src, CUcontext srcContext,
			      size_t count)
{
	if (!ctx_ok(dstContext) || !ctx_ok(srcContext))
		return CUDA_ERROR_INVALID_CONTEXT;
	return of(cudaMemcpyPeer((void *)(uintptr_t)dst, dstContext->dev, (const void *)(uintptr_t)src,
				 srcContext->dev, count));
}

DRV_API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src, CUcontext srcContext,
				   size_t count, CUstream stream)
{
	if (!ctx_ok(dstContext) || !ctx_ok(srcContext))
		return CUDA_ERROR_INVALID_CONTEXT;
	return of(cudaMemcpyPeerAsync((void *)(uintptr_t)dst, dstContext->dev, (const void *)(uintptr_t)src,
				      srcContext->dev, count, (cudaStream_t)stream));
}
