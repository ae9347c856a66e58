// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/ranks.h"
#include "analysis/summary.h"
#include "log.h"
#include "outfile.h"
#include "output/json.h"
#include "output/ranks.h"
#include "output/report.h"
#include "output/report_diag.h"
#include "records/record.h"
#include "util.h"
#include "version.h"

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
	struct dl_stream stream;
	struct dl_summary sum;
	struct dl_correlator *corr;
	struct dl_diagnosis *diag;
	int64_t offset;              /* onto rank 0's CLOCK_MONOTONIC */
	struct dl_rank_steps steps;
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
	/* Told while the record the timeline got last passes: held until the next, as for one recording. */
	s.closed_at = k->all->seq;
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
	in->handoff_ns = shifted(in->handoff_ns, k->offset);
	in->since_ns = shifted(in->since_ns, k->offset);
	for (uint32_t i = 0; i < in->nchain; i++) {
		in->chain[i].pid = dl_timeline_rank_id(k->index, in->chain[i].pid);
		in->chain[i].tid = dl_timeline_rank_id(k->index, in->chain[i].tid);
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

static int open_ranks(struct ranks *a, const struct dl_ranks_opts *o)
{
	if (o->n > DL_TIMELINE_MAX_RANKS) {
		dl_err("%zu recordings: report takes at most %d ranks", o->n, DL_TIMELINE_MAX_RANKS);
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
		struct dl_rec_in in;

		for (size_t i = 0; i < a->n; i++) {
			struct rank *k = &a->r[i];

			if (k->head && (!next || (int64_t)k->head->ts + k->offset < (int64_t)next->head->ts + next->offset))
				next = k;
		}
		if (!next)
			break;
		if (dl_stream_read(&next->stream, &in, next->head, next->head->size) == 0)
			dl_stream_put(&next->stream, &in);
		advance(next, stop);
	}
}

/* Ranks of one job ran together: spans on the common clock that never meet are not one job's. */
static int check_overlap(const struct ranks *a)
{
	for (size_t i = 1; i < a->n; i++) {
		const struct rank *x = &a->r[0], *y = &a->r[i];
		uint64_t xs = x->sum.start_ts ? x->sum.start_ts : x->sum.first_ts, ys = y->sum.start_ts ? y->sum.start_ts : y->sum.first_ts;
		uint64_t xe = xs + dl_summary_duration(&x->sum), ye = ys + dl_summary_duration(&y->sum);

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

static void rank_totals(struct rank *k)
{
	struct dl_step_stats st;

	dl_corr_stats(k->corr, NULL, &st);
	k->steps = (struct dl_rank_steps){ .steps = st.sum.n, .dur_ns = st.sum.dur_ns,
					   .comm_wait_ns = st.sum.cat_ns[DL_CAT_COMM_WAIT] };
	dl_fold_free(&st.sum);
}

static void report_text(FILE *f, const struct ranks *a, const struct dl_straggler *sg, const struct dl_finding *sf)
{
	for (size_t i = 0; i < a->n; i++) {
		const struct rank *k = &a->r[i];

		fprintf(f, "%s=== rank %zu: %s (host %.64s, clock %+.3f ms from rank 0's) ===\n", i ? "\n" : "", i,
			k->path, k->hdr.host, (double)k->offset / 1e6);
		dl_report_text(f, &k->sum);
		dl_report_steps_text(f, k->corr, k->diag);
		dl_report_kdur_text(f, &k->sum, k->corr);
	}
	fprintf(f, "\n=== %zu ranks ===\n", a->n);
	fprintf(f, "  %-5s %8s %12s %17s %19s  %s\n", "rank", "steps", "step ms", "compute ms/step", "comm_wait ms/step",
		"verdict");
	for (size_t i = 0; i < a->n; i++) {
		const struct rank *k = &a->r[i];

		fprintf(f, "  %-5zu %8" PRIu64 " %12.3f %17.3f %19.3f  %s\n", i, k->steps.steps,
			k->steps.steps ? (double)k->steps.dur_ns / (double)k->steps.steps / 1e6 : 0.0,
			dl_rank_compute_per_step(&k->steps) / 1e6, dl_rank_comm_wait_per_step(&k->steps) / 1e6,
			k->diag->nsteps ? dl_verdict_name(k->diag->verdict) : "-");
	}
	if (sg->rank >= 0)
		fprintf(f, "\n  [straggler] %s\n", sf->message);
	else if (sg->compute_ns > 0)
		fprintf(f, "\n  no straggler: the rank computing most per step does %.2fx the next (a straggler: %.1fx, "
			"with the others waiting on collectives %.0f%% of their steps or more)\n", sg->ratio,
			DL_STRAGGLER_RATIO, 100 * DL_STRAGGLER_WAIT_SHARE);
}

static void json_rank(struct dl_json *j, const struct rank *k)
{
	dl_json_obj_begin(j);
	dl_json_ki64(j, "rank", k->index);
	dl_json_kstr(j, "recording", k->path);
	dl_json_kstr(j, "host", k->hdr.host);
	dl_json_key(j, "clock");
	dl_json_obj_begin(j);
	dl_json_ku64(j, "monotonic_ns", k->hdr.mono_ns);
	dl_json_ku64(j, "realtime_ns", k->hdr.real_ns);
	dl_json_ki64(j, "offset_ns", k->offset);
	dl_json_obj_end(j);
	dl_json_ku64(j, "duration_ns", dl_summary_duration(&k->sum));
	dl_json_ku64(j, "steps", k->steps.steps);
	dl_json_ku64(j, "steps_ns", k->steps.dur_ns);
	dl_json_ku64(j, "comm_wait_ns", k->steps.comm_wait_ns);
	dl_json_key(j, "compute_ns_per_step");
	dl_json_double(j, dl_rank_compute_per_step(&k->steps));
	dl_json_key(j, "comm_wait_ns_per_step");
	dl_json_double(j, dl_rank_comm_wait_per_step(&k->steps));
	dl_json_key(j, "diagnosis");
	dl_report_diagnosis_json(j, k->diag);
	dl_json_obj_end(j);
}

/* The drop counters of every rank, added up: what the job lost. */
static void json_drops(struct dl_json *j, const struct ranks *a)
{
	uint64_t total = 0, misses = 0;

	dl_json_key(j, "drops");
	dl_json_obj_begin(j);
	for (size_t i = 0; i < a->n; i++) {
		total += a->r[i].sum.drops_total;
		misses += a->r[i].sum.recursion_misses;
	}
	dl_json_ku64(j, "events", total);
	for (int d = 0; d < DL_DROP_MAX; d++) {
		uint64_t v = 0;

		if (!dl_drop_name(d))
			continue;
		for (size_t i = 0; i < a->n; i++)
			v += a->r[i].sum.drops[d];
		dl_json_ku64(j, dl_drop_name(d), v);
	}
	dl_json_ku64(j, "recursion_misses", misses);
	dl_json_key(j, "recursion_misses_by_program");
	dl_json_obj_begin(j);
	for (size_t i = 0; i < a->n; i++) {
		const struct dl_summary *s = &a->r[i].sum;

		for (size_t p = 0; p < s->prog_misses.n; p++) {
			uint64_t v = 0;
			bool seen = false;

			/* One key per program: its first rank's entry says the sum of all. */
			for (size_t e = 0; e < a->n && !seen; e++)
				for (size_t q = 0; q < a->r[e].sum.prog_misses.n && !seen; q++)
					seen = (e < i || (e == i && q < p)) &&
					       !strcmp(a->r[e].sum.prog_misses.v[q].name, s->prog_misses.v[p].name);
			if (seen)
				continue;
			for (size_t e = 0; e < a->n; e++)
				for (size_t q = 0; q < a->r[e].sum.prog_misses.n; q++)
					if (!strcmp(a->r[e].sum.prog_misses.v[q].name, s->prog_misses.v[p].name))
						v += a->r[e].sum.prog_misses.v[q].misses;
			dl_json_ku64(j, s->prog_misses.v[p].name, v);
		}
	}
	dl_json_obj_end(j);
	dl_json_obj_end(j);
}

static int report_json(FILE *f, const struct ranks *a, const struct dl_finding *sf, int straggler)
{
	struct dl_json j;
	uint64_t start = UINT64_MAX, end = 0, abytes = 0, aops = 0, aunseen = 0;

	for (size_t i = 0; i < a->n; i++) {
		const struct dl_summary *s = &a->r[i].sum;
		uint64_t st = shifted(s->start_ts ? s->start_ts : s->first_ts, a->r[i].offset);

		start = st < start ? st : start;
		end = st + dl_summary_duration(s) > end ? st + dl_summary_duration(s) : end;
		abytes += s->async_io_bytes;
		aops += s->async_io_ops;
		aunseen += s->async_io_unseen;
	}
	dl_json_init(&j, f);
	dl_json_obj_begin(&j);
	dl_json_ku64(&j, "schema", 1);
	dl_json_kstr(&j, "version", DLBPF_VERSION);
	dl_json_ku64(&j, "duration_ns", end > start ? end - start : 0);
	json_drops(&j, a);
	dl_json_key(&j, "async_io");
	dl_json_obj_begin(&j);
	dl_json_ku64(&j, "bytes", abytes);
	dl_json_ku64(&j, "ops", aops);
	dl_json_ku64(&j, "unseen_ops", aunseen);
	dl_json_obj_end(&j);
	dl_json_key(&j, "processes");
	dl_json_arr_begin(&j);
	for (size_t i = 0; i < a->n; i++)
		dl_report_json_procs(&j, &a->r[i].sum, a->r[i].corr, (int)i);
	dl_json_arr_end(&j);
	dl_json_key(&j, "steps");
	dl_json_arr_begin(&j);
	for (size_t i = 0; i < a->n; i++)
		dl_report_steps_items(&j, a->r[i].corr, &a->r[i].sum, (int)i);
	dl_json_arr_end(&j);
	dl_json_key(&j, "step_markers");
	dl_json_arr_begin(&j);
	for (size_t i = 0; i < a->n; i++)
		dl_report_markers_items(&j, a->r[i].corr, (int)i);
	dl_json_arr_end(&j);
	/* The job has no one verdict (each rank's is in ranks[]): its findings, the straggler's first. */
	dl_json_key(&j, "diagnosis");
	dl_json_obj_begin(&j);
	dl_json_key(&j, "findings");
	dl_json_arr_begin(&j);
	if (straggler >= 0)
		dl_report_finding_json(&j, sf, straggler);
	for (size_t i = 0; i < a->n; i++)
		for (int x = 0; x < a->r[i].diag->nfindings; x++)
			dl_report_finding_json(&j, &a->r[i].diag->findings[x], (int)i);
	dl_json_arr_end(&j);
	dl_json_obj_end(&j);
	dl_json_key(&j, "ranks");
	dl_json_arr_begin(&j);
	for (size_t i = 0; i < a->n; i++)
		json_rank(&j, &a->r[i]);
	dl_json_arr_end(&j);
	dl_json_obj_end(&j);
	fputc('\n', f);
	if (fflush(f) || ferror(f))
		return -(errno ? errno : EIO);
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
		if (k->stream.malformed)
			dl_warn("rank %zu: %" PRIu64 " malformed records ignored", i, k->stream.malformed);
	}
	return !code && stop && *stop ? 128 + *stop : code;
}

static void free_ranks(struct ranks *a)
{
	for (size_t i = 0; i < a->n; i++) {
		struct rank *k = &a->r[i];

		dl_replay_close(k->rd);
		dl_corr_free(k->corr);
		free(k->diag);
		dl_summary_free(&k->sum);
		dl_stream_free(&k->stream);
	}
	free(a->r);
	free(a);
}

int dl_ranks_report(const struct dl_ranks_opts *o, FILE *out)
{
	struct ranks *a = dl_xcalloc(1, sizeof(*a));
	struct dl_outfile json = { 0 };
	struct dl_straggler sg;
	struct dl_finding sf;
	int code = 1, err;

	a->n = o->n;
	a->r = dl_xcalloc(o->n, sizeof(*a->r));
	for (size_t i = 0; i < a->n; i++)
		a->r[i] = (struct rank){ .index = (int)i, .path = o->paths[i], .all = a };
	if (open_ranks(a, o))
		goto out;
	if (o->json_path && (err = dl_outfile_open(&json, o->json_path))) {
		dl_err("cannot write the JSON summary to %s: %s", o->json_path, strerror(-err));
		goto out;
	}
	if (o->timeline_path) {
		a->trace = dl_timeline_open(o->timeline_path, o->timeline_format, &err);
		if (!a->trace) {
			dl_err("cannot write the trace to %s: %s", o->timeline_path, strerror(-err));
			goto out;
		}
		/* Rank 0's clocks are the timeline's: every other rank is moved onto them. */
		dl_timeline_set_clocks(a->trace, a->r[0].hdr.mono_ns, a->r[0].hdr.boot_ns, a->r[0].hdr.real_ns);
	}
	for (size_t i = 0; i < a->n; i++) {
		struct rank *k = &a->r[i];

		k->diag = dl_xcalloc(1, sizeof(*k->diag));
		dl_summary_init(&k->sum);
		dl_stream_add(&k->stream, dl_summary_sink, &k->sum);
		if (a->trace)
			dl_stream_add(&k->stream, to_timeline, k);
		k->corr = dl_corr_new(&o->corr, a->trace ? step_to_timeline : NULL, k);
		dl_stream_add(&k->stream, dl_corr_sink, k->corr);
	}
	replay_merged(a, o->stop);
	code = replay_outcome(a, o->stop);
	if (code == 1)
		goto out;
	for (size_t i = 0; i < a->n; i++) {
		dl_corr_finish(a->r[i].corr);
		dl_diagnose(a->r[i].corr, &a->r[i].sum, &o->diag, a->r[i].diag);
		rank_totals(&a->r[i]);
	}
	if (check_overlap(a)) {
		code = 1;
		goto out;
	}
	{
		struct dl_rank_steps *st = dl_xcalloc(a->n, sizeof(*st));

		for (size_t i = 0; i < a->n; i++)
			st[i] = a->r[i].steps;
		dl_find_straggler(st, a->n, &sg);
		free(st);
	}
	dl_straggler_finding(&sg, a->n, &sf);
	report_text(out, a, &sg, &sf);
	fflush(out);
	if (json.f) {
		err = report_json(json.f, a, &sf, sg.rank);
		err = err ? err : dl_outfile_commit(&json);
		if (err) {
			dl_err("writing the JSON summary to %s failed: %s; it is not written", o->json_path, strerror(-err));
			code = 1;
		}
	}
	if (a->trace) {
		err = dl_timeline_close(a->trace, NULL);
		a->trace = NULL;
		if (err) {
			dl_err("writing the trace to %s failed: %s; it is not written", o->timeline_path, strerror(-err));
			code = 1;
		}
	}
out:
	dl_outfile_abort(&json);
	if (a->trace)
		dl_timeline_discard(a->trace);
	free_ranks(a);
	return code;
}
