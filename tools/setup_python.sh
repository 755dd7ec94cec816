#!/usr/bin/env bash
# Creates tools/.venv with what the Python-side tests need, from PyPI only:
#   - the official MCP Python SDK (a client nobody here wrote, for the interop test);
#   - prompt-diary 0.2.10, the reference, without its heavy dependencies (it pulls a
#     ~350 MB codex binary; its MCP server, generation and rendering modules need only
#     these few).
# Idempotent: an existing venv with everything importable is reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
py="$venv/bin/python"
if [ -x "$py" ] && "$py" -c 'import mcp, prompt_diary.mcp.server, prompt_diary.generate.rendering.render_markdown' 2>/dev/null; then
  exit 0
fi
python3 -m venv "$venv"
"$py" -m pip install --quiet --disable-pip-version-check \
  "mcp==1.30.0" "msgspec>=0.21.1" "jinja2>=3.1" "platformdirs>=4.0" "rich>=13" "typer>=0.25.1" "notion-client>=2.0"
"$py" -m pip install --quiet --disable-pip-version-check --no-deps "prompt-diary==0.2.10"
"$py" -c 'import mcp, prompt_diary.mcp.server, prompt_diary.generate.rendering.render_markdown'
