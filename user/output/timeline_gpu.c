// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "output/timeline_gpu.h"
#include "util.h"

/* Tracks per process (the idle one and streams): a framework makes a handful of streams; past this they go undrawn. */
#define MAX_GPU_TRACKS 32
#define MAX_TRACKS 1024               /* of all processes */
#define KEY_LEGACY 1ull               /* analysis/devqueue.c's stream keys */
#define KEY_PER_THREAD (1ull << 63)

struct gtrack {
	pid_t pid;
	uint64_t stream;                  /* 0: the idle track */
	struct dl_ttrack track;
	char name[64];
};

struct dl_tgpu {
	/* Allocated one by one: a writer may keep a track's name pointer. */
	struct gtrack *tracks[MAX_TRACKS];
	size_t n;
};

struct dl_tgpu *dl_tgpu_new(void)
{
	return dl_xcalloc(1, sizeof(struct dl_tgpu));
}

void dl_tgpu_free(struct dl_tgpu *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n; i++)
		free(g->tracks[i]);
	free(g);
}

static void name_track(struct gtrack *t)
{
	if (!t->stream)
		snprintf(t->name, sizeof(t->name), "GPU idle (inferred)");
	else if (t->stream == KEY_LEGACY)
		snprintf(t->name, sizeof(t->name), "GPU (inferred) legacy stream");
	else if (t->stream & KEY_PER_THREAD)
		snprintf(t->name, sizeof(t->name), "GPU (inferred) per-thread stream of %" PRIu64,
			 (uint64_t)(t->stream & ~KEY_PER_THREAD));
	else
		snprintf(t->name, sizeof(t->name), "GPU (inferred) stream 0x%" PRIx64, t->stream);
}

static const struct dl_ttrack *track_of(struct dl_tgpu *g, struct dl_tcanvas *cv, const struct dl_ttrack *proc,
					pid_t pid, uint64_t stream)
{
	size_t mine = 0;
	struct gtrack *t;

	for (size_t i = 0; i < g->n; i++) {
		if (g->tracks[i]->pid != pid)
			continue;
		if (g->tracks[i]->stream == stream)
			return &g->tracks[i]->track;
		mine++;
	}
	if (mine >= MAX_GPU_TRACKS || g->n >= sizeof(g->tracks) / sizeof(g->tracks[0]))
		return NULL;
	t = dl_xcalloc(1, sizeof(*t));
	t->pid = pid;
	t->stream = stream;
	name_track(t);
	/* Below the steps track's pseudo tid, one per track of the process. */
	t->track = (struct dl_ttrack){ .uuid = dl_tcanvas_uuid(cv), .parent = proc->uuid, .kind = DL_TT_PLAIN,
				       .pid = pid, .tid = (pid_t)(DL_TGPU_TID_TOP - mine), .name = t->name };
	g->tracks[g->n++] = t;
	dl_tcanvas_track(cv, &t->track);
	return &t->track;
}

/* The mark on the stream's track binds to the slice that begins there: the span the call's work opened. */
static void enqueue_flow(struct dl_tgpu *g, struct dl_tcanvas *cv, const struct dl_ttrack *proc, pid_t pid,
			 const struct dl_gpu_span *sp)
{
	const struct dl_ttrack *th = dl_tcanvas_thread(cv, pid, (pid_t)sp->tid);
	const struct dl_ttrack *tr = track_of(g, cv, proc, pid, sp->stream);
	uint64_t flow;

	if (!th || !tr)
		return;
	flow = dl_tcanvas_flow(cv);
	cv->out->flow_mark(cv->out, th, sp->start, "enqueue", flow, 0);
	cv->out->flow_mark(cv->out, tr, sp->start, "enqueue", flow, 1);
}

void dl_tgpu_step(struct dl_tgpu *g, struct dl_tcanvas *cv, const struct dl_ttrack *proc,
		  const struct dl_step *s)
{
	for (uint32_t i = 0; i < s->ngpu_spans; i++) {
		const struct dl_gpu_span *sp = &s->gpu_spans[i];
		bool idle = sp->kind == DL_GS_IDLE;

		if (sp->kind == DL_GS_ENQUEUE) {
			enqueue_flow(g, cv, proc, s->pid, sp);
			continue;
		}
		const struct dl_ttrack *tr = track_of(g, cv, proc, s->pid, idle ? 0 : sp->stream);
		struct dl_targ a[2] = { { .name = idle ? "while" : "certain", .type = idle ? DL_TA_STR : DL_TA_BOOL } };

		if (!tr)
			continue;
		if (idle)
			a[0].s = dl_idle_name((enum dl_idle)sp->idle);
		else
			a[0].u = sp->kind == DL_GS_BUSY;
		a[1] = (struct dl_targ){ .name = "step", .type = DL_TA_U64, .u = s->index };
		dl_tcanvas_slice(cv, &(struct dl_tslice){
			.track = tr, .ts = sp->start, .dur = sp->end - sp->start, .cat = "gpu (inferred)",
			.name = idle ? dl_idle_name((enum dl_idle)sp->idle) : sp->kind == DL_GS_BUSY ? "busy" : "maybe busy",
			.args = a, .nargs = 2 });
	}
}
