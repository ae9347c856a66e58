#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Python lines of waits and of CPU time in a real PyTorch job on the CPU (Debian's python3-torch,
tests/workloads/torchjob.py): where the main thread waited for its batches names the job's own next()
line, and where its CPU samples landed names the step's lines, each against the job's own clocks
(its monotonic clock around next() and the step, its thread CPU clock around each phase of the step,
and /proc/thread-self/schedstat around next()). Run as root."""
import json
import math
import os
import re

from harness import (DEBIAN_PYTHON as PYTHON, WORK, check, load_summary, main, run_dlbpf, torch_ready)

# Its real path: the file name Python gives its code objects is the one it was started with.
TORCHJOB = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "workloads", "torchjob.py"))
TORCH_DATA = "/var/tmp/dlbpf-torchlines-data"
# The function Python's autograd enters once a backward pass: one per training step.
BACKWARD = "_Z22THPEngine_run_backwardP7_objectS0_S0_"
# bpf/pylines.bpf.c writes a wait only when it lasted this long (capture/pylines.h, DL_PY_WAIT_MIN_NS).
WAIT_MIN_NS = 1_000_000


def ready():
    """Skips unless Debian's torch and numpy import; makes the job's data set."""
    torch_ready(TORCH_DATA, shards=2, shard_mb=2)


def torch_job(name, args, steps, env=None):
    """torchjob.py under dlbpf, steps marked on autograd's entry: (summary, truth, text report; stderr
    instead where env is given)."""
    ready()
    base = os.path.join(WORK, f"torchlines-{name}-{os.getpid()}")
    rc, out, err = run_dlbpf(["--json", base + ".json", "--step-on", BACKWARD, "--", PYTHON, TORCHJOB, "--data",
                              TORCH_DATA, "--truth", base + "-truth.json", "--steps", str(steps)] + args,
                             timeout=240, env=env)
    check(rc == 0, f"{name}: dlbpf exited {rc}: {err[-2000:]}")
    with open(base + "-truth.json") as f:
        truth = json.load(f)
    if env is not None:
        return load_summary(base + ".json"), truth, err
    return load_summary(base + ".json"), truth, out


def window(s):
    """The span dlbpf counts lines over: its first step's start to its last step's end."""
    check(s["steps"], "no steps found")
    return min(st["start_ns"] for st in s["steps"]), max(st["start_ns"] + st["dur_ns"] for st in s["steps"])


def own(line):
    """The (file, line, function) of a line's frame in the job's own code."""
    f = line["frames"][line["own_frame"]]
    return f["file"], f["line"], f["func"]


def lines_of(s, kind, truth, what):
    got = s["diagnosis"].get("python_lines", {}).get(kind)
    check(got, f"{what}: no Python lines of {kind} in the diagnosis: {s['diagnosis'].get('python_lines')}")
    check(got["tid"] == truth["main"]["tid"] and got["pid"] == truth["main"]["pid"],
          f"{what}: lines of thread {got['pid']}/{got['tid']}, the job's main thread is "
          f"{truth['main']['pid']}/{truth['main']['tid']}")
    check(got["lines"], f"{what}: {kind} with no named line")
    return got


def check_input_waits(name, args):
    """A decode-bound job's main thread waits in next(): the top line of its waits is the job's own
    next() line (exact: file, line, function), under the DataLoader's frames; the time dlbpf puts at
    that line lies within the job's next() calls, and covers at least the time those calls were
    blocked as the kernel counts it (wall minus on-CPU and runqueue, schedstat), less one threshold's
    worth per switch-in (a block shorter than the threshold is walked but not written). The other
    threads' CPU samples name the workers' decode line first, as their own thread clocks say."""
    s, truth, out = torch_job(name, args, 16)
    t0, t1 = window(s)
    waits = lines_of(s, "waits", truth, name)
    src, next_line = truth["lines"]["file"], truth["lines"]["next"]
    top = waits["lines"][0]
    check(own(top) == (src, next_line, "main"), f"{name}: the top wait is at {own(top)}, the job waits at "
          f"{src}:{next_line} (main)")
    check(top["own_line_share"] >= top["share"], f"{name}: the line's share {top['own_line_share']} is below its "
          f"top stack's {top['share']}")
    check(top["own_frame"] > 0 and any("dataloader.py" in f["file"] for f in top["frames"][:top["own_frame"]]),
          f"{name}: the wait at next() has no DataLoader frame inside it: {top['frames']}")
    at_next = sum(ln["wait_ns"] for ln in waits["lines"] if own(ln) == (src, next_line, "main"))
    elsewhere = sum(ln["wait_ns"] for ln in waits["lines"] if own(ln) != (src, next_line, "main"))
    wall = blocked = 0
    for st in truth["main"]["steps"]:
        a, b = max(st["next0"], t0), min(st["next1"], t1)
        wall += max(0, b - a)
        if t0 <= st["next0"] and st["next1"] <= t1:
            run, runq, switches = st["next_sched"]
            blocked += st["next1"] - st["next0"] - run - runq - switches * WAIT_MIN_NS
    check(at_next <= wall, f"{name}: {at_next / 1e6:.1f} ms of waits at next(), longer than the job's next() "
          f"calls ({wall / 1e6:.1f} ms)")
    check(waits["wait_ns"] - elsewhere >= blocked, f"{name}: at most {(waits['wait_ns'] - elsewhere) / 1e6:.1f} "
          f"ms of waits at next(), the job was blocked in it {blocked / 1e6:.1f} ms")
    check(blocked > 0, f"{name}: the job never blocked in next(): not decode-bound")
    # The workers' CPU, by their own clocks: decoding, when it is most of their main threads' CPU, is the
    # line the other threads' samples name most.
    decode_cpu = sum(x["decode_cpu_ns"] for w in truth["workers"].values() for x in w["samples"])
    worker_cpu = sum(w["samples"][-1]["oncpu_ns"] for w in truth["workers"].values() if w["samples"])
    check(decode_cpu > worker_cpu / 2, f"{name}: the workers decoded {decode_cpu / 1e6:.0f} ms of their "
          f"{worker_cpu / 1e6:.0f} ms on the CPU: not decode-bound")
    others = s["diagnosis"]["python_lines"].get("others_cpu_samples")
    check(others and others["lines"], f"{name}: no line of the other threads' CPU")
    check(own(others["lines"][0]) == (src, truth["lines"]["decode"], "decode"), f"{name}: the loaders' top CPU "
          f"line is {own(others['lines'][0])}, they decode at {src}:{truth['lines']['decode']}")
    if s["diagnosis"]["verdict"] == "input-bound":
        check(f"torchjob.py:{next_line} (main)" in s["diagnosis"]["message"],
              f"{name}: input-bound without its line: {s['diagnosis']['message']}")
    check(f"waited at torchjob.py:{next_line} (main)" in out or s["diagnosis"]["verdict"] != "input-bound",
          f"{name}: the text report does not name the line")
    # Each step's own wait: a step that waited at least half as long as the one that waited longest
    # spent it in next() (the job blocks nowhere else for that long), and its JSON names that line.
    main_steps = [st for st in s["steps"] if st["pid"] == truth["main"]["pid"]]
    longest = max(st["input"]["wait_ns"] for st in main_steps)
    long_waits = [st for st in main_steps if st["input"]["wait_ns"] * 2 >= longest]
    named = [st for st in long_waits if st["input"].get("python_line") and
             (st["input"]["python_line"]["file"], st["input"]["python_line"]["line"],
              st["input"]["python_line"]["function"]) == (src, next_line, "main")]
    check(long_waits and len(named) == len(long_waits), f"{name}: {len(named)} of the {len(long_waits)} steps "
          f"that waited longest name next(): {[st['input'].get('python_line') for st in long_waits][:3]}")
    check(re.search(rf"^    step \d+ waited .*; the step waited at torchjob.py:{next_line} \(main\)$", out, re.M),
          f"{name}: no longest-wait line names next(): {out[-1500:]}")
    return f"{at_next / 1e6:.0f} ms at next() (truth: blocked {blocked / 1e6:.0f} ms, in next() {wall / 1e6:.0f} ms)"


def test_input_waits_name_next_line():
    return check_input_waits("decode2", ["--shape", "decode", "--workers", "2", "--decode-ms", "8"])


def test_input_waits_one_worker():
    return check_input_waits("decode1", ["--shape", "decode", "--workers", "1", "--decode-ms", "5"])


def check_host_compute(name, args):
    """A compute-bound job: the top line of the main thread's CPU samples is the step phase its own
    thread clock says took the most CPU (exact: torchjob.py's line in train_step); every phase line
    dlbpf names is under the job's step line; and the top phase's share of the samples agrees with
    its share of the thread's CPU within four binomial standard deviations of the sample count
    (sqrt(p(1-p)/n)), less what the three listed lines leave out."""
    s, truth, out = torch_job(name, args, 24)
    t0, t1 = window(s)
    cpu = lines_of(s, "cpu_samples", truth, name)
    src, lines = truth["lines"]["file"], truth["lines"]
    phase_cpu = {k: 0 for k in ("zero_grad", "forward", "backward", "optimizer")}
    total_cpu = 0
    for st in truth["main"]["steps"]:
        if t0 <= st["next1"] and st["step1"] <= t1:
            for k, v in st["step_cpu_ns"].items():
                phase_cpu[k] += v
                total_cpu += v
        if t0 <= st["next0"] and st["next1"] <= t1:
            total_cpu += st["next_sched"][0]
    phase = max(phase_cpu, key=phase_cpu.get)
    top = cpu["lines"][0]
    check(own(top) == (src, lines[phase], "train_step"), f"{name}: the top CPU line is {own(top)}, the job's "
          f"clock says {phase} at {src}:{lines[phase]} (train_step): {phase_cpu}")
    step_lines = {lines[k] for k in phase_cpu}
    for ln in cpu["lines"]:
        f = own(ln)
        if f[1] in step_lines:
            callers = [(c["file"], c["line"]) for c in ln["frames"][ln["own_frame"] + 1:]]
            check((src, lines["step"]) in callers, f"{name}: {f} not under the step's line {lines['step']}: "
                  f"{callers}")
    n = cpu["samples"]
    p = phase_cpu[phase] / total_cpu
    tol = 4 * math.sqrt(p * (1 - p) / n)
    listed = sum(ln["samples"] for ln in cpu["lines"] if own(ln) == (src, lines[phase], "train_step")) / n
    unlisted = (n - sum(ln["samples"] for ln in cpu["lines"])) / n
    check(p - tol - unlisted <= listed <= p + tol, f"{name}: {phase} has {listed:.0%} of {n} samples, "
          f"{p:.0%} of the thread's CPU (allowed {tol:.0%}, {unlisted:.0%} unlisted)")
    if s["diagnosis"]["verdict"] == "host-compute-bound":
        check(f"torchjob.py:{lines[phase]} (train_step)" in s["diagnosis"]["message"],
              f"{name}: host-compute-bound without its line: {s['diagnosis']['message']}")
    return f"{phase} at line {lines[phase]}: {listed:.0%} of {n} samples, {p:.0%} of the CPU"


def test_host_compute_names_step_lines():
    return check_host_compute("compute", ["--shape", "compute", "--workers", "1"])


def test_host_compute_wider_model():
    return check_host_compute("compute-wide", ["--shape", "compute", "--workers", "2", "--width", "1536",
                                               "--layers", "3"])


def test_replay_same_lines():
    """A recording of the job replays to the same lines (`dlbpf report`): the waits' and samples' frames
    and the code objects that name them are records like any other."""
    base = os.path.join(WORK, f"torchlines-replay-{os.getpid()}")
    ready()
    rc, out, err = run_dlbpf(["record", "-o", base + ".dlbpf", "--json", base + "-live.json", "--step-on", BACKWARD,
                              "--", PYTHON, TORCHJOB, "--data", TORCH_DATA, "--truth", base + "-truth.json",
                              "--steps", "10", "--shape", "decode", "--workers", "1", "--decode-ms", "4"], timeout=240)
    check(rc == 0, f"record: dlbpf exited {rc}: {err[-1500:]}")
    rc, out, err = run_dlbpf(["report", base + ".dlbpf", "--step-on", BACKWARD, "--json", base + "-replay.json"])
    check(rc == 0, f"report: dlbpf exited {rc}: {err[-1500:]}")
    live = load_summary(base + "-live.json")["diagnosis"].get("python_lines")
    replay = load_summary(base + "-replay.json")["diagnosis"].get("python_lines")
    check(live and live.get("waits"), f"the live run has no wait lines: {live}")
    check(replay == live, f"replayed lines differ: {replay} against {live}")
    return f"{len(live['waits']['lines'])} wait lines, {len(live.get('cpu_samples', {}).get('lines', []))} CPU lines"


def test_no_walk_no_lines():
    """Where the kernel cannot check the frame walk (5.10: neither uprobe_multi nor global functions
    with pointer arguments, forced here), the job is traced as before (its steps found) with no Python
    line claimed, and dlbpf says why."""
    env = dict(os.environ)
    env["DLBPF_FORCE_TWINS"] = "without-uprobe_multi,without-global_ptr_args"
    s, truth, err = torch_job("nowalk", ["--shape", "decode", "--workers", "1", "--decode-ms", "4"], 8, env)
    check(len(s["steps"]) == len(truth["main"]["steps"]) - 1, f"{len(s['steps'])} steps, the job made "
          f"{len(truth['main']['steps'])}")
    check(not s["diagnosis"].get("python_lines"), f"lines claimed without the walk: {s['diagnosis']}")
    check("no lines of its waits or CPU time" in err, f"not said: {err[-1500:]}")
    return "no lines, said so"


if __name__ == "__main__":
    main()
