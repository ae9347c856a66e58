#!/bin/sh
# The arm64 guests' smoke (tools/vm/run arm64-6.1|arm64-6.12, POSIX sh: the guest has busybox,
# no bash or python of its architecture). It runs the static aarch64 release executable on the
# cross-built simulator and workloads and leaves each run's JSON summary, report and the
# workload's own truth in DLBPF_VM_OUT; tests/vm/check-arm64.py judges them on the host with the
# x86 suites' own checks. Build on the host first (make vmtest-arm64-smoke does).
#   tests/vm/arm64-smoke.sh DLBPF
set -u
dlbpf=${1:?usage: $0 DLBPF}
out=${DLBPF_VM_OUT:?run under tools/vm/run}
cross=.output-arm64
export LD_LIBRARY_PATH=$PWD/$cross/gpusim
# Sleeping waits, as the x86 suites not about waiting have them (tests/integration/harness.py): the
# simulator's default is the runtime's, spinning, and these checks are of verdicts and counts.
export GPUSIM_SCHEDULE=${GPUSIM_SCHEDULE:-blocking}
rc=0
echo "kernel: $(uname -r) ($(uname -m)), $(nproc) CPUs"
"$dlbpf" --version || rc=1
"$dlbpf" features > "$out/features.txt" 2>&1 || rc=1
cat "$out/features.txt"
# Exact counts and bytes against the workload's own (cudaLaunchKernel's 7th and 8th argument
# slots are x6 and x7 here: its grid, block and shared memory are in the truth too).
"$dlbpf" -q --json "$out/cuda_calls.json" -- "$cross/workloads/cuda_calls" \
  > "$out/cuda_calls.out" 2> "$out/cuda_calls.err" || { echo "cuda_calls: dlbpf exited $?"; rc=1; }
# Call sites: each named function's CUDA calls return into it (arm64: the return address is x30
# at entry); the checker reads the offsets back with the cross binutils.
"$dlbpf" -q --json "$out/callsites.json" -- "$cross/workloads/callsites" --steps 20 \
  > "$out/callsites.out" 2> "$out/callsites.err" || { echo "callsites: dlbpf exited $?"; rc=1; }
# The demo's scenario and the GPU-bound one: verdicts against the workload's clocks (--truth).
# ARM64_SCENARIOS narrows them (make test runs input only: see tools/vm/README.md).
for s in ${ARM64_SCENARIOS:-input gpu}; do
  # /proc/stat's steal column around the run: the tests excuse what the hypervisor took.
  head -n 1 /proc/stat > "$out/stat-$s.before"
  "$dlbpf" --json "$out/train-$s.json" -- "$cross/workloads/train" --scenario "$s" --quiet \
    --truth "$out/truth-$s.jsonl" > "$out/train-$s.out" 2> "$out/train-$s.err" ||
    { echo "train $s: dlbpf exited $?"; rc=1; }
  head -n 1 /proc/stat > "$out/stat-$s.after"
  # The same scenario untraced: the probes' own share of the phases is the difference, here.
  "$cross/workloads/train" --scenario "$s" --quiet --truth "$out/truth-$s-untraced.jsonl" > /dev/null ||
    { echo "train $s untraced: exit $?"; rc=1; }
