#!/usr/bin/env bash
# A real day, offline: prompt-diary 0.2.20's own `generate`, with its real Codex agent
# (codex-cli 0.162.0) talking to a scripted Responses endpoint on 127.0.0.1 (agent.py), and
# either evidence-store or prompt-diary's own MCP server answering the agents' tools.
#
#   tools/realday/run.sh --server evidence-store|prompt-diary --out DIR
#       [--histories HOME] [--date YYYY-MM-DD] [--timezone TZ] [--bin PATH] [--endpoint URL]
#
#   --histories HOME  a home holding .claude/projects/... and .codex/sessions/...; without it
#                     run.sh makes one in DIR/home (fake_home.py: several projects, both
#                     sources, multi-turn, a trimmed tool output, **Evidence**: markers)
#   --date, --timezone  the day (default 2026-01-15, UTC)
#   --bin PATH        the evidence-store binary (default: the debug build, where cargo put it)
#   --endpoint URL    a Responses endpoint already listening (default: start agent.py),
#                     e.g. tools/realmodel/server.mjs's http://127.0.0.1:PORT/v1
#   --catalog FILE    a model_catalog_json for Codex (catalog.json here redefines prompt-diary's
#                     two models with direct tools: smaller requests, for a real small model);
#                     without it Codex uses its bundled model metadata, as a user's Codex does
#
# Steps: installs prompt-diary 0.2.20 with its Codex into a cached venv (setup.sh); runs
# `prompt-diary prepare` on the histories into DIR/reports (tools/lib/histories.py, at most
# REALDAY_PREPARE_TIMEOUT s, default 600); starts the endpoint; writes a
# private CODEX_HOME (DIR/codex-home) that sends every model request there; runs
#   evidence-store --workspace DIR/reports/work/D run -- prompt-diary generate --date D ...
# or prompt-diary generate with its own server, both with a `report` tap first on PATH
# (mcp_tap.py: it records each MCP server's traffic, the signals it gets and how it ends);
# then `evidence-store verify` on the store, as Codex left it and after `run` (each at most
# REALDAY_VERIFY_TIMEOUT s, default 300); and writes DIR/summary.json (summarize.py).
# Exit status: generate's (0 only when generate exited 0); 2 when the install or a setup step
# failed before generate could run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
histories="" date="2026-01-15" tz="UTC" server="" out="" bin="" endpoint="" catalog=""
die() { echo "realday: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --histories) histories="$2"; shift 2 ;;
    --date) date="$2"; shift 2 ;;
    --timezone) tz="$2"; shift 2 ;;
    --server) server="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --endpoint) endpoint="$2"; shift 2 ;;
    --catalog) catalog="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
