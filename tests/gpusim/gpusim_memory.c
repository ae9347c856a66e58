// SPDX-License-Identifier: MIT
/*
 * gpusim memory: the device allocator over the reserved address range, the
 * pinned host ranges that decide a copy's bandwidth, and the range checks a
 * copy or memset must pass.
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

#include <sys/mman.h>

/* ---- range checks ------------------------------------------------------ */

int is_dev(const void *p)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)S.dev_base;
	return S.dev_base && a >= b && a < b + S.dev_size;
}

/* Is [p, p+n) inside one live device allocation? */
int dev_range_ok(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	struct range *r = S.dev_blocks.v;

	for (size_t i = 0; i < S.dev_blocks.n; i++)
		if (r[i].live && a >= r[i].base && a - r[i].base <= r[i].req &&
		    n <= r[i].req - (a - r[i].base))
			return 1;
	return 0;
}

int is_pinned(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	struct range *r = S.pinned.v;

	for (size_t i = 0; i < S.pinned.n; i++)
		if (a >= r[i].base && a - r[i].base < r[i].size && n <= r[i].size - (a - r[i].base))
			return 1;
	return 0;
}

static ssize_t pinned_find(const void *base)
{
	struct range *r = S.pinned.v;

	for (size_t i = 0; i < S.pinned.n; i++)
		if (r[i].base == (uintptr_t)base)
			return (ssize_t)i;
	return -1;
}

/*
 * Make [p, p+n) resident, as the real runtime's memory is: cudaMalloc returns
 * device memory, cudaHostAlloc and cudaHostRegister page-lock host memory.
 * Otherwise a copy's first touch of each page faults inside a later call, host
 * time no real runtime spends there (tens of ms for a 4 MiB batch on a loaded
 * VM). MADV_POPULATE_* (Linux 5.14) or, before it, one access a page: a read
 * for host memory, whose bytes are the program's, a write of 0 for device
 * blocks, whose bytes are undefined until written.
 */
static void populate(void *p, size_t n, int write)
{
	uintptr_t page = 4096, a = (uintptr_t)p & ~(page - 1), b = (uintptr_t)p + n;

	if (!n || madvise((void *)a, b - a, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
		return;
	for (uintptr_t q = (uintptr_t)p; q < b; q = (q & ~(page - 1)) + page) {
		if (write)
			*(volatile char *)q = 0;
		else
			(void)*(volatile const char *)q;
	}
}

/* ---- device memory ----------------------------------------------------- */

/* Under the lock: a block of device dev (the address range is shared; a block knows its device). */
cudaError_t dev_alloc(void **devPtr, size_t size, int dev)
{
	struct range *r, *best = NULL;
	size_t want;

	if (!devPtr)
		return cudaErrorInvalidValue;
	if (!size) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	want = (size + 255) & ~(size_t)255; /* cudaMalloc aligns to 256 bytes */
	if (want < size)
		return cudaErrorMemoryAllocation;
	r = S.dev_blocks.v;
	for (size_t i = 0; i < S.dev_blocks.n; i++) /* first fit among freed blocks */
		if (!r[i].live && r[i].size >= want && (!best || r[i].size < best->size))
			best = &r[i];
	if (best) {
		best->live = 1;
		best->req = size;
		best->dev = dev;
		*devPtr = (void *)best->base;
		if (S.copy_data)
			populate(*devPtr, size, 1);
		return cudaSuccess;
	}
	if (!S.dev_base || want > S.dev_size - S.dev_used)
		return cudaErrorMemoryAllocation;
	r = vec_push(&S.dev_blocks);
	if (!r)
		return cudaErrorMemoryAllocation;
	*r = (struct range){ .base = (uintptr_t)S.dev_base + S.dev_used, .size = want, .live = 1,
			      .req = size, .dev = dev };
	S.dev_used += want;
	*devPtr = (void *)r->base;
	if (S.copy_data)
		populate(*devPtr, size, 1);
	return cudaSuccess;
}

/* cudaMalloc may synchronise the device: a capture under way forbids it (Global and ThreadLocal modes). */
GPUSIM_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	cudaError_t e;

	lock();
	e = capture_forbids_unsafe() ? cudaErrorStreamCaptureUnsupported : dev_alloc(devPtr, size, t_device);
	unlock();
	return ret(e);
}

/* Under the lock. */
cudaError_t dev_free(void *devPtr)
{
	struct range *r = S.dev_blocks.v;

	for (size_t i = 0; i < S.dev_blocks.n; i++)
		if (r[i].base == (uintptr_t)devPtr && r[i].live) {
			flush_pending();
			r[i].live = 0;
			if (r[i].size >= (1u << 20))
				madvise((void *)r[i].base, r[i].size, MADV_DONTNEED);
			return cudaSuccess;
		}
	return cudaErrorInvalidValue;
}

GPUSIM_API cudaError_t cudaFree(void *devPtr)
{
	cudaError_t e;

	if (!devPtr)
		return cudaSuccess;
	lock();
	e = dev_free(devPtr);
	unlock();
	return ret(e);
}

/*
 * Stream-ordered allocation. The block is the stream's device's, usable by
 * work enqueued on the stream after the call; it takes no device time. The
 * simulator's kernels touch no memory, so freeing at the call (after the
 * deferred copies are made) is what a program can observe of the stream order.
 */
cudaError_t malloc_async(void **devPtr, size_t size, cudaStream_t hStream, int ptds)
{
	struct CUstream_st *s = lock_stream(hStream, ptds);
	cudaError_t e;

	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	e = capture_breaks_legacy(s) ? cudaErrorStreamCaptureImplicit : dev_alloc(devPtr, size, s->dev);
	unlock();
	return ret(e);
}

cudaError_t free_async(void *devPtr, cudaStream_t hStream, int ptds)
{
	struct CUstream_st *s = lock_stream(hStream, ptds);
	cudaError_t e;

	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	e = capture_breaks_legacy(s) ? cudaErrorStreamCaptureImplicit : devPtr ? dev_free(devPtr) : cudaSuccess;
	unlock();
	return ret(e);
}

GPUSIM_API int gpusimIsDevicePointer(const void *ptr)
{
	pthread_once(&S.once, init_once);
	return is_dev(ptr);
}

GPUSIM_API cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
	size_t live = 0;
	struct range *r;

	if (!free || !total)
		return ret(cudaErrorInvalidValue);
	lock();
	r = S.dev_blocks.v;
	for (size_t i = 0; i < S.dev_blocks.n; i++)
		if (r[i].live)
			live += r[i].size;
	*total = S.dev_size;
	*free = S.dev_size - live;
	unlock();
	return cudaSuccess;
}

