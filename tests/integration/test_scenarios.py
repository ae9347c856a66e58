#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Every training scenario of the GPU simulator traced by dlbpf, judged against
the workload's own ground truth: the verdict, the steps matched one to one, the
total time of the matched steps and each phase's share. Step times can have two
modes (two loaders: a step that waits, then one that does not), so no check
compares medians: only totals, means and steps matched one to one. Run as root."""
import bisect
import copy
import json
import os
import re
import struct
import subprocess

import recording
from harness import DLBPF, GPUSIM_DIR, WORK, Dlbpf, check, load_summary, main, stolen_ns, workload
from summary_schema import violations

EXPECTED = {
    "gpu": "gpu-bound",
    "input": "input-bound",
    "disk": "input-bound",
    "pageable": "copy-bound",
    "small-copies": "copy-bound",
    "sync-copies": "copy-bound",
    "launch": "launch-bound",
    "host-cpu": "host-compute-bound",
    "contention": "cpu-contention",
    "two-streams": "gpu-bound",
    "comm": "comm-bound",
    "graph": "gpu-bound",
    "two-gpus": "gpu-bound",
    "two-gpus-peer": "gpu-bound",
    "balanced": None,
}
SHARE_PP = 5.0        # each phase within 5 percentage points
# The matched steps' total time. dlbpf's step boundaries lie about 10 us from the workload's own
# clock reads (the uprobe's cost; at most 40 us seen), so over seconds of steps the totals agree
# to 1e-5; 1% leaves room for preempted boundaries and still fails a step time computed wrong.
TOTAL_REL = 0.01


# The device-busy bounds against the simulator's own timeline. A bound's edges are host clock
# reads (a call's entry or return, a wake-up), the device's are the simulator's model times: they
# differ by a call's own cost and a wake-up's latency, tens of us apiece on this shared VM, a few
# of them per step. So the truth may lie outside a bound by 1% of the step or 50 us, whichever is
# more; a model that misses a drain or invents one is off by whole kernels (250 us or more here).
BOUND_TOL_REL, BOUND_TOL_NS = 0.01, 50_000
BOUNDS_HOLD = 0.95        # share of steps whose truth must lie inside their bounds
# Where the host waits on queued kernels, or the queue drains before the wait for input, the bounds
# leave out only the launch and copy phases: a few percent of the step.
TIGHT = {"gpu": 0.10, "input": 0.10, "graph": 0.10}
# A waiter that spins or yields sees the device only while it holds a CPU: when the work ends while the
# thread waits for one, nothing tells when it ended, from the last instant the thread ran to its return.
# So under those waits the bounds may be wider by the share of the step the workload's main thread spent
# runnable but not running (its own schedstat), which on a loaded 2-CPU machine is most of a spinner's
# wait; a sleeping waiter is woken when the work ends, and its run-queue time after the wake-up is the
# late wake-ups' (Busy.seen), not the width's.
POLLING = ("spin", "yield")


def truth_of(path):
    lines = [json.loads(l) for l in open(path)]
    steps = [l for l in lines if "step" in l]
    summary = [l for l in lines if l.get("summary")][0]
    return steps, summary, device_busy(lines)


class Busy(list):
    """The device's busy intervals; as the host saw them (seen: each extended to the wake-up of the
    thread that waited for it, the simulator's late wakes); and what the hypervisor stole from the
    host's CPUs meanwhile (stolen_ns): a wake-up it delays is late by that much, and a lower bound's
    edge is a wake-up."""
    stolen = 0
    seen = None


def union(intervals):
    merged = []
    for a, b in sorted(tuple(iv) for iv in intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def device_busy(lines):
    """The simulator's own timeline (train_device.c): the union of what the device ran, sorted; with
    several devices, each one's (per_device)."""
    merged = Busy(union(iv for l in lines if "device" in l for iv in l["device"]))
    late = [iv for l in lines if "device" in l for iv in l.get("late", [])]
    merged.seen = union(list(merged) + late)
    merged.per_device = []
    ndev = max((len(l["devices"]) for l in lines if "devices" in l), default=0)
    for d in range(ndev):
        one = Busy(union(iv for l in lines if "devices" in l for iv in l["devices"][d]))
        one.seen = union(list(one) + late)
        merged.per_device.append(one)
    return merged


def busy_between(merged, starts, a, b):
    i = max(bisect.bisect_right(starts, a) - 1, 0)
    total = 0
    while i < len(merged) and merged[i][0] < b:
        total += max(0, min(merged[i][1], b) - max(merged[i][0], a))
        i += 1
    return total


def judge_devices(name, steps, busy):
    """With several devices, each step lists each one's bounds (JSON devices[]), and each holds that
    device's own busy time in BOUNDS_HOLD of the steps, to the tolerance judge_bounds allows; the union
    (gpu_busy_ns) is judged by judge_bounds."""
    ndev = len(busy.per_device)
    check(all(len(st.get("devices", [])) == ndev for st in steps),
          f"{name}: steps list {sorted(set(len(st.get('devices', [])) for st in steps))} devices, the simulator ran {ndev}")
    notes = []
    for d, one in enumerate(busy.per_device):
        starts, seen_starts = [iv[0] for iv in one], [iv[0] for iv in one.seen]
        outside, sums = 0, [0, 0, 0]
        for st in steps:
            lo, hi = st["devices"][d]["gpu_busy_ns"]
            a, b = st["start_ns"], st["start_ns"] + st["dur_ns"]
            truth, seen = busy_between(one, starts, a, b), busy_between(one.seen, seen_starts, a, b)
            tol = max(BOUND_TOL_REL * st["dur_ns"], BOUND_TOL_NS)
            outside += not (lo - tol <= seen and truth <= hi + tol)
            sums = [sums[0] + truth, sums[1] + lo, sums[2] + hi]
        held = 1 - outside / len(steps)
        ms = [x / len(steps) / 1e6 for x in sums]
        notes.append(f"device {d}: truth {ms[0]:.2f} ms, bounds {ms[1]:.2f}-{ms[2]:.2f}, hold in {held * 100:.0f}%")
        check(held >= BOUNDS_HOLD, f"{name}: {notes[-1]}")
    return "; ".join(notes)


def judge_graphs(name, steps, tsteps):
    """A graph-replay loop: each step one graph launch holding the workload's kernels, and no kernel
    launched on its own (the capture's launches were before the loop and are not the steps')."""
    want = tsteps[0]["kernels"]
    bad = [st["index"] for st in steps if (st["graph_launches"], st["graph_kernels"], st["kernels"]) != (1, want, 0)]
    # A step at an edge of the run may hold no launch.
    check(len(bad) <= 1, f"{name}: steps {bad[:5]} do not hold one graph launch of {want} kernels and no "
          f"other: {[(st['graph_launches'], st['graph_kernels'], st['kernels']) for st in steps[:3]]}")
    return f"1 graph launch of {want} kernels per step"


def judge_peer(name, s, tsum):
    """Peer copies (cudaMemcpyPeer[Async]) count exactly: dlbpf's calls and device-to-device copies
    against the loop's own count of the calls that succeeded and the simulator's of the copies it ran."""
    want = tsum["peer_copies"]
    check(want > 0 and want == tsum["simulator_peer_copies"],
          f"{name}: the loop made {want} peer copies, the simulator ran {tsum['simulator_peer_copies']}")
    p = next(p for p in s["processes"] if p["cuda"]["calls"].get("cudaLaunchKernel"))
    calls = p["cuda"]["calls"]
    # The simulator's driver makes its copies with the runtime's: those nest in the driver's calls.
    apis = ("cuMemcpyPeer", "cuMemcpyPeerAsync") if tsum.get("driver_calls") else ("cudaMemcpyPeer", "cudaMemcpyPeerAsync")
    got = sum(calls.get(api, {}).get("count", 0) for api in apis)
    errs = sum(calls.get(api, {}).get("errors", 0) for api in apis)
    check(got == want and errs == 0, f"{name}: dlbpf counted {got} peer copies ({errs} failed), the loop {want}")
    d2d = p["cuda"]["memcpy"]["d2d"]["count"]
    check(d2d == want, f"{name}: {d2d} device-to-device copies, the loop made {want} (all peer copies)")
    return f"{got} peer copies, as the loop and the simulator counted"


