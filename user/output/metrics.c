// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <string.h>
#include "output/metrics.h"
#include "output/report.h"
#include "records/cuda_api.h"
#include "version.h"

/*
 * Step-time buckets, in ns: the 1-2.5-5 decades of the Prometheus clients'
 * default buckets, from 1 ms (a small model on a fast GPU) to 60 s (a large
 * one with gradient accumulation), so that quantiles over either end are
 * more than a guess.
 */
const uint64_t dl_metrics_bucket_ns[DL_METRICS_BUCKETS] = {
	1000000, 2500000, 5000000, 10000000, 25000000, 50000000, 100000000, 250000000, 500000000,
	1000000000, 2500000000, 5000000000, 10000000000, 25000000000, 60000000000,
};

struct dl_metrics {
	struct dl_metrics_opts o;
	DL_VEC(struct dl_metrics_steps) pids;
	struct dl_u64map of;   /* pid -> index in pids */
};

struct dl_metrics *dl_metrics_new(const struct dl_metrics_opts *o)
{
	struct dl_metrics *m = dl_xcalloc(1, sizeof(*m));

	m->o = *o;
	return m;
}

void dl_metrics_free(struct dl_metrics *m)
{
	if (!m)
		return;
	dl_vec_free(&m->pids);
	dl_u64map_free(&m->of);
	free(m);
}

const struct dl_metrics_steps *dl_metrics_steps_of(const struct dl_metrics *m, pid_t pid)
{
	uint64_t i;

	return dl_u64map_get(&m->of, (uint64_t)pid, &i) ? &m->pids.v[i] : NULL;
}

void dl_metrics_step(struct dl_metrics *m, const struct dl_step *st)
{
	struct dl_metrics_steps *p;
	uint64_t i;
	size_t b = 0;

	if (dl_u64map_get(&m->of, (uint64_t)st->pid, &i)) {
		p = &m->pids.v[i];
	} else {
		dl_u64map_put(&m->of, (uint64_t)st->pid, m->pids.n);
		p = dl_vec_push(&m->pids);
		p->pid = st->pid;
	}
	p->count++;
	p->sum_ns += st->dur_ns;
	for (int c = 0; c < DL_CAT_COUNT; c++)
		p->cat_ns[c] += st->cat_ns[c];
	while (b < DL_METRICS_BUCKETS && st->dur_ns > dl_metrics_bucket_ns[b])
		b++;
	p->bucket[b]++;
}

/* --- the text format ------------------------------------------------------ */

struct out {
	struct dl_sbuf *b;
	struct dl_sbuf fixed;   /* scratch: a label value made valid UTF-8 */
	const struct dl_metrics *m;
	const struct dl_proc **procs;   /* the processes with series */
	size_t nprocs;
};

