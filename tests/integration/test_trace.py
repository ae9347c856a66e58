#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Integration tests of the trace sink (-o): trace the demo workload, decode the
Perfetto protobuf with `protoc --decode` against tests/proto/perfetto_min.proto,
parse the Chrome JSON with python3's json, and check both against the JSON
summary of the same run. Run as root."""
import bisect
import json
import os
import re
import subprocess
from collections import Counter, defaultdict

from harness import GPUSIM_DIR, ROOT, WORK, Dlbpf, check, load_summary, main, run_dlbpf, workload

PROTO_DIR = os.path.join(ROOT, "tests", "proto")
TRAIN = workload("train")
SPIN = [workload("spinsleep"), "--seconds", "0.3"]


def parse_text(text):
    """protoc's text format → nested dicts; every field a list of values."""
    root = defaultdict(list)
    stack = [root]
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.endswith("{"):
            child = defaultdict(list)
            stack[-1][line[:-1].strip()].append(child)
            stack.append(child)
        elif line == "}":
            stack.pop()
        else:
            key, _, value = line.partition(": ")
            if value.startswith('"'):
                value = json.loads(value) if "\\" not in value else value.strip('"')
            elif value.lstrip("-").isdigit():
                value = int(value)
            else:
                try:
                    value = float(value)
                except ValueError:
                    pass
            stack[-1][key].append(value)
    check(len(stack) == 1, "unbalanced protoc output")
    return root


def one(msg, key, default=None):
    v = msg.get(key)
    return v[0] if v else default


def decode_pftrace(path):
    with open(path, "rb") as f:
        out = subprocess.run(["protoc", "--decode=dlbpf_test.Trace", "-I", PROTO_DIR, "perfetto_min.proto"],
                             stdin=f, capture_output=True, text=True)
    check(out.returncode == 0, f"protoc --decode failed: {out.stderr[-500:]}")
    return parse_text(out.stdout)["packet"]


