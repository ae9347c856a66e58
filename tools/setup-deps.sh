#!/usr/bin/env bash
# Installs what dlbpf needs to build and test. Idempotent; quick when all is present.
# Run as root. Honours CUDA_HOME (default /usr/local/cuda).
set -euo pipefail

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
BACKPORTS=bookworm-backports
# Minimum versions: uprobe_multi with .offsets and ring-buffer APIs used by the collector.
MIN_LIBBPF=1.4
MIN_BPFTOOL=7.5

log() { printf 'setup-deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# apt, never asking (CI has no standard input) and quiet unless it fails.
export DEBIAN_FRONTEND=noninteractive
apt_update() {
  log "apt-get update"
  apt-get update -qq </dev/null >/dev/null || die "apt-get update failed"
}
apt_install() {
  log "installing $*"
  apt-get install -y -qq --no-install-recommends "$@" </dev/null >/dev/null || die "could not install $*"
}

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# The installed version; of the host's architecture (or all) when other architectures' are
# installed too (dpkg multiarch, the arm64 build) and the name does not say which.
HOST_ARCH=$(dpkg --print-architecture)
pkg_version() { dpkg-query -W -f='${Status} ${Architecture} ${Version}\n' "$1" 2>/dev/null |
                awk -v q="$1" -v h="$HOST_ARCH" '/install ok installed/ && (q ~ /:/ || $4 == h || $4 == "all") {print $5; exit}'; }
NATIVE_ARCH=$HOST_ARCH

# Upstream version without epoch and Debian revision: 1:1.4.6-1~bpo12+1 -> 1.4.6
upstream() { sed -E 's/^[0-9]+://; s/-[^-]*$//' <<<"$1"; }

bpftool_version() { command -v bpftool >/dev/null 2>&1 &&
                    bpftool version 2>/dev/null | awk 'NR==1 {sub(/^v/, "", $2); print $2}'; }

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages)"

need_libbpf() { local v; v=$(pkg_version libbpf-dev); [ -z "$v" ] || ! version_ge "$(upstream "$v")" "$MIN_LIBBPF"; }
need_bpftool() { local v; v=$(bpftool_version || true); [ -z "$v" ] || ! version_ge "$v" "$MIN_BPFTOOL"; }

# libclang-rt-dev: clang's libFuzzer and sanitizer runtimes (make fuzz), only recommended by clang.
# python3-jsonschema: the integration tests check each JSON summary against its schema.
# groff-base: the man page test renders doc/dlbpf.8 (tests only).
# chromium, fonts-dejavu-core: tests/integration/test_html.py renders the HTML report headless (tests only).
# curl, prometheus: test_metrics.py scrapes --metrics with curl and checks it with promtool (tests only).
BASE_PKGS=(clang llvm libelf-dev zlib1g-dev pkg-config make gcc g++ libc6-dev procps mount
           python3 python3-jsonschema protobuf-compiler valgrind binutils util-linux libclang-rt-dev groff-base
           chromium fonts-dejavu-core curl prometheus)
missing=()
# A package a foreign architecture already has (Multi-Arch: same) must come at its version.
foreign_version() { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null |
                    awk '/install ok installed/ {print $4; exit}'; }
for p in "${BASE_PKGS[@]}"; do
  [ -z "$(pkg_version "$p")" ] || continue
  v=$(foreign_version "$p" || true)
  missing+=("$p${v:+:$NATIVE_ARCH=$v}")
done

