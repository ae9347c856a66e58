// SPDX-License-Identifier: MIT
/*
 * gpusim graphs: stream capture (work issued to a capturing stream becomes
 * nodes of a graph, each depending on the one captured before it), graphs
 * built node by node (cudaGraphAddKernelNode with explicit dependencies),
 * instantiation, and launch: one launch's host cost, then every node runs
 * on the stream's device, each after the nodes it depends on and after the
 * work the stream held when the graph was launched.
 *
 * What capture refuses follows the runtime's documentation: the legacy
 * stream cannot be captured; work on the legacy stream while a blocking
 * stream of its device captures would synchronise with it, so it fails with
 * cudaErrorStreamCaptureImplicit and invalidates that capture; syncing or
 * querying a capturing stream, and potentially unsafe calls (cudaMalloc,
 * synchronous copies, device and event syncs) where the capture mode
 * forbids them (capture_forbids_unsafe), fail with
 * cudaErrorStreamCaptureUnsupported and invalidate it; a capture not begun
 * in Relaxed mode must end on the thread that began it.
 */
#define _GNU_SOURCE
#include "gpusim_int.h"

#include <stdlib.h>
#include <string.h>

static struct CUgraph_st *graph_new(void)
{
	struct CUgraph_st *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->magic = GRAPH_MAGIC;
	g->nodes.elt = sizeof(struct graph_node);
	g->handles.elt = sizeof(struct CUgraphNode_st *);
	return g;
}

static void graph_free(struct CUgraph_st *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->handles.n; i++)
		free(((struct CUgraphNode_st **)g->handles.v)[i]);
	free(g->nodes.v);
	free(g->handles.v);
	g->magic = 0;
	free(g);
}

/* Appends n to g; its handle into *out when asked. */
static cudaError_t graph_add(struct CUgraph_st *g, const struct graph_node *n, cudaGraphNode_t *out)
{
	struct CUgraphNode_st *h = calloc(1, sizeof(*h)), **hp;
	struct graph_node *slot;

	if (!h)
		return cudaErrorMemoryAllocation;
	hp = vec_push(&g->handles);
	if (!hp) {
		free(h);
		return cudaErrorMemoryAllocation;
	}
	slot = vec_push(&g->nodes);
	if (!slot) {
		g->handles.n--;
		free(h);
		return cudaErrorMemoryAllocation;
	}
	*slot = *n;
	*h = (struct CUgraphNode_st){ g, g->nodes.n - 1 };
	*hp = h;
	if (out)
		*out = h;
	return cudaSuccess;
}

cudaError_t capture_node(struct CUstream_st *s, const struct graph_node *n)
{
	struct graph_node node = *n;
	cudaError_t e;

	if (s->capture_invalid)
		return cudaErrorStreamCaptureInvalidated;
	node.ndeps = 0;
	if (s->capture_last >= 0)
		node.deps[node.ndeps++] = s->capture_last;
	if (s->capture_join >= 0 && s->capture_join != s->capture_last)
		node.deps[node.ndeps++] = s->capture_join;
	e = graph_add(s->capture, &node, NULL);
	if (e == cudaSuccess) {
		s->capture_last = (long)s->capture->nodes.n - 1;
		s->capture_join = -1;
		s->capture_rejoined = 0;
	}
	return e;
}

/*
 * Cross-stream capture, as the programming guide documents it: a stream that
 * waits on an event recorded in a capture joins that capture (a fork), its
 * work captured into the same graph after the event's point, until the
 * capture ends on the stream that began it; there every stream it forked
 * into must have been joined back (the origin waited on an event recorded
 * after its last captured work), else cudaErrorStreamCaptureUnjoined. A
 * stream capturing into another graph cannot wait on the event
 * (cudaErrorStreamCaptureIsolation); the legacy stream cannot join
 * (cudaErrorStreamCaptureImplicit). Either invalidates the capture.
 */
