// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "capture/budget.h"
#include "capture/files.h"
#include "capture/procfs.h"
#include "dlbpf.skel.h"
#include "records/clock.h"
#include "records/cuda_api.h"
#include "log.h"

/*
 * A launch window: long enough to hold whole training steps several times
 * over (a step outside every window leaves the breakdown), short enough that
 * a run of a minute at a few percent gets several. The first window, whose
 * cost is not known in advance, only measures the rate.
 */
#define WINDOW_NS 250000000ull
#define FIRST_WINDOW_NS (WINDOW_NS / 4)
#define ACCOUNT_NS 100000000ull   /* the cost is read this often */
#define RATE_SMOOTH 0.3           /* weight of the latest interval in the job's CPU and always-on rates */

/* What the kernel charges a run of the program for beside its run time: kind 1 a uprobe, 2 a return probe, 3 a files program. */
static int prog_kind(const struct bpf_program *p)
{
	const char *sec = bpf_program__section_name(p);

	if (*sec == '?')
		sec++;
	if (!strncmp(sec, "uretprobe", 9))
		return 2;
	if (!strncmp(sec, "uprobe", 6))
		return 1;
	/* The files source's programs, on whichever mechanism (bpf/files.bpf.c). */
	if (!strncmp(sec, "fentry/", 7) || !strncmp(sec, "fexit/", 6) || !strncmp(sec, "kprobe/", 7) ||
	    !strncmp(sec, "kretprobe/", 10) || !strncmp(sec, "tp/syscalls/", 12))
		return 3;
	return 0;
}

int dl_budget_init(struct dl_budget *b, double budget, struct dl_tracer *t)
{
	const struct bpf_object_skeleton *sk = dl_tracer_skel(t)->skeleton;

	memset(b, 0, sizeof(*b));
	b->budget = budget;
	b->acct.budget = budget;
	b->window_ns = WINDOW_NS;
	b->stats_fd = -1;
	b->files_mech = dl_tracer_files_mech(t);
	dl_tracer_split_hot(t);
	for (unsigned id = 1; id < DL_API_COUNT && b->napis < DL_BUDGET_APIS; id++) {
		const struct dl_api *api = dl_api_by_id(id);

		if (api && api->cls == DL_CLS_LAUNCH)
			b->apis[b->napis++] = (uint16_t)id;
	}
	dl_calib_run(t, &b->calib);
	dl_calib_syscalls(&b->sys_before[0], &b->sys_before[1]);
	/* The statistics stay on while the fd is open; closing it (or dlbpf's exit) turns them off. */
	b->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (b->stats_fd < 0) {
		dl_warn("--overhead-budget: BPF run-time statistics unavailable (%s): programs' run time is not "
			"charged, only the uprobes' traps", strerror(errno));
		b->stats_fd = -1;
	}
	for (int i = 0; i < sk->prog_cnt && b->nprogs < DL_BUDGET_PROGS; i++) {
		struct bpf_program *p = *sk->progs[i].prog;
		int fd = bpf_program__fd(p);

		/* The calibration's programs run for dlbpf's own calls, never the job's. */
		if (fd < 0 || !strncmp(bpf_program__name(p), "calib_", 6))
			continue;
		b->progs[b->nprogs++] = (struct dl_budget_prog){
			.fd = fd, .kind = prog_kind(p), .launch = !strcmp(bpf_program__name(p), "cuda_entry_only"),
		};
	}
	return 0;
}

static uint64_t launch_total(const struct dl_budget *b, const struct dl_summary *s, uint64_t v[DL_BUDGET_APIS])
{
	uint64_t sum = 0;

	for (int k = 0; k < b->napis; k++)
		v[k] = 0;
	for (size_t i = 0; i < s->n; i++)
		for (int k = 0; k < b->napis; k++)
			v[k] += s->procs[i].calls[b->apis[k]].count;
	for (int k = 0; k < b->napis; k++)
		sum += v[k];
	return sum;
}

