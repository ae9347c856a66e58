// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "log.h"
#include "output/otlp.h"
#include "output/pbwriter.h"
#include "output/report.h"
#include "records/clock.h"
#include "records/cuda_api.h"
#include "util.h"
#include "version.h"

/* Field numbers of opentelemetry-proto (tests/proto/opentelemetry). */
enum {
	REQ_RESOURCE = 1,                 /* Export*ServiceRequest.resource_{spans,metrics} */
	RES_RESOURCE = 1, RES_SCOPE = 2,  /* ResourceSpans / ResourceMetrics */
	RESOURCE_ATTRS = 1,
	SCOPE_SCOPE = 1, SCOPE_ITEMS = 2, /* ScopeSpans.spans, ScopeMetrics.metrics */
	ISCOPE_NAME = 1, ISCOPE_VERSION = 2,
	KV_KEY = 1, KV_VALUE = 2,
	ANY_STRING = 1, ANY_BOOL = 2, ANY_INT = 3, ANY_DOUBLE = 4,
	SPAN_TRACE_ID = 1, SPAN_ID = 2, SPAN_PARENT = 4, SPAN_NAME = 5, SPAN_KIND = 6, SPAN_START = 7,
	SPAN_END = 8, SPAN_ATTRS = 9, SPAN_EVENTS = 11,
	EVENT_TIME = 1, EVENT_NAME = 2, EVENT_ATTRS = 3,
	METRIC_NAME = 1, METRIC_DESC = 2, METRIC_UNIT = 3, METRIC_SUM = 7, METRIC_HISTOGRAM = 9,
	AGG_POINTS = 1, AGG_TEMPORALITY = 2, SUM_MONOTONIC = 3,
	NUM_ATTRS = 7, NUM_START = 2, NUM_TIME = 3, NUM_DOUBLE = 4, NUM_INT = 6,
	HIST_ATTRS = 9, HIST_START = 2, HIST_TIME = 3, HIST_COUNT = 4, HIST_SUM = 5, HIST_BUCKETS = 6,
	HIST_BOUNDS = 7,
};
#define SPAN_KIND_INTERNAL 1
#define TEMPORALITY_CUMULATIVE 2

struct proc_trace {
	pid_t pid;
	uint8_t trace_id[16], span_id[8];
	uint64_t first_ns, last_ns;    /* the steps', CLOCK_MONOTONIC */
	uint64_t steps;
	struct dl_pb spans;            /* encoded ScopeSpans.spans not sent yet */
	uint64_t pending;
};

struct dl_otlp {
	struct dl_otlp_sender *send;
	const struct dl_summary *sum;
	char url[256];
	char host[256];
	int64_t real_minus_mono;
	uint64_t start_real;           /* metrics' start_time: the run's start */
	bool replay;                   /* a recording's: its points are at its own end, not now */
	DL_VEC(struct proc_trace) procs;
	struct dl_u64map of;           /* pid -> index in procs */
	uint64_t pending, batch_since; /* spans waiting, and since when (CLOCK_MONOTONIC) */
	struct dl_metrics *steps;      /* the steps so far, as the exposition adds them up */
	uint64_t next_metrics;
	uint64_t spans, points;        /* made */
	struct dl_pb req;
};

struct dl_otlp *dl_otlp__new(const struct dl_otlp_target *t, const struct dl_summary *sum)
{
	struct dl_otlp *x = dl_xcalloc(1, sizeof(*x));
	struct dl_metrics_opts mo = { 0 };

	x->send = dl_otlp_sender__new(t);
	if (!x->send) {
		free(x);
		return NULL;
	}
	x->sum = sum;
	snprintf(x->url, sizeof(x->url), "%s", t->url);
	if (gethostname(x->host, sizeof(x->host) - 1))
		snprintf(x->host, sizeof(x->host), "unknown");
	x->steps = dl_metrics_new(&mo);
	x->start_real = dl_clock_ns(CLOCK_REALTIME);
	x->real_minus_mono = (int64_t)(x->start_real - dl_now_ns());
	return x;
}

