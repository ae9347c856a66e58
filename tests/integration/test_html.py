#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The HTML report (--html) rendered by a real browser, headless Chromium: its
DOM against the JSON summary of the same run (the verdict, the findings, one
bar per step or per bin, the legend's categories, the copies), a screenshot,
and a console with nothing in it (the page has no script, and its
Content-Security-Policy makes any load a console message). A traced process
with hostile names must not put markup or control bytes in the page. Run as
root; Chromium comes from tools/setup-deps.sh, and without it every test here
fails."""
import bisect
import json
import math
import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser

from harness import (GPUSIM_DIR, WORK, Dlbpf, bystanders, check, load_summary, main, process, run_dlbpf, shown,
                     truth_line, workload)

HTML_WORK = os.path.join(WORK, "html")
os.makedirs(HTML_WORK, exist_ok=True)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WINDOW = (1400, 2000)
BARS_FIT = 562
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def chromium():
    exe = shutil.which("chromium")
    check(exe, "chromium is not installed: run tools/setup-deps.sh (it installs Debian's chromium)")
    return exe


def render(page, mode):
    """Chromium headless on page: mode "dom" returns the serialized DOM, "png" the screenshot's bytes;
    with the console lines it logged (CSP refusals are logged at INFO, script errors at ERROR)."""
    tag = os.path.basename(page) + "-" + mode
    shot = os.path.join(HTML_WORK, tag + ".png")
    args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
            "--user-data-dir=" + os.path.join(HTML_WORK, "profile-" + tag), "--no-first-run"]
    if mode == "dom":
        args.append("--dump-dom")
    else:
        if os.path.exists(shot):
            os.unlink(shot)
        args += ["--screenshot=" + shot, "--window-size=%d,%d" % WINDOW]
    p = subprocess.run(args + ["file://" + os.path.abspath(page)], capture_output=True, timeout=180,
                       stdin=subprocess.DEVNULL)
    check(p.returncode == 0, f"chromium exited {p.returncode} on {page}: {p.stderr[-600:]!r}")
    console = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if ":CONSOLE" in l or "Uncaught" in l]
    if mode == "dom":
        return p.stdout.decode("utf-8"), console
    check(os.path.exists(shot), f"chromium wrote no screenshot of {page}: {p.stderr[-400:]!r}")
    with open(shot, "rb") as f:
        return f.read(), console


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children, self.parts = tag, dict(attrs), parent, [], []

    def text(self):
        return "".join(p if isinstance(p, str) else p.text() for p in self.parts)

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def find(self, tag=None, cls=None, **attrs):
        return [n for n in self.walk() if (tag is None or n.tag == tag) and (cls is None or cls in n.classes())
                and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]


class Dom(HTMLParser):
    """The serialized DOM as a tree, read by Python's own HTML parser (not dlbpf's code)."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", [], None)
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        self.cur.parts.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.parts.append(data)


def one(nodes, what):
    check(len(nodes) == 1, f"{len(nodes)} {what}, want 1")
    return nodes[0]


def png_size(data):
    check(data[:8] == PNG_MAGIC and data[12:16] == b"IHDR", f"not a PNG: {data[:16]!r}")
    return struct.unpack(">II", data[16:24])


_baseline = {}


def blank_baseline():
    """A page with nothing to show but a script and an image from the network: what an empty screenshot
    weighs, and proof that the console check sees both (the refusals must be logged)."""
    if not _baseline:
        page = os.path.join(HTML_WORK, "control.html")
        with open(page, "w") as f:
            f.write("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"Content-Security-Policy\" "
                    "content=\"default-src 'none'\"></head><body><script>nothing()</script>"
                    "<img src=\"http://192.0.2.1/x.png\"></body></html>")
        png, console = render(page, "png")
        check(len(console) >= 2, f"the console check missed the control page's script and image: {console}")
        _baseline["png"] = len(png)
    return _baseline["png"]


