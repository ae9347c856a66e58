#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Fleet: the container, pod and Slurm job of a traced process, from cgroups this test makes (cgroup v2
with kubelet's systemd-driver names, a v1 hierarchy it mounts with the cgroupfs driver's, a Slurm step),
checked in the JSON summary, the report, the Prometheus labels and the OTLP resource against the ids the
test chose. And --otlp against real HTTP receivers on loopback: every body decoded by protoc against the
official opentelemetry-proto (tests/proto/opentelemetry), its spans equal to the JSON's steps; a receiver
that answers 503 then 200, one that never answers, one that closes the connection. Run as root."""
import http.server
import os
import random
import re
import shutil
import socket
import subprocess
import threading
import time
import uuid

from harness import DLBPF, GPUSIM_DIR, ROOT, WORK, Dlbpf, Skipped, check, load_summary, main, workload
from test_metrics import free_port, parse_exposition, scrape

PROTO_DIR = os.path.join(ROOT, "tests", "proto", "opentelemetry")
PROTO = {"/v1/traces": ("opentelemetry/proto/collector/trace/v1/trace_service.proto",
                        "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"),
         "/v1/metrics": ("opentelemetry/proto/collector/metrics/v1/metrics_service.proto",
                         "opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest")}


# --- OTLP: a receiver, protoc, and a reader of protoc's text format --------------------------------

class Receiver:
    """An HTTP server on 127.0.0.1 that records each request (monotonic time, path, headers, body) and
    answers as `answer(n, path)` says: an HTTP status with headers, "hang" (no answer until stop()), or
    "close" (the connection closed without one). n counts the requests to path, from 0."""

    def __init__(self, answer=lambda n, path: (200, {})):
        self.requests, self.answer, self.released = [], answer, threading.Event()
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    n = sum(1 for r in outer.requests if r["path"] == self.path)
                    outer.requests.append({"t": time.monotonic(), "path": self.path, "headers": dict(self.headers),
                                           "body": body})
                what = outer.answer(n, self.path)
                if what == "hang":
                    outer.released.wait(120)
                    self.close_connection = True
                    return
                if what == "close":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status, headers = what
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def decode(path, body):
    """protoc --decode of an export request body, as protoc's text format."""
    proto, msg = PROTO[path]
    p = subprocess.run(["protoc", "-I", PROTO_DIR, f"--decode={msg}", proto], input=body, capture_output=True,
                       timeout=60)
    check(p.returncode == 0, f"protoc --decode {msg}: {p.stderr.decode(errors='replace')[:500]}")
    return p.stdout.decode()


TEXT_FIELD = re.compile(r'^(\w+)(?:: (.*)| \{)$')


def text_value(v):
    if v.startswith('"'):
        # C escapes, octal for bytes: as bytes, then UTF-8 where it is text.
        raw = v[1:-1].encode("latin-1").decode("unicode_escape").encode("latin-1")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    if re.fullmatch(r"-?\d+", v):
        return int(v)
    try:
        return float(v)
    except ValueError:
        return v   # an enum's name


def parse_text(text):
    """protoc's text format as nested dicts: each field a list of its values (messages are dicts)."""
    root, stack = {}, []
    cur = root
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == "}":
            cur = stack.pop()
            continue
        m = TEXT_FIELD.match(line)
        check(m, f"protoc's output: {line!r}")
        if m.group(2) is None:
            child = {}
            cur.setdefault(m.group(1), []).append(child)
            stack.append(cur)
            cur = child
        else:
            cur.setdefault(m.group(1), []).append(text_value(m.group(2)))
    return root


def attrs(msg):
    """KeyValue list -> {key: value}."""
    out = {}
    for kv in msg.get("attributes", []):
        val = kv["value"][0]
        (kind, v), = val.items()
        out[kv["key"][0]] = v[0]
    return out


def received(rcv):
    """Every request's body decoded: (spans as (resource attrs, span) pairs, metric exports as lists of
    (resource attrs, metric)), after checking each request's path and content type."""
    spans, metrics = [], []
    for r in rcv.requests:
        check(r["path"] in PROTO, f"a request to {r['path']}")
        check(r["headers"].get("Content-Type") == "application/x-protobuf", f"content type {r['headers']}")
        doc = parse_text(decode(r["path"], r["body"]))
        if r["path"] == "/v1/traces":
            for rs in doc.get("resource_spans", []):
                res = attrs(rs["resource"][0])
                for ss in rs.get("scope_spans", []):
                    spans += [(res, s) for s in ss.get("spans", [])]
        else:
            metrics.append([(attrs(rm["resource"][0]), m) for rm in doc.get("resource_metrics", [])
                            for sm in rm.get("scope_metrics", []) for m in sm.get("metrics", [])])
    return spans, metrics


