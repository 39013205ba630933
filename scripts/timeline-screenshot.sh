#!/usr/bin/env bash
# Writes a PNG of a case's replay timeline, for people: `make timeline-screenshot`.
#
#   scripts/timeline-screenshot.sh [CASE] [OUT.png]
#
# Renders `bootsim replay CASE --timeline` to HTML next to OUT.png and screenshots it with
# headless chromium (scripts/install-chromium.sh), the window sized to the whole picture.
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

# The SVG's own size, plus the header above it (explanation and legend).
read -r W H < <(grep -o '<svg[^>]*id="timeline"[^>]*>' "$HTML" |
    sed -E 's/.*width="([0-9]+)" height="([0-9]+)".*/\1 \2/')
W=$((W + 40)); H=$((H + 360))

PROFILE=$(mktemp -d)
trap 'rm -rf "$PROFILE"' EXIT
"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$PROFILE" \
    --hide-scrollbars --window-size="$W,$H" --screenshot="$(realpath "$OUT")" \
    "file://$(realpath "$HTML")" 2>/dev/null
echo "timeline-screenshot: $OUT (${W}x${H}) from $HTML"
