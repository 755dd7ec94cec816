"""The example workspace, `examples/workspace`, copied as a tool script needs it: its prepared
inputs only (what prompt-diary prepare writes: metadata, each project's project.json, index
and sessions), or as it ships (with the documents tools/gen/example_documents.py writes
through the tools: the cards, the project synthesis, the daily report). Never what the
README's commands leave there (the store, receipts, temp files)."""

from __future__ import annotations

import shutil
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workspace"
INPUTS = {"metadata.json", "project.json", "sessions.index.jsonl"}
DOCUMENTS = {"daily-report.json", "project-synthesis.json"}


def copy(to: Path, documents: bool = False) -> Path:
    """Copies the example to `to` (created); returns `to`."""
    to.mkdir(parents=True, exist_ok=True)
    for path in sorted(EXAMPLE.rglob("*")):
        rel = path.relative_to(EXAMPLE)
        if not path.is_file() or rel.parts[0] == ".evidence-store":
            continue
        inside = rel.parts[2:3]  # projects/<key>/<this>/...
        if path.name.endswith(".tmp") or inside == ("receipts",):
            continue
        is_input = path.name in INPUTS or inside == ("sessions",)
        is_document = path.name in DOCUMENTS or inside == ("evidence",)
        if is_input or (documents and is_document):
            (to / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, to / rel)
    return to
