#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Integration tests of native call sites: the function+offset and object each
outermost CUDA call returns to. Truth: the workloads' own counts per named
function, and binutils (nm, objdump) for where each offset is: the instruction
before a return address must be a call. A recording replays to the same sites;
calls whose return address is unreadable are one counted unknown site. Run as
root."""
import os
import re
import subprocess

from harness import DLBPF, GPUSIM_DIR, OUT, WORK, Dlbpf, check, load_summary, main, process, truth_line, workload

SITES = workload("callsites")
NVCC_SITES = os.path.join(OUT, "workloads", "coverage", "sites_static")
SITE_RE = re.compile(r"^(?P<name>.+)\+0x(?P<off>[0-9a-f]+)$")
# The binutils that read the workload and its call instructions' mnemonics: the host's; the arm64
# checks (tests/vm/check-arm64.py) set the cross binutils and bl/blr.
BINUTILS = ""
CALLS = ("call",)


def func_addrs(path):
    """Function start addresses by (demangled) name, from nm."""
    out = subprocess.run([BINUTILS + "nm", "-C", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    addrs = {}
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            addrs[parts[2]] = int(parts[0], 16)
    return addrs


def insn_before(path):
    """Address of each instruction's end -> the instruction ("call   1139 <read_loss>"), from objdump -d."""
    out = subprocess.run([BINUTILS + "objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True,
                         check=True).stdout
    starts = []
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(\S.*)$", line)
        if m:
            starts.append((int(m.group(1), 16), m.group(2).strip()))
    return {starts[i + 1][0]: starts[i][1] for i in range(len(starts) - 1)}


def frame_addr(f, addrs):
    m = SITE_RE.match(f["function"])
    check(m, f"site function {f['function']!r} is not name+0xOFF")
    name = m.group("name")
    check(name in addrs, f"{name} is not a function of {f['file']}")
    return name, addrs[name] + int(m.group("off"), 16)


def own_sites(p, path, stacks=False):
    """The process's sites in the executable at path: {function name: calls}, checking each offset with binutils."""
    addrs, before = func_addrs(path), insn_before(path)
    by_func = {}
    for s in p["call_sites"]:
        if s["kind"] != "native" or s["frames"][0]["file"] != path:
            continue
        check(len(s["frames"]) == 1 or stacks, f"a native site has {len(s['frames'])} frames without --stacks")
        f = s["frames"][0]
        check(f["line"] == 0, f"native frame with line {f['line']}")
        name, ret = frame_addr(f, addrs)
        check(before.get(ret, "").startswith(CALLS),
              f"{f['function']}: the instruction before {ret:#x} is {before.get(ret)!r}, not a call")
        by_func[name] = by_func.get(name, 0) + s["calls"]
    return by_func


def run_sites(args, record=None, opts=()):
    """callsites under the GPU simulator, traced from its start; (truth, the process's summary, summary)."""
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    pre = ["record", "-o", record] if record else []
    d = Dlbpf(pre + list(opts) + ["--", SITES] + args, env=env)
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    truth = truth_line(d.stdout, '{"sites"')
    s = d.summary()
    check(len(s["processes"]) == 1, f"expected one process, got {[p['pid'] for p in s['processes']]}")
    return truth, s["processes"][0], s


def check_c_sites(truth, p, stacks=False):
    got = own_sites(p, SITES, stacks)
    want = {fn: sum(apis.values()) for fn, apis in truth["sites"].items()}
    want["main"] = 1   # its cudaMalloc
    check(got == want, f"calls by function: dlbpf {got}, workload {want}")


def test_native_sites_c_workload():
    """Each named function's calls, exactly, at offsets just after call instructions; the CUDA time of the
    steps is the sites' time; the report names the sync's site."""
    truth, p, s = run_sites(["--steps", "20"])
    check_c_sites(truth, p)
    check(not [x for x in p["call_sites"] if x["kind"] == "unknown"], "unknown sites with a readable stack")
    cuda_cats = ("gpu_wait", "h2d", "d2h", "launch", "cuda_other")
    steps = [st for st in s["steps"] if st["pid"] == p["pid"]]
    check(len(steps) >= 15, f"{len(steps)} steps of 20")
    for c in cuda_cats:
        in_steps = sum(st["breakdown_ns"][c] for st in steps)
        in_sites = sum(x["categories"][c] for x in p["call_sites"])
        # Both are sums of the same pieces (each call clipped to its step): equal to the nanosecond.
        check(in_steps == in_sites, f"{c}: steps {in_steps} ns, sites {in_sites} ns")
    for st in steps:
        tops = st["top_call_sites"]
        check(1 <= len(tops) <= 3, f"step {st['index']}: {len(tops)} top call sites")
        check(all(tops[i]["ns"] >= tops[i + 1]["ns"] for i in range(len(tops) - 1)), "top sites not by time")
    wait = [x for x in p["call_sites"] if x["frames"] and x["frames"][0]["function"].startswith("read_loss+")]
    check(wait and wait[0]["categories"]["gpu_wait"] > 0, "the loss copy's wait is not at read_loss")
    return f"{sum(x['calls'] for x in p['call_sites'])} calls at {len(p['call_sites'])} sites"


def test_unreadable_return_address_counted():
    """Calls entered with [sp] unreadable are one unknown site with exactly their count, never a name."""
    truth, p, _ = run_sites(["--steps", "3", "--unreadable", "7"])
    check(truth["unreadable"] == 7, f"workload made {truth['unreadable']} unreadable calls")
    unknown = [x for x in p["call_sites"] if x["kind"] == "unknown"]
    check(len(unknown) == 1, f"{len(unknown)} unknown sites")
    check(unknown[0]["calls"] == 7 and unknown[0]["frames"] == [], f"unknown site: {unknown[0]}")
    check_c_sites(truth, p)   # the other calls keep their names
    launches = p["cuda"]["calls"]["cudaLaunchKernel"]
    check(launches["count"] == truth["sites"]["forward"]["cudaLaunchKernel"] + 7,
          f"{launches['count']} launches recorded")
    return "7 of 7 counted unknown"


def test_replay_same_sites():
    """A recording replays to the call sites the live run reported (no process left to read symbols from)."""
    rec = os.path.join(WORK, f"callsites-{os.getpid()}.dlbpf")
    truth, live, _ = run_sites(["--steps", "8", "--unreadable", "2"], record=rec)
    out = os.path.join(WORK, f"callsites-replay-{os.getpid()}.json")
    r = subprocess.run([DLBPF, "-q", "report", rec, "-j", out], capture_output=True,
                       text=True)
    check(r.returncode == 0, f"report exited {r.returncode}: {r.stderr[-1000:]}")
    replay = process(load_summary(out), live["pid"])
    check(replay["call_sites"] == live["call_sites"], "replayed call sites differ from the live run's")
    os.unlink(rec)
    check_c_sites(truth, replay)
    return f"{len(replay['call_sites'])} sites replayed"


def test_stacks_name_the_callers():
    """--stacks: syncs and synchronous copies carry their callers; each caller frame returns just after a call
    of the frame below it (objdump), and the counts per function stay exact; launches keep one frame."""
    truth, p, _ = run_sites(["--steps", "6"], opts=["--stacks"])
    check_c_sites(truth, p, stacks=True)
    addrs, before = func_addrs(SITES), insn_before(SITES)
    blocking = {"load_batch", "read_loss", "wait_gpu"}
    seen = set()
    for s in p["call_sites"]:
        fr = s["frames"]
        if not fr or fr[0]["file"] != SITES:
            continue
        name = SITE_RE.match(fr[0]["function"]).group("name")
        if name not in blocking:
            check(len(fr) == 1, f"{fr[0]['function']} (not blocking) has {len(fr)} frames")
            continue
        check(2 <= len(fr) <= 16, f"{fr[0]['function']}: {len(fr)} frames")
        check(fr[1]["file"] == SITES and fr[1]["function"].startswith("main+"), f"{name}'s caller: {fr[1]}")
        _, ret = frame_addr(fr[1], addrs)
        insn = before.get(ret, "")
        check(insn.startswith("call") and f"<{name}>" in insn,
              f"{fr[1]['function']}: the instruction before it is {insn!r}, not a call of {name}")
        seen.add(name)
    check(seen == blocking, f"stacks for {sorted(seen)}, want {sorted(blocking)}")
    return f"{len(seen)} functions' callers"


def test_native_sites_nvcc_static():
    """An nvcc-built binary (static cudart): its host functions' calls, exactly; launches return into the
    runtime's launch helper nvcc inlines into the binary, which is where the native site is."""
    d = Dlbpf(["--", NVCC_SITES])
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    truth = truth_line(d.stdout, '{"upload"')
    p = d.summary()["processes"][0]
    got = own_sites(p, NVCC_SITES)
    check(got.get("upload(float*, int)") == truth["upload"], f"upload: {got}")
    check(got.get("finish()") == truth["finish"], f"finish: {got}")
    launch_sites = sum(n for f, n in got.items() if "cudaLaunchKernel" in f)
    check(launch_sites == truth["layers"], f"launch sites {launch_sites}, layers launched {truth['layers']}: {got}")
    return f"{len(got)} functions"


if __name__ == "__main__":
    main()
