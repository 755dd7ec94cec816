"""Tool-output handles in compact reads, for comparing our reads with prompt-diary's.

Every trimmed `tool_uses` / `tool_results` entry of our compact records carries one more
member than prompt-diary's, `"handle": "<uuid>"`, as its last member. `strip` checks that
exactly the trimmed entries have one and returns the text without them: prompt-diary's.

In the sparse records of prompt-diary 0.2.20's pages, a tool use whose input summary was
cut, and a tool result whose preview was cut, carry `"handle"`; `strip_sparse` checks
that and removes them from a parsed record.
"""

from __future__ import annotations

import json
import re

MEMBER = re.compile(r',\n {10}"handle": "[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"')


def strip(text: str) -> tuple[str, int]:
    """`text` without its handles, and how many it held."""
    parsed = json.loads(text)
    trimmed = 0
    for record in parsed.get("records", []) if isinstance(parsed, dict) else []:
        for entry in record.get("tool_uses", []) + record.get("tool_results", []):
            assert ("handle" in entry) == entry["truncated"], f"line {record['line']}: {entry}"
            trimmed += entry["truncated"]
    assert len(MEMBER.findall(text)) == trimmed, "every handle is the last member of its entry"
    return MEMBER.sub("", text), trimmed


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
ELISION = "\n...[trimmed]...\n"


def strip_sparse(record: dict) -> tuple[dict, list[tuple[dict, str]]]:
    """A parsed sparse record without its handles, checked: an entry has a handle exactly
    when its shown payload (a use's `input_summary`, a result's `preview`) was cut. Also
    the entries with handles, as (entry, handle)."""
    found: list[tuple[dict, str]] = []
    entries = [("use", u) for u in record.get("tool_uses", [])] + [("result", r) for r in record.get("tool_results", [])]
    for part in record.get("parts", []):
        if "tool_use" in part:
            entries.append(("use", part["tool_use"]))
        if "tool_result" in part:
            entries.append(("result", part["tool_result"]))
    for kind, entry in entries:
        shown = entry.get("input_summary" if kind == "use" else "preview", "")
        cut = ELISION in shown and (kind == "result" or shown.endswith(ELISION))
        assert ("handle" in entry) == cut, f"line {record['line']}: handle and cut {kind} disagree: {entry}"
        if "handle" in entry:
            assert UUID.fullmatch(entry["handle"]), entry["handle"]
            found.append((dict(entry), entry.pop("handle")))
    return record, found
