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
PYTHON=${PYTHON:-python3}
LIB=nvidia/nccl/lib/libnccl.so.2

if [[ $# -eq 0 ]]; then
    set -- 2.19.3 2.21.5 2.30.7 2.32.3
fi

die() {
    echo "fetch-nccl: $*" >&2
    exit 1
}

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (needed for pip and to unpack the wheel)"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "pip is not available for $PYTHON"

for v in "$@"; do
    [[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "bad version '$v' (expected MAJOR.MINOR.PATCH, e.g. 2.21.5)"
    dest=$CACHE/$v
    if [[ -s $dest/libnccl.so.2 ]]; then
        echo "$dest/libnccl.so.2"
        continue
    fi
    mkdir -p "$CACHE"
    tmp=$(mktemp -d "$CACHE/.fetch-$v.XXXXXX")
    # shellcheck disable=SC2064 # expand $tmp now: it changes on the next version
    trap "rm -rf '$tmp'" EXIT
    echo "fetch-nccl: downloading nvidia-nccl-cu12==$v" >&2
    if ! "$PYTHON" -m pip download --quiet --no-deps --disable-pip-version-check --only-binary=:all: \
        --dest "$tmp" "nvidia-nccl-cu12==$v" >"$tmp/pip.log" 2>&1; then
        cat "$tmp/pip.log" >&2
        die "could not download nvidia-nccl-cu12==$v from the Python package index (offline, or the index has no such version)"
    fi
    wheel=$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n 1)
    [[ -n $wheel ]] || die "pip downloaded no wheel for nvidia-nccl-cu12==$v"
    mkdir -p "$tmp/out"
    "$PYTHON" - "$wheel" "$tmp/out" "$LIB" <<'EOF' || die "the $v wheel does not hold $LIB"
import sys, zipfile, os
wheel, out, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(name) as src, open(os.path.join(out, os.path.basename(name)), "wb") as dst:
    while chunk := src.read(1 << 20):
        dst.write(chunk)
EOF
    # A concurrent fetch of the same version may have finished first: keep either complete copy.
    rm -rf "$dest"
    if ! mv -T "$tmp/out" "$dest" 2>/dev/null && [[ ! -s $dest/libnccl.so.2 ]]; then
        die "could not move libnccl.so.2 into $dest"
    fi
    rm -rf "$tmp"
    trap - EXIT
    echo "$dest/libnccl.so.2"
done
