#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The release executable make dist writes for this machine (dist/dlbpf-VERSION-MACHINE-linux):
static, and it runs where nothing but itself is installed. Each run is in a chroot that holds
the executable, the workload and the workload's own shared libraries (from ldd), and never a
libbpf or libelf. Truth: ./dlbpf --version, readelf, and the workload's own counts. Run as root
after make dist-arch; DLBPF_DIST names another executable."""
import glob
import json
import os
import platform
import shutil
import subprocess
import tempfile

from harness import ROOT, OUT, truth_line, check, main, Failure

COV = os.path.join(OUT, "workloads", "coverage")


def dist_exe():
    exe = os.environ.get("DLBPF_DIST")
    if not exe:
        found = sorted(glob.glob(os.path.join(ROOT, "dist", f"dlbpf-*-{platform.machine()}-linux")))
        if not found:
            raise Failure(f"no dist/dlbpf-*-{platform.machine()}-linux: run make dist-arch first")
        exe = found[-1]
    return exe


def shared_libs(binary):
    """The files ldd says binary loads (its interpreter included)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if path.startswith("/"):
            libs.append(path)
    return libs


def make_root(files):
    """A chroot holding the given files at their own paths (the executable at /dlbpf)."""
    root = tempfile.mkdtemp(prefix="dlbpf-dist-root-", dir=os.path.join(OUT))
    for src, dst in files:
        to = os.path.join(root, dst.lstrip("/"))
        os.makedirs(os.path.dirname(to), exist_ok=True)
        shutil.copy2(src, to)
    for d in ("proc", "sys", "dev", "tmp"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    return root


def in_root(root, argv):
    """argv in the chroot, with /proc, /sys (BTF, tracefs) and /dev mounted in a mount namespace of its own."""
    script = ('set -e; mount -t proc proc "$1/proc"; mount --rbind /sys "$1/sys"; mount --rbind /dev "$1/dev"; '
              'r=$1; shift; exec chroot "$r" "$@"')
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", root] + argv,
                          capture_output=True, text=True, timeout=120)


def test_static():
    """No interpreter, no shared library: nothing outside the file is needed to start it."""
    exe = dist_exe()
    hdrs = subprocess.run(["readelf", "-lW", exe], capture_output=True, text=True, check=True).stdout
    dyn = subprocess.run(["readelf", "-dW", exe], capture_output=True, text=True, check=True).stdout
    check("INTERP" not in hdrs, "the executable names an interpreter: " + hdrs[-800:])
    check("(NEEDED)" not in dyn, "the executable needs shared libraries: " + dyn[-800:])
    return os.path.basename(exe)


def test_version_in_empty_root():
    """--version in a root holding only the executable says what the build's ./dlbpf says."""
    exe = dist_exe()
    root = make_root([(exe, "/dlbpf")])
    try:
        got = subprocess.run(["chroot", root, "/dlbpf", "--version"], capture_output=True, text=True, timeout=30)
    finally:
        shutil.rmtree(root)
    want = subprocess.run([os.path.join(ROOT, "dlbpf"), "--version"], capture_output=True, text=True).stdout
    check(got.returncode == 0, f"--version exited {got.returncode}: {got.stderr}")
    check(got.stdout == want, f"--version says {got.stdout!r}, ./dlbpf {want!r}")
    return got.stdout.strip()


def test_traced_run_in_root():
    """An nvcc build with the static runtime, traced in the chroot: kernels and launches equal its own counts."""
    exe = dist_exe()
    work = os.path.join(COV, "kernels_static")
    libs = shared_libs(work)
    check(not [lib for lib in libs if "libbpf" in lib or "libelf" in lib], f"the workload itself loads them: {libs}")
    root = make_root([(exe, "/dlbpf"), (work, "/kernels_static")] + [(lib, lib) for lib in libs])
    try:
        present = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs]
        check(not [f for f in present if "libbpf" in f or "libelf" in f], f"the root holds {present}")
        r = in_root(root, ["/dlbpf", "-q", "--json", "/tmp/summary.json", "--", "/kernels_static"])
        check(r.returncode == 0, f"dlbpf exited {r.returncode}: {r.stderr[-2000:]}")
        with open(os.path.join(root, "tmp", "summary.json")) as f:
            s = json.load(f)
    finally:
        shutil.rmtree(root)
    truth = truth_line(r.stdout, last=True)
    check(len(s["processes"]) == 1, f"processes: {[p['pid'] for p in s['processes']]}")
    p = s["processes"][0]
    calls = {k: v["count"] for k, v in p["cuda"]["calls"].items()}
    launches = sum(truth["launches"].values()) - truth["exc"]
    check(calls.get("cudaLaunchKernel") == launches, f"cudaLaunchKernel {calls.get('cudaLaunchKernel')} != {launches}")
    check(calls.get("cudaLaunchKernelExC") == truth["exc"], f"cudaLaunchKernelExC {calls.get('cudaLaunchKernelExC')}")
    check(calls.get("cudaGraphLaunch") == truth["graph"], f"cudaGraphLaunch {calls.get('cudaGraphLaunch')}")
    got = sum(k["count"] for k in p["cuda"]["kernels"])
    check(got == sum(truth["launches"].values()), f"kernels {got} != {sum(truth['launches'].values())}")
    return f"{launches} launches, {truth['exc']} ExC, {truth['graph']} graph launches, in a root of {len(libs) + 2} files"


if __name__ == "__main__":
    main()
