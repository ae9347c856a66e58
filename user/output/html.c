// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The HTML report's page: the diagnosis first (what a reader came for), then
 * the data-movement sketch, the steps of each process as charts, and what
 * each process did. The charts are html_svg.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "output/html.h"
#include "output/html_int.h"
#include "output/report.h"
#include "output/report_diag.h"
#include "version.h"
#include "util.h"

/* Kernel/shape pairs listed per process, most launched first: a page, not a dump (the JSON has all). */
#define HTML_MAX_KERNELS 50

/*
 * default-src 'none': the page can fetch nothing and run no script, whatever
 * a name of the traced side might smuggle past the escaping; inline style
 * only, which the page is made of.
 */
static const char head[] =
	"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
	"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";

static const char css[] =
	"body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1280px;padding:0 20px 40px;color:#222}\n"
	"h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:28px}\n"
	"h3{font-size:15px;margin:18px 0 6px}.meta{color:#555;margin:0}\n"
	".verdict{font-size:20px;margin:10px 0 4px}.verdict strong{padding:2px 8px;border-radius:4px;background:#eee}\n"
	".sev-high strong{background:#f4c7c3}.sev-moderate strong{background:#fce8b2}"
	".sev-low strong,.sev-none strong{background:#d9ead3}\n"
	".warn{background:#fce8b2;padding:6px 10px;border-radius:4px}\n"
	".finding{border-left:4px solid #888;padding:2px 12px;margin:10px 0;background:#fafafa}\n"
	"table{border-collapse:collapse;margin:6px 0}th,td{padding:2px 10px;border-bottom:1px solid #e4e4e4;"
	"text-align:right;vertical-align:top}th:first-child,td:first-child{text-align:left}\n"
	"th{background:#f2f2f2;font-weight:600}td.name{text-align:left;font-family:monospace;word-break:break-all}\n"
	"table.evidence td,table.evidence th{font-size:13px}\n"
	".legend{list-style:none;padding:0;margin:6px 0;display:flex;flex-wrap:wrap;gap:4px 16px}\n"
	"span.sw{display:inline-block;width:12px;height:12px;margin:0 5px 0 8px;vertical-align:-1px}"
	".legend span.sw{margin-left:0}\n"
	"svg{display:block;max-width:100%;height:auto;font:11px system-ui,sans-serif}\n"
	"svg .axis{stroke:#888;stroke-width:1}svg .grid{stroke:#e6e6e6;stroke-width:1}\n"
	"svg .median{stroke:#000;stroke-width:1.5;stroke-dasharray:6 4;fill:none}\n"
	"svg .line{stroke:#1f5fa8;stroke-width:1.2;fill:none}svg .dot{fill:#1f5fa8}svg .mark{fill:#000}\n"
	"svg text.label{paint-order:stroke;stroke:#fff;stroke-width:3px}h4{margin:14px 0 2px;font-size:14px}\n"
	".proc{border-top:1px solid #ddd;margin-top:22px}.note{color:#555;font-size:13px}\n";

