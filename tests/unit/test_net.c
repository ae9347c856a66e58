// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Socket receives through the record stream and the summary: endpoints by
 * peer (IPv4, IPv6) or, unconnected, by local port; bytes, calls, waits,
 * responses; MSG_PEEK, errors and receives without their entry; the bound on
 * endpoints kept; the JSON; the net-latency and net-bandwidth findings and
 * the share under which neither is raised; a receive's wait in a window.
 * Every expected figure is worked out by hand from the records fed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "analysis/net.h"
#include "analysis/summary.h"
#include "output/report.h"
#include "records/stream.h"

#define PID 100

static struct dl_stream st;
static struct dl_summary sum;

static void feed(const void *rec, size_t len)
{
	CHECK(dl_stream_emit(&st, rec, len) == 0, "record refused");
}

/* peer: IPv4 as 4 bytes, IPv6 as 16 (family says which); NULL: unconnected. */
struct recv_spec {
	uint32_t tid;
	uint16_t family, protocol, rport, lport;
	const uint8_t *peer;
	int64_t ret;
	uint64_t ts, dur;
	uint32_t flags, srtt_us;
};

static void recv_rec(pid_t pid, const struct recv_spec *r)
{
	struct dl_net_recv_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_NET_RECV, .ts = r->ts, .tgid = pid,
			       .tid = r->tid ? r->tid : (uint32_t)pid };
	e.dur_ns = r->dur;
	e.ret = r->ret;
	e.family = r->family;
	e.protocol = r->protocol;
	e.rport = r->peer ? r->rport : 0;
	e.lport = r->lport;
	if (r->peer)
		memcpy(e.raddr, r->peer, r->family == 10 ? 16 : 4);
	e.laddr[0] = 127;
	e.laddr[3] = 1;
	e.call = r->flags & DL_NET_NO_START ? 0 : DL_READ_RECVFROM;
	e.flags = r->flags;
	e.srtt_us = r->srtt_us;
	feed(&e, sizeof(e));
}

static const uint8_t V4[4] = { 10, 0, 0, 5 };
static const uint8_t V6[16] = { 0xfd, 0, [15] = 1 };

static const struct dl_net_endpoint *endpoint(pid_t pid, const char *name)
{
	struct dl_proc *p = dl_summary_find(&sum, pid);

	for (size_t i = 0; p && i < p->net.eps.n; i++)
		if (!strcmp(p->net.eps.v[i].name, name))
			return &p->net.eps.v[i];
	return NULL;
}

static void test_endpoints(void)
{
	const struct dl_net_endpoint *a, *b, *u;
	struct dl_proc *p;

	/* Two connections to 10.0.0.5:443: a response's first receive, then the rest of it. */
	recv_rec(PID, &(struct recv_spec){ .family = 2, .protocol = 6, .rport = 443, .lport = 40000, .peer = V4,
					   .ret = 1000, .ts = 100, .dur = 5000, .flags = DL_NET_AFTER_SEND, .srtt_us = 300 });
	recv_rec(PID, &(struct recv_spec){ .family = 2, .protocol = 6, .rport = 443, .lport = 40000, .peer = V4,
					   .ret = 65536, .ts = 6000, .dur = 700, .srtt_us = 250 });
	recv_rec(PID, &(struct recv_spec){ .family = 2, .protocol = 6, .rport = 443, .lport = 40001, .peer = V4,
					   .ret = 10, .ts = 7000, .dur = 50, .flags = DL_NET_PEEK, .srtt_us = 400 });
	recv_rec(PID, &(struct recv_spec){ .family = 2, .protocol = 6, .rport = 443, .lport = 40001, .peer = V4,
					   .ret = -11, .ts = 8000, .dur = 20 });
	/* No entry seen (recvmmsg): bytes and a call, no wait. */
	recv_rec(PID, &(struct recv_spec){ .family = 2, .protocol = 6, .rport = 443, .lport = 40001, .peer = V4,
					   .ret = 7, .ts = 9000, .flags = DL_NET_NO_START });
	recv_rec(PID, &(struct recv_spec){ .family = 10, .protocol = 17, .rport = 53, .lport = 50000, .peer = V6,
					   .ret = 512, .ts = 10000, .dur = 90, .flags = DL_NET_AFTER_SEND });
	recv_rec(PID, &(struct recv_spec){ .family = 2, .protocol = 17, .lport = 5353, .ret = 100, .ts = 11000, .dur = 30 });
	a = endpoint(PID, "tcp 10.0.0.5:443");
	b = endpoint(PID, "udp [fd00::1]:53");
	u = endpoint(PID, "udp unconnected :5353");
	CHECK(a && b && u, "endpoints missing");
	if (!a || !b || !u)
		return;
	CHECK_EQ_U64(a->bytes, 1000 + 65536 + 7);   /* the peek's 10 stay queued */
	CHECK_EQ_U64(a->recvs, 4);
	CHECK_EQ_U64(a->recv_ns, 5000 + 700 + 50);
	CHECK_EQ_U64(a->no_start, 1);
	CHECK_EQ_U64(a->errors, 1);
	CHECK_EQ_U64(a->responses, 1);
	CHECK_EQ_U64(a->response_ns, 5000);
	CHECK_EQ_U64(a->srtt_us, 250);
	CHECK_EQ_U64(a->connections, 2);
	CHECK_EQ_U64(b->bytes, 512);
	CHECK_EQ_U64(b->responses, 1);
	CHECK_EQ_U64(b->srtt_us, 0);
	CHECK_EQ_U64(u->bytes, 100);
	CHECK(u->unconnected && u->port == 5353, "the unconnected socket is named by its local port");
	p = dl_summary_find(&sum, PID);
	CHECK_EQ_U64(p->net.eps.n, 3);
}