def otlp_line(out, signal):
    """The report's line for spans or metric points: {sent, requests, retried, dropped, full, undelivered}."""
    m = re.search(rf"dlbpf: OTLP {signal}: (\d+) sent to \S+ in (\d+) requests \((\d+) retried\), (\d+) dropped "
                  rf"\((\d+) queue full, (\d+) not delivered\)", out)
    check(m, f"no OTLP {signal} line in the report")
    return dict(zip(["sent", "requests", "retried", "dropped", "full", "undelivered"], map(int, m.groups())))


def cgroup2_root():
    """Where cgroup v2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host), or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[0] == "cgroup2":
                return left.split()[4]
    return None


def fresh_dir(name):
    d = os.path.join(WORK, f"{name}-{os.getpid()}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def v2_cgroup(rel):
    """rel made in the cgroup v2 hierarchy, or Skipped when there is none."""
    root = cgroup2_root()
    if not root:
        raise Skipped("no cgroup v2 mounted")
    return Cgroup(root, rel)


class Cgroup:
    """A cgroup path made under root (removed, deepest first, by remove())."""

    def __init__(self, root, rel):
        self.root, self.rel = root, rel.strip("/")
        self.path = os.path.join(root, self.rel)
        os.makedirs(self.path)

    def remove(self):
        parts = self.rel.split("/")
        for i in range(len(parts), 0, -1):
            try:
                os.rmdir(os.path.join(self.root, *parts[:i]))
            except OSError:
                break   # not empty (a sibling of another run) or gone


def trace_in(cg, tag, steps=8, metrics=False, otlp=None, extra=()):
    """dlbpf runs `sh` that moves itself into cg, then runs train (forked and exec'd there); the job lingers
    until go so that a scrape sees its last records. Returns (summary, stdout, train's pid, scrape or None)."""
    d = fresh_dir(f"fleet-{tag}")
    done, go, pidfile = os.path.join(d, "done"), os.path.join(d, "go"), os.path.join(d, "train.pid")
    script = ('echo $$ > "$CG/cgroup.procs" || exit 1; "$@" & echo $! > "$PIDFILE"; wait $!; touch "$DONE"; '
              'while [ ! -e "$GO" ]; do sleep 0.05; done')
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR, CG=cg.path, DONE=done, GO=go, PIDFILE=pidfile)
    port = free_port()
    args = list(extra) + (["--metrics", str(port)] if metrics else []) + (["--otlp", otlp.url] if otlp else []) + ["--step-on", "train_step_begin", "--", "sh", "-c", script,
                                                           "sh", workload("train"), "--scenario", "gpu",
                                                           "--steps", str(steps), "--quiet"]
    dl = Dlbpf(args, env=env)
    dl.started()
    end = time.monotonic() + 60
    while not os.path.exists(done) and time.monotonic() < end and dl.proc.poll() is None:
        time.sleep(0.05)
    check(os.path.exists(done), f"the job did not finish: {dl.stderr[-1500:] if dl.proc.poll() is not None else ''}")
    samples = None
    if metrics:
        code, _, body = scrape(port)
        check(code == 200, f"scrape: HTTP {code}")
        samples = parse_exposition(body)
    open(go, "w").close()
    rc = dl.wait(timeout=60)
    check(rc == 0, f"dlbpf exited {rc}: {dl.stderr[-2000:]}")
    # The subshell that ran train: its pid is what `$!` said (the shell forks, the child execs train).
    pid = int(open(pidfile).read())
    return dl.summary(), dl.stdout, pid, samples


def proc_of(summary, pid):
    got = [p for p in summary["processes"] if p["pid"] == pid]
    check(len(got) == 1, f"pid {pid} is not in the summary ({[p['pid'] for p in summary['processes']]})")
    return got[0]


def hexid(n=64):
    return "".join(random.choice("0123456789abcdef") for _ in range(n))


def test_kubepods_v2_systemd():
    """A kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope cgroup (v2): its container and pod in the
    JSON, the report and every per-process Prometheus series of the job; the shell that moved itself there
    but did not exec after has none (read at start, again only at an exec)."""
    pod, cid = str(uuid.uuid4()), hexid()
    qos = random.choice(["burstable", "besteffort"])
    cg = v2_cgroup(f"kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{pod.replace('-', '_')}.slice/"
                      f"cri-containerd-{cid}.scope")
    rcv = Receiver()
    try:
        summary, out, pid, samples = trace_in(cg, "v2", metrics=True, otlp=rcv)
    finally:
        cg.remove()
        rcv.stop()
    p = proc_of(summary, pid)
    check(p.get("container") == {"id": cid, "runtime": "containerd", "pod_uid": pod},
          f"container {p.get('container')}, the test made {cid} in pod {pod}")
    check(len(summary["steps"]) > 0 and {s["pid"] for s in summary["steps"]} == {pid}, "no steps of the job")
    shell = [q for q in summary["processes"] if q["pid"] != pid and q["comm"] == "sh"]
    check(shell and all("container" not in q for q in shell), f"the shell: {[q.get('container') for q in shell]}")
    check(f"container {cid} (containerd) pod {pod}" in out, "the report does not name the container and pod")
    series = [dict(lab) for (name, lab), v in samples.items() if ("pid", str(pid)) in lab]
    check(series, f"no series of pid {pid}")
    bad = [s for s in series if s.get("container_id") != cid or s.get("pod_uid") != pod]
    check(not bad, f"{len(bad)} of {len(series)} series of the job lack its labels: {bad[:2]}")
    spans, metrics = received(rcv)
    res = [r for r, _ in spans if r["process.pid"] == pid] + [r for r, _ in metrics[-1] if r.get("process.pid") == pid]
    check(res and all(r.get("container.id") == cid and r.get("k8s.pod.uid") == pod and
                      r.get("container.runtime.name") == "containerd" for r in res), f"OTLP resources {res[:1]}")
    return f"pid {pid}: container {cid[:12]} pod {pod}, on {len(series)} series and {len(res)} OTLP resources"


def test_container_in_recording():
    """A recording keeps where each process ran: `dlbpf report` of it, in either encoding, says the job."""
    job = str(random.randrange(1, 10 ** 7))
    cg = v2_cgroup(f"slurm.slice/job_{job}.slice/step-{os.getpid()}.scope")
    d = fresh_dir("fleet-rec")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR, CG=cg.path)
    seen = []
    try:
        for enc in ("compact", "verbatim"):
            rec, out = os.path.join(d, f"{enc}.dlbpf"), os.path.join(d, f"{enc}.json")
            p = subprocess.run([DLBPF, "record", "-q", "--encoding", enc, "-o", rec, "--step-on",
                                "train_step_begin", "--", "sh", "-c", 'echo $$ > "$CG/cgroup.procs" && exec "$@"', "sh",
                                workload("train"), "--scenario", "gpu", "--steps", "6", "--quiet"],
                               env=env, capture_output=True, text=True, timeout=120)
            check(p.returncode == 0, f"record: {p.stderr[-1500:]}")
            p = subprocess.run([DLBPF, "report", rec, "--json", out], capture_output=True,
                               text=True, timeout=120)
            check(p.returncode == 0 and f"slurm job {job}" in p.stdout, f"report of {enc}: {p.stderr[-1500:]}")
            trains = [q for q in load_summary(out)["processes"] if q["comm"] == "train"]
            check(trains and all(q.get("container") == {"slurm_job": job} for q in trains),
                  f"{enc}: {[q.get('container') for q in trains]}")
            seen.append(len(trains))
    finally:
        cg.remove()
    return f"slurm job {job} in {seen} processes of the compact and verbatim recordings"


