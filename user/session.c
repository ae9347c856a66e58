// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "analysis/summary.h"
#include "cli.h"
#include "flightrec.h"
#include "log.h"
#include "outfile.h"
#include "output/exporter.h"
#include "output/html.h"
#include "output/metrics.h"
#include "output/model.h"
#include "output/otlp.h"
#include "output/report.h"
#include "output/report_diag.h"
#include "output/timeline.h"
#include "records/clock.h"
#include "records/record.h"
#include "records/stream.h"
#include "session.h"
#include "util.h"

#define REC_FLUSH_NS 250000000ull  /* a killed `record` loses at most this much of the recording */

/* A run's output files (--json, --html, -o), opened before anything is traced, so an unwritable
 * path fails first; each is a temporary until complete (outfile.h), so a run that fails leaves an
 * existing file of that name as it was. */
struct dl_outputs {
	const struct dl_config *cfg;
	struct dl_outfile json, html;
	struct dl_timeline *trace;   /* -o: the timeline (records through the stream, steps after each record) */
};

/* Where closed steps go: the live lines, the timeline, the flight recorder, the metrics (NULL: not there). */
struct dl_step_sinks {
	struct dl_step_printer *printer;
	struct dl_timeline *trace;
	struct dl_flightrec *flight;
	struct dl_metrics *metrics;
	struct dl_otlp *otlp;
};

static void outputs_abort(struct dl_outputs *o);

/* A replayed timeline shows the recording's own real time: its header's clock snapshot. */
static void timeline_clocks_of(struct dl_timeline *t, const char *path)
{
	struct dl_rec_header h;
	struct stat st;
	char err[512];

	/* A pipe is read once, by dl_replay: its timeline keeps the host's clocks. */
	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return;
	if (dl_rec_header_read(path, &h, err, sizeof(err)) == 0)   /* else dl_replay says why */
		dl_timeline_set_clocks(t, h.mono_ns, h.boot_ns, h.real_ns);
}

static int open_timeline(struct dl_outputs *o)
{
	const struct dl_config *cfg = o->cfg;
	int err, fmt = cfg->timeline_format >= 0 ? cfg->timeline_format : (int)dl_timeline_format_of_path(cfg->timeline_path);

	o->trace = dl_timeline_open(cfg->timeline_path, (enum dl_timeline_format)fmt, &err);
	if (!o->trace) {
		dl_err("cannot write the trace to %s: %s", cfg->timeline_path, strerror(-err));
		return err;
	}
	if (cfg->mode == DL_MODE_REPORT)
		timeline_clocks_of(o->trace, cfg->input_path);
	return 0;
}

static int outputs_open(struct dl_outputs *o, const struct dl_config *cfg)
{
	int err;

	memset(o, 0, sizeof(*o));
	o->cfg = cfg;
	if (cfg->json_path && (err = dl_outfile_open(&o->json, cfg->json_path))) {
		dl_err("cannot write the JSON summary to %s: %s", cfg->json_path, strerror(-err));
		return err;
	}
	if (cfg->html_path && (err = dl_outfile_open(&o->html, cfg->html_path))) {
		dl_err("cannot write the HTML report to %s: %s", cfg->html_path, strerror(-err));
		outputs_abort(o);
		return err;
	}
	if (cfg->timeline_path && (err = open_timeline(o))) {
		outputs_abort(o);
		return err;
	}
	return 0;
}

/* A report file, written (err: how writing it went) and put in place, or removed. */
static int finish_output(struct dl_outfile *o, int err, const char *what, const char *path)
{
	if (err)
		dl_outfile_abort(o);
	else
		err = dl_outfile_commit(o);
	if (err) {
		dl_err("writing the %s to %s failed: %s; it is not written (a file of that name is left as it was)",
		       what, path, strerror(-err));
		return -EIO;
	}
	return 0;
}

