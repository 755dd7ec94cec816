#!/usr/bin/env python3
"""The cost of `evidence-store view`, the new build beside an older one in the same run:
the pages' sizes, `view`'s seconds and peak RSS (GNU time -v), and the seconds headless
Chromium takes to load the first page, beside an empty page.

Days, made once under --work from tools/lib/gen_workspace.py, each with the documents
agents leave (tools/lib/day_documents.py: a chain for every turn, a work item per session,
a daily report with a title and every project's summary):

- `day-45x12`: 45 sessions (3 projects x 15) of 12 turns;
- `day-45x12-2K`: the same with tool outputs of at most 2 KiB (a day that fits one page);
- `day-45-226M`: 45 sessions of about 5 MiB each (tool outputs up to 64 KiB);
- `10k-sessions`: 10,000 sessions of 2 turns (one project);
- `hostile-card`: one session of 48 lines of about 12 KiB, and a 19 KB card whose one
  chain cites "1-40" a thousand times (which `write_evidence` accepts);
- `big-card`: one session of 2,000 turns and its 40 MiB card (each chain quotes 20 KiB).

Each is imported by each binary into a store of its own, `view` runs --runs times (the
best seconds and the largest peak RSS are kept), then Chromium opens the first page
--loads times (`--headless --screenshot`, a fresh profile each time; the best of the
runs, minus the best of an empty page's), for the days of 45 sessions.

Usage: python3 tools/bench/bench_view.py [--bin target/release/evidence-store]
       [--old /path/to/old/evidence-store] [--work DIR] [--runs 2] [--loads 3] [DAY ...]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import day_documents  # noqa: E402
import smoke  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "tools" / "lib" / "gen_workspace.py"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--window-size=1280,1600"]

DAYS = {
    "day-45x12": ["--projects", "3", "--sessions", "15", "--turns", "12"],
    "day-45x12-2K": ["--projects", "3", "--sessions", "15", "--turns", "12", "--tool-output-max", "2K"],
    "day-45-226M": ["--projects", "3", "--sessions", "15", "--session-bytes", "5M", "--tool-output-max", "64K"],
    "10k-sessions": ["--projects", "1", "--sessions", "10000", "--turns", "2", "--tool-output-max", "1K"],
    "hostile-card": ["--projects", "1", "--sessions", "1", "--turns", "8", "--tool-output-max", "12K"],
    "big-card": ["--projects", "1", "--sessions", "1", "--turns", "2000", "--tool-output-max", "1K"],
}
LOADED = {"day-45x12", "day-45x12-2K", "day-45-226M"}  # the days whose first page Chromium loads
SMOKE = {"smoke-day": ["--projects", "2", "--sessions", "2", "--turns", "3"]}


def generate(out: Path, args: list[str]) -> dict:
    if (out / "summary.json").exists():
        return json.loads((out / "summary.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run([sys.executable, str(GEN), "--out", str(out), *args], check=True,
                          capture_output=True, text=True)
    summary = json.loads(done.stdout)
    (out / "summary.json").write_text(json.dumps(summary))
    return summary


def hostile_card(ws: Path) -> int:
    """The one chain citing "1-40" a thousand times, as the card of the day's one session."""
    day_documents.clear(ws)
    index = next(ws.glob("projects/*/sessions.index.jsonl"))
    row = json.loads(index.read_text().splitlines()[0])
    chain = day_documents.chain(row["turns"][0])
    chain["outcomes"][0]["citations"] = [{"lines": "1-40"}] * 1000
    card = {"schema_version": 1, "project_key": index.parent.name, "session_ref": row["session_ref"],
            "evidence_chains": [chain]}
    path = index.parent / "evidence" / f"{row['session_ref']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(card))
    return 1


def big_card(ws: Path) -> int:
    """The day's documents, each chain quoting 20 KiB: one card of about 40 MiB."""
    chains = day_documents.write(ws)
    for card_path in ws.glob("projects/*/evidence/*.json"):
        card = json.loads(card_path.read_text())
        for chain in card["evidence_chains"]:
            chain["trigger"]["quoted_messages"] = [{"text": "q" * (20 << 10), "citations": chain["trigger"]["citations"]}]
        card_path.write_text(json.dumps(card, indent=2) + "\n")
    return chains


