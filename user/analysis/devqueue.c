// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "analysis/devqueue.h"
#include "dlbpf/copy.h"
#include "dlbpf/events.h"
#include "records/cuda_api.h"

/*
 * Stream keys. Handles 0 and cudaStreamLegacy (1) name the legacy default
 * stream of the calling thread's current device, except in a _ptsz/_ptds
 * call, where 0 is the calling thread's own default stream (of that device);
 * cudaStreamPerThread (2) is that one in any call. The driver API uses the
 * same values (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). A created stream's
 * handle is a user-space pointer, far below bit 62; device 0's keys are what
 * they were before devices were told apart.
 */
#define KEY_LEGACY 1ull
#define KEY_LEGACY_DEV (1ull << 62)
#define KEY_PER_THREAD (1ull << 63)
#define KEY_PEER_SIDE (1ull << 61)   /* | device: the peer copies another device's streams put on it */
#define MAX_DEPS 64          /* waits kept per stream; forgetting one only proves less */
#define MAX_DEP_DEPTH 8      /* chains of cross-stream waits followed at a drain */
#define MAX_DEVICES 64       /* ordinals above are taken as not a device (a bad argument) */

static bool per_thread_api(uint16_t api)
{
	const struct dl_api *a = dl_api_by_id(api);
	size_t n = a ? strlen(a->name) : 0;

	return n > 5 && (!strcmp(a->name + n - 5, "_ptsz") || !strcmp(a->name + n - 5, "_ptds"));
}

/* The calling thread's current device. */
static uint32_t thread_dev(const struct dl_devq *q, uint32_t tid)
{
	uint64_t d;

	return dl_u64map_get(&q->dev_of_tid, tid, &d) ? (uint32_t)d : 0;
}

static uint64_t key_of(const struct dl_devq *q, const struct dl_devq_call *c)
{
	uint64_t dev = thread_dev(q, c->tid);

	if (c->stream == 2 || (c->stream == 0 && per_thread_api(c->api)))
		return KEY_PER_THREAD | dev << 32 | c->tid;
	if (c->stream <= 1)
		return dev ? KEY_LEGACY_DEV | dev : KEY_LEGACY;
	return c->stream;
}

/* The key of a call fed to no model: the device it is on is 0. */
static uint64_t stream_key(const struct dl_devq_call *c)
{
	static const struct dl_devq none;

	return key_of(&none, c);
}

uint64_t dl_devq_stream_key(const struct dl_devq_call *c)
{
	return stream_key(c);
}

bool dl_devq_enqueues(const struct dl_devq_call *c)
{
	switch (c->cls) {
	case DL_CLS_LAUNCH:
	case DL_CLS_GRAPH:
		return true;   /* entry-only: whether it failed is not known */
	case DL_CLS_MEMSET:
	case DL_CLS_COMM:
		return c->ok;
	case DL_CLS_COPY:
		return c->ok && c->dir != DL_DIR_H2H;
	default:
		return false;
	}
}

static struct dl_devq_stream *find_stream(struct dl_devq *q, uint64_t key)
{
	for (size_t i = 0; i < q->streams.n; i++)
		if (q->streams.v[i].key == key)
			return &q->streams.v[i];
	return NULL;
}

static void saw_device(struct dl_devq *q, uint32_t dev)
{
	if (dev + 1 > q->devices)
		q->devices = dev + 1;
}

/* The stream of key, made on first sight: on device dev unless its key or creation says which. */
static struct dl_devq_stream *get_stream_on(struct dl_devq *q, uint64_t key, uint32_t dev)
{
	struct dl_devq_stream *s = find_stream(q, key);

	if (s)
		return s;
	s = dl_vec_push(&q->streams);
	memset(s, 0, sizeof(*s));
	s->key = key;
	s->legacy = key == KEY_LEGACY || (key & ~(uint64_t)(MAX_DEVICES - 1)) == KEY_LEGACY_DEV;
	s->dev = key & KEY_PER_THREAD ? (uint32_t)(key >> 32 & (MAX_DEVICES - 1))
		 : s->legacy && key != KEY_LEGACY ? (uint32_t)(key & (MAX_DEVICES - 1)) : dev;
	saw_device(q, s->dev);
	return s;
}


static const struct dl_devq_event *find_event(const struct dl_devq *q, uint64_t handle)
{
	uint64_t i;

	return dl_u64map_get(&q->event_of, handle, &i) ? &q->events.v[i] : NULL;
}

enum work { W_TRANSFER, W_COMPUTE, W_COMM };

static void enqueue(struct dl_devq *q, uint64_t key, uint64_t t, uint32_t tid, enum work kind)
{
	struct dl_devq_stream *s = get_stream_on(q, key, thread_dev(q, tid));

	if (!s->open)
		s->compute = s->comm_last = s->comm_ahead = s->has_kernels = false;
	/* Records of two threads can come out of order: the latest enqueue names the tail. */
	if (kind != W_TRANSFER && (!s->compute || t >= s->last_work)) {
		s->comm_last = kind == W_COMM;
		s->comm_ahead = kind == W_COMM && s->has_kernels;
		s->last_work = t;
	}
	s->compute = s->compute || kind != W_TRANSFER;
	s->has_kernels = s->has_kernels || kind == W_COMPUTE;
	/* A record can come after a later one of another thread: the earliest entry opens the stream. */
	if (!s->open || t < s->open_since) {
		s->open_since = t;
		s->open_tid = tid;
	}
	s->open = true;
	if (t > s->last_enq)
		s->last_enq = t;
}