static int close_timeline(struct dl_outputs *o)
{
	struct dl_timeline_stats ts;
	int err = dl_timeline_close(o->trace, &ts);
	const char *path = o->cfg->timeline_path;

	o->trace = NULL;
	if (err) {
		dl_err("writing the trace to %s failed: %s; it is not written (a file of that name is left as it "
		       "was)", path, strerror(-err));
		return err;
	}
	dl_info("trace: %" PRIu64 " slices, %" PRIu64 " counter samples, %" PRIu64 " events (%" PRIu64
		" out of order), %" PRIu64 " bytes in %s; at most %" PRIu64 " threads held at once", ts.slices,
		ts.counters, ts.events, ts.late, ts.bytes, path, ts.threads_max);
	if (ts.lane_overflow || ts.clipped)
		dl_warn("trace: %" PRIu64 " disk requests left out (more in flight than lanes), %" PRIu64
			" overlapping thread-state intervals cut", ts.lane_overflow, ts.clipped);
	return 0;
}

static int outputs_finish(struct dl_outputs *o, const struct dl_report_model *m)
{
	int err = 0, e;

	if (o->json.f)
		err = finish_output(&o->json, dl_report_json(o->json.f, m) ? -(errno ? errno : EIO) : 0,
				    "JSON summary", o->cfg->json_path);
	if (o->html.f) {
		e = finish_output(&o->html, dl_report_html(o->html.f, m) ? -(errno ? errno : EIO) : 0,
				  "HTML report", o->cfg->html_path);
		err = err ? err : e;
	}
	if (o->trace) {
		e = close_timeline(o);
		err = err ? err : e;
	}
	return err;
}

static void outputs_abort(struct dl_outputs *o)
{
	dl_outfile_abort(&o->json);
	dl_outfile_abort(&o->html);
	if (o->trace)
		dl_timeline_discard(o->trace);
	o->trace = NULL;
}

static void steps_put(void *ctx, const struct dl_step *st)
{
	struct dl_step_sinks *s = ctx;

	/* A closed stdout (EPIPE) ends the step lines; the trace goes on. */
	if (s->printer->f && ferror(s->printer->f)) {
		dl_info("writing to stdout failed (closed?): no more step lines");
		s->printer->f = NULL;
	}
	if (s->printer->f)
		dl_print_step(s->printer, st);
	if (s->trace)
		dl_timeline_step(s->trace, st);
	if (s->flight)
		dl_flightrec_step(s->flight, st);
	if (s->metrics)
		dl_metrics_step(s->metrics, st);
	if (s->otlp)
		dl_otlp__step(s->otlp, st);
}

/* --- the session --- */

struct dl_session {
	struct dl_session_opts o;
	const struct dl_config *cfg;
	struct dl_stream stream;
	struct dl_summary sum;
	struct dl_correlator *corr;
	struct dl_step_stage stage;     /* after each record: the steps it closed, to the step sinks */
	struct dl_diagnosis *diag;
	struct dl_report_model model;   /* built once after the diagnosis: what every format reads */
	struct dl_outputs out;          /* --json, --html, -o */
	bool out_open;
	struct dl_recorder rec;         /* record: flushed as it goes */
	bool recording;
	int output_err;                 /* the first output that failed at the finish (said): the others still written */
	struct dl_flightrec *flight;    /* record --ring */
	struct dl_exporter metrics;     /* --metrics */
	struct dl_otlp *otlp;           /* --otlp */
	struct dl_otlp_stats otlp_stats[DL_OTLP_SIGNALS];   /* what it delivered, for the JSON */
	struct dl_step_printer printer;
	struct dl_step_sinks steps;
	uint64_t next_flush;
	bool replay_stopped;
};


/* Every step sink: the session's own, then the one the caller added. */
static void put_step(void *ctx, const struct dl_step *st)
{
	struct dl_session *s = ctx;

	if (!s->o.rank)
		steps_put(&s->steps, st);
	if (s->o.step_sink)
		s->o.step_sink(s->o.sink_ctx, st);
}

