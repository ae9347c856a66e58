#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Reads attributed to files (processes[].files) and the small-reads finding, against the
workloads' own counts: fileread's per-file read_bytes, calls and /proc/self/io deltas, train's
per-batch bytes; the same by every mechanism the files source has on this kernel (fentry, kprobes,
syscall tracepoints), and which syscall events hold a program meanwhile, by the kernel's own list
(bpftool perf list). Run as root."""
import json
import os
import subprocess
import time

from harness import (DLBPF, GPUSIM_DIR, WORK, Dlbpf, Skipped, check, load_summary, main, process, run_dlbpf,
                     truth_line, workload)

FILES_DIR = os.path.join(WORK, "files")
# Sizes that are no multiple of a page or of a read call, so a byte lost or counted twice shows.
SIZES = {"held.dat": 1_238_257, "a.dat": 3_000_057, "b.dat": 413_497, "c.dat": 83_697, "d.dat": 1_050_631,
         "e.dat": 532_489}
IO_KB = 16


def make_files():
    os.makedirs(FILES_DIR, exist_ok=True)
    for name, size in SIZES.items():
        path = os.path.join(FILES_DIR, name)
        if not os.path.exists(path) or os.path.getsize(path) != size:
            with open(path, "wb") as f:
                f.write(os.urandom(size))
                f.flush()
                os.fsync(f.fileno())


def run_fileread(dlbpf_args, env=None, during=None, before_go=None):
    """fileread --wait under dlbpf --pid: attached while held.dat is already open. Returns the
    finished Dlbpf and the workload's truth lines by pid; before_go(d) and during(d), if given, run
    while dlbpf traces (before the reads; after them, before the workload ends)."""
    make_files()
    w = subprocess.Popen([workload("fileread"), FILES_DIR, "--wait", "--io-kb", str(IO_KB)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        check(w.stdout.readline().strip() == "ready", "fileread did not start")
        d = Dlbpf(list(dlbpf_args) + ["--pid", str(w.pid)], env=env)
        d.started()
        if before_go:
            before_go(d)
        w.stdin.write("go\n")
        w.stdin.flush()
        truths = {}
        while len(truths) < 2:
            line = w.stdout.readline()
            check(line, "fileread ended before printing its truth")
            if line.startswith("{"):
                t = json.loads(line)
                truths[t["pid"]] = t
        check(w.stdout.readline().strip() == "ready", "fileread did not finish")
        if during:
            during(d)
        # A loader runs on: the records are read (a 10 ms drain) while it is still there, as
        # relative paths need (their cwd is read from /proc). Generous for a loaded machine.
        time.sleep(1.0)
        w.stdin.write("done\n")
        w.stdin.flush()
        w.communicate(timeout=60)
        rc = d.wait()
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    check(w.returncode == 0, f"fileread exited {w.returncode}")
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    return d, truths


def files_of(p):
    return {f["path"]: f for f in p["files"]}


def compare_files(summary, truths):
    """Every file each process read: exact bytes and calls; disk bytes equal to what the kernel
    counted for the task (/proc/self/io) over that file's reads. A mapped file (mmap) is read by
    page faults, no read call: no read is attributed to it, and what the faults brought from the
    disk is its fault_bytes, exactly the kernel's count over them."""
    n = 0
    for pid, t in truths.items():
        got = files_of(process(summary, pid))
        for f in t["files"]:
            if f.get("mmap"):
                check(f["path"] in got, f"pid {pid}: the mapped {f['path']} ({f['io_delta']} B faulted in) not in {sorted(got)}")
                g = got[f["path"]]
                check((g["read_bytes"], g["reads"], g["disk_bytes"]) == (0, 0, 0),
                      f"pid {pid}: the mapped {f['path']} has reads attributed: {g}")
                check(g["fault_bytes"] == f["io_delta"],
                      f"pid {pid}: the mapped {f['path']}: fault_bytes {g['fault_bytes']} != {f['io_delta']}")
                continue
            check(f["path"] in got, f"pid {pid}: {f['path']} not in {sorted(got)}")
            g = got[f["path"]]
            for key, truth_key in (("read_bytes", "read_bytes"), ("reads", "reads"), ("disk_bytes", "io_delta")):
                check(g[key] == f[truth_key], f"pid {pid} {f['path']}: {key} {g[key]} != {f[truth_key]}")
            n += 1
    return n


