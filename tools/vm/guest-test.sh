#!/usr/bin/env bash
# The script `make vmtest` / `make vmtest-smoke` runs under each kernel of the matrix
# (tools/vm/run, from the repository root): MODE is smoke or full.
# Checks what can be judged on any kernel, then hands over to tests/vm/MODE.sh when the
# repository has one, passing its exit status through. Exit 0 only if all passed.
set -u
mode=${1:-smoke}
case $mode in smoke|full) ;; *) echo "usage: $0 smoke|full" >&2; exit 2 ;; esac

fails=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
check() { # NAME COMMAND...: runs it quietly, shows its output only when it fails
  local name=$1 rc
  shift
  "$@" > "$tmp" 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then echo "ok   $name"
  else
    echo "FAIL $name (exit $rc)"
    tail -n 20 "$tmp" | sed 's/^/     /'
    fails=$((fails + 1))
  fi
}

echo "kernel: $(uname -r) (${DLBPF_VM_KERNEL:-?}), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%d MiB", $2 / 1024}' /proc/meminfo)"
if [ -r /sys/kernel/btf/vmlinux ]; then
  echo "ok   BTF: /sys/kernel/btf/vmlinux ($(stat -c %s /sys/kernel/btf/vmlinux) bytes)"
else
  echo "FAIL BTF: /sys/kernel/btf/vmlinux missing (dlbpf needs a kernel with BTF)"
  fails=$((fails + 1))
fi
if [ -x ./dlbpf ]; then
  check "dlbpf --version: $(./dlbpf --version 2>&1 | head -n1)" ./dlbpf --version
  check "dlbpf --help" ./dlbpf --help
else
  echo "FAIL ./dlbpf missing in $PWD (build it on the host first: make)"
  fails=$((fails + 1))
fi

hook=tests/vm/$mode.sh
hook_rc=0
if [ -f "$hook" ]; then
  echo "--- $hook"
  if [ -x "$hook" ]; then "./$hook"; else bash "$hook"; fi
  hook_rc=$?
  if [ "$hook_rc" = 0 ]; then echo "ok   $hook"; else echo "FAIL $hook (exit $hook_rc)"; fi
else
  echo "skip $hook (none in this repository)"
fi

[ "$hook_rc" = 0 ] || exit "$hook_rc"
[ "$fails" = 0 ] || exit 1
exit 0
