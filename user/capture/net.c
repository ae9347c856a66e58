// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "capture/env.h"
#include "capture/net.h"
#include "capture/sysevents.h"
#include "dlbpf.skel.h"
#include "log.h"

/* What the kernel's BTF names: the raw tracepoints' prototypes (btf_trace_<name>), the functions fexit can attach to. */
enum { HAS_RECV_TP = 1, HAS_SEND_TP = 2, HAS_TCP_SEND = 4, HAS_UDP_SEND = 8, HAS_UDP6_SEND = 16, HAS_RECVMSG = 32 };

static unsigned btf_has(void)
{
	static const struct { const char *name; int kind; unsigned bit; } names[] = {
		{ "btf_trace_sock_recv_length", BTF_KIND_TYPEDEF, HAS_RECV_TP },
		{ "btf_trace_sock_send_length", BTF_KIND_TYPEDEF, HAS_SEND_TP },
		{ "tcp_sendmsg", BTF_KIND_FUNC, HAS_TCP_SEND },
		{ "udp_sendmsg", BTF_KIND_FUNC, HAS_UDP_SEND },
		{ "udpv6_sendmsg", BTF_KIND_FUNC, HAS_UDP6_SEND },
		{ "sock_recvmsg", BTF_KIND_FUNC, HAS_RECVMSG },
	};
	static int has = -1;
	struct btf *btf;

	if (has >= 0)
		return (unsigned)has;
	has = 0;
	btf = btf__load_vmlinux_btf();
	if (!btf)
		return 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (btf__find_by_name_kind(btf, names[i].name, names[i].kind) > 0)
			has |= (int)names[i].bit;
	btf__free(btf);
	return (unsigned)has;
}

static bool tracepoints_there(void)
{
	return (btf_has() & (HAS_RECV_TP | HAS_SEND_TP)) == (HAS_RECV_TP | HAS_SEND_TP);
}

enum dl_net_mech dl_net_mechanism(const struct dl_features *f)
{
	if (tracepoints_there())
		return DL_NET_TRACEPOINT;
	return f->fentry && (btf_has() & HAS_RECVMSG) ? DL_NET_FEXIT : DL_NET_NONE;
}

const char *dl_net_mech_name(enum dl_net_mech m)
{
	switch (m) {
	case DL_NET_TRACEPOINT:
		return "tracepoint";
	case DL_NET_FEXIT:
		return "fexit";
	default:
		return "none";
	}
}

static const char *entry_cost(enum dl_files_mech entry)
{
	switch (entry) {
	case DL_FILES_FENTRY:
		return "the wait from the call's entry: fentry on recvfrom and recvmsg (a trampoline and one load each)";
	case DL_FILES_KPROBE:
		return "the wait from the call's entry: kprobes on recvfrom and recvmsg (a probe and one load each)";
	case DL_FILES_TRACEPOINT:
		return "the wait from the call's entry: the recvfrom and recvmsg syscall tracepoints, on the traced "
		       "syscall path the files source already puts every task on";
	default:
		return "no wait: the files source is off (--no-files), and with it the calls' entries";
	}
}

const char *dl_net_mech_cost(enum dl_net_mech m, enum dl_files_mech entry, char *buf, size_t cap)
{
	switch (m) {
	case DL_NET_TRACEPOINT:
		snprintf(buf, cap, "socket receives and sends seen at the raw tracepoints sock:sock_recv_length and "
			 "sock_send_length (the return of sock_recvmsg, sock_sendmsg): other tasks' receives and sends "
			 "pay the tracepoint and one load, nothing else does; %s", entry_cost(entry));
		break;
	case DL_NET_FEXIT:
		snprintf(buf, cap, "socket receives and sends seen by fexit on sock_recvmsg and on tcp_sendmsg, "
			 "udp_sendmsg and udpv6_sendmsg: other tasks' receives and sends pay a BPF trampoline and one "
			 "load, nothing else does; %s",
			 entry_cost(entry));
		break;
	default:
		snprintf(buf, cap, "socket receives are not seen: no sock:sock_recv_length tracepoint (6.5+) and "
			 "no fentry here");
		break;
	}
	return buf;
}