/*
 * At time done, every item enqueued on the stream before upto is known to be
 * complete, and so is what those items waited on in other streams. The stream
 * is known empty only when nothing was enqueued on it since upto: work another
 * thread enqueued meanwhile keeps it open.
 */
static void drain(struct dl_devq *q, uint64_t key, uint64_t upto, uint64_t done, int depth)
{
	struct dl_devq_stream *s = find_stream(q, key);
	struct dl_devq_dep *deps;
	size_t n, cap, w = 0;

	if (!s || depth > MAX_DEP_DEPTH)
		return;
	if (s->open && s->last_enq < upto) {
		*dl_vec_push(&q->busy_max) = (struct dl_devq_span){ s->open_since, done, (uint32_t)(s - q->streams.v),
								   s->open_tid };
		s->open = s->compute = s->comm_last = s->comm_ahead = s->has_kernels = false;
	}
	/* Taken out while followed, so a cycle of waits ends here. Draining adds no stream: s stays put. */
	deps = s->deps.v;
	n = s->deps.n;
	cap = s->deps.cap;
	s->deps.v = NULL;
	s->deps.n = s->deps.cap = 0;
	for (size_t i = 0; i < n; i++) {
		struct dl_devq_dep d = deps[i];

		if (d.at < upto)
			drain(q, d.stream, d.upto, done, depth + 1);
		else
			deps[w++] = d;
	}
	s->deps.v = deps;
	s->deps.n = w;
	s->deps.cap = cap;
}

static void drain_event(struct dl_devq *q, uint64_t handle, uint64_t done)
{
	const struct dl_devq_event *e = find_event(q, handle);

	if (e)
		drain(q, e->stream, e->at, done, 0);
}

static enum dl_devq_waited held(const struct dl_devq_stream *s)
{
	if (!s->open)
		return DL_DEVQ_EMPTY;
	if (!s->compute)
		return DL_DEVQ_TRANSFERS;
	if (!s->comm_last)
		return DL_DEVQ_COMPUTE;
	return s->comm_ahead ? DL_DEVQ_COMM_AFTER : DL_DEVQ_COMM;
}

static enum dl_devq_waited max_waited(enum dl_devq_waited a, enum dl_devq_waited b)
{
	return a > b ? a : b;
}

/* What the stream held of work enqueued before the time given, and what it waits on from other streams. */
static enum dl_devq_waited stream_held(const struct dl_devq *q, uint64_t key, uint64_t before)
{
	const struct dl_devq_stream *s = NULL;
	enum dl_devq_waited w = DL_DEVQ_EMPTY;

	for (size_t i = 0; i < q->streams.n && !s; i++)
		if (q->streams.v[i].key == key)
			s = &q->streams.v[i];
	if (!s)
		return DL_DEVQ_EMPTY;
	if (s->open && s->open_since < before)
		w = held(s);
	for (size_t i = 0; i < s->deps.n; i++) {
		const struct dl_devq_stream *o = NULL;

		for (size_t k = 0; k < q->streams.n && !o; k++)
			if (q->streams.v[k].key == s->deps.v[i].stream)
				o = &q->streams.v[k];
		if (o && o->open && o->open_since < s->deps.v[i].upto)
			w = max_waited(w, held(o));
	}
	return w;
}

static enum dl_devq_waited device_held(const struct dl_devq *q, uint32_t dev)
{
	enum dl_devq_waited w = DL_DEVQ_EMPTY;

	for (size_t i = 0; i < q->streams.n; i++)
		if (q->streams.v[i].dev == dev)
			w = max_waited(w, held(&q->streams.v[i]));
	return w;
}

/*
 * What a call on a stream waits for. The legacy stream waits for every
 * blocking stream of its device; a call on it is taken to wait on any work of
 * the device (for the breakdown: the time is the device's either way).
 */
static enum dl_devq_waited waits_on(const struct dl_devq *q, uint64_t key, uint64_t t)
{
	const struct dl_devq_stream *s = find_stream((struct dl_devq *)q, key);

	return s && s->legacy ? device_held(q, s->dev) : stream_held(q, key, t + 1);
}

/*
 * Work on the legacy stream at time at waits for the work enqueued before it
 * on every stream of its device known blocking (created without
 * cudaStreamNonBlocking): done is when the legacy stream's work is known
 * done, so is theirs. A stream whose creation was not seen may be either, and
 * is left open.
 */
static void drain_blocking(struct dl_devq *q, const struct dl_devq_stream *legacy, uint64_t at, uint64_t done)
{
	uint32_t dev = legacy->dev;

	for (size_t i = 0; i < q->streams.n; i++) {
		const struct dl_devq_stream *o = &q->streams.v[i];

		if (o->dev == dev && !o->legacy && o->flags_known && !o->nonblocking)
			drain(q, o->key, at, done, 0);
	}
}

