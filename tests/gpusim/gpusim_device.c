// SPDX-License-Identifier: MIT
/*
 * gpusim device queries: one device, ordinal 0, with properties close to an
 * A100 on PCIe Gen4 so programs that size work from them behave plausibly.
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

#include <stdio.h>
#include <string.h>

static _Thread_local int t_device;

GPUSIM_API cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return ret(cudaErrorInvalidValue);
	*count = 1;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaSetDevice(int device)
{
	if (device != 0)
		return ret(cudaErrorInvalidDevice);
	t_device = device;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGetDevice(int *device)
{
	if (!device)
		return ret(cudaErrorInvalidValue);
	*device = t_device;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	if (!prop)
		return ret(cudaErrorInvalidValue);
	if (device != 0)
		return ret(cudaErrorInvalidDevice);
	pthread_once(&S.once, init_once);
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "gpusim simulated GPU (PCIe Gen4 x16)");
	prop->totalGlobalMem = S.dev_size;
	prop->sharedMemPerBlock = 48 << 10;
	prop->regsPerBlock = 65536;
	prop->warpSize = 32;
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsDim[0] = 1024;
	prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 0x7fffffff;
	prop->maxGridSize[1] = 65535;
	prop->maxGridSize[2] = 65535;
	prop->totalConstMem = 64 << 10;
	prop->major = 8;
	prop->minor = 0;
	prop->multiProcessorCount = 108;
	prop->canMapHostMemory = 1;
	prop->concurrentKernels = 1;
	prop->pciBusID = 1;
	prop->asyncEngineCount = 2;
	prop->unifiedAddressing = 1;
	prop->memoryBusWidth = 5120;
	prop->l2CacheSize = 40 << 20;
	prop->maxThreadsPerMultiProcessor = 2048;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return ret(cudaErrorInvalidValue);
	*runtimeVersion = CUDART_VERSION;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return ret(cudaErrorInvalidValue);
	*driverVersion = CUDART_VERSION;
	return cudaSuccess;
}
