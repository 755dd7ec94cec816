#!/usr/bin/env python3
"""Differential test: evidence-store against prompt-diary 0.2.20 on schema-7 workspaces.

The 0.2.20 sibling of test_differential.py, and built from its pieces (Diff, server_pair,
compare_synthesis). Runs under the 0.2.20 venv (tools/.venv-0.2.20, made by
tools/setup_python.sh), whose prompt-diary is the reference server, Build, Finalize and
renderer. One function per tool comparison, so that more (the page walk of
read_session_lines) can be added beside them:

  compare_write_evidence   the 0.2.20 trigger contract (citations only, the turn's first
                           line, quoted_messages read by the server), card schema 2, and the
                           0.2.10-style chain refused field by field;
  compare_write_work_item  dispositions required, refused and malformed; envelope schema 2;
  page walk                (tools/lib/pages_0220.py) every session's ranges walked with
                           next_cursor in both modes, page by page, fragments rebuilt;
  compare_synthesis        (from test_differential.py) Build with disposition assessments,
                           the four slot writers, Finalize and the render, byte for byte.

Workspaces, per seed: (1) built by 0.2.20's own `prepare` from the histories of
tools/lib/histories.py (gen_workspace.py without edge cases, given the timestamps, cwd and Codex
session_meta that prepare reads; one Codex session is split into two paginated rollout
files, which prepare stitches into one transcript), the same histories test_differential.py
gives 0.2.10's prepare; (2) the generated workspace
with edge cases, re-labelled as schema 7 (see `schema7_workspace`).

Every workspace first gets test_differential.py's argument cases (`compare_arguments`, with
the cursor's); `--only args` runs just those, on the relabelled workspaces, in seconds.

Usage: tools/.venv-0.2.20/bin/python tools/check/test_differential_0220.py [--bin PATH] [--seeds 1,2,3] [--only args]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import histories  # noqa: E402
import gen_workspace  # noqa: E402
from gen_workspace import indexes  # noqa: E402
import test_differential as base  # noqa: E402
import pages_0220 as pages  # noqa: E402

ROOT = base.ROOT


def prepared_workspace(tmp: Path, seed: str) -> Path:
    """A workspace written by prompt-diary 0.2.20's `prepare` for 2026-01-15 (UTC) from the
    histories of a generated workspace (tools/lib/histories.py): each session becomes a Claude
    project file or a Codex rollout, its records stamped inside the day, with the project
    directory as `cwd`; one Codex session is two paginated rollout files, which prepare must
    stitch into one transcript."""
    hist, reports = histories.generated_histories(tmp, seed), tmp / f"reports{seed}"
    ws = histories.prepare(Path(sys.executable).parent, hist, reports, tmp / "home")
    manifest = histories.audit_manifest(reports)
    stitched_from = [{seg["source_path"] for seg in session.get("source_segments") or []} for session in manifest["sessions"]]
    if not any(len(paths) > 1 for paths in stitched_from):
        raise SystemExit("prepare stitched no Codex transcript from two rollout files")
    return ws


def schema7_workspace(out: Path, seed: str) -> None:
    """A generated workspace as prompt-diary 0.2.20 lays it out: metadata schema_version 7,
    index rows without `subagent_path` and turns without `target_subagents`, each turn after
    the first with `previous_context` (the turn before it). In each project's first session
    the last turn starts one line late, on a line that is no human input, so that the
    trigger read's refusals are compared too."""
    subprocess.run([sys.executable, str(ROOT / "tools" / "lib" / "gen_workspace.py"), "--out", str(out), "--seed", seed,
                    "--edge-cases", "--projects", "3", "--sessions", "3", "--turns", "6", "--tool-output-max", "64K"],
                   check=True, stdout=subprocess.DEVNULL)
    gen_workspace.relabel_schema_7(out)
    for index in out.glob("projects/*/sessions.index.jsonl"):
        rows = [json.loads(line) for line in index.read_text(encoding="utf-8").splitlines()]
        last = rows[0]["turns"][-1] if rows and rows[0]["turns"] else None
        if last and last["turn_start_line"] < last["turn_end_line"]:
            last["turn_start_line"] += 1
        index.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")


