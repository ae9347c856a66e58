// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include "log.h"
#include "output/json.h"
#include "output/report_sites.h"
#include "output/report.h"
#include "output/report_diag.h"
#include "output/report_files.h"
#include "output/report_net.h"
#include "strsafe.h"
#include "version.h"
#include "util.h"

static const char *const drop_names[DL_DROP_MAX] = {
	[DL_DROP_CUDA] = "cuda", [DL_DROP_BIO] = "bio", [DL_DROP_SCHED] = "sched",
	[DL_DROP_PROC] = "proc", [DL_DROP_INFLIGHT] = "inflight", [DL_DROP_TRACED] = "traced_full",
	[DL_DROP_AGG] = "aggregate_full", [DL_DROP_DEPTH] = "depth",
};

const char *dl_drop_name(int i)
{
	return i >= 0 && i < DL_DROP_MAX ? drop_names[i] : NULL;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* Where the process runs (the fields are checked, escaped all the same: every traced-side string is). */
static void text_container(FILE *f, const struct dl_container *c, struct dl_sbuf *esc)
{
	fputs("  where   ", f);
	if (c->id[0])
		fprintf(f, " container %s", dl_text(esc, c->id));
	if (c->runtime[0])
		fprintf(f, " (%s)", dl_text(esc, c->runtime));
	if (c->pod_uid[0])
		fprintf(f, " pod %s", dl_text(esc, c->pod_uid));
	if (c->slurm_job[0])
		fprintf(f, " slurm job %s", dl_text(esc, c->slurm_job));
	fputc('\n', f);
}

static void text_cuda(FILE *f, const struct dl_proc *p, struct dl_sbuf *esc)
{
	char b[32];
	uint64_t launches = 0, calls = 0, faults = 0;

	for (unsigned i = 1; i < DL_API_COUNT; i++) {
		calls += p->calls[i].count;
		faults += p->calls[i].args_faults;
	}
	fprintf(f, "  CUDA     %d runtime%s attached", p->cuda_libs, p->cuda_libs == 1 ? "" : "s");
	if (!calls) {
		fprintf(f, ", no calls\n");
		return;
	}
	fputc('\n', f);
	fprintf(f, "    %-28s %10s %12s %8s\n", "call", "count", "total ms", "errors");
	for (unsigned i = 1; i < DL_API_COUNT; i++) {
		const struct dl_api_stat *a = &p->calls[i];

		if (a->count)
			fprintf(f, "    %-28s %10" PRIu64 " %12.3f %8" PRIu64 "\n",
				dl_api_by_id(i)->name, a->count, ms(a->total_ns), a->errors);
	}
	if (faults)
		fprintf(f, "    %" PRIu64 " call%s passed pointers dlbpf could not read: their sizes, shapes or results "
			"are unknown (kernels of shape (0,0,0))\n", faults, faults == 1 ? "" : "s");
	for (int d = 0; d < DL_DIR_COUNT; d++) {
		const struct dl_copy_stat *c = &p->copies[d];

		if (!c->count)
			continue;
		dl_fmt_bytes(b, sizeof(b), c->bytes);
		fprintf(f, "    memcpy %-4s %8" PRIu64 " copies %12s in %9.3f ms, %" PRIu64 " pageable, %" PRIu64 " small\n",
			dl_dir_name(d), c->count, b, ms(c->total_ns), c->pageable, c->small);
	}
	for (size_t k = 0; k < p->nkernels; k++)
		launches += p->kernels[k].count;
	if (p->nkernels)
		fprintf(f, "    kernels  %" PRIu64 " launches of %zu kernel/shape pairs\n", launches, p->nkernels);
	for (size_t g = 0; g < p->ngraphs; g++)
		fprintf(f, "    graph    0x%llx launched x%" PRIu64 "\n", (unsigned long long)p->graphs[g].graph,
			p->graphs[g].count);
	for (size_t k = 0; k < p->nkernels && k < 8; k++) {
		const struct dl_kernel_stat *ks = &p->kernels[k];

		fprintf(f, "      %-32s <<<(%u,%u,%u),(%u,%u,%u)>>> x%" PRIu64 "\n", dl_text(esc, ks->name), ks->grid[0],
			ks->grid[1], ks->grid[2], ks->block[0], ks->block[1], ks->block[2], ks->count);
	}
}

/* One line for the bystanders: how many, their pids and names (the first few), their CPU together. */
static void text_bystanders(FILE *f, const struct dl_report_model *m, struct dl_sbuf *esc)
{
	enum { SHOWN = 8 };
	size_t n = m->nbystanders;
	uint64_t oncpu = 0;

	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].bystander)
			oncpu += m->procs[i].fig->sched.oncpu_ns;
	if (!n)
		return;
	fprintf(f, "\n%zu more process%s made no CUDA call, did no disk I/O and ran under 1%% of a CPU "
		"(%.3f ms on-CPU in all; -v lists each):", n, n == 1 ? "" : "es", ms(oncpu));
	for (size_t i = 0, shown = 0; i < m->nprocs && shown < SHOWN; i++) {
		const struct dl_proc *p = m->procs[i].fig;

		if (!m->procs[i].bystander)
			continue;
		fprintf(f, "%s %d (%s)", shown ? "," : "", p->pid, p->comm[0] ? dl_text(esc, p->comm) : "?");
		shown++;
	}
	fprintf(f, "%s\n", n > SHOWN ? ", ..." : "");
}

