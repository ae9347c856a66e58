#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Input lineage through real PyTorch loaders (Debian's python3-torch, tests/workloads/torchjob.py):
each input wait names the thread that made the batch (a worker process's main thread behind its
multiprocessing.Queue feeder thread; a thread-pool loader of the job's own process), its window's
CPU, runqueue and disk shares agree with that thread's own clocks (schedstat, per-sample read
times), and the files each wait names are those the job's own log says that producer read for the
batch. Steps are marked on autograd's entry. Run as root."""
import collections
import json
import os
import re

from harness import (DEBIAN_PYTHON as PYTHON, TORCHJOB, WORK, check, load_summary, main, run_dlbpf, torch_ready)
from netserve import ObjectServer

DATA = "/var/tmp/dlbpf-torch-lineage-data"
DISK_DATA = "/var/tmp/dlbpf-torch-lineage-disk"   # larger, so that random records mostly miss the page cache
BACKWARD = "_Z22THPEngine_run_backwardP7_objectS0_S0_"
LIN_FILES = 4             # files a wait names (DL_LIN_FILES)
WAIT_MIN_NS = 1_000_000   # shorter waits are scheduling noise, not a batch (as the report's longest waits)
# Shares are compared in points of the producers' summed windows (less their idle time, waiting for
# work) against their own clocks over the same windows; 10 points is the bound, against what
# the windows' edges weigh (a few ms of tens, where the clocks are not read).
SHARE_POINTS = 0.10




def run(name, *job, data=DATA):
    """torchjob.py under dlbpf with steps on autograd's entry: (summary, truth, text report)."""
    shards, mb = (8, 32) if data == DISK_DATA else (4, 8)
    torch_ready(data, shards=shards, shard_mb=mb)
    base = os.path.join(WORK, f"tlin-{name}-{os.getpid()}")
    rc, out, err = run_dlbpf(["--json", base + ".json", "--step-on", BACKWARD, "--", PYTHON, TORCHJOB, "--data", data,
                              "--truth", base + "-truth.json", *job], timeout=240)
    check(rc == 0, f"{name}: dlbpf exited {rc}: {err[-2000:]}")
    with open(base + "-truth.json") as f:
        truth = json.load(f)
    return load_summary(base + ".json"), truth, out


def samples_by_thread(truth):
    """The job's own log of what each loader thread made: {tid: (pid, [samples by start])}."""
    out = {}
    for w in truth["workers"].values():
        for r in w["samples"]:
            out.setdefault(r["tid"], (r["pid"], []))[1].append(r)
    for _, v in out.values():
        v.sort(key=lambda r: r["t0"])
    return out


def readings(truth):
    """Each loader thread's schedstat readings, by time: (clock, on-CPU ns, runqueue ns), one before
    and one after each sample (/proc/thread-self/schedstat)."""
    out = {}
    for w in truth["workers"].values():
        for r in w["samples"]:
            v = out.setdefault(r["tid"], [])
            v += [(r["t0"], r["oncpu0_ns"], r["runq0_ns"]), (r["t2"], r["oncpu_ns"], r["runq_ns"])]
    for v in out.values():
        v.sort()
    return out


def window_truth(read, mine, a, b, outer=False):
    """The producer's own clocks over the window [a, b], from its first schedstat reading in it to its
    last: (span, on-CPU, runqueue, blocked inside its reads: in D for a read from the disk, the
    runqueue clock read around each read), or None without two readings in it. With outer, from its
    last reading before the window to its first after it (None without both)."""
    v = [x for x in read if a <= x[0] <= b]
    if outer:
        before, after = [x for x in read if x[0] < a], [x for x in read if x[0] > b]
        if not before or not after:
            return None
        v = [before[-1]] + v + [after[0]]
    if len(v) < 2:
        return None
    inside = [r for r in mine if v[0][0] <= r["t0"] and r["t2"] <= v[-1][0]]
    return (v[-1][0] - v[0][0], v[-1][1] - v[0][1], v[-1][2] - v[0][2],
            sum(max(0, r["read_ns"] - r["read_cpu_ns"] - r["read_runq_ns"]) for r in inside))


def made_in(truth, p):
    """Whether the job's log has a batch of the producer's process made wholly inside its window."""
    a, b = p["since_ns"], p["handoff_ns"]
    for w in truth["workers"].values():
        starts = sorted(r["t0"] for r in w["samples"] if r["pid"] == p["pid"])
        for bt in w["batches"]:
            if bt["pid"] == p["pid"] and bt["batch_end"] < b:
                # The batch's first sample: the latest start no later than the previous batch's end is
                # not known per batch, so any sample started in the window that ends before it counts.
                if any(a < t0 < bt["batch_end"] for t0 in starts):
                    return True
    return False


