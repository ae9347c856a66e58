#!/usr/bin/env python3
"""The documents a user reads, kept in step with the binary and with each other.

- doc/manual.md's Options tables list exactly the options of `dlbpf --help` (and of
  each sub-command's --help), spelled the same; its Sub-commands table names exactly
  the sub-commands --help names, as the man page's COMMANDS does.
- No option is mentioned anywhere in README.md, doc/manual.md or doc/dlbpf.8 that
  --help lacks (a removed or renamed option leaves no stale mention), except the
  other programs' options listed in FOREIGN.
- Every relative link in the Markdown documents resolves to a file or folder of this
  repository, and every #anchor to a heading of its target.
- README.md stays a front door (at most 300 lines), and the make targets its
  commands name exist.
Needs ./dlbpf built (make test-unit builds it).
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_manpage import DLBPF, MANPAGE, ROOT, help_options, roff_text, run  # noqa: E402

README = os.path.join(ROOT, "README.md")
MANUAL = os.path.join(ROOT, "doc", "manual.md")
# The Markdown a user is pointed at: the front door, doc/, and the tools' and stages' READMEs.
MARKDOWN = [README] + sorted(glob.glob(os.path.join(ROOT, "doc", "*.md"))) + sorted(
    glob.glob(os.path.join(ROOT, "tools", "*", "README.md"))) + sorted(
    glob.glob(os.path.join(ROOT, "user", "**", "README.md"), recursive=True))
README_MAX_LINES = 300

# Long options these documents give to programs other than dlbpf: option -> whose.
FOREIGN = {
    "--disk": "tools/vm/run (README, Where it runs)",
    "--scenario": "the demo's workload, tests/workloads/train",
    "--variant": "debootstrap's, in make test-fresh (manual, Building)",
}

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL", what, file=sys.stderr)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def section(text, title, level=2):
    """The body of the Markdown section `title` (up to the next heading of its level or above)."""
    m = re.search(rf"^{'#' * level} {re.escape(title)}\n(.*?)(?=^#{{1,{level}}} |\Z)", text, re.M | re.S)
    return m.group(1) if m else None


def without_code_blocks(text):
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def help_text(args):
    p = run([DLBPF] + args)
    return p.stdout


def subcommands_in_help():
    """record, report, features: the words after `dlbpf` in --help's synopsis that are not options."""
    text = help_text(["--help"])
    subs = set()
    for line in text.splitlines():
        m = re.match(r"^\s+dlbpf (?:\[OPTIONS\] )?([a-z]+)\b", line)
        if m:
            subs.add(m.group(1))
    return subs


def all_help_options():
    """--help's options, with each sub-command's --help's: they are meant to be the same list."""
    opts = help_options()
    for sub in sorted(subcommands_in_help()):
        table = help_text([sub, "--help"]).split("Mandatory or optional arguments")[0]
        found = set()
        for line in table.splitlines():
            m = re.match(r"^ {2}(?:(-\S), | {4})\s*(--[a-z][\w-]*)(?:=(\S+))?", line)
            if m:
                found.add((m.group(1) or "", m.group(2), m.group(3) or ""))
        check(found == opts, f"dlbpf {sub} --help lists other options than --help: {sorted(found ^ opts)}")
        opts |= found
    return opts


# A row of the manual's options tables: | `-p`, `--pid=PID` | ... |  or  | `--summary` | ... |
ROW = re.compile(r"^\| (?:`(-\S)`, )?`(--[a-z][\w-]*)(?:=([^`]+))?` \|")


def manual_options():
    body = section(read(MANUAL), "Options")
    if body is None:
        return None, []
    found, bad = set(), []
    for line in body.splitlines():
        if not line.startswith("| ") or line.startswith("| option ") or line.startswith("|---"):
            continue
        m = ROW.match(line)
        if m:
            found.add((m.group(1) or "", m.group(2), m.group(3) or ""))
        else:
            bad.append(line[:60])
    return found, bad


def test_manual_options_match():
    in_help = all_help_options()
    in_manual, unparsed = manual_options()
    check(in_manual is not None, "doc/manual.md has no '## Options' section")
    if in_manual is None:
        return
    check(len(in_help) >= 20, f"--help lists only {len(in_help)} options: its format changed?")
    check(not unparsed, f"doc/manual.md Options rows that are not an option: {unparsed}")
    check(not in_help - in_manual, f"in --help, missing from doc/manual.md: {sorted(in_help - in_manual)}")
    check(not in_manual - in_help, f"in doc/manual.md, not in --help: {sorted(in_manual - in_help)}")