def chain_for(turn: dict, variant: int) -> dict:
    """A 0.2.20 chain for `turn`: valid (the trigger cites only the turn's first line), or
    broken in one of several ways (by `variant`)."""
    a, b = turn["turn_start_line"], turn["turn_end_line"]
    inside = f"{a}-{b}"
    chain = {
        "turn_ref": turn["turn_ref"],
        "trigger": {"citations": [{"lines": f"{a}-{a}"}]},
        "agent_reactions": [{"summary": "did it — é", "citations": [{"lines": inside}]}],
        "outcomes": [{"category": "code_outcome", "summary": "done", "citations": [{"lines": f"0{a}-{b}"}]}],
        "observed_checks": [{"type": "test_output", "summary": "tests", "citations": [{"lines": f"{b}-{b}"}]}],
        "terminal_state": {"type": "material_result", "summary": "done", "citations": [{"lines": inside}]},
        "materiality": "material",
        "extra": "dropped",
    }
    base.break_chain(chain, variant, a, b)
    if variant == 3:  # the 0.2.10 trigger shape
        chain["trigger"] = {"type": "explicit_user_message", "summary": "asked",
                            "quoted_messages": [{"text": "do it", "citations": [{"lines": inside}]}],
                            "citations": [{"lines": f"{a}-{a}"}]}
    elif variant == 4:
        chain["trigger"]["citations"] = [{"lines": inside}]  # not exactly the first line
    elif variant == 5:
        chain["trigger"] = "asked"  # not an object: no citations
        chain["materiality"] = "huge"
    return chain


async def compare_write_evidence(both, ws: Path) -> dict[str, list]:
    """Every turn gets several chains; returns each project's committed turns."""
    committed: dict[str, list] = {}
    for project, rows in indexes(ws).items():
        committed[project] = await base.write_chains(both, project, rows, chain_for, (3, 4, 5, 1, 2, 0, 0), (4,))
        first = rows[0] if rows else None
        if first and first["turns"]:
            args = {"project_key": project, "session_ref": "S9999", "evidence_chain": chain_for(first["turns"][0], 0)}
            await both("write_evidence", args, f"write_evidence {project} unknown session")
    return committed


def work_item_for(n: int, key: tuple[str, str], committed: bool) -> dict:
    """test_differential's work item with a disposition where 0.2.20 wants one; every
    seventh item breaks the disposition rule in one of several ways."""
    item = base.work_item_for(n, key, committed)
    ref = {"session_ref": key[0], "turn_ref": key[1]}
    disposition = {"type": ("completed", "in_progress", "blocked", "failed", "unknown")[n % 5],
                   "scope": f"scope of {key[1]}", "summary": "judged — é", "evidence_refs": [ref]}
    if item["kind"] == "material_work_item":
        item["disposition"] = disposition
    if n % 7 == 3:
        if item["kind"] == "material_work_item":
            item.pop("disposition")
        else:
            item["disposition"] = disposition
    elif n % 7 == 5 and item["kind"] == "material_work_item":
        item["disposition"] = dict(disposition, type="done", scope=" ", evidence_refs=[])
    return item


async def compare_write_work_item(both, ws: Path, committed: dict[str, list]) -> list[dict]:
    """Work items for every project but the last, each twice (the second time: duplicate
    ref and coverage errors); the last project's items are returned, for later."""
    held_back: list[dict] = []
    projects = indexes(ws)
    last = list(projects)[-1] if projects else None
    for project, rows in projects.items():
        for key, n, args in base.work_item_args(project, rows, committed[project], work_item_for):
            if project == last:
                held_back.append(args)
                continue
            what = f"write_work_item {project} {args['work_item']['work_item_ref']}"
            got = await both("write_work_item", args, what)
            if got.get("status") != "appended" and "disposition" in json.dumps(got):
                # Repaired: the item goes in with a valid disposition (or none).
                fixed = base.work_item_for(n, key, key in committed[project])
                if fixed["kind"] == "material_work_item":
                    fixed["disposition"] = {"type": "completed", "scope": "s", "summary": "s",
                                            "evidence_refs": [{"session_ref": key[0], "turn_ref": key[1]}]}
                args = {"project_key": project, "work_item": fixed}
                await both("write_work_item", args, what + " repaired")
            await both("write_work_item", args, what + " again")
    return [a for a in held_back if "disposition" in a["work_item"] or a["work_item"]["kind"] != "material_work_item"]


