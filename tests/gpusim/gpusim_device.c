// SPDX-License-Identifier: MIT
/*
 * gpusim devices: GPUSIM_DEVICES of them, the calling thread's current one,
 * the flags that say how a host thread waits for it, copies between two of
 * them, and properties close to an A100 on PCIe Gen4 so programs that size
 * work from them behave plausibly.
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

#include <stdio.h>
#include <string.h>

_Thread_local int t_device;

static int device_ok(int device)
{
	pthread_once(&S.once, init_once);
	return device >= 0 && device < S.ndev;
}

GPUSIM_API cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return ret(cudaErrorInvalidValue);
	pthread_once(&S.once, init_once);
	*count = S.ndev;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaSetDevice(int device)
{
	if (!device_ok(device))
		return ret(cudaErrorInvalidDevice);
	t_device = device;
	return cudaSuccess;
}

/*
 * The flags of the current device (its primary context): they take effect at
 * once, the documented behaviour since the runtime stopped refusing them on
 * an active device. Only one cudaDeviceSchedule* value may be given.
 */
#define DEVICE_FLAGS_KNOWN (cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax | cudaDeviceSyncMemops)

GPUSIM_API cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
	unsigned int sched = flags & cudaDeviceScheduleMask;

	if ((flags & ~(unsigned)DEVICE_FLAGS_KNOWN) ||
	    (sched != cudaDeviceScheduleAuto && sched != cudaDeviceScheduleSpin && sched != cudaDeviceScheduleYield &&
	     sched != cudaDeviceScheduleBlockingSync))
		return ret(cudaErrorInvalidValue);
	lock();
	S.dev[t_device].flags = flags;
	unlock();
	return cudaSuccess;
}

/* The runtime's contexts always map host memory, and it says so. */
GPUSIM_API cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
	if (!flags)
		return ret(cudaErrorInvalidValue);
	lock();
	*flags = S.dev[t_device].flags | cudaDeviceMapHost;
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
	if (!canAccessPeer)
		return ret(cudaErrorInvalidValue);
	if (!device_ok(device) || !device_ok(peerDevice))
		return ret(cudaErrorInvalidDevice);
	*canAccessPeer = device != peerDevice;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
	if (flags)
		return ret(cudaErrorInvalidValue);
	if (!device_ok(peerDevice) || peerDevice == t_device)
		return ret(cudaErrorInvalidDevice);
	return cudaSuccess;
}

/*
 * A copy between two devices' memory: device work on both, on the source's
 * D2H engine and the destination's H2D engine at once, ordered after what
 * stream (async) or, for cudaMemcpyPeer, both devices' legacy streams hold.
 * cudaMemcpyPeer is asynchronous with respect to the host, as documented,
 * but serialised with all work on both devices.
 */
static cudaError_t peer_copy(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
			     cudaStream_t hs, int async)
{
	struct CUstream_st *s, *sd, *ss;
	uint64_t start, end, *dr, *sr;

	if (!device_ok(dstDevice) || !device_ok(srcDevice))
		return ret(cudaErrorInvalidDevice);
	if (!count)
		return cudaSuccess;
	s = lock_stream(hs, 0);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	if (!dst || !src || !dev_range_ok(dst, count) || !dev_range_ok(src, count)) {
		unlock();
		return ret(cudaErrorInvalidValue);
	}
	if (s->capture || capture_breaks_legacy(s) || (!async && capture_forbids_unsafe())) {
		unlock();
		return ret(cudaErrorStreamCaptureUnsupported);
	}
	sd = async ? s : &S.dev[dstDevice].legacy;
	ss = async ? s : &S.dev[srcDevice].legacy;
	dr = &S.dev[dstDevice].h2d_ready;
	sr = &S.dev[srcDevice].d2h_ready;
	start = max64(max64(now_ns(), max64(*dr, *sr)), max64(stream_dep(sd), stream_dep(ss)));
	if (!async)
		start = max64(start, max64(device_idle_at(dstDevice), device_idle_at(srcDevice)));
	end = start + S.copy_latency_ns + (uint64_t)((double)count / S.peer_bpns);
	*dr = *sr = end;
	sd->ready = max64(sd->ready, end);
	ss->ready = max64(ss->ready, end);
	timeline_add(srcDevice, start, end, 0);
	if (dstDevice != srcDevice)
		timeline_add(dstDevice, start, end, 0);
	S.peer_copies++;
	flush_pending();
	if (S.copy_data)
		memmove(dst, src, count);
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
	return peer_copy(dst, dstDevice, src, srcDevice, count, NULL, 0);
}

GPUSIM_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
					   cudaStream_t stream)
{
	return peer_copy(dst, dstDevice, src, srcDevice, count, stream, 1);
}

/* The calling thread's current device, set by the simulator's driver library (its current context's). */
GPUSIM_API int gpusimSetCurrentDevice(int device)
{
	if (!device_ok(device))
		return -1;
	t_device = device;
	return 0;
}

/* The peer copies that succeeded so far (cudaMemcpyPeer[Async] and the driver's cuMemcpyPeer[Async]). */
GPUSIM_API unsigned long long gpusimPeerCopies(void)
{
	unsigned long long n;

	lock();
	n = S.peer_copies;
	unlock();
	return n;
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
	if (!device_ok(device))
		return ret(cudaErrorInvalidDevice);
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
	prop->pciBusID = 1 + device;
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