def test_files_exact():
    """--pid on a running reader: an fd opened before the attach, relative paths, fd reuse,
    readv/preadv, a forked child's inherited fd, uncached vs cached reads; an untraced reader
    of the same file is not counted."""
    make_files()
    # An untraced process reading the same file meanwhile: its reads are not the job's.
    other = subprocess.Popen(["sh", "-c", f"for i in 1 2 3 4 5 6 7 8; do cat {FILES_DIR}/a.dat >/dev/null; "
                              "sleep 0.1; done"])
    try:
        d, truths = run_fileread([])
    finally:
        other.wait()
    s = d.summary()
    n = compare_files(s, truths)
    check(other.pid not in [p["pid"] for p in s["processes"]], "the untraced reader was traced")
    parent = min(truths)   # forked later: a larger pid (no wrap in a test's lifetime)
    t = {f["path"]: f for f in truths[parent]["files"]}
    a, b = t[os.path.join(FILES_DIR, "a.dat")], t[os.path.join(FILES_DIR, "b.dat")]
    check(a["fd"] == b["fd"], f"the workload did not reuse the fd ({a['fd']} vs {b['fd']})")
    # The untraced reader of the same file may bring some of its pages into the cache first: what matters
    # is that part of it came from the disk, counted exactly (compare_files: disk_bytes == io_delta).
    check(a["io_delta"] > 0, f"a.dat was not read from disk at all (io_delta {a['io_delta']})")
    # O_DIRECT bypasses the page cache: every byte read came from the disk, and dlbpf said so.
    direct = t[os.path.join(FILES_DIR, "d.dat")]
    check(direct["io_delta"] >= SIZES["d.dat"], f"d.dat (O_DIRECT): {direct['io_delta']} B from disk")
    # The mapped file's bytes came in by faults that no read call made: its fault_bytes (compare_files).
    mapped = t[os.path.join(FILES_DIR, "e.dat")]
    check(mapped["io_delta"] > 0, f"the mapped e.dat did not fault from disk (io_delta {mapped['io_delta']})")
    child = max(truths)
    again = files_of(process(s, child))[os.path.join(FILES_DIR, "a.dat")]
    check(again["disk_bytes"] == 0, f"the cached re-read of a.dat has disk_bytes {again['disk_bytes']}")
    p = process(s, parent)
    # Its stdin is a pipe, no file: the one line read from it after the attach ("done\n").
    check(p["files_unknown_fd"]["read_bytes"] == len("done\n"), f"reads on unknown fds: {p['files_unknown_fd']}")
    return (f"{n} files exact (bytes, calls, disk); a.dat uncached {a['io_delta']} B from disk, "
            f"cached re-read 0; O_DIRECT d.dat {direct['io_delta']} B from disk; mapped e.dat "
            f"{mapped['io_delta']} B faulted in, exact")


def test_files_trace_reads():
    """The timeline's read slices (-o trace.json): on each reading thread's track, per file, their bytes
    add up to what the workload read and they are as many as its read calls, the fd opened before the
    attach and the child's inherited one included."""
    trace = os.path.join(WORK, "files-trace.json")
    d, truths = run_fileread(["-o", trace])
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    reads = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "file" and e["name"] == "read":
            k = (e["pid"], e["args"]["file"])
            b, n = reads.get(k, (0, 0))
            reads[k] = (b + e["args"]["bytes"], n + 1)
    n = 0
    for pid, t in truths.items():
        for f in t["files"]:
            got = reads.get((pid, f["path"]), (0, 0))
            check(got == (f["read_bytes"], f["reads"]), f"pid {pid} {f['path']}: read slices {got[0]} bytes in "
                  f"{got[1]}, the workload read {f['read_bytes']} in {f['reads']}")
            n += 1
    return f"{n} files' read slices exact"


