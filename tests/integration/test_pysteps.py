#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Steps of Python jobs without CUDA, against the jobs' own clocks: --step-on a Python function (a
module function, FILE.py:NAME, a method by its qualified name) under every CPython 3.10-3.13 on the
machine and under Debian's with PyTorch, and no --step-on at all on a PyTorch job (each backward
pass). Run as root."""
import glob
import json
import os
import subprocess

from harness import (DEBIAN_PYTHON as PYTHON, TORCHJOB, WORK, Dlbpf, Skipped, check, load_summary, main, run_dlbpf,
                     torch_ready)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PYSTEPS = os.path.join(ROOT, "tests", "workloads", "pysteps.py")
PYENV = "/root/.pyenv/versions"
TORCH_DATA = "/var/tmp/dlbpf-nocuda-data"


def interpreters():
    """Every CPython 3.10-3.13 here: pyenv's, and the distribution's."""
    found = [p for m in (10, 11, 12, 13) for p in sorted(glob.glob(f"{PYENV}/3.{m}.*/bin/python3"))]
    found += [p for p in ("/usr/bin/python3.11",) if os.path.exists(p)]
    if not found:
        raise Skipped(f"no CPython 3.10-3.13 in {PYENV} or /usr/bin")
    return found


def traced(args, base, timeout=180):
    """dlbpf --json base.json args: (summary, stdout, stderr); skips where no watchpoint can be set."""
    rc, out, err = run_dlbpf(["--json", base + ".json"] + args, timeout=timeout)
    if "cannot watch the Python function" in err and "Operation not supported" in err:
        raise Skipped("this machine has no hardware watchpoints (perf breakpoint events)")
    check(rc == 0, f"dlbpf {' '.join(args[:3])} exited {rc}: {err[-2000:]}")
    return load_summary(base + ".json"), out, err


def marker_of(s, pid):
    got = [m for m in s["step_markers"] if m["pid"] == pid]
    check(got, f"no step marker for pid {pid}: {s['step_markers']}")
    return got[0]


def judge(what, steps, truth, lo_key, hi_key):
    """Each step opens at a call of the marked function, which the job's clocks bound: after its
    lo_key clock and before its hi_key clock (taken in the job's own thread, on each side of the
    call's start). So a step's duration, from one call to the next, lies within the gap between the
    two calls' windows: dur_i in [lo_{i+1} - hi_i, hi_{i+1} - lo_i]: the resolution is the windows'
    width, a few microseconds of the interpreter's own work, not a tolerance picked here. A marker
    fires once a call: the job's N calls close N - 1 steps (the last one's step never closes)."""
    check(len(steps) == len(truth) - 1, f"{what}: {len(steps)} steps, the job made {len(truth)} calls")
    for st in steps:
        i = st["index"]
        t, u = truth[i], truth[i + 1]
        check(t[lo_key] <= st["start_ns"] <= t[hi_key], f"{what}: step {i} opens at {st['start_ns']}, not in "
              f"[{t[lo_key]}, {t[hi_key]}] around the job's call")
        check(u[lo_key] - t[hi_key] <= st["dur_ns"] <= u[hi_key] - t[lo_key],
              f"{what}: step {i} lasts {st['dur_ns']} ns, the job's calls bound it to "
              f"[{u[lo_key] - t[hi_key]}, {u[hi_key] - t[lo_key]}]")
    mean = sum(st["dur_ns"] for st in steps) / len(steps)
    return mean


def test_step_on_python_function_versions():
    """--step-on train_step (a module function), pysteps.py:train_step (its file too) and Trainer.step
    (a method, called from train_step: Python to Python, which 3.11+ run inline, with no machine
    call) under each CPython on the machine: the job's count of calls less one, each step opening
    inside the job's own clocks around the call, each lasting what its calls bound. Thousands of
    other Python calls a step mark nothing. Step and gap lengths vary by interpreter."""
    runs = 0
    for n, py in enumerate(interpreters()):
        steps, step_ms, gap_ms = 8 + n, 10 + 4 * n, 2 + n
        for marker, lo, hi in (("train_step", "call", "enter"), ("pysteps.py:train_step", "call", "enter"),
                               ("Trainer.step", "enter", "method_enter")):
            base = os.path.join(WORK, f"pysteps-{os.getpid()}-{n}-{lo}-{len(marker)}")
            s, out, err = traced(["-q", "--python-watchpoint", "--step-on", marker, "--", py, PYSTEPS, "--steps", str(steps), "--step-ms",
                                  str(step_ms), "--gap-ms", str(gap_ms)], base, timeout=120)
            lines = [json.loads(x)["pysteps"] for x in out.splitlines() if x.startswith('{"pysteps"')]
            check(lines, f"{py}: the job printed no truth: {out[-500:]}")
            truth = lines[0]
            check("warning: --step-on" not in err, f"{py} --step-on {marker}: warned: {err[-800:]}")
            what = f"{py} --step-on {marker}"
            judge(what, [st for st in s["steps"] if st["pid"] == truth["pid"]], truth["steps"], lo, hi)
            m = marker_of(s, truth["pid"])
            check("Python function" in m["marker"] and m["learned_from"] == "option",
                  f"{what}: marker {m['marker']!r} learned from {m['learned_from']}")
            runs += 1
    base = os.path.join(WORK, f"pysteps-{os.getpid()}-none")
    s, out, err = traced(["-q", "--python-watchpoint", "--step-on", "no_such_python_function", "--",
                          interpreters()[-1], PYSTEPS, "--steps", "3", "--setup-ms", "300"], base, timeout=120)
    warned = [x for x in err.splitlines() if "warning: --step-on" in x]
    check(len(warned) == 1 and "no such function" in warned[0], f"a missing function: warnings {warned}")
    check(not s["steps"], f"a missing function made {len(s['steps'])} steps")
    return f"{runs} runs over {len(interpreters())} interpreters; a missing function warned of once"


def test_python_function_needs_the_watchpoint_option():
    """Without --python-watchpoint, --step-on a Python function watches nothing (a watched write can
    end the process on some virtual machines: the user's choice): one warning names the function as
    Python's and the option, no steps are made, no "no such function", and the job runs to its end."""
    py = interpreters()[-1]
    base = os.path.join(WORK, f"pysteps-refused-{os.getpid()}")
    s, out, err = traced(["-q", "--step-on", "train_step", "--", py, PYSTEPS, "--steps", "6", "--setup-ms", "300"],
                         base, timeout=120)
    check([x for x in out.splitlines() if x.startswith('{"pysteps"')], f"the job did not finish: {out[-500:]}")
    warned = [x for x in err.splitlines() if "warning:" in x and "--step-on" in x]
    check(len(warned) == 1 and "is a Python function" in warned[0] and "--python-watchpoint" in warned[0],
          f"warnings {warned}")
    check(not s["steps"], f"{len(s['steps'])} steps marked without the option")
    return warned[0].split("warning: ")[-1][:120]


def test_step_on_python_function_attached():
    """dlbpf --pid attached to a Python loop already running (its code objects long made, its
    function long defined): from the first call it watches, every call of the job's is a step
    boundary, with none missed to the job's end, each inside the job's clocks around its call."""
    py = interpreters()[-1]
    job = subprocess.Popen([py, PYSTEPS, "--steps", "120", "--step-ms", "15", "--gap-ms", "3", "--setup-ms", "300"],
                           stdout=subprocess.PIPE, text=True)
    try:
        d = Dlbpf(["--python-watchpoint", "--step-on", "train_step", "-p", str(job.pid)])
        d.started()
        out, _ = job.communicate(timeout=120)
        rc = d.wait(60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-1500:]}")
    truth = [json.loads(x)["pysteps"] for x in out.splitlines() if x.startswith('{"pysteps"')][0]["steps"]
    steps = d.summary()["steps"]
    check(len(steps) >= 10, f"{len(steps)} steps of the job's {len(truth)} calls after the attach: nothing to judge")
    # dlbpf numbers the steps it saw from 0: the job's call i opens dlbpf's step i - first.
    first = next((i for i, t in enumerate(truth) if t["call"] <= steps[0]["start_ns"] <= t["enter"]), None)
    check(first is not None, f"the first step, at {steps[0]['start_ns']}, opens at none of the job's calls")
    check(first + len(steps) == len(truth) - 1, f"steps from the job's call {first}: {len(steps)}, its calls "
          f"after that close {len(truth) - 1 - first}")
    judge("--pid --step-on train_step", steps, truth[first:], "call", "enter")
    return f"attached at the job's call {first} of {len(truth)}: {len(steps)} steps, none missed"


