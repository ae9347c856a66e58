#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The fault matrix: each row is a way a user, a hostile traced process or the
machine can hurt a tracer (a hang, a frozen job, a lost file, bytes that reach
the terminal, a count that is silently wrong), what dlbpf must do about it, and
whether it did. Every row is a test function; the matrix is printed at the end.
Run as root."""
import atexit

from harness import check, check_summary, load_summary, main, run_dlbpf

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

from harness import DLBPF, GPUSIM_DIR, ROOT, WORK, Failure, shown, workload  # noqa: E402

HOSTILE_NAME = b"\x1b]0;pwn\x07\r\nX\xff"    # OSC "set title", BEL, CR LF (a forged line), not UTF-8
HOSTILE_CHILD = b"abcdefghijklm\xe2\x82\xac"  # 16 bytes: the kernel keeps 15, cutting the euro sign
HOSTILE_DIR = b"gpusim-\x1b[2J\r\xe2\x80\xae\xff"  # clear screen, CR, right-to-left override, not UTF-8
_hostile = {}


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
        load_summary(os.path.join(WORK, f"hostile-replay-{ext}.json"))
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
        # The child is listed, or folded into the line of processes that did nothing (-v lists it): named either way.
        cut = b" %d (abcdefghijklm\\xe2\\x82)" % child
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
    s = check_summary(strict_json(h["summary"], "JSON summary"))
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
from harness import SANITIZED, Dlbpf, Skipped, check_oncpu, make_data_file, process, stolen_ns, trace_waiting, truth_line  # noqa: E402


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
    from test_dlbpf import ROUNDS, WRITE_MIB, check_io_rounds
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
    if SANITIZED:
        raise Skipped("AddressSanitizer's quarantine holds freed memory, so RSS grows with the churn")
    small, large = peak_rss_kib(THREADS // 10), peak_rss_kib(THREADS)
    # Before, each thread's timeline state stayed: +9.6 MB from 4,000 to 40,000 threads (~270 bytes
    # each). 2 MiB allowed for allocator noise is below 60 bytes for each of the 36,000 more.
    check(large - small < 2048, f"peak RSS {small} KiB with {THREADS // 10} threads, {large} KiB with {THREADS}")
    return f"peak RSS {small} KiB with {THREADS // 10} threads, {large} KiB with {THREADS}"


TOOLKIT_CUDART = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "libcudart.so.13")
SIM_CUDART = os.path.join(GPUSIM_DIR, "libcudart.so.13")


def dlopen_cycles(args):
    """dlbpf -- dlopen_loop TOOLKIT_CUDART --cycles ARGS: (the workload's truth, its process in the summary)."""
    d = Dlbpf(["--", workload("dlopen_loop"), TOOLKIT_CUDART, "--cycles"] + args)
    rc = d.wait(timeout=120)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-500:]}")
    truth = truth_line(d.stdout, '{"cycles"')
    check(truth["still_mapped"] == 0, f"the library stayed mapped after dlclose: {truth}")
    return truth, d.summary()["processes"][0]


@fault("a job loads and unloads the CUDA runtime in a loop (dlopen, dlclose)",
       "each load traced from its first call; runtimes counts distinct libraries, not attach events")
def test_dlopen_loop_counted_once():
    # The same library, unloaded long enough for a rescan to see it gone: attached again each time.
    truth, p = dlopen_cycles(["12", "--calls", "1", "--sleep-ms", "300"])
    calls = p["cuda"]["calls"].get("cudaDeviceSynchronize", {}).get("count", 0)
    check(calls == truth["calls"] == 12, f"{calls} calls traced of {truth['calls']}")
    check(p["cuda"]["runtimes"] == 1, f"one library reported as {p['cuda']['runtimes']} runtimes")
    # Two libraries in turn: each load comes with the other's unload in the same rescan, where the
    # new attachment moved down and was not told (reported as 1 runtime before).
    truth, p = dlopen_cycles(["6", "--calls", "1", "--alt", SIM_CUDART])
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
    # Submitted bytes, whatever the device did with them: what /proc/PID/io counts too. dlbpf sees the
    # process from its exec, so beside the window's bytes it may see reads of the process's own code
    # and libraries, all done before the window (readdev locks its mappings first) and bounded by the
    # kernel's count then: exact when that is 0, as it is unless the page cache had dropped them.
    check(truth["read_bytes_delta"] == disk.SIZE and truth["end_read_bytes"] - truth["start_read_bytes"] == disk.SIZE,
          f"workload: {truth}")
    own = io["read_bytes"] - disk.SIZE
    check(0 <= own <= truth["start_read_bytes"],
          f"read_bytes {io['read_bytes']}, /proc/PID/io {truth['read_bytes_delta']} in the window of {disk.SIZE} "
          f"asked, {truth['start_read_bytes']} before it")
    check(io["error_ops"] >= 4, f"{io['error_ops']} completions with an error, 4 reads failed")
    check("completions with an I/O error" in d.stdout, "the text report does not say reads failed")
    failed = disk.SIZE - disk.CUT   # everything past the cut; the request across it fails its rest only
    if io["unseen_ops"] == 0:
        check(io["error_bytes"] == failed, f"error_bytes {io['error_bytes']}, the device failed {failed}")
        check(io["completed_bytes"] - io["error_bytes"] == disk.CUT + own,
              f"completed without error {io['completed_bytes'] - io['error_bytes']}, the file holds {disk.CUT}"
              f" and the process read {own} of its own")
    else:   # a completion ran where BPF does not: its bytes are unseen, no error can be said of them
        check(io["error_bytes"] <= failed and io["completed_bytes"] + io["unseen_bytes"] == disk.SIZE + own,
              f"io {io}")
    return (f"{io['error_ops']} error completions, {io['error_bytes']} bytes failed, "
            f"{io['completed_bytes'] - io['error_bytes']} completed (read() returned {truth['ok_bytes']})")


# --- hangs and frozen jobs, paths inside containers --------------------------
import ctypes  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from harness import DLBPF, GPUSIM_DIR, OUT, WORK, Dlbpf, Failure, process, workload  # noqa: E402

TOOLKIT_CUDART = "/usr/local/cuda/lib64/libcudart.so.13"
REAL_CUDART = os.path.realpath(TOOLKIT_CUDART)
# An unprivileged user: what it does to dlbpf, anyone on the machine can.
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# A -d 2 run ends in about 3 s; the limit only tells a hang from a slow machine.
HANG_S = 60


def nobody_can_run(path):
    """A checkout in a private home directory is out of an unprivileged user's reach: root then plays the user."""
    return subprocess.run(AS_NOBODY + ["test", "-x", path], capture_output=True).returncode == 0


class Overmount:
    """tests/workloads/overmount in its own mount namespace: a mapped runtime's path replaced."""

    def __init__(self, mode, *extra):
        self.scratch = tempfile.mkdtemp(prefix=f"overmount-{mode}-", dir=WORK)
        os.chmod(self.scratch, 0o777)
        user = nobody_can_run(workload("overmount"))
        argv = (AS_NOBODY if user else []) + [workload("overmount"), mode, TOOLKIT_CUDART, self.scratch, *extra]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.close()
            raise Failure(f"overmount {mode} did not start: {line!r} {self.proc.stderr.read()}")
        self.pid = self.proc.pid

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)


