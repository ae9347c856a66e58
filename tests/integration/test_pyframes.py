#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Integration tests of Python call sites: a training loop in Python
(tests/workloads/pytrain.py) drives the GPU simulator through ctypes under
each CPython on the machine; its own frames (the line of each CUDA call and
of its caller) are the truth. Expected: the exact file, function and line
for >= 99% of sync and copy calls, per version, from threads and a forked
loader too; a recording replays to the same sites; a version the table lacks
and a process that is not Python get native sites and a notice, never frames.
A loop that exits right after its last call keeps every line, under the
distribution's python3 and a shared-libpython build of it, launched and with
--pid, and a loader forked and calling CUDA at once is traced from its first
call. A missing interpreter is skipped with a message. Run as root."""
import glob
import os
import subprocess

from harness import (DLBPF, GPUSIM_DIR, OUT, ROOT, WORK, Dlbpf, Skipped, check, load_summary, main, process,
                     trace_waiting, truth_line)

PYTRAIN = os.path.join(ROOT, "tests", "workloads", "pytrain.py")
LIBCUDART = os.path.join(GPUSIM_DIR, "libcudart.so.13")
PYENV = "/root/.pyenv/versions"
# The distribution's CPython as a shared-libpython build (tests/workloads/pyshared.c), as pyenv's are.
PYSHARED = os.path.join(OUT, "workloads", "pyshared", "python3")


def interpreter(minor):
    """The CPython 3.minor binaries on this machine: pyenv's, and the distribution's for 3.11."""
    found = sorted(glob.glob(f"{PYENV}/3.{minor}.*/bin/python3"))
    if minor == 11 and os.path.exists("/usr/bin/python3.11"):
        found.append("/usr/bin/python3.11")
    if not found:
        raise Skipped(f"no CPython 3.{minor} on this machine (looked in {PYENV} and /usr/bin)")
    return found


def run_py(python, args=(), opts=(), record=None):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    pre = ["record", "-o", record] if record else []
    d = Dlbpf(pre + list(opts) + ["--", python, PYTRAIN, LIBCUDART] + list(args), env=env)
    rc = d.wait(120)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    return truth_line(d.stdout, '{"pyframes"'), d.summary(), d.stderr


def measured(p, path):
    """The process's Python sites in the workload: {"func:line<-caller:line": calls}."""
    got = {}
    for s in p["call_sites"]:
        if s["kind"] != "python":
            continue
        fr = s["frames"]
        check(fr and all(set(f) >= {"file", "function", "line"} for f in fr), f"frames malformed: {fr}")
        if fr[0]["file"] != path or len(fr) < 2:
            continue
        key = f"{fr[0]['function']}:{fr[0]['line']}<-{fr[1]['function']}:{fr[1]['line']}"
        got[key] = got.get(key, 0) + s["calls"]
    return got


def accuracy(truth, got):
    """(calls named exactly, calls in the truth); a site the truth lacks counts against it."""
    total = sum(truth.values())
    matched = sum(min(n, got.get(k, 0)) for k, n in truth.items())
    wrong = sum(n for k, n in got.items() if k not in truth)
    return matched - wrong, total


def check_version(minor, args=("--steps", "60")):
    results = []
    for python in interpreter(minor):
        t, s, err = run_py(python, args)
        check(t["python"] == [3, minor], f"{python} is {t['python']}")
        check(f"CPython 3.{minor}" in err, f"{python}: no notice that Python frames are read: {err[-1500:]}")
        for pid, truth in t["pyframes"].items():
            p = process(s, int(pid))
            matched, total = accuracy(truth, measured(p, t["file"]))
            check(total > 0, f"{python} pid {pid}: the workload counted no calls")
            check(matched >= 0.99 * total,
                  f"{python} pid {pid}: {matched}/{total} calls at their exact line; truth {truth}, "
                  f"dlbpf {measured(p, t['file'])}")
            results.append(f"{os.path.basename(os.path.dirname(os.path.dirname(python)))} pid {pid}: "
                           f"{matched}/{total}")
    return "; ".join(results)