bool dl_devq_blocking(const struct dl_devq_call *c)
{
	return c->cls == DL_CLS_SYNC || (c->cls == DL_CLS_COPY && !c->async && (c->dir == DL_DIR_H2D || c->dir == DL_DIR_D2H));
}

static enum dl_devq_waited on_sync(struct dl_devq *q, const struct dl_devq_call *c)
{
	const struct dl_devq_event *e;
	const struct dl_devq_stream *s;
	enum dl_devq_waited waited;
	uint32_t dev = thread_dev(q, c->tid);
	uint64_t key = key_of(q, c);

	switch (c->api) {
	case DL_API_DEVICE_SYNC:
	case DL_API_CU_CTX_SYNC:
		/*
		 * The current device's streams only: another device's work goes on.
		 * A peer copy that another device's stream put on this one is that
		 * stream's work: whether this device's sync waits for it is not
		 * documented, so it is left to its own stream's drain.
		 */
		waited = device_held(q, dev);
		for (size_t i = 0; c->ok && i < q->streams.n; i++)
			if (q->streams.v[i].dev == dev && !q->streams.v[i].peer_side)
				drain(q, q->streams.v[i].key, c->start, c->end, 0);
		return waited;
	case DL_API_EVENT_SYNC:
	case DL_API_CU_EVENT_SYNC:
		e = find_event(q, c->event);
		waited = e ? stream_held(q, e->stream, e->at) : DL_DEVQ_EMPTY;
		if (c->ok)
			drain_event(q, c->event, c->end);
		return waited;
	default:   /* stream syncs */
		waited = waits_on(q, key, c->start);
		if (!c->ok)
			return waited;
		/* A legacy stream's last work waited for its device's blocking streams: what they held before it is done. */
		s = find_stream(q, key);
		if (s && s->legacy && s->open)
			drain_blocking(q, s, s->last_enq, c->end);
		drain(q, key, c->start, c->end, 0);
		return waited;
	}
}

static bool peer_api(uint16_t api)
{
	return api == DL_API_MEMCPY_PEER || api == DL_API_MEMCPY_PEER_ASYNC || api == DL_API_CU_MEMCPY_PEER ||
	       api == DL_API_CU_MEMCPY_PEER_PTDS || api == DL_API_CU_MEMCPY_PEER_ASYNC ||
	       api == DL_API_CU_MEMCPY_PEER_ASYNC_PTSZ;
}

/* A peer copy's device: the runtime passes an ordinal, the driver a context (-1: not known). */
static int64_t peer_dev(const struct dl_devq *q, uint16_t api, uint64_t v)
{
	uint64_t d;

	if (api == DL_API_MEMCPY_PEER || api == DL_API_MEMCPY_PEER_ASYNC)
		return v < MAX_DEVICES ? (int64_t)v : -1;
	return dl_u64map_get(&q->ctx_dev, v, &d) ? (int64_t)d : -1;
}

static uint64_t legacy_key(uint32_t dev)
{
	return dev ? KEY_LEGACY_DEV | dev : KEY_LEGACY;
}

/* s's work at time at is also that of stream key: draining s past at drains key up to it. */
static void same_item(struct dl_devq *q, uint64_t s_key, uint64_t key, uint64_t at)
{
	struct dl_devq_stream *s = find_stream(q, s_key);

	if (!s)
		return;
	if (s->deps.n >= MAX_DEPS)
		dl_vec_drop_front(&s->deps, 1);
	*dl_vec_push(&s->deps) = (struct dl_devq_dep){ key, at + 1, at };
}

/*
 * A copy between two devices is device work on both (ptr: the destination's
 * device or context, size: the source's). cudaMemcpyPeer runs on both
 * devices' legacy streams, after all their earlier work (serialized with it,
 * as documented) and returns before it is done: its end on one device proves
 * the other's legacy stream done up to it. cudaMemcpyPeerAsync runs on its
 * stream; the other device's side of it is a stream of that device, drained
 * with the copy's stream. A device not known (a context never seen made)
 * gets no side: the upper bound of that device may be short by the copy.
 */
static enum dl_devq_waited on_peer(struct dl_devq *q, const struct dl_devq_call *c)
{
	int64_t dst = peer_dev(q, c->api, c->ptr), src = peer_dev(q, c->api, c->size);
	struct dl_devq_stream *s, *side;
	uint64_t key;
	uint32_t other;

	if (!c->ok)
		return DL_DEVQ_EMPTY;
	if (!c->async) {
		uint64_t kd, ks;

		if (dst < 0 || src < 0) {
			enqueue(q, key_of(q, c), c->start, c->tid, W_TRANSFER);
			return DL_DEVQ_EMPTY;
		}
		kd = legacy_key((uint32_t)dst);
		ks = legacy_key((uint32_t)src);
		enqueue(q, kd, c->start, c->tid, W_TRANSFER);
		if (ks != kd) {
			enqueue(q, ks, c->start, c->tid, W_TRANSFER);
			same_item(q, kd, ks, c->start);
			same_item(q, ks, kd, c->start);
		}
		return DL_DEVQ_EMPTY;
	}
	key = key_of(q, c);
	enqueue(q, key, c->start, c->tid, W_TRANSFER);
	s = find_stream(q, key);
	if (dst < 0 || src < 0 || dst == src || ((int64_t)s->dev != dst && (int64_t)s->dev != src))
		return DL_DEVQ_EMPTY;
	other = (uint32_t)((int64_t)s->dev == dst ? src : dst);
	side = get_stream_on(q, KEY_PEER_SIDE | other, other);
	side->peer_side = true;
	enqueue(q, side->key, c->start, c->tid, W_TRANSFER);
	same_item(q, key, side->key, c->start);
	return DL_DEVQ_EMPTY;
}