static void test_bounded(void)
{
	uint8_t peer[4] = { 192, 168, 0, 0 };
	struct dl_proc *p;

	for (int i = 0; i < DL_NET_TRACKED + 10; i++) {
		peer[2] = (uint8_t)(i >> 8);
		peer[3] = (uint8_t)i;
		recv_rec(PID + 1, &(struct recv_spec){ .family = 2, .protocol = 6, .rport = 80, .lport = 1, .peer = peer,
						       .ret = 3, .ts = 1, .dur = 2 });
	}
	p = dl_summary_find(&sum, PID + 1);
	CHECK_EQ_U64(p->net.eps.n, DL_NET_TRACKED);
	CHECK_EQ_U64(p->net.more.recvs, 10);
	CHECK_EQ_U64(p->net.more.bytes, 30);
}

static void test_json(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct dl_report_model m;

	dl_report_model_build(&m, &sum, NULL, NULL);
	CHECK(dl_report_json(f, &m) == 0, "json");
	dl_report_model_free(&m);
	fclose(f);
	CHECK(strstr(buf, "\"endpoint\":\"tcp 10.0.0.5:443\",\"protocol\":\"tcp\",\"family\":\"ipv4\",\"address\":"
			  "\"10.0.0.5\",\"port\":443,\"connected\":true,\"connections\":2,\"bytes\":66543,\"recvs\":4,"
			  "\"recv_ns\":5750,\"recvs_no_start\":1,\"responses\":1,\"response_ns\":5000,\"errors\":1,"
			  "\"srtt_us\":250") != NULL, "10.0.0.5:443 in the JSON");
	CHECK(strstr(buf, "\"address\":\"fd00::1\"") != NULL, "the IPv6 peer in the JSON");
	/* 64 listed of 1024 kept: the others, and the 10 past the bound, in net_more (3 bytes each). */
	CHECK(strstr(buf, "\"net_more\":{\"bytes\":2910,\"recvs\":970,") != NULL, "net_more of the bounded process");
	free(buf);
}

/*
 * A loader thread that ran 1 s (its scheduler intervals), receiving from one
 * endpoint for total ns, of which first ns in responses' first receives.
 */
