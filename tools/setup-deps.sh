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

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

pkg_version() { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null |
                awk '/install ok installed/ {print $4}'; }

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
for p in "${BASE_PKGS[@]}"; do [ -n "$(pkg_version "$p")" ] || missing+=("$p"); done

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
  export DEBIAN_FRONTEND=noninteractive
  log "apt-get update"
  apt-get update -qq </dev/null >/dev/null || die "apt-get update failed"
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null ||
      die "could not install ${missing[*]}"
  fi
  if need_libbpf || need_bpftool; then
    log "installing libbpf-dev and bpftool from $BACKPORTS"
    apt-get install -y -qq --no-install-recommends -t "$BACKPORTS" libbpf-dev libbpf1 bpftool \
      </dev/null >/dev/null || die "could not install libbpf-dev/bpftool from $BACKPORTS"
  fi
  need_libbpf && die "libbpf-dev >= $MIN_LIBBPF not available (have: $(pkg_version libbpf-dev))"
  need_bpftool && die "bpftool >= $MIN_BPFTOOL not available (have: $(bpftool_version))"
fi

# bpftrace is optional (benchmarks compare against it when present); never fatal.
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

# Tracefs is where uprobe and tracepoint events live; mount it if the system has not.
if [ ! -d /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || log "could not mount tracefs"
fi
[ -r /sys/kernel/btf/vmlinux ] || log "warning: /sys/kernel/btf/vmlinux missing: dlbpf needs a kernel with BTF"
log "ok: libbpf $(upstream "$(pkg_version libbpf-dev)"), bpftool $(bpftool_version), $(clang --version | head -n1)"
