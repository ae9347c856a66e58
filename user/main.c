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
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "capture/aggregate.h"
#include "cli.h"
#include "records/clock.h"
#include "capture/budget.h"
#include "capture/duty.h"
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "capture/discover.h"
#include "capture/drainpace.h"
#include "capture/marker.h"
#include "outputs.h"
#include "records/record.h"
#include "output/report_diag.h"
#include "capture/env.h"
#include "capture/files.h"
#include "capture/held.h"
#include "log.h"
#include "capture/naming.h"
#include "capture/pycode.h"
#include "capture/pcie.h"
#include "capture/procfs.h"
#include "output/exporter.h"
#include "output/ranks.h"
#include "output/report.h"
#include "capture/spawn.h"
#include "capture/env.h"
#include "records/stream.h"
#include "analysis/summary.h"
#include "capture/symbolize.h"
#include "output/timeline.h"
#include "capture/tracer.h"
#include "dlbpf/io.h"
#include "capture/watchdog.h"
#include "flightrec.h"
#include "util.h"

#define HOUSEKEEP_NS 250000000ull   /* liveness checks and rescans for late-loaded runtimes */
#define STATUS_NS 1000000000ull
#define REC_FLUSH_NS 250000000ull  /* a killed `record` loses at most this much of the recording */
#define MAX_DRAIN_MS 80         /* drain interval while the buffer stays nearly empty (capture/drainpace.h) */

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

struct run {
	struct dl_config cfg;
	struct dl_tracer tracer;
	struct dl_summary sum;
	struct dl_stream stream;
	struct dl_symbolizer *symbolizer;
	struct dl_pyprocs py;     /* CPython in traced processes (capture/pycode.h) */
	struct dl_markers markers;
	struct ring_buffer *rb;
	uint64_t drained_bytes;      /* of records read from the ring buffer, for the drain's pace */
	struct dl_spawn spawn;
	struct dl_outputs out;       /* --json, --html, -o */
	struct dl_recorder *rec;     /* record: flushed as it goes */
	struct dl_flightrec *flight; /* record --ring */
	uint64_t start_ns;
	uint64_t last_records[DL_EV_KIND_MAX];
	bool status_shown;
	struct dl_held held;    /* rescanned after this drain */
	unsigned selects;
	struct dl_agg agg;      /* --summary */
	struct dl_duty duty;    /* --duty */
	struct dl_budget budget;   /* --overhead-budget */
	struct dl_watchdog watchdog;   /* continues held processes if dlbpf dies or stalls */
	struct dl_exporter metrics;    /* --metrics */
	struct dl_cwds cwds;    /* for relative paths of processes gone before their records are read */
};

/* Low-overhead modes: makes everything the kernel holds visible in the summary. */
static void sync_kernel(void *ctx)
{
	struct run *r = ctx;

	ring_buffer__consume(r->rb);
	if (r->cfg.kernel_agg)
		dl_agg_poll(&r->agg, &r->sum, r->symbolizer, &r->stream, dl_now_ns());
}

/* --metrics: what the summary knows now, and the drops the kernel counts (the summary has them at the end). */
static void publish_metrics(struct run *r, bool last)
{
	struct dl_metrics_live live = { .malformed = r->stream.malformed };

	if (!r->metrics.http)
		return;
	if (r->tracer.skel) {
		if (!last && r->cfg.kernel_agg)
			sync_kernel(r);
		dl_tracer_read_drops(&r->tracer, live.drops);
		live.recursion_misses = dl_tracer_recursion_misses(&r->tracer, NULL, NULL);
	}
	dl_exporter_publish(&r->metrics, &r->sum, &live, last);
}

/* dlopen returned in a traced process: rescan it after the drain (and continue it if BPF stopped it). */
static void note_load(struct run *r, const struct dl_cuda_ev *e)
{
	dl_held_note(&r->held, (pid_t)e->h.tgid, e->flags & DL_CUDA_STOPPED);
}

