#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Jobs without CUDA: a real PyTorch job on the CPU (Debian's python3-torch,
tests/workloads/torchjob.py) gets no GPU or PCIe line in its text report, JSON summary, HTML page or
timeline. Run as root."""
import json
import os
import re
import subprocess

from harness import (DEBIAN_PYTHON as PYTHON, TORCHJOB, GPUSIM_DIR, WORK, check, load_summary, main, run_dlbpf,
                     workload, torch_ready)

TORCH_DATA = "/var/tmp/dlbpf-nocuda-data"
# The function Python's autograd enters once a backward pass: one per training step.
BACKWARD = "_Z22THPEngine_run_backwardP7_objectS0_S0_"


def torch_cpu_only():
    """Skips unless Debian's torch imports and is a build without CUDA (the truth: no runtime to load)."""
    torch_ready(cpu_only=True)


def test_torch_job_has_no_gpu():
    """A DataLoader job on the CPU, steps marked on autograd's entry: steps and a verdict, and not one
    GPU or PCIe figure in any output (the text report, the JSON summary, the HTML paper sketch, the
    timeline's tracks); its processes all say cuda false."""
    torch_cpu_only()
    if not os.path.isdir(TORCH_DATA):
        subprocess.run([PYTHON, TORCHJOB, "--make-data", TORCH_DATA, "--shards", "2", "--shard-mb", "2"],
                       check=True, capture_output=True)
    base = os.path.join(WORK, f"nocuda-{os.getpid()}")
    steps = 12
    rc, out, err = run_dlbpf(["--json", base + ".json", "-o", base + "-t.json", "--html", base + ".html",
                              "--step-on", BACKWARD, "--", PYTHON, TORCHJOB, "--data", TORCH_DATA,
                              "--truth", base + "-truth.json", "--steps", str(steps), "--decode-ms", "1"],
                             timeout=180)
    check(rc == 0, f"dlbpf exited {rc}: {err[-2000:]}")
    s = load_summary(base + ".json")
    with open(base + "-truth.json") as f:
        truth = json.load(f)
    # The marker fires once a step: the job's own count of steps, less the edges a step needs two
    # markers for (the first marker opens the first step, the last one's step never closes).
    check(len(s["steps"]) >= steps - 2, f"{len(s['steps'])} steps of the job's {steps}: nothing to judge")
    check(s["diagnosis"].get("verdict"), "no verdict")
    check(not [p["pid"] for p in s["processes"] if p["cuda"]["found"]], "a process says it loaded CUDA")
    check(truth["main"]["pid"] in [p["pid"] for p in s["processes"]], "the job's main process is not in the summary")
    gpu = re.compile(r"\bGPU\b|PCIe|\bh2d\b|\bd2h\b|gpu_wait|launch ", re.I)
    report = [line for line in out.splitlines() if gpu.search(line)]
    check(not report, f"the text report names a GPU: {report[:3]}")
    keys = sorted({k for st in s["steps"] for k in st if k.startswith("gpu_") or k == "devices"})
    check(not keys, f"the JSON steps carry GPU figures: {keys}")
    for f in s["diagnosis"]["findings"]:
        check(not gpu.search(f["message"]), f"finding {f['rule']} names a GPU: {f['message']}")
    with open(base + ".html") as f:
        html = f.read()
    sketch = re.search(r'<section id="sketch">.*?</section>', html, re.S)
    check(sketch, "the HTML page has no paper sketch")
    check("PCIe" not in sketch.group(0) and "disk reads" in sketch.group(0) and "CPU" in sketch.group(0),
          "the paper sketch is not of disk and CPU only")
    with open(base + "-t.json") as f:
        tl = json.load(f)
    events = tl["traceEvents"] if isinstance(tl, dict) else tl
    tracks = {e["args"]["name"] for e in events if e.get("ph") == "M" and "name" in e.get("args", {})}
    check(any(t == "steps" for t in tracks), f"the timeline has no steps track: {sorted(tracks)[:10]}")
    check(not [t for t in tracks if "GPU" in t], f"the timeline has GPU tracks: {[t for t in tracks if 'GPU' in t]}")
    check(not [e for e in events if e.get("cat") == "gpu (inferred)"], "the timeline has GPU slices")
    return f"{len(s['steps'])} steps, verdict {s['diagnosis']['verdict']}, {len(tracks)} tracks, no GPU"