/* --otlp: checked and its thread started before tracing; a replay's spans get the recording's real time. */
static int open_otlp(struct dl_session *s)
{
	const struct dl_config *cfg = s->cfg;
	struct dl_otlp_target t = { .url = cfg->otlp_url, .nheaders = cfg->notlp_headers };
	struct dl_rec_header h;
	struct stat st;
	char err[512];

	for (int i = 0; i < cfg->notlp_headers; i++)
		t.headers[i] = cfg->otlp_headers[i];
	s->otlp = s->steps.otlp = dl_otlp__new(&t, &s->sum);
	if (!s->otlp)
		return -EINVAL;
	if (cfg->mode == DL_MODE_REPORT && !stat(cfg->input_path, &st) && S_ISREG(st.st_mode) &&
	    dl_rec_header_read(cfg->input_path, &h, err, sizeof(err)) == 0)
		dl_otlp__replay_clocks(s->otlp, h.mono_ns, h.real_ns);
	return dl_otlp__start(s->otlp);
}

static int open_files(struct dl_session *s)
{
	const struct dl_config *cfg = s->cfg;
	int err;

	/* Before anything is traced: an unwritable path fails first. */
	if ((err = outputs_open(&s->out, cfg)))
		return err;
	s->out_open = true;
	if (cfg->record_path) {
		err = dl_recorder_open(&s->rec, cfg->record_path, (enum dl_rec_encoding)cfg->record_encoding);
		if (err)
			return err;
		s->recording = true;
	}
	s->steps.trace = s->out.trace;
	/* Bound before tracing: a port in use fails the run before any probe is attached. */
	struct dl_metrics_opts mo = { .kernel_names = cfg->metrics_kernels, .memory_unknown = cfg->kernel_agg };
	if (cfg->metrics_addr && (err = dl_exporter_open(&s->metrics, cfg->metrics_addr, &mo)))
		return err;
	s->steps.metrics = s->metrics.metrics;   /* NULL without --metrics */
	if (cfg->otlp_url && (err = open_otlp(s)))
		return err;
	return 0;
}

struct dl_session *dl_session_new(const struct dl_session_opts *o, int *err)
{
	struct dl_session *s = dl_xcalloc(1, sizeof(*s));
	const struct dl_config *cfg = o->cfg;
	struct dl_corr_opts copts = {
		.step_on = cfg->step_on, .pcie_gbps = cfg->pcie_gbps, .keep_steps = cfg->keep_steps,
		.observed = o->observed, .observed_ctx = o->observed_ctx,
	};

	s->o = *o;
	s->cfg = cfg;
	/* The status line (stderr) and step lines (stdout) share a terminal. */
	s->printer = (struct dl_step_printer){
		.f = stdout, .clear_status = !cfg->quiet && isatty(STDERR_FILENO) && isatty(STDOUT_FILENO) };
	s->steps.printer = &s->printer;
	*err = 0;
	if (!o->rank && (*err = open_files(s))) {
		dl_session_free(s);
		return NULL;
	}
	s->stream.stop = o->stop;
	dl_summary_init(&s->sum);
	dl_session_publish(s, false);   /* a scrape while the probes attach gets an empty exposition */
	s->diag = dl_xcalloc(1, sizeof(*s->diag));
	/* Sinks in any order: the stream hands each the record already decoded and resolved. */
	dl_stream_add(&s->stream, dl_summary_sink, &s->sum);
	if (s->recording)
		dl_stream_add(&s->stream, dl_recorder_sink, &s->rec);
	if (s->out.trace)
		dl_stream_add(&s->stream, dl_timeline_sink, s->out.trace);
	if (o->rec_sink)
		dl_stream_add(&s->stream, o->rec_sink, o->sink_ctx);
	if (!o->rank && cfg->ring_dir) {
		struct dl_flightrec_opts fo = { .dir = cfg->ring_dir, .window_s = cfg->ring_s,
						.budget_mb = cfg->ring_mb, .step_factor = cfg->trigger_step,
						.encoding = cfg->record_encoding };

		s->flight = s->steps.flight = dl_flightrec_open(&fo, &s->stream);
		if (!s->flight) {
			*err = -EINVAL;
			dl_session_free(s);
			return NULL;
		}
	}
	/* Recording also diagnoses live: the recording replays to the same result. */
	s->corr = dl_corr_new(&copts);
	dl_stream_add(&s->stream, dl_corr_sink, s->corr);
	/* Last: the steps the record closed, once every sink has had the record (NULL: a rank nobody asks). */
	s->stage = (struct dl_step_stage){ .corr = s->corr, .fn = !o->rank || o->step_sink ? put_step : NULL, .ctx = s };
	dl_stream_add(&s->stream, dl_step_stage_sink, &s->stage);
	return s;
}