void html_text(struct dl_html *h, const char *s)
{
	const char *t = dl_text(&h->esc, s);

	for (; *t; t++) {
		switch (*t) {
		case '&': fputs("&amp;", h->f); break;
		case '<': fputs("&lt;", h->f); break;
		case '>': fputs("&gt;", h->f); break;
		case '"': fputs("&quot;", h->f); break;
		case '\'': fputs("&#39;", h->f); break;
		default: fputc(*t, h->f);
		}
	}
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static void td_bytes(struct dl_html *h, uint64_t b)
{
	char buf[32];

	dl_fmt_bytes(buf, sizeof(buf), b);
	fprintf(h->f, "<td>%s</td>", buf);
}

static void page_head(struct dl_html *h, const struct dl_diagnosis *d)
{
	fputs(head, h->f);
	fprintf(h->f, "<title>dlbpf report: %s</title>\n<style>\n", d->nsteps ? dl_verdict_name(d->verdict) : "no steps");
	fputs(css, h->f);
	for (int k = 0; k < DL_CAT_COUNT; k++)
		fprintf(h->f, ".c-%s{fill:%s;background:%s}\n", dl_cat_name(k), html_cat_colour[k], html_cat_colour[k]);
	fputs("</style>\n</head>\n<body>\n", h->f);
}

static void overview(struct dl_html *h, const struct dl_report_model *m)
{
	/* The text report's count: every record the kernel wrote (files and wake-ups included). */
	fprintf(h->f, "<h1>dlbpf report</h1>\n<p class=\"meta\">dlbpf %s: traced %zu process%s for %.2f s, %" PRIu64
		" events, %" PRIu64 " dropped</p>\n", DLBPF_VERSION, m->nprocs, m->nprocs == 1 ? "" : "es",
		(double)m->duration_ns / 1e9, m->events, m->drops_total);
	if (m->drops_total)
		fprintf(h->f, "<p class=\"warn\">%" PRIu64 " events were lost in the kernel: the figures below "
			"undercount (see the dropped-events finding).</p>\n", m->drops_total);
}

static void evidence_value(struct dl_html *h, const struct dl_evidence *e)
{
	if (e->text)
		html_text(h, e->text);
	else if (e->value == floor(e->value) && fabs(e->value) < 9e15)
		fprintf(h->f, "%" PRId64, (int64_t)e->value);
	else
		fprintf(h->f, "%.4g", e->value);
}

static void diagnosis(struct dl_html *h, const struct dl_diagnosis *d)
{
	fputs("<section id=\"diagnosis\">\n<h2>Diagnosis</h2>\n", h->f);
	if (!d->nsteps) {
		fputs("<p class=\"verdict\">Verdict: <strong id=\"verdict\">none</strong></p>\n<p>No steps were found, "
		      "so there is no verdict: a step needs a repeating marker (see --step-on).</p>\n", h->f);
	} else {
		fprintf(h->f, "<p class=\"verdict sev-%s\">Verdict: <strong id=\"verdict\">%s</strong> "
			"<span id=\"severity\">(%s, %.0f%% of step time)</span></p>\n<p class=\"message\">",
			dl_severity_name(d->severity), dl_verdict_name(d->verdict),
			d->severity == DL_SEV_NONE ? "healthy" : dl_severity_name(d->severity), 100 * d->share);
		html_text(h, d->message);
		fputs("</p>\n", h->f);
		for (int i = 0; i < d->nsecondary; i++)
			fprintf(h->f, "<p class=\"secondary\">also %s: %.0f%% (%s)</p>\n",
				dl_verdict_name(d->secondary[i].verdict), 100 * d->secondary[i].share,
				dl_severity_name(d->secondary[i].severity));
	}
	fprintf(h->f, "<h3>Findings (%d)</h3>\n", d->nfindings);
	if (!d->nfindings)
		fputs("<p>None.</p>\n", h->f);
	for (int i = 0; i < d->nfindings; i++) {
		const struct dl_finding *x = &d->findings[i];

		fprintf(h->f, "<div class=\"finding\" id=\"finding-%s\">\n<h4><code>[%s]</code></h4>\n<p>", x->rule, x->rule);
		html_text(h, x->message);
		fputs("</p>\n", h->f);
		if (x->nev) {
			fputs("<table class=\"evidence\"><tr><th>evidence</th><th>value</th></tr>\n", h->f);
			for (int e = 0; e < x->nev; e++) {
				fprintf(h->f, "<tr><td>%s</td><td>", x->ev[e].key);
				evidence_value(h, &x->ev[e]);
				fputs("</td></tr>\n", h->f);
			}
			fputs("</table>\n", h->f);
		}
		fputs("</div>\n", h->f);
	}
	fputs("</section>\n", h->f);
}

static void sketch(struct dl_html *h, const struct dl_diagnosis *d)
{
	const struct dl_sketch *k = &d->sketch;

	if (!d->nsteps)
		return;
	fputs("<section id=\"sketch\">\n<h2>Data movement: the paper sketch</h2>\n<p>What an average step moves, "
	      "and the least time that takes at the peaks, against the median step.</p>\n<table>\n"
	      "<tr><th>hop</th><th>per step</th><th>peak</th><th>time at the peak</th></tr>\n", h->f);
	fprintf(h->f, "<tr><td>disk reads</td><td>%.3f MB</td>", k->disk_bytes / 1e6);
	if (k->disk_mbps > 0)
		fprintf(h->f, "<td>%.0f MB/s (%s)</td><td>%.3f ms</td></tr>\n", k->disk_mbps, k->disk_src, k->disk_ns / 1e6);
	else
		fputs("<td>unknown: too few reads to measure (--disk-mbps)</td><td>-</td></tr>\n", h->f);
	if (k->cuda)
		fprintf(h->f, "<tr><td>PCIe (H2D + D2H)</td><td>%.3f MB</td><td>%.1f GB/s (%s)</td><td>%.3f ms</td></tr>\n",
			k->pcie_bytes / 1e6, k->pcie_gbps, k->pcie_src, k->pcie_ns / 1e6);
	else   /* no CUDA runtime loaded: no PCIe hop; the CPU a step used, measured */
		fprintf(h->f, "<tr><td>CPU (stepping thread + workers)</td><td>%.3f ms</td><td>measured</td>"
			      "<td>%.3f ms</td></tr>\n", k->cpu_ns / 1e6, k->cpu_ns / 1e6);
	fprintf(h->f, "<tr><th>sketch</th><td></td><td>bounded by %s</td><th>%.3f ms</th></tr>\n", k->bound_by,
		k->bound_ns / 1e6);
	fprintf(h->f, "<tr><th>median step</th><td></td><td></td><th>%.3f ms</th></tr>\n</table>\n", k->step_ns / 1e6);
	if (k->bound_ns > 0)
		fprintf(h->f, "<p>The median step takes <strong>%.0fx</strong> the sketch%s.</p>\n",
			k->step_ns / k->bound_ns, d->verdict == DL_V_GPU ? " (a step that waits on the GPU is bounded "
			"by compute, which the sketch does not know)" : "");
	html_svg_sketch(h, k);
	fputs("</section>\n", h->f);
}

static void legend(struct dl_html *h, const bool present[DL_CAT_COUNT], const struct dl_step *steps, size_t n)
{
	uint64_t cat[DL_CAT_COUNT] = { 0 }, total = 0;

	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < DL_CAT_COUNT; k++) {
			cat[k] += steps[i].cat_ns[k];
			total += steps[i].cat_ns[k];
		}
	fputs("<ul class=\"legend\">\n", h->f);
	for (int k = 0; k < DL_CAT_COUNT; k++)
		if (present[k])
			fprintf(h->f, "<li data-cat=\"%s\"><span class=\"sw c-%s\"></span>%s %.1f%%</li>\n", dl_cat_name(k),
				dl_cat_name(k), dl_cat_name(k), dl_pct(cat[k], total));
	fputs("</ul>\n", h->f);
}

