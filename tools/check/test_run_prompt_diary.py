#!/usr/bin/env python3
"""`evidence-store run` inside prompt-diary's real pipeline, without Codex or network.

Runs under the python of either prompt-diary release (tools/.venv: 0.2.10,
tools/.venv-0.2.20: 0.2.20; told apart by the installed distribution's version). Both hand
Codex its MCP server as `--config` overrides built by
`prompt_diary.mcp.codex_config.prompt_diary_mcp_overrides(workspace)`: command `report`,
args `["mcp", "serve"]`, env `PROMPT_DIARY_WORKSPACE` (0.2.20 also sets
`default_tools_approval_mode`). This test calls that function, then (as the command under
`evidence-store run`, in the role of Codex) launches exactly that command, args and env
with the MCP Python SDK, and checks that it reached evidence-store: its server name,
prompt-diary's 8 tools, a read, a write. Between the evidence and synthesis phases it runs
prompt-diary's own Build (which writes `daily-report.json` itself), then writes the
synthesis slots through the server, as the synthesis agents do, then runs prompt-diary's
own Finalize. Outside, it checks that `report` for anything else is still prompt-diary's,
that `run` returns the command's exit code, and that the files after the run are what the
tools and prompt-diary wrote.

Per release:
  0.2.10  the example workspace (schema 2) is copied in during the run; the read is
          compared with tests/fixtures/read_s0001_compact.json; the trigger is the
          agent's (type, summary, citations); the report title is written.
  0.2.20  the workspace (schema 7) is made during the run by 0.2.20's own `prepare`, from
          Claude and Codex histories holding the example's two sessions; a copy taken
          before the server starts is the reference, on which the same steps run through
          prompt-diary's own functions. Reads are pages (`{"next_cursor","records"}`)
          compared with 0.2.20's read of the same range, byte for byte where no handle
          appears and record for record without the handles where one does; the trigger
          is citations only (the turn's first line) and the card (schema 2, with the
          quoted message the server read) must equal 0.2.20's byte for byte; title,
          engagement and team learning are written, Finalize must finalize (it sets
          `overall_confidence`), and the finalized report must equal 0.2.20's.

Usage: tools/.venv/bin/python tools/check/test_run_prompt_diary.py [--bin target/debug/evidence-store]
       tools/.venv-0.2.20/bin/python tools/check/test_run_prompt_diary.py [--bin ...]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import uuid
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import example  # noqa: E402
import handles  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/workspace"
EXAMPLE_PROJECT = "Demo-0123456789ab"
INNER_EXIT = 3  # the inner command's exit code on success, which `run` must return
RELEASES = ("0.2.10", "0.2.20")
RELEASE = importlib.metadata.version("prompt-diary")
# Beside prompt-diary's 8 tools, evidence-store lists the 2 citation tools, and the 3
# tool-output tools when the workspace holds a trimmed tool entry (the example's Codex
# session has one).
EXTRA_TOOLS = {"read_agent_citations", "search_agent_citations", "tool_output", "tool_output_read", "tool_output_grep"}
# 0.2.20: the day `prepare` is run for, and where its workspace lands under the reports root.
DAY = "2026-01-15"
TITLE = "Run under evidence-store"

Check = Callable[[str, bool, object], None]


def workspace_in(tmp: Path) -> Path:
    """Where the run's workspace is made: a copy of the example (0.2.10), or what 0.2.20's
    `prepare --reports-root TMP/reports` makes for DAY."""
    return tmp / "reports" / "work" / DAY if RELEASE == "0.2.20" else tmp / "workspace"


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


def write_histories(hist: Path, cwd: str) -> None:
    """The example's two sessions as the histories 0.2.20's `prepare` reads: the Claude one
    as a Claude project file, the Codex one as a rollout, every record stamped inside DAY,
    with `cwd` as the working directory."""
    sessions = EXAMPLE / "projects" / EXAMPLE_PROJECT / "sessions"
    claude_id = str(uuid.uuid5(uuid.NAMESPACE_URL, "run/c1"))
    records: list[dict[str, Any]] = []
    for k, line in enumerate((sessions / "claude-code/c1.jsonl").read_text(encoding="utf-8").splitlines()):
        record = json.loads(line)
        record.update(timestamp=f"{DAY}T10:00:{k:02d}.000Z", cwd=cwd, sessionId=claude_id,
                      uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{claude_id}/{k}")))
        records.append(record)
    dest = hist / "claude" / cwd.replace("/", "-") / f"{claude_id}.jsonl"
    dest.parent.mkdir(parents=True)
    dest.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    codex_id = str(uuid.uuid5(uuid.NAMESPACE_URL, "run/x1"))
    records = []
    for k, line in enumerate((sessions / "codex/x1.jsonl").read_text(encoding="utf-8").splitlines()):
        record = json.loads(line)
        record["timestamp"] = f"{DAY}T11:00:{k:02d}.000Z"
        if record["type"] == "session_meta":
            record["payload"] = dict(record["payload"], id=codex_id, timestamp=record["timestamp"], cwd=cwd,
                                     originator="codex_cli_rs", cli_version="0.50.0", source="cli")
        records.append(record)
    dest = hist / "codex" / DAY.replace("-", "/") / f"rollout-{DAY}T11-00-00-{codex_id}.jsonl"
    dest.parent.mkdir(parents=True)
    dest.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def prepare_0220(tmp: Path, check: Check) -> str:
    """0.2.20's own `prepare` makes the workspace, as `prompt-diary generate` does at its
    start; returns its one project's key."""
    hist = tmp / "histories"
    write_histories(hist, "/home/dev/demo")
    env = dict(os.environ, PROMPT_DIARY_CODEX_SESSIONS=str(hist / "codex"),
               PROMPT_DIARY_CLAUDE_PROJECTS=str(hist / "claude"), HOME=str(tmp / "home"))
    prepare = subprocess.run(
        [str(Path(sys.executable).parent / "prompt-diary"), "prepare", "--date", DAY, "--timezone", "UTC",
         "--reports-root", str(tmp / "reports"), "--quiet"],
        env=env, capture_output=True, text=True,
    )
    if prepare.returncode != 0:
        raise SystemExit(f"FAIL prompt-diary prepare: {prepare.stdout}{prepare.stderr}")
    workspace = workspace_in(tmp)
    check("prepared schema 7", json.loads((workspace / "metadata.json").read_text())["schema_version"] == 7,
          (workspace / "metadata.json").read_text())
    (project,) = [p.name for p in (workspace / "projects").iterdir()]
    index = (workspace / "projects" / project / "sessions.index.jsonl").read_text(encoding="utf-8")
    turns = {(row["session_ref"], t["turn_ref"]): (t["turn_start_line"], t["turn_end_line"])
             for row in map(json.loads, index.splitlines()) for t in row["turns"]}
    # The steps below cite these turns, as in the example workspace.
    check("prepared turns", turns == {("S0001", "T0001"): (1, 6), ("S0001", "T0002"): (7, 8),
                                      ("S0002", "T0001"): (2, 8)}, turns)
    return project