cudaError_t capture_wait(struct CUstream_st *s, struct CUevent_st *e)
{
	struct CUstream_st *origin = e->cap_stream->capture_origin ? e->cap_stream->capture_origin : e->cap_stream;

	if (e->cap_stream->capture != e->cap_graph) /* that capture ended: nothing to wait for */
		return cudaSuccess;
	if (s->legacy) {
		e->cap_stream->capture_invalid = origin->capture_invalid = 1;
		return cudaErrorStreamCaptureImplicit;
	}
	if (s->capture && s->capture != e->cap_graph) {
		e->cap_stream->capture_invalid = origin->capture_invalid = 1;
		return cudaErrorStreamCaptureIsolation;
	}
	if (!s->capture) { /* a fork */
		s->capture = e->cap_graph;
		s->capture_mode = origin->capture_mode;
		s->capture_invalid = 0;
		s->capture_thread = origin->capture_thread;
		s->capture_last = e->cap_node;
		s->capture_join = -1;
		s->capture_origin = origin;
		s->capture_rejoined = 0;
		return cudaSuccess;
	}
	/* A join: the next node captured on s follows the event's point too. */
	s->capture_join = e->cap_node;
	if (s == origin && e->cap_stream != origin && e->cap_node == e->cap_stream->capture_last)
		e->cap_stream->capture_rejoined = 1;
	return cudaSuccess;
}

cudaError_t begin_capture(cudaStream_t hs, enum cudaStreamCaptureMode mode, int ptds)
{
	struct CUstream_st *s;
	struct CUgraph_st *g;

	if ((unsigned)mode > cudaStreamCaptureModeRelaxed)
		return ret(cudaErrorInvalidValue);
	s = lock_stream(hs, ptds);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	if (s->legacy) {
		unlock();
		return ret(cudaErrorStreamCaptureUnsupported);
	}
	if (s->capture) {
		unlock();
		return ret(cudaErrorIllegalState);
	}
	g = graph_new();
	if (!g) {
		unlock();
		return ret(cudaErrorMemoryAllocation);
	}
	s->capture = g;
	s->capture_mode = mode;
	s->capture_invalid = 0;
	s->capture_thread = pthread_self();
	s->capture_last = -1;
	s->capture_join = -1;
	s->capture_origin = NULL;
	unlock();
	return cudaSuccess;
}

cudaError_t end_capture(cudaStream_t hs, cudaGraph_t *pGraph, int ptds)
{
	struct CUstream_st *s;
	struct CUgraph_st *g;
	int invalid, unjoined = 0;

	if (!pGraph)
		return ret(cudaErrorInvalidValue);
	s = lock_stream(hs, ptds);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	if (!s->capture) {
		unlock();
		return ret(cudaErrorIllegalState);
	}
	if (s->capture_mode != cudaStreamCaptureModeRelaxed && !pthread_equal(s->capture_thread, pthread_self())) {
		unlock();
		return ret(cudaErrorStreamCaptureWrongThread);
	}
	if (s->capture_origin) { /* a stream the capture forked into: it ends where it began */
		unlock();
		return ret(cudaErrorStreamCaptureUnmatched);
	}
	g = s->capture;
	invalid = s->capture_invalid;
	/* The streams it forked into leave the capture with it: each must have been joined back. */
	for (struct CUstream_st *o = S.streams; o; o = o->next) {
		if (o->capture_origin != s)
			continue;
		invalid |= o->capture_invalid;
		unjoined |= !o->capture_rejoined;
		o->capture = NULL;
		o->capture_invalid = 0;
		o->capture_last = o->capture_join = -1;
		o->capture_origin = NULL;
	}
	s->capture = NULL;
	s->capture_invalid = 0;
	s->capture_last = s->capture_join = -1;
	unlock();
	if (invalid || unjoined) {
		graph_free(g);
		*pGraph = NULL;
		return ret(unjoined && !invalid ? cudaErrorStreamCaptureUnjoined : cudaErrorStreamCaptureInvalidated);
	}
	*pGraph = g;
	return cudaSuccess;
}

cudaError_t is_capturing(cudaStream_t hs, enum cudaStreamCaptureStatus *status, int ptds)
{
	struct CUstream_st *s;

	if (!status)
		return ret(cudaErrorInvalidValue);
	s = lock_stream(hs, ptds);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	*status = !s->capture ? cudaStreamCaptureStatusNone
			      : s->capture_invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
	unlock();
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
	if (!pGraph || flags)
		return ret(cudaErrorInvalidValue);
	*pGraph = graph_new();
	return *pGraph ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

GPUSIM_API cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	if (!graph || graph->magic != GRAPH_MAGIC)
		return ret(cudaErrorInvalidValue);
	graph_free(graph);
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
					      const cudaGraphNode_t *pDependencies, size_t numDependencies,
					      const struct cudaKernelNodeParams *p)
{
	struct graph_node n = { .kind = NODE_KERNEL, .engine = ENG_COMPUTE };
	cudaError_t e;

	if (!pGraphNode || !graph || graph->magic != GRAPH_MAGIC || !p || (numDependencies && !pDependencies))
		return ret(cudaErrorInvalidValue);
	if (!p->func)
		return ret(cudaErrorInvalidDeviceFunction);
	if (!p->gridDim.x || !p->gridDim.y || !p->gridDim.z || !p->blockDim.x || !p->blockDim.y || !p->blockDim.z ||
	    (uint64_t)p->blockDim.x * p->blockDim.y * p->blockDim.z > 1024)
		return ret(cudaErrorInvalidConfiguration);
	if (numDependencies > sizeof(n.deps) / sizeof(n.deps[0]))
		return ret(cudaErrorNotSupported);
	for (size_t i = 0; i < numDependencies; i++) {
		if (!pDependencies[i] || pDependencies[i]->graph != graph)
			return ret(cudaErrorInvalidValue);
		n.deps[i] = (long)pDependencies[i]->index;
	}
	n.ndeps = numDependencies;
	n.func = p->func;
	n.grid = p->gridDim;
	lock();
	e = graph_add(graph, &n, pGraphNode);
	unlock();
	return ret(e);
}

