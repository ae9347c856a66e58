// SPDX-License-Identifier: MIT
/*
 * gpusim streams and events: resolving handles (legacy, per-thread and
 * created streams), their lifetimes, and the calls that wait on or query the
 * device's progress. The ordering rule itself is stream_dep() in
 * gpusim_model.c.
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

#include <stdlib.h>

static _Thread_local struct CUstream_st *t_ptds;

/* Under the lock: a blocking stream linked into S.streams, or NULL. */
static struct CUstream_st *stream_new(unsigned int flags)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->magic = STREAM_MAGIC;
	s->flags = flags;
	s->next = S.streams;
	S.streams = s;
	return s;
}

/* Created on first use: a thread that never names it costs nothing. When it
 * cannot be allocated the thread falls back to the legacy stream, which
 * orders more strictly but never wrongly. */
static struct CUstream_st *ptds_stream(void)
{
	if (!t_ptds) {
		struct CUstream_st *s = stream_new(cudaStreamDefault);
		if (!s)
			return &S.legacy;
		t_ptds = s;
	}
	return t_ptds;
}

/* Resolve a handle under the lock; NULL if invalid. */
struct CUstream_st *stream_get(cudaStream_t h, int ptds)
{
	struct CUstream_st *s;

	if (h == NULL)
		return ptds ? ptds_stream() : &S.legacy;
	if (h == cudaStreamLegacy)
		return &S.legacy;
	if (h == cudaStreamPerThread)
		return ptds_stream();
	for (s = S.streams; s; s = s->next)
		if (s == h)
			return s->magic == STREAM_MAGIC ? s : NULL;
	return NULL;
}

/* Take the lock and resolve h. On a bad handle the lock is released again
 * and NULL returned, so callers have a single early exit for that error. */
struct CUstream_st *lock_stream(cudaStream_t h, int ptds)
{
	struct CUstream_st *s;

	lock();
	s = stream_get(h, ptds);
	if (!s)
		unlock();
	return s;
}

/* The end of every synchronise call: sleep (without the lock) until the
 * device reaches t, then make the deferred pinned copies the host may now
 * observe. */
static void sync_until(uint64_t t)
{
	sleep_until(t);
	lock();
	flush_pending();
	unlock();
}

cudaError_t stream_sync(cudaStream_t hs, int ptds)
{
	struct CUstream_st *s = lock_stream(hs, ptds);
	uint64_t t;

	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	t = s->ready;
	unlock();
	sync_until(t);
	return cudaSuccess;
}

/* cudaErrorNotReady is an answer, not an error: it is not kept for
 * cudaGetLastError. */
cudaError_t stream_query(cudaStream_t hs, int ptds)
{
	struct CUstream_st *s = lock_stream(hs, ptds);
	int busy;

	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	busy = now_ns() < s->ready;
	if (!busy)
		flush_pending();
	unlock();
	return busy ? cudaErrorNotReady : cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceSynchronize(void)
{
	uint64_t t;

	lock();
	t = device_idle_at();
	unlock();
	sync_until(t);
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	struct CUstream_st *s;

	if (!pStream)
		return ret(cudaErrorInvalidValue);
	if (flags & ~(unsigned)cudaStreamNonBlocking)
		return ret(cudaErrorInvalidValue);
	lock();
	s = stream_new(flags);
	unlock();
	if (!s)
		return ret(cudaErrorMemoryAllocation);
	*pStream = s;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	struct CUstream_st **pp;

	if (!stream || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
		return ret(cudaErrorInvalidResourceHandle);
	lock();
	for (pp = &S.streams; *pp; pp = &(*pp)->next)
		if (*pp == stream && stream != t_ptds)
			break;
	if (!*pp) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	/* Pending work still completes (its times are on the engines). */
	*pp = stream->next;
	stream->magic = 0;
	unlock();
	free(stream);
	return cudaSuccess;
}

/* ---- events ------------------------------------------------------------ */

static struct CUevent_st *event_get(cudaEvent_t h)
{
	for (struct CUevent_st *e = S.events; e; e = e->next)
		if (e == h)
			return e->magic == EVENT_MAGIC ? e : NULL;
	return NULL;
}

GPUSIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	struct CUevent_st *e;

	if (!event)
		return ret(cudaErrorInvalidValue);
	if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
		return ret(cudaErrorInvalidValue);
	e = calloc(1, sizeof(*e));
	if (!e)
		return ret(cudaErrorMemoryAllocation);
	e->magic = EVENT_MAGIC;
	e->flags = flags;
	lock();
	e->next = S.events;
	S.events = e;
	unlock();
	*event = e;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	struct CUevent_st **pp;

	lock();
	for (pp = &S.events; *pp; pp = &(*pp)->next)
		if (*pp == event)
			break;
	if (!event || !*pp) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	*pp = event->next;
	event->magic = 0;
	unlock();
	free(event);
	return cudaSuccess;
}

cudaError_t event_record(cudaEvent_t he, cudaStream_t hs, int ptds)
{
	struct CUevent_st *e;
	struct CUstream_st *s;

	lock();
	e = event_get(he);
	s = stream_get(hs, ptds);
	if (!e || !s) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	/* The event completes when all earlier work the stream depends on has. */
	e->ts = max64(stream_dep(s), now_ns());
	e->recorded = 1;
	s->ready = max64(s->ready, e->ts);
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	struct CUevent_st *e;
	uint64_t t;

	lock();
	e = event_get(event);
	if (!e) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	t = e->recorded ? e->ts : 0;
	unlock();
	sync_until(t);
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaEventQuery(cudaEvent_t event)
{
	struct CUevent_st *e;
	cudaError_t r = cudaSuccess;

	lock();
	e = event_get(event);
	if (!e)
		r = cudaErrorInvalidResourceHandle;
	else if (e->recorded && now_ns() < e->ts)
		r = cudaErrorNotReady;
	else
		flush_pending();
	unlock();
	return r == cudaErrorNotReady ? r : ret(r);
}

GPUSIM_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	struct CUevent_st *a, *b;
	uint64_t now;

	if (!ms)
		return ret(cudaErrorInvalidValue);
	lock();
	a = event_get(start);
	b = event_get(end);
	if (!a || !b || (a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming)) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	if (!a->recorded || !b->recorded) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	now = now_ns();
	if (now < a->ts || now < b->ts) {
		unlock();
		return cudaErrorNotReady;
	}
	*ms = (float)(((double)b->ts - (double)a->ts) / 1e6);
	unlock();
	return cudaSuccess;
}

cudaError_t stream_wait_event(cudaStream_t hs, cudaEvent_t he, unsigned int flags, int ptds)
{
	struct CUstream_st *s;
	struct CUevent_st *e;

	lock();
	s = stream_get(hs, ptds);
	e = event_get(he);
	if (!s || !e) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	if (flags & ~(unsigned)cudaEventWaitExternal) {
		unlock();
		return ret(cudaErrorInvalidValue);
	}
	if (e->recorded)
		s->ready = max64(s->ready, e->ts);
	unlock();
	return cudaSuccess;
}