def test_files_hostile():
    """Files a traced process names badly: a space, a newline, bytes that are not UTF-8 and a terminal
    escape in their names, one deleted while open, and a child killed while blocked in a read: every
    file's bytes and calls exact under its name as Python decodes it (invalid bytes as U+FFFD, the JSON
    still JSON), the report's text free of raw control bytes, the killed child's reads up to the kill."""
    return check_hostile(None)


def check_hostile(env):
    d = os.path.join(WORK, "hostile files")
    os.makedirs(d, exist_ok=True)
    p = subprocess.run([DLBPF, "-q", "--json", os.path.join(WORK, "hostile.json"), "--", workload("hostile_files"), d],
                       capture_output=True, timeout=60, env=env)
    check(p.returncode == 0, f"dlbpf exited {p.returncode}: {p.stderr[-1500:]!r}")
    truth = json.loads([l for l in p.stdout.decode("utf-8", "replace").splitlines() if l.startswith('{"pid"')][-1])
    s = load_summary(os.path.join(WORK, "hostile.json"))
    base = bytes.fromhex(truth["dir"])
    got = files_of(process(s, truth["pid"]))
    for f in truth["files"]:
        name = (base + b"/" + bytes.fromhex(f["hex"])).decode("utf-8", "replace")
        check(name in got, f"{name!r} not in {sorted(got)}")
        check(got[name]["read_bytes"] == f["read_bytes"] and got[name]["reads"] == f["reads"],
              f"{name!r}: {got[name]['read_bytes']} bytes in {got[name]['reads']} calls, the workload read "
              f"{f['read_bytes']} in {f['reads']}")
    child = truth["child"]
    name = (base + b"/" + bytes.fromhex(child["hex"])).decode("utf-8", "replace")
    cp = process(s, child["pid"])
    cf = files_of(cp).get(name)
    check(cf and cf["read_bytes"] == child["read_bytes"] and cf["reads"] == child["reads"],
          f"the killed child's reads of {name!r}: {cf}, it made {child['reads']} of {child['read_bytes']} bytes")
    check(cp["exited"], "the killed child is not reported as exited")
    # What the terminal gets: no raw escape, no forged line from the newline in a name.
    out = p.stdout.decode("utf-8", "replace")
    check("\x1b" not in out and not any(l.startswith("line.dat") for l in out.splitlines()),
          "the report prints a traced name's control bytes raw")
    check("new\\x0aline.dat" in out, "the report does not show the newline of a name escaped")
    return f"{len(truth['files'])} hostile files and a killed reader exact"

# The files source's mechanisms, cheapest first, and the test hook that takes each away
# (DLBPF_FORCE_TWINS, user/capture/hooks.h): without fentry dlbpf takes kprobes, without both the
# syscall tracepoints.
MECHS = (("fentry", ()), ("kprobe", ("fentry",)), ("tracepoint", ("fentry", "kprobes")))
# What `dlbpf -v` says at start for each (user/capture/files.c, dl_files_mech_cost).
SAID = {"fentry": "seen by fentry/fexit", "kprobe": "seen by kprobes/kretprobes", "tracepoint": "seen by syscall tracepoints"}


def mechanisms():
    """The mechanisms this kernel offers, by `dlbpf features` (its files line names the cheapest)."""
    rc, out, err = run_dlbpf(["features"])
    check(rc == 0, f"dlbpf features exited {rc}: {err}")
    have = {l.split()[0]: l.split()[1] for l in out.splitlines() if len(l.split()) > 1}
    check(have.get("files") in SAID, f"no files line naming a mechanism: {out}")
    offered = [m for m, _ in MECHS if m == "tracepoint" or have.get("kprobes" if m == "kprobe" else m) == "yes"]
    check(have["files"] == offered[0], f"features names {have['files']}, the cheapest offered is {offered[0]}")
    return offered


def forced(without):
    env = dict(os.environ)
    env.pop("DLBPF_FORCE_TWINS", None)
    if without:
        env["DLBPF_FORCE_TWINS"] = ",".join("without-" + f for f in without)
    return env


