#!/usr/bin/env python3
"""What a tool-output handle costs: the same 5 MB tool result (a 100,000-line test log) in a
session of 6 MB and in one of 200 MB, and, on each, `tool_output_read`, `tool_output_grep`
and `tool_output` (truncate) through `serve`, beside `grep -c` over the payload's bytes.
Also the first `tools/list` (which looks for a handle in the workspace) on each.

Usage: tools/.venv/bin/python tools/bench/bench_handles.py [--bin target/release/evidence-store]
       [--work /tmp/evidence-store-bench] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
from bench import ROOT  # noqa: E402
import example  # noqa: E402
import smoke  # noqa: E402
from mcp_client import LockstepClient  # noqa: E402

PROJECT = "Demo-0123456789ab"


def payload() -> str:
    lines = [f"tests/test_{n}.py::test_case_{n % 97} PASSED [{n % 100:3d}%]" for n in range(1, 100_001)]
    for n in range(5_000, 100_000, 10_000):
        lines[n] = f"FAILED tests/test_{n}.py::test_case - AssertionError: expected {n}"
    return "\n".join(lines)


def filler(i: int) -> str:
    text = f"step {i}: " + "reading the code and thinking about it " * 45
    if i % 2:
        return json.dumps({"type": "user", "message": {"role": "user", "content": text}})
    return json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})


def make_workspace(out: Path, session_bytes: int, log: str) -> Path:
    if out.exists():
        shutil.rmtree(out)
    example.copy(out)
    one = len(filler(0)) + 1
    half = max(1, (session_bytes - len(log)) // one // 2)
    lines = [filler(i) for i in range(half)]
    lines.append(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_bench", "name": "Bash", "input": {"command": "pytest -q tests/"}}]}}))
    lines.append(json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_bench", "content": log}]}}))
    lines += [filler(half + i) for i in range(half)]
    session = out / f"projects/{PROJECT}/sessions/claude-code/bench.jsonl"
    session.write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = out / f"projects/{PROJECT}/sessions.index.jsonl"
    row = {"session_ref": "S0010", "source": "claude-code", "source_session_id": "bench",
           "session_path": "sessions/claude-code/bench.jsonl", "subagent_path": "",
           "target_start_line": 1, "target_end_line": len(lines),
           "turns": [{"target_subagents": [], "turn_end_line": len(lines), "turn_ref": "T0001", "turn_start_line": 1}]}
    with index.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    return out


def median_ms(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def call(client: LockstepClient, name: str, args: dict) -> str:
    answer = client.request("tools/call", {"name": name, "arguments": args})
    result = answer["result"]
    assert not result.get("isError"), result
    return result["content"][0]["text"]


def measure(binary: str, ws: Path, repeat: int, log_file: Path) -> dict:
    subprocess.run([binary, "--workspace", str(ws), "import"], check=True, capture_output=True)
    client = LockstepClient([binary, "serve"], {"PROMPT_DIARY_WORKSPACE": str(ws)})
    client.initialize()
    client.notify("notifications/initialized")
    start = time.perf_counter()
    tools = client.request("tools/list", {})["result"]["tools"]
    first_list = (time.perf_counter() - start) * 1000
    assert any(t["name"] == "tool_output_grep" for t in tools)
    n = sum(1 for _ in (ws / f"projects/{PROJECT}/sessions/claude-code/bench.jsonl").open("rb"))
    line = n // 2 + 1
    read = json.loads(call(client, "read_session_lines", {"project_key": PROJECT, "session_ref": "S0010",
                                                           "start_line": line, "end_line": line}))
    handle = read["records"][0]["tool_results"][0]["handle"]
    out = {
        "session MB": ws.joinpath(f"projects/{PROJECT}/sessions/claude-code/bench.jsonl").stat().st_size / 1e6,
        "first tools/list": first_list,
        "tool_output_read 100 lines": median_ms(lambda: call(client, "tool_output_read", {"handle": handle, "start_line": 50_000, "end_line": 50_099}), repeat),
        "tool_output_grep FAILED": median_ms(lambda: call(client, "tool_output_grep", {"handle": handle, "pattern": "^FAILED"}), repeat),
        "tool_output truncate": median_ms(lambda: call(client, "tool_output", {"handle": handle, "extract": "failures", "mode": "truncate"}), repeat),
        "grep -c over the payload": median_ms(lambda: subprocess.run(["grep", "-c", "^FAILED", str(log_file)], capture_output=True), repeat),
    }
    client.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(cargo_target.binary("release")))
    parser.add_argument("--work", type=Path, default=Path("/tmp/evidence-store-bench"))
    parser.add_argument("--repeat", type=int, default=20)
    args = smoke.parse(parser, repeat=1)
    args.work.mkdir(parents=True, exist_ok=True)
    log = payload()
    log_file = args.work / "handles-payload.txt"
    log_file.write_text(log, encoding="utf-8")
    rows = []
    large = ("handles-8M", len(log) + 3_000_000) if args.smoke else ("handles-200M", 200_000_000)
    for name, size in (("handles-6M", len(log) + 1_000_000), large):
        rows.append(measure(args.bin, make_workspace(args.work / name, size, log), args.repeat, log_file))
    print(f"payload: {len(log) / 1e6:.1f} MB, {log.count(chr(10)) + 1} lines; median of {args.repeat} calls (ms)\n")
    keys = list(rows[0])
    print("| | " + " | ".join(f"{r['session MB']:.0f} MB session" for r in rows) + " | ratio |")
    print("|---|" + "---|" * (len(rows) + 1))
    for k in keys[1:]:
        print(f"| {k} | " + " | ".join(f"{r[k]:.2f}" for r in rows) + f" | {rows[1][k] / rows[0][k]:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
