#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""--metrics: the Prometheus exporter, scraped with curl while dlbpf traces the
training emulator on the GPU simulator. Each scrape passes `promtool check
metrics`; the last one, taken once the job is done, equals the JSON summary
of the same run, and both equal the workload's own counts. Hostile clients
(slow loris, a 1 MB request line, garbage, 100 connections at once) neither
stall the trace nor crash dlbpf. Bad addresses and a port in use are refused
before anything is traced. Run as root."""
import decimal
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time

from harness import GPUSIM_DIR, WORK, Dlbpf, Failure, check, load_summary, main, run_dlbpf, workload

# A process name with every byte the exposition format escapes, and one that is not UTF-8. The
# kernel keeps 15 bytes of the name a binary is exec'd by (comm): this link's name is 8.
HOSTILE_COMM = b'tr"a\\i\nn\xff'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- an exposition reader of its own (the text format 0.0.4, as Prometheus documents it) ---
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')
ESCAPES = {"n": "\n", "\\": "\\", '"': '"'}


def parse_exposition(text):
    """{(name, frozenset of (label, value))): value as a string}; fails on a line the format forbids."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        check(m, f"not a sample line: {line!r}")
        labels, pos, body = {}, 0, m.group(2) or ""
        while pos < len(body):
            lm = LABEL.match(body, pos)
            check(lm, f"bad labels at {pos} in {line!r}")
            labels[lm.group(1)] = re.sub(r"\\(.)", lambda e: ESCAPES[e.group(1)], lm.group(2))
            pos = lm.end()
        key = (m.group(1), frozenset(labels.items()))
        check(key not in out, f"sample twice: {line!r}")
        out[key] = m.group(3)
    return out


def ns(seconds):
    """A seconds value of the exposition as integer ns (dlbpf writes nine decimals: exact)."""
    return int(decimal.Decimal(seconds) * 1000000000)


def pick(samples, name, **labels):
    """The samples of one metric whose labels include these, as {rest of the labels: value}."""
    want = {(k, str(v)) for k, v in labels.items()}
    return {frozenset(set(lab) - want): v for (n, lab), v in samples.items() if n == name and want <= set(lab)}


def one(samples, name, **labels):
    got = pick(samples, name, **labels)
    check(len(got) == 1, f"{name}{labels}: {len(got)} samples")
    return next(iter(got.values()))


def scrape(port, timeout=10):
    """(HTTP status, content type, body) of GET /metrics, by curl."""
    p = subprocess.run(["curl", "-sS", "--max-time", str(timeout), "-o", "-", "-w",
                        "\n%{http_code} %{content_type}", f"http://127.0.0.1:{port}/metrics"],
                       capture_output=True, timeout=timeout + 5)
    check(p.returncode == 0, f"curl failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
    body, _, tail = p.stdout.rpartition(b"\n")
    code, _, ctype = tail.decode().partition(" ")
    return int(code), ctype, body.decode("utf-8")


def promtool_ok(body):
    p = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"promtool check metrics: {p.stdout}{p.stderr}")
    return (p.stdout + p.stderr).strip()


def counters(samples):
    return {k: v for k, v in samples.items() if k[0].endswith(("_total", "_count", "_sum", "_bucket"))}


class Job:
    """dlbpf --metrics on a training job. linger: the job runs as `sh -c 'train; touch done; wait'`, so
    that it stays traced once trained and the last scrape is taken after its last record is in; finish()
    lets it end. Else dlbpf starts train itself (held at its first instruction: nothing is missed)."""

    def __init__(self, name, train_args, dlbpf_args=(), linger=True):
        self.port = free_port()
        self.dir = os.path.join(WORK, f"metrics-{name}-{os.getpid()}")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.truth = os.path.join(self.dir, "truth.jsonl")
        self.done, self.go = os.path.join(self.dir, "done"), os.path.join(self.dir, "go")
        binary = os.path.join(self.dir.encode(), HOSTILE_COMM)
        os.symlink(workload("train"), binary)
        script = ('"$0" "$@"; touch "$DONE"; while [ ! -e "$GO" ]; do sleep 0.05; done')
        env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR, DONE=self.done, GO=self.go)
        cmd = (["sh", "-c", script] if linger else []) + [binary] + list(train_args)
        self.linger = linger
        self.d = Dlbpf(["--metrics", str(self.port)] + list(dlbpf_args) + ["--step-on", "train_step_begin", "--"] +
                       cmd + ["--quiet", "--truth", self.truth], env=env)
        self.d.started()

    def trained(self):
        return os.path.exists(self.done) if self.linger else self.d.proc.poll() is not None

    def finish(self):
        open(self.go, "w").close()
        rc = self.d.wait(timeout=60)
        check(rc == 0, f"dlbpf exited {rc}: {self.d.stderr[-2000:]}")
        # The report names the worker in its findings: the comm's newline and 0xff byte come out escaped
        # (the harness reads stdout with surrogateescape, so a raw 0xff would be U+DCFF here).
        named = [l for l in self.d.stdout.splitlines() if "tr\"a" in l]
        check("\udcff" not in self.d.stdout and "i\nn" not in self.d.stdout, f"raw comm bytes on stdout: {named[:3]}")
        lines = [json.loads(l) for l in open(self.truth)]
        return self.d.summary(), [l for l in lines if "step" in l], [l for l in lines if l.get("summary")][0]