def held_events(pid):
    """What dlbpf (pid) holds on perf events, by the kernel's own list: the syscall tracepoints and
    the kprobed functions that carry one of its programs."""
    out = subprocess.run(["bpftool", "perf", "list", "-j"], capture_output=True, text=True, timeout=30)
    check(out.returncode == 0, f"bpftool perf list: {out.stderr}")
    sys_tps, kprobes = set(), set()
    for e in json.loads(out.stdout or "[]"):
        if e.get("pid") != pid:
            continue
        if e.get("fd_type") == "tracepoint" and e.get("tracepoint", "").startswith(("sys_enter_", "sys_exit_")):
            sys_tps.add(e["tracepoint"])
        elif e.get("fd_type") in ("kprobe", "kretprobe"):
            kprobes.add((e["fd_type"], e.get("func")))
    return sys_tps, kprobes


def net_entry_events():
    """The receive calls' entries the network source adds on the files source's mechanism (recvfrom,
    recvmsg: bpf/net.bpf.c), where the kernel has a network mechanism (`dlbpf features`)."""
    out = subprocess.run([DLBPF, "features"], capture_output=True, text=True, timeout=60).stdout
    line = [l.split() for l in out.splitlines() if l.split()[:1] == ["network"]]
    return 2 if line and line[0][1] != "none" else 0


def test_files_every_mechanism():
    """fileread and hostile_files by each mechanism this kernel offers, forced with the test hook: the
    same exact bytes, calls and disk bytes, against the workloads' own counts; dlbpf says which one it
    runs on; and the kernel's list of perf events shows syscall tracepoints holding dlbpf's programs
    only for the tracepoint fallback (the six handlers kprobed for kprobes, nothing for fentry)."""
    notes = []
    offered = mechanisms()
    files_events = 11 + net_entry_events()
    # Each mechanism, and the cheapest again with 5.10's per-thread state (hashes by thread id, the
    # task by probe reads) in place of task storage.
    for mech, old in [(m, ()) for m in offered] + [(offered[0], ("task_storage", "task_btf"))]:
        without = dict(MECHS)[mech] + old
        held = {}
        d, truths = run_fileread(["-v"], env=forced(without),
                                 during=lambda d: held.update(zip(("tps", "kprobes"), held_events(d.proc.pid))))
        check(SAID[mech] in d.stderr, f"{mech}: no start-up line says so: {d.stderr[-1500:]}")
        s = d.summary()
        try:
            n = compare_files(s, truths)
        except Exception as e:
            raise type(e)(f"{mech}{' without ' + '+'.join(old) if old else ''}: {e}")
        # Time inside the reads, reported (not asserted: it is the workload's time, not a count).
        read_ms = sum(f["read_ns"] for pid in truths for f in process(s, pid)["files"]) / 1e6
        if mech == "tracepoint":
            check(len(held["tps"]) == files_events, f"tracepoint: {len(held['tps'])} syscall events hold a program: "
                  f"{sorted(held['tps'])}")
            check("every system call of every task" in d.stderr and "--no-files" in d.stderr,
                  f"the fallback does not say what it costs the node: {d.stderr[-1500:]}")
        else:
            check(not held["tps"], f"{mech}: syscall tracepoints hold programs: {sorted(held['tps'])}")
            want = files_events if mech == "kprobe" else 0
            check(len(held["kprobes"]) == want, f"{mech}: {len(held['kprobes'])} kprobes, want {want}: "
                  f"{sorted(held['kprobes'])}")
        hostile = check_hostile(forced(without))
        notes.append(f"{mech}{' without ' + '+'.join(old) if old else ''}: {n} files exact ({read_ms:.1f} ms in reads), {hostile}; syscall events held "
                     f"{len(held['tps'])}, kprobes {len(held['kprobes'])}")
    return "; ".join(notes)


# Untraced threads that spend their time blocked in read(2), each on its own pipe, woken in turn.
BLOCKERS = r"""
import os, sys, threading, time
n = int(sys.argv[1])
pipes = [os.pipe() for _ in range(n)]
def reader(fd):
    while os.read(fd, 1):
        pass
for r, _ in pipes:
    threading.Thread(target=reader, args=(r,), daemon=True).start()
print("ready", flush=True)
while sys.stdin.readline():   # a line: wake every reader once, so each enters read(2) again
    for _, w in pipes:
        os.write(w, b"x")
"""


