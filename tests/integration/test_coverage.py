#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Integration tests of real-world CUDA coverage: nvcc-built binaries
with static and shared cudart, the driver API, a runtime call going through
the driver counted once, late dlopen, wheel and mount-namespace layouts, and
choosing processes (--pid, --comm, system-wide). Truth comes from the
workloads' own counts and from binutils (nm, c++filt). Run as root."""
import json
import os
import re
import shutil
import subprocess
import time

from harness import truth_line, process, OUT, WORK, Dlbpf, Failure, check, main, process

COV = os.path.join(OUT, "workloads", "coverage")
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
TOOLKIT_CUDART = os.path.join(CUDA_HOME, "lib64", "libcudart.so.13")


def cov(name):
    return os.path.join(COV, name)


def last_truth(stdout):
    return truth_line(stdout, last=True)


def demangle(mangled):
    return subprocess.run(["c++filt", mangled], capture_output=True, text=True, check=True).stdout.strip()


def nm(path, dynamic=False):
    out = subprocess.run(["nm"] + (["-D"] if dynamic else []) + [path], capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            syms[parts[-1].split("@")[0]] = parts[-2]
    return syms


def calls(p):
    return {k: v["count"] for k, v in p["cuda"]["calls"].items()}


def kernels_by_name(p):
    by = {}
    for k in p["cuda"]["kernels"]:
        by[k["name"]] = by.get(k["name"], 0) + k["count"]
    return by


def run_command(cmd, env=None):
    d = Dlbpf(["--"] + cmd, env=env)
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    s = d.summary()
    check(len(s["processes"]) == 1, f"expected one process, got {[p['pid'] for p in s['processes']]}")
    return d, s["processes"][0]


def check_nvcc_build(binary, sfx=""):
    d, p = run_command([binary])
    truth = last_truth(d.stdout)
    check(truth["sync_error"] != 0, "the workload ran on a GPU? it should fail fast here")
    got = kernels_by_name(p)
    want = {demangle(m): n for m, n in truth["launches"].items()}
    check(got == want, f"kernels {got} != {want}")
    launches = sum(truth["launches"].values()) - truth["exc"]
    c = calls(p)
    # __cudaLaunchKernel only jumps to cudaLaunchKernel: probed there, counted once.
    lk, exc = "cudaLaunchKernel" + sfx, "cudaLaunchKernelExC" + sfx
    check(c.get(lk) == launches, f"{lk} {c.get(lk)} != {launches}: {c}")
    check(c.get("__cudaLaunchKernel" + sfx, 0) == 0, "trampoline counted as well")
    check(c.get(exc) == truth["exc"], f"{exc} {c.get(exc)}")
    check(c.get("cudaGraphLaunch") == truth["graph"], f"graph {c.get('cudaGraphLaunch')}")
    exc = [k for k in p["cuda"]["kernels"] if k["grid"] == [5, 6, 7]]
    check(len(exc) == 1 and exc[0]["block"] == [8, 9, 2] and exc[0]["shmem"] == 256,
          f"cudaLaunchKernelExC config not decoded: {exc}")
    check(p["cuda"]["runtimes"] == 1, f"runtimes {p['cuda']['runtimes']}")
    return d, p, got


def test_nvcc_static_cudart():
    """nvcc's default build: the runtime is local symbols of the executable; launches counted and named."""
    b = cov("kernels_static")
    local, dyn = nm(b), nm(b, dynamic=True)
    check(local.get("cudaLaunchKernel") == "t" and "cudaLaunchKernel" not in dyn,
          "the binary does not hold a static runtime: " + str(local.get("cudaLaunchKernel")))
    d, p, got = check_nvcc_build(b)
    check("contains the CUDA runtime" in d.stderr, "static runtime not reported: " + d.stderr[-1500:])
    return f"{sum(got.values())} launches of {len(got)} kernels, named: {', '.join(sorted(got))}"


def test_nvcc_shared_cudart():
    """-cudart=shared: the stubs call __cudaLaunchKernel in libcudart.so.13."""
    b = cov("kernels_shared")
    dyn = nm(b, dynamic=True)
    check(dyn.get("__cudaLaunchKernel") == "U" and dyn.get("__cudaGetKernel") == "U",
          "binary does not import __cudaLaunchKernel/__cudaGetKernel")
    _, _, got = check_nvcc_build(b)
    return f"{sum(got.values())} launches named"


def test_nvcc_per_thread_stream():
    """--default-stream per-thread (static cudart): __cudaLaunchKernel_ptsz and the _ptsz entry points."""
    b = cov("kernels_ptsz")
    check(nm(b).get("__cudaLaunchKernel_ptsz") in ("t", "T"), "no __cudaLaunchKernel_ptsz in the binary")
    _, _, got = check_nvcc_build(b, "_ptsz")
    return f"{sum(got.values())} launches named"


def test_driver_api():
    """The driver API through the toolkit's stub libcuda: counts, bytes, launch dims."""
    d, p = run_command([cov("driver_calls")])
    truth = last_truth(d.stdout)
    c = calls(p)
    for api, n in truth["calls"].items():
        check(c.get(api, 0) == n, f"{api}: {c.get(api, 0)} calls, workload made {n}")
    for dr in ("h2d", "d2h", "d2d"):
        got = p["cuda"]["memcpy"][dr]
        check(got["count"] == truth[dr]["count"] and got["bytes"] == truth[dr]["bytes"],
              f"{dr}: {got['count']}/{got['bytes']} != {truth[dr]}")
    ks = {(tuple(k["grid"]), tuple(k["block"]), k["shmem"]): k["count"] for k in p["cuda"]["kernels"]}
    want = {((2, 3, 4), (32, 2, 1), 128): truth["calls"]["cuLaunchKernel"], ((9, 8, 7), (64, 4, 2), 1024): 1}
    check(ks == want, f"driver launches {ks} != {want}")
    return f"{sum(truth['calls'].values())} driver calls decoded"


def test_runtime_over_driver_counted_once():
    """A runtime that forwards to the driver (as libcudart does): each call counted once."""
    d, p = run_command([cov("nest_calls")])
    t = last_truth(d.stdout)
    c = calls(p)
    want = {"cudaMemcpy": t["rt_h2d"] + t["rt_d2h"], "cudaLaunchKernel": t["rt_launch"],
            "cudaStreamSynchronize": t["rt_sync"], "cuMemcpyHtoD_v2": t["drv_h2d"],
            "cuLaunchKernel": t["drv_launch"]}
    check(c == want, f"calls {c} != {want}")
    inner = t["rt_h2d"] + t["rt_d2h"] + t["rt_launch"] + t["rt_sync"]
    check(p["cuda"]["driver_inner"] == inner, f"driver_inner {p['cuda']['driver_inner']} != {inner}")
    h2d = p["cuda"]["memcpy"]["h2d"]
    check(h2d["count"] == t["rt_h2d"] + t["drv_h2d"], f"h2d {h2d['count']}")
    check(h2d["bytes"] == t["rt_h2d"] * 1024 + t["drv_h2d"] * 4096, f"h2d bytes {h2d['bytes']}")
    ks = {k["name"]: k["count"] for k in p["cuda"]["kernels"]}
    check(ks == {"0xabc0": t["rt_launch"], "0xdef0": t["drv_launch"]}, f"kernels {ks}")
    return f"{inner} driver calls inside runtime calls not counted again"


def late_load(cmd, lib_shown, n=7, env=None, settle=1.0):
    """Starts cmd (lateload), attaches, then lets it dlopen and call at once."""
    w = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        check(w.stdout.readline().strip() == "ready", "lateload did not start")
        pid = target_pid(w.pid)
        d = Dlbpf(["--pid", str(pid)])
        d.started()
        time.sleep(settle)
        start = time.monotonic()
        w.stdin.write("go\n")
        w.stdin.flush()
        out = w.stdout.readline()
        stall_ms = (time.monotonic() - start) * 1e3
        time.sleep(0.6)  # lateload has dlclose'd: let a periodic rescan see it
        w.stdin.write("done\n")
        w.stdin.flush()
        w.wait(timeout=30)
        rc = d.wait()
    finally:
        if w.poll() is None:
            w.kill()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    truth = json.loads(out)
    p = process(d.summary(), pid)
    c = calls(p)
    for api, k in truth.items():
        check(c.get(api, 0) == k, f"{api}: {c.get(api, 0)} traced of {k} made right after the load")
    check(f"CUDA runtime functions in {lib_shown}" in d.stderr or
          f"CUDA runtime functions in {os.path.realpath(lib_shown)}" in d.stderr, "library path not reported: " + d.stderr[-1500:])
    return d, pid, stall_ms


def target_pid(pid):
    """The lateload process: pid itself, or the one unshare started."""
    for _ in range(100):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "lateload":
                    return pid
            kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
            if kids:
                pid = int(kids[0])
                continue
        except OSError:
            pass
        time.sleep(0.05)
    raise Failure("lateload process not found")


def test_late_dlopen():
    """dlopen of the toolkit's libcudart seconds after attach: every call after the load traced."""
    d, _, stall = late_load([cov("lateload"), TOOLKIT_CUDART, "7"], TOOLKIT_CUDART)
    # Probes per process go with it; probes that follow the file stay for the others that map it.
    check(re.search(r"unmapped, (probes removed|forgotten)", d.stderr) is not None, "dlclose'd runtime not forgotten")
    return f"dlopen to first calls done in {stall:.1f} ms (process stopped while attaching)"


def wheel_copy():
    lib = os.path.join(WORK, "site-packages", "nvidia", "cu13", "lib", "libcudart-abcd1234.so.13")
    os.makedirs(os.path.dirname(lib), exist_ok=True)
    if not os.path.exists(lib):
        shutil.copy(TOOLKIT_CUDART, lib)
    return lib


def test_wheel_renamed_path():
    """A runtime copied to a wheel-like renamed path, found from the maps."""
    lib = wheel_copy()
    late_load([cov("lateload"), lib, "5"], lib)


def test_mount_and_pid_namespace():
    """A process in its own mount and pid namespaces loading a library at a path the host lacks."""
    root = os.path.join(WORK, "nsroot")
    os.makedirs(root, exist_ok=True)
    inner = os.path.join(root, "opt", "cuda-only-here", "lib", "libcudart.so.13")
    check(not os.path.exists(inner), "the namespace path exists on the host")
    script = (f"mount -t tmpfs none {root} && mkdir -p {os.path.dirname(inner)} && "
              f"cp {TOOLKIT_CUDART} {inner} && exec {cov('lateload')} {inner} 4")
    d, pid, _ = late_load(["unshare", "-m", "-p", "-f", "--mount-proc", "--propagation", "private",
                           "sh", "-c", script], inner)
    check(not os.path.exists(inner), "the library leaked to the host's mount namespace")
    check(f"pid {pid} (lateload) is pid 1 in its pid namespace" in d.stderr,
          "namespace pid not shown: " + d.stderr[-1000:])
    p = process(d.summary(), pid)
    check(p["nspid"] == 1, f"JSON nspid {p['nspid']}, expected 1")
    check(f"PID {pid} (lateload) [pid 1 in its namespace]" in d.stdout, "report lacks the namespace pid")
    return f"host pid {pid} = pid 1 in the namespace (log, report, JSON)"


def start_waiting(path):
    """cuda_calls --wait under the name of path (a symlink): its comm is that name."""
    w = subprocess.Popen([path, "--wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    check(w.stdout.readline().strip() == "ready", f"{path} did not start")
    return w


def named_workload(name):
    path = os.path.join(WORK, name)
    if not os.path.islink(path):
        os.symlink(os.path.join(OUT, "workloads", "cuda_calls"), path)
    return path


def wait_attached(d, pid, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(f"pid {pid}: attached" in line and "CUDA runtime" in line for line in d.stderr_lines):
            return
        time.sleep(0.02)
    raise Failure(f"pid {pid} not attached: " + d.stderr[-1500:])


def run_selection(args, before, after, extra_checks=None):
    """Starts `before`, then dlbpf with args, then `after`; lets them all run; returns the summary."""
    procs = {name: start_waiting(named_workload(name)) for name in before}
    noncuda = subprocess.Popen(["sleep", "30"])
    try:
        d = Dlbpf(args)
        d.started()
        for name in after:
            procs[name] = start_waiting(named_workload(name))
        outs = {}
        for name, w in procs.items():
            if extra_checks is None or name in extra_checks:
                wait_attached(d, w.pid)
        for name, w in procs.items():
            w.stdin.write("go\n")
            w.stdin.flush()
            outs[name] = w.communicate(timeout=30)[0]
        time.sleep(0.3)
        rc = d.stop()
    finally:
        noncuda.kill()
        for w in procs.values():
            if w.poll() is None:
                w.kill()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-1500:]}")
    s = d.summary()
    check(all(p["pid"] != noncuda.pid for p in s["processes"]), "a process without CUDA was traced")
    return s, procs, outs


def check_exact(s, w, out):
    truth = last_truth(out)
    p = process(s, w.pid)
    c = calls(p)
    for api, n in truth["calls"].items():
        check(c.get(api, 0) == n, f"pid {w.pid} {api}: {c.get(api, 0)} != {n}")


def test_two_pids():
    """Two --pid of three running processes: exactly those two, each on its own."""
    names = ["covpid_a", "covpid_b", "covpid_c"]
    procs = {n: start_waiting(named_workload(n)) for n in names}
    try:
        d = Dlbpf(["--pid", str(procs["covpid_a"].pid), "--pid", str(procs["covpid_b"].pid)])
        d.started()
        outs = {}
        for n, w in procs.items():
            w.stdin.write("go\n")
            w.stdin.flush()
            outs[n] = w.communicate(timeout=30)[0]
        rc = d.wait()
    finally:
        for w in procs.values():
            if w.poll() is None:
                w.kill()
    check(rc == 0, f"dlbpf exited {rc}")
    s = d.summary()
    pids = sorted(p["pid"] for p in s["processes"])
    want = sorted([procs["covpid_a"].pid, procs["covpid_b"].pid])
    check(pids == want, f"processes {pids} != {want}")
    for n in ("covpid_a", "covpid_b"):
        check_exact(s, procs[n], outs[n])


def test_comm():
    """--comm: the running process of that name and one started later; not another name."""
    s, procs, outs = run_selection(["--comm", "covcomm_x"], ["covcomm_x", "covcomm_other"], ["covcomm_x2"],
                                   extra_checks=["covcomm_x"])
    # Names match whole: covcomm_x2 (started later) is another name, absent like covcomm_other.
    pids = sorted(p["pid"] for p in s["processes"])
    check(pids == [procs["covcomm_x"].pid], f"processes {pids} != [{procs['covcomm_x'].pid}]")
    check_exact(s, procs["covcomm_x"], outs["covcomm_x"])
    # A later process of the name, traced from its exec.
    s, procs, outs = run_selection(["--comm", "covcomm_late"], ["covcomm_other"], ["covcomm_late"],
                                   extra_checks=["covcomm_late"])
    pids = sorted(p["pid"] for p in s["processes"])
    check(pids == [procs["covcomm_late"].pid], f"processes {pids} != [{procs['covcomm_late'].pid}]")
    check_exact(s, procs["covcomm_late"], outs["covcomm_late"])
    return "running and later processes of the name traced, others not"


def test_system_wide():
    """No pid: every process that maps a CUDA runtime, running or started later; none without."""
    s, procs, outs = run_selection(["--system-wide"], ["covsys_a"], ["covsys_b"])
    for n, w in procs.items():
        check_exact(s, w, outs[n])
    pids = {p["pid"] for p in s["processes"]}
    for p in s["processes"]:
        # Other sessions' CUDA jobs may be seen too; each must map CUDA or descend from one that does.
        check(p["cuda"]["found"] or p["ppid"] in pids, f"pid {p['pid']} ({p['comm']}) traced without CUDA")
    return f"{len(pids)} CUDA processes seen, the non-CUDA one not"


if __name__ == "__main__":
    main()
