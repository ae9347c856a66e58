# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Table 15 of bench.py: what step markers cost a Python job. A pure-Python loop
(tests/workloads/pysteps.py --step-calls K: K short Python calls a step, so that a tracer's cost
shows in the step's time) untraced, under dlbpf with no marker, with --step-on train_step (a
watchpoint on the function's code object: two debug exceptions a step), and with --step-on small
(the function called K times a step: what each watched call costs, the worst case); and a real
PyTorch job on the CPU (tests/workloads/torchjob.py) untraced, with no marker (autograd's entry,
learned) and with --step-on train_step. Rounds interleaved, the order rotating; each figure is the
job's own mean time from one step's call to the next, as a ratio to untraced in the same round."""
import json
import os
import subprocess

from bench import DLBPF, ROOT, TMP, spread, table

PYTHON = "/usr/bin/python3"
PYSTEPS = os.path.join(ROOT, "tests", "workloads", "pysteps.py")
TORCHJOB = os.path.join(ROOT, "tests", "workloads", "torchjob.py")
TORCH_DATA = "/var/tmp/dlbpf-nocuda-data"


def mean_period(steps, key):
    """The job's mean time from one step's start (its clock key) to the next's."""
    t = [s[key] for s in steps]
    return (t[-1] - t[0]) / (len(t) - 1)


def run(cmd, marker):
    pre = [] if marker is None else [DLBPF, "-q", "--json", os.path.join(TMP, "pysteps.json")] + (
        ["--python-watchpoint", "--step-on", marker] if marker else []) + ["--"]
    p = subprocess.run(pre + cmd, capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise RuntimeError(f"{' '.join(pre + cmd)[:200]} exited {p.returncode}: {p.stderr[-500:]}")
    return p.stdout


def bench_pysteps(rounds, steps=30, calls=200000):
    os.makedirs(TMP, exist_ok=True)
    jobs = [("pysteps.py (%d Python calls a step)" % (calls * 5 // 4),
             [PYTHON, PYSTEPS, "--steps", str(steps), "--step-calls", str(calls), "--setup-ms", "500"],
             [None, "", "train_step"], "call",
             lambda out, _: [json.loads(x)["pysteps"]["steps"] for x in out.splitlines() if x.startswith('{"pysteps"')][0])]
    if os.path.isdir(TORCH_DATA) or subprocess.run([PYTHON, TORCHJOB, "--make-data", TORCH_DATA, "--shards", "2",
                                                    "--shard-mb", "2"], capture_output=True).returncode == 0:
        truth = os.path.join(TMP, "torch-truth.json")

        def torch_steps(_, __):
            with open(truth) as f:
                return json.load(f)["main"]["steps"]
        jobs.append(("torchjob.py (decode, 2 workers)",
                     [PYTHON, TORCHJOB, "--data", TORCH_DATA, "--truth", truth, "--steps", str(steps), "--decode-ms", "1"],
                     [None, "", "train_step"], "next1", torch_steps))
    rows = []
    for name, cmd, variants, key, steps_of in jobs:
        per = {v: [] for v in variants}
        for r in range(rounds):
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            for v in order:
                per[v].append(mean_period(steps_of(run(cmd, v), v), key))
        for v in variants:
            label = "untraced" if v is None else "dlbpf, no --step-on" if v == "" else f"dlbpf --step-on {v}"
            ratio = [x / b for x, b in zip(per[v], per[None])]
            # The marker's own cost: against dlbpf without it, whose other sources (the scheduler, files) cost the same.
            marker = [x / b for x, b in zip(per[v], per[""])] if v else []
            rows.append([name, label, spread([x / 1e6 for x in per[v]], "{:.2f}"), spread(ratio, "{:.3f}"),
                         spread(marker, "{:.3f}") if marker else ""])
    return table("15. Step markers in Python jobs: the job's own mean step, traced against untraced",
                 ["job", "variant", "ms a step", "ratio to untraced (same round)",
                  "ratio to dlbpf with no --step-on (same round)"], rows,
                 ["train_step is called once a step: two watched writes (its frame's reference taken and "
                  "dropped), each a debug exception and the BPF program. dlbpf with no --step-on probes "
                  "autograd's entry in the PyTorch job. A function written over 2000 times a second is "
                  "unwatched (test_pysteps.py test_step_on_hot_function_unwatched)."])
