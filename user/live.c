// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A live run (live.h): the tracer and its probes, the drain loop, the held
 * start of a command, the rescans. Records go through the collector into the
 * session; nothing here analyses or writes a report.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "analysis/summary.h"
#include "capture/collector.h"
#include "capture/discover.h"
#include "capture/drainpace.h"
#include "capture/env.h"
#include "capture/hooks.h"
#include "capture/marker.h"
#include "capture/modes.h"
#include "capture/pcie.h"
#include "capture/procfs.h"
#include "capture/spawn.h"
#include "capture/symbolize.h"
#include "capture/tfile.h"
#include "capture/tracer.h"
#include "capture/watchdog.h"
#include "cli.h"
#include "dlbpf/io.h"
#include "live.h"
#include "log.h"
#include "records/clock.h"
#include "records/stream.h"
#include "session.h"
#include "util.h"

#define HOUSEKEEP_NS 250000000ull   /* liveness checks and rescans for late-loaded runtimes */
#define STATUS_NS 1000000000ull
#define MAX_DRAIN_MS 80         /* drain interval while the buffer stays nearly empty (capture/drainpace.h) */

struct dl_live {
	const struct dl_config *cfg;
	const volatile sig_atomic_t *stop;
	volatile sig_atomic_t *dump;   /* SIGUSR1: the flight recorder writes its window */
	struct dl_tracer *tracer;
	struct dl_summary *sum;        /* the session's: the traced processes */
	struct dl_stream *stream;      /* the session's */
	struct dl_collector col;
	struct dl_markers markers;
	struct ring_buffer *rb;
	struct dl_spawn spawn;
	struct dl_modes modes;
	struct dl_mode_env env;
	struct dl_watchdog watchdog;   /* continues held processes if dlbpf dies or stalls */
	uint64_t start_ns;
	uint64_t last_records[DL_EV_KIND_MAX];
	bool status_shown;
	unsigned selects;
};

/* Makes everything the kernel holds visible in the summary. */
static void sync_kernel(void *ctx)
{
	struct dl_live *l = ctx;

	ring_buffer__consume(l->rb);
	dl_modes_fill(&l->modes, &l->env, dl_now_ns());
}

static bool loaded(const struct dl_live *l)
{
	return l->sum && dl_tracer_loaded(l->tracer);
}

/* The session's capture callbacks: a replay has none, a live run before the load gives nothing yet. */
static void capture_sync(void *ctx)
{
	struct dl_live *l = ctx;

	if (loaded(l) && l->cfg->kernel_agg)
		sync_kernel(l);
}

static void capture_drops(void *ctx, uint64_t drops[DL_DROP_MAX], uint64_t *misses)
{
	struct dl_live *l = ctx;

	if (!loaded(l))
		return;
	dl_tracer_read_drops(l->tracer, drops);
	*misses = dl_tracer_recursion_misses(l->tracer, NULL, NULL);
}

static void capture_report(void *ctx, FILE *out)
{
	struct dl_live *l = ctx;

	dl_modes_report(&l->modes, &l->env, out);
}

static bool known(void *ctx, pid_t pid)
{
	struct dl_live *l = ctx;

	return dl_summary_find(l->sum, pid) != NULL;
}

struct dl_live *dl_live_new(const struct dl_config *cfg, const volatile sig_atomic_t *stop,
			    volatile sig_atomic_t *dump)
{
	struct dl_live *l = dl_xcalloc(1, sizeof(*l));
	struct dl_mode_opts mo = { .duty_on_s = cfg->duty_on_s, .duty_period_s = cfg->duty_period_s,
				   .overhead_budget = cfg->overhead_budget };

	l->cfg = cfg;
	l->stop = stop;
	l->dump = dump;
	l->tracer = dl_tracer_new();
	l->markers.symbol = cfg->step_on && !dl_api_by_name(cfg->step_on) ? cfg->step_on : NULL;
	l->markers.autograd = !cfg->step_on;
	l->markers.py.allowed = cfg->python_watchpoint;
	dl_modes_of(&l->modes, cfg->kernel_agg, &mo);
	l->col.symbolizer = dl_symbolizer_new();
	l->col.known = known;
	l->col.known_ctx = l;
	return l;
}

