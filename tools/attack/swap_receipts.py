#!/usr/bin/env python3
"""`export`'s receipt cleanup racing a `receipts/` directory swapped for a symlink outside.

`export` removes stale receipts of ours and our temp files from
`projects/<key>/receipts/`. An outside directory holds a file named like one of our temp
files (`.evidence-S0001-T0001.json.<pid>.<n>.<16 hex>.evidence-store.tmp`) and a copy of a
receipt under a name that is not current (so, if seen inside, stale). For `--seconds`, a
thread exchanges `receipts/` with a symlink to that directory and back
(renameat2 RENAME_EXCHANGE, ~1 ms each way) while `export` runs in a loop. Every file
removed from the outside directory is counted (and put back); any removal is a write
outside the workspace.

Usage: tools/.venv/bin/python tools/attack/swap_receipts.py --bin target/release/evidence-store [--seconds 60]
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_citations, arguments, cli, make_workspace, parse  # noqa: E402
from swap_sessions import exchange  # noqa: E402

TEMP = ".evidence-S0001-T0001.json.99999.1.0123456789abcdef.evidence-store.tmp"


def main() -> int:
    parser = arguments(__doc__, "evidence-store-swap-receipts", seconds=60.0, schema=2)
    args = parse(parser, seconds=1.0)
    binary = args.bin.resolve()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    ws = make_workspace(args.work / "ws", args.schema, projects=1, sessions=1, turns=6, tool_output_max="4K")
    add_citations(ws, every=1)
    for cmd in (["import"], ["export"]):
        done = cli(binary, ws, *cmd, timeout=300)
        if done.returncode != 0:
            print(done.stderr)
            return 1
    receipts = next(ws.glob("projects/*/receipts"))
    made = sorted(receipts.glob("evidence-*.json"))
    if not made:
        print("export wrote no receipts")
        return 1
    outside = args.work / "OUT"
    outside.mkdir()
    planted = {TEMP: b"not ours to remove\n",
               # Ours by content (schema and project key), under a turn no receipt is kept for.
               "evidence-S0001-T9999.json": made[0].read_bytes()}
    for name, data in planted.items():
        (outside / name).write_bytes(data)
    link = args.work / "receipts.link"
    link.symlink_to(outside)
    stop = threading.Event()
    swaps = [0]

    def swapper() -> None:
        while not stop.is_set():
            exchange(receipts, link)
            time.sleep(0.001)
            exchange(receipts, link)
            swaps[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=swapper)
    t.start()
    runs = ok = 0
    removed: dict[str, int] = {}
    deadline = time.time() + args.seconds
    try:
        while time.time() < deadline:
            done = cli(binary, ws, "export", timeout=120)
            runs += 1
            ok += done.returncode == 0
            for name, data in planted.items():
                if not (outside / name).exists():
                    removed[name] = removed.get(name, 0) + 1
                    (outside / name).write_bytes(data)
    finally:
        stop.set()
        t.join()
    print(f"schema {args.schema}: {swaps[0]} swaps, {runs} exports ({ok} exit 0); "
          f"files removed from the outside directory: {removed or 0}")
    if removed:
        print("FAIL export removed files outside the workspace")
    return 1 if removed else 0


if __name__ == "__main__":
    sys.exit(main())
