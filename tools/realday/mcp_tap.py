#!/usr/bin/env python3
"""A `report` that records what passes between Codex and the MCP server it starts.

run.sh puts a `report` script first on PATH that runs `mcp_tap.py LOG_DIR "$@"`. For
`report mcp serve` (how Codex starts prompt-diary's MCP server) it starts the next `report` on
PATH (prompt-diary's own, or the one `evidence-store run` links to itself) with the same
arguments and environment, and passes stdin and stdout through line by line, untouched. Any
other `report ...` is handed to the next `report` as it is (exec).

For each server started it writes `LOG_DIR/serve-<pid>.json`: every JSON-RPC request (method,
tool name, seconds until its answer, whether the answer was an error), notifications,
when Codex closed stdin, which signals Codex sent (each is passed on to the server), how
the server ended (exit code or signal), and its protocol errors: a line on its stdout that is
not a JSON-RPC message (not JSON, or not an object), or an answer to an id no request had
(or already answered). The server's stderr goes to
`LOG_DIR/serve-<pid>.stderr` (evidence-store's log; `RUST_LOG` is set to `debug` for it
unless already set, since Codex starts MCP servers with a cleared environment).

Codex waits for the server as it would without the tap: the tap exits when the server has
exited, with its exit code (or the same signal).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def next_report(skip: Path) -> str | None:
    """The first `report` on PATH that is not in the tap's own directory."""
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry:
            continue
        candidate = Path(entry) / "report"
        try:
            if candidate.parent.resolve() == skip.resolve():
                continue
        except OSError:
            continue
        if os.access(candidate, os.X_OK) and candidate.is_file():
            return str(candidate)
    return None


def main() -> int:
    log_dir = Path(sys.argv[1])
    args = sys.argv[2:]
    tap_dir = Path(os.environ.get("REALDAY_TAP_DIR") or log_dir.parent / "bin")
    target = next_report(tap_dir)
    if target is None:
        print("report (realday tap): no other `report` on PATH", file=sys.stderr)
        return 127
    if args[:2] != ["mcp", "serve"]:
        os.execv(target, [target, *args])
    log_dir.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    started = time.time()
    record: dict = {"pid": pid, "argv": args, "target": target, "started": started,
                    "env": sorted(os.environ), "requests": [], "notifications": [], "signals": [],
                    "stdin_closed_at": None, "exit": None, "ended": None, "unanswered": [],
                    "protocol_errors": []}
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "debug")
    stderr = (log_dir / f"serve-{pid}.stderr").open("wb")
    child = subprocess.Popen([target, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                             env=env, bufsize=0)
    pending: dict = {}
    lock = threading.Lock()

    def on_signal(signum: int, _frame: object) -> None:
        with lock:
            record["signals"].append({"signal": signal.Signals(signum).name, "at": time.time() - started})
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    def pump_in() -> None:
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline()
            if not line:
                break
            now = time.time() - started
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and "method" in message:
                entry = {"method": message["method"], "at": now}
                if message["method"] == "tools/call":
                    entry["tool"] = (message.get("params") or {}).get("name")
                with lock:
                    if "id" in message:
                        entry["id"] = message["id"]
                        pending[json.dumps(message["id"])] = entry
                        record["requests"].append(entry)
                    else:
                        record["notifications"].append(entry)
            try:
                child.stdin.write(line)
                child.stdin.flush()
            except (BrokenPipeError, OSError):
                break
        with lock:
            record["stdin_closed_at"] = time.time() - started
        try:
            child.stdin.close()
        except OSError:
            pass

    def pump_out() -> None:
        out = sys.stdout.buffer
        while True:
            line = child.stdout.readline()
            if not line:
                break
            now = round(time.time() - started, 6)
            try:
                message = json.loads(line)
            except ValueError:
                message = None
                with lock:
                    record["protocol_errors"].append({"at": now, "what": "a line that is not JSON",
                                                      "line": line[:200].decode("utf-8", "replace")})
            if message is not None and not isinstance(message, dict):
                with lock:
                    record["protocol_errors"].append({"at": now, "what": "JSON that is not a JSON-RPC message",
                                                      "line": line[:200].decode("utf-8", "replace")})
            if isinstance(message, dict) and "id" in message and "method" not in message:
                with lock:
                    entry = pending.pop(json.dumps(message["id"]), None)
                    if entry is None:
                        record["protocol_errors"].append({"at": now, "what": "an answer to an id no request is waiting on",
                                                          "line": line[:200].decode("utf-8", "replace")})
                    else:
                        entry["seconds"] = round(time.time() - started - entry["at"], 6)
                        if "error" in message:
                            entry["error"] = message["error"]
                        result = message.get("result")
                        if isinstance(result, dict) and result.get("isError"):
                            entry["tool_error"] = True
            try:
                out.write(line)
                out.flush()
            except (BrokenPipeError, OSError):
                break

    reader = threading.Thread(target=pump_in, daemon=True)
    writer = threading.Thread(target=pump_out, daemon=True)
    reader.start()
    writer.start()
    code = child.wait()
    writer.join(timeout=5)
    record["ended"] = time.time() - started
    record["exit"] = {"code": code} if code >= 0 else {"signal": signal.Signals(-code).name}
    record["unanswered"] = sorted(pending)
    stderr.close()
    tmp = log_dir / f"serve-{pid}.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(log_dir / f"serve-{pid}.json")
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main())