void dl_report_text(FILE *f, const struct dl_report_model *m)
{
	char r[32], w[32];
	struct dl_sbuf esc = { 0 };   /* names are the traced side's bytes: escaped for the terminal */
	bool fold = dl_log_level < DL_LOG_INFO;

	fprintf(f, "\ndlbpf: traced %zu process%s for %.2f s: %" PRIu64 " events, %" PRIu64 " dropped\n",
		m->nprocs, m->nprocs == 1 ? "" : "es", (double)m->duration_ns / 1e9, m->events, m->drops_total);
	if (m->recursion_misses) {
		fprintf(f, "  WARNING: the kernel skipped %" PRIu64 " runs of dlbpf's programs (an event fired "
			"while the same program ran on that CPU, or a return probe's pool of instances was empty:", m->recursion_misses);
		for (size_t i = 0; i < m->nprog_misses; i++)
			fprintf(f, "%s %s %" PRIu64, i ? "," : "", m->prog_misses[i].name, m->prog_misses[i].misses);
		fprintf(f, "): what they would have seen is missing\n");
	}
	if (m->drops_total) {
		fprintf(f, "  WARNING: events were lost (");
		for (int i = 0, first = 1; i < DL_DROP_MAX; i++)
			if (m->drops[i]) {
				fprintf(f, "%s%s %" PRIu64, first ? "" : ", ", drop_names[i] ? drop_names[i] : "?", m->drops[i]);
				first = 0;
			}
		/* Only a full ring buffer is the collector's to fix; a full map or a deep nest is not. */
		if (m->drops[DL_DROP_CUDA] + m->drops[DL_DROP_BIO] + m->drops[DL_DROP_SCHED] + m->drops[DL_DROP_PROC])
			fprintf(f, "): the figures below undercount; try --ringbuf-mb or a shorter --drain-ms\n");
		else
			fprintf(f, "): the figures below undercount (a BPF map was full, or calls nested too deep)\n");
	}
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct dl_proc *p = m->procs[i].fig;

		if (fold && m->procs[i].bystander)
			continue;
		fprintf(f, "\nPID %d (%s)", p->pid, p->comm[0] ? dl_text(&esc, p->comm) : "?");
		if (p->nspid && p->nspid != p->pid)
			fprintf(f, " [pid %d in its namespace]", p->nspid);
		if (p->ppid)
			fprintf(f, ", parent %d", p->ppid);
		if (p->exited)
			fprintf(f, ", exited during the trace (code %d)", p->exit_code);
		fputc('\n', f);
		if (dl_container_known(&p->container))
			text_container(f, &p->container, &esc);
		if (p->cuda_libs)
			text_cuda(f, p, &esc);
		else if (p->unprobed)
			fprintf(f, "  CUDA     not traced: %s is mapped but could not be probed (%s)\n",
				dl_text(&esc, p->unprobed_path), strerror(p->unprobed_errno));
		else
			fprintf(f, "  CUDA     not found (no CUDA runtime mapped in this process)\n");
		dl_fmt_bytes(r, sizeof(r), p->io.read_bytes);
		dl_fmt_bytes(w, sizeof(w), p->io.write_bytes);
		fprintf(f, "  disk     read %s in %" PRIu64 " requests, wrote %s in %" PRIu64 " (%.3f ms waiting)",
			r, p->io.read_ops, w, p->io.write_ops, ms(p->io.wait_ns));
		if (p->io.error_ops) {
			dl_fmt_bytes(r, sizeof(r), p->io.error_bytes);
			fprintf(f, "; %" PRIu64 " completions with an I/O error (%s)", p->io.error_ops, r);
		}
		if (p->io.unseen_ops)
			fprintf(f, "; %" PRIu64 " requests with no completion seen (in flight at the end, or "
				"completed where BPF does not run)", p->io.unseen_ops);
		fputc('\n', f);
		/* Summed over the threads: a process of several blocks for longer than it ran. */
		fprintf(f, "  cpu      on-CPU %.3f ms, runqueue %.3f ms, blocked %.3f ms (S %.3f, D %.3f), "
			"%" PRIu64 " switches, summed over its %u thread%s\n",
			ms(p->sched.oncpu_ns), ms(p->sched.runq_ns), ms(p->sched.blocked_ns), ms(p->sched.sleep_ns),
			ms(p->sched.disk_ns), p->sched.switches, p->threads, p->threads == 1 ? "" : "s");
		dl_report_files_text(f, &p->files, &esc);
		dl_report_net_text(f, &p->net);
	}
	if (fold)
		text_bystanders(f, m, &esc);
	if (m->async_io_ops) {
		dl_fmt_bytes(r, sizeof(r), m->async_io_bytes);
		fprintf(f, "\nasync I/O by kernel threads for the job's files (not attributed to a process): %s in %" PRIu64 " requests\n", r,
			m->async_io_ops);
	}
	dl_sbuf_free(&esc);
}

