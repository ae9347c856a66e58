// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdlib.h>
#include "output/report.h"
#include "output/report_net.h"
#include "util.h"

/* As the files' lines: where the waits went, the JSON has the rest. */
#define TEXT_ENDPOINTS 3

void dl_report_net_text(FILE *f, const struct dl_proc_net *pn)
{
	size_t n;
	const struct dl_net_endpoint **top = dl_net_top(pn, TEXT_ENDPOINTS, &n);
	char rb[32];

	for (size_t i = 0; i < n; i++) {
		const struct dl_net_endpoint *ep = top[i];

		dl_fmt_bytes(rb, sizeof(rb), ep->bytes);
		fprintf(f, "  %s %s: received %s in %" PRIu64 " calls, blocked %.3f ms", i ? "        " : "net     ",
			ep->name, rb, ep->recvs, (double)ep->recv_ns / 1e6);
		if (ep->responses)
			fprintf(f, " (%" PRIu64 " responses, %.3f ms to their first byte)", ep->responses,
				(double)ep->response_ns / 1e6);
		if (ep->no_start)
			fprintf(f, "; %" PRIu64 " calls' waits not seen", ep->no_start);
		fputc('\n', f);
	}
	if (pn->eps.n > n && n)
		fprintf(f, "           (%zu more endpoints: see the JSON summary)\n", pn->eps.n - n);
	free(top);
}

static void stats_json(struct dl_json *j, const struct dl_net_endpoint *ep)
{
	dl_json_ku64(j, "bytes", ep->bytes);
	dl_json_ku64(j, "recvs", ep->recvs);
	dl_json_ku64(j, "recv_ns", ep->recv_ns);
	dl_json_ku64(j, "recvs_no_start", ep->no_start);
	dl_json_ku64(j, "responses", ep->responses);
	dl_json_ku64(j, "response_ns", ep->response_ns);
	dl_json_ku64(j, "errors", ep->errors);
}

void dl_report_net_json(struct dl_json *j, const struct dl_proc_net *pn)
{
	size_t n;
	const struct dl_net_endpoint **top = dl_net_top(pn, DL_NET_LISTED, &n);
	struct dl_net_endpoint more = pn->more;
	char addr[64];

	dl_json_key(j, "net");
	dl_json_arr_begin(j);
	for (size_t i = 0; i < n; i++) {
		const struct dl_net_endpoint *ep = top[i];

		dl_net_addr_str(ep, addr, sizeof(addr));
		dl_json_obj_begin(j);
		dl_json_kstr(j, "endpoint", ep->name);
		dl_json_kstr(j, "protocol", ep->protocol == 6 ? "tcp" : ep->protocol == 17 ? "udp" : "other");
		dl_json_kstr(j, "family", ep->family == 10 ? "ipv6" : "ipv4");
		dl_json_kstr(j, "address", addr);
		dl_json_ku64(j, "port", ep->port);
		dl_json_key(j, "connected");
		dl_json_bool(j, !ep->unconnected);
		dl_json_ku64(j, "connections", ep->connections);
		stats_json(j, ep);
		dl_json_ku64(j, "srtt_us", ep->srtt_us);
		dl_json_obj_end(j);
	}
	dl_json_arr_end(j);
	/* "net_more": every receive not listed, from endpoints past the listed and past the tracked ones. */
	{
		size_t all;
		const struct dl_net_endpoint **every = dl_net_top(pn, SIZE_MAX, &all);

		for (size_t i = n; i < all; i++) {
			more.bytes += every[i]->bytes;
			more.recvs += every[i]->recvs;
			more.recv_ns += every[i]->recv_ns;
			more.no_start += every[i]->no_start;
			more.responses += every[i]->responses;
			more.response_ns += every[i]->response_ns;
			more.errors += every[i]->errors;
		}
		free(every);
	}
	dl_json_key(j, "net_more");
	dl_json_obj_begin(j);
	stats_json(j, &more);
	dl_json_obj_end(j);
	free(top);
}
