// SPDX-License-Identifier: MIT
/*
 * gpusim copies and memsets: classifying a copy (engine, bandwidth, pinned or
 * not), scheduling it, and moving the bytes now or, for pinned async copies,
 * at the host's next synchronisation so the host never sees them early.
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

#include <string.h>

static void copy2d(char *dst, size_t dpitch, const char *src, size_t spitch, size_t width,
		   size_t height)
{
	if (!S.copy_data)
		return;
	if (dpitch == width && spitch == width) {
		memmove(dst, src, width * height);
		return;
	}
	for (size_t i = 0; i < height; i++)
		memmove(dst + i * dpitch, src + i * spitch, width);
}

/* Perform all deferred copies, in order (under the lock). */
void flush_pending(void)
{
	struct pending_copy *p = S.pending.v;

	for (size_t i = 0; i < S.pending.n; i++)
		copy2d(p[i].dst, p[i].dpitch, p[i].src, p[i].spitch, p[i].width, p[i].height);
	S.pending.n = 0;
}

/* ---- copies ------------------------------------------------------------ */

/* Validate a (2D) copy and find its engine and bandwidth. */
static cudaError_t copy_classify(void *dst, const void *src, size_t dpitch, size_t spitch,
				 size_t width, size_t height, enum cudaMemcpyKind kind,
				 enum engine *eng, double *bpns, int *pinned)
{
	size_t dspan, sspan;
	int ddev, sdev;

	if (width > dpitch || width > spitch)
		return cudaErrorInvalidPitchValue;
	if (!width || !height)
		return cudaSuccess;
	if (!dst || !src)
		return cudaErrorInvalidValue;
	dspan = dpitch * (height - 1) + width;
	sspan = spitch * (height - 1) + width;
	ddev = is_dev(dst);
	sdev = is_dev(src);
	if (kind == cudaMemcpyDefault)
		kind = ddev ? (sdev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
			    : (sdev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
	switch (kind) {
	case cudaMemcpyHostToHost:
		if (ddev || sdev)
			return cudaErrorInvalidValue;
		*eng = ENG_NONE;
		*bpns = 0;
		*pinned = 0;
		return cudaSuccess;
	case cudaMemcpyHostToDevice:
		if (!dev_range_ok(dst, dspan) || sdev)
			return cudaErrorInvalidValue;
		*eng = ENG_H2D;
		*pinned = is_pinned(src, sspan);
		break;
	case cudaMemcpyDeviceToHost:
		if (!dev_range_ok(src, sspan) || ddev)
			return cudaErrorInvalidValue;
		*eng = ENG_D2H;
		*pinned = is_pinned(dst, dspan);
		break;
	case cudaMemcpyDeviceToDevice:
		if (!dev_range_ok(src, sspan) || !dev_range_ok(dst, dspan))
			return cudaErrorInvalidValue;
		*eng = ENG_COMPUTE;
		*pinned = 1;
		*bpns = S.d2d_bpns;
		return cudaSuccess;
	default:
		return cudaErrorInvalidMemcpyDirection;
	}
	*bpns = *pinned ? S.pinned_bpns : S.pageable_bpns;
	return cudaSuccess;
}

/* The common copy path. sync: cudaMemcpy semantics (the caller waits for the
 * copy, and so for earlier work on the stream). */
cudaError_t do_copy(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
		    size_t height, enum cudaMemcpyKind kind, cudaStream_t hs, int ptds, int sync)
{
	enum engine eng = ENG_NONE;
	double bpns = 0;
	int pinned = 0;
	cudaError_t e;
	struct CUstream_st *s;
	uint64_t since = now_ns(), end, bytes = (uint64_t)width * height;
	enum wait_mode how;

	s = lock_stream(hs, ptds);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	e = copy_classify(dst, src, dpitch, spitch, width, height, kind, &eng, &bpns, &pinned);
	if (e != cudaSuccess || bytes == 0) {
		unlock();
		return ret(e);
	}
	if (s->capture) { /* recorded, not run: the bytes move at each launch of the graph */
		struct graph_node n = { .kind = NODE_COPY, .engine = eng,
					.cost = eng == ENG_NONE ? 0 : S.copy_latency_ns + (uint64_t)((double)bytes / bpns),
					.dst = dst, .src = src, .dpitch = dpitch, .spitch = spitch,
					.width = width, .height = height, .async_pinned = pinned };

		if (sync) {
			s->capture_invalid = 1;
			unlock();
			return ret(cudaErrorStreamCaptureUnsupported);
		}
		e = capture_node(s, &n);
		unlock();
		return ret(e);
	}
	if (capture_breaks_legacy(s) || (sync && capture_forbids_unsafe())) {
		unlock();
		return ret(s->legacy ? cudaErrorStreamCaptureImplicit : cudaErrorStreamCaptureUnsupported);
	}
	if (eng == ENG_NONE) { /* host to host: a plain synchronous memcpy */
		flush_pending();
		copy2d(dst, dpitch, src, spitch, width, height);
		unlock();
		return cudaSuccess;
	}
	end = schedule(s, eng, S.copy_latency_ns + (uint64_t)((double)bytes / bpns), now_ns());
	if (!sync && pinned) { /* asynchronous: defer the bytes, return at once */
		struct pending_copy *p = vec_push(&S.pending);
		if (!p) {
			unlock();
			return ret(cudaErrorMemoryAllocation);
		}
		*p = (struct pending_copy){ dst, src, dpitch, spitch, width, height, end };
		unlock();
		return cudaSuccess;
	}
	flush_pending();
	copy2d(dst, dpitch, src, spitch, width, height);
	how = wait_mode_of(s->dev);
	unlock();
	wait_until(end, how);
	note_late(end, since);
	return cudaSuccess;
}

/* ---- memset ------------------------------------------------------------ */

uint64_t memset_cost(size_t count)
{
	return S.kernel_base_ns + (uint64_t)((double)count / S.memset_bpns);
}

/* A graph's memset or copy node at a launch: the bytes it moves (under the lock). */
void node_move_bytes(const struct graph_node *n, uint64_t end)
{
	struct pending_copy *p;

	if (n->kind == NODE_MEMSET) {
		flush_pending();
		if (S.copy_data)
			memset(n->dst, n->value, n->width);
	} else if (n->kind == NODE_COPY && (p = vec_push(&S.pending))) {
		/* Deferred like an async copy: the host sees them at its next synchronisation. */
		*p = (struct pending_copy){ n->dst, n->src, n->dpitch, n->spitch, n->width, n->height, end };
	}
}

cudaError_t do_memset(void *p, int value, size_t count, cudaStream_t hs, int ptds)
{
	struct CUstream_st *s;

	s = lock_stream(hs, ptds);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	if (!count) {
		unlock();
		return cudaSuccess;
	}
	if (!p || !dev_range_ok(p, count)) {
		unlock();
		return ret(cudaErrorInvalidValue);
	}
	if (s->capture) {
		struct graph_node n = { .kind = NODE_MEMSET, .engine = ENG_COMPUTE,
					.cost = memset_cost(count), .dst = p, .width = count, .height = 1,
					.value = value };
		cudaError_t e = capture_node(s, &n);

		unlock();
		return ret(e);
	}
	if (capture_breaks_legacy(s)) {
		unlock();
		return ret(cudaErrorStreamCaptureImplicit);
	}
	flush_pending();
	if (S.copy_data)
		memset(p, value, count);
	/* Asynchronous with respect to the host for device memory. */
	schedule(s, ENG_COMPUTE, memset_cost(count), now_ns());
	unlock();
	return cudaSuccess;
}
