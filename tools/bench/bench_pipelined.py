#!/usr/bin/env python3
"""Many pipelined reads against a client that stops reading: are all answered, in bounded memory?

Sends N `read_session_lines` requests (200 compact lines each) without waiting, reads
nothing for PAUSE seconds, then reads every answer. Prints how many requests the server had
taken by then, its peak RSS (VmHWM) at that point and at the end, and whether every id was
answered exactly once in whole lines.

Usage: tools/.venv/bin/python tools/bench/bench_pipelined.py [--bin B] [--work DIR] [-n N] [--pause S]
       (the workspace is bench.py's read-200M; run `bench.py read` once to make it)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import bench  # noqa: E402
import smoke  # noqa: E402
from mcp_client import INITIALIZED, frame, initialize_params, message, tool_call  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def vm_hwm_mb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) // 1024
    return -1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(cargo_target.binary("release")))
    parser.add_argument("--work", type=Path, default=Path("/tmp/evidence-store-bench"))
    parser.add_argument("-n", type=int, default=10_000)
    parser.add_argument("--pause", type=float, default=20.0)
    args = smoke.parse(parser, n=50, pause=0.5)
    if args.smoke:
        bench.SMOKE = True
        ws = bench.read_workspace(args.work)
    else:
        ws = args.work / "read-200M"
    index = next(ws.glob("projects/*/sessions.index.jsonl"))
    row = json.loads(index.read_text().splitlines()[0])
    proc = subprocess.Popen([args.bin, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL,
                            env={**os.environ, "PROMPT_DIARY_WORKSPACE": str(ws), "RUST_LOG": "off"})
    assert proc.stdin and proc.stdout

    def send(msg: dict) -> None:
        proc.stdin.write(frame(msg))

    send(message(0, "initialize", initialize_params("pipelined")))
    proc.stdin.flush()
    proc.stdout.readline()
    send(INITIALIZED)
    proc.stdin.flush()
    last = row["target_end_line"] - 200
    sent = [0]

    def writer() -> None:
        for i in range(1, args.n + 1):
            start = 1 + (i * 37) % last
            send(message(i, "tools/call", tool_call("read_session_lines", {
                "project_key": index.parent.name, "session_ref": row["session_ref"],
                "start_line": start, "end_line": start + 199})))
            sent[0] = i
        proc.stdin.close()

    threading.Thread(target=writer, daemon=True).start()
    time.sleep(args.pause)
    print(f"after {args.pause:.0f} s without reading: {sent[0]} requests taken, server peak RSS {vm_hwm_mb(proc.pid)} MB")
    seen: dict = {}
    torn = 0
    started = time.time()
    peak = -1
    while True:
        line = proc.stdout.readline()
        if not line:
            break
        peak = max(peak, vm_hwm_mb(proc.pid)) if proc.poll() is None else peak
        try:
            answer = json.loads(line)
        except ValueError:
            torn += 1
            continue
        seen[answer.get("id")] = seen.get(answer.get("id"), 0) + 1
    code = proc.wait()
    missing = sum(1 for i in range(1, args.n + 1) if i not in seen)
    repeated = sum(1 for count in seen.values() if count > 1)
    print(f"answers: {sum(seen.values())} of {args.n}; missing {missing}; repeated {repeated}; torn lines {torn}; "
          f"exit {code}; drained in {time.time() - started:.1f} s; peak RSS while draining {peak} MB")
    return 0 if missing == repeated == torn == code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
