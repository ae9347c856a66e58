/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The network source on the collector's side: where its programs
 * (bpf/net.bpf.c) see a receive end, the cheapest this kernel has, and what
 * that costs the tasks dlbpf does not trace.
 */
#ifndef DLBPF_CAPTURE_NET_H
#define DLBPF_CAPTURE_NET_H

#include <stdbool.h>
#include "capture/files.h"

struct dlbpf;
struct dl_sysevents;
struct dl_features;

enum dl_net_mech {
	DL_NET_NONE,        /* nothing to attach to here */
	DL_NET_TRACEPOINT,  /* raw tracepoints sock:sock_recv_length, sock_send_length (6.5+) */
	DL_NET_FEXIT,       /* fexit on sock_recvmsg; tcp_sendmsg, udp_sendmsg, udpv6_sendmsg */
};

/* The cheapest mechanism this kernel has (its BTF says which tracepoints exist); DL_NET_NONE if none. */
enum dl_net_mech dl_net_mechanism(const struct dl_features *f);
/* "tracepoint", "fexit" or "none": `dlbpf features`. */
const char *dl_net_mech_name(enum dl_net_mech m);
/*
 * What the mechanism costs tasks dlbpf does not trace, and how the receive's
 * entry (its wait) is seen given the files source's mechanism, in a sentence
 * written into buf.
 */
const char *dl_net_mech_cost(enum dl_net_mech m, enum dl_files_mech entry, char *buf, size_t cap);
/*
 * Loads the network programs of the cheapest mechanism when wanted; the receive calls'
 * entries ride on the files source's mechanism (none with --no-files: the
 * receives are counted without their wait). Returns the mechanism.
 */
enum dl_net_mech dl_net_choose(struct dlbpf *skel, bool wanted, const struct dl_features *f, enum dl_files_mech entry);
/* Attaches the syscall tracepoints of the entries (the files source's tracepoint mechanism); -errno. */
int dl_net_attach(struct dlbpf *skel, enum dl_net_mech m, enum dl_files_mech entry, struct dl_sysevents *events);

#endif
