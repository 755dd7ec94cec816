#!/usr/bin/env python3
"""Is `serve` free while CPU-heavy work runs? Latencies with work in flight.

Two scenarios, each on its own `serve`:
- `greps`: a loopback model endpoint answers every chat request with ten costly `Grep`
  calls over a multi-MB handle (a careless model), and two `tool_output(mode=read-grep)`
  calls run them;
- `read`: a `read_session_lines` full-mode read of about 200 MB is in flight.

For each it measures: how long a `prompt_diary_ping` sent 1 s into the work takes to be
answered; how long after cancelling the work a ping is answered (cancel to free); how long
`serve` takes to exit once stdin closes with the work in flight (end of input to exit);
and, for `greps`, how far past its deadline a call with a short deadline answers.

Every wait is bounded; every process started is ended.

Usage: tools/.venv/bin/python tools/attack/offload.py --bin target/release/evidence-store [--only greps|read]
       (--smoke: a tenth of the grep handle, a 64th of the read, CI's quick run)
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Raw, arguments, cli, make_workspace, parse  # noqa: E402

# Thousands of NFA states live at every byte; non-ASCII text keeps the lazy DFA out.
COSTLY = r"\b.{0,1000}\b[0-9]{40}"
PROJECT_SESSION = "S0900"
SEEN = {"chat": 0}
LOCK = threading.Lock()


class Greps(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    target = ""

    def log_message(self, *a):  # quiet
        pass

    def do_GET(self):
        self._send(404, b"{}")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        if not self.path.endswith("/chat/completions"):
            return self._send(404, b"{}")
        with LOCK:
            SEEN["chat"] += 1
        calls = [{"id": f"c{i}", "type": "function",
                  "function": {"name": "Grep", "arguments": json.dumps({"file": Greps.target, "pattern": COSTLY})}}
                 for i in range(10)]
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": calls}}]})
        self._send(200, body.encode())

    def _send(self, code: int, body: bytes):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def add_session(ws: Path, outputs: list[str]) -> int:
    """Adds session S0900 to the first project: a Bash call and its result per output.
    Returns its line count."""
    project = sorted(p.name for p in (ws / "projects").iterdir())[0]
    path = ws / "projects" / project / "sessions" / "claude-code" / "offload.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i, out in enumerate(outputs):
            use = {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"make {i}"}}]}}
            res = {"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": out}]}}
            f.write(json.dumps(use) + "\n" + json.dumps(res, ensure_ascii=False) + "\n")
    last = 2 * len(outputs)
    index = ws / "projects" / project / "sessions.index.jsonl"
    row = {"session_ref": PROJECT_SESSION, "source": "claude-code", "source_session_id": "offload",
           "session_path": "sessions/claude-code/offload.jsonl", "subagent_path": "",
           "target_start_line": 1, "target_end_line": last,
           "turns": [{"target_subagents": [], "turn_end_line": last, "turn_ref": "T0001", "turn_start_line": 1}]}
    with open(index, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    return last


def log_text(size: int) -> str:
    out, n, i = [], 0, 0
    while n < size:
        s = (f"2026-01-15T10:{i // 60 % 60:02}:{i % 60:02} INFO worker-{i % 7} handled request {i} "
             f"for café user-{i % 250} in {i * 31 % 1000} ms" + ("\n" if i % 50 == 49 else " "))
        out.append(s)
        n += len(s.encode())
        i += 1
    return "".join(out)


def project_of(ws: Path) -> str:
    return sorted(p.name for p in (ws / "projects").iterdir())[0]


SMOKE = False  # --smoke: smaller handle and read (the same steps)


def greps(binary: Path, work: Path) -> list[str]:
    ws = make_workspace(work / "ws-greps", 2, projects=1, sessions=1, turns=2)
    add_session(ws, [log_text(660_000 if SMOKE else 6_600_000)])
    done = cli(binary, ws, "import", timeout=600)
    assert done.returncode == 0, done.stderr
    listed = json.loads(cli(binary, ws, "dump", "handles", project_of(ws), PROJECT_SESSION, "--json").stdout)
    handle = next(h["handle"] for h in listed if h["kind"] == "tool_result")
    Greps.target = handle
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Greps)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    env = {"EVIDENCE_STORE_MODEL_URL": url, "EVIDENCE_STORE_MODEL": "m", "EVIDENCE_STORE_MODEL_TIMEOUT_SECS": "10"}
    args = {"handle": handle, "extract": "errors", "mode": "read-grep"}
    fails: list[str] = []
    rows = []
    try:
        # Ping, then cancel to free, with the deadline far away.
        raw = Raw(binary, ws, env={**env, "EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS": "120"})
        raw.initialize()
        ids = [raw.request("tools/call", {"name": "tool_output", "arguments": args}) for _ in range(2)]
        time.sleep(1)
        t = time.time()
        ping = raw.call("tools/call", {"name": "prompt_diary_ping", "arguments": {}}, timeout=120)
        rows.append(("ping with two read-grep calls searching", time.time() - t, ping is not None))
        for rid in ids:
            raw.cancel(rid, "test")
        t = time.time()
        ping = raw.call("tools/call", {"name": "prompt_diary_ping", "arguments": {}}, timeout=120)
        rows.append(("cancel both, then a ping: answered after", time.time() - t, ping is not None))
        raw.close(timeout=60)
        # End of input with two calls searching.
        raw = Raw(binary, ws, env={**env, "EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS": "120"})
        raw.initialize()
        for _ in range(2):
            raw.request("tools/call", {"name": "tool_output", "arguments": args})
        time.sleep(1)
        t = time.time()
        code = raw.close(timeout=120)
        rows.append((f"stdin closed 1 s into two calls: exit {code} after", time.time() - t, code is not None))
        # The deadline: 3 s (1 s under --smoke).
        deadline = 1 if SMOKE else 3
        raw = Raw(binary, ws, env={**env, "EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS": str(deadline)})
        raw.initialize()
        t = time.time()
        got = raw.tool("tool_output", args, timeout=120)
        took = time.time() - t
        said = bool(got and f"deadline of {deadline} s reached" in got[1])
        rows.append((f"one call, deadline {deadline} s: answered after", took, said))
        raw.close(timeout=60)
    finally:
        srv.shutdown()
    for what, secs, ok in rows:
        print(f"  [greps] {what} {secs:.2f} s{'' if ok else ' (NOT ANSWERED AS EXPECTED)'}", flush=True)
        if not ok:
            fails.append(f"greps: {what}")
    return fails


def read(binary: Path, work: Path) -> list[str]:
    ws = make_workspace(work / "ws-read", 2, projects=1, sessions=1, turns=2)
    # 50 results of 4 MB: a full read of its 100 lines (the most one read may ask for) is
    # about 200 MB of JSON.
    line = "y" * ((64 << 10) if SMOKE else (4 << 20))
    last = add_session(ws, [line] * 50)
    done = cli(binary, ws, "import", timeout=600)
    assert done.returncode == 0, done.stderr
    req = {"name": "read_session_lines", "arguments": {"project_key": project_of(ws), "session_ref": PROJECT_SESSION,
                                                       "start_line": 1, "end_line": last, "mode": "full"}}
    rows = []
    raw = Raw(binary, ws)
    raw.initialize()
    t = time.time()
    rid = raw.request("tools/call", req)
    got = raw.wait(rid, timeout=300)
    size = len(json.dumps(got)) if got else 0
    rows.append((f"the whole read alone ({size >> 20} MB) took", time.time() - t, size > 50 * len(line)))
    rid = raw.request("tools/call", req)
    time.sleep(0.3)
    t = time.time()
    ping = raw.call("tools/call", {"name": "prompt_diary_ping", "arguments": {}}, timeout=300)
    rows.append(("ping 0.3 s into a read: answered after", time.time() - t, ping is not None))
    raw.wait(rid, timeout=300)
    rid = raw.request("tools/call", req)
    time.sleep(0.3)
    raw.cancel(rid, "test")
    t = time.time()
    ping = raw.call("tools/call", {"name": "prompt_diary_ping", "arguments": {}}, timeout=300)
    rows.append(("cancel 0.3 s into a read, then a ping: answered after", time.time() - t, ping is not None))
    raw.close(timeout=60)
    raw = Raw(binary, ws)
    raw.initialize()
    raw.request("tools/call", req)
    time.sleep(0.3)
    t = time.time()
    code = raw.close(timeout=120)
    rows.append((f"stdin closed 0.3 s into a read: exit {code} after", time.time() - t, code is not None))
    fails = []
    for what, secs, ok in rows:
        print(f"  [read] {what} {secs:.2f} s{'' if ok else ' (NOT ANSWERED)'}", flush=True)
        if not ok:
            fails.append(f"read: {what}")
    return fails


def main() -> int:
    parser = arguments(__doc__, "evidence-store-offload")
    parser.add_argument("--only", action="append", default=[])
    args = parse(parser)
    global SMOKE
    SMOKE = args.smoke
    binary = args.bin.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    fails: list[str] = []
    if not args.only or "greps" in args.only:
        fails += greps(binary, args.work)
    if not args.only or "read" in args.only:
        fails += read(binary, args.work)
    for f in fails:
        print(f"FAIL {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
