/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Socket receives per process and remote endpoint: bytes, calls, the time
 * blocked in them, and of that the waits of a response's first receive (the
 * round trip and the server's time to the first byte). Pure: fed records by
 * the summary.
 */
#ifndef DLBPF_NET_H
#define DLBPF_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "dlbpf/events.h"
#include "util.h"

/* Endpoints kept per process: past this many, receives are counted together (more). */
#define DL_NET_TRACKED 1024
#define DL_NET_LISTED 64

#define DL_NET_NAME_LEN 64

struct dl_net_endpoint {
	char name[DL_NET_NAME_LEN];  /* dl_net_endpoint_name's */
	uint8_t addr[16];        /* the peer (IPv4 in the first 4 bytes); unconnected: this end's */
	uint16_t family, protocol;
	uint16_t port;           /* the peer's; unconnected: this end's */
	bool unconnected;        /* a socket with no peer (UDP recvfrom): named by its local port */
	uint64_t bytes;          /* received, MSG_PEEK left out */
	uint64_t recvs;          /* receive calls that returned >= 0 (0: the peer closed) */
	uint64_t recv_ns;        /* inside those whose entry was seen */
	uint64_t no_start;       /* receives whose entry was not seen: in recvs and bytes, not recv_ns */
	uint64_t responses;      /* receives that were the first on their socket after a send */
	uint64_t response_ns;    /* their waits: a round trip and the server's time to the first byte */
	uint64_t errors;         /* receives that failed (EAGAIN on a non-blocking socket, a reset) */
	uint32_t srtt_us;        /* TCP: the kernel's smoothed round trip, the lowest seen */
	uint32_t connections;    /* distinct local ports seen (TCP connections, UDP sockets) */
	struct dl_u64map lports; /* local ports seen (values unused) */
};

struct dl_proc_net {
	DL_VEC(struct dl_net_endpoint) eps;
	struct dl_u64map by_key;      /* hash of the endpoint -> index in eps */
	struct dl_net_endpoint more;  /* receives from endpoints past DL_NET_TRACKED */
	struct dl_u64map receiver_tids; /* threads that received (values unused) */
};

void dl_net_free(struct dl_proc_net *pn);
/*
 * The endpoint a receive record came from, its name included (counts zero):
 * a connected socket by its peer, one with no peer by its local address and
 * port. With dl_net_recv_wait_in, what a consumer of the records (the
 * lineage) needs to say which endpoint a thread waited on in a window.
 */
void dl_net_endpoint_of(const struct dl_net_recv_ev *e, struct dl_net_endpoint *key);
/* The part of a receive's wait (from its entry, dur_ns long) inside [from, to), in ns. */
uint64_t dl_net_wait_in(uint64_t entry, uint64_t dur_ns, uint64_t from, uint64_t to);
void dl_net_recv(struct dl_proc_net *pn, const struct dl_net_recv_ev *e);
/* "tcp 10.0.0.5:443", "udp [fd00::1]:53", "udp unconnected :5353". */
void dl_net_endpoint_name(const struct dl_net_endpoint *ep, char *buf, size_t cap);
/* "127.0.0.1", "::1": the address alone. */
void dl_net_addr_str(const struct dl_net_endpoint *ep, char *buf, size_t cap);
/* The endpoints with receives, most time blocked first (ties: most bytes); *n of them, at most max. Caller frees. */
const struct dl_net_endpoint **dl_net_top(const struct dl_proc_net *pn, size_t max, size_t *n);

#endif
