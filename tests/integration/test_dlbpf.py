#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Integration tests of the foundation: real BPF, real processes, compared
with independent truth (the workloads' own counters, /proc/PID/io,
/proc/PID/task/TID/schedstat). Run as root."""
import json
import os
import re
import signal
import subprocess
import time

from harness import (DLBPF, GPUSIM_DIR, WORK, Dlbpf, Failure, bystanders, check, check_oncpu, stolen_ns, check_close, load_summary, main, make_data_file,
                     process, run_dlbpf, trace_waiting, truth_line, check_copies_and_calls, workload)


def cuda_truth(stdout):
    return truth_line(stdout, "{\"h2d\"")


def compare_cuda(p, truth, expect_errors):
    cuda = p["cuda"]
    check_copies_and_calls(cuda, truth)
    for api, n in truth["calls"].items():
        if expect_errors and api != "cudaLaunchKernel":
            errs = cuda["calls"][api]["errors"]
            check(errs == n, f"{api}: {errs} errors of {n} (every call fails without a GPU)")
    kernels = sorted(cuda["kernels"], key=lambda k: k["name"])
    want = sorted(truth["kernels"], key=lambda k: k["name"])
    check(len(kernels) == len(want), f"kernels {kernels} != {want}")
    for k, w in zip(kernels, want):
        for field in ("name", "count", "grid", "block", "shmem"):
            check(k[field] == w[field], f"kernel {w['name']} {field}: {k[field]} != {w[field]}")
    h2d = cuda["memcpy"]["h2d"]
    pageable = truth["h2d"]["count"] - truth["pinned_h2d"]
    check(h2d["pageable"] == pageable, f"h2d pageable {h2d['pageable']} != {pageable}")


def test_cuda_real_runtime_command():
    """-- CMD against the toolkit's libcudart: exact counts, bytes, dims, all pageable."""
    d = Dlbpf(["--", workload("cuda_calls")])
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    truth = cuda_truth(d.stdout)
    p = process(d.summary(), d.summary()["processes"][0]["pid"])
    compare_cuda(p, truth, expect_errors=True)
    check(p["exited"] and p["exit_code"] == 0, "exit not reported")
    return f"{truth['h2d']['count']} h2d, {truth['d2h']['count']} d2h, 8 launches matched"


def test_cuda_through_wrappers():
    """A job started through wrappers (sh -c, env; a fork and exec after a sleep) is traced from the first
    instruction of each program: exact counts of every call, those made before main() included."""
    notes = []
    for shape, script in (("exec through sh and env", f"exec env {workload('cuda_calls')}"),
                          ("forked after a sleep", f"sleep 0.2; {workload('cuda_calls')}; exit $?")):
        d = Dlbpf(["--", "sh", "-c", script])
        rc = d.wait()
        check(rc == 0, f"{shape}: dlbpf exited {rc}: {d.stderr[-500:]}")
        truth = cuda_truth(d.stdout)
        procs = [p for p in d.summary()["processes"] if p["comm"] == "cuda_calls"]
        check(len(procs) == 1, f"{shape}: {len(procs)} processes named cuda_calls")
        compare_cuda(procs[0], truth, expect_errors=True)
        notes.append(f"{shape}: {sum(truth['calls'].values())} calls")
    return "; ".join(notes)


def test_cuda_real_runtime_pid():
    """--pid on an already running process: attach, then the calls."""
    w, out, d, rc = trace_waiting([workload("cuda_calls"), "--wait"])
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    compare_cuda(process(d.summary(), w.pid), cuda_truth(out), expect_errors=True)


def compare_nccl(p, truth, trace_path):
    """Every NCCL call: the count and errors the workload saw (its own results), and each collective's
    slice in the timeline: the arguments it passed, decoded from registers and the stack."""
    calls = p["cuda"]["calls"]
    for api, want in truth["calls"].items():
        got = calls.get(api)
        check(got is not None, f"{api}: not in the summary's calls ({sorted(calls)})")
        check(got["count"] == want["count"], f"{api}: {got['count']} calls, the workload made {want['count']}")
        check(got["errors"] == want["errors"], f"{api}: {got['errors']} errors, the workload saw {want['errors']}")
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    slices = [e for e in events if e.get("ph") == "X" and e.get("pid") == p["pid"] and e["name"].startswith("nccl")]
    for api, want in truth["args"].items():
        mine = [e for e in slices if e["name"] == api]
        check(len(mine) == truth["calls"][api]["count"],
              f"{api}: {len(mine)} slices, {truth['calls'][api]['count']} calls")
        for e in mine:
            for k, v in want.items():
                check(e["args"].get(k) == v, f"{api} slice: {k} = {e['args'].get(k)!r}, the workload passed {v!r}")
            check(e["args"].get("ret", 0) != 0, f"{api} slice: no error code, the call failed")
    version = [e for e in slices if e["name"] == "ncclGetVersion"]
    check(version and all(e["args"].get("version") == truth["version"] for e in version),
          f"ncclGetVersion: {[e['args'].get('version') for e in version]}, NCCL said {truth['version']}")
    init = [e for e in slices if e["name"] == "ncclCommInitRank"]
    check(init and all(e["args"].get("nranks") == 4 and e["args"].get("rank") == 1 for e in init),
          f"ncclCommInitRank nranks/rank: {[e['args'] for e in init]}")
    return sum(w["count"] for w in truth["calls"].values())