def judge_bounds(name, steps, busy, runq_share=0.0):
    """Each step's gpu_busy_ns [lower, upper] holds the device's own busy time in BOUNDS_HOLD of the
    steps; on the TIGHT scenarios the mean width is under that share of the step, plus runq_share
    (POLLING waits: the main thread's run-queue share of the step)."""
    check(busy, f"{name}: the workload wrote no device timeline (not on the simulator?)")
    starts, seen_starts = [iv[0] for iv in busy], [iv[0] for iv in busy.seen]
    outside, width, first, sums, under, late = 0, 0.0, "", [0, 0, 0, 0], [], 0
    for st in steps:
        lo, hi = st["gpu_busy_ns"]
        a, b = st["start_ns"], st["start_ns"] + st["dur_ns"]
        truth = busy_between(busy, starts, a, b)
        # The lower bound's edge is the waiting thread's wake-up, which the host's timer makes late (by
        # hundreds of us at times on this VM, see test_gpusim_timing.c); the simulator records each
        # wait's model time and the wake-up's, so a lower bound is held to the device's busy time up to
        # those wake-ups, not to the model's times alone.
        seen = busy_between(busy.seen, seen_starts, a, b)
        tol = max(BOUND_TOL_REL * st["dur_ns"], BOUND_TOL_NS)
        late += truth < lo - tol <= seen
        if not (lo - tol <= seen and truth <= hi + tol):
            outside += 1
            first = first or (f"step {st['index']}: truth {truth / 1e6:.3f} ms ({seen / 1e6:.3f} to the wake-ups), "
                              f"bounds {lo / 1e6:.3f}-{hi / 1e6:.3f}")
            if seen < lo - tol:
                under.append(lo - tol - seen)
        width += (hi - lo) / st["dur_ns"]
        sums = [sums[0] + truth, sums[1] + lo, sums[2] + hi, sums[3] + st["dur_ns"]]
    width /= len(steps)
    held = 1 - outside / len(steps)
    # A lower bound ends at the waiting thread's wake-up. One the hypervisor delayed (it did not run the
    # vCPU when the device's completion came) is late by what it stole: steps whose truth fell under their
    # lower bound by no more than the run's steal, all together, are the VM's, not the model's.
    excused = len(under) == outside and sum(under) <= busy.stolen
    ms = [x / len(steps) / 1e6 for x in sums]
    note = (f"GPU busy per step: truth {ms[0]:.2f} ms, bounds {ms[1]:.2f}-{ms[2]:.2f} of {ms[3]:.2f}; bounds hold "
            f"in {held * 100:.0f}% of steps, mean width {width * 100:.1f}% of the step")
    if late:
        note += f" ({late} held only to the late wake-ups)"
    if held < BOUNDS_HOLD and excused:
        note += (f" ({outside} under their lower bound by {sum(under) / 1e6:.2f} ms in all, within the "
                 f"{busy.stolen / 1e6:.1f} ms the hypervisor stole)")
    check(held >= BOUNDS_HOLD or excused, f"{name}: {note}; first outside: {first}; stolen {busy.stolen / 1e6:.1f} ms")
    # Under emulation (tools/vm sets DLBPF_TEST_EMULATED) every wake-up is late by the emulator's
    # pace, which widens the bounds by no measure of the model: there the bounds must hold, and the
    # width is reported only.
    # dlbpf learns that a runtime polls from waits that ran on their CPU for most of the call; a waiter
    # runnable for more than half its steps gives it none, and its bounds are then those of a runtime
    # whose way of waiting is unknown: reported, not held to the width.
    if name in TIGHT and not os.environ.get("DLBPF_TEST_EMULATED") and runq_share >= 0.5:
        note += f" (width not judged: the waiter runnable {runq_share * 100:.0f}% of its steps)"
    elif name in TIGHT and not os.environ.get("DLBPF_TEST_EMULATED"):
        allowed = TIGHT[name] + runq_share
        check(width <= allowed, f"{name}: {note}, over {allowed * 100:.0f}% ({TIGHT[name] * 100:.0f}% and the "
              f"waiter's run-queue share {runq_share * 100:.1f}%)")
        if runq_share:
            note += f" (allowed {allowed * 100:.0f}%: {runq_share * 100:.1f}% of the step runnable)"
    return note


# What each scenario's GPU idle time is mostly spent on, by how the workload loops: the input one
# waits for its loaders with an empty queue; the launch one keeps the queue open while it launches,
# so its idle time is the host's (its other phases), never a wait for data.
IDLE_MOSTLY = {"input": "input", "disk": "input", "launch": "host_wait", "host-cpu": "host_wait"}


def judge_idle(name, steps, busy):
    """Each step's gpu_idle_ns sums to the step less its busy upper bound exactly; that idle time is
    no more than the device's own idle time (the step less its truth busy time) plus the bounds'
    tolerance in BOUNDS_HOLD of the steps, as the upper bound is at least the truth; on the
    IDLE_MOSTLY scenarios most of it is of the part named."""
    starts = [iv[0] for iv in busy]
    over, sums, parts = 0, [0, 0, 0], {}
    for st in steps:
        idle = st["gpu_idle_ns"]
        ours = sum(idle.values())
        check(ours == st["dur_ns"] - st["gpu_busy_ns"][1],
              f"{name}: step {st['index']}: idle parts {idle} sum to {ours}, not the step less its upper bound "
              f"{st['dur_ns'] - st['gpu_busy_ns'][1]}")
        truth = st["dur_ns"] - busy_between(busy, starts, st["start_ns"], st["start_ns"] + st["dur_ns"])
        over += ours > truth + max(BOUND_TOL_REL * st["dur_ns"], BOUND_TOL_NS)
        sums = [sums[0] + truth, sums[1] + ours, sums[2] + st["dur_ns"]]
        for k, v in idle.items():
            parts[k] = parts.get(k, 0) + v
    n = len(steps)
    note = (f"GPU idle per step: truth {sums[0] / n / 1e6:.2f} ms, dlbpf {sums[1] / n / 1e6:.2f} of "
            f"{sums[2] / n / 1e6:.2f} (" + ", ".join(f"{k} {v / n / 1e6:.2f}" for k, v in parts.items()) + ")")
    check(1 - over / n >= BOUNDS_HOLD, f"{name}: {note}; {over} of {n} steps idle longer than the truth")
    # Under emulation the loaders and the host run at the emulator's pace, not the model's: the split
    # of the idle time is reported, and only held to the scenario's shape on a real CPU.
    want = None if os.environ.get("DLBPF_TEST_EMULATED") else IDLE_MOSTLY.get(name)
    if want:
        check(parts[want] * 2 > sums[1], f"{name}: {note}: not mostly {want}")
    return note


def our_shares(steps):
    total = sum(s["dur_ns"] for s in steps)
    cat = {}
    for s in steps:
        for k, v in s["breakdown_ns"].items():
            cat[k] = cat.get(k, 0) + v
    share = {k: 100.0 * v / total for k, v in cat.items()}
    wake = 100.0 * sum(s["wakeup_runq_ns"] for s in steps) / total
    # The workload measures phases around its own calls: map dlbpf's categories onto them. Waiting
    # for a CPU right after the wake-up that brought the batch is inside the workload's input wait.
    return {
        "input_wait": share["input_wait"] + share["io_wait"] + wake,
        "host_cpu": share["cpu"] + share["runq"] - wake + share["cuda_other"],
        "h2d": share["h2d"],
        "launch": share["launch"],
        # The workload's loss copy waits for kernels and collectives alike.
        "gpu_wait": share["gpu_wait"] + share["comm_wait"] + share["d2h"],
    }, share