def long_options_mentioned(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)", text))


def man_text(path):
    """The man page's words as printed, fonts and escapes dropped."""
    out = []
    for line in read(path).splitlines():
        if line.startswith('.\\"'):
            continue
        line = re.sub(r"\\f[BIRP]", "", line).replace("\\-", "-").replace("\\&", "")
        out.append(line)
    return "\n".join(out)


def test_no_stale_options():
    known = {long_ for _, long_, _ in all_help_options()}
    for path, text in ((README, read(README)), (MANUAL, read(MANUAL)), (MANPAGE, man_text(MANPAGE))):
        stray = long_options_mentioned(text) - known - set(FOREIGN)
        check(not stray, f"{os.path.relpath(path, ROOT)} mentions options --help lacks: {sorted(stray)}")
    # And FOREIGN holds only what is still needed, and nothing dlbpf has itself.
    everywhere = long_options_mentioned(read(README) + read(MANUAL) + man_text(MANPAGE))
    check(not set(FOREIGN) & known, f"FOREIGN lists dlbpf's own options: {sorted(set(FOREIGN) & known)}")
    check(set(FOREIGN) <= everywhere, f"FOREIGN lists options no document mentions: {sorted(set(FOREIGN) - everywhere)}")


def test_subcommands_match():
    in_help = subcommands_in_help()
    check({"record", "report", "features"} <= in_help, f"--help names the sub-commands {sorted(in_help)}")
    body = section(read(MANUAL), "Sub-commands") or ""
    in_manual = set(re.findall(r"^\| `dlbpf ([a-z]+)\b", body, re.M))
    check(in_manual == in_help, f"doc/manual.md's Sub-commands {sorted(in_manual)}, --help's {sorted(in_help)}")
    lines = read(MANPAGE).splitlines()
    start = lines.index(".SH COMMANDS")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(".SH "))
    in_page = {roff_text(lines[i + 1]) for i in range(start, end) if lines[i] == ".TP"}
    check(in_page == in_help, f"doc/dlbpf.8's COMMANDS {sorted(in_page)}, --help's {sorted(in_help)}")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for line in without_code_blocks(read(path)).splitlines():
        m = re.match(r"^#{1,6} (.+?)\s*#*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            out.add(s if n == 0 else f"{s}-{n}")
            seen[s] = n + 1
    return out


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_links_resolve():
    count = 0
    for path in MARKDOWN:
        here = os.path.relpath(path, ROOT)
        text = without_code_blocks(read(path))
        check("../shared" not in text and "](shared/" not in text, f"{here} points into a shared folder users lack")
        for target in LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):     # http:, https:, mailto:
                continue
            count += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            inside = os.path.commonpath([ROOT, dest]) == ROOT
            check(inside and os.path.exists(dest), f"{here}: link {target} leads to no file of the repository")
            if anchor and inside and dest.endswith(".md") and os.path.isfile(dest):
                check(anchor in anchors(dest), f"{here}: link {target}: no heading #{anchor} in "
                      f"{os.path.relpath(dest, ROOT)}")
    check(count >= 20, f"only {count} relative links found: the link pattern broke?")


def test_readme_front_door():
    text = read(README)
    n = len(text.splitlines())
    check(n <= README_MAX_LINES, f"README.md has {n} lines, over {README_MAX_LINES}: move detail into doc/")
    check(len(re.findall(r"^## Where it runs$", text, re.M)) == 1, "README.md lacks one '## Where it runs' section")
    makefiles = read(os.path.join(ROOT, "Makefile")) + "".join(
        read(p) for p in glob.glob(os.path.join(ROOT, "**", "*.mk"), recursive=True))
    targets = set(re.findall(r"^([a-z][\w-]*):", makefiles, re.M))
    named = set(re.findall(r"^make ([a-z][\w-]*)", section(text, "Two commands") or "", re.M))
    check({"demo", "test"} <= named, f"README.md's Two commands name make {sorted(named)}")
    check(named <= targets, f"README.md names make targets the Makefiles lack: {sorted(named - targets)}")


def main():
    if not os.access(DLBPF, os.X_OK):
        print(f"FAIL {DLBPF} is not built", file=sys.stderr)
        print("test_docs: 0 passed, 1 failed")
        return 1
    for test in (test_manual_options_match, test_no_stale_options, test_subcommands_match,
                 test_links_resolve, test_readme_front_door):
        test()
    print(f"test_docs: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