def run_bounded(args, env=None):
    """dlbpf to completion; still running after HANG_S fails the test as a hang."""
    try:
        return run_dlbpf(args, timeout=HANG_S, env=env)
    except subprocess.TimeoutExpired:
        raise Failure(f"dlbpf {' '.join(args)} still running after {HANG_S} s: it hangs")


def warnings_about(err, pid, path):
    return [line for line in err.splitlines() if "warning" in line and f"pid {pid}:" in line and path in line]


def one_warning(err, pid, path, says):
    ws = warnings_about(err, pid, path)
    check(len(ws) == 1, f"{len(ws)} warnings about {path}, want exactly one: {ws[:3]}")
    check(says in ws[0], f"the warning does not say '{says}': {ws[0]}")
    return ws[0]


# Mapped files by their paths, as dlbpf does without CAP_SYS_ADMIN (/proc/PID/map_files needs it): the
# rows below put that route's defences to the test; as root, dlbpf reads the mapped file itself (the rows after).
BY_PATH = dict(os.environ, DLBPF_TEST_NO_MAP_FILES="1")


def replaced_runtime(mode, says, extra_args=()):
    """dlbpf -d 2 on a process whose runtime's path now holds something else: ends, warns once."""
    w = Overmount(mode)
    try:
        rc, _, err = run_bounded(["-v", "--pid", str(w.pid), "-d", "2", *extra_args], env=BY_PATH)
    finally:
        w.close()
    check(rc == 0, f"exit {rc}: {err[-800:]}")
    check(f"CUDA runtime functions in {REAL_CUDART}" not in err, "attached to what replaced the runtime")
    check("stopping" not in err, "it took a signal to end")
    return one_warning(err, w.pid, REAL_CUDART, says)


@fault("a process maps libcudart.so.13, then (as any user, unshare -Urm) mounts a FIFO over that path; "
       "dlbpf opens mapped files by path (as without CAP_SYS_ADMIN)",
       "dlbpf -d 2 ends on time, one warning that it is a FIFO, the rest traced")
def test_fifo_over_mapped_runtime():
    return replaced_runtime("fifo", "a FIFO, not a regular file")


@fault("the same with /dev/zero bind-mounted over the mapped runtime",
       "never opened as a library: one warning (a character device), dlbpf -d 2 ends on time")
def test_chardev_over_mapped_runtime():
    return replaced_runtime("chardev", "a character device, not a regular file")


@fault("the same with a 1 TiB sparse copy of the runtime bind-mounted over it",
       "refused unread (over the 16 GiB bound), one warning, dlbpf -d 2 ends on time")
def test_huge_sparse_over_mapped_runtime():
    return replaced_runtime("sparse", "more than the 16 GiB dlbpf reads of one file")


@fault("dlbpf --system-wide run by root while a user's process has a FIFO over its mapped runtime (by path)",
       "dlbpf -d 2 ends on time with one warning about that process")
def test_fifo_system_wide():
    w = Overmount("fifo")
    try:
        rc, _, err = run_bounded(["--system-wide", "-d", "2"], env=BY_PATH)
    finally:
        w.close()
    check(rc == 0, f"exit {rc}: {err[-800:]}")
    return one_warning(err, w.pid, REAL_CUDART, "a FIFO")


def host_symlink(env):
    # A runtime only the host has: the namespace's root is a fresh tmpfs.
    host_only = os.path.join(GPUSIM_DIR, "libcudart.so.13")
    check(os.path.exists(host_only), f"{host_only} not built")
    w = Overmount("hostlink", host_only)
    try:
        rc, _, err = run_bounded(["-v", "--pid", str(w.pid), "-d", "2"], env=dict(env, DLBPF_TEST_NO_MAP_FILES="1"))
    finally:
        w.close()
    check(rc == 0, f"exit {rc}: {err[-800:]}")
    check("CUDA runtime functions in /lib/libcudart.so.13" not in err,
          f"probes attached to the host's {host_only} through the container's symlink")
    return one_warning(err, w.pid, "/lib/libcudart.so.13", "No such file or directory")


@fault("in a container (own root), the mapped runtime's path is now an absolute symlink to a file only the host has "
       "(by path)",
       "resolved inside the container's root (openat2 RESOLVE_IN_ROOT): not found, one warning, no host file probed")
def test_container_symlink_to_host_file():
    return host_symlink(os.environ)


@fault("the same where the kernel lacks openat2 (forced: DLBPF_TEST_NO_OPENAT2=1)",
       "the component walk confines the symlink the same way: not found, one warning, no host file probed")
def test_container_symlink_to_host_file_walk():
    return host_symlink(dict(os.environ, DLBPF_TEST_NO_OPENAT2="1"))


def inner_symlink(env):
    return calls_through("innerlink", env)


def calls_through(mode, env, *extra):
    """dlbpf --pid on an Overmount process that then calls its runtime: every call traced, none missed."""
    w = Overmount(mode, *extra)
    try:
        d = Dlbpf(["--pid", str(w.pid)], env=env)
        d.started()
        w.proc.stdin.write("call\n")
        w.proc.stdin.flush()
        truth = json.loads(w.proc.stdout.readline())
        w.proc.stdin.close()
        w.proc.wait(30)
        rc = d.wait()
    finally:
        w.close()
    check(rc == 0, f"exit {rc}: {d.stderr[-800:]}")
    got = process(d.summary(), w.pid)["cuda"]["calls"].get("cudaStreamSynchronize", {}).get("count", 0)
    check(got == truth["cudaStreamSynchronize"], f"{got} calls traced, the process made {truth}")
    return f"{got} of {truth['cudaStreamSynchronize']} calls through the runtime mapped ({mode})"


@fault("in a container, the runtime's path is an absolute symlink to the runtime inside the container's root",
       "followed inside that root: the runtime is attached and every call traced")
def test_container_symlink_inside_root():
    return inner_symlink(None)


@fault("the same where the kernel lacks openat2 (forced: DLBPF_TEST_NO_OPENAT2=1)",
       "the component walk follows it inside the root the same way: every call traced")
def test_container_symlink_inside_root_walk():
    return inner_symlink(dict(os.environ, DLBPF_TEST_NO_OPENAT2="1"))


def proc_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def signal_state(pid):
    """The job-control view of pid, for a failure's message: each thread's state and pending signals."""
    parts = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task")):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            got = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        parts.append(f"tid {tid} {got.get('State')} SigPnd {got.get('SigPnd')} ShdPnd {got.get('ShdPnd')}")
    return "; ".join(parts)


