// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * dlbpf: parses the command line, picks the mode, runs it. The pipeline is
 * assembled by the session (session.h); a live run's capture is live.h's; a
 * report of several ranks is multirank.h's.
 */
#include <signal.h>
#include <stdio.h>
#include <bpf/libbpf.h>
#include "capture/env.h"
#include "cli.h"
#include "live.h"
#include "log.h"
#include "multirank.h"
#include "session.h"

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t dump_asked;   /* SIGUSR1: the flight recorder writes its window */

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void on_usr1(int sig)
{
	(void)sig;
	dump_asked = 1;
}

/*
 * A closed stdout (`dlbpf ... | head -1`) ends the step lines, not the trace:
 * the write fails with EPIPE instead. Caught rather than ignored, because
 * exec resets a caught signal: the command dlbpf starts gets SIGPIPE as usual.
 */
static void on_sigpipe(int sig)
{
	(void)sig;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && dl_log_level < DL_LOG_DEBUG)
		return 0;
	if (level != LIBBPF_DEBUG && dl_log_level < DL_LOG_INFO)
		return 0;
	return dl_vlog_lines(fmt, ap);   /* it names the traced side's binaries */
}

static void catch_stops(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* One session: a recording replayed (report), or a live run (with record, a recording written as it goes). */
static int run_session(const struct dl_config *cfg)
{
	struct dl_session_opts so = { .cfg = cfg, .stop = &stop_signal };
	struct dl_live *live = NULL;
	struct dl_session *s;
	int err = 0, exit_code = 1;

	if (cfg->mode != DL_MODE_REPORT) {
		live = dl_live_new(cfg, &stop_signal, &dump_asked);
		dl_live_session_opts(live, &so);
	}
	s = dl_session_new(&so, &err);
	if (s) {
		sigaction(SIGINT, &(struct sigaction){ .sa_handler = on_signal }, NULL);
		if (cfg->ring_dir)
			sigaction(SIGUSR1, &(struct sigaction){ .sa_handler = on_usr1 }, NULL);
		catch_stops();
		err = live ? dl_live_run(live, s) : dl_session_replay(s);
		if (!err) {
			/* An output that failed at the finish (the recording, a dump) still leaves the report and the rest. */
			int finish_err = dl_session_finish(s);

			err = dl_session_report(s, stdout);
			err = err ? err : finish_err;
			exit_code = err ? 1 : 0;
			/* A replay a signal stopped is not the whole recording's report. */
			if (!err && dl_session_replay_stopped(s))
				exit_code = 128 + stop_signal;
		}
	}
	dl_session_free(s);
	if (live) {
		exit_code = dl_live_exit_status(live, err);
		dl_live_free(live);
	}
	return live || !err ? exit_code : 1;
}

int main(int argc, char **argv)
{
	struct dl_config cfg = {};

	sigaction(SIGPIPE, &(struct sigaction){ .sa_handler = on_sigpipe }, NULL);
	dl_cli_parse(argc, argv, &cfg);
	dl_log_level = DL_LOG_WARN + cfg.verbose;
	if (dl_log_level > DL_LOG_DEBUG)
		dl_log_level = DL_LOG_DEBUG;
	libbpf_set_print(libbpf_print);
	if (cfg.mode == DL_MODE_REPORT && cfg.ninputs > 1) {
		catch_stops();
		return dl_multirank_report(&cfg, &stop_signal, stdout);
	}
	if (cfg.mode == DL_MODE_FEATURES)
		return dl_features_print(stdout) ? 1 : 0;
	return run_session(&cfg);
}