def fault_bytes_by_sample(by_tid):
    """Per sample of a memmap loader, what its process brought from the disk since its previous sample
    (/proc/self/io read_bytes, which counts page faults' reads where they are submitted): its record's
    faults, the page cache's readahead among them. None for a process's first sample (no reading
    before it). Keyed by (pid, sample index)."""
    out, by_pid = {}, {}
    for pid, mine in by_tid.values():
        by_pid.setdefault(pid, []).extend(mine)
    for pid, v in by_pid.items():
        v.sort(key=lambda r: r["t0"])
        for k, r in enumerate(v):
            out[(pid, r["sample"])] = r["io"]["read_bytes"] - v[k - 1]["io"]["read_bytes"] if k else None
    return out


def judge(name, s, truth, report, threads=False, source="file"):
    """source: where the loaders' records come from: "file" (read calls), "mapped" (page faults of a
    memmap) or "net" (range requests to an object server: the sample's "file" is the endpoint)."""
    by_tid = samples_by_thread(truth)
    mapped, net = source == "mapped", source == "net"
    faulted = fault_bytes_by_sample(by_tid) if mapped else {}
    main_pid = truth["main"]["pid"]
    waits = [st for st in s["steps"] if st["input"]["wait_ns"] >= WAIT_MIN_NS and st["input"]["woken_by"]
             and st["input"]["woken_by"]["context"] == "task"]
    check(len(waits) >= 5, f"{name}: {len(waits)} waits of 1 ms or more ended by a task: nothing to judge")
    bad, files_ok, files_all, sums, clocks, transfers = [], 0, 0, [0, 0, 0, 0, 0], [0, 0, 0, 0], 0
    clocks_out = [0, 0, 0, 0]
    named_bytes, window_log_bytes = 0, []
    read = readings(truth)
    for st in waits:
        p = st["input"]["producer"]
        if p and p["tid"] not in by_tid and not made_in(truth, p):
            # A batch made before the window and still crossing the pipe (workers ahead, the consumer
            # draining others' batches): the thread writing it is the one the wait was on.
            transfers += 1
            continue
        if not p or p["tid"] not in by_tid:
            bad.append((st["index"], st["input"]["woken_by"], p and p["tid"]))
            continue
        pid, mine = by_tid[p["tid"]]
        check(p["pid"] == pid and (pid == main_pid) == threads, f"{name}: step {st['index']}: producer {p['pid']}/"
              f"{p['tid']}, the log's thread is of pid {pid}")
        # The shares over the windows whose truth is known, against the producer's clocks over the
        # same windows. The clocks are read around each sample, not at the window's edges (the
        # collation, the put, a wait for the GIL; a fifth of a thread pool's window, mostly waiting
        # for a CPU): their readings inside it (inner) and the last before and first after it (outer)
        # bracket it. Outer only where dlbpf left no idle time out of the window, which outer would hold.
        known = window_truth(read[p["tid"]], mine, p["since_ns"], p["handoff_ns"])
        whole = p["oncpu_ns"] + p["runq_ns"] + p["io_wait_ns"] + p["other_wait_ns"]
        if known and whole:
            out = window_truth(read[p["tid"]], mine, p["since_ns"], p["handoff_ns"], outer=True)
            out = out if out and not p["idle_ns"] else known
            # dlbpf's shares of each window, weighed by the span its clocks cover, as theirs are: a
            # spawned worker's first window holds its start-up (a second of imports) that its first
            # batch's readings, tens of ms, do not.
            for k, key in enumerate(("oncpu_ns", "runq_ns", "io_wait_ns", "other_wait_ns")):
                sums[k] += p[key] / whole * known[0]
            sums[4] += p["net"]["wait_ns"] / whole * known[0]
            for k in range(4):
                clocks[k] += known[k]
                clocks_out[k] += out[k]
        # The first batch of a worker is read through files it opens in the window, whose open records
        # may reach dlbpf after its first reads (another CPU's buffer): not judged.
        if not p["after_handoff"] or p["since_ns"] < mine[0]["t0"]:
            continue
        # What the producer's log says it read in the window: samples read wholly inside it, and those
        # whose read straddles either end (dlbpf places the read call's entry, the log only the span
        # around it). The window ends at the hand-off, which a feeder thread makes while the worker
        # has begun its next batch: that batch's first reads before it are the window's.
        a, b = p["since_ns"], p["handoff_ns"]
        inside = [r for r in mine if a < r["t0"] and r["t0"] + r["read_ns"] <= b]
        edge = [r for r in mine if r["t0"] <= a < r["t0"] + r["read_ns"] or r["t0"] < b < r["t0"] + r["read_ns"]]
        key = "fault_bytes" if mapped else "read_bytes"
        named = {f["path"]: f[key] for f in p["files"] if os.path.basename(f["path"]).startswith("shard-")}
        if net:
            # An object's records come by socket receives: the endpoints named, with what the receives
            # that returned in the window brought (headers included), per the loader's own count.
            named = {e["endpoint"]: e["bytes"] for e in p["net"]["endpoints"]}
            size = {id(r): r["net_bytes"] for r in inside + edge}
            besides = 0
        elif mapped:
            # A record of a mapped shard is read by page faults, no read call: what a sample brought from
            # the disk is its process's /proc/self/io growth since its previous sample. A window with a
            # sample whose growth is not known (its process's first) is not judged.
            if any(faulted[(pid, r["sample"])] is None for r in inside + edge):
                continue
            size = {id(r): faulted[(pid, r["sample"])] for r in inside + edge}
            # What the process read from the disk besides the shards in the window (a module's page, the
            # interpreter's own files), as dlbpf counts it: a sample's growth may hold some of it.
            besides = p["disk_bytes"] + p["fault_bytes"] - sum(named.values())
        else:
            size = {id(r): r["bytes"] for r in inside + edge}
            besides = 0
        files_all += 1
        named_bytes += sum(named.values())
        # A memmap's shards come by readahead in bursts of megabytes, mostly in the first batches
        # (prefetched before the first wait): its windows' own bytes, per the log, are what a window
        # brings; the whole run's average would count the prefetch no window holds.
        window_log_bytes.append(sum(size[id(r)] for r in inside))
        # Each file named, its bytes per the log; every file the log has (that brought bytes), when no
        # more than the report keeps (DL_LIN_FILES, most bytes first; the job's /proc reads are the smallest).
        ok = set(named) <= {r["file"] for r in inside + edge}
        for path, got in named.items():
            lo = sum(size[id(r)] for r in inside if r["file"] == path)
            ok &= lo - besides <= got <= lo + sum(size[id(r)] for r in edge if r["file"] == path)
        # A sample at an edge brought part of its bytes into the window: its file may take one of the
        # places, ahead of a file wholly inside with fewer bytes.
        want = {r["file"] for r in inside if size[id(r)]}
        could = want | {r["file"] for r in edge if size[id(r)]}
        ok &= want <= set(named) if len(could) <= LIN_FILES else len(named) == LIN_FILES
        if ok:
            files_ok += 1
        else:
            print(f"  {name}: step {st['index']}: named {sorted(named.items())}, the log "
                  f"{sorted(collections.Counter(r['file'] for r in inside).items())} (+{len(edge)} at the edge)")
    check(not bad, f"{name}: {len(bad)} of {len(waits)} waits name no thread that made samples: {bad[:4]}")
    check(files_all >= 3 and files_ok == files_all, f"{name}: files right in {files_ok} of {files_all} waits")
    check(named_bytes > 0, f"{name}: the waits judged name no shard's bytes: nothing was read from the data set")
    window = sum(sums[:4])
    check(window > 0 and clocks[0] > 0, f"{name}: no window holds two of the producer's clock readings")
    cpu, runq, read_off = (x / clocks[0] for x in clocks[1:])
    cpu_o, runq_o, read_o = (x / clocks_out[0] for x in clocks_out[1:])
    got = [x / window for x in sums]

    def near(share, a, b):
        """Within the issue's 10 points of the range the inner and outer clocks give."""
        return min(a, b) - SHARE_POINTS <= share <= max(a, b) + SHARE_POINTS

    check(near(got[0], cpu, cpu_o), f"{name}: producers on CPU {got[0]:.2f} of their windows, their clocks {cpu:.2f} "
          f"(outer {cpu_o:.2f})")
    check(near(got[1], runq, runq_o), f"{name}: producers runnable {got[1]:.2f}, their clocks {runq:.2f} "
          f"(outer {runq_o:.2f})")
    # Blocked otherwise (a lock, the GIL, a queue): what the clocks leave besides CPU, runqueue and reads.
    other = max(0.0, 1 - cpu - runq - read_off, 1 - cpu_o - runq_o - read_o)
    if net:
        # Blocked in a read is blocked on the network: in the socket receives, none on the disk.
        check(near(got[4], read_off, read_o) and got[2] <= SHARE_POINTS,
              f"{name}: producers in socket receives {got[4]:.2f} of their windows, on disk {got[2]:.2f}; their "
              f"reads blocked {read_off:.2f} (outer {read_o:.2f}) of the windows' time")
        check(got[4] <= got[2] + got[3] + 1e-9, f"{name}: blocked in receives {got[4]:.2f}, more than blocked at all")
        check(got[3] - got[4] <= other + SHARE_POINTS, f"{name}: producers blocked otherwise (not receiving) "
              f"{got[3] - got[4]:.2f}, their clocks {other:.2f}")
    else:
        check(near(got[2], read_off, read_o), f"{name}: producers on disk {got[2]:.2f}, their reads blocked "
              f"{read_off:.2f} (outer {read_o:.2f}) of the windows' time")
        check(got[3] <= other + SHARE_POINTS, f"{name}: producers blocked otherwise {got[3]:.2f}, their clocks {other:.2f}")
    # The text names what the producers are, and says the process's cpu line sums its threads.
    line = next((l for l in report.splitlines() if l.startswith("  input    waited on")), "")
    want = "thread" if threads else "worker process"
    check(re.search(rf"waited on (a )?{want}", line), f"{name}: the input line calls them otherwise: {line}")
    check(re.search(r"^  cpu      .* summed over its \d+ threads?$", report, re.M), f"{name}: no cpu line says it sums threads")
    for f in s["diagnosis"]["findings"]:
        ev = f["evidence"]
        if f["rule"] == "input-producer":
            nproc = len({pid for pid, _ in by_tid.values()})
            # Worker processes counted as processes, the main process's own threads apart (a thread
            # pool's; the main process's other threads, a queue's feeder, may end a wait too).
            check((ev["own_threads"] >= 1 and ev["workers"] == 0) if threads else 1 <= ev["workers"] <= nproc,
                  f"{name}: input-producer counts {ev['workers']} worker processes and {ev['own_threads']} threads "
                  f"of its own, the job {0 if threads else nproc} worker processes")
        if f["rule"] == "too-few-workers":
            # What a batch brought from the disk, against the job's own count of what its loaders read
            # from it (/proc/PID/io read_bytes at their last sample) over the batches they made: a
            # window may hold two batches when a hand-off woke no one, hence the factor of 2 either way.
            disk = sum(w["samples"][-1]["io"]["read_bytes"] for w in truth["workers"].values() if w["samples"])
            batches = sum(len(w["batches"]) for w in truth["workers"].values())
            mine = disk / max(batches, 1) / 1e6
            if mapped:
                mine = sum(window_log_bytes) / max(len(window_log_bytes), 1) / 1e6
            got_mb = ev["disk_mb_per_batch"]
            check((got_mb == 0 and mine < 0.01) or mine / 2 <= got_mb <= mine * 2,
                  f"{name}: too-few-workers: {got_mb:.3f} MB a batch from the disk, the job's own count {mine:.3f}")
            # The producers the steps' pace implies, against how many the job ran: a batch time that
            # is the feeder's hand-off, or a window of several batches, would be off by a multiple.
            nload = len({r["tid"] for w in truth["workers"].values() for r in w["batches"]})
            check(0 < ev["workers_now"] <= nload + 1, f"{name}: too-few-workers says about {ev['workers_now']:.1f} "
                  f"producers run, the job ran {nload}")
            check(ev.get("workers_with_cores", 0) <= ev["workers_needed"], f"{name}: {ev}")
    check(transfers * 2 < len(waits), f"{name}: {transfers} of {len(waits)} waits were on a batch crossing the pipe")
    if net:
        endpoints = {r["file"] for _, mine in by_tid.values() for r in mine}
        check(len(endpoints) == 1, f"{name}: the loaders fetched from {endpoints}")
        server = endpoints.pop()
        check(f"it waited on {server} for " in report, f"{name}: no longest wait says it waited on {server}")
        prod = [f["evidence"] for f in s["diagnosis"]["findings"] if f["rule"] == "input-producer"]
        # Where the loaders' own clocks say the receives were most of their windows, by the shares' tolerance.
        if read_off > max(cpu, runq, other) + SHARE_POINTS:
            check(prod and prod[0]["bound_by"] == "network" and prod[0]["net_endpoint"] == server,
                  f"{name}: the loaders spent {read_off:.2f} of their windows in receives, yet input-producer says "
                  f"{prod[0] if prod else None}")
            few = [f["evidence"] for f in s["diagnosis"]["findings"] if f["rule"] == "too-few-workers"]
            check(not few or few[0]["limit"] == "network", f"{name}: too-few-workers says the limit is {few[0]}")
    return (f"{len(waits)} waits ({transfers} on a batch crossing the pipe), producers on CPU {got[0]:.2f} (clocks {cpu:.2f}), runnable {got[1]:.2f} "
            f"({runq:.2f}), disk {got[2]:.2f}, receiving {got[4]:.2f} (reads blocked {read_off:.2f}), otherwise {got[3]:.2f} "
            f"({other:.2f}), {'endpoints' if net else 'files'} right {files_ok}/{files_all} ({named_bytes / 1e6:.1f} MB)")