void dl_otlp__replay_clocks(struct dl_otlp *x, uint64_t mono_ns, uint64_t real_ns)
{
	x->real_minus_mono = (int64_t)(real_ns - mono_ns);
	x->start_real = real_ns;
	x->replay = true;
}

int dl_otlp__start(struct dl_otlp *x)
{
	x->next_metrics = dl_now_ns() + DL_OTLP_METRICS_NS;
	return dl_otlp_sender__start(x->send);
}

static uint64_t real_of(const struct dl_otlp *x, uint64_t mono)
{
	return mono + (uint64_t)x->real_minus_mono;
}

/* --- attributes ------------------------------------------------------------- */

static void kv_begin(struct dl_pb *pb, uint32_t field, const char *key)
{
	dl_pb_begin(pb, field);
	dl_pb_str(pb, KV_KEY, key);
	dl_pb_begin(pb, KV_VALUE);
}

static void kv_end(struct dl_pb *pb)
{
	dl_pb_end(pb);
	dl_pb_end(pb);
}

static void kv_str(struct dl_pb *pb, uint32_t field, const char *key, const char *v)
{
	kv_begin(pb, field, key);
	dl_pb_str(pb, ANY_STRING, v);
	kv_end(pb);
}

static void kv_int(struct dl_pb *pb, uint32_t field, const char *key, int64_t v)
{
	kv_begin(pb, field, key);
	dl_pb_int(pb, ANY_INT, v);
	kv_end(pb);
}

static void kv_double(struct dl_pb *pb, uint32_t field, const char *key, double v)
{
	kv_begin(pb, field, key);
	dl_pb_double(pb, ANY_DOUBLE, v);
	kv_end(pb);
}

/* The resource: dlbpf on this host, and the process when there is one (semantic-convention names). */
static void resource(struct dl_otlp *x, struct dl_pb *pb, pid_t pid)
{
	const struct dl_proc *p = pid ? dl_summary_find(x->sum, pid) : NULL;

	dl_pb_begin(pb, RES_RESOURCE);
	kv_str(pb, RESOURCE_ATTRS, "service.name", "dlbpf");
	kv_str(pb, RESOURCE_ATTRS, "service.version", DLBPF_VERSION);
	kv_str(pb, RESOURCE_ATTRS, "host.name", x->host);
	if (pid)
		kv_int(pb, RESOURCE_ATTRS, "process.pid", pid);
	if (p && p->comm[0])
		kv_str(pb, RESOURCE_ATTRS, "process.executable.name", p->comm);
	if (p && p->container.id[0])
		kv_str(pb, RESOURCE_ATTRS, "container.id", p->container.id);
	if (p && p->container.runtime[0])
		kv_str(pb, RESOURCE_ATTRS, "container.runtime.name", p->container.runtime);
	if (p && p->container.pod_uid[0])
		kv_str(pb, RESOURCE_ATTRS, "k8s.pod.uid", p->container.pod_uid);
	if (p && p->container.slurm_job[0])
		kv_str(pb, RESOURCE_ATTRS, "slurm.job.id", p->container.slurm_job);
	dl_pb_end(pb);
}

static void scope(struct dl_pb *pb)
{
	dl_pb_begin(pb, SCOPE_SCOPE);
	dl_pb_str(pb, ISCOPE_NAME, "dlbpf");
	dl_pb_str(pb, ISCOPE_VERSION, DLBPF_VERSION);
	dl_pb_end(pb);
}

/* --- traces ----------------------------------------------------------------- */

static void id_bytes(uint8_t *out, size_t n, const void *seed, size_t len, uint64_t salt)
{
	for (size_t i = 0; i < n; i += 8) {
		uint8_t buf[512];
		uint64_t h;

		memcpy(buf, seed, len < sizeof(buf) - 8 ? len : sizeof(buf) - 8);
		salt += i + 1;
		memcpy(buf + (len < sizeof(buf) - 8 ? len : sizeof(buf) - 8), &salt, 8);
		h = dl_hash_bytes(buf, (len < sizeof(buf) - 8 ? len : sizeof(buf) - 8) + 8) | 1;   /* never all zero */
		memcpy(out + i, &h, n - i < 8 ? n - i : 8);
	}
}

