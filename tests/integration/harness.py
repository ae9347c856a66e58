# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Shared pieces of the integration tests: running dlbpf, waiting for it to
attach, the checks, and the closing "N passed, N failed" line."""
import inspect
import json
import os
import subprocess
import sys
import threading
import time
import traceback

from summary_schema import SCHEMA_PATH, violations

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, ".output")
# make test-asan points this at a build under AddressSanitizer and UndefinedBehaviorSanitizer.
DLBPF = os.environ.get("DLBPF_BIN") or os.path.join(ROOT, "dlbpf")
SANITIZED = bool(os.environ.get("DLBPF_BIN"))
# DLBPF_TEST_WORK: where tests write (tools/vm points it at a real disk: the guest root is tmpfs).
WORK = os.environ.get("DLBPF_TEST_WORK") or os.path.join(OUT, "itest")
GPUSIM_DIR = os.path.join(OUT, "gpusim")
# The simulator's waits spin by default, as the real runtime's do (cudaDeviceScheduleAuto). Suites
# whose subject is not how a host waits run the workloads with sleeping waits, which keep the 2-CPU
# test machines free for the tracer; test_scenarios runs every scenario both ways (SCHEDULES there).
os.environ.setdefault("GPUSIM_SCHEDULE", "blocking")

os.makedirs(WORK, exist_ok=True)


def workload(name):
    return os.path.join(OUT, "workloads", name)


# Debian's python3, the one its python3-torch and python3-numpy are installed for; the real PyTorch job.
DEBIAN_PYTHON = "/usr/bin/python3"
TORCHJOB = os.path.join(ROOT, "tests", "workloads", "torchjob.py")


def torch_ready(data=None, shards=2, shard_mb=2, cpu_only=False):
    """Skips unless Debian's torch and numpy import (tools/setup-deps.sh installs them); with cpu_only,
    checks the build has no CUDA (a job without CUDA is the truth then). With data, makes torchjob.py's
    data set there: --make-data keeps the shards it finds whole, so a second call only checks sizes."""
    if not os.path.exists(DEBIAN_PYTHON):
        raise Skipped(f"no {DEBIAN_PYTHON}")
    p = subprocess.run([DEBIAN_PYTHON, "-c", "import numpy, torch; print(torch.version.cuda)"], capture_output=True,
                       text=True)
    if p.returncode:
        raise Skipped("python3-torch or python3-numpy is not installed (tools/setup-deps.sh installs them)")
    if cpu_only:
        check(p.stdout.strip() == "None", f"this torch was built with CUDA {p.stdout.strip()}: no job without CUDA")
    if data:
        subprocess.run([DEBIAN_PYTHON, TORCHJOB, "--make-data", data, "--shards", str(shards), "--shard-mb",
                        str(shard_mb)], check=True, capture_output=True)


class Failure(Exception):
    pass


class Skipped(Exception):
    """A measurement this run cannot make (said why); counted apart, neither passed nor failed."""


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def check_close(value, truth, rel, what):
    check(truth > 0, f"{what}: truth is {truth}")
    err = abs(value - truth) / truth
    check(err <= rel, f"{what}: dlbpf {value} vs truth {truth} ({err * 100:.2f}% off, allowed {rel * 100:.1f}%)")
    return err


summaries_checked = 0   # JSON summaries that followed the schema, for main()'s closing lines


def check_summary(doc, what="the JSON summary"):
    """Fails unless doc follows include/dlbpf/summary.schema.json; returns doc."""
    global summaries_checked
    try:
        bad = violations(doc)
    except RuntimeError as e:
        raise Failure(str(e))
    check(not bad, f"{what} breaks {os.path.relpath(SCHEMA_PATH, ROOT)}: " +
          "; ".join(b[:300] for b in bad[:5]) + (f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""))
    summaries_checked += 1
    return doc


# What a terminal acts on or hides instead of showing, besides C0 and C1 (bidi controls, separators).
INVISIBLE = {0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


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


def load_summary(path):
    """The JSON summary dlbpf wrote at path (--json), checked against the schema."""
    with open(path) as f:
        return check_summary(json.load(f), os.path.basename(path))


class Dlbpf:
    """dlbpf running in the background; started() returns once it traces (--ready-fd)."""

    instances = []   # every one started, so that main() can stop those a test left running

    def __init__(self, args, env=None, stdin=None):
        self.json_path = os.path.join(WORK, f"summary-{os.getpid()}-{time.monotonic_ns()}.json")
        ready_r, ready_w = os.pipe()
        cmd = [DLBPF, "-v", "-q", "--ready-fd", str(ready_w), "--json", self.json_path] + args
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                         env=env, text=True, errors="surrogateescape", pass_fds=(ready_w,))
        finally:
            os.close(ready_w)   # only dlbpf holds it: end of file once dlbpf wrote it or died
        self.stderr_lines = []
        self.stdout = ""
        self._out_chunks = []
        self._ready = None
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out = threading.Thread(target=lambda: self._out_chunks.append(self.proc.stdout.read()), daemon=True)
        self._ready_reader = threading.Thread(target=self._read_ready, args=(ready_r,), daemon=True)
        self._err.start()
        self._out.start()
        self._ready_reader.start()
        Dlbpf.instances.append(self)

    @classmethod
    def kill_leftovers(cls):
        """Kills the instances still running (a test that failed midway leaves them); how many."""
        left = [d for d in cls.instances if d.proc.poll() is None]
        for d in left:
            d.proc.kill()
            d.proc.wait()
        cls.instances = []
        return len(left)

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)   # read while dlbpf runs (test_coverage's wait_attached)

    def _read_ready(self, fd):
        with os.fdopen(fd, "rb") as f:
            self._ready = f.read()

    def started(self, timeout=20):
        self._ready_reader.join(timeout)
        if self._ready_reader.is_alive():
            # Stopped, not left behind: a dlbpf that outlives its test (one --system-wide ran on
            # for half an hour) traces every later test's workload and other sessions' jobs.
            self.proc.kill()
            self.proc.wait()
            raise Failure("dlbpf did not start tracing in time: " + "".join(self.stderr_lines[-10:]))
        if self._ready != b"ready\n":
            try:
                self.proc.wait(5)   # closed without a word: dlbpf is ending, its stderr says why
            except subprocess.TimeoutExpired:
                pass
            self._err.join(1)
            raise Failure(f"dlbpf did not start tracing (ready fd: {self._ready!r}, exit {self.proc.poll()}): "
                          + "".join(self.stderr_lines[-10:]))

    def wait(self, timeout=60):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait()
            raise Failure("dlbpf did not stop in time")
        finally:
            self._out.join(10)
            self._err.join(10)
            self.stdout = "".join(self._out_chunks)
        return self.proc.returncode

    def stop(self, timeout=30):
        self.proc.terminate()
        return self.wait(timeout)

    def stderr_open(self):
        """True while someone (dlbpf, or a child that shares its stderr) still holds dlbpf's stderr."""
        return self._err.is_alive()

    @property
    def stderr(self):
        return "".join(self.stderr_lines)

    def summary(self):
        return load_summary(self.json_path)