static int on_record(void *ctx, void *data, size_t len)
{
	struct run *r = ctx;
	const struct dl_hdr *h = data;
	struct dl_rec_in in;

	r->drained_bytes += len;
	if (dl_stream_read(&r->stream, &in, data, len))
		return 0;   /* malformed: counted by the stream */
	if (h->kind == DL_EV_PROC) {
		const struct dl_proc_ev *e = data;

		if (e->what == DL_PROC_FORK && r->tracer.files)
			dl_cwds_fork(&r->cwds, (pid_t)h->tgid, (pid_t)e->ppid);
		/* A forked loader runs its parent's interpreter; an exec or an exit ends what was known of it. */
		if (e->what == DL_PROC_FORK)
			dl_pyprocs_fork(&r->py, (pid_t)h->tgid, (pid_t)e->ppid);
		else if (e->what == DL_PROC_EXEC || (e->what == DL_PROC_EXIT && e->group_dead))
			dl_pyprocs_forget(&r->py, (pid_t)h->tgid);

		/* A process that joined by its name at exec (--comm): introduce it, attach after the drain. */
		if (e->what == DL_PROC_EXEC && !dl_summary_find(&r->sum, (pid_t)h->tgid)) {
			/* One thread: exec leaves only the caller, and later ones are traced from their start. */
			dl_emit_procinfo_threads(&r->stream, dl_now_ns(), (pid_t)h->tgid, (pid_t)e->ppid, e->comm,
						 dl_proc_nspid((pid_t)h->tgid), 1);
			if (r->tracer.files)
				dl_files_snapshot(&r->stream, &r->cwds, (pid_t)h->tgid);
			dl_info("pid %d (%.16s): started, traced by name", (int)h->tgid, e->comm);
			note_load(r, &(struct dl_cuda_ev){ .h = *h });
		}
		/* Held at its exec (bpf/proc.bpf.c): attach to what it maps now, then continue it. */
		if (e->what == DL_PROC_EXEC && h->size >= offsetof(struct dl_proc_ev, flags) + sizeof(e->flags) &&
		    (e->flags & DL_PROC_STOPPED))
			dl_held_note(&r->held, (pid_t)h->tgid, true);
	}
	if (h->kind == DL_EV_FILE_OPEN && len >= sizeof(struct dl_file_open_ev)) {
		struct dl_file_open_ev abs;

		/* Resolved while the process still has the cwd it opened from; the recording keeps the result. */
		if (dl_files_resolve(&r->cwds, data, &abs)) {
			dl_stream_emit(&r->stream, &abs, sizeof(abs));
			return 0;
		}
	}
	if (in.is_call) {
		const struct dl_cuda_ev *e = (const struct dl_cuda_ev *)in.h;

		if (in.call.api->cls == DL_CLS_LOADER) {
			note_load(r, e);
			return 0; /* a loader event, not a CUDA call */
		}
		struct dl_lazy_now now = { 0 };

		dl_name_call(r->symbolizer, &r->stream, &in.call, &now);
		dl_pyprocs_name_call(&r->py, &r->stream, &in.call, &now);
	}
	dl_stream_put(&r->stream, &in);
	return 0;
}

static void trace_existing(pid_t pid, pid_t ppid, void *arg)
{
	struct run *r = arg;
	struct dl_proc_stat st;

	if (dl_tracer_trace_pid(&r->tracer, pid, ppid) == 0 && dl_proc_stat(pid, &st) == 0) {
		dl_emit_procinfo_threads(&r->stream, dl_now_ns(), pid, ppid, st.comm, dl_proc_nspid(pid),
					 (uint32_t)st.threads);
		if (r->tracer.files)
			dl_files_snapshot(&r->stream, &r->cwds, pid);
	}
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
	/*
	 * Its threads are counted once it is in the traced set, so none can
	 * start unseen in between (one starting in that instant counts twice).
	 */
	if (dl_proc_stat(pid, &st)) {
		dl_err("process %d is gone", pid);
		return -ESRCH;
	}
	dl_emit_procinfo_threads(&r->stream, dl_now_ns(), pid, st.ppid, st.comm, dl_proc_nspid(pid),
				 (uint32_t)st.threads);
	/* After the attach: an fd opened since is in the snapshot, its openat record, or both (same path). */
	if (r->tracer.files)
		dl_files_snapshot(&r->stream, &r->cwds, pid);
	if (dl_proc_nspid(pid) > 0 && dl_proc_nspid(pid) != pid)
		dl_info("pid %d (%s) is pid %d in its pid namespace", pid, st.comm, dl_proc_nspid(pid));
	/* Data-loader workers already running are part of the job. */
	return dl_proc_descendants(pid, trace_existing, r);
}

