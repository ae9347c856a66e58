#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Integration tests of --overhead-budget P against the training emulator's own truth: launch
counts scaled from the windows against the launches train made, the verdict against the phase
that dominates its steps, and the step median against its own clock reads; with the workload's
settings and the budget varied. No timing assertions: what the budget costs is measured by
`make bench` (table 12); here the controller's claims are checked against independent counts.
Run as root."""
import json
import os
import re
import statistics

from harness import GPUSIM_DIR, WORK, Dlbpf, check, main, run_dlbpf, workload

# dlbpf cuts steps at the batch's host-to-device copy (the first call after the blocking sync);
# train's truth notes its clock right before that copy (h2d_start_ns). A boundary's uprobe costs
# the copy's entry some us (tens when a neighbour holds the CPU): two medians of the same steps,
# both ends shifted alike, agree to that over a step of tens of ms. 1% leaves room for a
# preempted boundary and still fails a median of the wrong steps (a launch window's slower steps
# alone are 10% and more longer on the launch scenario).
MEDIAN_REL = 0.01


def truth_of(path):
    lines = [json.loads(l) for l in open(path)]
    steps = [l for l in lines if "step" in l and "start_ns" in l]
    summary = [l for l in lines if l.get("summary")][0]
    return steps, summary


def run_budget(budget, train_args, sim_env=None, extra=()):
    truth_path = os.path.join(WORK, f"truth-budget-{budget}-{os.getpid()}.jsonl")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR, **(sim_env or {}))
    d = Dlbpf(["--overhead-budget", budget] + list(extra) + ["--", workload("train"), "--quiet", "--truth",
                                                              truth_path] + list(train_args), env=env)
    rc = d.wait(timeout=300)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    steps, summary = truth_of(truth_path)
    return d, d.summary(), steps, summary


def section(stdout):
    at = stdout.find("overhead budget ")
    return stdout[at:at + 1500] if at >= 0 else "(no overhead budget section)"


def check_budget_run(budget, train_args, sim_env=None, verdict="launch-bound", cycled=True):
    d, s, steps, tsum = run_budget(budget, train_args, sim_env)
    ob = s.get("overhead_budget")
    check(ob is not None, "no overhead_budget object in the JSON")
    why = section(d.stdout)
    check(abs(ob["budget"] - float(budget.rstrip("%")) / 100) < 1e-9, f"budget {ob['budget']} for {budget}")
    check(abs(ob["always_on"] + ob["launches"] - ob["achieved"]) <= 1e-3 * max(ob["achieved"], 1e-6),
          f"the cost's parts do not add up: {ob}")
    check(0 < ob["launch_observed"] <= 1 and (ob["launch_observed"] < 1 or not cycled),
          f"launches observed {ob['launch_observed']}: {why}")
    made = sum(st["kernels"] for st in steps)
    if ob["always_on_exceeds_budget"]:
        # Every task's scheduler events are charged: a machine busy with other work can spend the
        # budget on them alone. Then the first window is the only one, and its count bounds nothing.
        check(ob["launch_windows"] == 1, f"always-on over the budget, yet {ob['launch_windows']} windows: {why}")
        check("over the budget" in d.stdout, why)
        return f"{budget}: always-on {ob['always_on']:.2%} alone over the budget on this machine now: one window"
    # The launches train made, every one in a step; the scaled count's bounds must hold them.
    scaled = {a["api"]: a for a in ob["launches_scaled"]}
    check("cudaLaunchKernel" in scaled, f"no scaled cudaLaunchKernel: {why}")
    k = scaled["cudaLaunchKernel"]
    seen = next(p for p in s["processes"] if p["cuda"]["calls"].get("cudaLaunchKernel"))
    check(k["seen"] == seen["cuda"]["calls"]["cudaLaunchKernel"]["count"],
          f"seen {k['seen']} != the process's count {seen['cuda']['calls']['cudaLaunchKernel']['count']}")
    check(k["seen"] < made or not cycled, f"seen {k['seen']} of {made}: the launches were not cycled")
    # The bounds are dlbpf's ~95% (Student's t at 0.975): checked as such, three runs of this suite
    # would fail one in seven with nothing wrong (one run of 10 did, under a busy second core). The
    # check takes twice the half-width on the side the truth lies, ~3.9 standard errors: a
    # false failure about 1 in 10,000, while a count off by more than its stated error still fails.
    if ob["launch_windows"] == 1:
        # The first window measures what a launch costs here; where that cost leaves the budget no room
        # for a second window (a slower trap: 6.4 us on one run of this machine, 2 windows at 6.5% on
        # another), the count seen bounds the launches only from below, and dlbpf says so.
        check(k["hi"] is None and "one window bounds nothing above" in d.stdout,
              f"one window, yet an upper bound {k['hi']}: {why}")
        check(k["seen"] <= made and k["lo"] <= made, f"train made {made} launches, at least {k['lo']:.0f}: {why}")
        inside = False
    else:
        check(k["hi"] is not None, f"{ob['launch_windows']} windows and no upper bound: {why}")
        half = (k["hi"] - k["scaled"]) if made > k["scaled"] else (k["scaled"] - k["lo"])
        check(k["seen"] <= made and abs(made - k["scaled"]) <= 2 * half,
              f"train made {made} launches, scaled {k['scaled']:.0f} [{k['lo']:.0f}-{k['hi']}] (twice the "
              f"half-width allowed): {why}")
        inside = k["lo"] <= made <= k["hi"]
    # The verdict of the steps inside windows: the phase train's own clocks say dominates.
    check(s["diagnosis"]["verdict"] == verdict, f"verdict {s['diagnosis']['verdict']}, want {verdict}: {why}")
    share = tsum["phase_share"]
    dominant = max(share, key=share.get)
    check(verdict != "launch-bound" or dominant == "launch", f"train's own shares: {share}")
    # The step median, every step's (partial ones included), against train's own clock reads.
    m = s["step_markers"][0]
    check(m["steps_partial"] < m["steps"] and (m["steps_partial"] > 0 or not cycled),
          f"{m['steps_partial']} partial of {m['steps']} steps")
    cuts = [st["h2d_start_ns"] for st in steps]
    truth_med = statistics.median(b - a for a, b in zip(cuts, cuts[1:]))
    check(abs(m["median_ns"] - truth_med) <= MEDIAN_REL * truth_med,
          f"median step {m['median_ns'] / 1e6:.3f} ms, train's {truth_med / 1e6:.3f} ms")
    check("steps with launches probed took" in d.stdout or "too few steps inside" in d.stdout, why)
    bounds = f"[{k['lo']:.0f}-{k['hi']:.0f}]" if k["hi"] is not None else f"[{k['lo']:.0f}-] (one window)"
    return (f"{budget}: observed {ob['launch_observed']:.1%} in {ob['launch_windows']} windows, launches "
            f"{made} {'inside' if inside else 'outside'} {bounds} (scaled {k['scaled']:.0f}), {m['steps_partial']} of "
            f"{m['steps']} steps partial, median {m['median_ns'] / 1e6:.2f} vs {truth_med / 1e6:.2f} ms, "
            f"estimate {ob['achieved']:.2%}")


def test_budget_launch_bound():
    """The launch scenario at 10%: launches cycled, their count bounded, verdict and median right."""
    return check_budget_run("10%", ["--scenario", "launch", "--steps", "450"])


def test_budget_settings_varied():
    """Fewer launches a step, a slower simulated launch and a larger budget: the same claims hold."""
    notes = []
    for budget, args, env in (("15", ["--scenario", "launch", "--kernels", "1500", "--steps", "900"],
                               {"GPUSIM_LAUNCH_US": "6"}),
                              ("6.5%", ["--scenario", "launch", "--kernels", "2500", "--steps", "700"],
                               {"GPUSIM_LAUNCH_US": "2"})):
        notes.append(check_budget_run(budget, args, env))
    # The bounds themselves must be judged somewhere: the larger budget leaves room for several windows.
    check(" 1 windows" not in notes[0], f"the 15% budget gave one window: {notes[0]}")
    return "; ".join(notes)


def test_budget_gpu_bound():
    """A GPU-bound loop: launches are few and hidden behind the device; the verdict stays gpu-bound.
    Its job uses little CPU, so the always-on programs' run time (every task's scheduler events are
    charged) takes a share of it that depends on the machine's load: the budget is set high enough
    that launches are probed at all, and may be probed all the time."""
    return check_budget_run("30%", ["--scenario", "gpu", "--steps", "300"], verdict="gpu-bound", cycled=False)


def test_budget_always_on_over():
    """A budget the always-on probes alone exceed: said in the report and the JSON, and launches are
    probed only in the first window, which measures them."""
    d, s, steps, _ = run_budget("0.001%", ["--scenario", "launch", "--steps", "150"])
    ob = s["overhead_budget"]
    check(ob["always_on_exceeds_budget"], f"always-on {ob['always_on']:.4%} of a 0.001% budget: {section(d.stdout)}")
    check(ob["launch_windows"] == 1, f"{ob['launch_windows']} windows with no budget left: {section(d.stdout)}")
    check(re.search(r"warning: the always-on probes alone cost [\d.]+%, over the budget", d.stdout),
          section(d.stdout))
    # How the files source's cost falls, by the mechanism `dlbpf features` names.
    rc, out, err = run_dlbpf(["features"])
    mech = [l.split()[1] for l in out.splitlines() if l.split()[:1] == ["files"]]
    said = {"fentry": "files source on fentry:", "kprobe": "files source on kprobe:",
            "tracepoint": "warning: the files source runs on syscall tracepoints here"}
    check(rc == 0 and mech and mech[0] in said, f"dlbpf features: no files mechanism: {out} {err}")
    check(said[mech[0]] in d.stdout, f"the budget does not say how the files source ({mech[0]}) is charged: "
          f"{section(d.stdout)}")
    # Charged as it falls (user/capture/budget.c): each files program run at a price timed at start,
    # and on the fallback the traced syscall path for the job's read and write calls (/proc/PID/io).
    m = re.search(r"files source on (\w+): charged with the always-on probes, each run of its programs at its "
                  r"run time and (\d+) ns for the", d.stdout)
    check(m and m.group(1) == mech[0], f"the budget does not say what a files program's run is charged: "
          f"{section(d.stdout)}")
    note = f"{m.group(2)} ns a files program run"
    if mech[0] == "tracepoint":
        t = re.search(r"traced path, (\d+) ns more each .*?; charged for the job's read and write calls "
                      r"\(/proc/PID/io\), ([\d.]+) s;", d.stdout)
        check(t, f"the fallback's path is not charged: {section(d.stdout)}")
        tax_ns, charged_s = int(t.group(1)), float(t.group(2))
        # The path's price is what attaching changed: 0 when another tracer on the machine already
        # held a syscall event (every task was on the traced path before), so no floor is asserted.
        # The job's calls are part of the always-on cost, which the JSON gives as a share of its
        # CPU; the text prints ms resolution (3 decimals of a second).
        check(charged_s <= ob["always_on"] * ob["job_cpu_ns"] / 1e9 + 0.0005,
              f"{charged_s} s charged for the path, more than the always-on {ob['always_on']:.4%} of "
              f"{ob['job_cpu_ns'] / 1e9:.3f} s")
        note += f"; traced path {tax_ns} ns a call, {charged_s:.3f} s charged"
    return f"always-on {ob['always_on']:.3%}, {ob['launch_windows']} window; files source on {mech[0]}: {note}"


def test_budget_cli():
    """Bad values and conflicting options: exit 2, a clear message, nothing traced."""
    for bad in ("0", "0%", "-1", "101", "abc", "1%%", "1e1", " 1", ""):
        rc, _, err = run_dlbpf(["--overhead-budget", bad, "--", "true"])
        check(rc == 2 and "invalid --overhead-budget" in err, f"--overhead-budget '{bad}': rc {rc}, {err.strip()}")
    for args, words in (
            (["--overhead-budget", "1%", "--duty", "1/4", "--", "true"], "give one"),
            (["record", "-o", os.path.join(WORK, "b.dlbpf"), "--overhead-budget", "1%", "--", "true"],
             "--overhead-budget probes launches part"),
            (["report", os.path.join(WORK, "b.dlbpf"), "--overhead-budget", "1%"], "do not apply"),
            (["--overhead-budget", "1%", "--metrics", "127.0.0.1:19464", "--", "true"], "--overhead-budget sees launches")):
        rc, _, err = run_dlbpf(args)
        check(rc == 2 and words in err, f"{' '.join(args)}: rc {rc}, {err.strip()}")
    for good in ("1%", "0.5%", "5", "100"):
        rc, _, err = run_dlbpf(["--overhead-budget", good, "--summary", "-q", "--", "true"])
        check(rc == 0, f"--overhead-budget {good} --summary: rc {rc}, {err.strip()[-500:]}")
    return "refused with exit 2; accepted with --summary"


if __name__ == "__main__":
    main()
