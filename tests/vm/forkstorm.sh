#!/usr/bin/env bash
# Processes that come and go, inside a kernel of tools/vm (issue 44): test_forkstorm.py, then the
# attach and detach figures of one storm per way of probing (dlbpf -vv's own account: each
# library's attach, each batch of the detacher). Build on the host first: the guests only run.
#   tools/vm/run 6.1 tests/vm/forkstorm.sh
set -u
cd "$(dirname "$0")/../.."
[ "${DLBPF_VM_KERNEL:-host}" = host ] || export DLBPF_TEST_EMULATED=1
rc=0
python3 tests/integration/test_forkstorm.py || rc=1
for i in 1 2; do
  echo "--- untraced, 100 children: $(.output/workloads/forkstorm --children 100 --parallel 20 | grep -o '"wall_s[^,]*\|"max_start_delay_ms[^,]*' | tr '\n' ' ')"
done
for mode in file process; do
  env=()
  [ $mode = process ] && env=(DLBPF_TEST_PROCESS_PROBES=1)
  log=$(mktemp)
  env "${env[@]}" ./dlbpf -vv -q -- .output/workloads/forkstorm --children 100 --parallel 20 >"$log.out" 2>"$log" || rc=1
  echo "--- $mode probes, 100 children: $(grep -o '"wall_s[^,]*\|"max_start_delay_ms[^,]*' "$log.out" | tr '\n' ' ')"
  grep -o 'CUDA probes on [^,]*' "$log" | head -1
  # Attach: per process, the sum of its libraries' attach times.
  grep -o 'pid [0-9]*: attached .*(\([0-9.]*\) ms)' "$log" | sed 's/pid \([0-9]*\):.*(\([0-9.]*\) ms)/\1 \2/' |
    awk '{t[$1]+=$2} END {n=0; for (p in t) {n++; s+=t[p]; if (t[p]>m) m=t[p]} if (n) printf "attach: %d processes attached to, %.2f ms each on average, %.2f ms at most\n", n, s/n, m}'
  grep 'detacher:' "$log" | sed 's/^dlbpf: debug: //'
  grep 'detached every probe' "$log" | sed 's/^dlbpf: //'
  rm -f "$log" "$log.out"
done
exit $rc