def polling_runq(tsteps, sim_env):
    """Under POLLING waits, the share of its step the workload's main thread was runnable but not
    running, by its own schedstat, averaged over the steps as the bounds' width is; 0 otherwise."""
    if (sim_env or {}).get("GPUSIM_SCHEDULE") not in POLLING:
        return 0.0
    return sum(t["sched"]["runq_ns"] / (t["end_ns"] - t["start_ns"]) for t in tsteps) / len(tsteps)


def truth_shares(steps, parts=None):
    """The workload's phase shares over its steps, or over the parts of them dlbpf's steps cover
    (window_parts): [(start, end, phases_ns, runq_ns)]."""
    if parts is None:
        parts = [(s["start_ns"], s["end_ns"], s["phases_ns"], s["sched"]["runq_ns"]) for s in steps]
    total = sum(b - a for a, b, _, _ in parts)
    out = {}
    for k in ("input_wait", "host_cpu", "h2d", "launch", "gpu_wait"):
        out[k] = 100.0 * sum(ph.get(k, 0) for _, _, ph, _ in parts) / total
    # "other" is the loop's own bookkeeping between phases: CPU outside CUDA, as dlbpf's cpu is.
    out["host_cpu"] += 100.0 * sum(ph.get("other", 0) for _, _, ph, _ in parts) / total
    out["runq"] = 100.0 * sum(rq for _, _, _, rq in parts) / total
    return out


# The workload's phases in the order its loop runs them (train.c), and the ones before the clock
# read a before-call marker's boundary stands for: the batch's copy (h2d_start_ns), or the loss
# phase's call (loss_copy_ns, sync_ns), whose wait comes after it.
PHASE_ORDER = ("input_wait", "host_cpu", "h2d", "launch", "gpu_wait")


def window_parts(tsteps, steps, marker):
    """The workload's steps, each cut where dlbpf's boundaries stand (truth_cuts), kept where they
    lie between the workload boundaries dlbpf's first step starts at and its last step ends at:
    [(start, end, phases_ns, runq_ns)]. A boundary cut before a call (the batch's copy) falls inside
    the workload's step, so dlbpf's steps leave out the first step's part before it (the process's
    first pass through its loop: under an emulator hundreds of ms of translating code, 393 ms of a
    3985 ms run on arm64) and the last step's part after it; the shares are compared over the same
    time. None where dlbpf's edges stand for no boundary of the workload's."""
    cuts = truth_cuts(tsteps, marker)
    before = cut_before_call(marker)
    a = boundary_cut(cuts, min(st["start_ns"] for st in steps), before)
    b = boundary_cut(cuts, max(st["start_ns"] + st["dur_ns"] for st in steps), before)
    if a is None or b is None or b <= a:
        return None
    lo, hi = cuts[a], cuts[b]
    loss = loss_call(marker)
    parts = []
    for t in tsteps:
        ph, start, end, runq = t["phases_ns"], t["start_ns"], t["end_ns"], t["sched"]["runq_ns"]
        cut = t.get(loss) if loss else t["h2d_start_ns"] if before else None
        if not cut or not start < cut < end:
            pieces = [(start, end, dict(ph))]
        else:
            # The phases before the cut whole (the first one that does not fit the time before the
            # cut is where the cut falls); the loop's bookkeeping there is the rest of that time.
            pre, used = {}, 0
            for k in PHASE_ORDER[:PHASE_ORDER.index("h2d" if not loss else "gpu_wait")]:
                pre[k] = ph[k]
                used += ph[k]
            pre["other"] = max(0, min(ph["other"], cut - start - used))
            post = {k: ph[k] - pre.get(k, 0) for k in ph}
            pieces = [(start, cut, pre), (cut, end, post)]
        for p0, p1, phases in pieces:
            if lo <= p0 and p1 <= hi:
                # schedstat's run-queue time is the step's: its share of the piece by time.
                parts.append((p0, p1, phases, runq * (p1 - p0) / (end - start) if end > start else 0))
    return parts or None


# The tracer's own cost inside the workload's CUDA phases: the workload clocks each call from
# before its first instruction to after its return, dlbpf from its entry probe's program to its
# return probe's, so the traps around them (0.6 us a pair on one machine, 6 us on another with the
# same kernel) fall inside the workload's copy and launch phases and, for dlbpf, on the CPU
# between calls. The same scenario untraced measures it with the workload's own clocks: what a
# traced step's phase takes beyond the untraced one's, as a share of the traced step. A phase may
# lie that far below the truth's, and the CPU that far above, beyond SHARE_PP.
PROBED_PHASES = ("h2d", "launch")


def untraced_phases(name, sim_env=None, train_args=()):
    """Mean per step of each phase and of the step, the scenario run without dlbpf."""
    truth_path = os.path.join(WORK, f"truth-{name}-untraced.jsonl")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    env.update(sim_env or {})
    subprocess.run([workload("train"), "--scenario", name, "--quiet", "--truth", truth_path] + list(train_args),
                   env=env, check=True, timeout=120, stdout=subprocess.DEVNULL)
    return phase_means(truth_path)


def phase_means(truth_path):
    """Mean per step of each probed phase in a truth file (an untraced run's)."""
    steps = truth_of(truth_path)[0]
    return {k: sum(s["phases_ns"][k] for s in steps) / len(steps) for k in PROBED_PHASES}


def probe_shares(tsteps, untraced):
    """Each probed phase's traced-minus-untraced time, in points of the traced steps' time."""
    total = sum(s["end_ns"] - s["start_ns"] for s in tsteps)
    return {k: max(0.0, 100.0 * (sum(s["phases_ns"][k] for s in tsteps) - untraced[k] * len(tsteps)) / total)
            for k in PROBED_PHASES}


def share_gaps(ours, truth, probe):
    """How far each of dlbpf's shares lies outside what the truth allows: within SHARE_PP, a
    probed phase down to its probe share lower and the CPU up to their sum higher."""
    gap = {}
    for k in ours:
        low = truth[k] - probe.get(k, 0.0)
        high = truth[k] + (sum(probe.values()) if k == "host_cpu" else 0.0)
        gap[k] = max(low - ours[k], ours[k] - high, 0.0)
    return gap


def run_scenario(name, extra=(), sim_env=None, train_args=()):
    truth_path = os.path.join(WORK, f"truth-{name}.jsonl")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    env.update(sim_env or {})
    stolen = stolen_ns()
    d = Dlbpf(list(extra) + ["--", workload("train"), "--scenario", name, "--quiet", "--truth", truth_path]
              + list(train_args),
              env=env)
    rc = d.wait(timeout=120)
    stolen = stolen_ns() - stolen
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    truth = truth_of(truth_path)
    truth[2].stolen = stolen
    return d.summary(), truth, d


def expected_verdicts(name, tsum, sim_env=None):
    """The verdicts the workload's own counters allow. A host-compute scenario on a machine busy
    with other work waits for a CPU: when its main thread's schedstat run-queue time beats its
    on-CPU time by more than SHARE_PP points, contention is the right answer; within SHARE_PP of
    each other, either is. Under POLLING waits the same holds for every scenario: a spinning
    waiter needs a CPU for all of its wait, so on a busy machine it is runnable most of it."""
    want = EXPECTED[name]
    lead = 100.0 * (tsum["runq_share"] - tsum["oncpu_share"])
    if want and (sim_env or {}).get("GPUSIM_SCHEDULE") in POLLING and lead > SHARE_PP:
        return {want, "cpu-contention"}
    # Under emulation (tools/vm) the loaders and the host run at the emulator's pace: the verdict the
    # workload's own clocks give stands beside the one the scenario was made for.
    if os.environ.get("DLBPF_TEST_EMULATED") and want is not None:
        return {want} | truth_verdicts(tsum)
    if want != "host-compute-bound":
        return {want}
    if lead > SHARE_PP:
        return {"cpu-contention"}
    return {want} if lead < -SHARE_PP else {want, "cpu-contention"}


def cut_before_call(marker):
    """True when truth_cuts are the workload's clock reads right before the call dlbpf's marker is."""
    return "(h2d) after a blocking sync" in marker or "--step-on cudaMemcpyAsync" in marker or \
        bool(loss_call(marker))