def mount_v1():
    """A named cgroup v1 hierarchy (no controllers) mounted for this test, or Skipped."""
    path = os.path.join(WORK, f"cgv1-{os.getpid()}")
    os.makedirs(path, exist_ok=True)
    # One name for every run: the kernel keeps a v1 hierarchy after its last unmount, and mounting the
    # name again attaches that one instead of making another.
    r = subprocess.run(["mount", "-t", "cgroup", "-o", "none,name=dlbpf_test", "cgroup", path],
                       capture_output=True, text=True)
    if r.returncode:
        os.rmdir(path)
        raise Skipped(f"cannot mount a cgroup v1 hierarchy: {r.stderr.strip()}")
    return path


def unmount_v1(path):
    subprocess.run(["umount", path], capture_output=True)
    os.rmdir(path)


def test_kubepods_v1_cgroupfs():
    """The cgroupfs driver's /kubepods/<qos>/pod<uid>/<id> in a v1 hierarchy: container and pod (no runtime)."""
    root = mount_v1()
    pod, cid = str(uuid.uuid4()), hexid()
    try:
        cg = Cgroup(root, f"kubepods/besteffort/pod{pod}/{cid}")   # pod and id unique: runs may share it
        html = os.path.join(WORK, f"fleet-v1-{os.getpid()}.html")
        try:
            summary, out, pid, _ = trace_in(cg, "v1", extra=["--html", html])
        finally:
            cg.remove()
    finally:
        unmount_v1(root)
    p = proc_of(summary, pid)
    check(p.get("container") == {"id": cid, "pod_uid": pod}, f"container {p.get('container')}, made {cid} {pod}")
    check(f"container {cid} pod {pod}" in out, "the report does not name the container and pod")
    check(f'<p class="where">container {cid} pod {pod}</p>' in open(html).read(), "the HTML report does not name them")
    return f"pid {pid}: container {cid[:12]} pod {pod}"