static void emit_lib(const struct dl_cuda_attach *a, void *arg)
{
	struct run *r = arg;

	if (a->kind != DL_LIB_LOADER)
		dl_emit_lib(&r->stream, dl_now_ns(), a->pid, a->path, (unsigned)a->nsyms, 0);
}

static void emit_lib_refused(pid_t pid, const char *path, int err, void *arg)
{
	struct run *r = arg;

	dl_emit_lib(&r->stream, dl_now_ns(), pid, path, (unsigned)-err, DL_LIB_NOT_PROBED);
}

/* Attaches to CUDA runtimes that appeared in a traced process (exec, dlopen) since the last scan. */
static void rescan_pid(struct run *r, pid_t pid, bool first)
{
	int n;

	dl_maps_hold(pid);   /* one read of its mappings for the three users below */
	dl_symbolizer_note(r->symbolizer, pid);
	dl_pyprocs_scan(&r->py, pid);
	dl_markers_attach(&r->markers, &r->tracer, pid);
	n = dl_tracer_scan_cuda(&r->tracer, pid);
	dl_maps_release();
	if (n > 0 && !first)
		dl_info("pid %d: CUDA runtime loaded, now traced", pid);
	dl_tracer_exec_settled(&r->tracer, pid);
	/*
	 * What the scan attached, wherever it sits now: a dlclose seen in the
	 * same scan removes an attachment and moves the new ones down.
	 */
	dl_tracer_take_fresh(&r->tracer, pid, emit_lib, r);
	dl_tracer_take_refused(&r->tracer, pid, emit_lib_refused, r);
}

/* A job of many processes takes a while to attach: a stop signal ends the pass at the next process. */
static void rescan(struct run *r, bool first)
{
	for (size_t i = 0; i < r->sum.n && !stop_signal; i++) {
		/* The stream can add processes to the summary: index, not pointer. */
		if (!r->sum.procs[i].exited)
			rescan_pid(r, r->sum.procs[i].pid, first);
	}
}

static void rescan_held(pid_t pid, void *arg)
{
	/* Stopping: the held process is continued without the attach. */
	if (!stop_signal)
		rescan_pid(arg, pid, false);
}

static bool wanted_comm(const struct run *r, const char *comm)
{
	for (int i = 0; i < r->cfg.ncomms; i++)
		if (strncmp(comm, r->cfg.comms[i], DL_COMM_LEN - 1) == 0)
			return true;
	return false;
}

/* --comm / --system-wide: takes a running process that matches and is not traced yet. */
static void select_one(pid_t pid, pid_t ppid, void *arg)
{
	struct run *r = arg;
	struct dl_proc_stat st;

	(void)ppid;
	if (stop_signal || pid == getpid() || pid == getppid() || dl_summary_find(&r->sum, pid) ||
	    dl_proc_stat(pid, &st))
		return;
	if (r->cfg.ncomms ? !wanted_comm(r, st.comm) : !dl_tracer_maps_cuda(&r->tracer, pid))
		return;
	if (trace_root(r, pid) == 0) {
		dl_info("pid %d (%s): selected (%s)", pid, st.comm, r->cfg.ncomms ? "by name" : "maps CUDA");
		rescan_pid(r, pid, false);
	}
}