def loss_call(marker):
    """The truth's clock read before the loss phase's call a learned marker names: the loss copy, or the
    first synchronize (the graph loop's cudaStreamSynchronize, the two-device loop's cudaDeviceSynchronize)."""
    if "automatic: the first" not in marker:
        return None
    if "(d2h) after a blocking sync" in marker:
        return "loss_copy_ns"
    if "Synchronize after a blocking sync" in marker:
        return "sync_ns"
    return None


def truth_cuts(tsteps, marker):
    """Where the workload's own clocks put the boundaries dlbpf's steps should have."""
    if loss_call(marker):
        # The marker is a call of the loss phase, at the end of the workload's step: each cut is the
        # clock read right before it, the first step's start ahead of them.
        return [tsteps[0]["start_ns"]] + [t[loss_call(marker)] for t in tsteps]
    if cut_before_call(marker):
        # These steps start at the batch's host-to-device copy, the workload's at train_step_begin,
        # before it waits for the batch: the same loop cut at another phase. Cut the workload's own
        # clocks at its copy too (its clock read right before the call, not a sum of phases, which
        # leaves out its own bookkeeping and any preemption in it).
        cuts = [t["h2d_start_ns"] for t in tsteps]
    else:
        cuts = [t["start_ns"] for t in tsteps]
    return cuts + [tsteps[-1]["end_ns"]]


def nearest_cut(cuts, ts):
    """The index of the workload's boundary ts stands for, or None: the nearest one, when ts is
    closer to it than half of either step beside it (then no other boundary can be meant)."""
    i = bisect.bisect_left(cuts, ts)
    j = min((k for k in (i - 1, i) if 0 <= k < len(cuts)), key=lambda k: abs(cuts[k] - ts))
    half = min(cuts[k + 1] - cuts[k] for k in (j - 1, j) if 0 <= k < len(cuts) - 1) / 2
    return j if abs(cuts[j] - ts) < half else None


def boundary_cut(cuts, ts, before_call):
    """The index of the workload's boundary ts stands for, or None. Where each cut is the workload's
    clock read right before the marker's call (before_call), the probe on that call fires after it,
    however long the thread was preempted in between (a 2-CPU machine under load moved one 1.6 ms
    into a 3 ms step): the last cut at or before ts. Elsewhere dlbpf's boundary may fall on either
    side of the workload's: the nearest cut."""
    if not before_call:
        return nearest_cut(cuts, ts)
    i = bisect.bisect_right(cuts, ts) - 1
    return i if 0 <= i < len(cuts) else None


def matched_indices(steps, cuts, before_call=False):
    """[(dlbpf step, k)] for each step whose start and end stand for the workload's boundaries k and k+1."""
    out = []
    for st in steps:
        a = boundary_cut(cuts, st["start_ns"], before_call)
        b = boundary_cut(cuts, st["start_ns"] + st["dur_ns"], before_call)
        if a is not None and b == a + 1:
            out.append((st, a))
    return out


def match_steps(steps, cuts, before_call=False):
    """dlbpf's steps matched one to one to the workload's: [(dlbpf step, truth duration)] for each
    step whose start and end stand for consecutive boundaries of the workload."""
    return [(st, cuts[k + 1] - cuts[k]) for st, k in matched_indices(steps, cuts, before_call)]


# What each verdict means, as the paper-sketch finding words it.
VERDICT_WORDS = {"comm-bound": "waiting for communication", "input-bound": "waiting for input",
                 "copy-bound": "host-device copies", "launch-bound": "kernel launches",
                 "host-compute-bound": "host CPU work", "cpu-contention": "waiting for a CPU"}


def judge(name, s, truth, sim_env=None):
    tsteps, tsum, busy = truth
    steps = s["steps"]
    check(len(steps) >= 2, f"{name}: {len(steps)} steps found")
    n_truth = len(tsteps)
    check(abs(len(steps) - n_truth) <= 1, f"{name}: {len(steps)} steps, the workload made {n_truth}")
    marker = s["step_markers"][0]["marker"] if s["step_markers"] else ""
    matched = match_steps(steps, truth_cuts(tsteps, marker), cut_before_call(marker))
    ours_total = sum(st["dur_ns"] for st, _ in matched)
    truth_total = sum(t for _, t in matched)
    rel = abs(ours_total - truth_total) / truth_total if truth_total else 1.0
    ours, raw = our_shares(steps)
    ts = truth_shares(tsteps, window_parts(tsteps, steps, marker))
    probe = probe_shares(tsteps, untraced_phases(name, sim_env))
    worst = max(share_gaps(ours, ts, probe).values())
    detail = " ".join(f"{k} {ours[k]:.1f}/{ts[k]:.1f}" for k in ours)
    detail += " (probes' share of " + " ".join(f"{k} {v:.1f}" for k, v in probe.items()) + ")"
    if name == "contention":
        # schedstat's run-queue time also runs inside the loss copy, where gpu_wait takes precedence:
        # shown, not compared (the scheduler tests compare run-queue time with schedstat directly).
        detail += f" runq {raw['runq']:.1f}/{ts['runq']:.1f}"
    verdict = s["diagnosis"].get("verdict")
    mean = lambda total: total / len(matched) / 1e6 if matched else 0.0
    note = (f"{len(steps)}/{n_truth} steps, {len(matched)} matched one to one, mean "
            f"{mean(ours_total):.2f}/{mean(truth_total):.2f} ms ({rel * 100:.3f}%), "
            f"{verdict}; shares dlbpf/truth: {detail}")
    if EXPECTED[name]:
        want = expected_verdicts(name, tsum, sim_env)
        if os.environ.get("DLBPF_TEST_EMULATED"):
            # The phases the workload's clocks measured for these steps, the top one or two; and the
            # same with each probed phase's probes' share moved to the CPU, as the shares are judged
            # (share_gaps): the clocks count a probe's trap inside the call, dlbpf as the thread's CPU
            # time, and emulated traps are slow enough to move the top phase (37% of the launch
            # scenario's step on 6.1).
            moved = dict(ts)
            for k, v in probe.items():
                moved[k] = moved[k] - v
                moved["host_cpu"] = moved["host_cpu"] + v
            for shares in (ts, moved):
                top = sorted(((v, k) for k, v in shares.items() if k in PHASE_VERDICT), reverse=True)
                want = want | {PHASE_VERDICT[k] for v, k in top if top[0][0] - v < SHARE_PP}
        check(verdict in want, f"{name}: verdict {verdict}, expected {' or '.join(sorted(want))} (workload's "
              f"runq {tsum['runq_share'] * 100:.0f}%, on CPU {tsum['oncpu_share'] * 100:.0f}%); {note}")
    # Input-bound has two causes with different advice: loaders on the CPU or on the disk, told
    # apart by the disk reads in flight, half the step time or more. The workload cannot count
    # device time in flight (its loaders time their read calls, which a busy CPU stretches too):
    # within SHARE_PP points of that line, where a loaded machine moves the disk scenario (49%
    # seen), either advice is right.
    msg = s["diagnosis"]["message"]
    advice = {"input": "Add data-loader workers", "disk": "The loaders wait on the disk"}.get(name)
    inflight = re.search(r"reads in flight (\d+)% of the time", msg)
    if name == "disk" and inflight and abs(int(inflight.group(1)) - 50) < SHARE_PP:
        advice = None
        check("The loaders wait on the disk" in msg or "Add data-loader workers" in msg, f"{name}: no advice: {msg}")
    if advice:
        check(advice in msg, f"{name}: advice lacks '{advice}': {msg}")
    # The paper sketch's finding says where the time goes: what the verdict names, in words.
    sketch = [f for f in s["diagnosis"]["findings"] if f["rule"] == "below-paper-sketch"]
    goes = re.search(r"The time goes to (.+), not to moving data", sketch[0]["message"]) if sketch else None
    check(not sketch or (goes and goes.group(1) == VERDICT_WORDS.get(verdict)),
          f"{name}: verdict {verdict}, the paper sketch says: {sketch[0]['message'] if sketch else ''}")
    # Every step but one (at the edge of the run, where a boundary may have no counterpart).
    check(len(matched) >= len(steps) - 1, f"{name}: {len(steps) - len(matched)} steps match none of the "
          f"workload's; {note}")
    check(rel <= TOTAL_REL, f"{name}: matched steps' total off by {rel * 100:.2f}%; {note}")
    check(worst <= SHARE_PP, f"{name}: a share is {worst:.1f} points outside the truth's with the probes' share; {note}")
    note += "; " + judge_bounds(name, steps, busy, polling_runq(tsteps, sim_env)) + "; " + \
        judge_idle(name, steps, busy)
    if busy.per_device:
        note += "; " + judge_devices(name, steps, busy)
    if name == "graph":
        note += "; " + judge_graphs(name, steps, tsteps)
    if tsum.get("peer_copies"):
        note += "; " + judge_peer(name, s, tsum)
    return note