static void steps_of(struct dl_html *h, const struct dl_report_steps *rs)
{
	const struct dl_corr_proc *p = rs->p;
	size_t first = rs->unlisted, n = p->nsteps - first;
	bool present[DL_CAT_COUNT] = { false };
	struct dl_step_stats st;

	fprintf(h->f, "<div class=\"steps\" data-pid=\"%d\">\n<h3>Steps of pid %d (main thread %u)</h3>\n<p>marker: ",
		p->pid, p->pid, p->main_tid);
	html_text(h, p->marker_desc);   /* holds a symbol's name */
	fputs("</p>\n", h->f);
	if (!rs->total) {
		fputs("<p>No complete step.</p>\n</div>\n", h->f);
		return;
	}
	st = rs->st;   /* the model's: not freed here */
	fprintf(h->f, "<p>%" PRIu64 " steps, median %s%.2f ms, p90 %s%.2f ms, confidence %s (CV %.2f)</p>\n",
		st.sum.n + st.outliers + st.sum.partial, st.exact ? "" : "~", ms(st.median_ns), st.exact ? "" : "~", ms(st.p90_ns),
		dl_step_confidence(st.cv, st.sum.n), st.cv);
	if (st.sum.n + st.outliers + st.sum.partial > n)
		fprintf(h->f, "<p class=\"note\">The charts show the last %zu steps; the %" PRIu64 " before them were "
			"folded into totals (--keep-steps). The median and p90 cover every step (~: within %.1f%%).</p>\n",
			n, st.sum.n + st.outliers + st.sum.partial - n, 100 * DL_FOLD_REL_ERR);
	if (st.outliers)
		fprintf(h->f, "<p class=\"note\">%" PRIu64 " step%s (%.2f ms in all) lasted over %dx the p90 of the "
			"others: one-offs (the loaders' start, a checkpoint, a stall), charted but left out of the totals, "
			"the median, the p90 and the verdict.</p>\n", st.outliers, st.outliers > 1 ? "s" : "",
			ms(st.outlier_ns), DL_OUTLIER_P90);
	if (p->startup.relearned)
		fprintf(h->f, "<p class=\"note\">%" PRIu64 " start-up steps (%.2f ms), cut by a marker that then stopped "
			"recurring, are left out; the steps were learned again from the calls after them.</p>\n",
			p->startup.steps, ms(p->startup.dur_ns));
	if (n) {
		fputs("<h4>Breakdown per step</h4>\n", h->f);
		html_svg_step_bars(h, p->steps + first, n, st.median_ns, present);
		legend(h, present, p->steps + first, n);
		fputs("<h4>Step duration over time</h4>\n", h->f);
		html_svg_step_line(h, p->steps + first, n, st.median_ns);
	}
	fputs("</div>\n", h->f);
}