void dl_live_session_opts(struct dl_live *l, struct dl_session_opts *o)
{
	o->capture = (struct dl_session_capture){ .sync = capture_sync, .drops = capture_drops,
						  .report = capture_report, .ctx = l };
	if (dl_modes_partial(&l->modes))
		o->observed = dl_modes_observed, o->observed_ctx = &l->modes;
}

static void trace_existing(pid_t pid, pid_t ppid, void *arg)
{
	struct dl_live *l = arg;
	struct dl_proc_stat st;

	if (dl_tracer_trace_pid(l->tracer, pid, ppid) == 0 && dl_proc_stat(pid, &st) == 0)
		dl_collector_introduce(&l->col, pid, ppid, st.comm, (uint32_t)st.threads);
}

static int trace_root(struct dl_live *l, pid_t pid)
{
	struct dl_proc_stat st;
	int err;

	if (dl_proc_stat(pid, &st)) {
		dl_err("process %d is gone", pid);
		return -ESRCH;
	}
	err = dl_tracer_trace_pid(l->tracer, pid, st.ppid);
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
	/* After the attach: an fd opened since is in the snapshot, its openat record, or both (same path). */
	dl_collector_introduce(&l->col, pid, st.ppid, st.comm, (uint32_t)st.threads);
	if (dl_proc_nspid(pid) > 0 && dl_proc_nspid(pid) != pid)
		dl_info("pid %d (%s) is pid %d in its pid namespace", pid, st.comm, dl_proc_nspid(pid));
	/* Data-loader workers already running are part of the job. */
	return dl_proc_descendants(pid, trace_existing, l);
}

/* What dl_tracer_take_fresh hands: the live state, and how many CUDA or NCCL libraries it said were attached. */
struct fresh_libs {
	struct dl_live *l;
	int runtimes;
};

/* The C library's loader functions (dlopen) are probed too, but they are no runtime: not a library of the job's. */
static void emit_lib(const struct dl_cuda_attach *a, void *arg)
{
	struct fresh_libs *f = arg;

	if (a->kind == DL_LIB_LOADER)
		return;
	dl_emit_lib(f->l->stream, dl_now_ns(), a->pid, a->path, (unsigned)a->nsyms, 0);
	f->runtimes++;
}

static void emit_lib_refused(pid_t pid, const char *path, int err, void *arg)
{
	struct dl_live *l = arg;

	dl_emit_lib(l->stream, dl_now_ns(), pid, path, (unsigned)-err, DL_LIB_NOT_PROBED);
}

/* Attaches to CUDA runtimes that appeared in a traced process (exec, dlopen) since the last scan. */
static void rescan_pid(struct dl_live *l, pid_t pid, bool first)
{
	struct dl_maps *maps = dl_maps_read(pid);   /* one read of its mappings for the users below (NULL: each reads) */
	struct fresh_libs fresh = { .l = l };

	dl_symbolizer_note(l->col.symbolizer, pid, maps);
	dl_pyprocs_scan(&l->col.py, pid, maps);
	dl_markers_attach(&l->markers, l->tracer, pid, maps, &l->col.py);
	dl_tracer_scan_cuda(l->tracer, pid, maps);
	dl_maps_free(maps);
	dl_tracer_exec_settled(l->tracer, pid);
	/*
	 * What the scan attached, wherever it sits now: a dlclose seen in the
	 * same scan removes an attachment and moves the new ones down.
	 */
	dl_tracer_take_fresh(l->tracer, pid, emit_lib, &fresh);
	dl_tracer_take_refused(l->tracer, pid, emit_lib_refused, l);
	/* Counted from what was attached less the loader's probes: a worker without CUDA gets its dlopen probed too. */
	if (fresh.runtimes > 0 && !first)
		dl_info("pid %d: CUDA runtime loaded, now traced", pid);
}

/* A job of many processes takes a while to attach: a stop signal ends the pass at the next process. */
static void rescan(struct dl_live *l, bool first)
{
	for (size_t i = 0; i < l->sum->n && !*l->stop; i++) {
		/* The stream can add processes to the summary: index, not pointer. */
		if (!l->sum->procs[i].exited)
			rescan_pid(l, l->sum->procs[i].pid, first);
	}
}

