#!/usr/bin/env bash
# Installs prompt-diary 0.2.20 with its Codex (openai-codex 0.162.0 and the 141 MB
# openai-codex-cli-bin wheel, whose `codex` is codex-cli 0.162.0) into a venv kept outside the
# checkout, keyed by the version, so a fresh clone on the same machine (as CI makes) does not
# download it again: ${REALDAY_CACHE:-~/.cache/evidence-store/realday}/venv-prompt-diary-0.2.20.
# Idempotent: a venv whose prompt-diary, openai_codex and `codex --version` check out is kept.
# Prints the venv's path on stdout; exits non-zero with the reason on its last line otherwise.
set -euo pipefail
version=0.2.20
codex_version=0.162.0
cache="${REALDAY_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/evidence-store/realday}"
venv="$cache/venv-prompt-diary-$version"
die() { echo "realday setup: $*" >&2; exit 1; }

ready() {
  [ -f "$venv/.installed" ] && [ -x "$venv/bin/python" ] &&
    "$venv/bin/python" -c 'import prompt_diary.cmds.generate, openai_codex' 2>/dev/null &&
    [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("prompt-diary"))' 2>/dev/null)" = "$version" ] &&
    [ "$("$(codex_bin)" --version 2>/dev/null)" = "codex-cli $codex_version" ]
}
codex_bin() { echo "$venv/lib/python3*/site-packages/codex_cli_bin/bin/codex" | { read -r p; echo $p; }; }

if ! ready; then
  command -v python3 >/dev/null || die "python3 is not installed"
  mkdir -p "$cache"
  # An install that stopped half-way leaves no .installed: it is made again from scratch.
  rm -rf "$venv"
  python3 -m venv "$venv" >&2 || die "python3 cannot make a venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "prompt-diary==$version" >&2 \
    || die "pip install prompt-diary==$version failed"
  : >"$venv/.installed"
  ready || die "the venv at $venv does not hold prompt-diary $version with codex-cli $codex_version"
fi
echo "$venv"
