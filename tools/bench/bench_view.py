#!/usr/bin/env python3
"""The cost of `evidence-store view`: page size, seconds and peak RSS (GNU time -v).

Workspaces from tools/lib/gen_workspace.py (made once under --work, as tools/bench/bench.py makes
them): `read-200M`, one 200 MB session, and `view-1.8G`, eight sessions of 1.8 GB in all
(tool outputs up to 1 MiB). Each is measured twice: as generated (no evidence chain: the
coverage grid and the agent citations), and with a chain for every turn, written as cards,
each citing four small ranges of its turn (first line, three middle lines, last two, last
one), as an agent cites. Best time and largest peak RSS of --runs runs, warm page cache.

Usage: python3 tools/bench/bench_view.py [--bin target/release/evidence-store] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import smoke  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "tools" / "lib" / "gen_workspace.py"

WORKSPACES = {
    "read-200M": ["--projects", "1", "--sessions", "1", "--tool-output-max", "8K", "--session-bytes", "200M"],
    "view-1.8G": ["--projects", "2", "--sessions", "4", "--session-bytes", str(int(1.8 * (1 << 30) / 6)),
                  "--tool-output-max", "1M", "--edge-cases"],
}
SMOKE = {"view-2M": ["--projects", "2", "--sessions", "2", "--session-bytes", "512K", "--tool-output-max", "8K",
                     "--edge-cases"]}  # --smoke: CI's quick run that the script still works


def generate(out: Path, args: list[str]) -> dict:
    if (out / "summary.json").exists():
        return json.loads((out / "summary.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run([sys.executable, str(GEN), "--out", str(out), *args], check=True,
                          capture_output=True, text=True)
    summary = json.loads(done.stdout)
    (out / "summary.json").write_text(json.dumps(summary))
    return summary


def chain(turn: dict) -> dict:
    a, b = turn["turn_start_line"], turn["turn_end_line"]
    mid = (a + b) // 2

    def span(x: int, y: int) -> list[dict]:
        x, y = max(a, min(x, b)), max(a, min(y, b))
        return [{"lines": f"{x}-{y}"}]

    return {
        "turn_ref": turn["turn_ref"],
        "trigger": {"type": "explicit_user_message", "summary": "The user asked.", "quoted_messages": [],
                    "citations": span(a, a)},
        "agent_reactions": [{"summary": "The agent worked.", "citations": span(mid, mid + 2)}],
        "outcomes": [{"category": "code_outcome", "summary": "Something changed.", "citations": span(b - 1, b)}],
        "observed_checks": [],
        "terminal_state": {"type": "material_result", "summary": "Done.", "citations": span(b, b)},
        "materiality": "material",
    }


def set_cards(ws: Path, on: bool) -> int:
    chains = 0
    for index in ws.glob("projects/*/sessions.index.jsonl"):
        project = index.parent
        evidence = project / "evidence"
        shutil.rmtree(evidence, ignore_errors=True)
        if not on:
            continue
        evidence.mkdir()
        for row in index.read_text().splitlines():
            if not row.strip():
                continue
            row = json.loads(row)
            turns = [chain(t) for t in row["turns"]]
            chains += len(turns)
            card = {"schema_version": 1, "project_key": project.name, "session_ref": row["session_ref"],
                    "evidence_chains": turns}
            (evidence / f"{row['session_ref']}.json").write_text(json.dumps(card, indent=2) + "\n")
    return chains


def measure(binary: Path, ws: Path) -> tuple[float, float]:
    out = ws / "view.html"
    done = subprocess.run(["/usr/bin/time", "-v", str(binary), "--workspace", str(ws), "view", "--out", str(out)],
                          check=True, capture_output=True, text=True)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if not wall or not rss:
        sys.exit(f"cannot read GNU time's report:\n{done.stderr}")
    h, m, s = wall.groups()
    seconds = int(h or 0) * 3600 + int(m) * 60 + float(s)
    return seconds, int(rss.group(1)) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", type=Path, default=cargo_target.binary("release"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/evidence-store-bench"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("which", nargs="*", default=list(WORKSPACES))
    args = smoke.parse(ap, which=list(SMOKE), runs=1)
    WORKSPACES.update(SMOKE)
    args.work.mkdir(parents=True, exist_ok=True)
    print("| workspace | chains | page | seconds | peak RSS |")
    print("|---|---|---|---|---|")
    for name in args.which:
        ws = args.work / name
        summary = generate(ws, WORKSPACES[name])
        size = sum(p.stat().st_size for p in ws.glob("projects/*/sessions/*/*.jsonl"))
        label = f"{name} ({summary.get('sessions', '?')} sessions, {size / 1e9:.2f} GB, {summary.get('lines', '?')} lines)"
        for on in (False, True):
            chains = set_cards(ws, on)
            subprocess.run([str(args.bin), "--workspace", str(ws), "import"], check=True, capture_output=True)
            runs = [measure(args.bin, ws) for _ in range(args.runs)]
            page = (ws / "view.html").stat().st_size
            print(f"| {label} | {chains} | {page / 1e6:.1f} MB | {min(r[0] for r in runs):.2f} | "
                  f"{max(r[1] for r in runs):.0f} MB |", flush=True)
        set_cards(ws, False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
