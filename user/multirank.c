// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/ranks.h"
#include "analysis/summary.h"
#include "cli.h"
#include "log.h"
#include "multirank.h"
#include "outfile.h"
#include "output/ranks.h"
#include "output/timeline.h"
#include "records/record.h"
#include "session.h"
#include "util.h"

struct ranks;

struct rank {
	int index;
	const char *path;
	struct ranks *all;
	struct dl_rec_header hdr;
	struct dl_replayer *rd;
	const struct dl_hdr *head;   /* its next record, read and not yet replayed; NULL at its end */
	int stopped;                 /* dl_replay_next's last answer */
	char err[512];
	struct dl_session *s;
	int64_t offset;              /* onto rank 0's CLOCK_MONOTONIC */
};

struct ranks {
	struct rank *r;
	size_t n;
	struct dl_timeline *trace;
	uint64_t seq;                /* records given to the timeline, from every rank */
	union {
		struct dl_hdr h;
		uint64_t align;
		unsigned char b[1u << 16];   /* a record's size is a u16 */
	} rec;
};

static uint64_t shifted(uint64_t ts, int64_t by)
{
	return ts ? (uint64_t)((int64_t)ts + by) : 0;
}

/* A rank's record, moved onto the common clock and the rank's id range, to the one timeline. */
static int to_timeline(void *ctx, const struct dl_rec *r)
{
	struct rank *k = ctx;
	struct ranks *a = k->all;
	struct dl_call call;
	struct dl_rec out = { .h = &a->rec.h, .seq = ++a->seq };

	memcpy(a->rec.b, r->h, r->h->size);
	a->rec.h.ts = shifted(a->rec.h.ts, k->offset);
	a->rec.h.tgid = dl_timeline_rank_id(k->index, a->rec.h.tgid);
	a->rec.h.tid = dl_timeline_rank_id(k->index, a->rec.h.tid);
	if (r->call) {
		call = *r->call;
		call.ts = shifted(call.ts, k->offset);
		call.tgid = dl_timeline_rank_id(k->index, call.tgid);
		call.tid = dl_timeline_rank_id(k->index, call.tid);
		out.call = &call;
	}
	return dl_timeline_sink(a->trace, &out);
}

static void step_to_timeline(void *ctx, const struct dl_step *st)
{
	struct rank *k = ctx;
	struct dl_step s = *st;
	struct dl_gpu_span *spans = NULL;
	struct dl_step_lineage *in = &s.input;

	s.start_ns = shifted(s.start_ns, k->offset);
	s.pid = (pid_t)dl_timeline_rank_id(k->index, (uint32_t)s.pid);
	s.tid = (pid_t)dl_timeline_rank_id(k->index, (uint32_t)s.tid);
	if (st->ngpu_spans) {
		spans = dl_xcalloc(st->ngpu_spans, sizeof(*spans));
		for (uint32_t i = 0; i < st->ngpu_spans; i++) {
			spans[i] = st->gpu_spans[i];
			spans[i].start = shifted(spans[i].start, k->offset);
			spans[i].end = shifted(spans[i].end, k->offset);
			spans[i].tid = dl_timeline_rank_id(k->index, spans[i].tid);
		}
		s.gpu_spans = spans;
	}
	in->waker_pid = dl_timeline_rank_id(k->index, in->waker_pid);
	in->waker_tid = dl_timeline_rank_id(k->index, in->waker_tid);
	in->producer_tid = dl_timeline_rank_id(k->index, in->producer_tid);
	in->handoff_ns = shifted(in->handoff_ns, k->offset);
	in->since_ns = shifted(in->since_ns, k->offset);
	for (uint32_t i = 0; i < in->nchain; i++) {
		in->chain[i].pid = dl_timeline_rank_id(k->index, in->chain[i].pid);
		in->chain[i].tid = dl_timeline_rank_id(k->index, in->chain[i].tid);
		in->chain[i].waker_tid = dl_timeline_rank_id(k->index, in->chain[i].waker_tid);
		in->chain[i].handoff_ns = shifted(in->chain[i].handoff_ns, k->offset);
		in->chain[i].since_ns = shifted(in->chain[i].since_ns, k->offset);
	}
	dl_timeline_step(k->all->trace, &s);
	free(spans);
}