def test_decode_fork_workers():
    """Decode-bound, fork, 1, 2 and 4 worker processes (4 with prefetch_factor 4): each wait names the
    worker's main thread (not its queue's feeder), with its shares and files per the job's log."""
    out = []
    # 4 workers decode longer: at 4 ms a sample they would run ahead of the main thread on 2 CPUs, and
    # a job that never waits has no lineage to judge.
    for n, extra in ((1, ["--decode-ms", "4"]), (2, ["--decode-ms", "4"]), (4, ["--decode-ms", "12", "--prefetch", "4"])):
        s, truth, report = run(f"fork{n}", "--workers", str(n), "--steps", "30", *extra)
        out.append(f"{n}: " + judge(f"fork, {n} workers", s, truth, report))
    return "; ".join(out)


def test_iterable_workers():
    """An IterableDataset: each of 2 workers streams its own records and decodes each."""
    s, truth, report = run("iterable", "--shape", "iterable", "--workers", "2", "--steps", "30", "--decode-ms", "4")
    return judge("iterable, 2 workers", s, truth, report)


def test_decode_spawn_persistent():
    """Spawn and forkserver start methods with persistent workers over two epochs."""
    out = []
    for start in ("spawn", "forkserver"):
        s, truth, report = run(start, "--workers", "2", "--start", start, "--persistent", "--epoch-steps", "15",
                               "--steps", "30", "--decode-ms", "4")
        out.append(f"{start}: " + judge(f"{start}, persistent", s, truth, report))
    return "; ".join(out)


