#!/usr/bin/env python3
"""Interoperability test: the official MCP Python SDK client drives `evidence-store serve`.

The Rust tests use rmcp on both ends; this checks that a client nobody here wrote
(the one prompt-diary's own tooling is built on) sees the same tools and results.

Usage: tools/.venv/bin/python tools/check/test_interop.py [--bin target/debug/evidence-store]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import example  # noqa: E402
import handles  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
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


async def run(binary: Path, workspace: Path, payloads: Path, checks: Checks) -> None:
    # EVIDENCE_STORE_TEST_PAYLOADS: debug builds resolve a handle to the file of that name.
    params = StdioServerParameters(
        command=str(binary),
        args=["serve"],
        env={"PROMPT_DIARY_WORKSPACE": str(workspace), "EVIDENCE_STORE_TEST_PAYLOADS": str(payloads)},
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
                checks.check(f"read {fixture}", not result.isError and handles.strip(text)[0] + "\n" == expected, text[:400])

            bad = await session.call_tool("read_session_lines", {"project_key": PROJECT, "session_ref": "S0001", "start_line": 1})
            checks.check(
                "argument error",
                bad.isError and bad.content[0].text.startswith("Error executing tool read_session_lines: ") and "end_line" in bad.content[0].text,
                str(bad),
            )

            await check_tool_output(session, tools, checks)


TOOL_OUTPUT_SCHEMA_KEYS = {"type": "object", "additionalProperties": False, "required": ["handle", "extract"]}


async def check_tool_output(session: ClientSession, tools: dict, checks: Checks) -> None:
    """`tool_output`: its schema when listed (only with handles in the workspace), and plain-text
    results for an unknown handle and, in debug builds, a payload from the test directory."""
    if "tool_output" in tools:
        schema = tools["tool_output"].inputSchema
        checks.check(
            "tool_output schema",
            all(schema.get(k) == v for k, v in TOOL_OUTPUT_SCHEMA_KEYS.items())
            and schema["properties"]["mode"]["enum"] == ["auto", "full-chunked", "read-grep", "truncate"],
            json.dumps(schema),
        )
    unknown = await session.call_tool("tool_output", {"handle": "no-such-handle", "extract": "errors"})
    text = unknown.content[0].text
    checks.check(
        "tool_output unknown handle is plain text",
        not unknown.isError
        and len(unknown.content) == 1
        and text.startswith("ABSTRACT FROM TOOL OUTPUT unknown WITH HANDLE no-such-handle, STRATEGY:auto:\n\nNo stored tool output"),
        text[:400],
    )
    payload = await session.call_tool("tool_output", {"handle": "interop-1", "extract": "errors", "mode": "truncate"})
    text = payload.content[0].text
    if text.startswith("ABSTRACT FROM TOOL OUTPUT unknown"):
        print("interop: tool_output payload check skipped (release build: no test payloads)")
        return
    checks.check(
        "tool_output truncate is plain text",
        not payload.isError
        and text.startswith("ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE interop-1, STRATEGY:truncate:\n\nline 1\n")
        and "[···TRUNCATED " in text
        and len(text.encode()) <= 12288,
        text[:400],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, default=cargo_target.binary("debug"))
    args = parser.parse_args()
    checks = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        example.copy(workspace)
        payloads = Path(tmp) / "payloads"
        payloads.mkdir()
        (payloads / "interop-1").write_text("".join(f"line {i}\n" for i in range(1, 5001)), encoding="utf-8")
        (payloads / "interop-1.tool").write_text("Bash", encoding="utf-8")
        asyncio.run(run(args.bin.resolve(), workspace, payloads, checks))
    print(f"interop: {checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
