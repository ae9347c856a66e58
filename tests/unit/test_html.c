// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The HTML report without a browser (tests/integration/test_html.py renders
 * it in one): the escaping of names against hand-written expectations, the
 * binning of the step bars at and around what fits, and degenerate steps (all
 * zero, one step) drawn with no NaN or infinity in the SVG.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "output/html.h"
#include "output/html_int.h"

/* 562 bars of 2 px fit the plot (doc/manual.md); past that, as few steps to a bar as fit. */
#define BARS_FIT 562

static char *capture_text(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct dl_html h = { .f = f };

	html_text(&h, s);
	fclose(f);
	dl_sbuf_free(&h.esc);
	return buf;
}

static void test_escape(void)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "<script>alert('x')</script>", "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" },
		{ "a&b \"q\"", "a&amp;b &quot;q&quot;" },
		{ "\x1b]0;pwn\a\r\n", "\\x1b]0;pwn\\x07\\x0d\\x0a" },
		{ "caf\xc3\xa9", "caf\xc3\xa9" },                  /* valid UTF-8 stays */
		{ "\xff\xc0\xaf", "\\xff\\xc0\\xaf" },             /* ill-formed: bytes as \xHH */
		{ "\xe2\x80\xae" "rtl", "\\xe2\\x80\\xaertl" },    /* right-to-left override */
		{ "", "" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = capture_text(cases[i].in);

		CHECK(!strcmp(got, cases[i].out), "case %zu: got '%s', want '%s'", i, got, cases[i].out);
		free(got);
	}
	/* Every byte alone: nothing below 0x20, no DEL, no markup character left raw. */
	for (int b = 1; b < 256; b++) {
		char in[2] = { (char)b, 0 }, *got = capture_text(in);
		bool ok = true;

		for (const unsigned char *p = (const unsigned char *)got; *p; p++)
			ok &= *p >= 0x20 && *p != 0x7f && *p != '<' && *p != '>' && *p != '"' && *p != '\'' &&
			      (*p != '&' || p == (const unsigned char *)got);
		CHECK(ok, "byte 0x%02x escaped as '%s'", b, got);
		free(got);
	}
}

static struct dl_step *make_steps(size_t n, uint64_t dur)
{
	struct dl_step *v = calloc(n, sizeof(*v));

	for (size_t i = 0; i < n; i++) {
		v[i].index = (uint32_t)i;
		v[i].start_ns = 1000000000ull + i * (dur + 1000);
		/* Durations differ, so the step nearest the median is one step. */
		v[i].dur_ns = dur ? dur + i % 7 * 1000 : 0;
		v[i].cat_ns[DL_CAT_CPU] = v[i].dur_ns / 2;
		v[i].cat_ns[DL_CAT_INPUT_WAIT] = v[i].dur_ns - v[i].dur_ns / 2;
	}
	return v;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_bars(size_t n, uint64_t dur)
{
	struct dl_step *steps = make_steps(n, dur);
	bool present[DL_CAT_COUNT] = { false };
	char *buf = NULL;
	size_t len = 0, per = 1;
	FILE *f = open_memstream(&buf, &len);
	struct dl_html h = { .f = f };

	while ((n + per - 1) / per > BARS_FIT)
		per++;
	html_svg_step_bars(&h, steps, n, dur, present);
	html_svg_step_line(&h, steps, n, dur);
	fclose(f);
	CHECK_EQ_U64(count(buf, "<g class=\"bar"), (n + per - 1) / per);
	CHECK_EQ_U64(count(buf, "median-step"), 1);
	CHECK(!strstr(buf, "nan") && !strstr(buf, "inf"), "%zu steps of %llu ns: NaN or infinity in the SVG", n,
	      (unsigned long long)dur);
	CHECK(present[DL_CAT_CPU] == (dur > 0) && !present[DL_CAT_GPU_WAIT], "%zu steps: legend categories wrong", n);
	free(buf);
	free(steps);
	dl_sbuf_free(&h.esc);
}

/* A whole page of a summary with no steps, and a process named with markup. */
static void test_page(void)
{
	struct dl_summary s;
	struct dl_diagnosis d;
	struct dl_proc *p;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	dl_summary_init(&s);
	memset(&d, 0, sizeof(d));
	p = dl_summary_proc(&s, 42);
	snprintf(p->comm, sizeof(p->comm), "<script>\x1b");
	{
		struct dl_report_model m;

		dl_report_model_build(&m, &s, NULL, &d);
		CHECK(dl_report_html(f, &m) == 0, "dl_report_html failed");
		dl_report_model_free(&m);
	}
	fclose(f);
	CHECK(!strstr(buf, "<script"), "raw <script in the page");
	CHECK(strstr(buf, "&lt;script&gt;\\x1b") != NULL, "the name is not shown escaped");
	CHECK(strstr(buf, "id=\"verdict\">none<") != NULL, "no verdict of a run without steps");
	CHECK(strstr(buf, "</html>\n") == buf + len - 8, "the page does not end with </html>");
	free(buf);
	dl_summary_free(&s);
}

int main(void)
{
	test_escape();
	/* One step; at, just under and over what fits; twice and past twice; many. */
	static const size_t ns[] = { 1, 2, BARS_FIT - 1, BARS_FIT, BARS_FIT + 1, 2 * BARS_FIT, 2 * BARS_FIT + 1, 100000 };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		test_bars(ns[i], 30000000);
	test_bars(1, 0);
	test_bars(5, 0);
	test_page();
	return check_report("test_html");
}
