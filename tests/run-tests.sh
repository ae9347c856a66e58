#!/usr/bin/env bash
# Runs each test command given, shows its output, and adds up the
# "N passed, N failed" lines they print. A command that exits non-zero
# without such a line counts as one failure. Exits non-zero on any failure.
set -u
total_pass=0 total_fail=0
for cmd in "$@"; do
  echo "=== $cmd"
  out=$(mktemp)
  $cmd 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  line=$(grep -Eo '[0-9]+ passed, [0-9]+ failed' "$out" | tail -n1)
  rm -f "$out"
  if [ -n "$line" ]; then
    p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
  else
    p=0; f=0
  fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "=== $cmd exited with status $rc"
    f=1
  fi
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
done
echo
echo "total: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
