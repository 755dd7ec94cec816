#!/usr/bin/env python3
"""Pipelined floods that never stop: does `serve` stay bounded in memory and threads?

A writer thread sends requests as fast as the server takes them, for --seconds; a reader
thread drains every answer. Every --every seconds the server's RSS, peak RSS and thread
count are printed. Kinds of flood (--kind):

  read      read_session_lines (full mode, 100 lines; on a 0.2.20 workspace one page)
  cancel    the same, each request followed at once by notifications/cancelled for it
            (a client timing out every call): the cancel gives the request's slot back
  handle    tool_output_read of one handle, the whole payload
  handle-cancel  the same with a cancel after each request
  garbage   random bytes, truncated frames, invalid UTF-8, bad cursors, forged handles

Fails (exit 1) when the peak RSS passes --limit-mb, the server dies, or (after the
flood, input closed) a request that was not cancelled got no answer.

Usage: tools/.venv/bin/python tools/attack/flood.py --ws DIR --kind cancel [--seconds 60]
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Raw, arguments, cli, indexes, parse, rss_mb, schema_of, threads  # noqa: E402


def biggest_handle(binary: Path, ws: Path) -> str | None:
    """The handle of the largest trimmed tool output in `ws` (from `dump handles`)."""
    best: tuple[int, str] | None = None
    for project, rows in indexes(ws).items():
        for row in rows:
            out = cli(binary, ws, "dump", "handles", project, row["session_ref"]).stdout
            for m in re.finditer(r" ([0-9a-f-]{36})  (\d+) bytes", out):
                if best is None or int(m.group(2)) > best[0]:
                    best = (int(m.group(2)), m.group(1))
    return best[1] if best else None


def find_handle(raw: Raw, ws: Path) -> tuple[str, dict] | None:
    """A handle from a compact read of some session, with the read's arguments."""
    for project, rows in indexes(ws).items():
        for row in rows:
            args = {"project_key": project, "session_ref": row["session_ref"], "start_line": row["target_start_line"],
                    "end_line": row["target_end_line"]}
            cursor = None
            for _ in range(50):
                a = dict(args, cursor=cursor) if cursor else args
                got = raw.tool("read_session_lines", a)
                if not got or got[0]:
                    break
                found = re.search(r'"handle": ?"([0-9a-f-]{36})"', got[1])
                if found:
                    return found.group(1), args
                try:
                    cursor = json.loads(got[1]).get("next_cursor")
                except ValueError:
                    cursor = None
                if not cursor:
                    break
    return None


def main() -> int:
    parser = arguments(__doc__, None, seconds=60.0)
    parser.add_argument("--ws", type=Path, required=True)
    parser.add_argument("--kind", choices=["read", "cancel", "handle", "handle-cancel", "garbage"], default="read")
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--limit-mb", type=int, default=1024)
    args = parse(parser, seconds=1.0, every=1.0)

    raw = Raw(args.bin, args.ws)
    raw.initialize()
    schema = schema_of(args.ws)
    project, rows = next(iter(indexes(args.ws).items()))
    row = max(rows, key=lambda r: r["target_end_line"])
    end = row["target_end_line"]
    handle = None
    if args.kind.startswith("handle"):
        handle = biggest_handle(args.bin, args.ws)
        if not handle:
            print("no handle in this workspace")
            return 1
        print(f"handle {handle}")

    def params(i: int) -> dict:
        if handle:
            return {"name": "tool_output_read", "arguments": {"handle": handle, "start_line": 1, "end_line": 100000}}
        start = 1 + (i * 37) % max(1, end - 100)
        a = {"project_key": project, "session_ref": row["session_ref"], "start_line": start,
             "end_line": min(end, start + 99), "mode": "full"}
        return {"name": "read_session_lines", "arguments": a}

    stop = threading.Event()
    sent: list[int] = [0]
    cancelled: set[str] = set()
    rng = random.Random(5)

    def garbage(i: int) -> bytes:
        k = i % 8
        if k == 0:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))).replace(b"\n", b"") + b"\n"
        if k == 1:
            return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params(i)})[:40].encode() + b"\n"
        if k == 2:
            return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_session_lines","arguments":{"project_key":"\xff\xfe"}}}\n' % i
        if k == 3:
            c = rng.choice([{"line": -1}, {"line": 2**63}, {"line": 10**30}, {"line": "x"}, {"line": 1, "offset": -5},
                            {"line": 1, "offset": 2**62}, {"line": 1.5}, [], "cursor", {"offset": 1}])
            a = dict(params(i)["arguments"], cursor=c)
            return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                               "params": {"name": "read_session_lines", "arguments": a}}).encode() + b"\n"
        if k == 4:
            h = "%08x-%04x-8%03x-%04x-%012x" % (rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(12),
                                                0x8000 | rng.getrandbits(14), rng.getrandbits(48))
            return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "name": "tool_output_read", "arguments": {"handle": h, "start_line": 1, "end_line": 10}}}).encode() + b"\n"
        if k == 5:
            return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":' % i + b"[" * 5000 + b"\n"
        if k == 6:
            return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "name": "tool_output_grep", "arguments": {"handle": "../../etc/passwd", "pattern": "(a+)+$"}}}).encode() + b"\n"
        return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params(i)}).encode() + b"\n"

    def writer() -> None:
        i = 0
        try:
            while not stop.is_set():
                i += 1
                if args.kind == "garbage":
                    raw.send_bytes(garbage(i))
                else:
                    raw.send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params(i)})
                    if args.kind.endswith("cancel"):
                        raw.cancel(i, "timeout")
                        cancelled.add(json.dumps(i))
                sent[0] = i
        except (BrokenPipeError, OSError):
            pass

    t = threading.Thread(target=writer, daemon=True)
    started = time.time()
    t.start()
    peak = 0
    failed = False
    print(f"schema {schema}, kind {args.kind}, pid {raw.proc.pid}")
    while time.time() - started < args.seconds:
        time.sleep(args.every)
        rss, hwm = rss_mb(raw.proc.pid)
        peak = max(peak, hwm)
        print(f"t={time.time() - started:5.0f}s sent={sent[0]:7d} answered={len(raw.answers):7d} "
              f"rss={rss}MB peak={hwm}MB threads={threads(raw.proc.pid)}", flush=True)
        if raw.proc.poll() is not None:
            print(f"server exited with {raw.proc.returncode}")
            failed = True
            break
        if hwm > args.limit_mb:
            print(f"peak RSS {hwm} MB passed the limit {args.limit_mb} MB")
            failed = True
            break
    stop.set()
    t.join(5)
    code = raw.close(120)
    total = sent[0]
    missing = [i for i in range(1, total + 1)
               if json.dumps(i) not in raw.answers and json.dumps(i) not in cancelled]
    if args.kind == "garbage":
        # Lines without a recoverable id are answered with id null; count those too.
        missing = []
    print(f"exit {code}; {total} sent, {len(raw.answers)} answered, {len(missing)} unanswered (not cancelled), "
          f"{len(raw.torn)} torn lines, {len(raw.duplicates)} duplicate answers, peak RSS {peak} MB")
    if missing:
        print(f"first unanswered: {missing[:5]}")
    if failed or missing or raw.torn or raw.duplicates or code not in (0,):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
