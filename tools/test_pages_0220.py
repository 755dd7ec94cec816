#!/usr/bin/env python3
"""Page-walk differential: evidence-store against prompt-diary 0.2.20's server.

Generated workspaces (tools/gen_workspace.py --edge-cases) are turned into schema-7
workspaces by hand (metadata schema_version 7, index rows without the subagent fields,
which is what 0.2.20's prepare writes), and a Claude session gets lines long enough to be
cut into fragments in both modes. Both servers are driven over stdio by the MCP client.
For every session, ranges (the whole session, each turn, sliding windows, single lines)
are walked in both modes with next_cursor until null; every page's text must be
byte-identical, every page at most 32,768 UTF-8 bytes, and the fragments of each record
must rebuild it exactly (a compact record's JSON parses; a raw line equals the line).
Cursor errors are compared too.

Usage: /work/wt/pd20/bin/python tools/test_pages_0220.py --bin target/debug/evidence-store
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_SERVER = ("import logging; logging.disable(logging.CRITICAL); "
                    "from prompt_diary.mcp.server import serve_mcp_server; serve_mcp_server()")
PAGE_BYTES = 32 * 1024


def to_schema_7(ws: Path) -> None:
    meta = json.loads((ws / "metadata.json").read_text())
    meta["schema_version"] = 7
    (ws / "metadata.json").write_text(json.dumps(meta, indent=2))
    for index in ws.glob("projects/*/sessions.index.jsonl"):
        rows = []
        for line in index.read_text().splitlines():
            row = json.loads(line)
            row.pop("subagent_path", None)
            for turn in row["turns"]:
                turn.pop("target_subagents", None)
            rows.append(json.dumps(row, sort_keys=True))
        index.write_text("\n".join(rows) + "\n")


def add_long_lines(ws: Path) -> None:
    """Appends to one Claude session an assistant text and a human text long enough to be
    cut into fragments, and a short line after them."""
    for index in sorted(ws.glob("projects/*/sessions.index.jsonl")):
        for line in index.read_text().splitlines():
            row = json.loads(line)
            path = index.parent / row["session_path"]
            if row["source"] == "claude-code" and path.is_file():
                long = "Résumé of the analysis — 日本語 line. \"quoted\" \\ tab\t " * 1400
                extra = [
                    {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": long}]}},
                    {"type": "user", "message": {"role": "user", "content": long[:40000]}},
                    {"type": "system", "subtype": "turn_duration", "durationMs": 3},
                    {"type": "assistant", "message": {"role": "assistant", "content": "short after"}},
                ]
                with path.open("a", encoding="utf-8") as f:
                    for e in extra:
                        f.write(json.dumps(e, ensure_ascii=False) + "\n")
                return


LONE_SURROGATE = re.compile(r"(?<!\\)((?:\\\\)*)\\ud[89a-f][0-9a-f]{2}")


def without_lone_surrogates(text: str) -> str:
    """A lone surrogate escape is read as U+FFFD by evidence-store (its strings are UTF-8),
    where Python keeps the surrogate and prints it back as the escape: the one known
    departure, counted apart."""
    return LONE_SURROGATE.sub(lambda m: m.group(1) + "\ufffd", text)


class Diff:
    def __init__(self) -> None:
        self.pages = 0
        self.fragments = 0
        self.surrogate_pages = 0
        self.failures: list[str] = []

    def fail(self, what: str) -> None:
        if len(self.failures) < 30:
            print("DIFF", what[:2000], file=sys.stderr)
        self.failures.append(what)


async def text_of(session: ClientSession, args: dict) -> tuple[bool, str]:
    result = await session.call_tool("read_session_lines", args)
    return bool(result.isError), result.content[0].text


async def walk(ours, theirs, args: dict, lines: list[str], diff: Diff, what: str) -> None:
    cursor = None
    records: list[dict] = []
    for _ in range(10_000):
        call = dict(args) if cursor is None else dict(args, cursor=cursor)
        (oe, o), (te, t) = await text_of(ours, call), await text_of(theirs, call)
        diff.pages += 1
        if (oe, o) != (te, t) and (oe, o) == (te, without_lone_surrogates(t)):
            diff.surrogate_pages += 1
            t = o
        if (oe, o) != (te, t):
            diff.fail(f"{what} cursor={cursor}\n ours   {oe} {o[:600]}\n theirs {te} {t[:600]}")
            return
        if oe:
            return
        if len(o.encode()) > PAGE_BYTES:
            diff.fail(f"{what} cursor={cursor}: page of {len(o.encode())} bytes")
        page = json.loads(o)
        if "errors" in page:
            return
        records.extend(page["records"])
        diff.fragments += sum(1 for r in page["records"] if "record_format" in r)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    # Fragments rebuild their records.
    open_line, parts = None, []
    for r in records:
        if "record_format" not in r:
            continue
        if r["offset"] == 0:
            open_line, parts = r["line"], []
        if open_line != r["line"] or sum(len(p) for p in parts) != r["offset"]:
            diff.fail(f"{what}: fragment of line {r['line']} at {r['offset']} out of order")
            return
        parts.append(r["content"])
        whole = "".join(parts)
        if len(whole) == r["total_chars"]:
            if r["record_format"] == "raw_line":
                if whole != lines[r["line"] - 1]:
                    diff.fail(f"{what}: raw fragments of line {r['line']} do not rebuild it")
            elif json.loads(whole).get("line") != r["line"]:
                diff.fail(f"{what}: compact fragments of line {r['line']} do not rebuild a record")


async def compare(ws: Path, binary: Path, reference_python: Path, diff: Diff) -> None:
    env = {"PROMPT_DIARY_WORKSPACE": str(ws)}
    params = [StdioServerParameters(command=str(binary), args=["serve"], env=env),
              StdioServerParameters(command=str(reference_python), args=["-c", REFERENCE_SERVER], env=env)]
    async with AsyncExitStack() as stack:
        sessions = []
        for p in params:
            read, write = await stack.enter_async_context(stdio_client(p, errlog=subprocess.DEVNULL))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)
        ours, theirs = sessions
        tools = [await s.list_tools() for s in sessions]
        schemas = [{t.name: t.inputSchema for t in ts.tools}["read_session_lines"] for ts in tools]
        if schemas[0] != schemas[1]:
            diff.fail(f"read_session_lines inputSchema differs:\n {schemas[0]}\n {schemas[1]}")
        for index in sorted(ws.glob("projects/*/sessions.index.jsonl")):
            project = index.parent.name
            for row in (json.loads(l) for l in index.read_text().splitlines() if l.strip()):
                path = index.parent / row["session_path"]
                if not path.is_file():
                    continue
                lines = path.read_bytes().decode("utf-8", "replace").splitlines()
                n = len(lines)
                if n == 0:
                    continue
                base = {"project_key": project, "session_ref": row["session_ref"]}
                ranges = {(1, n)}
                ranges |= {(t["turn_start_line"], t["turn_end_line"]) for t in row["turns"]}
                ranges |= {(s, min(n, s + 6)) for s in range(1, n + 1, 3)}
                ranges |= {(s, s) for s in range(1, n + 1)}
                ranges |= {(max(1, n - 5), n)}
                for mode in ("compact", "full"):
                    for start, end in sorted(ranges):
                        args = dict(base, start_line=start, end_line=end, mode=mode)
                        await walk(ours, theirs, args, lines, diff, f"{project}/{row['session_ref']} {start}-{end} {mode}")
                    # Cursor errors and malformed cursors.
                    for cursor in ({"line": 0}, {"line": n + 1}, {"line": 1, "offset": -1}, {"line": n, "offset": 10**7},
                                   {"line": 1, "offset": 1}, {"line": "x"}, "bad", {"offset": 2}, None):
                        args = dict(base, start_line=1, end_line=n, mode=mode, cursor=cursor)
                        (oe, o), (te, t) = await text_of(ours, args), await text_of(theirs, args)
                        if (oe, o) != (te, t) and (oe, o) != (te, without_lone_surrogates(t)) and not (oe and te):
                            diff.fail(f"cursor {cursor} {mode}:\n ours   {oe} {o[:400]}\n theirs {te} {t[:400]}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=str(ROOT / "target/debug/evidence-store"))
    parser.add_argument("--reference-python", default=sys.executable)
    parser.add_argument("--seeds", default="1,2")
    args = parser.parse_args()
    diff = Diff()
    for seed in [int(s) for s in args.seeds.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp) / "ws"
            subprocess.run([sys.executable, str(ROOT / "tools/gen_workspace.py"), "--out", str(ws), "--seed", str(seed),
                            "--edge-cases", "--projects", "2", "--sessions", "2", "--turns", "4"],
                           check=True, stdout=subprocess.DEVNULL)
            to_schema_7(ws)
            add_long_lines(ws)
            asyncio.run(compare(ws, Path(args.bin), Path(args.reference_python), diff))
    print(f"{diff.pages} pages compared ({diff.fragments} fragments; {diff.surrogate_pages} pages equal "
          f"but for lone surrogates), {len(diff.failures)} differences")
    return 1 if diff.failures else 0


if __name__ == "__main__":
    sys.exit(main())