def test_nccl_real_library():
    """-- CMD against the toolkit's real libnccl.so.2 (which carries its own static cudart): the exact
    count and errors of each NCCL API, and the arguments of every collective, at two repeat counts."""
    notes = []
    for repeat in (1, 3):
        trace = os.path.join(WORK, f"nccl-{os.getpid()}-{repeat}.json")
        d = Dlbpf(["-o", trace, "--", workload("nccl_calls"), "--repeat", str(repeat)])
        rc = d.wait()
        check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-1500:]}")
        check("NCCL functions in" in d.stderr, f"no NCCL library attached: {d.stderr[-1500:]}")
        truth = truth_line(d.stdout, "{\"version\"")
        n = compare_nccl(process(d.summary(), d.summary()["processes"][0]["pid"]), truth, trace)
        os.unlink(trace)
        notes.append(f"repeat {repeat}: {n} calls")
    return "; ".join(notes)


def test_nccl_real_library_pid():
    """--pid on a process that mapped libnccl before dlbpf started."""
    trace = os.path.join(WORK, f"nccl-pid-{os.getpid()}.json")
    w, out, d, rc = trace_waiting([workload("nccl_calls"), "--wait", "--repeat", "2"], dlbpf_args=["-o", trace])
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-1500:]}")
    n = compare_nccl(process(d.summary(), w.pid), truth_line(out, "{\"version\""), trace)
    os.unlink(trace)
    return f"{n} calls matched"


def attach_to_calling(pause_ms, entry_first=False):
    """dlbpf --pid attaches to ratecalls while its thread calls cudaMemcpy in a loop (with the test hook
    DLBPF_TEST_LINK_PAUSE_MS, pause_ms after each link, as a collector descheduled between links would
    be; with DLBPF_TEST_ENTRY_LINK_FIRST if entry_first); once dlbpf traces, the workload makes AFTER
    more copies. Returns (the summary's process's "cuda", the workload's truth, the summary's drops)."""
    env = dict(os.environ)
    if pause_ms:
        env["DLBPF_TEST_LINK_PAUSE_MS"] = str(pause_ms)
    if entry_first:
        env["DLBPF_TEST_ENTRY_LINK_FIRST"] = "1"
    w, out, d, rc = trace_waiting([workload("ratecalls"), "--api", "copy", "--calling", "--count", str(AFTER)],
                                  env=env, timeout=120)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    truth = truth_line(out, "{\"api\"")
    check(truth["after_go"] == AFTER, f"ratecalls made {truth['after_go']} calls after the go, not {AFTER}")
    s = d.summary()
    return process(s, w.pid)["cuda"], truth, s["drops"]


AFTER = 20000   # copies made once dlbpf traces: all of them must be counted


def test_attach_to_process_in_calls():
    """--pid on a process calling cudaMemcpy as fast as it can while the probes go in: every copy made
    once dlbpf traces is counted, at depth 0. A call that met the entry probe before its return probe
    left a frame no return popped, under which every later copy was nested (not a copy) or dropped."""
    notes = []
    for pause_ms in (0, 50):
        cuda, truth, drops = attach_to_calling(pause_ms)
        h2d = cuda["memcpy"]["h2d"]["count"]
        calls = cuda["calls"].get("cudaMemcpy", {}).get("count", 0)
        what = f"pause {pause_ms} ms: {h2d} copies counted of {truth['calls']} made, {truth['after_go']} after the go"
        check(drops["depth"] == 0, f"{what}: {drops['depth']} calls dropped as nested too deep")
        # ratecalls never calls the runtime from inside the runtime: each recorded call is a copy.
        check(h2d == calls, f"{what}: {calls} cudaMemcpy calls recorded, {calls - h2d} of them nested")
        check(truth["after_go"] <= h2d <= truth["calls"], what)
        notes.append(f"{h2d} of {truth['calls']} (>= {truth['after_go']}) with a {pause_ms} ms pause")
    return "; ".join(notes)


def test_return_never_seen_recovered():
    """Entry links attached first (test hook) with a 50 ms pause: the calls entered in that gap never
    see their return probe. Their frames are dropped at the next entry and counted as depth drops,
    and every copy made once dlbpf traces is counted as a copy again."""
    cuda, truth, drops = attach_to_calling(50, entry_first=True)
    h2d = cuda["memcpy"]["h2d"]["count"]
    calls = cuda["calls"].get("cudaMemcpy", {}).get("count", 0)
    what = f"{h2d} copies counted of {truth['calls']} made, {truth['after_go']} after the go"
    check(drops["depth"] > 0, f"{what}: no call lost in the gap was counted as dropped")
    check(truth["after_go"] <= h2d <= truth["calls"], what)
    # Each frame left recovers at the next call after a return: the ones entered in the gap, at
    # most DL_MAX_DEPTH (4) with a frame, cost at most 3 later calls recorded as nested, not copies.
    check(calls - h2d <= 3, f"{what}: {calls - h2d} of {calls} cudaMemcpy calls recorded as nested")
    return f"{what}, {drops['depth']} lost in the gap and counted, {calls - h2d} nested"


def test_link_hooks_bad_value():
    """A test hook given a bad value is an error, not a run without it."""
    bad = [("DLBPF_TEST_LINK_PAUSE_MS", v) for v in ("abc", "0", "1001", "5ms", "")]
    bad += [("DLBPF_TEST_ENTRY_LINK_FIRST", v) for v in ("0", "yes", "")]
    for name, value in bad:
        rc, _, err = run_dlbpf(["--pid", str(os.getpid()), "-d", "0.1"], env=dict(os.environ, **{name: value}))
        check(rc != 0 and name in err, f"{name}={value!r}: exit {rc}, {err[-300:]}")


def test_cuda_pinned_on_simulator():
    """With the GPU simulator, cudaMallocHost/cudaHostRegister succeed: copies from them are pinned."""
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    d = Dlbpf(["--", workload("cuda_calls"), "--pinned"], env=env)
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    truth = cuda_truth(d.stdout)
    check(truth["pinned_alloc_ok"] == 1 and truth["register_ok"] == 1,
          f"simulator did not pin memory: {truth}")
    p = d.summary()["processes"][0]
    compare_cuda(p, truth, expect_errors=False)
    check(p["cuda"]["calls"]["cudaMemcpy"]["errors"] == 0, "simulated copies failed")
    return f"{truth['pinned_h2d']} pinned of {truth['h2d']['count']} h2d"


