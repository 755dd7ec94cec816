#!/usr/bin/env python3
"""What a workspace of many sessions costs: one project of N tiny sessions (one turn each,
about 2.6 KB), and for each N the first `import` into a new store, an unchanged `import`,
and a `serve`'s first `prompt_diary_ping` (from process start to its answer; every agent's
server pays it), with each process's peak RSS. Ten times the sessions should cost about ten
times as much, not a hundred.

Workspaces are generated once into --work (tools/lib/gen_workspace.py, seed 7) and kept for the
next run. Results are printed as Markdown.

Usage: python3 tools/bench/bench_sessions.py --sessions 20000 200000 [--bin target/release/evidence-store]
       [--work /tmp/bench-sessions] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import smoke  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "tools" / "lib" / "gen_workspace.py"


def workspace(work: Path, sessions: int) -> Path:
    ws = work / f"ws{sessions}"
    if not (ws / "metadata.json").exists():
        shutil.rmtree(ws, ignore_errors=True)
        subprocess.run([sys.executable, str(GEN), "--out", str(ws), "--projects", "1", "--sessions", str(sessions),
                        "--turns", "1", "--tool-output-max", "200", "--seed", "7"], check=True,
                       stdout=subprocess.DEVNULL)
    return ws


def timed(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user and system) and peak RSS (MB) of one run, which
    must succeed."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {stderr.decode(errors='replace')[-2000:]}")
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def first_ping(binary: Path, ws: Path) -> tuple[float, float, int]:
    """Seconds from starting `serve` to the answer of its first `prompt_diary_ping`, the
    server's CPU seconds and its peak RSS (MB)."""
    start = time.monotonic()
    proc = subprocess.Popen([str(binary), "--workspace", str(ws), "serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "RUST_LOG": "off"})
    assert proc.stdin and proc.stdout

    def ask(rid: int, method: str, params: dict) -> dict:
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode())
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("serve ended without answering")
            answer = json.loads(line)
            if answer.get("id") == rid:
                return answer

    ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "bench-sessions", "version": "0"}})
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    answer = ask(2, "tools/call", {"name": "prompt_diary_ping", "arguments": {}})
    took = time.monotonic() - start
    text = answer["result"]["content"][0]["text"]
    if '"ok"' not in text:
        raise SystemExit(f"ping: {text}")
    proc.stdin.close()
    _, _, usage = os.wait4(proc.pid, 0)
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, default=cargo_target.binary("release"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-sessions"))
    parser.add_argument("--sessions", type=int, nargs="+", default=[20000, 200000])
    parser.add_argument("--runs", type=int, default=1, help="runs of each step (the best is shown)")
    args = smoke.parse(parser, sessions=[50])
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"binary: {args.bin}")
    print("Wall seconds (CPU seconds of the process) for each step; a shared, loaded host makes the CPU "
          "figure the steadier one.")
    print()
    print("| sessions | first import | unchanged import | first ping | peak RSS (import / unchanged / serve) |")
    print("|---:|---:|---:|---:|---:|")
    for n in args.sessions:
        ws = workspace(args.work, n)
        firsts, unchanged, pings = [], [], []
        for _ in range(args.runs):
            shutil.rmtree(ws / ".evidence-store", ignore_errors=True)
            firsts.append(timed([str(args.bin), "--workspace", str(ws), "import"]))
            unchanged.append(timed([str(args.bin), "--workspace", str(ws), "import"]))
            pings.append(first_ping(args.bin, ws))
        (f, fc, frss), (u, uc, urss), (p, pc, prss) = min(firsts), min(unchanged), min(pings)
        print(f"| {n:,} | {f:.2f} s ({fc:.2f}) | {u:.2f} s ({uc:.2f}) | {p:.2f} s ({pc:.2f}) | "
              f"{frss} / {urss} / {prss} MB |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