def judge_report_lines(name, s, stdout):
    """The report's GPU busy and idle lines state the means of the JSON's steps but its outliers (the
    JSON lists every step here), to their printed resolution: 0.1 ms, so within half of it."""
    pid = s["step_markers"][0]["pid"]
    outliers = set(s["step_markers"][0]["outliers"]["indexes"])
    steps = [st for st in s["steps"] if st["pid"] == pid and st["index"] not in outliers]
    mean = lambda f: sum(f(st) for st in steps) / len(steps) / 1e6
    busy = re.search(r"GPU busy ([\d.]+)-([\d.]+) ms of ([\d.]+) per step", stdout)
    idle = re.search(r"GPU idle ([\d.]+) ms of [\d.]+ per step: host ([\d.]+), input ([\d.]+), sync ([\d.]+)", stdout)
    check(busy and idle, f"{name}: no GPU busy or idle line in the report")
    want = [mean(lambda st: st["gpu_busy_ns"][0]), mean(lambda st: st["gpu_busy_ns"][1]), mean(lambda st: st["dur_ns"]),
            mean(lambda st: st["dur_ns"] - st["gpu_busy_ns"][1])] + \
        [mean(lambda st, k=k: st["gpu_idle_ns"][k]) for k in ("host_wait", "input", "sync_overhead")]
    got = [float(x) for x in busy.groups() + idle.groups()]
    check(all(abs(g - w) <= 0.05 + 1e-9 for g, w in zip(got, want)),
          f"{name}: report lines {got} against the JSON's means {[round(w, 3) for w in want]}")


# How the workload's host threads wait for the device (the simulator's GPUSIM_SCHEDULE): sleeping, as
# under cudaDeviceScheduleBlockingSync, and spinning, the real runtime's default. Every scenario runs
# under each; the varied settings below yield as well.
SCHEDULES = ("blocking", "spin")


def make_test(name, schedule):
    sim_env = {"GPUSIM_SCHEDULE": schedule}

    def t():
        s, truth, d = run_scenario(name, sim_env=sim_env)
        judge_report_lines(name, s, d.stdout)
        return judge(name, s, truth, sim_env)
    t.__name__ = f"test_scenario_{name.replace('-', '_')}" + ("" if schedule == "blocking" else f"_{schedule}")
    return t


# One test per scenario and way of waiting, defined here so they run first, in EXPECTED's order.
for _name in EXPECTED:
    for _schedule in SCHEDULES:
        _t = make_test(_name, _schedule)
        globals()[_t.__name__] = _t


def test_two_gpus_peer_variants():
    """The two-device loop's gradient copies in other shapes. cudaMemcpyPeerAsync on the current device's
    legacy stream (device 1's, the last kernel's): device 0's side of each copy is not its own stream's
    work, so its own syncs do not end it. With --peer-late the copies come after device 1's drain, right
    before device 0's loss copy, 16 MiB (0.7 ms each, past the bounds' tolerance): device 1's share of
    each copy lies outside the rest of its work, so its bounds hold it only where the copy is counted
    as both devices' work (cudaMemcpyPeer: device 0's loss copy proves both legacy streams done; the
    async one on device 0's stream: device 1's side ends with that stream's drain). Each device's
    bounds hold its truth, and the copies count exactly."""
    notes = []
    late = ["--peer-late", "--peer-kb", "16384"]
    for schedule, args in (("blocking", ["--peer-async"]), ("spin", ["--peer-async"]), ("blocking", late),
                           ("spin", late), ("blocking", late + ["--peer-async"])):
        sim_env = {"GPUSIM_SCHEDULE": schedule}
        # Late, the copy is the first call after a blocking sync, so a learned marker would be it, and the
        # copy made before the loop would open a first step of set-up: steps on the loop's own marker.
        extra = ["--step-on", "train_step_begin"] if "--peer-late" in args else []
        s, truth, d = run_scenario("two-gpus-peer", extra, sim_env=sim_env, train_args=args)
        api = "cudaMemcpyPeerAsync" if "--peer-async" in args else "cudaMemcpyPeer"
        check(any(api in p["cuda"]["calls"] for p in s["processes"]), f"{schedule} {args}: no {api} traced")
        notes.append(f"{schedule} {' '.join(args)}: " + judge("two-gpus-peer", s, truth, sim_env))
    return " | ".join(notes)


def test_visible_devices():
    """CUDA_VISIBLE_DEVICES, as the process was given it: each device's entry in the steps' devices[]
    names the physical device its ordinal is (visible_id), for a plain list of indexes or UUIDs; a
    list the runtime would parse its own way (an entry that is neither) names none."""
    uuid = "GPU-8b7f2a44-1c2d-4e5f-9a0b-1c2d3e4f5a6b"
    notes = []
    for visible, want in (("2,0", ["2", "0"]), (f"{uuid},5", [uuid, "5"]), ("1,x", [None, None])):
        s, truth, d = run_scenario("two-gpus", sim_env={"GPUSIM_SCHEDULE": "blocking", "CUDA_VISIBLE_DEVICES": visible})
        got = {tuple(dev.get("visible_id") for dev in st.get("devices", [])) for st in s["steps"]}
        check(got == {tuple(want)}, f"CUDA_VISIBLE_DEVICES={visible}: steps name {got}, want {want}")
        notes.append(f"{visible}: {want}")
    return "; ".join(notes)


def test_graph_forked_capture():
    """The graph loop whose capture forks into a second stream for every other kernel (an event recorded
    in the capture and waited on there, joined back before the end): the kernels launched on the second
    stream during the capture are the graph's, not the steps', so each step is one graph launch of all
    the loop's kernels and no other (judge_graphs), with the verdict and bounds of the graph scenario."""
    notes = []
    for schedule in SCHEDULES:
        sim_env = {"GPUSIM_SCHEDULE": schedule}
        s, truth, d = run_scenario("graph", sim_env=sim_env, train_args=["--graph-fork"])
        p = next(p for p in s["processes"] if p["cuda"]["calls"].get("cudaLaunchKernel"))
        check(p["cuda"]["calls"]["cudaStreamWaitEvent"]["count"] >= 2, f"{schedule}: no fork traced")
        notes.append(f"{schedule}: " + judge("graph", s, truth, sim_env))
    return " | ".join(notes)