def time_v(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """(seconds, peak RSS MiB, the run) of `cmd` under GNU time -v."""
    done = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if done.returncode != 0 or not wall or not rss:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    h, m, s = wall.groups()
    return int(h or 0) * 3600 + int(m) * 60 + float(s), int(rss.group(1)) / 1024, done


def pages(out: Path) -> list[Path]:
    """The first page and the session pages beside it (`<stem>.<state>.<n>.html`)."""
    stem = out.name.removesuffix(".html")
    return [out] + sorted(p for p in out.parent.glob(f"{stem}.*.html")
                          if re.fullmatch(rf"{re.escape(stem)}\.[0-9a-f]{{12}}\.\d{{4,}}\.html", p.name))


def load_seconds(chromium: str, url: str, loads: int) -> float:
    """The best wall seconds of `loads` headless screenshots of `url`, fresh profile each."""
    best = float("inf")
    for _ in range(loads):
        with tempfile.TemporaryDirectory(prefix="bench-view-chromium-") as profile:
            shot = Path(profile) / "shot.png"
            started = time.monotonic()
            subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}/p", f"--screenshot={shot}", url],
                           capture_output=True, timeout=600)
            took = time.monotonic() - started
            if not shot.exists():
                sys.exit(f"chromium made no screenshot of {url}")
            best = min(best, took)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", type=Path, default=cargo_target.binary("release"))
    ap.add_argument("--old", type=Path, help="an older build to measure beside --bin")
    ap.add_argument("--work", type=Path, default=Path("/tmp/evidence-store-bench"))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--loads", type=int, default=3)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "")
    ap.add_argument("which", nargs="*", default=list(DAYS))
    args = smoke.parse(ap, which=list(SMOKE), runs=1, loads=0)
    DAYS.update(SMOKE)
    args.work.mkdir(parents=True, exist_ok=True)
    builds = [("new", args.bin)] + ([("old", args.old)] if args.old else [])
    empty = None
    if args.loads and args.chromium:
        blank = args.work / "empty.html"
        blank.write_text("<!DOCTYPE html><title>empty</title>")
        empty = load_seconds(args.chromium, blank.as_uri(), args.loads)
        print(f"Chromium, an empty page: {empty:.2f} s (best of {args.loads})\n")
    print("| day | build | pages | first page | largest page | all pages | view s | peak RSS | Chromium load s (over empty) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.which:
        ws = args.work / name
        summary = generate(ws, DAYS[name])
        documents = {"hostile-card": hostile_card, "big-card": big_card}.get(name, day_documents.write)
        chains = documents(ws)
        size = sum(p.stat().st_size for p in ws.glob("projects/*/sessions/*/*.jsonl"))
        label = f"{name} ({summary.get('sessions', '?')} sessions, {size / (1 << 20):.0f} MiB, {chains} chains)"
        for build, binary in builds:
            store = ws / f".store-{build}" / "store.redb"
            out = ws / f"view-{build}" / "view.html"
            out.parent.mkdir(exist_ok=True)
            subprocess.run([str(binary), "--workspace", str(ws), "--store", str(store), "import"], check=True,
                           capture_output=True)
            runs = [time_v([str(binary), "--workspace", str(ws), "--store", str(store), "view", "--out", str(out)])
                    for _ in range(args.runs)]
            written = pages(out)
            sizes = [p.stat().st_size for p in written]
            load = ""
            if empty is not None and name in LOADED:
                took = load_seconds(args.chromium, out.as_uri(), args.loads)
                load = f"{took:.2f} ({took - empty:+.2f})"
            mib = 1 << 20
            print(f"| {label} | {build} | {len(written)} | {sizes[0] / mib:.2f} MiB | {max(sizes) / mib:.2f} MiB | "
                  f"{sum(sizes) / mib:.1f} MiB | {min(r[0] for r in runs):.2f} | {max(r[1] for r in runs):.0f} MiB | "
                  f"{load} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
