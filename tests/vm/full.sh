#!/usr/bin/env bash
# The kernel matrix in full (make vmtest), inside each kernel of tools/vm: the smoke, then every
# scenario's verdict and device-busy bounds against the simulator's truth, lineage on the input
# scenario, Python lines with the Debian interpreter, --pid attach, record and report, NCCL, every
# twin set of this kernel's features, and the stop tests (nothing left attached).
set -u
cd "$(dirname "$0")/../.."
rc=0
tests/vm/smoke.sh || rc=1
if [ -n "${DLBPF_VM_DISK_MNT:-}" ]; then
  export DLBPF_TEST_WORK=$DLBPF_VM_DISK_MNT/itest TMPDIR=$DLBPF_VM_DISK_MNT/tmp
fi
[ "${DLBPF_VM_KERNEL:-host}" = host ] || export DLBPF_TEST_EMULATED=1
run() { echo "--- $*"; "$@" || rc=1; }
run python3 tests/integration/test_dlbpf.py test_cuda_real_runtime_pid test_nccl_real_library test_forked_child_traced \
  test_stop_leaves_nothing test_sigkill_leaves_nothing test_exit_mid_trace
# Each scenario judged against the workload's clocks in the guest, and a replay; the tests that hold
# step edges or verdicts to native-speed tolerances (step markers, varied settings) run on the host.
run python3 tests/integration/test_scenarios.py $(python3 -c '
import sys; sys.path.insert(0, "tests/integration"); import test_scenarios as t
print(" ".join(n for n in dir(t) if n.startswith("test_scenario_")))') test_replay_equals_live
run python3 tests/integration/test_lineage.py test_lineage_input
run python3 tests/integration/test_recording.py test_compact_counts
run python3 tests/integration/test_kernel_features.py
run python3 tests/integration/test_net.py
# A fork storm and a Pool(maxtasksperchild=1): every child's calls, on each kernel's way of probing.
run python3 tests/integration/test_forkstorm.py
# Python lines need BPF's frame walk (5.12+): where `dlbpf features` says the kernel lacks it,
# test_kernel_features has checked that no line is claimed and the loss is said.
if ./dlbpf features | grep -Eq '^ +global_ptr_args +yes'; then
  run python3 tests/integration/test_pyframes.py test_python_311
else
  echo "skip test_pyframes: this kernel cannot check BPF's Python frame walk (dlbpf features)"
fi
exit $rc