/* Two names of one recording, or two copies of it (one clock reading, on one host), are one rank twice. */
static int refuse_twice(const struct ranks *a)
{
	for (size_t i = 0; i < a->n; i++) {
		struct dl_fileref fi, fk;

		for (size_t k = i + 1; k < a->n; k++) {
			const struct dl_rec_header *x = &a->r[i].hdr, *y = &a->r[k].hdr;

			if ((dl_input_id(a->r[i].path, &fi) == 0 && dl_input_id(a->r[k].path, &fk) == 0 &&
			     dl_fileref_clash(&fi, &fk)) ||
			    (x->mono_ns == y->mono_ns && x->real_ns == y->real_ns &&
			     !strncmp(x->host, y->host, sizeof(x->host)))) {
				dl_err("%s and %s are the same recording: give each rank's recording once", a->r[i].path,
				       a->r[k].path);
				return -1;
			}
		}
	}
	return 0;
}

static int open_ranks(struct ranks *a)
{
	if (a->n > DL_TIMELINE_MAX_RANKS) {
		dl_err("%zu recordings: report takes at most %d ranks", a->n, DL_TIMELINE_MAX_RANKS);
		return -1;
	}
	for (size_t i = 0; i < a->n; i++) {
		struct rank *k = &a->r[i];

		k->rd = dl_replay_open(k->path, &k->hdr, k->err, sizeof(k->err));
		if (!k->rd) {
			dl_err("rank %zu: %s", i, k->err);
			return -1;
		}
		if (!dl_rank_clock_valid(&(struct dl_rank_clock){ k->hdr.mono_ns, k->hdr.real_ns })) {
			dl_err("rank %zu: %s has no clock snapshot (CLOCK_MONOTONIC %" PRIu64 ", CLOCK_REALTIME %" PRIu64
			       "): its times cannot be aligned with the other ranks'", i, k->path, k->hdr.mono_ns,
			       k->hdr.real_ns);
			return -1;
		}
	}
	if (refuse_twice(a))
		return -1;
	for (size_t i = 0; i < a->n; i++)
		a->r[i].offset = dl_rank_offset(&(struct dl_rank_clock){ a->r[0].hdr.mono_ns, a->r[0].hdr.real_ns },
						&(struct dl_rank_clock){ a->r[i].hdr.mono_ns, a->r[i].hdr.real_ns });
	return 0;
}

static void advance(struct rank *k, const volatile sig_atomic_t *stop)
{
	k->stopped = dl_replay_next(k->rd, stop, &k->head, k->err, sizeof(k->err));
	if (k->stopped != 1)
		k->head = NULL;
}

/*
 * Every rank's records in the order of their times on rank 0's clock: each
 * rank's own order kept (a record that completes late comes where its rank
 * wrote it), the ranks interleaved by their next record's time.
 */
static void replay_merged(struct ranks *a, const volatile sig_atomic_t *stop)
{
	for (size_t i = 0; i < a->n; i++)
		advance(&a->r[i], stop);
	for (;;) {
		struct rank *next = NULL;

		for (size_t i = 0; i < a->n; i++) {
			struct rank *k = &a->r[i];

			if (k->head && (!next || (int64_t)k->head->ts + k->offset < (int64_t)next->head->ts + next->offset))
				next = k;
		}
		if (!next)
			break;
		dl_session_feed(next->s, next->head, next->head->size);
		advance(next, stop);
	}
}

/* Ranks of one job ran together: spans on the common clock that never meet are not one job's. */
static int check_overlap(const struct ranks *a)
{
	for (size_t i = 1; i < a->n; i++) {
		const struct rank *x = &a->r[0], *y = &a->r[i];
		const struct dl_report_model *xm = dl_session_model(x->s), *ym = dl_session_model(y->s);
		uint64_t xs = xm->start_ns, ys = ym->start_ns;
		uint64_t xe = xs + xm->duration_ns, ye = ys + ym->duration_ns;

		if (!dl_rank_spans_meet(xs, xe, shifted(ys, y->offset), shifted(ye, y->offset))) {
			dl_err("the clocks cannot align %s with %s: on CLOCK_REALTIME rank %zu was recorded %.3f s %s "
			       "rank 0's recording (%.3f s long) and the two never overlap; give recordings of one run",
			       y->path, x->path, i,
			       (double)(shifted(ys, y->offset) > xs ? shifted(ys, y->offset) - xs
								     : xs - shifted(ys, y->offset)) / 1e9,
			       shifted(ys, y->offset) > xs ? "after the start of" : "before the start of",
			       (double)(xe - xs) / 1e9);
			return -1;
		}
	}
	return 0;
}

