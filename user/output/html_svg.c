// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The HTML report's charts, as inline SVG: drawn here once, so the page needs
 * no script and shows the same offline, printed or in any browser. Hovering a
 * bar shows its <title> (the browser's own tooltip), which is all the
 * interaction a report needs.
 */
#include <inttypes.h>
#include <math.h>
#include "output/html_int.h"

/* One chart width for all: the page's reading width at 1280 px, less its padding. */
#define CHART_W 1200
#define MARGIN_L 64
#define MARGIN_R 12
#define MARGIN_T 12
#define MARGIN_B 40
#define PLOT_W (CHART_W - MARGIN_L - MARGIN_R)
/* Narrower bars than 2 px (1 px of bar and 1 of gap) cannot be told apart: past that, steps are binned. */
#define MIN_BAR_PX 2
#define MAX_BARS (PLOT_W / MIN_BAR_PX)
/* A line has no more to show than a point per pixel column. */
#define MAX_POINTS PLOT_W

/* Tableau 10's colour-blind-aware hues, one per category, in priority order. */
const char *const html_cat_colour[DL_CAT_COUNT] = {
	[DL_CAT_GPU_WAIT] = "#4e79a7", [DL_CAT_COMM_WAIT] = "#76b7b2", [DL_CAT_H2D] = "#f28e2b", [DL_CAT_D2H] = "#ffbe7d",
	[DL_CAT_LAUNCH] = "#e15759", [DL_CAT_CUDA_OTHER] = "#b07aa1", [DL_CAT_IO_WAIT] = "#9c755f",
	[DL_CAT_INPUT_WAIT] = "#59a14f", [DL_CAT_RUNQ] = "#edc948", [DL_CAT_CPU] = "#bab0ac",
};

static const char *const dir_colour[DL_DIR_COUNT] = {
	[DL_DIR_H2H] = "#bab0ac", [DL_DIR_H2D] = "#f28e2b", [DL_DIR_D2H] = "#4e79a7", [DL_DIR_D2D] = "#76b7b2",
	[DL_DIR_DEFAULT] = "#b07aa1",
};

/* A tick step of 1, 2 or 5 times a power of ten that cuts [0, max] into about four parts. */
static double nice_tick(double max)
{
	double raw = max / 4, mag, f;

	if (!(raw > 0))
		return 1;
	mag = pow(10, floor(log10(raw)));
	f = raw / mag;
	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

/* Grid lines and labels of a y axis in ms over [0, top]; returns top rounded up to a tick. */
static double y_axis(struct dl_html *h, double top_ms, int plot_h)
{
	double tick = nice_tick(top_ms), top = ceil(top_ms / tick - 1e-9) * tick;

	if (!(top > 0))
		top = tick;
	for (double t = 0; t <= top + tick / 2; t += tick) {
		double y = MARGIN_T + plot_h - t / top * plot_h;

		fprintf(h->f, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
			"<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g ms</text>\n", MARGIN_L, MARGIN_L + PLOT_W, y, y,
			MARGIN_L - 6, y + 4, t);
	}
	fprintf(h->f, "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n", MARGIN_L, MARGIN_L + PLOT_W,
		MARGIN_T + plot_h, MARGIN_T + plot_h);
	return top;
}

static void median_line(struct dl_html *h, uint64_t median_ns, double top_ms, int plot_h)
{
	double y = MARGIN_T + plot_h - (double)median_ns / 1e6 / top_ms * plot_h;

	fprintf(h->f, "<line class=\"median\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"><title>median step %.3f ms"
		"</title></line><text class=\"label\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">median %.2f ms</text>\n", MARGIN_L,
		MARGIN_L + PLOT_W, y, y, (double)median_ns / 1e6, MARGIN_L + PLOT_W - 4, y - 4, (double)median_ns / 1e6);
}

/* Steps per bin so that at most max bins are drawn. */
static size_t per_bin(size_t n, size_t max)
{
	return n <= max ? 1 : (n + max - 1) / max;
}

/* The listed step nearest the median of every step: the one marked. */
static size_t median_step(const struct dl_step *steps, size_t n, uint64_t median_ns)
{
	size_t best = 0;
	uint64_t best_d = UINT64_MAX;

	for (size_t i = 0; i < n; i++) {
		uint64_t d = steps[i].dur_ns > median_ns ? steps[i].dur_ns - median_ns : median_ns - steps[i].dur_ns;

		if (d < best_d) {
			best = i;
			best_d = d;
		}
	}
	return best;
}

static void bar(struct dl_html *h, const struct dl_step *steps, size_t cnt, double x, double w, double top_ms,
		int plot_h, bool marked)
{
	uint64_t cat[DL_CAT_COUNT] = { 0 }, dur = 0;
	double y = MARGIN_T + plot_h;

	for (size_t i = 0; i < cnt; i++) {
		dur += steps[i].dur_ns;
		for (int k = 0; k < DL_CAT_COUNT; k++)
			cat[k] += steps[i].cat_ns[k];
	}
	fprintf(h->f, "<g class=\"bar%s\" data-index=\"%u\" data-steps=\"%zu\" data-dur-ns=\"%" PRIu64 "\"><title>",
		marked ? " median-step" : "", steps[0].index, cnt, dur / cnt);
	if (cnt == 1)
		fprintf(h->f, "step %u: %.3f ms, %s", steps[0].index, (double)dur / 1e6, dl_verdict_name(steps[0].verdict));
	else
		fprintf(h->f, "steps %u-%u, mean %.3f ms", steps[0].index, steps[cnt - 1].index, (double)dur / 1e6 / (double)cnt);
	for (int k = 0; k < DL_CAT_COUNT; k++)
		if (cat[k])
			fprintf(h->f, "\n%s %.3f ms", dl_cat_name(k), (double)cat[k] / 1e6 / (double)cnt);
	fputs("</title>", h->f);
	for (int k = 0; k < DL_CAT_COUNT; k++) {
		double bh = (double)cat[k] / 1e6 / (double)cnt / top_ms * plot_h;

		if (!cat[k])
			continue;
		y -= bh;
		fprintf(h->f, "<rect class=\"c-%s\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>", dl_cat_name(k),
			x, y, w, bh);
	}
	fputs("</g>\n", h->f);
}

void html_svg_step_bars(struct dl_html *h, const struct dl_step *steps, size_t n, uint64_t median_ns,
			bool present[DL_CAT_COUNT])
{
	const int plot_h = 280;
	size_t per = per_bin(n, MAX_BARS), nbars = (n + per - 1) / per, med = median_step(steps, n, median_ns);
	double max_ms = (double)median_ns / 1e6, top, bw = (double)PLOT_W / (double)nbars;

	for (size_t b = 0; b < nbars; b++) {
		size_t lo = b * per, hi = lo + per < n ? lo + per : n;
		uint64_t dur = 0;

		for (size_t i = lo; i < hi; i++) {
			dur += steps[i].dur_ns;
			for (int k = 0; k < DL_CAT_COUNT; k++)
				present[k] |= steps[i].cat_ns[k] > 0;
		}
		if ((double)dur / 1e6 / (double)(hi - lo) > max_ms)
			max_ms = (double)dur / 1e6 / (double)(hi - lo);
	}
	if (per == 1)
		fprintf(h->f, "<p class=\"note\">Time of each step by category: one bar per step (%zu). The dashed line "
			"is the median step; &#9650; marks step %u, the one nearest it.</p>\n", n, steps[med].index);
	else
		fprintf(h->f, "<p class=\"note\">Time of each step by category: %zu steps are too many to tell apart, so "
			"each bar is the mean of %zu consecutive steps (%zu bars, the last of %zu). The dashed line is the "
			"median step; &#9650; marks the bar holding step %u, the one nearest it.</p>\n", n, per, nbars,
			n - (nbars - 1) * per, steps[med].index);
	fprintf(h->f, "<svg class=\"step-bars\" data-steps=\"%zu\" data-per-bar=\"%zu\" data-bars=\"%zu\" "
		"viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"time of each step by "
		"category\">\n", n, per, nbars, CHART_W, MARGIN_T + plot_h + MARGIN_B, CHART_W,
		MARGIN_T + plot_h + MARGIN_B);
	top = y_axis(h, max_ms, plot_h);
	for (size_t b = 0; b < nbars; b++) {
		size_t lo = b * per, cnt = lo + per < n ? per : n - lo;

		bar(h, steps + lo, cnt, MARGIN_L + (double)b * bw, bw > 3 ? bw * 0.85 : bw * 0.6, top, plot_h,
		    med / per == b);
	}
	median_line(h, median_ns, top, plot_h);
	{
		double x = MARGIN_L + ((double)(med / per) + 0.5) * bw;
		int y = MARGIN_T + plot_h;

		fprintf(h->f, "<path class=\"mark\" d=\"M%.1f %d l-5 9 h10 z\"><title>median step: step %u, %.3f ms</title>"
			"</path>\n", x, y + 2, steps[med].index, (double)steps[med].dur_ns / 1e6);
	}
	/* A label at about every eighth of the axis: the index of the bar's first step. */
	for (size_t b = 0; b < nbars; b += nbars > 8 ? nbars / 8 : 1)
		fprintf(h->f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%u</text>\n", MARGIN_L + ((double)b + 0.5) * bw,
			MARGIN_T + plot_h + 24, steps[b * per].index);
	fprintf(h->f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n</svg>\n", MARGIN_L + PLOT_W / 2,
		MARGIN_T + plot_h + 38);
}

/* The mean duration (ms) of steps[lo..hi). */
static double mean_ms(const struct dl_step *steps, size_t lo, size_t hi)
{
	uint64_t dur = 0;

	for (size_t i = lo; i < hi; i++)
		dur += steps[i].dur_ns;
	return (double)dur / 1e6 / (double)(hi - lo);
}

void html_svg_step_line(struct dl_html *h, const struct dl_step *steps, size_t n, uint64_t median_ns)
{
	const int plot_h = 200;
	/* Few enough points to see one by one: a dot each (two modes of step time show as two rows). */
	const size_t dots_max = 300;
	size_t per = per_bin(n, MAX_POINTS), npoints = (n + per - 1) / per;
	uint64_t t0 = steps[0].start_ns, t1 = steps[n - 1].start_ns + steps[n - 1].dur_ns;
	double span = t1 > t0 ? (double)(t1 - t0) : 1, max_ms = (double)median_ns / 1e6, top, tick;

	for (size_t lo = 0; lo < n; lo += per)
		max_ms = fmax(max_ms, mean_ms(steps, lo, lo + per < n ? lo + per : n));
	fprintf(h->f, "<p class=\"note\">Step duration against the time the step began (seconds into the first "
		"listed step)%s: warm-up shows at the left, regressions as a rise.</p>\n",
		per > 1 ? ", each point the mean of consecutive steps" : "");
	fprintf(h->f, "<svg class=\"step-line\" data-points=\"%zu\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
		"role=\"img\" aria-label=\"step duration over time\">\n", npoints, CHART_W, MARGIN_T + plot_h + MARGIN_B,
		CHART_W, MARGIN_T + plot_h + MARGIN_B);
	top = y_axis(h, max_ms, plot_h);
	for (int pass = 0; pass < (npoints <= dots_max ? 2 : 1); pass++) {
		if (!pass)
			fputs("<polyline class=\"line\" points=\"", h->f);
		for (size_t lo = 0; lo < n; lo += per) {
			double x = MARGIN_L + (double)(steps[lo].start_ns - t0) / span * PLOT_W;
			double y = MARGIN_T + plot_h - mean_ms(steps, lo, lo + per < n ? lo + per : n) / top * plot_h;

			if (!pass)
				fprintf(h->f, "%.1f,%.1f ", x, y);
			else
				fprintf(h->f, "<circle class=\"dot\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\"/>", x, y);
		}
		fputs(pass ? "\n" : "\"/>\n", h->f);
	}
	median_line(h, median_ns, top, plot_h);
	tick = nice_tick(span / 1e9);
	for (double t = 0; t <= span / 1e9 + 1e-9; t += tick)
		fprintf(h->f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g s</text>\n",
			MARGIN_L + t * 1e9 / span * PLOT_W, MARGIN_T + plot_h + 18, t);
	fputs("</svg>\n", h->f);
}

static void size_label(char *buf, size_t len, uint64_t b)
{
	if (b >= 1u << 20)
		snprintf(buf, len, "%" PRIu64 " MiB", b >> 20);
	else
		snprintf(buf, len, "%" PRIu64 " KiB", b >> 10);
}

void html_svg_copy_sizes(struct dl_html *h, const struct dl_proc *p)
{
	const int row = 20, label_w = 150, bar_w = 700, width = label_w + bar_w + 120;
	uint64_t bucket[DL_COPY_SIZE_BUCKETS] = { 0 }, max = 0, sized = 0, count = 0;

	for (int d = 0; d < DL_DIR_COUNT; d++) {
		count += p->copies[d].count;
		for (unsigned b = 0; b < DL_COPY_SIZE_BUCKETS; b++)
			bucket[b] += p->copies[d].sizes[b];
	}
	for (unsigned b = 0; b < DL_COPY_SIZE_BUCKETS; b++) {
		sized += bucket[b];
		if (bucket[b] > max)
			max = bucket[b];
	}
	if (!sized) {
		fputs("<p class=\"note\">No copy sizes: copies counted in the kernel (--summary) carry none.</p>\n", h->f);
		return;
	}
	fprintf(h->f, "<p class=\"note\">Copies by size (powers of 4), by direction:");
	for (int d = 0; d < DL_DIR_COUNT; d++)
		if (p->copies[d].count)
			fprintf(h->f, " <span class=\"sw\" style=\"background:%s\"></span>%s", dir_colour[d], dl_dir_name(d));
	if (sized != count)
		fprintf(h->f, ". %" PRIu64 " of the %" PRIu64 " copies have a size here (--duty scales counts, not "
			"sizes)", sized, count);
	fputs(".</p>\n", h->f);
	fprintf(h->f, "<svg class=\"copy-sizes\" data-copies=\"%" PRIu64 "\" viewBox=\"0 0 %d %d\" width=\"%d\" "
		"height=\"%d\" role=\"img\" aria-label=\"copies by size\">\n", sized, width, row * DL_COPY_SIZE_BUCKETS + 4,
		width, row * DL_COPY_SIZE_BUCKETS + 4);
	for (unsigned b = 0; b < DL_COPY_SIZE_BUCKETS; b++) {
		char lo[32], hi[32];
		double x = label_w, y = b * row + 2;

		size_label(lo, sizeof(lo), dl_copy_size_bucket_floor(b));
		if (b + 1 < DL_COPY_SIZE_BUCKETS)
			size_label(hi, sizeof(hi), dl_copy_size_bucket_floor(b + 1));
		fprintf(h->f, "<g class=\"size-bucket\" data-bucket=\"%u\" data-count=\"%" PRIu64 "\">", b, bucket[b]);
		if (b == 0)
			fprintf(h->f, "<text x=\"%d\" y=\"%.0f\" text-anchor=\"end\">under %s</text>", label_w - 8, y + 13, hi);
		else if (b + 1 < DL_COPY_SIZE_BUCKETS)
			fprintf(h->f, "<text x=\"%d\" y=\"%.0f\" text-anchor=\"end\">%s to %s</text>", label_w - 8, y + 13, lo, hi);
		else
			fprintf(h->f, "<text x=\"%d\" y=\"%.0f\" text-anchor=\"end\">%s or more</text>", label_w - 8, y + 13, lo);
		for (int d = 0; d < DL_DIR_COUNT; d++) {
			double w = (double)p->copies[d].sizes[b] / (double)max * bar_w;

			if (!p->copies[d].sizes[b])
				continue;
			fprintf(h->f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s: %" PRIu64
				"</title></rect>", x, y, w < 1 ? 1 : w, row - 4, dir_colour[d], dl_dir_name(d),
				p->copies[d].sizes[b]);
			x += w < 1 ? 1 : w;
		}
		if (bucket[b])
			fprintf(h->f, "<text x=\"%.1f\" y=\"%.0f\">%" PRIu64 "</text>", x + 6, y + 13, bucket[b]);
		fputs("</g>\n", h->f);
	}
	fputs("</svg>\n", h->f);
}

void html_svg_sketch(struct dl_html *h, const struct dl_sketch *k)
{
	/* zero: what a row without time says (no bytes moved, or a peak not known). */
	struct sketch_row { const char *what; double ns; const char *fill, *zero; };
	/* No CUDA runtime loaded: the CPU a step used in place of a PCIe hop it does not have. */
	const struct sketch_row pcie = { "PCIe at its peak", k->pcie_ns, html_cat_colour[DL_CAT_H2D], "nothing copied" },
				cpu = { "CPU used", k->cpu_ns, html_cat_colour[DL_CAT_CPU], "no CPU" };
	const struct sketch_row rows[] = {
		{ "disk at its peak", k->disk_ns, html_cat_colour[DL_CAT_IO_WAIT],
		  k->disk_mbps > 0 ? "nothing read" : "unknown peak" },
		k->cuda ? pcie : cpu,
		{ "the sketch", k->bound_ns, "#555", "nothing moved" },
		{ "the median step", k->step_ns, "#000", "0 ms" },
	};
	const int n = sizeof(rows) / sizeof(rows[0]), row = 24, label_w = 150, bar_w = 800, width = label_w + bar_w + 120;
	double lo = INFINITY, hi = 0;

	for (int i = 0; i < n; i++)
		if (rows[i].ns > 0) {
			lo = fmin(lo, rows[i].ns);
			hi = fmax(hi, rows[i].ns);
		}
	if (!(hi > 0))
		return;
	/* Decades of ns, whole ones: a step can be 1000x its sketch, which only a log scale shows with it. */
	lo = floor(log10(lo));
	hi = ceil(log10(hi));
	if (hi <= lo)
		hi = lo + 1;
	fprintf(h->f, "<svg class=\"sketch\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
		"aria-label=\"the paper sketch against the median step\">\n", width, n * row + 24, width, n * row + 24);
	for (int i = 0; i < n; i++) {
		double y = i * row + 2, w = rows[i].ns > 0 ? (log10(rows[i].ns) - lo) / (hi - lo) * bar_w : 0;

		fprintf(h->f, "<text x=\"%d\" y=\"%.0f\" text-anchor=\"end\">%s</text>", label_w - 8, y + 15, rows[i].what);
		if (rows[i].ns > 0)
			fprintf(h->f, "<rect x=\"%d\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/><text x=\"%.1f\" "
				"y=\"%.0f\">%.3f ms</text>\n", label_w, y, w < 1 ? 1 : w, row - 6, rows[i].fill,
				label_w + (w < 1 ? 1 : w) + 6, y + 15, rows[i].ns / 1e6);
		else
			fprintf(h->f, "<text x=\"%d\" y=\"%.0f\">%s</text>\n", label_w + 6, y + 15, rows[i].zero);
	}
	for (double d = lo; d <= hi + 1e-9; d++) {
		double x = label_w + (d - lo) / (hi - lo) * bar_w;

		fprintf(h->f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"0\" y2=\"%d\"/><text x=\"%.1f\" y=\"%d\" "
			"text-anchor=\"middle\">%g ms</text>\n", x, x, n * row, x, n * row + 16, pow(10, d) / 1e6);
	}
	fputs("</svg>\n", h->f);
}
