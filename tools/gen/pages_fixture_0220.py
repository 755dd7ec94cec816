#!/usr/bin/env python3
"""Write tests/fixtures/pages_0220/: the pages prompt-diary 0.2.20 answers on the example
workspace made schema 7 (tests/it/read_pages.rs builds the same workspace).

The workspace: examples/workspace with metadata schema_version 7, index rows without the
subagent fields, and long_lines.jsonl appended to S0001 (a 77,000-character assistant
text, a 40,000-character human text, a metadata line and a short line), so both modes
cut fragments. expected.json holds, for each request, every page's exact text following
next_cursor, and the answers to bad cursors.

Run with 0.2.20's python: tools/.venv-0.2.20/bin/python tools/gen/pages_fixture_0220.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import example  # noqa: E402
from prompt_diary.generate.evidence_extraction.session_reader import (
    ReadCursor,
    read_session_lines,
    serialize_read_result,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/fixtures/pages_0220"
PROJECT = "Demo-0123456789ab"


def long_lines() -> str:
    text = "Résumé of the analysis — 日本語 line. " * 2200
    lines = [
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text[:77000]}]}},
        {"type": "user", "message": {"role": "user", "content": "\"quoted\" \\ tab\t " * 2500}},
        {"type": "system", "subtype": "turn_duration", "durationMs": 3},
        {"type": "assistant", "message": {"role": "assistant", "content": "short after"}},
    ]
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def build(ws: Path) -> None:
    example.copy(ws)
    meta = ws / "metadata.json"
    meta.write_text(meta.read_text().replace('"schema_version": 2', '"schema_version": 7'))
    index = ws / "projects" / PROJECT / "sessions.index.jsonl"
    index.write_text(index.read_text().replace('"subagent_path": "", ', "").replace('"target_subagents": [], ', ""))
    with (ws / "projects" / PROJECT / "sessions/claude-code/c1.jsonl").open("a", encoding="utf-8") as f:
        f.write((OUT / "long_lines.jsonl").read_text(encoding="utf-8"))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "long_lines.jsonl").write_text(long_lines(), encoding="utf-8")
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        build(ws)
        requests = [("S0001", 1, 12, "compact"), ("S0001", 1, 12, "full"), ("S0001", 9, 10, "compact"),
                    ("S0001", 11, 11, "compact"), ("S0002", 1, 8, "compact"), ("S0002", 1, 8, "full")]
        for ref, start, end, mode in requests:
            pages, cursor = [], None
            while True:
                result = read_session_lines(workspace_path=ws, project_key=PROJECT, session_ref=ref,
                                            start_line=start, end_line=end, mode=mode, cursor=cursor)
                pages.append(serialize_read_result(result))
                cursor = getattr(result, "next_cursor", None)
                if cursor is None:
                    break
            cases.append({"args": {"session_ref": ref, "start_line": start, "end_line": end, "mode": mode},
                          "pages": pages})
        for line, offset in [(0, 0), (13, 0), (11, 1), (9, 10**6), (2, 5)]:
            result = read_session_lines(workspace_path=ws, project_key=PROJECT, session_ref="S0001",
                                        start_line=1, end_line=12, mode="compact", cursor=ReadCursor(line, offset))
            cases.append({"args": {"session_ref": "S0001", "start_line": 1, "end_line": 12, "mode": "compact",
                                   "cursor": {"line": line, "offset": offset}},
                          "pages": [serialize_read_result(result)]})
    (OUT / "expected.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(cases)} cases, {sum(len(c['pages']) for c in cases)} pages")


if __name__ == "__main__":
    main()