int dl_session_feed(struct dl_session *s, const void *data, size_t len)
{
	struct dl_rec_in in;

	if (dl_stream_read(&s->stream, &in, data, len))
		return 1;   /* malformed: counted by the stream */
	dl_stream_put(&s->stream, &in);
	return 0;
}

int dl_session_replay(struct dl_session *s)
{
	char replay_err[512];
	int ret = dl_replay(s->cfg->input_path, &s->stream, NULL, replay_err, sizeof(replay_err));

	if (ret < 0) {
		dl_err("%s", replay_err);
		return -EINVAL;
	}
	/* Cut short or stopped: the report is of the records read, and says so. */
	if (ret > 0)
		dl_warn("%s", replay_err);
	s->replay_stopped = ret > 0 && s->o.stop && *s->o.stop;
	return 0;
}

struct dl_stream *dl_session_stream(struct dl_session *s)
{
	return &s->stream;
}

struct dl_summary *dl_session_summary(struct dl_session *s)
{
	return &s->sum;
}

const struct dl_correlator *dl_session_correlator(const struct dl_session *s)
{
	return s->corr;
}

const struct dl_diagnosis *dl_session_diagnosis(const struct dl_session *s)
{
	return s->diag;
}

const struct dl_report_model *dl_session_model(const struct dl_session *s)
{
	return &s->model;
}

uint64_t dl_session_malformed(const struct dl_session *s)
{
	return s->stream.malformed;
}

bool dl_session_replay_stopped(const struct dl_session *s)
{
	return s->replay_stopped;
}

static void capture_drops(struct dl_session *s, uint64_t drops[DL_DROP_MAX], uint64_t *misses)
{
	memset(drops, 0, DL_DROP_MAX * sizeof(*drops));
	*misses = 0;
	if (s->o.capture.drops)
		s->o.capture.drops(s->o.capture.ctx, drops, misses);
}

/* --metrics: what the summary knows now, and the drops the kernel counts (the summary has them at the end). */
void dl_session_publish(struct dl_session *s, bool last)
{
	struct dl_metrics_live live = { .malformed = s->stream.malformed };
	struct dl_report_model now;   /* the processes' figures so far: steps come to the exporter as they close */
	uint64_t misses;

	if (!s->metrics.http)
		return;
	if (!last && s->o.capture.sync)
		s->o.capture.sync(s->o.capture.ctx);
	capture_drops(s, live.drops, &misses);
	live.recursion_misses = misses;
	dl_report_model_build(&now, &s->sum, NULL, NULL);
	dl_exporter_publish(&s->metrics, &now, &live, last);
	dl_report_model_free(&now);
}

void dl_session_tick(struct dl_session *s, uint64_t now, bool dump)
{
	if (dl_exporter_wants(&s->metrics))
		dl_session_publish(s, false);
	if (s->otlp) {
		struct dl_metrics_live live = { .malformed = s->stream.malformed };
		uint64_t misses;

		capture_drops(s, live.drops, &misses);
		live.recursion_misses = misses;
		dl_otlp__tick(s->otlp, now, &live);
	}
	if (s->flight) {
		uint64_t drops[DL_DROP_MAX], misses;

		if (dump)
			dl_flightrec_request(s->flight, "usr1: asked by SIGUSR1");
		capture_drops(s, drops, &misses);
		dl_flightrec_tick(s->flight, now, drops);
	}
	/* The first flush puts the recording at its path; a write error is said at the end. */
	if (s->recording && now >= s->next_flush) {
		s->next_flush = now + REC_FLUSH_NS;
		dl_recorder_flush(&s->rec);
	}
}

