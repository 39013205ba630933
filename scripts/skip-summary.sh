#!/usr/bin/env bash
# skip-summary.sh LOG: the last lines of `make test`: how many tests did not run their real part
# on this machine, and why (each line was written by bootsim_adapters::skip). Under CI there are
# none: a test that cannot run there fails instead.
set -euo pipefail
LOG=${1:?usage: skip-summary.sh LOG}
n=0
[[ -f $LOG ]] && n=$(grep -c '^SKIPPED ' "$LOG" || true)
if [[ $n -eq 0 ]]; then
    echo "make test: 0 tests skipped"
else
    echo "make test: $n tests SKIPPED (not run, not passed) on this machine:"
    sed 's/^/  /' "$LOG"
fi