/* A kernel's inferred mean device time, or null where the fit does not determine it (analysis/kdur.h). */
static void json_inferred(struct dl_json *j, const struct dl_kdur *kd, const struct dl_kdur_est *est, const char *name)
{
	int col = kd && est ? dl_kdur_find(kd, name) : -1;

	dl_json_key(j, "inferred_ns");
	if (col < 0 || !est[col].determined) {
		dl_json_null(j);
		return;
	}
	dl_json_obj_begin(j);
	dl_json_key(j, "mean");
	dl_json_double(j, est[col].mean_ns);
	dl_json_key(j, "stderr");
	dl_json_double(j, est[col].stderr_ns);
	dl_json_key(j, "residual");
	dl_json_double(j, est[col].residual_ns);
	dl_json_ku64(j, "windows", est[col].windows);
	dl_json_obj_end(j);
}

void dl_report_kdur_text(FILE *f, const struct dl_report_model *m)
{
	struct dl_kdur_est est[DL_KDUR_MAX_COLS];
	struct dl_sbuf esc = { 0 };

	for (size_t i = 0; i < m->nprocs; i++) {
		const struct dl_kdur *kd = m->procs[i].kdur;
		pid_t pid = m->procs[i].fig->pid;
		size_t shown = 0, names = 0;

		if (!kd || !kd->windows)
			continue;
		dl_kdur_solve(kd, est);
		for (size_t k = DL_KDUR_COL_KERNELS; k < kd->ncols; k++) {
			names++;
			if (!est[k].determined)
				continue;
			if (!shown++)
				fprintf(f, "\nPID %d kernel device times, inferred from %" PRIu64 " drain windows, %" PRIu64
					" more left out as outliers (host-side: launch and sync times fitted, not measured; "
					"fit residual %.1f us RMS per window)\n",
					pid, kd->windows - kd->outliers, kd->outliers, est[k].residual_ns / 1e3);
			fprintf(f, "  %-40s inferred mean %10.1f us +- %.1f, in %" PRIu64 " windows\n",
				dl_text(&esc, kd->names[k]), est[k].mean_ns / 1e3, est[k].stderr_ns / 1e3, est[k].windows);
		}
		if (names > shown && shown)
			fprintf(f, "  %zu more kernel name%s not determined: launched in the same ratio as others in every "
				"window, or in too few\n", names - shown, names - shown == 1 ? "" : "s");
		else if (names && !shown)
			fprintf(f, "\nPID %d kernel device times not inferred: in its %" PRIu64 " drain windows no kernel "
				"name's count varied apart from the others' (the same mix in each, or too few)\n", pid,
				kd->windows);
	}
	dl_sbuf_free(&esc);
}