static const struct dl_finding *diagnose(uint64_t total, uint64_t first, int responses, struct dl_diagnosis *d)
{
	struct dl_summary s2;
	struct dl_stream st2 = { 0 };
	struct dl_correlator *c = dl_corr_new(&(struct dl_corr_opts){ 0 });
	struct dl_sched_ev run;
	const struct dl_finding *found = NULL;

	dl_summary_init(&s2);
	dl_stream_add(&st2, dl_summary_sink, &s2);
	st = st2;
	memset(&run, 0, sizeof(run));
	run.h = (struct dl_hdr){ .size = sizeof(run), .kind = DL_EV_SCHED, .ts = 0, .tgid = 300, .tid = 301 };
	run.dur_ns = 1000000000;
	run.state = DL_ST_RUNNING;
	CHECK(dl_stream_emit(&st, &run, sizeof(run)) == 0, "sched");
	for (int i = 0; i < responses; i++)
		recv_rec(300, &(struct recv_spec){ .tid = 301, .family = 2, .protocol = 6, .rport = 443, .lport = 9,
						   .peer = V4, .ret = 4000, .ts = 10, .dur = first / responses,
						   .flags = DL_NET_AFTER_SEND, .srtt_us = 100 });
	if (total > first)
		recv_rec(300, &(struct recv_spec){ .tid = 301, .family = 2, .protocol = 6, .rport = 443, .lport = 9,
						   .peer = V4, .ret = 1 << 20, .ts = 10, .dur = total - first });
	dl_diagnose(c, &s2, &(struct dl_diag_opts){ 0 }, d);
	for (int i = 0; i < d->nfindings; i++)
		if (!strncmp(d->findings[i].rule, "net-", 4)) {
			CHECK(!found, "two network findings for one endpoint");
			found = &d->findings[i];
		}
	dl_corr_free(c);
	dl_summary_free(&s2);
	dl_stream_free(&st);
	return found;
}

static void test_findings(void)
{
	struct dl_diagnosis *d = calloc(1, sizeof(*d));
	const struct dl_finding *f;

	/* 400 ms of a 1 s thread, 300 of it in 30 first receives of 10 ms (100 times TCP's round trip). */
	f = diagnose(400000000, 300000000, 30, d);
	CHECK(f && !strcmp(f->rule, "net-latency"), "latency-bound: %s", f ? f->rule : "nothing");
	CHECK(f && strstr(f->message, "tcp 10.0.0.5:443") && strstr(f->message, "the server's"),
	      "the latency finding names the endpoint and the server's time: %s", f ? f->message : "");
	memset(d, 0, sizeof(*d));
	/* 400 ms, 40 of it to the first bytes of 2 responses: the transfer is the wait. */
	f = diagnose(400000000, 40000000, 2, d);
	CHECK(f && !strcmp(f->rule, "net-bandwidth"), "bandwidth-bound: %s", f ? f->rule : "nothing");
	/* 1 MiB + 8000 B in the 360 ms after the first bytes: 2.9 MB/s. */
	CHECK(f && strstr(f->message, "at 2.9 MB/s"), "the rate once flowing: %s", f ? f->message : "");
	memset(d, 0, sizeof(*d));
	/* 40 ms of the 1 s thread: under the 5% that counts. */
	f = diagnose(40000000, 30000000, 3, d);
	CHECK(!f, "a 4%% wait raised %s", f ? f->rule : "");
	free(d);
}

static void test_wait_in(void)
{
	struct dl_net_recv_ev e = { .h = { .ts = 1000 }, .dur_ns = 500 };
	struct dl_net_endpoint k;

	CHECK_EQ_U64(dl_net_wait_in(e.h.ts, e.dur_ns, 0, 2000), 500);
	CHECK_EQ_U64(dl_net_wait_in(e.h.ts, e.dur_ns, 1200, 1300), 100);
	CHECK_EQ_U64(dl_net_wait_in(e.h.ts, e.dur_ns, 1400, 9000), 100);
	CHECK_EQ_U64(dl_net_wait_in(e.h.ts, e.dur_ns, 1500, 9000), 0);
	e.family = 10;
	e.protocol = 6;
	e.rport = 8443;
	e.raddr[15] = 1;
	dl_net_endpoint_of(&e, &k);
	CHECK(!strcmp(k.name, "tcp [::1]:8443"), "name %s", k.name);
}

int main(void)
{
	dl_summary_init(&sum);
	dl_stream_add(&st, dl_summary_sink, &sum);
	test_endpoints();
	test_bounded();
	test_json();
	dl_stream_free(&st);
	dl_summary_free(&sum);
	test_findings();
	test_wait_in();
	return check_report("test_net");
}