class PfTrace:
    """Tracks, slices (begin/end paired per track, as trace_processor does) and counters."""

    def __init__(self, packets):
        self.tracks = {}
        names = {"cat": {}, "name": {}, "annot": {}, "str": {}}
        clocks = {}
        incr_ts = None
        default_clock = None
        events = []
        for i, p in enumerate(packets):
            check(one(p, "trusted_packet_sequence_id") == 1, f"packet {i} without the sequence id")
            if i == 0:
                check(one(p, "sequence_flags", 0) & 1, "first packet does not clear incremental state")
            for d in p.get("trace_packet_defaults", []):
                default_clock = one(d, "timestamp_clock_id")
            for cs in p.get("clock_snapshot", []):
                for c in cs["clocks"]:
                    clocks[one(c, "clock_id")] = (one(c, "timestamp"), one(c, "is_incremental") == "true")
                incr_ts = clocks[64][0]
            for idata in p.get("interned_data", []):
                for key, kind in (("event_categories", "cat"), ("event_names", "name"),
                                  ("debug_annotation_names", "annot"), ("debug_annotation_string_values", "str")):
                    for e in idata.get(key, []):
                        check(one(e, "iid") not in names[kind], f"iid {one(e, 'iid')} interned twice")
                        names[kind][one(e, "iid")] = one(e, "name", one(e, "str"))
            for td in p.get("track_descriptor", []):
                uuid = one(td, "uuid")
                check(uuid not in self.tracks or one(td, "name"), f"track {uuid} described twice without name")
                self.tracks[uuid] = td
            for te in p.get("track_event", []):
                clock = one(p, "timestamp_clock_id", default_clock)
                ts = one(p, "timestamp")
                check(ts is not None, f"event packet {i} without timestamp")
                if clock == 64:
                    check(incr_ts is not None, "incremental timestamp before the clock snapshot")
                    incr_ts += ts
                    ts = incr_ts
                else:
                    check(clock == 3, f"event on clock {clock}")
                    check(64 in clocks, "absolute timestamp before the clock snapshot")
                track = one(te, "track_uuid")
                check(track in self.tracks, f"event on undeclared track {track}")
                name = one(te, "name") or names["name"].get(one(te, "name_iid"))
                cats = [names["cat"][c] for c in te.get("category_iids", [])]
                args = {}
                for a in te.get("debug_annotations", []):
                    an = one(a, "name") or names["annot"][one(a, "name_iid")]
                    if "string_value_iid" in a:
                        args[an] = names["str"][one(a, "string_value_iid")]
                    else:
                        args[an] = next(v[0] for k, v in a.items() if k.endswith("_value"))
                events.append((ts, i, one(te, "type"), track, name, cats, args, te))
        check(3 in clocks and 6 in clocks and 1 in clocks and clocks.get(64, (0, False))[1],
              f"clock snapshot lacks MONOTONIC/BOOTTIME/REALTIME/incremental: {clocks}")
        self.event_count = len(events)
        # trace_processor sorts by timestamp, keeping file order for equal ones.
        events.sort(key=lambda e: (e[0], e[1]))
        self.slices = []         # (track, name, cat, ts, dur, depth, args)
        self.counters = Counter()
        self.flows = Counter()
        self.instants = []       # (track, name, ts, flow ids, terminating flow ids)
        open_ = defaultdict(list)
        for ts, _, typ, track, name, cats, args, te in events:
            for f in te.get("flow_ids", []) + te.get("terminating_flow_ids", []):
                self.flows[f] += 1
            if typ == "TYPE_INSTANT":
                self.instants.append((track, name, ts, te.get("flow_ids", []), te.get("terminating_flow_ids", [])))
            if typ == "TYPE_SLICE_BEGIN":
                check(name, f"slice without a name at {ts}")
                open_[track].append((ts, name, cats[0] if cats else None, args))
            elif typ == "TYPE_SLICE_END":
                check(open_[track], f"end without begin on track {self.track_name(track)} at {ts}")
                bts, bname, cat, bargs = open_[track].pop()
                self.slices.append((track, bname, cat, bts, ts - bts, len(open_[track]), bargs))
            elif typ == "TYPE_COUNTER":
                check("counter" in self.tracks[track], "counter event on a non-counter track")
                self.counters[track] += 1
        for track, stack in open_.items():
            check(not stack, f"{len(stack)} slices never end on {self.track_name(track)}")

    def track_name(self, uuid):
        return one(self.tracks[uuid], "name")

    def by_cat(self, cat):
        return [s for s in self.slices if s[2] == cat]


def summary_counts(summary):
    cuda = sum(c["count"] for p in summary["processes"] for c in p["cuda"]["calls"].values())
    # One disk slice per request seen completing (requests started can merge, or end unseen).
    bio = sum(p["io"]["completed_ops"] for p in summary["processes"])
    bio += summary.get("async_io", {}).get("ops", 0)
    switches = sum(p["sched"]["switches"] for p in summary["processes"])
    return cuda, bio, switches


def summary_durations(summary):
    """What the slices' durations must add up to: per CUDA API, disk waits, on-CPU time."""
    api = Counter()
    for p in summary["processes"]:
        for name, c in p["cuda"]["calls"].items():
            api[name] += c["total_ns"]
    io = sum(p["io"]["wait_ns"] for p in summary["processes"])
    oncpu = sum(p["sched"]["oncpu_ns"] for p in summary["processes"])
    return api, io, oncpu