def test_slurm_step():
    """A Slurm step's cgroup (v2: slurmstepd.scope/job_N/step_0/user/task_0): the job in the JSON and report."""
    job = str(random.randrange(1, 10 ** 7))
    cg = v2_cgroup(f"system.slice/slurmstepd.scope/job_{job}/step_0/user/task_{os.getpid()}")
    try:
        summary, out, pid, _ = trace_in(cg, "slurm")
    finally:
        cg.remove()
    p = proc_of(summary, pid)
    check(p.get("container") == {"slurm_job": job}, f"container {p.get('container')}, the test made job {job}")
    check(f"slurm job {job}" in out, "the report does not name the job")
    return f"pid {pid}: slurm job {job}"



def run_otlp(rcv, tag, steps, extra=(), train_args=(), scenario="gpu"):
    """dlbpf --otlp to rcv on the gpu scenario, started by dlbpf; (summary, stdout, stderr, wall-clock ns
    before and after, seconds from the job's exit to dlbpf's)."""
    d = fresh_dir(f"otlp-{tag}")
    done = os.path.join(d, "done")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR, DONE=done)
    t0 = time.time_ns()
    dl = Dlbpf(["--otlp", rcv.url] + list(extra) + ["--step-on", "train_step_begin", "--", "sh", "-c",
                                                    '"$@"; rc=$?; touch "$DONE"; exit $rc', "sh", workload("train"),
                                                    "--scenario", scenario, "--steps", str(steps), "--quiet"] +
               list(train_args), env=env)
    dl.started()
    while not os.path.exists(done) and dl.proc.poll() is None:
        time.sleep(0.02)
    job_end = time.monotonic()
    rc = dl.wait(timeout=120)
    exit_s = time.monotonic() - job_end
    t1 = time.time_ns()
    check(rc == 0, f"dlbpf exited {rc}: {dl.stderr[-2000:]}")
    return dl.summary(), dl.stdout, dl.stderr, t0, t1, exit_s


