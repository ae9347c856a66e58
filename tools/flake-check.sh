#!/usr/bin/env bash
# Runs one test suite N times in a row, by default with a busy-looping process
# pinned to CPU 1 (the second core of the 2-CPU VMs), and reports how many runs
# failed and which checks failed in them. Root, from the repository root, after
# `make test-all` has built everything.
#
# Usage: tools/flake-check.sh [--idle] SUITE [N]
#   SUITE: scenarios | sched | modes | budget | gpusim | gpusim-asan | 'any command'
#   N:     runs (default 20)
#   --idle: no busy loop
# Prints one line per run and a last line "SUITE: F of N runs failed", with the
# load average before and after (other users of the machine show there).
set -u
busy=1
if [ "${1:-}" = "--idle" ]; then
  busy=0
  shift
fi
suite=${1:?usage: tools/flake-check.sh [--idle] SUITE [N]}
n=${2:-20}
case $n in
  '' | *[!0-9]* | 0) echo "flake-check: N must be a positive number, not '$n'" >&2; exit 2 ;;
esac
case $suite in
  scenarios) cmd="python3 tests/integration/test_scenarios.py" ;;
  sched) cmd="python3 tests/integration/test_dlbpf.py test_sched_uncontended test_sched_contended" ;;
  modes) cmd="python3 tests/integration/test_modes.py" ;;
  budget) cmd="python3 tests/integration/test_budget.py" ;;
  gpusim) cmd="env LD_LIBRARY_PATH=.output/gpusim .output/tests/test_gpusim" ;;
  gpusim-asan) cmd="env ASAN_OPTIONS=detect_leaks=1 LD_LIBRARY_PATH=.output/gpusim-asan .output/tests/test_gpusim-asan" ;;
  *) cmd=$suite ;;
esac

spinner=
stop_spinner() {
  if [ -n "$spinner" ]; then
    kill "$spinner" 2>/dev/null
    wait "$spinner" 2>/dev/null
    spinner=
  fi
}
trap stop_spinner EXIT
trap 'exit 130' INT TERM
if [ "$busy" = 1 ]; then
  taskset -c 1 sh -c 'while :; do :; done' &
  spinner=$!
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
failed=0
log=$(mktemp)
for i in $(seq 1 "$n"); do
  start=$(date +%s%N)
  $cmd >"$log" 2>&1
  rc=$?
  secs=$(( ($(date +%s%N) - start + 500000000) / 1000000000 ))
  summary=$(grep -Eo '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
  if [ "$rc" -ne 0 ]; then
    failed=$((failed + 1))
    printf 'run %2d: FAIL (%s, exit %d, %d s)\n' "$i" "${summary:-no summary}" "$rc" "$secs"
    grep -E '^(FAIL|Traceback)' "$log" | sed 's/^/    /' | cut -c1-300
  else
    printf 'run %2d: ok   (%s, %d s)\n' "$i" "$summary" "$secs"
  fi
done
rm -f "$log"
stop_spinner
echo "$suite: $failed of $n runs failed ($([ "$busy" = 1 ] && echo "CPU 1 busy" || echo "no busy loop");" \
  "load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg))"
[ "$failed" -eq 0 ]
