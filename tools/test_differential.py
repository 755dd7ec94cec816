#!/usr/bin/env python3
"""Differential test: evidence-store against prompt-diary 0.2.10 on generated workspaces.

Both servers are driven over stdio by the MCP Python SDK client. Every line of every
session is read in compact and full mode, plus every error case, and the parsed JSON
results must be equal, except where the spec (spec/README.md) decides to follow the seeds:

  1. a plain-string message content is user text (the reference drops it);
  2. where the reference crashes on a line (a lone surrogate escape), we answer normally.

Usage: tools/.venv/bin/python tools/test_differential.py [--bin PATH] [--seeds 1,2,3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent


def is_blank(s: str) -> bool:
    return not s.strip()


def seed_adjusted(expected: dict, source: str, text: str) -> dict:
    """The reference's compact record, with decision 1 applied."""
    try:
        rec = json.loads(text)
    except ValueError:
        return expected
    if not isinstance(rec, dict):
        return expected
    content = None
    if source == "claude-code" and rec.get("type") in ("user", "assistant") and isinstance(rec.get("message"), dict):
        content = rec["message"].get("content")
    if source == "codex" and rec.get("type") == "response_item" and isinstance(rec.get("payload"), dict) \
            and rec["payload"].get("type") == "message":
        content = rec["payload"].get("content")
    if isinstance(content, str) and not is_blank(content):
        expected = dict(expected, content_kinds=["text"], text_preview=content)
    return expected


class Diff:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0
        self.reference_crashes = 0

    def compare(self, what: str, ours: object, theirs: object) -> None:
        if ours == theirs:
            self.passed += 1
            return
        self.failed += 1
        if isinstance(ours, dict) and isinstance(theirs, dict) and isinstance(ours.get("records"), list) \
                and isinstance(theirs.get("records"), list):
            for o, t in zip(ours["records"], theirs["records"]):
                if o != t:
                    ours, theirs = o, t
                    break
        print(f"DIFF {what}\n  ours:   {json.dumps(ours, ensure_ascii=False)[:800]}\n  theirs: {json.dumps(theirs, ensure_ascii=False)[:800]}",
              file=sys.stderr)


async def call(session: ClientSession, args: dict) -> tuple[bool, object]:
    result = await session.call_tool("read_session_lines", args)
    text = result.content[0].text
    if result.isError:
        return True, text
    return False, json.loads(text)


async def compare_workspace(ws: Path, binary: Path, reference_python: Path, diff: Diff) -> None:
    env = {"PROMPT_DIARY_WORKSPACE": str(ws)}
    ours_params = StdioServerParameters(command=str(binary), args=["serve"], env=env)
    theirs_params = StdioServerParameters(
        command=str(reference_python),
        args=["-c", "import logging; logging.disable(logging.CRITICAL); from prompt_diary.mcp.server import serve_mcp_server; serve_mcp_server()"],
        env=env,
    )
    async with AsyncExitStack() as stack:
        sessions = []
        for params in (ours_params, theirs_params):
            read, write = await stack.enter_async_context(stdio_client(params, errlog=subprocess.DEVNULL))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)
        ours, theirs = sessions

        for index in sorted(ws.glob("projects/*/sessions.index.jsonl")):
            project = index.parent.name
            rows = [json.loads(line) for line in index.read_text(encoding="utf-8").splitlines() if line.strip()]
            for row in rows:
                ref, source = row["session_ref"], row["source"]
                path = index.parent / row["session_path"]
                lines = path.read_bytes().decode("utf-8", "replace").splitlines() if path.is_file() else []
                n = len(lines)
                base = {"project_key": project, "session_ref": ref}
                # Error cases and edges of the range.
                for start, end, mode in [(0, 1, "compact"), (5, 4, "compact"), (n + 1, n + 1, "compact"),
                                         (max(n, 1), n + 1, "compact"), (1, 2001, "compact"), (1, 101, "full")]:
                    args = dict(base, start_line=start, end_line=end, mode=mode)
                    diff.compare(f"{project}/{ref} {start}-{end} {mode}", (await call(ours, args))[1], (await call(theirs, args))[1])
                for mode, step in (("compact", 2000), ("full", 100)):
                    for start in range(1, n + 1, step):
                        end = min(n, start + step - 1)
                        args = dict(base, start_line=start, end_line=end, mode=mode)
                        (our_err, our), (their_err, their) = await call(ours, args), await call(theirs, args)
                        if our_err or their_err:
                            # Line by line, to isolate lines the reference cannot answer.
                            for line in range(start, end + 1):
                                one = dict(args, start_line=line, end_line=line)
                                (o_err, o), (t_err, t) = await call(ours, one), await call(theirs, one)
                                if t_err and not o_err:
                                    diff.reference_crashes += 1
                                    continue
                                if mode == "compact" and not t_err:
                                    t["records"][0] = seed_adjusted(t["records"][0], source, lines[line - 1])
                                diff.compare(f"{project}/{ref} line {line} {mode}", o, t)
                            continue
                        if mode == "compact":
                            their["records"] = [seed_adjusted(r, source, lines[r["line"] - 1]) for r in their["records"]]
                        diff.compare(f"{project}/{ref} {start}-{end} {mode}", our, their)
                args = dict(base, project_key="Nope", start_line=1, end_line=1)
                diff.compare("unknown project", (await call(ours, args))[1], (await call(theirs, args))[1])
                args = dict(base, session_ref="S9999", start_line=1, end_line=1)
                diff.compare("unknown session", (await call(ours, args))[1], (await call(theirs, args))[1])


