#!/usr/bin/env bash
# Installs the system packages that `cargo build -p bootsim-adapters --features rdma` needs.
#
# ibverbs-sys 0.3.2's build script runs cmake on its vendored rdma-core (cmake, pkg-config),
# runs bindgen (libclang-dev) against headers that include <infiniband/verbs_api.h>, and links
# -libverbs (libibverbs-dev, which also pulls libnl-3-dev/libnl-route-3-dev, libibverbs1 and
# ibverbs-providers). The `rdma-core` package is deliberately avoided: it pulls systemd+udev.
# See /work/shared/notes/deps.md section 3.
#
# Idempotent: exits without touching apt when every package is already installed, and runs
# `apt-get update` only when a missing package has no install candidate (empty or stale lists).
# Debian/Ubuntu only. Runs apt through sudo when not root.
set -euo pipefail

PACKAGES=(cmake pkg-config libclang-dev libibverbs-dev)

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

has_candidate() {
    local cand
    cand=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
    [[ -n "$cand" && "$cand" != "(none)" ]]
}

missing=()
for p in "${PACKAGES[@]}"; do
    is_installed "$p" || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-rdma-deps: already installed: ${PACKAGES[*]}"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-rdma-deps: apt-get not found; install manually: ${missing[*]}" >&2
    exit 1
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        echo "install-rdma-deps: not root and no sudo; install manually: ${missing[*]}" >&2
        exit 1
    fi
fi

need_update=0
for p in "${missing[@]}"; do
    has_candidate "$p" || { need_update=1; break; }
done
if [[ $need_update -eq 1 ]]; then
    echo "install-rdma-deps: apt-get update (no install candidate for some of: ${missing[*]})"
    "${SUDO[@]}" apt-get update
fi

echo "install-rdma-deps: installing ${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"

for p in "${PACKAGES[@]}"; do
    if ! is_installed "$p"; then
        echo "install-rdma-deps: $p still not installed" >&2
        exit 1
    fi
done
echo "install-rdma-deps: done"