def test_step_on_hot_function_unwatched():
    """--step-on a function called hundreds of thousands of times a step (pysteps.py's small()): each
    watched call costs the job a debug exception, so dlbpf unwatches it within a rescan and says
    why, and the job runs to its end (its truth printed, exit 0). The truth: the job's own count of
    small() calls a step (--step-calls) against the cap's 2000 writes a second."""
    py = interpreters()[-1]
    base = os.path.join(WORK, f"pysteps-hot-{os.getpid()}")
    s, out, err = traced(["-q", "--python-watchpoint", "--step-on", "small", "--", py, PYSTEPS, "--steps", "10", "--step-calls", "200000",
                          "--setup-ms", "300"], base, timeout=120)
    check([x for x in out.splitlines() if x.startswith('{"pysteps"')], f"the job did not finish: {out[-500:]}")
    warned = [x for x in err.splitlines() if "too often for a training step" in x]
    check(len(warned) == 1, f"no warning that small() was unwatched: {err[-800:]}")
    return warned[0].split("warning: ")[-1][:100]


def torch_job(base, args, steps, marker=None):
    """torchjob.py (decode-shaped) under dlbpf [--step-on marker]: (summary, truth, dlbpf's stdout)."""
    torch_ready(TORCH_DATA, shards=2, shard_mb=2, cpu_only=True)
    opts = ["--python-watchpoint", "--step-on", marker] if marker else []
    s, out, err = traced(opts + ["--", PYTHON, TORCHJOB, "--data", TORCH_DATA, "--truth", base + "-truth.json",
                                 "--steps", str(steps)] + args, base)
    check("warning: --step-on" not in err, f"--step-on {marker}: warned: {err[-800:]}")
    with open(base + "-truth.json") as f:
        truth = json.load(f)
    return s, truth, out


