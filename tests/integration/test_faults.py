#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The fault matrix: each row is a way a user, a hostile traced process or the
machine can hurt a tracer (a hang, a frozen job, a lost file, bytes that reach
the terminal, a count that is silently wrong), what dlbpf must do about it, and
whether it did. Every row is a test function; the matrix is printed at the end.
Run as root."""
import atexit

from harness import check, main, run_dlbpf

ROWS = []


def fault(what, expectation):
    """Marks a test as a row of the matrix: what goes wrong, and what dlbpf must do."""
    def wrap(fn):
        def row():
            try:
                note = fn()
            except BaseException:
                ROWS.append((what, expectation, "FAIL"))
                raise
            ROWS.append((what, expectation, "pass"))
            return note
        row.__name__ = fn.__name__
        row.__doc__ = fn.__doc__
        return row
    return wrap


@atexit.register
def print_matrix():
    if not ROWS:
        return
    w1 = max(len(r[0]) for r in ROWS)
    w2 = max(len(r[1]) for r in ROWS)
    print(f"\n{'fault':<{w1}} | {'expectation':<{w2}} | result")
    print(f"{'-' * w1}-+-{'-' * w2}-+-------")
    for what, expectation, result in ROWS:
        print(f"{what:<{w1}} | {expectation:<{w2}} | {result}")


@fault("--pid names a process that does not exist", "a clear error naming the pid, exit 1, nothing traced")
def test_missing_pid():
    rc, out, err = run_dlbpf(["--pid", "999999", "-d", "1"])
    check(rc == 1, f"exit {rc}")
    check("999999" in err and "no process" in err, f"error does not name the pid: {err.strip()}")
    check("tracing" not in err, "it traced something")



# --- The traced side writes to the terminal: names and paths it chose, with escapes and bytes
# that are not UTF-8. One traced run (recorded) and its replays serve the rows below.
import json  # noqa: E402  (imports of this section, kept with it so that rows stay append-only)
import os  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

from harness import DLBPF, GPUSIM_DIR, ROOT, WORK, Failure, workload  # noqa: E402

HOSTILE_NAME = b"\x1b]0;pwn\x07\r\nX\xff"    # OSC "set title", BEL, CR LF (a forged line), not UTF-8
HOSTILE_CHILD = b"abcdefghijklm\xe2\x82\xac"  # 16 bytes: the kernel keeps 15, cutting the euro sign
HOSTILE_DIR = b"gpusim-\x1b[2J\r\xe2\x80\xae\xff"  # clear screen, CR, right-to-left override, not UTF-8
# What a terminal acts on or hides instead of showing, besides C0 and C1 (bidi controls, separators).
INVISIBLE = {0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}

_hostile = {}


def shown(data, what):
    """Bytes a terminal would only show: strict UTF-8 (no overlong form, no surrogate), no control
    but LF, no C1, no bidirectional control. Python's decoder is the independent judge."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Failure(f"{what}: not UTF-8 at byte {e.start}: {data[max(0, e.start - 24):e.start + 8]!r}")
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F or ord(c) in INVISIBLE]
    check(not bad, f"{what}: {len(bad)} characters a terminal acts on, the first U+{ord(bad[0]) if bad else 0:04X}")
    return text


def strict_json(data, what):
    """json.loads of bytes would accept encoded surrogates (it decodes with surrogatepass): decode first."""
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Failure(f"{what} does not parse as strict UTF-8 JSON: {e}")


def hostile_run():
    """hostile_names traced by --pid under `record`, with its runtime in a directory it named; then the
    recording replayed into a Perfetto trace and a Chrome JSON trace. Everything kept as bytes."""
    if "failed" in _hostile:
        raise Failure(f"the traced run failed: {_hostile['failed']}")
    if "truth" in _hostile:
        return _hostile
    try:
        return run_hostile()
    except Exception as e:
        _hostile["failed"] = str(e)[-300:]   # once: every row reads the same run
        raise


