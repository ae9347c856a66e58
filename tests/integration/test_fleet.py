#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Fleet: the container, pod and Slurm job of a traced process, from cgroups this test makes (cgroup v2
with kubelet's systemd-driver names, a v1 hierarchy it mounts with the cgroupfs driver's, a Slurm step),
checked in the JSON summary, the report and the Prometheus labels against the ids the test chose. Run as
root."""
import os
import random
import shutil
import subprocess
import time
import uuid

from harness import GPUSIM_DIR, WORK, Dlbpf, Skipped, check, main, workload
from test_metrics import free_port, parse_exposition, scrape


def cgroup2_root():
    """Where cgroup v2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host), or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[0] == "cgroup2":
                return left.split()[4]
    return None


class Cgroup:
    """A cgroup path made under root (removed, deepest first, by remove())."""

    def __init__(self, root, rel):
        self.root, self.rel = root, rel.strip("/")
        self.path = os.path.join(root, self.rel)
        os.makedirs(self.path)

    def remove(self):
        parts = self.rel.split("/")
        for i in range(len(parts), 0, -1):
            try:
                os.rmdir(os.path.join(self.root, *parts[:i]))
            except OSError:
                break   # not empty (a sibling of another run) or gone


def trace_in(cg, tag, steps=8, metrics=False):
    """dlbpf runs `sh` that moves itself into cg, then runs train (forked and exec'd there); the job lingers
    until go so that a scrape sees its last records. Returns (summary, stdout, train's pid, scrape or None)."""
    d = os.path.join(WORK, f"fleet-{tag}-{os.getpid()}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    done, go, pidfile = os.path.join(d, "done"), os.path.join(d, "go"), os.path.join(d, "train.pid")
    script = ('echo $$ > "$CG/cgroup.procs" || exit 1; "$@" & echo $! > "$PIDFILE"; wait $!; touch "$DONE"; '
              'while [ ! -e "$GO" ]; do sleep 0.05; done')
    env = dict(os.environ, LD_LIBRARY_PATH=GPUSIM_DIR, CG=cg.path, DONE=done, GO=go, PIDFILE=pidfile)
    port = free_port()
    args = (["--metrics", str(port)] if metrics else []) + ["--step-on", "train_step_begin", "--", "sh", "-c", script,
                                                           "sh", workload("train"), "--scenario", "gpu",
                                                           "--steps", str(steps), "--quiet"]
    dl = Dlbpf(args, env=env)
    dl.started()
    end = time.monotonic() + 60
    while not os.path.exists(done) and time.monotonic() < end and dl.proc.poll() is None:
        time.sleep(0.05)
    check(os.path.exists(done), f"the job did not finish: {dl.stderr[-1500:] if dl.proc.poll() is not None else ''}")
    samples = None
    if metrics:
        code, _, body = scrape(port)
        check(code == 200, f"scrape: HTTP {code}")
        samples = parse_exposition(body)
    open(go, "w").close()
    rc = dl.wait(timeout=60)
    check(rc == 0, f"dlbpf exited {rc}: {dl.stderr[-2000:]}")
    # The subshell that ran train: its pid is what `$!` said (the shell forks, the child execs train).
    pid = int(open(pidfile).read())
    return dl.summary(), dl.stdout, pid, samples


def proc_of(summary, pid):
    got = [p for p in summary["processes"] if p["pid"] == pid]
    check(len(got) == 1, f"pid {pid} is not in the summary ({[p['pid'] for p in summary['processes']]})")
    return got[0]


def hexid(n=64):
    return "".join(random.choice("0123456789abcdef") for _ in range(n))


def test_kubepods_v2_systemd():
    """A kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope cgroup (v2): its container and pod in the
    JSON, the report and every per-process Prometheus series of the job; the shell that moved itself there
    but did not exec after has none (read at start, again only at an exec)."""
    root = cgroup2_root()
    if not root:
        raise Skipped("no cgroup v2 mounted")
    pod, cid = str(uuid.uuid4()), hexid()
    qos = random.choice(["burstable", "besteffort"])
    cg = Cgroup(root, f"kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{pod.replace('-', '_')}.slice/"
                      f"cri-containerd-{cid}.scope")
    try:
        summary, out, pid, samples = trace_in(cg, "v2", metrics=True)
    finally:
        cg.remove()
    p = proc_of(summary, pid)
    check(p.get("container") == {"id": cid, "runtime": "containerd", "pod_uid": pod},
          f"container {p.get('container')}, the test made {cid} in pod {pod}")
    check(len(summary["steps"]) > 0 and {s["pid"] for s in summary["steps"]} == {pid}, "no steps of the job")
    shell = [q for q in summary["processes"] if q["pid"] != pid and q["comm"] == "sh"]
    check(shell and all("container" not in q for q in shell), f"the shell: {[q.get('container') for q in shell]}")
    check(f"container {cid} (containerd) pod {pod}" in out, "the report does not name the container and pod")
    series = [dict(lab) for (name, lab), v in samples.items() if ("pid", str(pid)) in lab]
    check(series, f"no series of pid {pid}")
    bad = [s for s in series if s.get("container_id") != cid or s.get("pod_uid") != pod]
    check(not bad, f"{len(bad)} of {len(series)} series of the job lack its labels: {bad[:2]}")
    return f"pid {pid}: container {cid[:12]} pod {pod}, on {len(series)} series"


def mount_v1():
    """A named cgroup v1 hierarchy (no controllers) mounted for this test, or Skipped."""
    path = os.path.join(WORK, f"cgv1-{os.getpid()}")
    os.makedirs(path, exist_ok=True)
    # One name for every run: the kernel keeps a v1 hierarchy after its last unmount, and mounting the
    # name again attaches that one instead of making another.
    r = subprocess.run(["mount", "-t", "cgroup", "-o", "none,name=dlbpf_test", "cgroup", path],
                       capture_output=True, text=True)
    if r.returncode:
        os.rmdir(path)
        raise Skipped(f"cannot mount a cgroup v1 hierarchy: {r.stderr.strip()}")
    return path


def unmount_v1(path):
    subprocess.run(["umount", path], capture_output=True)
    os.rmdir(path)


def test_kubepods_v1_cgroupfs():
    """The cgroupfs driver's /kubepods/<qos>/pod<uid>/<id> in a v1 hierarchy: container and pod (no runtime)."""
    root = mount_v1()
    pod, cid = str(uuid.uuid4()), hexid()
    try:
        cg = Cgroup(root, f"kubepods/besteffort/pod{pod}/{cid}")   # pod and id unique: runs may share it
        try:
            summary, out, pid, _ = trace_in(cg, "v1")
        finally:
            cg.remove()
    finally:
        unmount_v1(root)
    p = proc_of(summary, pid)
    check(p.get("container") == {"id": cid, "pod_uid": pod}, f"container {p.get('container')}, made {cid} {pod}")
    check(f"container {cid} pod {pod}" in out, "the report does not name the container and pod")
    return f"pid {pid}: container {cid[:12]} pod {pod}"


def test_slurm_step():
    """A Slurm step's cgroup (v2: slurmstepd.scope/job_N/step_0/user/task_0): the job in the JSON and report."""
    root = cgroup2_root()
    if not root:
        raise Skipped("no cgroup v2 mounted")
    job = str(random.randrange(1, 10 ** 7))
    cg = Cgroup(root, f"system.slice/slurmstepd.scope/job_{job}/step_0/user/task_{os.getpid()}")
    try:
        summary, out, pid, _ = trace_in(cg, "slurm")
    finally:
        cg.remove()
    p = proc_of(summary, pid)
    check(p.get("container") == {"slurm_job": job}, f"container {p.get('container')}, the test made job {job}")
    check(f"slurm job {job}" in out, "the report does not name the job")
    return f"pid {pid}: slurm job {job}"


if __name__ == "__main__":
    main()