def test_step_on_python_function_torch():
    """A real PyTorch job (Debian's python3.11 and python3-torch, DataLoader workers forked with the
    function in them too): --step-on train_step, torchjob.py:train_step and SGD.step (torch's own
    optimizer method, called inside train_step, behind its decorators) find the job's steps,
    judged against the job's clocks (next() returned, train_step's first line, train_step
    returned); only the main process has steps."""
    steps = 10
    for i, (marker, lo, hi) in enumerate((("train_step", "next1", "enter"), ("torchjob.py:train_step", "next1", "enter"),
                                          ("SGD.step", "enter", "step1"))):
        s, truth, _ = torch_job(os.path.join(WORK, f"pysteps-torch-{os.getpid()}-{i}"), ["--decode-ms", "1"], steps,
                                marker)
        main_pid = truth["main"]["pid"]
        check(not [st for st in s["steps"] if st["pid"] != main_pid], f"--step-on {marker}: a worker has steps")
        judge(f"--step-on {marker}", s["steps"], truth["main"]["steps"], lo, hi)
        check("Python function" in marker_of(s, main_pid)["marker"], f"--step-on {marker}: not said to be Python's")
    return f"3 markers, {steps - 1} steps each"


def test_no_marker_torch_backward():
    """No --step-on on a PyTorch job that calls no CUDA: the steps are its backward passes (each
    inside the job's train_step, between its first line and its return), the JSON says the marker
    was learned from autograd and how sure (every pass on the main thread), and the text report
    says so. Two shapes: 2 workers decoding, and the loader in the main thread (0 workers)."""
    for i, (args, steps) in enumerate(((["--decode-ms", "1"], 12), (["--workers", "0", "--decode-ms", "2"], 9))):
        s, truth, out = torch_job(os.path.join(WORK, f"pysteps-auto-{os.getpid()}-{i}"), args, steps)
        main_pid = truth["main"]["pid"]
        judge(f"no --step-on {args}", [st for st in s["steps"] if st["pid"] == main_pid], truth["main"]["steps"],
              "enter", "step1")
        m = marker_of(s, main_pid)
        check(m["learned_from"] == "autograd" and "backward pass" in m["marker"],
              f"marker {m['marker']!r} learned from {m['learned_from']}")
        c = m["marker_confidence"]
        check(c and c["level"] in ("high", "medium", "low"), f"no marker confidence: {c}")
        # The job runs backward on its main thread only: every pass in the window is the main thread's.
        check(c["marks"] == c["main_thread_marks"] >= 5, f"backward passes {c}")
        check("learned  from PyTorch's backward passes" in out, "the text report does not say how the steps were found")
    return "2 shapes: steps are backward passes, learned from autograd"


if __name__ == "__main__":
    main()
