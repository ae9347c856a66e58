# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Table 13 of bench.py: jobs whose processes come and go (issue 44), untraced and under `dlbpf -q --`,
interleaved round by round: 200 children of three CUDA calls each, 20 at a time
(tests/workloads/forkstorm.c), and multiprocessing.Pool(8, maxtasksperchild=1) over 120 tasks after
loading libcudart (tests/workloads/pypool.py). The job's wall time is its own clock's (from its first
fork to its last child reaped), as are the children's start delays (fork() to the child's first
instruction); the goal is traced within 1.2x untraced + 0.5 s, every child starting within 50 ms."""
import json
import os
import signal
import subprocess

from bench import DLBPF, OUT, RATE, ROOT, Target, readline_until, spread, table

CUDART = "/usr/local/cuda/lib64/libcudart.so.13"
JOBS = {
    "fork storm (200 children, 20 at a time)": [os.path.join(OUT, "workloads", "forkstorm"), "--children", "200",
                                                "--parallel", "20"],
    "Pool(8, maxtasksperchild=1), 120 tasks": ["python3", os.path.join(ROOT, "tests", "workloads", "pypool.py"), CUDART],
}
VARIANTS = {"untraced": [], "dlbpf": [DLBPF, "-q", "--"],
            "dlbpf, probes per process": [DLBPF, "-q", "--"]}


def one_run(variant, argv):
    env = dict(os.environ)
    if variant == "dlbpf, probes per process":
        env["DLBPF_TEST_PROCESS_PROBES"] = "1"
    p = subprocess.run(VARIANTS[variant] + argv, capture_output=True, text=True, timeout=600, env=env)
    for line in p.stdout.splitlines():
        if line.startswith('{"pid"'):
            return json.loads(line)
    raise RuntimeError(f"{variant}: no truth line (exit {p.returncode}): {p.stderr[-300:]}")


def bystander_run(variant, api, count):
    """(ns, CPU ns) per call of an untraced ratecalls while dlbpf traces another process that maps the
    same libcudart (a cuda_calls waiting on stdin), or with no dlbpf at all."""
    other = tracer = None
    t = Target(["--api", api, "--count", str(count)])
    try:
        if variant != "no dlbpf":
            other = subprocess.Popen([os.path.join(OUT, "workloads", "cuda_calls"), "--wait"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
            other.stdout.readline()
            env = dict(os.environ)
            if variant.endswith("per process"):
                env["DLBPF_TEST_PROCESS_PROBES"] = "1"
            tracer = subprocess.Popen([DLBPF, "-v", "-q", "--pid", str(other.pid)], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env)
            readline_until(tracer.stderr, "tracing ", timeout=180)
        res = t.go()
        return res["ns_per_call"], res["cpu_ns_per_call"]
    finally:
        if tracer:
            tracer.send_signal(signal.SIGINT)
            tracer.communicate(timeout=120)
        if other:
            other.kill()
            other.wait()


def bench_bystander(rounds, count=200000):
    variants = ["no dlbpf", "dlbpf tracing another process", "dlbpf tracing another process, probes per process"]
    rows = []
    for api, what in (("launch", "cudaLaunchKernel (entry probe)"), ("copy", "cudaMemcpy (entry + return)")):
        cpu = {v: [] for v in variants}
        for r in range(rounds):
            for v in variants[r % len(variants):] + variants[:r % len(variants)]:
                cpu[v].append(bystander_run(v, api, count)[1])
        for v in variants:
            added = [x - b for x, b in zip(cpu[v], cpu["no dlbpf"])]
            rows.append([what, v, spread(cpu[v]), spread(added)])
    return table("13b. What an untraced process that maps the same libcudart pays per CUDA call",
                 ["call", "variant", "CPU ns per call", "added ns per call"],
                 rows,
                 [f"`ratecalls --count {count}`, never traced, its calling thread's CPU time per call; median "
                  f"[min-max] over {rounds} interleaved rounds. dlbpf traces a `cuda_calls --wait` that maps the "
                  "same libcudart file: with probes that follow the file they fire in the bystander too (a trap "
                  "and a BPF program that finds it untraced); per process they do not."])


def bench_forkstorm(rounds):
    rows = []
    for job, argv in JOBS.items():
        wall = {v: [] for v in VARIANTS}
        delay = {v: [] for v in VARIANTS}
        names = list(VARIANTS)
        for r in range(rounds):
            for v in names[r % len(names):] + names[:r % len(names)]:
                t = one_run(v, argv)
                wall[v].append(t["wall_s"])
                delay[v].append(t["max_start_delay_ms"])
        for v in names:
            ratio = [x / b for x, b in zip(wall[v], wall["untraced"])]
            goal = [x <= 1.2 * b + 0.5 for x, b in zip(wall[v], wall["untraced"])]
            rows.append([job, v, spread(wall[v], "{:.3f}"), spread(ratio, "{:.2f}"),
                         f"{sum(goal)}/{len(goal)}", spread(delay[v], "{:.1f}")])
    return table("13. Processes that come and go: job wall time and children's start delay",
                 ["job", "variant", "wall s", "ratio to untraced", "within 1.2x + 0.5 s", "max start delay ms"],
                 rows,
                 [f"Median [min-max] over {rounds} interleaved rounds; wall time and start delays by the "
                  "workload's own CLOCK_MONOTONIC. dlbpf: its default, probes that follow each library file; "
                  "probes per process: DLBPF_TEST_PROCESS_PROBES=1, the way taken where return probes could harm "
                  "a seccomp-confined process (each child held at its fork until attached, its probes detached "
                  "in batches after it exits)."]) + "\n" + bench_bystander(rounds)