def wait_state(pid, want, timeout):
    """Polls pid's state until it is want; True when seen (timeout is a bound on a wait, nothing measured)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc_state(pid) == want:
            return True
    return False


def answers(w, timeout=HANG_S):
    """dlopen_loop answers a line with "alive N": a stopped process never does."""
    w.stdin.write("?\n")
    w.stdin.flush()
    ready, _, _ = select.select([w.stdout], [], [], timeout)
    check(ready, f"pid {w.pid} did not answer in {timeout} s: state {proc_state(w.pid)}")
    line = w.stdout.readline()
    check(line.startswith("alive "), f"pid {w.pid} answered {line!r}")
    return int(line.split()[1])


def start_dlopen_loop():
    w = subprocess.Popen([workload("dlopen_loop"), TOOLKIT_CUDART], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    check(w.stdout.readline().strip() == "ready", "dlopen_loop did not start")
    return w


def end_loop(w, d=None):
    """Ends what a test started, also after a failure that left the loop held or dlbpf stopped."""
    if d is not None and d.proc.poll() is None:
        d.proc.kill()
        d.proc.wait()
    if w.poll() is None:
        os.kill(w.pid, signal.SIGCONT)
        w.stdin.close()
        try:
            w.wait(30)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()


@fault("dlbpf is SIGKILLed while the dlopen hold has a process stopped (a job dlopening CUDA libraries in a loop), "
       "20 times", "the process is continued every time: never left stopped (state T)")
def test_sigkill_during_dlopen_hold():
    w = start_dlopen_loop()
    held_at_kill, d = 0, None
    try:
        for i in range(20):
            d = Dlbpf(["--pid", str(w.pid)])
            d.started()
            # Killed while the hold is on: the state shows T between the stop and dlbpf's SIGCONT.
            held_at_kill += wait_state(w.pid, "T", 10)
            d.proc.kill()
            d.wait()   # until stderr ends: the watchdog, which shares it, has exited
            state, signals = proc_state(w.pid), signal_state(w.pid)
            if state == "T":
                os.kill(w.pid, signal.SIGCONT)
            check(state != "T", f"trial {i + 1}: left stopped after dlbpf was killed ({signals}; the watchdog "
                  f"{'still ran' if d.stderr_open() else 'had exited'}): {d.stderr[-500:]}")
            answers(w)
    finally:
        end_loop(w, d)
    check(held_at_kill > 0, "never caught the process held: the kill never hit the hold")
    return f"20 kills, {held_at_kill} of them with the process held: continued every time"


@fault("dlbpf is SIGKILLed around a single dlopen of the CUDA runtime, 10 times",
       "the process loads, calls and exits every time: never left stopped")
def test_sigkill_around_single_dlopen():
    lateload = os.path.join(OUT, "workloads", "coverage", "lateload")
    held_at_kill = 0
    for i in range(10):
        w = subprocess.Popen([lateload, TOOLKIT_CUDART, "3"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        try:
            check(w.stdout.readline().strip() == "ready", "lateload did not start")
            d = Dlbpf(["--pid", str(w.pid)])
            d.started()
            w.stdin.write("go\n")
            w.stdin.flush()
            held_at_kill += wait_state(w.pid, "T", 5)
            d.proc.kill()
            d.wait()
            ready, _, _ = select.select([w.stdout], [], [], HANG_S)
            check(ready, f"trial {i + 1}: lateload never got past its dlopen: state {proc_state(w.pid)}")
            check(json.loads(w.stdout.readline())["cudaMemcpy"] == 3, "lateload did not make its calls")
            w.stdin.write("done\n")
            w.stdin.flush()
            check(w.wait(HANG_S) == 0, f"lateload exited {w.returncode}")
        finally:
            if w.poll() is None:
                w.kill()
                w.wait()
    return f"10 kills, {held_at_kill} with the process held"


@fault("dlbpf is SIGKILLed while it holds a traced process at its exec (stopped, so it never continues it)",
       "the watchdog continues it: the program runs, makes its calls and exits 0")
def test_sigkill_during_exec_hold():
    fifo = os.path.join(WORK, f"exec-hold-{os.getpid()}")
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    w = subprocess.Popen(["sh", "-c", f"read go < {fifo}; exec {workload('cuda_calls')}"], stdout=subprocess.PIPE,
                         text=True)
    try:
        d = Dlbpf(["--pid", str(w.pid)])
        d.started()
        # Stopped, dlbpf cannot continue what it holds: only the watchdog can.
        d.proc.send_signal(signal.SIGSTOP)
        with open(fifo, "w") as f:
            f.write("go\n")
        held = wait_state(w.pid, "T", 10)
        d.proc.kill()
        d.wait()
        out, _ = w.communicate(timeout=HANG_S)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
        os.unlink(fifo)
    check(held, "the exec'd program was never held")
    check(w.returncode == 0, f"the program exited {w.returncode}")
    check(out.startswith("{\"h2d\""), f"the program did not make its calls: {out[:200]!r}")
    return "held at its exec, continued by the watchdog once dlbpf was killed"


@fault("dlbpf is stopped (Ctrl-Z, SIGSTOP) while the dlopen hold has a process stopped",
       "the watchdog continues it within 10 s and turns the hold off; dlbpf carries on once continued")
def test_dlbpf_stopped_during_hold():
    w, d = start_dlopen_loop(), None
    try:
        d = Dlbpf(["--pid", str(w.pid)])
        d.started()
        check(wait_state(w.pid, "T", 10), "the process was never held")
        d.proc.send_signal(signal.SIGSTOP)
        try:
            check(wait_state(d.proc.pid, "T", 10), "dlbpf did not stop")
            # Its next dlopen is held with dlbpf stopped: only the watchdog can let it go.
            check(wait_state(w.pid, "T", 10), "not held while dlbpf was stopped")
            # Bound 10 s (capture/watchdog.h) plus the watchdog's 1 s poll; the limit only catches a hang.
            before = answers(w)
            after = answers(w)
        finally:
            d.proc.send_signal(signal.SIGCONT)
        check(after >= before, "the loop went backwards")
        rc = d.stop()
        check(rc == 0, f"dlbpf exited {rc} once continued: {d.stderr[-800:]}")
        # Read once stderr has ended (d.stop): the watchdog writes there too.
        check("held stopped for" in d.stderr and "the dlopen hold is off" in d.stderr,
              f"the watchdog said nothing: {d.stderr[-800:]}")
    finally:
        end_loop(w, d)
    return "continued by the watchdog while dlbpf was stopped"


def watchdog_of(pid, but=None, timeout=HANG_S):
    """dlbpf's watchdog: its child named dlbpf-watchdog (other than but); the limit only catches a hang."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for k in children_of(pid):
            try:
                with open(f"/proc/{k}/comm") as f:
                    if f.read().strip() == "dlbpf-watchdog" and k != but:
                        return k
            except OSError:
                pass
        time.sleep(0.05)
    raise Failure(f"dlbpf {pid} has no watchdog")


@fault("someone kills dlbpf's watchdog (kill -9), then dlbpf is SIGKILLed while the dlopen hold has a process stopped",
       "dlbpf says so and starts another watchdog, which continues the process")
def test_watchdog_killed():
    w, d = start_dlopen_loop(), None
    try:
        d = Dlbpf(["--pid", str(w.pid)])
        d.started()
        first = watchdog_of(d.proc.pid)
        os.kill(first, signal.SIGKILL)
        second = watchdog_of(d.proc.pid, but=first)
        check(wait_state(w.pid, "T", 10), "the process was never held")
        d.proc.kill()
        d.wait()
        state = proc_state(w.pid)
        check(state != "T", f"left stopped: {d.stderr[-500:]}")
        check(f"the watchdog (pid {first}) was killed by signal 9" in d.stderr, "not said: " + d.stderr[-500:])
        answers(w)
    finally:
        end_loop(w, d)
    return f"watchdog {first} killed, {second} took over"


PR_SET_CHILD_SUBREAPER = 36


def children_of(pid):
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            kids += [int(k) for k in f.read().split()]
    return kids


