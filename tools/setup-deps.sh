#!/usr/bin/env bash
# Installs what dlbpf needs, on Debian 12 (bookworm) or 13 (trixie), each from its own suites.
# Idempotent; quick when all is present. Run as root.
#
#   tools/setup-deps.sh demo   building dlbpf, the GPU simulator and the bundled workload
#                              (make demo): clang, libbpf >= 1.4, bpftool >= 7.5, libelf, zlib
#   tools/setup-deps.sh test   that, and every test's tools (make test, the default): Chromium,
#                              Prometheus, valgrind, QEMU, debootstrap, PyTorch (CPU), the arm64 cross toolchain
#                              and libraries, Debian's kernels for the kernel matrix
#
# Honours CUDA_HOME (default /usr/local/cuda). For `test`: DLBPF_SETUP_ARM64=0 skips the arm64
# target, DLBPF_SETUP_VM=0 the kernel matrix's kernels, DLBPF_VM_REFRESH=1 looks for newer ones.
set -Eeuo pipefail

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# Minimum versions: uprobe_multi with .offsets and ring-buffer APIs used by the collector.
MIN_LIBBPF=1.4
MIN_BPFTOOL=7.5

log() { printf 'setup-deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# The floor under every failure the script does not explain itself: the line and the command.
trap 'rc=$?; log "error: line $LINENO: \`$BASH_COMMAND\` failed (status $rc); this is a bug in tools/setup-deps.sh: report it with the lines above"; exit $rc' ERR

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
}
profile=${1:-test}
case $profile in
  demo|test) ;;
  -h|--help) usage; exit 0 ;;
  *) usage >&2; die "unknown part '$profile': demo or test" ;;
esac

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages): sudo $0 $profile"
command -v apt-get >/dev/null && command -v dpkg-query >/dev/null ||
  die "no apt-get/dpkg: this script installs Debian's packages (README: other distributions)"

# --- Which Debian ----------------------------------------------------------------------------
# Every suite this script adds is the running release's own: its backports where the release
# lacks a version, never another release's.
OS_ID='' CODENAME='' OS_NAME=''
if [ -r /etc/os-release ]; then
  OS_ID=$(. /etc/os-release && printf '%s' "${ID:-}")
  CODENAME=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
  OS_NAME=$(. /etc/os-release && printf '%s' "${PRETTY_NAME:-}")
fi
[ "$OS_ID" = debian ] ||
  die "this is ${OS_NAME:-an unknown system}, not Debian: install by hand clang, libbpf-dev >= $MIN_LIBBPF," \
      "bpftool >= $MIN_BPFTOOL, libelf-dev, zlib1g-dev, pkg-config, make and gcc (then \`make\`), or run the" \
      "static release executable (README: Install a release)"
[ -n "$CODENAME" ] || die "/etc/os-release names no VERSION_CODENAME: cannot tell which Debian release this is"
case $CODENAME in
  bookworm|trixie) ;;
  *) log "warning: Debian $CODENAME is untested (bookworm and trixie are): trying its own suites" ;;
esac
BACKPORTS=$CODENAME-backports

