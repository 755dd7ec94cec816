#!/usr/bin/env bash
# Builds the wheel that prompt-diary's users install with pip, as ruff and uv are built:
# maturin (from PyPI, pinned, into tools/.venv-maturin on first use) with `bindings = "bin"`
# (pyproject.toml) packs the release binary into
#   <cargo target dir>/wheels/evidence_store-<version>-py3-none-manylinux_<glibc>_<arch>.whl
# (target/wheels/ unless CARGO_TARGET_DIR says otherwise) and prints the wheel's path last.
# The compile is cargo's release build of the same target directory, so a `cargo build
# --release` or `cargo install --path .` before or after it reuses it.
#
#   tools/package/wheel.sh            then: pip install <printed path>
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=tools/.venv-maturin
maturin=1.16.0
if [[ "$("$venv/bin/maturin" --version 2>/dev/null)" != "maturin $maturin" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin==$maturin"
fi
wheels="$(python3 -c 'import sys; sys.path.insert(0, "tools/lib"); import cargo_target; print(cargo_target.target_dir() / "wheels")')"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
rm -f "$wheels"/evidence_store-"$version"-*.whl
"$venv/bin/maturin" build --locked --release --strip --out "$wheels" >&2
wheel="$(ls "$wheels"/evidence_store-"$version"-*-manylinux_*.whl)"
echo "$wheel"
