#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Recordings in the compact encoding, read by an independent reader (recording.py, written from the
format's description): what dlbpf recorded is what the job did, and a compact recording reports exactly
what the same records stored verbatim report. Run as root."""
import json
import os
import struct
import subprocess

import recording
from harness import DLBPF, GPUSIM_DIR, WORK, check, load_summary, main, run_dlbpf, workload

TRAIN_ENV = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
DL_EV_CUDA, DL_EV_TRACE_START, DL_EV_TRACE_END = 1, 6, 10   # enum dl_kind in include/dlbpf/events.h
# The goal for the compact encoding, in bytes per record (verbatim CUDA records are 120 B).
GOAL_BYTES_PER_RECORD = 30


def record_train(name, scenario, steps, encoding=None):
    """Records the simulated training job; (recording, the JSON the live run wrote, the job's truth, pid)."""
    d = os.path.join(WORK, f"rec-{name}")
    os.makedirs(d, exist_ok=True)
    rec, live, truth = (os.path.join(d, n) for n in ("run.dlbpf", "live.json", "truth.jsonl"))
    args = [DLBPF, "record", "-q", "-o", rec, "-j", live]
    if encoding:
        args += ["--encoding", encoding]
    args += ["--", workload("train"), "--scenario", scenario, "--steps", str(steps), "--quiet", "--truth", truth]
    p = subprocess.run(args, capture_output=True, text=True, env=TRAIN_ENV, timeout=180)
    check(p.returncode == 0, f"record exit {p.returncode}: {p.stderr[-500:]}")
    return d, rec, load_summary(live), truth


def job_of(summary):
    # Its loader workers are forked with the runtime mapped, but call nothing.
    procs = [q for q in summary["processes"] if q["comm"] == "train" and q["cuda"]["calls"]]
    check(len(procs) == 1, f"{len(procs)} train processes with CUDA calls in the summary")
    return procs[0]


def report(rec, out):
    rc, _, err = run_dlbpf(["report", rec, "-j", out], timeout=180)
    check(rc == 0 and "cut short" not in err and "corrupt" not in err, f"report {rec}: exit {rc}: {err[-400:]}")
    return load_summary(out)


def test_compact_counts():
    """A compact recording, decoded independently: the job's CUDA calls are the JSON's and the job's own."""
    d, rec, live, truth_path = record_train("counts", "input", 20)
    r = recording.read(rec)
    check(r.encoding == recording.COMPACT, f"the default encoding is {r.encoding}, not compact")
    check(r.stop is None and r.end == r.size, f"decoded {len(r.records)} records, stopped ({r.stop}) at byte "
          f"{r.end} of {r.size}")
    kinds = [struct.unpack_from("<H", b, 2)[0] for _, b in r.records]
    check(kinds.count(DL_EV_TRACE_START) == 1 and kinds[-1] == DL_EV_TRACE_END and kinds.count(DL_EV_TRACE_END) == 1,
          "not one trace start and one trace end, last")
    job = job_of(report(rec, os.path.join(d, "replay.json")))
    check(job == job_of(live), "the replayed report of the job differs from the live one")
    # Each API's count in the JSON against the decoded records of that API (api: u16 at byte 40).
    per_api = {}
    for _, b in r.records:
        size, kind, _, _, tgid = struct.unpack_from("<HHIQI", b)
        if kind == DL_EV_CUDA and tgid == job["pid"]:
            api = struct.unpack_from("<H", b, 40)[0]
            per_api[api] = per_api.get(api, 0) + 1
    json_counts = sorted(c["count"] for c in job["cuda"]["calls"].values())
    check(sorted(per_api.values()) == json_counts, f"per-API counts: decoded {sorted(per_api.values())}, JSON "
          f"{json_counts}")
    # The workload's own counts of what it did.
    steps = [t for t in map(json.loads, open(truth_path)) if "step" in t]
    kernels = sum(s["kernels"] for s in steps)
    copies = sum(s["h2d_copies"] for s in steps)
    launched = sum(k["count"] for k in job["cuda"]["kernels"])
    check(launched == kernels, f"kernels: JSON {launched}, the job {kernels}")
    check(job["cuda"]["memcpy"]["h2d"]["count"] == copies, f"h2d copies: JSON {job['cuda']['memcpy']['h2d']}, "
          f"the job {copies}")
    check(job["cuda"]["calls"]["cudaLaunchKernel"]["count"] in per_api.values(), "no API decoded as often as launches")
    per_record = (r.size - r.header_size) / len(r.records)
    check(per_record <= GOAL_BYTES_PER_RECORD, f"{per_record:.1f} B per record, goal {GOAL_BYTES_PER_RECORD}")
    return f"{len(r.records)} records, {per_record:.1f} B each; {kernels} kernels, {copies} copies as the job counted"


def test_compact_equals_verbatim():
    """The compact recording's records, written out verbatim by the independent reader, report the same."""
    d, rec, live, _ = record_train("equal", "launch", 10)
    r = recording.read(rec)
    check(r.stop is None, f"the compact recording stopped: {r.stop}")
    with open(rec, "rb") as f:
        data = f.read()
    verbatim = os.path.join(d, "verbatim.dlbpf")
    recording.write_verbatim(verbatim, r, data)
    compact = report(rec, os.path.join(d, "compact.json"))
    flat = report(verbatim, os.path.join(d, "verbatim.json"))
    check(compact == flat, "the compact recording and its records stored verbatim report differently")
    check(compact == live, "the replay differs from the live run's JSON")
    # And a recording dlbpf itself writes verbatim reads back through the same reader, whole.
    d2, rec2, _, _ = record_train("equal-verbatim", "launch", 3, encoding="verbatim")
    r2 = recording.read(rec2)
    check(r2.encoding == recording.VERBATIM and r2.stop is None and r2.end == r2.size,
          f"--encoding verbatim: encoding {r2.encoding}, stopped {r2.stop}")
    ratio = os.path.getsize(verbatim) / len(data)
    return f"{len(r.records)} records: compact {len(data)} B, verbatim {os.path.getsize(verbatim)} B ({ratio:.1f}x)"


def test_compact_cut_short():
    """A compact recording cut inside records: report replays every whole one before the cut, and says where."""
    d, rec, _, _ = record_train("cut", "input", 5)
    with open(rec, "rb") as f:
        data = f.read()
    whole = recording.read(data=data)
    cut_path = os.path.join(d, "cut.dlbpf")
    cuts = 0
    # Cuts inside a few records spread over the file, each a byte or more past a record's start.
    for i in range(1, len(whole.records), max(1, len(whole.records) // 7)):
        start = whole.records[i][0]
        end = whole.records[i + 1][0] if i + 1 < len(whole.records) else whole.size
        if end - start < 2:
            continue
        with open(cut_path, "wb") as f:
            f.write(data[:start + (end - start) // 2])
        want = f"at byte {start}; the {i} records before it are reported"
        rc, _, err = run_dlbpf(["report", cut_path, "-j", os.path.join(d, "cut.json")], timeout=120)
        check(rc == 0 and want in err and "cut short" in err, f"cut inside record {i}: exit {rc}, expected "
              f"'{want}': {err.strip()[-300:]}")
        load_summary(os.path.join(d, "cut.json"))
        cuts += 1
    check(cuts >= 5, f"only {cuts} cuts made")
    return f"{cuts} cuts, each salvaged to the record before it"



def test_zero_filled_tail():
    """A recording whose end a crash left zero-filled (blocks allocated, never written; 4 KiB of them,
    and a sparse 2 GiB): report cuts it where the zeros start, says how many it cut, and reports
    exactly what the recording without them reports."""
    d, rec, _, _ = record_train("zeros", "input", 5)
    whole = report(rec, os.path.join(d, "whole.json"))
    size = os.path.getsize(rec)
    n = len(recording.read(rec).records)
    notes = []
    for zeros in (4096, 2 << 30):
        tailed = os.path.join(d, f"tail-{zeros}.dlbpf")
        with open(rec, "rb") as src, open(tailed, "wb") as dst:
            dst.write(src.read())
            dst.truncate(size + zeros)   # the zeros a crash leaves read as zeros, written or not
        out = os.path.join(d, f"tail-{zeros}.json")
        rc, _, err = run_dlbpf(["report", tailed, "-j", out], timeout=180)
        want = (f"the file ends in {zeros} bytes of zeros (what a crash can leave): cut at byte {size}; "
                f"the {n} records before it are reported")
        check(rc == 0 and want in err, f"{zeros} zeros: exit {rc}, expected '{want}': {err.strip()[-300:]}")
        check(load_summary(out) == whole, f"{zeros} zeros: the report differs from the recording's without them")
        os.unlink(tailed)
        notes.append(f"{zeros} zeros cut")
    return f"{n} records; " + ", ".join(notes)


if __name__ == "__main__":
    main()
