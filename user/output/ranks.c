// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include "analysis/summary.h"
#include "output/json.h"
#include "output/ranks.h"
#include "output/report.h"
#include "output/report_diag.h"
#include "version.h"

static uint64_t shifted(uint64_t ts, int64_t by)
{
	return ts ? (uint64_t)((int64_t)ts + by) : 0;
}

void dl_ranks_text(FILE *f, const struct dl_rank_view *a, size_t n, const struct dl_straggler *sg, const struct dl_finding *sf)
{
	for (size_t i = 0; i < n; i++) {
		const struct dl_rank_view *k = &a[i];

		fprintf(f, "%s=== rank %zu: %s (host %.64s, clock %+.3f ms from rank 0's) ===\n", i ? "\n" : "", i,
			k->path, k->hdr->host, (double)k->offset / 1e6);
		dl_report_text(f, k->model);
		dl_report_steps_text(f, k->model);
		dl_report_kdur_text(f, k->model);
	}
	fprintf(f, "\n=== %zu ranks ===\n", n);
	fprintf(f, "  %-5s %8s %12s %17s %19s  %s\n", "rank", "steps", "step ms", "compute ms/step", "comm_wait ms/step",
		"verdict");
	for (size_t i = 0; i < n; i++) {
		const struct dl_rank_view *k = &a[i];

		fprintf(f, "  %-5zu %8" PRIu64 " %12.3f %17.3f %19.3f  %s\n", i, k->steps.steps,
			k->steps.steps ? (double)k->steps.dur_ns / (double)k->steps.steps / 1e6 : 0.0,
			dl_rank_compute_per_step(&k->steps) / 1e6, dl_rank_comm_wait_per_step(&k->steps) / 1e6,
			k->model->diag->nsteps ? dl_verdict_name(k->model->diag->verdict) : "-");
	}
	if (sg->rank >= 0)
		fprintf(f, "\n  [straggler] %s\n", sf->message);
	else if (sg->compute_ns > 0)
		fprintf(f, "\n  no straggler: the rank computing most per step does %.2fx the next (a straggler: %.1fx, "
			"with the others waiting on collectives %.0f%% of their steps or more)\n", sg->ratio,
			DL_STRAGGLER_RATIO, 100 * DL_STRAGGLER_WAIT_SHARE);
}

static void json_rank(struct dl_json *j, const struct dl_rank_view *k)
{
	dl_json_obj_begin(j);
	dl_json_ki64(j, "rank", k->index);
	dl_json_kstr(j, "recording", k->path);
	dl_json_kstr(j, "host", k->hdr->host);
	dl_json_key(j, "clock");
	dl_json_obj_begin(j);
	dl_json_ku64(j, "monotonic_ns", k->hdr->mono_ns);
	dl_json_ku64(j, "realtime_ns", k->hdr->real_ns);
	dl_json_ki64(j, "offset_ns", k->offset);
	dl_json_obj_end(j);
	dl_json_ku64(j, "duration_ns", k->model->duration_ns);
	dl_json_ku64(j, "steps", k->steps.steps);
	dl_json_ku64(j, "steps_ns", k->steps.dur_ns);
	dl_json_ku64(j, "comm_wait_ns", k->steps.comm_wait_ns);
	dl_json_key(j, "compute_ns_per_step");
	dl_json_double(j, dl_rank_compute_per_step(&k->steps));
	dl_json_key(j, "comm_wait_ns_per_step");
	dl_json_double(j, dl_rank_comm_wait_per_step(&k->steps));
	dl_json_key(j, "diagnosis");
	dl_report_diagnosis_json(j, k->model->diag);
	dl_json_obj_end(j);
}

