#!/usr/bin/env python3
"""End to end: a whole daily run through the real binary, accepted by prompt-diary 0.2.10.

On a copy of each workspace (the shipped example and a generated three-project one):

  1. `evidence-store import`;
  2. `evidence-store serve`, driven by the official MCP Python SDK client the way the
     extraction and project-synthesis agents use it: read each turn's lines, write one
     evidence chain per turn, then one work item per turn;
  3. `evidence-store build`;
  4. `serve` again for the daily synthesis passes: every project summary, the title, the
     engagement assessment and the team-learning section;
  5. `evidence-store export`, which must leave every file exactly as serve had written it;

then prompt-diary 0.2.10's own Finalize must answer `finalized` on the exported workspace
and its Markdown renderer must render it, title and evidence appendix included.

Usage: tools/.venv/bin/python tools/check/test_end_to_end.py [--bin PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

import example  # noqa: E402
from gen_workspace import indexes  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class Failure(Exception):
    pass


def run(binary: Path, ws: Path, *args: str) -> str:
    done = subprocess.run([str(binary), "--workspace", str(ws), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise Failure(f"evidence-store {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


@asynccontextmanager
async def serve(binary: Path, ws: Path):
    params = StdioServerParameters(command=str(binary), args=["serve"], env={"PROMPT_DIARY_WORKSPACE": str(ws)})
    async with stdio_client(params, errlog=subprocess.DEVNULL) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()

            async def call(tool: str, args: dict, expect: str) -> dict:
                result = await session.call_tool(tool, args)
                text = result.content[0].text
                value = {} if result.isError else json.loads(text)
                if value.get("status") != expect:
                    raise Failure(f"{tool} answered {text}, expected status {expect!r}")
                return value

            yield call


def chain(turn: dict) -> dict:
    a, b = turn["turn_start_line"], turn["turn_end_line"]
    return {
        "turn_ref": turn["turn_ref"],
        "trigger": {"type": "explicit_user_message", "summary": "The user asked for a change.",
                    "quoted_messages": [{"text": "please fix it", "citations": [{"lines": f"{a}-{a}"}]}],
                    "citations": [{"lines": f"{a}-{a}"}]},
        "agent_reactions": [{"summary": "The agent edited the code.", "citations": [{"lines": f"{a}-{b}"}]}],
        "outcomes": [{"category": "code_outcome", "summary": "The change landed.", "citations": [{"lines": f"{a}-{b}"}]}],
        "observed_checks": [],
        "terminal_state": {"type": "material_result", "summary": "Done.", "citations": [{"lines": f"{b}-{b}"}]},
        "materiality": "material",
    }


def work_item(n: int, ref: dict) -> dict:
    return {
        "work_item_ref": f"W{n:04d}", "kind": "material_work_item", "title": f"Change in {ref['session_ref']}/{ref['turn_ref']}",
        "covered_turns": [ref], "trigger": {"summary": "Asked for a change.", "evidence_refs": [ref]},
        "agent_reaction": {"summary": "Edited and tested.", "main_actions": ["edit", "test"]},
        "outcomes": [{"category": "code_outcome", "summary": "The change landed.", "evidence_refs": [ref], "confidence": "high"}],
        "terminal_states": [{"type": "material_result", "summary": "Done.", "evidence_refs": [ref]}],
        "limits": [], "confidence": "high",
    }


async def day(binary: Path, ws: Path) -> dict[str, list[dict]]:
    """Steps 2 and 4 around the CLI steps; returns each project's cited turns."""
    turns: dict[str, list[dict]] = {}
    async with serve(binary, ws) as call:
        for project, rows in indexes(ws).items():
            turns[project] = []
            for row in rows:
                for turn in row["turns"]:
                    ref = {"session_ref": row["session_ref"], "turn_ref": turn["turn_ref"]}
                    read = await call("read_session_lines", {"project_key": project, "session_ref": row["session_ref"],
                                                             "start_line": turn["turn_start_line"],
                                                             "end_line": turn["turn_end_line"]}, "ok")
                    if len(read["records"]) != turn["turn_end_line"] - turn["turn_start_line"] + 1:
                        raise Failure(f"read of {project}/{ref} returned {len(read['records'])} records")
                    await call("write_evidence", {"project_key": project, "session_ref": row["session_ref"],
                                                  "evidence_chain": chain(turn)}, "appended")
                    turns[project].append(ref)
            for n, ref in enumerate(turns[project], 1):
                await call("write_work_item", {"project_key": project, "work_item": work_item(n, ref)}, "appended")
    run(binary, ws, "build")
    everywhere = [dict(refs[0], project_key=p) for p, refs in turns.items() if refs]
    async with serve(binary, ws) as call:
        for project, refs in turns.items():
            if refs:
                await call("write_project_summary", {"project_key": project, "summary": {
                    "text": f"Landed {len(refs)} changes.", "citations": refs}}, "written")
        await call("write_report_title", {"title": {"text": "Parser and report changes landed", "citations": everywhere}},
                   "written")
        await call("write_engagement", {
            "overall_reading": {"text": "Clear, narrow requests.", "citations": everywhere, "confidence": "medium"},
            "observations": [{"dimension": "direction", "statement": "Each request named its goal.",
                              "citations": everywhere, "confidence": "high"}],
            "limits": ["Synthetic sessions"]}, "written")
        await call("write_team_learning", {
            "takeaways": {"text": "Narrow requests land quickly.", "citations": everywhere, "confidence": "medium"},
            "patterns": [{"kind": "promote", "statement": "Name the goal in the first message.",
                          "rationale": "The agent needed no clarification.", "recurrence": "Every session today",
                          "citations": everywhere, "confidence": "medium"}],
            "limits": []}, "written")
    return turns


