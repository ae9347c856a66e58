"""A PyTorch training loop with a DataLoader of worker processes, for a real GPU.

Its truth, printed as one JSON line at the end: per step the CLOCK_MONOTONIC
time the loop asked for the batch, got it, and finished the step (after
loss.item()), the pid of the worker that built the batch, and the step's GPU
time from CUDA events around the forward/backward/optimizer work.

  --decode-ms N   CPU time each sample costs its worker (input-bound when high)
  --workers N     DataLoader workers (processes)
  --width N       hidden width of the MLP (GPU-bound when high)
"""
import argparse
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Decoded(Dataset):
    def __init__(self, decode_ms, dim):
        self.decode_ns = int(decode_ms * 1e6)
        self.dim = dim

    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        t0 = time.thread_time_ns()
        x = 0
        while time.thread_time_ns() - t0 < self.decode_ns:
            x += 1
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), i % 10, os.getpid()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--decode-ms", type=float, default=0.5)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    a = ap.parse_args()

    dim = 512
    dev = torch.device("cuda")
    mods = [torch.nn.Linear(dim, a.width), torch.nn.ReLU()]
    for _ in range(a.layers - 1):
        mods += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    mods += [torch.nn.Linear(a.width, 10)]
    model = torch.nn.Sequential(*mods).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = DataLoader(Decoded(a.decode_ms, dim), batch_size=a.batch, num_workers=a.workers,
                        pin_memory=True, persistent_workers=True)
    steps = []
    it = iter(loader)
    print("training", file=sys.stderr, flush=True)
    for s in range(a.steps):
        t_ask = time.monotonic_ns()
        x, y, pids = next(it)
        t_got = time.monotonic_ns()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        x = x.to(dev, non_blocking=True)
        y = y.to(dev, non_blocking=True)
        e0.record()
        out = model(x)
        loss = loss_fn(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        e1.record()
        t_sync = time.monotonic_ns()
        loss.item()
        t_end = time.monotonic_ns()
        steps.append({"ask_ns": t_ask, "got_ns": t_got, "sync_start_ns": t_sync, "end_ns": t_end,
                      "worker_pid": int(pids[0]), "events": (e0, e1)})
    torch.cuda.synchronize()
    for st in steps:
        e0, e1 = st.pop("events")
        st["gpu_ns"] = int(e0.elapsed_time(e1) * 1e6)
    print(json.dumps({"pid": os.getpid(), "workers": a.workers, "decode_ms": a.decode_ms,
                      "width": a.width, "steps": steps}))


if __name__ == "__main__":
    main()
