#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Processes that come and go at no cost to the job (issue 44): a fork storm of short CUDA-using
children and a multiprocessing.Pool(maxtasksperchild=1), each traced with exact counts (every
child seen, every child's CUDA calls counted, against the workloads' own accounts), and no child
kept from running after its fork() by dlbpf. How long the jobs take against untraced runs is a
benchmark's (tools/bench/bench_forkstorm.py), not a timed assertion here. Run as root."""
import os
import re

from harness import Dlbpf, Failure, Skipped, check, main, process, run_dlbpf, truth_line, workload

CUDART = "/usr/local/cuda/lib64/libcudart.so.13"
PYPOOL = os.path.join(os.path.dirname(__file__), "..", "workloads", "pypool.py")
# The calls each child makes (tests/workloads/forkstorm.c, pypool.py), each exactly once.
CHILD_CALLS = {"cudaMalloc": 1, "cudaMemset": 1, "cudaFree": 1}
# No child may wait more than this between its parent's fork() and its own first instruction, by
# the workload's own CLOCK_MONOTONIC (read in the parent just before fork(), again first thing in
# the child). The bound is issue 44's: tens of milliseconds at most for any hold of a new process.
# What it leaves to the machine: untraced, the same storms on this 2-CPU machine give children
# that waited up to 5 ms (20 runnable children and their parent on 2 CPUs, each child's run a few
# hundred us); a child dlbpf held for its attach waited for the collector's wake-up and scan, 0.1
# to 5.6 s before the fix. The clock's resolution (ns) is far below the bound. Only the C storm is
# held to it: a Python worker's reading comes after the interpreter's own after-fork work, on a
# loaded 2-CPU machine, and untraced runs of pypool.py gave 13-90 ms while another suite ran (the
# bound would judge the machine, not dlbpf); its delay against an untraced run is the benchmark's.
MAX_START_DELAY_MS = 50.0
# Under emulation (tools/vm, TCG) a runnable vCPU waits up to 100 ms for its turn and 20 children
# share 2 emulated CPUs: untraced, a child of the same storm waited 100-400 ms there. The bound is
# this machine's; in a guest the delay is reported beside an untraced run's (tests/vm/forkstorm.sh).
EMULATED = bool(os.environ.get("DLBPF_TEST_EMULATED"))


def check_children(summary, truth, what):
    """Every child the workload made is in the summary with exactly its calls; returns how many."""
    pids = truth["pids"]
    check(len(pids) == len(set(pids)), f"{what}: the workload reports a pid twice")
    check(sum(truth["calls_per_child"] for _ in pids) == truth["calls"],
          f"{what}: the workload made {truth['calls']} calls, not {truth['calls_per_child']} per child")
    by_pid = {p["pid"]: p for p in summary["processes"]}
    missing = [pid for pid in pids if pid not in by_pid]
    check(not missing, f"{what}: {len(missing)} of {len(pids)} children not in the summary, e.g. {missing[:5]}")
    wrong = []
    for pid in pids:
        cuda = by_pid[pid]["cuda"]
        got = {api: c["count"] for api, c in cuda["calls"].items() if c["count"]}
        if got != CHILD_CALLS or not cuda["found"]:
            wrong.append((pid, got, cuda["found"]))
    check(not wrong, f"{what}: {len(wrong)} children with other calls than {CHILD_CALLS}, e.g. {wrong[:3]}")
    return len(pids)


def check_start_delay(truth, what):
    if EMULATED:
        return
    check(truth["max_start_delay_ms"] <= MAX_START_DELAY_MS,
          f"{what}: a child waited {truth['max_start_delay_ms']:.1f} ms after fork() before it ran "
          f"(mean {truth['mean_start_delay_ms']:.2f} ms; allowed {MAX_START_DELAY_MS:.0f} ms)")


def run(argv, what, env=None):
    d = Dlbpf(["--"] + argv, env=env)
    rc = d.wait(timeout=120)
    check(rc == 0, f"{what}: dlbpf exited {rc}: {d.stderr[-800:]}")
    truth = truth_line(d.stdout, "{\"pid\"")
    summary = d.summary()
    process(summary, truth["pid"])
    return d, truth, summary


def test_fork_storm():
    """200 children, 20 at a time, each making three CUDA calls: each one seen with its three calls,
    none kept from running past the bound."""
    d, truth, summary = run([workload("forkstorm"), "--children", "200", "--parallel", "20"], "fork storm")
    n = check_children(summary, truth, "fork storm")
    check(n == 200, f"fork storm: the workload made {n} children, not 200")
    check_start_delay(truth, "fork storm")
    return f"{n} children, {truth['calls']} calls; start delay max {truth['max_start_delay_ms']:.1f} ms"


def test_pool_maxtasksperchild():
    """multiprocessing.Pool(8, maxtasksperchild=1) over 120 tasks after loading libcudart: each worker
    (one per task) seen with its three calls. Its start delay is reported, not judged (see
    MAX_START_DELAY_MS)."""
    if not os.path.exists(CUDART):
        raise Failure(f"{CUDART} missing (the toolkit's runtime)")
    d, truth, summary = run(["python3", PYPOOL, CUDART, "--tasks", "120", "--workers", "8"], "Pool")
    n = check_children(summary, truth, "Pool")
    check(n == 120, f"Pool: {n} workers ran a task, not 120")
    return f"{n} workers, {truth['calls']} calls; start delay max {truth['max_start_delay_ms']:.1f} ms"


def test_fork_storm_per_process_probes():
    """Where the probes must go per process (a kernel whose return probes could kill a seccomp-confined
    process, here the test hook), every child is held at its fork until attached to and its probes go
    when it exits: still every child with its three calls. The hold then waits for the collector, so
    the start bound is not this path's (doc/manual.md)."""
    rc, out, err = run_dlbpf(["features"])
    check(rc == 0, f"dlbpf features exited {rc}: {err[-300:]}")
    if not re.search(r"^\s*signal_task\s+yes", out, re.M):
        # Documented: a child is attached to at the next scan, and a child as short as these is gone by then.
        raise Skipped("this kernel has no bpf_send_signal_task (6.13+): per process, no child is held at its fork")
    env = dict(os.environ, DLBPF_TEST_PROCESS_PROBES="1")
    d, truth, summary = run([workload("forkstorm"), "--children", "60", "--parallel", "20"], "per process", env)
    check(any("uprobe_multi links per process" in line or "classic uprobes per process" in line
              for line in d.stderr.splitlines()), "per process: dlbpf did not say its probes are per process")
    n = check_children(summary, truth, "per process")
    return f"{n} children held and attached one by one; start delay max {truth['max_start_delay_ms']:.1f} ms"


if __name__ == "__main__":
    main()
