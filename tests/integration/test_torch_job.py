#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Real PyTorch jobs (Debian's python3-torch on the CPU, tests/workloads/torchjob.py) in each shape,
with 1, 2 and 4 workers, fork, spawn and forkserver, persistent workers, and attached to with --pid:
the steps, the main thread's shares, the verdict and the workers' disk bytes against the job's own
clocks (monotonic clock around next() and the step, /proc/thread-self/schedstat, /proc/self/io).
Run as root."""
import json
import os
import shutil
import subprocess
import time

from harness import (DEBIAN_PYTHON as PYTHON, TORCHJOB, WORK, check, load_summary, main, run_dlbpf, torch_ready)

TORCH_DATA = "/var/tmp/dlbpf-torchjob-data"
# The function Python's autograd enters once a backward pass: one per training step.
BACKWARD = "THPEngine_run_backward"
# What each verdict says limits the main thread, in the truth's terms.
VERDICT_PART = {"input-bound": "blocked", "host-compute-bound": "oncpu", "cpu-contention": "runq"}


def ready():
    torch_ready(TORCH_DATA, shards=4, shard_mb=4)


def job_args(base, args):
    return [PYTHON, TORCHJOB, "--data", TORCH_DATA, "--truth", base + "-truth.json"] + list(args)


def traced(tag, args):
    """torchjob.py with args under dlbpf --step-on autograd's entry: (summary, truth, stdout)."""
    ready()
    base = os.path.join(WORK, f"torchjob-{tag}-{os.getpid()}")
    rc, out, err = run_dlbpf(["-q", "--json", base + ".json", "--step-on", BACKWARD, "--"] + job_args(base, args),
                             timeout=240)
    check(rc == 0, f"{tag}: dlbpf exited {rc}: {err[-2000:]}")
    with open(base + "-truth.json") as f:
        return load_summary(base + ".json"), json.load(f), out


def main_shares(s, truth):
    """The main thread's on-CPU, runqueue and blocked shares (points) by dlbpf over its steps and by
    the job's schedstat over its own window, and how far apart the windows can put them.

    dlbpf's steps run from autograd's entry in the first step to its entry in the last; the job
    reads schedstat after the first next() and after the last step. The two windows differ by
    less than one train_step() at each end, so a share can differ by up to the two longest
    train_step()s over the window, in points (the clocks themselves are nanosecond counts)."""
    steps = [st for st in s["steps"] if st["pid"] == truth["main"]["pid"]]
    total = sum(st["dur_ns"] for st in steps)
    part = lambda k: sum(st["breakdown_ns"][k] for st in steps)
    ours = {"oncpu": part("cpu"), "runq": part("runq")}
    ours["blocked"] = total - ours["oncpu"] - ours["runq"]
    ts = truth["main"]["steps"]
    window = ts[-1]["step1"] - ts[0]["next1"]
    theirs = {"oncpu": truth["main"]["oncpu_ns"], "runq": truth["main"]["runq_ns"]}
    theirs["blocked"] = window - theirs["oncpu"] - theirs["runq"]
    longest = sorted((t["step1"] - t["next1"] for t in ts), reverse=True)[:2]
    edge = 100.0 * sum(longest) / window
    return ({k: 100.0 * v / total for k, v in ours.items()}, {k: 100.0 * v / window for k, v in theirs.items()},
            edge)


def judge(tag, s, truth, out):
    """Steps, shares, verdict and workers' disk bytes of one job; a line for the test's note."""
    ts = truth["main"]["steps"]
    steps = [st for st in s["steps"] if st["pid"] == truth["main"]["pid"]]
    # One marker a step: the last one's step never closes.
    check(len(steps) == len(ts) - 1, f"{tag}: {len(steps)} steps, the job made {len(ts)}")
    # Mean step: dlbpf's run from one backward to the next, the job's cycle from one step's end to the
    # next; over the run they differ by where backward falls in the first and last step, at most
    # the longest train_step(), spread over the steps.
    ours = sum(st["dur_ns"] for st in steps) / len(steps)
    cycle = (ts[-1]["step1"] - ts[0]["step1"]) / (len(ts) - 1)
    bound = max(t["step1"] - t["next1"] for t in ts) / (len(ts) - 1)
    check(abs(ours - cycle) <= bound, f"{tag}: mean step {ours / 1e6:.2f} ms, the job's {cycle / 1e6:.2f} ms "
          f"(bound {bound / 1e6:.2f} ms)")
    ours_sh, truth_sh, edge = main_shares(s, truth)
    gaps = {k: abs(ours_sh[k] - truth_sh[k]) for k in ours_sh}
    detail = " ".join(f"{k} {ours_sh[k]:.1f}/{truth_sh[k]:.1f}" for k in ours_sh)
    check(max(gaps.values()) <= edge + 0.5, f"{tag}: main thread's shares dlbpf/job {detail}; "
          f"the windows allow {edge:.1f} points")
    # The verdict names the largest of the three by the job's clocks, or one within the windows'
    # slack of it. Blocked time in these jobs is next(): waiting for a batch.
    verdict = s["diagnosis"]["verdict"]
    top = max(truth_sh.values())
    allowed = {v for v, k in VERDICT_PART.items() if top - truth_sh[k] <= edge + 0.5}
    check(verdict in allowed, f"{tag}: verdict {verdict}, the job's clocks allow {sorted(allowed)} ({detail})")
    # Each worker's disk bytes against its /proc/self/io after its last sample logged. A worker may
    # read one more sample that it never logs (stopped between its read and its log), so dlbpf's
    # count may exceed that by as much as the most any one sample brought from disk.
    procs = {p["pid"]: p for p in s["processes"]}
    disk = []
    for pid, w in truth["workers"].items():
        if not w["samples"]:
            continue
        check(int(pid) in procs, f"{tag}: worker {pid} is not in the summary")
        io = [x["io"]["read_bytes"] for x in w["samples"]]
        want, one = io[-1], max([b - a for a, b in zip(io, io[1:])] + [io[0]])
        got = procs[int(pid)]["io"]["read_bytes"]
        check(want <= got <= want + one, f"{tag}: worker {pid} read {got} bytes from disk by dlbpf, {want} by "
              f"/proc/PID/io after its last sample (a sample read up to {one})")
        disk.append(got - want)
    return f"{tag}: {len(steps)} steps, {verdict}, shares dlbpf/job {detail}, workers' disk bytes past the last sample {disk}"