def check_page(page, summary, pid=None):
    """The page's DOM against the JSON summary of the same run; returns a note of what it showed."""
    text, console = render(page, "dom")
    check(not console, f"console of {page}: {console[:3]}")
    dom = Dom(text).root
    check(not dom.find("script"), "the page has a script element")
    diag = summary["diagnosis"]
    verdict = one(dom.find(id="verdict"), "#verdict")
    check(verdict.text() == diag["verdict"], f"verdict {verdict.text()!r}, the JSON says {diag['verdict']!r}")
    rules = [n.attrs["id"][len("finding-"):] for n in dom.find("div", cls="finding")]
    check(rules == [f["rule"] for f in diag["findings"]], f"findings {rules} vs {[f['rule'] for f in diag['findings']]}")
    notes = []
    for m in summary["step_markers"]:
        if pid is not None and m["pid"] != pid:
            continue
        steps = [s for s in summary["steps"] if s["pid"] == m["pid"]]
        box = one(dom.find("div", cls="steps", data_pid=str(m["pid"])), f"step charts of pid {m['pid']}")
        svg = one(box.find("svg", cls="step-bars"), "bar charts")
        bars = box.find("g", cls="bar")
        per = int(svg.attrs["data-per-bar"])
        check(int(svg.attrs["data-steps"]) == len(steps), f"chart of {svg.attrs['data-steps']} steps, JSON lists {len(steps)}")
        check(len(bars) == math.ceil(len(steps) / per), f"{len(bars)} bars for {len(steps)} steps of {per} per bar")
        # 562 bars of 2 px fit the chart (doc/manual.md, The HTML report): binned only past that, and then as few steps to a bar as fit.
        n = len(steps)
        check(per == 1 if n <= BARS_FIT else math.ceil(n / per) <= BARS_FIT < math.ceil(n / (per - 1)),
              f"{n} steps binned {per} to a bar")
        # Each bar is its steps' mean duration (integer ns), from the JSON's own durations.
        for i, b in enumerate(bars):
            group = steps[i * per:(i + 1) * per]
            want = sum(s["dur_ns"] for s in group) // len(group)
            check(int(b.attrs["data-steps"]) == len(group) and int(b.attrs["data-index"]) == group[0]["index"],
                  f"bar {i}: steps {b.attrs['data-index']}+{b.attrs['data-steps']}, want {group[0]['index']}+{len(group)}")
            check(int(b.attrs["data-dur-ns"]) == want, f"bar {i}: {b.attrs['data-dur-ns']} ns, JSON {want}")
        marked = box.find("g", cls="median-step")
        check(len(marked) == 1, f"{len(marked)} bars marked as the median step")
        present = {k for s in steps for k, v in s["breakdown_ns"].items() if v}
        legend = {li.attrs["data-cat"] for li in box.find("li") if "data-cat" in li.attrs}
        check(legend == present, f"legend {sorted(legend)}, categories with time {sorted(present)}")
        check(box.find("svg", cls="step-line") and box.find("polyline"), "no steps-over-time line")
        notes.append(f"pid {m['pid']}: {len(steps)} steps in {len(bars)} bars, legend {len(legend)}")
    # Processes that did nothing are folded into one closed <details> block, as the text report folds them.
    folded = {p["pid"] for p in bystanders(summary)}
    block = dom.find("details", id="bystanders")
    inside = {int(n.attrs["data-pid"]) for b in block for n in b.find("div", cls="proc")}
    check(inside == folded and (not folded or int(block[0].attrs["data-count"]) == len(folded)),
          f"folded pids {sorted(inside)}, the JSON's bystanders {sorted(folded)}")
    if folded:
        notes.append(f"{len(folded)} processes folded")
    for p in summary["processes"]:
        box = one(dom.find("div", cls="proc", data_pid=str(p["pid"])), f"section of pid {p['pid']}")
        copies = sum(p["cuda"]["memcpy"][d]["count"] for d in ("h2d", "d2h", "d2d"))
        hist = box.find("g", cls="size-bucket")
        got = sum(int(g.attrs["data-count"]) for g in hist)
        check(got == copies, f"pid {p['pid']}: the sizes histogram holds {got} copies, the JSON {copies}")
        for d in ("h2d", "d2h"):
            c = p["cuda"]["memcpy"][d]
            if c["count"]:
                row = one(box.find("tr", data_dir=d), f"{d} row of pid {p['pid']}")
                cells = [td.text() for td in row.find("td")]
                check(cells[1] == str(c["count"]) and cells[5] == str(c["pageable"]) and
                      cells[4] == str(c["count"] - c["pageable"]), f"pid {p['pid']} {d}: {cells} vs {c}")
    return dom, "; ".join(notes)


def check_screenshot(page):
    png, console = render(page, "png")
    check(not console, f"console of {page} (screenshot): {console[:3]}")
    w, h = png_size(png)
    check((w, h) == WINDOW, f"screenshot {w}x{h}, asked for {WINDOW}")
    blank = blank_baseline()
    # Text, tables and charts compress far worse than an empty page: 4x is well under what a
    # report weighs (about 17x here) and over what an error page or a blank render would.
    check(len(png) >= 4 * blank, f"screenshot of {len(png)} bytes, an empty page's is {blank}")
    return f"screenshot {w}x{h} {len(png)} bytes (empty page {blank})"