static void rescan_held(pid_t pid, void *arg)
{
	struct dl_live *l = arg;

	/* Stopping: the held process is continued without the attach. */
	if (!*l->stop)
		rescan_pid(l, pid, false);
}

/* A child that was not held: what its parent mapped is its too (a probe that follows its file fires in it). */
static void inherit_fork(pid_t child, pid_t parent, void *arg)
{
	struct dl_live *l = arg;

	struct fresh_libs fresh = { .l = l };

	if (!*l->stop && dl_tracer_inherit(l->tracer, child, parent) > 0)
		dl_tracer_take_fresh(l->tracer, child, emit_lib, &fresh);
}

static bool wanted_comm(const struct dl_live *l, const char *comm)
{
	for (int i = 0; i < l->cfg->ncomms; i++)
		if (strncmp(comm, l->cfg->comms[i], DL_COMM_LEN - 1) == 0)
			return true;
	return false;
}

/* --comm / --system-wide: takes a running process that matches and is not traced yet. */
static void select_one(pid_t pid, pid_t ppid, void *arg)
{
	struct dl_live *l = arg;
	struct dl_proc_stat st;

	(void)ppid;
	if (*l->stop || pid == getpid() || pid == getppid() || dl_summary_find(l->sum, pid) ||
	    dl_proc_stat(pid, &st))
		return;
	if (l->cfg->ncomms ? !wanted_comm(l, st.comm) : !dl_tracer_maps_cuda(l->tracer, pid))
		return;
	if (trace_root(l, pid) == 0) {
		dl_info("pid %d (%s): selected (%s)", pid, st.comm, l->cfg->ncomms ? "by name" : "maps CUDA");
		rescan_pid(l, pid, false);
	}
}

static void select_processes(struct dl_live *l)
{
	if (l->cfg->ncomms || l->cfg->system_wide)
		dl_proc_foreach(select_one, l);
}

/* True while any traced process lives; marks the ones whose exit the trace missed. */
static bool any_alive(struct dl_live *l)
{
	bool alive = false;

	for (size_t i = 0; i < l->sum->n; i++) {
		struct dl_proc *p = &l->sum->procs[i];

		if (p->exited)
			continue;
		if (dl_proc_alive(p->pid)) {
			alive = true;
			continue;
		}
		p->exited = true;
		p->exit_code = -1;
		dl_tracer_forget_pid(l->tracer, p->pid);
	}
	return alive;
}

static void show_status(struct dl_live *l, uint64_t now, uint64_t dt)
{
	static const char *const names[DL_EV_KIND_MAX] = {
		[DL_EV_CUDA] = "cuda", [DL_EV_BIO] = "bio", [DL_EV_SCHED] = "sched", [DL_EV_PROC] = "proc",
	};
	uint64_t drops[DL_DROP_MAX], total = 0;

	dl_tracer_read_drops(l->tracer, drops);
	for (int i = 0; i < DL_DROP_MAX; i++)
		total += drops[i];
	fprintf(stderr, "\r\033[K[dlbpf %.0fs]", (double)(now - l->start_ns) / 1e9);
	for (int k = 1; k < DL_EV_KIND_MAX; k++) {
		if (!names[k])
			continue;
		fprintf(stderr, " %s %.0f/s", names[k],
			(double)(l->sum->records[k] - l->last_records[k]) * 1e9 / (double)(dt ? dt : 1));
		l->last_records[k] = l->sum->records[k];
	}
	fprintf(stderr, " | %zu procs | drops %" PRIu64 ", recursion misses %" PRIu64 " ", l->sum->n, total,
		dl_tracer_recursion_misses(l->tracer, NULL, NULL));
	l->status_shown = true;
}

/*
 * Sleeps until the timer or a forced wake-up (a quarter of the buffer unread):
 * only while we sleep does BPF send one. So the flag is set first and the
 * buffer looked at after: one that reached the threshold while we were awake
 * (housekeeping, a rescan) sent no wake-up, and once full it sends none, as
 * no submission gets through. Returns >= 0, or -errno.
 */
