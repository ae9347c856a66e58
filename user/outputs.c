// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include "flightrec.h"
#include "log.h"
#include "output/html.h"
#include "output/metrics.h"
#include "output/report.h"
#include "output/report_diag.h"
#include "output/timeline.h"
#include "outputs.h"
#include "records/record.h"

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

int dl_outputs_open(struct dl_outputs *o, const struct dl_config *cfg)
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
		dl_outputs_abort(o);
		return err;
	}
	if (cfg->timeline_path && (err = open_timeline(o))) {
		dl_outputs_abort(o);
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

int dl_outputs_finish(struct dl_outputs *o, const struct dl_summary *sum, const struct dl_correlator *corr,
		      const struct dl_diagnosis *diag)
{
	int err = 0, e;

	if (o->json.f)
		err = finish_output(&o->json, dl_report_json(o->json.f, sum, corr, diag) ? -(errno ? errno : EIO) : 0,
				    "JSON summary", o->cfg->json_path);
	if (o->html.f) {
		e = finish_output(&o->html, dl_report_html(o->html.f, sum, corr, diag) ? -(errno ? errno : EIO) : 0,
				  "HTML report", o->cfg->html_path);
		err = err ? err : e;
	}
	if (o->trace) {
		e = close_timeline(o);
		err = err ? err : e;
	}
	return err;
}

void dl_outputs_abort(struct dl_outputs *o)
{
	dl_outfile_abort(&o->json);
	dl_outfile_abort(&o->html);
	if (o->trace)
		dl_timeline_discard(o->trace);
	o->trace = NULL;
}

void dl_steps_put(void *ctx, const struct dl_step *st)
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
}