def run_hostile():
    libdir = os.path.join(os.fsencode(WORK), HOSTILE_DIR)
    os.makedirs(libdir, exist_ok=True)
    shutil.copy(os.path.join(GPUSIM_DIR, "libcudart.so.13"), os.path.join(libdir, b"libcudart.so.13"))
    env = dict(os.environb, LD_LIBRARY_PATH=libdir)
    rec, summary = os.path.join(WORK, "hostile.dlbpf"), os.path.join(WORK, "hostile-summary.json")
    w = subprocess.Popen([workload("hostile_names"), HOSTILE_NAME, HOSTILE_CHILD], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env)
    d = None
    try:
        check(w.stdout.readline() == b"ready\n", "hostile_names did not start")
        ready_r, ready_w = os.pipe()
        d = subprocess.Popen([DLBPF, "record", "-o", rec, "-v", "-q", "--ready-fd", str(ready_w), "--json", summary,
                              "--pid", str(w.pid)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, pass_fds=(ready_w,))
        os.close(ready_w)
        with os.fdopen(ready_r, "rb") as f:
            check(select.select([f], [], [], 30)[0], "dlbpf did not start tracing in time")
            ready = f.read()
        if ready != b"ready\n":
            raise Failure(f"dlbpf did not start tracing: {d.communicate(timeout=30)[1][-800:]!r}")
        w.stdin.write(b"go\n")
        w.stdin.flush()
        out, _ = w.communicate(timeout=60)
        check(w.returncode == 0, f"hostile_names exited {w.returncode}")
        dout, derr = d.communicate(timeout=60)
        check(d.returncode == 0, f"dlbpf exited {d.returncode}: {derr[-800:]!r}")
    finally:
        for p in (w, d):
            if p and p.poll() is None:
                p.kill()
                p.wait()
    truth = json.loads(out.decode().strip().splitlines()[-1])
    with open(summary, "rb") as f:
        _hostile.update(truth=truth, stdout=dout, stderr=derr, summary=f.read(), libdir=libdir)
    for ext in ("pftrace", "json"):
        trace = os.path.join(WORK, f"hostile.{ext}")
        p = subprocess.run([DLBPF, "report", rec, "-o", trace, "-j", os.path.join(WORK, f"hostile-replay-{ext}.json")],
                           capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
        check(p.returncode == 0, f"report of the recording exited {p.returncode}: {p.stderr[-800:]!r}")
        with open(trace, "rb") as f:
            _hostile[ext] = f.read()
        _hostile[f"replay_{ext}"] = p.stdout
    return _hostile


def as_shown(name):
    """A name as a UTF-8 reader sees it: each ill-formed part one U+FFFD (the Unicode Standard's practice)."""
    return name.decode("utf-8", "replace")


@fault("a traced process names itself ESC]0;pwn BEL CR LF X 0xff (prctl), and its kernel and its runtime's "
       "directory with escapes, C1, bidi override, bad UTF-8",
       "the report (live, replayed) and the log show each such byte as \\xHH: none reaches the terminal raw")
def test_hostile_names_text():
    h = hostile_run()
    pid, child = h["truth"]["pid"], h["truth"]["child"]
    for what, out in (("report", h["stdout"]), ("replayed report", h["replay_json"]), ("log", h["stderr"])):
        shown(out, what)
    for what, out in (("report", h["stdout"]), ("replayed report", h["replay_json"])):
        name = b"PID %d (\\x1b]0;pwn\\x07\\x0d\\x0aX\\xff)" % pid
        check(name in out, f"{what}: no {name!r} in {out[:300]!r}")
        # The kernel: escapes, C1 CSI, overlong '/', a surrogate, RLO each byte as \xHH; the e acute is kept.
        kernel = b"k\\x1b]0;pwn\\x07\\x0d\\xc2\\x9b\\xc0\\xaf\\xed\\xa0\\x80\\xe2\\x80\\xae\xc3\xa9\\xff"
        check(kernel in out, f"{what}: no {kernel!r}")
        cut = b"PID %d (abcdefghijklm\\xe2\\x82)" % child
        check(cut in out, f"{what}: no {cut!r}")
    path = os.fsencode(WORK) + b"/gpusim-\\x1b[2J\\x0d\\xe2\\x80\\xae\\xff/libcudart.so.13"
    check(path in h["stderr"], f"log does not name the runtime escaped: {h['stderr'][-600:]!r}")


@fault("names of the traced side that are not UTF-8 (0xff, overlong, a surrogate) or hold controls, in the "
       "JSON summary (--json)", "the file is strict UTF-8 JSON: ill-formed parts as U+FFFD, controls as \\uXXXX; "
       "the counts are the workload's")
def test_hostile_names_json():
    h = hostile_run()
    truth = h["truth"]
    shown(h["summary"], "JSON summary")   # controls and bidi are \uXXXX escapes: printing the file is safe too
    s = strict_json(h["summary"], "JSON summary")
    procs = {p["pid"]: p for p in s["processes"]}
    check(truth["pid"] in procs and truth["child"] in procs, f"processes {sorted(procs)}")
    comm = procs[truth["pid"]]["comm"]
    check(comm == as_shown(HOSTILE_NAME[:15]), f"comm {comm!r}")
    kernels = [k["name"] for k in procs[truth["pid"]]["cuda"]["kernels"]]
    want = as_shown(bytes.fromhex(truth["kernel_hex"]))
    check(kernels == [want], f"kernels {kernels!r}, want [{want!r}]")
    cuda = procs[truth["pid"]]["cuda"]
    for api, n in truth["calls"].items():
        got = cuda["calls"].get(api, {}).get("count", 0)
        check(got == n, f"{api}: {got} calls, the workload made {n}")
    h2d = cuda["memcpy"]["h2d"]
    check((h2d["count"], h2d["bytes"]) == (truth["h2d"]["count"], truth["h2d"]["bytes"]), f"h2d {h2d}")
    return f"comm {comm!r}"


@fault("a process name cut mid-character at its 15 bytes (prctl with a 16-byte UTF-8 name)",
       "one U+FFFD where the cut character was, in the JSON and both traces; \\xe2\\x82 in the text report")
def test_hostile_cut_name():
    h = hostile_run()
    child = h["truth"]["child"]
    want = as_shown(HOSTILE_CHILD[:15])
    check(want == "abcdefghijklm\ufffd", f"premise: {want!r}")
    comm = {p["pid"]: p["comm"] for p in strict_json(h["summary"], "summary")["processes"]}[child]
    check(comm == want, f"JSON summary: comm {comm!r}")
    names = [e["args"]["name"] for e in strict_json(h["json"], "Chrome JSON")["traceEvents"] if e["ph"] == "M"]
    check(f"{want} {child}" in names, f"Chrome JSON names {names!r}")
    check(f"{want} {child}".encode() in pf_strings(h)["name"], "Perfetto track names lack the cut name")
    check(b"PID %d (abcdefghijklm\\xe2\\x82)" % child in h["stdout"], "the text report lacks the cut name escaped")


def protoc_unescape(s):
    """protoc's text format writes a string's bytes C-escaped (octal for what is not printable ASCII)."""
    out, i = bytearray(), 0
    simple = {"n": 10, "r": 13, "t": 9, "\"": 34, "'": 39, "\\": 92, "a": 7, "b": 8, "f": 12, "v": 11}
    while i < len(s):
        if s[i] != "\\":
            out += s[i].encode()
            i += 1
        elif s[i + 1] in simple:
            out.append(simple[s[i + 1]])
            i += 2
        elif s[i + 1] == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", s[i + 2:])
            out.append(int(m.group(0), 16))
            i += 2 + len(m.group(0))
        else:
            m = re.match(r"[0-7]{1,3}", s[i + 1:])
            out.append(int(m.group(0), 8))
            i += 1 + len(m.group(0))
    return bytes(out)


def protoc_decode(proto_dir, proto, data):
    p = subprocess.run(["protoc", "--decode=dlbpf_test.Trace", "-I", proto_dir, proto], input=data,
                       capture_output=True)
    return p.returncode, p.stdout.decode("ascii", "replace"), p.stderr.decode("ascii", "replace")


def pf_strings(h):
    """The Perfetto trace's strings by field name, as bytes: decoded once with the test schema, once with a
    proto3 copy of it in which every name is a `string`, which protoc refuses unless it is UTF-8."""
    if "pf_strings" in h:
        return h["pf_strings"]
    proto_dir = os.path.join(ROOT, "tests", "proto")
    rc, text, err = protoc_decode(proto_dir, "perfetto_min.proto", h["pftrace"])
    check(rc == 0, f"protoc --decode failed: {err[-500:]}")
    with open(os.path.join(proto_dir, "perfetto_min.proto")) as f:
        schema = f.read()
    strict = schema.replace('syntax = "proto2";', 'syntax = "proto3";').replace("optional bytes str", "optional string str")
    check(strict.count("proto3") == 1 and "bytes" not in strict, "the test schema changed: adapt its proto3 copy")
    with open(os.path.join(WORK, "perfetto_utf8.proto"), "w") as f:
        f.write(strict)
    rc, _, err = protoc_decode(WORK, "perfetto_utf8.proto", h["pftrace"])
    check(rc == 0, f"a string of the Perfetto trace is not UTF-8: {err[-500:]}")
    found = {}
    for key, value in re.findall(r'^\s*(\w+): "(.*)"$', text, re.M):
        found.setdefault(key, []).append(protoc_unescape(value))
    h["pf_strings"] = found
    return found


@fault("names of the traced side that are not UTF-8 or hold controls, in a Perfetto trace (-o t.pftrace)",
       "protoc decodes it, and as proto3 too (every string field valid UTF-8); names as a UTF-8 reader sees them")
def test_hostile_names_perfetto():
    h = hostile_run()
    pid = h["truth"]["pid"]
    strings = pf_strings(h)
    name = f"{as_shown(HOSTILE_NAME[:15])} {pid}".encode()
    check(name in strings.get("name", []) and name in strings.get("process_name", []),
          f"no process track {name!r} in {strings.get('process_name')}")
    kernel = as_shown(bytes.fromhex(h["truth"]["kernel_hex"])).encode()
    check(kernel in strings.get("str", []) + strings.get("string_value", []), f"kernel name {kernel!r} not found")


@fault("names of the traced side that are not UTF-8 or hold controls, in a Chrome JSON trace (-o t.json)",
       "the trace is strict UTF-8 JSON; names as a UTF-8 reader sees them")
def test_hostile_names_chrome_json():
    h = hostile_run()
    pid = h["truth"]["pid"]
    shown(h["json"], "Chrome JSON")
    events = strict_json(h["json"], "Chrome JSON")["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    check(f"{as_shown(HOSTILE_NAME[:15])} {pid}" in names, f"names {names!r}")
    kernel = as_shown(bytes.fromhex(h["truth"]["kernel_hex"]))
    check(any(e.get("args", {}).get("kernel") == kernel for e in events), f"no launch of kernel {kernel!r}")
@fault("--ringbuf-mb larger than the kernel's ring buffer limit (4096)",
       "rejected by the parser: a message naming the range, exit 2, nothing loaded")
def test_ringbuf_too_large():
    # The kernel's ring buffer size is a u32 power of two (kernel/bpf/ringbuf.c): 2^31 bytes is the
    # largest; 4096 MiB is 2^32, which passed the parser and failed at load before.
    rc, out, err = run_dlbpf(["--ringbuf-mb", "4096", "--pid", "1", "-d", "1"])
    check(rc == 2, f"exit {rc}: {err.strip()}")
    check("2048" in err and "ring buffer" in err, f"error does not give the range: {err.strip()}")
    check("cannot load" not in err, "it got as far as loading")
    # The largest accepted size reaches the next check (the pid), not a parse error.
    rc, out, err = run_dlbpf(["--ringbuf-mb", "2048", "--pid", "999999"])
    check(rc == 1 and "no process" in err, f"--ringbuf-mb 2048 refused: exit {rc}: {err.strip()}")


# --- Counts that must be exact: what was read and written, threads, libraries, failed I/O.
from harness import Dlbpf, process, trace_waiting, truth_line  # noqa: E402


def disk_load():
    """Another process's I/O on the same disk: an O_DIRECT reader and a writer that fsyncs, so the
    queue fills (requeues), requests merge and request structures are reused across processes."""
    path = os.path.join(WORK, "load.dat")
    if not os.path.exists(path) or os.path.getsize(path) != 64 << 20:
        with open(path, "wb") as f:
            f.write(os.urandom(64 << 20))
            os.fsync(f.fileno())
    sink = os.path.join(WORK, f"load-{os.getpid()}.out")
    loops = [f"while :; do dd if={path} of=/dev/null bs=4M iflag=direct status=none; done",
             f"while :; do dd if=/dev/zero of={sink} bs=1M count=32 conv=fsync status=none; done"]
    return [subprocess.Popen(["sh", "-c", l]) for l in loops], sink


@fault("block I/O of the traced job shares a busy disk with other processes (requeues, merges, reuse)",
       "every round's bytes read == its /proc/PID/io delta exactly; data written == what it wrote")
def test_block_bytes_under_load():
    from test_dlbpf import ROUNDS, WRITE_MIB, check_io_rounds, make_data_file
    loads, sink = disk_load()
    try:
        w, out, d, rc = trace_waiting([workload("ioread"), make_data_file(), "--wait", "--rounds", str(ROUNDS),
                                       "--write", str(WRITE_MIB)], timeout=300)
    finally:
        for p in loads:   # the loop ends; the dd it was running finishes its few MiB
            p.kill()
            p.wait()
        if os.path.exists(sink):
            os.unlink(sink)
    check(w.returncode == 0, f"ioread failed: {out}")
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr}")
    n, unseen = check_io_rounds(d.summary(), out, ROUNDS)
    return f"{n} rounds exact under load; {unseen} completions not seen (counted at submission)"


THREADS = 40000   # more than pid_max (32768 here): thread ids repeat within the run


@fault("a job starts more short threads than pid_max, so thread ids repeat",
       "threads == the workload's pthread_create successes + its main thread")
def test_thread_starts_counted():
    d = Dlbpf(["--", workload("threads"), str(THREADS)])
    rc = d.wait(timeout=300)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-500:]}")
    truth = truth_line(d.stdout, '{"pid"')
    check(truth["created"] == THREADS, f"workload: {truth}")
    s = d.summary()
    check(s["drops"]["events"] == 0, f"events dropped: {s['drops']}")
    got = process(s, truth["pid"])["threads"]
    distinct = truth["distinct_tids"]
    check(got == truth["created"] + 1,
          f"threads {got}, the workload started {truth['created']} (+1 main; {distinct} distinct tids)")
    # Attached to a running process: the threads it has then, plus those it starts.
    w, out, d, rc = trace_waiting([workload("threads"), "1000", "--hold", "7", "--wait"])
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-500:]}")
    truth = truth_line(out, '{"pid"')
    got = process(d.summary(), w.pid)["threads"]
    check(got == 1 + truth["held"] + truth["created"], f"attached: threads {got} for {truth}")
    return f"{THREADS + 1} threads counted, {distinct} distinct tids among them; attached: {got}"