def run_ioread(extra):
    w, out, d, rc = trace_waiting([workload("ioread"), make_data_file(), "--wait"] + extra)
    check(w.returncode == 0, f"ioread failed: {out}")
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    return w.pid, json.loads(out.strip().splitlines()[-1]), d.summary()


ROUNDS = 16   # a loss in 1 run of 4 goes unseen in 16 with probability (3/4)^16 < 1%
WRITE_MIB = 8


def check_io_rounds(s, out, rounds):
    """Each round's child: bytes read == its /proc/PID/io read_bytes delta; bytes written, file system
    metadata left out, == what it wrote. Returns (rounds, completions not seen)."""
    lines = [json.loads(l) for l in out.splitlines() if l.startswith('{"pid"')]
    check(len(lines) == rounds, f"{len(lines)} of {rounds} rounds reported")
    unseen = 0
    for i, truth in enumerate(lines):
        io = process(s, truth["pid"])["io"]
        check(truth["read_bytes_delta"] >= truth["buffered"] + truth["direct"] - (1 << 20),
              f"round {i}: reads did not reach the disk: {truth}")
        check(io["read_bytes"] == truth["read_bytes_delta"],
              f"round {i}: dlbpf read_bytes {io['read_bytes']} != /proc/PID/io delta {truth['read_bytes_delta']}"
              f" ({io['unseen_ops']} completions not seen)")
        # Writes: O_DIRECT ones are submitted by the task, buffered ones written back by it in fsync
        # (dirty data is far below the background threshold and seconds younger than the flusher's
        # 30 s, so no kworker takes them). dlbpf reports the file system metadata the task wrote
        # apart (REQ_META); /proc/PID/io's write_bytes counts data as it is dirtied or submitted,
        # plus any clean metadata page the task dirtied: at least the data, a few pages more at most.
        written = truth["written_direct"] + truth["written_buffered"]
        data = io["write_bytes"] - io["write_meta_bytes"]
        check(data == written, f"round {i}: dlbpf wrote {data} data bytes, the workload wrote {written}")
        extra = truth["write_bytes_delta"] - written
        check(0 <= extra <= 16 * 4096 and extra % 4096 == 0,
              f"round {i}: /proc/PID/io write_bytes {truth['write_bytes_delta']} for {written} bytes written")
        check(io["read_ops"] > 0 and io["wait_ns"] > 0, f"round {i}: no request counts or latency")
        unseen += io["unseen_ops"]
    return len(lines), unseen


def test_block_io_matches_proc_io():
    """Buffered and O_DIRECT reads, O_DIRECT and fsync'd writes, in 16 processes one after the other
    under one dlbpf: each one's reads == its own /proc/PID/io delta, its data writes == its own count."""
    w, out, d, rc = trace_waiting([workload("ioread"), make_data_file(), "--wait", "--rounds", str(ROUNDS),
                                   "--write", str(WRITE_MIB)], timeout=180)
    check(w.returncode == 0, f"ioread failed: {out}")
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    n, unseen = check_io_rounds(d.summary(), out, ROUNDS)
    return f"{n} rounds of {48 + 2 * WRITE_MIB} MiB equal to /proc/PID/io; {unseen} completions not seen"


def test_forked_child_traced():
    """A child forked after attach is traced, with its ppid, and its reads are its own."""
    pid, truth, s = run_ioread(["--fork"])
    child = process(s, truth["pid"])
    check(truth["ppid"] == pid, f"workload's child has ppid {truth['ppid']}")
    check(child["ppid"] == pid, f"child's ppid in summary {child['ppid']} != {pid}")
    check(child["io"]["read_bytes"] == truth["read_bytes_delta"],
          f"child read_bytes {child['io']['read_bytes']} != {truth['read_bytes_delta']}")
    check(child["exited"], "child exit not reported")
    check(process(s, pid)["io"]["read_bytes"] == 0, "the child's reads were given to the parent")


def run_spinsleep(contended):
    spinner = None
    if contended:
        # A competitor on CPU 0, where the measured thread pins itself.
        spinner = subprocess.Popen(["taskset", "-c", "0", "sh", "-c", "while :; do :; done"])
    try:
        stolen = stolen_ns()
        d = Dlbpf(["--", workload("spinsleep"), "--seconds", "2", "--spin-ms", "4", "--sleep-ms", "3"])
        rc = d.wait()
        stolen = stolen_ns() - stolen
    finally:
        if spinner:
            spinner.kill()
            spinner.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    truth = json.loads(d.stdout.strip().splitlines()[0])
    return truth, process(d.summary(), truth["pid"]), stolen


def test_sched_uncontended():
    """Spin/sleep thread alone: on-CPU within 2% of schedstat (plus steal, above)."""
    truth, p, stolen = run_spinsleep(False)
    err = check_oncpu(p, truth, stolen)
    check(p["sched"]["blocked_ns"] > 0 and p["sched"]["switches"] > 100, f"no blocking seen: {p['sched']}")
    return f"on-CPU {p['sched']['oncpu_ns']} vs schedstat {truth['oncpu_ns']} ({err * 100:.2f}%)"


def test_sched_contended():
    """Spin/sleep thread sharing CPU 0 with a spinner: on-CPU within 2% (plus steal, above), run-queue
    wait within 5%."""
    truth, p, stolen = run_spinsleep(True)
    e1 = check_oncpu(p, truth, stolen)
    check(truth["runq_ns"] > 50_000_000, f"no contention happened: runq {truth['runq_ns']} ns")
    e2 = check_close(p["sched"]["runq_ns"], truth["runq_ns"], 0.05, "run-queue wait")
    return (f"on-CPU {e1 * 100:.2f}% off, runq {p['sched']['runq_ns']} vs {truth['runq_ns']} "
            f"({e2 * 100:.2f}% off)")


