#!/usr/bin/env bash
# Makes the README's pictures of `view`, drawn by headless Chromium. Rerun it after
# changing the page.
# - docs/view.png: the example workspace's page after the README's "Use it" steps: the day's
#   story, the grid's green cells, and the first chain opened beside the lines it cites.
# - docs/view-day.png: the first screen of a larger generated day (3 projects, 45 sessions
#   of 12 turns, a chain for every turn: tools/lib/day_documents.py).
# Usage: tools/gen/view_screenshot.sh [EVIDENCE_STORE_BINARY]   (default: evidence-store on PATH)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:-evidence-store}"
chromium="$(command -v chromium)" || { echo "needs chromium (apt-get install chromium)" >&2; exit 1; }
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
shoot() { # URL SIZE OUT
  "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --user-data-dir="$scratch/profile-$RANDOM" --window-size="$2" \
    --screenshot="$PWD/$3" "$1" 2>/dev/null
  ls -l "$3"
}

ws=examples/workspace
"$bin" --workspace "$ws" import >/dev/null
"$bin" --workspace "$ws" build >/dev/null
"$bin" --workspace "$ws" export >/dev/null
url="$("$bin" --workspace "$ws" view 2>/dev/null)"
# #open=ID opens that turn's chain where it stands, without scrolling to it.
shoot "$url#open=turn:Demo-0123456789ab:S0001:T0001" 1100,2350 docs/view.png

day="$scratch/day"
python3 tools/lib/gen_workspace.py --out "$day" --projects 3 --sessions 15 --turns 12 >/dev/null
python3 -c 'import sys; sys.path.insert(0, "tools/lib"); import day_documents; from pathlib import Path; day_documents.write(Path(sys.argv[1]))' "$day"
"$bin" --workspace "$day" import >/dev/null
url="$("$bin" --workspace "$day" view 2>/dev/null)"
shoot "$url" 1280,900 docs/view-day.png
