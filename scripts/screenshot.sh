#!/usr/bin/env bash
# The README's picture of the report's landing page, taken by headless chromium from
# file:// with the network off, in a window 1400 px wide (the width the page must fit):
#   scripts/screenshot.sh [REPORT_INDEX] [PNG]     (or: make screenshot, after make run)
# Defaults: outputs/report/index.html and docs/report-landing.png. Needs Debian's chromium
# (apt-get install chromium); without it, one line says so and it exits 2.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
page="$(realpath -m "${1:-$repo/outputs/report/index.html}")"
png="$(realpath -m "${2:-$repo/docs/report-landing.png}")"
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  echo "screenshot: no chromium on PATH; install it (apt-get install chromium)" >&2; exit 2
fi
if [ ! -f "$page" ]; then
  echo "screenshot: $page: no report there; run make run (or benchlib report) first" >&2; exit 2
fi
profile="$(mktemp -d)"; trap 'rm -rf "$profile"' EXIT
# the flags that keep chromium off a closed network and out of the user's profile
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --disable-quic \
  --user-data-dir="$profile" --window-size=1400,1700 --screenshot="$png.tmp.png" \
  "file://$page" >/dev/null 2>&1
mv "$png.tmp.png" "$png"
echo "screenshot: $png (1400 x 1700 px, from $page)"