done
# The files source by each mechanism (DLBPF_FORCE_TWINS), on the virtio disk (make's --disk):
# fileread's bytes, calls and disk bytes (/proc/self/io around each file's reads) against its
# own counts, as tests/integration/test_files.py compares them on x86. The files' sizes are
# test_files.SIZES; fileread reads the second line (done) while dlbpf drains, as a loader runs on.
if [ -n "${DLBPF_VM_DISK_MNT:-}" ]; then
  fdir=$DLBPF_VM_DISK_MNT/files
  mkdir -p "$fdir"
  for f in held.dat:1238257 a.dat:3000057 b.dat:413497 c.dat:83697 d.dat:1050631 e.dat:532489; do
    head -c "${f#*:}" /dev/urandom > "$fdir/${f%%:*}"
  done
  sync
  for m in fentry: kprobe:without-fentry tracepoint:without-fentry,without-kprobes; do
    name=${m%%:*} twins=${m#*:} fifo=$(mktemp -u)
    mkfifo "$fifo"
    env ${twins:+DLBPF_FORCE_TWINS=$twins} "$dlbpf" -q -v --json "$out/files-$name.json" -- \
      "$cross/workloads/fileread" "$fdir" --wait --io-kb 16 < "$fifo" > "$out/files-$name.out" \
      2> "$out/files-$name.err" &
    exec 3> "$fifo"
    echo go >&3
    # Its truth lines (parent and child), then its second ready: the reads are done.
    for _ in $(seq 600); do [ "$(grep -c ready "$out/files-$name.out")" -ge 2 ] && break; sleep 0.1; done
    sleep 1
    echo done >&3
    exec 3>&-
    wait $! || { echo "files $name: dlbpf exited $?"; rc=1; }
    rm -f "$fifo"
  done
  # The return probes dlbpf made in tracefs for kprobes, all gone once it exits.
  cat /sys/kernel/tracing/kprobe_events /sys/kernel/debug/tracing/kprobe_events > "$out/kprobe_events-after.txt" 2>/dev/null
fi
# Python lines: tests/workloads/pytrain.py under Debian's arm64 CPython 3.11, unpacked on the host
# by tools/vm/fetch-arm64-python (tools/setup-deps.sh runs it); its own frames are the truth.
py=${ARM64_PYTHON:-/var/cache/dlbpf-vm/arm64-python}
if [ -x "$py/usr/bin/python3.11" ]; then
  LD_LIBRARY_PATH=$py/usr/lib/aarch64-linux-gnu:$py/lib/aarch64-linux-gnu:$LD_LIBRARY_PATH \
    "$dlbpf" -v -q --json "$out/pytrain.json" -- "$py/usr/bin/python3.11" tests/workloads/pytrain.py \
    "$PWD/$cross/gpusim/libcudart.so.13" --steps 60 > "$out/pytrain.out" 2> "$out/pytrain.err" ||
    { echo "pytrain: dlbpf exited $?"; rc=1; }
else
  echo "no $py/usr/bin/python3.11: run tools/vm/fetch-arm64-python" > "$out/pytrain.err"
  rc=1
fi
# Probe safety: a function whose first instruction arm64 single-steps out of line, called
# PROBE_CALLS times under a uprobe (--step-on), each result checked by the workload itself.
"$dlbpf" -q --keep-steps=10 --step-on probe_stress_target --json "$out/probe_stress.json" -- \
  "$cross/workloads/probe_stress" "${PROBE_CALLS:-200000}" > "$out/probe_stress.out" 2> "$out/probe_stress.err" ||
  { echo "probe_stress: dlbpf exited $?"; rc=1; }
# glibc's pthread keys (CPython's thread state lives under one) through aarch64's TLS layout.
"$cross/vm/glibc_keys" > "$out/glibc_keys.out" 2>&1 || { echo "glibc_keys: exit $?"; rc=1; }
# The release executable alone in a root: --version, and cuda_calls traced there with only
# the workload's own libraries beside it (its loader lists them; no libbpf, no libelf).
root=$(mktemp -d)
mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/w"
cp "$dlbpf" "$root/dlbpf"
cp "$cross/workloads/cuda_calls" "$root/w/cuda_calls"
for lib in $(/lib/ld-linux-aarch64.so.1 --list "$cross/workloads/cuda_calls" | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}'); do
  mkdir -p "$root$(dirname "$lib")"
  cp "$lib" "$root$lib"
done
find "$root" -type f | sed "s|^$root||" | sort > "$out/chroot-files.txt"
chroot "$root" /dlbpf --version > "$out/chroot-version.txt" 2>&1 || { echo "chroot --version: exit $?"; rc=1; }
"$dlbpf" --version > "$out/version.txt" 2>&1
mount -t proc proc "$root/proc" && mount -o rbind /sys "$root/sys" && mount -o rbind /dev "$root/dev" &&
  LD_LIBRARY_PATH=$(dirname "$(grep libcudart "$out/chroot-files.txt")") \
  chroot "$root" /dlbpf -q --json /tmp/summary.json -- /w/cuda_calls > "$out/chroot-cuda_calls.out" \
    2> "$out/chroot-cuda_calls.err" || { echo "chroot cuda_calls: exit $?"; rc=1; }
cp "$root/tmp/summary.json" "$out/chroot-cuda_calls.json" 2>/dev/null
umount -l "$root/dev" "$root/sys" "$root/proc" 2>/dev/null
for f in "$out"/*.err; do
  [ -s "$f" ] && { echo "--- $f"; tail -n 5 "$f"; }
done
exit $rc