def test_two_gpus_driver_contexts():
    """The two-device loop switching devices through the driver (the simulator's libcuda.so.1, loaded
    with dlopen): each device's primary context retained once, cuCtxSetCurrent before each kernel,
    cuCtxPushCurrent/PopCurrent around device 1's drain, the gradients copied with cuMemcpyPeer (then
    cuMemcpyPeerAsync). No cudaSetDevice is made in the loop, so the kernels' devices come from the
    contexts alone: each device's bounds hold its truth with sleeping and spinning waits, and every
    driver call counts exactly as the loop counted it."""
    notes = []
    for schedule, args in (("blocking", []), ("spin", []), ("blocking", ["--peer-async"])):
        # The simulator's libcuda.so.1 is in a folder of its own (tests/gpusim/gpusim.mk).
        sim_env = {"GPUSIM_SCHEDULE": schedule, "LD_LIBRARY_PATH": f"{GPUSIM_DIR}:{os.path.join(GPUSIM_DIR, 'driver')}"}
        s, truth, d = run_scenario("two-gpus-peer", sim_env=sim_env, train_args=["--driver-ctx"] + args)
        want = truth[1]["driver_calls"]
        p = next(p for p in s["processes"] if p["cuda"]["calls"].get("cudaLaunchKernel"))
        got = {api: p["cuda"]["calls"].get(api, {}).get("count", 0) for api in want}
        check(got == want and want["cuCtxSetCurrent"] > 0, f"{schedule} {args}: driver calls {got}, the loop made {want}")
        notes.append(f"{schedule} {' '.join(args)}: " + judge("two-gpus-peer", s, truth, sim_env) +
                     f"; driver calls exact: {want}")
    return " | ".join(notes)


# The simulator's latencies and bandwidths, varied around its defaults (10 us a copy, 24 GB/s
# pinned, a third of it pageable, 5 us a launch): the model takes none of them, so verdicts and
# bounds must hold at each.
SIM_VARIANTS = {
    "fast link": {"GPUSIM_COPY_LATENCY_US": "3", "GPUSIM_PINNED_GBPS": "25", "GPUSIM_PAGEABLE_GBPS": "8.3",
                  "GPUSIM_LAUNCH_US": "2", "GPUSIM_SCHEDULE": "spin"},
    "slow link": {"GPUSIM_COPY_LATENCY_US": "30", "GPUSIM_PINNED_GBPS": "6", "GPUSIM_PAGEABLE_GBPS": "2",
                  "GPUSIM_LAUNCH_US": "8", "GPUSIM_SCHEDULE": "yield"},
}
VARIED = ("gpu", "input", "pageable", "sync-copies", "launch")
# The verdict a phase the workload measured stands for.
PHASE_VERDICT = {"input_wait": "input-bound", "host_cpu": "host-compute-bound", "h2d": "copy-bound",
                 "launch": "launch-bound", "gpu_wait": "gpu-bound"}


def moved_verdicts(name, tsteps, sim_env):
    """The verdicts of the workload's phases with each probed phase's probes' share (a traced run's
    phase less the untraced run's, see PROBED_PHASES) moved to the CPU, as the shares are judged: the
    workload clocks a probe's trap inside its call, dlbpf as the thread's CPU time, which decides the
    verdict where a call is as short as the trap (fast-link sync copies of 4 KiB that a polling wait
    ends in 3 us)."""
    shares = truth_shares(tsteps)
    for k, v in probe_shares(tsteps, untraced_phases(name, sim_env)).items():
        shares[k] -= v
        shares["host_cpu"] += v
    top = sorted(((v, k) for k, v in shares.items() if k in PHASE_VERDICT), reverse=True)
    return {PHASE_VERDICT[k] for v, k in top if top[0][0] - v < SHARE_PP}


def truth_verdicts(tsum):
    """Other settings move the phases: the verdict is the workload's own dominant phase, or either
    of the top two when they lie within SHARE_PP points of each other."""
    share = sorted(((v, k) for k, v in tsum["phase_share"].items() if k in PHASE_VERDICT), reverse=True)
    if 100 * (share[0][0] - share[1][0]) < SHARE_PP:
        return {PHASE_VERDICT[share[0][1]], PHASE_VERDICT[share[1][1]]}
    return {PHASE_VERDICT[share[0][1]]}


def test_simulator_settings_varied():
    """Scenarios on the simulator with its copy latency 3 and 30 us, link 25 and 6 GB/s, launch 2 and
    8 us, waits that spin and that yield: each verdict the workload's own dominant phase, and the bounds
    hold as on the defaults.
    (Phase shares are the scenario tests' business: at 3 us a copy, the tracer's own cost between
    calls, inside the workload's copy phase, is a few points of it.)"""
    notes = []
    for label, sim_env in SIM_VARIANTS.items():
        for name in VARIED:
            s, (tsteps, tsum, busy), _ = run_scenario(name, sim_env=sim_env)
            want, verdict = truth_verdicts(tsum), s["diagnosis"].get("verdict")
            if verdict not in want:
                want = want | moved_verdicts(name, tsteps, sim_env)
            check(verdict in want, f"{label} {name}: verdict {verdict}, the workload's phases say "
                  f"{' or '.join(sorted(want))}")
            notes.append(f"{label} {name}: {verdict}, "
                         f"{judge_bounds(name, s['steps'], busy, polling_runq(tsteps, sim_env))}")
    return "; ".join(notes)


# The all-reduce scenario with the collective's cost, the communicator, the gradients and the compute
# ahead of them varied: bus 10 to 100 GB/s, 5 to 60 us a collective, 2 to 16 ranks, 8 to 64 MiB.
COMM_VARIANTS = {
    "defaults": ({}, []),
    "slow bus, big buffer": ({"GPUSIM_NCCL_GBPS": "10", "GPUSIM_NCCL_LATENCY_US": "60"},
                             ["--allreduce-kb", "65536", "--ranks", "16", "--steps", "80"]),
    "fast bus, 2 ranks": ({"GPUSIM_NCCL_GBPS": "100", "GPUSIM_NCCL_LATENCY_US": "5", "GPUSIM_LAUNCH_US": "2"},
                          ["--allreduce-kb", "8192", "--ranks", "2", "--kernel-us", "300"]),
    "no kernels ahead": ({"GPUSIM_NCCL_LATENCY_US": "30"}, ["--kernels", "0", "--allreduce-kb", "16384"]),
}
# A wait's edges: the workload's clock reads around the loss copy against dlbpf's entry and return
# probes, a few us apart (a probe's cost), more when a boundary is preempted; the means are compared,
# within 5% of the mean wait or 100 us per step. Against the device's model times the host's wake-up
# latency comes in too (0.16 ms per step seen here), which only adds to comm_wait.
COMM_TOL_REL, COMM_TOL_NS = 0.05, 100_000


def comm_truth(path):
    """Each step's line of the workload's truth with its comm line (train_comm.c) beside it."""
    out, last = [], None
    for line in open(path):
        l = json.loads(line)
        if "step" in l:
            last = dict(l)
            out.append(last)
        elif "comm" in l and last is not None:
            last["comm"] = l["comm"]
    return out


