#!/usr/bin/env python3
"""The collector's include rule (user/README.md), checked on every source.

Stages include one way: output -> analysis -> records and capture -> records.
user/*.h (log.h, version.h, util.h) is the base every stage may use; the wiring
files (main.c, cli.c, session.c, live.c, multirank.c, flightrec.c) may include
anything, and their headers (but flightrec.h, which only names types) are
theirs alone. The low-overhead modes are the named exceptions: they fill the
per-process summary from BPF maps.

And the composition root's rules: the session (user/session.c) is the only
file that constructs the correlator, the summary and a timeline; main.c
includes no analysis, output or records header (it parses, picks a mode and
runs it); the formats of output/ read the report model (output/model.c reads
the summary and the correlator once, and computes the steps' statistics). And no call circle inside a folder: the files of one stage call
each other one way (a file split where a seam is, not at a size).
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
# Headers of the wiring: not part of the base the stages may include.
WIRING_HEADERS = ("cli.h", "session.h", "live.h", "multirank.h")
# Constructors only the session calls (the file defining each is left out).
CONSTRUCTORS = {
    "dl_corr_new": "analysis/correlate.c",
    "dl_summary_init": "analysis/summary.c",
    "dl_timeline_open": "output/timeline.c",
    "dl_timeline_new": "output/timeline.c",
}
COMPOSITION_ROOT = "session.c"
# What a format may not touch: the summary's and the correlator's handles and functions (their value types,
# a process's figures or a step, are what the model hands out).
WALKS = re.compile(r"\bstruct\s+dl_(summary|correlator)\b|\b(dl_corr|dl_summary|dl_proc_bystander)\w*\s*\(")
# output/model.c builds the model; output/otlp.c is a live step sink that names each process when its first
# span goes out, before any model exists (it looks the process up; it walks nothing).
MODEL_READERS_EXEMPT = {os.path.join("output", "model.c"), os.path.join("output", "otlp.c"),
                        os.path.join("output", "otlp.h")}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def violations(user_dir):
    found = []
    base = {n for n in os.listdir(user_dir) if n.endswith(".h") and n not in WIRING_HEADERS}
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


def sources(user_dir):
    for folder, _, names in os.walk(user_dir):
        for name in sorted(names):
            if name.endswith(".c"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, user_dir), path


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)


def root_violations(user_dir):
    """The session alone builds the pipeline; main.c wires nothing itself."""
    found = []
    for rel, path in sources(user_dir):
        with open(path) as f:
            code = strip_comments(f.read())
        for fn, home in CONSTRUCTORS.items():
            if rel in (home, COMPOSITION_ROOT):
                continue
            if re.search(r"\b%s\s*\(" % fn, code):
                found.append(f"{rel}: calls {fn}: only {COMPOSITION_ROOT} assembles the pipeline")
        # The report model reads the summary and the correlator once; the formats read values from it.
        if rel.startswith("output" + os.sep) and rel not in MODEL_READERS_EXEMPT:
            for m in WALKS.finditer(code):
                found.append(f"{rel}: {m.group(0).strip()}: formats read the report model (output/model.h), "
                             "not the analysis stage's state")
    with open(os.path.join(user_dir, "main.c")) as f:
        for inc in INCLUDE.findall(f.read()):
            if inc.split("/", 1)[0] in ("analysis", "output", "records"):
                found.append(f"main.c: includes {inc}: main parses, picks a mode and runs it (session.h, live.h)")
    return found


DEFINITION = re.compile(r"^(?!static)[a-z][^;(\n]*?\b(dl_\w+)\s*\([^;]*?\)\s*\{", re.M)


def call_circles(user_dir):
    """Files of one folder that call each other round a circle (strongly connected, more than one)."""
    found = []
    for folder in ("",) + STAGES:
        d = os.path.join(user_dir, folder)
        code = {}
        for name in sorted(os.listdir(d)):
            if name.endswith(".c"):
                with open(os.path.join(d, name)) as f:
                    code[name] = re.sub(r'"(\\.|[^"\\])*"', '""', strip_comments(f.read()))
        home = {fn: name for name, text in code.items() for fn in DEFINITION.findall(text)}
        calls = {name: {home[fn] for fn in home if home[fn] != name and re.search(r"\b%s\s*\(" % fn, text)}
                 for name, text in code.items()}
        index, low, stack, on, counter = {}, {}, [], set(), [0]

        def visit(v):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in calls[v]:
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(f"{folder or 'user'}/: {' <-> '.join(sorted(comp))} call each other")

        for name in code:
            if name not in index:
                visit(name)
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
    bad = root_violations(USER)
    for v in bad:
        print("FAIL composition root:", v, file=sys.stderr)
    if bad:
        failed += 1
    else:
        passed += 1
    bad = call_circles(USER)
    for v in bad:
        print("FAIL call circle:", v, file=sys.stderr)
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