static enum dl_devq_waited on_copy(struct dl_devq *q, const struct dl_devq_call *c)
{
	uint64_t key = key_of(q, c);
	const struct dl_devq_stream *s;
	enum dl_devq_waited waited;

	if (peer_api(c->api))
		return on_peer(q, c);
	if (c->dir == DL_DIR_H2H || !c->ok)
		return DL_DEVQ_EMPTY;
	waited = waits_on(q, key, c->start);
	enqueue(q, key, c->start, c->tid, W_TRANSFER);
	if (c->async || c->dir == DL_DIR_D2D)
		return DL_DEVQ_EMPTY;
	/*
	 * A synchronous copy waits for its stream's earlier work (on the legacy
	 * stream, its device's blocking streams' too). It returns once its own
	 * transfer is done, except from pageable host memory to the device: then
	 * once the bytes are staged, the transfer may still run.
	 */
	s = find_stream(q, key);
	if (s && s->legacy)
		drain_blocking(q, s, c->start, c->end);
	drain(q, key, c->dir == DL_DIR_H2D && c->pageable ? c->start : c->start + 1, c->end, 0);
	return waited;
}

static void set_dev(struct dl_devq *q, uint32_t tid, uint32_t dev)
{
	if (dev)
		dl_u64map_put(&q->dev_of_tid, tid, dev);
	else
		dl_u64map_del(&q->dev_of_tid, tid);
	saw_device(q, dev);
}

/*
 * A thread's context stack under its current context, as the devices of its
 * contexts: a depth in the low 4 bits, then up to CTX_STACK devices of 6 bits
 * each, the latest pushed first. Deeper stacks forget their bottom: popping
 * past what is kept leaves the current device as it is.
 */
#define CTX_STACK 9
#define CTX_DEPTH_MASK 0xfull

static void ctx_push(struct dl_devq *q, uint32_t tid, uint32_t dev)
{
	uint64_t v = 0, depth, entries;

	dl_u64map_get(&q->ctx_below, tid, &v);
	depth = v & CTX_DEPTH_MASK;
	entries = (v >> 4 << 6 | dev) & ((1ull << (6 * CTX_STACK)) - 1);
	depth = depth < CTX_STACK ? depth + 1 : CTX_STACK;
	dl_u64map_put(&q->ctx_below, tid, entries << 4 | depth);
}

/* The device under the current context (-1: none kept), taken off the stack. */
static int64_t ctx_pop(struct dl_devq *q, uint32_t tid)
{
	uint64_t v = 0;
	uint32_t dev;

	if (!dl_u64map_get(&q->ctx_below, tid, &v) || !(v & CTX_DEPTH_MASK))
		return -1;
	dev = (uint32_t)(v >> 4 & (MAX_DEVICES - 1));
	if ((v & CTX_DEPTH_MASK) == 1)
		dl_u64map_del(&q->ctx_below, tid);
	else
		dl_u64map_put(&q->ctx_below, tid, (v >> 10) << 4 | ((v & CTX_DEPTH_MASK) - 1));
	return dev;
}

/*
 * The driver's current context: a context's device is known from its
 * creation (which also pushes it) or its primary-context retain (ptr: the
 * context, size: the device); setting one replaces the top of the thread's
 * context stack (NULL pops it), pushing and popping move along it, and the
 * current device follows (cudaSetDevice replaces the top as well). A context
 * whose making was not seen leaves the device as it was: its work counts
 * where the thread's work counted before.
 */
static void on_context(struct dl_devq *q, const struct dl_devq_call *c)
{
	uint64_t d;
	int64_t below;
	bool known = dl_u64map_get(&q->ctx_dev, c->ptr, &d);

	switch (c->api) {
	case DL_API_CU_PRIMARY_CTX_RETAIN:
	case DL_API_CU_CTX_CREATE:
	case DL_API_CU_CTX_CREATE_V2:
	case DL_API_CU_CTX_CREATE_V3:
	case DL_API_CU_CTX_CREATE_V4:
		if (!c->ptr || c->size >= MAX_DEVICES)
			return;
		dl_u64map_put(&q->ctx_dev, c->ptr, c->size);
		saw_device(q, (uint32_t)c->size);
		if (c->api != DL_API_CU_PRIMARY_CTX_RETAIN) {
			ctx_push(q, c->tid, thread_dev(q, c->tid));
			set_dev(q, c->tid, (uint32_t)c->size);
		}
		return;
	case DL_API_CU_CTX_SET_CURRENT:
		if (!c->ptr) {
			if ((below = ctx_pop(q, c->tid)) >= 0)
				set_dev(q, c->tid, (uint32_t)below);
		} else if (known) {
			set_dev(q, c->tid, (uint32_t)d);
		}
		return;
	case DL_API_CU_CTX_PUSH_CURRENT:
	case DL_API_CU_CTX_PUSH_CURRENT_V2:
		ctx_push(q, c->tid, thread_dev(q, c->tid));
		if (known)
			set_dev(q, c->tid, (uint32_t)d);
		return;
	case DL_API_CU_CTX_POP_CURRENT:
	case DL_API_CU_CTX_POP_CURRENT_V2:
		if ((below = ctx_pop(q, c->tid)) >= 0)
			set_dev(q, c->tid, (uint32_t)below);
		return;
	default:
		return;
	}
}