static void select_processes(struct run *r)
{
	if (r->cfg.ncomms || r->cfg.system_wide)
		dl_proc_foreach(select_one, r);
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
	fprintf(stderr, " | %zu procs | drops %" PRIu64 ", recursion misses %" PRIu64 " ", r->sum.n, total,
		dl_tracer_recursion_misses(&r->tracer, NULL, NULL));
	r->status_shown = true;
}

static void flight_tick(struct run *r, uint64_t now)
{
	uint64_t drops[DL_DROP_MAX];

	if (dump_asked) {
		dump_asked = 0;
		dl_flightrec_request(r->flight, "usr1: asked by SIGUSR1");
	}
	dl_tracer_read_drops(&r->tracer, drops);
	dl_flightrec_tick(r->flight, now, drops);
}

/*
 * Sleeps until the timer or a forced wake-up (a quarter of the buffer unread):
 * only while we sleep does BPF send one. So the flag is set first and the
 * buffer looked at after: one that reached the threshold while we were awake
 * (housekeeping, a rescan) sent no wake-up, and once full it sends none, as
 * no submission gets through. Returns >= 0, or -errno.
 */
static int wait_for_records(struct run *r, int timeout_ms)
{
	struct epoll_event ev;
	int n;

	dl_tracer_consumer_sleeps(&r->tracer, true);
	if (ring__avail_data_size(ring_buffer__ring(r->rb, 0)) >= dl_tracer_wakeup_bytes(&r->tracer))
		timeout_ms = 0;
	n = epoll_wait(ring_buffer__epoll_fd(r->rb), &ev, 1, timeout_ms);
	dl_tracer_consumer_sleeps(&r->tracer, false);
	return n < 0 ? -errno : n;
}