static void json_proc(struct dl_json *j, const struct dl_proc *p, const struct dl_sites *sites, const struct dl_kdur *kd,
		      int rank)
{
	struct dl_kdur_est est[DL_KDUR_MAX_COLS];

	dl_json_obj_begin(j);
	if (rank >= 0)
		dl_json_ki64(j, "rank", rank);
	dl_json_ki64(j, "pid", p->pid);
	dl_json_ki64(j, "ppid", p->ppid);
	dl_json_ki64(j, "nspid", p->nspid ? p->nspid : p->pid);
	dl_json_kstr(j, "comm", p->comm);
	if (dl_container_known(&p->container)) {
		const struct dl_container *c = &p->container;

		dl_json_key(j, "container");
		dl_json_obj_begin(j);
		if (c->id[0])
			dl_json_kstr(j, "id", c->id);
		if (c->runtime[0])
			dl_json_kstr(j, "runtime", c->runtime);
		if (c->pod_uid[0])
			dl_json_kstr(j, "pod_uid", c->pod_uid);
		if (c->slurm_job[0])
			dl_json_kstr(j, "slurm_job", c->slurm_job);
		dl_json_obj_end(j);
	}
	dl_json_key(j, "exited");
	dl_json_bool(j, p->exited);
	if (p->exited)
		dl_json_ki64(j, "exit_code", p->exit_code);
	dl_json_ku64(j, "threads", p->threads);

	dl_json_key(j, "cuda");
	dl_json_obj_begin(j);
	dl_json_key(j, "found");
	dl_json_bool(j, p->cuda_libs > 0);
	dl_json_ku64(j, "runtimes", (uint64_t)p->cuda_libs);
	if (p->unprobed) {
		dl_json_ku64(j, "unprobed", (uint64_t)p->unprobed);
		dl_json_key(j, "unprobed_first");
		dl_json_obj_begin(j);
		dl_json_key(j, "path");
		dl_json_str(j, p->unprobed_path);
		dl_json_key(j, "error");
		dl_json_str(j, strerror(p->unprobed_errno));
		dl_json_obj_end(j);
	}
	dl_json_ku64(j, "driver_inner", p->driver_inner);
	dl_json_key(j, "calls");
	dl_json_obj_begin(j);
	for (unsigned i = 1; i < DL_API_COUNT; i++) {
		const struct dl_api_stat *a = &p->calls[i];

		if (!a->count)
			continue;
		dl_json_key(j, dl_api_by_id(i)->name);
		dl_json_obj_begin(j);
		dl_json_ku64(j, "count", a->count);
		dl_json_ku64(j, "total_ns", a->total_ns);
		dl_json_ku64(j, "errors", a->errors);
		dl_json_ku64(j, "args_faults", a->args_faults);
		dl_json_obj_end(j);
	}
	dl_json_obj_end(j);
	dl_json_key(j, "memcpy");
	dl_json_obj_begin(j);
	for (int d = DL_DIR_H2D; d <= DL_DIR_D2D; d++) {
		const struct dl_copy_stat *c = &p->copies[d];

		dl_json_key(j, dl_dir_name(d));
		dl_json_obj_begin(j);
		dl_json_ku64(j, "count", c->count);
		dl_json_ku64(j, "bytes", c->bytes);
		dl_json_ku64(j, "total_ns", c->total_ns);
		dl_json_ku64(j, "pageable", c->pageable);
		dl_json_ku64(j, "pageable_bytes", c->pageable_bytes);
		dl_json_ku64(j, "small", c->small);
		dl_json_obj_end(j);
	}
	dl_json_obj_end(j);
	if (kd)
		dl_kdur_solve(kd, est);
	dl_json_key(j, "kernels");
	dl_json_arr_begin(j);
	for (size_t k = 0; k < p->nkernels; k++) {
		const struct dl_kernel_stat *ks = &p->kernels[k];

		dl_json_obj_begin(j);
		dl_json_kstr(j, "name", ks->name);
		dl_json_ku64(j, "count", ks->count);
		dl_json_ku32s(j, "grid", ks->grid, 3);
		dl_json_ku32s(j, "block", ks->block, 3);
		dl_json_ku64(j, "shmem", ks->shmem);
		json_inferred(j, kd, kd ? est : NULL, ks->name);
		dl_json_obj_end(j);
	}
	dl_json_arr_end(j);
	dl_json_key(j, "graphs");
	dl_json_arr_begin(j);
	for (size_t g = 0; g < p->ngraphs; g++) {
		char id[32];

		snprintf(id, sizeof(id), "0x%llx", (unsigned long long)p->graphs[g].graph);
		dl_json_obj_begin(j);
		dl_json_kstr(j, "graph", id);
		dl_json_ku64(j, "count", p->graphs[g].count);
		dl_json_obj_end(j);
	}
	dl_json_arr_end(j);
	dl_json_obj_end(j);

	dl_json_key(j, "io");
	dl_json_obj_begin(j);
	dl_json_ku64(j, "read_bytes", p->io.read_bytes);
	dl_json_ku64(j, "read_ops", p->io.read_ops);
	dl_json_ku64(j, "write_bytes", p->io.write_bytes);
	dl_json_ku64(j, "write_ops", p->io.write_ops);
	dl_json_ku64(j, "write_meta_bytes", p->io.write_meta_bytes);
	dl_json_ku64(j, "wait_ns", p->io.wait_ns);
	dl_json_ku64(j, "completed_bytes", p->io.done_bytes);
	dl_json_ku64(j, "completed_ops", p->io.done_ops);
	dl_json_ku64(j, "error_ops", p->io.error_ops);
	dl_json_ku64(j, "error_bytes", p->io.error_bytes);
	dl_json_ku64(j, "unseen_ops", p->io.unseen_ops);
	dl_json_ku64(j, "unseen_bytes", p->io.unseen_bytes);
	dl_json_obj_end(j);

	dl_json_key(j, "sched");
	dl_json_obj_begin(j);
	dl_json_ku64(j, "oncpu_ns", p->sched.oncpu_ns);
	dl_json_ku64(j, "runq_ns", p->sched.runq_ns);
	dl_json_ku64(j, "blocked_ns", p->sched.blocked_ns);
	dl_json_ku64(j, "sleep_ns", p->sched.sleep_ns);
	dl_json_ku64(j, "disk_ns", p->sched.disk_ns);
	dl_json_ku64(j, "switches", p->sched.switches);
	dl_json_obj_end(j);
	dl_report_files_json(j, &p->files);
	dl_report_net_json(j, &p->net);
	dl_report_sites_json(j, sites);
	dl_json_obj_end(j);
}

