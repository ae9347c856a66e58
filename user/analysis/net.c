// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/net.h"

void dl_net_free(struct dl_proc_net *pn)
{
	for (size_t i = 0; i < pn->eps.n; i++)
		dl_u64map_free(&pn->eps.v[i].lports);
	dl_vec_free(&pn->eps);
	dl_u64map_free(&pn->by_key);
	dl_u64map_free(&pn->more.lports);
	dl_u64map_free(&pn->receiver_tids);
	memset(pn, 0, sizeof(*pn));
}

void dl_net_endpoint_of(const struct dl_net_recv_ev *e, struct dl_net_endpoint *key)
{
	static const uint8_t zero[16];

	memset(key, 0, sizeof(*key));
	key->family = e->family;
	key->protocol = e->protocol;
	key->unconnected = !e->rport && !memcmp(e->raddr, zero, sizeof(zero));
	memcpy(key->addr, key->unconnected ? e->laddr : e->raddr, sizeof(key->addr));
	key->port = key->unconnected ? e->lport : e->rport;
	dl_net_endpoint_name(key, key->name, sizeof(key->name));
}

uint64_t dl_net_wait_in(uint64_t entry, uint64_t dur_ns, uint64_t from, uint64_t to)
{
	uint64_t a = entry > from ? entry : from, b = entry + dur_ns < to ? entry + dur_ns : to;

	return b > a ? b - a : 0;
}

static uint64_t key_hash(const struct dl_net_endpoint *k)
{
	uint8_t b[22];

	memcpy(b, k->addr, 16);
	memcpy(b + 16, &k->family, 2);
	memcpy(b + 18, &k->protocol, 2);
	memcpy(b + 20, &k->port, 2);
	return dl_hash_bytes(b, sizeof(b)) ^ k->unconnected;
}

static bool same(const struct dl_net_endpoint *a, const struct dl_net_endpoint *b)
{
	return a->family == b->family && a->protocol == b->protocol && a->port == b->port &&
	       a->unconnected == b->unconnected && !memcmp(a->addr, b->addr, sizeof(a->addr));
}

/* The endpoint's stat, added if new; NULL when the table is full. */
static struct dl_net_endpoint *intern(struct dl_proc_net *pn, const struct dl_net_endpoint *k)
{
	uint64_t key = key_hash(k), i;
	struct dl_net_endpoint *ep;

	/* Open addressing on the hash, as the files' paths. */
	for (;; key++) {
		if (!dl_u64map_get(&pn->by_key, key, &i))
			break;
		if (same(&pn->eps.v[i], k))
			return &pn->eps.v[i];
	}
	if (pn->eps.n >= DL_NET_TRACKED)
		return NULL;
	ep = dl_vec_push(&pn->eps);
	*ep = *k;
	dl_u64map_put(&pn->by_key, key, pn->eps.n - 1);
	return ep;
}

void dl_net_recv(struct dl_proc_net *pn, const struct dl_net_recv_ev *e)
{
	struct dl_net_endpoint k, *ep;

	dl_net_endpoint_of(e, &k);
	ep = intern(pn, &k);
	if (!ep)
		ep = &pn->more;
	if (e->ret < 0) {
		ep->errors++;
		return;
	}
	dl_u64map_put(&pn->receiver_tids, e->h.tid, 0);
	if (!dl_u64map_get(&ep->lports, e->lport, NULL)) {
		dl_u64map_put(&ep->lports, e->lport, 0);
		ep->connections++;
	}
	ep->recvs++;
	if (!(e->flags & DL_NET_PEEK))
		ep->bytes += (uint64_t)e->ret;
	if (e->flags & DL_NET_NO_START)
		ep->no_start++;
	else
		ep->recv_ns += e->dur_ns;
	if (e->flags & DL_NET_AFTER_SEND) {
		ep->responses++;
		if (!(e->flags & DL_NET_NO_START))
			ep->response_ns += e->dur_ns;
	}
	if (e->srtt_us && (!ep->srtt_us || e->srtt_us < ep->srtt_us))
		ep->srtt_us = e->srtt_us;
}

void dl_net_addr_str(const struct dl_net_endpoint *ep, char *buf, size_t cap)
{
	char a[INET6_ADDRSTRLEN];

	if (!inet_ntop(ep->family == AF_INET6 ? AF_INET6 : AF_INET, ep->addr, a, sizeof(a)))
		snprintf(a, sizeof(a), "?");
	snprintf(buf, cap, "%s", a);
}

void dl_net_endpoint_name(const struct dl_net_endpoint *ep, char *buf, size_t cap)
{
	const char *proto = ep->protocol == 6 ? "tcp" : ep->protocol == 17 ? "udp" : "ip";
	char a[INET6_ADDRSTRLEN];

	dl_net_addr_str(ep, a, sizeof(a));
	if (ep->unconnected)
		snprintf(buf, cap, "%s unconnected :%u", proto, ep->port);
	else if (ep->family == AF_INET6)
		snprintf(buf, cap, "%s [%s]:%u", proto, a, ep->port);
	else
		snprintf(buf, cap, "%s %s:%u", proto, a, ep->port);
}

static int by_wait(const void *a, const void *b)
{
	const struct dl_net_endpoint *x = *(const struct dl_net_endpoint *const *)a;
	const struct dl_net_endpoint *y = *(const struct dl_net_endpoint *const *)b;

	if (x->recv_ns != y->recv_ns)
		return x->recv_ns < y->recv_ns ? 1 : -1;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return memcmp(x->addr, y->addr, sizeof(x->addr)) ?: (int)x->port - (int)y->port;
}

const struct dl_net_endpoint **dl_net_top(const struct dl_proc_net *pn, size_t max, size_t *n)
{
	const struct dl_net_endpoint **v = dl_xcalloc(pn->eps.n ? pn->eps.n : 1, sizeof(*v));
	size_t k = 0;

	for (size_t i = 0; i < pn->eps.n; i++)
		if (pn->eps.v[i].recvs)
			v[k++] = &pn->eps.v[i];
	qsort(v, k, sizeof(*v), by_wait);
	*n = k < max ? k : max;
	return v;
}
