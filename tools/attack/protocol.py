#!/usr/bin/env python3
"""Hostile frames, one at a time: each gets the answers JSON-RPC owes it (one for a line
with a usable id or none, none for a notification), never a torn line, and the server
still answers a `ping` after it.

Cases: random bytes, truncated frames, invalid UTF-8 in strings and keys, a line of
20 MiB, deep nesting, ids of every type, duplicate in-flight ids, requests before
`initialize`, a second `initialize`, responses to nothing, bogus 0.2.20 cursors, forged
handles, huge and traversing string arguments.

Usage: tools/.venv/bin/python tools/attack/protocol.py --ws DIR [--bin B]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Raw, arguments, indexes, parse, schema_of, verdict  # noqa: E402


def owner_id(frame: bytes) -> object:
    """The id an answer to `frame` must carry: a request's string or 64-bit integer id;
    None when the frame has no single usable one (then any answer, id null included, will
    do)."""
    def unique(pairs: list) -> dict:
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError("duplicate key")
        return dict(pairs)
    try:
        msg = json.loads(frame, object_pairs_hook=unique)
    except (ValueError, RecursionError):
        return None
    if not isinstance(msg, dict) or "method" not in msg:
        return None
    rid = msg.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        return None
    # An integer id beyond 64 bits signed is refused as unusable (answered with id null).
    return rid if isinstance(rid, str) or -(2**63) <= rid < 2**63 else None


def main() -> int:
    parser = arguments(__doc__, None)
    parser.add_argument("--ws", type=Path, required=True)
    args = parse(parser)
    schema = schema_of(args.ws)
    project, rows = next(iter(indexes(args.ws).items()))
    row = rows[0]
    base = {"project_key": project, "session_ref": row["session_ref"], "start_line": row["target_start_line"],
            "end_line": row["target_end_line"]}
    failures: list[str] = []

    # Before initialize: a request must still be answered (or the process exit non-zero).
    raw = Raw(args.bin, args.ws)
    raw.send({"jsonrpc": "2.0", "id": "early", "method": "tools/list"})
    got = raw.wait("early", 10)
    alive = raw.proc.poll() is None
    print(f"request before initialize: answer={json.dumps(got)[:160]} alive={alive}")
    if got is None and (alive or raw.proc.returncode == 0):
        failures.append("a request before initialize got no answer and the server did not exit non-zero")
    raw.close(10)

    raw = Raw(args.bin, args.ws)
    raw.initialize()

    counter = [0]

    def call(name: str, arguments: object) -> bytes:
        counter[0] += 1
        return json.dumps({"jsonrpc": "2.0", "id": f"c{counter[0]}", "method": "tools/call",
                           "params": {"name": name, "arguments": arguments}}).encode()

    read = "read_session_lines"
    cursor_cases = [{"line": -1}, {"line": 0}, {"line": 2**31}, {"line": 2**63 - 1}, {"line": 2**63}, {"line": 10**40},
                    {"line": "3"}, {"line": "x"}, {"line": 1.0}, {"line": 1.5}, {"line": None}, {"line": True},
                    {"line": row["target_start_line"], "offset": -1},
                    {"line": row["target_start_line"], "offset": 2**40},
                    {"line": row["target_start_line"], "offset": 2**63 - 1},
                    {"line": row["target_start_line"], "offset": "0"}, {"line": row["target_end_line"] + 1},
                    {"offset": 0}, {}, [], "abc", 7, None, {"line": row["target_start_line"], "extra": 1}]
    cases: list[tuple[str, bytes, int]] = [
        ("blank", b"   ", 0),
        ("random bytes", bytes(range(1, 10)) + bytes(range(11, 256)), 1),
        ("truncated object", b'{"jsonrpc":"2.0","id":5,"method":"tools/c', 1),
        ("truncated string id", b'{"jsonrpc":"2.0","id":"ab', 1),
        ("invalid utf-8 in value", b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_session_lines","arguments":{"project_key":"\xff\xfe"}}}', 1),
        ("invalid utf-8 in key", b'{"jsonrpc":"2.0","id":7,"method":"ping","\xc3\x28":1}', 1),
        ("overlong utf-8", b'{"jsonrpc":"2.0","id":8,"method":"\xc0\xafping"}', 1),
        ("lone surrogate", b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_session_lines","arguments":{"project_key":"\\ud800"}}}', 1),
        ("NaN", b'{"jsonrpc":"2.0","id":10,"method":"ping","params":{"x":NaN}}', 1),
        ("huge number", b'{"jsonrpc":"2.0","id":11,"method":"ping","params":{"x":1e999}}', 1),
        ("id float", b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', 1),
        ("id object", b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', 1),
        ("id null", b'{"jsonrpc":"2.0","id":null,"method":"ping"}', 1),
        ("id u64", b'{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}', 1),
        ("id negative", b'{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}', 1),
        ("two ids", b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', 1),
        ("no jsonrpc", b'{"id":12,"method":"ping"}', 1),
        ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":13,"method":"ping"}', 1),
        ("method number", b'{"jsonrpc":"2.0","id":14,"method":5}', 1),
        ("unknown method", b'{"jsonrpc":"2.0","id":15,"method":"no/such"}', 1),
        ("params array", b'{"jsonrpc":"2.0","id":16,"method":"tools/call","params":[1,2]}', 1),
        ("array batch", b'[{"jsonrpc":"2.0","id":17,"method":"ping"}]', 1),
        ("empty array", b"[]", 1),
        ("string", b'"hello"', 1),
        ("deep nesting", b'{"jsonrpc":"2.0","id":18,"method":"ping","params":{"a":' + b"[" * 200000 + b"]" * 200000 + b"}}", 1),
        ("deep unclosed", b'{"jsonrpc":"2.0","id":19,"method":"ping","params":' + b"{\"a\":" * 100000, 1),
        ("response to nothing", b'{"jsonrpc":"2.0","id":"nothing","result":{}}', 0),
        ("error response to nothing", b'{"jsonrpc":"2.0","id":"nothing2","error":{"code":1,"message":"x"}}', 0),
        ("notification unknown", b'{"jsonrpc":"2.0","method":"notifications/whatever","params":{"x":1}}', 0),
        ("cancel unknown id", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"zzz"}}', 0),
        ("second initialize", json.dumps({"jsonrpc": "2.0", "id": 20, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}}).encode(), 1),
        ("tool unknown", call("no_such_tool", {}), 1),
        ("arguments not object", call(read, [1, 2]), 1),
        ("arguments string", call(read, "x"), 1),
        ("project traversal", call(read, dict(base, project_key="../../..")), 1),
        ("session traversal", call(read, dict(base, session_ref="../" + row["session_ref"])), 1),
        ("session absolute", call(read, dict(base, session_ref="/etc/passwd")), 1),
        ("session NUL", call(read, dict(base, session_ref=row["session_ref"] + "\u0000")), 1),
        ("project 1 MiB", call(read, dict(base, project_key="P" * (1 << 20))), 1),
        ("lines huge", call(read, dict(base, start_line=1, end_line=2**63 - 1)), 1),
        ("lines negative", call(read, dict(base, start_line=-(2**63), end_line=-1)), 1),
        ("mode bogus", call(read, dict(base, mode="FULL")), 1),
        ("citations traversal", call("read_agent_citations", {"project_key": "..", "session_ref": "../../etc"}), 1),
        ("search huge limit", call("search_agent_citations", {"query": "", "limit": 2**62}), 1),
        ("search regexy", call("search_agent_citations", {"query": "(" * 5000, "type": "file"}), 1),
    ]
    for c in cursor_cases:
        cases.append((f"cursor {json.dumps(c)[:40]}", call(read, dict(base, cursor=c)), 1))
    big = b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"' + b"a" * (20 << 20) + b'"}}'
    cases.append(("20 MiB line", big, 1))
    cases.append(("20 MiB line without newline then a ping", b"x" * (17 << 20), 1))

    for name, frame, owed in cases:
        before = len(raw.lines)
        started = time.time()
        try:
            raw.send_bytes(frame + b"\n")
        except (BrokenPipeError, OSError):
            failures.append(f"{name}: the server closed its input")
            break
        # The server answers requests concurrently, so a ping sent now could be answered
        # before this frame is: wait for the answers owed first. A late answer beyond
        # them still shows, in this case's count or the next one's.
        raw.wait_lines(before + owed, 60)
        marker = raw.request("ping")
        got = raw.wait(marker, 60)
        took = time.time() - started
        if got is None:
            failures.append(f"{name}: no answer to the ping after it (alive={raw.proc.poll() is None})")
            print(f"FAIL {name}: server stopped answering")
            break
        with raw.cond:
            after = raw.lines[before:]
        answers = [line for line in after if json.dumps(marker).encode() not in line]
        # Each answer is this frame's own, not a late one of the case before.
        expected = owner_id(frame)
        strangers = [a for a in answers if expected is not None and not a.startswith(
            b'{"jsonrpc":"2.0","id":' + json.dumps(expected, separators=(",", ":")).encode() + b",")]
        if strangers:
            failures.append(f"{name}: an answer that is not to id {expected!r}: {strangers[0][:150]!r}")
        outcome = "ok" if len(answers) == owed and not strangers else "FAIL"
        shown = b" | ".join(a[:150] for a in answers).decode("utf-8", "replace")
        print(f"{outcome} {name} ({took:.2f}s): {len(answers)} answer(s) {shown}")
        if len(answers) != owed:
            failures.append(f"{name}: {len(answers)} answers, owed {owed}")
    # Duplicate in-flight ids: two identical slow requests with one id.
    dup = json.dumps({"jsonrpc": "2.0", "id": "dup", "method": "tools/call",
                      "params": {"name": read, "arguments": dict(base, mode="full")}}).encode() + b"\n"
    before = len(raw.lines)
    raw.send_bytes(dup * 3)
    marker = raw.request("ping")
    raw.wait(marker, 60)
    raw.wait_lines(before + 4, 60)  # the ping's answer and the three owed
    raw.wait(raw.request("ping"), 60)  # one more round trip, for a fourth answer to show
    with raw.cond:
        dups = [line for line in raw.lines[before:] if b'"dup"' in line]
    print(f"same id three times in flight: {len(dups)} answers")
    if len(dups) != 3:
        failures.append(f"three requests with one id got {len(dups)} answers")
    code = raw.close(60)
    print(f"exit {code}; torn lines: {len(raw.torn)}; schema {schema}")
    if raw.torn:
        failures.append(f"torn lines: {raw.torn[:3]}")
    if code != 0:
        failures.append(f"exit code {code}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
