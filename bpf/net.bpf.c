// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Network receives: every socket receive of a traced task, with the bytes, the
 * socket's endpoints and the time from the call's entry (the wait for data).
 *
 * Where a receive ends, chosen before load by what the kernel has
 * (user/capture/net.c; all optional, "?"):
 * - the raw tracepoint sock:sock_recv_length (6.5+), at the return of
 *   sock_recvmsg: every receive path (read, recv*, io_uring inline) passes it;
 *   other tasks' receives pay the tracepoint and one load, nothing else does.
 * - fexit on sock_recvmsg itself (5.5+ with BPF trampolines), the same place.
 * The entry: the read family's entry the files source already sees, and the
 * entries of recvfrom and recvmsg on the files source's mechanism (fentry,
 * kprobe or syscall tracepoint): the call's state is the thread's file_call,
 * and a receive ends it, so the read's exit writes no DL_EV_FILE_READ.
 *
 * Sends (sock:sock_send_length, or fexit on tcp_sendmsg, udp_sendmsg and
 * udpv6_sendmsg) mark the socket, so
 * the next receive on it is known to be a response's first: what it waited is
 * the request's round trip and the server's time to the first byte.
 */
#include "common.bpf.h"
#include "dlbpf/syscall_handler.h"

#define DL_AF_INET 2
#define DL_AF_INET6 10
#define DL_MSG_PEEK 2
#define DL_IPPROTO_TCP 6

/* Sockets a traced task sent on since their last receive (key: struct sock *). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u8);
} net_sent SEC(".maps");

static __always_inline void endpoints(struct dl_net_recv_ev *e, struct sock *sk)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	e->family = family;
	e->protocol = BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol);
	e->rport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
	e->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	__builtin_memset(e->raddr, 0, sizeof(e->raddr));
	__builtin_memset(e->laddr, 0, sizeof(e->laddr));
	if (family == DL_AF_INET) {
		bpf_core_read(e->raddr, 4, &sk->__sk_common.skc_daddr);
		bpf_core_read(e->laddr, 4, &sk->__sk_common.skc_rcv_saddr);
	} else if (family == DL_AF_INET6) {
		bpf_core_read(e->raddr, 16, &sk->__sk_common.skc_v6_daddr);
		bpf_core_read(e->laddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
	}
	e->srtt_us = e->protocol == DL_IPPROTO_TCP ? BPF_CORE_READ((struct tcp_sock *)sk, srtt_us) >> 3 : 0;
}

/* A receive on sk returned ret in a task; its call (if its entry was seen) ends here. */
static __always_inline void recv_end(struct sock *sk, int ret, int flags)
{
	struct file_call *fc;
	struct dl_net_recv_ev *e;
	__u64 id, now, key = (__u64)sk;
	__u16 family;

	if (!dl_current_traced())
		return;
	/* Only the internet families: unix sockets are a process's own plumbing, not input. */
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != DL_AF_INET && family != DL_AF_INET6)
		return;
	id = bpf_get_current_pid_tgid();
	now = bpf_ktime_get_ns();
	fc = dl_file_call(false);
	/* A read-family call or a receive whose entry the thread saw; openat never reaches a socket. */
	if (fc && (!fc->call || fc->call == FILE_CALL_OPENAT))
		fc = NULL;
	e = dl_reserve(sizeof(*e), DL_EV_NET_RECV, DL_DROP_BIO, fc ? fc->ts : now, id >> 32, (__u32)id);
	if (e) {
		e->dur_ns = fc ? now - fc->ts : 0;
		e->ret = ret;
		e->call = fc ? fc->call : 0;
		e->flags = fc ? 0 : DL_NET_NO_START;
		if (flags & DL_MSG_PEEK)
			e->flags |= DL_NET_PEEK;
		/* A failed receive (EAGAIN) leaves the response still to come. */
		if (ret >= 0 && !(flags & DL_MSG_PEEK) && bpf_map_delete_elem(&net_sent, &key) == 0)
			e->flags |= DL_NET_AFTER_SEND;
		e->pad = 0;
		endpoints(e, sk);
		dl_submit(e);
	}
	/* The call is the network's: the read's exit writes no file record (recvmmsg: each one's start is unknown). */
	if (fc)
		fc->call = 0;
}

