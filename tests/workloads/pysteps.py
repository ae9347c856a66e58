#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A training loop in pure Python, for any CPython 3: each step calls train_step(), a module
function, which calls Trainer.step(), a method; both burn the CPU through many small Python calls
of other functions. Its truth, printed as one line when it ends:

  {"pysteps": {"pid": P, "steps": [{"call": ns, "enter": ns, "method_enter": ns, "end": ns}, ...]}}

call: the monotonic clock just before train_step() is called; enter: at its first line;
method_enter: at Trainer.step()'s first line; end: after train_step() returned.

  pysteps.py [--steps N] [--step-ms MS] [--gap-ms MS] [--setup-ms MS] [--step-calls K]

--setup-ms: CPU work before the loop, as a job's imports and model building are (default 1500).
--gap-ms: CPU work between steps (the loader's part). It never waits for a tracer.
--step-calls K: a step makes K calls of small() instead of running --step-ms (so that a tracer's
cost shows in the step's time: tools/bench table 14), the gap K / 4.
"""
import os
import sys
import time


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def small(x):
    return x * 3 + 1


def burn(ms):
    """Many short Python calls until ms have passed: calls that must not mark steps."""
    end = now() + int(ms * 1e6)
    x = 0
    while now() < end:
        for _ in range(200):
            x = small(x) & 0xffff
    return x


def work(calls):
    """A fixed number of short Python calls."""
    x = 0
    for _ in range(calls):
        x = small(x) & 0xffff
    return x


def arg(name, default):
    return float(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


# The set-up runs before the step functions are defined, as a job's imports do: a tracer that
# finds them before their def sees the def take its references on them too.
burn(arg("--setup-ms", 1500))


class Trainer:
    def __init__(self, step_ms, step_calls):
        self.step_ms = step_ms
        self.step_calls = step_calls
        self.entered = []

    def half(self):
        return work(self.step_calls // 2) if self.step_calls else burn(self.step_ms / 2)

    def step(self):
        self.entered.append(now())
        return self.half()


def train_step(trainer):
    entered = now()
    trainer.half()
    trainer.step()
    return entered


def main():
    steps, step_ms, gap_ms = int(arg("--steps", 20)), arg("--step-ms", 20), arg("--gap-ms", 5)
    step_calls = int(arg("--step-calls", 0))
    trainer = Trainer(step_ms, step_calls)
    out = []
    for _ in range(steps):
        if step_calls:
            work(step_calls // 4)
        else:
            burn(gap_ms)
        call = now()
        entered = train_step(trainer)
        out.append({"call": call, "enter": entered, "end": now()})
    for rec, m in zip(out, trainer.entered):
        rec["method_enter"] = m
    line = '{"pysteps": {"pid": %d, "steps": [%s]}}\n' % (os.getpid(), ", ".join(
        '{"call": %d, "enter": %d, "method_enter": %d, "end": %d}' % (r["call"], r["enter"], r["method_enter"],
                                                                      r["end"]) for r in out))
    os.write(1, line.encode())


if __name__ == "__main__":
    main()
