#!/usr/bin/env bash
# A short run of every attack and bench script (tools/attack/, tools/bench/), each at its
# smallest (tiny workspaces, a second or two of load), so that a change to the binary or to
# tools/lib that breaks one shows up in CI instead of on the day someone needs the script.
# It proves that each still runs and that the attacks still hold; the numbers mean nothing.
# Exits 1 when any script fails; a script that cannot run here is skipped with a loud line
# (under CI=true, where everything must run, a skip fails too).
#
#   tools/check/smoke_tools.sh [EVIDENCE_STORE_BINARY]   (default: the debug build, where cargo puts it)
#
# Needs tools/.venv and tools/.venv-0.2.20 (tools/setup_python.sh), strace (hostile_cwd) and
# root (diskfull mounts a tmpfs).
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="$(realpath "${1:-$(python3 tools/lib/cargo_target.py debug)}")"
py=tools/.venv/bin/python
py20=tools/.venv-0.2.20/bin/python
work="$(mktemp -d /tmp/smoke-tools.XXXXXX)"
trap 'rm -rf "$work"' EXIT
failed=()
skipped=()

run() {  # run NAME COMMAND...: the command's output goes to a log, shown when it fails
  local name=$1 start=$SECONDS
  shift
  if timeout 300 "$@" >"$work/$name.log" 2>&1; then
    echo "[smoke] ok      $name ($((SECONDS - start)) s)"
  else
    echo "[smoke] FAILED  $name ($((SECONDS - start)) s): $*"
    tail -n 30 "$work/$name.log" | sed 's/^/    /'
    failed+=("$name")
  fi
}
skip() {  # skip NAME REASON
  echo "[smoke] SKIPPED $1: $2" >&2
  skipped+=("$1")
}

# One small workspace for the scripts that take one (flood, flood_cheap, protocol).
"$py" tools/lib/gen_workspace.py --out "$work/ws" --seed 7 --edge-cases --projects 1 --sessions 2 \
  --turns 4 --tool-output-max 4K >/dev/null || { echo "[smoke] cannot generate a workspace" >&2; exit 1; }

# tools/attack/: each with --smoke (small workspaces, a second of load, a few cases)
a=tools/attack
run cited_memory "$py" $a/cited_memory.py --bin "$bin" --work "$work/cited_memory" --smoke
run concurrency "$py" $a/concurrency.py --bin "$bin" --work "$work/concurrency" --smoke
if [[ "$(id -u)" == 0 ]]; then
  run diskfull "$py" $a/diskfull.py --bin "$bin" --mnt "$work/diskfull" --smoke
else
  skip diskfull "needs root to mount a tmpfs"
fi
run flood "$py" $a/flood.py --bin "$bin" --ws "$work/ws" --kind read --smoke
run flood_cheap "$py" $a/flood_cheap.py "$bin" "$work/ws" list 1   # positional: BIN WS KIND SECONDS
if command -v strace >/dev/null; then
  run hostile_cwd "$py" $a/hostile_cwd.py --bin "$bin" --work "$work/hostile_cwd" --smoke
else
  skip hostile_cwd "needs strace (apt-get install strace)"
fi
run hostile_endpoint "$py" $a/hostile_endpoint.py --bin "$bin" --work "$work/hostile_endpoint" --smoke
run hostile_fs "$py" $a/hostile_fs.py --bin "$bin" --work "$work/hostile_fs" --smoke
run kill9 "$py" $a/kill9.py --bin "$bin" --work "$work/kill9" --smoke
run offload "$py" $a/offload.py --bin "$bin" --work "$work/offload" --smoke
run protocol "$py" $a/protocol.py --bin "$bin" --ws "$work/ws" --smoke
run sampling_full "$py" $a/sampling_full.py --bin "$bin" --work "$work/sampling_full" --smoke
run session_changes "$py" $a/session_changes.py --bin "$bin" --work "$work/session_changes" --smoke
run swap_cited "$py" $a/swap_cited.py --bin "$bin" --work "$work/swap_cited" --smoke
run swap_receipts "$py" $a/swap_receipts.py --bin "$bin" --work "$work/swap_receipts" --smoke
run swap_sessions "$py" $a/swap_sessions.py --bin "$bin" --work "$work/swap_sessions" --smoke

# tools/bench/: each with --smoke (1-2 MB sessions, a run or two). bench.py's read
# workspace, made by its first run, serves ab_read and bench_pipelined.
b=tools/bench
run bench "$py" $b/bench.py --bin "$bin" --work "$work/bench" --smoke
cp "$bin" "$work/evidence-store-b"   # ab_read pairs two builds, each with a store of its own
run ab_read "$py" $b/ab_read.py "$bin" "$work/evidence-store-b" --work "$work/bench" --smoke
run bench_pipelined "$py" $b/bench_pipelined.py --bin "$bin" --work "$work/bench" --smoke
run bench_address_space "$py" $b/bench_address_space.py "$bin" --work "$work/address_space" --smoke
run bench_address_space_huge "$py" $b/bench_address_space.py "$bin" --work "$work/address_space" --huge 100 --smoke
run bench_export_lock "$py" $b/bench_export_lock.py "$bin" --work "$work/export_lock" --smoke
run bench_citations "$py" $b/bench_citations.py --bin "$bin" --work "$work/citations" --smoke
run bench_citations_ab "$py" $b/bench_citations_ab.py --base "$bin" --new "$bin" --work "$work/citations_ab" --smoke
run bench_handles "$py" $b/bench_handles.py --bin "$bin" --work "$work/handles" --smoke
run bench_pages_0220 "$py20" $b/bench_pages_0220.py --bin "$bin" --work "$work/pages_0220" --smoke
run bench_sessions "$py" $b/bench_sessions.py --bin "$bin" --work "$work/sessions" --smoke
run bench_tool_output "$py" $b/bench_tool_output.py "$bin" --work "$work/tool_output" --smoke
run bench_view "$py" $b/bench_view.py --bin "$bin" --work "$work/view" --smoke
run bench_writes_ab "$py" $b/bench_writes_ab.py "$bin" "$bin" --work "$work/writes_ab" --smoke

echo "[smoke] ${SECONDS} s: ${#failed[@]} failed${failed[*]:+ (${failed[*]})}, ${#skipped[@]} skipped${skipped[*]:+ (${skipped[*]})}"
if [[ ${#skipped[@]} -gt 0 && "${CI:-}" == true ]]; then
  echo "[smoke] CI must run every script" >&2
  exit 1
fi
[[ ${#failed[@]} -eq 0 ]]