static void family(struct out *o, const char *name, const char *type, const char *help)
{
	dl_sbuf_printf(o->b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * A label value, as the format escapes it: backslash, double quote and line
 * feed. The traced side names its processes and kernels with any bytes:
 * they are made UTF-8 first (the format's encoding), each ill-formed
 * sequence a U+FFFD.
 */
static void label(struct out *o, const char *name, const char *v)
{
	o->fixed.n = 0;
	dl_utf8_fix(&o->fixed, v, strlen(v));
	dl_sbuf_printf(o->b, "%s%s=\"", o->b->v[o->b->n - 1] == '{' ? "" : ",", name);
	for (size_t i = 0; i < o->fixed.n; i++) {
		char c = o->fixed.v[i];

		if (c == '\\' || c == '"')
			dl_sbuf_printf(o->b, "\\%c", c);
		else if (c == '\n')
			dl_sbuf_put(o->b, "\\n", 2);
		else
			dl_sbuf_put(o->b, &c, 1);
	}
	dl_sbuf_put(o->b, "\"", 1);
}

static void sample_begin(struct out *o, const char *name, const struct dl_proc *p)
{
	dl_sbuf_printf(o->b, "%s{", name);
	if (p) {
		char pid[16];

		snprintf(pid, sizeof(pid), "%d", (int)p->pid);
		label(o, "pid", pid);
		label(o, "comm", p->comm);
		/* Where it runs, when known: a label a dashboard joins with the cluster's own metrics. */
		if (p->container.id[0])
			label(o, "container_id", p->container.id);
		if (p->container.pod_uid[0])
			label(o, "pod_uid", p->container.pod_uid);
		if (p->container.slurm_job[0])
			label(o, "slurm_job", p->container.slurm_job);
	}
}

static void end_u64(struct out *o, uint64_t v)
{
	dl_sbuf_printf(o->b, "} %" PRIu64 "\n", v);
}

/* ns as seconds, exactly: integer and nine decimals. */
static void end_seconds(struct out *o, uint64_t ns)
{
	dl_sbuf_printf(o->b, "} %" PRIu64 ".%09" PRIu64 "\n", ns / 1000000000u, ns % 1000000000u);
}

static void le_label(struct out *o, uint64_t ns)
{
	char v[32];
	int n = snprintf(v, sizeof(v), "%" PRIu64 ".%09" PRIu64, ns / 1000000000u, ns % 1000000000u);

	while (v[n - 1] == '0')
		v[--n] = '\0';
	if (v[n - 1] == '.')
		v[--n] = '\0';
	label(o, "le", v);
}

/* --- families --------------------------------------------------------------- */

static void steps_families(struct out *o)
{
	static const char hist[] = "dlbpf_step_duration_seconds";
	uint64_t all[DL_CAT_COUNT] = { 0 }, total = 0;
	double share;

	family(o, hist, "histogram", "Training steps of a process's main thread, by duration");
	for (size_t i = 0; i < o->nprocs; i++) {
		const struct dl_metrics_steps *ps = dl_metrics_steps_of(o->m, o->procs[i]->pid);
		uint64_t cum = 0;

		if (!ps)
			continue;
		for (size_t b = 0; b <= DL_METRICS_BUCKETS; b++) {
			cum += ps->bucket[b];
			sample_begin(o, "dlbpf_step_duration_seconds_bucket", o->procs[i]);
			if (b < DL_METRICS_BUCKETS)
				le_label(o, dl_metrics_bucket_ns[b]);
			else
				label(o, "le", "+Inf");
			end_u64(o, cum);
		}
		sample_begin(o, "dlbpf_step_duration_seconds_sum", o->procs[i]);
		end_seconds(o, ps->sum_ns);
		sample_begin(o, "dlbpf_step_duration_seconds_count", o->procs[i]);
		end_u64(o, ps->count);
	}
	family(o, "dlbpf_step_category_seconds_total", "counter",
	       "Step time by breakdown category (every instant of a step in exactly one)");
	for (size_t i = 0; i < o->nprocs; i++) {
		const struct dl_metrics_steps *ps = dl_metrics_steps_of(o->m, o->procs[i]->pid);

		for (int c = 0; ps && c < DL_CAT_COUNT; c++) {
			sample_begin(o, "dlbpf_step_category_seconds_total", o->procs[i]);
			label(o, "category", dl_cat_name((enum dl_cat)c));
			end_seconds(o, ps->cat_ns[c]);
		}
	}
	family(o, "dlbpf_process_verdict", "gauge",
	       "1 for what a process's steps so far wait for most (the verdict), 0 for the other verdicts");
	for (size_t i = 0; i < o->nprocs; i++) {
		const struct dl_metrics_steps *ps = dl_metrics_steps_of(o->m, o->procs[i]->pid);
		enum dl_verdict v;

		if (!ps || !ps->count)
			continue;
		v = dl_verdict_of(ps->cat_ns, &share);
		for (int k = 0; k < DL_V_COUNT; k++) {
			sample_begin(o, "dlbpf_process_verdict", o->procs[i]);
			label(o, "verdict", dl_verdict_name((enum dl_verdict)k));
			end_u64(o, k == (int)v);
		}
	}
	/* The run's verdict: the diagnosis's rule over every step of every process. */
	for (size_t i = 0; i < o->m->pids.n; i++) {
		total += o->m->pids.v[i].count;
		for (int c = 0; c < DL_CAT_COUNT; c++)
			all[c] += o->m->pids.v[i].cat_ns[c];
	}
	family(o, "dlbpf_verdict", "gauge", "1 for what the steps of the whole run so far wait for most, 0 for "
	       "the other verdicts");
	if (total) {
		enum dl_verdict v = dl_verdict_of(all, &share);

		for (int k = 0; k < DL_V_COUNT; k++) {
			sample_begin(o, "dlbpf_verdict", NULL);
			label(o, "verdict", dl_verdict_name((enum dl_verdict)k));
			end_u64(o, k == (int)v);
		}
		family(o, "dlbpf_verdict_ratio", "gauge", "The share of the run's step time its verdict takes");
		dl_sbuf_printf(o->b, "dlbpf_verdict_ratio %.6f\n", share);
	}
}

static void cuda_families(struct out *o)
{
	static const struct { const char *name, *type, *help; } fam[] = {
		{ "dlbpf_cuda_calls_total", "counter", "CUDA runtime, driver and NCCL calls, by API" },
		{ "dlbpf_cuda_call_errors_total", "counter", "CUDA calls that returned an error, by API" },
		{ "dlbpf_cuda_call_seconds_total", "counter", "Time inside CUDA calls, by API" },
	};

	for (int f = 0; f < 3; f++) {
		family(o, fam[f].name, fam[f].type, fam[f].help);
		for (size_t i = 0; i < o->nprocs; i++) {
			for (unsigned a = 1; a < DL_API_COUNT; a++) {
				const struct dl_api_stat *st = &o->procs[i]->calls[a];

				if (!st->count)
					continue;
				sample_begin(o, fam[f].name, o->procs[i]);
				label(o, "api", dl_api_by_id(a)->name);
				if (f == 2)
					end_seconds(o, st->total_ns);
				else
					end_u64(o, f == 0 ? st->count : st->errors);
			}
		}
	}
}

static void copy_families(struct out *o)
{
	for (int f = 0; f < 2; f++) {
		const char *name = f ? "dlbpf_copy_bytes_total" : "dlbpf_copies_total";

		family(o, name, "counter", f ? "Bytes copied by CUDA memcpy calls, by direction and host memory"
					     : "CUDA memcpy calls, by direction and host memory (pinned or pageable)");
		for (size_t i = 0; i < o->nprocs; i++) {
			for (int d = DL_DIR_H2H; d <= DL_DIR_D2D; d++) {
				const struct dl_copy_stat *c = &o->procs[i]->copies[d];

				if (!c->count)
					continue;
				if (o->m->o.memory_unknown) {
					sample_begin(o, name, o->procs[i]);
					label(o, "direction", dl_dir_name((enum dl_dir)d));
					label(o, "memory", "unknown");
					end_u64(o, f ? c->bytes : c->count);
					continue;
				}
				for (int pageable = 0; pageable < 2; pageable++) {
					sample_begin(o, name, o->procs[i]);
					label(o, "direction", dl_dir_name((enum dl_dir)d));
					label(o, "memory", pageable ? "pageable" : "pinned");
					if (f)
						end_u64(o, pageable ? c->pageable_bytes : c->bytes - c->pageable_bytes);
					else
						end_u64(o, pageable ? c->pageable : c->count - c->pageable);
				}
			}
		}
	}
}

static uint64_t launches_of(const struct dl_proc *p)
{
	uint64_t n = 0;

	for (size_t k = 0; k < p->nkernels; k++)
		n += p->kernels[k].count;
	return n;
}

/* The first DL_METRICS_KERNELS names a process launched, in that order (stable series); the rest summed. */
static void kernel_names(struct out *o, const struct dl_proc *p)
{
	const char *names[DL_METRICS_KERNELS];
	uint64_t counts[DL_METRICS_KERNELS], other = 0;
	size_t n = 0;

	for (size_t k = 0; k < p->nkernels; k++) {
		const struct dl_kernel_stat *ks = &p->kernels[k];
		size_t j = 0;

		while (j < n && strcmp(names[j], ks->name))
			j++;
		if (j == n && n < DL_METRICS_KERNELS) {
			names[n] = ks->name;
			counts[n++] = 0;
		}
		if (j < n)
			counts[j] += ks->count;
		else
			other += ks->count;
	}
	for (size_t j = 0; j < n; j++) {
		sample_begin(o, "dlbpf_kernel_launches_by_name_total", p);
		label(o, "kernel", names[j]);
		end_u64(o, counts[j]);
	}
	if (other) {
		sample_begin(o, "dlbpf_kernel_launches_by_name_total", p);
		label(o, "kernel", DL_METRICS_OTHER_KERNELS);
		end_u64(o, other);
	}
}

static void kernel_families(struct out *o)
{
	family(o, "dlbpf_kernel_launches_total", "counter", "Kernel launches");
	for (size_t i = 0; i < o->nprocs; i++) {
		if (!o->procs[i]->nkernels)
			continue;
		sample_begin(o, "dlbpf_kernel_launches_total", o->procs[i]);
		end_u64(o, launches_of(o->procs[i]));
	}
	if (!o->m->o.kernel_names)
		return;
	family(o, "dlbpf_kernel_launches_by_name_total", "counter", "Kernel launches by kernel name (the first "
	       "names of each process; the rest summed as kernel " DL_METRICS_OTHER_KERNELS ")");
	for (size_t i = 0; i < o->nprocs; i++)
		kernel_names(o, o->procs[i]);
}

static void disk_families(struct out *o)
{
	for (int f = 0; f < 2; f++) {
		const char *name = f ? "dlbpf_disk_requests_total" : "dlbpf_disk_bytes_total";

		family(o, name, "counter", f ? "Block requests the process's tasks submitted, by direction"
					     : "Bytes of block requests the process's tasks submitted, by direction");
		for (size_t i = 0; i < o->nprocs; i++) {
			const struct dl_proc *p = o->procs[i];

			for (int w = 0; w < 2; w++) {
				sample_begin(o, name, p);
				label(o, "direction", w ? "write" : "read");
				if (f)
					end_u64(o, w ? p->io.write_ops : p->io.read_ops);
				else
					end_u64(o, w ? p->io.write_bytes : p->io.read_bytes);
			}
		}
	}
}

static void tracer_families(struct out *o, const struct dl_metrics_live *live, size_t omitted)
{
	family(o, "dlbpf_dropped_events_total", "counter", "Events the tracer lost, by reason (as the JSON "
	       "summary's drops)");
	for (int i = 0; i < DL_DROP_MAX; i++) {
		if (!dl_drop_name(i))
			continue;
		sample_begin(o, "dlbpf_dropped_events_total", NULL);
		label(o, "reason", dl_drop_name(i));
		end_u64(o, live->drops[i]);
	}
	family(o, "dlbpf_skipped_program_runs_total", "counter",
	       "Runs of dlbpf's BPF programs the kernel skipped (its recursion guard, or a return probe's empty pool)");
	dl_sbuf_printf(o->b, "dlbpf_skipped_program_runs_total %" PRIu64 "\n", live->recursion_misses);
	family(o, "dlbpf_malformed_records_total", "counter", "Records the collector could not read, ignored");
	dl_sbuf_printf(o->b, "dlbpf_malformed_records_total %" PRIu64 "\n", live->malformed);
	family(o, "dlbpf_processes_omitted", "gauge", "Processes with activity beyond the exporter's cap of "
	       "processes with series");
	dl_sbuf_printf(o->b, "dlbpf_processes_omitted %zu\n", omitted);
	family(o, "dlbpf_build_info", "gauge", "The dlbpf version that exports");
	sample_begin(o, "dlbpf_build_info", NULL);
	label(o, "version", DLBPF_VERSION);
	end_u64(o, 1);
}

/* A process has series once it did something the families count; a wrapper's sleep does not. */
static bool active(const struct dl_proc *p, const struct dl_metrics *m)
{
	if (p->io.read_ops || p->io.write_ops || p->nkernels || dl_metrics_steps_of(m, p->pid))
		return true;
	for (unsigned a = 1; a < DL_API_COUNT; a++)
		if (p->calls[a].count)
			return true;
	return false;
}

void dl_metrics_render(const struct dl_metrics *m, const struct dl_report_model *rm, const struct dl_metrics_live *live,
		       struct dl_sbuf *b)
{
	struct out o = { .b = b, .m = m };
	size_t omitted = 0;

	b->n = 0;
	dl_sbuf_put(b, "", 0);
	o.procs = dl_xcalloc(rm->nprocs ? rm->nprocs : 1, sizeof(*o.procs));
	for (size_t i = 0; i < rm->nprocs; i++) {
		if (!active(rm->procs[i].fig, m))
			continue;
		if (o.nprocs == DL_METRICS_PROCS)
			omitted++;
		else
			o.procs[o.nprocs++] = rm->procs[i].fig;
	}
	steps_families(&o);
	cuda_families(&o);
	copy_families(&o);
	kernel_families(&o);
	disk_families(&o);
	tracer_families(&o, live, omitted);
	free(o.procs);
	dl_sbuf_free(&o.fixed);
}
