#!/usr/bin/env python3
"""dlbpf's user-facing surface outside the binary's own tests.

The man page (doc/dlbpf.8) lists exactly the options of `dlbpf --help` and
renders without a groff warning; --version names the event ABI of
include/dlbpf/events.h and the libbpf the binary loads; the bash completion
(tools/dlbpf.bash-completion) completes what it says; the sub-command is found
after global options; `make install` installs the three files and `make
uninstall` removes them. Needs ./dlbpf built (make test-unit builds it).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DLBPF = os.path.join(ROOT, "dlbpf")
MANPAGE = os.path.join(ROOT, "doc", "dlbpf.8")
COMPLETION = os.path.join(ROOT, "tools", "dlbpf.bash-completion")

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL", what, file=sys.stderr)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


# One option as both sources spell it: ("-p", "--pid", "PID"), ("", "--quiet", "").
OPTION = re.compile(r"^(?:(-\S), )?(--[a-z][\w-]*)(?:=(\S+))?$")


def help_options():
    text = run([DLBPF, "--help"]).stdout
    table = text.split("Mandatory or optional arguments")[0]
    found = set()
    for line in table.splitlines():
        m = re.match(r"^ {2}(?:(-\S), | {4})\s*(--[a-z][\w-]*)(?:=(\S+))?", line)
        if m:
            found.add((m.group(1) or "", m.group(2), m.group(3) or ""))
    return found


def roff_text(line):
    """The words of a man(7) macro line as printed, fonts dropped."""
    line = re.sub(r"\\f[BIRP]", "", line).replace("\\-", "-").replace("\\&", "")
    macro, _, rest = line.partition(" ")
    words = shlex.split(rest)
    # .BR, .IR, .BI, ...: alternating fonts, no space between the words
    return " ".join(words) if macro in (".B", ".I") else "".join(words)


def manpage_options():
    lines = open(MANPAGE).read().splitlines()
    start = lines.index(".SH OPTIONS")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(".SH "))
    found, bad = set(), []
    for i in range(start, end):
        if lines[i] == ".TP":
            tag = roff_text(lines[i + 1])
            m = OPTION.match(tag)
            if m:
                found.add((m.group(1) or "", m.group(2), m.group(3) or ""))
            else:
                bad.append(tag)
    return found, bad


def test_options_match():
    in_help = help_options()
    in_page, unparsed = manpage_options()
    check(len(in_help) >= 20, f"--help lists only {len(in_help)} options: its format changed?")
    check(not unparsed, f"man page OPTIONS entries that are not an option: {unparsed}")
    check(not in_help - in_page, f"in --help, missing from doc/dlbpf.8: {sorted(in_help - in_page)}")
    check(not in_page - in_help, f"in doc/dlbpf.8, not in --help: {sorted(in_page - in_help)}")


def test_groff_renders():
    if not shutil.which("groff"):
        check(False, "groff is not installed (make deps installs groff-base)")
        return
    p = run(["groff", "-man", "-Tutf8", "-ww", MANPAGE])
    check(p.returncode == 0 and not p.stderr.strip(), f"groff -ww: exit {p.returncode}: {p.stderr.strip()}")
    text = re.sub(r".\x08", "", p.stdout)   # grotty's bold and underline overstrikes
    check(all(s in text for s in ("SYNOPSIS", "EXIT STATUS", "PRIVILEGES", "EXAMPLES")),
          "rendered page lacks its sections")


def header_define(path, name):
    m = re.search(rf'#define {name} "?([^"\s]+)"?', open(os.path.join(ROOT, path)).read())
    return m.group(1)


def test_version():
    version = header_define("user/version.h", "DLBPF_VERSION")
    abi = header_define("include/dlbpf/events.h", "DL_ABI_VERSION")
    p = run([DLBPF, "--version"])
    m = re.fullmatch(r"dlbpf (\S+) \(event ABI (\d+), libbpf (\d+)\.(\d+)\)\n", p.stdout)
    check(p.returncode == 0 and m, f"--version: exit {p.returncode}, {p.stdout!r}")
    if not m:
        return
    check(m.group(1) == version, f"--version says {m.group(1)}, user/version.h {version}")
    check(m.group(2) == abi, f"--version says event ABI {m.group(2)}, events.h {abi}")
    # The libbpf the loader picks for the binary, by the version in its file name (libbpf.so.1.4.7).
    lib = re.search(r"libbpf\.so\.\S+ => (\S+)", run(["ldd", DLBPF]).stdout)
    real = os.path.basename(os.path.realpath(lib.group(1))) if lib else ""
    so = re.match(r"libbpf\.so\.(\d+)\.(\d+)", real)
    check(so and so.groups() == (m.group(3), m.group(4)),
          f"--version says libbpf {m.group(3)}.{m.group(4)}, the loaded library is {real or 'not found'}")
    th = re.search(r'^\.TH DLBPF 8 "[^"]*" "dlbpf ([^"]+)"', open(MANPAGE).read(), re.M)
    check(th and th.group(1) == version, f"doc/dlbpf.8's .TH names another version than {version}")


def complete(words, cwd=ROOT):
    """COMPREPLY for the words typed so far, the last one being completed."""
    script = (f"source {shlex.quote(COMPLETION)}; COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); "
              f"COMP_CWORD={len(words) - 1}; _dlbpf; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    p = run(["bash", "-c", script], cwd=cwd)
    check(p.returncode == 0 and not p.stderr, f"completing {words}: exit {p.returncode}, {p.stderr.strip()}")
    return [w for w in p.stdout.split("\n") if w]


def test_completion():
    check(complete(["dlbpf", "--pi"]) == ["--pid"], "dlbpf --pi does not complete to --pid")
    offered = set(complete(["dlbpf", "-"])) - {"--"}
    in_help = {o for short, long_, _ in help_options() for o in (short, long_) if o}
    check(offered == in_help, f"completion's options differ from --help's: {sorted(offered ^ in_help)}")
    check(set(complete(["dlbpf", "-q", ""])) == {"record", "report", "features"}, "sub-commands not offered after -q")
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "run.dlbpf"), "w").close()
        os.mkdir(os.path.join(d, "traces"))
        for words in (["dlbpf", "report", ""], ["dlbpf", "-j", ""], ["dlbpf", "record", "--output", ""]):
            check(set(complete(words, cwd=d)) == {"run.dlbpf", "traces"}, f"{words} does not offer the files")
        # Several recordings are a job's ranks (report r0 r1 ...): the next one is offered too.
        check(set(complete(["dlbpf", "report", "run.dlbpf", ""], cwd=d)) == {"run.dlbpf", "traces"},
              "report does not offer a second recording (a rank's)")
    mine = str(os.getpid())
    check(mine in complete(["dlbpf", "--pid", ""]), f"--pid does not offer this test's pid {mine}")
    check(mine in complete(["dlbpf", "-p", mine[:-1]]), f"-p {mine[:-1]} does not offer {mine}")
    comm = open("/proc/self/comm").read().strip()
    check(comm in complete(["dlbpf", "--comm", comm[:2]]), f"--comm {comm[:2]} does not offer {comm}")
    check(set(complete(["dlbpf", "--format", ""])) == {"pftrace", "json"}, "--format's values")
    # -o takes "report" as its argument: the next word is still in the sub-command's place.
    check(set(complete(["dlbpf", "-o", "report", ""])) == {"record", "report", "features"}, "-o's argument taken as a word")


def usage_error(args):
    p = run([DLBPF] + args)
    return p.returncode, p.stderr


def test_subcommand_after_options():
    rc, err = usage_error(["-q", "record", "-p", "1"])
    check(rc == 2 and "record needs -o FILE" in err, f"-q record -p 1: exit {rc}, {err.strip()}")
    # After --, "record" is a command's name, which --pid excludes.
    rc, err = usage_error(["-p", "1", "-q", "--", "record"])
    check(rc == 2 and "either --pid or a command" in err, f"-p 1 -q -- record: exit {rc}, {err.strip()}")
    rc, err = usage_error(["--json", "J", "-v", "report"])
    check(rc == 2 and "report needs a recording" in err, f"--json J -v report: exit {rc}, {err.strip()}")
    rc, err = usage_error(["-p", "1", "report", "R"])
    check(rc == 2 and "--pid, --comm, --system-wide and --duration do not apply" in err,
          f"-p 1 report R: exit {rc}, {err.strip()}")
    # -o consumes the next word: "report" is the recording's name, and record the sub-command.
    rc, err = usage_error(["-o", "report", "record", "-p", "1", "--summary"])
    check(rc == 2 and "--summary and --duty keep counts" in err, f"-o report record: exit {rc}, {err.strip()}")


def test_install():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k != "MFLAGS"}
    bpf = open(os.path.join(ROOT, ".output", "dlbpf.bpf.o"), "rb").read()
    with tempfile.TemporaryDirectory() as dest:
        p = run(["make", "-s", "-C", ROOT, "install", f"DESTDIR={dest}", "PREFIX=/opt/dl"], env=env)
        check(p.returncode == 0, f"make install: exit {p.returncode}: {p.stderr.strip()}")
        want = {"opt/dl/bin/dlbpf": 0o755, "opt/dl/share/man/man8/dlbpf.8": 0o644,
                "opt/dl/share/bash-completion/completions/dlbpf": 0o644}
        got = {}
        for top, _, files in os.walk(dest):
            for f in files:
                path = os.path.join(top, f)
                got[os.path.relpath(path, dest)] = os.stat(path).st_mode & 0o7777
        check(got == want, f"make install installed {got}")
        binary = os.path.join(dest, "opt/dl/bin/dlbpf")
        if os.path.exists(binary):
            # The BPF object travels inside the binary, byte for byte.
            check(bpf in open(binary, "rb").read(), "the installed binary lacks the BPF object")
        p = run(["make", "-s", "-C", ROOT, "uninstall", f"DESTDIR={dest}", "PREFIX=/opt/dl"], env=env)
        left = [os.path.join(t, f) for t, _, fs in os.walk(dest) for f in fs]
        check(p.returncode == 0 and not left, f"make uninstall: exit {p.returncode}, left {left}")


def main():
    if not os.access(DLBPF, os.X_OK):
        print(f"FAIL {DLBPF} is not built", file=sys.stderr)
        print("test_manpage: 0 passed, 1 failed")
        return 1
    for test in (test_options_match, test_groff_renders, test_version, test_completion,
                 test_subcommand_after_options, test_install):
        test()
    print(f"test_manpage: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