def train_pid(summary):
    mains = [p for p in summary["processes"] if p["cuda"]["calls"].get("cudaLaunchKernel")]
    check(len(mains) == 1, f"{len(mains)} processes launched kernels")
    return mains[0]


def check_against_truth(summary, tsteps, held=True):
    """The run's steps and CUDA counts are exactly what the workload did, whether dlbpf started train itself
    (held) or a shell it started exec'd it: a program a traced process execs is held until attached, so it
    is traced from its first instruction either way."""
    p = train_pid(summary)
    calls = p["cuda"]["calls"]
    # --step-on train_step_begin: a step between each two of the workload's marker calls.
    n = len(summary["steps"])
    check(n == len(tsteps) - 1, f"{n} steps, the workload marked {len(tsteps)} ({'' if held else 'not '}started by dlbpf)")
    want = {"cudaLaunchKernel": sum(t["kernels"] for t in tsteps),
            "cudaMemcpyAsync": sum(t["h2d_copies"] for t in tsteps), "cudaMemcpy": len(tsteps)}
    for api, n in want.items():
        check(calls[api]["count"] == n, f"{api}: {calls[api]['count']} calls, the workload made {n}")
    h2d = sum(t["h2d_bytes"] for t in tsteps)
    check(p["cuda"]["memcpy"]["h2d"]["bytes"] == h2d, f"h2d bytes {p['cuda']['memcpy']['h2d']['bytes']} != {h2d}")
    return p


def check_scrape_equals_summary(samples, summary):
    """Every counter of the scrape equals the JSON summary's number for it, exactly."""
    steps = summary["steps"]
    procs = {str(p["pid"]): p for p in summary["processes"]}
    main_pid = str(train_pid(summary)["pid"])
    for pid in {str(s["pid"]) for s in steps}:
        mine = [s for s in steps if str(s["pid"]) == pid]
        check(int(one(samples, "dlbpf_step_duration_seconds_count", pid=pid)) == len(mine), "step count")
        check(ns(one(samples, "dlbpf_step_duration_seconds_sum", pid=pid)) == sum(s["dur_ns"] for s in mine),
              "step time")
        for cat, v in pick(samples, "dlbpf_step_category_seconds_total", pid=pid).items():
            c = dict(cat)["category"]
            check(ns(v) == sum(s["breakdown_ns"][c] for s in mine), f"category {c}")
        # Buckets: cumulative counts of the JSON's own durations (le is inclusive).
        for lab, v in pick(samples, "dlbpf_step_duration_seconds_bucket", pid=pid).items():
            le = dict(lab)["le"]
            n = len(mine) if le == "+Inf" else sum(1 for s in mine if s["dur_ns"] <= ns(le))
            check(int(v) == n, f"bucket le={le}: {v}, the JSON's steps say {n}")
    seen_comm = False
    for (name, lab), v in samples.items():
        lab = dict(lab)
        if "pid" not in lab:
            continue
        p = procs.get(lab["pid"])
        check(p is not None, f"{name}: pid {lab['pid']} is not in the summary")
        check(lab["comm"] == p["comm"], f"comm {lab['comm']!r} != the summary's {p['comm']!r}")
        seen_comm |= lab["pid"] == main_pid
        cuda = p["cuda"]
        if name in ("dlbpf_cuda_calls_total", "dlbpf_cuda_call_errors_total"):
            key = "count" if name == "dlbpf_cuda_calls_total" else "errors"
            check(int(v) == cuda["calls"][lab["api"]][key], f"{name} {lab['api']}: {v}")
        elif name == "dlbpf_cuda_call_seconds_total":
            check(ns(v) == cuda["calls"][lab["api"]]["total_ns"], f"{name} {lab['api']}: {v}")
        elif name in ("dlbpf_copies_total", "dlbpf_copy_bytes_total") and lab["direction"] in cuda["memcpy"]:
            m = cuda["memcpy"][lab["direction"]]
            whole, page = (m["count"], m["pageable"]) if name == "dlbpf_copies_total" else \
                (m["bytes"], m["pageable_bytes"])
            check(int(v) == (page if lab["memory"] == "pageable" else whole - page), f"{name} {lab}: {v}")
        elif name == "dlbpf_kernel_launches_total":
            check(int(v) == sum(k["count"] for k in cuda["kernels"]), f"kernel launches: {v}")
        elif name == "dlbpf_kernel_launches_by_name_total":
            check(int(v) == sum(k["count"] for k in cuda["kernels"] if k["name"] == lab["kernel"]),
                  f"launches of {lab['kernel']!r}: {v}")
        elif name in ("dlbpf_disk_bytes_total", "dlbpf_disk_requests_total"):
            key = lab["direction"] + ("_bytes" if name == "dlbpf_disk_bytes_total" else "_ops")
            check(int(v) == p["io"][key], f"{name} {lab}: {v} != {p['io'][key]}")
    check(seen_comm, "no series of the training process")
    for reason, v in pick(samples, "dlbpf_dropped_events_total").items():
        r = dict(reason)["reason"]
        check(int(v) == summary["drops"][r], f"drops {r}: {v}")
    verdict = [dict(l)["verdict"] for l, v in pick(samples, "dlbpf_verdict").items() if v == "1"]
    check(verdict == [summary["diagnosis"]["verdict"]], f"verdict {verdict} vs {summary['diagnosis']['verdict']}")


