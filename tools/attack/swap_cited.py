#!/usr/bin/env python3
"""Cited files' directory swapped for a symlink outside while citations are checked.

A workspace whose Claude lines cite `src/mod_N.py:L` in a project directory beside it
(`common.add_citations`: 40 lines each). An outside directory holds other `mod_N.py` of
7 lines. For `--seconds`, a thread exchanges `proj/src` with a symlink to the outside
directory and back (renameat2 RENAME_EXCHANGE), every ~1 ms, while `verify-citations`
and `import --rehash` run in a loop. Afterwards every stored citation's line count is
read back (`read_agent_citations`): a count of 7, or any inotify open of the outside
files, means a file outside the project was read.

Usage: tools/.venv/bin/python tools/attack/swap_cited.py --bin target/release/evidence-store [--seconds 60]
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Raw, add_citations, arguments, cli, indexes, make_workspace, parse  # noqa: E402
from swap_sessions import OpenWatch, exchange  # noqa: E402


def main() -> int:
    parser = arguments(__doc__, "evidence-store-swap-cited", seconds=60.0, schema=2)
    args = parse(parser, seconds=1.0)
    binary = args.bin.resolve()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    ws = make_workspace(args.work / "ws", args.schema, projects=1, sessions=4, turns=12, tool_output_max="4K")
    proj = add_citations(ws, every=1)
    outside = args.work / "OUT"
    outside.mkdir()
    watches = []
    for i in range(5):
        f = outside / f"mod_{i}.py"
        f.write_text("".join(f"outside {n}\n" for n in range(7)))
        watches.append(OpenWatch(f))
    link = args.work / "src.link"
    link.symlink_to(outside)
    done = cli(binary, ws, "import", timeout=300)
    if done.returncode != 0:
        print(done.stderr)
        return 1
    stop = threading.Event()
    swaps = [0]

    def swapper() -> None:
        while not stop.is_set():
            exchange(proj / "src", link)
            time.sleep(0.001)
            exchange(proj / "src", link)
            swaps[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=swapper)
    t.start()
    runs = {"verify-citations": 0, "import --rehash": 0}
    failed = 0
    deadline = time.time() + args.seconds
    try:
        while time.time() < deadline:
            for cmd in (["verify-citations"], ["import", "--rehash"]):
                d = cli(binary, ws, *cmd, timeout=120)
                runs[" ".join(cmd)] += 1
                failed += d.returncode != 0
    finally:
        stop.set()
        t.join()
    # The last check's results, as stored (the swap is over, src is back in place).
    counts: dict[str, int] = {}
    raw = Raw(binary, ws)
    raw.initialize()
    project, rows = next(iter(indexes(ws).items()))
    for row in rows:
        got = raw.tool("read_agent_citations", {"project_key": project, "session_ref": row["session_ref"]})
        if got is None:
            continue
        for c in json.loads(got[1]).get("citations", []):
            v = c.get("verification") or {}
            if c.get("type") == "file":
                key = f"{v.get('status')} lines={v.get('file_lines')}"
                counts[key] = counts.get(key, 0) + 1
    raw.close()
    opens = 0
    for w in watches:
        w.poll()
        opens += w.opens + w.reads
    print(f"schema {args.schema}: {swaps[0]} swaps, runs {runs}, {failed} failed; stored file citations: {counts}; "
          f"outside files opened/read: {opens}")
    bad = opens or any("lines=7" in k for k in counts)
    if bad:
        print("FAIL a file outside the project was read")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