static void steps_section(struct dl_html *h, const struct dl_report_model *m)
{
	fputs("<section id=\"steps\">\n<h2>Steps</h2>\n", h->f);
	for (size_t i = 0; i < m->nsteps; i++)
		if (m->steps[i].p->decided)
			steps_of(h, &m->steps[i]);
	fputs("</section>\n", h->f);
}

static void cuda_calls(struct dl_html *h, const struct dl_proc *p)
{
	fputs("<table class=\"calls\"><tr><th>CUDA call</th><th>count</th><th>total ms</th><th>errors</th></tr>\n", h->f);
	for (unsigned i = 1; i < DL_API_COUNT; i++) {
		const struct dl_api_stat *a = &p->calls[i];

		if (a->count)
			fprintf(h->f, "<tr><td>%s</td><td>%" PRIu64 "</td><td>%.3f</td><td>%" PRIu64 "</td></tr>\n",
				dl_api_by_id(i)->name, a->count, ms(a->total_ns), a->errors);
	}
	fputs("</table>\n", h->f);
}

static void copies(struct dl_html *h, const struct dl_proc *p)
{
	bool any = false;

	for (int d = 0; d < DL_DIR_COUNT; d++)
		any |= p->copies[d].count > 0;
	if (!any)
		return;
	fputs("<table class=\"copies\"><tr><th>copies</th><th>count</th><th>bytes</th><th>total ms</th><th>pinned</th>"
	      "<th>pageable</th><th>under 64 KiB</th></tr>\n", h->f);
	for (int d = 0; d < DL_DIR_COUNT; d++) {
		const struct dl_copy_stat *c = &p->copies[d];

		if (!c->count)
			continue;
		fprintf(h->f, "<tr data-dir=\"%s\"><td>%s</td><td>%" PRIu64 "</td>", dl_dir_name(d), dl_dir_name(d), c->count);
		td_bytes(h, c->bytes);
		fprintf(h->f, "<td>%.3f</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td></tr>\n",
			ms(c->total_ns), c->count - c->pageable, c->pageable, c->small);
	}
	fputs("</table>\n", h->f);
	html_svg_copy_sizes(h, p);
}

