#!/usr/bin/env python3
"""The collector's include rule (user/README.md), checked on every source.

Stages include one way: output -> analysis -> records and capture -> records.
user/*.h (log.h, version.h, util.h) is the base every stage may use; main.c,
cli.c, flightrec.c and outputs.c wire the stages and may include anything
(flightrec.h only names their types; cli.h and outputs.h are theirs alone). The low-overhead modes are the
named exceptions: they fill the per-process summary from BPF maps.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
USER = os.path.join(ROOT, "user")
STAGES = ("capture", "records", "analysis", "output")
ALLOWED = {
    "records": {"records"},
    "analysis": {"analysis", "records"},
    "output": {"output", "analysis", "records"},
    "capture": {"capture", "records"},
}
# (including file, included header): --summary, --duty and --overhead-budget write into the summary.
EXCEPTIONS = {
    ("capture/aggregate.h", "analysis/summary.h"),
    ("capture/duty.h", "analysis/summary.h"),
    ("capture/budget.h", "analysis/summary.h"),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def violations(user_dir):
    found = []
    base = {n for n in os.listdir(user_dir) if n.endswith(".h") and n not in ("cli.h", "outputs.h")}
    for stage in STAGES:
        folder = os.path.join(user_dir, stage)
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".c", ".h", ".def")):
                continue
            src = f"{stage}/{name}"
            with open(os.path.join(folder, name)) as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                if inc.startswith("dlbpf/") or (inc == "dlbpf.skel.h" and stage == "capture"):
                    continue
                if "/" not in inc:
                    if inc not in base:
                        found.append(f"{src}: includes \"{inc}\", not a base header of user/ "
                                     "(name a stage header with its folder)")
                    continue
                dst = inc.split("/", 1)[0]
                if dst not in STAGES:
                    found.append(f"{src}: includes \"{inc}\" from outside the stages")
                elif dst not in ALLOWED[stage] and (src, inc) not in EXCEPTIONS:
                    found.append(f"{src}: {stage} must not include {inc}")
    for name in sorted(os.listdir(user_dir)):
        if name.endswith(".h"):
            with open(os.path.join(user_dir, name)) as f:
                for inc in INCLUDE.findall(f.read()):
                    if inc.split("/", 1)[0] in STAGES:
                        found.append(f"{name}: a base header must not include {inc}")
    return found


def main():
    passed = failed = 0
    bad = violations(USER)
    for v in bad:
        print("FAIL include rule:", v, file=sys.stderr)
    if bad:
        failed += 1
    else:
        passed += 1
    # Every stage folder exists and holds sources, with a README saying what it may include.
    for stage in STAGES:
        folder = os.path.join(USER, stage)
        ok = os.path.isfile(os.path.join(folder, "README.md")) and any(
            n.endswith(".c") for n in os.listdir(folder))
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL user/{stage}: missing README.md or sources", file=sys.stderr)
    print(f"test_layout: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