int dl_session_finish(struct dl_session *s)
{
	struct dl_diag_opts dopts = { .pcie_gbps = s->cfg->pcie_gbps, .disk_mbps = s->cfg->disk_mbps };

	/* A recording that failed (a full disk) takes nothing else with it: the report and the other files follow. */
	if (s->recording) {
		int err = dl_recorder_close(&s->rec);

		if (err) {
			dl_err("writing the recording %s failed: %s; %s", s->cfg->record_path, strerror(-err),
			       s->rec.published ? "it keeps what was written before (`dlbpf report` reads it to there)"
						: "it is not written (a file of that name is left as it was)");
			s->output_err = err;
			s->recording = false;
		}
	}
	dl_corr_finish(s->corr);
	dl_corr_take_steps(s->corr, s->stage.fn, s);
	if (s->flight) {
		uint64_t drops[DL_DROP_MAX], misses;

		capture_drops(s, drops, &misses);
		/* The steps the finish closed may have triggered a dump. */
		if (dl_flightrec_close(s->flight, dl_now_ns(), drops) && !s->output_err)
			s->output_err = -EIO;   /* each failed dump was said with its path and cause */
		s->flight = s->steps.flight = NULL;
	}
	dl_diagnose(s->corr, &s->sum, &dopts, s->diag);
	dl_report_model_build(&s->model, &s->sum, s->corr, s->diag);
	return s->output_err;
}

int dl_session_report(struct dl_session *s, FILE *out)
{
	int err;

	dl_session_publish(s, true);
	if (s->stream.malformed)
		dl_warn("%" PRIu64 " malformed records ignored", s->stream.malformed);
	dl_report_text(out, &s->model);
	dl_report_steps_text(out, &s->model);
	dl_report_kdur_text(out, &s->model);
	if (s->o.capture.report)
		s->o.capture.report(s->o.capture.ctx, out);
	if (s->recording)
		fprintf(out, "\ndlbpf: recorded %" PRIu64 " records (%.1f MiB, %s) to %s; `dlbpf report %s` replays it\n",
			s->rec.records, (double)s->rec.bytes / (1 << 20), dl_rec_encoding_name(s->rec.encoding),
			s->cfg->record_path, s->cfg->record_path);
	if (s->otlp) {
		/* The summary has the final drops now; delivery waits a bounded time, and says what went. */
		dl_otlp__finish(s->otlp, &s->model, NULL);
		dl_otlp__destroy(s->otlp, out, s->otlp_stats);
		s->otlp = s->steps.otlp = NULL;
		s->model.otlp = s->otlp_stats;
	}
	fflush(out);
	err = outputs_finish(&s->out, &s->model);
	s->out_open = false;
	return err ? err : s->output_err;
}

void dl_session_free(struct dl_session *s)
{
	if (!s)
		return;
	if (s->flight)
		dl_flightrec_close(s->flight, dl_now_ns(), (uint64_t[DL_DROP_MAX]){ 0 });
	dl_exporter_close(&s->metrics);
	dl_otlp__destroy(s->otlp, NULL, NULL);
	dl_recorder_abort(&s->rec);
	if (s->out_open)
		outputs_abort(&s->out);
	dl_report_model_free(&s->model);
	dl_corr_free(s->corr);
	free(s->diag);
	dl_summary_free(&s->sum);
	dl_stream_free(&s->stream);
	free(s);
}

struct dl_timeline *dl_session_ranks_timeline(const struct dl_config *cfg, uint64_t mono_ns, uint64_t boot_ns,
					      uint64_t real_ns)
{
	enum dl_timeline_format fmt = cfg->timeline_format >= 0 ? (enum dl_timeline_format)cfg->timeline_format
								 : dl_timeline_format_of_path(cfg->timeline_path);
	struct dl_timeline *t;
	int err;

	t = dl_timeline_open(cfg->timeline_path, fmt, &err);
	if (!t) {
		dl_err("cannot write the trace to %s: %s", cfg->timeline_path, strerror(-err));
		return NULL;
	}
	/* Rank 0's clocks are the timeline's: every other rank is moved onto them. */
	dl_timeline_set_clocks(t, mono_ns, boot_ns, real_ns);
	return t;
}