/* The entry programs, one pair per mechanism of the files source: recvfrom, recvmsg. */
static void entry_progs(struct dlbpf *skel, enum dl_files_mech m, struct bpf_program *out[2])
{
	out[0] = out[1] = NULL;
	if (m == DL_FILES_FENTRY) {
		out[0] = skel->progs.net_recvfrom_fentry;
		out[1] = skel->progs.net_recvmsg_fentry;
	} else if (m == DL_FILES_KPROBE) {
		out[0] = skel->progs.net_recvfrom_kprobe;
		out[1] = skel->progs.net_recvmsg_kprobe;
	} else if (m == DL_FILES_TRACEPOINT) {
		out[0] = skel->progs.net_recvfrom_enter;
		out[1] = skel->progs.net_recvmsg_enter;
	}
}

static const char *const tp_events[2] = { "sys_enter_recvfrom", "sys_enter_recvmsg" };

enum dl_net_mech dl_net_choose(struct dlbpf *skel, bool wanted, const struct dl_features *f, enum dl_files_mech entry)
{
	enum dl_net_mech m = wanted ? dl_net_mechanism(f) : DL_NET_NONE;
	struct bpf_program *entries[2];
	char cost[512];

	bpf_program__set_autoload(skel->progs.net_recv_tp, m == DL_NET_TRACEPOINT);
	bpf_program__set_autoload(skel->progs.net_send_tp, m == DL_NET_TRACEPOINT);
	bpf_program__set_autoload(skel->progs.net_recv_fexit, m == DL_NET_FEXIT);
	/* A protocol this kernel lacks (IPv6 built as a module) has no send to mark: its responses go unnamed. */
	bpf_program__set_autoload(skel->progs.net_tcp_send_fexit, m == DL_NET_FEXIT && (btf_has() & HAS_TCP_SEND));
	bpf_program__set_autoload(skel->progs.net_udp_send_fexit, m == DL_NET_FEXIT && (btf_has() & HAS_UDP_SEND));
	bpf_program__set_autoload(skel->progs.net_udp6_send_fexit, m == DL_NET_FEXIT && (btf_has() & HAS_UDP6_SEND));
	/* The syscall tracepoints go through dlbpf's own events (dl_net_attach), like the files source's. */
	bpf_program__set_autoattach(skel->progs.net_recvfrom_enter, false);
	bpf_program__set_autoattach(skel->progs.net_recvmsg_enter, false);
	entry_progs(skel, entry, entries);
	if (m != DL_NET_NONE && entries[0] &&
	    (entry != DL_FILES_TRACEPOINT || (dl_sysevent_id(tp_events[0]) >= 0 && dl_sysevent_id(tp_events[1]) >= 0)))
		for (int i = 0; i < 2; i++)
			bpf_program__set_autoload(entries[i], true);
	if (!wanted)
		return m;
	dl_net_mech_cost(m, entry, cost, sizeof(cost));
	if (m == DL_NET_NONE)
		dl_warn("network: %s", cost);
	else
		dl_info("network: %s", cost);
	return m;
}

int dl_net_attach(struct dlbpf *skel, enum dl_net_mech m, enum dl_files_mech entry, struct dl_sysevents *events)
{
	struct bpf_program *entries[2];

	if (m == DL_NET_NONE || entry != DL_FILES_TRACEPOINT)
		return 0;
	entry_progs(skel, entry, entries);
	for (int i = 0; i < 2; i++) {
		struct bpf_link **link = i ? &skel->links.net_recvmsg_enter : &skel->links.net_recvfrom_enter;

		if (!bpf_program__autoload(entries[i]))
			continue;
		*link = dl_sysevent_attach(events, entries[i], tp_events[i]);
		if (!*link) {
			int err = -errno;

			dl_err("cannot attach %s to syscalls/%s: %s", bpf_program__name(entries[i]), tp_events[i],
			       strerror(-err));
			return err;
		}
	}
	return 0;
}
