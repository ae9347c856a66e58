#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Integration tests of the low-overhead modes: --summary (CUDA calls counted
in BPF maps, no per-call records) against the exact counts the cuda_calls
workload prints, and --duty M/N (hot probes attached part of the time) against
the call count the ratecalls generator prints. Run as root. No timing
assertions: the duty estimates are judged against the generator's own count,
within a fixed tolerance derived from how the windows sample it (duty_tolerance),
and their stated bounds must both hold and be useful."""
import json
import re

from harness import (Dlbpf, Failure, check, check_copies_and_calls, main, process, run_dlbpf,
                     trace_waiting, truth_line, workload)


def test_summary_exact_counts():
    """--summary: call counts, errors, copy counts and bytes, kernel counts equal the workload's own."""
    d = Dlbpf(["--summary", "--", workload("cuda_calls")])
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    truth = truth_line(d.stdout, "{\"h2d\"")
    s = d.summary()
    cuda = process(s, s["processes"][0]["pid"])["cuda"]
    check_copies_and_calls(cuda, truth)
    for api, n in truth["calls"].items():
        got = cuda["calls"].get(api, {})
        if api != "cudaLaunchKernel":
            check(got["errors"] == n, f"{api}: {got['errors']} errors of {n} (every call fails without a GPU)")
    kernels = {k["name"]: k["count"] for k in cuda["kernels"]}
    want = {k["name"]: k["count"] for k in truth["kernels"]}
    check(kernels == want, f"kernels {kernels} != {want}")
    check("CUDA call durations (in-kernel log2 histograms" in d.stdout, "no duration histograms in the report")
    hist = re.search(r"cudaMemcpy \((\d+) calls\)", d.stdout)
    check(hist and int(hist.group(1)) == truth["calls"]["cudaMemcpy"], "cudaMemcpy histogram count")
    return f"{sum(truth['calls'].values())} calls in {len(truth['calls'])} APIs matched, no per-call records"


def test_summary_pid_and_rate():
    """--summary on a running process at 20 k calls/s: exact count, zero drops."""
    w, out, d, rc = trace_waiting([workload("ratecalls"), "--wait", "--rate", "20000", "--seconds", "1"],
                                  ["--summary"], timeout=30)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    truth = truth_line(out, "{\"api\"")
    s = d.summary()
    got = process(s, w.pid)["cuda"]["calls"]["cudaLaunchKernel"]["count"]
    check(got == truth["calls"], f"{got} launches counted, workload made {truth['calls']}")
    check(s["drops"]["events"] == 0, f"drops: {s['drops']}")
    return f"{got} launches"


DUTY_RE = re.compile(r"observed ([\d.]+)% of ([\d.]+) s \((\d+) windows\)")

# The generator's start (exec, loading the runtime, its first call) falls inside the first window,
# 14 ms measured here, and its exit after its last call inside the trace: 50 ms allowed for each.
GENERATOR_START_S = 0.05
GENERATOR_EXIT_S = 0.05


def duty_tolerance(truth, frac, windows):
    """How far a duty-scaled count of ratecalls may be from its true count, from how the windows
    sample it. ratecalls paces its calls: those made in any interval of length D number
    rate * D within rate * L, L the furthest it fell behind its schedule (it prints L). The
    estimate scales what the windows saw by 1/frac, so each window's count may be off by
    rate * L, times 1/frac; the true count by rate * L too. Beside that: the generator's start,
    which the first window spends without calls and the scaling multiplies by 1/frac - 1 (it
    stands for the unobserved time too); its exit, traced time without calls; and a call cut
    at each edge of each window."""
    rate = truth["calls"] / truth["seconds"]
    lag = truth["max_lag_s"]
    return (rate * (GENERATOR_START_S * (1 / frac - 1) + GENERATOR_EXIT_S + lag * (windows / frac + 1))
            + 2 * windows)


def check_scaled(what, est, unc, n, tol):
    check(abs(est - n) <= tol, f"{what}: scaled {est}, true {n}: off by {abs(est - n)}, allowed {tol:.0f}")
    check(abs(est - n) <= unc, f"{what}: the stated bound {est} +- {unc} misses the true {n}")
    check(unc < 0.25 * n, f"{what}: uncertainty {unc} is over 25% of {n}: not useful")