def check_spans_are_steps(summary, spans, t0, t1):
    """One step span per JSON step, its duration and breakdown the step's, wall-clock times inside the
    run, one trace per process under its process span."""
    steps = {(s["pid"], s["index"]): s for s in summary["steps"]}
    by_name = [(r, sp) for r, sp in spans if sp["name"][0].startswith("step ")]
    procs = {r["process.pid"]: sp for r, sp in spans if sp["name"][0].startswith("process ")}
    check(len(by_name) == len(steps), f"{len(by_name)} step spans, the JSON has {len(steps)} steps")
    offsets = set()
    for res, sp in by_name:
        a = attrs(sp)
        st = steps.get((res["process.pid"], a["dlbpf.step.index"]))
        check(st is not None, f"span {sp['name'][0]} of pid {res['process.pid']} is no JSON step")
        start, end = sp["start_time_unix_nano"][0], sp["end_time_unix_nano"][0]
        check(end - start == st["dur_ns"], f"step {st['index']}: span {end - start} ns, JSON {st['dur_ns']} ns")
        # Wall clock: inside the run as this test's own clock saw it (read before dlbpf started, after it ended).
        check(t0 <= start and end <= t1, f"step {st['index']}: {start}..{end} is not inside the run {t0}..{t1}")
        offsets.add(start - st["start_ns"])
        for cat, ns in st["breakdown_ns"].items():
            check(a[f"dlbpf.step.{cat}_ns"] == ns, f"step {st['index']} {cat}: {a[f'dlbpf.step.{cat}_ns']} vs {ns}")
        check(a["dlbpf.step.verdict"] == st["verdict"], f"verdict {a['dlbpf.step.verdict']} vs {st['verdict']}")
        check([a["dlbpf.step.gpu_busy_ns.lower"], a["dlbpf.step.gpu_busy_ns.upper"]] == st["gpu_busy_ns"], "gpu busy")
        check(a["dlbpf.step.kernels"] == st["kernels"] and a["dlbpf.step.h2d_bytes"] == st["h2d_bytes"], "moved")
        parent = procs.get(res["process.pid"])
        check(parent is not None, f"no process span for pid {res['process.pid']}")
        check(sp["trace_id"] == parent["trace_id"] and sp["parent_span_id"][0] == parent["span_id"][0],
              f"step {st['index']} is not in its process's trace under its process span")
    # The longest waits: children of a step span, inside it.
    by_id = {sp["span_id"][0]: sp for _, sp in by_name}
    waits = [sp for _, sp in spans if sp["name"][0].startswith("wait ")]
    for w in waits:
        step = by_id.get(w["parent_span_id"][0])
        check(step is not None, f"{w['name'][0]} is under no step span")
        check(step["start_time_unix_nano"][0] <= w["start_time_unix_nano"][0] < w["end_time_unix_nano"][0] <=
              step["end_time_unix_nano"][0], f"{w['name'][0]} is not inside its step")
        check(w["name"][0] in ("wait gpu", "wait comm", "wait input") and
              attrs(w)["dlbpf.wait.kind"] == w["name"][0][5:], f"{w['name'][0]}: {attrs(w)}")
    check(len(by_name) + len(procs) + len(waits) == len(spans), "spans of another kind")
    # Every step moved by the one clock snapshot: the monotonic times and the spans' differ by one constant.
    check(len(offsets) == 1, f"{len(offsets)} different clock offsets")
    check(len({sp["trace_id"][0] for sp in procs.values()}) == len(procs), "two processes share a trace")
    return len(by_name), len(procs), len(waits)


def check_metrics(summary, exports, comm):
    """The last export equals the JSON summary: the step histogram, category time, CUDA calls, drops."""
    last = exports[-1]
    steps = summary["steps"]
    pid = steps[0]["pid"]
    mine = {m["name"][0]: (r, m) for r, m in last if r.get("process.pid") == pid}
    check({"dlbpf.step.duration", "dlbpf.step.category.time", "dlbpf.cuda.calls"} <= set(mine), f"metrics {set(mine)}")
    res, hist = mine["dlbpf.step.duration"]
    check(res["service.name"] == "dlbpf" and res["host.name"] == socket.gethostname() and
          res["process.executable.name"] == comm, f"resource {res}")
    pt = hist["histogram"][0]["data_points"][0]
    check(hist["histogram"][0]["aggregation_temporality"][0] == "AGGREGATION_TEMPORALITY_CUMULATIVE", "temporality")
    check(pt["count"][0] == len(steps), f"histogram count {pt['count'][0]}, {len(steps)} steps")
    # ns to seconds as a double on both sides: at most half a ulp apart, far below 1 ns.
    check(abs(pt["sum"][0] - sum(s["dur_ns"] for s in steps) / 1e9) < 1e-9, f"histogram sum {pt['sum'][0]}")
    bounds, counts = pt["explicit_bounds"], pt["bucket_counts"]
    check(len(counts) == len(bounds) + 1, "bucket counts")
    for i, b in enumerate(bounds + [float("inf")]):
        lo = bounds[i - 1] if i else 0
        n = sum(1 for s in steps if lo < s["dur_ns"] / 1e9 <= b)
        check(counts[i] == n, f"bucket <= {b}: {counts[i]}, the JSON's steps say {n}")
    _, cats = mine["dlbpf.step.category.time"]
    for p in cats["sum"][0]["data_points"]:
        c = attrs(p)["category"]
        check(abs(p["as_double"][0] - sum(s["breakdown_ns"][c] for s in steps) / 1e9) < 1e-9, f"category {c}")
    proc = [p for p in summary["processes"] if p["pid"] == pid][0]
    _, calls = mine["dlbpf.cuda.calls"]
    for p in calls["sum"][0]["data_points"]:
        api = attrs(p)["api"]
        check(p["as_int"][0] == proc["cuda"]["calls"][api]["count"], f"{api} calls")
    drops = [m for r, m in last if m["name"][0] == "dlbpf.dropped_events"]
    check(len(drops) == 1, "no dropped events metric")
    for p in drops[0]["sum"][0]["data_points"]:
        check(p["as_int"][0] == summary["drops"][attrs(p)["reason"]], f"drops {attrs(p)['reason']}")
    return len(last)