def peak_rss_kib(nthreads):
    """dlbpf's peak RSS (KiB, wait4's ru_maxrss) tracing, with a timeline, a process that starts
    nthreads short threads. --pid, so the workload is no child of dlbpf and not in its figure;
    a 1 MiB ring buffer, whose pages are all touched either way, so it is the same in every run."""
    w = subprocess.Popen([workload("threads"), str(nthreads), "--wait"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        check(w.stdout.readline().strip() == "ready", "threads workload did not start")
        ready_r, ready_w = os.pipe()
        d = subprocess.Popen([DLBPF, "-q", "--ringbuf-mb", "1", "--ready-fd", str(ready_w), "-o",
                              os.path.join(WORK, f"threads-{os.getpid()}.pftrace"), "--pid", str(w.pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(ready_w,))
        os.close(ready_w)
        with os.fdopen(ready_r, "rb") as f:
            check(f.read() == b"ready\n", "dlbpf did not start tracing")
        w.stdin.write("go\n")
        w.stdin.flush()
        out, _ = w.communicate(timeout=300)
        _, status, ru = os.wait4(d.pid, 0)
        d.returncode = os.waitstatus_to_exitcode(status)
        err = d.stderr.read().decode(errors="replace")
        check(d.returncode == 0, f"dlbpf exited {d.returncode}: {err[-500:]}")
        check(truth_line(out, '{"pid"')["created"] == nthreads, f"workload: {out}")
        return ru.ru_maxrss
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


@fault("a job starts tens of thousands of short threads while a timeline is written (-o)",
       "the collector forgets each thread at its exit: its memory does not grow with the thread count")
def test_thread_state_bounded():
    small, large = peak_rss_kib(THREADS // 10), peak_rss_kib(THREADS)
    # Before, each thread's timeline state stayed: +9.6 MB from 4,000 to 40,000 threads (~270 bytes
    # each). 2 MiB allowed for allocator noise is below 60 bytes for each of the 36,000 more.
    check(large - small < 2048, f"peak RSS {small} KiB with {THREADS // 10} threads, {large} KiB with {THREADS}")
    return f"peak RSS {small} KiB with {THREADS // 10} threads, {large} KiB with {THREADS}"


TOOLKIT_CUDART = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "libcudart.so.13")
SIM_CUDART = os.path.join(GPUSIM_DIR, "libcudart.so.13")


def dlloop(args):
    """dlbpf -- dlloop ARGS: (the workload's truth, its process in the summary)."""
    d = Dlbpf(["--", workload("dlloop")] + args)
    rc = d.wait(timeout=120)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-500:]}")
    truth = truth_line(d.stdout, '{"cycles"')
    check(truth["still_mapped"] == 0, f"the library stayed mapped after dlclose: {truth}")
    return truth, d.summary()["processes"][0]


@fault("a job loads and unloads the CUDA runtime in a loop (dlopen, dlclose)",
       "each load traced from its first call; runtimes counts distinct libraries, not attach events")
def test_dlopen_loop_counted_once():
    # The same library, unloaded long enough for a rescan to see it gone: attached again each time.
    truth, p = dlloop(["12", "--lib", TOOLKIT_CUDART, "--sleep-ms", "300"])
    calls = p["cuda"]["calls"].get("cudaDeviceSynchronize", {}).get("count", 0)
    check(calls == truth["calls"] == 12, f"{calls} calls traced of {truth['calls']}")
    check(p["cuda"]["runtimes"] == 1, f"one library reported as {p['cuda']['runtimes']} runtimes")
    # Two libraries in turn: each load comes with the other's unload in the same rescan, where the
    # new attachment moved down and was not told (reported as 1 runtime before).
    truth, p = dlloop(["6", "--lib", TOOLKIT_CUDART, "--alt", SIM_CUDART])
    calls = p["cuda"]["calls"].get("cudaDeviceSynchronize", {}).get("count", 0)
    check(calls == truth["calls"] == 6, f"alternating: {calls} calls traced of {truth['calls']}")
    check(p["cuda"]["runtimes"] == 2, f"two libraries reported as {p['cuda']['runtimes']} runtimes")
    return "12 reloads: 1 runtime, every call traced; 2 libraries in turn: 2 runtimes"


class FailingDisk:
    """A loop device that does direct I/O on an 8 MiB file, the file then cut to 4 MiB + 64 KiB: reads
    past the cut fail at the device (EIO), and the request across it completes its first 64 KiB and
    fails the rest (the loop driver completes a short read in part, then retries what is left)."""
    SIZE, CUT = 8 << 20, (4 << 20) + (64 << 10)

    def __enter__(self):
        self.path = os.path.join(WORK, f"failing-{os.getpid()}.img")
        with open(self.path, "wb") as f:
            f.write(os.urandom(self.SIZE))
            os.fsync(f.fileno())
        p = subprocess.run(["losetup", "--direct-io=on", "--show", "-f", self.path], capture_output=True, text=True)
        if p.returncode:
            os.unlink(self.path)
        check(p.returncode == 0, f"cannot set up a loop device: {p.stderr.strip()}")
        self.dev = p.stdout.strip()
        dio = open(f"/sys/block/{os.path.basename(self.dev)}/loop/dio").read().strip()
        os.truncate(self.path, self.CUT)
        check(dio == "1", f"{self.dev} does no direct I/O on its file: a short read would not fail")
        return self

    def __exit__(self, *exc):
        subprocess.run(["losetup", "-d", self.dev], check=False)
        os.unlink(self.path)


@fault("the disk fails a read (EIO), and completes another in part before failing the rest",
       "the failed completions flagged as errors with the bytes the kernel failed; bytes read == /proc/PID/io")
def test_io_errors_counted():
    with FailingDisk() as disk:
        d = Dlbpf(["--", workload("readdev"), disk.dev, str(disk.SIZE >> 20)])
        rc = d.wait(timeout=120)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-500:]}")
    truth = truth_line(d.stdout, '{"pid"')
    io = process(d.summary(), truth["pid"])["io"]
    # The workload's reads: those below the cut succeed; from the one across it, each fails with EIO.
    check(truth["ok_bytes"] == 4 << 20 and truth["failed_reads"] == truth["eio"] == 4, f"workload: {truth}")
    # Submitted bytes, whatever the device did with them: what /proc/PID/io counts too.
    check(io["read_bytes"] == truth["read_bytes_delta"] == disk.SIZE,
          f"read_bytes {io['read_bytes']}, /proc/PID/io {truth['read_bytes_delta']}, asked {disk.SIZE}")
    check(io["error_ops"] >= 4, f"{io['error_ops']} completions with an error, 4 reads failed")
    check("completions with an I/O error" in d.stdout, "the text report does not say reads failed")
    failed = disk.SIZE - disk.CUT   # everything past the cut; the request across it fails its rest only
    if io["unseen_ops"] == 0:
        check(io["error_bytes"] == failed, f"error_bytes {io['error_bytes']}, the device failed {failed}")
        check(io["completed_bytes"] - io["error_bytes"] == disk.CUT,
              f"completed without error {io['completed_bytes'] - io['error_bytes']}, the file holds {disk.CUT}")
    else:   # a completion ran where BPF does not: its bytes are unseen, no error can be said of them
        check(io["error_bytes"] <= failed and io["completed_bytes"] + io["unseen_bytes"] == disk.SIZE,
              f"io {io}")
    return (f"{io['error_ops']} error completions, {io['error_bytes']} bytes failed, "
            f"{io['completed_bytes'] - io['error_bytes']} completed (read() returned {truth['ok_bytes']})")