def settle(job, timeout=15):
    """Scrapes until the job is done and two scrapes 0.3 s apart agree; returns the last (and how many)."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        code, _, body = scrape(job.port)
        check(code == 200, f"scrape: HTTP {code}")
        now = parse_exposition(body)
        if job.trained() and last is not None and counters(now) == counters(last[1]):
            return last[0], now
        last = (body, now)
        time.sleep(0.3)
    raise Failure(f"the scrapes did not settle in {timeout} s (job done: {job.trained()})")


def test_metrics_match_summary():
    """Scrapes during the run pass promtool and only grow; the last equals the JSON summary and the truth."""
    job = Job("match", ["--scenario", "input", "--steps", "60"], ["--metrics-kernels"])
    mid, previous, lint = 0, None, ""
    while not job.trained():
        code, ctype, body = scrape(job.port)
        check(code == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8", f"{code} {ctype}")
        lint = promtool_ok(body)
        now = parse_exposition(body)
        if previous:
            for k, v in counters(previous).items():
                check(k not in now or decimal.Decimal(now[k]) >= decimal.Decimal(v), f"{k} went down: {v} -> {now[k]}")
        n = sum(int(v) for v in pick(now, "dlbpf_step_duration_seconds_count").values())
        mid += n > 0
        previous = now
        time.sleep(0.25)
    body, final = settle(job)
    promtool_ok(body)
    summary, tsteps, _ = job.finish()
    p = check_against_truth(summary, tsteps, held=False)
    check(mid >= 1, "no scrape during the run saw a step")
    check(p["comm"] == HOSTILE_COMM.decode("utf-8", "replace"), f"comm {p['comm']!r}")
    check_scrape_equals_summary(final, summary)
    kernels = pick(final, "dlbpf_kernel_launches_by_name_total", pid=p["pid"])
    check(len(kernels) == len({k["name"] for k in p["cuda"]["kernels"]}), f"{len(kernels)} kernel series")
    return (f"{mid} scrapes with steps during the run; the last one equals the summary: "
            f"{len(summary['steps'])} steps, {p['cuda']['calls']['cudaLaunchKernel']['count']} launches, "
            f"{len(final)} samples; promtool: {lint or 'no output'}")


def raw_request(port, data, read=True, timeout=8, host="127.0.0.1"):
    """Sends data on a fresh connection; what came back (b'' if nothing) and whether the server reset it."""
    s = socket.create_connection((host, port), timeout=timeout)
    got, reset = b"", False
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            reset = True
        while read:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                reset = True
                break
            if not chunk:
                break
            got += chunk
    finally:
        s.close()
    return got, reset


def status_of(resp):
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", resp)
    return int(m.group(1)) if m else None


def test_metrics_hostile_clients():
    """Slow loris, a 1 MB request line, garbage, 100 connections: answered or closed, scrapes still served,
    the trace exact against the workload."""
    # Lingering: the trace (and its server) must outlive the attack, which a 250-step job did not always
    # (the stalled request's connection closed at 2.7 s, with the job's end).
    job = Job("hostile", ["--scenario", "input", "--steps", "250"])
    port, results, errors = job.port, {}, []

    def loris(i):
        # One byte every 0.3 s: the request is never complete; the server's read deadline ends it.
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        t0 = time.monotonic()
        try:
            for b in b"GET /metrics HTTP/1.1\r\nHost: x\r\n":
                s.send(bytes([b]))
                time.sleep(0.3)
        except (BrokenPipeError, ConnectionResetError):
            pass
        results[f"loris{i}"] = time.monotonic() - t0
        s.close()

    def many():
        socks = []
        for _ in range(100):
            try:
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError as e:
                errors.append(f"connect: {e}")
        results["connections"] = len(socks)
        time.sleep(2)
        for s in socks:
            s.close()

    threads = [threading.Thread(target=loris, args=(i,)) for i in range(3)] + [threading.Thread(target=many)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    answers = {
        "1 MB request line": raw_request(port, b"GET /" + b"a" * (1 << 20) + b" HTTP/1.1\r\n\r\n"),
        "garbage": raw_request(port, b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + os.urandom(160)),
        "binary garbage line": raw_request(port, b"G\xffT / HTTP/1.1\r\n\r\n"),
        "POST": raw_request(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
        "other path": raw_request(port, b"GET /metricsx HTTP/1.1\r\n\r\n"),
        "huge headers": raw_request(port, b"GET /metrics HTTP/1.1\r\n" + b"X-A: b\r\n" * 2000 + b"\r\n"),
    }
    want = {"1 MB request line": 414, "garbage": 400, "binary garbage line": 400, "POST": 405, "other path": 404,
            "huge headers": 431}
    # A scrape while the 100 connections and the loris are open: a new connection evicts the oldest silent one.
    code, _, body = scrape(port)
    check(code == 200, f"scrape under attack: HTTP {code}")
    promtool_ok(body)
    for t in threads:
        t.join(30)
    # Alone, a client that stops halfway through its request is answered 408 at the read deadline (3 s,
    # doc/manual.md's); the upper bound leaves a loaded machine 5 s of slack, it only tells a hang apart.
    t0 = time.monotonic()
    stalled, stalled_reset = raw_request(port, b"GET /metr", timeout=15)
    stalled_s = time.monotonic() - t0
    # The log's counters at failure tell an eviction (evicted) from a 408 whose answer was lost (too slow).
    check(status_of(stalled) == 408 and 2.9 <= stalled_s <= 8, f"stalled request: {stalled[:40]!r} after "
          f"{stalled_s:.1f} s (reset: {stalled_reset}); {job.d.stderr[-600:]}")
    for what, (resp, reset) in answers.items():
        # Past the bound the server answers and closes; a client still sending may see the reset instead.
        st = status_of(resp)
        check(st == want[what] or (reset and st is None and what in ("1 MB request line", "huge headers")),
              f"{what}: answered {resp[:60]!r} (reset: {reset}), expected {want[what]}")
    check(results["connections"] == 100, f"{results['connections']} of 100 connections made: {errors[:3]}")
    summary, tsteps, _ = job.finish()
    check_against_truth(summary, tsteps)
    log = re.search(r"metrics: (\d+) scrapes served .*refused: (\d+) not found, (\d+) not GET, (\d+) malformed, "
                    r"(\d+) too large, (\d+) too slow, (\d+) evicted", job.d.stderr)
    check(log, "no metrics line in the log")
    nf, ng, bad, big, slow, evicted = (int(x) for x in log.groups()[1:])
    check(nf == 1 and ng == 1 and bad == 2 and big == 2, f"refusals: {log.group(0)}")
    check(max(v for k, v in results.items() if k.startswith("loris")) < 10, f"loris not cut off: {results}")
    check(slow >= 1 and slow + evicted >= 4, f"slow clients neither timed out nor evicted: {log.group(0)}")
    return (f"{results['connections']} connections held, a stalled request cut at {stalled_s:.1f} s, "
            f"{len(summary['steps'])} steps exact; "
            f"{log.group(0)}")


def outward_address():
    """This host's address toward the outside (a UDP connect sends nothing), or None if only loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("198.51.100.1", 9))
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def test_metrics_while_recording():
    """record serves the same metrics: a scrape during the recording counts the job's calls, and the
    recording replays to a summary with at least as many. --metrics PORT listens on loopback only."""
    port, rec = free_port(), os.path.join(WORK, f"metrics-{os.getpid()}.dlbpf")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    d = Dlbpf(["record", "-o", rec, "--metrics", str(port), "--", workload("train"), "--scenario", "input",
               "--steps", "60", "--quiet"], env=env)
    d.started()
    outward = outward_address()
    if outward:
        with socket.socket() as s:
            s.settimeout(5)
            check(s.connect_ex((outward, port)) != 0, f"--metrics {port} answers on {outward}")
    seen = 0
    while d.proc.poll() is None and not seen:
        code, _, body = scrape(port)
        check(code == 200, f"HTTP {code}")
        promtool_ok(body)
        seen = sum(int(v) for v in pick(parse_exposition(body), "dlbpf_cuda_calls_total",
                                        api="cudaLaunchKernel").values())
        time.sleep(0.2)
    check(d.wait() == 0, f"record failed: {d.stderr[-2000:]}")
    check(seen > 0, "no scrape during the recording counted a launch")
    rc, _, err = run_dlbpf(["report", rec, "-j", rec + ".json"])
    check(rc == 0, f"report: {err}")
    total = train_pid(load_summary(rec + ".json"))["cuda"]["calls"]["cudaLaunchKernel"]["count"]
    check(total >= seen, f"the recording has {total} launches, a scrape saw {seen}")
    return (f"a scrape saw {seen} of the recording's {total} launches; "
            f"{'refused on ' + outward if outward else 'no address but loopback to try'}")