# apt, never asking (CI has no standard input), quiet unless it fails.
export DEBIAN_FRONTEND=noninteractive
APT_ERR=$(mktemp /tmp/setup-deps.XXXXXX)
trap 'rm -f "$APT_ERR"' EXIT
# apt_run FIX ARGS...: apt-get ARGS; on failure the command, apt's own error lines and FIX.
apt_run() {
  local fix=$1; shift
  if ! apt-get "$@" </dev/null >"$APT_ERR" 2>&1; then
    log "error: \`apt-get $*\` failed:"
    grep -E '^(E:|W:|Err:| +[^ ].*(Depends|Breaks|Conflicts):|The following packages have unmet)' "$APT_ERR" |
      tail -n 25 | sed 's/^/    /' >&2 || tail -n 15 "$APT_ERR" | sed 's/^/    /' >&2
    log "fix: $fix"
    exit 1
  fi
}
updated=0
# apt-get update succeeds when a source cannot be fetched: each such source is named here,
# as the likely cause of a package apt then cannot find.
apt_update() {
  log "apt-get update${1:+ ($1)}"
  apt_run "check the network and the sources in /etc/apt/sources.list{,.d}, then rerun" update
  if grep -qE '^(W: Failed to fetch|Err:)' "$APT_ERR"; then
    log "warning: apt-get update could not fetch every source (a package it should bring may be missing):"
    grep -E '^W: Failed to fetch' "$APT_ERR" | sed 's/^/    /' >&2 || true
  fi
  updated=1
}
apt_update_once() { [ $updated = 1 ] || apt_update; }
DOWNLOADED=0
# apt_install ARGS... (packages and options): says what it installs and how much it downloads.
apt_install() {
  local pkgs=() a bytes
  for a in "$@"; do [[ $a == -* ]] || pkgs+=("$a"); done
  bytes=$(apt-get --print-uris -qq install -y --no-install-recommends "$@" </dev/null 2>/dev/null |
          awk '{s += $3} END {print s + 0}') || bytes=0
  DOWNLOADED=$((DOWNLOADED + bytes))
  log "installing ${pkgs[*]} ($(mb "$bytes") to download)"
  apt_run "resolve the conflict apt names above (often: apt-get upgrade, or apt-get install -f), then rerun" \
    install -y -q --no-install-recommends "$@"
}
mb() { awk -v b="$1" 'BEGIN {printf "%.1f MB", b / 1e6}'; }

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
HOST_ARCH=$(dpkg --print-architecture)
# The installed version (empty if none, never a failure); of the host's architecture (or all)
# when the name does not say which and other architectures' copies are installed too.
pkg_version() {
  { dpkg-query -W -f='${Status} ${Architecture} ${Version}\n' "$1" 2>/dev/null || true; } |
    awk -v q="$1" -v h="$HOST_ARCH" '/install ok installed/ && (q ~ /:/ || $4 == h || $4 == "all") {print $5; exit}'
}
# The version apt would install (empty if none); options such as -t before the name.
candidate() {
  { apt-cache policy "$@" 2>/dev/null || true; } | awk '$1 == "Candidate:" && $2 != "(none)" {print $2; exit}'
}
# Upstream version without epoch and Debian revision: 1:1.4.6-1~bpo12+1 -> 1.4.6
upstream() { sed -E 's/^[0-9]+://; s/-[^-]*$//' <<<"$1"; }
bpftool_version() {
  { command -v bpftool >/dev/null 2>&1 && bpftool version 2>/dev/null || true; } |
    awk 'NR == 1 {sub(/^v/, "", $2); print $2}'
}
need_libbpf() { local v; v=$(pkg_version libbpf-dev); [ -z "$v" ] || ! version_ge "$(upstream "$v")" "$MIN_LIBBPF"; }
need_bpftool() { local v; v=$(bpftool_version); [ -z "$v" ] || ! version_ge "$v" "$MIN_BPFTOOL"; }

# The system's Debian archive: URI and keyring of its first source (deb822 or one-line).
debian_source() { # prints "URI KEYRING"
  local src=/etc/apt/sources.list.d/debian.sources uri='' key=''
  if [ -f "$src" ]; then
    uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' "$src")
    key=$(awk '/^Signed-By:/ {print $2; exit}' "$src")
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}' \
          /etc/apt/sources.list)
  fi
  [ -n "$key" ] && [ -f "$key" ] || key=$(debian_keyring)
  if [ -n "$uri" ]; then printf '%s %s\n' "$uri" "$key"; fi
}
# Debian's archive keyring (trixie names it .pgp, bookworm .gpg).
debian_keyring() {
  local k
  for k in /usr/share/keyrings/debian-archive-keyring.pgp /usr/share/keyrings/debian-archive-keyring.gpg; do
    if [ -f "$k" ]; then printf '%s\n' "$k"; return 0; fi
  done
  return 0
}

# --- Packages ----------------------------------------------------------------------------------
# What `make` and `make demo` need: the BPF compiler, the collector's libraries, the C toolchain.
DEMO_PKGS=(clang libelf-dev zlib1g-dev pkg-config make gcc libc6-dev procps mount)
# What the tests add:
# llvm: llvm-objdump and llvm-strip in the tests. libclang-rt-dev: libFuzzer and the sanitizer
# runtimes (make fuzz), only recommended by clang. python3-jsonschema: each JSON summary against
# its schema. groff-base: the man page test. chromium, fonts-dejavu-core: the HTML report
# rendered headless. curl, prometheus: --metrics scraped and checked with promtool. git,
# debootstrap: the fresh-root test (tools/fresh-root). python3-torch, python3-numpy: real
# PyTorch jobs (CPU) with DataLoader workers (tests/workloads/torchjob.py). iproute2: ip netns,
# veth and tc netem for the network source's test (tests/integration/test_net.py).
TEST_PKGS=(llvm g++ python3 python3-jsonschema protobuf-compiler valgrind binutils util-linux libclang-rt-dev
           groff-base chromium fonts-dejavu-core curl prometheus git debootstrap ca-certificates
           python3-torch python3-numpy iproute2)