def test_disk_workers():
    """Disk-shaped: small random reads from shards made cold, by 1 and 2 workers, 512 records a batch
    and a narrow model, so that the main thread waits for them; each wait's files and bytes per the
    workers' log, the disk share per their reads' blocked time, and what a batch brought from the disk."""
    out = []
    for n in (1, 2):
        s, truth, report = run(f"disk{n}", "--shape", "disk", "--workers", str(n), "--steps", "16", "--batch", "512",
                               "--width", "4", data=DISK_DATA)
        out.append(f"{n}: " + judge(f"disk, {n} workers", s, truth, report))
    return "; ".join(out)


def test_memmap_workers():
    """A numpy memmap data set (torchjob --shape memmap, shards made cold first): the records are read by
    page faults, no read call. Each wait names the shards its producer faulted in for the batch, their
    bytes per the workers' own /proc/self/io, with 2 workers; then 1 worker with larger records."""
    out = []
    for n, extra in ((2, ["--record-kb", "512", "--decode-ms", "4"]), (1, ["--record-kb", "1024", "--decode-ms", "2"])):
        s, truth, report = run(f"memmap{n}", "--shape", "memmap", "--workers", str(n), "--steps", "24", "--width", "4",
                               *extra, data=DISK_DATA)
        out.append(f"{n}: " + judge(f"memmap, {n} workers", s, truth, report, source="mapped"))
    return "; ".join(out)


