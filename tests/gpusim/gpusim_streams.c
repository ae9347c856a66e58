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

/* The per-thread default stream of each device, made when the thread first names it. */
static _Thread_local struct CUstream_st *t_ptds[GPUSIM_MAX_DEVICES];
/* cudaThreadExchangeStreamCaptureMode: how this thread takes part in others' captures. */
static _Thread_local enum cudaStreamCaptureMode t_capture_mode = cudaStreamCaptureModeGlobal;

/* Under the lock: a stream of the current device linked into S.streams, or NULL. */
static struct CUstream_st *stream_new(unsigned int flags, int priority)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->magic = STREAM_MAGIC;
	s->flags = flags;
	s->dev = t_device;
	s->priority = priority;
	s->capture_last = -1;
	s->capture_join = -1;
	s->next = S.streams;
	S.streams = s;
	return s;
}

/* Created on first use: a thread that never names it costs nothing. When it
 * cannot be allocated the thread falls back to the legacy stream, which
 * orders more strictly but never wrongly. */
static struct CUstream_st *ptds_stream(void)
{
	if (!t_ptds[t_device]) {
		struct CUstream_st *s = stream_new(cudaStreamDefault, PRIORITY_LEAST);
		if (!s)
			return &S.dev[t_device].legacy;
		t_ptds[t_device] = s;
	}
	return t_ptds[t_device];
}

/* Resolve a handle under the lock; NULL if invalid. */
struct CUstream_st *stream_get(cudaStream_t h, int ptds)
{
	struct CUstream_st *s;

	if (h == NULL)
		return ptds ? ptds_stream() : &S.dev[t_device].legacy;
	if (h == cudaStreamLegacy)
		return &S.dev[t_device].legacy;
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

/* ---- capture rules ------------------------------------------------------ */

static int capture_live(const struct CUstream_st *s)
{
	return s->capture && !s->capture_invalid;
}

/*
 * As cudaThreadExchangeStreamCaptureMode documents: a thread in Global mode
 * is prohibited from potentially unsafe calls while it captures (not in
 * Relaxed mode) or any thread captures in Global mode; in ThreadLocal mode
 * only while it captures itself; in Relaxed mode never.
 */
int capture_forbids_unsafe(void)
{
	pthread_t self = pthread_self();
	int hit = 0;

	if (t_capture_mode == cudaStreamCaptureModeRelaxed)
		return 0;
	for (struct CUstream_st *s = S.streams; s; s = s->next) {
		int own = pthread_equal(s->capture_thread, self) && s->capture_mode != cudaStreamCaptureModeRelaxed;
		int others = t_capture_mode == cudaStreamCaptureModeGlobal &&
			     s->capture_mode == cudaStreamCaptureModeGlobal;

		if (capture_live(s) && (own || others)) {
			s->capture_invalid = 1;
			hit = 1;
		}
	}
	return hit;
}

/* The legacy stream synchronises with every blocking stream of its device: it cannot while one captures. */
int capture_breaks_legacy(struct CUstream_st *s)
{
	int hit = 0;

	if (!s->legacy)
		return 0;
	for (struct CUstream_st *o = S.streams; o; o = o->next)
		if (o->dev == s->dev && capture_live(o) && !(o->flags & cudaStreamNonBlocking)) {
			o->capture_invalid = 1;
			hit = 1;
		}
	return hit;
}

GPUSIM_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	enum cudaStreamCaptureMode old;

	if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
		return ret(cudaErrorInvalidValue);
	old = t_capture_mode;
	t_capture_mode = *mode;
	*mode = old;
	return cudaSuccess;
}

/* ---- synchronisation ------------------------------------------------------ */

/* The end of every synchronise call: wait (without the lock) until the
 * device reaches t, then make the deferred pinned copies the host may now
 * observe. */
void sync_until(uint64_t t, enum wait_mode how, uint64_t since)
{
	wait_until(t, how);
	lock();
	flush_pending();
	unlock();
	note_late(t, since);
}

