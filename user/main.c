// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * dlbpf: attach, drain, summarise. The stages live in their own files; this
 * one wires them together and owns the run loop.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "cli.h"
#include "env.h"
#include "log.h"
#include "procfs.h"
#include "report.h"
#include "spawn.h"
#include "stream.h"
#include "summary.h"
#include "symbolize.h"
#include "trace.h"
#include "tracer.h"

#define HOUSEKEEP_NS 250000000ull   /* liveness checks and rescans for late-loaded runtimes */
#define STATUS_NS 1000000000ull

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && dl_log_level < DL_LOG_DEBUG)
		return 0;
	if (level != LIBBPF_DEBUG && dl_log_level < DL_LOG_INFO)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

struct run {
	struct dl_config cfg;
	struct dl_tracer tracer;
	struct dl_summary sum;
	struct dl_stream stream;
	struct dl_symbolizer *symbolizer;
	struct ring_buffer *rb;
	struct dl_spawn spawn;
	FILE *json;
	struct dl_trace *trace;   /* -o: also a dl_step_fn target (dl_trace_step) */
	uint64_t start_ns;
	uint64_t last_records[DL_EV_KIND_MAX];
	bool status_shown;
};

/* Kernel launches name their kernel by a host address: the first time one is seen, a symbol record precedes it. */
static void name_launch(struct run *r, const struct dl_cuda_ev *e)
{
	const struct dl_api *api = dl_api_by_id(e->api);
	char name[DL_SYM_NAME_MAX];

	if (!api || api->cls != DL_CLS_LAUNCH || !dl_symbolizer_first(r->symbolizer, (pid_t)e->h.tgid, e->arg[0]))
		return;
	dl_symbolize(r->symbolizer, (pid_t)e->h.tgid, e->arg[0], name, sizeof(name));
	if (name[0])
		dl_emit_sym(&r->stream, now_ns(), (pid_t)e->h.tgid, e->arg[0], name);
}

static int on_record(void *ctx, void *data, size_t len)
{
	struct run *r = ctx;
	const struct dl_hdr *h = data;

	if (dl_record_check(data, len) == 0 && h->kind == DL_EV_CUDA)
		name_launch(r, data);
	dl_stream_emit(&r->stream, data, len);
	return 0;
}

static void trace_existing(pid_t pid, pid_t ppid, void *arg)
{
	struct run *r = arg;
	struct dl_proc_stat st;

	if (dl_tracer_trace_pid(&r->tracer, pid, ppid) == 0 && dl_proc_stat(pid, &st) == 0)
		dl_emit_procinfo(&r->stream, now_ns(), pid, ppid, st.comm);
}

static int trace_root(struct run *r, pid_t pid)
{
	struct dl_proc_stat st;
	int err;

	if (dl_proc_stat(pid, &st)) {
		dl_err("process %d is gone", pid);
		return -ESRCH;
	}
	err = dl_tracer_trace_pid(&r->tracer, pid, st.ppid);
	if (err)
		return err;
	dl_emit_procinfo(&r->stream, now_ns(), pid, st.ppid, st.comm);
	/* Data-loader workers already running are part of the job. */
	return dl_proc_descendants(pid, trace_existing, r);
}

/* Attaches to CUDA runtimes that appeared in traced processes (exec, dlopen) since the last scan. */
static void rescan(struct run *r, bool first)
{
	for (size_t i = 0; i < r->sum.n; i++) {
		struct dl_proc *p = &r->sum.procs[i];
		int n;

		if (p->exited)
			continue;
		size_t before = r->tracer.ncuda;
		pid_t pid = p->pid;

		dl_symbolizer_note(r->symbolizer, pid);
		n = dl_tracer_scan_cuda(&r->tracer, pid);
		if (n > 0 && !first)
			dl_info("pid %d: CUDA runtime loaded, now traced", pid);
		/* p may move: the stream can add processes to the summary. */
		for (size_t k = before; k < r->tracer.ncuda; k++)
			dl_emit_lib(&r->stream, now_ns(), pid, r->tracer.cuda[k].path, (unsigned)r->tracer.cuda[k].nsyms);
	}
}

/* True while any traced process lives; marks the ones whose exit the trace missed. */
static bool any_alive(struct run *r)
{
	bool alive = false;

	for (size_t i = 0; i < r->sum.n; i++) {
		struct dl_proc *p = &r->sum.procs[i];

		if (p->exited)
			continue;
		if (dl_proc_alive(p->pid)) {
			alive = true;
			continue;
		}
		p->exited = true;
		p->exit_code = -1;
		dl_tracer_forget_pid(&r->tracer, p->pid);
	}
	return alive;
}