def test_sched_of_running_process():
    """--comm naming a process that was running (and switching) before dlbpf started: it is found
    after the scheduler programs are attached, so its tasks have "not traced" cached in the kernel
    by then; adding it must make them ask again, and its scheduling is traced from then on."""
    w = subprocess.Popen([workload("spinsleep"), "--seconds", "4", "--spin-ms", "4", "--sleep-ms", "3"],
                         stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        d = Dlbpf(["--comm", "spinsleep", "-d", "1.5"])
        rc = d.wait()
    finally:
        w.kill()
        w.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-500:]}")
    s = process(d.summary(), w.pid)["sched"]
    # 1.5 s of 4 ms spins and 3 ms sleeps: about 210 sleeps, 0.86 s on a CPU; half of each bounds a
    # loaded machine's stretch and the trace's first and last moments.
    check(s["switches"] > 105 and s["oncpu_ns"] > 430_000_000 and s["sleep_ns"] > 0,
          f"the running process's scheduling was not traced: {s}")
    return f"{s['switches']} switches, {s['oncpu_ns'] / 1e6:.0f} ms on a CPU"


def test_sched_of_process_joining_by_comm():
    """--comm: a process that joins the traced set when it execs under that name has been running
    (and switching) untraced as the forked child before: its scheduling is traced from the exec on."""
    d = Dlbpf(["--comm", "spinsleep", "-d", "3"])
    d.started()
    stolen = stolen_ns()
    w = subprocess.run([workload("spinsleep"), "--seconds", "1.5", "--spin-ms", "4", "--sleep-ms", "3"],
                       capture_output=True, text=True, timeout=30)
    stolen = stolen_ns() - stolen
    rc = d.wait()
    check(w.returncode == 0 and rc == 0, f"spinsleep exited {w.returncode}, dlbpf {rc}: {d.stderr[-500:]}")
    truth = json.loads(w.stdout.strip().splitlines()[0])
    p = process(d.summary(), truth["pid"])
    s = p["sched"]
    # Traced from its exec; the workload's truth counts from its start, after the exec: on-CPU within
    # 2% of its own schedstat, and above it by no more than the run's steal, as the tests above.
    err = check_oncpu(p, truth, stolen)
    check(s["switches"] > 100, f"too few switches traced: {s}")
    return f"{s['switches']} switches, on-CPU {err * 100:.2f}% off schedstat"


def test_sched_of_comm_joiner_kernel_side():
    """The kernel side alone starts tracing a process that joins by name: the collector is stopped for the
    process's whole life, so only BPF's own invalidation of the tasks' cached marks at the exec can make
    its scheduling traced (the collector's, on learning of the process, comes after it has exited)."""
    d = Dlbpf(["--comm", "spinsleep", "-d", "4"])
    d.started()
    stolen = stolen_ns()
    d.proc.send_signal(signal.SIGSTOP)
    try:
        # The shell waits for its sleep first: it switches, untraced, and so caches that answer before exec;
        # --main: the work is done by that same task, not by a new thread (which has no answer cached).
        w = subprocess.run(["sh", "-c", f"sleep 0.1; exec {workload('spinsleep')} --seconds 1 --spin-ms 4 "
                            "--sleep-ms 3 --main"], capture_output=True, text=True, timeout=30)
    finally:
        d.proc.send_signal(signal.SIGCONT)
    stolen = stolen_ns() - stolen
    rc = d.wait()
    check(w.returncode == 0 and rc == 0, f"spinsleep exited {w.returncode}, dlbpf {rc}: {d.stderr[-500:]}")
    truth = json.loads(w.stdout.strip().splitlines()[0])
    p = process(d.summary(), truth["pid"])
    err = check_oncpu(p, truth, stolen)
    return f"{p['sched']['switches']} switches while the collector was stopped, on-CPU {err * 100:.2f}% off schedstat"


def test_no_cuda_target():
    """A process without libcudart is traced (I/O, scheduler) and reported as such."""
    d = Dlbpf(["--", "sleep", "0.3"])
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}")
    p = d.summary()["processes"][0]
    check(p["cuda"]["found"] is False, "CUDA reported found")
    check("CUDA     not found" in d.stdout, "text report does not say CUDA was not found")
    check(p["sched"]["blocked_ns"] > 200_000_000, f"sleep not seen blocked: {p['sched']}")