cudaError_t stream_sync(cudaStream_t hs, int ptds)
{
	uint64_t since = now_ns(), t;
	struct CUstream_st *s = lock_stream(hs, ptds);

	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	if (s->capture || capture_forbids_unsafe()) {
		s->capture_invalid |= s->capture != NULL;
		unlock();
		return ret(cudaErrorStreamCaptureUnsupported);
	}
	t = s->ready;
	unlock();
	sync_until(t, wait_mode_of(s->dev), since);
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
	if (s->capture || capture_forbids_unsafe()) {
		s->capture_invalid |= s->capture != NULL;
		unlock();
		return ret(cudaErrorStreamCaptureUnsupported);
	}
	busy = now_ns() < s->ready;
	if (!busy)
		flush_pending();
	unlock();
	return busy ? cudaErrorNotReady : cudaSuccess;
}

/* Drains the current device only: other devices' work goes on. */
GPUSIM_API cudaError_t cudaDeviceSynchronize(void)
{
	uint64_t since = now_ns(), t;

	lock();
	if (capture_forbids_unsafe()) {
		unlock();
		return ret(cudaErrorStreamCaptureUnsupported);
	}
	t = device_idle_at(t_device);
	unlock();
	sync_until(t, wait_mode_of(t_device), since);
	return cudaSuccess;
}

/* The priority is kept and reported; it orders nothing, as items are scheduled when enqueued. */
static cudaError_t stream_create(cudaStream_t *pStream, unsigned int flags, int priority)
{
	struct CUstream_st *s;

	if (!pStream)
		return ret(cudaErrorInvalidValue);
	if (flags & ~(unsigned)cudaStreamNonBlocking)
		return ret(cudaErrorInvalidValue);
	/* Outside the range, the runtime clamps it to the nearest end. */
	if (priority > PRIORITY_LEAST)
		priority = PRIORITY_LEAST;
	if (priority < PRIORITY_GREATEST)
		priority = PRIORITY_GREATEST;
	lock();
	s = stream_new(flags, priority);
	unlock();
	if (!s)
		return ret(cudaErrorMemoryAllocation);
	*pStream = s;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
	return stream_create(pStream, flags, priority);
}

GPUSIM_API cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	if (leastPriority)
		*leastPriority = PRIORITY_LEAST;
	if (greatestPriority)
		*greatestPriority = PRIORITY_GREATEST;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
	struct CUstream_st *s;

	if (!priority)
		return ret(cudaErrorInvalidValue);
	s = lock_stream(hStream, 0);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	*priority = s->priority;
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
	struct CUstream_st *s;

	if (!flags)
		return ret(cudaErrorInvalidValue);
	s = lock_stream(hStream, 0);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	*flags = s->flags;
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	return stream_create(pStream, flags, PRIORITY_LEAST);
}

GPUSIM_API cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	struct CUstream_st **pp;

	if (!stream || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
		return ret(cudaErrorInvalidResourceHandle);
	lock();
	for (pp = &S.streams; *pp; pp = &(*pp)->next)
		if (*pp == stream && stream != t_ptds[stream->dev])
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
	if (capture_breaks_legacy(s)) {
		unlock();
		return ret(cudaErrorStreamCaptureImplicit);
	}
	if (s->capture) { /* a point of the graph, not of the device's timeline: a fork or join follows it */
		e->cap_graph = s->capture;
		e->cap_node = s->capture_last;
		e->cap_stream = s;
		unlock();
		return cudaSuccess;
	}
	/* The event completes when all earlier work the stream depends on has. */
	e->cap_graph = NULL;
	e->ts = max64(stream_dep(s), now_ns());
	e->recorded = 1;
	s->ready = max64(s->ready, e->ts);
	unlock();
	return cudaSuccess;
}

/* An event made with cudaEventBlockingSync is waited for by sleeping, whatever the device's flags. */
GPUSIM_API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	struct CUevent_st *e;
	enum wait_mode how;
	uint64_t since = now_ns(), t;

	lock();
	e = event_get(event);
	if (!e) {
		unlock();
		return ret(cudaErrorInvalidResourceHandle);
	}
	if (capture_forbids_unsafe()) {
		unlock();
		return ret(cudaErrorStreamCaptureUnsupported);
	}
	t = e->recorded ? e->ts : 0;
	how = e->flags & cudaEventBlockingSync ? WAIT_BLOCK : wait_mode_of(t_device);
	unlock();
	sync_until(t, how, since);
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
	if (e->cap_graph) {
		cudaError_t r = capture_wait(s, e);

		unlock();
		return r == cudaSuccess ? r : ret(r);
	}
	if (e->recorded)
		s->ready = max64(s->ready, e->ts);
	unlock();
	return cudaSuccess;
}