static __always_inline void send_end(struct sock *sk, int ret)
{
	__u64 key = (__u64)sk;
	__u8 one = 1;

	if (ret <= 0 || !dl_current_traced())
		return;
	bpf_map_update_elem(&net_sent, &key, &one, BPF_ANY);
}

/* --- where a receive ends: the raw tracepoint (6.5+), else fexit on sock_recvmsg --- */

SEC("?raw_tp/sock_recv_length")
int BPF_PROG(net_recv_tp, struct sock *sk, int ret, int flags)
{
	recv_end(sk, ret, flags);
	return 0;
}

SEC("?raw_tp/sock_send_length")
int BPF_PROG(net_send_tp, struct sock *sk, int ret, int flags)
{
	send_end(sk, ret);
	return 0;
}

SEC("?fexit/sock_recvmsg")
int BPF_PROG(net_recv_fexit, struct socket *sock, struct msghdr *msg, int flags, int ret)
{
	recv_end(BPF_CORE_READ(sock, sk), ret, flags);
	return 0;
}

/*
 * Sends below sock_sendmsg, which compilers inline into __sys_sendto (Debian's 6.1: its fexit saw no
 * send of a Python sendall): the protocols' own, reached through a pointer, never inlined.
 */
SEC("?fexit/tcp_sendmsg")
int BPF_PROG(net_tcp_send_fexit, struct sock *sk, struct msghdr *msg, size_t size, int ret)
{
	send_end(sk, ret);
	return 0;
}

SEC("?fexit/udp_sendmsg")
int BPF_PROG(net_udp_send_fexit, struct sock *sk, struct msghdr *msg, size_t len, int ret)
{
	send_end(sk, ret);
	return 0;
}

SEC("?fexit/udpv6_sendmsg")
int BPF_PROG(net_udp6_send_fexit, struct sock *sk, struct msghdr *msg, size_t len, int ret)
{
	send_end(sk, ret);
	return 0;
}

/*
 * --- the entries of recvfrom and recvmsg, on the files source's mechanism. Only the time: the
 * socket is known where the receive ends. The fentry programs read no argument: on 5.10 the
 * handlers' saved registers are a forward declaration in BTF (net/socket.c), and the verifier
 * refuses any read of them ("arg0 type FWD is not a struct").
 */

static __always_inline void recv_begin(__u32 call)
{
	struct file_call *fc = dl_file_call_begin(call);

	if (fc)
		fc->fd = -1;
}

SEC("?fentry/" DL_SYSCALL_HANDLER("recvfrom"))
int BPF_PROG(net_recvfrom_fentry)
{
	recv_begin(DL_READ_RECVFROM);
	return 0;
}

SEC("?fentry/" DL_SYSCALL_HANDLER("recvmsg"))
int BPF_PROG(net_recvmsg_fentry)
{
	recv_begin(DL_READ_RECVMSG);
	return 0;
}

SEC("?kprobe/" DL_SYSCALL_HANDLER("recvfrom"))
int net_recvfrom_kprobe(struct pt_regs *ctx)
{
	recv_begin(DL_READ_RECVFROM);
	return 0;
}

SEC("?kprobe/" DL_SYSCALL_HANDLER("recvmsg"))
int net_recvmsg_kprobe(struct pt_regs *ctx)
{
	recv_begin(DL_READ_RECVMSG);
	return 0;
}

SEC("?tp/syscalls/sys_enter_recvfrom")
int net_recvfrom_enter(struct trace_event_raw_sys_enter *ctx)
{
	recv_begin(DL_READ_RECVFROM);
	return 0;
}

SEC("?tp/syscalls/sys_enter_recvmsg")
int net_recvmsg_enter(struct trace_event_raw_sys_enter *ctx)
{
	recv_begin(DL_READ_RECVMSG);
	return 0;
}