def test_comm_wait_against_truth():
    """The step waits on a gradient all-reduce (NCCL, loaded late by dlopen): comm-bound; over the matched
    steps, comm_wait is the loss copy's wait as the workload clocks it (all of it: the last work it
    waits for is the collective), and holds all the exposed communication of the simulator's own
    timeline (what it adds is the compute queued ahead, which the host cannot tell apart, and the
    wake-up after it); the exposed-communication finding's bytes and collectives per step are the
    workload's; at several bus speeds, latencies, ranks and sizes."""
    notes = []
    for label, (sim_env, extra) in COMM_VARIANTS.items():
        truth_path = os.path.join(WORK, f"truth-comm-{len(notes)}.jsonl")
        env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR, **sim_env)
        d = Dlbpf(["--", workload("train"), "--scenario", "comm", "--quiet", "--truth", truth_path] + extra,
                  env=env)
        rc = d.wait(timeout=120)
        check(rc == 0, f"{label}: dlbpf exited {rc}: {d.stderr[-2000:]}")
        s, tsteps = d.summary(), comm_truth(truth_path)
        check(all("comm" in t and t["comm"]["collectives"] == 1 for t in tsteps),
              f"{label}: the workload's truth lacks a collective per step (not on the simulator?)")
        marker = s["step_markers"][0]["marker"]
        pairs = [(st, tsteps[k]) for st, k in
                 matched_indices(s["steps"], truth_cuts(tsteps, marker), cut_before_call(marker))]
        check(len(pairs) >= len(s["steps"]) - 1, f"{label}: {len(s['steps']) - len(pairs)} steps match none")
        mean = lambda f: sum(f(st, t) for st, t in pairs) / len(pairs)
        ours = mean(lambda st, t: st["breakdown_ns"]["comm_wait"])
        wait = mean(lambda st, t: t["phases_ns"]["gpu_wait"])
        exposed = mean(lambda st, t: t["comm"]["exposed_ns"])
        ahead = mean(lambda st, t: t["comm"]["ahead_ns"])
        got = (f"comm_wait {ours / 1e6:.3f} ms per step; the workload's wait {wait / 1e6:.3f}, on the device "
               f"exposed {exposed / 1e6:.3f} after {ahead / 1e6:.3f} of compute ahead")
        check(abs(ours - wait) <= max(COMM_TOL_REL * wait, COMM_TOL_NS), f"{label}: {got}")
        check(ours >= exposed - COMM_TOL_NS, f"{label}: exposed communication under-counted: {got}")
        verdict = s["diagnosis"]["verdict"]
        check(verdict == "comm-bound", f"{label}: verdict {verdict}")
        finding = [f for f in s["diagnosis"]["findings"] if f["rule"] == "exposed-communication"]
        check(len(finding) == 1, f"{label}: no exposed-communication finding: {s['diagnosis']['findings']}")
        ev, nbytes = finding[0]["evidence"], tsteps[0]["comm"]["bytes"]
        # Kernels are queued ahead of every all-reduce, or of none: all of comm_wait says so, or none.
        behind = 1.0 if tsteps[0]["kernels"] else 0.0
        check(abs(ev["after_compute_share"] - behind) < 1e-9,
              f"{label}: after_compute_share {ev['after_compute_share']}, kernels ahead of every collective: {behind}")
        # Per step over every step: one step at an edge of the run may hold no collective.
        n = len(s["steps"])
        check(abs(ev["bytes_per_step"] - nbytes) <= nbytes / n and abs(ev["collectives_per_step"] - 1) <= 1 / n,
              f"{label}: {ev['bytes_per_step']} bytes in {ev['collectives_per_step']} collectives per step, "
              f"the workload all-reduced {nbytes} in 1")
        ar = [p["cuda"]["calls"].get("ncclAllReduce") for p in s["processes"] if "ncclAllReduce" in p["cuda"]["calls"]]
        check(len(ar) == 1 and ar[0]["count"] == len(tsteps) and ar[0]["errors"] == 0,
              f"{label}: ncclAllReduce counted {ar}, the workload made {len(tsteps)}")
        notes.append(f"{label}: {got}, {len(pairs)} steps")
        os.unlink(truth_path)
    return "; ".join(notes)


def test_step_on_marker_symbol():
    """--step-on the workload's own marker function: steps match the workload's one for one."""
    s, truth, d = run_scenario("gpu", ["--step-on", "train_step_begin"])
    markers = s["step_markers"]
    check(markers and "train_step_begin" in markers[0]["marker"], f"marker not used: {markers}")
    tsteps = truth[0]
    check(len(s["steps"]) == len(tsteps) - 1, f"{len(s['steps'])} steps for {len(tsteps)} markers")
    # Step k of dlbpf starts at the workload's step k: the uprobe fires at the marker's first
    # instruction, the workload reads its clock right after it returns (begin_ns; later by a
    # preemption, at worst, so a count of the starts more than 200 us apart, not their mean, which
    # one preemption can move). Its start_ns is the previous step's end, before it writes its truth:
    # a write to the disk there put a tenth of the starts 200-360 us before the marker.
    far = sum(abs(st["start_ns"] - t["begin_ns"]) >= 200_000 for st, t in zip(s["steps"], tsteps))
    check(far * 10 <= len(s["steps"]), f"{far} of {len(s['steps'])} step starts differ from the workload's "
          "by 200 us or more")
    return judge("gpu", s, truth) + f"; {far} of {len(s['steps'])} starts 200 us or more apart"


def test_step_on_cuda_api():
    """--step-on a CUDA API: every call of it starts a step."""
    s, truth, _ = run_scenario("launch", ["--step-on", "cudaMemcpyAsync"])
    check("--step-on cudaMemcpyAsync" in s["step_markers"][0]["marker"], "API marker not used")
    return judge("launch", s, truth)


def test_replay_equals_live():
    """The JSON of a replayed recording equals the JSON of the live run that recorded it."""
    rec = os.path.join(WORK, "replay.dlbpf")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    live = os.path.join(WORK, "replay-live.json")
    r = subprocess.run([DLBPF, "record", "-q", "-o", rec, "--json", live, "--", workload("train"),
                        "--scenario", "input", "--steps", "40", "--quiet"],
                       capture_output=True, text=True, env=env, timeout=120)
    check(r.returncode == 0, f"record failed: {r.stderr}")
    replay = os.path.join(WORK, "replay-report.json")
    r2 = subprocess.run([DLBPF, "report", rec, "--json", replay], capture_output=True, text=True, timeout=60)
    check(r2.returncode == 0, f"report failed: {r2.stderr}")
    a, b = load_summary(live), load_summary(replay)
    check(a == b, "replayed JSON differs from the live run's: "
          + str([k for k in a if a[k] != b.get(k)]))
    check(len(a["steps"]) >= 35 and a["diagnosis"]["verdict"] == "input-bound",
          f"{len(a['steps'])} steps, {a['diagnosis'].get('verdict')}")
    # The text report too, but for the line that names the recording.
    strip = lambda t: [l for l in t.splitlines() if l and "recorded" not in l]
    check(strip(r.stdout) == strip(r2.stdout), "replayed text report differs from the live one")
    return f"{len(a['steps'])} steps, identical JSON and report"


