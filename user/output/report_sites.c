// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include "output/report_sites.h"
#include "strsafe.h"

/* Sites shown per category in the text report: the few that explain most of it. */
#define TEXT_SITES_PER_CAT 3
/* The JSON lists every site up to this many (a process has a few hundred at most; a loop of dlopens could have more). */
#define JSON_SITES_MAX 1000

/* kind and frames: innermost first (one, or with --stacks its callers too); a native line is not known (0). */
static void site_frames(struct dl_json *j, const struct dl_site_stat *st)
{
	dl_json_kstr(j, "kind", st && st->func ? (st->python ? "python" : "native") : "unknown");
	dl_json_key(j, "frames");
	dl_json_arr_begin(j);
	for (uint32_t k = 0; st && st->func && k <= st->ncallers; k++) {
		int32_t line = k ? st->callers[k - 1].line : st->line;

		dl_json_obj_begin(j);
		dl_json_kstr(j, "file", k ? st->callers[k - 1].obj : st->obj);
		dl_json_kstr(j, "function", k ? st->callers[k - 1].func : st->func);
		/* A Python line the table does not give is 0, as a native frame's. */
		dl_json_ku64(j, "line", st->python && line > 0 ? (uint64_t)line : 0);
		dl_json_obj_end(j);
	}
	dl_json_arr_end(j);
}

static void categories(struct dl_json *j, const uint64_t cat_ns[DL_CAT_COUNT])
{
	dl_json_key(j, "categories");
	dl_json_obj_begin(j);
	for (int k = 0; k < DL_CAT_COUNT; k++)
		dl_json_ku64(j, dl_cat_name(k), cat_ns[k]);
	dl_json_obj_end(j);
}

void dl_report_sites_json(struct dl_json *j, const struct dl_sites *s)
{
	size_t n = s ? s->v.n : 0, *idx = dl_xcalloc(n + 1, sizeof(*idx));

	dl_json_key(j, "call_sites");
	dl_json_arr_begin(j);
	/* Sites without time (entry-only calls off the main thread) still count: order by calls then. */
	n = s ? dl_sites_top(s, DL_CAT_COUNT, idx, JSON_SITES_MAX) : 0;
	for (size_t i = 0; s && i < s->v.n && n < JSON_SITES_MAX; i++)
		if (!s->v.v[i].total_ns)
			idx[n++] = i;
	for (size_t i = 0; i < n; i++) {
		const struct dl_site_stat *st = &s->v.v[idx[i]];

		dl_json_obj_begin(j);
		site_frames(j, st);
		dl_json_ku64(j, "calls", st->calls);
		dl_json_ku64(j, "total_ns", st->total_ns);
		dl_json_ku64(j, "copies", st->copies);
		dl_json_ku64(j, "small_copies", st->small_copies);
		dl_json_ku64(j, "sync_copies", st->sync_copies);
		dl_json_ku64(j, "sync_h2d_large", st->sync_h2d_large);
		categories(j, st->cat_ns);
		dl_json_obj_end(j);
	}
	dl_json_arr_end(j);
	free(idx);
}

void dl_report_step_sites_json(struct dl_json *j, const struct dl_step *st, const struct dl_sites *s)
{
	dl_json_key(j, "top_call_sites");
	dl_json_arr_begin(j);
	for (uint32_t i = 0; i < st->nsites; i++) {
		const struct dl_step_site *ss = &st->top_sites[i];

		dl_json_obj_begin(j);
		site_frames(j, s ? dl_sites_find(s, ss->key) : NULL);
		dl_json_ku64(j, "calls", ss->calls);
		dl_json_ku64(j, "ns", ss->ns);
		categories(j, ss->cat_ns);
		dl_json_obj_end(j);
	}
	dl_json_arr_end(j);
}

void dl_report_sites_text(FILE *f, const struct dl_sites *s, uint64_t nsteps)
{
	struct dl_sbuf esc = { 0 };
	const struct dl_site_stat *unknown = dl_sites_find(s, DL_SITE_UNKNOWN);
	bool header = false;
	char label[1400];

	for (int k = 0; k < DL_CAT_COUNT && nsteps; k++) {
		size_t idx[TEXT_SITES_PER_CAT], n = dl_sites_top(s, (enum dl_cat)k, idx, TEXT_SITES_PER_CAT);

		for (size_t i = 0; i < n; i++) {
			const struct dl_site_stat *st = &s->v.v[idx[i]];

			if (!header)
				fprintf(f, "  call sites (time per step, by category)\n");
			header = true;
			double us = (double)st->cat_ns[k] / 1e3 / (double)nsteps;

			dl_site_stat_label(st, label, sizeof(label));
			/* Under a tenth of a millisecond, in µs: a site of a few µs a step is not "0.000 ms". */
			fprintf(f, "    %-10s %8.1f %s at %s  (%" PRIu64 " calls)\n", dl_cat_name(k), us < 100 ? us : us / 1e3, us < 100 ? "us/step" : "ms/step", dl_text(&esc, label),
				st->calls);
		}
	}
	if (unknown)
		fprintf(f, "  call sites unknown for %" PRIu64 " calls (their return address could not be read)\n",
			unknown->calls);
	dl_sbuf_free(&esc);
}