def test_http_workers():
    """Records fetched from an object server (tests/integration/netserve.py) by range requests over each
    worker's keep-alive connection (torchjob --shape http): each wait names the server as what its
    producer received from, the bytes per the workers' own count, and the producers' time blocked in
    the receives within the shares' bound of their clocks; the input-producer finding says the network
    where that is what the clocks say. A time to first byte with 2 workers; a paced rate with 1."""
    out = []
    obj = os.urandom(9 << 20)
    for n, delay, rate, extra in ((2, 0.004, 0, ["--record-kb", "256", "--decode-ms", "2"]),
                                  (1, 0.0, 64 << 20, ["--record-kb", "512", "--decode-ms", "1"])):
        srv = ObjectServer("127.0.0.1", obj, delay_s=delay, rate_bps=rate)
        try:
            s, truth, report = run(f"http{n}", "--shape", "http", "--url", f"http://127.0.0.1:{srv.port}/object",
                                   "--workers", str(n), "--steps", "24", "--width", "4", *extra)
        finally:
            srv.close()
        out.append(f"{n}: " + judge(f"http, {n} workers", s, truth, report, source="net"))
    return "; ".join(out)


def test_relay_thread():
    """Batches handed on by a thread of the main process (a pin-memory thread's place; torchjob --relay):
    each wait names that thread, and the hop up names the worker's main thread that made the batch
    (not its queue's feeder), with its shares over its window against its own clocks."""
    s, truth, _ = run("relay", "--relay", "--workers", "2", "--steps", "30", "--decode-ms", "10")
    by_tid, read, main = samples_by_thread(truth), readings(truth), truth["main"]
    waits = [st["input"] for st in s["steps"] if st["input"]["wait_ns"] >= WAIT_MIN_NS and st["input"]["woken_by"]
             and st["input"]["woken_by"]["context"] == "task"]
    check(len(waits) >= 5, f"{len(waits)} waits of 1 ms or more ended by a task: nothing to judge")
    # Every wait ends on a thread of the main process, never on a worker: the relay hands the batches
    # on. Most end on the relay thread (the job's log names it); a wait of a millisecond or more can
    # also end on another of its threads handing over the GIL (a queue's feeder).
    enders = collections.Counter((w["woken_by"]["pid"], w["woken_by"]["tid"]) for w in waits)
    check(all(pid == main["pid"] for pid, _ in enders) and enders[(main["pid"], main["relay_tid"])] * 2 > len(waits),
          f"the waits end on {dict(enders)}, not mostly on the relay thread {main['relay_tid']} of pid {main['pid']}")
    waits = [w for w in waits if w["woken_by"]["tid"] == main["relay_tid"]]
    hops = [w["chain"][0] for w in waits if w["chain"]]
    check(len(hops) * 2 >= len(waits), f"{len(hops)} of {len(waits)} waits go a hop up")
    # As in judge(): a hop whose window holds no batch its process made wholly inside it was on a batch
    # still crossing the pipe, and names the thread writing it (the worker's queue feeder).
    crossing = [h for h in hops if h["tid"] not in by_tid and not made_in(truth, h)]
    hops = [h for h in hops if h not in crossing]
    wrong = [(h["pid"], h["tid"]) for h in hops if h["tid"] not in by_tid]
    check(not wrong, f"{len(wrong)} of {len(hops)} hops name no thread that made samples: {wrong[:4]}")
    check(len(crossing) * 2 < len(hops), f"{len(crossing)} of {len(hops) + len(crossing)} hops on a batch crossing the pipe")
    sums, clocks = [0, 0], [0, 0, 0]
    for h in hops:
        known = window_truth(read[h["tid"]], by_tid[h["tid"]][1], h["since_ns"], h["handoff_ns"])
        if known:
            sums[0] += h["oncpu_ns"]
            sums[1] += h["oncpu_ns"] + h["io_wait_ns"] + h["runq_ns"] + h["other_wait_ns"]
            clocks[0] += known[0]
            clocks[1] += known[1]
    check(sums[1] and clocks[0], "no hop's window holds two of its clock readings")
    got, want = sums[0] / sums[1], clocks[1] / clocks[0]
    check(abs(got - want) <= SHARE_POINTS, f"the hops' producers on CPU {got:.2f} of their windows, their clocks {want:.2f}")
    return f"{len(waits)} waits on the relay thread, {len(hops)} hops to a worker's main thread, on CPU {got:.2f} ({want:.2f})"


def test_thread_pool_loader():
    """A thread pool of the job's own process filling a queue.Queue: each wait names the pool thread
    that made its batch (a loader thread of its own process), its shares and files per its log."""
    s, truth, report = run("threads", "--threads", "--workers", "2", "--steps", "30", "--decode-ms", "4")
    return judge("thread pool, 2 threads", s, truth, report, threads=True)


if __name__ == "__main__":
    main()
