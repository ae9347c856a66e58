#!/usr/bin/env bash
# The network source inside a kernel of tools/vm: which mechanism `dlbpf features` names, and
# test_net's exact counts and findings on loopback (and behind tc netem where the guest kernel
# has sch_netem). Build on the host first:
#   tools/vm/run --timeout 900 6.1 tests/vm/net.sh
set -u
cd "$(dirname "$0")/../.."
[ "${DLBPF_VM_KERNEL:-host}" = host ] || export DLBPF_TEST_EMULATED=1
ip link set lo up 2>/dev/null
rc=0
run() { echo "--- $*"; "$@" || rc=1; }
./dlbpf features | grep -E "^  (fentry|kprobes|files|network) "
run python3 tests/integration/test_net.py "$@"
exit $rc