def reap(pid, timeout=HANG_S):
    """Waits for an orphan this process adopted; its wait status."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got == pid:
            return status
        time.sleep(0.01)
    raise Failure(f"pid {pid} still running after {timeout} s (state {proc_state(pid)})")


@fault("dlbpf -- CMD is SIGKILLed while CMD is still held at its start (a linked library's constructor runs)",
       "CMD dies with dlbpf (SIGKILL: its program never started), never left stopped or run on to a SIGTRAP")
def test_sigkill_during_command_hold():
    libc = ctypes.CDLL(None, use_errno=True)
    # Adopt dlbpf's orphans (the command, the watchdog), to see how the command ends.
    check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, "cannot become a subreaper")
    try:
        d = subprocess.Popen([DLBPF, "-q", "--", workload("holdcmd")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, HOLDCTOR="1"))
        line = d.stdout.readline()
        check(line.startswith("ctor "), f"holdcmd did not reach its constructor: {line!r}")
        cmd = int(line.split()[1])
        kids = children_of(d.pid)
        check(cmd in kids, f"the command {cmd} is not dlbpf's child ({kids})")
        d.kill()
        d.wait()
        try:
            d.stdin.write("go\n")   # lets a command that survived run on
            d.stdin.flush()
        except BrokenPipeError:
            pass
        status = reap(cmd)
        for k in kids:
            if k != cmd:
                reap(k)   # the watchdog
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    check(os.WIFSIGNALED(status), f"the command exited {os.WEXITSTATUS(status)}: it ran on")
    check(os.WTERMSIG(status) == signal.SIGKILL,
          f"the command died of signal {os.WTERMSIG(status)}, not SIGKILL with dlbpf")
    return "killed with dlbpf, before its program started"


@fault("SIGTERM while dlbpf -- CMD holds CMD at its start (CMD's constructor blocks)",
       "dlbpf ends at once, exit 1, saying the command was killed before its program started")
def test_sigterm_during_command_hold():
    d = subprocess.Popen([DLBPF, "-q", "--", workload("holdcmd")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, HOLDCTOR="1"))
    line = d.stdout.readline()
    check(line.startswith("ctor "), f"holdcmd did not reach its constructor: {line!r}")
    cmd = int(line.split()[1])
    d.terminate()
    try:
        _, err = d.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        d.kill()
        d.wait()
        raise Failure("dlbpf did not end on SIGTERM while holding the command")
    check(d.returncode == 1, f"exit {d.returncode}: {err}")
    check("killed before its program started" in err, f"unclear message: {err}")
    check(not os.path.exists(f"/proc/{cmd}"), f"the command {cmd} is still there")


@fault("SIGINT while dlbpf attaches to a job of 64 CUDA processes",
       "the attach pass ends at once: no further process attached, the report, exit 0")
def test_sigint_during_attach():
    n = 64
    w = subprocess.Popen([workload("cudafleet"), str(n), TOOLKIT_CUDART], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    d = None
    try:
        check(w.stdout.readline().strip() == "ready", "cudafleet did not start")
        d = subprocess.Popen([DLBPF, "-v", "-q", "--pid", str(w.pid)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        attached, lines = 0, []
        for line in d.stderr:
            lines.append(line)
            if "CUDA runtime functions" in line:
                attached += 1
                if attached == 1:
                    d.send_signal(signal.SIGINT)
        rc = d.wait(HANG_S)
    finally:
        if d is not None and d.poll() is None:
            d.kill()
            d.wait()
        w.stdin.close()
        w.wait(30)
    err = "".join(lines)
    check(rc == 0, f"exit {rc}: {err[-800:]}")
    check("stopping on signal 2" in err, "no word of the signal")
    # Each attach takes milliseconds: the signal came after the first, so a pass that stops is far from n.
    check(attached < n, f"all {n} processes attached after SIGINT: the pass ignored it")
    return f"{attached} of {n} attached when SIGINT came"


# --- Output files and recordings: nothing clobbered, nothing followed, damage salvaged, every
# loop bounded and every phase stopped by a signal.
import hashlib  # noqa: E402  (imports of this section, kept with it so that rows stay append-only)
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from harness import DLBPF, GPUSIM_DIR, WORK, Failure, workload  # noqa: E402
import recording  # noqa: E402


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def leftovers(d):
    """Hidden files in d: the temporaries dlbpf writes outputs to before renaming them."""
    return sorted(n for n in os.listdir(d) if n.startswith("."))


def fresh_dir(name):
    d = os.path.join(WORK, name)
    subprocess.run(["rm", "-rf", "--", d], check=True)
    os.makedirs(d)
    return d


DL_EV_CUDA = 1   # enum dl_kind in include/dlbpf/events.h


def complete_records(path, count_kind=None, count_tgid=None):
    """Read independently of dlbpf (recording.py, either encoding): (complete records, the byte offset where
    they end, file size), and with count_kind also how many of them are of that kind and process."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"DLBPFREC", f"{path} has no recording header")
    r = recording.read(path, data)
    counted = 0
    for _, b in r.records:
        _, kind, _, _, tgid = struct.unpack_from("<HHIQI", b)
        counted += kind == count_kind and tgid == count_tgid
    return (len(r.records), r.end, r.size) if count_kind is None else (len(r.records), r.end, r.size, counted)


TRAIN_ENV = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)


def small_recording(name, steps=20, encoding="compact"):
    """A short recording of the simulated training job, for the tests that damage one."""
    d = fresh_dir(name)
    rec = os.path.join(d, "run.dlbpf")
    p = subprocess.run([DLBPF, "record", "-q", "--encoding", encoding, "-o", rec, "--", workload("train"),
                        "--scenario", "input",
                        "--steps", str(steps), "--quiet"], capture_output=True, text=True, env=TRAIN_ENV,
                       timeout=120)
    check(p.returncode == 0, f"record failed: {p.stderr[-500:]}")
    return d, rec


class Background:
    """dlbpf with its own argv (record, report), told ready through --ready-fd when it traces."""

    def __init__(self, argv, ready=True, **kw):
        fds = ()
        if ready:
            self.ready_r, ready_w = os.pipe()
            argv = argv[:1] + ["--ready-fd", str(ready_w)] + argv[1:]
            fds = (ready_w,)
        self.proc = subprocess.Popen([DLBPF] + argv, stdin=subprocess.DEVNULL, pass_fds=fds, **kw)
        if ready:
            os.close(ready_w)

    def started(self, timeout=30):
        with os.fdopen(self.ready_r, "rb") as f:
            got = f.read()
        check(got == b"ready\n", f"dlbpf did not start tracing (exit {self.proc.poll()})")


@fault("report R -j R, report R -o R (or through a link to R), record -o X -j X",
       "refused before anything is written: exit 2 naming both, the recording unchanged")
def test_output_same_as_input():
    d, rec = small_recording("same-file")
    before = digest(rec)
    os.symlink("run.dlbpf", os.path.join(d, "link.dlbpf"))
    cases = [["report", rec, "-j", rec], ["report", rec, "-o", rec], ["report", rec, "-o", os.path.join(d, "x.json"),
             "-j", os.path.join(d, "..", os.path.basename(d), "x.json")],
             ["report", rec, "-j", os.path.join(d, "link.dlbpf")],
             ["record", "-o", os.path.join(d, "x.dlbpf"), "-j", os.path.join(d, "x.dlbpf"), "--", "true"]]
    for args in cases:
        rc, _, err = run_dlbpf(args)
        check(rc == 2, f"{' '.join(args[:4])}: exit {rc} (expected 2): {err.strip()[-300:]}")
        check("same file" in err or "recording being reported" in err, f"unclear error: {err.strip()}")
        check(digest(rec) == before, f"{' '.join(args[:4])}: the recording changed")
    check(not os.path.exists(os.path.join(d, "x.json")) and not os.path.exists(os.path.join(d, "x.dlbpf")),
          "an output was written anyway")
    check(not leftovers(d), f"temporaries left: {leftovers(d)}")
    return f"{len(cases)} cases refused, recording intact"


