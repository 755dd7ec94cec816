#!/usr/bin/env bash
# Makes docs/view.png, the README's picture of `view`: the example workspace's page after
# the README's "Use it" steps, drawn by headless Chromium. Rerun it after changing the page.
# Usage: tools/gen/view_screenshot.sh [EVIDENCE_STORE_BINARY]   (default: evidence-store on PATH)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:-evidence-store}"
chromium="$(command -v chromium)" || { echo "needs chromium (apt-get install chromium)" >&2; exit 1; }
ws=examples/workspace
"$bin" --workspace "$ws" import >/dev/null
"$bin" --workspace "$ws" build >/dev/null
"$bin" --workspace "$ws" export >/dev/null
url="$("$bin" --workspace "$ws" view 2>/dev/null)"
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" --window-size=1000,1150 \
  --screenshot="$PWD/docs/view.png" "$url" 2>/dev/null
ls -l docs/view.png
