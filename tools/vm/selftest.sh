#!/usr/bin/env bash
# Checks tools/vm/run itself under each kernel named (default: 5.10 6.1 6.12 host):
# BTF and bpftool's probe work, an ext4 virtio disk mounts and keeps a file, the output
# share carries a file out, and the script's exit status (3) becomes the runner's.
#   tools/vm/selftest.sh [KERNEL...]
set -uo pipefail
if [ "${1:-}" = --guest ]; then
  set -e
  echo "guest: $(uname -r), cwd $PWD"
  ls -l /sys/kernel/btf/vmlinux
  probe=$(bpftool feature probe kernel 2>/dev/null)
  grep -m3 -E 'JIT|bpf\(\)' <<<"$probe"
  grep 'eBPF program_type kprobe is available' <<<"$probe"
  echo "payload $(uname -r)" > "$DLBPF_VM_DISK_MNT/file"
  sync
  echo 3 > /proc/sys/vm/drop_caches
  grep -q "payload $(uname -r)" "$DLBPF_VM_DISK_MNT/file"
  grep -E "^$DLBPF_VM_DISK " /proc/mounts
  uname -r > "$DLBPF_VM_OUT/uname"
  exit 3
fi
cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || set -- 5.10 6.1 6.12 host
fails=0
for k in "$@"; do
  o=$(mktemp -d)
  tools/vm/run --disk 64 --out "$o" "$k" tools/vm/selftest.sh --guest
  rc=$?
  if [ "$rc" = 3 ] && [ -s "$o/uname" ]; then echo "selftest $k: ok (exit 3 came back, $(cat "$o/uname"))"
  else echo "selftest $k: FAIL (exit $rc, output share: $(cat "$o/uname" 2>/dev/null || echo empty))"; fails=$((fails + 1)); fi
  rm -rf "$o"
done
[ "$fails" = 0 ]
