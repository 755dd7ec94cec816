#!/usr/bin/env bash
# `evidence-store view` in headless Chromium (tools/check/view_browser.py): planted HTML,
# attribute, script and URL payloads stay text, nothing is fetched, the page is drawn.
# Needs /usr/bin/chromium (Debian: `apt-get install chromium`; .ci/run installs it). Without
# it this check is skipped with a loud line, except under CI=true, where that fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:-$(python3 tools/lib/cargo_target.py debug)}"
chromium="$(command -v chromium || true)"
if [[ -z "$chromium" ]]; then
  if [[ "${CI:-}" == true ]]; then
    echo "[view_browser] chromium is not installed: CI must run the browser check" >&2
    exit 1
  fi
  echo "[view_browser] SKIPPED: chromium is not installed (apt-get install chromium)" >&2
  exit 0
fi
exec python3 tools/check/view_browser.py --bin "$bin" --chromium "$chromium"