def test_shapes():
    """decode (2 workers, fork), compute (1 worker), disk (1 worker, small random reads of cold
    shards), iterable (2 workers, spawn), memmap (2 workers, forkserver, persistent over 3 epochs)."""
    notes = []
    for tag, args in (("decode", ["--shape", "decode", "--workers", "2", "--steps", "24"]),
                      ("compute", ["--shape", "compute", "--workers", "1", "--steps", "16"]),
                      ("disk", ["--shape", "disk", "--workers", "1", "--steps", "20"]),
                      ("iterable", ["--shape", "iterable", "--workers", "2", "--start", "spawn", "--steps", "20"]),
                      ("memmap", ["--shape", "memmap", "--workers", "2", "--start", "forkserver", "--persistent",
                                  "--epoch-steps", "8", "--steps", "24"])):
        s, truth, out = traced(tag, args)
        notes.append(judge(tag, s, truth, out))
    return "; ".join(notes)


def test_settings_varied():
    """The decode shape at other settings: no workers (the main process loads), 4 workers with a
    prefetch of 4 and a longer decode, and new workers every 6 steps (not persistent)."""
    notes = []
    for tag, args in (("0w", ["--workers", "0", "--steps", "12", "--decode-ms", "0.5"]),
                      ("4w", ["--workers", "4", "--prefetch", "4", "--decode-ms", "3", "--steps", "20"]),
                      ("epochs", ["--workers", "2", "--epoch-steps", "6", "--steps", "18"])):
        s, truth, out = traced(tag, args)
        notes.append(judge(tag, s, truth, out))
    return "; ".join(notes)


def test_attach_mid_run():
    """dlbpf --pid of a job that runs already, its workers forked: every worker is traced, the steps
    from the attach on are found, the shares agree with the job's clocks over those steps."""
    ready()
    base = os.path.join(WORK, f"torchjob-attach-{os.getpid()}")
    log, logs = base + ".out", base + "-truth.json.d"
    # The workers' logs from a run before are not this job's (it clears them only once it started).
    shutil.rmtree(logs, ignore_errors=True)
    with open(log, "w") as out:
        job = subprocess.Popen(job_args(base, ["--shape", "decode", "--workers", "2", "--steps", "150"]),
                               stdout=out, stderr=subprocess.STDOUT)
    try:
        # Attach once both workers make samples (the job does not wait for the tracer: it runs on).
        end = time.monotonic() + 120
        while time.monotonic() < end and job.poll() is None and len(os.listdir(logs) if os.path.isdir(logs) else []) < 2:
            time.sleep(0.05)
        check(job.poll() is None, "the job ended before the attach: " + open(log).read()[-1500:])
        rc, out, err = run_dlbpf(["-q", "--json", base + ".json", "--step-on", BACKWARD, "--pid", str(job.pid)],
                                 timeout=240)
        check(rc == 0, f"dlbpf exited {rc}: {err[-2000:]}")
        check(job.wait(timeout=60) == 0, "the job failed: " + open(log).read()[-1500:])
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    s = load_summary(base + ".json")
    with open(base + "-truth.json") as f:
        truth = json.load(f)
    workers = {int(p) for p in truth["workers"]}
    traced_pids = {p["pid"] for p in s["processes"]}
    check(workers <= traced_pids, f"workers {sorted(workers - traced_pids)} are not traced")
    steps = [st for st in s["steps"] if st["pid"] == truth["main"]["pid"]]
    check(len(steps) >= 10, f"{len(steps)} steps after the attach")
    # The job's steps the trace saw: those whose backward (inside train_step) came after the first
    # step dlbpf opened; the truth's window shrinks to them.
    first = steps[0]["start_ns"]
    seen = [t for t in truth["main"]["steps"] if t["step1"] >= first]
    check(abs(len(seen) - 1 - len(steps)) <= 1, f"{len(steps)} steps after the attach, the job made {len(seen)}")
    ours = sum(st["dur_ns"] for st in steps) / len(steps)
    cycle = (seen[-1]["step1"] - seen[0]["step1"]) / (len(seen) - 1)
    bound = max(t["step1"] - t["next1"] for t in seen) / (len(seen) - 1)
    check(abs(ours - cycle) <= bound, f"mean step {ours / 1e6:.2f} ms, the job's {cycle / 1e6:.2f} ms")
    check(s["diagnosis"]["verdict"] in VERDICT_PART, f"verdict {s['diagnosis']['verdict']}")
    return f"{len(steps)} steps of {len(seen)} after the attach, mean {ours / 1e6:.2f}/{cycle / 1e6:.2f} ms, " \
           f"{len(workers)} workers traced, {s['diagnosis']['verdict']}"


if __name__ == "__main__":
    main()