@fault("a run that fails (-p 999999) with -j/-o naming existing files",
       "exit 1, each existing file exactly as it was, no temporary left")
def test_failed_run_keeps_old_files():
    d = fresh_dir("failed-run")
    paths = {name: os.path.join(d, name) for name in ("old.json", "old.pftrace", "old.dlbpf")}
    for name, path in paths.items():
        with open(path, "w") as f:
            f.write(f"the previous run's {name}\n")
    before = {p: digest(p) for p in paths.values()}
    for args in (["-p", "999999", "-j", paths["old.json"], "-o", paths["old.pftrace"]],
                 ["record", "-o", paths["old.dlbpf"], "-j", paths["old.json"], "-p", "999999"]):
        rc, _, err = run_dlbpf(args)
        check(rc == 1 and "no process with pid 999999" in err, f"exit {rc}: {err.strip()}")
        for p, h in before.items():
            check(digest(p) == h, f"{os.path.basename(p)} changed by a failed run")
    check(not leftovers(d), f"temporaries left: {leftovers(d)}")
    return "3 files untouched"


@fault("another user plants a symlink at the output path (-j, -o, record -o) pointing at a file of root's",
       "the link is replaced by dlbpf's own file, mode 0600 whatever the umask; the target untouched")
def test_planted_symlink_not_followed():
    d = fresh_dir("planted")
    os.chmod(d, 0o1777)   # a /tmp of its own: anyone may plant a link in it
    victim = os.path.join(d, "victim")
    with open(victim, "w") as f:
        f.write("root's file\n")
    before = digest(victim)
    links = [os.path.join(d, n) for n in ("s.json", "t.pftrace", "r.dlbpf")]
    for link in links:
        os.symlink(victim, link)
        os.lchown(link, 65534, 65534)
    umask0 = lambda: os.umask(0)
    for args in (["-q", "-j", links[0], "-o", links[1], "--", "true"], ["record", "-q", "-o", links[2], "--", "true"]):
        p = subprocess.run([DLBPF] + args, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                           preexec_fn=umask0)
        check(p.returncode == 0, f"dlbpf {' '.join(args[:3])}: exit {p.returncode}: {p.stderr[-300:]}")
    check(digest(victim) == before, "the link's target was written through")
    for link in links:
        st = os.lstat(link)
        check(stat.S_ISREG(st.st_mode), f"{os.path.basename(link)} is still a link")
        check(st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600,
              f"{os.path.basename(link)}: uid {st.st_uid} mode {stat.S_IMODE(st.st_mode):o}, expected root 0600")
    check(load_summary(links[0])["schema"] == 1, "the JSON written in the link's place is not the summary")
    n, end, size = complete_records(links[2])
    check(n > 0 and end == size, f"the recording in the link's place: {n} records, {end} of {size} bytes")
    check(not leftovers(d), f"temporaries left: {leftovers(d)}")
    return "3 links replaced, target intact, 0600"


# Several flushes' worth of a compact recording (about 10 B a record: some 6,000 records).
FLUSHED_BYTES = 64 * 1024


@fault("dlbpf record is SIGKILLed mid-recording (or crashes, or the disk fills)",
       "the recording is at its path, flushed; report salvages every complete record, says where it stopped, exit 0")