def kprobe_events_of_dlbpf():
    for root in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        try:
            with open(os.path.join(root, "kprobe_events")) as f:
                return [l.strip() for l in f if ":dlbpf/" in l]
        except OSError:
            continue
    return []


def test_files_kprobe_pool_busy_node():
    """By kprobes, on a node where many untraced threads sit blocked in read(2): each holds one of a
    return probe's instances from its read's entry to its return, and the kernel's default pool is
    max(10, 2 x possible CPUs). With more blockers than that, a pool of that size would miss the traced
    job's read returns; dlbpf's return probes take the kernel's largest pool (tracefs "r4096:"), so
    fileread's bytes stay exact, the kernel reports no skipped run, and no event is left in tracefs."""
    if "kprobe" not in mechanisms():
        raise Skipped("this kernel offers no kprobes")
    with open("/sys/devices/system/cpu/possible") as f:
        possible = 0
        for part in f.read().strip().split(","):
            lo, _, hi = part.partition("-")
            possible += int(hi or lo) - int(lo) + 1
    n = max(10, 2 * possible) + 32   # the default pool, and as many again as a margin the test controls
    b = subprocess.Popen(["python3", "-c", BLOCKERS, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        check(b.stdout.readline().strip() == "ready", "the blockers did not start")

        def wake(d):
            # After attach: every blocker reads again, each taking an instance it holds while blocked.
            b.stdin.write("go\n")
            b.stdin.flush()
        d, truths = run_fileread(["-v"], env=forced(("fentry",)), during=None, before_go=wake)
        check(SAID["kprobe"] in d.stderr, f"not on kprobes: {d.stderr[-1500:]}")
        s = d.summary()
        files = compare_files(s, truths)
        misses = s["drops"]["recursion_misses"]
        check(misses == 0, f"the kernel skipped {misses} runs: {s['drops']['recursion_misses_by_program']}")
    finally:
        b.stdin.close()
        b.wait(timeout=30)
    left = kprobe_events_of_dlbpf()
    check(not left, f"dlbpf left kprobe events in tracefs: {left}")
    return f"{n} untraced threads blocked in read; {files} files exact, 0 skipped runs, tracefs clean"


def test_files_replay():
    """A recording replays to the same files as the live run that recorded it."""
    rec = os.path.join(WORK, "files.dlbpf")
    d, truths = run_fileread(["record", "-o", rec])
    live = d.summary()
    replay = os.path.join(WORK, "files-replay.json")
    r = subprocess.run([DLBPF, "report", rec, "--json", replay], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"report failed: {r.stderr}")
    back = load_summary(replay)
    keys = ("files", "files_more", "files_unknown_fd", "read_errors")
    for pid in truths:
        a, b = process(live, pid), process(back, pid)
        for k in keys:
            check(a[k] == b[k], f"pid {pid}: replayed {k} differs: {b[k]} != {a[k]}")
    n = compare_files(back, truths)
    return f"replay equals live; {n} files exact in the replay"


def test_files_real_cudart():
    """A job that reads a data file and calls the toolkit's real libcudart (cuda_calls): the file's bytes
    exact (its size: cat reads it whole) beside exact CUDA counts, by the mechanism this kernel gives."""
    from test_dlbpf import compare_cuda, cuda_truth
    make_files()
    path = os.path.join(FILES_DIR, "a.dat")
    d = Dlbpf(["-v", "--", "sh", "-c", f"cat {path} >/dev/null && exec {workload('cuda_calls')}"])
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-1500:]}")
    s = d.summary()
    got = sum(f["read_bytes"] for p in s["processes"] for f in p["files"] if f["path"] == path)
    check(got == SIZES["a.dat"], f"{path}: {got} bytes attributed, the file has {SIZES['a.dat']}")
    truth = cuda_truth(d.stdout)
    calls = [p for p in s["processes"] if p["comm"] == "cuda_calls" or p["cuda"].get("calls")]
    check(len(calls) == 1, f"{len(calls)} processes with CUDA calls")
    compare_cuda(calls[0], truth, expect_errors=True)
    mech = [l for l in d.stderr.splitlines() if "files: read, openat and close seen by" in l]
    return f"{got} B of the data file exact, {sum(truth['calls'].values())} CUDA calls exact; " + \
        (mech[0].split(" seen by ")[1].split(" (")[0].split(":")[0] if mech else "mechanism not said")


