"""The documents agents leave on a day, for a generated workspace (tools/lib/gen_workspace.py):
an evidence card per session with a chain for every turn (each citing four small ranges of
its turn, as an agent cites), an envelope per project with one material work item per
session covering its turns, and a daily report with a title, each project's summary and
work-item views, engagement and team learning. Written as files, as the tools write them
(import adopts them); for the benches and browser checks of `view`, which read what the
page shows, not how it was validated.

`write(ws)` writes them all and returns how many chains; `clear(ws)` removes them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def chain(turn: dict) -> dict:
    a, b = turn["turn_start_line"], turn["turn_end_line"]
    mid = (a + b) // 2

    def span(x: int, y: int) -> list[dict]:
        x, y = max(a, min(x, b)), max(a, min(y, b))
        return [{"lines": f"{x}-{y}"}]

    return {
        "turn_ref": turn["turn_ref"],
        "trigger": {"type": "explicit_user_message", "summary": "The user asked.", "quoted_messages": [],
                    "citations": span(a, a)},
        "agent_reactions": [{"summary": "The agent worked.", "citations": span(mid, mid + 2)}],
        "outcomes": [{"category": "code_outcome", "summary": "Something changed.", "citations": span(b - 1, b)}],
        "observed_checks": [],
        "terminal_state": {"type": "material_result", "summary": "Done.", "citations": span(b, b)},
        "materiality": "material",
    }


def _dump(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def clear(ws: Path) -> None:
    for project in ws.glob("projects/*"):
        shutil.rmtree(project / "evidence", ignore_errors=True)
        (project / "project-synthesis.json").unlink(missing_ok=True)
    (ws / "daily-report.json").unlink(missing_ok=True)


def summary_of(label: str) -> str:
    """The summary text the report gives project `label` (checks look for it)."""
    return f"The {label} project's day, summed up: every turn of every session has its chain."


TITLE = "A generated day with a chain for every turn"


def write(ws: Path) -> int:
    clear(ws)
    chains = 0
    entries = []
    first_refs = []
    for index in sorted(ws.glob("projects/*/sessions.index.jsonl")):
        project = index.parent
        key = project.name
        label = json.loads((project / "project.json").read_text(encoding="utf-8")).get("project_label", key)
        rows = [json.loads(r) for r in index.read_text(encoding="utf-8").splitlines() if r.strip()]
        items, views = [], []
        for n, row in enumerate(rows, 1):
            turns = row["turns"]
            if not turns:
                continue
            sref = row["session_ref"]
            _dump(project / "evidence" / f"{sref}.json", {
                "schema_version": 1, "project_key": key, "session_ref": sref,
                "evidence_chains": [chain(t) for t in turns]})
            chains += len(turns)
            covered = [{"session_ref": sref, "turn_ref": t["turn_ref"]} for t in turns]
            first = {"session_ref": sref, "turn_ref": turns[0]["turn_ref"]}
            cite = {"project_key": key, **first, "lines": f"{turns[0]['turn_start_line']}-{turns[0]['turn_end_line']}"}
            if not first_refs or first_refs[-1]["project_key"] != key:
                first_refs.append(cite)
            title = f"The work of {label} session {sref}"
            items.append({
                "work_item_ref": f"W{n:04d}", "kind": "material_work_item", "title": title, "covered_turns": covered,
                "trigger": {"summary": "The user asked for it.", "evidence_refs": [first]},
                "agent_reaction": {"summary": "The agent did it.", "main_actions": ["Worked through the turns"]},
                "outcomes": [{"category": "code_outcome", "summary": "It is done.", "evidence_refs": [first],
                              "confidence": "high"}],
                "terminal_states": [{"type": "material_result", "summary": "Done.", "evidence_refs": [first]}],
                "limits": [], "confidence": "high"})
            views.append({
                "work_item_ref": f"W{n:04d}", "title": title, "kind": "material_work_item", "disposition": "completed",
                "confidence": "high", "covered_turns": covered, "trigger_summary": "The user asked for it.",
                "agent_reaction_summary": "The agent did it.",
                "outcomes": [{"what_changed": "It is done.", "confidence": "high", "citations": [cite]}],
                "terminal_states": [{"summary": "Done.", "citations": [cite]}], "limits": []})
        _dump(project / "project-synthesis.json", {
            "schema_version": 1, "project_key": key, "project_label": label, "work_items": items,
            "source_user_messages": []})
        project_refs = [r for r in first_refs if r["project_key"] == key]
        entries.append({"project_key": key, "project_label": label,
                        "summary": {"text": summary_of(label), "citations": project_refs},
                        "work_items": views, "source_user_messages": []})
    _dump(ws / "daily-report.json", {
        "schema_version": 1, "report_date": "2026-01-15", "status": "final",
        "window": {"start": "2026-01-15T00:00:00Z", "end": "2026-01-16T00:00:00Z", "timezone": "UTC"},
        "report_title": {"text": TITLE, "citations": first_refs},
        "overall_confidence": None,
        "projects": entries,
        "engagement_assessment": {
            "overall_reading": {"text": "The people steered every session.", "citations": first_refs, "confidence": "medium"},
            "observations": [{"dimension": "direction", "statement": "Each session began with a request.",
                              "citations": first_refs, "confidence": "medium"}],
            "limits": ["Generated sessions."]},
        "team_learning": {
            "takeaways": {"text": "Generated days teach little.", "citations": first_refs, "confidence": "low"},
            "patterns": [], "limits": ["Generated sessions."]},
    })
    return chains