def test_wrappers_folded():
    """A job launched through wrappers: processes that made no CUDA call, did no disk I/O and ran under 1% of a
    CPU while their parent was traced are one line of the text report; -v lists each; the JSON keeps all."""
    runs = 4
    subprocess.run(["/bin/true"], check=True)   # in the page cache: the traced runs read nothing from disk
    train = workload("train")
    cmd = ["--", "sh", "-c", f"for i in $(seq {runs}); do /bin/true; done; exec env {train} --scenario input "
           "--steps 10 --quiet"]
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    shown = {}
    for verbose in (False, True):
        summary = os.path.join(WORK, f"wrappers-{verbose}.json")
        rc, out, err = run_dlbpf((["-v"] if verbose else []) + ["-j", summary] + cmd, env=env)
        check(rc == 0, f"dlbpf exited {rc}: {err[-500:]}")
        shown[verbose] = (out, load_summary(summary))
    out, s = shown[False]
    procs = {p["pid"]: p for p in s["processes"]}
    trues = [p for p in s["processes"] if p["comm"] == "true"]
    check(len(trues) == runs, f"{len(trues)} processes named true in the JSON, the command ran {runs}")

    folded = bystanders(s)

    def bystander(p):
        return p in folded
    check(len(folded) >= runs - 1, f"only {len(folded)} bystanders: {[(p['comm'], p['io']) for p in trues]}")
    line = next((ln for ln in out.splitlines() if "more process" in ln), "")
    check(line.startswith(f"{len(folded)} more process"), f"fold line {line!r}, {len(folded)} bystanders")
    for p in s["processes"]:
        listed = f"PID {p['pid']} (" in out
        check(listed != bystander(p), f"pid {p['pid']} ({p['comm']}): listed {listed}, bystander {bystander(p)}")
        if bystander(p) and folded.index(p) < 8:
            check(f" {p['pid']} ({p['comm']})" in line, f"pid {p['pid']} not named in {line!r}")
    check(any(p["cuda"]["calls"] and f"PID {p['pid']} (train)" in out for p in s["processes"]),
          f"the job is folded: {[(p['pid'], p['comm'], list(p['cuda']['calls'])) for p in s['processes']]}")
    out_v, s_v = shown[True]
    listed_v = sum(f"PID {p['pid']} (" in out_v for p in s_v["processes"])
    check(listed_v == len(s_v["processes"]) and "more process" not in out_v,
          f"-v lists {listed_v} of {len(s_v['processes'])} processes")
    return f"{len(folded)} of {len(s['processes'])} processes folded into one line; -v lists all"


def test_exit_mid_trace():
    """A traced process exiting mid-trace is reported, dlbpf stops and succeeds."""
    w = subprocess.Popen(["sleep", "1"])
    start = time.monotonic()
    d = Dlbpf(["--pid", str(w.pid), "--duration", "20"])
    rc = d.wait()
    w.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    check(time.monotonic() - start < 10, "dlbpf waited for --duration after the process had exited")
    p = process(d.summary(), w.pid)
    check(p["exited"] is True, "exit not reported")
    check("exited during the trace" in d.stdout, "text report does not say the process exited")


def test_duration_and_signal():
    """--duration stops a trace of a live process; SIGTERM stops it too, both with a summary."""
    w = subprocess.Popen(["sleep", "30"])
    try:
        start = time.monotonic()
        d = Dlbpf(["--pid", str(w.pid), "--duration", "1"])
        rc = d.wait()
        check(rc == 0 and 0.9 < time.monotonic() - start < 10, f"--duration 1: rc {rc}")
        check(process(d.summary(), w.pid)["exited"] is False, "live process reported exited")
        d = Dlbpf(["--pid", str(w.pid)])
        d.started()
        rc = d.stop()
        check(rc == 0, f"SIGTERM: rc {rc}: {d.stderr}")
        check(d.summary()["schema"] == 1, "no summary after SIGTERM")
    finally:
        w.kill()
        w.wait()


def bpf_link_ids():
    """Every link on the machine. bpftool fails when a link it listed is gone before it reads it (another
    tracer stopping meanwhile): asked again then."""
    for _ in range(10):
        p = subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True, text=True)
        if p.returncode == 0:
            return {l["id"] for l in json.loads(p.stdout or "[]")}
        time.sleep(0.05)
    raise Failure(f"bpftool link list failed 10 times: {p.stderr.strip()[:300]}")


def link_ids_of(pid):
    """The BPF links pid holds a descriptor of (its fdinfo's link_id): its own, whatever else runs
    on the machine (another tracer's links made meanwhile are not taken for dlbpf's)."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("link_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass   # closed meanwhile
    return ids


def test_sigkill_leaves_nothing():
    """After SIGKILL of dlbpf, none of its links (uprobe_multi, raw tracepoints) remain."""
    w = subprocess.Popen([workload("cuda_calls"), "--wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        check(w.stdout.readline().strip() == "ready", "workload did not start")
        d = Dlbpf(["--pid", str(w.pid)])
        d.started()
        during = link_ids_of(d.proc.pid)
        check(len(during) >= 10, f"expected dlbpf's links while it runs, found {len(during)} new")
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        left = during & bpf_link_ids()
        for _ in range(50):
            if not left:
                break
            time.sleep(0.1)
            left = during & bpf_link_ids()
        check(not left, f"links left after SIGKILL: {sorted(left)}")
    finally:
        w.kill()
        w.wait()
    return f"{len(during)} links while running, 0 after SIGKILL"


def perf_attached():
    """The perf events with a BPF program on them, machine-wide (bpftool perf list)."""
    out = subprocess.run(["bpftool", "-j", "perf", "list"], capture_output=True, text=True, check=True).stdout
    return json.loads(out or "[]")


def pgrp_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[2])


def perf_event_holders(pgrp=None):
    """Pids holding a perf event fd (of process group pgrp only, if given: dlbpf's own and the children
    it forks, which keep its group, apart from other tracers that run meanwhile)."""
    pids = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if pgrp is not None and pgrp_of(int(pid)) != pgrp:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[perf_event]":
                    pids.add(int(pid))
                    break
        except OSError:
            pass   # gone, or a thread group we may not read
    return pids


def comm_of(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def stop_leaves_nothing(env=None):
    """Starts and stops dlbpf on a sleeping process; checks that nothing of its BPF is left once it
    exited, and that within 10 s no process it started holds a perf event. Returns (Dlbpf, the number
    of its syscall-event attachments, its links, its detach time in ms, and the processes named dlbpf
    that held a perf event right after its exit: its closer, if any)."""
    w = subprocess.Popen(["sleep", "60"])
    try:
        d = Dlbpf(["--pid", str(w.pid)], env=env)
        d.started()
        pgrp = pgrp_of(d.proc.pid)
        holders_before = perf_event_holders(pgrp) - {d.proc.pid}
        events = [e for e in perf_attached() if e.get("pid") == d.proc.pid]
        syscalls = {e.get("tracepoint") for e in events}
        check({"sys_enter_read", "sys_exit_read", "sys_enter_openat", "sys_enter_close"} <= syscalls,
              f"dlbpf's syscall events not found: {sorted(map(str, syscalls))}")
        links = link_ids_of(d.proc.pid)
        rc = d.stop()
        check(rc == 0, f"rc {rc}: {d.stderr[-300:]}")
        # wait() joined the readers: a closer that kept dlbpf's stdout or stderr would keep them open.
        check(not d.stderr_open(), "dlbpf's stderr is still held after it exited")
        progs = {e["prog_id"] for e in events}
        left = [e for e in perf_attached() if e["prog_id"] in progs]
        check(not left, f"programs still on perf events after dlbpf exited: {left}")
        check(not (links & bpf_link_ids()), f"links left after dlbpf exited: {sorted(links & bpf_link_ids())}")
        # The closer waits one grace period per event (tens of ms each); 10 s is far past that.
        new = perf_event_holders(pgrp) - holders_before
        at_exit = {pid for pid in new if comm_of(pid).startswith("dlbpf")}   # the closer: a fork of dlbpf's, not exec'd
        for _ in range(100):
            if not new:
                break
            time.sleep(0.1)
            new = perf_event_holders(pgrp) - holders_before
        check(not new, f"processes still hold perf events 10 s after dlbpf exited: {sorted(new)}")
        m = re.search(r"detached every probe in ([\d.]+) ms", d.stderr)
        check(m is not None, "no detach time in dlbpf -v's log")
    finally:
        w.kill()
        w.wait()
    return d, len(events), len(links), float(m.group(1)), at_exit


def test_stop_leaves_nothing():
    """A stopped dlbpf has taken every program off when it exits; the syscall events whose kernel
    teardown waits for grace periods are closed by a child of their own, which holds no pipe of
    dlbpf's and is gone soon after."""
    d, events, links, detach_ms, at_exit = stop_leaves_nothing()
    return (f"{events} tracepoint attachments and {links} links while running; none after; detach {detach_ms} ms; "
            f"{len(at_exit)} closer(s) holding the events at dlbpf's exit")