static int run_loop(struct run *r)
{
	uint64_t deadline = r->cfg.duration_s > 0 ? r->start_ns + (uint64_t)(r->cfg.duration_s * 1e9) : 0;
	uint64_t next_housekeep = 0, next_flush = 0, last_status = r->start_ns;
	bool status = !r->cfg.quiet && isatty(STDERR_FILENO);
	struct dl_drain_pace pace;
	int timeout = (int)r->cfg.drain_ms;

	dl_drain_pace_init(&pace, r->cfg.drain_ms, MAX_DRAIN_MS, (uint64_t)r->cfg.ringbuf_mb << 20);
	while (!stop_signal) {
		uint64_t now;
		int err;

		r->drained_bytes = 0;
		err = wait_for_records(r, timeout);
		/* Submissions do not wake us (BPF_RB_NO_WAKEUP): drain whatever the timer finds. */
		if (err >= 0)
			err = ring_buffer__consume(r->rb);
		if (err < 0 && err != -EINTR) {
			dl_err("reading the ring buffer: %s", strerror(-err));
			return err;
		}
		timeout = (int)dl_drain_pace_next(&pace, r->drained_bytes);
		dl_held_rescan_continue(&r->held, rescan_held, r);
		if (dl_exporter_wants(&r->metrics))
			publish_metrics(r, false);
		now = dl_now_ns();
		if (deadline && now >= deadline)
			break;
		if (r->cfg.duty_on_s)
			dl_duty_tick(&r->duty, &r->tracer, now, &r->sum, sync_kernel, r);
		if (r->cfg.overhead_budget > 0)
			dl_budget_tick(&r->budget, &r->tracer, now, &r->sum, sync_kernel, r);
		if (r->flight)
			flight_tick(r, now);
		/* The first flush puts the recording at its path; a write error is said at the end. */
		if (r->rec && now >= next_flush) {
			next_flush = now + REC_FLUSH_NS;
			dl_recorder_flush(r->rec);
		}
		if (now >= next_housekeep) {
			next_housekeep = now + HOUSEKEEP_NS;
			dl_watchdog_keep(&r->watchdog, dl_tracer_held_fd(&r->tracer));
			/* Watching for processes by name or system-wide: keep going when none is left. */
			if (!any_alive(r) && !r->cfg.ncomms && !r->cfg.system_wide) {
				dl_info("every traced process has exited");
				break;
			}
			rescan(r, false);
			if (r->cfg.ncomms || (r->cfg.system_wide && ++r->selects % 4 == 0))
				select_processes(r);
		}
		if (status && now - last_status >= STATUS_NS) {
			if (r->cfg.kernel_agg)
				sync_kernel(r);
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
	/* A signal can cut the hold in waitpid (EINTR) or in a ptrace call on a tracee not yet stopped (ESRCH). */
	if (err && stop_signal)
		dl_err("signal %d while '%s' was held at its start: it was killed before its program started",
		       (int)stop_signal, r->cfg.cmd[0]);
	else if (err)
		dl_err("cannot start '%s' under the tracer: %s", r->cfg.cmd[0], strerror(-err));
	if (err) {
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

/* A block request with no completion seen by the end: still in flight, or it ended where BPF does not run. */
static void emit_unfinished(const struct dl_rq_start *rq, void *arg)
{
	struct run *r = arg;

	dl_emit_bio_unseen(&r->stream, rq->ts, (pid_t)rq->tgid, (pid_t)rq->tid, rq->sector, rq->remaining, rq->dev,
			   rq->flags & 0xffff);
}

static void emit_prog_misses(const char *prog, uint64_t misses, void *arg)
{
	struct run *r = arg;

	dl_emit_prog(&r->stream, dl_now_ns(), prog, misses);
}

/* Live tracing: everything that needs the kernel, from checks to the last drained record. */
static int trace_live(struct run *r)
{
	uint64_t drops[DL_DROP_MAX], misses;
	int err;

	for (int i = 0; i < r->cfg.npids; i++) {
		if (!dl_proc_alive(r->cfg.pids[i])) {
			dl_err("no process with pid %d", r->cfg.pids[i]);
			return -ESRCH;
		}
	}
	err = dl_env_check();
	if (err)
		return err;
	err = dl_tracer_open_load(&r->tracer, r->cfg.ringbuf_mb, r->cfg.kernel_agg, !r->cfg.no_files);
	if (!err && r->cfg.kernel_agg)
		err = dl_agg_init(&r->agg, dl_tracer_agg_fd(&r->tracer));
	if (err)
		return err;
	/* Before the first probe: no process can be held with no one to let it go. */
	err = dl_watchdog_start(&r->watchdog, dl_tracer_held_fd(&r->tracer));
	if (err) {
		dl_err("cannot start the watchdog that continues held processes if dlbpf dies: %s", strerror(-err));
		return err;
	}
	if (r->cfg.duty_on_s)
		dl_tracer_split_hot(&r->tracer);
	if (r->cfg.overhead_budget > 0)
		dl_budget_init(&r->budget, r->cfg.overhead_budget, &r->tracer);
	r->tracer.stacks = r->cfg.stacks;
	dl_pyprocs_init(&r->py, dl_tracer_py_fd(&r->tracer));
	r->py.no_walk = dl_tracer_py_no_walk(&r->tracer);
	r->py.bpf_known = dl_tracer_py_known(&r->tracer);
	r->rb = ring_buffer__new(dl_tracer_ringbuf_fd(&r->tracer), on_record, r, NULL);
	if (!r->rb) {
		err = -errno;
		dl_err("cannot set up the ring buffer: %s", strerror(errno));
		return err;
	}
	err = dl_tracer_attach_auto(&r->tracer);
	if (err)
		return err;

	r->start_ns = dl_now_ns();
	dl_emit_trace_start_flags(&r->stream, r->start_ns, dl_gpu_pcie_mbps(), DL_TRACE_BIO_SUBMITS);
	uint64_t duty_t0 = r->start_ns;
	if (r->cfg.cmd) {
		err = start_command(r);
		duty_t0 = dl_now_ns();  /* the command's first instruction runs now, with every probe on */
	} else {
		for (int i = 0; i < r->cfg.npids && !err; i++)
			err = trace_root(r, r->cfg.pids[i]);
		for (int i = 0; i < r->cfg.ncomms && !err; i++)
			err = dl_tracer_watch_comm(&r->tracer, r->cfg.comms[i]);
		if (!err) {
			rescan(r, true);
			select_processes(r);
		}
	}
	if (err)
		return err;
	if (r->cfg.duty_on_s)
		dl_duty_start(&r->duty, r->cfg.duty_on_s, r->cfg.duty_period_s, duty_t0, dl_now_ns());
	if (r->cfg.overhead_budget > 0)
		dl_budget_start(&r->budget, duty_t0, dl_now_ns());
	for (size_t i = 0; i < r->sum.n; i++)
		if (!r->sum.procs[i].cuda_libs)
			dl_info("pid %d (%s): no CUDA runtime mapped yet; tracing I/O and scheduling",
				r->sum.procs[i].pid, r->sum.procs[i].comm);
	if (r->cfg.step_on && !dl_api_by_name(r->cfg.step_on) && !r->markers.links.n)
		dl_warn("--step-on %s: no such function in the traced processes yet (will keep looking)",
			r->cfg.step_on);
	dl_info("tracing %zu process%s; Ctrl-C to stop", r->sum.n, r->sum.n == 1 ? "" : "es");
	if (r->cfg.ready_fd >= 0)
		dl_spawn_signal_ready(r->cfg.ready_fd);

	err = run_loop(r);
	if (r->cfg.duty_on_s)
		dl_duty_finish(&r->duty, &r->tracer, dl_now_ns(), &r->sum, sync_kernel, r);
	if (r->cfg.overhead_budget > 0)
		dl_budget_finish(&r->budget, &r->tracer, dl_now_ns(), &r->sum, sync_kernel, r);
	dl_markers_detach(&r->markers);
	dl_tracer_detach(&r->tracer);
	dl_info("detached every probe in %.1f ms", (double)r->tracer.last_detach_ns / 1e6);
	sync_kernel(r);
	dl_held_continue_all(&r->held);
	dl_tracer_unfinished_requests(&r->tracer, emit_unfinished, r);
	misses = dl_tracer_missed_switch_ins(&r->tracer);
	if (misses)
		dl_info("%" PRIu64 " switch-in%s of traced threads no program saw, each rebuilt from the scheduler's "
			"run-time accounting", misses, misses == 1 ? "" : "s");
	misses = dl_tracer_recursion_misses(&r->tracer, emit_prog_misses, r);
	dl_tracer_read_drops(&r->tracer, drops);
	dl_emit_trace_end_misses(&r->stream, dl_now_ns(), drops, misses);
	return err;
}

/* report r0.dlbpf r1.dlbpf ...: the ranks of one job (output/ranks.h). */
static int report_ranks(const struct dl_config *cfg, const struct sigaction *sa)
{
	struct dl_ranks_opts o = {
		.paths = cfg->inputs, .n = (size_t)cfg->ninputs, .json_path = cfg->json_path,
		.timeline_path = cfg->timeline_path, .stop = &stop_signal,
		.timeline_format = cfg->timeline_format >= 0 ? (enum dl_timeline_format)cfg->timeline_format
			: cfg->timeline_path ? dl_timeline_format_of_path(cfg->timeline_path) : DL_TIMELINE_PFTRACE,
		.corr = { .step_on = cfg->step_on, .pcie_gbps = cfg->pcie_gbps, .keep_steps = cfg->keep_steps },
		.diag = { .pcie_gbps = cfg->pcie_gbps, .disk_mbps = cfg->disk_mbps },
	};

	sigaction(SIGINT, sa, NULL);
	sigaction(SIGTERM, sa, NULL);
	sigaction(SIGHUP, sa, NULL);
	return dl_ranks_report(&o, stdout);
}

int main(int argc, char **argv)
{
	struct run r = {};
	struct sigaction sa = { .sa_handler = on_signal }, pipe_sa = { .sa_handler = on_sigpipe };
	struct dl_corr_opts copts = { 0 };
	struct dl_diag_opts dopts = { 0 };
	struct dl_step_printer printer = { .f = stdout };
	struct dl_step_sinks steps = { .printer = &printer };
	struct dl_correlator *corr = NULL;
	struct dl_diagnosis *diag = NULL;
	struct dl_recorder rec = { 0 };
	char replay_err[512];
	bool replay_stopped = false;   /* by a signal: the report is of part of the recording */
	int err = 0, exit_code = 1;

	sigaction(SIGPIPE, &pipe_sa, NULL);
	dl_cli_parse(argc, argv, &r.cfg);
	/* The status line (stderr) and step lines (stdout) share a terminal. */
	printer.clear_status = !r.cfg.quiet && isatty(STDERR_FILENO) && isatty(STDOUT_FILENO);
	dl_log_level = DL_LOG_WARN + r.cfg.verbose;
	if (dl_log_level > DL_LOG_DEBUG)
		dl_log_level = DL_LOG_DEBUG;
	libbpf_set_print(libbpf_print);
	if (r.cfg.mode == DL_MODE_REPORT && r.cfg.ninputs > 1)
		return report_ranks(&r.cfg, &sa);
	if (r.cfg.mode == DL_MODE_FEATURES)
		return dl_features_print(stdout) ? 1 : 0;
	r.markers.symbol = r.cfg.step_on && !dl_api_by_name(r.cfg.step_on) ? r.cfg.step_on : NULL;

	/* Before anything is traced: an unwritable path fails first (outputs.h). */
	if (dl_outputs_open(&r.out, &r.cfg))
		return 1;
	if (r.cfg.record_path) {
		err = dl_recorder_open(&rec, r.cfg.record_path, (enum dl_rec_encoding)r.cfg.record_encoding);
		if (err)
			goto cleanup;
		r.rec = &rec;
	}
	steps.trace = r.out.trace;
	/* Bound before tracing: a port in use fails the run before any probe is attached. */
	struct dl_metrics_opts mo = { .kernel_names = r.cfg.metrics_kernels, .memory_unknown = r.cfg.kernel_agg };
	if (r.cfg.metrics_addr && (err = dl_exporter_open(&r.metrics, r.cfg.metrics_addr, &mo)))
		goto cleanup;
	steps.metrics = r.metrics.metrics;   /* NULL without --metrics */
	sigaction(SIGINT, &sa, NULL);
	if (r.cfg.ring_dir)
		sigaction(SIGUSR1, &(struct sigaction){ .sa_handler = on_usr1 }, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	r.stream.stop = &stop_signal;   /* a replay stops between records */

	dl_summary_init(&r.sum);
	publish_metrics(&r, false);   /* a scrape while the probes attach gets an empty exposition */
	r.symbolizer = dl_symbolizer_new();
	diag = dl_xcalloc(1, sizeof(*diag));
	/* Sinks in any order: the stream hands each the record already decoded and resolved. */
	dl_stream_add(&r.stream, dl_summary_sink, &r.sum);
	if (r.rec)
		dl_stream_add(&r.stream, dl_recorder_sink, &rec);
	if (r.out.trace)
		dl_stream_add(&r.stream, dl_timeline_sink, r.out.trace);
	if (r.cfg.ring_dir) {
		struct dl_flightrec_opts fo = { .dir = r.cfg.ring_dir, .window_s = r.cfg.ring_s,
						.budget_mb = r.cfg.ring_mb, .step_factor = r.cfg.trigger_step,
						.encoding = r.cfg.record_encoding };

		r.flight = steps.flight = dl_flightrec_open(&fo, &r.stream);
		if (!r.flight) {
			err = -EINVAL;
			goto cleanup;
		}
	}
	/* Recording also diagnoses live: the recording replays to the same result. */
	copts.step_on = r.cfg.step_on;
	copts.pcie_gbps = r.cfg.pcie_gbps;
	copts.keep_steps = r.cfg.keep_steps;
	if (r.cfg.overhead_budget > 0)
		copts.observed = dl_budget_observed, copts.observed_ctx = &r.budget;
	corr = dl_corr_new(&copts, dl_steps_put, &steps);
	dl_stream_add(&r.stream, dl_corr_sink, corr);

	if (r.cfg.mode == DL_MODE_REPORT) {
		int ret = dl_replay(r.cfg.input_path, &r.stream, NULL, replay_err, sizeof(replay_err));

		if (ret < 0) {
			dl_err("%s", replay_err);
			err = -EINVAL;
			goto cleanup;
		}
		/* Cut short or stopped: the report is of the records read, and says so. */
		if (ret > 0)
			dl_warn("%s", replay_err);
		replay_stopped = ret > 0 && stop_signal;
	} else {
		err = trace_live(&r);
		if (err)
			goto cleanup;
	}

	if (r.rec) {
		err = dl_recorder_close(&rec);
		if (err) {
			dl_err("writing the recording %s failed: %s", r.cfg.record_path, strerror(-err));
			goto cleanup;
		}
	}
	dl_corr_finish(corr);
	if (r.flight) {
		uint64_t drops[DL_DROP_MAX];

		dl_tracer_read_drops(&r.tracer, drops);
		/* The steps the finish closed may have triggered a dump. */
		dl_flightrec_close(r.flight, dl_now_ns(), drops);
		r.flight = steps.flight = NULL;
	}
	dopts.pcie_gbps = r.cfg.pcie_gbps;
	dopts.disk_mbps = r.cfg.disk_mbps;
	dl_diagnose(corr, &r.sum, &dopts, diag);
	publish_metrics(&r, true);
	if (r.stream.malformed)
		dl_warn("%" PRIu64 " malformed records ignored", r.stream.malformed);
	dl_report_text(stdout, &r.sum);
	dl_report_steps_text(stdout, corr, diag);
	dl_report_kdur_text(stdout, &r.sum, corr);
	if (r.cfg.kernel_agg)
		dl_agg_report(stdout, &r.agg);
	if (r.cfg.duty_on_s)
		dl_duty_report(stdout, &r.duty, &r.sum);
	if (r.cfg.overhead_budget > 0)
		dl_budget_report(stdout, &r.budget);
	if (r.rec)
		printf("\ndlbpf: recorded %" PRIu64 " records (%.1f MiB, %s) to %s; `dlbpf report %s` replays it\n",
		       rec.records, (double)rec.bytes / (1 << 20), dl_rec_encoding_name(rec.encoding), r.cfg.record_path,
		       r.cfg.record_path);
	fflush(stdout);
	err = dl_outputs_finish(&r.out, &r.sum, corr, diag);
	exit_code = err ? 1 : dl_spawn_exit_status(&r.spawn);
	/* A replay a signal stopped is not the whole recording's report. */
	if (!err && replay_stopped)
		exit_code = 128 + stop_signal;

cleanup:
	if (r.flight)
		dl_flightrec_close(r.flight, dl_now_ns(), (uint64_t[DL_DROP_MAX]){ 0 });
	dl_exporter_close(&r.metrics);
	dl_recorder_abort(&rec);
	dl_outputs_abort(&r.out);
	dl_markers_detach(&r.markers);
	dl_held_continue_all(&r.held);
	ring_buffer__free(r.rb);
	if (r.tracer.skel)
		dl_tracer_destroy(&r.tracer);
	/* Every probe is gone: nothing more can be held. */
	dl_watchdog_stop(&r.watchdog);
	dl_corr_free(corr);
	free(diag);
	dl_symbolizer_free(r.symbolizer);
	dl_pyprocs_free(&r.py);
	dl_summary_free(&r.sum);
	dl_stream_free(&r.stream);
	dl_cwds_free(&r.cwds);
	dl_agg_free(&r.agg);
	dl_duty_free(&r.duty);
	dl_budget_free(&r.budget);
	/* A command that never ran: the statuses env(1), nice(1) and the shell give it. */
	if (err && r.spawn.exec_errno)
		return r.spawn.exec_errno == ENOENT ? 127 : 126;
	return err ? 1 : exit_code;
}