async def compare_writes(ws_ours: Path, ws_ref: Path, binary: Path, reference_python: Path, diff: base.Diff):
    async with base.server_pair(ws_ours, ws_ref, binary, reference_python, diff) as both:
        committed = await compare_write_evidence(both, ws_ours)
        held_back = await compare_write_work_item(both, ws_ours, committed)
    base.compare_files(ws_ours, ws_ref, diff)
    return committed, held_back


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, default=cargo_target.binary("debug"))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--only", choices=["args"], help="only the argument cases, on the relabelled workspaces")
    args = parser.parse_args()
    import prompt_diary.models as models
    if getattr(models, "WORKSPACE_SCHEMA_VERSION", None) != 7:
        print("run this with prompt-diary 0.2.20's python (tools/.venv-0.2.20/bin/python)", file=sys.stderr)
        return 2
    reference_python = Path(sys.executable)
    diff = base.Diff()
    with tempfile.TemporaryDirectory() as tmp:
        workspaces = []
        for seed in args.seeds.split(","):
            if not args.only:
                workspaces.append((f"prepared {seed}", prepared_workspace(Path(tmp), seed)))
            ws = Path(tmp) / f"ws{seed}"
            schema7_workspace(ws, seed)
            workspaces.append((f"relabelled {seed}", ws))
        for seed, ws in workspaces:
            passed, failed = diff.passed, diff.failed
            asyncio.run(base.compare_arguments(ws, args.bin.resolve(), reference_python, diff, paged=True))
            print(f"seed {seed}: arguments {diff.passed - passed} passed, {diff.failed - failed} failed")
            if args.only:
                continue
            # The page walk of read_session_lines (tools/lib/pages_0220.py), before any write.
            walked = pages.Diff()
            asyncio.run(pages.compare(ws, args.bin.resolve(), reference_python, walked))
            print(f"seed {seed}: {walked.pages} pages walked ({walked.fragments} fragments, "
                  f"{walked.surrogate_pages} equal but for lone surrogates; {walked.handle_pages} walks compared "
                  f"as records after their first page with a handle, {walked.handles} handles checked)")
            diff.compare(f"seed {seed} page walk", walked.failures, [])
            ws_ref = ws.with_name(ws.name + "-ref")
            shutil.copytree(ws, ws_ref, ignore=shutil.ignore_patterns(".evidence-store"))
            committed, held_back = asyncio.run(compare_writes(ws, ws_ref, args.bin.resolve(), reference_python, diff))
            asyncio.run(base.compare_synthesis(ws, ws_ref, args.bin.resolve(), reference_python, diff, committed, held_back))
            cards = list(ws_ref.glob("projects/*/evidence/*.json"))
            quoted = sum(len(c["trigger"]["quoted_messages"]) for card in cards
                         for c in json.loads(card.read_text(encoding="utf-8"))["evidence_chains"])
            report = json.loads((ws_ref / "daily-report.json").read_text(encoding="utf-8"))
            assessed = sum(1 for p in report["projects"] for w in p["work_items"] if w.get("disposition_assessment"))
            print(f"seed {seed}: {sum(map(len, committed.values()))} chains committed, {quoted} quoted messages, "
                  f"{assessed} assessed work items in the report")
            if not (quoted and assessed):
                diff.compare(f"seed {seed} exercises quotes and assessments", False, True)
    print(f"differential 0.2.20: {diff.passed} passed, {diff.failed} failed")
    return 1 if diff.failed else 0


if __name__ == "__main__":
    sys.exit(main())
