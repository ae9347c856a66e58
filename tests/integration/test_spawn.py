#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""What dlbpf counts of a command it starts (`dlbpf -- COMMAND`): the command is traced from its
exec, so what the exec itself reads (the program's pages, before its first instruction) is the
job's, as /proc/PID/io counts it. Run as root."""
import os
import re
import subprocess

from harness import WORK, Skipped, check, load_summary, main, run_dlbpf

CAT = "/bin/cat"


def drop_cached(paths):
    """Drops these files' clean pages from the page cache (POSIX_FADV_DONTNEED): only these, never the
    machine's whole cache. Pages another process maps stay (libc's, mostly): the truth says what was read."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def linked_libraries(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    return sorted({m for m in re.findall(r"(/\S+)", out) if os.path.exists(m)})


def test_cat_proc_self_io():
    """`dlbpf -- cat /proc/self/io` with cat and its libraries out of the page cache: the read_bytes
    cat prints (the kernel's count for the whole process, its exec included) equal the disk bytes
    dlbpf gives cat, exactly: both count the bytes of the reads the task submitted (/proc at the page
    cache's readahead, dlbpf at each request's start and each bio of the task merged into one), and
    nothing else reads on cat's behalf. Before the fix the exec's reads (cat's own pages) were lost."""
    base = os.path.join(WORK, f"spawn-{os.getpid()}")
    drop_cached([os.path.realpath(CAT)] + linked_libraries(CAT))
    rc, out, err = run_dlbpf(["--json", base + ".json", "--", CAT, "/proc/self/io"])
    check(rc == 0, f"dlbpf exited {rc}: {err[-2000:]}")
    m = re.search(r"^read_bytes: (\d+)$", out, re.M)
    check(m, f"cat printed no read_bytes: {out[:500]}")
    truth = int(m.group(1))
    if truth == 0:
        # Another process held cat's pages mapped, so none could be dropped: nothing read to compare.
        raise Skipped("cat read nothing from disk (its pages stayed cached: mapped by another process)")
    s = load_summary(base + ".json")
    cats = [p for p in s["processes"] if p["comm"] == "cat"]
    check(len(cats) == 1, f"{len(cats)} processes named cat: {[(p['pid'], p['comm']) for p in s['processes']]}")
    got = cats[0]["io"]["read_bytes"]
    check(got == truth, f"dlbpf counts {got} B read by cat, /proc/self/io {truth} B")
    return f"{got} B read, as /proc says"


if __name__ == "__main__":
    main()
