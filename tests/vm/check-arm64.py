#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Judges what tests/vm/arm64-smoke.sh left in an arm64 guest's output folder, on the host, with
the x86 suites' own checks: cuda_calls' exact counts, bytes and launch dimensions against its
truth line (test_dlbpf.compare_cuda), no event lost, each summary valid against the schema, and
the input and gpu scenarios' verdicts, steps, totals and shares against the workload's clocks
(test_scenarios.judge and judge_report_lines, with the emulator's allowances), and probe_stress:
every result right with a uprobe on a function that starts with an instruction arm64 steps.
  tests/vm/check-arm64.py OUT-DIR"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
os.environ["DLBPF_TEST_EMULATED"] = "1"   # before test_scenarios reads it: TCG runs at the emulator's pace

from harness import Failure, check, process  # noqa: E402
from summary_schema import violations  # noqa: E402
import test_callsites  # noqa: E402
import test_dlbpf  # noqa: E402
import test_files  # noqa: E402
import test_pyframes  # noqa: E402
import test_scenarios  # noqa: E402


CROSS_OUT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".output-arm64"))
PROBE_STRESS = os.path.join(CROSS_OUT, "workloads", "probe_stress")


def load(out, name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)


def text(out, name):
    with open(os.path.join(out, name)) as f:
        return f.read()


def no_drops(name, s):
    lost = {k: v for k, v in s["drops"].items() if isinstance(v, int) and v}
    check(not lost, f"{name}: events lost: {lost}")
    bad = violations(s)
    check(not bad, f"{name}: summary breaks the schema: {bad[:3]}")


def stolen(out, scenario):
    """/proc/stat's steal column over the run, in ns (the guest's USER_HZ is 100 on Debian's kernels)."""
    ticks = [int(text(out, f"stat-{scenario}.{w}").split()[8]) for w in ("before", "after")]
    return (ticks[1] - ticks[0]) * 10_000_000


def check_cuda_calls(out):
    s = load(out, "cuda_calls.json")
    no_drops("cuda_calls", s)
    truth = test_dlbpf.cuda_truth(text(out, "cuda_calls.out"))
    p = process(s, s["processes"][0]["pid"])
    test_dlbpf.compare_cuda(p, truth, expect_errors=False)   # the simulator: calls succeed
    return f"{truth['h2d']['count']} h2d, {truth['d2h']['count']} d2h, {sum(truth['calls'].values())} calls exact"


def check_scenario(out, name):
    s = load(out, f"train-{name}.json")
    no_drops(name, s)
    truth = test_scenarios.truth_of(os.path.join(out, f"truth-{name}.jsonl"))
    truth[2].stolen = stolen(out, name)
    # The probes' share is the traced run's phases less an untraced run's on the same machine: the
    # guest's (its emulated traps cost what they cost there), not the host's x86 workload.
    test_scenarios.untraced_phases = lambda n, *_: test_scenarios.phase_means(
        os.path.join(out, f"truth-{n}-untraced.jsonl"))
    test_scenarios.judge_report_lines(name, s, text(out, f"train-{name}.out"))
    return f"{s['diagnosis']['verdict']}: " + test_scenarios.judge(name, s, truth)


def check_chroot(out):
    """The static executable in a root holding only it, the workload and the workload's own libraries."""
    files = text(out, "chroot-files.txt").split()
    check(not [f for f in files if "libbpf" in f or "libelf" in f or "libz." in f], f"the root holds {files}")
    check(text(out, "chroot-version.txt") == text(out, "version.txt"),
          f"--version in the root: {text(out, 'chroot-version.txt')!r}")
    s = load(out, "chroot-cuda_calls.json")
    no_drops("chroot cuda_calls", s)
    truth = test_dlbpf.cuda_truth(text(out, "chroot-cuda_calls.out"))
    test_dlbpf.compare_cuda(process(s, s["processes"][0]["pid"]), truth, expect_errors=False)
    return f"{len(files)} files in the root; --version and cuda_calls' {sum(truth['calls'].values())} calls exact"


def check_files(out):
    """The files source by each mechanism the kernel offers (its features line names the cheapest;
    on arm64 the handlers are __arm64_sys_*): fileread's bytes, calls and disk bytes exact, and dlbpf
    says which mechanism it runs on."""
    have = {l.split()[0]: l.split()[1] for l in text(out, "features.txt").splitlines() if len(l.split()) > 1}
    offered = [m for m, _ in test_files.MECHS if m == "tracepoint" or have.get("kprobes" if m == "kprobe" else m) == "yes"]
    check(have.get("files") == offered[0], f"features names files {have.get('files')}, the cheapest offered is {offered[0]}")
    notes = []
    for mech in offered:
        s = load(out, f"files-{mech}.json")
        no_drops(f"files {mech}", s)
        check(test_files.SAID[mech] in text(out, f"files-{mech}.err"), f"{mech}: no start-up line says so")
        truths = {t["pid"]: t for t in (json.loads(l) for l in text(out, f"files-{mech}.out").splitlines()
                                       if l.startswith("{"))}
        check(len(truths) == 2, f"{mech}: fileread's truth lines: {sorted(truths)}")
        n = test_files.compare_files(s, truths)
        disk = sum(f["io_delta"] for t in truths.values() for f in t["files"] if not f.get("mmap"))
        check("cannot remove" not in text(out, f"files-{mech}.err"), f"{mech}: {text(out, f'files-{mech}.err')[-800:]}")
        notes.append(f"{mech} {n} files exact ({disk} disk bytes)")
    left = [l for l in text(out, "kprobe_events-after.txt").splitlines() if ":dlbpf/" in l]
    check(not left, f"return probes left in tracefs: {left}")
    return "; ".join(notes)