PKGS=("${DEMO_PKGS[@]}")
[ "$profile" = demo ] || PKGS+=("${TEST_PKGS[@]}")

# A package another architecture already has (Multi-Arch: same) must come at that version.
foreign_version() {
  { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null || true; } | awk '/install ok installed/ {print $4; exit}'
}
missing=()
for p in "${PKGS[@]}"; do
  [ -z "$(pkg_version "$p")" ] || continue
  v=$(foreign_version "$p")
  missing+=("$p${v:+:$HOST_ARCH=$v}")
done

# The release's backports suite, next to its own Debian source (same mirror and keyring).
add_backports() {
  grep -rqsE "(^|[[:space:]])$BACKPORTS([[:space:]]|$)" /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
  local uri key
  read -r uri key < <(debian_source) ||
    die "cannot find the system's Debian source (/etc/apt/sources.list{,.d}) to add $BACKPORTS next to it"
  log "adding $BACKPORTS (from $uri): $CODENAME's own libbpf or bpftool is older than dlbpf needs"
  cat > /etc/apt/sources.list.d/dlbpf-backports.sources <<SRC
Types: deb
URIs: $uri
Suites: $BACKPORTS
Components: main
Signed-By: $key
SRC
  apt_update
}
# Another release's suite an earlier version of this script added: gone (a trixie system with
# bookworm-backports installed bookworm's libbpf).
f=/etc/apt/sources.list.d/dlbpf-backports.sources
if [ -f "$f" ] && ! grep -qx "Suites: $BACKPORTS" "$f"; then
  log "removing $f (another release's suite)"
  rm -f "$f"
fi
# The kernel matrix's suites no longer touch the system's sources (the VM cache has its own apt).
for f in /etc/apt/sources.list.d/dlbpf-bullseye-security.sources /etc/apt/sources.list.d/dlbpf-bookworm-security.sources \
         /etc/apt/preferences.d/dlbpf-bullseye-security; do
  if [ -f "$f" ]; then log "removing $f (the kernel matrix's suites live in its cache now)"; rm -f "$f"; fi
done

