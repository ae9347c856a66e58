# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Table 16 of bench.py: what the network source (bpf/net.bpf.c) costs a loopback receive loop
(netloop.c: two sends and two receives a round on connected UDP sockets) that dlbpf does not
trace while it traces another process, and one it traces; against no dlbpf at all and dlbpf
without the source (--no-net), each in the same run."""
import os
import signal
import subprocess

from bench import DLBPF, OUT, prog_stats, readline_until, spread, table

NETLOOP = os.path.join(OUT, "bench", "netloop")
NET_PROGS = ("net_recv_tp", "net_send_tp", "net_recv_fexit", "net_send_fexit")
# Without the files source: its syscall tracepoints (where the kernel has no fentry or kprobes) put
# every system call on the traced path, which would swamp what the network source adds.
VARIANTS = {
    "untraced": None,
    "dlbpf --no-files --no-net, loop untraced": ["--no-files", "--no-net"],
    "dlbpf --no-files, loop untraced": ["--no-files"],
    "dlbpf --no-files, loop traced": ["--no-files"],
    "dlbpf (files and network), loop untraced": [],
}


def one_run(variant, rounds):
    """(the loop's thread CPU ns per round, {prog: (run_time_ns, run_cnt) added})."""
    loop = subprocess.Popen([NETLOOP, str(rounds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    idle = tracer = None
    try:
        readline_until(loop.stdout, "ready")
        args = VARIANTS[variant]
        if args is not None:
            target = loop.pid
            if "loop untraced" in variant:
                idle = subprocess.Popen(["sleep", "100000"])
                target = idle.pid
            tracer = subprocess.Popen([DLBPF, "-v", "-q", "--pid", str(target)] + args, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
            readline_until(tracer.stderr, "tracing ", timeout=180)
        before = prog_stats(NET_PROGS)
        loop.stdin.write("go\n")
        loop.stdin.flush()
        ns = float(loop.stdout.readline())
        after = prog_stats(NET_PROGS)
        loop.stdin.write("end\n")
        loop.stdin.flush()
        loop.wait(timeout=60)
        return ns, {n: (after[n][0] - before[n][0], after[n][1] - before[n][1]) for n in NET_PROGS}
    finally:
        if tracer:
            tracer.send_signal(signal.SIGINT)
            tracer.communicate(timeout=120)
        if idle:
            idle.kill()
            idle.wait()
        if loop.poll() is None:
            loop.kill()
            loop.wait()


def bench_net(rounds, loop_rounds=200000):
    variants = list(VARIANTS)
    loop_ns = {v: [] for v in variants}
    bpf_ns = {v: [] for v in variants}
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_were = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        for r in range(rounds):
            for v in variants[r % len(variants):] + variants[:r % len(variants)]:
                ns, st = one_run(v, loop_rounds)
                loop_ns[v].append(ns)
                runs = sum(c for _, c in st.values())
                if runs:
                    bpf_ns[v].append(sum(t for t, _ in st.values()) / runs)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_were)
    base = loop_ns["untraced"]
    off = loop_ns["dlbpf --no-files --no-net, loop untraced"]
    rows = []
    for v in variants:
        rows.append([v, spread(loop_ns[v]), spread([x / b for x, b in zip(loop_ns[v], base)], "{:.3f}"),
                     spread([x / b for x, b in zip(loop_ns[v], off)], "{:.3f}"),
                     spread(bpf_ns[v]) if bpf_ns[v] else ""])
    return table("16. Network source: what a loopback receive loop pays",
                 ["variant", "loop CPU ns per round (2 sends + 2 receives)", "ratio to untraced",
                  "ratio to dlbpf --no-net", "BPF ns per send or receive (bpf_stats)"],
                 rows,
                 [f"netloop: {loop_rounds} rounds of a 64-byte datagram each way between two connected UDP "
                  "sockets on loopback in one thread; the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) per "
                  f"round; median [min-max] over {rounds} interleaved rounds. loop untraced: dlbpf traces an "
                  "idle process meanwhile. --no-files takes the files source's syscall tracepoints away, so "
                  "that the network source's raw tracepoints are what the third row adds to the second. BPF "
                  "ns: run_time_ns / run_cnt of net_recv_tp and net_send_tp (kernel.bpf_stats_enabled, on "
                  "during the loop, which adds its two clock reads to each run), other processes' sends "
                  "and receives meanwhile included."])