/* Each rank's replay, said as report says it of one recording; the exit status so far. */
static int replay_outcome(const struct ranks *a, const volatile sig_atomic_t *stop)
{
	int code = 0;

	for (size_t i = 0; i < a->n; i++) {
		const struct rank *k = &a->r[i];

		if (k->stopped == -2) {
			dl_err("rank %zu: %s", i, k->err);
			code = 1;
		} else if (k->stopped == -1) {
			dl_warn("rank %zu: %s", i, k->err);
		}
		if (dl_session_malformed(k->s))
			dl_warn("rank %zu: %" PRIu64 " malformed records ignored", i, dl_session_malformed(k->s));
	}
	return !code && stop && *stop ? 128 + *stop : code;
}

static void free_ranks(struct ranks *a)
{
	for (size_t i = 0; i < a->n; i++) {
		dl_replay_close(a->r[i].rd);
		dl_session_free(a->r[i].s);
	}
	free(a->r);
	free(a);
}

/* Each rank's session: its records to the one timeline, moved onto rank 0's clock, and its steps. */
static int open_sessions(struct ranks *a, const struct dl_config *cfg, const volatile sig_atomic_t *stop)
{
	for (size_t i = 0; i < a->n; i++) {
		struct rank *k = &a->r[i];
		struct dl_session_opts so = { .cfg = cfg, .rank = true, .sink_ctx = k, .stop = stop };
		int err;

		if (a->trace)
			so.rec_sink = to_timeline, so.step_sink = step_to_timeline;
		k->s = dl_session_new(&so, &err);
		if (!k->s)
			return err;
	}
	return 0;
}

int dl_multirank_report(const struct dl_config *cfg, const volatile sig_atomic_t *stop, FILE *out)
{
	struct ranks *a = dl_xcalloc(1, sizeof(*a));
	struct dl_rank_view *v = NULL;
	struct dl_outfile json = { 0 };
	const char *json_path = cfg->json_path, *timeline_path = cfg->timeline_path;
	struct dl_straggler sg;
	struct dl_finding sf;
	int code = 1, err;

	a->n = (size_t)cfg->ninputs;
	a->r = dl_xcalloc(a->n, sizeof(*a->r));
	for (size_t i = 0; i < a->n; i++)
		a->r[i] = (struct rank){ .index = (int)i, .path = cfg->inputs[i], .all = a };
	if (open_ranks(a))
		goto out;
	if (json_path && (err = dl_outfile_open(&json, json_path))) {
		dl_err("cannot write the JSON summary to %s: %s", json_path, strerror(-err));
		goto out;
	}
	if (timeline_path && !(a->trace = dl_session_ranks_timeline(cfg, a->r[0].hdr.mono_ns, a->r[0].hdr.boot_ns,
								     a->r[0].hdr.real_ns)))
		goto out;
	if (open_sessions(a, cfg, stop))
		goto out;
	replay_merged(a, stop);
	code = replay_outcome(a, stop);
	if (code == 1)
		goto out;
	v = dl_xcalloc(a->n, sizeof(*v));
	for (size_t i = 0; i < a->n; i++) {
		struct rank *k = &a->r[i];

		dl_session_finish(k->s);
		v[i] = (struct dl_rank_view){ .index = k->index, .path = k->path, .hdr = &k->hdr, .offset = k->offset,
					      .model = dl_session_model(k->s) };
		dl_rank_steps_of(&v[i].model->all, &v[i].steps);
	}
	if (check_overlap(a)) {
		code = 1;
		goto out;
	}
	{
		struct dl_rank_steps *st = dl_xcalloc(a->n, sizeof(*st));

		for (size_t i = 0; i < a->n; i++)
			st[i] = v[i].steps;
		dl_find_straggler(st, a->n, &sg);
		free(st);
	}
	dl_straggler_finding(&sg, a->n, &sf);
	dl_ranks_text(out, v, a->n, &sg, &sf);
	fflush(out);
	if (json.f) {
		err = dl_ranks_json(json.f, v, a->n, &sf, sg.rank);
		err = err ? err : dl_outfile_commit(&json);
		if (err) {
			dl_err("writing the JSON summary to %s failed: %s; it is not written", json_path, strerror(-err));
			code = 1;
		}
	}
	if (a->trace) {
		err = dl_timeline_close(a->trace, NULL);
		a->trace = NULL;
		if (err) {
			dl_err("writing the trace to %s failed: %s; it is not written", timeline_path, strerror(-err));
			code = 1;
		}
	}
out:
	dl_outfile_abort(&json);
	if (a->trace)
		dl_timeline_discard(a->trace);
	free(v);
	free_ranks(a);
	return code;
}
