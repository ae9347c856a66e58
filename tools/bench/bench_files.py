# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Table 9 of bench.py: what the files source (bpf/files.bpf.c) costs per read syscall, for a
traced reader and for an untraced one while dlbpf traces another process, by each mechanism the
kernel offers (fentry, kprobes, syscall tracepoints: user/capture/files.h)."""
import os
import resource
import signal
import subprocess
import time

from bench import DLBPF, FILES_MECHS, TMP, files_mechanisms, prog_stats, readline_until, spread, table

BLOCK = 4096
FLOOR = "tracepoint:syscalls:sys_enter_read { } tracepoint:syscalls:sys_exit_read { }"


def reader_script(path, passes):
    """A shell that waits for a line, reads path passes times in BLOCK calls (dd), says done and waits."""
    loop = f"for i in $(seq {passes}); do dd if={path} of=/dev/null bs={BLOCK} status=none; done"
    return ["sh", "-c", f"read x; {loop}; echo done; read y"]


def children_cpu_ns():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int((r.ru_utime + r.ru_stime) * 1e9)


def mech_of(variant):
    """The files mechanism a "dlbpf (M), ..." variant forces; None for the others."""
    return variant[len("dlbpf ("):variant.index(")")] if variant.startswith("dlbpf (") else None


def one_run(variant, path, passes):
    """(CPU ns of the reader, {prog: (run_time_ns, run_cnt) added}) for one variant."""
    mech = mech_of(variant)
    read_progs = FILES_MECHS[mech][1] if mech else ()
    cpu0 = children_cpu_ns()
    sh = subprocess.Popen(reader_script(path, passes), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    idle = tracer = None
    try:
        if variant.startswith("floor"):
            # Empty programs on the same two events: what the kernel's syscall-event path costs by itself.
            tracer = subprocess.Popen(["bpftrace", "-e", FLOOR], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
            readline_until(tracer.stdout, "Attaching")
            time.sleep(0.5)   # bpftrace prints the line before its attach is done
        elif variant != "untraced":
            target = sh.pid
            if "reader untraced" in variant:
                idle = subprocess.Popen(["sleep", "100000"])
                target = idle.pid
            extra = ["--no-files"] if "--no-files" in variant else []
            env = dict(os.environ)
            env.pop("DLBPF_FORCE_TWINS", None)
            if mech and FILES_MECHS[mech][0]:
                env["DLBPF_FORCE_TWINS"] = FILES_MECHS[mech][0]
            tracer = subprocess.Popen([DLBPF, "-v", "-q", "--pid", str(target)] + extra, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env)
            readline_until(tracer.stderr, "tracing ", timeout=180)
        before = prog_stats(read_progs)
        sh.stdin.write("go\n")
        sh.stdin.flush()
        sh.stdout.readline()
        after = prog_stats(read_progs)
        sh.stdin.write("end\n")
        sh.stdin.flush()
        sh.wait(timeout=60)
        # The shell and its dd's, waited for: CPU time, which a busy machine's waits for a CPU do not inflate.
        return children_cpu_ns() - cpu0, {n: (after[n][0] - before[n][0], after[n][1] - before[n][1]) for n in read_progs}
    finally:
        if tracer:
            tracer.send_signal(signal.SIGINT)
            tracer.communicate(timeout=120)
        if idle:
            idle.kill()
            idle.wait()
        if sh.poll() is None:
            sh.kill()
            sh.wait()


def bench_files(rounds, mb=16, passes=8):
    path = os.path.join(TMP, "files-cost.dat")
    with open(path, "wb") as f:
        f.write(os.urandom(mb << 20))
    reads = passes * ((mb << 20) // BLOCK + 1)   # dd's last call returns 0 at end of file
    variants = ["untraced", "floor: empty programs on sys_enter_read/sys_exit_read (bpftrace)",
                "dlbpf --no-files, reader untraced"]
    for m in files_mechanisms():
        variants += [f"dlbpf ({m}), reader untraced", f"dlbpf ({m}), reader traced"]
    loop_ns = {v: [] for v in variants}
    bpf_ns = {v: [] for v in variants}
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_were = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)   # cached from here on
        for r in range(rounds):
            for v in variants[r % len(variants):] + variants[:r % len(variants)]:
                ns, st = one_run(v, path, passes)
                loop_ns[v].append(ns / reads)
                runs = max((c for _, c in st.values()), default=0)
                if runs:
                    # Every read of the machine runs both programs: per run, enter plus exit.
                    bpf_ns[v].append(sum(t for t, _ in st.values()) / runs)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_were)
    base = loop_ns["untraced"]
    rows = []
    for v in variants:
        ratio = [x / b for x, b in zip(loop_ns[v], base)]
        rows.append([v, spread(loop_ns[v]), spread(ratio, "{:.3f}"), spread(bpf_ns[v]) if bpf_ns[v] else ""])
    return table("9. Files source: cost per read syscall (4 KiB reads of a cached file)",
                 ["variant", "reader CPU ns per read call", "ratio to untraced",
                  "BPF ns per read (entry + exit programs, bpf_stats)"],
                 rows,
                 [f"`dd bs={BLOCK}` over a {mb} MiB cached file, {passes} passes ({reads} read calls); reader CPU: "
                  "user + system time of the shell and its dd's (process starts and writes to /dev/null "
                  f"included); median [min-max] over {rounds} interleaved rounds. floor: what the kernel's "
                  "syscall-event path costs with programs that do nothing. --no-files: dlbpf without the files "
                  "source, the rest of it (sched, block) still on. dlbpf (M): its files source on mechanism M "
                  "(forced with DLBPF_FORCE_TWINS where a cheaper one is there). BPF ns: run_time_ns / run_cnt "
                  "of the read's entry and exit programs over the loop (kernel.bpf_stats_enabled), which also "
                  "counts other processes' reads meanwhile; the kernel's price of a trampoline, kprobe or "
                  "syscall event is not in it."])
