#!/usr/bin/env python3
"""Benchmarks of the paged read (prompt-diary 0.2.20 contract), beside 0.2.20's server.

  page   one compact and one full page in the middle of a 200 MB session;
  walk   a 2000-line compact range in the middle of it walked page by page to the end;
  scale  one compact page in the middle of a 1 MB and of a 1 GB session.

Workspaces come from tools/lib/gen_workspace.py, made schema 7 as in tools/lib/pages_0220.py.
Both servers are driven by tools/lib/mcp_client.py's lockstep client. Prints Markdown.

Usage: tools/.venv-0.2.20/bin/python tools/bench/bench_pages_0220.py [page walk scale] [--work DIR]
       (build first: cargo build --release)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import bench  # noqa: E402
from bench import SESSION_ARGS, generate, pick, serve  # noqa: E402
import smoke  # noqa: E402
from mcp_client import LockstepClient  # noqa: E402
from pages_0220 import to_schema_7  # noqa: E402


def prepared(work: Path, size: str) -> Path:
    ws = work / f"pages-{size}"
    fresh = not (ws / "summary.json").exists()
    generate(ws, *SESSION_ARGS, "--session-bytes", size)
    if fresh:
        to_schema_7(ws)
    subprocess.run([str(bench.BIN), "--workspace", str(ws), "import"], check=True, capture_output=True)
    return ws


def base_args(ws: Path) -> tuple[dict, int]:
    index = next(ws.glob("projects/*/sessions.index.jsonl"))
    row = json.loads(index.read_text().splitlines()[0])
    return {"project_key": index.parent.name, "session_ref": row["session_ref"]}, row["target_end_line"]


def call(client: LockstepClient, args: dict) -> tuple[float, dict, int]:
    start = time.perf_counter()
    line = client.request_raw("tools/call", {"name": "read_session_lines", "arguments": args})
    took = time.perf_counter() - start
    text = json.loads(line)["result"]["content"][0]["text"]
    page = json.loads(text)
    assert "records" in page, text[:300]
    return took, page, len(text.encode())


def one_page(client: LockstepClient, args: dict, repeat: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(repeat):
        took, _, size = call(client, args)
        times.append(took)
    return statistics.median(times) * 1000, size


def walk(client: LockstepClient, args: dict) -> tuple[float, int]:
    start, pages, cursor = time.perf_counter(), 0, None
    while True:
        _, page, _ = call(client, args if cursor is None else dict(args, cursor=cursor))
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            return (time.perf_counter() - start) * 1000, pages


def middle(ws: Path, width: int, mode: str) -> dict:
    base, n = base_args(ws)
    start = max(1, n // 2 - width // 2)
    return dict(base, start_line=start, end_line=min(n, start + width - 1), mode=mode)


def bench_page(work: Path) -> list[str]:
    ws = prepared(work, pick("200M", "1M"))
    compact, full = middle(ws, 2000, "compact"), middle(ws, 2000, "full")
    rows = ["| one page, 200 MB session | evidence-store | prompt-diary 0.2.20 | speed-up |", "|---|---|---|---|"]
    for name, args in (("compact", compact), ("full", full)):
        ours = serve(ws, False)
        o, size = one_page(ours, args, pick(30, 2))
        ours.close()
        theirs = serve(ws, True)
        t, _ = one_page(theirs, args, pick(3, 1))
        theirs.close()
        rows.append(f"| {name} ({size} bytes) | {o:.2f} ms | {t:.0f} ms | {t / o:.0f}x |")
    return [f"Median of 30 (ours) / 3 (0.2.20) first pages of lines {compact['start_line']}-{compact['end_line']}.", "", *rows]


def bench_walk(work: Path) -> list[str]:
    ws = prepared(work, pick("200M", "1M"))
    args = middle(ws, 2000, "compact")
    ours = serve(ws, False)
    runs = [walk(ours, args) for _ in range(pick(5, 1))]
    ours.close()
    o, pages = statistics.median(r[0] for r in runs), runs[0][1]
    theirs = serve(ws, True)
    t, their_pages = walk(theirs, args)
    theirs.close()
    # Tool-output handles count against our pages, so a walk can take a page or two more.
    return [f"Lines {args['start_line']}-{args['end_line']} compact; median of 5 walks (ours) / 1 (0.2.20).", "",
            "| 2000-line range walked | evidence-store | prompt-diary 0.2.20 | speed-up |", "|---|---|---|---|",
            f"| pages | {pages} | {their_pages} | |",
            f"| time | {o:.1f} ms | {t:.0f} ms | {t / o:.0f}x |"]


def bench_scale(work: Path) -> list[str]:
    rows = ["| session | evidence-store, one page | prompt-diary 0.2.20, one page |", "|---|---|---|"]
    for size in pick(("1M", "1G"), ("1M", "2M")):
        ws = prepared(work, size)
        args = middle(ws, 2000, "compact")
        ours = serve(ws, False)
        o, _ = one_page(ours, args, pick(30, 2))
        ours.close()
        theirs = serve(ws, True)
        t, _ = one_page(theirs, args, pick(1 if size == "1G" else 5, 1))
        theirs.close()
        rows.append(f"| {size}B | {o:.2f} ms | {t:.0f} ms |")
    return ["One compact page in the middle; median of 30 (ours) / 5 or 1 (0.2.20).", "", *rows]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", nargs="*", default=["page", "walk", "scale"])
    parser.add_argument("--work", default="/tmp/pg-bench")
    parser.add_argument("--bin", type=Path, default=bench.BIN, help="the evidence-store binary")
    args = smoke.parse(parser)
    bench.BIN, bench.SMOKE = args.bin.resolve(), args.smoke
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    for what in args.what:
        print(f"### {what}\n")
        print("\n".join({"page": bench_page, "walk": bench_walk, "scale": bench_scale}[what](work)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