# --- Paths no other test reaches: the command line, exit status, a full ring buffer, the
# older-kernel programs, full maps, deep nesting, unreadable arguments.
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402

from harness import (DLBPF, GPUSIM_DIR, WORK, Dlbpf, Failure, check_close, process,  # noqa: E402
                     truth_line, workload)

USAGE = 2          # a usage error's status, as cli.h and --help promise (argp's own default is 64)
NO_PID = "999999"  # a target that fails at once (exit 1) if a bad option were wrongly accepted


def usage_error(args, needle, pass_fds=()):
    """dlbpf ARGS must be refused as a usage error: status 2, why on stderr, argp's hint, no output."""
    p = subprocess.run([DLBPF] + args, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                       pass_fds=pass_fds)
    what = " ".join(repr(a) for a in args)
    check(p.returncode == USAGE, f"{what}: exit {p.returncode}, expected {USAGE}: {p.stderr.strip()[:200]}")
    check(needle in p.stderr, f"{what}: stderr lacks {needle!r}: {p.stderr.strip()[:200]}")
    check("--help" in p.stderr, f"{what}: no pointer to --help: {p.stderr.strip()[:200]}")
    check(p.stdout == "", f"{what}: wrote to stdout: {p.stdout[:200]}")
    check("tracing" not in p.stderr, f"{what}: it began tracing")