static struct proc_trace *trace_of(struct dl_otlp *x, pid_t pid)
{
	struct proc_trace *t;
	uint64_t i;

	if (dl_u64map_get(&x->of, (uint64_t)pid, &i))
		return &x->procs.v[i];
	dl_u64map_put(&x->of, (uint64_t)pid, x->procs.n);
	t = dl_vec_push(&x->procs);
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	/* One trace per process run: the host, the pid and the run's start tell it from any other. */
	struct { char host[256]; int64_t start; int32_t pid; } seed = { 0 };

	memcpy(seed.host, x->host, sizeof(seed.host));
	seed.start = (int64_t)x->start_real;
	seed.pid = pid;
	id_bytes(t->trace_id, sizeof(t->trace_id), &seed, sizeof(seed), 0);
	id_bytes(t->span_id, sizeof(t->span_id), t->trace_id, sizeof(t->trace_id), ~0ull);
	dl_pb_init(&t->spans);
	return t;
}

static void span_head(struct dl_otlp *x, struct dl_pb *pb, const struct proc_trace *t, const uint8_t *id,
		      const uint8_t *parent, const char *name, uint64_t start, uint64_t end)
{
	dl_pb_begin(pb, SCOPE_ITEMS);
	dl_pb_bytes(pb, SPAN_TRACE_ID, t->trace_id, sizeof(t->trace_id));
	dl_pb_bytes(pb, SPAN_ID, id, 8);
	if (parent)
		dl_pb_bytes(pb, SPAN_PARENT, parent, 8);
	dl_pb_str(pb, SPAN_NAME, name);
	dl_pb_uint(pb, SPAN_KIND, SPAN_KIND_INTERNAL);
	dl_pb_fixed64(pb, SPAN_START, real_of(x, start));
	dl_pb_fixed64(pb, SPAN_END, real_of(x, end));
	x->spans++;
}

static void flush_traces(struct dl_otlp *x)
{
	uint64_t items = 0;
	void *body;

	if (!x->pending)
		return;
	dl_pb_reset(&x->req);
	for (size_t i = 0; i < x->procs.n; i++) {
		struct proc_trace *t = &x->procs.v[i];

		if (!t->pending)
			continue;
		dl_pb_begin(&x->req, REQ_RESOURCE);
		resource(x, &x->req, t->pid);
		dl_pb_begin(&x->req, RES_SCOPE);
		scope(&x->req);
		dl_pb_raw(&x->req, t->spans.buf, t->spans.len);
		dl_pb_end(&x->req);
		dl_pb_end(&x->req);
		items += t->pending;
		t->pending = 0;
		dl_pb_reset(&t->spans);
	}
	x->pending = 0;
	body = dl_xcalloc(1, x->req.len ? x->req.len : 1);
	memcpy(body, x->req.buf, x->req.len);
	dl_otlp_sender__put(x->send, DL_OTLP_TRACES, body, x->req.len, items);
}

/*
 * The step's longest waits as child spans, from the device timeline the
 * step carries (analysis/devqueue.h, inferred): the longest interval the GPU
 * was certainly busy while a host thread blocked on it (the wait is "comm"
 * when the step's comm_wait outweighs its gpu_wait), and the longest the GPU
 * sat idle while the main thread was blocked outside CUDA (input), with who
 * ended those waits. Returns the spans written.
 */