def test_python_310():
    """CPython 3.10: f_lasti and the PEP 626 line table."""
    return check_version(10)


def test_python_311():
    """CPython 3.11 (pyenv's and Debian's): the cframe and the PEP 657 location table."""
    return check_version(11)


def test_python_312():
    """CPython 3.12: shim frames of the C stack skipped."""
    return check_version(12)


def test_python_313():
    """CPython 3.13: offsets from its _Py_DebugOffsets."""
    return check_version(13)


def test_threads_and_forked_loader():
    """A loader thread and a forked loader process run Python too: their copies name their own lines."""
    res = []
    for minor in (11, 12):
        try:
            python = interpreter(minor)[0]
        except Skipped:
            continue
        t, s, _ = run_py(python, ["--steps", "40", "--thread", "--fork"])
        check(len(t["pyframes"]) == 2, f"expected the parent's and the child's truth: {t['pyframes'].keys()}")
        for pid, truth in t["pyframes"].items():
            check(any(k.startswith("loader:") for k in truth), f"pid {pid} ran no loader: {truth}")
            matched, total = accuracy(truth, measured(process(s, int(pid)), t["file"]))
            check(matched >= 0.99 * total, f"3.{minor} pid {pid}: {matched}/{total}")
            res.append(f"3.{minor} pid {pid}: {matched}/{total}")
    if not res:
        raise Skipped("neither CPython 3.11 nor 3.12 on this machine")
    return "; ".join(res)


def distribution_builds():
    """The distribution's python3, linked whole, and the same interpreter from its shared libpython."""
    builds = [("static", os.path.realpath("/usr/bin/python3"))]
    check(os.path.exists(PYSHARED), f"{PYSHARED} is not built (make test-integration builds it)")
    builds.append(("shared libpython", PYSHARED))
    return builds


def check_exact(label, t, s, err, procs):
    """Every call of every process at its exact line, and a forked child's calls counted from its first."""
    check("has no _PyRuntime" not in err, f"{label}: a warning for an interpreter it should have found: {err[-1500:]}")
    check("CPython 3." in err, f"{label}: no notice that Python frames are read: {err[-1500:]}")
    res = []
    for pid, truth in t["pyframes"].items():
        p = process(s, int(pid))
        matched, total = accuracy(truth, measured(p, t["file"]))
        # Exact: each call is one record, named from what BPF read at its probe; nothing is sampled.
        check(total > 0 and matched == total, f"{label} pid {pid}: {matched}/{total} calls at their exact line; "
              f"truth {truth}, dlbpf {measured(p, t['file'])}")
        calls = {api: c["count"] for api, c in p["cuda"]["calls"].items()}
        res.append(f"pid {pid} {matched}/{total}")
        if any(k.startswith("loader:") for k in truth):
            # The forked loader's own count of its copies (it makes no other CUDA call).
            own = sum(n for k, n in truth.items() if k.startswith("loader:"))
            check(calls.get("cudaMemcpy", 0) == own, f"{label} forked pid {pid}: {calls} traced, it made {own} copies")
            res[-1] += f" (forked, {calls.get('cudaMemcpy', 0)}/{own} copies)"
    check(len(t["pyframes"]) == procs, f"{label}: expected the truth of {procs} processes: {t['pyframes']}")
    return f"{label}: " + ", ".join(res)