# (option and its bad value, what the message must name): every option of user/cli.c that takes a value.
BAD_VALUES = [
    (["--pid", "abc"], "'abc'"), (["--pid", "0"], "'0'"), (["--pid", "-3"], "'-3'"),
    (["--pid", "2147483648"], "'2147483648'"), (["--pid", ""], "invalid pid ''"),
    (["--comm", ""], "invalid --comm ''"), (["--comm", "sixteen-chars-xx"], "'sixteen-chars-xx'"),
    (["-d", "0"], "'0'"), (["-d", "-1"], "'-1'"), (["-d", "soon"], "'soon'"), (["-d", "nan"], "'nan'"),
    (["-d", "inf"], "'inf'"), (["-d", "1e8"], "'1e8'"),
    (["-j", ""], "-j needs a file name"), (["-o", ""], "-o needs a file name"),
    (["--format", "xml"], "'xml'"), (["--step-on", ""], "--step-on needs a symbol"),
    (["--pcie-gbps", "0"], "'0'"), (["--pcie-gbps", "-1"], "'-1'"), (["--pcie-gbps", "fast"], "'fast'"),
    (["--pcie-gbps", "inf"], "'inf'"), (["--disk-mbps", "0"], "'0'"), (["--disk-mbps", "abc"], "'abc'"),
    (["--ringbuf-mb", "0"], "'0'"), (["--ringbuf-mb", "3"], "3"), (["--ringbuf-mb", "abc"], "'abc'"),
    (["--ringbuf-mb", "8192"], "8192"),
    (["--drain-ms", "0"], "'0'"), (["--drain-ms", "1001"], "'1001'"), (["--drain-ms", "x"], "'x'"),
    (["--duty", "2/1"], "'2/1'"), (["--duty", "0/4"], "'0/4'"), (["--duty", "1"], "'1'"),
    (["--duty", "a/b"], "'a/b'"), (["--duty", "1/0"], "'1/0'"), (["--duty", "+1/2"], "'+1/2'"),
    (["--duty", "1/ 2"], "'1/ 2'"),
    (["--ready-fd", "2"], "'2'"), (["--ready-fd", "abc"], "'abc'"), (["--ready-fd", "99"], "--ready-fd 99"),
]


@fault("an option given a malformed or out-of-range value (each option that takes one)",
       "a usage error naming the value, exit 2, nothing traced")
def test_cli_bad_values():
    for args, needle in BAD_VALUES:
        usage_error(args + ([] if args[0] == "--pid" else ["--pid", NO_PID]), needle)
    return f"{len(BAD_VALUES)} bad values refused"


@fault("options that contradict each other or the subcommand",
       "a usage error saying which, exit 2, nothing traced")
