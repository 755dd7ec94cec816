#!/usr/bin/env python3
"""`evidence-store run` inside prompt-diary's real pipeline, without Codex or network.

prompt-diary 0.2.10 hands Codex its MCP server as `--config` overrides built by
`prompt_diary.mcp.codex_config.prompt_diary_mcp_overrides(workspace)`: command `report`,
args `["mcp", "serve"]`, env `PROMPT_DIARY_WORKSPACE`. This test calls that function,
then (as the command under `evidence-store run`, in the role of Codex) launches exactly
that command, args and env with the MCP Python SDK, and checks that it reached
evidence-store: its server name, the 8 tools, a read, a write. Between the evidence and
synthesis phases it runs prompt-diary's own Build (which writes `daily-report.json`
itself), then writes the report title through the server, as the synthesis agents do.
Outside, it checks that `report` for anything else is still prompt-diary's, that `run`
returns the command's exit code, and that the files after the run are what the tools
and prompt-diary wrote.

Usage: tools/.venv/bin/python tools/test_run_prompt_diary.py [--bin target/debug/evidence-store]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import handles

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "Demo-0123456789ab"
CARD = f"projects/{PROJECT}/evidence/S0001.json"
INNER_EXIT = 3  # the inner command's exit code on success, which `run` must return


def codex_server_config(workspace: Path) -> tuple[str, list[str], dict[str, str]]:
    """command, args, env of the MCP server exactly as prompt-diary configures Codex."""
    from prompt_diary.mcp.codex_config import prompt_diary_mcp_overrides

    prefix = "mcp_servers.prompt_diary."
    config: dict[str, object] = {}
    for override in prompt_diary_mcp_overrides(workspace):
        key, _, value = override.partition("=")
        assert key.startswith(prefix), override
        # Codex parses each override value as TOML.
        config[key[len(prefix):]] = tomllib.loads(f"v = {value}")["v"]
    env = {k.removeprefix("env."): v for k, v in config.items() if k.startswith("env.")}
    return str(config["command"]), list(config["args"]), env


async def drive(workspace: Path) -> list[str]:
    """The Codex side: launch prompt-diary's configured server and use it."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from prompt_diary.generate.daily_synthesis.build import build_daily_report

    failures: list[str] = []

    def check(name: str, ok: bool, detail: object = "") -> None:
        if not ok:
            failures.append(f"{name}: {detail}")

    # As prompt-diary's `prepare` does, the workspace is created during the run.
    shutil.copytree(ROOT / "examples/workspace", workspace, ignore=shutil.ignore_patterns(".evidence-store"))
    command, args, env = codex_server_config(workspace)
    check("prompt-diary's command", (command, args) == ("report", ["mcp", "serve"]), (command, args))
    params = StdioServerParameters(command=command, args=args, env={**os.environ, **env})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check("server name", init.serverInfo.name == "evidence-store", init.serverInfo)
            tools = [t.name for t in (await session.list_tools()).tools]
            # prompt-diary's 8, the 2 citation tools, and the 3 tool-output tools (the example
            # workspace holds trimmed tool entries).
            check("prompt-diary's 8 tools, 2 citation tools, 3 tool-output tools", len(tools) == 13, tools)
            ping = await session.call_tool("prompt_diary_ping", {})
            check("ping", ping.structuredContent == {"name": "prompt-diary", "status": "ok"}, ping)
            got = await session.call_tool(
                "read_session_lines",
                {"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 8},
            )
            want = (ROOT / "tests/fixtures/read_s0001_compact.json").read_text(encoding="utf-8")
            check("read", handles.strip(got.content[0].text)[0] == want.rstrip("\n"), got.content[0].text[:300])

            span = {"type": "user_approval", "summary": "ok", "citations": [{"lines": "7-7"}]}
            chain = {"turn_ref": "T0002", "trigger": span, "materiality": "minor",
                     "terminal_state": {**span, "type": "clarification_only"}}
            got = await session.call_tool(
                "write_evidence", {"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": chain}
            )
            check("evidence written", json.loads(got.content[0].text).get("status") == "appended", got.content[0].text)

            # prompt-diary's own Build step, between the agent phases, writes the report file.
            build_daily_report(workspace_path=workspace)
            cite = {"project_key": PROJECT, "session_ref": "S0001", "turn_ref": "T0002"}
            title = {"text": "Run under evidence-store", "citations": [cite]}
            got = await session.call_tool("write_report_title", {"title": title})
            check("title written", json.loads(got.content[0].text).get("status") == "written", json.dumps(json.loads(got.content[0].text)))

    # prompt-diary's Finalize rewrites daily-report.json after the last tool call, and its
    # extraction runner deletes an incomplete card before re-extracting it: `run` must
    # adopt the files as they are now, not write the store's older copies over them.
    from prompt_diary.generate.daily_synthesis.finalize import finalize_daily_report

    finalize_daily_report(workspace_path=workspace)
    (workspace / "finalized.json").write_bytes((workspace / "daily-report.json").read_bytes())
    (workspace / CARD).unlink()

    # Any other `report` call is prompt-diary's own CLI, unchanged.
    other = subprocess.run(["report", "mcp", "--help"], capture_output=True, text=True)
    check("other report calls reach prompt-diary", other.returncode == 0 and "Run MCP server commands" in other.stdout, other)
    return failures


def outer(binary: Path) -> int:
    venv_bin = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "workspace"  # created by the command, under `run`
        # The real `report` (prompt-diary's) is on PATH, as in a user's environment.
        env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
        env.pop("PROMPT_DIARY_WORKSPACE", None)
        run = subprocess.run(
            [str(binary), "run", "--", sys.executable, __file__, "--inner", str(ws)],
            env=env, cwd=tmp, capture_output=True, text=True,
        )
        failures = [line for line in run.stdout.splitlines() if line.startswith("FAIL ")]
        if run.returncode != INNER_EXIT:
            failures.append(f"FAIL exit code {run.returncode}, want the command's {INNER_EXIT}: {run.stderr}")
        if run.stderr:
            failures.append(f"FAIL run printed to a non-terminal stderr: {run.stderr!r}")
        report = json.loads((ws / "daily-report.json").read_text(encoding="utf-8"))
        if report.get("report_title", {}).get("text") != "Run under evidence-store":
            failures.append(f"FAIL daily-report.json after run: {report.get('report_title')}")
        if (ws / "daily-report.json").read_bytes() != (ws / "finalized.json").read_bytes():
            failures.append("FAIL run wrote over the daily-report.json prompt-diary's Finalize wrote")
        if (ws / CARD).exists():
            failures.append("FAIL run brought back the evidence card prompt-diary deleted")
        # After the run the store holds the files as they are: an export changes nothing.
        export = subprocess.run([str(binary), "--workspace", str(ws), "export"], capture_output=True, text=True)
        if not export.stdout.startswith("exported 0 file(s)"):
            failures.append(f"FAIL store and files disagree after run: {export.stdout}{export.stderr}")
    for line in failures:
        print(line, file=sys.stderr)
    print(f"run with prompt-diary's MCP config: {'ok' if not failures else f'{len(failures)} failure(s)'}")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin", type=Path, default=ROOT / "target/debug/evidence-store")
    parser.add_argument("--inner", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        failures = asyncio.run(drive(args.inner))
        for failure in failures:
            print(f"FAIL {failure}")
        return INNER_EXIT if not failures else 1
    return outer(args.bin.resolve())


if __name__ == "__main__":
    sys.exit(main())
