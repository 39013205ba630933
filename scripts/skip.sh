#!/usr/bin/env bash
# skip.sh KEY WHY: a set-up step of `make test` that could not run here (no root or sudo to
# install a package). Under CI (CI set, not 0/false) it fails, as bootsim_adapters::skip does for
# tests; elsewhere it prints a SKIPPED line and counts it in $BOOTSIM_SKIP_LOG for the summary.
set -euo pipefail
KEY=${1:?usage: skip.sh KEY WHY}
WHY=${2:?usage: skip.sh KEY WHY}
ci=${CI:-}
if [[ -n $ci && $ci != 0 && ${ci,,} != false ]]; then
    echo "make test: cannot run under CI: needs $KEY: $WHY" >&2
    exit 1
fi
line="SKIPPED make test step: needs $KEY: $WHY"
echo "$line" >&2
if [[ -n ${BOOTSIM_SKIP_LOG:-} ]]; then
    echo "$line" >>"$BOOTSIM_SKIP_LOG"
fi
