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
PYTHON=${PYTHON:-python3}
PLUGIN=nvidia/nvshmem/lib/nvshmem_bootstrap_uid.so.3
HEADER=nvidia/nvshmem/include/bootstrap_device_host/nvshmem_uniqueid.h

if [[ $# -eq 0 ]]; then
    set -- 3.4.5 3.7.1 3.8.0
fi

die() {
    echo "fetch-nvshmem: $*" >&2
    exit 1
}

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (needed for pip and to unpack the wheel)"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "pip is not available for $PYTHON"

for v in "$@"; do
    [[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "bad version '$v' (expected MAJOR.MINOR.PATCH, e.g. 3.8.0)"
    dest=$CACHE/$v
    if [[ -s $dest/nvshmem_bootstrap_uid.so.3 && -s $dest/nvshmem_uniqueid.h ]]; then
        echo "$dest/nvshmem_bootstrap_uid.so.3"
        continue
    fi
    mkdir -p "$CACHE"
    tmp=$(mktemp -d "$CACHE/.fetch-$v.XXXXXX")
    # shellcheck disable=SC2064 # expand $tmp now: it changes on the next version
    trap "rm -rf '$tmp'" EXIT
    echo "fetch-nvshmem: downloading nvidia-nvshmem-cu12==$v" >&2
    if ! "$PYTHON" -m pip download --quiet --no-deps --disable-pip-version-check \
        --dest "$tmp" "nvidia-nvshmem-cu12==$v" >"$tmp/pip.log" 2>&1; then
        cat "$tmp/pip.log" >&2
        die "could not download nvidia-nvshmem-cu12==$v from the Python package index (offline, or no such version?)"
    fi
    wheel=$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n 1)
    [[ -n $wheel ]] || die "pip downloaded no wheel for nvidia-nvshmem-cu12==$v"
    mkdir -p "$tmp/out"
    "$PYTHON" - "$wheel" "$tmp/out" "$PLUGIN" "$HEADER" <<'EOF' || die "the $v wheel does not hold the UID bootstrap plugin"
import sys, zipfile, os
wheel, out, *names = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with z.open(name) as src, open(os.path.join(out, os.path.basename(name)), "wb") as dst:
            dst.write(src.read())
EOF
    # A concurrent fetch of the same version may have finished first: keep either complete copy.
    rm -rf "$dest"
    if ! mv -T "$tmp/out" "$dest" 2>/dev/null && [[ ! -s $dest/nvshmem_bootstrap_uid.so.3 ]]; then
        die "could not move the plugin into $dest"
    fi
    rm -rf "$tmp"
    trap - EXIT
    echo "$dest/nvshmem_bootstrap_uid.so.3"
done