/* The drop counters of every rank, added up: what the job lost. */
static void json_drops(struct dl_json *j, const struct dl_rank_view *a, size_t n)
{
	uint64_t total = 0, misses = 0;

	dl_json_key(j, "drops");
	dl_json_obj_begin(j);
	for (size_t i = 0; i < n; i++) {
		total += a[i].model->drops_total;
		misses += a[i].model->recursion_misses;
	}
	dl_json_ku64(j, "events", total);
	for (int d = 0; d < DL_DROP_MAX; d++) {
		uint64_t v = 0;

		if (!dl_drop_name(d))
			continue;
		for (size_t i = 0; i < n; i++)
			v += a[i].model->drops[d];
		dl_json_ku64(j, dl_drop_name(d), v);
	}
	dl_json_ku64(j, "recursion_misses", misses);
	dl_json_key(j, "recursion_misses_by_program");
	dl_json_obj_begin(j);
	for (size_t i = 0; i < n; i++) {
		const struct dl_report_model *m = a[i].model;

		for (size_t p = 0; p < m->nprog_misses; p++) {
			uint64_t v = 0;
			bool seen = false;

			/* One key per program: its first rank's entry says the sum of all. */
			for (size_t e = 0; e < n && !seen; e++)
				for (size_t q = 0; q < a[e].model->nprog_misses && !seen; q++)
					seen = (e < i || (e == i && q < p)) &&
					       !strcmp(a[e].model->prog_misses[q].name, m->prog_misses[p].name);
			if (seen)
				continue;
			for (size_t e = 0; e < n; e++)
				for (size_t q = 0; q < a[e].model->nprog_misses; q++)
					if (!strcmp(a[e].model->prog_misses[q].name, m->prog_misses[p].name))
						v += a[e].model->prog_misses[q].misses;
			dl_json_ku64(j, m->prog_misses[p].name, v);
		}
	}
	dl_json_obj_end(j);
	dl_json_obj_end(j);
}

int dl_ranks_json(FILE *f, const struct dl_rank_view *a, size_t n, const struct dl_finding *sf, int straggler)
{
	struct dl_json j;
	uint64_t start = UINT64_MAX, end = 0, abytes = 0, aops = 0, aunseen = 0;

	for (size_t i = 0; i < n; i++) {
		const struct dl_report_model *m = a[i].model;
		uint64_t st = shifted(m->start_ns, a[i].offset);

		start = st < start ? st : start;
		end = st + m->duration_ns > end ? st + m->duration_ns : end;
		abytes += m->async_io_bytes;
		aops += m->async_io_ops;
		aunseen += m->async_io_unseen;
	}
	dl_json_init(&j, f);
	dl_json_obj_begin(&j);
	dl_json_ku64(&j, "schema", 1);
	dl_json_kstr(&j, "version", DLBPF_VERSION);
	dl_json_ku64(&j, "duration_ns", end > start ? end - start : 0);
	json_drops(&j, a, n);
	dl_json_key(&j, "async_io");
	dl_json_obj_begin(&j);
	dl_json_ku64(&j, "bytes", abytes);
	dl_json_ku64(&j, "ops", aops);
	dl_json_ku64(&j, "unseen_ops", aunseen);
	dl_json_obj_end(&j);
	dl_json_key(&j, "processes");
	dl_json_arr_begin(&j);
	for (size_t i = 0; i < n; i++)
		dl_report_json_procs(&j, a[i].model, (int)i);
	dl_json_arr_end(&j);
	dl_json_key(&j, "steps");
	dl_json_arr_begin(&j);
	for (size_t i = 0; i < n; i++)
		dl_report_steps_items(&j, a[i].model, (int)i);
	dl_json_arr_end(&j);
	dl_json_key(&j, "step_markers");
	dl_json_arr_begin(&j);
	for (size_t i = 0; i < n; i++)
		dl_report_markers_items(&j, a[i].model, (int)i);
	dl_json_arr_end(&j);
	/* The job has no one verdict (each rank's is in ranks[]): its findings, the straggler's first. */
	dl_json_key(&j, "diagnosis");
	dl_json_obj_begin(&j);
	dl_json_key(&j, "findings");
	dl_json_arr_begin(&j);
	if (straggler >= 0)
		dl_report_finding_json(&j, sf, straggler);
	for (size_t i = 0; i < n; i++)
		for (int x = 0; x < a[i].model->diag->nfindings; x++)
			dl_report_finding_json(&j, &a[i].model->diag->findings[x], (int)i);
	dl_json_arr_end(&j);
	dl_json_obj_end(&j);
	dl_json_key(&j, "ranks");
	dl_json_arr_begin(&j);
	for (size_t i = 0; i < n; i++)
		json_rank(&j, &a[i]);
	dl_json_arr_end(&j);
	dl_json_obj_end(&j);
	fputc('\n', f);
	if (fflush(f) || ferror(f))
		return -(errno ? errno : EIO);
	return 0;
}

