#!/usr/bin/env bash
# Writes a PNG of a case's replay timeline, for people: `make timeline-screenshot`.
#
#   scripts/timeline-screenshot.sh [CASE] [OUT.png]
#
# Renders `bootsim replay CASE --timeline` to HTML next to OUT.png and screenshots it with
# headless chromium (scripts/install-chromium.sh) as the page opens in a 1400x1000 window, the
# size tests/timeline.rs checks (WINDOW=WxH to change; WINDOW=full for the whole page with
# every band shown).
set -euo pipefail

CASE=${1:-"variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3"}
OUT=${2:-target/timeline.png}
BOOTSIM=${BOOTSIM:-target/release/bootsim}
CHROMIUM=${CHROMIUM:-chromium}

command -v "$CHROMIUM" >/dev/null 2>&1 || {
    echo "timeline-screenshot: $CHROMIUM not found; run scripts/install-chromium.sh" >&2
    exit 1
}
mkdir -p "$(dirname "$OUT")"
HTML="${OUT%.png}.html"
"$BOOTSIM" replay "$CASE" --timeline "$HTML" >/dev/null || true
[[ -s "$HTML" ]] || { echo "timeline-screenshot: no timeline written for '$CASE'" >&2; exit 1; }

WINDOW=${WINDOW:-1400x1000}
if [[ $WINDOW == full ]]; then
    # Every band shown, the window as tall as the picture plus the header above it.
    sed -i 's/type="checkbox" id="show-\([a-z]*\)">/type="checkbox" id="show-\1" checked>/g' "$HTML"
    H=$(grep -o '<svg[^>]*id="timeline"[^>]*>' "$HTML" | sed -E 's/.*height="([0-9]+)".*/\1/')
    W=1400; H=$((H + 420))
else
    W=${WINDOW%x*}; H=${WINDOW#*x}
fi

PROFILE=$(mktemp -d)
trap 'rm -rf "$PROFILE"' EXIT
"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$PROFILE" \
    --hide-scrollbars --window-size="$W,$H" --screenshot="$(realpath "$OUT")" \
    "file://$(realpath "$HTML")" 2>/dev/null
echo "timeline-screenshot: $OUT (${W}x${H}) from $HTML"