static unsigned wait_spans(struct dl_otlp *x, struct proc_trace *t, const struct dl_step *st, const uint8_t *parent)
{
	const struct dl_gpu_span *busy = NULL, *input = NULL;
	unsigned n = 0;

	for (uint32_t i = 0; i < st->ngpu_spans; i++) {
		const struct dl_gpu_span *g = &st->gpu_spans[i];

		if (g->kind == DL_GS_BUSY && g->end > g->start && (!busy || g->end - g->start > busy->end - busy->start))
			busy = g;
		if (g->kind == DL_GS_IDLE && g->idle == DL_IDLE_INPUT && g->end > g->start &&
		    (!input || g->end - g->start > input->end - input->start))
			input = g;
	}
	for (int k = 0; k < 2; k++) {
		const struct dl_gpu_span *g = k ? input : busy;
		const char *kind = k ? "input" : st->cat_ns[DL_CAT_COMM_WAIT] > st->cat_ns[DL_CAT_GPU_WAIT] ? "comm" : "gpu";
		char name[32];
		uint8_t id[8];

		if (!g)
			continue;
		id_bytes(id, sizeof(id), t->trace_id, sizeof(t->trace_id), (uint64_t)st->index << 2 | (uint64_t)(k + 1));
		snprintf(name, sizeof(name), "wait %s", kind);
		span_head(x, &t->spans, t, id, parent, name, g->start, g->end);
		kv_str(&t->spans, SPAN_ATTRS, "dlbpf.wait.kind", kind);
		kv_int(&t->spans, SPAN_ATTRS, "dlbpf.inferred", 1);   /* the device-queue model's interval */
		if (!k)
			kv_int(&t->spans, SPAN_ATTRS, "dlbpf.gpu.stream", (int64_t)g->stream);
		if (k && st->input.woken && st->input.waker_pid) {
			kv_int(&t->spans, SPAN_ATTRS, "dlbpf.input.producer.pid", st->input.waker_pid);
			kv_int(&t->spans, SPAN_ATTRS, "dlbpf.input.producer.tid",
			       st->input.producer ? st->input.producer_tid : st->input.waker_tid);
		}
		dl_pb_end(&t->spans);
		n++;
	}
	return n;
}

void dl_otlp__step(struct dl_otlp *x, const struct dl_step *st)
{
	struct proc_trace *t = trace_of(x, st->pid);
	struct dl_pb *pb = &t->spans;
	uint8_t id[8];
	char name[32], key[64];
	uint64_t end = st->start_ns + st->dur_ns, before = t->pending;

	dl_metrics_step(x->steps, st);
	if (!t->steps++ || st->start_ns < t->first_ns)
		t->first_ns = st->start_ns;
	if (end > t->last_ns)
		t->last_ns = end;
	id_bytes(id, sizeof(id), t->trace_id, sizeof(t->trace_id), (uint64_t)st->index << 2);   /* its waits: | 1, | 2 */
	snprintf(name, sizeof(name), "step %" PRIu32, st->index);
	span_head(x, pb, t, id, t->span_id, name, st->start_ns, end);
	kv_int(pb, SPAN_ATTRS, "dlbpf.step.index", st->index);
	kv_int(pb, SPAN_ATTRS, "thread.id", st->tid);
	kv_str(pb, SPAN_ATTRS, "dlbpf.step.verdict", dl_verdict_name(st->verdict));
	kv_double(pb, SPAN_ATTRS, "dlbpf.step.verdict_share", st->share);
	for (int c = 0; c < DL_CAT_COUNT; c++) {
		snprintf(key, sizeof(key), "dlbpf.step.%s_ns", dl_cat_name((enum dl_cat)c));
		kv_int(pb, SPAN_ATTRS, key, (int64_t)st->cat_ns[c]);
	}
	kv_int(pb, SPAN_ATTRS, "dlbpf.step.gpu_busy_ns.lower", (int64_t)st->gpu_busy_lo_ns);
	kv_int(pb, SPAN_ATTRS, "dlbpf.step.gpu_busy_ns.upper", (int64_t)st->gpu_busy_hi_ns);
	kv_int(pb, SPAN_ATTRS, "dlbpf.step.kernels", (int64_t)st->kernels);
	kv_int(pb, SPAN_ATTRS, "dlbpf.step.h2d_bytes", (int64_t)st->h2d_bytes);
	kv_int(pb, SPAN_ATTRS, "dlbpf.step.d2h_bytes", (int64_t)st->d2h_bytes);
	kv_int(pb, SPAN_ATTRS, "dlbpf.step.comm_bytes", (int64_t)st->comm_bytes);
	kv_int(pb, SPAN_ATTRS, "dlbpf.step.io_read_bytes", (int64_t)st->io_read_bytes);
	/* Who ended the step's input waits (analysis/lineage.h): the producer the report names. */
	if (st->input.woken && st->input.waker_pid) {
		kv_int(pb, SPAN_ATTRS, "dlbpf.step.input.producer.pid", st->input.waker_pid);
		kv_int(pb, SPAN_ATTRS, "dlbpf.step.input.producer.tid",
		       st->input.producer ? st->input.producer_tid : st->input.waker_tid);
		kv_int(pb, SPAN_ATTRS, "dlbpf.step.input.producer.wait_ns", (int64_t)st->input.woken_wait_ns);
	}
	if (st->partial)
		kv_int(pb, SPAN_ATTRS, "dlbpf.step.partial", 1);
	dl_pb_end(pb);
	t->pending++;
	t->pending += wait_spans(x, t, st, id);
	if (!x->pending)
		x->batch_since = dl_now_ns();
	x->pending += t->pending - before;
	if (x->pending >= DL_OTLP_BATCH_SPANS)
		flush_traces(x);
}

