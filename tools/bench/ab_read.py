#!/usr/bin/env python3
"""Paired read latency of several evidence-store binaries, for comparing changes.

All servers stay alive on the same workspace and take turns in small batches (5 compact
reads of 2000 lines, then 3 full reads of 100 lines, each), so drift of this shared
machine affects them alike; each read is timed as bench.py times it, and the answer is
parsed between reads as bench.py does (so the servers idle between calls as they would).
Swap the order of the binaries and run again before believing a difference under ~1 ms.

Usage: tools/.venv/bin/python tools/bench/ab_read.py BIN_A BIN_B [...] [--work DIR] [--batches N]
       (the workspace is bench.py's read-200M; run `bench.py read` once to make it)
Each binary gets a store of its own beside the workspace's (`--store`), so builds with
different store schemas can be compared; each server imports into it before the timing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import bench  # noqa: E402
from bench import middle_reads  # noqa: E402
import smoke  # noqa: E402
from mcp_client import LockstepClient  # noqa: E402


def timed_read(client: LockstepClient, args: dict) -> float:
    start = time.perf_counter()
    line = client.request_raw("tools/call", {"name": "read_session_lines", "arguments": args})
    took = time.perf_counter() - start
    text = json.loads(line)["result"]["content"][0]["text"]
    assert json.loads(text)["status"] == "ok", text[:300]
    return took * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bins", nargs="+")
    parser.add_argument("--work", type=Path, default=Path("/tmp/evidence-store-bench"))
    parser.add_argument("--batches", type=int, default=12)
    args = smoke.parse(parser, batches=1)
    if args.smoke:
        bench.SMOKE = True
        ws = bench.read_workspace(args.work)
    else:
        ws = args.work / "read-200M"
    if not (ws / "summary.json").exists():
        raise SystemExit(f"no workspace at {ws}: run tools/bench/bench.py read first")
    compact, full = middle_reads(ws)
    stores = [ws / ".evidence-store" / f"ab-{hashlib.sha256(str(Path(b).resolve()).encode()).hexdigest()[:12]}.redb"
              for b in args.bins]
    for b, store in zip(args.bins, stores):  # one at a time: two first imports at once can race
        subprocess.run([b, "--workspace", str(ws), "--store", str(store), "import"], check=True, capture_output=True)
    clients = [LockstepClient([b, "serve", "--store", str(store)], {"PROMPT_DIARY_WORKSPACE": str(ws)})
               for b, store in zip(args.bins, stores)]
    for client in clients:
        client.initialize()
        timed_read(client, full)  # the first call waits for the server's import
    times = {b: {"compact": [], "full": []} for b in args.bins}
    for _ in range(args.batches):
        for b, client in zip(args.bins, clients):
            times[b]["compact"] += [timed_read(client, compact) for _ in range(5)]
            times[b]["full"] += [timed_read(client, full) for _ in range(3)]
    for client in clients:
        client.close()
    print("| binary | compact median | compact p10 | full median |")
    print("|---|---|---|---|")
    for b in args.bins:
        c, f = sorted(times[b]["compact"]), times[b]["full"]
        print(f"| {b} | {statistics.median(c):.2f} ms | {c[len(c) // 10]:.2f} ms | {statistics.median(f):.2f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