/* ---- pinned host memory ------------------------------------------------ */

static cudaError_t pinned_add(void *p, size_t size, int owned)
{
	struct range *r = vec_push(&S.pinned);

	if (!r)
		return cudaErrorMemoryAllocation;
	*r = (struct range){ .base = (uintptr_t)p, .size = size, .owned = owned, .live = 1 };
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	void *p;
	cudaError_t e;

	if (!pHost)
		return ret(cudaErrorInvalidValue);
	if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped |
				cudaHostAllocWriteCombined))
		return ret(cudaErrorInvalidValue);
	if (!size) {
		*pHost = NULL;
		return cudaSuccess;
	}
	pthread_once(&S.once, init_once);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (S.copy_data ? MAP_POPULATE : 0),
		 -1, 0);
	if (p == MAP_FAILED)
		return ret(cudaErrorMemoryAllocation);
	lock();
	e = pinned_add(p, size, 1);
	unlock();
	if (e != cudaSuccess) {
		munmap(p, size);
		return ret(e);
	}
	*pHost = p;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaFreeHost(void *ptr)
{
	ssize_t i;
	struct range r;

	if (!ptr)
		return cudaSuccess;
	lock();
	i = pinned_find(ptr);
	if (i < 0 || !((struct range *)S.pinned.v)[i].owned) {
		unlock();
		return ret(cudaErrorInvalidValue);
	}
	flush_pending();
	r = ((struct range *)S.pinned.v)[i];
	vec_del(&S.pinned, (size_t)i);
	unlock();
	munmap((void *)r.base, r.size);
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	uintptr_t a = (uintptr_t)ptr;
	struct range *r;
	cudaError_t e;

	if (!ptr || !size)
		return ret(cudaErrorInvalidValue);
	if (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped |
				cudaHostRegisterIoMemory | cudaHostRegisterReadOnly))
		return ret(cudaErrorInvalidValue);
	lock();
	if (is_dev(ptr)) {
		unlock();
		return ret(cudaErrorInvalidValue);
	}
	r = S.pinned.v;
	for (size_t i = 0; i < S.pinned.n; i++)
		if (a < r[i].base + r[i].size && r[i].base < a + size) {
			unlock();
			return ret(cudaErrorHostMemoryAlreadyRegistered);
		}
	e = pinned_add(ptr, size, 0);
	unlock();
	if (e == cudaSuccess && S.copy_data)
		populate(ptr, size, 0);
	return ret(e);
}

GPUSIM_API cudaError_t cudaHostUnregister(void *ptr)
{
	ssize_t i;

	lock();
	i = pinned_find(ptr);
	if (!ptr || i < 0 || ((struct range *)S.pinned.v)[i].owned) {
		unlock();
		return ret(cudaErrorHostMemoryNotRegistered);
	}
	flush_pending();
	vec_del(&S.pinned, (size_t)i);
	unlock();
	return cudaSuccess;
}