static void show_status(struct run *r, uint64_t now, uint64_t dt)
{
	static const char *const names[DL_EV_KIND_MAX] = {
		[DL_EV_CUDA] = "cuda", [DL_EV_BIO] = "bio", [DL_EV_SCHED] = "sched", [DL_EV_PROC] = "proc",
	};
	uint64_t drops[DL_DROP_MAX], total = 0;

	dl_tracer_read_drops(&r->tracer, drops);
	for (int i = 0; i < DL_DROP_MAX; i++)
		total += drops[i];
	fprintf(stderr, "\r\033[K[dlbpf %.0fs]", (double)(now - r->start_ns) / 1e9);
	for (int k = 1; k < DL_EV_KIND_MAX; k++) {
		if (!names[k])
			continue;
		fprintf(stderr, " %s %.0f/s", names[k],
			(double)(r->sum.records[k] - r->last_records[k]) * 1e9 / (double)(dt ? dt : 1));
		r->last_records[k] = r->sum.records[k];
	}
	fprintf(stderr, " | %zu procs | drops %" PRIu64 " ", r->sum.n, total);
	r->status_shown = true;
}

static int run_loop(struct run *r)
{
	uint64_t deadline = r->cfg.duration_s > 0 ? r->start_ns + (uint64_t)(r->cfg.duration_s * 1e9) : 0;
	uint64_t next_housekeep = 0, last_status = r->start_ns;
	bool status = !r->cfg.quiet && isatty(STDERR_FILENO);

	while (!stop_signal) {
		uint64_t now;
		int err = ring_buffer__poll(r->rb, (int)r->cfg.drain_ms);

		/* Submissions do not wake us (BPF_RB_NO_WAKEUP): drain whatever the timer finds. */
		if (err >= 0)
			err = ring_buffer__consume(r->rb);
		if (err < 0 && err != -EINTR) {
			dl_err("reading the ring buffer: %s", strerror(-err));
			return err;
		}
		now = now_ns();
		if (deadline && now >= deadline)
			break;
		if (now >= next_housekeep) {
			next_housekeep = now + HOUSEKEEP_NS;
			if (!any_alive(r)) {
				dl_info("every traced process has exited");
				break;
			}
			rescan(r, false);
		}
		if (status && now - last_status >= STATUS_NS) {
			show_status(r, now, now - last_status);
			last_status = now;
		}
	}
	if (r->status_shown)
		fprintf(stderr, "\r\033[K");
	if (stop_signal)
		dl_info("stopping on signal %d", (int)stop_signal);
	return 0;
}

static int start_command(struct run *r)
{
	int err = dl_spawn_start(&r->spawn, r->cfg.cmd);

	if (err)
		return err;
	err = trace_root(r, r->spawn.pid);
	if (!err)
		err = dl_spawn_run_to_entry(&r->spawn);
	if (err) {
		dl_err("cannot start '%s' under the tracer: %s", r->cfg.cmd[0], strerror(-err));
		dl_spawn_abort(&r->spawn);
		return err;
	}
	/* The command's own libraries are mapped now, and none of its code has run. */
	rescan(r, true);
	err = dl_spawn_release(&r->spawn);
	if (err) {
		dl_err("cannot release '%s': %s", r->cfg.cmd[0], strerror(-err));
		dl_spawn_abort(&r->spawn);
	}
	return err;
}

/* Reaps the command dlbpf started and returns the exit status dlbpf should end with. */
static int command_status(struct run *r)
{
	int status;

	if (r->spawn.pid <= 0 || waitpid(r->spawn.pid, &status, WNOHANG) != r->spawn.pid)
		return 0;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 0;
}