if [ ${#missing[@]} -eq 0 ] && ! need_libbpf && ! need_bpftool; then
  log "all packages present"
else
  # The backports suite is added next to the system's own Debian source, reusing its
  # mirror and keyring, so no mirror is hard-coded here.
  if ! grep -rqs "$BACKPORTS" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    src=/etc/apt/sources.list.d/debian.sources
    if [ -f "$src" ]; then
      uri=$(awk '/^URIs:/ {print $2; exit}' "$src")
      key=$(awk '/^Signed-By:/ {print $2; exit}' "$src")
    elif [ -f /etc/apt/sources.list ]; then
      uri=$(awk '$1 == "deb" && $0 !~ /security/ {print ($2 ~ /^\[/ ? $3 : $2); exit}' /etc/apt/sources.list)
      key=/usr/share/keyrings/debian-archive-keyring.gpg
    fi
    [ -n "${uri:-}" ] || die "cannot find the system's Debian source to add $BACKPORTS next to it"
    log "adding $BACKPORTS (from $uri)"
    cat > /etc/apt/sources.list.d/dlbpf-backports.sources <<SRC
Types: deb
URIs: $uri
Suites: $BACKPORTS
Components: main
Signed-By: ${key:-/usr/share/keyrings/debian-archive-keyring.gpg}
SRC
  fi
  apt_update
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  if need_libbpf || need_bpftool; then
    log "installing libbpf-dev and bpftool from $BACKPORTS"
    apt-get install -y -qq --no-install-recommends -t "$BACKPORTS" libbpf-dev libbpf1 bpftool \
      </dev/null >/dev/null || die "could not install libbpf-dev/bpftool from $BACKPORTS"
  fi
  need_libbpf && die "libbpf-dev >= $MIN_LIBBPF not available (have: $(pkg_version libbpf-dev))"
  need_bpftool && die "bpftool >= $MIN_BPFTOOL not available (have: $(bpftool_version))"
fi

# bpftrace is optional (benchmarks compare against it when present); never fatal.
# The distribution's python3 built the other way too: tests/workloads/pyshared.c is an interpreter as pyenv and
# --enable-shared builds make it (an executable with no interpreter of its own), linked with libpython3.X.
pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])') || die "/usr/bin/python3 does not run"
if [ -z "$(pkg_version "libpython$pyver")" ]; then
  apt_update
  apt_install "libpython$pyver"
fi

[ -n "$(pkg_version bpftrace)" ] ||
  { apt-get install -y -qq --no-install-recommends bpftrace </dev/null >/dev/null 2>&1 ||
    log "bpftrace not installed (optional)"; }

