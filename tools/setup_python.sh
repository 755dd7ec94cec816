#!/usr/bin/env bash
# Creates tools/.venv with what the Python-side tests need, from PyPI only:
#   - the official MCP Python SDK (a client nobody here wrote, for the interop test);
#   - prompt-diary 0.2.10, the reference, without its heavy dependencies (it pulls a
#     ~350 MB codex binary; its MCP server, generation and rendering modules need only
#     these few).
#   - prompt-diary 0.2.20, the reference for schema-7 workspaces, in tools/.venv-0.2.20, the
#     same way (its `openai-codex` dependency is skipped: the MCP server, `prepare` and the
#     generation modules import without it).
# Idempotent: an existing venv with everything importable is reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
checks='import mcp, prompt_diary.mcp.server, prompt_diary.generate.rendering.render_markdown, prompt_diary.prepare.workspace'

# make_venv DIR VERSION TYPER_SPEC
make_venv() {
  local venv="$1" version="$2" typer="$3"
  local py="$venv/bin/python"
  if [ -x "$py" ] && "$py" -c "$checks" 2>/dev/null; then
    return 0
  fi
  python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check \
    "mcp==1.30.0" "msgspec>=0.21.1" "jinja2>=3.1" "platformdirs>=4.0" "rich>=13" "$typer" "notion-client>=2.0"
  "$py" -m pip install --quiet --disable-pip-version-check --no-deps "prompt-diary==$version"
  "$py" -c "$checks"
}

make_venv "$here/.venv" 0.2.10 "typer>=0.25.1"
make_venv "$here/.venv-0.2.20" 0.2.20 "typer>=0.27.2"
