#!/usr/bin/env bash
# The whole test suite: Rust tests, then the Python-side checks against clients and a
# reference implementation nobody here wrote. Installs what it needs from the registries.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --locked
cargo build --locked --quiet   # the binary the Python checks drive

tools/setup_python.sh
py=tools/.venv/bin/python
"$py" tools/test_interop.py --bin target/debug/evidence-store
"$py" tools/test_differential.py --bin target/debug/evidence-store
"$py" tools/test_end_to_end.py --bin target/debug/evidence-store
"$py" tools/test_run_prompt_diary.py --bin target/debug/evidence-store
tools/.venv-0.2.20/bin/python tools/test_differential_0220.py --bin target/debug/evidence-store
tools/.venv-0.2.20/bin/python tools/test_run_prompt_diary.py --bin target/debug/evidence-store