# The CUDA toolkit is needed by tests (nvcc, headers, libcudart), never by dlbpf itself.
cuda_missing=()
[ -x "$CUDA_HOME/bin/nvcc" ] || cuda_missing+=("$CUDA_HOME/bin/nvcc")
[ -f "$CUDA_HOME/include/cuda_runtime_api.h" ] || cuda_missing+=("$CUDA_HOME/include/cuda_runtime_api.h")
compgen -G "$CUDA_HOME/lib64/libcudart.so.*" >/dev/null || cuda_missing+=("$CUDA_HOME/lib64/libcudart.so.*")
compgen -G "$CUDA_HOME/lib64/stubs/libcuda.so" >/dev/null || cuda_missing+=("$CUDA_HOME/lib64/stubs/libcuda.so")
if [ ${#cuda_missing[@]} -gt 0 ]; then
  die "CUDA toolkit incomplete under CUDA_HOME=$CUDA_HOME, missing: ${cuda_missing[*]} (install the toolkit or set CUDA_HOME)"
fi

# --- arm64 as a second target (make ARCH=arm64 CROSS=aarch64-linux-gnu-) and make dist.
# DLBPF_SETUP_ARM64=0 skips it. dpkg's multiarch gives the cross toolchain Debian's own arm64
# libbpf, libelf, zlib (headers, .so and the .a the static build links); libzstd-dev is what
# libelf.a needs when linked statically; lintian checks the .debs make dist writes. The kernel's
# UAPI headers are the host's linux-libc-dev (backports' is Architecture: all, every asm/).
DIST_PKGS=(libzstd-dev lintian dpkg-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
# Multi-Arch: same libraries: the arm64 one must be the very version the host has, else apt
# swaps the host's out (and what depends on it). --no-remove makes any such plan an error.
ARM64_SAME=(libc6-dev libelf-dev zlib1g-dev libzstd-dev libbpf-dev libbpf1)
if [ "${DLBPF_SETUP_ARM64:-1}" != 0 ]; then
  dist_missing=()
  for p in "${DIST_PKGS[@]}"; do [ -n "$(pkg_version "$p")" ] || dist_missing+=("$p"); done
  arm64_missing=()
  for p in "${ARM64_SAME[@]}"; do
    v=$(pkg_version "$p:$HOST_ARCH")
    [ -n "$v" ] || die "$p missing on the host (needed at the same version for arm64)"
    [ "$(pkg_version "$p:arm64")" = "$v" ] || arm64_missing+=("$p:arm64=$v")
  done
  if [ ${#dist_missing[@]} -gt 0 ] || [ ${#arm64_missing[@]} -gt 0 ]; then
    dpkg --print-foreign-architectures | grep -qx arm64 || { log "adding dpkg architecture arm64"; dpkg --add-architecture arm64; }
    apt_update
    [ ${#dist_missing[@]} -eq 0 ] || apt_install --no-remove "${dist_missing[@]}"
    [ ${#arm64_missing[@]} -eq 0 ] || apt_install --no-remove "${arm64_missing[@]}"
  fi
fi

# --- Kernels for tools/vm/run (make vmtest): Debian's own kernel packages booted under QEMU.
# DLBPF_SETUP_VM=0 skips this part; DLBPF_VM_REFRESH=1 looks for newer kernels even when
# the cache already holds one of each series. Only the vmlinuz, modules.dep and the few
# modules the guest loads are kept, plus the vmlinuz's ELF vmlinux (tools/vm/README.md).
VM_CACHE=${DLBPF_VM_CACHE:-/var/cache/dlbpf-vm}
# kmod: depmod writes the modules.dep that the packages leave to their postinst.
# qemu-system-arm: the arm64 guests (qemu-system-aarch64 -M virt).
VM_HOST_PKGS=(qemu-system-x86 qemu-system-arm busybox-static kmod xz-utils zstd)
# The series the matrix boots: x86-64's, then arm64's (their cache folders are arm64-SERIES).
VM_SERIES=(5.10 6.1 6.12 arm64-6.1 arm64-6.12)
# Modules the guest's init loads (with what modules.dep says they need); any may be built in.
VM_MODULES=(virtio_pci virtio_blk virtio_rng 9pnet_virtio 9p overlay ext4 crc32c_generic)
# series -> suite the newest image of that series comes from, and the package name pattern.
declare -A VM_SUITE=([5.10]=bullseye-security [6.1]=bookworm-security [6.12]=bookworm-security
                    [arm64-6.1]=bookworm-security [arm64-6.12]=bookworm-security)
# The -unsigned image and the signed one hold the same vmlinuz and modules: either will do
# (the unsigned one first when both have the newest version).
declare -A VM_PATTERN=([5.10]='^linux-image-5\.10\.0-[0-9]+-amd64(-unsigned)?$'
                       [6.1]='^linux-image-6\.1\.0-[0-9]+-amd64(-unsigned)?$'
                       [6.12]='^linux-image-6\.12\.[0-9]+\+deb12-amd64(-unsigned)?$'
                       [arm64-6.1]='^linux-image-6\.1\.0-[0-9]+-arm64(-unsigned)?$'
                       [arm64-6.12]='^linux-image-6\.12\.[0-9]+\+deb12-arm64(-unsigned)?$')
# Debian 11 is no longer a source of upgrades here: its security suite is pinned to 1 so
# apt only downloads from it when asked by name.
VM_PIN=/etc/apt/preferences.d/dlbpf-bullseye-security

vm_cached() { [ -s "$VM_CACHE/$1/vmlinuz" ] && [ -s "$VM_CACHE/$1/modules.dep" ] && [ -s "$VM_CACHE/$1/package" ]; }

# URI of the system's Debian security archive (from the stanza naming a *-security suite),
# else the main archive's URI with /debian-security in place of /debian.
security_uri() {
  local src=/etc/apt/sources.list.d/debian.sources u=
  if [ -f "$src" ]; then
    u=$(awk 'BEGIN {RS=""} /Suites:[^\n]*-security/ {for (i = 1; i <= NF; i++) if ($i == "URIs:") {print $(i+1); exit}}' "$src")
    [ -n "$u" ] || u=$(awk '/^URIs:/ {print $2; exit}' "$src" | sed -E 's#/debian/?$#/debian-security#')
  elif [ -f /etc/apt/sources.list ]; then
    u=$(awk '$1 == "deb" && $0 ~ /-security/ {print ($2 ~ /^\[/ ? $3 : $2); exit}' /etc/apt/sources.list)
  fi
  printf '%s\n' "$u"
}

# Adds SUITE from the security archive unless some source already names it.
vm_add_suite() {
  local suite=$1 uri
  grep -rqsE "(^|[[:space:]])$suite([[:space:]]|$)" /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
  uri=$(security_uri)
  [ -n "$uri" ] || die "cannot find the system's Debian security source to add $suite next to it"
  log "adding $suite (from $uri)"
  cat > "/etc/apt/sources.list.d/dlbpf-$suite.sources" <<SRC
Types: deb
URIs: $uri
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
}

# Newest package of a series that apt can download: the names matching the pattern that
# have a candidate version, highest version first.
vm_newest() {
  local names best='' bestv='' name cand
  mapfile -t names < <(apt-cache pkgnames linux-image- | grep -E "$1" | sort -r)
  [ ${#names[@]} -gt 0 ] || return 1
  while read -r name cand; do
    [ "$cand" != "(none)" ] || continue
    if [ -z "$bestv" ] || dpkg --compare-versions "$cand" gt "$bestv"; then best=$name bestv=$cand; fi
  done < <(apt-cache policy "${names[@]}" 2>/dev/null |
           awk '/^[^ ]/ {n = $1; sub(/:$/, "", n)} $1 == "Candidate:" {print n, $2}')
  [ -n "$best" ] && printf '%s %s\n' "$best" "$bestv"
}

# Downloads PACKAGE=VERSION, keeps its vmlinuz, modules.dep/.builtin and the closure of
# VM_MODULES (decompressed, so busybox insmod loads them), then drops the .deb.
vm_fetch() {
  local series=$1 pkg=$2 ver=$3 tmp kver mdir dest m want dep deps
  tmp=$(mktemp -d "$VM_CACHE/.fetch.XXXXXX")
  chmod 755 "$tmp"  # apt-get download writes as _apt where it can
  log "downloading $pkg $ver for the $series guest"
  ( cd "$tmp" && apt-get download -qq "$pkg=$ver" </dev/null >/dev/null 2>&1 ) ||
    { rm -rf "$tmp"; die "could not download $pkg=$ver"; }
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
  [ -f "$mdir/modules.builtin" ] && cp "$mdir/modules.builtin" "$dest/"
  # Closure over modules.dep: each line names a module's file and every module it needs
  # (file names use - or _ alike, as module names do).
  want=()
  for m in "${VM_MODULES[@]}"; do
    dep=$(awk -v m="$m" '{n = $1; sub(/:$/, "", n); $1 = n; sub(/.*\//, "", n); sub(/\.ko.*/, "", n)
                            gsub(/-/, "_", n)} n == m {print; exit}' "$mdir/modules.dep")
    read -r -a deps <<<"$dep"
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

if [ "${DLBPF_SETUP_VM:-1}" != 0 ]; then
  vm_missing=()
  for p in "${VM_HOST_PKGS[@]}"; do [ -n "$(pkg_version "$p")" ] || vm_missing+=("$p"); done
  vm_series=()
  for s in "${VM_SERIES[@]}"; do
    { vm_cached "$s" && [ "${DLBPF_VM_REFRESH:-0}" != 1 ]; } || vm_series+=("$s")
  done
  if [ ${#vm_missing[@]} -gt 0 ] || [ ${#vm_series[@]} -gt 0 ]; then
    vm_add_suite bookworm-security
    vm_add_suite bullseye-security
    if [ ! -f "$VM_PIN" ]; then
      printf 'Package: *\nPin: release n=bullseye-security\nPin-Priority: 1\n' > "$VM_PIN"
    fi
    # Fresh lists: older ones may name kernels the archive no longer holds.
    apt_update
    [ ${#vm_missing[@]} -eq 0 ] || apt_install "${vm_missing[@]}"
    mkdir -p "$VM_CACHE"
    rm -rf "$VM_CACHE"/.fetch.*  # what an interrupted run left
    for s in "${vm_series[@]}"; do
      read -r pkg ver < <(vm_newest "${VM_PATTERN[$s]}") ||
        die "no ${VM_PATTERN[$s]} package in apt's lists (is ${VM_SUITE[$s]} reachable?)"
      if vm_cached "$s" && [ "$(cat "$VM_CACHE/$s/package")" = "$pkg $ver" ]; then continue; fi
      vm_fetch "$s" "$pkg" "$ver"
    done
  fi
  for s in "${VM_SERIES[@]}"; do
    vm_cached "$s" || die "VM kernel $s missing from $VM_CACHE"
    # arm64's vmlinuz is an uncompressed Image already: QEMU boots it as it is.
    [[ $s == arm64-* ]] || [ -s "$VM_CACHE/$s/vmlinux" ] || vm_extract_elf "$VM_CACHE/$s" ||
      log "warning: no ELF vmlinux for $s (its guests boot the vmlinuz, some 3 s slower)"
  done
  # The arm64 guests' initramfs shell: Debian's arm64 busybox-static, unpacked (the host's
  # own busybox-static is amd64's and the two cannot be installed side by side).
  if [ ! -x "$VM_CACHE/arm64-busybox/busybox" ]; then
    tmp=$(mktemp -d "$VM_CACHE/.fetch.XXXXXX")
    chmod 755 "$tmp"
    ( cd "$tmp" && apt-get download -qq busybox-static:arm64 </dev/null >/dev/null 2>&1 ) ||
      { rm -rf "$tmp"; die "could not download busybox-static:arm64 (is dpkg's arm64 architecture added?)"; }
    dpkg-deb -x "$tmp"/*.deb "$tmp/x" && mkdir -p "$VM_CACHE/arm64-busybox" &&
      install -m 0755 "$tmp/x/bin/busybox" "$VM_CACHE/arm64-busybox/busybox" ||
      { rm -rf "$tmp"; die "busybox-static:arm64 holds no /bin/busybox"; }
    rm -rf "$tmp"
  fi
  # Debian's arm64 CPython 3.11, unpacked for the arm64 guests' Python lines (never installed).
  "$(dirname "$0")/vm/fetch-arm64-python" "$VM_CACHE/arm64-python" ||
    die "could not fetch Debian's arm64 python3.11 (tools/vm/fetch-arm64-python)"
  log "VM kernels: $(for s in "${VM_SERIES[@]}"; do printf '%s=%s ' "$s" "$(cut -d' ' -f2 "$VM_CACHE/$s/package")"; done)"
fi

# Tracefs is where uprobe and tracepoint events live; mount it if the system has not.
if [ ! -d /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || log "could not mount tracefs"
fi
[ -r /sys/kernel/btf/vmlinux ] || log "warning: /sys/kernel/btf/vmlinux missing: dlbpf needs a kernel with BTF"
log "ok: libbpf $(upstream "$(pkg_version libbpf-dev)"), bpftool $(bpftool_version), $(clang --version | head -n1)"