def check_durations(summary, slices):
    """slices: (cat, name, dur_ns, args). A slice paired with the wrong end shows up here."""
    api, io, oncpu = summary_durations(summary)
    got = Counter()
    for cat, name, dur, _ in slices:
        if cat == "cuda":
            got[name] += dur
    check(got == api, f"CUDA slice durations per API {dict(got)} != summary total_ns {dict(api)}")
    got_io = sum(d for c, n, d, a in slices if c == "io" and "async" not in n)
    check(got_io == io, f"disk slices last {got_io} ns, summary waits {io} ns")
    got_cpu = sum(d for c, n, d, a in slices if c == "sched" and n == "running")
    check(got_cpu == oncpu, f"running slices last {got_cpu} ns, summary on-CPU {oncpu} ns")


def disk_left_out(stderr):
    """Disk requests the timeline says it left out. The summary also counts the machine's
    kernel-thread requests (async_io); a burst of them can outnumber the disk lanes."""
    m = re.search(r"(\d+) disk requests left out", stderr)
    return int(m.group(1)) if m else 0


# Per call, what the workload's clock reads around a copy hold beside the call itself: the
# uprobe's entry and return and the reads, 2-16 us here. More only when the thread is preempted in
# there (1 call in 100 seen, by up to 1.7 ms on a loaded machine): 10% of calls may.
BRACKET_NS = 50_000


def check_against_workload(truth, copies):
    """copies: (name, ts, dur) of the CUDA copy slices. The workload reads its clock right before
    and after each of its copies (the batch's cudaMemcpyAsync, the loss's cudaMemcpy), so each
    slice lies inside its step from the batch copy on, and lasts no longer than the workload's
    phase around it, and nine in ten within BRACKET_NS of it. Slices ending early (the loss copies
    last ms) or of dur 0 fail that."""
    starts = [t["h2d_start_ns"] for t in truth]
    phase = {"cudaMemcpyAsync": "h2d", "cudaMemcpy": "gpu_wait"}
    short = calls = 0
    for name, ts, dur in copies:
        i = bisect.bisect_right(starts, ts) - 1
        check(i >= 0, f"{name} at {ts} before the workload's first step")
        t = truth[i]
        check(ts + dur <= t["end_ns"], f"{name} at {ts}+{dur} ends after its step {t['step']} ({t['end_ns']})")
        ph = t["phases_ns"][phase[name]]
        check(dur <= ph, f"{name} of step {t['step']} lasts {dur} ns, longer than the workload's {ph} around it")
        short += ph - dur > BRACKET_NS
        calls += 1
    check(calls == sum(t["h2d_copies"] + 1 for t in truth), f"{calls} copy slices, the workload made "
          f"{sum(t['h2d_copies'] + 1 for t in truth)} copies")
    check(short * 10 <= calls, f"{short} of {calls} copy slices last over {BRACKET_NS} ns less than the "
          "workload's phase around them")


def trace_demo(out_args, extra=()):
    """Traces the demo; its summary, the disk requests the timeline left out, the workload's own steps."""
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    truth_path = os.path.join(WORK, "trace-truth.jsonl")
    d = Dlbpf(list(out_args) + list(extra) + ["--", TRAIN, "--scenario", "input", "--truth", truth_path], env=env)
    rc = d.wait(timeout=120)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-800:]}")
    with open(truth_path) as f:
        truth = [json.loads(line) for line in f if line.startswith('{"step"')]
    return d.summary(), disk_left_out(d.stderr), truth


