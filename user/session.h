/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A session: the one place the pipeline is assembled. dl_session_new builds
 * the record stream and its sinks (the summary, the recording, the timeline,
 * the correlator), the step sinks (the live step lines, the timeline, the
 * flight recorder, the metrics), the diagnosis and the output files, from
 * the command line; records go in (dl_session_feed, a replay, or the live
 * collector writing into dl_session_stream), dl_session_finish closes the
 * steps and diagnoses, dl_session_report writes the report and every file.
 *
 * A live run, `record`, `report` and each rank of a multi-rank report
 * (multirank.h: one session per rank, merged by one merger) are sessions.
 */
#ifndef DLBPF_SESSION_H
#define DLBPF_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "dlbpf/events.h"

/* Named only: this header wires the stages and includes none of them (tests/unit/test_layout.py). */
struct dl_config;
struct dl_correlator;
struct dl_diagnosis;
struct dl_rec;
struct dl_report_model;
struct dl_step;
struct dl_stream;
struct dl_summary;
struct dl_timeline;

/* What a live capture tells the session; every member may be NULL (a replay has none). */
struct dl_session_capture {
	/* Makes what the kernel holds visible in the summary (the low-overhead modes). */
	void (*sync)(void *ctx);
	/* The drops the kernel counted so far, and the programs' recursion misses. */
	void (*drops)(void *ctx, uint64_t drops[DL_DROP_MAX], uint64_t *recursion_misses);
	/* The mode's own part of the text report, after the steps. */
	void (*report)(void *ctx, FILE *out);
	void *ctx;
};

struct dl_session_opts {
	const struct dl_config *cfg;
	/* One rank of a multi-rank report: no files, no step lines, no recording (the merger writes). */
	bool rank;
	/* One more record sink, after the others, and one more step sink (NULL: none). */
	int (*rec_sink)(void *ctx, const struct dl_rec *r);
	void (*step_sink)(void *ctx, const struct dl_step *st);
	void *sink_ctx;
	/* --overhead-budget: whether a span of time was observed with every probe on (NULL: always). */
	bool (*observed)(void *ctx, uint64_t start_ns, uint64_t end_ns);
	void *observed_ctx;
	struct dl_session_capture capture;
	const volatile sig_atomic_t *stop;   /* a replay stops between records */
};

struct dl_session;

/* Opens what cfg asks for (an unwritable path fails first, said); NULL with *err. */
struct dl_session *dl_session_new(const struct dl_session_opts *o, int *err);
/* One record as it was read: checked, decoded, resolved, handed to every sink. 0, or 1 when malformed. */
int dl_session_feed(struct dl_session *s, const void *data, size_t len);
/* Replays the recording cfg names (report); 0, or -EINVAL (said); a cut or stopped replay is said. */
int dl_session_replay(struct dl_session *s);
/* Where the live collector writes (capture/collector.h), and what the modes fill (capture/aggregate.h). */
struct dl_stream *dl_session_stream(struct dl_session *s);
struct dl_summary *dl_session_summary(struct dl_session *s);
const struct dl_correlator *dl_session_correlator(const struct dl_session *s);
const struct dl_diagnosis *dl_session_diagnosis(const struct dl_session *s);
/* The report model (output/model.h), once dl_session_finish has built it. */
const struct dl_report_model *dl_session_model(const struct dl_session *s);
/* --metrics: what the summary knows now (last: the run is over). */
void dl_session_publish(struct dl_session *s, bool last);
/* After each drain: a scrape answered, the flight recorder's triggers (dump: SIGUSR1), the recording flushed. */
void dl_session_tick(struct dl_session *s, uint64_t now_ns, bool dump);
/*
 * End of the records: the recording closed, the steps finished, the diagnosis made. 0, or -errno (said)
 * when the recording or a flight-recorder dump failed; the model is built all the same, and
 * dl_session_report still writes the report and every other file (and returns that error too).
 */
int dl_session_finish(struct dl_session *s);
/* The text report to out, then every file put in place; 0, or -EIO when one failed (said). */
int dl_session_report(struct dl_session *s, FILE *out);
/* Records the stream refused as malformed. */
uint64_t dl_session_malformed(const struct dl_session *s);
/* Whether a signal stopped the replay: the report is of part of the recording. */
bool dl_session_replay_stopped(const struct dl_session *s);
/* Frees it; what is still open is removed (a failed run). */
void dl_session_free(struct dl_session *s);

/* The one timeline of a multi-rank report (cfg's -o) on rank 0's clocks; NULL when it cannot be written (said). */
struct dl_timeline *dl_session_ranks_timeline(const struct dl_config *cfg, uint64_t mono_ns, uint64_t boot_ns,
					      uint64_t real_ns);

#endif
