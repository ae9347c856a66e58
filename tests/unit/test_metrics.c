// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Prometheus exposition (output/metrics.c) of a summary and steps built
 * by hand: label values escaped as the text format says, histogram buckets
 * cumulative with inclusive bounds, seconds exact to the ns, kernel names
 * capped, processes capped and counted; and --metrics addresses parsed.
 * Every expected line is worked out by hand from what was fed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "analysis/summary.h"
#include "output/http.h"
#include "output/metrics.h"
#include "records/cuda_api.h"

static bool has_line(const struct dl_sbuf *b, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = b->v; (p = strstr(p, line)); p += n)
		if ((p == b->v || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static size_t count_prefix(const struct dl_sbuf *b, const char *prefix)
{
	size_t k = 0, n = strlen(prefix);

	for (const char *p = b->v; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		k += strncmp(p, prefix, n) == 0;
	return k;
}

#define CHECK_LINE(b, line) CHECK(has_line(b, line), "no line %s in:\n%s", line, (b)->v)

static struct dl_step step(pid_t pid, uint64_t dur, enum dl_cat cat)
{
	struct dl_step st = { .pid = pid, .tid = pid, .dur_ns = dur };

	st.cat_ns[cat] = dur;
	return st;
}

/* The exposition of s's processes, as the session publishes it: through a model of their figures. */
static void render(const struct dl_metrics *m, const struct dl_summary *s, const struct dl_metrics_live *live,
		   struct dl_sbuf *b)
{
	struct dl_report_model rm;

	dl_report_model_build(&rm, s, NULL, NULL);
	dl_metrics_render(m, &rm, live, b);
	dl_report_model_free(&rm);
}

static void test_escape_and_steps(void)
{
	struct dl_metrics_opts mo = { 0 };
	struct dl_metrics *m = dl_metrics_new(&mo);
	struct dl_metrics_live live = { .drops = { [DL_DROP_CUDA] = 7 }, .malformed = 2 };
	struct dl_summary s;
	struct dl_sbuf b = { 0 };
	struct dl_proc *p;
	struct dl_step st;

	dl_summary_init(&s);
	p = dl_summary_proc(&s, 42);
	/* backslash, quote, newline and a byte that is not UTF-8 */
	memcpy(p->comm, "a\\b\"c\nd\xff", 9);
	dl_summary_proc(&s, 43);   /* did nothing: no series */
	st = step(42, 1000000, DL_CAT_INPUT_WAIT);         /* exactly 1 ms: in le="0.001" */
	dl_metrics_step(m, &st);
	st = step(42, 1000001, DL_CAT_INPUT_WAIT);         /* 1 ns over: in le="0.0025" */
	dl_metrics_step(m, &st);
	st = step(42, 61000000000ull, DL_CAT_GPU_WAIT);    /* past the last bound: +Inf only */
	dl_metrics_step(m, &st);
	render(m, &s, &live, &b);

#define L "pid=\"42\",comm=\"a\\\\b\\\"c\\nd\xef\xbf\xbd\""
	CHECK_LINE(&b, "dlbpf_step_duration_seconds_bucket{" L ",le=\"0.001\"} 1");
	CHECK_LINE(&b, "dlbpf_step_duration_seconds_bucket{" L ",le=\"0.0025\"} 2");
	CHECK_LINE(&b, "dlbpf_step_duration_seconds_bucket{" L ",le=\"60\"} 2");
	CHECK_LINE(&b, "dlbpf_step_duration_seconds_bucket{" L ",le=\"+Inf\"} 3");
	CHECK_LINE(&b, "dlbpf_step_duration_seconds_sum{" L "} 61.002000001");
	CHECK_LINE(&b, "dlbpf_step_duration_seconds_count{" L "} 3");
	CHECK_LINE(&b, "dlbpf_step_category_seconds_total{" L ",category=\"input_wait\"} 0.002000001");
	CHECK_LINE(&b, "dlbpf_step_category_seconds_total{" L ",category=\"gpu_wait\"} 61.000000000");
	/* 61 s of gpu_wait against 2 ms of input: gpu-bound, for the process and the run */
	CHECK_LINE(&b, "dlbpf_process_verdict{" L ",verdict=\"gpu-bound\"} 1");
	CHECK_LINE(&b, "dlbpf_process_verdict{" L ",verdict=\"input-bound\"} 0");
	CHECK_LINE(&b, "dlbpf_verdict{verdict=\"gpu-bound\"} 1");
	CHECK_LINE(&b, "dlbpf_dropped_events_total{reason=\"cuda\"} 7");
	CHECK_LINE(&b, "dlbpf_malformed_records_total 2");
	CHECK_LINE(&b, "dlbpf_processes_omitted 0");
	CHECK(!strstr(b.v, "pid=\"43\""), "a process that did nothing has series");
#undef L
	dl_sbuf_free(&b);
	dl_metrics_free(m);
	dl_summary_free(&s);
}

static void test_cuda_copies_kernels(void)
{
	struct dl_metrics_opts mo = { .kernel_names = true };
	struct dl_metrics *m = dl_metrics_new(&mo);
	struct dl_metrics_live live = { 0 };
	uint32_t g[3] = { 1, 1, 1 }, bl[3] = { 32, 1, 1 }, g2[3] = { 2, 1, 1 };
	struct dl_summary s;
	struct dl_sbuf b = { 0 };
	struct dl_proc *p;
	bool fresh;
	char name[16];

	dl_summary_init(&s);
	p = dl_summary_proc(&s, 7);
	strcpy(p->comm, "py");
	p->calls[dl_api_by_name("cudaMemcpy")->id] = (struct dl_api_stat){ .count = 5, .total_ns = 1500000001,
									    .errors = 1 };
	p->copies[DL_DIR_H2D] = (struct dl_copy_stat){ .count = 5, .bytes = 500, .pageable = 2, .pageable_bytes = 300 };
	/* 25 names launched i + 1 times each; k0 a second time with another shape, 100 times */
	for (int i = 0; i < 25; i++) {
		struct dl_kernel_stat *k = dl_proc_kernel(p, 0x1000 + (uint64_t)i, g, bl, 0, &fresh);

		snprintf(name, sizeof(name), "k%d", i);
		k->name = strdup(name);
		k->count = (uint64_t)i + 1;
	}
	struct dl_kernel_stat *k0 = dl_proc_kernel(p, 0x1000, g2, bl, 0, &fresh);
	k0->name = strdup("k0");
	k0->count = 100;
	render(m, &s, &live, &b);

	CHECK_LINE(&b, "dlbpf_cuda_calls_total{pid=\"7\",comm=\"py\",api=\"cudaMemcpy\"} 5");
	CHECK_LINE(&b, "dlbpf_cuda_call_errors_total{pid=\"7\",comm=\"py\",api=\"cudaMemcpy\"} 1");
	CHECK_LINE(&b, "dlbpf_cuda_call_seconds_total{pid=\"7\",comm=\"py\",api=\"cudaMemcpy\"} 1.500000001");
	CHECK_LINE(&b, "dlbpf_copies_total{pid=\"7\",comm=\"py\",direction=\"h2d\",memory=\"pinned\"} 3");
	CHECK_LINE(&b, "dlbpf_copies_total{pid=\"7\",comm=\"py\",direction=\"h2d\",memory=\"pageable\"} 2");
	CHECK_LINE(&b, "dlbpf_copy_bytes_total{pid=\"7\",comm=\"py\",direction=\"h2d\",memory=\"pinned\"} 200");
	CHECK_LINE(&b, "dlbpf_copy_bytes_total{pid=\"7\",comm=\"py\",direction=\"h2d\",memory=\"pageable\"} 300");
	CHECK(!strstr(b.v, "direction=\"d2h\""), "a direction with no copy has series");
	/* 1 + 2 + ... + 25, and 100 */
	CHECK_LINE(&b, "dlbpf_kernel_launches_total{pid=\"7\",comm=\"py\"} 425");
	CHECK_LINE(&b, "dlbpf_kernel_launches_by_name_total{pid=\"7\",comm=\"py\",kernel=\"k0\"} 101");
	CHECK_LINE(&b, "dlbpf_kernel_launches_by_name_total{pid=\"7\",comm=\"py\",kernel=\"k19\"} 20");
	/* k20..k24: 21 + 22 + 23 + 24 + 25 */
	CHECK_LINE(&b, "dlbpf_kernel_launches_by_name_total{pid=\"7\",comm=\"py\",kernel=\"" DL_METRICS_OTHER_KERNELS
		       "\"} 115");
	CHECK_EQ_U64(count_prefix(&b, "dlbpf_kernel_launches_by_name_total{"), DL_METRICS_KERNELS + 1);
	dl_metrics_free(m);

	/* --summary: no pinnedness, one series per direction */
	mo = (struct dl_metrics_opts){ .memory_unknown = true };
	m = dl_metrics_new(&mo);
	render(m, &s, &live, &b);
	CHECK_LINE(&b, "dlbpf_copies_total{pid=\"7\",comm=\"py\",direction=\"h2d\",memory=\"unknown\"} 5");
	CHECK_LINE(&b, "dlbpf_copy_bytes_total{pid=\"7\",comm=\"py\",direction=\"h2d\",memory=\"unknown\"} 500");
	CHECK(!strstr(b.v, "memory=\"pinned\""), "pinned without pinnedness");
	CHECK(!strstr(b.v, "dlbpf_kernel_launches_by_name_total"), "kernel names without --metrics-kernels");
	dl_sbuf_free(&b);
	dl_metrics_free(m);
	dl_summary_free(&s);
}

static void test_process_cap(void)
{
	struct dl_metrics_opts mo = { 0 };
	struct dl_metrics *m = dl_metrics_new(&mo);
	struct dl_metrics_live live = { 0 };
	struct dl_summary s;
	struct dl_sbuf b = { 0 };
	char line[64];

	dl_summary_init(&s);
	for (int i = 0; i < DL_METRICS_PROCS + 44; i++)
		dl_summary_proc(&s, 1000 + i)->io.read_ops = 1;
	render(m, &s, &live, &b);
	CHECK_LINE(&b, "dlbpf_processes_omitted 44");
	CHECK_EQ_U64(count_prefix(&b, "dlbpf_disk_requests_total{"), 2 * DL_METRICS_PROCS);
	snprintf(line, sizeof(line), "pid=\"%d\"", 1000 + DL_METRICS_PROCS);
	CHECK(!strstr(b.v, line), "a process past the cap has series");
	dl_sbuf_free(&b);
	dl_metrics_free(m);
	dl_summary_free(&s);
}

static void test_addresses(void)
{
	static const struct { const char *spec, *host, *port; } good[] = {
		{ "9464", "127.0.0.1", "9464" },
		{ "0.0.0.0:80", "0.0.0.0", "80" },
		{ "[::]:65535", "::", "65535" },
		{ "localhost:00017", "localhost", "17" },
	};
	static const char *const bad[] = { "", "0", "65536", "x", ":1", "::1:9464", "[::1]", "[::1]x:1", "[]:1",
					   "1.2.3.4:", "1.2.3.4:-1", "1.2.3.4:1 ", "999999" };
	char host[64], port[8], err[128];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int rc = dl_http_parse_addr(good[i].spec, host, sizeof(host), port, sizeof(port), err, sizeof(err));

		CHECK(rc == 0 && !strcmp(host, good[i].host) && !strcmp(port, good[i].port), "%s: %d %s %s %s",
		      good[i].spec, rc, host, port, err);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CHECK(dl_http_parse_addr(bad[i], host, sizeof(host), port, sizeof(port), err, sizeof(err)) == -EINVAL &&
		      err[0], "'%s' accepted", bad[i]);
	}
}

int main(void)
{
	test_escape_and_steps();
	test_cuda_copies_kernels();
	test_process_cap();
	test_addresses();
	return check_report("test_metrics");
}
