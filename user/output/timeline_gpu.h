/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The timeline's inferred device tracks (timeline.c hands it each step): per
 * process, a "GPU (inferred)" track per stream with the spans where it may
 * have held work, and a "GPU idle (inferred)" track with the idle split.
 * Internal.
 */
#ifndef DLBPF_TIMELINE_GPU_H
#define DLBPF_TIMELINE_GPU_H

#include <stdint.h>
#include "analysis/steps.h"
#include "output/timeline.h"
#include "output/timeline_writer.h"

struct dl_tgpu;

struct dl_tgpu_ctx {
	struct dl_tout *out;
	uint64_t *next_uuid;               /* the timeline's track uuids */
	struct dl_timeline_stats *st;
	uint32_t pseudo_tid;               /* JSON: the tracks' tids count down from it */
	uint64_t *next_flow;               /* the timeline's flow ids */
	/* The track of a thread's CUDA calls (where its enqueues lie); NULL: none. */
	const struct dl_ttrack *(*thread_track)(void *tl, pid_t pid, pid_t tid);
	void *tl;
};

struct dl_tgpu *dl_tgpu_new(void);
/*
 * Draws the step's device timeline (step->gpu_spans) under the process track
 * proc, with a flow from each call that began a stream's span to that span.
 */
void dl_tgpu_step(struct dl_tgpu *g, const struct dl_tgpu_ctx *ctx, const struct dl_ttrack *proc,
		  const struct dl_step *step);
void dl_tgpu_free(struct dl_tgpu *g);

#endif
