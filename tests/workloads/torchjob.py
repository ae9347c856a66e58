#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A real PyTorch training job on the CPU (Debian's python3-torch): a Dataset over files, a
DataLoader with worker processes, a small model, SGD. It logs its own truth, which the tests
hold dlbpf's report against.

  torchjob.py --make-data DIR [--shards N] [--shard-mb M]
  torchjob.py --data DIR --truth FILE [--shape SHAPE] [--workers N] [--start METHOD]
              [--persistent] [--prefetch K] [--threads] [--steps S] [--batch B] [--decode-ms MS]
              [--record-kb KB] [--width W] [--layers L] [--cold] [--url URL]

Shapes (what limits a step):
  decode    workers read a record and decode it on the CPU (--decode-ms a sample)
  compute   a light loader and a heavy model (--width, --layers)
  disk      small random reads (--record-kb) from shards made cold first (--cold is implied)
  iterable  an IterableDataset: each worker streams its own shards, decoding each record
  memmap    a numpy memmap over each shard: records read by page faults, then decoded
  http      each record a range request of an object (--url) over a keep-alive connection of the
            loader's process, as a streaming data set reads an object store; then decoded

--threads: instead of the DataLoader's worker processes, a thread pool of --workers threads in
this process makes whole batches and puts them on a queue.Queue (--prefetch batches a thread
ahead); the loop takes them from the queue (map-style shapes only).
--relay: a thread of this process takes the DataLoader's batches from its workers and hands each
on through a queue.Queue, as torch's pin-memory thread does (which pins only where CUDA is).

