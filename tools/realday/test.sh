#!/usr/bin/env bash
# The real day in CI (tools/test.sh runs it): one fake day through prompt-diary 0.2.20's own
# `generate` and its real Codex, with evidence-store and then with prompt-diary's own server,
# the same scripted endpoint and the same histories; then the differential of the documents
# both left (compare.py). Checks, for evidence-store: generate exited 0, a chain for every
# indexed turn, the report rendered, 0 protocol errors (in the servers' logs and on their
# stdout), every request answered, a tap record for every server started, `verify` clean on
# the store as Codex left it (after it SIGTERMed its servers, before `run`'s own import, which
# would repair a store left unclosed) and after `run`; for prompt-diary's server, the same day
# succeeded. First, the realday tools' own tests (test_tools.py).
#   tools/realday/test.sh [--bin PATH (default: the debug build, where cargo put it)] [--keep DIR]
# When prompt-diary 0.2.20 and its Codex cannot be installed: in CI (CI=true), where PyPI is
# reachable, that is a failure; elsewhere the test is skipped, loudly, with the reason.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="" keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    *) echo "realday test: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$bin" ] || bin="$(python3 "$root/tools/lib/cargo_target.py" debug)"
started=$SECONDS
python3 "$here/test_tools.py" >&2 || { echo "FAIL realday: the realday tools' own tests (test_tools.py)" >&2; exit 1; }
log="$(mktemp)"
if ! "$here/setup.sh" >/dev/null 2>"$log"; then
  reason="$(tail -n 1 "$log")"
  rm -f "$log"
  if [ "${CI:-}" = true ]; then
    echo "FAILED: real day: $reason (in CI the registries are reachable, so prompt-diary 0.2.20 must install)" >&2
    exit 1
  fi
  echo "######################################################################" >&2
  echo "SKIPPED: real day: $reason" >&2
  echo "######################################################################" >&2
  exit 0
fi
rm -f "$log"
echo "[realday] setup done in $((SECONDS - started))s"

if [ -n "$keep" ]; then
  mkdir -p "$keep"
  tmp="$(cd "$keep" && pwd)"
else
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
fi
python3 "$here/fake_home.py" --out "$tmp/home" --date 2026-01-15 >/dev/null
failures=()
for server in evidence-store prompt-diary; do
  if ! "$here/run.sh" --server "$server" --histories "$tmp/home" --date 2026-01-15 --timezone UTC \
      --bin "$bin" --out "$tmp/$server" >/dev/null; then
    failures+=("$server: generate failed (exit $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generate_rc"])' "$tmp/$server/summary.json" 2>/dev/null || echo '?')); tail of its log:")
    tail -n 20 "$tmp/$server/generate.log" >&2 || true
  fi
  echo "[realday] $server: $(python3 - "$tmp/$server/summary.json" <<'PY' 2>/dev/null || echo "no summary"
import json, sys
s = json.load(open(sys.argv[1]))
v = (s.get("verify") or {})
print(f"generate_rc {s['generate_rc']}, {s['seconds']}s, {s['turns']} turns, {s['chains']} chains, "
      f"{s['work_items']} work items, report {'rendered' if s['report']['rendered'] else 'MISSING'}, "
      f"{s['servers']['started']} servers, {sum(s['requests'].values())} requests, "
      f"{s['protocol_errors']} protocol errors, stopped by {s['servers']['stopped_by_signal']}, "
      f"ended {s['servers']['ended']}, {s['servers']['share_of_day']:.0%} of the day in a server"
      + (f", verify as Codex left it rc {(v.get('as_codex_left_it') or {}).get('rc')}, after run rc {v['after_run']['rc']}" if v else ""))
PY
)"
done

python3 - "$tmp/evidence-store/summary.json" <<'PY' || failures+=("evidence-store: the day's summary fails its checks (above)")
import json, sys
s = json.load(open(sys.argv[1]))
problems = []
if s["generate_rc"] != 0: problems.append(f"generate exited {s['generate_rc']}")
if s["turns"] == 0 or s["turns_without_chain"]: problems.append(f"turns without a chain: {s['turns_without_chain']} of {s['turns']}")
if not s["report"]["rendered"]: problems.append("no report rendered")
if s["protocol_errors"]: problems.append(f"{s['protocol_errors']} protocol errors: {s['protocol_error_lines']}")
if s["servers"]["unanswered_requests"]: problems.append(f"{s['servers']['unanswered_requests']} requests never answered")
if not s["requests"].get("tools/call:write_evidence"): problems.append("the server's log shows no write_evidence")
if s["servers"]["without_tap_record"]: problems.append(f"servers without a tap record: {s['servers']['without_tap_record']}")
verify = s.get("verify") or {}
# The store as Codex left it must be closed cleanly: run's repairing import would hide one
# that is not.
if (verify.get("as_codex_left_it") or {}).get("rc") != 0: problems.append(f"verify as Codex left the store: {verify.get('as_codex_left_it')}")
if (verify.get("after_run") or {}).get("rc") != 0: problems.append(f"verify after run: {verify.get('after_run')}")
for p in problems: print(f"FAIL evidence-store day: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
if [ -f "$tmp/evidence-store/summary.json" ] && [ -f "$tmp/prompt-diary/summary.json" ]; then
  python3 "$here/compare.py" "$tmp/evidence-store" "$tmp/prompt-diary" || failures+=("the two servers left different documents (DIFF lines above)")
fi
for f in "${failures[@]}"; do echo "FAIL realday: $f" >&2; done
echo "[realday] done in $((SECONDS - started))s"
[ "${#failures[@]}" -eq 0 ]
