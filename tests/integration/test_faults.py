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


if __name__ == "__main__":
    main()