def materialized(ws: Path) -> dict[str, bytes]:
    files = [ws / "daily-report.json", *ws.glob("projects/*/project-synthesis.json"), *ws.glob("projects/*/evidence/*")]
    return {str(p.relative_to(ws)): p.read_bytes() for p in sorted(files)}


def check(binary: Path, source: Path, tmp: Path) -> str:
    from prompt_diary.generate.daily_synthesis.finalize import finalize_daily_report
    from prompt_diary.generate.rendering.render_markdown import render_report

    ws = tmp / source.name
    if source == example.EXAMPLE:
        example.copy(ws)
    else:
        shutil.copytree(source, ws, ignore=shutil.ignore_patterns(".evidence-store"))
    run(binary, ws, "import")
    turns = asyncio.run(day(binary, ws))
    served = materialized(ws)
    run(binary, ws, "export")
    exported = materialized(ws)
    if exported != served:
        raise Failure(f"export changed {sorted(k for k in exported if exported[k] != served.get(k))}")
    cards = [k for k in exported if "/evidence/" in k]
    if len(cards) != sum(1 for rows in indexes(ws).values() for row in rows if row["turns"]):
        raise Failure(f"expected one card per session with turns, found {cards}")
    leftovers = [p for p in ws.rglob("*.tmp")]
    if leftovers:
        raise Failure(f"temp files left behind: {leftovers}")

    result = finalize_daily_report(workspace_path=ws)
    if result.status != "finalized":
        raise Failure(f"prompt-diary's Finalize rejected the exported workspace: {result}")
    markdown = render_report(workspace_path=ws).read_text(encoding="utf-8")
    expected = ["Parser and report changes landed", "Narrow requests land quickly."]
    expected += [f"{r['session_ref']}/{r['turn_ref']}" for refs in turns.values() for r in refs]
    missing = [text for text in expected if text not in markdown]
    if missing:
        raise Failure(f"the rendered report lacks {missing}")
    n = sum(len(refs) for refs in turns.values())
    return f"{source.name}: {len(turns)} project(s), {n} turns, {len(cards)} cards; finalize: {result.status}, " \
           f"overall_confidence {result.overall_confidence}; report.md {len(markdown)} chars"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, default=cargo_target.binary("debug"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / "generated"
        subprocess.run([sys.executable, str(ROOT / "tools" / "lib" / "gen_workspace.py"), "--out", str(generated), "--seed", "7",
                        "--projects", "3", "--sessions", "2", "--turns", "3"], check=True, stdout=subprocess.DEVNULL)
        failed = False
        for source in (example.EXAMPLE, generated):
            work = Path(tmp) / "runs"
            work.mkdir(exist_ok=True)
            try:
                print("end to end ok:", check(args.bin.resolve(), source, work))
            except Failure as e:
                print(f"end to end FAILED on {source.name}: {e}", file=sys.stderr)
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