/* utime + stime of a process (its threads, the exited ones included), in ns; 0 when gone. */
static uint64_t proc_cpu_ns(pid_t pid)
{
	char buf[1024], *p;
	unsigned long long ut = 0, st = 0;

	if (dl_proc_read(pid, "stat", buf, sizeof(buf)) <= 0)
		return 0;
	p = strrchr(buf, ')');   /* comm may hold anything, ')' included */
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (ut + st) * (1000000000ull / (unsigned long long)sysconf(_SC_CLK_TCK));
}

/*
 * What a per-process counter (read by read_counter, 0 when gone) grew by since the last reading,
 * summed over the job's processes; a process first seen counts from now, one gone keeps its last.
 */
static double counters_delta(dl_budget_counters *last, const struct dl_summary *s,
			     uint64_t (*read_counter)(pid_t pid))
{
	double d = 0;

	while (last->n < s->n)
		*dl_vec_push(last) = UINT64_MAX;
	for (size_t i = 0; i < s->n; i++) {
		uint64_t now = s->procs[i].exited ? 0 : read_counter(s->procs[i].pid);

		if (!now)
			continue;
		if (last->v[i] != UINT64_MAX && now > last->v[i])
			d += (double)(now - last->v[i]);
		last->v[i] = now;
	}
	return d;
}

/* syscr + syscw of /proc/PID/io: the process's read and write calls of every kind; 0 when gone. */
static uint64_t proc_syscalls(pid_t pid)
{
	char buf[512], *p;
	unsigned long long r = 0, w = 0;

	if (dl_proc_read(pid, "io", buf, sizeof(buf)) <= 0)
		return 0;
	if ((p = strstr(buf, "syscr: ")))
		r = strtoull(p + 7, NULL, 10);
	if ((p = strstr(buf, "syscw: ")))
		w = strtoull(p + 7, NULL, 10);
	return r + w;
}

/*
 * The fallback's traced syscall path, as it falls on the job: its read and write calls since the
 * last reading (the only kinds procfs counts: a lower bound of its system calls) times the
 * path's price per call.
 */
static double syscall_tax(struct dl_budget *b, const struct dl_summary *s)
{
	if (b->syscall_tax_ns <= 0)
		return 0;
	return counters_delta(&b->proc_syscalls, s, proc_syscalls) * b->syscall_tax_ns;
}

/* Reads the programs' statistics; returns the cost since the last reading and the launch program's ns per run. */
static double probe_cost(struct dl_budget *b, double *launch_prog_ns)
{
	double floor[4] = { 0, b->calib.uprobe_ns, b->calib.uretprobe_ns, b->files_run_ns }, cost = 0;

	*launch_prog_ns = -1;
	for (int i = 0; i < b->nprogs; i++) {
		struct dl_budget_prog *p = &b->progs[i];
		struct bpf_prog_info info = {};
		uint32_t len = sizeof(info);
		uint64_t dns, dcnt;

		if (bpf_prog_get_info_by_fd(p->fd, &info, &len))
			continue;
		dns = info.run_time_ns - p->run_ns;
		dcnt = info.run_cnt - p->cnt;
		p->run_ns = info.run_time_ns;
		p->cnt = info.run_cnt;
		p->total_ns += dns;
		p->total_cnt += dcnt;
		cost += (double)dns + floor[p->kind] * (double)dcnt;
		if (p->launch && dcnt)
			*launch_prog_ns = (double)dns / (double)dcnt;
	}
	return cost;
}

