/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The correlator wired as the session wires it, for the unit tests that feed
 * it synthetic streams: a stream whose records reach a summary (optional),
 * the correlator, and then the step stage that hands each closed step to fn.
 */
#ifndef DLBPF_TEST_PIPELINE_H
#define DLBPF_TEST_PIPELINE_H

#include "analysis/correlate.h"
#include "analysis/summary.h"
#include "records/stream.h"

/* st and stage are the caller's (zeroed); sum may be NULL. The correlator is the caller's to free. */
static inline struct dl_correlator *test_pipeline(struct dl_stream *st, struct dl_summary *sum,
						  struct dl_step_stage *stage, const struct dl_corr_opts *o,
						  dl_step_fn fn, void *ctx)
{
	struct dl_correlator *c = dl_corr_new(o);

	*stage = (struct dl_step_stage){ .corr = c, .fn = fn, .ctx = ctx };
	if (sum) {
		dl_summary_init(sum);
		dl_stream_add(st, dl_summary_sink, sum);
	}
	dl_stream_add(st, dl_corr_sink, c);
	dl_stream_add(st, dl_step_stage_sink, stage);
	dl_emit_trace_start(st, 1, 0);
	return c;
}

#endif