def test_cli_conflicts():
    cases = [
        ([], "nothing to trace"),
        (["--pid", NO_PID, "--", "true"], "either --pid or a command"),
        (["--comm", "x", "--", "true"], "either --pid or a command"),
        (["record", "--pid", NO_PID], "record needs -o"),
        (["record", "-o", os.path.join(WORK, "x.dlbpf"), "--summary", "--pid", NO_PID], "--summary and --duty"),
        (["record", "-o", os.path.join(WORK, "x.dlbpf"), "--duty", "1/2", "--pid", NO_PID], "--summary and --duty"),
        (["report"], "report needs a recording"),
        (["report", "a.dlbpf", "b.dlbpf"], "one recording"),
        (["report", "a.dlbpf", "--pid", "1"], "do not apply"),
        (["report", "a.dlbpf", "-d", "1"], "do not apply"),
        (["report", "a.dlbpf", "--summary"], "do not apply"),
        (["report", "a.dlbpf", "--duty", "1/2"], "do not apply"),
        (sum((["--pid", str(1000 + i)] for i in range(65)), []), "at most"),
        (sum((["--comm", f"c{i}"] for i in range(17)), []), "at most"),
    ]
    for args, needle in cases:
        usage_error(args, needle)
    # --ready-fd with report: an fd that is open, so that the mode is what is refused.
    r, w = os.pipe()
    try:
        usage_error(["report", "a.dlbpf", "--ready-fd", str(w)], "--ready-fd does not apply", pass_fds=(w,))
    finally:
        os.close(r)
        os.close(w)
    return f"{len(cases) + 1} conflicts refused"


@fault("an unknown option, or an option missing its argument", "argp's message, exit 2")
def test_cli_unknown_options():
    usage_error(["--bogus", "--pid", NO_PID], "unrecognized option '--bogus'")
    usage_error(["-x", "--pid", NO_PID], "invalid option -- 'x'")
    usage_error(["--pid"], "requires an argument")
    usage_error(["--summary=yes", "--pid", NO_PID], "doesn't allow an argument")
    for ok in (["--help"], ["--usage"], ["--version"]):
        p = subprocess.run([DLBPF] + ok, capture_output=True, text=True, timeout=30)
        check(p.returncode == 0 and p.stdout, f"{ok[0]}: exit {p.returncode}")


@fault("-- COMMAND that does not exist, or is not executable",
       "the error names it; exit 127 or 126, as env(1) and the shell")
def test_command_cannot_run():
    rc, out, err = run_dlbpf(["-q", "--", "/nonexistent/program"])
    check(rc == 127, f"missing command: exit {rc}")
    check("cannot run '/nonexistent/program'" in err, f"unclear error: {err.strip()}")
    path = os.path.join(WORK, "not-executable")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    rc, out, err = run_dlbpf(["-q", "--", path])
    check(rc == 126, f"non-executable command: exit {rc}")
    check(f"cannot run '{path}'" in err and "Permission denied" in err, f"unclear error: {err.strip()}")


def command_status(script):
    d = Dlbpf(["--", "sh", "-c", script])
    rc = d.wait()
    return rc, d


@fault("the traced command exits with status 7", "dlbpf exits 7, after its full report")
def test_exit_status_of_command():
    rc, d = command_status("exit 7")
    check(rc == 7, f"dlbpf exited {rc}: {d.stderr[-300:]}")
    p = d.summary()["processes"][0]
    check(p["exited"] and p["exit_code"] == 7, f"summary: exited {p['exited']}, code {p.get('exit_code')}")
    check("exited during the trace (code 7)" in d.stdout, "text report lacks the exit")


@fault("the traced command is killed by a signal (SIGKILL, SIGTERM)", "dlbpf exits 128 + the signal's number")
def test_exit_status_of_killed_command():
    for sig in (signal.SIGKILL, signal.SIGTERM):
        rc, d = command_status(f"kill -{sig.name[3:]} $$")
        check(rc == 128 + sig.value, f"{sig.name}: dlbpf exited {rc}, expected {128 + sig.value}")
        p = d.summary()["processes"][0]
        check(p["exit_code"] == 128 + sig.value, f"{sig.name}: summary exit_code {p['exit_code']}")


@fault("the command exits 7 but the JSON summary cannot be written", "dlbpf's own failure wins: exit 1")
def test_exit_status_own_failure_first():
    rc, out, err = run_dlbpf(["-q", "--json", "/dev/full", "--", "sh", "-c", "exit 7"])
    check(rc == 1, f"exit {rc}")
    check("/dev/full" in err, f"unclear error: {err.strip()}")


@fault("the collector stalls while the job bursts CUDA calls into a 1 MiB ring buffer",
       "every lost record counted: records received + drops == calls made, exactly")
def test_ringbuf_overflow_exact():
    calls = 100_000   # records of ~128 bytes: 1 MiB holds about 8 k, so most must drop
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR, GPUSIM_LAUNCH_US="0")
    w = subprocess.Popen([workload("ratecalls"), "--wait", "--count", str(calls)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        check(w.stdout.readline().strip() == "ready", "ratecalls did not start")
        d = Dlbpf(["--ringbuf-mb", "1", "--pid", str(w.pid)])
        d.started()
        # Stopped, the collector drains nothing: the burst meets a full buffer, whatever the machine's speed.
        d.proc.send_signal(signal.SIGSTOP)
        try:
            w.stdin.write("go\n")
            w.stdin.flush()
            out, _ = w.communicate(timeout=120)
        finally:
            d.proc.send_signal(signal.SIGCONT)
        rc = d.wait()
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-300:]}")
    truth = truth_line(out, "{\"api\"")
    check(truth["calls"] == calls, f"ratecalls made {truth['calls']} calls")
    s = d.summary()
    got = process(s, w.pid)["cuda"]["calls"].get("cudaLaunchKernel", {}).get("count", 0)
    lost = s["drops"]["cuda"]
    check(got > 0 and lost > 0, f"received {got}, dropped {lost}: the buffer never filled, or nothing came")
    check(got + lost == calls, f"received {got} + dropped {lost} = {got + lost}, the workload made {calls}")
    check(f"cuda {lost}" in d.stdout and "--ringbuf-mb" in d.stdout, "the report does not warn of the loss")
    return f"{got} received + {lost} dropped == {calls} calls"


