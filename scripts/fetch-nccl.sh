#!/usr/bin/env bash
# fetch-nccl.sh [VERSION...]: puts NCCL's libnccl.so.2 of each version in a cache.
#
# NCCL's binaries are never committed: this downloads the `nvidia-nccl-cu12==VERSION` wheel from
# the Python package index (a few hundred MB, not kept), extracts only `libnccl.so.2` (it needs
# only libc, libstdc++, libpthread, libdl and librt; without a GPU, ncclGetVersion and
# ncclGetUniqueId work, and the latter starts NCCL's real bootstrap root) into
# $BOOTSIM_NCCL_CACHE/VERSION/ (default ~/.cache/bootsim/nccl/VERSION/), and prints each
# library's path. Idempotent: a version already in the cache is not downloaded again.
# Default versions: 2.19.3 2.21.5 2.30.7 (the newest tag of the source the model follows)
# 2.32.3 (the newest wheel on the index when this was written).
set -euo pipefail

CACHE=${BOOTSIM_NCCL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bootsim/nccl}
LIB=nvidia/nccl/lib/libnccl.so.2

if [[ $# -eq 0 ]]; then
    set -- 2.19.3 2.21.5 2.30.7 2.32.3
fi

# shellcheck source=scripts/wheel-cache.sh disable=SC1091
source "$(dirname "$0")/wheel-cache.sh"

for v in "$@"; do
    if ! [[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
        echo "fetch-nccl: bad version '$v' (expected MAJOR.MINOR.PATCH, e.g. 2.21.5)" >&2
        exit 1
    fi
    dest=$CACHE/$v
    if ! [[ -s $dest/libnccl.so.2 ]]; then
        fetch_from_wheel fetch-nccl nvidia-nccl-cu12 "$v" "$dest" "$LIB"
    fi
    echo "$dest/libnccl.so.2"
done