/* --- metrics ---------------------------------------------------------------- */

static void metric_head(struct dl_pb *pb, const char *name, const char *desc, const char *unit, uint32_t kind)
{
	dl_pb_begin(pb, SCOPE_ITEMS);
	dl_pb_str(pb, METRIC_NAME, name);
	dl_pb_str(pb, METRIC_DESC, desc);
	dl_pb_str(pb, METRIC_UNIT, unit);
	dl_pb_begin(pb, kind);
}

static void metric_end(struct dl_pb *pb, bool monotonic)
{
	dl_pb_uint(pb, AGG_TEMPORALITY, TEMPORALITY_CUMULATIVE);
	if (monotonic)
		dl_pb_bool(pb, SUM_MONOTONIC, 1);
	dl_pb_end(pb);
	dl_pb_end(pb);
}

static void point_int(struct dl_otlp *x, struct dl_pb *pb, uint64_t now, const char *key, const char *v, uint64_t n)
{
	dl_pb_begin(pb, AGG_POINTS);
	if (key)
		kv_str(pb, NUM_ATTRS, key, v);
	dl_pb_fixed64(pb, NUM_START, x->start_real);
	dl_pb_fixed64(pb, NUM_TIME, now);
	dl_pb_fixed64(pb, NUM_INT, n);   /* sfixed64 */
	dl_pb_end(pb);
	x->points++;
}

static void point_seconds(struct dl_otlp *x, struct dl_pb *pb, uint64_t now, const char *key, const char *v,
			  uint64_t ns)
{
	dl_pb_begin(pb, AGG_POINTS);
	kv_str(pb, NUM_ATTRS, key, v);
	dl_pb_fixed64(pb, NUM_START, x->start_real);
	dl_pb_fixed64(pb, NUM_TIME, now);
	dl_pb_double(pb, NUM_DOUBLE, (double)ns / 1e9);
	dl_pb_end(pb);
	x->points++;
}