The truth (--truth FILE, JSON, written when the job ends):
  main:    pid, tid; per step the monotonic clock (ns) around next() and around train_step(), and
           at train_step()'s first line (enter), the main thread's CPU ns in each phase of the step
           (step_cpu_ns) and what its schedstat counted around next() (next_sched: on-CPU ns,
           runqueue ns, times switched in);
           the main thread's /proc/thread-self/schedstat at the first and last step
           (on-CPU ns, runqueue ns); /proc/self/io at the end
  workers: per worker process: per sample the thread that made it, the file, offset, bytes,
           its read time, the CPU and runqueue time inside it (so the rest is blocked: in D for a
           read from the disk), its decode CPU time (the thread's own clock) and wall time; per batch
           the indexes and the clock at its first sample and after collation; the worker's
           /proc/self/io and its main thread's schedstat after each sample (the last is its total),
           and before it (oncpu0_ns, runq0_ns, read at t0; t2 is the clock after it)
  lines:   the source lines of the next() the loop waits at, of the read and of the decode, and of
           each phase of the step (zero_grad, forward, backward, optimizer)
It never waits for a tracer: it starts at once and exits when its steps are done.
"""
import argparse
import itertools
import json
import os
import queue
import random
import socket
import sys
import threading
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info
from torch.utils.data._utils.collate import default_collate
from concurrent.futures import ThreadPoolExecutor

MONO = time.CLOCK_MONOTONIC


def now():
    return time.clock_gettime_ns(MONO)


def line_of(tag):
    """The line of this file that ends with the comment `# TAG`: what a tracer's Python frame names."""
    with open(os.path.abspath(__file__), encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith("# " + tag):
                return n
    raise SystemExit("torchjob.py: no line tagged " + tag)


def schedstat():
    """The calling thread's on-CPU and runqueue ns, as the kernel counts them."""
    with open("/proc/thread-self/schedstat") as f:
        run, wait, _ = f.read().split()
    return int(run), int(wait)


def schedstat_all():
    """The calling thread's on-CPU ns, runqueue ns and times it was switched in, as the kernel counts them."""
    with open("/proc/thread-self/schedstat") as f:
        return [int(v) for v in f.read().split()]


def proc_io():
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}


class Log:
    """A worker's truth: one JSON line per sample and per batch, appended by that worker only."""

    def __init__(self, folder):
        self.folder = folder
        self.f = None

    def write(self, rec):
        if self.f is None:
            self.f = open(os.path.join(self.folder, "w-%d.jsonl" % os.getpid()), "a", buffering=1)
        rec["pid"] = os.getpid()
        rec["tid"] = threading.get_native_id()
        self.f.write(json.dumps(rec) + "\n")


def decode(raw, cpu_ns):
    """Turns a record into a tensor and spends cpu_ns of this thread's CPU on it (tensor ops)."""
    x = torch.frombuffer(bytearray(raw), dtype=torch.uint8)[:4096].float()
    t0 = time.thread_time_ns()
    while time.thread_time_ns() - t0 < cpu_ns:
        x = torch.tanh(x * 1.0001 + 0.5)  # DECODE
    return x


class HttpRanges:
    """A keep-alive HTTP/1.1 connection of this process to an object server (--url): each record a range
    request of the object, the way a streaming data set reads its shards from an object store. It counts
    what its receive calls brought (headers included) and how many it made."""

    def __init__(self, url):
        rest = url.split("://", 1)[-1]
        hostport, self.path = rest.split("/", 1)
        host, port = hostport.rsplit(":", 1)
        host = host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.endpoint = "tcp %s:%s" % ("[%s]" % host if family == socket.AF_INET6 else host, port)
        self.pid = os.getpid()
        self.bytes = self.recvs = 0

    def recv(self):
        b = self.sock.recv(1 << 16)
        self.recvs += 1
        self.bytes += len(b)
        if not b:
            raise SystemExit("torchjob.py: the object server closed the connection")
        return b

    def get(self, first, n):
        self.sock.sendall(("GET /%s HTTP/1.1\r\nHost: x\r\nRange: bytes=%d-%d\r\n\r\n"
                           % (self.path, first, first + n - 1)).encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.recv()
        head, body = data.split(b"\r\n\r\n", 1)
        length = next(int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")[1:] if l.lower().startswith(b"content-length:"))
        parts = [body]
        got = len(body)
        while got < length:
            b = self.recv()
            parts.append(b)
            got += len(b)
        return b"".join(parts)


class Records:
    """What every shape shares: where each sample's record lies, and how it is read and decoded."""

    def __init__(self, args):
        self.args = args
        self.shards = sorted(os.path.join(args.data, n) for n in os.listdir(args.data) if n.startswith("shard-"))
        if not self.shards:
            raise SystemExit("torchjob.py: no shard-* files in %s (make them with --make-data)" % args.data)
        self.shard_bytes = os.path.getsize(self.shards[0])
        self.record = args.record_kb * 1024
        self.log = Log(args.truth_dir)
        self.fds = {}
        self.maps = {}
        self.http = None

    def where(self, index):
        rnd = random.Random(index * 7919 + self.args.seed)
        shard = self.shards[rnd.randrange(len(self.shards))]
        off = rnd.randrange(0, self.shard_bytes - self.record) // 4096 * 4096
        return shard, off

    def read(self, shard, off):
        if self.args.shape == "http":
            if self.http is None or self.http.pid != os.getpid():
                self.http = HttpRanges(self.args.url)   # a worker's own connection, made after its fork
            return self.http.get(off, self.record)  # READ-HTTP
        if self.args.shape == "memmap":
            mm = self.maps.get(shard)
            if mm is None:
                mm = self.maps[shard] = np.memmap(shard, dtype=np.uint8, mode="r")
            return np.array(mm[off:off + self.record]).tobytes()  # READ-FAULTS
        fd = self.fds.get(shard)
        if fd is None:
            fd = self.fds[shard] = os.open(shard, os.O_RDONLY)
            if self.args.shape == "disk":  # small random records: readahead would only waste the disk
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        return os.pread(fd, self.record, off)  # READ

    def sample(self, index):
        shard, off = self.where(index)
        r0, q0 = schedstat()
        t0 = now()
        c0 = time.thread_time_ns()
        n0 = (self.http.bytes, self.http.recvs) if self.http and self.http.pid == os.getpid() else (0, 0)
        raw = self.read(shard, off)
        t1 = now()
        c1 = time.thread_time_ns()
        q1 = schedstat()[1]
        if self.http:
            # An object's record: its "file" is the server's endpoint, as a tracer names it; what the
            # receives brought (headers included) and how many.
            shard, net = self.http.endpoint, {"net_bytes": self.http.bytes - n0[0], "net_recvs": self.http.recvs - n0[1]}
        else:
            net = {}
        x = decode(raw, int(self.args.decode_ms * 1e6))
        t2 = now()
        c2 = time.thread_time_ns()
        run, wait = schedstat()
        self.log.write({"sample": index, "file": shard, "offset": off, "bytes": len(raw), "t0": t0,
                        "read_ns": t1 - t0, "read_cpu_ns": c1 - c0, "read_runq_ns": q1 - q0, "decode_ns": t2 - t1,
                        "decode_cpu_ns": c2 - c1, "io": proc_io(), "oncpu_ns": run, "runq_ns": wait,
                        "oncpu0_ns": r0, "runq0_ns": q0, "t2": t2, **net})
        return x


class MapRecords(Records, Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, index):
        return self.sample(index)


class StreamRecords(Records, IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        index = wid
        while True:  # each worker its own indexes: wid, wid + nw, ...
            yield self.sample(index)
            index += nw


class CollateLogged:
    """default_collate, then the batch's end in the worker's log (a class: spawn pickles it)."""

    def __init__(self, log):
        self.log = log

    def __call__(self, samples):
        out = default_collate(samples)
        self.log.write({"batch_end": now(), "n": len(samples)})
        return out


def thread_batches(data, collate, args):
    """Batches from a thread pool of this process: each task makes a whole batch and puts it on a
    queue.Queue; each batch taken submits the next, so --prefetch batches a thread stay in flight."""
    made = queue.Queue()
    numbers = itertools.count()
    pool = ThreadPoolExecutor(max_workers=args.workers, thread_name_prefix="loader")

    def make():
        first = next(numbers) * args.batch
        made.put(collate([data[first + i] for i in range(args.batch)]))

    for _ in range(args.workers * args.prefetch):
        pool.submit(make)
    try:
        while True:
            batch = made.get()
            pool.submit(make)
            yield batch
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def relayed(loader, args):
    """The DataLoader's batches through a thread of this process (a pin-memory thread's place): it
    takes each from the workers and puts it on a queue.Queue of --prefetch batches."""
    out = queue.Queue(maxsize=args.prefetch)

    def relay():
        args.relay_tid = threading.get_native_id()
        it = iter(loader)
        for _ in range(args.steps):
            out.put(next(it))
        del it   # the workers shut down here, in this thread, while the job still runs

    t = threading.Thread(target=relay, name="relay")
    t.start()
    try:
        for _ in range(args.steps):
            yield out.get()
    finally:
        # Joined before the job ends: a thread still shutting the workers down while the interpreter
        # finalizes can abort it (this job exited 134 so, once in about ten runs).
        t.join()


def train_step(model, opt, batch):
    """One step; returns the calling thread's CPU ns in each phase (its own clock), by the phase's
    tag, and the clock at its first line (the call began between next1 and this)."""
    entered = now()
    c0 = time.thread_time_ns()
    opt.zero_grad()  # ZERO-GRAD
    c1 = time.thread_time_ns()
    loss = model(batch).square().mean()  # FORWARD
    c2 = time.thread_time_ns()
    loss.backward()  # BACKWARD
    c3 = time.thread_time_ns()
    opt.step()  # OPTIMIZER
    c4 = time.thread_time_ns()
    loss.item()
    return {"zero_grad": c1 - c0, "forward": c2 - c1, "backward": c3 - c2, "optimizer": c4 - c3}, entered


def make_data(folder, shards, shard_mb):
    os.makedirs(folder, exist_ok=True)
    for i in range(shards):
        path = os.path.join(folder, "shard-%03d" % i)
        if os.path.exists(path) and os.path.getsize(path) == shard_mb << 20:
            continue
        with open(path + ".tmp", "wb") as f:
            for _ in range(shard_mb):
                f.write(os.urandom(1 << 20))
        os.rename(path + ".tmp", path)
    print("torchjob.py: %d shards of %d MiB in %s" % (shards, shard_mb, folder))


def make_cold(folder):
    """Drops the shards' pages from the page cache (their own, not the machine's)."""
    for n in os.listdir(folder):
        if n.startswith("shard-"):
            fd = os.open(os.path.join(folder, n), os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


DEFAULTS = {  # shape -> decode ms a sample, record KiB, model width, layers, batch
    "decode": (8.0, 64, 256, 2, 8),
    "compute": (0.2, 16, 1024, 4, 8),
    "disk": (0.0, 4, 64, 1, 256),
    "iterable": (6.0, 64, 256, 2, 8),
    "memmap": (1.0, 256, 256, 2, 8),
    "http": (1.0, 256, 64, 1, 8),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--make-data")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--shard-mb", type=int, default=16)
    ap.add_argument("--data")
    ap.add_argument("--truth")
    ap.add_argument("--shape", choices=sorted(DEFAULTS), default="decode")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--start", choices=("fork", "spawn", "forkserver"), default="fork")
    ap.add_argument("--persistent", action="store_true")
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--threads", action="store_true", help="a thread pool of --workers threads instead of worker processes")
    ap.add_argument("--relay", action="store_true", help="the batches through a thread of this process")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--epoch-steps", type=int, default=0, help="steps an epoch (a new iterator: new workers unless --persistent)")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--decode-ms", type=float)
    ap.add_argument("--record-kb", type=int)
    ap.add_argument("--width", type=int)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--url", help="http shape: the object server's object, http://HOST:PORT/PATH, at least a shard long")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.make_data:
        make_data(args.make_data, args.shards, args.shard_mb)
        return
    if not args.data or not args.truth:
        ap.error("--data and --truth are needed (or --make-data)")
    if args.threads and (args.shape == "iterable" or args.workers < 1):
        ap.error("--threads needs a map-style shape and --workers 1 or more")
    if args.shape == "http" and not args.url:
        ap.error("--shape http needs --url")
    if args.relay and (args.threads or args.epoch_steps):
        ap.error("--relay takes the loader's batches of one epoch: not with --threads or --epoch-steps")
    d = DEFAULTS[args.shape]
    args.decode_ms = d[0] if args.decode_ms is None else args.decode_ms
    args.record_kb = d[1] if args.record_kb is None else args.record_kb
    args.width = d[2] if args.width is None else args.width
    args.layers = d[3] if args.layers is None else args.layers
    args.batch = d[4] if args.batch is None else args.batch
    args.truth_dir = args.truth + ".d"
    os.makedirs(args.truth_dir, exist_ok=True)
    for n in os.listdir(args.truth_dir):
        os.unlink(os.path.join(args.truth_dir, n))
    if args.cold or args.shape in ("disk", "memmap"):
        make_cold(args.data)

    torch.manual_seed(args.seed)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(torch.nn.Linear(4096, args.width), *layers, torch.nn.Linear(args.width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    data = (StreamRecords if args.shape == "iterable" else MapRecords)(args)
    if args.threads:
        threaded = thread_batches(data, CollateLogged(data.log), args)
    kw = {}
    if args.workers:
        kw = {"multiprocessing_context": args.start, "persistent_workers": args.persistent,
              "prefetch_factor": args.prefetch}
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers,
                        collate_fn=CollateLogged(data.log), **kw)

    steps = []
    first = last = None
    it = None
    for n in range(args.steps):
        if args.threads:
            it = threaded
        elif args.relay:
            it = it or relayed(loader, args)
        elif it is None or (args.epoch_steps and n % args.epoch_steps == 0):
            it = iter(loader)
        s0 = schedstat_all()
        t0 = now()
        batch = next(it)  # NEXT
        t1 = now()
        s1 = schedstat_all()
        if n == 0:
            first = schedstat()
        phases, entered = train_step(model, opt, batch)  # STEP
        t2 = now()
        steps.append({"next0": t0, "next1": t1, "enter": entered, "step1": t2, "step_cpu_ns": phases,
                      "next_sched": [b - a for a, b in zip(s0, s1)]})
    last = schedstat()
    del it
    if args.threads:
        threaded.close()
    truth = {"main": {"pid": os.getpid(), "tid": threading.get_native_id(), "steps": steps,
                      "relay_tid": getattr(args, "relay_tid", 0),
                      "oncpu_ns": last[0] - first[0], "runq_ns": last[1] - first[1], "io": proc_io()},
             "args": {k: v for k, v in vars(args).items() if k != "make_data"},
             "lines": {"file": os.path.abspath(__file__), "next": line_of("NEXT"), "step": line_of("STEP"),
                       "read": line_of("READ"), "read_faults": line_of("READ-FAULTS"), "decode": line_of("DECODE"),
                       "zero_grad": line_of("ZERO-GRAD"), "forward": line_of("FORWARD"),
                       "backward": line_of("BACKWARD"), "optimizer": line_of("OPTIMIZER")},
             "workers": {}}
    for n in sorted(os.listdir(args.truth_dir)):
        with open(os.path.join(args.truth_dir, n)) as f:
            for text in f:
                rec = json.loads(text)
                w = truth["workers"].setdefault(str(rec["pid"]), {"samples": [], "batches": []})
                (w["batches"] if "batch_end" in rec else w["samples"]).append(rec)
    with open(args.truth, "w") as f:
        json.dump(truth, f)
    print("torchjob.py: %d steps, %s, %d workers (%s), truth in %s" % (
        len(steps), args.shape, args.workers, args.start, args.truth), flush=True)


if __name__ == "__main__":
    sys.exit(main())