def test_sigkill_mid_record_salvaged():
    d = fresh_dir("sigkill-record")
    rec = os.path.join(d, "run.dlbpf")
    w = subprocess.Popen([workload("train"), "--scenario", "input", "--steps", "100000", "--quiet"],
                         env=TRAIN_ENV, stdout=subprocess.DEVNULL)
    try:
        b = Background(["record", "-q", "-o", rec, "--pid", str(w.pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        b.started()
        # The periodic flush puts the recording at its path and keeps it growing while dlbpf runs. Size alone
        # is no sign that the job's steps are in it: the loaders' scheduler records can fill the first
        # flushes while the job is still starting, so wait for its CUDA calls too (a step makes about ten).
        deadline = time.monotonic() + 60
        job_calls = 0
        while time.monotonic() < deadline:
            check(b.proc.poll() is None, f"dlbpf exited {b.proc.returncode}")
            if os.path.exists(rec) and os.path.getsize(rec) >= FLUSHED_BYTES:
                job_calls = complete_records(rec, DL_EV_CUDA, w.pid)[3]
                if job_calls >= 100:
                    break
            time.sleep(0.05)
        check(os.path.exists(rec) and os.path.getsize(rec) >= FLUSHED_BYTES,
              "the recording is not at its path while recording")
        check(job_calls >= 100, f"only {job_calls} CUDA calls of the job flushed to the recording in 60 s")
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
    finally:
        w.terminate()
        w.wait()
    check(not leftovers(d), f"temporaries left: {leftovers(d)}")
    n, end, size = complete_records(rec)
    summary = os.path.join(d, "salvaged.json")
    p = subprocess.run([DLBPF, "report", rec, "-j", summary], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"report exit {p.returncode}: {p.stderr[-500:]}")
    if end < size:
        want = f"at byte {end}; the {n} records before it are reported"
        check(want in p.stderr and "cut short" in p.stderr, f"no warning '{want}': {p.stderr.strip()[-500:]}")
    s = load_summary(summary)
    procs = {q["pid"]: q for q in s["processes"]}
    check(w.pid in procs, f"the job (pid {w.pid}) is not in the salvaged report")
    copies = procs[w.pid]["cuda"]["memcpy"]["h2d"]["count"]
    check(copies > 0 and len(s["steps"]) > 0, f"salvaged: {copies} copies, {len(s['steps'])} steps")
    return f"{n} records salvaged ({size - end} bytes cut), {len(s['steps'])} steps, {copies} h2d copies"


@fault("dlbpf ... | head -1: the reader of stdout goes away while dlbpf records",
       "step lines stop; the recording, JSON and timeline complete; exit status as normal")
def test_sigpipe():
    d = fresh_dir("sigpipe")
    rec, summary, trace = (os.path.join(d, n) for n in ("run.dlbpf", "s.json", "trace.json"))
    steps = 40
    p = subprocess.Popen([DLBPF, "record", "-o", rec, "-j", summary, "--format", "json", "--", workload("train"),
                          "--scenario", "input", "--steps", str(steps), "--quiet"], cwd=d, env=TRAIN_ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    first = p.stdout.readline()
    p.stdout.close()   # what head -1 does
    _, err = p.communicate(timeout=120)
    err = err.decode(errors="replace")
    check(first.startswith(b"step"), f"first line is not a step line: {first!r}")
    check(p.returncode == 0, f"exit {p.returncode} (-13 is SIGPIPE): {err[-500:]}")
    s = load_summary(summary)
    with open(trace) as f:
        check(json.load(f)["traceEvents"], "empty timeline")
    # The workload's own step count: every step after the first is closed by the next one's start.
    check(len(s["steps"]) >= steps - 2, f"{len(s['steps'])} steps in the JSON, the job ran {steps}")
    n, end, size = complete_records(rec)
    check(end == size and n > 1000, f"recording: {n} records, {end} of {size} bytes")
    r = subprocess.run([DLBPF, "report", rec, "-j", os.path.join(d, "replay.json")], capture_output=True, text=True,
                       timeout=120)
    check(r.returncode == 0 and "cut short" not in r.stderr, f"report of it: {r.returncode}: {r.stderr[-300:]}")
    load_summary(os.path.join(d, "replay.json"))
    return f"{len(s['steps'])} steps, {n} records after stdout closed at the first line"


def set_sched_dur(data, nth, dur):
    """Sets dur_ns of the nth run-queue sched record (state 2) of a recording; returns its offset."""
    off = struct.unpack_from("<I", data, 8)[0]
    k = 0
    while off + 24 <= len(data):
        size, kind = struct.unpack_from("<HH", data, off)
        if kind == 3 and struct.unpack_from("<I", data, off + 32)[0] == 2:
            k += 1
            if k == nth:
                struct.pack_into("<Q", data, off + 24, dur)
                return off
        off += size
    raise Failure(f"fewer than {nth} run-queue records")


@fault("a corrupt recording: a sched record's duration is 2^63-1 ns (or 2^62), or random bytes flipped",
       "report -o x.pftrace finishes promptly: a record past the clock's range is counted malformed and left out")
def test_corrupt_durations():
    # The crafted durations are planted at a record's offset: verbatim. The mutants flip both encodings' bytes.
    d, rec = small_recording("corrupt-dur", encoding="verbatim")
    data = open(rec, "rb").read()
    _, compact_rec = small_recording("corrupt-dur-compact")
    compact = open(compact_rec, "rb").read()
    # Before the fix the first case spun in the timeline's counter bins for over 10 minutes: a 60 s
    # kill is a failure with a wide margin, and no assertion on time.
    for dur, malformed in ((2**63 - 1, True), (2**62, False)):
        bad = bytearray(data)
        set_sched_dur(bad, 5, dur)
        path = os.path.join(d, f"dur-{dur}.dlbpf")
        with open(path, "wb") as f:
            f.write(bad)
        try:
            p = subprocess.run([DLBPF, "report", path, "-o", os.path.join(d, "x.pftrace"), "-j",
                                os.path.join(d, "x.json")], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise Failure(f"dur {dur}: report still running after 60 s")
        check(p.returncode == 0, f"dur {dur}: exit {p.returncode}: {p.stderr[-300:]}")
        check(("1 malformed records ignored" in p.stderr) == malformed, f"dur {dur}: {p.stderr.strip()[-300:]}")
        check(os.path.getsize(os.path.join(d, "x.pftrace")) > 0, "no timeline")
        load_summary(os.path.join(d, "x.json"))
    # Random mutants: each reported (0) or refused (1) in time, never a hang or a crash.
    rng = random.Random(1234)
    mutants = 150
    for i in range(mutants):
        bad = bytearray(compact if i % 2 else data)
        hsize = struct.unpack_from("<I", bad, 8)[0]
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(hsize, len(bad))
            bad[at] = rng.randrange(256)
        path = os.path.join(d, "mutant.dlbpf")
        with open(path, "wb") as f:
            f.write(bad)
        try:
            # Bytes, not text: a flipped name is not UTF-8 (the text report's escaping is not this row's).
            p = subprocess.run([DLBPF, "report", path, "-o", os.path.join(d, "m.pftrace")], capture_output=True,
                               timeout=60)
        except subprocess.TimeoutExpired:
            os.rename(path, os.path.join(d, f"hang-{i}.dlbpf"))
            raise Failure(f"mutant {i} still running after 60 s (kept as hang-{i}.dlbpf)")
        check(p.returncode in (0, 1), f"mutant {i}: exit {p.returncode}: {p.stderr[-300:].decode(errors='replace')}")
    return f"2 crafted durations and {mutants} mutants (half of them compact), each finished"


def feed_endless(path, stop):
    """Writes a recording that never ends into the FIFO at path: a header, then sched records forever."""
    header = bytearray(200)
    header[:8] = b"DLBPFREC"
    struct.pack_into("<II", header, 8, 200, 1)
    chunk = bytearray()
    ts = 10**9
    try:
        with open(path, "wb") as f:
            f.write(header)
            while not stop.is_set():
                chunk.clear()
                for _ in range(1000):
                    # size, kind, cpu, ts, tgid, tid, dur, state, waker, next_state, pad
                    chunk += struct.pack("<HHIQIIQIIII", 48, 3, 0, ts, 7, 7, 1000, 1, 0, 2, 0)
                    ts += 1000
                f.write(chunk)
    except (BrokenPipeError, OSError):
        pass   # dlbpf stopped reading


@fault("SIGTERM (or Ctrl-C) during a long replay (a recording that never ends, through a FIFO)",
       "the replay stops between records: a report of what was read, a warning, exit 143")
def test_sigterm_during_replay():
    d = fresh_dir("sigterm-replay")
    fifo = os.path.join(d, "endless.dlbpf")
    os.mkfifo(fifo)
    stop = threading.Event()
    feeder = threading.Thread(target=feed_endless, args=(fifo, stop), daemon=True)
    feeder.start()
    summary = os.path.join(d, "s.json")
    p = subprocess.Popen([DLBPF, "report", fifo, "-j", summary], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        # Replaying: dlbpf has read its first MiB.
        read = 0
        while read < 1 << 20 and p.poll() is None:
            with open(f"/proc/{p.pid}/io") as f:
                read = int(next(l for l in f if l.startswith("rchar")).split()[1])
            time.sleep(0.01)
        check(p.poll() is None, f"the replay of an endless recording ended by itself: {p.returncode}")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise Failure("SIGTERM did not stop the replay in 30 s")
        latency = time.monotonic() - t0
    finally:
        stop.set()
        if p.poll() is None:
            p.kill()
            p.wait()
    err = err.decode(errors="replace")
    check(p.returncode == 128 + signal.SIGTERM, f"exit {p.returncode}: {err[-300:]}")
    check("stopped by signal 15" in err, f"no warning: {err.strip()[-300:]}")
    s = load_summary(summary)
    check(s["processes"] and s["processes"][0]["pid"] == 7, "no report of the records read")
    return f"stopped {latency * 1e3:.0f} ms after SIGTERM, having read {read >> 20} MiB"


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
    (["--keep-steps", "-1"], "'-1'"), (["--keep-steps", "many"], "'many'"),
    (["--keep-steps", "2000000000"], "'2000000000'"),
    (["--duty", "2/1"], "'2/1'"), (["--duty", "0/4"], "'0/4'"), (["--duty", "1"], "'1'"),
    (["--duty", "a/b"], "'a/b'"), (["--duty", "1/0"], "'1/0'"), (["--duty", "+1/2"], "'+1/2'"),
    (["--duty", "1/ 2"], "'1/ 2'"),
    (["--overhead-budget", "0"], "'0'"), (["--overhead-budget", "-1%"], "'-1%'"),
    (["--overhead-budget", "101"], "'101'"), (["--overhead-budget", "lots"], "'lots'"),
    (["--overhead-budget", "1e0"], "'1e0'"), (["--overhead-budget", "nan"], "'nan'"),
    (["--ready-fd", "2"], "'2'"), (["--ready-fd", "abc"], "'abc'"), (["--ready-fd", "99"], "--ready-fd 99"),
    (["--encoding", "zstd"], "'zstd'"), (["--encoding", ""], "''"),
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
        (["report", "a.dlbpf", "b.dlbpf", "--html", "r.html"], "--html reports one recording"),
        (["report", "a.dlbpf", "--pid", "1"], "do not apply"),
        (["report", "a.dlbpf", "-d", "1"], "do not apply"),
        (["report", "a.dlbpf", "--summary"], "do not apply"),
        (["report", "a.dlbpf", "--duty", "1/2"], "do not apply"),
        (["report", "a.dlbpf", "--overhead-budget", "1%"], "do not apply"),
        (["record", "-o", os.path.join(WORK, "x.dlbpf"), "--overhead-budget", "1%", "--pid", NO_PID],
         "--overhead-budget probes launches part of the time"),
        (["--overhead-budget", "1%", "--duty", "1/2", "--pid", NO_PID], "both turn the launch probes"),
        (["--overhead-budget", "1%", "--metrics", "9464", "--pid", NO_PID], "--overhead-budget sees launches"),
        (["report", "a.dlbpf", "--encoding", "verbatim"], "applies to record"),
        (["--encoding", "compact", "--pid", NO_PID], "applies to record only"),
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


@fault("the collector sleeps 1 s drain intervals while the job makes 200,000 CUDA calls a second into an 8 MiB ring buffer",
       "the quarter-full wake-up drains it in time: no record dropped, every call received")
def test_ringbuf_burst_wakes_collector():
    # 400,000 records of ~128 bytes at 200,000 a second: each 1 s interval brings 25.6 MB, three buffers'
    # worth, so a collector that slept its intervals through would drop most of them. Woken at a quarter
    # (16 k records), it has the other three quarters, ~48 k calls or ~240 ms, to start draining, and then
    # needs to read only 200 k records a second (a collector under AddressSanitizer could not keep up with
    # an unpaced loop's ~900 k).
    calls, rate = 400_000, 200_000
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR, GPUSIM_LAUNCH_US="0")
    w, out, d, rc = trace_waiting([workload("ratecalls"), "--wait", "--count", str(calls), "--rate", str(rate)],
                                  ["--ringbuf-mb", "8", "--drain-ms", "1000"], timeout=120, workload_env=env)
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-300:]}")
    truth = truth_line(out, "{\"api\"")
    check(truth["calls"] == calls, f"ratecalls made {truth['calls']} calls")
    burst_s = truth["seconds"]
    s = d.summary()
    got = process(s, w.pid)["cuda"]["calls"].get("cudaLaunchKernel", {}).get("count", 0)
    lost = s["drops"]["cuda"]
    check(lost == 0 and got == calls, f"received {got}, dropped {lost} of {calls} calls made in {burst_s:.2f} s")
    return f"{got} of {calls} calls received, none dropped, in a {burst_s:.2f} s burst"


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


@fault("a kernel older than block_io_start (5.x): block_rq_insert/issue instead (forced: DLBPF_FORCE_TWINS=old)",
       "disk reads still equal /proc/PID/io read_bytes")
def test_old_twins_block_io():
    def older_programs(d):
        tps = bpf_objects(d.proc.pid)[0]
        check({"block_rq_insert", "block_rq_issue", "block_rq_complete"} <= tps and "block_io_start" not in tps,
              f"not the older programs: {sorted(tps)}")

    w, out, d, rc = trace_waiting([workload("ioread"), make_data_file(), "--wait"], env=TWINS,
                                  attached=older_programs)
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
    stolen = stolen_ns()
    d = Dlbpf(["--", workload("spinsleep"), "--seconds", "2", "--spin-ms", "4", "--sleep-ms", "3"], env=TWINS)
    d.started()
    ro = rodata_of(d.proc.pid)
    check(ro.get("switch_has_prev_state") is False and ro.get("exit_has_group_dead") is False,
          f"loaded with {ro}")
    rc = d.wait()
    stolen = stolen_ns() - stolen
    check(rc == 0, f"dlbpf exited {rc}: {d.stderr[-300:]}")
    truth = json.loads(d.stdout.strip().splitlines()[0])
    p = process(d.summary(), truth["pid"])
    # As test_dlbpf's test_sched_uncontended (2%, and what the hypervisor stole): the same switches, only
    # their state read differently.
    err = check_oncpu(p, truth, stolen)
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
    w, out, d, rc = trace_waiting([workload("fanout"), "--children", "4", "--hold"],
                                  env=dict(os.environ, DLBPF_TEST_MAP_ENTRIES="traced=2"))
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
    w, out, d, rc = trace_waiting([workload("ioread"), make_data_file(), "--wait"],
                                  env=dict(os.environ, DLBPF_TEST_MAP_ENTRIES="requests=1"))
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


@fault("a corrupt recording given to `dlbpf report` (each input fuzz_replay once crashed or hung on)",
       "a report or a clear error, exit 0 or 1, with both timeline formats: never a signal or a hang")
def test_fuzzed_recordings():
    """The regression inputs of tests/fuzz/seeds/replay, replayed by the release build with every output."""
    import os
    import subprocess
    from harness import ROOT, WORK
    seeds = os.path.join(ROOT, "tests", "fuzz", "seeds", "replay")
    names = sorted(os.listdir(seeds))
    check(names, f"no inputs in {seeds}")
    for name in names:
        for fmt in ("pftrace", "json"):
            out = os.path.join(WORK, f"fuzzed-{name}")
            args = ["report", os.path.join(seeds, name), "-o", f"{out}.{fmt}", "--json", f"{out}-summary.json"]
            # Each input is a few KB and replays in about 10 ms: 1000 times that is a loop that does not end
            # (the counter far jump took 20 s to 40 s here before its fix).
            try:
                rc, _, err = run_dlbpf(args, timeout=10)
            except subprocess.TimeoutExpired:
                check(False, f"{name} (-o .{fmt}): still replaying after 10 s")
            check(rc in (0, 1), f"{name} (-o .{fmt}): exit {rc}: {err.strip()[-300:]}")
            check(rc == 0 or "dlbpf: error:" in err, f"{name} (-o .{fmt}): exit 1 without an error: {err.strip()[-300:]}")
            if rc == 0:
                load_summary(f"{out}-summary.json")
    return f"{len(names)} inputs, both formats"



# --- a full disk under one output: the others are still written -------------
import errno  # noqa: E402


class SmallTmpfs:
    """A 1 MiB tmpfs of the test's own, mounted on a fresh directory and unmounted after."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="full-", dir=WORK)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "none", self.path], capture_output=True, text=True)
        if p.returncode:
            os.rmdir(self.path)
        check(p.returncode == 0, f"cannot mount a tmpfs: {p.stderr.strip()}")
        return self

    def fill(self):
        """Writes a file until the file system refuses a byte more (ENOSPC)."""
        with open(os.path.join(self.path, "filler"), "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError as e:
                check(e.errno == errno.ENOSPC, f"filling the tmpfs: {e}")

    def __exit__(self, *exc):
        subprocess.run(["umount", self.path], check=False)
        os.rmdir(self.path)


def truth_kernels(path):
    """The kernels the train workload launched, from its own per-step truth file."""
    with open(path) as f:
        return sum(r["kernels"] for r in map(json.loads, filter(str.strip, f)) if "step" in r)


def train_launches(summary):
    procs = [p for p in summary["processes"] if p["comm"] == "train" and p["cuda"]["calls"]]
    check(len(procs) == 1, f"{len(procs)} train processes with CUDA calls")
    return procs[0]["cuda"]["calls"].get("cudaLaunchKernel", {}).get("count", 0)


@fault("the recording's disk fills up (`record -o FULL/r.dlbpf -j OK/s.json --html OK/r.html`)",
       "the report, JSON and HTML still written; the failure said with path and cause; exit 1; the recording "
       "readable to where it stops")
def test_full_disk_recording():
    ok = tempfile.mkdtemp(prefix="full-ok-", dir=WORK)
    truth, js, html = (os.path.join(ok, n) for n in ("truth.jsonl", "s.json", "r.html"))
    with SmallTmpfs() as full:
        rec = os.path.join(full.path, "r.dlbpf")
        # About 300 k launch records (some 7 MiB compact): the 1 MiB tmpfs fills a few seconds in.
        p = subprocess.run([DLBPF, "record", "-q", "-o", rec, "-j", js, "--html", html, "--", workload("train"),
                            "--scenario", "launch", "--steps", "60", "--quiet", "--truth", truth],
                           capture_output=True, text=True, timeout=180, env=dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR))
        check(p.returncode == 1, f"exit {p.returncode} with the recording's disk full: {p.stderr[-500:]}")
        said = f"writing the recording {rec} failed: {os.strerror(errno.ENOSPC)}"
        check(said in p.stderr, f"the failure is not said as '{said}': {p.stderr[-500:]}")
        check("Diagnosis:" in p.stdout and "traced" in p.stdout, f"no report on stdout: {p.stdout[-300:]!r}")
        launched, kernels = train_launches(load_summary(js)), truth_kernels(truth)
        check(launched == kernels, f"the JSON counts {launched} launches, the job made {kernels}")
        with open(html) as f:
            check("</html>" in f.read(), "the HTML report is not complete")
        # What was written before the disk filled is a recording report reads, up to where it stops.
        rc, _, err = run_dlbpf(["report", rec, "-j", os.path.join(ok, "replay.json")], timeout=120)
        # The disk fills at a page boundary of the file; a record (5-19 bytes compact) straddles it
        # most of the time, and then the reader says where it stopped. About one run in ten the
        # boundary falls between two records: the file is then a whole, shorter recording (it has no
        # trailer to miss), and only the count below can tell.
        check(rc == 0, f"report of the cut recording: exit {rc}: {err[-300:]}")
        torn = "records before it are reported" in err
        replayed = train_launches(load_summary(os.path.join(ok, "replay.json")))
        check(0 < replayed < kernels, f"the cut recording holds {replayed} of {kernels} launches")
    shutil.rmtree(ok)
    return (f"JSON {launched} launches = the job's; the 1 MiB recording replays {replayed}"
            f" ({'cut inside a record, said' if torn else 'cut between two records'})")


@fault("the flight recorder's directory is on a full disk when SIGUSR1 asks for a dump",
       "the failed dump said with its path and cause, no temporary left, the JSON written, exit 1")
def test_full_disk_flight_dump():
    with SmallTmpfs() as full:
        dumps = os.path.join(full.path, "dumps")
        os.mkdir(dumps, 0o700)
        full.fill()
        # 100 steps of about 24 ms: the job runs seconds past the signal (a dump still pending when it ends
        # is written at the finish; one asked after the last drain would not be).
        d = Dlbpf(["record", "--ring", "2", "-o", dumps, "--", workload("train"), "--scenario", "launch",
                   "--steps", "100", "--quiet"], env=dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR))
        d.started()
        d.proc.send_signal(signal.SIGUSR1)
        rc = d.wait(timeout=120)
        left = os.listdir(dumps)
    check(rc == 1, f"exit {rc} with every dump failed: {d.stderr[-500:]}")
    said = f"writing the flight recording {dumps}/flight-"
    failed = [ln for ln in d.stderr.splitlines() if said in ln]
    check(len(failed) == 1 and os.strerror(errno.ENOSPC) in failed[0], f"the failed dump is not said with its "
          f"path and cause: {d.stderr[-500:]}")
    check("1 of 1 dumps failed" in d.stderr, f"the end does not count the failed dump: {d.stderr[-300:]}")
    check(not left, f"left in the full directory: {left}")
    check(train_launches(d.summary()) > 0, "the JSON holds no launch")
    return failed[0].split("dlbpf: error: ")[-1]



# --- mapped files read as the process has them (/proc/PID/map_files, dlbpf as root) ----------------
@fault("a process maps libcudart.so.13, then mounts a FIFO over that path; dlbpf runs as root",
       "the mapped runtime itself read and probed through /proc/PID/map_files, the FIFO never opened: every call "
       "traced")
def test_fifo_over_mapped_runtime_map_files():
    return calls_through("fifo", os.environ)


@fault("in a container, the mapped runtime's path is now a symlink to a file only the host has; dlbpf runs as root",
       "the container's own mapped runtime probed (not the host's file): every call traced")
def test_container_symlink_to_host_file_map_files():
    return calls_through("hostlink", os.environ, os.path.join(GPUSIM_DIR, "libcudart.so.13"))



# --- leftovers of a killed run -------------------------------------------------
import glob  # noqa: E402


@fault("dlbpf is killed (SIGKILL) while it writes -j, --html and -o; the next run names the same files",
       "the next run removes each leftover temporary and says so; its own outputs are complete, none left")
def test_killed_run_leftovers_removed():
    d_out = tempfile.mkdtemp(prefix="leftovers-", dir=WORK)
    outs = [os.path.join(d_out, n) for n in ("s.json", "r.html", "t.json")]
    args = ["-q", "-j", outs[0], "--html", outs[1], "-o", outs[2], "--"]
    temps = os.path.join(d_out, ".*.??????")
    p = subprocess.Popen([DLBPF] + args + ["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + HANG_S
        while len(glob.glob(temps)) < 3 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        left = sorted(glob.glob(temps))
        check(len(left) == 3, f"{len(left)} temporaries while dlbpf runs: {left}")
    finally:
        job = children_of(p.pid)   # the sleep: it would run on, untraced, once dlbpf is gone
        p.kill()
        p.wait()
        for pid in job:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    check(sorted(glob.glob(temps)) == left, f"SIGKILL did not leave the temporaries: {glob.glob(temps)}")
    rc, _, err = run_bounded(args + ["true"])
    check(rc == 0, f"the next run exited {rc}: {err[-500:]}")
    for t in left:
        said = [ln for ln in err.splitlines() if f"removed {t} (" in ln]
        check(len(said) == 1 and "killed before it ended" in said[0], f"{t}: not said once: {err[-600:]}")
    check(not glob.glob(temps), f"temporaries left after the next run: {glob.glob(temps)}")
    load_summary(outs[0])
    with open(outs[1]) as f:
        check("</html>" in f.read(), "the HTML report is not complete")
    with open(outs[2]) as f:
        json.load(f)
    shutil.rmtree(d_out)
    return f"{len(left)} leftovers removed and said"



@fault("--pid names a kernel thread (kthreadd, pid 2)",
       "said to be a kernel thread (not 'no CUDA runtime mapped yet'), exit 1, nothing traced")
def test_pid_of_kernel_thread():
    with open("/proc/2/comm") as f:
        comm = f.read().strip()
    if comm != "kthreadd":
        raise Skipped(f"pid 2 is {comm!r} here (a pid namespace of its own?), not kthreadd")
    rc, _, err = run_bounded(["-v", "--pid", "2", "-d", "1"])
    check(rc == 1, f"exit {rc}: {err[-300:]}")
    check("pid 2 (kthreadd) is a kernel thread" in err and "no CUDA runtime mapped yet" not in err
          and "tracing" not in err, f"not said as a kernel thread: {err.strip()[-300:]}")
    return err.strip().splitlines()[-1]


if __name__ == "__main__":
    main()
