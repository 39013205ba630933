#!/usr/bin/env bash
# wheel-cache.sh: sourced by fetch-nvshmem.sh and fetch-nccl.sh. Defines
#   fetch_from_wheel TOOL PACKAGE VERSION DEST MEMBER...
# which downloads PACKAGE==VERSION's wheel from the Python package index into a temporary
# folder beside DEST (the wheel is not kept), extracts each MEMBER (a path inside the wheel) into
# DEST under its base name, and fails with a message naming TOOL, the package and the version
# when the index refuses it or the wheel lacks a member. $PYTHON (default python3) runs pip.
set -euo pipefail

fetch_from_wheel() {
    local tool=$1 package=$2 version=$3 dest=$4
    shift 4
    local python=${PYTHON:-python3}
    command -v "$python" >/dev/null 2>&1 || { echo "$tool: $python not found (needed for pip and to unpack the wheel)" >&2; return 1; }
    "$python" -m pip --version >/dev/null 2>&1 || { echo "$tool: pip is not available for $python" >&2; return 1; }
    local parent tmp wheel
    parent=$(dirname "$dest")
    mkdir -p "$parent"
    tmp=$(mktemp -d "$parent/.fetch-$version.XXXXXX")
    echo "$tool: downloading $package==$version" >&2
    if ! "$python" -m pip download --quiet --no-deps --disable-pip-version-check --only-binary=:all: \
        --dest "$tmp" "$package==$version" >"$tmp/pip.log" 2>&1; then
        cat "$tmp/pip.log" >&2
        rm -rf "$tmp"
        echo "$tool: could not download $package==$version from the Python package index (offline, or the index has no such version)" >&2
        return 1
    fi
    wheel=$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n 1)
    if [[ -z $wheel ]]; then
        rm -rf "$tmp"
        echo "$tool: pip downloaded no wheel for $package==$version" >&2
        return 1
    fi
    mkdir -p "$tmp/out"
    if ! "$python" - "$wheel" "$tmp/out" "$@" <<'PY'; then
import sys, zipfile, os
wheel, out, *names = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with z.open(name) as src, open(os.path.join(out, os.path.basename(name)), "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
PY
        rm -rf "$tmp"
        echo "$tool: the $package $version wheel does not hold $*" >&2
        return 1
    fi
    # A concurrent fetch of the same version may have finished first: keep either complete copy.
    rm -rf "$dest"
    mv -T "$tmp/out" "$dest" 2>/dev/null || true
    rm -rf "$tmp"
    [[ -d $dest ]] || { echo "$tool: could not move the files into $dest" >&2; return 1; }
}