def test_stop_leaves_nothing_without_closer():
    """Where dlbpf cannot fork the closer of its syscall events (test hook DLBPF_TEST_NO_CLOSER), it
    closes them itself: the same nothing left, no process of its holding an event even at its exit."""
    d, events, links, detach_ms, at_exit = stop_leaves_nothing(dict(os.environ, DLBPF_TEST_NO_CLOSER="1"))
    check("DLBPF_TEST_NO_CLOSER" in d.stderr, "the test hook was not announced")
    check("no child to close the syscall events" in d.stderr, "dlbpf did not say it closed the events itself")
    check(not at_exit, f"processes held perf events as dlbpf exited, with no closer: {sorted(at_exit)}")
    return f"{events} tracepoint attachments and {links} links while running; none after; closed by dlbpf itself"


def expect_error(args, needle, env=None, prefix=None):
    cmd = (prefix or []) + [DLBPF] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, env=env)
    check(p.returncode != 0, f"{' '.join(args)}: exit 0, expected an error")
    check(needle in p.stderr, f"{' '.join(args)}: stderr lacks '{needle}': {p.stderr.strip()[:300]}")


def test_bad_input():
    """Each bad input: a clear message and a non-zero exit."""
    expect_error(["--pid", "0"], "invalid pid")
    expect_error(["--pid", "4194000"], "no process with pid 4194000")
    expect_error([], "nothing to trace")
    expect_error(["--pid", "abc"], "invalid pid")
    expect_error(["--pid", "1", "--duration", "soon"], "invalid duration")
    expect_error(["--pid", "1", "--ringbuf-mb", "3"], "power of two")
    expect_error(["--pid", "1", "--", "true"], "either --pid or a command")
    expect_error(["--json", "/nonexistent-dir/x.json", "--pid", "1"], "cannot write the JSON summary")
    expect_error(["--", "/nonexistent/program"], "cannot run '/nonexistent/program'")
    # Not root: an unprivileged user.
    expect_error(["--pid", "1"], "needs root", prefix=["setpriv", "--reuid=65534", "--regid=65534",
                                                        "--clear-groups", "--inh-caps=-all"])
    # No BTF: hide /sys/kernel/btf in a private mount namespace.
    expect_error(["--pid", "1"], "no BTF", prefix=["unshare", "-m", "sh", "-c",
                                                   "mount -t tmpfs none /sys/kernel/btf && exec \"$0\" \"$@\""])


def test_json_write_error():
    """A summary that cannot be written in full is an error, never a silent truncation."""
    rc, out, err = run_dlbpf(["-q", "--json", "/dev/full", "--", "true"])
    check(rc != 0, "writing to /dev/full succeeded")
    check("writing the JSON summary to /dev/full failed" in err, f"unclear error: {err.strip()}")



# --- mapped files read as the process sees them: a chroot, a private mount namespace, a deleted runtime.
# Each job's runtime is the toolkit's (its calls fail at once without a GPU; the probes still fire).
import shutil  # noqa: E402
import tempfile  # noqa: E402

TOOLKIT_CUDART = "/usr/local/cuda/lib64/libcudart.so.13"
# dlbpf as without CAP_SYS_ADMIN: mapped files by their paths, not /proc/PID/map_files.
BY_PATH = dict(os.environ, DLBPF_TEST_NO_MAP_FILES="1")
ROUTES = (("map_files", None), ("by path", BY_PATH))