def truth_line(stdout, prefix="{", last=False):
    """The JSON line a workload printed about what it did (the first, or last, starting with prefix)."""
    lines = stdout.splitlines()
    for line in (reversed(lines) if last else lines):
        if line.startswith(prefix):
            return json.loads(line)
    raise Failure("workload printed no truth line: " + stdout[-500:])


def check_copies_and_calls(cuda, truth):
    """Copies by direction (count, bytes) and calls per API equal the workload's own counts."""
    check(cuda["found"], "CUDA runtime not found")
    for d in ("h2d", "d2h"):
        got = cuda["memcpy"][d]
        check(got["count"] == truth[d]["count"], f"{d} count {got['count']} != {truth[d]['count']}")
        check(got["bytes"] == truth[d]["bytes"], f"{d} bytes {got['bytes']} != {truth[d]['bytes']}")
    for api, n in truth["calls"].items():
        got = cuda["calls"].get(api, {}).get("count", 0)
        check(got == n, f"{api}: {got} calls, workload made {n}")


def stolen_ns():
    """Time the hypervisor took from all CPUs so far (/proc/stat's steal column, in USER_HZ ticks)."""
    with open("/proc/stat") as f:
        ticks = int(f.readline().split()[8])
    return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def check_oncpu(p, truth, stolen):
    """dlbpf's on-CPU time (switch to switch) against schedstat's, within 2%. schedstat runs on the
    task clock, which leaves out what the hypervisor stole while the task ran (paravirt steal
    accounting); dlbpf cannot see steal, so above schedstat it may also be off by the steal of the run,
    as /proc/stat counts it, plus one tick of that counter's resolution at each of the two reads."""
    got, want = p["sched"]["oncpu_ns"], truth["oncpu_ns"]
    tick = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    err = (got - want) / want
    excess = max(0, got - want - 0.02 * want)
    check(err >= -0.02 and excess <= stolen + 2 * tick,
          f"on-CPU: dlbpf {got} vs schedstat {want} ({err * 100:.2f}% off, allowed 2% and above that "
          f"the {stolen} ns stolen)")
    return err