static void account(struct dl_budget *b, const struct dl_summary *s, uint64_t now)
{
	uint64_t v[DL_BUDGET_APIS], launches = launch_total(b, s, v);
	double prog_ns, tax = syscall_tax(b, s), spent = probe_cost(b, &prog_ns) + tax, job = counters_delta(&b->proc_cpu, s, proc_cpu_ns), dt,
	       launch_cost, dl;

	b->tax_ns += tax;

	if (prog_ns >= 0)
		b->ns_per_launch = b->calib.uprobe_ns + prog_ns;
	dl = (double)(launches - b->launches_accounted);
	b->launches_accounted = launches;
	launch_cost = dl * b->ns_per_launch;
	if (launch_cost > spent)
		launch_cost = spent;
	b->launch_ns += launch_cost;
	b->always_ns += spent - launch_cost;
	dl_budget_charge(&b->acct, job, spent);
	dt = (double)(now - b->last_account);
	if (dt > 0) {
		double job_rate = (job - spent > 0 ? job - spent : 0) * 1e9 / dt, always = (spent - launch_cost) * 1e9 / dt;

		b->job_cpu_rate = b->job_cpu_rate ? RATE_SMOOTH * job_rate + (1 - RATE_SMOOTH) * b->job_cpu_rate : job_rate;
		b->always_rate = b->always_rate ? RATE_SMOOTH * always + (1 - RATE_SMOOTH) * b->always_rate : always;
	}
	b->last_account = now;
}

void dl_budget_start(struct dl_budget *b, uint64_t t0, uint64_t attached)
{
	struct dl_budget_window_rec *w = dl_vec_push(&b->windows);
	double ignored;

	b->t0 = t0;
	b->on = true;
	b->last_account = t0;
	w->start_lo = t0;
	w->start_hi = attached;
	/* The files programs are attached now: what a read and any system call pay for them. */
	if (b->files_mech) {
		double r, w, dr, dw;

		dl_calib_syscalls(&r, &w);
		dr = r - b->sys_before[0];
		dw = w - b->sys_before[1];
		/* A read runs an entry and an exit program; the rest of its change is the syscall path's. */
		b->files_run_ns = dr - dw > 0 ? (dr - dw) / 2 : 0;
		b->syscall_tax_ns = b->files_mech == DL_FILES_TRACEPOINT && dw > 0 ? dw : 0;
	}
	probe_cost(b, &ignored);   /* what ran before the trace began (the calibration's neighbours) is not the job's */
	for (int i = 0; i < b->nprogs; i++)
		b->progs[i].total_ns = b->progs[i].total_cnt = 0;
}

/* Launches seen in the open window so far, per API; makes the ring buffer's records visible first. */
static double window_counts(struct dl_budget *b, const struct dl_summary *s, uint64_t v[DL_BUDGET_APIS])
{
	double sum = 0;

	launch_total(b, s, v);
	for (int k = 0; k < b->napis; k++) {
		v[k] -= b->snap[k];
		sum += (double)v[k];
	}
	return sum;
}