def chain_for(turn: dict, variant: int) -> dict:
    """A chain for `turn`: valid, or broken in one of several ways (by `variant`)."""
    a, b = turn["turn_start_line"], turn["turn_end_line"]
    inside = f"{a}-{b}"
    chain = {
        "turn_ref": turn["turn_ref"],
        "trigger": {"type": "explicit_user_message", "summary": "asked “nicely” — é", "quoted_messages": [{"text": "do it", "citations": [{"lines": inside}]}],
                    "citations": [{"lines": f"{a}-{a}"}]},
        "agent_reactions": [{"summary": "did it", "citations": [{"lines": inside}]}],
        "outcomes": [{"category": "code_outcome", "summary": "done", "citations": [{"lines": f"0{a}-{b}"}]}],
        "observed_checks": [{"type": "test_output", "summary": "tests", "citations": [{"lines": f"{b}-{b}"}]}],
        "terminal_state": {"type": "material_result", "summary": "done", "citations": [{"lines": inside}]},
        "materiality": "material",
        "extra": "dropped",
    }
    if variant == 1:
        chain["outcomes"][0]["citations"] = [{"lines": f"{a}-{b + 5}"}]  # outside the turn
    elif variant == 2:
        chain["agent_reactions"] = []
        chain["outcomes"][0]["citations"] = [{"lines": f"{a}-{a}"}]  # only trigger evidence
    elif variant == 3:
        chain["trigger"]["type"] = "approval"
        chain["terminal_state"]["summary"] = " "
    return chain