TRAIN_DATA = os.path.join(WORK, "files-train.bin")


def test_no_files():
    """--no-files: no read is attributed, the rest is traced as before."""
    make_files()
    path = os.path.join(FILES_DIR, "a.dat")
    d = Dlbpf(["--no-files", "--", "sh", "-c", f"cat {path} >/dev/null"])
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-500:]}")
    s = d.summary()
    listed = [f["path"] for p in s["processes"] for f in p["files"]]
    check(not listed, f"--no-files listed files: {listed}")
    check(s["processes"] and s["processes"][0]["sched"]["switches"] > 0, "the command's scheduling not traced")
    return "no files, scheduling traced"


def run_train(extra):
    truth = os.path.join(WORK, "truth-files-train.jsonl")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    d = Dlbpf(["--", workload("train"), "--scenario", "disk", "--steps", "40", "--quiet", "--truth", truth,
               "--data", TRAIN_DATA]
              + list(extra), env=env)
    rc = d.wait(timeout=120)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-2000:]}")
    with open(truth) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    return d.summary(), [l for l in lines if "step" in l and "summary" not in l]


def loader_bytes(summary):
    """Bytes and calls the job's processes read from the data set."""
    total = calls = 0
    for p in summary["processes"]:
        for f in p["files"]:
            if f["path"] == TRAIN_DATA:
                total += f["read_bytes"]
                calls += f["reads"]
    return total, calls


def test_small_reads_finding():
    """train --scenario disk reads its batches in 4 KiB calls: small-reads, with the count; the
    same with --io-kb 1024 is not flagged. The loaders' bytes equal the batches' own."""
    out = []
    for io_kb, want in ((4, True), (1024, False)):
        s, steps = run_train(["--io-kb", str(io_kb)])
        rules = {f["rule"]: f for f in s["diagnosis"]["findings"]}
        check(("small-reads" in rules) == want, f"--io-kb {io_kb}: small-reads {'missing' if want else 'raised'}: "
              f"{sorted(rules)}")
        got, calls = loader_bytes(s)
        truth = sum(st["io_read_bytes"] for st in steps)
        check(got == truth, f"--io-kb {io_kb}: loaders read {got} B of the data set, the batches hold {truth}")
        if want:
            ev = rules["small-reads"]["evidence"]
            check(ev["small_reads"] >= truth // (io_kb << 10), f"small reads {ev['small_reads']} < "
                  f"{truth // (io_kb << 10)} the batches needed")
            out.append(f"4 KiB: flagged, {int(ev['small_reads'])} small of {int(ev['reads'])}, "
                       f"{100 * ev['loader_share']:.0f}% of loader time")
        else:
            out.append("1 MiB: not flagged")
        out[-1] += f" ({got} B exact in {calls} calls)"
    return "; ".join(out)


# Reads a data file in small calls, and reads more often (more calls, fewer bytes) a /proc counter
# and a file under a page, as a training loop reads its clocks and a config: prints what it read.
SMALL_READS_JOB = r"""
import json, os, sys
data, tiny, kb, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = {"data_calls": 0, "data_bytes": 0, "proc_calls": 0, "tiny_calls": 0}
fd = os.open(data, os.O_RDONLY)
# Cold and without readahead: each page is a trip to the disk, so the small reads take most of the
# job's time (the finding's share), as a loader's random small records do.
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
while True:
    b = os.read(fd, kb << 10)
    out["data_calls"] += 1
    if not b:
        break
    out["data_bytes"] += len(b)
os.close(fd)
for _ in range(rounds):
    for path, key in (("/proc/self/stat", "proc_calls"), (tiny, "tiny_calls")):
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, 65536):
            out[key] += 1
        out[key] += 1
        os.close(fd)
print(json.dumps(out))
"""