void dl_report_json_procs(struct dl_json *j, const struct dl_report_model *m, int rank)
{
	for (size_t i = 0; i < m->nprocs; i++)
		json_proc(j, m->procs[i].fig, m->procs[i].sites, m->procs[i].kdur, rank);
}

/* --overhead-budget: the cost set and achieved, and the launch counts scaled by the time they were probed. */
static void json_overhead(struct dl_json *j, const struct dl_overhead *o)
{
	dl_json_key(j, "overhead_budget");
	dl_json_obj_begin(j);
	dl_json_key(j, "budget");
	dl_json_double(j, o->budget);
	dl_json_key(j, "achieved");
	dl_json_double(j, o->achieved);
	dl_json_key(j, "always_on");
	dl_json_double(j, o->always_on);
	dl_json_key(j, "launches");
	dl_json_double(j, o->launches);
	dl_json_key(j, "always_on_exceeds_budget");
	dl_json_bool(j, o->always_on_over);
	dl_json_ku64(j, "job_cpu_ns", (uint64_t)o->job_cpu_ns);
	dl_json_ku64(j, "cost_ns", (uint64_t)o->cost_ns);
	dl_json_key(j, "uprobe_ns");
	dl_json_double(j, o->uprobe_ns);
	dl_json_key(j, "uretprobe_ns");
	dl_json_double(j, o->uretprobe_ns);
	dl_json_key(j, "ns_per_launch");
	dl_json_double(j, o->ns_per_launch);
	dl_json_key(j, "launch_observed");
	dl_json_double(j, o->observed);
	dl_json_ku64(j, "launch_windows", o->windows);
	dl_json_key(j, "launch_slowdown");
	dl_json_double(j, o->slowdown);
	dl_json_key(j, "launches_scaled");
	dl_json_arr_begin(j);
	for (int k = 0; k < o->napis; k++) {
		dl_json_obj_begin(j);
		dl_json_kstr(j, "api", dl_api_by_id(o->apis[k].api)->name);
		dl_json_ku64(j, "seen", (uint64_t)o->apis[k].seen);
		dl_json_key(j, "scaled");
		dl_json_double(j, o->apis[k].scaled);
		dl_json_key(j, "lo");
		dl_json_double(j, o->apis[k].lo);
		dl_json_key(j, "hi");
		if (isfinite(o->apis[k].hi))
			dl_json_double(j, o->apis[k].hi);
		else
			dl_json_null(j);
		dl_json_obj_end(j);
	}
	dl_json_arr_end(j);
	dl_json_obj_end(j);
}