async def compare_writes(ws_ours: Path, ws_ref: Path, binary: Path, reference_python: Path, diff: Diff) -> None:
    """The same writes against both servers: results, then every file written, byte for byte."""
    servers = []
    async with AsyncExitStack() as stack:
        for ws, cmd in ((ws_ours, [str(binary), "serve"]), (ws_ref, [str(reference_python), "-c",
                        "import logging; logging.disable(logging.CRITICAL); from prompt_diary.mcp.server import serve_mcp_server; serve_mcp_server()"])):
            params = StdioServerParameters(command=cmd[0], args=cmd[1:], env={"PROMPT_DIARY_WORKSPACE": str(ws)})
            read, write = await stack.enter_async_context(stdio_client(params, errlog=subprocess.DEVNULL))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            servers.append(session)

        async def both(tool: str, args: dict, what: str) -> dict:
            results = []
            for session in servers:
                r = await session.call_tool(tool, args)
                results.append(json.loads(r.content[0].text) if not r.isError else {"isError": r.content[0].text})
            ours, theirs = results
            for e in theirs.get("errors", []):  # decision 4: the seed's hint
                if e.get("hint") == "cite only lines inside the indexed turn":
                    e["hint"] = "cite only lines inside the evidence chain's indexed turn"
            diff.compare(what, ours, theirs)
            return ours

        committed: dict[str, set] = {}
        for index in sorted(ws_ours.glob("projects/*/sessions.index.jsonl")):
            project = index.parent.name
            committed[project] = set()
            rows = [json.loads(line) for line in index.read_text(encoding="utf-8").splitlines() if line.strip()]
            for row in rows:
                for k, turn in enumerate(row["turns"]):
                    for variant in (3, 1, 2, 0, 0) if k % 2 == 0 else (1,):
                        args = {"project_key": project, "session_ref": row["session_ref"], "evidence_chain": chain_for(turn, variant)}
                        got = await both("write_evidence", args, f"write_evidence {project}/{row['session_ref']}/{turn['turn_ref']} v{variant}")
                        if got.get("status") == "appended":
                            committed[project].add((row["session_ref"], turn["turn_ref"]))
            n = 0
            for row in rows:
                for turn in row["turns"]:
                    key = (row["session_ref"], turn["turn_ref"])
                    n += 1
                    ref = {"session_ref": key[0], "turn_ref": key[1]}
                    if key in committed[project]:
                        item = {"work_item_ref": f"W{n:04d}", "kind": "material_work_item", "title": f"Work on {key[1]}",
                                "covered_turns": [ref], "trigger": {"summary": "asked", "evidence_refs": [ref]},
                                "agent_reaction": {"summary": "did", "main_actions": ["edit"]},
                                "outcomes": [{"category": "code_outcome", "summary": "done", "evidence_refs": [ref], "confidence": "high"}],
                                "terminal_states": [{"type": "material_result", "summary": "ok", "evidence_refs": [ref]}],
                                "limits": ["none"], "confidence": "medium"}
                    else:
                        item = {"work_item_ref": f"W{n:04d}", "kind": "evidence_gap_item", "title": "gap", "covered_turns": [ref], "confidence": "low"}
                    await both("write_work_item", {"project_key": project, "work_item": item}, f"write_work_item {project} W{n:04d}")
                    # The same item again: duplicate ref and coverage errors.
                    await both("write_work_item", {"project_key": project, "work_item": item}, f"write_work_item {project} W{n:04d} again")
    for path in sorted(ws_ref.rglob("*.json")):
        rel = path.relative_to(ws_ref)
        if rel.parts[0] == "projects" and (rel.parts[-2] == "evidence" or rel.name == "project-synthesis.json"):
            mine = ws_ours / rel
            diff.compare(f"file {rel}", mine.read_bytes().decode() if mine.exists() else None, path.read_bytes().decode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, default=ROOT / "target" / "debug" / "evidence-store")
    parser.add_argument("--seeds", default="1,2,3")
    args = parser.parse_args()
    reference_python = Path(sys.executable)
    diff = Diff()
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds.split(","):
            ws = Path(tmp) / f"ws{seed}"
            subprocess.run([sys.executable, str(ROOT / "tools" / "gen_workspace.py"), "--out", str(ws), "--seed", seed,
                            "--edge-cases", "--projects", "2", "--sessions", "4", "--turns", "6", "--tool-output-max", "64K"],
                           check=True, stdout=subprocess.DEVNULL)
            asyncio.run(compare_workspace(ws, args.bin.resolve(), reference_python, diff))
            ws_ref = Path(tmp) / f"ws{seed}-ref"
            shutil.copytree(ws, ws_ref, ignore=shutil.ignore_patterns(".evidence-store"))
            asyncio.run(compare_writes(ws, ws_ref, args.bin.resolve(), reference_python, diff))
    print(f"(reference crashed on {diff.reference_crashes} line(s) that evidence-store answers)")
    print(f"differential: {diff.passed} passed, {diff.failed} failed")
    return 1 if diff.failed else 0


if __name__ == "__main__":
    sys.exit(main())