case "$server" in evidence-store|prompt-diary) ;; *) die "--server must be evidence-store or prompt-diary" ;; esac
[ -n "$out" ] || die "--out DIR is required"
[[ "$date" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || die "--date must be YYYY-MM-DD, not $date"
if [ "$server" = evidence-store ]; then
  [ -n "$bin" ] || bin="$(python3 "$root/tools/lib/cargo_target.py" debug)"
  [ -x "$bin" ] || die "no evidence-store binary at $bin (cargo build --locked, or --bin PATH)"
  bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
[ -e "$out/reports" ] && die "$out already holds a day (reports/); give an empty --out"

venv="$("$here/setup.sh")" || die "prompt-diary 0.2.20 and its Codex could not be installed (setup.sh)"
py="$(command -v python3)"

if [ -z "$histories" ]; then
  histories="$out/home"
  "$py" "$here/fake_home.py" --out "$histories" --date "$date" >/dev/null
fi
histories="$(cd "$histories" && pwd)"
reports="$out/reports"
workspace="$reports/work/$date"
mkdir -p "$out/user-home" "$out/codex-home" "$out/bin" "$out/tap"

# prepare as the differential tests run it (tools/lib/histories.py): no configuration of the
# user's, the histories' home as HOME, English content, at most REALDAY_PREPARE_TIMEOUT s.
"$py" "$root/tools/lib/histories.py" prepare --venv-bin "$venv/bin" --histories-home "$histories" \
  --reports-root "$reports" --date "$date" --timezone "$tz" --content-language en --log "$out/prepare.log" \
  --timeout "${REALDAY_PREPARE_TIMEOUT:-600}" >/dev/null \
  || { cat "$out/prepare.log" >&2; die "prompt-diary prepare failed or timed out"; }

# generate reads no configuration of the user's either: a home of its own, English content.
clean_env=(env -u PROMPT_DIARY_HOME -u PROMPT_DIARY_CONFIG -u XDG_CONFIG_HOME -u XDG_DATA_HOME
  -u PROMPT_DIARY_WORKSPACE -u TZ -u OPENAI_API_KEY -u OPENAI_BASE_URL -u CODEX_API_KEY
  PROMPT_DIARY_CONTENT_LANGUAGE=en)

agent_pid=""
cleanup() { if [ -n "$agent_pid" ]; then kill "$agent_pid" 2>/dev/null || true; wait "$agent_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT
if [ -z "$endpoint" ]; then
  "$py" "$here/agent.py" --port 0 --port-file "$out/agent.port" --log-dir "$out/agent" >"$out/agent.log" 2>&1 &
  agent_pid=$!
  for _ in $(seq 100); do [ -s "$out/agent.port" ] && break; sleep 0.1; done
  [ -s "$out/agent.port" ] || die "the scripted agent did not start (see $out/agent.log)"
  endpoint="http://127.0.0.1:$(cat "$out/agent.port")/v1"
fi
case "$endpoint" in http://127.0.0.1:*|http://localhost:*|http://\[::1\]:*) ;; *) die "--endpoint must be a loopback http URL" ;; esac

# Codex's own configuration: every model request to the endpoint, no login, no key; the MCP
# server is given 20 s before the first request (else it may go out listing no MCP tools).
[ -z "$catalog" ] || [ -f "$catalog" ] || die "no catalog file at $catalog"
cat >"$out/codex-home/config.toml" <<EOF
model_provider = "local"
${catalog:+model_catalog_json = \"$catalog\"}
web_search = "disabled"
mcp_optional_startup_grace_ms = 20000

[model_providers.local]
name = "local"
base_url = "$endpoint"
wire_api = "responses"
stream_idle_timeout_ms = 3600000
request_max_retries = 0
stream_max_retries = 0

[features]
shell_tool = false
unified_exec = false
goals = false
view_image = false
EOF
printf '#!/bin/sh\nexec %q %q %q "$@"\n' "$py" "$here/mcp_tap.py" "$out/tap" >"$out/bin/report"
chmod +x "$out/bin/report"

generate=(prompt-diary generate --date "$date" --timezone "$tz" --reports-root "$reports" --no-notion)
# The tap goes first on PATH inside the command, ahead of the `report` that `run` links to
# evidence-store (or of prompt-diary's own `report`). Under `run`, `verify` then looks at the
# store as Codex left it, before `run`'s own import and export open it again.
with_tap=(sh -c 'PATH="$0:$PATH" "$@"; rc=$?
  if [ -n "${REALDAY_VERIFY_BIN:-}" ]; then
    timeout --kill-after=10 "$REALDAY_VERIFY_TIMEOUT" "$REALDAY_VERIFY_BIN" --workspace "$REALDAY_WORKSPACE" verify \
      >"$REALDAY_VERIFY_LOG" 2>&1
    echo "$?" >"$REALDAY_VERIFY_LOG.rc"
  fi
  exit "$rc"' "$out/bin")
verify_env=()
# A verify of this day's store takes well under a second; past this it hangs.
verify_timeout="${REALDAY_VERIFY_TIMEOUT:-300}"
if [ "$server" = evidence-store ]; then
  command=("$bin" --workspace "$workspace" run -- "${with_tap[@]}" "${generate[@]}")
  verify_env=(REALDAY_VERIFY_BIN="$bin" REALDAY_WORKSPACE="$workspace" REALDAY_VERIFY_LOG="$out/verify-as-codex-left-it.log"
    REALDAY_VERIFY_TIMEOUT="$verify_timeout")
else
  command=("${with_tap[@]}" "${generate[@]}")
fi
printf '%q ' "${command[@]}" >"$out/command.txt"
echo >>"$out/command.txt"
started="$(date +%s.%N)"
set +e
"${clean_env[@]}" "${verify_env[@]}" HOME="$out/user-home" CODEX_HOME="$out/codex-home" REALDAY_TAP_DIR="$out/bin" \
  PATH="$venv/bin:$PATH" timeout --kill-after=10 "${REALDAY_TIMEOUT:-1200}" "${command[@]}" >"$out/generate.log" 2>&1
rc=$?
set -e
ended="$(date +%s.%N)"

verify_rc=""
if [ "$server" = evidence-store ] && [ -e "$workspace/.evidence-store" ]; then
  set +e
  timeout --kill-after=10 "$verify_timeout" "$bin" --workspace "$workspace" verify >"$out/verify.log" 2>&1
  verify_rc=$?
  set -e
fi
"$py" "$here/summarize.py" --out "$out" --workspace "$workspace" --server "$server" --rc "$rc" \
  --started "$started" --ended "$ended" --verify-rc "$verify_rc" --endpoint "$endpoint" >"$out/summary.json"
cat "$out/summary.json"
exit "$rc"