def train_run(tag, train_args, dlbpf_args=()):
    """train under `dlbpf record --html`, then the recording under `dlbpf report --html`."""
    live, rec = os.path.join(HTML_WORK, tag + "-live.html"), os.path.join(HTML_WORK, tag + ".dlbpf")
    truth = os.path.join(HTML_WORK, tag + "-truth.jsonl")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    d = Dlbpf(["record", "-o", rec, "--html", live] + list(dlbpf_args) +
              ["--", workload("train"), "--quiet", "--truth", truth] + train_args, env=env)
    d.started()
    check(d.wait(120) == 0, f"dlbpf record exited {d.proc.returncode}: {d.stderr[-600:]}")
    check(os.stat(live).st_mode & 0o777 == 0o600, f"{live} mode {os.stat(live).st_mode & 0o777:o}, want 600")
    replay, rjson = os.path.join(HTML_WORK, tag + "-replay.html"), os.path.join(HTML_WORK, tag + "-replay.json")
    rc, out, err = run_dlbpf(["report", rec, "--html", replay, "-j", rjson], timeout=120)
    check(rc == 0, f"dlbpf report exited {rc}: {err[-600:]}")
    with open(truth) as f:
        lines = [json.loads(l) for l in f]
    return live, d.summary(), replay, load_summary(rjson), lines


def size_bucket(n):
    """The histogram's bucket of an n-byte copy, as doc/manual.md states it: under 1 KiB, then powers of 4."""
    return bisect.bisect_right([1024 * 4 ** k for k in range(9)], n)


def test_html_input_scenario():
    """The demo's scenario, live and replayed: DOM against each run's JSON, the H2D sizes against the
    workload's own, a screenshot of the replay."""
    live, s_live, replay, s_rep, truth = train_run("input", ["--scenario", "input"])
    truth_steps = [l for l in truth if "step" in l]
    check(s_live["diagnosis"]["verdict"] == "input-bound", f"verdict {s_live['diagnosis']['verdict']}")
    # The workload's own step count: dlbpf's steps run marker to marker, so one fewer.
    check(len(s_live["steps"]) == len(truth_steps) - 1, f"{len(s_live['steps'])} steps, train made {len(truth_steps)}")
    _, note_live = check_page(live, s_live)
    dom, note_rep = check_page(replay, s_rep)
    want = {}
    for st in truth_steps:
        if st["h2d_copies"]:
            b = size_bucket(st["h2d_bytes"] // st["h2d_copies"])
            want[b] = want.get(b, 0) + st["h2d_copies"]
    main_pid = s_rep["step_markers"][0]["pid"]
    box = one(dom.find("div", cls="proc", data_pid=str(main_pid)), "the main process's section")
    got = {int(g.attrs["data-bucket"]): int(r.text().split(": ")[1]) for g in box.find("g", cls="size-bucket")
           for r in g.find("rect") if r.text().startswith("h2d: ")}
    check(got == want, f"H2D copies by size bucket {got}, the workload's {want}")
    return f"live {note_live}; replay {note_rep}; h2d sizes {got}; {check_screenshot(replay)}"


def test_html_binned_steps():
    """Past what fits one bar per step, bars are bins of consecutive steps: each the mean of its bin."""
    live, s_live, replay, s_rep, _ = train_run(
        "many", ["--scenario", "gpu", "--steps", "1500", "--kernels", "1", "--kernel-us", "100", "--workers", "1",
                 "--worker-cpu-us", "50", "--host-cpu-us", "50", "--batch-kb", "64", "--read-kb", "4", "--io-kb", "4"])
    check(len(s_rep["steps"]) > 1000, f"only {len(s_rep['steps'])} steps")
    dom, note = check_page(replay, s_rep)
    per = [int(svg.attrs["data-per-bar"]) for svg in dom.find("svg", cls="step-bars")]
    check(per and all(p > 1 for p in per), f"{len(s_rep['steps'])} steps not binned: {per} per bar")
    return note + f", {per[0]} steps per bar"


HOSTILE_NAME = b"<script>'\"&\x1b\r\n\xff"        # 15 bytes: markup, quotes, ESC, CR LF, not UTF-8
HOSTILE_CHILD = b"</h3><b x=\"\x07!\xe2\x82\xac"   # 16: closes a tag, BEL, and the kernel cuts the euro sign
# What the page must show for them: the terminal escaper's \xHH (controls, ill-formed UTF-8), as text.
HOSTILE_SHOWN = "<script>'\"&\\x1b\\x0d\\x0a\\xff"
CHILD_SHOWN = "</h3><b x=\"\\x07!\\xe2\\x82"
KERNEL_SHOWN = "k\\x1b]0;pwn\\x07\\x0d\\xc2\\x9b\\xc0\\xaf\\xed\\xa0\\x80\\xe2\\x80\\xae\u00e9\\xff"


def test_html_hostile_names():
    """hostile_names names itself, its child and its kernel with markup, controls and bad UTF-8: the page
    is strict UTF-8 with no control byte, no '<script' and shows each name as escaped text."""
    page = os.path.join(HTML_WORK, "hostile.html")
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR)
    w = subprocess.Popen([workload("hostile_names"), HOSTILE_NAME, HOSTILE_CHILD], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env)
    try:
        check(w.stdout.readline() == b"ready\n", "hostile_names did not start")
        d = Dlbpf(["--html", page, "--pid", str(w.pid)])
        d.started()
        w.stdin.write(b"go\n")
        w.stdin.flush()
        out, _ = w.communicate(timeout=60)
        check(w.returncode == 0, f"hostile_names exited {w.returncode}")
        check(d.wait() == 0, f"dlbpf exited {d.proc.returncode}: {d.stderr[-600:]}")
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    truth = truth_line(out.decode())
    with open(page, "rb") as f:
        raw = f.read()
    shown(raw, "the HTML page")   # strict UTF-8, no control byte but LF, no C1, no bidi control
    check(b"<script" not in raw.lower(), "the page holds '<script'")
    dom, console = render(page, "dom")
    check(not console, f"console: {console[:3]}")
    root = Dom(dom).root
    check(not root.find("script") and not root.find("b"), "a name became markup")
    comms = {int(n.attrs["data-pid"]): one(n.find("span", cls="comm"), "comm").text() for n in root.find("div", cls="proc")}
    check(comms.get(truth["pid"]) == HOSTILE_SHOWN, f"comm shown {comms.get(truth['pid'])!r}, want {HOSTILE_SHOWN!r}")
    check(comms.get(truth["child"]) == CHILD_SHOWN, f"child shown {comms.get(truth['child'])!r}, want {CHILD_SHOWN!r}")
    kernels = [td.text() for td in root.find("td", cls="name")]
    check(kernels == [KERNEL_SHOWN], f"kernels shown {kernels!r}, want [{KERNEL_SHOWN!r}]")
    summary = d.summary()
    check(process(summary, truth["pid"])["cuda"]["memcpy"]["h2d"]["count"] == truth["h2d"]["count"], "h2d count")
    return f"comm shown as {HOSTILE_SHOWN!r}"