async def check_page_0220(session: Any, reference: Path, project: str, session_ref: str,
                          lines: tuple[int, int], check: Check) -> int:
    """One compact page of `lines` from the server against 0.2.20's read of the same range
    on the reference copy; returns how many handles the page held."""
    from prompt_diary.generate.evidence_extraction.session_reader import read_session_lines, serialize_read_result

    args = {"project_key": project, "session_ref": session_ref, "start_line": lines[0], "end_line": lines[1]}
    got = (await session.call_tool("read_session_lines", args)).content[0].text
    want = serialize_read_result(read_session_lines(workspace_path=reference, mode="compact", cursor=None, **args))
    what = f"read {session_ref} {lines[0]}-{lines[1]}"
    try:
        page = json.loads(got)
        found = []
        for record in page["records"]:
            found += handles.strip_sparse(record)[1]
    except (ValueError, KeyError, AssertionError) as err:
        check(what, False, f"{err}: {got[:300]}")
        return 0
    check(f"{what}: keys", sorted(page) == ["next_cursor", "records"], got[:300])
    if found:
        check(f"{what} without its handles", page == json.loads(want), f"{got[:300]} != {want[:300]}")
    else:
        check(what, got == want, f"{got[:300]} != {want[:300]}")
    return len(found)


async def drive(tmp: Path) -> list[str]:
    """The Codex side: launch prompt-diary's configured server and use it."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from prompt_diary.generate.daily_synthesis import mcp as synthesis
    from prompt_diary.generate.daily_synthesis.build import build_daily_report
    from prompt_diary.generate.daily_synthesis.finalize import finalize_daily_report
    from prompt_diary.generate.evidence_extraction.mcp import write_evidence
    from prompt_diary.mcp.server import build_mcp_server

    failures: list[str] = []

    def check(name: str, ok: bool, detail: object = "") -> None:
        if not ok:
            failures.append(f"{name}: {detail}")

    # As prompt-diary's `prepare` does, the workspace is created during the run.
    workspace = workspace_in(tmp)
    reference = tmp / "reference"  # 0.2.20: the same steps by prompt-diary itself
    if RELEASE == "0.2.20":
        project = prepare_0220(tmp, check)
        shutil.copytree(workspace, reference)
    else:
        project = EXAMPLE_PROJECT
        example.copy(workspace)
    card = workspace / "projects" / project / "evidence/S0001.json"
    command, args, env = codex_server_config(workspace)
    check("prompt-diary's command", (command, args) == ("report", ["mcp", "serve"]), (command, args))
    params = StdioServerParameters(command=command, args=args, env={**os.environ, **env})
    # The server's stderr goes to a log of its own, as Codex keeps an MCP server's.
    server_log = tmp / "server.log"
    errlog = server_log.open("w", encoding="utf-8")
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check("server name", init.serverInfo.name == "evidence-store", init.serverInfo)
            tools = {t.name for t in (await session.list_tools()).tools}
            theirs = {t.name for t in await build_mcp_server().list_tools()}
            check("prompt-diary lists 8 tools", len(theirs) == 8, sorted(theirs))
            check("prompt-diary's 8 tools, 2 citation tools, 3 tool-output tools",
                  tools == theirs | EXTRA_TOOLS, sorted(tools ^ (theirs | EXTRA_TOOLS)))
            ping = await session.call_tool("prompt_diary_ping", {})
            check("ping", ping.structuredContent == {"name": "prompt-diary", "status": "ok"}, ping)

            cite = {"project_key": project, "session_ref": "S0001", "turn_ref": "T0002"}
            if RELEASE == "0.2.20":
                held = 0
                for session_ref, lines in (("S0001", (1, 8)), ("S0002", (2, 8))):
                    held += await check_page_0220(session, reference, project, session_ref, lines, check)
                check("a page with a handle", held > 0, held)
                # The 0.2.20 trigger: only its citations, exactly the turn's first line.
                span = {"summary": "ok", "citations": [{"lines": "7-7"}]}
                chain = {"turn_ref": "T0002", "trigger": {"citations": [{"lines": "7-7"}]}, "materiality": "minor",
                         "terminal_state": {**span, "type": "clarification_only"}}
            else:
                got = await session.call_tool(
                    "read_session_lines",
                    {"project_key": project, "session_ref": "S0001", "start_line": 1, "end_line": 8},
                )
                want = (ROOT / "tests/fixtures/read_s0001_compact.json").read_text(encoding="utf-8")
                check("read", handles.strip(got.content[0].text)[0] == want.rstrip("\n"), got.content[0].text[:300])
                span = {"type": "user_approval", "summary": "ok", "citations": [{"lines": "7-7"}]}
                chain = {"turn_ref": "T0002", "trigger": span, "materiality": "minor",
                         "terminal_state": {**span, "type": "clarification_only"}}
            got = await session.call_tool(
                "write_evidence", {"project_key": project, "session_ref": "S0001", "evidence_chain": chain}
            )
            check("evidence written", json.loads(got.content[0].text).get("status") == "appended", got.content[0].text)
            if RELEASE == "0.2.20":
                write_evidence(workspace_path=reference, project_key=project, session_ref="S0001", evidence_chain=chain)
                written = json.loads(card.read_text(encoding="utf-8"))
                trigger = written["evidence_chains"][0]["trigger"]
                check("card schema 2", written["schema_version"] == 2, written["schema_version"])
                check("quoted trigger", trigger.get("quoted_messages") == [{"text": "thanks, ship it"}], trigger)
                check("card is 0.2.20's", card.read_bytes() == (reference / card.relative_to(workspace)).read_bytes(),
                      card.read_text(encoding="utf-8"))

            # prompt-diary's own Build step, between the agent phases, writes the report file.
            build_daily_report(workspace_path=workspace)
            slots: list[tuple[str, dict[str, Any]]] = [("write_report_title", {"title": {"text": TITLE, "citations": [cite]}})]
            if RELEASE == "0.2.20":
                build_daily_report(workspace_path=reference)
                # Sections with a confidence, which Finalize rolls up into overall_confidence.
                slots += [
                    ("write_engagement", {"overall_reading": {"text": "read", "confidence": "high", "citations": [cite]},
                                          "observations": [], "limits": []}),
                    ("write_team_learning", {"takeaways": {"text": "learnt", "confidence": "medium", "citations": [cite]},
                                             "patterns": [], "limits": []}),
                ]
            for tool, arguments in slots:
                got = await session.call_tool(tool, arguments)
                check(f"{tool} written", json.loads(got.content[0].text).get("status") == "written", got.content[0].text)
                if RELEASE == "0.2.20":
                    getattr(synthesis, tool)(workspace_path=reference, **arguments)

    errlog.close()
    first = (server_log.read_text(encoding="utf-8").splitlines() or [""])[0]
    check("the server's first log line names the workspace and its day",
          first.startswith(f"evidence-store serve: workspace {workspace}, report date {DAY} "), first)

    # prompt-diary's Finalize rewrites daily-report.json after the last tool call, and its
    # extraction runner deletes an incomplete card before re-extracting it: `run` must
    # adopt the files as they are now, not write the store's older copies over them.
    finalized = finalize_daily_report(workspace_path=workspace)
    if RELEASE == "0.2.20":
        check("Finalize", (finalized.status, getattr(finalized, "overall_confidence", None)) == ("finalized", "high"), finalized)
        finalize_daily_report(workspace_path=reference)
        check("finalized report is 0.2.20's",
              (workspace / "daily-report.json").read_bytes() == (reference / "daily-report.json").read_bytes(),
              (workspace / "daily-report.json").read_text(encoding="utf-8"))
    (workspace / "finalized.json").write_bytes((workspace / "daily-report.json").read_bytes())
    card.unlink()

    # Any other `report` call is prompt-diary's own CLI, unchanged.
    other = subprocess.run(["report", "mcp", "--help"], capture_output=True, text=True)
    check("other report calls reach prompt-diary", other.returncode == 0 and "Run MCP server commands" in other.stdout, other)
    return failures


def outer(binary: Path) -> int:
    venv_bin = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        ws = workspace_in(Path(tmp))  # created by the command, under `run`
        # The real `report` (prompt-diary's) is on PATH, as in a user's environment.
        env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
        env.pop("PROMPT_DIARY_WORKSPACE", None)
        run = subprocess.run(
            [str(binary), "run", "--", sys.executable, __file__, "--inner", tmp],
            env=env, cwd=tmp, capture_output=True, text=True,
        )
        failures = [line for line in run.stdout.splitlines() if line.startswith("FAIL ")]
        if run.returncode != INNER_EXIT:
            failures.append(f"FAIL exit code {run.returncode}, want the command's {INNER_EXIT}: {run.stderr}")
        if run.stderr:
            failures.append(f"FAIL run printed to a non-terminal stderr: {run.stderr!r}")
        if not (ws / "daily-report.json").is_file():
            failures.append(f"FAIL no daily-report.json after run: {run.stdout}")
        else:
            report = json.loads((ws / "daily-report.json").read_text(encoding="utf-8"))
            if (report.get("report_title") or {}).get("text") != TITLE:
                failures.append(f"FAIL daily-report.json after run: {report.get('report_title')}")
            if (ws / "daily-report.json").read_bytes() != (ws / "finalized.json").read_bytes():
                failures.append("FAIL run wrote over the daily-report.json prompt-diary's Finalize wrote")
        if list(ws.glob("projects/*/evidence/S0001.json")):
            failures.append("FAIL run brought back the evidence card prompt-diary deleted")
        # After the run the store holds the files as they are: an export changes nothing.
        export = subprocess.run([str(binary), "--workspace", str(ws), "export"], capture_output=True, text=True)
        if not export.stdout.startswith("exported 0 file(s)"):
            failures.append(f"FAIL store and files disagree after run: {export.stdout}{export.stderr}")
    for line in failures:
        print(line, file=sys.stderr)
    print(f"run with prompt-diary {RELEASE}'s MCP config: {'ok' if not failures else f'{len(failures)} failure(s)'}")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin", type=Path, default=cargo_target.binary("debug"))
    parser.add_argument("--inner", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if RELEASE not in RELEASES:
        print(f"prompt-diary {RELEASE} is installed; this test knows {', '.join(RELEASES)}", file=sys.stderr)
        return 2
    if args.inner:
        failures = asyncio.run(drive(args.inner))
        for failure in failures:
            print(f"FAIL {failure}")
        return INNER_EXIT if not failures else 1
    return outer(args.bin.resolve())


if __name__ == "__main__":
    sys.exit(main())