GPUSIM_API cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
	size_t n;

	if (!graph || graph->magic != GRAPH_MAGIC || !numNodes)
		return ret(cudaErrorInvalidValue);
	n = graph->nodes.n;
	if (nodes) {
		n = n < *numNodes ? n : *numNodes;
		memcpy(nodes, graph->handles.v, n * sizeof(*nodes));
	}
	*numNodes = n;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
					    unsigned long long flags)
{
	struct CUgraphExec_st *x;

	(void)flags;
	if (!pGraphExec || !graph || graph->magic != GRAPH_MAGIC)
		return ret(cudaErrorInvalidValue);
	x = calloc(1, sizeof(*x));
	if (!x)
		return ret(cudaErrorMemoryAllocation);
	x->magic = EXEC_MAGIC;
	x->nodes.elt = sizeof(struct graph_node);
	lock();
	for (size_t i = 0; i < graph->nodes.n; i++) {
		struct graph_node *slot = vec_push(&x->nodes);

		if (!slot) {
			unlock();
			free(x->nodes.v);
			free(x);
			return ret(cudaErrorMemoryAllocation);
		}
		*slot = ((struct graph_node *)graph->nodes.v)[i];
	}
	unlock();
	*pGraphExec = x;
	return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	if (!graphExec || graphExec->magic != EXEC_MAGIC)
		return ret(cudaErrorInvalidValue);
	graphExec->magic = 0;
	free(graphExec->nodes.v);
	free(graphExec);
	return cudaSuccess;
}

/*
 * One launch's host cost, then each node in order (a node depends only on
 * nodes before it): it starts after the stream's earlier work, the nodes it
 * depends on, and its engine.
 */
cudaError_t graph_launch(cudaGraphExec_t x, cudaStream_t hs, int ptds)
{
	struct CUstream_st *s;
	struct graph_node *nodes;
	uint64_t *end, base, now, last = 0;

	pthread_once(&S.once, init_once);
	if (!x || x->magic != EXEC_MAGIC)
		return ret(cudaErrorInvalidValue);
	end = calloc(x->nodes.n + 1, sizeof(*end));
	if (!end)
		return ret(cudaErrorMemoryAllocation);
	spin_cpu(S.launch_ns);
	s = lock_stream(hs, ptds);
	if (!s) {
		free(end);
		return ret(cudaErrorInvalidResourceHandle);
	}
	if (s->capture || capture_breaks_legacy(s)) {
		s->capture_invalid |= s->capture != NULL;
		unlock();
		free(end);
		return ret(s->legacy ? cudaErrorStreamCaptureImplicit : cudaErrorStreamCaptureUnsupported);
	}
	nodes = x->nodes.v;
	now = now_ns();
	base = stream_dep(s);
	for (size_t i = 0; i < x->nodes.n; i++) {
		struct graph_node *n = &nodes[i];
		uint64_t after = base;

		for (size_t k = 0; k < n->ndeps; k++)
			after = max64(after, end[n->deps[k]]);
		if (n->engine == ENG_NONE) {
			end[i] = max64(after, now);
		} else {
			uint64_t cost = n->kind == NODE_KERNEL ? kernel_cost(n->func, n->grid) : n->cost;

			end[i] = schedule_after(s, (enum engine)n->engine, cost, now, after);
		}
		node_move_bytes(n, end[i]);
		last = max64(last, end[i]);
	}
	s->ready = max64(s->ready, last);
	unlock();
	free(end);
	return cudaSuccess;
}
