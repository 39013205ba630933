#!/usr/bin/env bash
# apt-install.sh NAME PKG...: installs Debian packages the project needs, idempotently.
#
# Exits without touching apt when every package is installed, and runs `apt-get update` only
# when a missing package has no install candidate (empty or stale lists). Debian/Ubuntu only;
# runs apt through sudo when not root. NAME prefixes its messages.
set -euo pipefail

NAME=${1:?usage: apt-install.sh NAME PKG...}
shift
PACKAGES=("$@")

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
    echo "$NAME: already installed: ${PACKAGES[*]}"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "$NAME: apt-get not found; install manually: ${missing[*]}" >&2
    exit 1
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        echo "$NAME: not root and no sudo; install manually: ${missing[*]}" >&2
        exit 1
    fi
fi

need_update=0
for p in "${missing[@]}"; do
    has_candidate "$p" || { need_update=1; break; }
done
if [[ $need_update -eq 1 ]]; then
    echo "$NAME: apt-get update (no install candidate for some of: ${missing[*]})"
    "${SUDO[@]}" apt-get update
fi

echo "$NAME: installing ${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"

for p in "${PACKAGES[@]}"; do
    if ! is_installed "$p"; then
        echo "$NAME: $p still not installed" >&2
        exit 1
    fi
done
echo "$NAME: done"