def bpf_objects(pid):
    """What a process holds of BPF: the tracepoints of its links and the ids of its maps (from fdinfo)."""
    tps, maps = set(), []
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        except OSError:
            continue
        if target == "anon_inode:bpf_link" and "tp_name" in info:
            tps.add(info["tp_name"].strip())
        elif target == "anon_inode:bpf-map":
            maps.append(info["map_id"].strip())
    return tps, maps


def rodata_of(pid):
    """The read-only globals the BPF programs were loaded with, by name (bpftool, from the BTF)."""
    for map_id in bpf_objects(pid)[1]:
        show = json.loads(subprocess.run(["bpftool", "-j", "map", "show", "id", map_id], capture_output=True,
                                         text=True).stdout or "{}")
        if show.get("name", "").endswith(".rodata"):
            dump = json.loads(subprocess.run(["bpftool", "-j", "map", "dump", "id", map_id], capture_output=True,
                                             text=True, check=True).stdout)
            return {k: v for var in dump[0]["formatted"]["value"][".rodata"] for k, v in var.items()}
    raise Failure(f"pid {pid} holds no .rodata map")


TWINS = dict(os.environ, DLBPF_FORCE_TWINS="old")


def data_file(mb=24):
    """A file of random bytes for ioread, on disk (fsync'd); ioread drops it from the page cache."""
    path = os.path.join(WORK, "faults-ioread.dat")
    if not os.path.exists(path) or os.path.getsize(path) != mb << 20:
        with open(path, "wb") as f:
            f.write(os.urandom(mb << 20))
            f.flush()
            os.fsync(f.fileno())
    return path


@fault("a kernel older than block_io_start (5.x): block_rq_insert/issue instead (forced: DLBPF_FORCE_TWINS=old)",
       "disk reads still equal /proc/PID/io read_bytes")
def test_old_twins_block_io():
    w = subprocess.Popen([workload("ioread"), data_file(), "--wait"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        check(w.stdout.readline().strip() == "ready", "ioread did not start")
        d = Dlbpf(["--pid", str(w.pid)], env=TWINS)
        d.started()
        tps = bpf_objects(d.proc.pid)[0]
        check({"block_rq_insert", "block_rq_issue", "block_rq_complete"} <= tps and "block_io_start" not in tps,
              f"not the older programs: {sorted(tps)}")
        w.stdin.write("go\n")
        w.stdin.flush()
        out, _ = w.communicate(timeout=60)
        rc = d.wait()
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    check(rc == 0 and w.returncode == 0, f"dlbpf exited {rc}, ioread {w.returncode}: {d.stderr[-300:]}")
    truth = json.loads(out.strip().splitlines()[-1])
    p = process(d.summary(), w.pid)
    check(truth["read_bytes_delta"] >= truth["buffered"] + truth["direct"] - (1 << 20),
          f"reads did not reach the disk: {truth}")
    check(p["io"]["read_bytes"] == truth["read_bytes_delta"],
          f"read_bytes {p['io']['read_bytes']} != /proc/PID/io delta {truth['read_bytes_delta']}")
    return f"{p['io']['read_bytes']} bytes in {p['io']['read_ops']} requests through block_rq_insert/issue"


@fault("a kernel whose sched_switch lacks prev_state, sched_process_exit group_dead (forced)",
       "on-CPU time within 2% of schedstat; exits still seen")
def test_old_twins_sched_and_exit():
    d = Dlbpf(["--", workload("spinsleep"), "--seconds", "2", "--spin-ms", "4", "--sleep-ms", "3"], env=TWINS)
    d.started()
    ro = rodata_of(d.proc.pid)
    check(ro.get("switch_has_prev_state") is False and ro.get("exit_has_group_dead") is False,
          f"loaded with {ro}")
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-300:]}")
    truth = json.loads(d.stdout.strip().splitlines()[0])
    p = process(d.summary(), truth["pid"])
    # The same 2% as test_dlbpf's test_sched_uncontended: the same switches, only their state read differently.
    err = check_close(p["sched"]["oncpu_ns"], truth["oncpu_ns"], 0.02, "on-CPU")
    check(p["sched"]["sleep_ns"] > 0 and p["sched"]["switches"] > 100, f"no sleeps seen: {p['sched']}")
    check(p["exited"] and p["exit_code"] == 0, f"exit not seen: exited {p['exited']}")
    return f"on-CPU {err * 100:.2f}% off schedstat"


def fanout(args, env):
    """dlbpf -- fanout ARGS with env; returns (fanout's truth, the summary, dlbpf's stdout)."""
    d = Dlbpf(["--", workload("fanout")] + args, env=env)
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-300:]}")
    return truth_line(d.stdout, "{\"pid\""), d.summary(), d.stdout


def children_in(summary, pid):
    return [p for p in summary["processes"] if p["ppid"] == pid]


@fault("a job forks more processes than the traced set holds (shrunk: DLBPF_TEST_MAP_ENTRIES=traced=3)",
       "each child left out counted in traced_full: traced + counted == forked")
def test_traced_set_full_at_fork():
    truth, s, out = fanout(["--children", "6"], dict(os.environ, DLBPF_TEST_MAP_ENTRIES="traced=3"))
    kids, lost = len(children_in(s, truth["pid"])), s["drops"]["traced_full"]
    check(lost > 0, f"nothing counted: {kids} children traced of {truth['children']}")
    check(kids + lost == truth["children"], f"{kids} traced + {lost} counted != {truth['children']} forked")
    check(f"traced_full {lost}" in out, "the text report does not say so")
    return f"{kids} traced + {lost} counted == {truth['children']} forked"


@fault("--pid on a job whose running children do not fit the traced set (shrunk: traced=2)",
       "each one left out counted in traced_full, with a warning")
def test_traced_set_full_at_attach():
    w = subprocess.Popen([workload("fanout"), "--children", "4", "--hold"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        check(w.stdout.readline().strip() == "ready", "fanout did not start")
        d = Dlbpf(["--pid", str(w.pid)], env=dict(os.environ, DLBPF_TEST_MAP_ENTRIES="traced=2"))
        d.started()
        w.stdin.write("go\n")
        w.stdin.flush()
        out, _ = w.communicate(timeout=60)
        rc = d.wait()
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-300:]}")
    truth = truth_line(out, "{\"pid\"")
    s = d.summary()
    kids, lost = len(children_in(s, w.pid)), s["drops"]["traced_full"]
    check(lost > 0 and kids + lost == truth["children"],
          f"{kids} traced + {lost} counted != {truth['children']} running at attach")
    check(d.stderr.count("set of traced processes is full") == lost, "no warning for each one left out")
    return f"{kids} traced + {lost} counted == {truth['children']}"


