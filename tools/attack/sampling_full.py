#!/usr/bin/env python3
"""`tool_output` through the client's sampling, with every request slot taken.

The client declares `sampling` (no endpoint is configured, so sampling is the model) and
answers every `sampling/createMessage` at once with a correct final report. n calls
(full-chunked) are sent together. With n = 15 every call finishes in well under a second;
with n = 16 the server has taken all 16 slots, and if its reader then reads no more lines,
the client's answers to the sampling requests are never read, so every call waits for its
deadline (then the truncate fallback, "deadline of N s reached").

Usage: tools/.venv/bin/python tools/attack/sampling_full.py --bin target/release/evidence-store
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Raw, arguments, cli, make_workspace, parse  # noqa: E402
from mcp_client import INITIALIZED  # noqa: E402
from hostile_endpoint import biggest_handle  # noqa: E402

NONCE = re.compile(r"<ai-agent-([0-9a-f]+)-FINAL format=")


class SamplingClient(Raw):
    """Raw, plus an answer to every sampling request the server sends."""

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            if isinstance(msg, dict) and msg.get("method") == "sampling/createMessage" and "id" in msg:
                system = (msg.get("params") or {}).get("systemPrompt") or ""
                m = NONCE.search(system)
                nonce = m.group(1) if m else "0"
                text = f'<ai-agent-{nonce}-FINAL format="text">sampled</ai-agent-{nonce}-FINAL>'
                with self.cond:
                    self.sampled = getattr(self, "sampled", 0) + 1
                try:
                    self.send({"jsonrpc": "2.0", "id": msg["id"], "result": {
                        "role": "assistant", "content": {"type": "text", "text": text}, "model": "attack",
                        "stopReason": "endTurn"}})
                except (BrokenPipeError, OSError):
                    pass
                continue
            with self.cond:
                self.lines.append(line[:4096])
                if isinstance(msg, dict) and "id" in msg and ("result" in msg or "error" in msg):
                    self.answers[json.dumps(msg["id"])] = msg
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()


def run(binary: Path, ws: Path, handle: str, n: int, deadline: int) -> tuple[float, int, int]:
    env = {"EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS": str(deadline), "RUST_LOG": "off"}
    raw = SamplingClient(binary, ws, env=env)
    try:
        raw.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}},
                                "clientInfo": {"name": "attack", "version": "0"}})
        raw.send(INITIALIZED)
        t0 = time.time()
        ids = [raw.request("tools/call", {"name": "tool_output", "arguments": {
            "handle": handle, "extract": "x", "mode": "full-chunked"}}) for _ in range(n)]
        got = [raw.wait(rid, timeout=deadline + 30) for rid in ids]
        took = time.time() - t0
        texts = [g["result"]["content"][0]["text"] if g and "result" in g else "" for g in got]
        sampled_ok = sum("sampled" in t for t in texts)
        deadline_hit = sum("deadline of" in t for t in texts)
        print(f"  n={n}: all {n} answered after {took:.1f} s (deadline {deadline} s): {sampled_ok} from sampling, "
              f"{deadline_hit} at the deadline; sampling requests answered by the client: "
              f"{getattr(raw, 'sampled', 0)}", flush=True)
        return took, sampled_ok, deadline_hit
    finally:
        raw.close(timeout=deadline + 30)


def main() -> int:
    parser = arguments(__doc__, "evidence-store-sampling")
    parser.add_argument("--deadline", type=int, default=30)
    args = parse(parser, deadline=3)
    binary = args.bin.resolve()
    ws = make_workspace(args.work / "ws", 2, projects=1, sessions=2, turns=8, tool_output_max="64K")
    cli(binary, ws, "import", timeout=300)
    handle = biggest_handle(binary, ws)
    fails = []
    for n in (15, 16):
        took, ok, late = run(binary, ws, handle, n, args.deadline)
        if late or took > args.deadline / 2:
            fails.append(f"{n} sampled calls: {late} reached the deadline, all answered after {took:.1f} s")
    for f in fails:
        print(f"FAIL {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