/* Capture begins or ends on a stream; an ended one's graph holds the kernels it recorded. */
static void on_capture(struct dl_devq *q, const struct dl_devq_call *c)
{
	struct dl_devq_stream *s = get_stream_on(q, key_of(q, c), thread_dev(q, c->tid));
	bool begin = c->api == DL_API_BEGIN_CAPTURE || c->api == DL_API_BEGIN_CAPTURE_PTSZ ||
		     c->api == DL_API_CU_BEGIN_CAPTURE || c->api == DL_API_CU_BEGIN_CAPTURE_V2 ||
		     c->api == DL_API_CU_BEGIN_CAPTURE_PTSZ;

	if (!c->ok)
		return;
	if (begin) {
		s->capturing = true;
		s->captured = 0;
		s->capture_origin = s->key;
		return;
	}
	if (!s->capturing || s->capture_origin != s->key)
		return;   /* not a capture this stream began (a forked stream's end is refused) */
	/* The streams it forked into leave it with it: their kernels are the graph's too. */
	for (size_t i = 0; i < q->streams.n; i++) {
		struct dl_devq_stream *o = &q->streams.v[i];

		if (o == s || !o->capturing || o->capture_origin != s->key)
			continue;
		s->captured += o->captured;
		o->capturing = false;
		o->captured = 0;
	}
	if (c->ptr)
		dl_u64map_put(&q->graph_kernels, c->ptr, s->captured);
	s->capturing = false;
	s->captured = 0;
}

/*
 * A wait on an event recorded in a capture: a stream not capturing joins the
 * capture (CUDA's cross-stream capture: a fork), its work recorded into the
 * same graph until the capture ends on the stream that began it. No device
 * work depends on it: the event's record ran nothing.
 */
static void capture_fork(struct dl_devq *q, const struct dl_devq_call *c, uint64_t origin)
{
	const struct dl_devq_stream *o = find_stream(q, origin);
	struct dl_devq_stream *s;

	if (!o || !o->capturing)
		return;   /* that capture ended */
	s = get_stream_on(q, key_of(q, c), thread_dev(q, c->tid));
	if (s->capturing || s->legacy)
		return;   /* a join, or a wait the runtime refuses */
	s->capturing = true;
	s->captured = 0;
	s->capture_origin = origin;
}

static void on_graph_build(struct dl_devq *q, const struct dl_devq_call *c)
{
	uint64_t n = 0;

	if (!c->ok || !c->ptr)
		return;
	dl_u64map_get(&q->graph_kernels, c->size, &n);
	if (c->api == DL_API_GRAPH_INSTANTIATE || c->api == DL_API_CU_GRAPH_INSTANTIATE)
		dl_u64map_put(&q->exec_kernels, c->ptr, n);
	else   /* a kernel node added */
		dl_u64map_put(&q->graph_kernels, c->size, n + 1);
}

static void on_stream_create(struct dl_devq *q, const struct dl_devq_call *c)
{
	struct dl_devq_stream *s;
	uint32_t dev = thread_dev(q, c->tid);

	if (!c->ok || c->ptr <= 2)
		return;
	/* A handle freed and made again names a new stream: what the old one held is forgotten with it. */
	s = get_stream_on(q, c->ptr, dev);
	s->dev = dev;
	s->flags_known = true;
	/* cudaStreamNonBlocking and CU_STREAM_NON_BLOCKING are both 1. */
	s->nonblocking = c->size & 1;
	saw_device(q, dev);
}

/*
 * A capturing stream of the device that the legacy stream would synchronize
 * with: work for the legacy stream fails then (cudaErrorStreamCaptureImplicit)
 * unless every capturing stream of its device is known non-blocking.
 */
static bool legacy_refused(const struct dl_devq *q, const struct dl_devq_stream *legacy)
{
	for (size_t i = 0; legacy && legacy->legacy && i < q->streams.n; i++) {
		const struct dl_devq_stream *o = &q->streams.v[i];

		if (o->dev == legacy->dev && o->capturing && !(o->flags_known && o->nonblocking))
			return true;
	}
	return false;
}

/* Work for a capturing stream is recorded, not run; for the legacy stream beside one, refused. */
static bool not_run(struct dl_devq *q, const struct dl_devq_call *c)
{
	struct dl_devq_stream *s = find_stream(q, key_of(q, c));

	if (!s)
		return false;
	if (s->capturing) {
		if (c->cls == DL_CLS_LAUNCH)
			s->captured++;
		return true;
	}
	return legacy_refused(q, s);
}

enum dl_devq_waited dl_devq_call(struct dl_devq *q, const struct dl_devq_call *c)
{
	const struct dl_devq_event *ev;
	struct dl_devq_event *slot;

