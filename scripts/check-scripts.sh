#!/usr/bin/env bash
# check-scripts.sh: every shell script of the project parses (`bash -n`) and passes shellcheck.
#
# Run first by `make test`, before any install step runs, so a script that is broken on a fresh
# machine (where its install branch runs for the first time) fails CI even where the packages it
# installs are already present. Installs Debian's shellcheck through apt-install.sh; if that
# install fails (no root or sudo), `bash -n` has still run and shellcheck is a counted skip
# (scripts/skip.sh: under CI a failure).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts=(scripts/*.sh .ci/run)
status=0
for f in "${scripts[@]}"; do
    if ! bash -n "$f"; then
        echo "check-scripts: $f does not parse" >&2
        status=1
    fi
done
[[ $status -eq 0 ]] || exit 1

if ! bash scripts/apt-install.sh check-scripts shellcheck >/dev/null; then
    bash scripts/skip.sh shellcheck "scripts/apt-install.sh could not install it"
    echo "check-scripts: ${#scripts[@]} scripts parse (shellcheck not run)"
    exit 0
fi
shellcheck --shell=bash "${scripts[@]}"
echo "check-scripts: ${#scripts[@]} scripts parse and pass shellcheck"
