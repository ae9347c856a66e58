#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The flight recorder (`dlbpf record --ring SEC -o DIR`): the last SEC seconds in memory, written out as a
recording when a step is slow, events are dropped, or on SIGUSR1. Each dump must be a recording `dlbpf
report` reads; the slow step's dump must hold that step, found by the workload's own clock, and its lead-up.
Run as root."""
import glob
import json
import os
import shutil
import signal
import subprocess
import time

from harness import (DLBPF, GPUSIM_DIR, WORK, Dlbpf, check, load_summary, main, run_dlbpf, truth_line,
                     workload)

ENV = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)


def fresh(name):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def dumps(d, reason=""):
    return sorted(glob.glob(os.path.join(d, f"flight-*{reason}.dlbpf")))


def report(path):
    summary = path + ".json"
    p = subprocess.run([DLBPF, "report", path, "-j", summary], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"dlbpf report {os.path.basename(path)}: exit {p.returncode}: {p.stderr[-400:]}")
    return load_summary(summary)


def read_truth(path):
    with open(path) as f:
        return [r for r in map(json.loads, filter(str.strip, f)) if "step" in r]   # the last line: totals


def slow_step_caught(scenario, steps, slow_step, slow_ms, window_s, factor):
    d = fresh(f"flight-{scenario}")
    truth_path = os.path.join(d, "truth.jsonl")
    rc, out, err = run_dlbpf(["record", "-q", "--ring", str(window_s), "--trigger-step", f"{factor}x", "-o",
                              os.path.join(d, "dumps"), "--", workload("train"), "--scenario", scenario,
                              "--steps", str(steps), "--slow-step", str(slow_step), "--slow-ms", str(slow_ms),
                              "--truth", truth_path, "--quiet"], timeout=180, env=ENV)
    check(rc == 0, f"record --ring exited {rc}: {err[-500:]}")
    truth = read_truth(truth_path)
    check(len(truth) == steps, f"the workload wrote {len(truth)} steps of {steps}")
    stall = truth[slow_step]
    found = dumps(os.path.join(d, "dumps"), "slow-step")
    check(found, f"no slow-step dump; stderr: {err[-500:]}")
    check("slow-step" in err and "flight recorder" in out, f"the dump is not said: {err[-300:]!r} {out[-200:]!r}")
    # dlbpf's step runs from one batch copy's entry to the next: the one holding the stall starts before
    # the workload's step begins and ends after it stamped its copy's start (the same CLOCK_MONOTONIC, and
    # cause before effect: no tolerance needed).
    for path in found:
        s = report(path)
        held = [st for st in s["steps"] if st["start_ns"] <= stall["start_ns"]
                and st["start_ns"] + st["dur_ns"] >= stall["h2d_start_ns"]]
        if not held:
            continue
        st = held[0]
        check(st["dur_ns"] >= slow_ms * 1_000_000, f"the step holding the stall lasts {st['dur_ns']} ns")
        # The window holds what came in its last SEC seconds when the dump was written: one drain and one
        # step after the slow step closed. Half the window of lead-up leaves the other half for that delay.
        first = min(x["start_ns"] for x in s["steps"])
        lead = (st["start_ns"] - first) / 1e9
        check(lead >= window_s / 2, f"{lead:.2f} s of steps before the slow one, window {window_s} s")
        return f"{scenario}: step of {st['dur_ns'] / 1e6:.1f} ms caught with {lead:.2f} s of lead-up " \
               f"({len(s['steps'])} steps in {os.path.basename(path)})"
    check(False, f"none of {len(found)} slow-step dumps holds the stall at {stall['start_ns']}")


def test_flight_slow_step():
    """A step slower than K times the median is dumped with its lead-up (two settings of job and trigger)."""
    a = slow_step_caught("gpu", 150, 100, 150, 2, 2)
    b = slow_step_caught("input", 120, 90, 120, 3, 3)
    return f"{a}; {b}"


def test_flight_sigusr1_names_kept():
    """SIGUSR1 dumps the window of a job whose start has left it: the dump still names the process and its
    kernels (the naming records are kept apart from the window), and holds fewer launches than the run."""
    d = fresh("flight-usr1")
    out_dir = os.path.join(d, "dumps")
    w = subprocess.Popen([workload("train"), "--scenario", "launch", "--steps", "1000000", "--quiet"], env=ENV,
                         stdout=subprocess.DEVNULL)
    try:
        b = Dlbpf(["record", "--ring", "1", "--ring-mb", "8", "-o", out_dir, "--pid", str(w.pid)])
        b.started()
        # 8 MiB at the launch scenario's ~20 MB/s of records: the start is out of the window within a second.
        time.sleep(3)
        b.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while not dumps(out_dir, "usr1") and time.monotonic() < deadline:
            check(b.proc.poll() is None, f"dlbpf exited {b.proc.returncode} on SIGUSR1: {b.stderr[-300:]}")
            time.sleep(0.05)
        rc = b.stop()
    finally:
        w.terminate()
        w.wait()
    check(rc == 0, f"dlbpf exited {rc}: {b.stderr[-300:]}")
    found = dumps(out_dir, "usr1")
    check(len(found) == 1, f"{len(found)} usr1 dumps")
    live = {p["pid"]: p for p in b.summary()["processes"]}[w.pid]
    s = report(found[0])
    procs = {p["pid"]: p for p in s["processes"]}
    check(w.pid in procs, f"the job is not in the dump: {sorted(procs)}")
    job = procs[w.pid]
    check(job["comm"] == live["comm"] == "train", f"comm {job['comm']!r} in the dump, {live['comm']!r} live")
    launched = job["cuda"]["calls"].get("cudaLaunchKernel", {}).get("count", 0)
    total = live["cuda"]["calls"]["cudaLaunchKernel"]["count"]
    check(0 < launched < total, f"{launched} launches in the dump of {total}: the window did not move")
    names = {k["name"] for k in job["cuda"]["kernels"]}
    check(names and names <= {k["name"] for k in live["cuda"]["kernels"]} and "?" not in "".join(names),
          f"kernels in the dump {sorted(names)}")
    return f"{launched} of {total} launches in the dump, {len(names)} kernels named, comm {job['comm']}"


def test_flight_drop_burst():
    """Events dropped at a full ring buffer trigger a dump whose end record counts them."""
    d = fresh("flight-drops")
    out_dir = os.path.join(d, "dumps")
    calls = 100_000   # ~128-byte records: a 1 MiB ring buffer holds about 8 k of them
    env = dict(ENV, GPUSIM_LAUNCH_US="0")
    w = subprocess.Popen([workload("ratecalls"), "--wait", "--count", str(calls)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        check(w.stdout.readline().strip() == "ready", "ratecalls did not start")
        b = Dlbpf(["record", "--ring", "5", "--ringbuf-mb", "1", "-o", out_dir, "--pid", str(w.pid)])
        b.started()
        # Stopped, the collector drains nothing: the burst meets a full buffer, whatever the machine's speed.
        b.proc.send_signal(signal.SIGSTOP)
        try:
            w.stdin.write("go\n")
            w.stdin.flush()
            out, _ = w.communicate(timeout=120)
        finally:
            b.proc.send_signal(signal.SIGCONT)
        rc = b.wait()
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    check(rc == 0, f"dlbpf exited {rc}: {b.stderr[-300:]}")
    check(truth_line(out, "{\"api\"")["calls"] == calls, "ratecalls did not make its calls")
    run_drops = b.summary()["drops"]
    lost = run_drops["events"]
    check(lost > 0, "no drops: the premise failed")
    found = dumps(out_dir, "drops")
    check(len(found) == 1, f"{len(found)} drop dumps: {os.listdir(out_dir)}")
    s = report(found[0])
    # Every launch was dropped inside the window (it spans the whole short run, and the burst ended before
    # dlbpf was continued): the dump counts them all. The scheduler's and the exit's records of the process
    # come as its threads leave, which the kernel finishes after the parent may have reaped it (and so
    # after this test continued dlbpf and its dump was cut): the dump counts at most the run's of those.
    check(s["drops"]["cuda"] == run_drops["cuda"] > 0,
          f"the dump counts {s['drops']['cuda']} launches dropped, the run {run_drops['cuda']}")
    late = {k: (s["drops"][k], run_drops[k]) for k in run_drops
            if isinstance(run_drops[k], int) and k != "events" and s["drops"].get(k, 0) > run_drops[k]}
    check(not late and s["drops"]["events"] <= lost,
          f"the dump counts more dropped than the run: {late or (s['drops']['events'], lost)}")
    return (f"{run_drops['cuda']} dropped launches counted in the dump; all records "
            f"{s['drops']['events']} of the run's {lost}")


def test_flight_bad_usage():
    """Options out of place or out of range are usage errors (2); an -o that is a file fails (1) before tracing."""
    cases = [
        (["--ring", "5", "--", "true"], "record's"),
        (["record", "--trigger-step", "2", "-o", "x", "--", "true"], "go with --ring"),
        (["record", "--ring", "0", "-o", "x", "--", "true"], "invalid --ring"),
        (["record", "--ring", "5", "--trigger-step", "1", "-o", "x", "--", "true"], "invalid --trigger-step"),
        (["record", "--ring", "5", "--ring-mb", "2", "-o", "x", "--", "true"], "invalid --ring-mb"),
        (["record", "--ring", "5", "--", "true"], "needs -o DIR"),
        (["report", "x.dlbpf", "--ring", "5"], "record's"),
    ]
    for args, want in cases:
        rc, _, err = run_dlbpf(args)
        check(rc == 2 and want in err, f"{args}: exit {rc}, {err.strip()[-200:]!r}")
    d = fresh("flight-bad")
    not_dir = os.path.join(d, "file")
    with open(not_dir, "w") as f:
        f.write("x")
    rc, _, err = run_dlbpf(["record", "--ring", "5", "-o", not_dir, "--", "true"])
    check(rc == 1 and "is not one" in err, f"-o at a file: exit {rc}, {err.strip()[-200:]!r}")
    return f"{len(cases)} usage errors, a file as the directory refused"


if __name__ == "__main__":
    main()
