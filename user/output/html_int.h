/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared by the HTML report's page (html.c) and its SVG charts (html_svg.c). */
#ifndef DLBPF_HTML_INT_H
#define DLBPF_HTML_INT_H

#include <stdbool.h>
#include <stdio.h>
#include "analysis/diagnose.h"
#include "analysis/steps.h"
#include "analysis/summary.h"
#include "strsafe.h"

struct dl_html {
	FILE *f;
	struct dl_sbuf esc;   /* scratch of html_text */
};

/*
 * Text of the traced side (or any text) as HTML character data or an
 * attribute value: the terminal escaper first, so controls, bidirectional
 * overrides and ill-formed UTF-8 show as \xHH, then & < > " ' as entities.
 */
void html_text(struct dl_html *h, const char *s);

/* A CSS colour per breakdown category; .c-<category> rules are made of them. */
extern const char *const html_cat_colour[DL_CAT_COUNT];

/*
 * The per-step stacked bars of steps[0..n): one bar per step, or per bin of
 * consecutive steps when there are more than fit (each bar then the mean of
 * its bin). The median step is marked. present[k] is set for each category
 * with time in these steps (the legend's).
 */
void html_svg_step_bars(struct dl_html *h, const struct dl_step *steps, size_t n, uint64_t median_ns,
			bool present[DL_CAT_COUNT]);
/* Step duration against the time it started: warm-up and regressions. */
void html_svg_step_line(struct dl_html *h, const struct dl_step *steps, size_t n, uint64_t median_ns);
/* A process's copies by size bucket, stacked by direction. */
void html_svg_copy_sizes(struct dl_html *h, const struct dl_proc *p);
/* The paper sketch against the median step, on a log scale. */
void html_svg_sketch(struct dl_html *h, const struct dl_sketch *k);

#endif
