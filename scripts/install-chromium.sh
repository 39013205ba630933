#!/usr/bin/env bash
# Installs Debian's `chromium` package: the headless browser that tests/timeline.rs loads the
# replay timeline in (`--dump-dom`) and that `make timeline-screenshot` uses (`--screenshot`).
#
# Idempotent: exits without touching apt when chromium is already installed, and runs
# `apt-get update` only when it has no install candidate (empty or stale lists).
# Debian/Ubuntu only. Runs apt through sudo when not root.
set -euo pipefail

PACKAGES=(chromium)

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
    echo "install-chromium: already installed: ${PACKAGES[*]}"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium: apt-get not found; install manually: ${missing[*]}" >&2
    exit 1
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        echo "install-chromium: not root and no sudo; install manually: ${missing[*]}" >&2
        exit 1
    fi
fi

need_update=0
for p in "${missing[@]}"; do
    has_candidate "$p" || { need_update=1; break; }
done
if [[ $need_update -eq 1 ]]; then
    echo "install-chromium: apt-get update (no install candidate for some of: ${missing[*]})"
    "${SUDO[@]}" apt-get update
fi

echo "install-chromium: installing ${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"

for p in "${PACKAGES[@]}"; do
    if ! is_installed "$p"; then
        echo "install-chromium: $p still not installed" >&2
        exit 1
    fi
done
echo "install-chromium: done"