def bystanders(summary):
    """The processes reports fold (analysis/summary.h, dl_proc_bystander), read off the JSON: a traced parent,
    no CUDA call, no disk request, and under 1% of a CPU over the trace."""
    pids = {p["pid"] for p in summary["processes"]}
    return [p for p in summary["processes"]
            if p["ppid"] in pids and not any(c["count"] for c in p["cuda"]["calls"].values())
            and p["io"]["read_ops"] + p["io"]["write_ops"] == 0
            and p["sched"]["oncpu_ns"] * 100 < summary["duration_ns"]]


def process(summary, pid):
    for p in summary["processes"]:
        if p["pid"] == pid:
            return p
    raise Failure(f"pid {pid} not in the summary (has {[p['pid'] for p in summary['processes']]})")


def make_data_file(mb=24):
    """A file of random bytes for ioread, on disk (fsync'd); ioread drops it from the page cache."""
    path = os.path.join(WORK, "ioread.dat")
    if not os.path.exists(path) or os.path.getsize(path) != mb << 20:
        with open(path, "wb") as f:
            f.write(os.urandom(mb << 20))
            f.flush()
            os.fsync(f.fileno())
    return path


def trace_waiting(argv, dlbpf_args=(), timeout=60, env=None, attached=None, workload_env=None):
    """Starts a workload that prints "ready" and waits for a line (with workload_env), attaches dlbpf --pid
    to it (with env), calls attached(dlbpf) if given, lets the workload go, and waits for both. Returns
    (workload, its stdout, the finished Dlbpf, dlbpf's rc)."""
    w = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=workload_env)
    try:
        check(w.stdout.readline().strip() == "ready", f"{argv[0]} did not start")
        d = Dlbpf(list(dlbpf_args) + ["--pid", str(w.pid)], env=env)
        d.started()
        if attached is not None:
            attached(d)
        w.stdin.write("go\n")
        w.stdin.flush()
        out, _ = w.communicate(timeout=timeout)
        rc = d.wait()
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    return w, out, d, rc


def run_dlbpf(args, timeout=60, env=None):
    """Runs dlbpf to completion; returns (returncode, stdout, stderr)."""
    p = subprocess.run([DLBPF] + args, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL, env=env)
    return p.returncode, p.stdout, p.stderr


def collect(namespace):
    """The test_* functions of a module's namespace, in the order they were defined (or added)."""
    return [f for name, f in namespace.items()
            if name.startswith("test_") and inspect.isfunction(f) and f.__module__ == namespace["__name__"]]


def main():
    """Runs every test_* function of the script that called it, or those named on the command line."""
    if os.geteuid() != 0:
        print("integration tests need root (they load BPF programs)", file=sys.stderr)
        print("0 passed, 1 failed")
        sys.exit(1)
    tests = collect(vars(sys.modules["__main__"]))
    only = sys.argv[1:]
    passed = failed = skipped = 0
    for name in only:
        if name not in [t.__name__ for t in tests]:
            failed += 1
            print(f"FAIL {name}: no such test", flush=True)
    for t in tests:
        if only and t.__name__ not in only:
            continue
        start = time.monotonic()
        try:
            note = t()
            ok = True
        except Skipped as e:
            skipped += 1
            print(f"SKIP {t.__name__}: {e}", flush=True)
            Dlbpf.kill_leftovers()
            continue
        except Failure as e:
            ok = False
            print(f"FAIL {t.__name__}: {e}", flush=True)
        except Exception:
            ok = False
            print(f"FAIL {t.__name__}: exception", flush=True)
            traceback.print_exc()
        # A dlbpf outliving its test would trace the next tests' workloads (and other sessions').
        left = Dlbpf.kill_leftovers()
        if ok and left:
            ok = False
            print(f"FAIL {t.__name__}: left {left} dlbpf running (killed)", flush=True)
        elif left:
            print(f"     {t.__name__}: {left} dlbpf left running, killed", flush=True)
        if ok:
            passed += 1
            print(f"PASS {t.__name__} ({time.monotonic() - start:.1f}s){': ' + note if note else ''}", flush=True)
        else:
            failed += 1
    print(f"{summaries_checked} JSON summaries followed {os.path.relpath(SCHEMA_PATH, ROOT)}")
    if skipped:
        print(f"{skipped} skipped")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
