#!/usr/bin/env bash
# fetch-nvshmem.sh [VERSION...]: puts NVSHMEM's UID bootstrap plugin of each version in a cache.
#
# NVSHMEM's license does not allow redistributing its binaries, so bootsim never commits them:
# this downloads the `nvidia-nvshmem-cu12==VERSION` wheel from the Python package index (about
# 280 MB, not kept), extracts only `nvshmem_bootstrap_uid.so.3` (about 80 KB, needs only libc and
# libstdc++) and `nvshmem_uniqueid.h` into $BOOTSIM_NVSHMEM_CACHE/VERSION/ (default
# ~/.cache/bootsim/nvshmem/VERSION/), and prints each plugin's path. Idempotent: a version already
# in the cache is not downloaded again. Default versions: 3.4.5 3.7.1 3.8.0.
set -euo pipefail

CACHE=${BOOTSIM_NVSHMEM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bootsim/nvshmem}
PLUGIN=nvidia/nvshmem/lib/nvshmem_bootstrap_uid.so.3
HEADER=nvidia/nvshmem/include/bootstrap_device_host/nvshmem_uniqueid.h

if [[ $# -eq 0 ]]; then
    set -- 3.4.5 3.7.1 3.8.0
fi

# shellcheck source=scripts/wheel-cache.sh disable=SC1091
source "$(dirname "$0")/wheel-cache.sh"

for v in "$@"; do
    if ! [[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
        echo "fetch-nvshmem: bad version '$v' (expected MAJOR.MINOR.PATCH, e.g. 3.8.0)" >&2
        exit 1
    fi
    dest=$CACHE/$v
    if ! [[ -s $dest/nvshmem_bootstrap_uid.so.3 && -s $dest/nvshmem_uniqueid.h ]]; then
        fetch_from_wheel fetch-nvshmem nvidia-nvshmem-cu12 "$v" "$dest" "$PLUGIN" "$HEADER"
    fi
    echo "$dest/nvshmem_bootstrap_uid.so.3"
done