static void proc_metrics(struct dl_otlp *x, struct dl_pb *pb, const struct dl_proc *p, uint64_t now)
{
	const struct dl_metrics_steps *ps = dl_metrics_steps_of(x->steps, p->pid);
	bool calls = false;

	if (ps) {
		metric_head(pb, "dlbpf.step.duration", "Training steps of a process's main thread, by duration", "s",
			    METRIC_HISTOGRAM);
		dl_pb_begin(pb, AGG_POINTS);
		dl_pb_fixed64(pb, HIST_START, x->start_real);
		dl_pb_fixed64(pb, HIST_TIME, now);
		dl_pb_fixed64(pb, HIST_COUNT, ps->count);
		dl_pb_double(pb, HIST_SUM, (double)ps->sum_ns / 1e9);
		dl_pb_begin(pb, HIST_BUCKETS);   /* packed fixed64 */
		for (int b = 0; b <= DL_METRICS_BUCKETS; b++)
			for (int i = 0; i < 8; i++)
				dl_pb_raw(pb, &(uint8_t){ (uint8_t)(ps->bucket[b] >> (8 * i)) }, 1);
		dl_pb_end(pb);
		dl_pb_begin(pb, HIST_BOUNDS);    /* packed double */
		for (int b = 0; b < DL_METRICS_BUCKETS; b++) {
			double s = (double)dl_metrics_bucket_ns[b] / 1e9;
			uint64_t u;

			memcpy(&u, &s, sizeof(u));
			for (int i = 0; i < 8; i++)
				dl_pb_raw(pb, &(uint8_t){ (uint8_t)(u >> (8 * i)) }, 1);
		}
		dl_pb_end(pb);
		dl_pb_end(pb);
		x->points++;
		metric_end(pb, false);
		metric_head(pb, "dlbpf.step.category.time", "Step time by breakdown category", "s", METRIC_SUM);
		for (int c = 0; c < DL_CAT_COUNT; c++)
			point_seconds(x, pb, now, "category", dl_cat_name((enum dl_cat)c), ps->cat_ns[c]);
		metric_end(pb, true);
	}
	for (unsigned i = 1; i < DL_API_COUNT; i++)
		calls |= p->calls[i].count > 0;
	if (calls) {
		metric_head(pb, "dlbpf.cuda.calls", "CUDA runtime and driver calls, by API", "{call}", METRIC_SUM);
		for (unsigned i = 1; i < DL_API_COUNT; i++)
			if (p->calls[i].count)
				point_int(x, pb, now, "api", dl_api_by_id(i)->name, p->calls[i].count);
		metric_end(pb, true);
	}
}

static void export_metrics(struct dl_otlp *x, const struct dl_metrics_live *live)
{
	uint64_t now = dl_clock_ns(CLOCK_REALTIME), before = x->points;
	struct dl_pb *pb = &x->req;
	void *body;

	/* A replay's points are at the end of the recording's steps: they describe then, not now. */
	if (x->replay) {
		now = x->start_real;
		for (size_t i = 0; i < x->procs.n; i++)
			if (real_of(x, x->procs.v[i].last_ns) > now)
				now = real_of(x, x->procs.v[i].last_ns);
	}
	dl_pb_reset(pb);
	/* As many processes as the exposition has series for: a system-wide trace's are bounded the same way. */
	for (size_t i = 0, n = 0; i < x->sum->n && n < DL_METRICS_PROCS; i++) {
		const struct dl_proc *p = &x->sum->procs[i];
		bool any = dl_metrics_steps_of(x->steps, p->pid) != NULL;

		for (unsigned a = 1; a < DL_API_COUNT && !any; a++)
			any = p->calls[a].count > 0;
		if (!any)
			continue;
		n++;
		dl_pb_begin(pb, REQ_RESOURCE);
		resource(x, pb, p->pid);
		dl_pb_begin(pb, RES_SCOPE);
		scope(pb);
		proc_metrics(x, pb, p, now);
		dl_pb_end(pb);
		dl_pb_end(pb);
	}
	/* dlbpf's own: what the tracer lost (the JSON's drops). */
	dl_pb_begin(pb, REQ_RESOURCE);
	resource(x, pb, 0);
	dl_pb_begin(pb, RES_SCOPE);
	scope(pb);
	metric_head(pb, "dlbpf.dropped_events", "Events the tracer lost, by reason (as the JSON summary's drops)",
		    "{event}", METRIC_SUM);
	for (int i = 0; i < DL_DROP_MAX; i++)
		point_int(x, pb, now, "reason", dl_drop_name(i), live ? live->drops[i] : x->sum->drops[i]);
	metric_end(pb, true);
	dl_pb_end(pb);
	dl_pb_end(pb);
	body = dl_xcalloc(1, pb->len);
	memcpy(body, pb->buf, pb->len);
	dl_otlp_sender__put(x->send, DL_OTLP_METRICS, body, pb->len, x->points - before);
}

