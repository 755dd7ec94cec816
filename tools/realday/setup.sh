#!/usr/bin/env bash
# Installs prompt-diary 0.2.20 with its Codex (openai-codex 0.162.0 and the 141 MB
# openai-codex-cli-bin wheel, whose `codex` is codex-cli 0.162.0) into a venv kept outside the
# checkout, keyed by the version, so a fresh clone on the same machine (as CI makes) does not
# download it again: ${REALDAY_CACHE:-~/.cache/evidence-store/realday}/venv-prompt-diary-0.2.20.
# Idempotent: a venv whose prompt-diary, openai_codex and `codex --version` check out is kept.
# Prints the venv's path on stdout; exits non-zero with the reason on its last line otherwise.
#
# Several setups at once (two checkouts' CI) take turns on a lock (flock on the cache's
# .setup.lock, waited for at most REALDAY_SETUP_LOCK_SECS, default 1800). A new venv is built
# in a directory of its own (venv-prompt-diary-0.2.20.build-XXXXXX: a venv cannot be moved, its
# scripts name their python by path) and then put in place by renaming a symlink over the
# venv's name, so a day already running on the old venv keeps it and no one ever sees a venv
# half made. An install that stopped half-way leaves only its build directory, removed by the
# next setup.
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
  command -v flock >/dev/null || die "flock is not installed (util-linux)"
  mkdir -p "$cache"
  exec 9>"$cache/.setup.lock"
  flock -w "${REALDAY_SETUP_LOCK_SECS:-1800}" 9 || die "another setup held $cache/.setup.lock for too long"
  # Another setup may have made it while this one waited.
  if ! ready; then
    # Build directories of setups that stopped half-way (none is running: the lock is ours),
    # but not the one the venv's name points to.
    current="$(readlink "$venv" 2>/dev/null || true)"
    for stale in "$venv".build-*; do
      [ -e "$stale" ] && [ "$(basename "$stale")" != "$current" ] && rm -rf "$stale"
    done
    build="$(mktemp -d "$venv.build-XXXXXX")"
    chmod 755 "$build"
    python3 -m venv "$build" >&2 || die "python3 cannot make a venv"
    "$build/bin/python" -m pip install --quiet --disable-pip-version-check "prompt-diary==$version" >&2 \
      || die "pip install prompt-diary==$version failed"
    : >"$build/.installed"
    # The name becomes a symlink to the build, in one rename; a directory there from before
    # this layout (or a broken venv) is removed first, under the lock.
    if [ -d "$venv" ] && [ ! -L "$venv" ]; then rm -rf "$venv"; fi
    ln -s "$(basename "$build")" "$venv.new.$$"
    mv -T "$venv.new.$$" "$venv"
    # The build the name pointed to before, if any, is left for a day that may still use it;
    # the next setup that builds removes it.
    ready || die "the venv at $venv does not hold prompt-diary $version with codex-cli $codex_version"
  fi
fi
echo "$venv"
