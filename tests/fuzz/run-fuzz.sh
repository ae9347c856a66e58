#!/usr/bin/env bash
# Usage: run-fuzz.sh SECONDS HARNESS...
# Runs each libFuzzer harness for SECONDS from its corpus (.output/fuzz/corpus/NAME, where
# new inputs go), its checked-in regression inputs (tests/fuzz/seeds/NAME) and the built
# seeds (.output/fuzz/seeds/NAME). One check per harness: no crash, leak, sanitizer report
# or hang. Prints "fuzz_NAME: N passed, N failed" with the executions, then the total;
# each run's executions are appended to .output/fuzz/executions.log.
set -u
secs=${1:?usage: run-fuzz.sh SECONDS HARNESS...}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/.output/fuzz
pass=0 fail=0
for bin in "$@"; do
  name=$(basename "$bin")
  short=${name#fuzz_}
  corpus=$out/corpus/$short
  artifacts=$out/artifacts/$short
  mkdir -p "$corpus" "$artifacts"
  dirs=("$corpus")
  for d in "$root/tests/fuzz/seeds/$short" "$out/seeds/$short"; do
    [ -d "$d" ] && dirs+=("$d")
  done
  log=$out/$name.log
  # -timeout: an input that takes 10 s is a hang (the largest seed replays in milliseconds).
  # -close_fd_mask=3: the collector's own messages are dropped; libFuzzer's and the
  # sanitizers' reports still reach the log.
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  execs=$(awk '/stat::number_of_executed_units:/ {n = $2} END {print n + 0}' "$log")
  if [ "$execs" -eq 0 ]; then   # no final stats after a crash: the last status line's count
    execs=$(grep -Eo '^#[0-9]+' "$log" | tail -n1 | tr -d '#')
    execs=${execs:-0}
  fi
  units=$(grep -Eo 'corp: [0-9]+' "$log" | tail -n1 | grep -Eo '[0-9]+')
  echo "$(date '+%F %T') $name $execs executions in ${secs}s rc=$rc" >>"$out/executions.log"
  total=$(awk -v n="$name" '$3 == n {t += $4} END {printf "%d", t}' "$out/executions.log")
  if [ "$rc" -eq 0 ]; then
    pass=$((pass + 1))
    echo "$name: 1 passed, 0 failed ($execs executions in ${secs}s, corpus ${units:-0} inputs;" \
      "$total over every run logged)"
  elif [ "$rc" -eq 72 ]; then   # libFuzzer's status for SIGINT or SIGTERM: stopped, not failed by an input
    fail=$((fail + 1))
    echo "$name: 0 passed, 1 failed (interrupted after $execs executions)"
    continue
  else
    fail=$((fail + 1))
    echo "$name: 0 passed, 1 failed (exit $rc after $execs executions; log $log)"
    grep -E 'ERROR:|SUMMARY:|runtime error|^fuzz_|Test unit written|timeout|out-of-memory' "$log" | head -n 20 | sed 's/^/  /'
    echo "  reproduce: $bin $artifacts/<file above>"
  fi
done
[ $# -gt 1 ] && echo "fuzz total: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