void dl_otlp__tick(struct dl_otlp *x, uint64_t now, const struct dl_metrics_live *live)
{
	if (x->pending && now - x->batch_since >= DL_OTLP_BATCH_NS)
		flush_traces(x);
	if (now >= x->next_metrics) {
		x->next_metrics = now + DL_OTLP_METRICS_NS;
		export_metrics(x, live);
	}
}

/* The process spans: each process's steps under one, the run's findings as events on the one with most steps. */
void dl_otlp__finish(struct dl_otlp *x, const struct dl_report_model *m, const struct dl_metrics_live *live)
{
	size_t most = 0;

	for (size_t i = 1; i < x->procs.n; i++)
		if (x->procs.v[i].steps > x->procs.v[most].steps)
			most = i;
	for (size_t i = 0; i < x->procs.n; i++) {
		struct proc_trace *t = &x->procs.v[i];
		const struct dl_proc *p = dl_summary_find(x->sum, t->pid);
		char name[64];

		snprintf(name, sizeof(name), "process %s", p && p->comm[0] ? p->comm : "?");
		span_head(x, &t->spans, t, t->span_id, NULL, name, t->first_ns, t->last_ns);
		kv_int(&t->spans, SPAN_ATTRS, "dlbpf.steps", (int64_t)t->steps);
		if (i == most && m->diag) {
			kv_str(&t->spans, SPAN_ATTRS, "dlbpf.verdict", dl_verdict_name(m->diag->verdict));
			for (int f = 0; f < m->diag->nfindings; f++) {
				const struct dl_finding *fd = &m->diag->findings[f];

				dl_pb_begin(&t->spans, SPAN_EVENTS);
				dl_pb_fixed64(&t->spans, EVENT_TIME, real_of(x, t->last_ns));
				dl_pb_str(&t->spans, EVENT_NAME, fd->rule);
				kv_str(&t->spans, EVENT_ATTRS, "dlbpf.finding.message", fd->message);
				dl_pb_end(&t->spans);
			}
		}
		dl_pb_end(&t->spans);
		t->pending++;
		x->pending++;
	}
	flush_traces(x);
	export_metrics(x, live);
}

void dl_otlp__destroy(struct dl_otlp *x, FILE *report, struct dl_otlp_stats *out)
{
	struct dl_otlp_stats st[DL_OTLP_SIGNALS];
	static const char *const what[DL_OTLP_SIGNALS] = { "spans", "metric points" };

	if (!x)
		return;
	dl_otlp_sender__destroy(x->send, dl_now_ns() + DL_OTLP_FLUSH_NS, st);
	for (int s = 0; s < DL_OTLP_SIGNALS; s++) {
		uint64_t lost = st[s].items_dropped_full + st[s].items_undelivered;

		if (report)
			fprintf(report, "\ndlbpf: OTLP %s: %" PRIu64 " sent to %s in %" PRIu64 " requests (%" PRIu64
				" retried), %" PRIu64 " dropped (%" PRIu64 " queue full, %" PRIu64
				" not delivered)%s%s\n", what[s], st[s].items_sent, x->url, st[s].requests, st[s].retries,
				lost, st[s].items_dropped_full, st[s].items_undelivered,
				st[s].last_error[0] ? "; last error: " : "", st[s].last_error);
		if (lost)
			dl_warn("OTLP: %" PRIu64 " %s not delivered to %s (%s%s%s)", lost, what[s], x->url,
				st[s].items_dropped_full ? "the queue was full" : "",
				st[s].items_dropped_full && st[s].items_undelivered ? "; " : "",
				!st[s].items_undelivered ? ""
				: st[s].last_error[0] ? st[s].last_error : "not sent by the exit deadline");
	}
	if (out)
		memcpy(out, st, sizeof(st));
	for (size_t i = 0; i < x->procs.n; i++)
		dl_pb_free(&x->procs.v[i].spans);
	dl_vec_free(&x->procs);
	dl_u64map_free(&x->of);
	dl_metrics_free(x->steps);
	dl_pb_free(&x->req);
	free(x);
}