/* --otlp: what was delivered and what was lost, per signal, as the drops of the trace are counted. */
static void json_otlp(struct dl_json *j, const struct dl_otlp_stats *st)
{
	static const char *const signal[DL_OTLP_SIGNALS] = { "spans", "metric_points" };

	dl_json_key(j, "otlp");
	dl_json_obj_begin(j);
	for (int i = 0; i < DL_OTLP_SIGNALS; i++) {
		dl_json_key(j, signal[i]);
		dl_json_obj_begin(j);
		dl_json_ku64(j, "sent", st[i].items_sent);
		dl_json_ku64(j, "dropped_queue_full", st[i].items_dropped_full);
		dl_json_ku64(j, "not_delivered", st[i].items_undelivered);
		dl_json_ku64(j, "requests", st[i].requests);
		dl_json_ku64(j, "retries", st[i].retries);
		dl_json_obj_end(j);
	}
	dl_json_obj_end(j);
}

int dl_report_json(FILE *f, const struct dl_report_model *m)
{
	struct dl_json j;

	dl_json_init(&j, f);
	dl_json_obj_begin(&j);
	dl_json_ku64(&j, "schema", 1);
	dl_json_kstr(&j, "version", DLBPF_VERSION);
	dl_json_ku64(&j, "duration_ns", m->duration_ns);
	dl_json_key(&j, "drops");
	dl_json_obj_begin(&j);
	dl_json_ku64(&j, "events", m->drops_total);
	for (int i = 0; i < DL_DROP_MAX; i++)
		if (drop_names[i])
			dl_json_ku64(&j, drop_names[i], m->drops[i]);
	dl_json_ku64(&j, "recursion_misses", m->recursion_misses);
	dl_json_key(&j, "recursion_misses_by_program");
	dl_json_obj_begin(&j);
	for (size_t i = 0; i < m->nprog_misses; i++)
		dl_json_ku64(&j, m->prog_misses[i].name, m->prog_misses[i].misses);
	dl_json_obj_end(&j);
	dl_json_obj_end(&j);
	if (m->otlp)
		json_otlp(&j, m->otlp);
	dl_json_key(&j, "async_io");
	dl_json_obj_begin(&j);
	dl_json_ku64(&j, "bytes", m->async_io_bytes);
	dl_json_ku64(&j, "ops", m->async_io_ops);
	dl_json_ku64(&j, "unseen_ops", m->async_io_unseen);
	dl_json_obj_end(&j);
	dl_json_key(&j, "processes");
	dl_json_arr_begin(&j);
	dl_report_json_procs(&j, m, -1);
	dl_json_arr_end(&j);
	dl_report_steps_json(&j, m);
	if (m->overhead)
		json_overhead(&j, m->overhead);
	dl_json_obj_end(&j);
	fputc('\n', f);
	if (fflush(f) || ferror(f)) {
		if (!errno)
			errno = EIO;
		return -1;
	}
	return 0;
}
