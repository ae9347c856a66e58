/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A small HTTP/1.1 responder for one resource (GET /metrics): its own thread,
 * so no client can stall the collector. The thread never reads the
 * collector's state: it serves a body the collector publishes, and asks for
 * a fresh one when a request is complete (dl_http_wants), so a scrape sees
 * what the collector knew at most one drain interval after it asked.
 *
 * Bounded everywhere: at most DL_HTTP_SLOTS connections at once (a new one
 * evicts the oldest still sending its request), DL_HTTP_REQ_MAX bytes of
 * request (431 beyond), DL_HTTP_READ_MS to send it (a slow client is closed),
 * DL_HTTP_WRITE_MS to take the response. One request per connection.
 */
#ifndef DLBPF_HTTP_H
#define DLBPF_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DL_HTTP_SLOTS 8
#define DL_HTTP_REQ_MAX 8192      /* a scraper's request is a few hundred bytes */
#define DL_HTTP_READ_MS 3000
#define DL_HTTP_WRITE_MS 10000    /* Prometheus's default scrape timeout */
#define DL_HTTP_FRESH_MS 1000     /* how long a request waits for a fresh body before it gets the last one */

/* What happened to the connections, for the end-of-run log line. */
struct dl_http_stats {
	uint64_t served, not_found, bad_method, bad_request, too_large, timed_out, evicted, closed_early;
	uint64_t stale;   /* served the previous body: the collector did not publish in DL_HTTP_FRESH_MS */
};

struct dl_http;

/*
 * "PORT" (127.0.0.1:PORT), "HOST:PORT" or "[V6]:PORT", HOST numeric or a name
 * the resolver knows. Returns 0, or -EINVAL with why in err.
 */
int dl_http_parse_addr(const char *spec, char *host, size_t hostlen, char *port, size_t portlen, char *err,
		       size_t errlen);
/*
 * Binds and listens (the thread is not started): returns NULL with why in err
 * (a port in use, an address not of this host). path: the one resource.
 */
struct dl_http *dl_http_listen(const char *spec, const char *path, const char *content_type, char *err,
			       size_t errlen);
/*
 * What a request gets, from its first n bytes (n <= DL_HTTP_REQ_MAX): 0 while
 * it is incomplete and may still be a request, else the status to answer,
 * 200 for a GET of path (a query string allowed). Once decided it stays:
 * more bytes never change it, so the server answers at the first decided
 * prefix.
 */
int dl_http_request_status(const char *req, size_t n, const char *path);
/* "127.0.0.1:9464", as bound. */
const char *dl_http_address(const struct dl_http *h);
int dl_http_start(struct dl_http *h);
/* Collector side: true while a request waits for a fresh body. */
bool dl_http_wants(struct dl_http *h);
/* Collector side: the body from now on (copied). last: no fresh one will come, serve this one at once. */
void dl_http_publish(struct dl_http *h, const char *body, size_t len, bool last);
/* Stops the thread, closes every connection; stats may be NULL. */
void dl_http_stop(struct dl_http *h, struct dl_http_stats *stats);

#endif
