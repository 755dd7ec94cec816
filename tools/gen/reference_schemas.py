#!/usr/bin/env python3
"""Writes prompt-diary's own `tools/list`, per release, as the data `serve` lists.

For each release this project serves, runs that release's MCP server (from its test venv:
tools/.venv for 0.2.10, tools/.venv-0.2.20 for 0.2.20) over stdio, asks `tools/list` once,
and writes each tool's name, description, inputSchema and outputSchema, in the server's
order and exactly as it sent them, to src/mcp/schemas/prompt-diary-<release>.json. `serve`
lists those schemas for prompt-diary's tools (adding only its annotations), so a client
sees what prompt-diary itself publishes; the differential tests compare the two lists.

Run it again (and commit its output) only when a served release changes.

Usage: python3 tools/gen/reference_schemas.py [--check]   (--check: fail if a file differs)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
from mcp_client import Client  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RELEASES = {"0.2.10": ROOT / "tools" / ".venv", "0.2.20": ROOT / "tools" / ".venv-0.2.20"}
SERVER = ("import logging; logging.disable(logging.CRITICAL); "
          "from prompt_diary.mcp.server import serve_mcp_server; serve_mcp_server()")
KEPT = ("name", "description", "inputSchema", "outputSchema")


def reference_tools(venv: Path) -> list[dict]:
    # tools/list needs no workspace: the server answers it before resolving one.
    client = Client([str(venv / "bin" / "python"), "-c", SERVER], {"PROMPT_DIARY_WORKSPACE": "/nonexistent"})
    try:
        if client.initialize("reference_schemas") is None:
            raise SystemExit(f"{venv}: the reference server did not answer initialize")
        answer = client.call("tools/list", {})
    finally:
        client.close()
    if answer is None or "result" not in answer:
        raise SystemExit(f"{venv}: no tools/list answer: {answer}")
    return [{k: tool[k] for k in KEPT if k in tool} for tool in answer["result"]["tools"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = parser.parse_args()
    differ = 0
    for release, venv in RELEASES.items():
        text = json.dumps(reference_tools(venv), indent=2, ensure_ascii=False) + "\n"
        path = ROOT / "src" / "mcp" / "schemas" / f"prompt-diary-{release}.json"
        if args.check:
            same = path.exists() and path.read_text(encoding="utf-8") == text
            print(f"{path.relative_to(ROOT)}: {'same' if same else 'DIFFERS'}")
            differ += not same
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
