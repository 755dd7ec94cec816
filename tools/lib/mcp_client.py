"""The one raw MCP client of the tool scripts: newline-delimited JSON-RPC over a child's
stdio, with nothing in the way (no SDK), so that a script sees every line the server wrote.

- `Client`: answers are collected by a reader thread; requests may overlap, and a call
  that is never answered gives None after its timeout. For load, protocol and attack
  scripts.
- `Raw`: a `Client` running `BINARY [ARGS] serve` on a workspace, with logging off.
- `LockstepClient`: one request line, then the next answer line for its id, read on the
  calling thread and returned unparsed, so that latency measures the server and not a
  thread hand-off. For latency benchmarks.
- `message`, `notification`, `frame`, `initialize_params`: the JSON-RPC messages the
  clients send, for scripts that must write the pipe themselves (pipelining without
  reading, a shell in front of the binary).

Importable from every tools/ folder (each script puts tools/lib on sys.path). Nothing here
asserts; each script decides what counts as a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = "2025-06-18"


def message(rid: Any, method: str, params: dict | None = None) -> dict:
    """A JSON-RPC request; `params` is left out when None."""
    msg: dict = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: dict | None = None) -> dict:
    msg: dict = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def frame(msg: dict) -> bytes:
    """One message as the line that carries it."""
    return (json.dumps(msg) + "\n").encode()


def initialize_params(client_name: str) -> dict:
    return {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": client_name, "version": "0"}}


INITIALIZED = notification("notifications/initialized")


def tool_call(name: str, arguments: dict) -> dict:
    """The params of a tools/call."""
    return {"name": name, "arguments": arguments}


class Client:
    """A server process over pipes, spoken to in raw lines. Answers are collected by a
    reader thread, keyed by their id as JSON text; `lines` keeps every line the server
    wrote (each cut at 4096 bytes), in order, `torn` the lines that were not JSON, and
    `duplicates` the ids answered more than once."""

    def __init__(self, cmd: list[str], env: dict | None = None, stderr: Any = subprocess.DEVNULL):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                     env={**os.environ, **(env or {})})
        self.lines: list[bytes] = []
        self.answers: dict[Any, dict] = {}
        self.duplicates: list[Any] = []
        self.torn: list[bytes] = []
        self.cond = threading.Condition()
        self.eof = False
        self.next_id = 1000
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line[:4096])
                try:
                    msg = json.loads(line)
                except ValueError:
                    self.torn.append(line[:200])
                    self.cond.notify_all()
                    continue
                self.on_message(msg)
                if isinstance(msg, dict) and "id" in msg and ("result" in msg or "error" in msg):
                    key = json.dumps(msg["id"])
                    if key in self.answers:
                        self.duplicates.append(key)
                    self.answers[key] = msg
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def on_message(self, msg: Any) -> None:
        """Called on the reader thread, holding `cond`, for every JSON line; a subclass
        answers server-to-client requests here."""

    def send_bytes(self, data: bytes) -> None:
        assert self.proc.stdin
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except ValueError as e:  # closed by close() from another thread
            raise BrokenPipeError(str(e)) from e

    def send(self, msg: dict) -> None:
        self.send_bytes(frame(msg))

    def request(self, method: str, params: dict | None = None, rid: Any = None) -> Any:
        """Sends a request without waiting; returns its id (a fresh "rN" unless given)."""
        if rid is None:
            self.next_id += 1
            rid = f"r{self.next_id}"
        self.send(message(rid, method, params))
        return rid

    def cancel(self, rid: Any, reason: str) -> None:
        """notifications/cancelled for the request `rid`."""
        self.send(notification("notifications/cancelled", {"requestId": rid, "reason": reason}))

    def answer(self, rid: Any) -> dict | None:
        """The answer to `rid` if it has come."""
        with self.cond:
            return self.answers.get(json.dumps(rid))

    def wait(self, rid: Any, timeout: float = 60.0) -> dict | None:
        key = json.dumps(rid)
        deadline = time.time() + timeout
        with self.cond:
            while key not in self.answers and not self.eof:
                left = deadline - time.time()
                if left <= 0:
                    return None
                self.cond.wait(left)
            return self.answers.get(key)

    def wait_lines(self, count: int, timeout: float = 60.0) -> bool:
        """Waits until at least `count` lines have come from the server (False on timeout or EOF)."""
        deadline = time.time() + timeout
        with self.cond:
            while len(self.lines) < count and not self.eof:
                left = deadline - time.time()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return len(self.lines) >= count

    def call(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict | None:
        try:
            rid = self.request(method, params)
        except (BrokenPipeError, OSError):
            return None
        return self.wait(rid, timeout)

    def initialize(self, client_name: str = "attack") -> dict | None:
        got = self.call("initialize", initialize_params(client_name))
        self.send(INITIALIZED)
        return got

    def tool(self, name: str, arguments: dict, timeout: float = 120.0) -> tuple[bool, str] | None:
        """(isError, text) of a tools/call, or None when no answer came."""
        got = self.call("tools/call", tool_call(name, arguments), timeout)
        if got is None:
            return None
        if "error" in got:
            return True, json.dumps(got["error"])
        result = got["result"]
        return bool(result.get("isError")), result["content"][0]["text"] if result.get("content") else ""

    def close(self, timeout: float = 30.0) -> int | None:
        """Closes stdin and waits for the exit code; kills after `timeout` (then None)."""
        try:
            assert self.proc.stdin
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


class Raw(Client):
    """`BINARY [ARGS] serve` on the workspace `ws`, with RUST_LOG=off."""

    def __init__(self, binary: Path | str, ws: Path, env: dict | None = None, stderr: Any = subprocess.DEVNULL,
                 args: tuple[str, ...] = ()):
        super().__init__([str(binary), *args, "serve"],
                         {"PROMPT_DIARY_WORKSPACE": str(ws), "RUST_LOG": "off", **(env or {})}, stderr)


class LockstepClient:
    """One request at a time over a child's stdio; each answer is read on the calling
    thread and, by `request_raw`, returned unparsed (what latency measures)."""

    def __init__(self, cmd: list[str], env: dict) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **env})
        self.next_id = 0

    def request(self, method: str, params: dict) -> dict:
        return json.loads(self.request_raw(method, params))

    def request_raw(self, method: str, params: dict) -> bytes:
        """Sends a request and returns its response line unparsed."""
        self.next_id += 1
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(frame(message(self.next_id, method, params)))
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            # Responses start {"jsonrpc":"2.0","id":N,...}: match without parsing the body.
            if f'"id":{self.next_id},'.encode() in line[:64]:
                return line

    def notify(self, method: str) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(frame(notification(method)))
        self.proc.stdin.flush()

    def initialize(self, client_name: str = "bench") -> None:
        self.request("initialize", initialize_params(client_name))
        self.notify("notifications/initialized")

    def close(self) -> None:
        """Terminates the server (a benchmark has no use for its exit)."""
        self.proc.terminate()
        self.proc.wait()

    def finish(self) -> int:
        """Closes stdin and waits for the server to exit on its own."""
        assert self.proc.stdin
        self.proc.stdin.close()
        return self.proc.wait()
