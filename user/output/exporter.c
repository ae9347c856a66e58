// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include "log.h"
#include "output/exporter.h"

/* The text format's media type (Prometheus exposition 0.0.4). */
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

int dl_exporter_open(struct dl_exporter *e, const char *addr, const struct dl_metrics_opts *o)
{
	char why[256];
	int err;

	memset(e, 0, sizeof(*e));
	e->http = dl_http_listen(addr, "/metrics", CONTENT_TYPE, why, sizeof(why));
	if (!e->http) {
		dl_err("--metrics %s", why);
		return -EADDRNOTAVAIL;
	}
	e->metrics = dl_metrics_new(o);
	err = dl_http_start(e->http);
	if (err) {
		dl_err("--metrics: cannot start the server's thread: %s", strerror(-err));
		dl_exporter_close(e);
		return err;
	}
	dl_info("metrics at http://%s/metrics", dl_http_address(e->http));
	return 0;
}

void dl_exporter_publish(struct dl_exporter *e, const struct dl_report_model *m, const struct dl_metrics_live *live,
			 bool last)
{
	if (!e->http)
		return;
	dl_metrics_render(e->metrics, m, live, &e->text);
	dl_http_publish(e->http, e->text.v, e->text.n, last);
}

void dl_exporter_close(struct dl_exporter *e)
{
	struct dl_http_stats st;

	if (e->http) {
		dl_http_stop(e->http, &st);
		dl_info("metrics: %" PRIu64 " scrapes served (%" PRIu64 " with the previous exposition); refused: %"
			PRIu64 " not found, %" PRIu64 " not GET, %" PRIu64 " malformed, %" PRIu64 " too large, %"
			PRIu64 " too slow, %" PRIu64 " evicted by newer connections; %" PRIu64
			" closed before asking", st.served, st.stale, st.not_found, st.bad_method, st.bad_request,
			st.too_large, st.timed_out, st.evicted, st.closed_early);
	}
	dl_metrics_free(e->metrics);
	dl_sbuf_free(&e->text);
	memset(e, 0, sizeof(*e));
}