def test_pftrace_demo():
    """Demo workload → .pftrace: decodes; tracks named; slices nest; counts equal the summary's."""
    path = os.path.join(WORK, "demo.pftrace")
    summary, left_out, truth = trace_demo(["-o", path])
    t = PfTrace(decode_pftrace(path))
    for uuid, td in t.tracks.items():
        check(one(td, "name"), f"track {uuid} has no name")
        if "thread" in td:
            check(one(td["thread"][0], "thread_name"), f"thread track {uuid} has no thread_name")
        if "process" in td:
            check(one(td["process"][0], "process_name"), f"process track {uuid} has no process_name")
    cuda, bio, switches = summary_counts(summary)
    check(cuda > 0 and bio > 0, f"demo made no CUDA calls ({cuda}) or no disk reads ({bio})")
    check(len(t.by_cat("cuda")) == cuda, f"{len(t.by_cat('cuda'))} CUDA slices, summary counts {cuda} calls")
    check(len(t.by_cat("io")) + left_out == bio,
          f"{len(t.by_cat('io'))} disk slices + {left_out} left out, summary counts {bio} requests")
    # The correlator's steps (the summary's "steps", once it writes them) each have a slice.
    steps = summary.get("steps", [])
    check(len(t.by_cat("step")) == len(steps), f"{len(t.by_cat('step'))} step slices, summary has {len(steps)} steps")
    check(steps, "the correlator found no steps in the demo")
    for sl, st in zip(sorted(t.by_cat("step"), key=lambda x: x[3]), sorted(steps, key=lambda x: x["start_ns"])):
        check(sl[3] == st["start_ns"] and sl[4] == st["dur_ns"] and sl[1] == st["verdict"],
              f"step slice {sl[1]} at {sl[3]}+{sl[4]} != step {st['verdict']} at {st['start_ns']}+{st['dur_ns']}")
        check(sum(sl[6].get(c, 0) for c in st["breakdown_ns"]) == st["dur_ns"], f"step breakdown args: {sl[6]}")
    # Flows: each starts at a step slice and passes through its H2D copy and/or ends at its sync.
    check(t.flows and all(n >= 2 for n in t.flows.values()), f"flows: {dict(list(t.flows.items())[:5])}")
    running = sum(1 for s in t.by_cat("sched") if s[1] == "running")
    check(running == switches, f"{running} running slices, summary counts {switches} switches")
    # Thread states, disk lanes and steps never overlap on their track: all at depth 0.
    for cat in ("sched", "io", "step"):
        deep = [s for s in t.by_cat(cat) if s[5] != 0]
        check(not deep, f"{len(deep)} {cat} slices overlap another on their track, e.g. {deep[:1]}")
    # Begin/end pairs rebuilt as trace_processor does: every slice keeps its own duration.
    check_durations(summary, [(s[2], s[1], s[4], s[6]) for s in t.slices])
    check_against_workload(truth, [(s[1], s[3], s[4]) for s in t.by_cat("cuda")
                                   if s[1] in ("cudaMemcpyAsync", "cudaMemcpy")])
    copies = [s for s in t.by_cat("cuda") if s[6].get("direction") == "h2d"]
    check(copies and all("bytes" in s[6] and "host memory" in s[6] for s in copies), "h2d copies lack bytes/host memory")
    launches = [s for s in t.by_cat("cuda") if "grid" in s[6]]
    check(launches and all("kernel" in s[6] for s in launches), "launches lack kernel names")
    check(len(t.counters) >= 2, f"counter tracks with samples: {len(t.counters)}")
    names = {one(t.tracks[u], "name") for u in t.counters}
    check(any("H2D" in n for n in names) and any("disk" in n for n in names), f"counters: {names}")
    size = os.path.getsize(path)
    return (f"{len(t.slices)} slices ({len(steps)} steps, {len(t.flows)} flows), {t.event_count} events, "
            f"{size / t.event_count:.1f} B/event")