def test_exits_at_once():
    """A 30-step loop that exits right after its last call, and a loader it forks that calls CUDA at once and
    exits: every line exact, under the distribution's python3 linked whole and from its shared libpython, in
    launch mode, with --pid, and exec'd by a traced shell (held at its exec, before libpython is mapped)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    res = []
    for kind, python in distribution_builds():
        # Alone (its last call, then exit: nothing else keeps it alive), and with the loader it forks and waits for.
        for fork in (False, True):
            args = ["--steps", "30"] + (["--fork"] if fork else [])
            procs, how = (2, " + fork") if fork else (1, "")
            t, s, err = run_py(python, args)
            res.append(check_exact(f"{kind}{how}, launched", t, s, err, procs))

            w, out, d, rc = trace_waiting([python, PYTRAIN, LIBCUDART, "--wait"] + args, workload_env=env)
            check(rc == 0 and w.returncode == 0,
                  f"{kind} --pid: dlbpf {rc}, workload {w.returncode}: {d.stderr[-1500:]}")
            res.append(check_exact(f"{kind}{how}, --pid", truth_line(out, '{"pyframes"'), d.summary(), d.stderr, procs))

            d = Dlbpf(["--", "sh", "-c", " ".join([python, PYTRAIN, LIBCUDART] + args) + "; true"], env=env)
            check(d.wait(120) == 0, f"{kind} under sh: dlbpf failed: {d.stderr[-2000:]}")
            res.append(check_exact(f"{kind}{how}, exec'd by sh", truth_line(d.stdout, '{"pyframes"'), d.summary(),
                                   d.stderr, procs))
    return "; ".join(res)


def test_replay_same_python_sites():
    """A recording replays to the Python sites the live run reported (the code objects travel in it)."""
    python = interpreter(12)[0]
    rec = os.path.join(WORK, f"pyframes-{os.getpid()}.dlbpf")
    t, s, _ = run_py(python, ["--steps", "20"], record=rec)
    pid = int(next(iter(t["pyframes"])))
    out = os.path.join(WORK, f"pyframes-replay-{os.getpid()}.json")
    r = subprocess.run([DLBPF, "-q", "report", rec, "-j", out], capture_output=True, text=True)
    check(r.returncode == 0, f"report exited {r.returncode}: {r.stderr[-1000:]}")
    live, replay = process(s, pid), process(load_summary(out), pid)
    os.unlink(rec)
    check(any(x["kind"] == "python" for x in live["call_sites"]), "the live run has no Python site")
    check(replay["call_sites"] == live["call_sites"], "replayed call sites differ from the live run's")
    return f"{len(replay['call_sites'])} sites replayed"


def test_unsupported_version_native_only():
    """A CPython the table lacks (3.9): a one-line notice, native sites, no Python frame."""
    found = sorted(glob.glob(f"{PYENV}/3.9.*/bin/python3"))
    if not found:
        raise Skipped(f"no CPython 3.9 in {PYENV}")
    t, s, err = run_py(found[0], ["--steps", "10"])
    pid = int(next(iter(t["pyframes"])))
    p = process(s, pid)
    check("CPython 3.9" in err and "native call sites only" in err, f"no notice: {err[-1500:]}")
    check(p["call_sites"], "no call sites at all")
    check(all(x["kind"] != "python" for x in p["call_sites"]), "Python frames for an unsupported version")
    return f"{len(p['call_sites'])} native sites"


def test_native_process_no_frames():
    """A C program (the callsites workload) gets native sites only, and no Python notice."""
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    d = Dlbpf(["--", os.path.join(ROOT, ".output", "workloads", "callsites"), "--steps", "5"], env=env)
    check(d.wait() == 0, f"dlbpf failed: {d.stderr[-1000:]}")
    p = d.summary()["processes"][0]
    check(p["call_sites"] and all(x["kind"] in ("native", "unknown") for x in p["call_sites"]),
          f"kinds: {[x['kind'] for x in p['call_sites']]}")
    check("CPython" not in d.stderr, "a Python notice for a C program")
    return f"{len(p['call_sites'])} native sites"


def test_report_names_the_line():
    """The text report says where the time went as file:line function <- caller."""
    python = interpreter(11)[0]
    env = dict(os.environ)
    r = subprocess.run([DLBPF, "-q", "--", python, PYTRAIN, LIBCUDART, "--steps", "30"], capture_output=True,
                       text=True, env=env, timeout=120)
    check(r.returncode == 0, f"dlbpf exited {r.returncode}: {r.stderr[-1000:]}")
    check("pytrain.py:" in r.stdout and "<- pytrain.py:" in r.stdout,
          f"the report names no Python line: {r.stdout[-3000:]}")
    line = next(x for x in r.stdout.splitlines() if "pytrain.py:" in x)
    return line.strip()


if __name__ == "__main__":
    main()
