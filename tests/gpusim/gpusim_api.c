// SPDX-License-Identifier: MIT
/*
 * gpusim entry points that only map onto a shared implementation: the
 * legacy-stream and per-thread-stream (_ptds/_ptsz) twins of each call, 1D
 * copies as 2D copies of one row, and the calls that are another call with
 * default flags. Kept together so the whole mapping can be read at once.
 * The "ptds" argument of the implementations says a NULL stream means the
 * calling thread's default stream; do_copy's last argument, "sync", says the
 * caller waits for the copy (cudaMemcpy) rather than only enqueueing it.
 *
 * The default-flag calls (cudaStreamCreate, cudaEventCreate, cudaMallocHost)
 * call the exported function, not its internals: a probe on the flags
 * variant fires for both, as it did when this was one file (an exported,
 * interposable function is never inlined).
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

/* ---- copies and memsets (gpusim_copy.c) --------------------------- */

GPUSIM_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return do_copy(dst, count, src, count, count, 1, kind, NULL, 0, 1);
}

GPUSIM_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
				       enum cudaMemcpyKind kind)
{
	return do_copy(dst, count, src, count, count, 1, kind, NULL, 1, 1);
}

GPUSIM_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
				       enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return do_copy(dst, count, src, count, count, 1, kind, stream, 0, 0);
}

GPUSIM_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
					    enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return do_copy(dst, count, src, count, count, 1, kind, stream, 1, 0);
}

GPUSIM_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
				    size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return do_copy(dst, dpitch, src, spitch, width, height, kind, NULL, 0, 1);
}

GPUSIM_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
					 size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return do_copy(dst, dpitch, src, spitch, width, height, kind, NULL, 1, 1);
}

GPUSIM_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
					 size_t width, size_t height, enum cudaMemcpyKind kind,
					 cudaStream_t stream)
{
	return do_copy(dst, dpitch, src, spitch, width, height, kind, stream, 0, 0);
}

GPUSIM_API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src,
					      size_t spitch, size_t width, size_t height,
					      enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return do_copy(dst, dpitch, src, spitch, width, height, kind, stream, 1, 0);
}

GPUSIM_API cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	return do_memset(devPtr, value, count, NULL, 0);
}

GPUSIM_API cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
	return do_memset(devPtr, value, count, NULL, 1);
}

GPUSIM_API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	return do_memset(devPtr, value, count, stream, 0);
}

GPUSIM_API cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count,
					    cudaStream_t stream)
{
	return do_memset(devPtr, value, count, stream, 1);
}

/* ---- launches (gpusim_kernels.c) ---------------------------------- */

GPUSIM_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
					size_t sharedMem, cudaStream_t stream)
{
	(void)args;
	(void)sharedMem;
	return do_launch(func, gridDim, blockDim, stream, 0);
}

GPUSIM_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
					     void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)args;
	(void)sharedMem;
	return do_launch(func, gridDim, blockDim, stream, 1);
}

GPUSIM_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					  void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)args;
	(void)sharedMem;
	return do_launch((const void *)kernel, gridDim, blockDim, stream, 0);
}

GPUSIM_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					       void **args, size_t sharedMem, cudaStream_t stream)
{
	(void)args;
	(void)sharedMem;
	return do_launch((const void *)kernel, gridDim, blockDim, stream, 1);
}

/* ---- streams and events (gpusim_streams.c) ------------------------ */

GPUSIM_API cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

GPUSIM_API cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	return stream_sync(stream, 0);
}

GPUSIM_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	return stream_sync(stream, 1);
}

GPUSIM_API cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	return stream_query(stream, 0);
}

GPUSIM_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream)
{
	return stream_query(stream, 1);
}

GPUSIM_API cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	return cudaEventCreateWithFlags(event, cudaEventDefault);
}

GPUSIM_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	return event_record(event, stream, 0);
}

GPUSIM_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
	return event_record(event, stream, 1);
}

GPUSIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
					   unsigned int flags)
{
	return stream_wait_event(stream, event, flags, 0);
}

GPUSIM_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
						unsigned int flags)
{
	return stream_wait_event(stream, event, flags, 1);
}

/* ---- pinned memory (gpusim_memory.c) ------------------------------ */

GPUSIM_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

/* ---- graphs and stream-ordered memory (gpusim_graph.c, gpusim_memory.c) ---- */

GPUSIM_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	return graph_launch(graphExec, stream, 0);
}

GPUSIM_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	return graph_launch(graphExec, stream, 1);
}

GPUSIM_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	return begin_capture(stream, mode, 0);
}

GPUSIM_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	return begin_capture(stream, mode, 1);
}

GPUSIM_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	return end_capture(stream, pGraph, 0);
}

GPUSIM_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
	return end_capture(stream, pGraph, 1);
}

GPUSIM_API cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
	return is_capturing(stream, pCaptureStatus, 0);
}

GPUSIM_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
	return is_capturing(stream, pCaptureStatus, 1);
}

GPUSIM_API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
	return malloc_async(devPtr, size, hStream, 0);
}

GPUSIM_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
	return malloc_async(devPtr, size, hStream, 1);
}

GPUSIM_API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
	return free_async(devPtr, hStream, 0);
}

GPUSIM_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
	return free_async(devPtr, hStream, 1);
}