def test_pftrace_from_recording():
    """record, then report FILE -o: the timeline of a recording, same counts as its summary."""
    rec = os.path.join(WORK, "trace-demo.dlbpf")
    path = os.path.join(WORK, "replay.pftrace")
    js = os.path.join(WORK, "replay-summary.json")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    p = subprocess.run([os.path.join(ROOT, "dlbpf"), "record", "-q", "-o", rec, "--", TRAIN, "--scenario", "input"],
                       capture_output=True, text=True, timeout=120, env=env)
    check(p.returncode == 0, f"record exited {p.returncode}: {p.stderr[-500:]}")
    rc, _, err = run_dlbpf(["report", rec, "-q", "-o", path, "--json", js])
    check(rc == 0, f"report exited {rc}: {err[-500:]}")
    summary = load_summary(js)
    t = PfTrace(decode_pftrace(path))
    cuda, bio, switches = summary_counts(summary)
    left_out = disk_left_out(err)
    check(len(t.by_cat("cuda")) == cuda, f"{len(t.by_cat('cuda'))} CUDA slices, the summary counts {cuda} calls")
    check(len(t.by_cat("io")) + left_out == bio,
          f"{len(t.by_cat('io'))} disk slices + {left_out} left out, the summary counts {bio} requests")
    check(len(t.by_cat("step")) == len(summary.get("steps", [])), "replayed steps differ")
    check_durations(summary, [(s[2], s[1], s[4], s[6]) for s in t.slices])
    return f"{len(t.slices)} slices from the recording"


