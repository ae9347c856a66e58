/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --otlp: the run as OpenTelemetry traces and metrics, OTLP/HTTP with
 * protobuf bodies (the pbwriter encoder, the field numbers of the official
 * opentelemetry-proto, kept under tests/proto/opentelemetry), delivered by
 * otlp_send. One trace per traced process: a span per step (wall-clock times
 * from the run's clock snapshot, the breakdown and what the step moved as
 * attributes) with its longest GPU and input waits as children, parented to
 * a process span sent at the end with the findings
 * as its events. Metrics as the /metrics exposition has them (the step-time
 * histogram, category time, CUDA calls, drops), cumulative, each export a new
 * point. The resource of each process: service.name, host.name,
 * process.pid, process.executable.name, container.id, k8s.pod.uid ...
 *
 * Spans go out in batches: DL_OTLP_BATCH_SPANS, or the first of a batch
 * DL_OTLP_BATCH_NS old (checked at each tick); metrics every
 * DL_OTLP_METRICS_NS and at the end.
 */
#ifndef DLBPF_OTLP_H
#define DLBPF_OTLP_H

#include <stdint.h>
#include <stdio.h>
#include "analysis/steps.h"
#include "analysis/summary.h"
#include "output/metrics.h"
#include "output/model.h"
#include "output/otlp_send.h"

#define DL_OTLP_BATCH_SPANS 512
#define DL_OTLP_BATCH_NS 1000000000ull
#define DL_OTLP_METRICS_NS 10000000000ull
#define DL_OTLP_FLUSH_NS 5000000000ull    /* at the end, delivery waits at most this long */

struct dl_otlp;

/* Checks the target (before anything is traced); sum is read at each export, from the caller's thread. */
struct dl_otlp *dl_otlp__new(const struct dl_otlp_target *t, const struct dl_summary *sum);
/* A recording's clock snapshot (its header): its CLOCK_MONOTONIC mono_ns was real_ns (Unix epoch ns). A live
 * run's is taken by dl_otlp__new. */
void dl_otlp__replay_clocks(struct dl_otlp *x, uint64_t mono_ns, uint64_t real_ns);
int dl_otlp__start(struct dl_otlp *x);
/* A step the correlator closed (a step sink). */
void dl_otlp__step(struct dl_otlp *x, const struct dl_step *st);
/* Between drains: a batch old enough goes, and the metrics when due. */
void dl_otlp__tick(struct dl_otlp *x, uint64_t now, const struct dl_metrics_live *live);
/* The end: process spans with the findings, the last metrics, every batch queued. */
void dl_otlp__finish(struct dl_otlp *x, const struct dl_report_model *m, const struct dl_metrics_live *live);
/*
 * Delivers within DL_OTLP_FLUSH_NS and says what went and what was dropped (report: the text report, or
 * NULL); st (DL_OTLP_SIGNALS, or NULL) gets the counts.
 */
void dl_otlp__destroy(struct dl_otlp *x, FILE *report, struct dl_otlp_stats *st);

#endif
