#!/usr/bin/env bash
# Runs each test command given, shows its output, and adds up the
# "N passed, N failed" lines they print. A command that exits non-zero
# without such a line counts as one failure. Exits non-zero on any failure.
#
# Commands after --self test the test equipment itself (the GPU simulator, the
# workloads' own checks), with no dlbpf involved; commands after --dlbpf (the
# default) test dlbpf. The two are counted apart, and the closing line gives
# dlbpf's: a check there is one assertion (loops are checked once each), so that
# count is the number of substantive checks.
set -u
kind=dlbpf
declare -A pass=([dlbpf]=0 [self]=0) fail=([dlbpf]=0 [self]=0)
for cmd in "$@"; do
  case $cmd in
    --self) kind=self; continue ;;
    --dlbpf) kind=dlbpf; continue ;;
  esac
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
  pass[$kind]=$((pass[$kind] + p)); fail[$kind]=$((fail[$kind] + f))
done
echo
echo "dlbpf checks: ${pass[dlbpf]} passed, ${fail[dlbpf]} failed"
echo "simulator/workload self-checks: ${pass[self]} passed, ${fail[self]} failed"
echo "total: $((pass[dlbpf] + fail[dlbpf])) substantive dlbpf checks: ${pass[dlbpf]} passed, ${fail[dlbpf]} failed" \
  "(and $((pass[self] + fail[self])) self-checks of the simulator and workloads: ${fail[self]} failed)"
[ "${fail[dlbpf]}" -eq 0 ] && [ "${fail[self]}" -eq 0 ]