static void steps_add(struct dl_budget_steps *st, uint64_t dur)
{
	st->dur[st->n++ % DL_BUDGET_STEPS] = dur;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The median of the latest durations, and its relative standard error
 * (1.2533 sigma / sqrt(n), sigma from the interquartile range, which a few
 * slow steps do not move).
 */
static double steps_median(const struct dl_budget_steps *st, double *rel_se)
{
	size_t n = st->n < DL_BUDGET_STEPS ? st->n : DL_BUDGET_STEPS;
	uint64_t d[DL_BUDGET_STEPS];
	double med, iqr;

	*rel_se = 0;
	if (!n)
		return 0;
	memcpy(d, st->dur, n * sizeof(*d));
	qsort(d, n, sizeof(*d), cmp_u64);
	med = n % 2 ? (double)d[n / 2] : ((double)d[n / 2 - 1] + (double)d[n / 2]) / 2;
	iqr = (double)d[(3 * n) / 4 < n ? (3 * n) / 4 : n - 1] - (double)d[n / 4];
	if (med > 0)
		*rel_se = 1.2533 * (iqr / 1.349) / med / sqrt((double)n);
	return med;
}

/* How much slower a step with launches probed is than one without; the launch cost that implies. */
static void measure_slowdown(struct dl_budget *b)
{
	double in, out, se_in, se_out;

	if (b->steps_in.n < 3 || b->steps_out.n < 3)
		return;
	in = steps_median(&b->steps_in, &se_in);
	out = steps_median(&b->steps_out, &se_out);
	if (!(out > 0))
		return;
	b->slowdown = in / out - 1;
	/*
	 * Steps of one window share its moment (a neighbour's burst, the job's
	 * phase): they are not independent. The probed side counts as many
	 * samples as windows held its steps, at most.
	 */
	if (b->windows.n < b->steps_in.n)
		se_in *= sqrt((double)b->steps_in.n / (double)b->windows.n);
	b->slowdown_rel_se = sqrt(se_in * se_in + se_out * se_out);
	/* A step inside a window made rate_on x in launches; each added (in - out) / launches to it. */
	if (b->rate_on_hz > 0 && in > out)
		b->ns_per_launch_steps = (in - out) / (b->rate_on_hz * in / 1e9);
	else
		b->ns_per_launch_steps = 0;
}

/* The launch class's rate while on, from a window that saw seen launches in on_ns. */
static void measure_window(struct dl_budget *b, double seen, uint64_t on_ns)
{
	/* A window cut short says little: the last full one's rate stands. */
	if (on_ns >= FIRST_WINDOW_NS / 2 || !b->rate_on_hz)
		b->rate_on_hz = on_ns ? seen * 1e9 / (double)on_ns : 0;
}

/* The plan from the latest rates; the next window is due the plan's off time after the last one closed. */
static void replan(struct dl_budget *b)
{
	struct dl_budget_class c = { .rate_hz = b->rate_on_hz, .ns_per_event = b->ns_per_launch, .cyclable = true };
	double off;

	/* The job's own steps say what a launch cost it: never plan with less (the model may miss cache misses). */
	measure_slowdown(b);
	if (b->ns_per_launch_steps > c.ns_per_event)
		c.ns_per_event = b->ns_per_launch_steps;

	dl_budget_plan(b->budget, b->job_cpu_rate, b->always_rate, &c, 1, &b->plan);
	b->planned = true;
	/* A window is paid before it opens; the account saves up two at most: an idle stretch buys no burst. */
	b->window_cost_ns = c.rate_hz * c.ns_per_event * (double)b->window_ns / 1e9;
	b->acct.cap_ns = 2 * b->window_cost_ns;
	off = dl_budget_off_ns((double)b->window_ns, b->plan.on_fraction[0]);
	b->next_open = isinf(off) || off > 1e18 ? UINT64_MAX : b->last_close + (uint64_t)off;
}

static void close_window(struct dl_budget *b, struct dl_tracer *t, const struct dl_summary *s, dl_budget_sync_fn sync,
			 void *ctx, uint64_t at, bool detach)
{
	struct dl_budget_window_rec *w = &b->windows.v[b->windows.n - 1];
	struct dl_hot_edges e;
	uint64_t v[DL_BUDGET_APIS];

	e.lo[DL_HOT_LAUNCH] = e.hi[DL_HOT_LAUNCH] = at;
	if (detach) {
		int err = dl_tracer_set_hot_class(t, DL_HOT_LAUNCH, false, &e);

		if (err && !b->err)
			b->err = err;
	}
	w->end_lo = e.lo[DL_HOT_LAUNCH];
	w->end_hi = e.hi[DL_HOT_LAUNCH];
	sync(ctx);   /* every launch the window saw is in the summary now */
	window_counts(b, s, v);
	memcpy(w->v, v, sizeof(w->v));
	b->on = false;
	b->last_close = w->end_lo;
}

static void open_window(struct dl_budget *b, struct dl_tracer *t, const struct dl_summary *s, dl_budget_sync_fn sync,
			void *ctx)
{
	struct dl_budget_window_rec *w;
	struct dl_hot_edges e;
	uint64_t v[DL_BUDGET_APIS];
	int err;

	sync(ctx);
	launch_total(b, s, v);   /* launches the collector read late are not the new window's */
	memcpy(b->snap, v, sizeof(b->snap));
	err = dl_tracer_set_hot_class(t, DL_HOT_LAUNCH, true, &e);
	if (err && !b->err)
		b->err = err;
	w = dl_vec_push(&b->windows);
	w->start_lo = e.lo[DL_HOT_LAUNCH];
	w->start_hi = e.hi[DL_HOT_LAUNCH];
	b->on = true;
}

void dl_budget_tick(struct dl_budget *b, struct dl_tracer *t, uint64_t now, const struct dl_summary *s,
		    dl_budget_sync_fn sync, void *ctx)
{
	bool accounted = now - b->last_account >= ACCOUNT_NS;

	if (accounted)
		account(b, s, now);
	if (b->on) {
		const struct dl_budget_window_rec *w = &b->windows.v[b->windows.n - 1];
		uint64_t len = b->windows.n == 1 ? FIRST_WINDOW_NS : b->window_ns;
		uint64_t v[DL_BUDGET_APIS];

		if (now < w->start_hi + len)
			return;
		sync(ctx);
		account(b, s, now);
		measure_window(b, window_counts(b, s, v), now - w->start_hi);
		b->last_close = now;
		replan(b);
		/* Within budget with launches always on: the window goes on, no detach and attach for nothing. */
		if (b->plan.on_fraction[0] >= 1 && b->acct.balance_ns >= 0 && b->windows.n > 1)
			return;
		close_window(b, t, s, sync, ctx, now, true);
		dl_debug("budget: launches off (%.0f/s at %.0f ns while on; job %.2f CPUs, always-on %.2f%%, "
			 "plan %.1f%% of the time, balance %.2f ms)", b->rate_on_hz, b->ns_per_launch, b->job_cpu_rate / 1e9,
			 b->job_cpu_rate > 0 ? 100 * b->always_rate / b->job_cpu_rate : 0, 100 * b->plan.on_fraction[0],
			 b->acct.balance_ns / 1e6);
		return;
	}
	/* The plan follows the job's CPU and the always-on costs as they change. */
	if (accounted)
		replan(b);
	if (now >= b->next_open && b->acct.balance_ns >= b->window_cost_ns && b->plan.on_fraction[0] > 0) {
		open_window(b, t, s, sync, ctx);
		dl_debug("budget: launches on (balance %.2f ms)", b->acct.balance_ns / 1e6);
	}
}

void dl_budget_finish(struct dl_budget *b, struct dl_tracer *t, uint64_t end, struct dl_summary *s,
		      dl_budget_sync_fn sync, void *ctx)
{
	uint64_t now = dl_now_ns();

	end = dl_summary_trace_end(s, b->t0, end);
	b->t_end = end < now ? end : now;
	if (b->on)
		close_window(b, t, s, sync, ctx, b->t_end, false);
	else
		sync(ctx);
	account(b, s, now);
	for (size_t i = 0; i < b->windows.n; i++) {
		struct dl_budget_window_rec *w = &b->windows.v[i];

		if (w->end_lo > b->t_end)
			w->end_lo = b->t_end;
		if (w->end_hi > b->t_end)
			w->end_hi = b->t_end;
		if (w->start_hi > w->end_lo)
			w->start_hi = w->end_lo;
		if (w->start_lo > w->start_hi)
			w->start_lo = w->start_hi;
	}
	measure_slowdown(b);
	dl_budget_fill(b, &b->figures);
	s->overhead = &b->figures;
}

bool dl_budget_observed(void *budget, uint64_t start_ns, uint64_t end_ns)
{
	struct dl_budget *b = budget;
	bool overlaps = false;

	/* Steps end in order and windows are in order: the latest windows are the ones that can hold a step. */
	for (size_t i = b->windows.n; i-- > 0;) {
		const struct dl_budget_window_rec *w = &b->windows.v[i];
		bool open = i == b->windows.n - 1 && b->on;
		uint64_t end = open ? UINT64_MAX : w->end_lo, end_wide = open ? UINT64_MAX : w->end_hi;

		if (start_ns >= w->start_hi && end_ns <= end) {
			steps_add(&b->steps_in, end_ns - start_ns);
			return true;
		}
		overlaps = overlaps || (start_ns < end_wide && end_ns > w->start_lo);
		if (end_wide < start_ns)
			break;
	}
	if (!overlaps)
		steps_add(&b->steps_out, end_ns - start_ns);
	return false;
}

/* The launch counts of API slot k over the trace, scaled. */
static void scaled(const struct dl_budget *b, int k, struct dl_budget_scaled *e)
{
	struct dl_budget_window *w = dl_xcalloc(b->windows.n + 1, sizeof(*w));

	for (size_t i = 0; i < b->windows.n; i++) {
		const struct dl_budget_window_rec *r = &b->windows.v[i];

		/*
		 * Breakpoints go in at the end of an attach and come out at the start of
		 * a detach (tracer.c): a window is on from one to the other.
		 */
		w[i].on_ns = r->end_lo > r->start_hi ? (double)(r->end_lo - r->start_hi) : 0;
		w[i].count = k >= 0 ? (double)r->v[k] : 0;
		if (k < 0)
			for (int a = 0; a < b->napis; a++)
				w[i].count += (double)r->v[a];
	}
	dl_budget_scale(w, b->windows.n, (double)(b->t_end - b->t0), e);
	if (b->steps_in.n >= 3 && b->steps_out.n >= 3) {
		dl_budget_correct(e, 1 + b->slowdown, b->slowdown_rel_se);
	} else if (isfinite(e->hi)) {
		/*
		 * No steps to measure the slowdown: at most, the probes slowed a
		 * launching thread that did nothing else by their whole cost, the
		 * share rate x cost of its time. The estimate stays as seen.
		 */
		double busy = b->rate_on_hz * b->ns_per_launch / 1e9;

		e->hi = e->seen + (e->hi - e->seen) / (1 - (busy < 0.95 ? busy : 0.95));
	}
	free(w);
}

void dl_budget_fill(struct dl_budget *b, struct dl_overhead *o)
{
	struct dl_budget_scaled e;
	double job = b->acct.job_cpu_ns;

	memset(o, 0, sizeof(*o));
	o->budget = b->budget;
	o->slowdown = b->slowdown;
	o->steps_in = b->steps_in.n;
	o->steps_out = b->steps_out.n;
	o->job_cpu_ns = job;
	o->cost_ns = b->acct.spent_ns;
	o->achieved = job > 0 ? b->acct.spent_ns / job : 0;
	o->always_on = job > 0 ? b->always_ns / job : 0;
	o->launches = job > 0 ? b->launch_ns / job : 0;
	o->always_on_over = o->always_on > b->budget;
	o->uprobe_ns = b->calib.uprobe_ns;
	o->uretprobe_ns = b->calib.uretprobe_ns;
	o->ns_per_launch = b->ns_per_launch;
	scaled(b, -1, &e);
	o->observed = e.observed;
	o->windows = e.windows;
	o->launches_probed = e.seen;
	for (int k = 0; k < b->napis && o->napis < DL_OVERHEAD_APIS; k++) {
		scaled(b, k, &e);
		if (!e.seen)
			continue;
		o->apis[o->napis].api = b->apis[k];
		o->apis[o->napis].seen = e.seen;
		o->apis[o->napis].scaled = e.scaled;
		o->apis[o->napis].lo = e.lo;
		o->apis[o->napis].hi = e.hi;
		o->napis++;
	}
}

void dl_budget_report(FILE *f, struct dl_budget *b)
{
	struct dl_overhead o;

	dl_budget_fill(b, &o);
	fprintf(f, "\noverhead budget %.2f%% of the traced job's CPU: achieved %.2f%% (always on: syncs, copies, "
		"scheduler, I/O %.2f%%; launches %.2f%%) of %.3f s of job CPU\n", 100 * o.budget, 100 * o.achieved,
		100 * o.always_on, 100 * o.launches, o.job_cpu_ns / 1e9);
	fprintf(f, "  cost per event: uprobe trap %.0f ns, return probe %.0f ns (timed at start); a launch %.0f ns with "
		"its program's run time (BPF statistics, live)\n", o.uprobe_ns, o.uretprobe_ns, o.ns_per_launch);
	/* The files source's programs are charged with the always-on ones, every task's runs of them included. */
	if (b->files_mech)
		fprintf(f, "  files source on %s: charged with the always-on probes, each run of its programs at its run "
			"time and %.0f ns for the %s (timed at start: a read(2) of dlbpf's own, before and after attach), "
			"for every read, openat and close on the machine, the job's and other tasks'\n",
			dl_files_mech_name(b->files_mech), b->files_run_ns,
			b->files_mech == DL_FILES_FENTRY ? "trampoline" : b->files_mech == DL_FILES_KPROBE ? "kprobe" :
			"tracepoint");
	if (b->files_mech == DL_FILES_TRACEPOINT)
		fprintf(f, "  warning: the files source runs on syscall tracepoints here: every system call of every task "
			"on the machine takes the kernel's traced path, %.0f ns more each (timed at start: a write(2) "
			"before and after attach; 0 if another tracer already held a syscall event); charged for the job's read and write calls (/proc/PID/io), %.3f s; "
			"its other system calls and other tasks' are not counted; --no-files avoids it\n",
			b->syscall_tax_ns, b->tax_ns / 1e9);
	if (o.always_on_over)
		fprintf(f, "  warning: the always-on probes alone cost %.2f%%, over the budget: launches were probed "
			"only while the account allowed\n", 100 * o.always_on);
	fprintf(f, "  launches probed %.1f%% of %.2f s (%" PRIu64 " windows), syncs, copies, scheduler and I/O 100%%; "
		"launch counts above are as observed, scaled here (about 95%% bounds):\n", 100 * o.observed,
		(double)(b->t_end - b->t0) / 1e9, o.windows);
	for (int k = 0; k < o.napis; k++) {
		fprintf(f, "  budget-scaled %-28s seen %10.0f  scaled %12.0f ", dl_api_by_id(o.apis[k].api)->name,
			o.apis[k].seen, o.apis[k].scaled);
		if (isfinite(o.apis[k].hi))
			fprintf(f, "[%.0f-%.0f]\n", o.apis[k].lo, o.apis[k].hi);
		else
			fprintf(f, "(at least %.0f; one window bounds nothing above)\n", o.apis[k].lo);
	}
	if (!o.napis)
		fprintf(f, "  no launches seen while their probes were on\n");
	if (o.steps_in >= 3 && o.steps_out >= 3)
		fprintf(f, "  steps with launches probed took %+.1f%% of the steps without (medians of %" PRIu64 " and %" PRIu64
			" steps): the rate between windows is scaled by it\n", 100 * o.slowdown, o.steps_in, o.steps_out);
	else
		fprintf(f, "  too few steps inside and outside windows to measure the probes' slowdown: the scaled counts "
			"assume the probes did not slow the launches, the upper bounds that they slowed them by their whole "
			"cost\n");
	fprintf(f, "  steps outside every launch window are left out of the breakdown and the verdict (their durations "
		"count)\n");
	if (b->err)
		fprintf(f, "  warning: attaching or detaching the launch probes failed (%s): estimates are low\n",
			strerror(-b->err));
}

void dl_budget_free(struct dl_budget *b)
{
	dl_vec_free(&b->proc_syscalls);
	if (b->stats_fd >= 0)
		close(b->stats_fd);
	dl_vec_free(&b->windows);
	dl_vec_free(&b->proc_cpu);
	memset(b, 0, sizeof(*b));
	b->stats_fd = -1;
}
