#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The network as an input source (processes[].net, the net-latency and net-bandwidth findings),
against a real loader's own counts: tests/workloads/netload.py fetches ranges of an object over
HTTP/1.1 keep-alive connections from an object server (tests/integration/netserve.py: a time to
first byte and a paced rate per connection, as an object store's front end has) and counts per
connection the bytes and receive calls it made and its clock around each; a UDP echo exchange on
connected sockets. IPv4 and IPv6 on loopback; where the kernel has sch_netem, the same behind
tc netem delay and rate on a veth pair into a network namespace. Run as root."""
import json
import os
import shutil
import subprocess
import sys

from harness import DLBPF, WORK, Dlbpf, Skipped, check, load_summary, main, process, run_dlbpf, truth_line
from netserve import ObjectServer, UdpEcho

HERE = os.path.dirname(os.path.abspath(__file__))
NETLOAD = os.path.join(HERE, "..", "workloads", "netload.py")
# Sizes that are no multiple of the loader's buffer or of a page, so a byte lost or counted twice shows.
OBJECT = os.urandom((16 << 20) + 4099)


def run_loader(host, port, *args, dlbpf_args=(), env=None):
    """netload.py under dlbpf (with env); returns (summary, the loader's truth)."""
    d = Dlbpf(list(dlbpf_args) + ["--", sys.executable, NETLOAD, host, str(port), "/object"] + [str(a) for a in args],
              env=env)
    d.started()
    rc = d.wait(timeout=120)
    check(rc == 0, f"dlbpf (or the loader) exited {rc}: {d.stderr[-2000:]}")
    return d.summary(), truth_line(d.stdout)


def name_of(c):
    """The endpoint as dlbpf names it."""
    host = f"[{c['address']}]" if c["family"] == "ipv6" else c["address"]
    return f"{c['protocol']} {host}:{c['port']}"


def by_endpoint(truth):
    """The loader's connections summed per remote endpoint."""
    eps = {}
    for c in truth["conns"]:
        e = eps.setdefault(name_of(c), {"bytes": 0, "recvs": 0, "recv_ns": 0, "requests": 0, "conns": 0,
                                        "family": c["family"], "protocol": c["protocol"]})
        for k in ("bytes", "recvs", "recv_ns", "requests"):
            e[k] += c[k]
        # A UDP exchange is a request per datagram: each echo is the first receive after a send.
        e["requests"] += c["recvs"] if c["protocol"] == "udp" else 0
        e["conns"] += 1
    return eps


def compare(summary, truth):
    """Every endpoint the loader received from: bytes, calls, sockets and responses exact; the time
    blocked within what the loader's own clock allows. Returns the endpoints checked."""
    p = process(summary, truth["pid"])
    got = {e["endpoint"]: e for e in p["net"]}
    # The loader's clock around each receive encloses the system call, so dlbpf's wait is never more;
    # what the loader counts beyond it is the interpreter's time around the call, which the thread
    # spent running or runnable: the gap is at most the process's on-CPU and runqueue time.
    slack = p["sched"]["oncpu_ns"] + p["sched"]["runq_ns"]
    for name, t in by_endpoint(truth).items():
        check(name in got, f"{name} not in the process's endpoints {sorted(got)}")
        g = got[name]
        for key, truth_key in (("bytes", "bytes"), ("recvs", "recvs"), ("connections", "conns"),
                               ("responses", "requests")):
            check(g[key] == t[truth_key], f"{name}: {key} {g[key]} != the loader's {t[truth_key]}")
        check((g["family"], g["protocol"]) == (t["family"], t["protocol"]), f"{name}: {g['family']} {g['protocol']}")
        check(g["recvs_no_start"] == 0 and g["errors"] == 0, f"{name}: {g['recvs_no_start']} receives without "
              f"their entry, {g['errors']} errors")
        check(g["recv_ns"] <= t["recv_ns"], f"{name}: blocked {g['recv_ns']} ns, more than the loader's clock "
              f"around its receives ({t['recv_ns']} ns)")
        check(t["recv_ns"] - g["recv_ns"] <= slack, f"{name}: blocked {g['recv_ns']} ns, the loader's clock "
              f"{t['recv_ns']} ns: more apart than its on-CPU and runqueue time ({slack} ns)")
    return got


def servers(**kw):
    s4, s6 = ObjectServer("127.0.0.1", OBJECT, **kw), ObjectServer("::1", OBJECT, **kw)
    return s4, s6


def test_net_exact():
    """IPv4 over two keep-alive connections read with recv (recvfrom), IPv6 read with readv on the
    socket's fd, UDP echoes over IPv4 and IPv6: bytes, receive calls, sockets and responses per
    endpoint equal the loader's counts, and the time blocked agrees with its clock. An untraced
    loader fetching from the same server meanwhile is not counted; a read on a socket is counted as
    a receive, not as a read of an unknown fd."""
    s4, s6 = servers(delay_s=0.002)
    u4, u6 = UdpEcho("127.0.0.1"), UdpEcho("::1")
    other = subprocess.Popen([sys.executable, NETLOAD, "127.0.0.1", str(s4.port), "/object", "--size", "50001",
                              "--requests", "40"], stdout=subprocess.DEVNULL)
    try:
        s, t = run_loader("127.0.0.1", s4.port, "--size", 100_003, "--requests", 12, "--conns", 2, "--buf", 16384,
                          "--udp", f"127.0.0.1:{u4.port}:7,[::1]:{u6.port}:5")
        got = compare(s, t)
        check(other.wait(60) == 0, "the untraced loader failed")
        check(other.pid not in [p["pid"] for p in s["processes"]], "the untraced loader was traced")
        s6_sum, t6 = run_loader("::1", s6.port, "--size", 1_000_003, "--requests", 3, "--buf", 65536, "--readv")
        got6 = compare(s6_sum, t6)
        p6 = process(s6_sum, t6["pid"])
        # The loader reads no pipe: every read of an fd no open named would be the socket's.
        check(p6["files_unknown_fd"]["reads"] == 0,
              f"the readv on the socket counted as reads of an unknown fd too: {p6['files_unknown_fd']}")
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
        for x in (s4, s6, u4, u6):
            x.close()
    fams = {(e["family"], e["protocol"]) for e in list(got.values()) + list(got6.values())}
    check({("ipv4", "tcp"), ("ipv6", "tcp"), ("ipv4", "udp"), ("ipv6", "udp")} <= fams, f"endpoints seen: {fams}")
    return (f"{len(got) + len(got6)} endpoints exact: " +
            ", ".join(f"{n} {e['bytes']} B in {e['recvs']} receives" for n, e in list(got.items()) + list(got6.items())))


def finding_for(summary, name):
    rules = [f for f in summary["diagnosis"]["findings"] if f["rule"] in ("net-latency", "net-bandwidth")
             and f["evidence"].get("endpoint") == name]
    check(len(rules) == 1, f"{name}: network findings {[(f['rule'], f['evidence'].get('endpoint')) for f in summary['diagnosis']['findings']]}")
    return rules[0]


def check_finding(summary, truth, rule):
    (name, t), = by_endpoint(truth).items()
    f = finding_for(summary, name)
    check(f["rule"] == rule, f"{name}: {f['rule']}, expected {rule}: {f['message']}")
    check(f["evidence"]["bytes"] == t["bytes"] and f["evidence"]["responses"] == t["requests"],
          f"{name}: evidence {f['evidence']} against the loader's {t}")
    return f


def test_net_findings():
    """Latency-bound (small ranges, each behind a time to first byte) against bandwidth-bound (large
    ranges at a paced rate), each at two settings: the right finding for each, with the loader's
    bytes and requests as its evidence."""
    notes = []
    cases = (
        # (server settings, loader arguments, rule)
        ({"delay_s": 0.015}, ("--size", 4096, "--requests", 30), "net-latency"),
        ({"delay_s": 0.04}, ("--size", 30000, "--requests", 10, "--conns", 2), "net-latency"),
        ({"rate_bps": 10e6}, ("--size", 1_500_001, "--requests", 2), "net-bandwidth"),
        ({"rate_bps": 40e6}, ("--size", 4_000_037, "--requests", 3, "--conns", 3), "net-bandwidth"),
    )
    for i, (kw, args, rule) in enumerate(cases):
        srv = ObjectServer("::1" if i % 2 else "127.0.0.1", OBJECT, **kw)
        try:
            s, t = run_loader(srv.server_address[0], srv.port, *args)
        finally:
            srv.close()
        f = check_finding(s, t, rule)
        notes.append(f"{kw} -> {rule} ({100 * f['evidence']['share']:.0f}% of the loader's time)")
    return "; ".join(notes)


def test_net_every_mechanism():
    """The receive calls' entries ride on the files source's mechanism: by each one this kernel offers
    (forced with the test hook, as test_files does), and the cheapest again with 5.10's per-thread
    state (hashes by thread id, the task by probe reads), bytes, calls, responses and waits exact.
    Where the network source itself needs fentry (fexit: no sock tracepoints) and the hook takes
    fentry away, the source is off: nothing is counted, and dlbpf says so."""
    out = subprocess.run([DLBPF, "features"], capture_output=True, text=True, timeout=60).stdout
    have = {l.split()[0]: l.split()[1] for l in out.splitlines() if len(l.split()) > 1}
    if have.get("network") == "none":
        raise Skipped("this kernel has no network mechanism (dlbpf features)")
    mechs = [m for m, ok in (("fentry", have.get("fentry") == "yes"), ("kprobe", have.get("kprobes") == "yes"),
                             ("tracepoint", True)) if ok]
    without = {"fentry": [], "kprobe": ["fentry"], "tracepoint": ["fentry", "kprobes"]}
    srv = ObjectServer("127.0.0.1", OBJECT, delay_s=0.002)
    u = UdpEcho("::1")
    notes = []
    try:
        for mech, old in [(m, []) for m in mechs] + [(mechs[0], ["task_storage", "task_btf"])]:
            env = dict(os.environ)
            env.pop("DLBPF_FORCE_TWINS", None)
            if without[mech] + old:
                env["DLBPF_FORCE_TWINS"] = ",".join("without-" + f for f in without[mech] + old)
            what = f"{mech}{' without ' + '+'.join(old) if old else ''}"
            d = Dlbpf(["--", sys.executable, NETLOAD, "127.0.0.1", str(srv.port), "/object", "--size", "65537",
                       "--requests", "5", "--buf", "16384", "--udp", f"[::1]:{u.port}:3"], env=env)
            d.started()
            rc = d.wait(timeout=120)
            check(rc == 0, f"{what}: dlbpf (or the loader) exited {rc}: {d.stderr[-2000:]}")
            s, t = d.summary(), truth_line(d.stdout)
            if have["network"] == "fexit" and "fentry" in without[mech]:
                check(not process(s, t["pid"])["net"] and "socket receives are not seen" in d.stderr,
                      f"{what}: the network source without fentry: {process(s, t['pid'])['net']}")
                notes.append(f"{what}: the network source off, said")
                continue
            try:
                got = compare(s, t)
            except Exception as e:
                raise type(e)(f"{what}: {e}")
            notes.append(f"{what}: {len(got)} endpoints exact")
    finally:
        srv.close()
        u.close()
    return "; ".join(notes)


def test_net_timeline():
    """The timeline (-o trace.json): a recv slice per receive on the loader's thread track, named by its
    endpoint; per endpoint their bytes and count equal the loader's, and their time its blocked time."""
    trace = os.path.join(WORK, "net-trace.json")
    srv = ObjectServer("127.0.0.1", OBJECT, delay_s=0.003)
    u = UdpEcho("::1")
    try:
        s, t = run_loader("127.0.0.1", srv.port, "--size", 33_331, "--requests", 8, "--buf", 8192,
                          "--udp", f"[::1]:{u.port}:4", dlbpf_args=["-o", trace])
    finally:
        srv.close()
        u.close()
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    got = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "net" and e["name"] == "recv" and e["pid"] == t["pid"]:
            b, n, us = got.get(e["args"]["endpoint"], (0, 0, 0.0))
            got[e["args"]["endpoint"]] = (b + e["args"]["bytes"], n + 1, us + e["dur"])
    summary_eps = {e["endpoint"]: e for e in process(s, t["pid"])["net"]}
    for name, truth in by_endpoint(t).items():
        b, n, us = got.get(name, (0, 0, 0.0))
        check((b, n) == (truth["bytes"], truth["recvs"]), f"{name}: recv slices {b} bytes in {n}, the loader "
              f"received {truth['bytes']} in {truth['recvs']}")
        # Slices are in microseconds with 3 decimals: each rounds by at most 0.5 ns.
        check(abs(us * 1000 - summary_eps[name]["recv_ns"]) <= n, f"{name}: slices {us} us, summary "
              f"{summary_eps[name]['recv_ns']} ns")
    return ", ".join(f"{n}: {b} B in {c} slices" for n, (b, c, _) in got.items())


def test_net_no_files():
    """--no-files takes the receive calls' entries with it: every receive is still counted, bytes and
    calls exact, each one marked as having no wait (recvs_no_start), and no finding is made of them."""
    srv = ObjectServer("127.0.0.1", OBJECT, delay_s=0.01)
    try:
        s, t = run_loader("127.0.0.1", srv.port, "--size", 20011, "--requests", 6, dlbpf_args=["--no-files"])
    finally:
        srv.close()
    (name, truth), = by_endpoint(t).items()
    g = {e["endpoint"]: e for e in process(s, t["pid"])["net"]}.get(name)
    check(g and (g["bytes"], g["recvs"]) == (truth["bytes"], truth["recvs"]),
          f"{name}: {g} against the loader's {truth}")
    check(g["recvs_no_start"] == g["recvs"] and g["recv_ns"] == 0, f"{name}: waits without their entries: {g}")
    check(not [f for f in s["diagnosis"]["findings"] if f["rule"].startswith("net-")], "a finding without waits")
    return f"{name}: {g['bytes']} B in {g['recvs']} receives, none with a wait"


def test_net_recording():
    """dlbpf record, then dlbpf report of the recording: the same endpoints, bytes, calls and finding."""
    rec = os.path.join(WORK, "net.dlbpf")
    srv = ObjectServer("::1", OBJECT, delay_s=0.01)
    try:
        p = subprocess.run([DLBPF, "-q", "record", "-o", rec, "--", sys.executable, NETLOAD, "::1", str(srv.port),
                            "/object", "--size", "7001", "--requests", "9"], capture_output=True, text=True, timeout=120)
    finally:
        srv.close()
    check(p.returncode == 0, f"dlbpf record exited {p.returncode}: {p.stderr[-1500:]}")
    t = truth_line(p.stdout)
    out = os.path.join(WORK, "net-replay.json")
    rc, _, err = run_dlbpf(["report", rec, "-j", out])
    check(rc == 0, f"dlbpf report exited {rc}: {err[-1500:]}")
    s = load_summary(out)
    got = compare(s, t)
    check_finding(s, t, "net-latency")
    return "replayed: " + ", ".join(f"{n} {e['bytes']} B in {e['recvs']} receives" for n, e in got.items())


NS = "dlbpf-nettest"
HOST_IF, NS_IF = "dlbpf-nt0", "dlbpf-nt1"
HOST4, NS4, HOST6, NS6 = "10.213.0.1", "10.213.0.2", "fd00:213::1", "fd00:213::2"


def sh(*argv, ns=False):
    cmd = (["ip", "netns", "exec", NS] if ns else []) + list(argv)
    return subprocess.run(cmd, capture_output=True, text=True)


def netns_down():
    sh("ip", "link", "del", HOST_IF)
    sh("ip", "netns", "del", NS)


def netns_up():
    """A veth pair from here into a network namespace; where netem is unavailable, Skipped."""
    for tool in ("ip", "tc"):
        if not shutil.which(tool):
            raise Skipped(f"{tool} (iproute2) is not installed")
    netns_down()
    steps = [("ip", "netns", "add", NS), ("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF),
             ("ip", "link", "set", NS_IF, "netns", NS), ("ip", "addr", "add", f"{HOST4}/24", "dev", HOST_IF),
             ("ip", "-6", "addr", "add", f"{HOST6}/64", "dev", HOST_IF, "nodad"),
             ("ip", "link", "set", HOST_IF, "up")]
    for st in steps:
        r = sh(*st)
        if r.returncode:
            netns_down()
            raise Skipped(f"cannot make a network namespace and veth pair ({' '.join(st)}: {r.stderr.strip()})")
    for st in (("ip", "addr", "add", f"{NS4}/24", "dev", NS_IF),
               ("ip", "-6", "addr", "add", f"{NS6}/64", "dev", NS_IF, "nodad"),
               ("ip", "link", "set", NS_IF, "up"), ("ip", "link", "set", "lo", "up")):
        r = sh(*st, ns=True)
        check(r.returncode == 0, f"{' '.join(st)} in the namespace: {r.stderr.strip()}")


def netem(spec):
    """The host side's egress (the responses) behind tc netem; Skipped where the kernel has no sch_netem."""
    sh("modprobe", "sch_netem")
    r = sh("tc", "qdisc", "replace", "dev", HOST_IF, "root", "netem", *spec.split())
    if r.returncode:
        raise Skipped(f"tc netem is unavailable here (sch_netem: {r.stderr.strip()})")


def test_net_netem():
    """The loader in a network namespace behind tc netem on a veth pair: a delay (40 ms) with small
    ranges is latency-bound, and TCP's own round trip shows it; a rate (40 Mbit/s) with large ranges is
    bandwidth-bound at about that rate; bytes and calls exact over IPv4 and IPv6."""
    netns_up()
    notes = []
    try:
        cases = (("delay 40ms", HOST4, ("--size", 8192, "--requests", 12), "net-latency"),
                 ("delay 1ms rate 40mbit", HOST6, ("--size", 2_000_003, "--requests", 2), "net-bandwidth"))
        for spec, host, args, rule in cases:
            netem(spec)
            srv = ObjectServer(host, OBJECT)
            try:
                d = Dlbpf(["--", "ip", "netns", "exec", NS, sys.executable, NETLOAD, host, str(srv.port), "/object"]
                          + [str(a) for a in args])
                d.started()
                rc = d.wait(timeout=120)
                check(rc == 0, f"dlbpf (or the loader) exited {rc}: {d.stderr[-2000:]}")
                s, t = d.summary(), truth_line(d.stdout)
            finally:
                srv.close()
            compare(s, t)
            f = check_finding(s, t, rule)
            if rule == "net-latency":
                # The kernel's smoothed round trip is the netem delay plus loopback-fast the rest.
                check(f["evidence"]["srtt_us"] >= 40_000 * 0.9,
                      f"TCP's round trip {f['evidence']['srtt_us']} us under a 40 ms delay")
            notes.append(f"{spec}: {rule}, srtt {f['evidence']['srtt_us']:.0f} us")
    finally:
        netns_down()
    return "; ".join(notes)


if __name__ == "__main__":
    main()
