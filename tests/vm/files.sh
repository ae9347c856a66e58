#!/usr/bin/env bash
# The files source inside a kernel of tools/vm: its tests by every mechanism the kernel offers
# (fentry, kprobes, syscall tracepoints: test_files_every_mechanism), what the kernel lists of
# dlbpf's perf events while it traces (bpftool perf list: no syscall tracepoint holds a program
# unless the fallback runs), and with --bench, tools/bench tables 7 and 9 (what untraced processes pay and what a read costs,
# by mechanism) with the tables copied to the output share. Build on the host first:
#   tools/vm/run --disk 256 --timeout 1200 6.12 tests/vm/files.sh --bench   (--bench-only: the tables alone)
set -u
cd "$(dirname "$0")/../.."
if [ -n "${DLBPF_VM_DISK_MNT:-}" ]; then
  export DLBPF_TEST_WORK=$DLBPF_VM_DISK_MNT/itest TMPDIR=$DLBPF_VM_DISK_MNT/tmp
  mkdir -p "$DLBPF_TEST_WORK" "$TMPDIR"
fi
[ "${DLBPF_VM_KERNEL:-host}" = host ] || export DLBPF_TEST_EMULATED=1
rc=0
run() { echo "--- $*"; "$@" || rc=1; }
bench() {
  run python3 tools/bench/bench.py --only 7,9 --rounds "${DLBPF_BENCH_ROUNDS:-3}" --pipe-loops "${DLBPF_BENCH_LOOPS:-20000}"
  [ -n "${DLBPF_VM_OUT:-}" ] && cp .output/bench/results.md "$DLBPF_VM_OUT/bench-${DLBPF_VM_KERNEL:-host}.md"
}
# --bench-only: the tables alone (a second boot after a first run of the tests).
if [ "${1:-}" = --bench-only ]; then
  bench
  exit $rc
fi
s=$(date +%s.%N); run ./dlbpf features; echo "dlbpf features took $(echo "$(date +%s.%N) - $s" | bc) s (its probes: a trial fentry attach, a trial kprobe)"
# Detach by mechanism: dlbpf's own account (-v).
for without in "" without-fentry without-fentry,without-kprobes; do
  echo "--- detach, DLBPF_FORCE_TWINS=$without"
  env ${without:+DLBPF_FORCE_TWINS=$without} ./dlbpf -q -v -- sleep 1 2>&1 | grep -E "files:|detached every probe" | cut -c1-160
done
# The kernel's own list while dlbpf traces a sleeping command, by the mechanism dlbpf chose.
echo "--- bpftool perf list while dlbpf runs (default mechanism)"
./dlbpf -q -v -- sleep 8 2>"${TMPDIR:-/tmp}/files-vm.err" >/dev/null &
dl=$!
for _ in $(seq 60); do grep -q "tracing " "${TMPDIR:-/tmp}/files-vm.err" 2>/dev/null && break; sleep 0.5; done
bpftool perf list | grep "^pid $dl " | grep -v uprobe
echo "syscall tracepoints holding a program of dlbpf's: $(bpftool perf list | grep "^pid $dl " | grep " sys_e" | awk '{print $NF}' | sort -u | wc -l)"
bpftool link list | grep -A1 -E "tracing|kprobe" | head -40
wait $dl
grep -E "files:|detached every probe" "${TMPDIR:-/tmp}/files-vm.err" | cut -c1-160
run python3 tests/integration/test_files.py
run python3 tests/integration/test_kernel_features.py test_features_command
[ "${1:-}" = --bench ] && bench

exit $rc
