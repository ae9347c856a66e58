#!/usr/bin/env bash
# The kernel matrix's smoke, run inside each kernel of tools/vm (make test runs it on every kernel):
# the demo's verdict against the workload's own clocks, exact counts against the real libcudart,
# disk bytes against /proc/PID/io on the ext4 virtio disk, the gpu and input scenarios, a job under
# seccomp unharmed, the static release executable alone in a chroot, and `dlbpf features`. Build on
# the host first: the guests only run.
set -u
cd "$(dirname "$0")/../.."
# The guest's root is a tmpfs overlay: the tests' files go to the virtio disk so that reads reach a block device.
# (and the training workload's dataset, which goes to $TMPDIR).
if [ -n "${DLBPF_VM_DISK_MNT:-}" ]; then
  export DLBPF_TEST_WORK=$DLBPF_VM_DISK_MNT/itest TMPDIR=$DLBPF_VM_DISK_MNT/tmp
  mkdir -p "$DLBPF_TEST_WORK" "$TMPDIR"
fi
# Emulated kernels: the tests hold bounds to the workload's clocks but not to widths a native run has.
[ "${DLBPF_VM_KERNEL:-host}" = host ] || export DLBPF_TEST_EMULATED=1
./dlbpf features || exit 1
rc=0
run() { echo "--- $*"; "$@" || rc=1; }
run python3 tests/integration/test_dlbpf.py test_cuda_real_runtime_command test_block_io_matches_proc_io
run python3 tests/integration/test_scenarios.py test_scenario_input test_scenario_gpu
# A job that execs itself under its filter: its first CUDA call after the exec is counted on every
# kernel (by file offset where attach cookies are missing).
run python3 tests/integration/test_kernel_features.py test_seccomp_target_survives test_unprobed_runtime_is_named
# Socket receives by each kernel's network mechanism (tracepoint, or fexit): bytes and calls exact.
# The guest's init leaves the loopback down (127.0.0.1 and ::1 unassigned).
ip link set lo up 2>/dev/null
run python3 tests/integration/test_net.py test_net_exact
# The static release executable (make dist-arch) in a root holding only it and the workload.
run python3 tests/integration/test_dist.py
exit $rc
