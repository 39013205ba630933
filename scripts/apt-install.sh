#!/usr/bin/env bash
# apt-install.sh NAME PKG...: installs Debian packages the project needs, idempotently.
#
# Exits without touching apt when every package is installed, and runs `apt-get update` only
# when a missing package has no install candidate (empty or stale lists). Debian/Ubuntu only;
# runs apt through sudo when not root. NAME prefixes its messages.
#
# Another apt (unattended-upgrades on a freshly booted cloud VM) may hold the dpkg lock: apt waits
# for it up to APT_LOCK_TIMEOUT seconds (default 600, apt's DPkg::Lock::Timeout), and when it
# gives up this script says so and exits 1.
set -euo pipefail

LOCK_TIMEOUT=${APT_LOCK_TIMEOUT:-600}
[[ "$LOCK_TIMEOUT" =~ ^[0-9]+$ ]] || { echo "apt-install.sh: APT_LOCK_TIMEOUT must be whole seconds, got '$LOCK_TIMEOUT'" >&2; exit 2; }

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

# apt-get with the bounded wait for the lock; its output is shown as it comes and kept, so that a
# failure that was the lock is named as such.
apt_get() {
    local log status=0
    log=$(mktemp)
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get -o "DPkg::Lock::Timeout=$LOCK_TIMEOUT" "$@" 2>&1 | tee "$log" || status=$?
    if [[ $status -ne 0 ]] && grep -q 'Could not get lock' "$log"; then
        echo "$NAME: gave up after waiting ${LOCK_TIMEOUT} s for the apt/dpkg lock (another apt, e.g. unattended-upgrades, holds it; see above); retry when it is done or set APT_LOCK_TIMEOUT" >&2
    fi
    rm -f "$log"
    return "$status"
}

need_update=0
for p in "${missing[@]}"; do
    has_candidate "$p" || { need_update=1; break; }
done
if [[ $need_update -eq 1 ]]; then
    echo "$NAME: apt-get update (no install candidate for some of: ${missing[*]})"
    apt_get update
fi

echo "$NAME: installing ${missing[*]}"
apt_get install -y --no-install-recommends "${missing[@]}"

for p in "${PACKAGES[@]}"; do
    if ! is_installed "$p"; then
        echo "$NAME: $p still not installed" >&2
        exit 1
    fi
done
echo "$NAME: done"