def test_keep_steps_folds():
    """--keep-steps 25 on a run of a few hundred steps: the latest 25 listed in full, the same as a
    run that keeps every step; the outliers, the totals and the diagnosis unchanged by the fold; the
    median and
    p90 within the fold's histogram resolution (half a bucket of 1/128 octave: 0.39%)."""
    rec = os.path.join(WORK, "keep.dlbpf")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    live = os.path.join(WORK, "keep-live.json")
    r = subprocess.run([DLBPF, "record", "-q", "--keep-steps", "25", "-o", rec, "--json", live, "--",
                        workload("train"), "--scenario", "gpu", "--steps", "300", "--kernels", "3",
                        "--kernel-us", "700", "--quiet"], capture_output=True, text=True, env=env, timeout=120)
    check(r.returncode == 0, f"record failed: {r.stderr}")
    runs = {}
    for keep in ("0", "25"):
        out = os.path.join(WORK, f"keep-{keep}.json")
        p = subprocess.run([DLBPF, "report", rec, "--keep-steps", keep, "--json", out], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0, f"report --keep-steps {keep} failed: {p.stderr}")
        runs[keep] = load_summary(out)
    full, kept = runs["0"], runs["25"]
    check(load_summary(live) == kept, "the live run's JSON differs from its replay with the same --keep-steps")
    fm, km = full["step_markers"][0], kept["step_markers"][0]
    n = fm["steps"]
    check(n >= 290 and fm["steps_listed"] == n == len(full["steps"]) and fm["percentiles_exact"],
          f"full run: {fm}, {len(full['steps'])} listed")
    check(km["steps"] == n and km["steps_listed"] == 25 and not km["percentiles_exact"], f"kept run: {km}")
    check(kept["steps"] == full["steps"][-25:], "the 25 listed steps are not the run's last 25")
    # Outliers are judged alike (a folded step that may be one is held whole for it): the same
    # steps are left out of both, and with them added back the totals are every step's.
    check(fm["outliers"]["indexes"] == km["outliers"]["indexes"], f"outliers {fm['outliers']} vs {km['outliers']}")
    check(kept["diagnosis"]["breakdown_ns"] == full["diagnosis"]["breakdown_ns"]
          and kept["diagnosis"]["verdict"] == full["diagnosis"]["verdict"],
          f"diagnosis changed by the fold: {kept['diagnosis']['verdict']} vs {full['diagnosis']['verdict']}")
    for q in ("median_ns", "p90_ns"):
        check(abs(km[q] - fm[q]) <= fm[q] / 256, f"{q}: {km[q]} folded vs {fm[q]} exact")
    # The same durations summed in another order: double rounding only.
    check(abs(km["cv"] - fm["cv"]) <= 1e-9, f"CV {km['cv']} folded vs {fm['cv']}")
    return f"{n} steps, 25 listed, median {km['median_ns']} vs exact {fm['median_ns']}"


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def test_bad_recordings():
    """Newer ABI, not a recording: a clear error and exit 1; truncated or corrupt past the header: the
    records before the damage reported with a warning saying where, exit 0; never a crash."""
    rec = os.path.join(WORK, "replay.dlbpf")
    check(os.path.exists(rec), "needs the recording of test_replay_equals_live")
    data = open(rec, "rb").read()
    hsize = struct.unpack_from("<I", data, 8)[0]
    cases = []
    newer = bytearray(data)
    struct.pack_into("<I", newer, 12, 99)
    cases.append(("newer", bytes(newer), "recorded with event ABI 99"))
    cases.append(("notrec", b"hello world, not a recording at all", "not a dlbpf recording"))
    cases.append(("empty", b"", "not a dlbpf recording"))
    cases.append(("cut-header", data[:hsize - 1], "truncated header"))
    for name, blob, needle in cases:
        path = os.path.join(WORK, f"bad-{name}.dlbpf")
        write_bytes(path, blob)
        p = subprocess.run([DLBPF, "report", path], capture_output=True, text=True, timeout=30)
        check(p.returncode == 1, f"{name}: exit {p.returncode} (expected 1): {p.stderr[-300:]}")
        check(needle in p.stderr, f"{name}: stderr lacks '{needle}': {p.stderr.strip()[-300:]}")
    # Damage past the header: what came before it is reported. The cut's offset is the last record's, as the
    # independent reader (recording.py, either encoding) finds it; a cut one byte into it leaves the others
    # whole. A first record that cannot be one (a verbatim size under the header's 24 bytes, or a compact
    # head of mode 3, which the format does not have) stops the replay at once.
    parsed = recording.read(data=data)
    check(parsed.stop is None and len(parsed.records) > 1, f"the recording reads {parsed.stop}")
    last, first_bad = parsed.records[-1][0], bytearray(data)
    if parsed.encoding == recording.COMPACT:
        first_bad[hsize] = 3
    else:
        struct.pack_into("<H", first_bad, hsize, 3)
    n = len(parsed.records)
    for name, blob, needle in (("truncated", data[:last + 1], f"cut short) at byte {last}; the {n - 1} records"),
                               ("corrupt", bytes(first_bad), f"corrupt from there) at byte {hsize}; the 0 records")):
        path = os.path.join(WORK, f"bad-{name}.dlbpf")
        write_bytes(path, blob)
        p = subprocess.run([DLBPF, "report", path], capture_output=True, text=True, timeout=30)
        check(p.returncode == 0, f"{name}: exit {p.returncode} (expected 0): {p.stderr[-300:]}")
        check(needle in p.stderr, f"{name}: stderr lacks '{needle}': {p.stderr.strip()[-300:]}")
    p = subprocess.run([DLBPF, "report", os.path.join(WORK, "missing.dlbpf")], capture_output=True, text=True)
    check(p.returncode == 1 and "cannot open" in p.stderr, f"missing file: {p.stderr}")


def test_summary_schema_rejects_breaches():
    """A real summary follows include/dlbpf/summary.schema.json; each breach of it (a key the schema does
    not name, a wrong type, a missing required key, a wrong enum or const) is reported at its place."""
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    d = Dlbpf(["--", workload("train"), "--scenario", "input", "--steps", "12", "--quiet"], env=env)
    rc = d.wait(timeout=120)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    good = d.summary()
    check(good["steps"] and good["processes"][0]["cuda"]["calls"], "premise: a summary with steps and CUDA calls")

    def breach(edit):
        doc = copy.deepcopy(good)
        edit(doc)
        return violations(doc)

    cases = {
        "processes/0/cuda": lambda s: s["processes"][0]["cuda"].update(surprise=1),
        "drops": lambda s: s["drops"].update(lost_events=0),
        "steps/0/dur_ns": lambda s: s["steps"][0].update(dur_ns=str(s["steps"][0]["dur_ns"])),
        "duration_ns": lambda s: s.update(duration_ns=s["duration_ns"] + 0.5),
        "steps/0/io_ns": lambda s: s["steps"][0].update(io_ns=-1),
        "diagnosis": lambda s: s["diagnosis"].pop("findings"),
        "processes/0/sched": lambda s: s["processes"][0]["sched"].pop("runq_ns"),
        "steps/0/verdict": lambda s: s["steps"][0].update(verdict="fast"),
        "schema": lambda s: s.update(schema=2),
        "diagnosis/findings/0/evidence": lambda s: s["diagnosis"].update(
            findings=[{"rule": "async-io", "message": "m", "evidence": {"bytes": 1}}]),
    }
    for where, edit in cases.items():
        bad = breach(edit)
        check(len(bad) == 1 and bad[0].startswith(where + ": "), f"breach at {where}: reported as {bad}")
    return f"{len(cases)} breaches, each reported at its place"


# Inferred kernel durations against the costs the workload gave the simulator, at two settings: the
# 8 kernel functions each their own cost, 1 to 16 launches a step so the mixes differ.
KDUR_SETTINGS = {
    "200-550 us": ["--kernel-us", "200", "--kernel-us-spread", "50", "--steps", "120"],
    "800-1850 us": ["--kernel-us", "800", "--kernel-us-spread", "150", "--steps", "80"],
}
# A window's device time is read from host clocks: its first enqueue's entry and the drain's wake-up.
# The wake-up lags the device's completion by the host's wake-up latency, tens of us on this VM and
# varying window to window; its mean goes to the per-window constant, its spread is the fit's
# residual, and stderr is that residual carried to each mean. So a mean may be off by a few stderr
# (4 here), and by a little more than noise: 2% of the cost or 15 us for what stderr does not model
# (a preempted enqueue, the launch path's cost). A model that counts a kernel wrong, or windows
# with the wrong kernels, is off by whole kernels: 50 us or more between neighbours here.
KDUR_SIGMAS, KDUR_REL, KDUR_NS = 4.0, 0.02, 15_000


def test_kernel_durations_inferred():
    """Per kernel name, dlbpf's inferred mean device time against the workload's gpusimSetKernelCost."""
    notes = []
    for label, extra in KDUR_SETTINGS.items():
        s, (tsteps, tsum, busy), _ = run_scenario("gpu", train_args=["--kernels", "16", "--kernels-vary"] + extra)
        truth = tsum["kernel_cost_ns"]
        kernels = [k for p in s["processes"] for k in p["cuda"]["kernels"] if k["name"] in truth]
        check(sorted(k["name"] for k in kernels) == sorted(truth), f"{label}: kernels {[k['name'] for k in kernels]}")
        worst = 0.0
        for k in kernels:
            inf, want = k["inferred_ns"], truth[k["name"]]
            check(inf is not None, f"{label}: {k['name']} not determined")
            tol = KDUR_SIGMAS * inf["stderr"] + max(KDUR_REL * want, KDUR_NS)
            err = inf["mean"] - want
            check(abs(err) <= tol, f"{label}: {k['name']} inferred {inf['mean'] / 1e3:.1f} us, set "
                  f"{want / 1e3:.1f} us (allowed {tol / 1e3:.1f}; stderr {inf['stderr'] / 1e3:.1f}, residual "
                  f"{inf['residual'] / 1e3:.1f} us, {inf['windows']} windows)")
            worst = max(worst, abs(err) / want)
        notes.append(f"{label}: " + ", ".join(f"{k['inferred_ns']['mean'] / 1e3:.0f}/{truth[k['name']] / 1e3:.0f}"
                                               for k in kernels) + f" us (worst {worst * 100:.1f}%)")
    return "; ".join(notes)


if __name__ == "__main__":
    main()
