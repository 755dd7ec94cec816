#!/usr/bin/env python3
"""How long a write waits for a long `export`, for several builds side by side.

Setup (once): a generated workspace (schema 2) of --sessions sessions of two turns, with
agent citations on every Claude assistant line (so that export writes a receipt per
citing turn), and a card file of about 2 KB for every session.

Per binary, on a fresh copy: `import`; a `serve` started (it imports at start) and
pinged; then every card and receipt file is deleted, so that `export` writes them all
again from the store (each an atomic replace with its fsyncs). While that export runs,
the `serve` writes evidence chains one after another, each to a session whose card is
not written yet, and each write's latency is timed: the longest is how long a writer
waited for the export's document lock (49c0ea5 held it, and a write transaction, for
the whole export). Reported: the export's time and what it wrote, the writes answered
during it, and their median and longest latency.

Usage: tools/.venv/bin/python tools/bench/bench_export_lock.py BIN [BIN ...] [--sessions 3000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attack"))
from common import ROOT, add_citations, chain, indexes, parse  # noqa: E402
from mcp_client import LockstepClient  # noqa: E402


def make_workspace(ws: Path, sessions: int) -> None:
    shutil.rmtree(ws, ignore_errors=True)
    subprocess.run([sys.executable, str(ROOT / "tools" / "lib" / "gen_workspace.py"), "--out", str(ws), "--seed", "7",
                    "--projects", "1", "--sessions", str(sessions), "--turns", "2", "--tool-output-max", "1K"],
                   check=True, stdout=subprocess.DEVNULL)
    add_citations(ws, every=1)
    for project, rows in indexes(ws).items():
        for row in rows:
            card = {"project_key": project, "session_ref": row["session_ref"], "evidence_chains": [],
                    "note": "x" * 2000}
            path = ws / "projects" / project / "evidence" / f"{row['session_ref']}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(card, indent=2))


def documents_on_disk(ws: Path) -> list[Path]:
    return [*ws.glob("projects/*/evidence/*.json"), *ws.glob("projects/*/receipts/*.json")]


def run(bin_: str, base: Path, work: Path) -> str:
    ws = work / f"ws-{Path(bin_).name}"
    shutil.rmtree(ws, ignore_errors=True)
    shutil.copytree(base, ws, symlinks=True)
    subprocess.run([bin_, "--workspace", str(ws), "import"], check=True, capture_output=True)
    # A first export writes the receipts; the files are then deleted, for the timed one.
    subprocess.run([bin_, "--workspace", str(ws), "export"], check=True, capture_output=True)
    client = LockstepClient([bin_, "serve"], {"PROMPT_DIARY_WORKSPACE": str(ws),
                                             "EVIDENCE_STORE_LOCK_TIMEOUT_SECS": "600"})
    client.initialize()
    client.request_raw("tools/call", {"name": "prompt_diary_ping", "arguments": {}})
    files = documents_on_disk(ws)
    for path in files:
        path.unlink()
    project, rows = next(iter(indexes(ws).items()))
    # Written from the last session back: the export writes cards in order, so these
    # cards are not written yet when the write comes.
    targets = iter(reversed(rows))
    started = time.monotonic()
    export = subprocess.Popen([bin_, "--workspace", str(ws), "export"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={"EVIDENCE_STORE_LOCK_TIMEOUT_SECS": "600", "PATH": "/usr/bin:/bin"})
    latencies: list[float] = []
    sent_at: list[float] = []
    t_start = time.perf_counter()
    answered_during = 0
    done = threading.Event()
    out: list[str] = []
    def wait_export() -> None:
        out.append(export.communicate()[0])
        done.set()
    threading.Thread(target=wait_export, daemon=True).start()
    # The export holds the lock from its start: the first write waits for it.
    while not done.is_set():
        row = next(targets)
        turn = row["turns"][0]
        args = {"project_key": project, "session_ref": row["session_ref"],
                "evidence_chain": chain(turn, 2, f"probe {row['session_ref']}")}
        t0 = time.perf_counter()
        line = client.request_raw("tools/call", {"name": "write_evidence", "arguments": args})
        took = time.perf_counter() - t0
        text = json.loads(line)["result"]["content"][0]["text"]
        assert json.loads(text)["status"] == "appended", text[:300]
        latencies.append(took)
        sent_at.append(t0 - t_start)
        answered_during += not done.is_set()
    export_s = time.monotonic() - started
    client.close()
    assert export.returncode == 0, export.returncode
    said = " ".join(out[0].split()) if out else ""
    longest = max(range(len(latencies)), key=latencies.__getitem__)
    ranked = sorted(latencies)
    p90 = ranked[min(len(ranked) - 1, int(len(ranked) * 0.9))]
    return (f"{bin_}: export {export_s:.1f} s ({said}); {len(latencies)} write(s) sent during it, "
            f"{answered_during} answered before it ended; latency median "
            f"{statistics.median(latencies) * 1000:.0f} ms, 90th percentile {p90 * 1000:.0f} ms, longest "
            f"{latencies[longest]:.2f} s (sent {sent_at[longest]:.1f} s into the export)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bins", nargs="+")
    parser.add_argument("--sessions", type=int, default=3000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/evidence-store-bench-export-lock"))
    args = parse(parser, sessions=40)
    base = args.work / f"base-{args.sessions}"
    if not (base / "metadata.json").exists():
        make_workspace(base, args.sessions)
    for bin_ in args.bins:
        print(run(str(Path(bin_).resolve()), base, args.work), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