def duty_run(api, rate, seconds, duty):
    d = Dlbpf(["--duty", duty, "--", workload("ratecalls"), "--api", api, "--rate", str(rate),
               "--seconds", str(seconds)])
    rc = d.wait(timeout=seconds + 60)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    truth = truth_line(d.stdout, "{\"api\"")
    m = DUTY_RE.search(d.stdout)
    check(m, "no duty-cycle section in the report: " + d.stdout[-800:])
    frac, windows = float(m.group(1)) / 100, int(m.group(3))
    scaled = re.search(r"duty-scaled %s\s+seen\s+(\d+)\s+scaled\s+(\d+) \+- (\d+)" % truth["api"], d.stdout)
    check(scaled, f"no scaled count for {truth['api']}: " + d.stdout[-800:])
    seen, est, unc = (int(x) for x in scaled.groups())
    check("fully observed windows" in d.stdout, "windows not listed")
    return d, truth, frac, windows, seen, est, unc


def test_duty_scaled_launches():
    """--duty 1/2 on 6 s of launches: about half observed; the scaled count brackets the true count."""
    d, truth, frac, windows, seen, est, unc = duty_run("launch", 20000, 6, "1/2")
    n = truth["calls"]
    check(0.2 < frac < 0.8, f"observed fraction {frac} for a 1/2 duty cycle")
    check(windows >= 3, f"{windows} windows in 6 s at 1/2")
    check(seen < n, f"saw {seen} of {n}: the probes were never off")
    tol = duty_tolerance(truth, frac, windows)
    check_scaled("launches", est, unc, n, tol)
    s = d.summary()
    got = process(s, s["processes"][0]["pid"])["cuda"]["calls"]["cudaLaunchKernel"]["count"]
    check(got == seen, f"JSON count {got} is not the observed {seen}")
    return (f"observed {frac:.1%}, seen {seen}, scaled {est} +- {unc}, true {n}, allowed +- {tol:.0f} "
            f"(generator's lag {truth['max_lag_s'] * 1e3:.1f} ms)")


def test_duty_scaled_copies_with_summary():
    """--duty with --summary: copies scaled from the in-kernel aggregates."""
    d = Dlbpf(["--summary", "--duty", "1/3", "--", workload("ratecalls"), "--api", "copy", "--rate", "10000",
               "--seconds", "6"])
    rc = d.wait(timeout=70)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    truth = truth_line(d.stdout, "{\"api\"")
    m = re.search(r"duty-scaled cudaMemcpy\s+seen\s+(\d+)\s+scaled\s+(\d+) \+- (\d+)", d.stdout)
    check(m, "no scaled cudaMemcpy: " + d.stdout[-800:])
    seen, est, unc = (int(x) for x in m.groups())
    n = truth["calls"]
    w = DUTY_RE.search(d.stdout)
    check(w, "no duty-cycle section in the report: " + d.stdout[-800:])
    frac, windows = float(w.group(1)) / 100, int(w.group(3))
    check(seen < n, f"saw {seen} of {n}: the probes were never off")
    tol = duty_tolerance(truth, frac, windows)
    check_scaled("cudaMemcpy", est, unc, n, tol)
    b = re.search(r"duty-scaled memcpy h2d\s+copies (\d+) \+- (\d+), bytes (\d+) \+- (\d+)", d.stdout)
    check(b, "no scaled h2d bytes: " + d.stdout[-800:])
    # Every copy is 256 bytes: the bytes are sampled as the copies are.
    check_scaled("h2d bytes", int(b.group(3)), int(b.group(4)), 256 * n, 256 * tol)
    return (f"observed {frac:.1%}, seen {seen}, scaled {est} +- {unc}, true {n}, allowed +- {tol:.0f} "
            f"(generator's lag {truth['max_lag_s'] * 1e3:.1f} ms)")


def test_mode_bad_input():
    for bad in ("2/1", "0/4", "1", "a/b", "1/0"):
        rc, _, err = run_dlbpf(["--duty", bad, "--", "true"])
        check(rc != 0 and "invalid duty cycle" in err, f"--duty {bad}: rc {rc}, {err.strip()}")


if __name__ == "__main__":
    main()