int main(int argc, char **argv)
{
	struct run r = {};
	uint64_t drops[DL_DROP_MAX];
	struct sigaction sa = { .sa_handler = on_signal };
	int err = 0, exit_code = 1;

	dl_cli_parse(argc, argv, &r.cfg);
	dl_log_level = DL_LOG_WARN + r.cfg.verbose;
	if (dl_log_level > DL_LOG_DEBUG)
		dl_log_level = DL_LOG_DEBUG;
	libbpf_set_print(libbpf_print);

	for (int i = 0; i < r.cfg.npids; i++) {
		if (!dl_proc_alive(r.cfg.pids[i])) {
			dl_err("no process with pid %d", r.cfg.pids[i]);
			return 1;
		}
	}
	if (dl_env_check())
		return 1;
	if (r.cfg.json_path) {
		r.json = fopen(r.cfg.json_path, "w");
		if (!r.json) {
			dl_err("cannot write the JSON summary to %s: %s", r.cfg.json_path, strerror(errno));
			return 1;
		}
	}
	if (r.cfg.trace_path) {
		int fmt = r.cfg.trace_format >= 0 ? r.cfg.trace_format : (int)dl_trace_format_of_path(r.cfg.trace_path);

		r.trace = dl_trace_open(r.cfg.trace_path, (enum dl_trace_format)fmt, &r.sum, &err);
		if (!r.trace) {
			dl_err("cannot write the trace to %s: %s", r.cfg.trace_path, strerror(-err));
			if (r.json)
				fclose(r.json);
			return 1;
		}
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	dl_summary_init(&r.sum);
	r.symbolizer = dl_symbolizer_new();
	if (!r.symbolizer) {
		err = -ENOMEM;
		goto cleanup;
	}
	dl_stream_add(&r.stream, dl_summary_sink, &r.sum);
	if (r.trace)
		dl_stream_add(&r.stream, dl_trace_sink, r.trace);   /* after the summary: it reads its names */

	err = dl_tracer_open_load(&r.tracer, r.cfg.ringbuf_mb);
	if (err)
		goto cleanup;
	r.rb = ring_buffer__new(dl_tracer_ringbuf_fd(&r.tracer), on_record, &r, NULL);
	if (!r.rb) {
		err = -errno;
		dl_err("cannot set up the ring buffer: %s", strerror(errno));
		goto cleanup;
	}
	err = dl_tracer_attach_tracepoints(&r.tracer);
	if (err)
		goto cleanup;

	r.start_ns = now_ns();
	dl_emit_trace_start(&r.stream, r.start_ns);
	if (r.cfg.cmd) {
		err = start_command(&r);
		if (err)
			goto cleanup;
	} else {
		for (int i = 0; i < r.cfg.npids && !err; i++)
			err = trace_root(&r, r.cfg.pids[i]);
		if (err)
			goto cleanup;
		rescan(&r, true);
	}
	for (size_t i = 0; i < r.sum.n; i++)
		if (!r.sum.procs[i].cuda_libs)
			dl_info("pid %d (%s): no CUDA runtime mapped yet; tracing I/O and scheduling",
				r.sum.procs[i].pid, r.sum.procs[i].comm);
	dl_info("tracing %zu process%s; Ctrl-C to stop", r.sum.n, r.sum.n == 1 ? "" : "es");

	err = run_loop(&r);
	dl_tracer_detach(&r.tracer);
	ring_buffer__consume(r.rb);
	dl_tracer_read_drops(&r.tracer, drops);
	dl_emit_trace_end(&r.stream, now_ns(), drops);
	if (r.sum.malformed)
		dl_warn("%" PRIu64 " malformed records ignored", r.sum.malformed);

	dl_report_text(stdout, &r.sum);
	fflush(stdout);
	if (r.json) {
		if (dl_report_json(r.json, &r.sum) || fclose(r.json)) {
			dl_err("writing the JSON summary to %s failed: %s", r.cfg.json_path, strerror(errno));
			err = err ? err : -EIO;
		}
		r.json = NULL;
	}
	if (r.trace) {
		struct dl_trace_stats ts;
		int terr = dl_trace_close(r.trace, &ts);

		r.trace = NULL;
		if (terr) {
			dl_err("writing the trace to %s failed: %s; the file is incomplete", r.cfg.trace_path, strerror(-terr));
			err = err ? err : terr;
		} else {
			dl_info("trace: %" PRIu64 " slices, %" PRIu64 " counter samples, %" PRIu64 " events (%" PRIu64
				" out of order), %" PRIu64 " bytes in %s", ts.slices, ts.counters, ts.events, ts.late, ts.bytes,
				r.cfg.trace_path);
			if (ts.lane_overflow || ts.clipped)
				dl_warn("trace: %" PRIu64 " disk requests left out (more in flight than lanes), %" PRIu64
					" overlapping thread-state intervals cut", ts.lane_overflow, ts.clipped);
		}
	}
	exit_code = err ? 1 : command_status(&r);

cleanup:
	if (r.json)
		fclose(r.json);
	if (r.trace)
		dl_trace_close(r.trace, NULL);
	ring_buffer__free(r.rb);
	dl_tracer_destroy(&r.tracer);
	dl_symbolizer_free(r.symbolizer);
	dl_summary_free(&r.sum);
	return err ? 1 : exit_code;
}
