#!/usr/bin/env bash
# Shakes the Rust test suite: runs it again and again on a loaded machine, with a varied
# number of test threads, and reports every failure (run, threads, test). A test whose
# outcome depends on how fast the machine is shows up here.
#
#   tools/shake.sh [-n RUNS] [-t THREADS] [-b BUSY_PER_CORE] [CARGO_TEST_ARGS...] [-- TEST_ARGS...]
#
#   -n RUNS           how many runs (default 5)
#   -t THREADS        comma-separated --test-threads values, used in turn (default 1,2,4,8)
#   -b BUSY_PER_CORE  busy-looping processes per core while the tests run (default 2; 0: none)
#
# Examples: `tools/shake.sh` (the whole suite, 5 runs); `tools/shake.sh -n 2 --test it
# -- run_command:: session_files::`. Exits 1 when any run had a failure. Logs of every run
# stay in a temp directory, named at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=5
threads=1,2,4,8
busy_per_core=2
cargo_args=()
test_args=()
while (($#)); do
  case "$1" in
    -n) runs=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -b) busy_per_core=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    --) shift; test_args=("$@"); break ;;
    *) cargo_args+=("$1"); shift ;;
  esac
done
IFS=, read -r -a thread_list <<<"$threads"

# Built once, before the load starts: the runs time the tests, not the compiler.
cargo test --locked --no-fail-fast --no-run "${cargo_args[@]}"

logs="$(mktemp -d "${TMPDIR:-/tmp}/shake.XXXXXX")"
busy=()
stop_busy() {
  local pid
  for pid in "${busy[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${busy[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  busy=()
}
trap stop_busy EXIT
cores="$(nproc)"
for ((i = 0; i < busy_per_core * cores; i++)); do
  (while :; do :; done) &
  busy+=("$!")
done

failures=0
failed_runs=0
summary=()
started_all=$SECONDS
for ((run = 1; run <= runs; run++)); do
  t="${thread_list[$(((run - 1) % ${#thread_list[@]}))]}"
  log="$logs/run-$run-threads-$t.log"
  started=$SECONDS
  set +e
  cargo test --locked --no-fail-fast "${cargo_args[@]}" -- --test-threads="$t" "${test_args[@]}" >"$log" 2>&1
  status=$?
  set -e
  took=$((SECONDS - started))
  # Each failed test, under the test binary it belongs to ("Running tests/it/main.rs (...)").
  mapfile -t failed < <(awk '
    /^ *Running / { bin = ($2 == "unittests") ? $3 : $2 }
    /^ *Doc-tests / { bin = "doc-tests " $2 }
    /^test .* \.\.\. FAILED$/ { sub(/^test /, ""); sub(/ \.\.\. FAILED$/, ""); print bin ": " $0 }
  ' "$log")
  # A binary that failed without naming a test (it crashed, or did not build).
  if ((status != 0 && ${#failed[@]} == 0)); then
    failed=("exit status $status with no failed test named (see $log)")
  fi
  passed="$(awk '/^test result:/ { n += $4 } END { print n + 0 }' "$log")"
  for f in "${failed[@]}"; do
    echo "[shake] FAILED run $run (threads $t): $f" >&2
  done
  failures=$((failures + ${#failed[@]}))
  ((${#failed[@]})) && failed_runs=$((failed_runs + 1))
  line="run $run: --test-threads=$t, $passed passed, ${#failed[@]} failed, ${took}s"
  summary+=("$line")
  echo "[shake] $line"
done
stop_busy

echo "[shake] $runs run(s), threads ${threads}, $busy_per_core busy process(es) per core on $cores core(s):"
printf '[shake]   %s\n' "${summary[@]}"
echo "[shake] $failures failure(s), in $failed_runs of $runs run(s); $((SECONDS - started_all))s in all; logs in $logs"
((failures == 0))
