"""Shared pieces of the hostile test scripts: workspaces of both contracts, a raw
line-oriented MCP client that never hides what the server sent, and process measurements.

Nothing here asserts; each script decides what counts as a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
RELEASE = ROOT.parent.parent / "main" / "target" / "release" / "evidence-store"
DEBUG = ROOT.parent.parent / "main" / "target" / "debug" / "evidence-store"
if not RELEASE.exists():  # run from /work/main itself
    RELEASE = ROOT / "target" / "release" / "evidence-store"
    DEBUG = ROOT / "target" / "debug" / "evidence-store"

sys.path.insert(0, str(ROOT / "tools"))
from gen_workspace import relabel_schema_7  # noqa: E402


def make_workspace(out: Path, schema: int, seed: int = 7, projects: int = 2, sessions: int = 4,
                   turns: int = 12, tool_output_max: str = "64K") -> Path:
    """A generated workspace: schema 2 (prompt-diary 0.2.10) or 7 (0.2.20), laid out as
    each release's `prepare` lays it out (the 0.2.20 form is test_differential_0220's)."""
    if out.exists():
        shutil.rmtree(out)
    subprocess.run([sys.executable, str(ROOT / "tools" / "gen_workspace.py"), "--out", str(out), "--seed", str(seed),
                    "--edge-cases", "--projects", str(projects), "--sessions", str(sessions), "--turns", str(turns),
                    "--tool-output-max", tool_output_max], check=True, stdout=subprocess.DEVNULL)
    if schema == 7:
        relabel_schema_7(out)
    return out


def schema_of(ws: Path) -> int:
    return int(json.loads((ws / "metadata.json").read_text(encoding="utf-8")).get("schema_version", 2))


def indexes(ws: Path) -> dict[str, list[dict]]:
    return {
        index.parent.name: [json.loads(line) for line in index.read_text(encoding="utf-8").splitlines() if line.strip()]
        for index in sorted(ws.glob("projects/*/sessions.index.jsonl"))
    }


def chain(turn: dict, schema: int, marker: str) -> dict:
    """A valid evidence chain for `turn` under `schema`, carrying `marker` in a free-text
    summary so that the stored card shows which write it is."""
    a, b = turn["turn_start_line"], turn["turn_end_line"]
    if schema == 7:
        trigger: dict = {"citations": [{"lines": f"{a}-{a}"}]}
    else:
        trigger = {"type": "explicit_user_message", "summary": "asked",
                   "quoted_messages": [{"text": "please", "citations": [{"lines": f"{a}-{a}"}]}],
                   "citations": [{"lines": f"{a}-{a}"}]}
    return {
        "turn_ref": turn["turn_ref"],
        "trigger": trigger,
        "agent_reactions": [{"summary": marker, "citations": [{"lines": f"{a}-{b}"}]}],
        "outcomes": [{"category": "code_outcome", "summary": "landed", "citations": [{"lines": f"{a}-{b}"}]}],
        "observed_checks": [],
        "terminal_state": {"type": "material_result", "summary": "done", "citations": [{"lines": f"{b}-{b}"}]},
        "materiality": "material",
    }


def gap_item(ref: str, session_ref: str, turn_ref: str) -> dict:
    """The simplest valid work item under both contracts (no disposition needed)."""
    return {"work_item_ref": ref, "covered_turns": [{"session_ref": session_ref, "turn_ref": turn_ref}],
            "kind": "evidence_gap_item", "title": f"gap {ref}", "confidence": "low"}


class Raw:
    """`evidence-store serve` over pipes, spoken to in raw lines. Answers are collected by
    a reader thread; `lines` keeps every line the server wrote, in order."""

    def __init__(self, binary: Path, ws: Path, env: dict | None = None, stderr: Any = subprocess.DEVNULL,
                 args: tuple[str, ...] = ()):
        self.proc = subprocess.Popen([str(binary), *args, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr,
                                     env={**os.environ, "PROMPT_DIARY_WORKSPACE": str(ws), "RUST_LOG": "off",
                                          **(env or {})})
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
                if isinstance(msg, dict) and "id" in msg and ("result" in msg or "error" in msg):
                    key = msg["id"]
                    key = json.dumps(key)
                    if key in self.answers:
                        self.duplicates.append(key)
                    self.answers[key] = msg
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def send_bytes(self, data: bytes) -> None:
        assert self.proc.stdin
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except ValueError as e:  # closed by close() from another thread
            raise BrokenPipeError(str(e)) from e

    def send(self, msg: dict) -> None:
        self.send_bytes((json.dumps(msg) + "\n").encode())

    def request(self, method: str, params: dict | None = None, rid: Any = None) -> Any:
        if rid is None:
            self.next_id += 1
            rid = f"r{self.next_id}"
        msg: dict = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return rid

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

    def call(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict | None:
        try:
            rid = self.request(method, params)
        except (BrokenPipeError, OSError):
            return None
        return self.wait(rid, timeout)

    def initialize(self) -> dict | None:
        got = self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "attack", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return got

    def tool(self, name: str, arguments: dict, timeout: float = 120.0) -> tuple[bool, str] | None:
        """(isError, text) of a tools/call, or None when no answer came."""
        got = self.call("tools/call", {"name": name, "arguments": arguments}, timeout)
        if got is None:
            return None
        if "error" in got:
            return True, json.dumps(got["error"])
        result = got["result"]
        return bool(result.get("isError")), result["content"][0]["text"] if result.get("content") else ""

    def close(self, timeout: float = 30.0) -> int | None:
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


def rss_mb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a live process in MB; (-1, -1) once it is gone."""
    rss = hwm = -1
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS"):
                rss = int(line.split()[1]) // 1024
            elif line.startswith("VmHWM"):
                hwm = int(line.split()[1]) // 1024
    except OSError:
        pass
    return rss, hwm


def threads(pid: int) -> int:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("Threads"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def cli(binary: Path, ws: Path, *args: str, timeout: float = 300.0, env: dict | None = None
        ) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), "--workspace", str(ws), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def add_citations(ws: Path, every: int = 3) -> Path:
    """Gives every `every`-th Claude assistant line of `ws` a text block with
    `**Evidence**:` markers (file, test, link) and a `cwd` of a small project directory
    beside the workspace, so that import indexes agent citations and export writes
    receipts. Line numbers and turn spans stay as they are. Returns the project directory."""
    proj = ws.parent / (ws.name + "-proj")
    shutil.rmtree(proj, ignore_errors=True)
    (proj / "src").mkdir(parents=True)
    for i in range(5):
        (proj / "src" / f"mod_{i}.py").write_text("".join(f"line {n}\n" for n in range(40)))
    for path in sorted(ws.glob("projects/*/sessions/claude-code/*.jsonl")):
        out = []
        n = 0
        for line in path.read_bytes().split(b"\n"):
            if b'"type":"assistant"' in line[:40]:
                try:
                    obj = json.loads(line)
                except ValueError:
                    out.append(line)
                    continue
                n += 1
                if n % every == 0 and isinstance(obj.get("message", {}).get("content"), list):
                    obj["cwd"] = str(proj)
                    obj["message"]["content"].append({"type": "text", "text": (
                        f"Step {n} done.\n**Evidence**: src/mod_{n % 5}.py:{n % 50 + 1}\n"
                        f"**Evidence**: tests/test_x.py::test_{n} - PASS\n"
                        f"**Evidence**: [Issue {n}](https://example.com/issues/{n})")})
                    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
            out.append(line)
        path.write_bytes(b"\n".join(out))
    return proj
