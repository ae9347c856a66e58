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

/* JSON: the device tracks' tids count down from here (the timeline's own plain tracks are above). */
#define DL_TGPU_TID_TOP (DL_TPSEUDO_TID - 2)

struct dl_tgpu *dl_tgpu_new(void);
/*
 * Draws the step's device timeline (step->gpu_spans) under the process track
 * proc, with a flow from each call that began a stream's span to that span.
 */
void dl_tgpu_step(struct dl_tgpu *g, struct dl_tcanvas *cv, const struct dl_ttrack *proc,
		  const struct dl_step *step);
void dl_tgpu_free(struct dl_tgpu *g);

#endif