def test_otlp_gpu():
    """The gpu scenario exported to a receiver: each body decodes against the official protos, the spans
    are the JSON's steps, the metrics its numbers, the resource the process, and the header was sent."""
    rcv = Receiver()
    steps = random.randrange(12, 40)
    try:
        summary, out, err, t0, t1, _ = run_otlp(rcv, "gpu", steps, ["--otlp-header", "Authorization=Bearer t0k=n"])
    finally:
        rcv.stop()
    check(all(r["headers"].get("Authorization") == "Bearer t0k=n" for r in rcv.requests), "the header was not sent")
    spans, metrics = received(rcv)
    nsteps, nprocs, nwaits = check_spans_are_steps(summary, spans, t0, t1)
    # The gpu scenario's host waits in its loss copy for the step's kernels: a step has a "wait gpu" child.
    gpu_waits = {sp["parent_span_id"][0] for _, sp in spans if sp["name"][0] == "wait gpu"}
    check(len(gpu_waits) >= nsteps // 2, f"{len(gpu_waits)} of {nsteps} steps have a 'wait gpu' span")
    check(nsteps == steps - 1, f"{nsteps} step spans, the workload marked {steps} steps")
    comm = [p["comm"] for p in summary["processes"] if p["pid"] == summary["steps"][0]["pid"]][0]
    npoints = check_metrics(summary, metrics, comm)
    line = otlp_line(out, "spans")
    check(line["sent"] == len(spans) and line["dropped"] == 0, f"report {line}, {len(spans)} received")
    js = summary["otlp"]
    check(js["spans"]["sent"] == len(spans) and js["metric_points"]["sent"] == sum(
        len(m.get("sum", m.get("histogram"))[0]["data_points"]) for e in metrics for _, m in e), f"JSON otlp {js}")
    top = [sp for _, sp in spans if "dlbpf.verdict" in attrs(sp)]
    check(len(top) == 1 and attrs(top[0])["dlbpf.verdict"] == summary["diagnosis"]["verdict"], "the run's verdict")
    events = [e["name"][0] for e in top[0].get("events", [])]
    check(events == [f["rule"] for f in summary["diagnosis"]["findings"]],
          f"events {events}, findings {[f['rule'] for f in summary['diagnosis']['findings']]}")
    return (f"{nsteps} step spans ({len(gpu_waits)} with a 'wait gpu' child) + {nprocs} process spans, {len(spans)} "
            f"in all, in {line['requests']} requests; {npoints} metrics")


def test_otlp_input_waits():
    """The input scenario: each step span names the producer the JSON's lineage names, and the steps' longest
    input waits are "wait input" children carrying that producer."""
    rcv = Receiver()
    try:
        summary, _, _, t0, t1, _ = run_otlp(rcv, "input", random.randrange(10, 20), scenario="input",
                                            train_args=["--workers", str(random.randrange(1, 4))])
    finally:
        rcv.stop()
    spans, _ = received(rcv)
    check_spans_are_steps(summary, spans, t0, t1)
    steps = {(s["pid"], s["index"]): s for s in summary["steps"]}
    step_spans = {sp["span_id"][0]: (r, sp) for r, sp in spans if sp["name"][0].startswith("step ")}
    named = 0
    for r, sp in step_spans.values():
        a = attrs(sp)
        woken = steps[(r["process.pid"], a["dlbpf.step.index"])]["input"]["woken_by"]
        check(a.get("dlbpf.step.input.producer.pid") == (woken["pid"] if woken and woken["pid"] else None),
              f"step {a['dlbpf.step.index']}: producer {a.get('dlbpf.step.input.producer.pid')}, JSON {woken}")
        named += woken is not None
    inputs = [sp for _, sp in spans if sp["name"][0] == "wait input"]
    check(inputs, "no 'wait input' span in the input scenario")
    for w in inputs:
        _, step = step_spans[w["parent_span_id"][0]]
        check(attrs(w).get("dlbpf.input.producer.pid") == attrs(step).get("dlbpf.step.input.producer.pid"),
              "a wait's producer is not its step's")
    return f"{len(inputs)} 'wait input' spans over {len(step_spans)} steps; {named} steps name their producer"


def test_otlp_retry_after():
    """503 with Retry-After: 1 to the first request of each signal, then 200: everything arrives, each
    retry no sooner than asked, and the report counts the retries."""
    rcv = Receiver(lambda n, path: (503, {"Retry-After": "1"}) if n == 0 else (200, {}))
    try:
        summary, out, _, t0, t1, exit_s = run_otlp(rcv, "retry", random.randrange(10, 20))
    finally:
        rcv.stop()
    for path in PROTO:
        times = [r["t"] for r in rcv.requests if r["path"] == path]
        check(len(times) >= 2, f"{path}: {len(times)} requests")
        check(times[1] - times[0] >= 1.0, f"{path}: retried after {times[1] - times[0]:.3f} s, Retry-After said 1")
        check(rcv.requests[[r["t"] for r in rcv.requests].index(times[0])]["body"] ==
              rcv.requests[[r["t"] for r in rcv.requests].index(times[1])]["body"] or path == "/v1/metrics",
              f"{path}: the retry is not the same body")
    rcv.requests = [r for r in rcv.requests if r["t"] not in
                    {min(q["t"] for q in rcv.requests if q["path"] == p) for p in PROTO}]   # the 503'd ones
    spans, _ = received(rcv)
    check_spans_are_steps(summary, spans, t0, t1)
    line = otlp_line(out, "spans")
    check(line["retried"] >= 1 and line["dropped"] == 0 and line["sent"] == len(spans), f"report {line}")
    return f"{len(spans)} spans delivered after {line['retried']} retry; exit {exit_s:.2f} s after the job"


def test_otlp_hanging_receiver():
    """A receiver that reads each request and never answers: the job runs as usual, dlbpf exits within its
    5 s flush bound after the job (plus the report's own time), and counts every span as not delivered."""
    steps = random.randrange(10, 20)
    base = Receiver()
    try:
        _, _, _, _, _, base_s = run_otlp(base, "hang-baseline", steps)
    finally:
        base.stop()
    rcv = Receiver(lambda n, path: "hang")
    try:
        summary, out, err, _, _, exit_s = run_otlp(rcv, "hang", steps)
    finally:
        rcv.stop()
    line = otlp_line(out, "spans")
    want = len(summary["steps"]) + len({s["pid"] for s in summary["steps"]})   # and their waits
    check(line["sent"] == 0 and line["dropped"] >= want and line["full"] == 0, f"report {line}, {want}+ spans made")
    check("OTLP:" in err and "not delivered" in err, "no warning on stderr")
    js = summary["otlp"]["spans"]
    check(js["sent"] == 0 and js["not_delivered"] == line["undelivered"] and js["dropped_queue_full"] == 0,
          f"JSON otlp {js}, report {line}")
    # Against the same run to a receiver that answers: the flush bound (5 s, DL_OTLP_FLUSH_NS) more, plus a
    # request's poll slice (0.1 s) and the two runs' own variation (the report and detach, measured at a few
    # tenths of a second here; 2 s allowed for a loaded or sanitized run) -- never the 10 s a request may wait
    # or the retries' 15.5 s of backoff.
    check(exit_s < base_s + 5 + 0.1 + 2, f"dlbpf exited {exit_s:.2f} s after the job, {base_s:.2f} s when answered")
    return (f"exit {exit_s:.2f} s after the job ({base_s:.2f} s with a receiver that answers); {line['dropped']} "
            f"spans counted as not delivered")


def test_otlp_connection_closed():
    """A receiver that closes the first connection of each signal without answering: retried, delivered."""
    rcv = Receiver(lambda n, path: "close" if n == 0 else (200, {}))
    try:
        summary, out, _, t0, t1, exit_s = run_otlp(rcv, "close", random.randrange(10, 20))
    finally:
        rcv.stop()
    line = otlp_line(out, "spans")
    firsts = {min(q["t"] for q in rcv.requests if q["path"] == p) for p in PROTO}
    rcv.requests = [r for r in rcv.requests if r["t"] not in firsts]
    spans, _ = received(rcv)
    check_spans_are_steps(summary, spans, t0, t1)
    check(line["retried"] >= 1 and line["sent"] == len(spans) and line["dropped"] == 0, f"report {line}")
    return f"{len(spans)} spans delivered after {line['retried']} retry"


def test_otlp_report_of_recording():
    """`dlbpf report FILE --otlp`: a recording exported later has the spans of the live run's steps, at the
    recording's wall-clock times, not the replay's."""
    d = fresh_dir("otlp-report")
    rec, live_json, rep_json = (os.path.join(d, n) for n in ("run.dlbpf", "live.json", "report.json"))
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    t0 = time.time_ns()
    p = subprocess.run([DLBPF, "record", "-q", "-o", rec, "--json", live_json, "--step-on",
                        "train_step_begin", "--", workload("train"), "--scenario", "gpu", "--steps",
                        str(random.randrange(10, 20)), "--quiet"], env=env, capture_output=True, text=True, timeout=120)
    t1 = time.time_ns()
    check(p.returncode == 0, f"record: {p.stderr[-1500:]}")
    time.sleep(1.0)   # the replay's own clock is then past the recording's: a span taking it would fall outside
    rcv = Receiver()
    try:
        p = subprocess.run([DLBPF, "report", rec, "--json", rep_json, "--otlp", rcv.url],
                           capture_output=True, text=True, timeout=120)
    finally:
        rcv.stop()
    check(p.returncode == 0, f"report: {p.stderr[-1500:]}")
    summary = load_summary(rep_json)
    check(len(summary["steps"]) == len(load_summary(live_json)["steps"]), "the replay's steps differ from the live run's")
    spans, metrics = received(rcv)
    n, _, _ = check_spans_are_steps(summary, spans, t0, t1)
    check(metrics, "no metrics from the report")
    # The points describe the recorded run: from its start to its last step, not the replay's time.
    pts = [p for _, m in metrics[-1] for kind in ("sum", "histogram") for p in m.get(kind, [{}])[0].get("data_points", [])]
    check(pts and all(t0 <= p["start_time_unix_nano"][0] <= p["time_unix_nano"][0] <= t1 for p in pts),
          f"metric points outside the recorded run {t0}..{t1}")
    return f"{n} step spans and {len(pts)} metric points from the recording, inside its run"


def test_otlp_bad_targets():
    """A URL that is not http, https, an unresolvable host, a bad header: refused before anything is traced."""
    for args, why in ((["--otlp", "https://127.0.0.1:4318"], "https"), (["--otlp", "ftp://x"], "http://"),
                      (["--otlp", "http://no-such-host.invalid:4318"], "resolve"),
                      (["--otlp", "http://127.0.0.1:99999"], "port"),
                      (["--otlp", "http://127.0.0.1:4318", "--otlp-header", "Bad Key=v"], "not a token"),
                      (["--otlp-header", "K=v"], "needs --otlp")):
        p = subprocess.run([DLBPF] + args + ["--", "true"], capture_output=True, text=True,
                           timeout=60)
        check(p.returncode != 0 and why in p.stderr, f"{args}: exit {p.returncode}: {p.stderr.strip()[:300]}")



def test_otlp_usage_errors():
    """Every bad --otlp URL and --otlp-header is a usage error (exit 2, as every other one) said before anything
    is traced, and the message shows the argument as text only (no CR, LF or escape reaches the terminal);
    headers dlbpf sets itself are refused (a second Content-Length would break the request). An unresolvable
    host is not a usage error: the network is consulted, exit 1."""
    from harness import shown
    url = "http://127.0.0.1:4318"
    cases = [(["--otlp", "https://127.0.0.1:4318"], "https is not supported"),
             (["--otlp", "ftp://x"], "not an http:// URL"),
             (["--otlp", "http://127.0.0.1:99999"], "bad host or port"),
             (["--otlp", "http://"], "no host"),
             (["--otlp", "http://h/\r\nX: 1"], "control character"),
             (["--otlp", url, "--otlp-header", "Bad Key=v"], "not a token"),
             (["--otlp", url, "--otlp-header", "X-Token=a\r\nInjected: 1"], "control character (0x0d)"),
             (["--otlp", url, "--otlp-header", "X-Title=\x1b]0;pwn\x07"], "control character (0x1b)"),
             (["--otlp", url, "--otlp-header", "Content-Length=0"], "dlbpf sets Content-Length itself"),
             (["--otlp", url, "--otlp-header", "content-type=text/plain"], "dlbpf sets Content-Type itself"),
             (["--otlp", url, "--otlp-header", "Host=elsewhere"], "dlbpf sets Host itself"),
             (["--otlp-header", "K=v"], "needs --otlp")]
    for args, why in cases:
        p = subprocess.run([DLBPF] + args + ["--", "true"], capture_output=True, timeout=60)
        err = shown(p.stderr, f"{args}: stderr")
        check(p.returncode == 2 and why in err and "tracing" not in err,
              f"{args}: exit {p.returncode}: {err.strip()[:300]}")
    p = subprocess.run([DLBPF, "--otlp", "http://no-such-host.invalid:4318", "--", "true"], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 1 and "cannot resolve" in p.stderr, f"unresolvable host: exit {p.returncode}: {p.stderr[-300:]}")
    return f"{len(cases)} usage errors, exit 2 each, shown as text"


if __name__ == "__main__":
    main()