static int by_launches(const void *a, const void *b)
{
	uint64_t x = (*(const struct dl_kernel_stat *const *)a)->count, y = (*(const struct dl_kernel_stat *const *)b)->count;

	return x < y ? 1 : x > y ? -1 : 0;
}

static void kernels(struct dl_html *h, const struct dl_proc *p)
{
	const struct dl_kernel_stat **order;
	size_t shown;
	uint64_t launches = 0;

	if (!p->nkernels)
		return;
	order = dl_xcalloc(p->nkernels, sizeof(*order));
	for (size_t k = 0; k < p->nkernels; k++) {
		order[k] = &p->kernels[k];
		launches += p->kernels[k].count;
	}
	qsort(order, p->nkernels, sizeof(*order), by_launches);
	shown = p->nkernels < HTML_MAX_KERNELS ? p->nkernels : HTML_MAX_KERNELS;
	fprintf(h->f, "<p>%" PRIu64 " kernel launches of %zu kernel/shape pairs%s</p>\n", launches, p->nkernels,
		shown < p->nkernels ? " (the most launched listed)" : "");
	fputs("<table class=\"kernels\"><tr><th>kernel</th><th>grid</th><th>block</th><th>shared mem</th>"
	      "<th>launches</th></tr>\n", h->f);
	for (size_t i = 0; i < shown; i++) {
		const struct dl_kernel_stat *k = order[i];

		fputs("<tr><td class=\"name\">", h->f);
		html_text(h, k->name ? k->name : "?");
		fprintf(h->f, "</td><td>(%u,%u,%u)</td><td>(%u,%u,%u)</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td></tr>\n",
			k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->shmem, k->count);
	}
	fputs("</table>\n", h->f);
	if (shown < p->nkernels)
		fprintf(h->f, "<p class=\"note\">%zu more kernel/shape pairs are in the JSON summary.</p>\n",
			p->nkernels - shown);
	free(order);
}

static void disk_cpu(struct dl_html *h, const struct dl_proc *p)
{
	fputs("<table class=\"disk\"><tr><th>disk</th><th>bytes</th><th>requests</th><th>waiting ms</th>"
	      "<th>I/O errors</th><th>no completion seen</th></tr>\n<tr><td>read</td>", h->f);
	td_bytes(h, p->io.read_bytes);
	fprintf(h->f, "<td>%" PRIu64 "</td><td rowspan=\"2\">%.3f</td><td rowspan=\"2\">%" PRIu64 "</td>"
		"<td rowspan=\"2\">%" PRIu64 "</td></tr>\n<tr><td>write</td>", p->io.read_ops, ms(p->io.wait_ns),
		p->io.error_ops, p->io.unseen_ops);
	td_bytes(h, p->io.write_bytes);
	fprintf(h->f, "<td>%" PRIu64 "</td></tr>\n</table>\n", p->io.write_ops);
	fprintf(h->f, "<table class=\"cpu\"><tr><th>CPU</th><th>on-CPU ms</th><th>runqueue ms</th><th>blocked ms</th>"
		"<th>of it S</th><th>of it D</th><th>switches</th><th>threads</th></tr>\n<tr><td>all threads</td>"
		"<td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%" PRIu64 "</td><td>%u</td></tr>\n"
		"</table>\n", ms(p->sched.oncpu_ns), ms(p->sched.runq_ns), ms(p->sched.blocked_ns), ms(p->sched.sleep_ns),
		ms(p->sched.disk_ns), p->sched.switches, p->threads);
}