def test_json_demo():
    """Demo workload → Chrome JSON: parses; X events nest per thread; counts equal the summary's."""
    path = os.path.join(WORK, "demo.json")
    summary, left_out, truth = trace_demo(["-o", path])
    with open(path) as f:
        doc = json.load(f)
    evs = doc["traceEvents"]
    named = {(e["pid"], e["tid"]) for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    procs = {e["pid"] for e in evs if e["ph"] == "M" and e["name"] == "process_name"}
    xs = [e for e in evs if e["ph"] == "X"]
    for e in xs:
        check((e["pid"], e["tid"]) in named and e["pid"] in procs, f"event on an unnamed track: {e}")
    cuda, bio, switches = summary_counts(summary)
    cats = Counter(e.get("cat") for e in xs)
    check(cats["cuda"] == cuda, f"{cats['cuda']} CUDA events, summary counts {cuda}")
    check(cats["io"] + left_out == bio, f"{cats['io']} disk events + {left_out} left out, summary counts {bio}")
    check(cats["step"] == len(summary.get("steps", [])), f"{cats['step']} step events vs summary steps")
    running = sum(1 for e in xs if e.get("cat") == "sched" and e["name"] == "running")
    check(running == switches, f"{running} running events, summary counts {switches} switches")
    by_track = defaultdict(list)
    for e in xs:
        by_track[(e["pid"], e["tid"])].append(e)
    ns = lambda us: round(us * 1000)   # three decimals of µs: exact ns
    for key, lst in by_track.items():
        lst.sort(key=lambda e: (ns(e["ts"]), -ns(e["dur"])))
        stack = []
        for e in lst:
            ts, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
            while stack and stack[-1] <= ts:
                stack.pop()
            check(not stack or end <= stack[-1], f"event overlaps its parent on {key}: {e}")
            stack.append(end)
    check(any(e["ph"] == "C" for e in evs), "no counter samples")
    check_durations(summary, [(e.get("cat"), e["name"], ns(e["dur"]), e.get("args", {})) for e in xs])
    check_against_workload(truth, [(e["name"], ns(e["ts"]), ns(e["dur"])) for e in xs
                                   if e.get("cat") == "cuda" and e["name"] in ("cudaMemcpyAsync", "cudaMemcpy")])
    return f"{len(xs)} complete events"


def test_format_option_and_default_name():
    """--format json without -o writes trace.json in the working directory."""
    d = os.path.join(WORK, "fmtdir")
    os.makedirs(d, exist_ok=True)
    target = os.path.join(d, "trace.json")
    if os.path.exists(target):
        os.unlink(target)
    p = subprocess.run([os.path.join(ROOT, "dlbpf"), "-q", "--format", "json", "--", SPIN[0], *SPIN[1:]],
                       cwd=d, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"dlbpf exited {p.returncode}: {p.stderr[-500:]}")
    with open(target) as f:
        check(json.load(f)["traceEvents"], "empty trace.json")


def test_bad_output_path():
    """-o into a missing directory: clear error, non-zero exit, before tracing."""
    rc, _, err = run_dlbpf(["-q", "-o", "/nonexistent-dir/t.pftrace", "--", "/bin/true"])
    check(rc != 0, "dlbpf succeeded with an unwritable -o")
    check("cannot write the trace to /nonexistent-dir/t.pftrace" in err, f"unclear error: {err}")


def test_full_disk():
    """-o /dev/full: the write error is reported and the exit status is non-zero."""
    for fmt in ("pftrace", "json"):
        rc, _, err = run_dlbpf(["-q", "--format", fmt, "-o", "/dev/full", "--", *SPIN])
        check(rc != 0, f"{fmt}: dlbpf exited 0 writing to /dev/full")
        check("writing the trace to /dev/full failed" in err, f"{fmt}: unclear error: {err}")


def unknown_fields(text):
    """Fields the proto does not name: protoc --decode prints them by number."""
    return [l.strip() for l in text.splitlines() if re.match(r"\s*\d+(:| \{)", l)]


def gpu_inferred_trace(scenario):
    """A scenario traced → .pftrace, its "GPU (inferred)" tracks checked against its summary: one per
    stream and one of the idle split, under the process; slices never overlap on a track and lie
    inside the steps; per step the stream slices cover exactly the busy upper bound and the idle
    slices hold the summary's split (both drawn from the same spans, to the nanosecond); certain
    slices hold no more than the lower bounds; a flow runs from each call that began a stream's span
    to the slice that begins there; and the proto names every field written. Returns the
    stream tracks' count and the certain busy time."""
    path = os.path.join(WORK, f"gpu-inferred-{scenario}.pftrace")
    js = os.path.join(WORK, f"gpu-inferred-{scenario}.json")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    d = Dlbpf(["-o", path, "--json", js, "--", TRAIN, "--scenario", scenario, "--quiet"], env=env)
    rc = d.wait(timeout=120)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-800:]}")
    summary = load_summary(js)
    with open(path, "rb") as f:
        out = subprocess.run(["protoc", "--decode=dlbpf_test.Trace", "-I", PROTO_DIR, "perfetto_min.proto"],
                             stdin=f, capture_output=True, text=True)
    check(out.returncode == 0, f"protoc --decode failed: {out.stderr[-500:]}")
    unknown = unknown_fields(out.stdout)
    check(not unknown, f"{len(unknown)} fields the proto does not know, e.g. {unknown[:3]}")
    t = PfTrace(parse_text(out.stdout)["packet"])
    gpu = {u: one(td, "name") for u, td in t.tracks.items() if (one(td, "name") or "").startswith("GPU")}
    streams = [u for u, n in gpu.items() if n.startswith("GPU (inferred)")]
    idle = [u for u, n in gpu.items() if n == "GPU idle (inferred)"]
    check(streams and len(idle) == 1, f"GPU tracks: {sorted(gpu.values())}")
    procs = {u for u, td in t.tracks.items() if "process" in td}
    check(all(one(t.tracks[u], "parent_uuid") in procs for u in gpu), "a GPU track is not under a process")
    slices = [s for s in t.slices if s[0] in gpu]
    check(all(s[2] == "gpu (inferred)" for s in slices), "GPU slices of another category")
    deep = [s for s in slices if s[5] != 0]
    check(not deep, f"{len(deep)} GPU slices overlap another on their track, e.g. {deep[:1]}")
    steps = sorted(summary["steps"], key=lambda x: x["start_ns"])
    check(steps, "no steps")
    index = {x["index"]: x for x in steps}
    by_step = defaultdict(list)
    for s in slices:
        check(s[6]["step"] in index, f"GPU slice of step {s[6]['step']}, not in the summary")
        st = index[s[6]["step"]]
        check(st["start_ns"] <= s[3] and s[3] + s[4] <= st["start_ns"] + st["dur_ns"],
              f"GPU slice {s[1]} at {s[3]}+{s[4]} outside its step {st['index']}")
        by_step[st["index"]].append(s)
    certain = 0
    for st in steps:
        mine = by_step[st["index"]]
        busy = sorted((s[3], s[3] + s[4]) for s in mine if s[0] in streams)
        covered, end = 0, 0
        for a, b in busy:
            covered += max(0, b - max(a, end))
            end = max(end, b)
        check(covered == st["gpu_busy_ns"][1], f"step {st['index']}: stream slices cover {covered} ns, upper bound "
              f"{st['gpu_busy_ns'][1]}")
        split = Counter()
        for s in mine:
            if s[0] in idle:
                split[s[1]] += s[4]
        check(all(split[k] == v for k, v in st["gpu_idle_ns"].items()),
              f"step {st['index']}: idle slices {dict(split)}, summary {st['gpu_idle_ns']}")
        certain += sum(s[4] for s in mine if s[0] in streams and s[6]["certain"] == "true")
        check(all(s[6]["certain"] == ("true" if s[1] == "busy" else "false") for s in mine if s[0] in streams),
              f"step {st['index']}: a stream slice's name and certain disagree")
    # A flow from each enqueue of the main thread in a step (its launch, async copy or memset, on its
    # thread's track) into the slice of its stream that holds it, and from each call that opened a span.
    threads = {u for u, td in t.tracks.items() if "thread" in td}
    spans = {u: [(s[3], s[3] + s[4]) for s in slices if s[0] == u] for u in streams}
    ends = [i for i in t.instants if i[1] == "enqueue" and i[0] in streams]
    begins = {f: i for i in t.instants if i[1] == "enqueue" and i[0] in threads for f in i[3]}
    check(ends and len(ends) == len(begins), f"{len(ends)} enqueue flows end on streams, {len(begins)} begin on threads")
    for track, _, ts, _, term in ends:
        check(len(term) == 1 and term[0] in begins and begins[term[0]][2] == ts,
              f"enqueue flow {term} at {ts} does not begin on a thread at its time")
        check(any(a <= ts < b for a, b in spans[track]), f"enqueue flow at {ts} ends outside every slice of its stream")
    # One per launch of the steps (the workload's only enqueues but its batch copy), each at a launch's start.
    bounds = [(st["start_ns"], st["start_ns"] + st["dur_ns"]) for st in steps]
    launches = [s for s in t.slices if s[1].startswith("cudaLaunchKernel") and s[0] in threads and
                any(a <= s[3] < b for a, b in bounds)]
    at = Counter(i[2] for i in begins.values())
    check(all(at[s[3]] >= 1 for s in launches), f"{sum(at[s[3]] == 0 for s in launches)} of {len(launches)} "
          f"launches in steps have no enqueue flow")
    lower = sum(st["gpu_busy_ns"][0] for st in steps)
    # Certain only where one stream alone may hold work: never more than the lower bound.
    check(certain <= lower, f"certain busy {certain} ns, over the lower bounds' {lower} ns")
    return len(streams), certain, (f"{scenario}: {len(streams)} stream tracks, {len(slices)} GPU slices and "
                                   f"{len(ends)} enqueue flows over {len(steps)} steps, certain "
                                   f"{certain / 1e6:.1f} of the lower bounds' {lower / 1e6:.1f} ms")


def test_pftrace_gpu_inferred():
    """The inferred device tracks (gpu_inferred_trace) of two scenarios: kernels on two streams get a
    track each; kernels on one stream the host waits on are certain busy time (where two streams
    may both hold work, which ran is not known: none of it is certain)."""
    nstreams, _, two = gpu_inferred_trace("two-streams")
    check(nstreams >= 2, f"{two}: one track for two streams")
    _, certain, one_stream = gpu_inferred_trace("gpu")
    check(certain > 0, f"{one_stream}: no certain busy time")
    return f"{two}; {one_stream}"


if __name__ == "__main__":
    main()