def test_small_reads_by_bytes():
    """small-reads names the file most of the small reads' bytes came from (the data file read in
    1 KiB calls), not /proc/self/stat or a 100-byte file read in more calls; both are left out of
    the counts: the finding's reads are those of the other files, by the JSON's own per-file counts.
    The truth: the job's own count of the bytes it read from the data file in small calls."""
    make_files()
    tiny = os.path.join(FILES_DIR, "tiny.conf")
    with open(tiny, "w") as f:
        f.write("x" * 100)
    data = os.path.join(FILES_DIR, "a.dat")
    # More passes over /proc/self/stat and the small file (one small read each, then end of file)
    # than the data file, in 1 KiB calls, has small reads: by calls, either would be named.
    rounds = SIZES["a.dat"] // 1024 + 100
    rc, out, err = run_dlbpf(["--json", os.path.join(WORK, "small-bytes.json"), "--", "/usr/bin/python3", "-c",
                              SMALL_READS_JOB, data, tiny, "1", str(rounds)], timeout=180)
    check(rc == 0, f"dlbpf exited {rc}: {err[-1500:]}")
    truth = truth_line(out)
    check(truth["proc_calls"] > 2 * truth["data_calls"] and truth["tiny_calls"] > 2 * truth["data_calls"],
          f"the job did not read /proc and the small file more often than its data: {truth}")
    s = load_summary(os.path.join(WORK, "small-bytes.json"))
    rules = {f["rule"]: f for f in s["diagnosis"]["findings"]}
    check("small-reads" in rules, f"no small-reads finding: {sorted(rules)}")
    ev = rules["small-reads"]["evidence"]
    check(ev["file"] == data, f"small-reads names {ev['file']}, not the data file {data}")
    check(ev["file_small_bytes"] == truth["data_bytes"], f"{ev['file_small_bytes']} small-read bytes on the data "
          f"file, the job read {truth['data_bytes']}")
    # Its reads: the data file's all (the job's count), and of the others at most those not in /proc
    # nor the small file (Python's own files under a page are left out too): never /proc's or the
    # small file's, which alone outnumber the data file's.
    others = sum(f["reads"] for p in s["processes"] for f in p["files"]
                 if not f["path"].startswith(("/proc/", "/sys/")) and f["path"] != tiny)
    check(truth["data_calls"] <= ev["reads"] <= others, f"the finding counts {ev['reads']} reads: not between the "
          f"data file's {truth['data_calls']} and the {others} of every file but /proc's and the small one")
    return f"names the data file ({ev['file_small_bytes']} B in small calls) over {truth['proc_calls']} /proc reads"


# Writes MB MiB to a new file (ext4 flushes a truncated one at close, in the closing task) and waits in
# sync(2) while the flusher, a kernel thread, writes it back; with --wait, first reads a line.
WRITE_JOB = r"""
import json, os, sys
path, mb = sys.argv[1], int(sys.argv[2])
if len(sys.argv) > 3:
    sys.stdin.readline()
if os.path.exists(path):
    os.unlink(path)
with open(path, "wb") as f:
    for _ in range(mb):
        f.write(os.urandom(1 << 20))
os.sync()
print(json.dumps({"written": mb << 20}), flush=True)
"""