	switch (c->cls) {
	case DL_CLS_LAUNCH:
	case DL_CLS_GRAPH:
		/* Entry-only: whether it failed is not known, so it may have enqueued. */
		if (!not_run(q, c))
			enqueue(q, key_of(q, c), c->start, c->tid, W_COMPUTE);
		break;
	case DL_CLS_MEMSET:
		if (c->ok && !not_run(q, c))
			enqueue(q, key_of(q, c), c->start, c->tid, W_COMPUTE);
		break;
	case DL_CLS_COMM:
		/* Grouped calls reach the device at ncclGroupEnd: enqueued at the call, the upper bound only widens. */
		if (c->ok)
			enqueue(q, key_of(q, c), c->start, c->tid, W_COMM);
		break;
	case DL_CLS_COPY:
		if (c->async && not_run(q, c))
			break;
		return on_copy(q, c);
	case DL_CLS_SYNC:
		return on_sync(q, c);
	case DL_CLS_QUERY:
		if (!c->ok)
			break;
		if (c->api == DL_API_EVENT_QUERY || c->api == DL_API_CU_EVENT_QUERY)
			drain_event(q, c->event, c->end);
		else
			drain(q, key_of(q, c), c->start, c->end, 0);
		break;
	case DL_CLS_EVENT:
		if (!c->ok)
			break;
		if (c->api == DL_API_EVENT_RECORD || c->api == DL_API_EVENT_RECORD_PTSZ) {
			slot = (struct dl_devq_event *)find_event(q, c->event);
			if (!slot) {
				dl_u64map_put(&q->event_of, c->event, q->events.n);
				slot = dl_vec_push(&q->events);
				slot->handle = c->event;
			}
			slot->stream = key_of(q, c);
			slot->at = c->start;
			{
				const struct dl_devq_stream *s = find_stream(q, slot->stream);

				slot->capture_origin = s && s->capturing ? s->capture_origin : 0;
			}
		} else if ((ev = find_event(q, c->event)) && ev->capture_origin) {
			capture_fork(q, c, ev->capture_origin);
		} else if (ev) {
			struct dl_devq_stream *s = get_stream_on(q, key_of(q, c), thread_dev(q, c->tid));

			if (s->deps.n >= MAX_DEPS)
				dl_vec_drop_front(&s->deps, 1);
			*dl_vec_push(&s->deps) = (struct dl_devq_dep){ ev->stream, ev->at, c->start };
		}
		break;
	case DL_CLS_DEVICE:
		if (c->api == DL_API_SET_DEVICE && c->ok && c->ptr < MAX_DEVICES)
			set_dev(q, c->tid, (uint32_t)c->ptr);
		else if (c->ok)
			on_context(q, c);
		break;
	case DL_CLS_STREAM_CREATE:
		on_stream_create(q, c);
		break;
	case DL_CLS_CAPTURE:
		on_capture(q, c);
		break;
	case DL_CLS_GRAPH_BUILD:
		on_graph_build(q, c);
		break;
	default:
		break;
	}
	return DL_DEVQ_EMPTY;
}

struct dl_devq_seen dl_devq_seen(const struct dl_devq *q, const struct dl_devq_call *c)
{
	const struct dl_devq_stream *s = find_stream((struct dl_devq *)q, key_of(q, c));
	struct dl_devq_seen out = { thread_dev(q, c->tid), false, 0 };
	uint64_t n;

	if (c->cls == DL_CLS_SYNC && (c->api == DL_API_DEVICE_SYNC || c->api == DL_API_CU_CTX_SYNC))
		return out;
	if (s) {
		out.dev = s->dev;
		/* Still capturing after the call: its work was recorded, not run (the legacy stream beside: refused). */
		out.captured = (s->capturing || legacy_refused(q, s)) &&
			       (c->cls == DL_CLS_LAUNCH || c->cls == DL_CLS_MEMSET || (c->cls == DL_CLS_COPY && c->async));
	}
	if (c->cls == DL_CLS_GRAPH && dl_u64map_get(&q->exec_kernels, c->ptr, &n))
		out.graph_kernels = (uint32_t)n;
	return out;
}