static int wait_for_records(struct dl_live *l, int timeout_ms)
{
	struct epoll_event ev;
	int n;

	dl_tracer_consumer_sleeps(l->tracer, true);
	if (ring__avail_data_size(ring_buffer__ring(l->rb, 0)) >= dl_tracer_wakeup_bytes(l->tracer))
		timeout_ms = 0;
	n = epoll_wait(ring_buffer__epoll_fd(l->rb), &ev, 1, timeout_ms);
	dl_tracer_consumer_sleeps(l->tracer, false);
	return n < 0 ? -errno : n;
}

static int run_loop(struct dl_live *l, struct dl_session *s)
{
	const struct dl_config *cfg = l->cfg;
	uint64_t deadline = cfg->duration_s > 0 ? l->start_ns + (uint64_t)(cfg->duration_s * 1e9) : 0;
	uint64_t next_housekeep = 0, last_status = l->start_ns;
	bool status = !cfg->quiet && isatty(STDERR_FILENO);
	struct dl_drain_pace pace;
	int timeout = (int)cfg->drain_ms;

	dl_drain_pace_init(&pace, cfg->drain_ms, MAX_DRAIN_MS, (uint64_t)cfg->ringbuf_mb << 20);
	while (!*l->stop) {
		uint64_t now;
		int err;

		l->col.drained_bytes = 0;
		err = wait_for_records(l, timeout);
		/* Submissions do not wake us (BPF_RB_NO_WAKEUP): drain whatever the timer finds. */
		if (err >= 0)
			err = ring_buffer__consume(l->rb);
		if (err < 0 && err != -EINTR) {
			dl_err("reading the ring buffer: %s", strerror(-err));
			return err;
		}
		timeout = (int)dl_drain_pace_next(&pace, l->col.drained_bytes);
		dl_held_rescan_continue(&l->col.held, rescan_held, l);
		dl_held_take_forks(&l->col.held, inherit_fork, l);
		now = dl_now_ns();
		if (deadline && now >= deadline)
			break;
		dl_modes_tick(&l->modes, &l->env, now);
		dl_session_tick(s, now, *l->dump);
		*l->dump = 0;
		if (now >= next_housekeep) {
			next_housekeep = now + HOUSEKEEP_NS;
			dl_watchdog_keep(&l->watchdog, dl_tracer_held_fd(l->tracer));
			/* Watching for processes by name or system-wide: keep going when none is left. */
			if (!any_alive(l) && !cfg->ncomms && !cfg->system_wide) {
				dl_info("every traced process has exited");
				break;
			}
			rescan(l, false);
			if (cfg->ncomms || (cfg->system_wide && ++l->selects % 4 == 0))
				select_processes(l);
		}
		if (status && now - last_status >= STATUS_NS) {
			if (cfg->kernel_agg)
				sync_kernel(l);
			show_status(l, now, now - last_status);
			last_status = now;
		}
	}
	if (l->status_shown)
		fprintf(stderr, "\r\033[K");
	if (*l->stop)
		dl_info("stopping on signal %d", (int)*l->stop);
	return 0;
}

static int start_command(struct dl_live *l)
{
	const struct dl_config *cfg = l->cfg;
	const char *cmd = cfg->cmd[0];
	struct dl_run_as as = { .name = cfg->run_as, .home = cfg->run_as_home, .uid = cfg->run_as_uid,
				.gid = cfg->run_as_gid };
	int err = dl_spawn_start(&l->spawn, cfg->cmd, cfg->run_as ? &as : NULL);

	if (err)
		return err;
	/* In the traced set before its exec: the exec's own reads (the program, the loader) are the job's. */
	err = trace_root(l, l->spawn.pid);
	if (err) {
		dl_spawn_abort(&l->spawn);
		return err;
	}
	err = dl_spawn_exec(&l->spawn);
	if (err)
		return err;   /* said why, and ended it */
	err = dl_spawn_run_to_entry(&l->spawn);
	/* A signal can cut the hold in waitpid (EINTR) or in a ptrace call on a tracee not yet stopped (ESRCH). */
	if (err && *l->stop)
		dl_err("signal %d while '%s' was held at its start: it was killed before its program started",
		       (int)*l->stop, cmd);
	else if (err)
		dl_err("cannot start '%s' under the tracer: %s", cmd, strerror(-err));
	if (err) {
		dl_spawn_abort(&l->spawn);
		return err;
	}
	/* The command's own libraries are mapped now, and none of its code has run. */
	rescan(l, true);
	err = dl_spawn_release(&l->spawn);
	if (err) {
		dl_err("cannot release '%s': %s", cmd, strerror(-err));
		dl_spawn_abort(&l->spawn);
	}
	return err;
}

