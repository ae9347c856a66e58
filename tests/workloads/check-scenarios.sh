#!/usr/bin/env bash
# Runs every train scenario on the GPU simulator with --check: each passes when
# its named phase takes at least half the step time in its own ground truth.
# Usage: check-scenarios.sh TRAIN GPUSIM_DIR TRUTH_DIR
set -u
train=$1 sim=$2 truth=$3
mkdir -p "$truth"
pass=0 fail=0
for s in gpu input disk pageable small-copies sync-copies launch host-cpu contention two-streams graph two-gpus balanced; do
  if LD_LIBRARY_PATH=$sim "$train" --scenario "$s" --check --quiet --truth "$truth/$s.jsonl"; then
    pass=$((pass + 1))
    python3 -c 'import json,sys
s=[json.loads(l) for l in open(sys.argv[1])][-1]
print("ok   - %-13s median %6.2f ms  %s %.0f%%" % (sys.argv[2], s["median_step_ns"]/1e6, s.get("expected") or "dominant " + s["dominant"], 100*(s.get("expected_share") or s["phase_share"][s["dominant"]])))' "$truth/$s.jsonl" "$s"
  else
    fail=$((fail + 1)); echo "FAIL - scenario $s"
  fi
done
echo "scenarios: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
