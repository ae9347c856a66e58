/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --metrics: the exposition (metrics.h) served over HTTP (http.h). The
 * collector feeds it steps, and renders a fresh exposition when a scrape
 * asks (dl_exporter_wants), between two drains: the server's thread never
 * touches the summary.
 */
#ifndef DLBPF_EXPORTER_H
#define DLBPF_EXPORTER_H

#include <stdbool.h>
#include "output/http.h"
#include "output/metrics.h"

struct dl_exporter {
	struct dl_http *http;
	struct dl_metrics *metrics;
	struct dl_sbuf text;
};

/* Listens on addr (see dl_http_parse_addr) and starts serving; says why not and returns -errno. */
int dl_exporter_open(struct dl_exporter *e, const char *addr, const struct dl_metrics_opts *o);
static inline bool dl_exporter_wants(const struct dl_exporter *e)
{
	return e->http && dl_http_wants(e->http);
}
/* Renders and publishes; last: the run is over, this is what every later scrape gets. */
void dl_exporter_publish(struct dl_exporter *e, const struct dl_report_model *m, const struct dl_metrics_live *live,
			 bool last);
/* Stops serving (says what the clients did, with -v); safe on one never opened. */
void dl_exporter_close(struct dl_exporter *e);

#endif
