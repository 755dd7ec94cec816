#!/usr/bin/env python3
"""The differential of two run.sh days: the documents each server left must be the same.

  compare.py DIR_A DIR_B

Compares every file of the two days' workspaces (DIR/reports/work/<date>/): the evidence cards,
the project-synthesis envelopes, daily-report.json, report.md and report.notion.json, and the
prepared inputs. JSON files are compared as values, the keys of SET_ASIDE_KEYS (when `prepare`
ran) set aside: each must be present in both, its value is not compared; every other file byte
for byte. Set aside as well, as decided deviations:

- `.evidence-store/` at the workspace's root (the store) and `projects/<key>/receipts/` (the
  citation receipts evidence-store writes beside the cards): evidence-store's own files, which
  prompt-diary neither writes nor reads.

Then the write tools' answers, as the agent saw them (DIR/agent/): every write call, its
arguments and its answer (accepted, or refused with its errors) must be the same in both days,
the `Wall time` Codex puts before each aside. The decided deviations of evidence-store's
wording (tools/lib/deviations.py: the hint for a citation outside the turn names "the evidence
chain's indexed turn") are put in prompt-diary's words first.

Prints one line per difference and a closing `N passed, N failed` line; exits 1 on any
difference, 2 when a day is missing (no DIR, or not exactly one workspace in it).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
from deviations import DECIDED_HINTS  # noqa: E402

# Keys whose values say when a step ran, not what it made: compared for presence only.
SET_ASIDE_KEYS = frozenset({"prepared_at"})
SET_ASIDE = "<set aside>"


class MissingDay(Exception):
    """A day directory without exactly one workspace in it."""


def write_answers(day: Path) -> set[tuple[str, str, str]]:
    """(tool, arguments, answer) of every write call the agent made, from its request log."""
    out = set()
    for path in sorted((day / "agent").glob("*-request.json")):
        items = [i for i in json.loads(path.read_text(encoding="utf-8")).get("input") or [] if isinstance(i, dict)]
        calls = {i.get("call_id"): i for i in items if i.get("type") == "function_call"}
        for item in items:
            call = calls.get(item.get("call_id"))
            if item.get("type") != "function_call_output" or not call or not str(call.get("name")).startswith("write_"):
                continue
            output = item.get("output")
            text = "".join(p.get("text", "") for p in output if isinstance(p, dict)) if isinstance(output, list) else str(output)
            text = re.sub(r"Wall time: [0-9.]+ seconds", "", text)
            for ours, theirs in DECIDED_HINTS.items():
                text = text.replace(ours, theirs)
            out.add((call["name"], call.get("arguments") or "", text))
    return out


def workspace(day: Path) -> Path:
    if not day.is_dir():
        raise MissingDay(f"{day} is not a directory")
    found = sorted(p for p in (day / "reports" / "work").glob("*") if p.is_dir())
    if len(found) != 1:
        raise MissingDay(f"{day} holds {len(found)} workspaces under reports/work, not one")
    return found[0]


def set_aside(rel: Path) -> bool:
    """evidence-store's own files: the store's directory at the workspace root, and each
    project's citation receipts."""
    parts = rel.parts
    return parts[0] == ".evidence-store" or (len(parts) > 3 and parts[0] == "projects" and parts[2] == "receipts")


def files(ws: Path) -> dict[str, Path]:
    out = {}
    for path in ws.rglob("*"):
        rel = path.relative_to(ws)
        if path.is_file() and not set_aside(rel):
            out[str(rel)] = path
    return out


def without_times(value: object) -> object:
    """`value` with the value of every key in SET_ASIDE_KEYS replaced by a placeholder (the key
    itself kept, so that one only on one side is still a difference)."""
    if isinstance(value, dict):
        return {k: SET_ASIDE if k in SET_ASIDE_KEYS else without_times(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def first_difference(a: object, b: object, path: str = "") -> str:
    if type(a) is not type(b):
        return f"{path or '/'}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}/{key}: only in {'the second' if key not in a else 'the first'}"
            if a[key] != b[key]:
                return first_difference(a[key], b[key], f"{path}/{key}")
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    return f"{path or '/'}: {json.dumps(a)[:200]} != {json.dumps(b)[:200]}"


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        a_ws, b_ws = workspace(Path(sys.argv[1])), workspace(Path(sys.argv[2]))
    except MissingDay as err:
        print(f"compare: {err}", file=sys.stderr)
        return 2
    a_files, b_files = files(a_ws), files(b_ws)
    passed = failed = 0
    for rel in sorted(set(a_files) | set(b_files)):
        if rel not in a_files or rel not in b_files:
            print(f"DIFF {rel}: only in {sys.argv[1] if rel in a_files else sys.argv[2]}")
            failed += 1
            continue
        a_bytes, b_bytes = a_files[rel].read_bytes(), b_files[rel].read_bytes()
        if rel.endswith(".json"):
            try:
                a_val, b_val = without_times(json.loads(a_bytes)), without_times(json.loads(b_bytes))
            except ValueError as err:
                print(f"DIFF {rel}: not JSON ({err})")
                failed += 1
                continue
            same, why = a_val == b_val, "" if a_val == b_val else first_difference(a_val, b_val)
        else:
            same, why = a_bytes == b_bytes, "bytes differ"
        if same:
            passed += 1
        else:
            print(f"DIFF {rel}: {why}")
            failed += 1
    a_writes, b_writes = write_answers(Path(sys.argv[1])), write_answers(Path(sys.argv[2]))
    if not a_writes or not b_writes:
        print("DIFF write answers: a day's agent log holds no write call")
        failed += 1
    for tool, arguments, answer in sorted(a_writes ^ b_writes):
        side = sys.argv[1] if (tool, arguments, answer) in a_writes else sys.argv[2]
        print(f"DIFF {tool} answered only in {side}: {arguments[:150]} -> {' '.join(answer.split())[:300]}")
        failed += 1
    passed += len(a_writes & b_writes)
    print(f"compare: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
