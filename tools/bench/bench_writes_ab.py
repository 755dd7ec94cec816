#!/usr/bin/env python3
"""The write path of two builds, paired and alternated: what a change to it costs.

  writes   `write_evidence` through `serve`, one call at a time, each appending a chain to
           a card (the document lock, a store transaction, the card's atomic replacement,
           the commit): the median milliseconds per write of each batch;
  rebuild  `import --rebuild` of a generated workspace: every session line hashed and
           every line table written to a new store (the store's page writes).

Each round runs both builds, the first one alternating, on copies of one workspace under
--work (a tmpfs by default, where an fsync costs nothing, so that what is measured is the
program and not the device). Results are printed as Markdown.

Usage: python3 tools/bench/bench_writes_ab.py BASE_BIN NEW_BIN [--work DIR] [--rounds 4]
           [--writes 300] [--size 64M]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
from bench import generate, timed  # noqa: E402
import smoke  # noqa: E402
from mcp_client import LockstepClient, tool_call  # noqa: E402

PROJECT = "Load-000000000000"
TURNS = 20


def load_workspace(ws: Path, writes: int) -> None:
    """One project with enough sessions of TURNS two-line turns for `writes` chains (cards
    need no session files on a 0.2.10 workspace)."""
    shutil.rmtree(ws, ignore_errors=True)
    proj = ws / "projects" / PROJECT
    proj.mkdir(parents=True)
    (ws / "metadata.json").write_text(json.dumps({"report_date": "2026-01-15", "status": "final", "timezone": "UTC"}))
    (proj / "project.json").write_text(json.dumps({"project_key": PROJECT, "project_label": "Load"}))
    rows = []
    for s in range(1, writes // TURNS + 2):
        turns = [{"turn_ref": f"T{t:04d}", "turn_start_line": 2 * t - 1, "turn_end_line": 2 * t}
                 for t in range(1, TURNS + 1)]
        rows.append(json.dumps({"session_ref": f"S{s:04d}", "source": "codex", "source_session_id": "x",
                                "session_path": f"sessions/codex/{s}.jsonl", "target_start_line": 1,
                                "target_end_line": 2 * TURNS, "turns": turns}))
    (proj / "sessions.index.jsonl").write_text("\n".join(rows) + "\n")


def chain(n: int) -> dict:
    s, t = n // TURNS + 1, n % TURNS + 1
    lines = {"lines": f"{2 * t - 1}-{2 * t}"}
    return {"project_key": PROJECT, "session_ref": f"S{s:04d}", "evidence_chain": {
        "turn_ref": f"T{t:04d}",
        "trigger": {"type": "explicit_user_message", "summary": "asked", "citations": [lines]},
        "agent_reactions": [{"summary": "did it", "citations": [lines]}],
        "outcomes": [{"category": "code_outcome", "summary": "done", "citations": [lines]}],
        "terminal_state": {"type": "material_result", "summary": "done", "citations": [lines]},
        "materiality": "material"}}


def write_batch(binary: str, base_ws: Path, ws: Path, writes: int) -> float:
    """Median milliseconds of `writes` write_evidence calls on a fresh copy of base_ws."""
    shutil.rmtree(ws, ignore_errors=True)
    shutil.copytree(base_ws, ws)
    timed([binary, "--workspace", str(ws), "import"])
    client = LockstepClient([binary, "--workspace", str(ws), "serve"], {"RUST_LOG": "off"})
    client.initialize()
    times = []
    for n in range(writes):
        start = time.perf_counter()
        answer = client.request("tools/call", tool_call("write_evidence", chain(n)))
        times.append(time.perf_counter() - start)
        text = answer["result"]["content"][0]["text"]
        if '"appended"' not in text:
            sys.exit(f"write {n} was not appended: {text}")
    client.close()
    return statistics.median(times) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base")
    parser.add_argument("new")
    default_work = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")
    parser.add_argument("--work", type=Path, default=default_work / "evidence-store-bench-writes")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--size", default="64M", help="session bytes of the rebuild's workspace")
    args = smoke.parse(parser, rounds=1, writes=5, size="1M")
    args.work.mkdir(parents=True, exist_ok=True)
    builds = {"base": str(Path(args.base).resolve()), "new": str(Path(args.new).resolve())}
    base_ws = args.work / "writes-ws"
    load_workspace(base_ws, args.writes)
    big = args.work / f"rebuild-{args.size}"
    generate(big, "--seed", "5", "--projects", "1", "--sessions", "4", "--session-bytes", args.size)
    rows = []
    for r in range(args.rounds):
        order = ["base", "new"] if r % 2 == 0 else ["new", "base"]
        row = {"first": order[0]}
        for name in order:
            row[f"write {name}"] = write_batch(builds[name], base_ws, args.work / f"writes-{name}", args.writes)
            store = args.work / f"rebuild-{name}.redb"
            store.unlink(missing_ok=True)
            timed([builds[name], "--workspace", str(big), "--store", str(store), "import"])
            seconds, _ = timed([builds[name], "--workspace", str(big), "--store", str(store), "import", "--rebuild"])
            row[f"rebuild {name}"] = seconds
        rows.append(row)
    print(f"write_evidence ({args.writes} calls a batch, median ms a call) and import --rebuild of "
          f"{args.size} sessions x4 (s), under {args.work}:\n")
    print("| first | write, base | write, new | rebuild, base | rebuild, new |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['first']} | {row['write base']:.2f} ms | {row['write new']:.2f} ms | "
              f"{row['rebuild base']:.2f} s | {row['rebuild new']:.2f} s |")
    shutil.rmtree(args.work / "writes-base", ignore_errors=True)
    shutil.rmtree(args.work / "writes-new", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
