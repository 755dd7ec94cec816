#!/usr/bin/env python3
"""Interoperability test: the official MCP Python SDK client drives `evidence-store serve`.

The Rust tests use rmcp on both ends; this checks that a client nobody here wrote
(the one prompt-diary's own tooling is built on) sees the same tools and results.

Usage: tools/.venv/bin/python tools/test_interop.py [--bin target/debug/evidence-store]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "Demo-0123456789ab"


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL {name}: {detail}", file=sys.stderr)


async def run(binary: Path, workspace: Path, checks: Checks) -> None:
    params = StdioServerParameters(
        command=str(binary), args=["serve"], env={"PROMPT_DIARY_WORKSPACE": str(workspace)}
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            checks.check("server name", init.serverInfo.name == "evidence-store", str(init.serverInfo))

            tools = {t.name: t for t in (await session.list_tools()).tools}
            checks.check("tools", {"prompt_diary_ping", "read_session_lines"} <= set(tools), str(list(tools)))
            mode = tools["read_session_lines"].inputSchema["properties"]["mode"]
            checks.check("mode schema", mode.get("enum") == ["compact", "full"] and "very large" in mode.get("description", ""), json.dumps(mode))
            checks.check("read-only hint", tools["read_session_lines"].annotations.readOnlyHint is True, "")

            ping = await session.call_tool("prompt_diary_ping", {})
            checks.check("ping structured", ping.structuredContent == {"name": "prompt-diary", "status": "ok"}, str(ping))

            for args, fixture in [
                ({"session_ref": "S0001", "start_line": 1, "end_line": 8}, "read_s0001_compact.json"),
                ({"session_ref": "S0002", "start_line": 1, "end_line": 8}, "read_s0002_compact.json"),
                ({"session_ref": "S0001", "start_line": 7, "end_line": 7, "mode": "full"}, "read_s0001_line7_full.json"),
                ({"session_ref": "S0001", "start_line": 7, "end_line": 9}, "read_s0001_past_end.json"),
            ]:
                result = await session.call_tool("read_session_lines", {"project_key": PROJECT, **args})
                expected = (ROOT / "tests" / "fixtures" / fixture).read_text(encoding="utf-8")
                text = result.content[0].text
                checks.check(f"read {fixture}", not result.isError and text + "\n" == expected, text[:400])

            bad = await session.call_tool("read_session_lines", {"project_key": PROJECT, "session_ref": "S0001", "start_line": 1})
            checks.check(
                "argument error",
                bad.isError and bad.content[0].text.startswith("Error executing tool read_session_lines: ") and "end_line" in bad.content[0].text,
                str(bad),
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, default=ROOT / "target" / "debug" / "evidence-store")
    args = parser.parse_args()
    checks = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        shutil.copytree(ROOT / "examples" / "workspace", workspace, ignore=shutil.ignore_patterns(".evidence-store"))
        asyncio.run(run(args.bin.resolve(), workspace, checks))
    print(f"interop: {checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