def test_async_io_only_the_jobs():
    """async-io counts the kernel threads' requests for the traced job's files only: the job writes
    8 MiB that the flusher writes back, while a process outside the traced tree writes 64 MiB the
    same way during the trace. The truth: the bytes each wrote. Before, every kernel thread's
    request on the machine was the job's (the other's 64 MiB with it)."""
    job_mb, other_mb = 8, 64
    os.makedirs(FILES_DIR, exist_ok=True)
    mine, other = os.path.join(FILES_DIR, "job-written.dat"), os.path.join(FILES_DIR, "other-written.dat")
    d = Dlbpf(["--", "/usr/bin/python3", "-c", WRITE_JOB, mine, str(job_mb), "--wait"], stdin=subprocess.PIPE)
    try:
        d.started()
        # While the job waits, traced: another process writes and syncs, untraced.
        o = subprocess.run(["/usr/bin/python3", "-c", WRITE_JOB, other, str(other_mb)], capture_output=True,
                           text=True, timeout=120)
        check(o.returncode == 0, f"the other writer failed: {o.stderr[-500:]}")
        d.proc.stdin.write("go\n")
        d.proc.stdin.close()
        rc = d.wait(timeout=120)
    finally:
        for path in (mine, other):
            if os.path.exists(path):
                os.unlink(path)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-1500:]}")
    truth = truth_line(d.stdout)
    check(truth["written"] == job_mb << 20, f"the job wrote {truth['written']} B")
    s = d.summary()
    async_bytes = s["async_io"]["bytes"]
    own = sum(p["io"]["write_bytes"] for p in s["processes"])
    # Nothing of the other writer's: at most the job's own bytes are the kernel threads' for it.
    check(async_bytes <= truth["written"], f"async-io {async_bytes} B, the job wrote {truth['written']} B "
          f"(another process wrote {other_mb << 20} B)")
    # And all of the job's: what the flusher wrote back, or the job itself submitted.
    check(async_bytes + own >= truth["written"], f"async-io {async_bytes} B and the job's own {own} B: less than "
          f"the {truth['written']} B it wrote")
    return f"async-io {async_bytes} B of the job's {truth['written']} B, none of the other's {other_mb << 20} B"


# Maps a file, closes its fd and makes it cold, then says "ready" and waits for a line: a data set
# mapped before the tracer came (np.memmap keeps the mapping, not the fd). Then it touches every
# page of the file at a stride of STRIDE pages, so that each touch faults and readahead varies, and
# prints what /proc/self/io counted meanwhile; it exits after a second line.
MAP_JOB = r"""
import json, mmap, os, sys
path, stride = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDONLY)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
os.close(fd)
def io():
    return int(next(l for l in open("/proc/self/io") if l.startswith("read_bytes")).split()[1])
print("ready", flush=True)
sys.stdin.readline()
before, s = io(), 0
for k in range(stride):
    for o in range(k * 4096, len(m), stride * 4096):
        s += m[o]
print(json.dumps({"faulted": io() - before, "pages": len(m) // 4096}), flush=True)
sys.stdin.readline()
"""


def test_mapped_before_attach():
    """A file mapped before dlbpf attached (--pid), its fd closed: its page faults' block reads name it
    from the process's mappings, exactly the bytes /proc/self/io counted (fault_bytes), no read call;
    with readahead's runs (stride 1) and with a fault per stretch of pages (stride 8)."""
    make_files()
    out = []
    for stride in (1, 8):
        path = os.path.join(FILES_DIR, "a.dat")
        w = subprocess.Popen(["/usr/bin/python3", "-c", MAP_JOB, path, str(stride)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        try:
            check(w.stdout.readline().strip() == "ready", "the mapping job did not start")
            d = Dlbpf(["--pid", str(w.pid)])
            d.started()
            w.stdin.write("go\n")
            w.stdin.flush()
            truth = json.loads(w.stdout.readline())
            # The job runs on while dlbpf drains its records: the mapping is looked up while it is there.
            time.sleep(0.5)
            w.stdin.write("done\n")
            w.stdin.flush()
            w.communicate(timeout=60)
            rc = d.wait()
        finally:
            if w.poll() is None:
                w.kill()
                w.wait()
        check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-1500:]}")
        check(truth["faulted"] > 0, f"stride {stride}: the job faulted nothing in from the disk: {truth}")
        got = files_of(process(d.summary(), w.pid)).get(path)
        check(got is not None, f"stride {stride}: the mapped {path} is not among the job's files")
        check((got["reads"], got["read_bytes"], got["fault_bytes"]) == (0, 0, truth["faulted"]),
              f"stride {stride}: {path}: {got}, the job's /proc/self/io counted {truth['faulted']} B")
        out.append(f"stride {stride}: {truth['faulted']} B exact")
    return ", ".join(out)


if __name__ == "__main__":
    main()