def test_runtime_loaded_only_for_cuda():
    """-v says "CUDA runtime loaded, now traced" for the processes that exec'd into a program with a
    CUDA runtime (cuda_calls on the simulator), and for none of those that only have the C library
    (whose dlopen dlbpf probes too): a shell and two /bin/true. The truth: which processes the JSON
    summary says attached a runtime, and which pid cuda_calls is (the only one that maps one)."""
    base = os.path.join(WORK, f"nocuda-v-{os.getpid()}")
    script = f"/bin/true; /bin/true; LD_LIBRARY_PATH={GPUSIM_DIR} exec {workload('cuda_calls')}"
    rc, out, err = run_dlbpf(["-v", "--json", base + ".json", "--", "/bin/sh", "-c", script], timeout=120)
    check(rc == 0, f"dlbpf exited {rc}: {err[-2000:]}")
    s = load_summary(base + ".json")
    said = sorted(int(m) for m in re.findall(r"pid (\d+): CUDA runtime loaded, now traced", err))
    cuda = sorted(p["pid"] for p in s["processes"] if p["cuda"]["found"])
    check(len(s["processes"]) >= 3, f"{len(s['processes'])} processes traced: the shell and its two true missing")
    check(len(cuda) == 1, f"{len(cuda)} processes with a runtime: {cuda}")
    check(said == cuda, f"-v says a runtime loaded in {said}, the summary in {cuda}")
    return f"said for {said} only, of {len(s['processes'])} processes"


def run_torch(base, marker, steps):
    """torchjob.py decode-shaped under dlbpf --step-on marker: (summary, truth, dlbpf's stderr)."""
    torch_cpu_only()
    if not os.path.isdir(TORCH_DATA):
        subprocess.run([PYTHON, TORCHJOB, "--make-data", TORCH_DATA, "--shards", "2", "--shard-mb", "2"],
                       check=True, capture_output=True)
    rc, out, err = run_dlbpf(["--json", base + ".json", "--step-on", marker, "--", PYTHON, TORCHJOB, "--data",
                              TORCH_DATA, "--truth", base + "-truth.json", "--steps", str(steps), "--decode-ms", "1"],
                             timeout=180)
    check(rc == 0, f"--step-on {marker}: dlbpf exited {rc}: {err[-2000:]}")
    with open(base + "-truth.json") as f:
        return load_summary(base + ".json"), json.load(f), err


def test_step_on_demangled_names():
    """--step-on takes a C++ function as the demangler writes it, with or without its parameters and
    qualified by its namespaces, as well as mangled: each finds the job's steps, each step opening
    inside the job's own train_step() (its clocks around it), one step less than the job's (the
    last marker's step never closes). The marker lives in libtorch, which Python loads after dlbpf
    started it: no warning that it is missing, since it is not by the end. A name no process has is
    warned of, once, at the end."""
    steps = 8
    names = [BACKWARD, "THPEngine_run_backward", "THPEngine_run_backward(_object*, _object*, _object*)",
             "torch::autograd::Engine::execute"]
    for i, marker in enumerate(names):
        s, truth, err = run_torch(os.path.join(WORK, f"stepon-{os.getpid()}-{i}"), marker, steps)
        check("warning: --step-on" not in err, f"--step-on {marker}: warned of a function it found: {err[-800:]}")
        got = s["steps"]
        check(len(got) == len(truth["main"]["steps"]) - 1, f"--step-on {marker}: {len(got)} steps, the job "
              f"made {len(truth['main']['steps'])}")
        for st in got:
            check(any(t["next1"] <= st["start_ns"] <= t["step1"] for t in truth["main"]["steps"]),
                  f"--step-on {marker}: step {st['index']} opens at {st['start_ns']}, in no train_step() of the job's")
    s, truth, err = run_torch(os.path.join(WORK, f"stepon-{os.getpid()}-none"), "no_such_function_anywhere", 3)
    warned = [line for line in err.splitlines() if "warning: --step-on" in line]
    check(len(warned) == 1 and "no such function" in warned[0], f"a missing marker: warnings {warned}")
    check(not s["steps"], f"a missing marker made {len(s['steps'])} steps")
    return f"{len(names)} names, {steps - 1} steps each; a missing one warned of once"


if __name__ == "__main__":
    main()
