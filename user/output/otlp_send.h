/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * OTLP/HTTP delivery: request bodies (already encoded) POSTed from a thread
 * of their own, so that the collector never waits on the network. The queue
 * is bounded in bytes: a body that does not fit is dropped at once and
 * counted, like an event the ring buffer had no room for. A body is retried
 * on 429, 502, 503, 504 and connection errors, with exponential backoff or
 * the wait the server's Retry-After asks; rejected (another status) or out
 * of tries, it is dropped and counted. Closing flushes what is queued within
 * a deadline and drops (counts) the rest: dlbpf's exit stays bounded whatever
 * the receiver does. Plain http only: dlbpf links no TLS library.
 */
#ifndef DLBPF_OTLP_SEND_H
#define DLBPF_OTLP_SEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DL_OTLP_HEADERS_MAX 8

enum dl_otlp_signal { DL_OTLP_TRACES, DL_OTLP_METRICS, DL_OTLP_SIGNALS };

struct dl_otlp_target {
	const char *url;                       /* http://HOST[:PORT][/PREFIX]; /v1/traces, /v1/metrics appended */
	const char *headers[DL_OTLP_HEADERS_MAX];   /* "Key=Value" (--otlp-header) */
	int nheaders;
	size_t queue_bytes;                    /* 0: the default */
};

/* Per signal: items are spans or data points. */
struct dl_otlp_stats {
	uint64_t requests, items_sent;
	uint64_t items_dropped_full;     /* the queue had no room */
	uint64_t items_undelivered;      /* rejected, out of tries, or left at the exit deadline */
	uint64_t retries;
	char last_error[128];            /* empty: none */
};

struct dl_otlp_sender;

/* Checks url and headers and resolves the host (before anything is traced); says why not and returns NULL. */
struct dl_otlp_sender *dl_otlp_sender__new(const struct dl_otlp_target *t);
/* Starts the thread that delivers; 0 or -errno (said). */
int dl_otlp_sender__start(struct dl_otlp_sender *s);
/* Queues body (malloc'ed, taken in any case) holding items; false: dropped, the queue is full. Started or not. */
bool dl_otlp_sender__put(struct dl_otlp_sender *s, enum dl_otlp_signal sig, void *body, size_t len, uint64_t items);
/* Delivers what is queued until deadline_ns (CLOCK_MONOTONIC), drops the rest, stops the thread; st[DL_OTLP_SIGNALS]. */
void dl_otlp_sender__destroy(struct dl_otlp_sender *s, uint64_t deadline_ns, struct dl_otlp_stats *st);
/*
 * Why "K=V" (--otlp-header) cannot be sent as an HTTP header, or NULL: the
 * key must be a token and not one dlbpf sets itself (Host, User-Agent,
 * Content-Type, Content-Length, Connection, Transfer-Encoding), the value
 * free of control characters (tabs aside). Any reason is a usage error.
 */
const char *dl_otlp_header_why(const char *kv);

/* An --otlp URL's parts: http://HOST[:PORT][/PREFIX]. */
struct dl_otlp_url {
	char host[256], port[8], prefix[512], hostport[300];
};
/* Parses url into u: 0, or -EINVAL with why (a usage error: not http, https, no host, a bad port ...). */
int dl_otlp_url_parse(const char *url, struct dl_otlp_url *u, char *why, size_t whylen);
/* The Retry-After of a response head in ns (delay-seconds form), or 0. */
uint64_t dl_otlp_retry_after_ns(const char *head);

#endif