@fault("more live threads than the thread-state map holds (shrunk: threads=4)",
       "the lost intervals counted as inflight drops (none with the map at full size)")
def test_thread_map_full():
    args = ["--children", "0", "--threads", "16"]
    _, s, out = fanout(args, dict(os.environ, DLBPF_TEST_MAP_ENTRIES="threads=4"))
    check(s["drops"]["inflight"] > 0, f"a full thread map went uncounted: {s['drops']}")
    check("inflight" in out and "a BPF map was full" in out, "the text report does not say so")
    _, s2, _ = fanout(args, None)
    check(s2["drops"]["inflight"] == 0, f"inflight drops without the hook: {s2['drops']}")
    return f"{s['drops']['inflight']} lost intervals counted; 0 at full size"


@fault("more disk requests in flight than the request map holds (shrunk: requests=1)",
       "bytes still equal /proc/PID/io (counted at submission); completions not followed counted as inflight")
def test_request_map_full():
    w = subprocess.Popen([workload("ioread"), data_file(), "--wait"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        check(w.stdout.readline().strip() == "ready", "ioread did not start")
        d = Dlbpf(["--pid", str(w.pid)], env=dict(os.environ, DLBPF_TEST_MAP_ENTRIES="requests=1"))
        d.started()
        w.stdin.write("go\n")
        w.stdin.flush()
        out, _ = w.communicate(timeout=60)
        rc = d.wait()
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-300:]}")
    truth = json.loads(out.strip().splitlines()[-1])
    s = d.summary()
    io = process(s, w.pid)["io"]
    # Readahead keeps several requests in flight at once: with room for one, some completions cannot be followed.
    check(s["drops"]["inflight"] > 0, f"nothing counted with room for one request: {io}")
    check(io["read_bytes"] == truth["read_bytes_delta"],
          f"read_bytes {io['read_bytes']} != /proc/PID/io delta {truth['read_bytes_delta']}")
    check(io["completed_bytes"] < io["read_bytes"],
          f"completed_bytes {io['completed_bytes']}: completions of requests not followed, counted anyway")
    return (f"{io['read_bytes']} bytes exact; {s['drops']['inflight']} requests not followed, "
            f"{io['completed_bytes']} bytes seen complete")


def deep_calls(args):
    d = Dlbpf(["--", workload("deep/deep_calls")] + args)
    rc = d.wait()
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-300:]}")
    truth = truth_line(d.stdout, "{\"nested_chain\"")
    s = d.summary()
    return truth, s, process(s, s["processes"][0]["pid"])["cuda"], d.stdout


@fault("CUDA calls nested deeper than BPF keeps frames for (10, and 100: past the kernel's return-probe limit)",
       "each call recorded or counted (depth); later calls on the thread unaffected")
def test_nesting_past_depth_limit():
    notes = []
    for depth in (10, 100):
        truth, s, cuda, out = deep_calls(["--depth", str(depth)])
        syncs = cuda["calls"].get("cudaStreamSynchronize", {}).get("count", 0)
        lost = s["drops"]["depth"]
        chain = syncs - truth["single_syncs"]
        check(lost > 0, f"depth {depth}: nothing counted ({syncs} syncs recorded)")
        check(chain > 0 and chain + lost == truth["nested_chain"],
              f"depth {depth}: {chain} recorded + {lost} counted != {truth['nested_chain']} nested calls")
        # What follows the chain: not nested in a call that has long returned.
        mallocs = cuda["calls"].get("cudaMalloc", {}).get("count", 0)
        launches = sum(k["count"] for k in cuda["kernels"])
        check(mallocs == truth["malloc_fault"], f"depth {depth}: {mallocs} cudaMalloc of {truth['malloc_fault']}")
        check(launches == truth["launch_ok"] + truth["launch_fault"],
              f"depth {depth}: {launches} kernel launches of {truth['launch_ok'] + truth['launch_fault']}")
        check(f"depth {lost}" in out, f"depth {depth}: the text report does not say so")
        check("--ringbuf-mb" not in out, f"depth {depth}: advice to grow the ring buffer, which cannot help")
        notes.append(f"{depth}: {chain} + {lost}")
    return ", ".join(notes)


@fault("a kernel launch whose launch-config pointer is unmapped; a cudaMalloc whose out pointer is",
       "each flagged and counted (args_faults); no shape or size made up")
def test_unreadable_arguments():
    truth, s, cuda, out = deep_calls(["--depth", "1", "--launches", "5", "--faults", "3"])
    exc, malloc = cuda["calls"]["cudaLaunchKernelExC"], cuda["calls"]["cudaMalloc"]
    check(exc["count"] == truth["launch_ok"] + truth["launch_fault"], f"launches: {exc}")
    check(exc["args_faults"] == truth["launch_fault"], f"launch faults {exc['args_faults']} != {truth['launch_fault']}")
    check(malloc["args_faults"] == truth["malloc_fault"], f"malloc faults {malloc['args_faults']}")
    shapes = {(tuple(k["grid"]), tuple(k["block"]), k["shmem"]): k["count"] for k in cuda["kernels"]}
    readable = (tuple(truth["grid"]), tuple(truth["block"]), truth["shmem"])
    check(shapes.get(readable) == truth["launch_ok"], f"readable launches' shape: {shapes}")
    check(shapes.get(((0, 0, 0), (0, 0, 0), 0)) == truth["launch_fault"], f"unreadable ones not unknown: {shapes}")
    check(len(shapes) == 2, f"shapes made up: {shapes}")
    n = truth["launch_fault"] + truth["malloc_fault"]
    check(f"{n} calls passed pointers dlbpf could not read" in out, "the text report does not say so")
    return f"{exc['args_faults']} launches and {malloc['args_faults']} allocations flagged"


if __name__ == "__main__":
    main()