LIBBPF_FROM=''
if [ ${#missing[@]} -eq 0 ] && ! need_libbpf && ! need_bpftool; then
  log "all packages present"
else
  apt_update
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  if need_libbpf || need_bpftool; then
    lv=$(candidate libbpf-dev) bv=$(candidate bpftool)
    if [ -z "$lv" ] || ! version_ge "$(upstream "$lv")" "$MIN_LIBBPF" ||
       [ -z "$bv" ] || ! version_ge "$(upstream "$bv")" "$MIN_BPFTOOL"; then
      add_backports
      LIBBPF_FROM=$BACKPORTS
    fi
    apt_install ${LIBBPF_FROM:+-t "$LIBBPF_FROM"} libbpf-dev libbpf1 bpftool
  fi
  need_libbpf && die "libbpf-dev >= $MIN_LIBBPF is not to be had from $CODENAME${LIBBPF_FROM:+ or $LIBBPF_FROM} (have: $(pkg_version libbpf-dev))"
  need_bpftool && die "bpftool >= $MIN_BPFTOOL is not to be had from $CODENAME${LIBBPF_FROM:+ or $LIBBPF_FROM} (have: $(bpftool_version))"
fi

# The CUDA toolkit: headers and libcudart build the simulator and the workloads; the tests
# add nvcc and the driver stub. Never needed by dlbpf itself.
cuda_missing=()
[ -f "$CUDA_HOME/include/cuda_runtime_api.h" ] || cuda_missing+=("$CUDA_HOME/include/cuda_runtime_api.h")
compgen -G "$CUDA_HOME/lib64/libcudart.so.*" >/dev/null || cuda_missing+=("$CUDA_HOME/lib64/libcudart.so.*")
if [ "$profile" = test ]; then
  [ -x "$CUDA_HOME/bin/nvcc" ] || cuda_missing+=("$CUDA_HOME/bin/nvcc")
  compgen -G "$CUDA_HOME/lib64/stubs/libcuda.so" >/dev/null || cuda_missing+=("$CUDA_HOME/lib64/stubs/libcuda.so")
fi
[ ${#cuda_missing[@]} -eq 0 ] ||
  die "CUDA toolkit incomplete under CUDA_HOME=$CUDA_HOME, missing: ${cuda_missing[*]} (install the toolkit, no GPU needed, or set CUDA_HOME)"

finish() {
  # Tracefs is where uprobe and tracepoint events live; mount it if the system has not.
  if [ ! -d /sys/kernel/tracing/events ]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || log "warning: could not mount tracefs on /sys/kernel/tracing"
  fi
  [ -r /sys/kernel/btf/vmlinux ] || log "warning: /sys/kernel/btf/vmlinux missing: dlbpf needs a kernel with BTF"
  log "ok ($profile, Debian $CODENAME, $(mb "$DOWNLOADED") downloaded): libbpf $(upstream "$(pkg_version libbpf-dev)"), bpftool $(bpftool_version), $(clang --version | head -n1)"
}
if [ "$profile" = demo ]; then
  finish
  exit 0
fi

# --- The tests' extras ---------------------------------------------------------------------------
# The distribution's python3 built the other way too: tests/workloads/pyshared.c is an
# interpreter as pyenv and --enable-shared builds make it, linked with libpython3.X.
pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])') || die "/usr/bin/python3 does not run"
if [ -z "$(pkg_version "libpython$pyver")" ]; then
  apt_update_once
  apt_install "libpython$pyver"
fi
# bpftrace is optional (benchmarks compare against it when present); never fatal.
if [ -z "$(pkg_version bpftrace)" ]; then
  apt_update_once
  apt-get install -y -qq --no-install-recommends bpftrace </dev/null >/dev/null 2>&1 || log "bpftrace not installed (optional)"
fi

# --- arm64 as a second target (make ARCH=arm64 CROSS=aarch64-linux-gnu-) and make dist.
# dpkg's multiarch gives the cross toolchain Debian's own arm64 libbpf, libelf, zlib (headers,
# .so and the .a the static build links); libzstd-dev is what libelf.a needs when linked
# statically; lintian checks the .debs make dist writes. The kernel's UAPI headers are the
# host's linux-libc-dev.
DIST_PKGS=(libzstd-dev lintian dpkg-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
# Multi-Arch: same packages: an arm64 copy must be the very version of the host's. Their
# runtime libraries are found from apt's plan below.
ARM64_SAME=(libc6-dev libelf-dev zlib1g-dev libzstd-dev libbpf-dev libbpf1)
arm64_setup() {
  local dist_missing=() p v hv av plan involved=() lagging=() pins=() name
  for p in "${DIST_PKGS[@]}"; do [ -n "$(pkg_version "$p")" ] || dist_missing+=("$p"); done
  if [ ${#dist_missing[@]} -gt 0 ]; then apt_update_once; apt_install --no-remove "${dist_missing[@]}"; fi
  # Read only now: the host's copies above are installed.
  for p in "${ARM64_SAME[@]}"; do
    hv=$(pkg_version "$p:$HOST_ARCH")
    [ -n "$hv" ] || die "$p is not installed on the host (it must be, at the version the arm64 copy takes)"
    [ "$(pkg_version "$p:arm64")" = "$hv" ] || involved+=("$p")
  done
  [ ${#involved[@]} -gt 0 ] || return 0
  dpkg --print-foreign-architectures | grep -qx arm64 || { log "adding dpkg architecture arm64"; dpkg --add-architecture arm64; updated=0; }
  apt_update_once
  # What apt would bring for arm64 beside them: their Multi-Arch: same runtime libraries
  # (libc6, zlib1g, libelf1, ...), each of which the host has too and must match.
  plan=$(apt-get install -s -qq --no-install-recommends ${LIBBPF_FROM:+-t "$LIBBPF_FROM"} \
           "${involved[@]/%/:arm64}" </dev/null 2>/dev/null | awk '$1 == "Inst" && $2 ~ /:arm64$/ {sub(/:arm64$/, "", $2); print $2}') ||
    plan=''
  for name in $plan; do
    [[ " ${involved[*]} " == *" $name "* ]] || { [ -n "$(pkg_version "$name:$HOST_ARCH")" ] && involved+=("$name"); }
  done
  # A host copy older than what the archive serves (a -dev package that lags its runtime after a
  # point release, say) cannot be matched: the archive keeps only the newest. Bring it up first.
  # Only libbpf's own packages come from backports (LIBBPF_FROM): every other one stays the
  # release's, whose candidate is what apt serves without -t. (Backports' libelf 0.192 ships a
  # libelf.a that needs eu_search_tree_* from a libeu.a it does not ship: make dist cannot link.)
  for p in "${involved[@]}"; do
    hv=$(pkg_version "$p:$HOST_ARCH")
    case $p in libbpf-dev|libbpf1) av=$(candidate ${LIBBPF_FROM:+-t "$LIBBPF_FROM"} "$p:$HOST_ARCH") ;;
                *) av=$(candidate "$p:$HOST_ARCH") ;; esac
    # By version: a dependency apt brings along takes the release's candidate, not backports'.
    [ -n "$av" ] && dpkg --compare-versions "$hv" lt "$av" && lagging+=("$p:$HOST_ARCH=$av")
  done
  if [ ${#lagging[@]} -gt 0 ]; then
    log "bringing the host's ${lagging[*]} up to the archive's versions: their arm64 copies must be the same versions, and the archive holds only its newest"
    apt_run "the host's packages above cannot be upgraded alone: run apt-get upgrade (or DLBPF_SETUP_ARM64=0 to skip the arm64 target), then rerun" \
      install -y -q --no-install-recommends --no-remove --only-upgrade "${lagging[@]}"
  fi
  for p in "${involved[@]}"; do
    hv=$(pkg_version "$p:$HOST_ARCH")
    [ "$(pkg_version "$p:arm64")" = "$hv" ] || pins+=("$p:arm64=$hv")
  done
  [ ${#pins[@]} -gt 0 ] || return 0
  # --no-remove: a plan that would swap a host package out is an error, never carried out.
  bytes=$(apt-get --print-uris -qq install -y --no-install-recommends "${pins[@]}" </dev/null 2>/dev/null |
          awk '{s += $3} END {print s + 0}') || bytes=0
  DOWNLOADED=$((DOWNLOADED + bytes))
  log "installing the arm64 copies at the host's versions: ${pins[*]} ($(mb "$bytes") to download)"
  apt_run "each arm64 copy must be the host's exact version (Multi-Arch: same); upgrade the host's copies named above (apt-get install --only-upgrade ${involved[*]}), or set DLBPF_SETUP_ARM64=0 to skip the arm64 target, then rerun" \
    install -y -q --no-install-recommends --no-remove "${pins[@]}"
}
[ "${DLBPF_SETUP_ARM64:-1}" = 0 ] || arm64_setup

# --- Kernels for tools/vm/run (make vmtest): Debian's own kernel packages booted under QEMU.
# Only the vmlinuz, modules.dep and the few modules the guest loads are kept, plus the
# vmlinuz's ELF vmlinux (tools/vm/README.md).
VM_CACHE=${DLBPF_VM_CACHE:-/var/cache/dlbpf-vm}
# kmod: depmod writes the modules.dep that the packages leave to their postinst.
# qemu-system-arm: the arm64 guests (qemu-system-aarch64 -M virt).
VM_HOST_PKGS=(qemu-system-x86 qemu-system-arm busybox-static kmod xz-utils zstd)
# The series the matrix boots: x86-64's, then arm64's (their cache folders are arm64-SERIES).
VM_SERIES=(5.10 6.1 6.12 arm64-6.1 arm64-6.12)
# Modules the guest's init loads (with what modules.dep says they need); any may be built in.
VM_MODULES=(virtio_pci virtio_blk virtio_rng 9pnet_virtio 9p overlay ext4 crc32c_generic)
# The same kernels whatever the host's release: 5.10 from bullseye-security, 6.1 and 6.12 from
# bookworm-security. They are downloaded, never installed, through an apt of the cache's own
# (APT_CONFIG: its sources, lists and architectures), so the system's sources stay its release's.
declare -A VM_SUITE=([5.10]=bullseye-security [6.1]=bookworm-security [6.12]=bookworm-security
                    [arm64-6.1]=bookworm-security [arm64-6.12]=bookworm-security)
# The -unsigned image and the signed one hold the same vmlinuz and modules: either will do
# (the unsigned one first when both have the newest version).
declare -A VM_PATTERN=([5.10]='^linux-image-5\.10\.0-[0-9]+-amd64(-unsigned)?$'
                       [6.1]='^linux-image-6\.1\.0-[0-9]+-amd64(-unsigned)?$'
                       [6.12]='^linux-image-6\.12\.[0-9]+\+deb12-amd64(-unsigned)?$'
                       [arm64-6.1]='^linux-image-6\.1\.0-[0-9]+-arm64(-unsigned)?$'
                       [arm64-6.12]='^linux-image-6\.12\.[0-9]+\+deb12-arm64(-unsigned)?$')
VM_APT=$VM_CACHE/apt

vm_cached() { [ -s "$VM_CACHE/$1/vmlinuz" ] && [ -s "$VM_CACHE/$1/modules.dep" ] && [ -s "$VM_CACHE/$1/package" ]; }

# The security archive's URI: the system's own *-security source, else the main archive's
# URI with /debian-security in place of /debian.
security_uri() {
  local src=/etc/apt/sources.list.d/debian.sources u=''
  [ -f "$src" ] &&
    u=$(awk 'BEGIN {RS=""} /Suites:[^\n]*-security/ {for (i = 1; i <= NF; i++) if ($i == "URIs:") {print $(i+1); exit}}' "$src")
  [ -n "$u" ] || [ ! -f /etc/apt/sources.list ] ||
    u=$(awk '$1 == "deb" && $0 ~ /-security/ {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}' /etc/apt/sources.list)
  [ -n "$u" ] || { read -r u _ < <(debian_source) && u=$(sed -E 's#/debian/?$#/debian-security#' <<<"$u"); } || u=''
  printf '%s\n' "$u"
}

# The cache's apt: bookworm (arm64's python3.11), bookworm-security and bullseye-security, for
# the host's architecture and arm64. Exported: fetch-arm64-python downloads through it too.
vm_apt_setup() {
  local main key sec
  read -r main key < <(debian_source) || die "cannot find the system's Debian source (/etc/apt/sources.list{,.d}) to fetch the kernel matrix's kernels from"
  sec=$(security_uri)
  [ -n "$key" ] || die "Debian's archive keyring is missing (apt-get install debian-archive-keyring)"
  mkdir -p "$VM_APT/lists/partial" "$VM_APT/cache/archives/partial" "$VM_APT/sources.list.d" "$VM_APT/preferences.d"
  : > "$VM_APT/status"
  cat > "$VM_APT/sources.list" <<SRC
deb [signed-by=$key] $main bookworm main
deb [signed-by=$key] $sec bookworm-security main
deb [signed-by=$key] $sec bullseye-security main
SRC
  cat > "$VM_APT/apt.conf" <<CONF
Dir::Etc::SourceList "$VM_APT/sources.list";
Dir::Etc::SourceParts "$VM_APT/sources.list.d";
Dir::Etc::Preferences "$VM_APT/preferences";
Dir::Etc::PreferencesParts "$VM_APT/preferences.d";
Dir::State::Lists "$VM_APT/lists";
Dir::State::status "$VM_APT/status";
Dir::Cache "$VM_APT/cache";
APT::Architecture "$HOST_ARCH";
APT::Architectures { "$HOST_ARCH"; "arm64"; };
CONF
  export APT_CONFIG=$VM_APT/apt.conf
  apt_update "the kernel matrix's own lists: bookworm, bookworm-security, bullseye-security"
}

# Newest package of a series that apt can download: the names matching the pattern that
# have a candidate version, highest version first. (Functions read through < <(...) print
# nothing rather than fail: a failure there would trip the ERR trap in the subshell.)
vm_newest() {
  local names best='' bestv='' name cand
  mapfile -t names < <({ apt-cache pkgnames linux-image- || true; } | { grep -E "$1" || true; } | sort -r)
  [ ${#names[@]} -gt 0 ] || return 0  # nothing printed: the caller's read fails and says so
  while read -r name cand; do
    [ "$cand" != "(none)" ] || continue
    if [ -z "$bestv" ] || dpkg --compare-versions "$cand" gt "$bestv"; then best=$name bestv=$cand; fi
  done < <(apt-cache policy "${names[@]}" 2>/dev/null |
           awk '/^[^ ]/ {n = $1; sub(/:$/, "", n)} $1 == "Candidate:" {print n, $2}')
  if [ -n "$best" ]; then printf '%s %s\n' "$best" "$bestv"; fi
}

# apt-get download, into DIR; on failure apt's own words.
vm_download() { # DIR PACKAGE=VERSION
  ( cd "$1" && apt-get download -q "$2" </dev/null >"$APT_ERR" 2>&1 ) ||
    { log "error: apt-get download $2 failed:"; grep -E '^(E|W|Err):' "$APT_ERR" | sed 's/^/    /' >&2; return 1; }
}

# Downloads PACKAGE=VERSION, keeps its vmlinuz, modules.dep/.builtin and the closure of
# VM_MODULES (decompressed, so busybox insmod loads them), then drops the .deb.
vm_fetch() {
  local series=$1 pkg=$2 ver=$3 tmp kver mdir dest m want dep deps bytes
  tmp=$(mktemp -d "$VM_CACHE/.fetch.XXXXXX")
  chmod 755 "$tmp"  # apt-get download writes as _apt where it can
  bytes=$(apt-get --print-uris -qq download "$pkg=$ver" 2>/dev/null | awk '{s += $3} END {print s + 0}') || bytes=0
  DOWNLOADED=$((DOWNLOADED + bytes))
  log "downloading $pkg $ver for the $series guest ($(mb "$bytes"))"
  vm_download "$tmp" "$pkg=$ver" || { rm -rf "$tmp"; die "could not download $pkg=$ver (rerun; DLBPF_SETUP_VM=0 skips the kernel matrix)"; }
  dpkg-deb -x "$tmp"/*.deb "$tmp/x" || { rm -rf "$tmp"; die "could not unpack $pkg"; }
  kver=$(ls "$tmp/x/lib/modules" 2>/dev/null | head -n1)
  mdir=$tmp/x/lib/modules/$kver
  [ -n "$kver" ] && [ -f "$tmp/x/boot/vmlinuz-$kver" ] ||
    { rm -rf "$tmp"; die "$pkg holds no vmlinuz or /lib/modules"; }
  # The package leaves modules.dep to its postinst; depmod writes it here.
  depmod -b "$tmp/x" "$kver" && [ -s "$mdir/modules.dep" ] ||
    { rm -rf "$tmp"; die "depmod failed for $pkg"; }
  dest=$tmp/out
  mkdir -p "$dest/modules"
  cp "$tmp/x/boot/vmlinuz-$kver" "$dest/vmlinuz"
  cp "$mdir/modules.dep" "$dest/"
  if [ -f "$mdir/modules.builtin" ]; then cp "$mdir/modules.builtin" "$dest/"; fi
  # Closure over modules.dep: each line names a module's file and every module it needs
  # (file names use - or _ alike, as module names do).
  want=()
  for m in "${VM_MODULES[@]}"; do
    dep=$(awk -v m="$m" '{n = $1; sub(/:$/, "", n); $1 = n; sub(/.*\//, "", n); sub(/\.ko.*/, "", n)
                            gsub(/-/, "_", n)} n == m {print; exit}' "$mdir/modules.dep")
    read -r -a deps <<<"$dep" || true
    want+=("${deps[@]}")
  done
  for m in $(printf '%s\n' "${want[@]}" | sort -u); do
    mkdir -p "$dest/modules/$(dirname "$m")"
    case $m in
      *.ko.xz)  xz -dc "$mdir/$m" > "$dest/modules/${m%.xz}" ;;
      *.ko.zst) zstd -qdc "$mdir/$m" > "$dest/modules/${m%.zst}" ;;
      *.ko.gz)  gzip -dc "$mdir/$m" > "$dest/modules/${m%.gz}" ;;
      *)        cp "$mdir/$m" "$dest/modules/$m" ;;
    esac
  done
  sed -i -E 's/\.ko\.(xz|zst|gz)/.ko/g' "$dest/modules.dep"
  printf '%s\n' "$kver" > "$dest/kver"
  printf '%s %s\n' "$pkg" "$ver" > "$dest/package"
  rm -rf "${VM_CACHE:?}/$series"
  mv "$dest" "$VM_CACHE/$series"
  rm -rf "$tmp"
}

# The ELF vmlinux inside a vmlinuz (its xz, zstd or gzip payload): QEMU boots it through
# its PVH entry point, skipping the decompression that costs some 3 s under emulation.
vm_extract_elf() { # DIR
  python3 - "$1/vmlinuz" "$1/vmlinux.tmp" <<'PY' && mv "$1/vmlinux.tmp" "$1/vmlinux"
import gzip, lzma, subprocess, sys, zlib
data = open(sys.argv[1], "rb").read()
for magic, how in ((b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"\x1f\x8b\x08", "gz")):
    at = data.find(magic)
    while at >= 0:
        try:
            if how == "xz":
                elf = lzma.LZMADecompressor().decompress(data[at:])
            elif how == "gz":
                elf = zlib.decompressobj(31).decompress(data[at:])
            else:  # trailing bytes after the frame make zstd complain after writing it all
                elf = subprocess.run(["zstd", "-qdc"], input=data[at:], capture_output=True).stdout
        except Exception:
            elf = b""
        if elf[:4] == b"\x7fELF":
            open(sys.argv[2], "wb").write(elf)
            sys.exit(0)
        at = data.find(magic, at + 1)
sys.exit("no compressed ELF found in " + sys.argv[1])
PY
}

vm_setup() {
  local vm_missing=() vm_series=() s pkg ver tmp
  for p in "${VM_HOST_PKGS[@]}"; do [ -n "$(pkg_version "$p")" ] || vm_missing+=("$p"); done
  if [ ${#vm_missing[@]} -gt 0 ]; then apt_update_once; apt_install "${vm_missing[@]}"; fi
  for s in "${VM_SERIES[@]}"; do
    { vm_cached "$s" && [ "${DLBPF_VM_REFRESH:-0}" != 1 ]; } || vm_series+=("$s")
  done
  local need_python=1
  [ -x "$VM_CACHE/arm64-python/usr/bin/python3.11" ] && [ -x "$VM_CACHE/arm64-busybox/busybox" ] && need_python=0
  if [ ${#vm_series[@]} -gt 0 ] || [ $need_python = 1 ]; then
    mkdir -p "$VM_CACHE"
    rm -rf "$VM_CACHE"/.fetch.*  # what an interrupted run left
    vm_apt_setup
    for s in "${vm_series[@]}"; do
      read -r pkg ver < <(vm_newest "${VM_PATTERN[$s]}") ||
        die "no ${VM_PATTERN[$s]} package in the kernel matrix's lists (is ${VM_SUITE[$s]} reachable?)"
      if vm_cached "$s" && [ "$(cat "$VM_CACHE/$s/package")" = "$pkg $ver" ]; then continue; fi
      vm_fetch "$s" "$pkg" "$ver"
    done
    # The arm64 guests' initramfs shell: Debian's arm64 busybox-static, unpacked (the host's
    # own busybox-static is its architecture's and the two cannot be installed side by side).
    if [ ! -x "$VM_CACHE/arm64-busybox/busybox" ]; then
      tmp=$(mktemp -d "$VM_CACHE/.fetch.XXXXXX")
      chmod 755 "$tmp"
      vm_download "$tmp" busybox-static:arm64 || { rm -rf "$tmp"; die "could not download busybox-static:arm64"; }
      dpkg-deb -x "$tmp"/*.deb "$tmp/x" && mkdir -p "$VM_CACHE/arm64-busybox" &&
        install -m 0755 "$tmp/x/bin/busybox" "$VM_CACHE/arm64-busybox/busybox" ||
        { rm -rf "$tmp"; die "busybox-static:arm64 holds no /bin/busybox"; }
      rm -rf "$tmp"
    fi
    # Debian 12's arm64 CPython 3.11, unpacked for the arm64 guests' Python lines (never installed).
    "$(dirname "$0")/vm/fetch-arm64-python" "$VM_CACHE/arm64-python" ||
      die "could not fetch Debian's arm64 python3.11 (tools/vm/fetch-arm64-python)"
    unset APT_CONFIG
  fi
  for s in "${VM_SERIES[@]}"; do
    vm_cached "$s" || die "VM kernel $s missing from $VM_CACHE"
    # arm64's vmlinuz is an uncompressed Image already: QEMU boots it as it is.
    [[ $s == arm64-* ]] || [ -s "$VM_CACHE/$s/vmlinux" ] || vm_extract_elf "$VM_CACHE/$s" ||
      log "warning: no ELF vmlinux for $s (its guests boot the vmlinuz, some 3 s slower)"
  done
  log "VM kernels: $(for s in "${VM_SERIES[@]}"; do printf '%s=%s ' "$s" "$(cut -d' ' -f2 "$VM_CACHE/$s/package")"; done)"
}
[ "${DLBPF_SETUP_VM:-1}" = 0 ] || vm_setup

finish