static void process(struct dl_html *h, const struct dl_proc *p)
{
	uint64_t calls = 0;

	fprintf(h->f, "<div class=\"proc\" data-pid=\"%d\">\n<h3>PID %d (<span class=\"comm\">", p->pid, p->pid);
	html_text(h, p->comm[0] ? p->comm : "?");
	fputs("</span>)", h->f);
	if (p->nspid && p->nspid != p->pid)
		fprintf(h->f, " [pid %d in its namespace]", p->nspid);
	if (p->ppid)
		fprintf(h->f, ", parent %d", p->ppid);
	if (p->exited)
		fprintf(h->f, ", exited during the trace (code %d)", p->exit_code);
	fputs("</h3>\n", h->f);
	if (dl_container_known(&p->container)) {
		static const char *const label[] = { "container ", " (", " pod ", " slurm job " };
		const char *v[] = { p->container.id, p->container.runtime, p->container.pod_uid, p->container.slurm_job };

		fputs("<p class=\"where\">", h->f);
		for (int i = 0; i < 4; i++) {
			if (!v[i][0])
				continue;
			fputs(label[i], h->f);
			html_text(h, v[i]);
			if (i == 1)
				fputc(')', h->f);
		}
		fputs("</p>\n", h->f);
	}
	for (unsigned i = 1; i < DL_API_COUNT; i++)
		calls += p->calls[i].count;
	if (!p->cuda_libs && p->unprobed) {
		fputs("<p>CUDA: not traced: ", h->f);
		html_text(h, p->unprobed_path);
		fprintf(h->f, " is mapped but could not be probed (%s)</p>\n", strerror(p->unprobed_errno));
	} else if (!p->cuda_libs)
		fputs("<p>CUDA: not found (no CUDA runtime mapped in this process)</p>\n", h->f);
	else if (!calls)
		fprintf(h->f, "<p>CUDA: %d runtime%s attached, no calls</p>\n", p->cuda_libs, p->cuda_libs == 1 ? "" : "s");
	else {
		cuda_calls(h, p);
		copies(h, p);
		kernels(h, p);
	}
	disk_cpu(h, p);
	fputs("</div>\n", h->f);
}

/* As the text report folds them, closed by default: a <details> block needs no script. */
static void bystanders(struct dl_html *h, const struct dl_report_model *m)
{
	size_t n = m->nbystanders;

	if (!n)
		return;
	fprintf(h->f, "<details id=\"bystanders\" data-count=\"%zu\">\n<summary>%zu more process%s made no CUDA "
		"call, did no disk I/O and ran under 1%% of a CPU</summary>\n", n, n, n == 1 ? "" : "es");
	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].bystander)
			process(h, m->procs[i].fig);
	fputs("</details>\n", h->f);
}

int dl_report_html(FILE *f, const struct dl_report_model *m)
{
	const struct dl_diagnosis *d = m->diag;
	struct dl_html h = { .f = f };

	page_head(&h, d);
	overview(&h, m);
	diagnosis(&h, d);
	sketch(&h, d);
	steps_section(&h, m);
	fputs("<section id=\"processes\">\n<h2>Processes</h2>\n", f);
	for (size_t i = 0; i < m->nprocs; i++)
		if (!m->procs[i].bystander)
			process(&h, m->procs[i].fig);
	bystanders(&h, m);
	if (m->async_io_ops)
		fprintf(f, "<p>Async I/O by kernel threads (not attributed): %.1f MB in %" PRIu64 " requests</p>\n",
			(double)m->async_io_bytes / 1e6, m->async_io_ops);
	fputs("</section>\n</body>\n</html>\n", f);
	dl_sbuf_free(&h.esc);
	if (fflush(f) || ferror(f)) {
		if (!errno)
			errno = EIO;
		return -1;
	}
	return 0;
}