def test_metrics_any_address():
    """--metrics 0.0.0.0:PORT, said explicitly, answers on this host's other addresses too."""
    outward = outward_address()
    if not outward:
        return "no address but loopback: nothing to check"
    port = free_port()
    d = Dlbpf(["--metrics", f"0.0.0.0:{port}", "--", "sleep", "3"])
    d.started()
    resp, _ = raw_request(port, b"GET /metrics HTTP/1.0\r\n\r\n", host=outward)
    check(status_of(resp) == 200 and b"dlbpf_build_info" in resp, f"on {outward}: {resp[:80]!r}")
    check(d.wait() == 0, d.stderr[-1000:])
    return f"served on {outward}:{port}"


def test_metrics_port_in_use():
    """A port another listener holds: dlbpf says so and exits 1 before the command runs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        marker = os.path.join(WORK, f"metrics-ran-{os.getpid()}")
        rc, _, err = run_dlbpf(["--metrics", str(port), "--", "touch", marker])
    check(rc == 1, f"exit {rc}: {err}")
    check("in use" in err, f"no reason given: {err}")
    check(not os.path.exists(marker), "the command ran")
    return err.strip().splitlines()[-1]


def test_metrics_bad_address():
    """Malformed addresses are usage errors (2); an address not of this host fails (1); report refuses it."""
    for spec in ("0", "65536", "http", ":9464", "::1:9464", "[::1]", "127.0.0.1:", "1.2.3.4:x"):
        rc, _, err = run_dlbpf(["--metrics", spec, "--", "true"])
        check(rc == 2 and "--metrics" in err, f"--metrics {spec}: exit {rc}: {err}")
    foreign = "198.51.100.7"   # TEST-NET-2 (RFC 5737): not this host's, unless a test network made it so
    with socket.socket() as s:
        try:
            s.bind((foreign, 0))
            foreign = None
        except OSError:
            pass
    if foreign:
        rc, _, err = run_dlbpf(["--metrics", f"{foreign}:9464", "--", "true"])
        check(rc == 1 and "not an address of this host" in err, f"exit {rc}: {err}")
    rc, _, err = run_dlbpf(["--metrics-kernels", "--", "true"])
    check(rc == 2 and "needs --metrics" in err, f"exit {rc}: {err}")
    rc, _, err = run_dlbpf(["report", "x.dlbpf", "--metrics", "9464"])
    check(rc == 2 and "live trace" in err, f"exit {rc}: {err}")


if __name__ == "__main__":
    main()
