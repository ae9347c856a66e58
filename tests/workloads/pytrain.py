#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A training loop in Python that drives a CUDA runtime through ctypes (which
releases the GIL around each call, as PyTorch does around its own). Each
CUDA call sits on one line with count(), which notes the call's own line and
its caller's from the interpreter's frames: the truth a tracer's Python
frames are compared with. Prints {"pyframes": {pid: {"func:line<-caller:line": calls}}}.

  pytrain.py LIBCUDART [--steps N] [--thread] [--fork] [--wait]

It exits as soon as its loop is done, and its forked loader calls CUDA as soon
as it is forked: it never waits for a tracer.
"""
import ctypes
import json
import os
import sys
import threading

TRUTH = {}
LOCK = threading.Lock()
H2D, D2H = 1, 2
BATCH = 1 << 16


def say(line):
    """One line in one write: a tracer started as `dlbpf -- pytrain.py` writes its report to the same
    stdout, and print() writes the text and its newline apart when unbuffered (PYTHONUNBUFFERED)."""
    data = (line + "\n").encode()
    while data:
        data = data[os.write(1, data):]


def name(code):
    """What a tracer reads from the code object: its qualified name (3.11+), else its name."""
    return getattr(code, "co_qualname", code.co_name)


def count():
    """Counts the call made on the caller's line, under the caller's function and its caller's line."""
    f = sys._getframe(1)
    key = f"{name(f.f_code)}:{f.f_lineno}<-{name(f.f_back.f_code)}:{f.f_back.f_lineno}"
    with LOCK:
        TRUTH[key] = TRUTH.get(key, 0) + 1


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def setup(path):
    rt = ctypes.CDLL(path)
    rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    rt.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    rt.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
    return rt


def load_batch(rt, dev, host):
    rt.cudaMemcpyAsync(dev, host, BATCH, H2D, None); count()


def forward(rt, kernel):
    for _ in range(4):
        rt.cudaLaunchKernel(kernel, Dim3(64, 1, 1), Dim3(256, 1, 1), None, 0, None)


def loss_item(rt, host, dev):
    rt.cudaMemcpy(host, dev, 4, D2H); count()


def wait_gpu(rt):
    rt.cudaStreamSynchronize(None); count()


def train_step(rt, dev, host, kernel):
    load_batch(rt, dev, host)
    forward(rt, kernel)
    wait_gpu(rt)
    loss_item(rt, host, dev)


def loader(rt, dev, host, steps):
    """A data-loading thread of its own: batch copies from another thread."""
    for _ in range(steps):
        rt.cudaMemcpy(dev, host, BATCH, H2D); count()


def main():
    args = sys.argv[1:]
    path, steps = args[0], 50
    if "--steps" in args:
        steps = int(args[args.index("--steps") + 1])
    rt = setup(path)
    dev = ctypes.c_void_p()
    if rt.cudaMalloc(ctypes.byref(dev), BATCH) != 0:
        dev = ctypes.c_void_p(0x7000000000)
    host = ctypes.create_string_buffer(BATCH)
    kernel = ctypes.cast(ctypes.CFUNCTYPE(None)(lambda: None), ctypes.c_void_p)
    if "--wait" in args:
        say("ready")   # a tracer attaches with --pid, then says go
        sys.stdin.readline()
    child_r = None
    if "--fork" in args:
        child_r, w = os.pipe()
        if os.fork() == 0:
            os.close(child_r)
            TRUTH.clear()
            # CUDA at once, and gone at once: a tracer must follow the child from its first call.
            loader(rt, dev, host, steps)
            os.write(w, json.dumps(TRUTH).encode())
            os._exit(0)
        os.close(w)
    helper = None
    if "--thread" in args:
        helper = threading.Thread(target=loader, args=(rt, dev, host, steps))
        helper.start()
    for _ in range(steps):
        train_step(rt, dev, host, kernel)
    if helper:
        helper.join()
    out = {str(os.getpid()): dict(TRUTH)}
    if child_r is not None:
        data = b""
        while chunk := os.read(child_r, 65536):
            data += chunk
        pid, _ = os.wait()
        out[str(pid)] = json.loads(data)
    say(json.dumps({"pyframes": out, "python": list(sys.version_info[:2]), "file": os.path.abspath(__file__)}))


if __name__ == "__main__":
    main()