def cuda_calls_root():
    """A minimal root holding cuda_calls, the libraries ldd names for it (the runtime among them) and the loader."""
    root = tempfile.mkdtemp(prefix="chroot-", dir=WORK)
    shutil.copy(workload("cuda_calls"), root)
    ldd = subprocess.run(["ldd", workload("cuda_calls")], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"(/\S+) \(0x", ldd)
    check(any("libcudart" in lib for lib in libs), f"ldd names no libcudart: {ldd}")
    for lib in libs:
        os.makedirs(root + os.path.dirname(lib), exist_ok=True)
        shutil.copy(lib, root + lib)   # the file a link names, under the link's name
    return root


def one_cuda_calls(d):
    procs = [p for p in d.summary()["processes"] if p["comm"] == "cuda_calls"]
    check(len(procs) == 1, f"{len(procs)} processes named cuda_calls")
    return procs[0]


def test_cuda_in_chroot():
    """`dlbpf -- chroot DIR /cuda_calls`, and --pid of such a process: the maps name the runtime from dlbpf's
    root (DIR/usr/...); it is read as the process has it (map_files, or by path with DIR taken off once), and
    every call is counted exactly."""
    root = cuda_calls_root()
    notes = []
    try:
        for route, env in ROUTES:
            d = Dlbpf(["--", "chroot", root, "/cuda_calls"], env=env)
            rc = d.wait()
            check(rc == 0, f"{route}: dlbpf exited {rc}: {d.stderr[-500:]}")
            check("cannot read" not in d.stderr, f"{route}: {d.stderr[-500:]}")
            truth = cuda_truth(d.stdout)
            compare_cuda(one_cuda_calls(d), truth, expect_errors=True)
            notes.append(f"{route}: {sum(truth['calls'].values())} calls")
        w, out, d, rc = trace_waiting(["chroot", root, "/cuda_calls", "--wait"])
        check(rc == 0, f"--pid: dlbpf exited {rc}: {d.stderr[-500:]}")
        compare_cuda(process(d.summary(), w.pid), cuda_truth(out), expect_errors=True)
        notes.append("--pid: every call")
    finally:
        shutil.rmtree(root)
    return "; ".join(notes)


def counts_in_mount_namespace(script, hidden, attached_at=None):
    """Runs script under `unshare --mount` by each route: what it mounts (at hidden) must not show in
    dlbpf's view, the runtime must be attached at attached_at if given, and every call counted exactly."""
    notes = []
    for route, env in ROUTES:
        d = Dlbpf(["--", "unshare", "--mount", "--propagation", "private", "sh", "-c", script], env=env)
        rc = d.wait()
        check(rc == 0, f"{route}: dlbpf exited {rc}: {d.stderr[-500:]}")
        check(not os.listdir(hidden), f"the namespace's mount shows in dlbpf's view: {os.listdir(hidden)}")
        if attached_at:
            mapped = f"CUDA runtime functions in {attached_at}"
            check(mapped in d.stderr, f"{route}: the runtime was not attached at {attached_at}: {d.stderr[-500:]}")
        truth = cuda_truth(d.stdout)
        try:
            if env is None:
                compare_cuda(one_cuda_calls(d), truth, expect_errors=True)
            else:
                # By path, code of a process of another mount namespace is named only while it lives
                # (no path of dlbpf's leads there after): the counts, not the kernels' names.
                check_copies_and_calls(one_cuda_calls(d)["cuda"], truth)
        except Failure as e:
            raise Failure(f"{route}: {e}")
        notes.append(f"{route}: {sum(truth['calls'].values())} calls")
    return "; ".join(notes)


def test_cuda_in_private_mount_namespace():
    """A job in a mount namespace of its own loads its runtime from a directory that, in dlbpf's view, is empty
    (a bind mount only the namespace has): read through the namespace, every call counted exactly."""
    held, view = (tempfile.mkdtemp(prefix=p, dir=WORK) for p in ("ns-lib-", "ns-view-"))
    shutil.copy(TOOLKIT_CUDART, os.path.join(held, "libcudart.so.13"))
    script = f"mount --bind {held} {view} && exec env LD_LIBRARY_PATH={view} {workload('cuda_calls')}"
    try:
        return counts_in_mount_namespace(script, view, f"{view}/libcudart.so.13")
    finally:
        shutil.rmtree(held)
        os.rmdir(view)


def test_cuda_on_overlayfs():
    """A job in a mount namespace of its own loads its runtime through an overlay file system (a container's
    root): the mapped file is the layer's, the path the overlay's, which dlbpf's view does not have; every
    call counted exactly."""
    top = tempfile.mkdtemp(prefix="overlay-", dir=WORK)
    lower, upper, work, merged = (os.path.join(top, n) for n in ("lower", "upper", "work", "merged"))
    for d in (lower, upper, work, merged):
        os.mkdir(d)
    shutil.copy(TOOLKIT_CUDART, os.path.join(lower, "libcudart.so.13"))
    script = (f"mount -t overlay overlay -o lowerdir={lower},upperdir={upper},workdir={work} {merged} && "
              f"exec env LD_LIBRARY_PATH={merged} {workload('cuda_calls')}")
    try:
        return counts_in_mount_namespace(script, merged)
    finally:
        shutil.rmtree(top)