def check_python(out):
    """pytrain.py under Debian's arm64 CPython 3.11: the exact file, function and line of each CUDA
    call and of its caller for >= 99% of the calls, as test_pyframes.check_version asks on x86."""
    err = text(out, "pytrain.err")
    s = load(out, "pytrain.json")
    no_drops("pytrain", s)
    t = test_dlbpf.truth_line(text(out, "pytrain.out"), '{"pyframes"')
    check(t["python"] == [3, 11], f"the guest's python is {t['python']}")
    check("CPython 3.11" in err, f"no notice that Python frames are read: {err[-1500:]}")
    notes = []
    for pid, truth in t["pyframes"].items():
        p = process(s, int(pid))
        got = test_pyframes.measured(p, t["file"])
        matched, total = test_pyframes.accuracy(truth, got)
        check(total > 0, f"pid {pid}: the workload counted no calls")
        check(matched >= 0.99 * total, f"pid {pid}: {matched}/{total} calls at their exact line; truth {truth}, dlbpf {got}")
        notes.append(f"pid {pid}: {matched}/{total} calls at their exact line")
    return "; ".join(notes)


def check_callsites(out):
    """Each named function's calls exactly, at offsets right after a bl/blr (test_callsites'
    check_c_sites, read with the cross binutils), and no unknown site."""
    test_callsites.BINUTILS, test_callsites.CALLS = "aarch64-linux-gnu-", ("bl",)
    s = load(out, "callsites.json")
    no_drops("callsites", s)
    check(len(s["processes"]) == 1, f"expected one process, got {[p['pid'] for p in s['processes']]}")
    p = s["processes"][0]
    truth = test_dlbpf.truth_line(text(out, "callsites.out"), '{"sites"')
    got = test_callsites.own_sites(p, os.path.join(CROSS_OUT, "workloads", "callsites"))
    want = {fn: sum(apis.values()) for fn, apis in truth["sites"].items()}
    want["main"] = 1   # its cudaMalloc
    check(got == want, f"calls by function: dlbpf {got}, workload {want}")
    check(not [x for x in p["call_sites"] if x["kind"] == "unknown"], "unknown sites with a readable stack")
    return f"{sum(got.values())} calls at {len(got)} functions, each offset after a bl"


def check_glibc_keys(out):
    """aarch64 glibc keeps struct pthread below the thread pointer: a negative offset, the same from
    the libc file as measured, and every key read back where BPF reads it."""
    k = test_dlbpf.truth_line(text(out, "glibc_keys.out"))
    check(k["bad"] == 0, f"{k['bad']} of {k['keys']} keys not where BPF reads them: {k}")
    check(k["off_self"] == k["off_file"] and k["off_self"] < 0, f"offsets: {k}")
    return f"keys at tp{k['off_self']:+d} (struct pthread {k['tp_minus_self']} bytes below tp), {k['keys']} read back"


def check_probe_stress(out):
    """Every result right under a probe on a stepped first instruction, every call a step boundary."""
    s = load(out, "probe_stress.json")
    no_drops("probe_stress", s)
    truth = test_dlbpf.truth_line(text(out, "probe_stress.out"), last=True)
    # In the file: stp x29, x30, [sp, #-N]! (64-bit pre-indexed store pair), stepped out of line.
    dis = subprocess.run(["aarch64-linux-gnu-objdump", "-d", "--disassemble=probe_stress_target", PROBE_STRESS],
                         capture_output=True, text=True, check=True).stdout
    words = re.findall(r"^\s*[0-9a-f]+:\s+([0-9a-f]{8})\s", dis, re.M)
    insn = int(words[0], 16) if words else 0
    check((insn & 0xffc07fff) == 0xa9807bfd, f"probe_stress_target starts with {insn:#010x}, not stp x29, x30")
    # In the process: the uprobe's breakpoint (brk #0x5, BRK64_OPCODE_UPROBES) was there as it ran.
    check(truth["first_insn"] == 0xd42000a0, f"the process saw {truth['first_insn']:#010x} there, not brk #0x5")
    check(truth["mismatches"] == 0, f"{truth['mismatches']} of {truth['calls']} results wrong under the probe")
    marker = s["step_markers"][0]
    # N calls cut N - 1 whole steps (the last call's step never ends).
    check(marker["steps"] == truth["calls"] - 1, f"{marker['steps']} steps for {truth['calls']} calls")
    return f"{truth['calls']} calls through stp x29, x30 ({insn:#010x}) under a uprobe, 0 results wrong"


def main():
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[-1].strip(), file=sys.stderr)
        sys.exit(2)
    out = sys.argv[1]
    passed = failed = 0
    # The scenarios the guest ran (ARM64_SCENARIOS): each one whose summary is there, at least one.
    scenarios = [n for n in ("input", "gpu") if os.path.exists(os.path.join(out, f"truth-{n}.jsonl"))] or ["input"]
    checks = [("cuda_calls", lambda: check_cuda_calls(out)), ("callsites", lambda: check_callsites(out))]
    checks += [(f"scenario {n}", lambda n=n: check_scenario(out, n)) for n in scenarios]
    checks += [("files", lambda: check_files(out)), ("python", lambda: check_python(out)), ("probe_stress", lambda: check_probe_stress(out)), ("chroot", lambda: check_chroot(out)),
               ("glibc_keys", lambda: check_glibc_keys(out))]
    for name, fn in checks:
        try:
            note = fn()
            print(f"PASS {name}: {note}")
            passed += 1
        except (Failure, OSError, ValueError, KeyError) as e:
            print(f"FAIL {name}: {type(e).__name__}: {e}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
