# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Table 14 of bench.py: what the Python lines of waits and of CPU time cost (bpf/pylines.bpf.c). A real
PyTorch job on the CPU (tests/workloads/torchjob.py: Debian's python3-torch), decode-bound (the main
thread blocks in next() every step, two worker processes decode) and compute-bound (the main thread
computes, CPU-sampled), untraced, under `dlbpf -q --`, and under it without the Python lines
(DLBPF_TEST_NO_PY_LINES=1), interleaved round by round. The figure is the job's own: its mean step
(next() and train_step(), its monotonic clock) over every step after the first two, as a ratio to the
same round's untraced run. A last run of each job under dlbpf, kernel.bpf_stats_enabled on, gives the
two programs' ns per run (sched_switch runs of every task, and the samples)."""
import json
import os
import subprocess
import threading
import time

from bench import DLBPF, ROOT, loaded_progs, spread, table

PYTHON = "/usr/bin/python3"
TORCHJOB = os.path.join(ROOT, "tests", "workloads", "torchjob.py")
DATA = "/var/tmp/dlbpf-bench-torch-data"
JOBS = {
    "decode-bound (2 workers, 4 ms a sample)": ["--shape", "decode", "--workers", "2", "--decode-ms", "4",
                                                "--steps", "40"],
    "compute-bound (1 worker, width 1024)": ["--shape", "compute", "--workers", "1", "--steps", "30"],
}
VARIANTS = ("untraced", "dlbpf", "dlbpf without Python lines")
PROGS = ("py_wait_switch", "py_cpu_sample")


def mean_step_ns(truth_path):
    with open(truth_path) as f:
        steps = json.load(f)["main"]["steps"][2:]
    return (steps[-1]["step1"] - steps[0]["next0"]) / len(steps)


def one_run(variant, args, stats=None):
    truth = f"/tmp/dlbpf-bench-pylines-{os.getpid()}.json"
    argv = [PYTHON, TORCHJOB, "--data", DATA, "--truth", truth] + args
    env = dict(os.environ)
    if variant == "dlbpf without Python lines":
        env["DLBPF_TEST_NO_PY_LINES"] = "1"
    if variant != "untraced":
        argv = [DLBPF, "-q", "--"] + argv
    done = threading.Event()
    seen = {}

    def poll():
        # Its programs' counters, read while they are loaded (they go with dlbpf); a new id is dlbpf's.
        old = {p["id"] for p in loaded_progs()}
        while not done.wait(0.3):
            for p in loaded_progs():
                if p["id"] not in old and p.get("name") in PROGS:
                    seen[p["id"]] = (p["name"], p.get("run_time_ns", 0), p.get("run_cnt", 0))
    poller = threading.Thread(target=poll) if stats is not None else None
    if poller:
        poller.start()
        time.sleep(0.5)
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    finally:
        done.set()
        if poller:
            poller.join()
    if stats is not None:
        stats["wall_s"] = time.monotonic() - t0
    if p.returncode:
        raise RuntimeError(f"{variant}: exit {p.returncode}: {p.stderr[-400:]}")
    for name, ns, cnt in seen.values():   # per program id: the last reading before it was unloaded
        stats.setdefault(name, [0, 0])
        stats[name][0] += ns
        stats[name][1] += cnt
    return mean_step_ns(truth)


def bench_pylines(rounds):
    if not os.path.isdir(DATA):
        subprocess.run([PYTHON, TORCHJOB, "--make-data", DATA, "--shards", "2", "--shard-mb", "4"], check=True,
                       capture_output=True)
    rows = []
    for job, args in JOBS.items():
        ms = {v: [] for v in VARIANTS}
        for r in range(rounds):
            for v in VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]:
                ms[v].append(one_run(v, args) / 1e6)
        with open("/proc/sys/kernel/bpf_stats_enabled") as f:
            stats_were = f.read().strip()
        stats = {}
        try:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write("1")
            one_run("dlbpf", args, stats)
        finally:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(stats_were)
        cost = "; ".join(f"{n}: {stats[n][0] / stats[n][1]:.0f} ns x {stats[n][1]} runs" if stats.get(n, [0, 0])[1]
                         else f"{n}: no runs" for n in PROGS)
        spent = sum(stats.get(n, [0, 0])[0] for n in PROGS)
        cost += f"; together {spent / 1e6:.1f} ms of CPU in the job's {stats['wall_s']:.1f} s " \
                f"({100 * spent / 1e9 / stats['wall_s']:.2f}% of one CPU)"
        for v in VARIANTS:
            ratio = [x / b for x, b in zip(ms[v], ms["untraced"])]
            rows.append([job, v, spread(ms[v], "{:.2f}"), spread(ratio, "{:.3f}") if v != "untraced" else "",
                         cost if v == "dlbpf" else ""])
    return table("Table 14: Python lines of waits and CPU time (a real PyTorch job on the CPU)",
                 ["job", "variant", "mean step ms", "ratio to untraced", "programs (one run, bpf_stats on)"], rows,
                 [f"{rounds} interleaved rounds; the job's own mean step over every step after the first two; "
                  "ratio per round against that round's untraced run, median [min-max]. py_wait_switch runs at "
                  "every context switch of the machine (a traced Python thread that blocks walks its frames); "
                  "py_cpu_sample runs at 49 Hz on each CPU. Their run time over the job's wall time bounds what "
                  "they take from it where the ratios' spread (other load on the shared machine) is wider. "
                  "Goal: dlbpf within 1.05x untraced, the lines adding no more than the spread between rounds."])