static int cmp_stream_start(const void *a, const void *b)
{
	const struct dl_span *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

size_t dl_devq_stream_spans(const struct dl_devq *q, uint64_t a, uint64_t b, struct dl_span **out)
{
	struct dl_span *v = dl_xcalloc(q->busy_max.n + q->streams.n + 1, sizeof(*v));
	size_t n = 0, w = 0;

	for (size_t i = 0; i < q->busy_max.n; i++)
		if (q->busy_max.v[i].end > a && q->busy_max.v[i].start < b)
			v[n++] = (struct dl_span){ q->busy_max.v[i].start, q->busy_max.v[i].end, q->busy_max.v[i].stream };
	for (size_t i = 0; i < q->streams.n; i++)
		if (q->streams.v[i].open && q->streams.v[i].open_since < b)
			v[n++] = (struct dl_span){ q->streams.v[i].open_since, b, (uint32_t)i };
	/* Out-of-order records can open a stream before its previous span's end: merged, a stream's spans are disjoint. */
	qsort(v, n, sizeof(*v), cmp_stream_start);
	for (size_t i = 0; i < n; i++) {
		struct dl_span x = { dl_max_u64(v[i].start, a), dl_min_u64(v[i].end, b), v[i].kind };

		if (x.end <= x.start)
			continue;
		if (w && v[w - 1].kind == x.kind && x.start <= v[w - 1].end)
			v[w - 1].end = dl_max_u64(v[w - 1].end, x.end);
		else
			v[w++] = x;
	}
	*out = v;
	return w;
}

static int cmp_open(const void *a, const void *b)
{
	const struct dl_devq_open *x = a, *y = b;

	if (x->stream != y->stream)
		return x->stream < y->stream ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

size_t dl_devq_opens(const struct dl_devq *q, uint64_t a, uint64_t b, struct dl_devq_open **out)
{
	struct dl_devq_open *v = dl_xcalloc(q->busy_max.n + q->streams.n + 1, sizeof(*v));
	size_t n = 0;

	for (size_t i = 0; i < q->busy_max.n; i++)
		if (q->busy_max.v[i].start >= a && q->busy_max.v[i].start < b)
			v[n++] = (struct dl_devq_open){ q->busy_max.v[i].start, q->busy_max.v[i].stream,
							q->busy_max.v[i].tid };
	for (size_t i = 0; i < q->streams.n; i++)
		if (q->streams.v[i].open && q->streams.v[i].open_since >= a && q->streams.v[i].open_since < b)
			v[n++] = (struct dl_devq_open){ q->streams.v[i].open_since, (uint32_t)i, q->streams.v[i].open_tid };
	qsort(v, n, sizeof(*v), cmp_open);
	*out = v;
	return n;
}

uint64_t dl_devq_busy_upper(const struct dl_devq *q, uint64_t a, uint64_t b)
{
	struct dl_span *v;
	size_t n = dl_devq_stream_spans(q, a, b, &v);
	uint64_t busy;

	n = dl_spans_union(v, n);
	busy = dl_spans_overlap(v, n, a, b);
	free(v);
	return busy;
}

uint64_t dl_devq_woke(const struct dl_span *sched, size_t nsched, uint64_t start, uint64_t end)
{
	uint64_t woke = 0;

	for (size_t k = dl_spans_first_after(sched, nsched, start); k < nsched && sched[k].start < end; k++)
		if (sched[k].kind == DL_ST_SLEEP)
			woke = dl_min_u64(sched[k].end, end);
	return woke;
}

bool dl_devq_returns_when_done(const struct dl_devq_call *c, bool pageable)
{
	return c->cls == DL_CLS_SYNC || (c->cls == DL_CLS_COPY && !pageable);
}

/*
 * The slowest copy a host running CUDA makes, in bytes per ns: 1 GB/s. One
 * thread's memcpy runs at 5-20 GB/s on the servers GPUs sit in (15 GB/s on
 * these VMs), so the tail it allows is 5 to 20 times the longest seen; a
 * slower host would only make a pageable copy's lower bound reach past the
 * device's end by the difference.
 */
#define HOST_COPY_FLOOR_BYTES_PER_NS 1

uint64_t dl_devq_host_tail_ns(uint64_t bytes)
{
	return bytes ? bytes / HOST_COPY_FLOOR_BYTES_PER_NS + 1 : UINT64_MAX;
}

/*
 * The longest a waiting runtime's call runs on its CPU between a look at the
 * device that finds its work not done and its return, had the next look found
 * it done: the loop's interval (a spin reads a word of memory, well under a
 * us; a yielding wait makes one sched_yield, about a us when no other thread
 * wants the CPU, and when one does the thread leaves its CPU and the
 * scheduler's records show it) and the way out of the call, return probe
 * included (a uprobe trap cost 5-6 us in tools/bench/README.md's runs, 14
 * us where the kernel single-steps the instruction). 100 us bounds both with room for interrupts and
 * faults taken on the way; a stretch on the CPU shorter than that after a
 * preemption may be only the way out.
 */
#define POLL_NS 100000

bool dl_devq_note_wait(struct dl_devq_waits_seen *s, const struct dl_span *sched, size_t nsched,
		       const struct dl_devq_wait *w)
{
	uint64_t oncpu = 0, tail = w->done_at_return ? 0 : dl_devq_host_tail_ns(w->host_bytes);

	if (dl_devq_woke(sched, nsched, w->start, w->end)) {
		s->slept++;
		return false;
	}
	for (size_t k = dl_spans_first_after(sched, nsched, w->start); k < nsched && sched[k].start < w->end; k++)
		if (sched[k].kind == DL_ST_RUNNING)
			oncpu += dl_min_u64(sched[k].end, w->end) - dl_max_u64(sched[k].start, w->start);
	/* On its CPU for most of the call: a host busy with other work while runnable shows little of it. */
	if (tail != UINT64_MAX && oncpu >= tail + DL_DEVQ_POLL_ONCPU_NS && 2 * oncpu >= w->end - w->start)
		s->polled++;
	return !s->slept && s->polled >= DL_DEVQ_POLL_EVIDENCE;
}

/* A runtime not known to poll: to the return when on the CPU throughout and done_at_return, else nothing. */
static uint64_t done_on_cpu(const struct dl_span *sched, size_t nsched, uint64_t start, uint64_t end)
{
	uint64_t oncpu = 0;

	for (size_t k = dl_spans_first_after(sched, nsched, start); k < nsched && sched[k].start < end; k++) {
		if (sched[k].kind != DL_ST_RUNNING)
			return 0;
		oncpu += dl_min_u64(sched[k].end, end) - dl_max_u64(sched[k].start, start);
	}
	/* No state known for part of the call is no evidence that it spun there. */
	return oncpu == end - start ? end : 0;
}

uint64_t dl_devq_done(const struct dl_span *sched, size_t nsched, uint64_t start, uint64_t end, bool done_at_return,
		      uint64_t host_bytes, bool polling)
{
	uint64_t woke = dl_devq_woke(sched, nsched, start, end), tail, covered = 0, ran = 0, p = 0, a = 0;
	size_t first = dl_spans_first_after(sched, nsched, start), k;

	if (woke)
		return woke;
	if (!polling)
		return done_at_return ? done_on_cpu(sched, nsched, start, end) : 0;
	tail = done_at_return ? 0 : dl_devq_host_tail_ns(host_bytes);
	for (k = first; k < nsched && sched[k].start < end; k++) {
		if (sched[k].kind != DL_ST_RUNNING && sched[k].kind != DL_ST_RUNQ)
			return 0;
		covered += dl_min_u64(sched[k].end, end) - dl_max_u64(sched[k].start, start);
	}
	/* No state known for part of the call is no evidence that it polled there. */
	if (covered != end - start)
		return 0;
	/* Back from the return, past the tail's on-CPU time (the host's own work): p, in a stretch on the CPU from a. */
	while (k-- > first) {
		uint64_t b = dl_min_u64(sched[k].end, end);

		a = dl_max_u64(sched[k].start, start);
		if (sched[k].kind != DL_ST_RUNNING)
			continue;
		if (b - a > tail - ran) {
			p = b - (tail - ran);
			break;
		}
		ran += b - a;
	}
	if (!p)
		return 0;
	/*
	 * On its CPU from a, the thread looked at the device every POLL_NS at
	 * most and found the work not done before p. A stretch that began with
	 * the call, or ran long enough before p, says so up to p; a shorter one
	 * after a preemption may have found it done at its first look, so the
	 * work is known undone only up to the preemption (the last instant it ran
	 * before; nothing if it never ran before it).
	 */
	if (a == start || p - a >= POLL_NS)
		return p;
	while (k-- > first)
		if (sched[k].kind == DL_ST_RUNNING)
			return dl_min_u64(sched[k].end, end);
	return 0;
}

void dl_devq_drained_by(struct dl_devq *q, uint64_t done, uint64_t woke)
{
	for (size_t i = 0; woke && i < q->busy_max.n; i++)
		if (q->busy_max.v[i].end == done)
			q->busy_max.v[i].end = dl_max_u64(q->busy_max.v[i].start, woke);
}

size_t dl_devq_lower_spans(const struct dl_devq_wait *w, size_t n, const struct dl_span *sched, size_t nsched,
			   uint64_t a, uint64_t b, struct dl_span **out)
{
	return dl_devq_lower_spans_dev(w, n, sched, nsched, a, b, -1, out);
}

size_t dl_devq_lower_spans_dev(const struct dl_devq_wait *w, size_t n, const struct dl_span *sched, size_t nsched,
			       uint64_t a, uint64_t b, int dev, struct dl_span **out)
{
	struct dl_span *v = dl_xcalloc(n + 1, sizeof(*v));
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t woke;

		if (!w[i].waited || w[i].end <= a || w[i].start >= b || (dev >= 0 && w[i].dev != (uint32_t)dev))
			continue;
		woke = dl_devq_done(sched, nsched, w[i].start, w[i].end, w[i].done_at_return, w[i].host_bytes,
				    w[i].polling);
		if (woke)
			v[k++] = (struct dl_span){ w[i].start, woke, 0 };
	}
	*out = v;
	return dl_spans_union(v, k);
}

uint64_t dl_devq_busy_lower(const struct dl_devq_wait *w, size_t n, const struct dl_span *sched, size_t nsched,
			    uint64_t a, uint64_t b)
{
	struct dl_span *v;
	size_t k = dl_devq_lower_spans(w, n, sched, nsched, a, b, &v);
	uint64_t busy = dl_spans_overlap(v, k, a, b);

	free(v);
	return busy;
}

void dl_devq_forget_before(struct dl_devq *q, uint64_t t)
{
	size_t w = 0;

	for (size_t i = 0; i < q->busy_max.n; i++)
		if (q->busy_max.v[i].end > t)
			q->busy_max.v[w++] = q->busy_max.v[i];
	q->busy_max.n = w;
}

void dl_devq_free(struct dl_devq *q)
{
	for (size_t i = 0; i < q->streams.n; i++)
		dl_vec_free(&q->streams.v[i].deps);
	dl_vec_free(&q->streams);
	dl_vec_free(&q->events);
	dl_u64map_free(&q->event_of);
	dl_u64map_free(&q->dev_of_tid);
	dl_u64map_free(&q->ctx_dev);
	dl_u64map_free(&q->ctx_below);
	dl_u64map_free(&q->graph_kernels);
	dl_u64map_free(&q->exec_kernels);
	dl_vec_free(&q->busy_max);
}
