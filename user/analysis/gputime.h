/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The inferred device timeline of one step: where each stream may have held
 * work, where that was certain, and the idle rest split by what the main
 * thread did (steps.h, enum dl_idle). Pure: made of the device-queue model's
 * spans and the breakdown's inputs, so a replay draws the same.
 */
#ifndef DLBPF_GPUTIME_H
#define DLBPF_GPUTIME_H

#include <stddef.h>
#include <stdint.h>
#include "analysis/breakdown.h"
#include "analysis/devqueue.h"
#include "analysis/steps.h"

struct dl_gpu_input {
	uint64_t start, end;
	const struct dl_span *streams;   /* dl_devq_stream_spans: kind = stream index, sorted by stream then start */
	size_t nstreams;
	const uint64_t *keys;            /* stream index -> the model's stream key */
	const struct dl_span *lower;     /* dl_devq_lower_spans: a host thread blocked on outstanding work */
	size_t nlower;
	const struct dl_span *blocking;  /* the main thread's blocking CUDA calls (dl_devq_blocking) */
	size_t nblocking;
	const struct dl_span *cuda;      /* the main thread's CUDA pieces, as the breakdown's */
	size_t ncuda;
	const struct dl_span *sched;     /* its scheduler states, as the breakdown's */
	size_t nsched;
	const struct dl_devq_open *opens;   /* dl_devq_opens: drawn as DL_GS_ENQUEUE */
	size_t nopens;
};

/*
 * Fills idle so that it sums to (end - start) less the union of the stream
 * spans in [start, end) exactly; returns the spans drawn (*out allocated,
 * sorted by start). A stream's span is certain (DL_GS_BUSY) where a host
 * thread was blocked on outstanding work and no other stream may have held
 * any: then the work that ran was that stream's.
 */
size_t dl_gpu_timeline(const struct dl_gpu_input *in, uint64_t idle[DL_IDLE_COUNT], struct dl_gpu_span **out);

#endif