def test_html_bystanders():
    """A job launched through wrappers: the processes that did nothing are in one closed <details> block."""
    os.makedirs(HTML_WORK, exist_ok=True)
    page, summary = (os.path.join(HTML_WORK, n) for n in ("wrappers.html", "wrappers.json"))
    subprocess.run(["/bin/true"], check=True)   # in the page cache: the traced runs read nothing from disk
    rc, _, err = run_dlbpf(["--html", page, "-j", summary, "--", "sh", "-c", "for i in 1 2 3; do /bin/true; done; "
                            f"exec env {workload('train')} --scenario input --steps 10 --quiet"],
                           env=dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR))
    check(rc == 0, f"dlbpf exited {rc}: {err[-500:]}")
    s = load_summary(summary)
    check(bystanders(s), f"no bystanders among {[(p['comm'], p['io']) for p in s['processes']]}")
    _, note = check_page(page, s)
    return note


def test_html_output_rules():
    """--html follows -j's rules: not over the recording reported, not over another output, an
    unwritable path fails before anything runs, naming it, and a failed write is an error."""
    rec = os.path.join(HTML_WORK, "input.dlbpf")
    check(os.path.exists(rec), "no recording: test_html_input_scenario makes it")
    rc, out, err = run_dlbpf(["report", rec, "--html", rec])
    check(rc == 2 and "is the recording being reported" in err, f"--html over the recording: exit {rc}: {err}")
    other = os.path.join(HTML_WORK, "same.out")
    rc, out, err = run_dlbpf(["report", rec, "--html", other, "-j", other])
    check(rc == 2 and "are the same file" in err, f"--html and -j one file: exit {rc}: {err}")
    rc, out, err = run_dlbpf(["report", rec, "--html", "/nonexistent-dir/r.html"])
    check(rc == 1 and "cannot write the HTML report to /nonexistent-dir/r.html" in err, f"exit {rc}: {err}")
    # A page that cannot be written in full is an error, never a silent truncation.
    rc, out, err = run_dlbpf(["report", rec, "--html", "/dev/full"])
    check(rc == 1 and "writing the HTML report to /dev/full failed" in err, f"/dev/full: exit {rc}: {err}")


if __name__ == "__main__":
    main()
