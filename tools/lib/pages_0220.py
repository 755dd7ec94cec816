#!/usr/bin/env python3
"""Page-walk differential: evidence-store against prompt-diary 0.2.20's server.

Generated workspaces (tools/lib/gen_workspace.py --edge-cases) are turned into schema-7
workspaces by hand (metadata schema_version 7, index rows without the subagent fields,
which is what 0.2.20's prepare writes), and a Claude session gets lines long enough to be
cut into fragments in both modes. Both servers are driven over stdio by the MCP client.
For every session, ranges (the whole session, each turn, sliding windows, single lines)
are walked in both modes with next_cursor until null; every page's text must be
byte-identical, every page at most 32,768 UTF-8 bytes, and the fragments of each record
must rebuild it exactly (a compact record's JSON parses; a raw line equals the line).
Cursor errors are compared too.

Usage: tools/.venv-0.2.20/bin/python tools/lib/pages_0220.py --bin target/debug/evidence-store
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cargo_target  # noqa: E402
import gen_workspace  # noqa: E402
import handles  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_SERVER = ("import logging; logging.disable(logging.CRITICAL); "
                    "from prompt_diary.mcp.server import serve_mcp_server; serve_mcp_server()")
PAGE_BYTES = 32 * 1024


def to_schema_7(ws: Path) -> None:
    """The generated workspace relabelled as schema 7, without `previous_context`."""
    gen_workspace.relabel_schema_7(ws, previous_context=False)


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


# A handle member in a page, in a record or inside a fragment's escaped content.
HANDLE_MEMBER = re.compile(r'\\?"handle\\?":\\?"[0-9a-f]{8}-[0-9a-f]{4}-8')
RAW_SURROGATE = re.compile("[\ud800-\udfff]")
LONE_SURROGATE = re.compile(r"(?<!\\)((?:\\\\)*)\\ud[89a-f][0-9a-f]{2}")


def without_lone_surrogates(text: str) -> str:
    """A lone surrogate escape is read as U+FFFD by evidence-store (its strings are UTF-8),
    where Python keeps the surrogate and prints it back as the escape: the one known
    departure, counted apart. Both the escape and a decoded surrogate are replaced."""
    return RAW_SURROGATE.sub("\ufffd", LONE_SURROGATE.sub(lambda m: m.group(1) + "\ufffd", text))


class Diff:
    def __init__(self) -> None:
        self.pages = 0
        self.fragments = 0
        self.surrogate_pages = 0
        self.handle_pages = 0
        self.handles = 0
        self.failures: list[str] = []

    def fail(self, what: str) -> None:
        if len(self.failures) < 30:
            print("DIFF", what[:2000], file=sys.stderr)
        self.failures.append(what)


async def text_of(session: ClientSession, args: dict) -> tuple[bool, str]:
    result = await session.call_tool("read_session_lines", args)
    return bool(result.isError), result.content[0].text


async def pages_of(session: ClientSession, args: dict, diff: Diff, what: str) -> list[tuple[bool, str]]:
    """Every page of a range, following next_cursor until null (or an error answer)."""
    pages: list[tuple[bool, str]] = []
    cursor = None
    for _ in range(10_000):
        call = dict(args) if cursor is None else dict(args, cursor=cursor)
        error, text = await text_of(session, call)
        pages.append((error, text))
        if error:
            break
        page = json.loads(text)
        if "errors" in page:
            break
        cursor = page["next_cursor"]
        if cursor is None:
            break
    else:
        diff.fail(f"{what}: no last page after 10,000")
    return pages


def whole_records(pages: list[tuple[bool, str]], lines: list[str], diff: Diff, what: str) -> list[dict]:
    """The records of a walk, each fragmented record rebuilt (and checked to rebuild)."""
    out: list[dict] = []
    open_line, parts, partial = None, [], False
    for error, text in pages:
        page = {} if error else json.loads(text)
        for r in page.get("records", []):
            if "record_format" not in r:
                out.append(r)
                continue
            diff.fragments += 1
            if r["offset"] == 0:
                open_line, parts = r["line"], []
            elif open_line is None and not out:
                # A walk that started inside this record (a cursor with an offset): the
                # part before the offset stands in as placeholders, and is not checked.
                open_line, parts, partial = r["line"], ["\0" * r["offset"]], True
            if open_line != r["line"] or sum(len(p) for p in parts) != r["offset"]:
                diff.fail(f"{what}: fragment of line {r['line']} at {r['offset']} out of order")
                return out
            parts.append(r["content"])
            whole = "".join(parts)
            if len(whole) == r["total_chars"] and partial:
                out.append({"partial_line": r["line"], "content": whole.lstrip("\0")})
                partial = False
            elif len(whole) == r["total_chars"]:
                if r["record_format"] == "raw_line":
                    if whole != lines[r["line"] - 1]:
                        diff.fail(f"{what}: raw fragments of line {r['line']} do not rebuild it")
                    out.append({"raw_line": r["line"], "content": whole})
                else:
                    record = json.loads(whole)
                    if record.get("line") != r["line"]:
                        diff.fail(f"{what}: compact fragments of line {r['line']} do not rebuild a record")
                    out.append(record)
    return out


async def walk(ours, theirs, args: dict, lines: list[str], diff: Diff, what: str) -> None:
    """Walks a range on both servers. Pages must be byte-identical up to the first of ours
    holding a tool-output handle (one more member per cut tool entry, which moves later
    page boundaries); after it, the records the pages rebuild must be equal without the
    handles. Every page of ours is at most 32 KiB."""
    o_pages = await pages_of(ours, args, diff, what)
    t_pages = await pages_of(theirs, args, diff, what)
    handled = False
    for i, ((oe, o), (te, t)) in enumerate(zip(o_pages, t_pages)):
        if not oe and HANDLE_MEMBER.search(o):
            handled = True
            diff.handle_pages += 1
            break
        diff.pages += 1
        if (oe, o) != (te, t) and (oe, o) == (te, without_lone_surrogates(t)):
            diff.surrogate_pages += 1
            continue
        if (oe, o) != (te, t):
            diff.fail(f"{what} page {i}\n ours   {oe} {o[:600]}\n theirs {te} {t[:600]}")
            return
    if not handled and len(o_pages) != len(t_pages):
        diff.fail(f"{what}: {len(o_pages)} pages, prompt-diary {len(t_pages)}")
        return
    for oe, o in o_pages:
        if not oe and len(o.encode()) > PAGE_BYTES:
            diff.fail(f"{what}: page of {len(o.encode())} bytes")
    ours_records = whole_records(o_pages, lines, diff, what)
    theirs_records = whole_records(t_pages, lines, Diff(), what)
    for record in ours_records:
        _, found = handles.strip_sparse(record)
        diff.handles += len(found)
    if handled and len(ours_records) != len(theirs_records):
        diff.fail(f"{what}: {len(ours_records)} records, prompt-diary {len(theirs_records)}")
    elif handled:
        for o, t in zip(ours_records, theirs_records):
            mine = json.dumps(o, ensure_ascii=False, sort_keys=True)
            theirs_text = json.dumps(t, ensure_ascii=False, sort_keys=True)
            if mine != theirs_text and mine != without_lone_surrogates(theirs_text):
                diff.fail(f"{what}: records differ beside handles\n ours   {mine[:1500]}\n theirs {theirs_text[:1500]}")
                return


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
                                   {"line": 1, "offset": 1}, {"line": "x"}, "bad", {"offset": 2}, None, [1],
                                   {"line": 1.5}, {"line": None}, {"line": True}, {"line": "é" * 60},
                                   {"offset": "y" * 80, "z": [1, 2, 3]}):
                        # An accepted cursor starts a walk; a refused one is one answer.
                        args = dict(base, start_line=1, end_line=n, mode=mode, cursor=cursor)
                        await walk(ours, theirs, args, lines, diff, f"cursor {cursor} {mode}")
                # Argument errors, worded as 0.2.20's server (with pydantic's detail) words them.
                for args in (dict(base, start_line="x", end_line=[1] * 40), {"session_ref": 5, "extra": {"a": None}},
                             dict(base, start_line=1, end_line=1, mode="zzz"), dict(base, start_line=1.5, end_line=True)):
                    (oe, o), (te, t) = await text_of(ours, args), await text_of(theirs, args)
                    if (oe, o) != (te, t):
                        diff.fail(f"arguments {args}:\n ours   {oe} {o[:600]}\n theirs {te} {t[:600]}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=str(cargo_target.binary("debug")))
    parser.add_argument("--reference-python", default=sys.executable)
    parser.add_argument("--seeds", default="1,2")
    args = parser.parse_args()
    diff = Diff()
    for seed in [int(s) for s in args.seeds.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp) / "ws"
            subprocess.run([sys.executable, str(ROOT / "tools/lib/gen_workspace.py"), "--out", str(ws), "--seed", str(seed),
                            "--edge-cases", "--projects", "2", "--sessions", "2", "--turns", "4"],
                           check=True, stdout=subprocess.DEVNULL)
            to_schema_7(ws)
            add_long_lines(ws)
            asyncio.run(compare(ws, Path(args.bin), Path(args.reference_python), diff))
    print(f"{diff.pages} pages compared ({diff.fragments} fragments; {diff.surrogate_pages} pages equal "
          f"but for lone surrogates); {diff.handle_pages} walks compared as records from their first page "
          f"with a handle ({diff.handles} handles checked); {len(diff.failures)} differences")
    return 1 if diff.failures else 0


if __name__ == "__main__":
    sys.exit(main())
