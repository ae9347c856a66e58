#!/usr/bin/env python3
"""Judges a folder written by run.sh: dlbpf's JSON against each workload's own
truth (CUDA events for device time, CLOCK_MONOTONIC for host time, the
workload's counts and the worker pid of each batch). Prints one table per run
and exits non-zero when a check fails.

  tools/gpu-check/compare.py OUTDIR

Tolerances: a step's device time must lie within its bounds give or take 1%
of the step or 50 us (the larger): CUDA events resolve about 0.5 us, and the
event pair around each item adds its own record time, about a microsecond,
to the truth's union of intervals.
"""
import json
import os
import sys

failed = []


def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        failed.append(what)


def truth_of(path):
    for line in open(path, errors="replace"):
        line = line.strip()
        if line.startswith("{") and '"steps"' in line:
            return json.loads(line)
    return None


def main_process(summary, pid):
    for p in summary["processes"]:
        if p["pid"] == pid:
            return p
    return None


def match(dsteps, starts):
    """Each dlbpf step with the truth step whose start is nearest, if within 2 ms."""
    pairs = []
    for d in dsteps:
        best = min(range(len(starts)), key=lambda i: abs(starts[i] - d["start_ns"]))
        if abs(starts[best] - d["start_ns"]) < 2_000_000:
            pairs.append((d, best))
    return pairs


def judge_gpu_train(name, summary, truth, expect_verdict):
    steps = truth["steps"]
    proc = main_process(summary, truth["pid"])
    check(proc is not None, f"{name}: the workload's pid {truth['pid']} is in the JSON")
    if proc is None:
        return
    kernels = {}
    for k in proc["cuda"]["kernels"]:
        base = k["name"].split("(")[0]
        kernels[base] = kernels.get(base, 0) + k["count"]
    for kind, t in truth["kinds"].items():
        if kind == "copy" or t["count"] == 0:
            continue
        want = t["count"] + truth["warmup_launches_each"]
        got = kernels.get(kind, 0)
        check(got == want, f"{name}: {kind} launches {got}, truth {want}")
    for k in proc["cuda"]["kernels"]:
        inf = k.get("inferred_ns")
        base = k["name"].split("(")[0]
        if inf and base in truth["kinds"]:
            t = truth["kinds"][base]["mean_ns"]
            print(f"  info  {name}: {base} inferred {inf['mean'] / 1e3:.1f} +- {inf['stderr'] / 1e3:.1f} us,"
                  f" events say {t / 1e3:.1f} us ({(inf['mean'] - t) / t * 100:+.1f}%)")
    dsteps = [s for s in summary["steps"] if s["pid"] == truth["pid"]]
    pairs = match(dsteps, [s["start_ns"] for s in steps])
    check(len(pairs) >= 0.9 * len(dsteps) and len(dsteps) >= len(steps) - 3,
          f"{name}: {len(dsteps)} steps, {len(pairs)} matched to the workload's {len(steps)}")
    inside, widths, busy, lo_sum, hi_sum, gw, sync = 0, [], 0, 0, 0, 0, 0
    for d, i in pairs:
        lo, hi = d["gpu_busy_ns"]
        t = steps[i]["busy_ns"]
        tol = max(0.01 * d["dur_ns"], 50_000)
        inside += lo - tol <= t <= hi + tol
        widths.append((hi - lo) / d["dur_ns"])
        busy += t
        lo_sum += lo
        hi_sum += hi
        gw += d["breakdown_ns"]["gpu_wait"] + d["breakdown_ns"]["d2h"] + d["breakdown_ns"]["cuda_other"]
        sync += steps[i]["sync_ns"]
    n = max(len(pairs), 1)
    if truth["busy_complete"]:
        check(inside >= 0.95 * n, f"{name}: device time inside the bounds in {inside} of {len(pairs)} steps")
    print(f"  info  {name}: device busy per step {busy / n / 1e6:.3f} ms, bounds {lo_sum / n / 1e6:.3f}"
          f"-{hi_sum / n / 1e6:.3f} ms, mean width {sum(widths) / n * 100:.1f}% of the step")
    print(f"  info  {name}: blocked in the loss copy {sync / n / 1e6:.3f} ms/step by the workload's clock,"
          f" dlbpf's gpu_wait+d2h+cuda_other {gw / n / 1e6:.3f}")
    verdict = summary["diagnosis"]["verdict"]
    check(verdict == expect_verdict, f"{name}: verdict {verdict}, expected {expect_verdict}")
    idle = [d.get("gpu_idle_ns") for d, _ in pairs if d.get("gpu_idle_ns")]
    if idle:
        keys = idle[0].keys()
        print(f"  info  {name}: idle split per step " +
              ", ".join(f"{k} {sum(x[k] for x in idle) / len(idle) / 1e6:.3f} ms" for k in keys))


