#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""What dlbpf does on kernels without a BPF feature, reached on this kernel with the test hook
DLBPF_FORCE_TWINS=without-FEATURE (the twins and fallbacks an older kernel loads), and what the
kernel matrix (tools/vm) then proves on the real kernels: the same exact counts against the real
libcudart by every mechanism, a probe failure reported as one (never "CUDA not found"), a job under a
seccomp filter unharmed, and `dlbpf features`."""
import os
import subprocess

from harness import Dlbpf, check, main, process, run_dlbpf, workload
from test_dlbpf import compare_cuda, cuda_truth

FEATURES = ("uprobe_multi", "attach_cookie", "task_storage", "task_btf", "global_ptr_args")

# The combinations real kernels have: 5.15-6.5 lack uprobe_multi; 5.12-5.14 attach cookies too; 5.11
# also task storage for tracing programs and the Python walk; 5.10 everything; and each fallback alone.
COMBOS = [(), ("uprobe_multi",), ("uprobe_multi", "attach_cookie"),
          ("uprobe_multi", "attach_cookie", "task_storage", "global_ptr_args"), FEATURES] + \
    [(f,) for f in FEATURES[1:]]

# What `dlbpf -v` says it loaded, for each feature taken away (tracer.c's choose_twins); without attach
# cookies, what cookies_by_offset() says.
LOADED = {"uprobe_multi": "CUDA probes on classic uprobes", "attach_cookie": None,
          "task_storage": "per-thread state in hashes by thread id", "task_btf": "current task by probe reads"}


def cookies_by_offset():
    """Whether classic uprobes find their cookie by file offset where attach cookies are missing: the
    kernel's VMA cache (3.15-6.0, so every kernel without attach cookies) has the probed VMA. Newer
    kernels have no VMA cache, and with attach cookies taken away by the hook, CUDA is not probed there."""
    rc, out, err = run_dlbpf(["features"], env=forced(("attach_cookie",)))
    check(rc == 0, f"dlbpf features exited {rc}: {err}")
    line = [l for l in out.splitlines() if l.split()[:1] == ["attach_cookie"]]
    check(len(line) == 1, f"no attach_cookie line: {out}")
    return "file offset" in line[0]


def probed(without):
    """Whether the CUDA runtime can be probed with these features taken away on this kernel."""
    gone = set(without) | kernel_missing()
    # uprobe_multi links carry their cookies whatever bpf_get_attach_cookie says of classic uprobes.
    return "attach_cookie" not in gone or "uprobe_multi" not in gone or cookies_by_offset()


def check_unprobed(p, what):
    """Calls that cannot be told apart: the runtime is named as not probed, and no call is claimed."""
    cuda = p["cuda"]
    check(not cuda["found"] and cuda.get("unprobed", 0) >= 1 and "libcudart" in cuda["unprobed_first"]["path"],
          f"{what}: the runtime is not reported as unprobed: {cuda}")
    check(not cuda.get("calls"), f"{what}: calls claimed: {cuda.get('calls')}")


def check_loaded(stderr, without, what):
    """The programs dlbpf says it loaded are those of a kernel without these features (taken away, or
    missing from this kernel), not the usual ones."""
    without = set(without) | kernel_missing()
    line = [l for l in stderr.splitlines() if "BPF programs:" in l]
    check(len(line) == 1, f"{what}: no 'BPF programs:' line at -v: {stderr[-1000:]}")
    loaded = dict(LOADED, attach_cookie="cookies by file offset" if cookies_by_offset() else
                  "cookies missing (CUDA not probed)")
    for f, said in loaded.items():
        # Task storage is reached through the BTF task: without the one, the other goes too.
        gone = f in without or (f == "task_storage" and "task_btf" in without)
        if f == "attach_cookie":
            gone = gone and "uprobe_multi" in without
        check((said in line[0]) == gone, f"{what}: {line[0]}")
    walked = "Python frames walked" in line[0]
    check(walked == ("global_ptr_args" not in without or "uprobe_multi" not in without), f"{what}: {line[0]}")


def kernel_missing():
    """The features this kernel lacks, by `dlbpf features` (under tools/vm, an older kernel's)."""
    rc, out, err = run_dlbpf(["features"])
    check(rc == 0, f"dlbpf features exited {rc}: {err}")
    return {l.split()[0] for l in out.splitlines() if len(l.split()) > 1 and l.split()[0] in FEATURES
            and l.split()[1] == "no"}


def forced(without):
    env = dict(os.environ)
    env.pop("DLBPF_FORCE_TWINS", None)
    if without:
        env["DLBPF_FORCE_TWINS"] = ",".join("without-" + f for f in without)
    return env


def test_counts_by_every_mechanism():
    """cuda_calls against the toolkit's libcudart: exact counts, bytes and kernels whatever the kernel lacks."""
    unprobed = 0
    for without in COMBOS:
        what = "+".join(without) or "every feature"
        d = Dlbpf(["--", workload("cuda_calls")], env=forced(without))
        rc = d.wait()
        check(rc == 0, f"without {what}: dlbpf exited {rc}: {d.stderr[-2000:]}")
        for f in without:
            check(f"has no {f}" in d.stderr, f"without {f}: no start-up line says so: {d.stderr[-1000:]}")
        check_loaded(d.stderr, without, f"without {what}")
        truth = cuda_truth(d.stdout)
        s = d.summary()
        p = process(s, s["processes"][0]["pid"])
        if not probed(without):
            check_unprobed(p, f"without {what}")
            unprobed += 1
            continue
        try:
            compare_cuda(p, truth, expect_errors=True)
        except Exception as e:
            raise type(e)(f"without {what}: {e}")
        lost = {k: v for k, v in s["drops"].items() if isinstance(v, int) and v}
        check(not lost, f"without {what}: events lost: {lost}")
    return f"{len(COMBOS) - unprobed} feature sets exact, {unprobed} named as not probed (no VMA cache here)"


def test_unprobed_runtime_is_named():
    """A runtime that cannot be probed (here: the offset-to-cookie map holds one entry, or, on kernels with
    no VMA cache, cookies are missing altogether) is an error naming
    the library and the reason; the report says it was not probed, never that CUDA was not found."""
    env = forced(("uprobe_multi", "attach_cookie"))
    env["DLBPF_TEST_MAP_ENTRIES"] = "probe_cookies=1"
    d = Dlbpf(["--", workload("cuda_calls")], env=env)
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    check("cannot probe" in d.stderr and "libcudart" in d.stderr, f"no error names the runtime: {d.stderr[-1500:]}")
    p = d.summary()["processes"][0]
    cuda = p["cuda"]
    check(not cuda["found"] and cuda.get("unprobed", 0) >= 1, f"cuda: {cuda}")
    check("libcudart" in cuda["unprobed_first"]["path"], f"unprobed_first: {cuda['unprobed_first']}")
    rc, out, err = run_dlbpf(["--", workload("cuda_calls")], env=env)
    check(rc == 0, f"dlbpf exited {rc}: {err[-1000:]}")
    check("not found" not in out and "could not be probed" in out, "the text report does not say why: " +
          "\n".join(l for l in out.splitlines() if "CUDA" in l))


def seccomp_run(env):
    d = Dlbpf(["--", workload("seccomp_cuda"), "--exec"], env=env)
    rc = d.wait()
    truth = cuda_truth_seccomp(d.stdout)
    return d, rc, truth


def cuda_truth_seccomp(stdout):
    import json
    for line in stdout.splitlines():
        if line.startswith("{\"seccomp\""):
            return json.loads(line)
    raise AssertionError("seccomp_cuda printed no truth line: " + stdout[-500:])


def test_seccomp_target_survives():
    """A job under a Docker-like seccomp allowlist (no uretprobe syscall) keeps its own exit status, and its
    calls are counted exactly: with return probes where the kernel lets them through seccomp, at entry
    only where the trial says they would kill it (forced here by DLBPF_TEST_URETPROBE_HAZARD)."""
    # The workload execs itself under its filter: the runtime, still attached, is mapped elsewhere after
    # the exec, and its first call there must be counted (by file offset, without attach_cookie).
    for hazard, without in ((False, ()), (True, ()), (False, FEATURES)):
        env = forced(without)
        if hazard:
            env["DLBPF_TEST_URETPROBE_HAZARD"] = "1"
        d, rc, truth = seccomp_run(env)
        what = ("hazard" if hazard else "no hazard") + (" without " + "+".join(without) if without else "")
        check(truth["seccomp"] == 2, f"{what}: the workload ran without its filter: {truth}")
        check(rc == 7 and truth["exit"] == 7, f"{what}: exit status {rc}, workload says {truth['exit']}: "
              f"{d.stderr[-1500:]}")
        p = d.summary()["processes"][-1]
        if not probed(without):
            check_unprobed(p, what)
            continue
        for api, n in truth["calls"].items():
            got = p["cuda"]["calls"].get(api, {}).get("count", 0)
            check(got == n, f"{what}: {api}: {got} calls, workload made {n}")
        # Entry probes only: no call has a duration (or an error, which only its return says).
        timed = sum(c.get("total_ns", 0) for c in p["cuda"]["calls"].values())
        check((timed == 0) == hazard, f"{what}: calls timed {timed} ns in all")
        # Said once for the process, not once per library of it or again after its exec.
        check(d.stderr.count("entry only") == (1 if hazard else 0), f"{what}: warning wrong: {d.stderr[-1500:]}")
    return "exit status 7 kept, counts exact, with and without return probes"


def test_python_lines_by_mechanism():
    """Debian's CPython 3.11 on the simulator: exact lines on classic uprobes (6.1's way) and with every
    fallback but the frame walk; where the kernel cannot check the walk (5.10), native sites only, said so,
    and no Python site claimed."""
    import test_pyframes as tp
    python = "/usr/bin/python3.11"
    if not os.path.exists(python):
        from harness import Skipped
        raise Skipped("no /usr/bin/python3.11")
    notes = []
    missing = kernel_missing()
    for without in (("uprobe_multi",), ("uprobe_multi", "attach_cookie", "task_storage", "task_btf"),
                    ("uprobe_multi", "global_ptr_args")):
        gone = set(without) | missing
        walked = "uprobe_multi" not in gone or "global_ptr_args" not in gone
        env = forced(without)
        env.pop("PYTHONPATH", None)
        # Without cookies libc cannot be probed either, so no dlopen hold: the runtime ctypes loads is
        # found by the collector's rescan (every 250 ms), and only a job that outlives one after its
        # load is named as not probed. 30 steps end within 0.4 s of the start; 3000 run for seconds.
        steps = "30" if probed(without) else "3000"
        d = Dlbpf(["--", python, tp.PYTRAIN, tp.LIBCUDART, "--steps", steps], env=env)
        rc = d.wait(120)
        check(rc == 0, f"without {without}: dlbpf exited {rc}: {d.stderr[-1500:]}")
        t = tp.truth_line(d.stdout, '{"pyframes"')
        s = d.summary()
        for pid, truth in t["pyframes"].items():
            p = process(s, int(pid))
            got = tp.measured(p, t["file"])
            matched, total = tp.accuracy(truth, got)
            check(total > 0, f"without {without}: the workload counted no calls")
            if not probed(without):
                check_unprobed(p, f"without {without}")
            elif not walked:
                check(not got, f"without the walk: Python sites claimed: {got}")
                check("native call sites only" in d.stderr, f"without the walk: not said: {d.stderr[-1500:]}")
            else:
                check(matched >= 0.99 * total, f"without {without}: {matched}/{total} at their line; {got}")
            notes.append(f"{'+'.join(without)}: {matched}/{total}")
    return "; ".join(notes)


def test_features_command():
    """`dlbpf features` names every feature, says yes on this kernel and no for those the hook takes away."""
    rc, out, err = run_dlbpf(["features"])
    check(rc == 0, f"dlbpf features exited {rc}: {err}")
    for f in FEATURES:
        line = [l for l in out.splitlines() if l.split()[:1] == [f]]
        check(len(line) == 1, f"{f}: not one line in {out}")
        # This machine's kernel (6.18) has every one; under tools/vm the kernel decides.
        if not os.environ.get("DLBPF_VM_KERNEL") or os.environ["DLBPF_VM_KERNEL"] == "host":
            check(line[0].split()[1] == "yes", f"{f} on this kernel: {line[0]}")
    for without in (("uprobe_multi",), FEATURES):
        rc, out, err = run_dlbpf(["features"], env=forced(without))
        check(rc == 0, f"features exited {rc}: {err}")
        for f in without:
            line = [l for l in out.splitlines() if l.split()[:1] == [f]][0]
            check(line.split()[1] == "no" and len(line.split()) > 3, f"{f}: {line}")
    rc, out, err = run_dlbpf(["features", "extra"])
    check(rc != 0 and "no arguments" in err, f"features extra: rc {rc}, {err}")
    rc, _, err = run_dlbpf(["--", "true"], env=dict(os.environ, DLBPF_FORCE_TWINS="without-nothing"))
    check(rc != 0 and "without-FEATURE" in err, f"a bad hook value: rc {rc}, {err}")


if __name__ == "__main__":
    main()