/* A block request with no completion seen by the end: still in flight, or it ended where BPF does not run. */
static void emit_unfinished(const struct dl_rq_start *rq, void *arg)
{
	struct dl_live *l = arg;

	dl_emit_bio_unseen(l->stream, rq->ts, (pid_t)rq->tgid, (pid_t)rq->tid, rq->sector, rq->remaining, rq->dev,
			   rq->flags & 0xffff);
}

static void emit_prog_misses(const char *prog, uint64_t misses, void *arg)
{
	struct dl_live *l = arg;

	dl_emit_prog(l->stream, dl_now_ns(), prog, misses);
}

/* Checks, load, the watchdog, the modes, the ring buffer and the probes. */
static int set_up(struct dl_live *l)
{
	const struct dl_config *cfg = l->cfg;
	bool walk, paths;
	int err;

	for (int i = 0; i < cfg->npids; i++) {
		struct dl_proc_stat st;

		if (!dl_proc_alive(cfg->pids[i])) {
			dl_err("no process with pid %d", cfg->pids[i]);
			return -ESRCH;
		}
		/* Not "no CUDA runtime mapped yet": it never will; nor will the kernel threads it starts. */
		if (dl_proc_stat(cfg->pids[i], &st) == 0 && (st.flags & DL_PF_KTHREAD)) {
			dl_err("pid %d (%s) is a kernel thread: it runs no program and maps no library, and what it "
			       "starts are kernel threads too; give the pid of a process of the job", cfg->pids[i], st.comm);
			return -EINVAL;
		}
	}
	err = dl_env_check();
	if (!err)
		err = dl_hooks_no_openat2(&walk);
	if (!err)
		err = dl_hooks_no_map_files(&paths);
	if (err)
		return err;
	dl_tfile_force_walk(walk);
	dl_tfile_force_paths(paths);
	err = dl_tracer_open_load(l->tracer, cfg->ringbuf_mb, cfg->kernel_agg, !cfg->no_files, !cfg->no_net);
	if (err)
		return err;
	/* Before the first probe: no process can be held with no one to let it go. */
	err = dl_watchdog_start(&l->watchdog, dl_tracer_held_fd(l->tracer));
	if (err) {
		dl_err("cannot start the watchdog that continues held processes if dlbpf dies: %s", strerror(-err));
		return err;
	}
	err = dl_modes_init(&l->modes, &l->env);
	if (err)
		return err;
	dl_tracer_set_stacks(l->tracer, cfg->stacks);
	l->col.files = dl_tracer_files(l->tracer);
	dl_pyprocs_init(&l->col.py, dl_tracer_py_fd(l->tracer));
	l->col.py.no_walk = dl_tracer_py_no_walk(l->tracer);
	l->col.py.bpf_known = dl_tracer_py_known(l->tracer);
	l->col.py.first_python = dl_tracer_pylines_start;
	l->col.py.first_python_ctx = l->tracer;
	l->rb = ring_buffer__new(dl_tracer_ringbuf_fd(l->tracer), dl_collector_record, &l->col, NULL);
	if (!l->rb) {
		err = -errno;
		dl_err("cannot set up the ring buffer: %s", strerror(errno));
		return err;
	}
	return dl_tracer_attach_auto(l->tracer);
}

