#!/usr/bin/env python3
"""What one `tool_output` call can cost at worst: paired runs of several evidence-store builds.

Three measures, each run for every binary given, in the order given:
- `slow`: an endpoint that answers every chat request after --delay seconds with a Grep
  tool call, so a read-grep sub-agent never finishes on its own: the call lasts until the
  turn limit, or until the call's deadline (`--deadline`, for builds that have one).
- `bomb`: `tool_output_grep` with `\\b(?:\\w+\\W+){100}ZZZ` (a pattern whose DFA explodes)
  on a 5.7 MB payload.
- `huge`: an endpoint that answers with a 512 MiB body and no Content-Length; the server's
  peak RSS (VmHWM) is read from /proc when the call is answered.
Each figure is one call's wall time from the request line to its answer line (a call not
answered within --give-up seconds is reported as such). Only 127.0.0.1 is used.

Usage: tools/.venv/bin/python tools/bench/bench_tool_output.py BIN [BIN ...] [--only slow,bomb,huge]
"""

from __future__ import annotations

import argparse
import http.server
import json
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import mcp_client  # noqa: E402
import smoke  # noqa: E402

HERE = Path(__file__).resolve().parent
BOMB = r"\b(?:\w+\W+){100}ZZZ"


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def endpoint(kind: str, delay: float) -> Server:
    """A chat-completions endpoint on 127.0.0.1 that misbehaves as `kind` says."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def do_GET(self) -> None:  # /props, /v1/models: nothing published
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            self.rfile.read(length)
            if kind == "huge":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                block = b" " * (1 << 20)
                try:
                    self.wfile.write(b'{"choices":[{"message":{"content":"')
                    for _ in range(512):
                        self.wfile.write(block)
                except OSError:
                    pass
                return
            time.sleep(delay)
            call = {"id": f"c{time.monotonic_ns()}", "type": "function",
                    # A new pattern each turn: a repeated call would end read-grep at once.
                    "function": {"name": "Grep", "arguments": json.dumps({"pattern": f"token|{time.monotonic_ns()}"})}}
            body = json.dumps({"id": "x", "object": "chat.completion", "model": "m",
                               "choices": [{"index": 0, "finish_reason": "tool_calls",
                                            "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Client(mcp_client.Client):
    """`serve` over stdio, initialized, with its peak RSS at hand."""

    def __init__(self, cmd: list[str], env: dict) -> None:
        super().__init__(cmd, env)
        self.initialize("bench")

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def close(self) -> None:  # type: ignore[override]
        self.proc.kill()
        self.proc.wait()


def workspace(work: Path, bin_: str, store: Path, small: bool) -> tuple[Path, str, int]:
    """One session whose tool results go up to 6 MB, imported into `store`; the handle of
    the payload nearest 5.4 MB (the size the regex-bomb report was made on), and its size.
    `small` (--smoke): results up to 64 KB."""
    ws = work / "ws"
    if not ws.exists():
        subprocess.run([sys.executable, str(HERE.parent / "lib" / "gen_workspace.py"), "--out", str(ws), "--projects", "1",
                        "--sessions", "1", "--turns", "8", "--tool-output-max", "64K" if small else "6M", "--seed", "3"],
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run([bin_, "--workspace", str(ws), "--store", str(store), "import"], check=True, capture_output=True)
    project = next(p.name for p in (ws / "projects").iterdir())
    listed = json.loads(subprocess.run([bin_, "--workspace", str(ws), "--store", str(store), "dump", "handles",
                                        project, "S0001", "--json"], check=True, capture_output=True).stdout)
    best = min(listed, key=lambda h: abs(h["bytes"] - 5_400_000))
    return ws, best["handle"], best["bytes"]


def measure(bin_: str, which: str, args: argparse.Namespace, ws: Path, store: Path, handle: str) -> str:
    env = {"PROMPT_DIARY_WORKSPACE": str(ws), "RUST_LOG": "off"}
    server = None
    if which in ("slow", "huge"):
        server = endpoint(which, args.delay)
        env |= {"EVIDENCE_STORE_MODEL_URL": f"http://127.0.0.1:{server.server_address[1]}/v1",
                "EVIDENCE_STORE_MODEL": "m", "EVIDENCE_STORE_MODEL_TIMEOUT_SECS": str(args.model_timeout),
                "EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS": str(args.deadline)}
    client = Client([bin_, "--store", str(store), "serve"], env)
    try:
        if which == "bomb":
            params = {"name": "tool_output_grep", "arguments": {"handle": handle, "pattern": BOMB}}
        else:
            mode = "read-grep" if which == "slow" else "full-chunked"
            params = {"name": "tool_output", "arguments": {"handle": handle, "mode": mode,
                                                           "extract": "every line that mentions a failure"}}
        start = time.monotonic()
        answer = client.call("tools/call", params, args.give_up)
        took = time.monotonic() - start
        if answer is None:
            return f"no answer within {args.give_up:.0f} s"
        text = answer.get("result", {}).get("content", [{}])[0].get("text", "")
        head = text.splitlines()[0][:90] if text else json.dumps(answer)[:90]
        extra = f", peak RSS {client.peak_rss_mb():.0f} MB" if which == "huge" else ""
        return f"{took:.1f} s{extra} — {head}"
    finally:
        client.close()
        if server:
            server.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bins", nargs="+")
    parser.add_argument("--only", default="slow,bomb,huge")
    parser.add_argument("--work", type=Path, default=Path("/tmp/evidence-store-bench-tool-output"))
    parser.add_argument("--delay", type=float, default=9.0, help="seconds the slow endpoint waits per request")
    parser.add_argument("--model-timeout", type=int, default=10, help="per-request model timeout given to serve")
    parser.add_argument("--deadline", type=int, default=30, help="per-call deadline given to serve (new builds)")
    parser.add_argument("--give-up", type=float, default=400.0)
    args = smoke.parse(parser, delay=0.2, model_timeout=2, deadline=2, give_up=60.0)
    args.work.mkdir(parents=True, exist_ok=True)
    for which in args.only.split(","):
        for n, bin_ in enumerate(args.bins):
            # A store of each binary's own, so builds of different store schemas can be compared.
            store = args.work / f"store-{n}.redb"
            ws, handle, size = workspace(args.work, bin_, store, args.smoke)
            print(f"{which:5} {bin_}: {measure(bin_, which, args, ws, store, handle)}  (payload {size} bytes)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
