#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""multiprocessing.Pool(WORKERS, maxtasksperchild=1) over TASKS tasks, after
loading a CUDA runtime through ctypes: every task runs in a worker forked for
it alone, and makes three CUDA calls (cudaMalloc, cudaMemset, cudaFree:
without a GPU each fails at once, the probes on them still fire).

Each worker's start delay is measured by the workload's own clock: a
before-fork hook reads CLOCK_MONOTONIC in the parent, and the child's first
after-fork hook reads it again (the child's copy of the parent's memory holds
the first reading). Prints what it made as JSON: the truth the fork-storm
test compares dlbpf with.

  pypool.py LIBCUDART [--tasks N] [--workers W]
"""
import ctypes
import json
import multiprocessing
import os
import sys
import time

CALLS_PER_TASK = 3
FORK_NS = [0]
START = {}


def before_fork():
    FORK_NS[0] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def after_fork_in_child():
    START["delay_ns"] = time.clock_gettime_ns(time.CLOCK_MONOTONIC) - FORK_NS[0]


def task(lib_path):
    lib = ctypes.CDLL(lib_path)   # already mapped: the parent loaded it
    dev = ctypes.c_void_p()
    lib.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(4096))
    lib.cudaMemset(dev, 0, ctypes.c_size_t(4096))
    lib.cudaFree(dev)
    return os.getpid(), START.get("delay_ns", -1), CALLS_PER_TASK


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit("usage: pypool.py LIBCUDART [--tasks N] [--workers W]")
    lib_path, tasks, workers = args[0], 120, 8
    rest = args[1:]
    while rest:
        if len(rest) >= 2 and rest[0] == "--tasks":
            tasks = int(rest[1])
        elif len(rest) >= 2 and rest[0] == "--workers":
            workers = int(rest[1])
        else:
            sys.exit(f"pypool.py: unknown argument '{rest[0]}'")
        rest = rest[2:]
    ctypes.CDLL(lib_path)
    os.register_at_fork(before=before_fork, after_in_child=after_fork_in_child)
    t0 = time.monotonic()
    with multiprocessing.get_context("fork").Pool(workers, maxtasksperchild=1) as pool:
        results = pool.map(task, [lib_path] * tasks, chunksize=1)
    wall = time.monotonic() - t0
    delays = [d for _, d, _ in results]
    out = {
        "pid": os.getpid(), "tasks": tasks, "workers": workers, "wall_s": round(wall, 6),
        "pids": [p for p, _, _ in results], "calls_per_child": CALLS_PER_TASK,
        "calls": sum(c for _, _, c in results),
        "max_start_delay_ms": max(delays) / 1e6, "mean_start_delay_ms": sum(delays) / len(delays) / 1e6,
    }
    data = (json.dumps(out) + "\n").encode()
    while data:
        data = data[os.write(1, data):]
    sys.exit(0 if min(delays) >= 0 else 1)


if __name__ == "__main__":
    main()