def test_cuda_runtime_deleted_after_start():
    """A job's runtime deleted once the job has mapped it (a package upgrade, a temporary copy): dlbpf --pid
    reads the mapped file through /proc/PID/map_files and counts every call; by path it cannot, and says so once."""
    notes = []
    for route, env in ROUTES:
        d_lib = tempfile.mkdtemp(prefix="deleted-", dir=WORK)
        lib = os.path.join(d_lib, "libcudart.so.13")
        shutil.copy(TOOLKIT_CUDART, lib)
        w = subprocess.Popen([workload("cuda_calls"), "--wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=dict(os.environ, LD_LIBRARY_PATH=d_lib))
        try:
            check(w.stdout.readline().strip() == "ready", "cuda_calls did not start")
            os.unlink(lib)   # mapped since the job's start: the maps now say "(deleted)"
            with open(f"/proc/{w.pid}/maps") as f:
                check(f"{lib} (deleted)" in f.read(), f"the job's maps do not show {lib} deleted")
            d = Dlbpf(["--pid", str(w.pid)], env=env)
            d.started()
            w.stdin.write("go\n")
            w.stdin.flush()
            out, _ = w.communicate(timeout=60)
            rc = d.wait()
        finally:
            if w.poll() is None:
                w.kill()
                w.wait()
            shutil.rmtree(d_lib)
        check(rc == 0, f"{route}: dlbpf exited {rc}: {d.stderr[-500:]}")
        p = process(d.summary(), w.pid)
        if env is None:
            truth = cuda_truth(out)
            compare_cuda(p, truth, expect_errors=True)
            notes.append(f"{route}: {sum(truth['calls'].values())} calls")
        else:
            said = [ln for ln in d.stderr.splitlines() if f"cannot read {lib} (deleted)" in ln]
            check(len(said) == 1 and "map_files" in said[0], f"{route}: not said once why: {d.stderr[-500:]}")
            check(not p["cuda"]["found"], f"{route}: a runtime was found in a deleted file by its path")
            notes.append(f"{route}: said once")
    return "; ".join(notes)



# --- under sudo: the outputs are the user's, and --run-as runs the command as them --------------
import pwd  # noqa: E402

AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_sudo_outputs_and_run_as():
    """As sudo runs it (SUDO_UID and SUDO_GID of nobody, here set by hand), the outputs and the flight
    recorder's directory are nobody's, 0600, and nobody's own `dlbpf report` reads the recording;
    --run-as nobody runs the command as nobody (uid, group, groups, HOME, USER, LOGNAME as the passwd
    entry says), and its calls are traced exactly."""
    user = pwd.getpwnam("nobody")
    d = tempfile.mkdtemp(prefix="sudo-")   # in /tmp: nobody can reach it wherever the checkout is
    os.chmod(d, 0o755)
    os.chown(d, user.pw_uid, user.pw_gid)   # nobody writes its own report there
    try:
        job = os.path.join(d, "cuda_calls")
        shutil.copy(workload("cuda_calls"), job)
        rec, js, html = (os.path.join(d, n) for n in ("r.dlbpf", "s.json", "r.html"))
        env = dict(os.environ, SUDO_UID=str(user.pw_uid), SUDO_GID=str(user.pw_gid), SUDO_USER="nobody")
        p = subprocess.run([DLBPF, "record", "-q", "-o", rec, "-j", js, "--html", html, "--run-as", "nobody", "--",
                            "sh", "-c", f'echo ids $(id -u) $(id -g) "$(id -G)" "$USER" "$LOGNAME" "$HOME"; exec {job}'],
                           capture_output=True, text=True, timeout=120, env=env)
        check(p.returncode == 0, f"exit {p.returncode}: {p.stderr[-500:]}")
        ids = [ln for ln in p.stdout.splitlines() if ln.startswith("ids ")]
        want = f"ids {user.pw_uid} {user.pw_gid} {user.pw_gid} nobody nobody {user.pw_dir}"
        check(ids == [want], f"the command ran as {ids}, not {want!r}")
        for path in (rec, js, html):
            st = os.stat(path)
            check((st.st_uid, st.st_gid, st.st_mode & 0o7777) == (user.pw_uid, user.pw_gid, 0o600),
                  f"{os.path.basename(path)}: uid {st.st_uid} gid {st.st_gid} mode {st.st_mode & 0o7777:o}")
        procs = [q for q in load_summary(js)["processes"] if q["comm"] == "cuda_calls"]
        check(len(procs) == 1, f"{len(procs)} cuda_calls processes")
        truth = cuda_truth(p.stdout)
        compare_cuda(procs[0], truth, expect_errors=True)
        # The user's own report of it, without root.
        replay = os.path.join(d, "replay.json")
        r = subprocess.run(AS_NOBODY + [DLBPF, "report", rec, "-j", replay], capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"nobody's report: exit {r.returncode}: {r.stderr[-300:]}")
        compare_cuda([q for q in load_summary(replay)["processes"] if q["comm"] == "cuda_calls"][0], truth,
                     expect_errors=True)
        ring = os.path.join(d, "ring")
        rc, _, err = run_dlbpf(["record", "-q", "--ring", "1", "-o", ring, "--", "true"], env=env)
        st = os.stat(ring)
        check(rc == 0 and (st.st_uid, st.st_mode & 0o7777) == (user.pw_uid, 0o700),
              f"flight recorder directory: exit {rc}, uid {st.st_uid}, mode {st.st_mode & 0o7777:o}: {err[-300:]}")
        # Without sudo's variables, root's outputs stay root's.
        rc, _, err = run_dlbpf(["-q", "-j", os.path.join(d, "root.json"), "--", "true"])
        check(rc == 0 and os.stat(os.path.join(d, "root.json")).st_uid == 0, f"exit {rc}: {err[-300:]}")
    finally:
        shutil.rmtree(d)
    return f"{sum(truth['calls'].values())} calls traced as nobody; 3 outputs and the ring directory nobody's"


def test_run_as_bad_usage():
    """--run-as with an unknown user, without a command, or with report: usage errors (exit 2), nothing run."""
    for args, says in ((["--run-as", "no-such-user-dlbpf", "--", "true"], "no such user"),
                       (["--run-as", "nobody", "--pid", "1"], "needs one"),
                       (["report", "x.dlbpf", "--run-as", "nobody"], "applies to -- COMMAND")):
        rc, _, err = run_dlbpf(args)
        check(rc == 2 and says in err, f"{args}: exit {rc}: {err.strip()[-200:]}")


if __name__ == "__main__":
    main()
