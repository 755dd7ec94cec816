#!/usr/bin/env python3
"""Writes the example workspace's documents through the tools, as agents write them: an
evidence card for each session (a chain for each of its three turns, `write_evidence`),
two work items (`write_work_item`), the daily report (`evidence-store build`), then its
project summary, title, engagement and team learning (`write_project_summary`,
`write_report_title`, `write_engagement`, `write_team_learning`), all through
`evidence-store serve` on a copy of the example's prepared inputs.

The documents written are the example's own (`examples/workspace/daily-report.json`,
`projects/Demo-0123456789ab/project-synthesis.json`, `projects/Demo-0123456789ab/evidence/`):
without --check they replace them; with --check nothing is written and any difference
fails (tools/test.sh runs that, so the committed documents are always what the tools
write today).

Usage: python3 tools/gen/example_documents.py [--bin target/debug/evidence-store] [--check]
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import example  # noqa: E402
import mcp_client  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "workspace"
PROJECT = "Demo-0123456789ab"
# What the tools write, relative to the workspace.
DOCUMENTS = [
    f"projects/{PROJECT}/evidence/S0001.json",
    f"projects/{PROJECT}/evidence/S0002.json",
    f"projects/{PROJECT}/project-synthesis.json",
    "daily-report.json",
]


def cite(lines: str) -> list[dict]:
    return [{"lines": lines}]


def turn(session: str, turn_ref: str) -> dict:
    return {"session_ref": session, "turn_ref": turn_ref}


def cross(session: str, turn_ref: str) -> dict:
    return {"project_key": PROJECT, **turn(session, turn_ref)}


CHAINS = [
    ("S0001", {
        "turn_ref": "T0001",
        "trigger": {"type": "explicit_user_message", "summary": "The user asked to fix the failing parser test.",
                    "quoted_messages": [{"text": "Fix the failing parser test.", "citations": cite("1-1")}],
                    "citations": cite("1-1")},
        "agent_reactions": [{"summary": "The agent ran the parser tests, then changed `i <= n` to `i < n` in src/parser.py.",
                             "citations": cite("2-5")}],
        "outcomes": [{"category": "code_outcome", "summary": "The off-by-one in parse_tokens is fixed.",
                      "citations": cite("4-6")}],
        "observed_checks": [{"type": "test_output", "summary": "The first run showed 1 failed, 4 passed.",
                             "citations": cite("3-3")}],
        "terminal_state": {"type": "material_result",
                           "summary": "The fix is applied; the agent reports all 5 tests pass.",
                           "citations": cite("6-6")},
        "materiality": "material",
    }),
    ("S0001", {
        "turn_ref": "T0002",
        "trigger": {"type": "user_approval", "summary": "The user approved shipping: “thanks, ship it”.",
                    "quoted_messages": [{"text": "thanks, ship it", "citations": cite("7-7")}],
                    "citations": cite("7-7")},
        "agent_reactions": [],
        "outcomes": [],
        "observed_checks": [],
        "terminal_state": {"type": "clarification_only", "summary": "An approval; nothing further was produced.",
                           "citations": cite("7-8")},
        "materiality": "minor",
    }),
    ("S0002", {
        "turn_ref": "T0001",
        "trigger": {"type": "explicit_user_message", "summary": "The user asked to run the test suite.",
                    "quoted_messages": [{"text": "Run the test suite", "citations": cite("2-2")}],
                    "citations": cite("2-2")},
        "agent_reactions": [{"summary": "The agent ran `pytest -q`.", "citations": cite("4-4")}],
        "outcomes": [{"category": "validation_outcome", "summary": "The whole suite ran; the agent reports all tests pass.",
                      "citations": cite("5-7")}],
        "observed_checks": [{"type": "test_output", "summary": "The run's output is one long line, trimmed in compact records.",
                             "citations": cite("5-5")}],
        "terminal_state": {"type": "material_result", "summary": "The suite passes, as the agent reports.",
                           "citations": cite("6-7")},
        "materiality": "material",
    }),
]

WORK_ITEMS = [
    {
        "work_item_ref": "W0001", "kind": "material_work_item", "title": "Fixed the off-by-one in the parser",
        "covered_turns": [turn("S0001", "T0001"), turn("S0001", "T0002")],
        "trigger": {"summary": "The user asked to fix the failing parser test.",
                    "evidence_refs": [turn("S0001", "T0001")]},
        "agent_reaction": {"summary": "The agent reproduced the failure, found the off-by-one in parse_tokens and fixed it.",
                           "main_actions": ["Ran pytest on tests/test_parser.py", "Changed `i <= n` to `i < n` in src/parser.py"]},
        "outcomes": [{"category": "code_outcome", "summary": "parse_tokens no longer reads one token past its input.",
                      "evidence_refs": [turn("S0001", "T0001")], "confidence": "high"}],
        "terminal_states": [{"type": "material_result", "summary": "The fix is in, and the user approved shipping it.",
                             "evidence_refs": [turn("S0001", "T0001"), turn("S0001", "T0002")]}],
        "limits": ["That all 5 tests pass after the edit is the agent's own report: the session holds no run after it."],
        "confidence": "high",
    },
    {
        "work_item_ref": "W0002", "kind": "material_work_item", "title": "Ran the whole test suite",
        "covered_turns": [turn("S0002", "T0001")],
        "trigger": {"summary": "The user asked to run the test suite.", "evidence_refs": [turn("S0002", "T0001")]},
        "agent_reaction": {"summary": "The agent ran pytest over the whole suite.", "main_actions": ["Ran `pytest -q`"]},
        "outcomes": [{"category": "validation_outcome", "summary": "The suite ran; the agent reports every test passes.",
                      "evidence_refs": [turn("S0002", "T0001")], "confidence": "medium"}],
        "terminal_states": [{"type": "material_result", "summary": "The suite passes, as the agent reports.",
                             "evidence_refs": [turn("S0002", "T0001")]}],
        "limits": ["The run's output is kept only trimmed in compact records."],
        "confidence": "medium",
    },
]

SLOTS = [
    ("write_project_summary", {"project_key": PROJECT, "summary": {
        "text": "Fixed the failing parser test, an off-by-one in parse_tokens, and ran the whole suite, which the agent reports passing.",
        "citations": [turn("S0001", "T0001"), turn("S0002", "T0001")]}}),
    ("write_report_title", {"title": {"text": "Parser off-by-one fixed and the suite run green",
                                      "citations": [cross("S0001", "T0001"), cross("S0002", "T0001")]}}),
    ("write_engagement", {
        "overall_reading": {"text": "The user set each task in one line and approved the result; the agent needed no correction.",
                            "citations": [cross("S0001", "T0001"), cross("S0001", "T0002")], "confidence": "medium"},
        "observations": [
            {"dimension": "direction", "statement": "Each task was set by a one-line request.",
             "citations": [cross("S0001", "T0001"), cross("S0002", "T0001")], "confidence": "high"},
            {"dimension": "review", "statement": "The user approved shipping after the agent's report.",
             "citations": [cross("S0001", "T0002")], "confidence": "medium"},
        ],
        "limits": ["Two short sessions."],
    }),
    ("write_team_learning", {
        "takeaways": {"text": "Running the failing test first pointed straight at the bug.",
                      "citations": [cross("S0001", "T0001")], "confidence": "medium"},
        "patterns": [{"kind": "promote", "statement": "Reproduce a failure before editing.",
                      "rationale": "The first run showed which test failed and how.",
                      "recurrence": "Once today, in session S0001.",
                      "citations": [cross("S0001", "T0001")], "confidence": "medium"}],
        "limits": ["One day of one project."],
    }),
]


def calls(binary: str, ws: Path, steps: list[tuple[str, dict]]) -> None:
    client = mcp_client.Raw(binary, ws)
    try:
        if client.initialize("example-documents") is None:
            sys.exit("serve did not answer initialize")
        for tool, arguments in steps:
            got = client.tool(tool, arguments)
            if got is None:
                sys.exit(f"{tool}: no answer")
            is_error, text = got
            status = json.loads(text).get("status") if not is_error and text.startswith("{") else None
            if is_error or status not in ("appended", "written"):
                sys.exit(f"{tool} was refused: {text}")
    finally:
        client.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(cargo_target.binary("debug")))
    ap.add_argument("--check", action="store_true", help="compare with the committed documents; write nothing")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="example-documents-") as tmp:
        ws = Path(tmp) / "ws"
        example.copy(ws)
        run = lambda *step: subprocess.run([args.bin, "--workspace", str(ws), *step], check=True,  # noqa: E731
                                           capture_output=True, text=True)
        run("import")
        calls(args.bin, ws, [("write_evidence", {"project_key": PROJECT, "session_ref": s, "evidence_chain": c})
                             for s, c in CHAINS])
        calls(args.bin, ws, [("write_work_item", {"project_key": PROJECT, "work_item": w}) for w in WORK_ITEMS])
        run("build")
        calls(args.bin, ws, SLOTS)
        different = []
        for rel in DOCUMENTS:
            new = (ws / rel).read_bytes()
            old_path = EXAMPLE / rel
            old = old_path.read_bytes() if old_path.exists() else b""
            if new == old:
                continue
            if args.check:
                different.append(rel)
                sys.stdout.writelines(difflib.unified_diff(
                    old.decode(errors="replace").splitlines(True), new.decode(errors="replace").splitlines(True),
                    f"committed/{rel}", f"written/{rel}"))
            else:
                old_path.parent.mkdir(parents=True, exist_ok=True)
                old_path.write_bytes(new)
                print(f"wrote examples/workspace/{rel}")
    if different:
        print(f"example_documents: {len(different)} document(s) differ from what the tools write: "
              f"run python3 tools/gen/example_documents.py and commit them", file=sys.stderr)
        return 1
    if args.check:
        print(f"example_documents: the {len(DOCUMENTS)} committed documents are what the tools write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