def judge_torch(name, summary, truth, expect_verdict):
    steps = truth["steps"]
    proc = main_process(summary, truth["pid"])
    check(proc is not None, f"{name}: the job's pid {truth['pid']} is in the JSON")
    if proc is None:
        return
    calls = proc["cuda"]["calls"]
    print(f"  info  {name}: {sum(c['count'] for c in calls.values())} CUDA calls over {len(calls)} APIs,"
          f" {sum(k['count'] for k in proc['cuda']['kernels'])} launches of {len(proc['cuda']['kernels'])} kernels")
    allsteps = [s for s in summary["steps"] if s["pid"] == truth["pid"]]
    # The loop's steps: start-up (imports, the model's copies, the workers' start) holds syncs and copies too.
    dsteps = [s for s in allsteps if steps[0]["ask_ns"] <= s["start_ns"] < steps[-1]["end_ns"]]
    print(f"  info  {name}: {len(allsteps)} steps, {len(dsteps)} of them in the loop's {len(steps)}")
    if len(dsteps) < 3:
        check(False, f"{name}: too few steps inside the loop")
        return
    loop = {}
    for d in dsteps:
        for k, v in d["breakdown_ns"].items():
            loop[k] = loop.get(k, 0) + v
    tot = sum(loop.values())
    print(f"  info  {name}: the loop's steps by dlbpf: " +
          ", ".join(f"{k} {v / tot * 100:.0f}%" for k, v in sorted(loop.items(), key=lambda kv: -kv[1]) if v > 0.01 * tot))
    ends = [s["end_ns"] for s in steps]
    # The steady state: the first steps wait for the workers' start.
    t_lo, t_hi = dsteps[2]["start_ns"], dsteps[-1]["start_ns"]
    dsteps_steady = [d for d in dsteps if t_lo <= d["start_ns"] <= t_hi]
    inside = [e for e in ends if t_lo <= e <= t_hi]
    # The truth's steps between the first and last dlbpf step start: their period is the loop's.
    truth_period = (inside[-1] - inside[0]) / (len(inside) - 1) if len(inside) > 2 else 0
    dl_period = (t_hi - t_lo) / (len(dsteps_steady) - 1) if len(dsteps_steady) > 2 else 0
    check(truth_period > 0 and abs(dl_period - truth_period) <= 0.02 * truth_period,
          f"{name}: mean step {dl_period / 1e6:.2f} ms, the loop's own {truth_period / 1e6:.2f} ms")
    verdict = summary["diagnosis"]["verdict"]
    check(verdict == expect_verdict, f"{name}: verdict {verdict}, expected {expect_verdict}")
    # woken_by: the worker pid of the batch the step received
    waited, right = 0, 0
    workers = {s["worker_pid"] for s in steps}
    for d in dsteps:
        inp = d.get("input")
        if not inp or inp["wait_ns"] < 1_000_000:
            continue
        got = [s for s in steps if d["start_ns"] <= s["got_ns"] < d["start_ns"] + d["dur_ns"]]
        if len(got) != 1:
            continue
        waited += 1
        wb = inp.get("woken_by")
        # A pin-memory thread of the job hands the batch over: the worker is up the chain.
        named = [wb["pid"]] if wb else []
        named += [c["pid"] for c in inp.get("chain", [])]
        right += got[0]["worker_pid"] in named
    if expect_verdict == "input-bound":
        check(waited > 0 and right >= 0.9 * waited,
              f"{name}: woken_by names the batch's worker in {right} of {waited} steps that waited >= 1 ms"
              f" (workers {sorted(workers)})")
    gpu = [s["gpu_ns"] for s in steps]
    hi = [d["gpu_busy_ns"][1] for d in dsteps]
    print(f"  info  {name}: events time the model's work at {sum(gpu) / len(gpu) / 1e6:.3f} ms/step;"
          f" dlbpf's busy upper bound {sum(hi) / max(len(hi), 1) / 1e6:.3f} ms/step")
    for f in summary["diagnosis"]["findings"]:
        print(f"  info  {name}: finding {f['rule']}")


def overhead(out, name):
    base = os.path.join(out, name + ".untraced")
    traced = os.path.join(out, name + ".stdout")
    if not (os.path.exists(base) and os.path.exists(traced)):
        return
    a, b = truth_of(base), truth_of(traced)
    if not a or not b:
        return

    def period(t):
        e = [s["end_ns"] for s in t["steps"]]
        return (e[-1] - e[0]) / (len(e) - 1)

    print(f"  info  {name}: step {period(b) / 1e6:.3f} ms traced, {period(a) / 1e6:.3f} untraced"
          f" ({period(b) / period(a):.3f}x)")


def main():
    out = sys.argv[1]
    runs = [("gpu", judge_gpu_train, "gpu-bound"), ("copies", judge_gpu_train, "copy-bound"),
            ("streams", judge_gpu_train, "gpu-bound"), ("gpu_short", judge_gpu_train, None),
            ("torch_input", judge_torch, "input-bound"), ("torch_gpu", judge_torch, "gpu-bound"),
            ("torch_attach", judge_torch, "input-bound")]
    for name, judge, verdict in runs:
        jpath = os.path.join(out, name + ".json")
        tpath = os.path.join(out, name + ".stdout")
        print(f"== {name}")
        if not os.path.exists(jpath) or not os.path.exists(tpath):
            check(False, f"{name}: no JSON or no workload output")
            continue
        summary, truth = json.load(open(jpath)), truth_of(tpath)
        if truth is None:
            check(False, f"{name}: the workload printed no truth")
            continue
        if verdict is None:
            verdict = summary["diagnosis"]["verdict"]
            print(f"  info  {name}: verdict {verdict}")
        judge(name, summary, truth, verdict)
        overhead(out, name)
    print(f"\n{len(failed)} checks failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
