#!/usr/bin/env python3
"""The smallest address-space limit (`ulimit -v`) under which `serve` still answers 40
concurrent full reads and a write, for several builds side by side.

For each binary and each limit (largest first), `serve` is started under
`ulimit -v LIMIT`, sent 40 `read_session_lines` full reads of 100 lines (pipelined, all in
flight at once) and one `write_report_title`, and every answer is awaited (up to --give-up
seconds). A limit "holds" when all 41 answers arrive and none is an error. Without a limit,
the same load reports the process's peak RSS (VmHWM) and peak address space (VmPeak).

Usage: tools/.venv/bin/python tools/bench/bench_address_space.py BIN [BIN ...] [--limits 1024,512,...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attack"))
from common import indexes, make_workspace, parse  # noqa: E402
from mcp_client import INITIALIZED, Client, initialize_params, message, tool_call  # noqa: E402


def run_load(bin_: str, ws: Path, store: Path, limit_mib: int | None, give_up: float) -> tuple[str, str]:
    prefix = f"ulimit -v {limit_mib * 1024}; " if limit_mib else ""
    raw = Client(["bash", "-c", prefix + 'exec "$0" --workspace "$1" --store "$2" serve', bin_, str(ws), str(store)],
                 stderr=subprocess.PIPE)
    proc = raw.proc
    raw.send(message(0, "initialize", initialize_params("b")))
    raw.send(INITIALIZED)
    project, rows = next(iter(indexes(ws).items()))
    session = max(rows, key=lambda r: r.get("line_count", 0) or r.get("turn_end_line", 0))
    lines = max(t["turn_end_line"] for t in session.get("turns", [])) if session.get("turns") else 200
    for i in range(40):
        start = 1 + (i * 7) % max(1, lines - 100)
        raw.send(message(1 + i, "tools/call", tool_call("read_session_lines", {
            "project_key": project, "session_ref": session["session_ref"],
            "start_line": start, "end_line": min(lines, start + 99), "mode": "full"})))
    raw.send(message(41, "tools/call", tool_call("write_report_title",
                                                  {"title": {"title": "A day", "source_user_messages": []}})))
    end = time.monotonic() + give_up
    with raw.cond:
        while len(raw.answers) < 42 and not raw.eof and time.monotonic() < end and proc.poll() is None:
            raw.cond.wait(0.2)
        answers = {json.loads(key): msg for key, msg in raw.answers.items()}
    peak = ""
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        peak = f"VmHWM {int(fields['VmHWM'].split()[0]) // 1024} MB, VmPeak {int(fields['VmPeak'].split()[0]) // 1024} MB"
    except (OSError, KeyError, ValueError):
        pass
    proc.kill()
    _, err = proc.communicate()
    bad = [i for i in range(1, 42) if i not in answers or "error" in answers[i]
           or answers[i].get("result", {}).get("isError")]
    if not bad:
        return "holds", peak
    tail = err.decode(errors="replace").strip().splitlines()[-1:] if err else []
    return f"fails ({len(bad)} of 41 unanswered or errors{'; ' + tail[0][:80] if tail else ''})", peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bins", nargs="+")
    parser.add_argument("--limits", default="1024,512,384,256,192,160,128")
    parser.add_argument("--work", type=Path, default=Path("/tmp/evidence-store-bench-address-space"))
    parser.add_argument("--give-up", type=float, default=120.0)
    args = parse(parser, limits="1024", give_up=30.0)
    ws = args.work / "ws"
    if not ws.exists():
        make_workspace(ws, 2, projects=1, sessions=2, turns=60, tool_output_max="64K")
    for n, bin_ in enumerate(args.bins):
        store = args.work / f"store-{n}.redb"
        subprocess.run([bin_, "--workspace", str(ws), "--store", str(store), "import"], check=True, capture_output=True)
        verdict, peak = run_load(bin_, ws, store, None, args.give_up)
        print(f"{bin_}: no limit: {verdict}, {peak}", flush=True)
        for limit in map(int, args.limits.split(",")):
            verdict, _ = run_load(bin_, ws, store, limit, args.give_up)
            print(f"{bin_}: ulimit -v {limit} MiB: {verdict}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
