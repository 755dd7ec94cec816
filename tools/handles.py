"""Tool-output handles in compact reads, for comparing our reads with prompt-diary's.

Every trimmed `tool_uses` / `tool_results` entry of our compact records carries one more
member than prompt-diary's, `"handle": "<uuid>"`, as its last member. `strip` checks that
exactly the trimmed entries have one and returns the text without them: prompt-diary's.
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
