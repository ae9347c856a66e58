# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Table 11 of bench.py: what Python frames add to a call's record. A CPython loop calls
cudaMemcpy through ctypes (the toolkit's runtime: no GPU, so each call returns at once), four
Python frames deep; the same calls from C (ratecalls) make the frame-less record. Per round, each
under dlbpf --pid: the return program's run time per call (kernel.bpf_stats_enabled, where the walk
runs) and the loop's own ns per call, untraced and traced."""
import json
import os
import shutil
import subprocess

from bench import (CLASSES, DLBPF, TMP, Target, Tracer, loaded_progs, readline_until, spread, table)

CUDART = "/usr/local/cuda/lib64/libcudart.so.13"
PYTHONS = ("/usr/bin/python3.11", "/usr/bin/python3")
CALLS = 200000

# Four frames deep, the call in the innermost; the loop's own clock per call.
LOOP = r"""
import ctypes, json, sys, time
rt = ctypes.CDLL(sys.argv[1])
rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
src, dst = ctypes.create_string_buffer(4096), ctypes.create_string_buffer(4096)
def copy(n):
    for _ in range(n):
        rt.cudaMemcpy(dst, src, 4096, 1)
def batch(n): copy(n)
def step(n): batch(n)
print("ready", flush=True)
sys.stdin.readline()
t0 = time.perf_counter_ns()
step(int(sys.argv[2]))
print(json.dumps({"ns_per_call": (time.perf_counter_ns() - t0) / int(sys.argv[2])}), flush=True)
"""


class PyTarget:
    """The CPython loop, waiting on stdin like ratecalls."""

    def __init__(self, python, n):
        self.p = subprocess.Popen([python, "-c", LOOP, CUDART, str(n)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        if self.p.stdout.readline().strip() != "ready":
            raise RuntimeError("the Python loop did not start")
        self.pid = self.p.pid

    def go(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        out, _ = self.p.communicate(timeout=300)
        return json.loads(out.strip().splitlines()[-1])


def one_run(make_target, traced, binary=DLBPF):
    """(the loop's ns per call, the return program's ns per run, or None untraced)."""
    t = make_target()
    if not traced:
        return t.go()["ns_per_call"], None
    old = {p["id"] for p in loaded_progs()}
    tr = Tracer("dlbpf", t, binary=binary)
    ret = [p for p in loaded_progs() if p["id"] not in old and p.get("name") == "cuda_return"]

    def stats():
        return {p["id"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0)) for p in loaded_progs()
                if p["id"] in {r["id"] for r in ret}}

    before = stats()
    ns_call = t.go()["ns_per_call"]
    after = stats()
    tr.finish()
    runs = sum(after[i][1] - before.get(i, (0, 0))[1] for i in after)
    ns = sum(after[i][0] - before.get(i, (0, 0))[0] for i in after)
    notice = "".join(tr.stderr)
    return ns_call, (ns / runs if runs >= CALLS and len(ret) == 1 else None), notice


def bench_pyframes(rounds, baseline=None):
    python = next((p for p in PYTHONS if shutil.which(p) or os.path.exists(p)), None)
    if not python or not os.path.exists(CUDART):
        return table("11. Python frames", ["note"], [["no CPython or no CUDA toolkit runtime: skipped"]])
    copy = next(c for c in CLASSES if c[1] == "copy")
    c_target = lambda: Target(["--api", copy[1], "--count", str(CALLS)])
    py_target = lambda: PyTarget(python, CALLS)
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_were = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    got = {k: [] for k in ("py untraced", "py traced", "py prog", "c prog", "base prog", "base traced")}
    framed = True
    try:
        for r in range(rounds):
            order = ["py", "c"] if r % 2 == 0 else ["c", "py"]
            for who in order:
                if who == "py":
                    got["py untraced"].append(one_run(py_target, False)[0])
                    ns_call, prog, notice = one_run(py_target, True)
                    framed &= "call sites name Python lines" in notice
                    got["py traced"].append(ns_call)
                    if prog:
                        got["py prog"].append(prog)
                    if baseline:
                        ns_call, prog, notice = one_run(py_target, True, baseline)
                        framed &= "call sites name Python lines" in notice
                        got["base traced"].append(ns_call)
                        if prog:
                            got["base prog"].append(prog)
                else:
                    _, prog, _ = one_run(c_target, True)
                    if prog:
                        got["c prog"].append(prog)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_were)
    added = [p - c for p, c in zip(got["py prog"], got["c prog"])]
    rows = [
        ["return program, ns per call: C caller (frame-less record)", spread(got["c prog"]), ""],
        ["return program, ns per call: Python caller (frames walked)", spread(got["py prog"]),
         spread([p / c for p, c in zip(got["py prog"], got["c prog"])], "{:.2f}")],
        ["added by the frame walk, ns per call", spread(added), ""],
        ["the Python loop's ns per call, untraced", spread(got["py untraced"]), ""],
        ["the Python loop's ns per call, under dlbpf", spread(got["py traced"]),
         spread([t / u for t, u in zip(got["py traced"], got["py untraced"])], "{:.2f}")],
    ]
    if baseline:
        rows += [
            ["return program, ns per call: Python caller, baseline build", spread(got["base prog"]),
             spread([p / b for p, b in zip(got["py prog"], got["base prog"])], "{:.2f}") + " (this / baseline)"],
            ["the Python loop's ns per call, under the baseline build", spread(got["base traced"]),
             spread([t / b for t, b in zip(got["py traced"], got["base traced"])], "{:.2f}") + " (this / baseline)"],
        ]
    return table("11. Python frames: what the walk adds to a copy's record",
                 ["figure", "median [min-max]", "ratio"], rows,
                 [f"{CALLS} cudaMemcpy calls a run (the toolkit's runtime, no GPU: each returns at once), from "
                  f"{python} four Python frames deep through ctypes, and from C (ratecalls); {rounds} rounds, "
                  "the order alternated. Program time from kernel.bpf_stats_enabled (the trap and the ring "
                  "buffer's reader are not in it: the loop's own clock has them). "
                  + ("" if framed else "dlbpf did not say it names Python lines in some run: the Python row "
                     "may be frame-less.")])