int dl_live_run(struct dl_live *l, struct dl_session *s)
{
	const struct dl_config *cfg = l->cfg;
	uint64_t drops[DL_DROP_MAX], misses, t0;
	int err;

	l->stream = l->col.stream = dl_session_stream(s);
	l->sum = dl_session_summary(s);
	l->env = (struct dl_mode_env){ .tracer = l->tracer, .sum = l->sum, .symbolizer = l->col.symbolizer,
				       .stream = l->stream, .sync = sync_kernel, .sync_ctx = l };
	err = set_up(l);
	if (err)
		return err;

	l->start_ns = t0 = dl_now_ns();
	dl_emit_trace_start_flags(l->stream, l->start_ns, dl_gpu_pcie_mbps(), DL_TRACE_BIO_SUBMITS);
	if (cfg->cmd) {
		err = start_command(l);
		t0 = dl_now_ns();  /* the command's first instruction runs now, with every probe on */
	} else {
		for (int i = 0; i < cfg->npids && !err; i++)
			err = trace_root(l, cfg->pids[i]);
		for (int i = 0; i < cfg->ncomms && !err; i++)
			err = dl_tracer_watch_comm(l->tracer, cfg->comms[i]);
		if (!err) {
			rescan(l, true);
			select_processes(l);
		}
	}
	if (err)
		return err;
	dl_modes_start(&l->modes, t0, dl_now_ns());
	for (size_t i = 0; i < l->sum->n; i++) {
		struct dl_proc_stat st;

		if (l->sum->procs[i].cuda_libs)
			continue;
		if (dl_proc_stat(l->sum->procs[i].pid, &st) == 0 && (st.flags & DL_PF_KTHREAD))
			dl_info("pid %d (%s): a kernel thread: no CUDA runtime, ever; only its scheduling is traced",
				l->sum->procs[i].pid, l->sum->procs[i].comm);
		else
			dl_info("pid %d (%s): no CUDA runtime mapped yet; tracing I/O and scheduling",
				l->sum->procs[i].pid, l->sum->procs[i].comm);
	}
	/* A library loaded later may hold it: only what is still missing at the end is warned of. */
	if (cfg->step_on && !dl_api_by_name(cfg->step_on) && !l->markers.found)
		dl_info("--step-on %s: no such function in the traced processes yet (will keep looking)",
			cfg->step_on);
	dl_info("tracing %zu process%s; Ctrl-C to stop", l->sum->n, l->sum->n == 1 ? "" : "es");
	if (cfg->ready_fd >= 0)
		dl_spawn_signal_ready(cfg->ready_fd);

	err = run_loop(l, s);
	if (cfg->step_on && !dl_api_by_name(cfg->step_on) && !l->markers.found && !l->markers.py.refused)
		dl_warn("--step-on %s: no such function in the traced processes (a symbol of their executables or "
			"libraries, a C++ function's demangled name, or a Python function)", cfg->step_on);
	dl_modes_finish(&l->modes, &l->env, dl_now_ns());
	dl_markers_detach(&l->markers);
	dl_tracer_detach(l->tracer);
	dl_info("detached every probe in %.1f ms", (double)dl_tracer_last_detach_ns(l->tracer) / 1e6);
	sync_kernel(l);
	dl_held_continue_all(&l->col.held);
	dl_tracer_unfinished_requests(l->tracer, emit_unfinished, l);
	misses = dl_tracer_missed_switch_ins(l->tracer);
	if (misses)
		dl_info("%" PRIu64 " switch-in%s of traced threads no program saw, each rebuilt from the scheduler's "
			"run-time accounting", misses, misses == 1 ? "" : "s");
	misses = dl_tracer_recursion_misses(l->tracer, emit_prog_misses, l);
	dl_tracer_read_drops(l->tracer, drops);
	dl_emit_trace_end_misses(l->stream, dl_now_ns(), drops, misses);
	return err;
}

int dl_live_exit_status(struct dl_live *l, int err)
{
	/* A command that never ran: the statuses env(1), nice(1) and the shell give it. */
	if (err && l->spawn.exec_errno)
		return l->spawn.exec_errno == ENOENT ? 127 : 126;
	return err ? 1 : dl_spawn_exit_status(&l->spawn);
}

void dl_live_free(struct dl_live *l)
{
	if (!l)
		return;
	dl_markers_detach(&l->markers);
	dl_held_continue_all(&l->col.held);
	ring_buffer__free(l->rb);
	dl_tracer_free(l->tracer);
	/* Every probe is gone: nothing more can be held. */
	dl_watchdog_stop(&l->watchdog);
	dl_symbolizer_free(l->col.symbolizer);
	dl_collector_free(&l->col);
	dl_modes_free(&l->modes);
	free(l);
}
