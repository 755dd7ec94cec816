#!/usr/bin/env python3
"""N `serve` writers against loops of `import`, `export`, `build`, `verify`,
`verify-citations` and `dump`: is every acknowledged write in the files and the store?

Setup: a generated workspace (schema 2 or 7) with agent citations, imported; a probe pass
finds the turns whose evidence is accepted (even turns) and leaves the odd turns free for
evidence-gap work items; `build` makes the daily report so that slot writers can write.

Run (--seconds): --writers `serve` processes, each owning a disjoint set of turns, loop
write_evidence (a fresh marker each time), write_work_item (each gap turn once) and
write_report_title / write_project_summary (writer 0 and 1), counting every
acknowledgement; meanwhile --loopers threads run the CLI commands in a loop (one of them
only `export`, the command that lost writes before), recording every non-zero exit.

Check: after the writers close, `import`, `export` and `verify` must succeed; every last
acknowledged evidence marker must be in its card file, every acknowledged work item in
project-synthesis.json, the last acknowledged title in daily-report.json unless a build
started after it; then the store alone (a copy whose document files are deleted, then
exported) must give back the same files. Exit 1 on any failure.

Servers starting and stopping (--cyclers): each thread starts `serve`, initializes, pings and
closes stdin, again and again; every run must answer the ping `ok` and exit 0. Their opens
and closes of the store must never make a `verify` beside them report a problem: a loop of
its own for each command in --dedicated (`verify`, `export`, `dump --stats` by default when
--cyclers is set) counts every run, and every non-zero exit (a `verify` saying "damaged" or
"not closed cleanly" of a healthy store: a false alarm) is a failure.

Usage: tools/.venv/bin/python tools/attack/concurrency.py --schema 7 [--seconds 60] [--writers 4]
       tools/.venv/bin/python tools/attack/concurrency.py --seconds 60 --writers 4 --cyclers 4 --loopers 0
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (Raw, add_citations, arguments, chain, cli, gap_item, indexes,  # noqa: E402
                    make_workspace, parse, verdict)

LOOP_COMMANDS = [["import"], ["export"], ["build"], ["verify"], ["verify-citations"], ["dump", "--stats"],
                 ["dump", "citations"]]


def status(got: tuple[bool, str] | None) -> str:
    if got is None:
        return "no answer"
    if got[0]:
        return "error: " + got[1][:200]
    try:
        return json.loads(got[1]).get("status", "?")
    except ValueError:
        return "bad json: " + got[1][:200]


def main() -> int:
    parser = arguments(__doc__, "attack-concurrency", schema=2, seconds=60.0)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--loopers", type=int, default=2)
    parser.add_argument("--cyclers", type=int, default=0, help="threads starting and stopping servers")
    parser.add_argument("--dedicated", nargs="*", default=None,
                        help="commands with a loop of their own (default with --cyclers: verify, export, dump --stats)")
    args = parse(parser, seconds=1.0, writers=1, loopers=1, cyclers=0)
    if args.dedicated is None:
        args.dedicated = ["verify", "export", "dump --stats"] if args.cyclers else []
    ws = make_workspace(args.work / f"ws{args.schema}", args.schema, projects=3, sessions=6, turns=24)
    add_citations(ws)
    failures: list[str] = []
    done = cli(args.bin, ws, "import")
    if done.returncode:
        print(done.stderr)
        return 1

    # Even turns get evidence (once each: a turn takes one chain), odd turns are left for
    # evidence-gap work items.
    evidence_turns: list[tuple[str, str, dict]] = []
    gap_turns: list[tuple[str, str, str]] = []
    for project, rows in indexes(ws).items():
        for row in rows:
            for k, turn in enumerate(row["turns"]):
                if k % 2 == 0:
                    evidence_turns.append((project, row["session_ref"], turn))
                else:
                    gap_turns.append((project, row["session_ref"], turn["turn_ref"]))
    done = cli(args.bin, ws, "build")
    print(f"{len(evidence_turns)} evidence turns, {len(gap_turns)} gap turns; build: {done.stdout.strip()}")

    stop = threading.Event()
    lock = threading.Lock()
    last_mark: dict[tuple[str, str, str], str] = {}
    acked_items: dict[str, set[str]] = {}
    titles: list[tuple[float, str]] = []
    summaries: dict[str, tuple[float, str]] = {}
    build_starts: list[float] = []
    counts = {"evidence": 0, "work_item": 0, "title": 0, "summary": 0, "refused": 0, "no answer": 0}
    loop_failures: list[str] = []
    loop_runs = [0]
    cycles = [0]
    dedicated_runs: dict[str, int] = {c: 0 for c in args.dedicated}

    def writer(k: int) -> None:
        mine = list(evidence_turns[k::args.writers])
        gaps = list(gap_turns[k::args.writers])
        committed: list[tuple[str, str, dict]] = []
        raw = Raw(args.bin, ws)
        raw.initialize()
        seq = 0
        while not stop.is_set():
            seq += 1
            mark = f"w{k}-s{seq}"
            if mine:
                project, session_ref, turn = mine.pop()
                got = raw.tool("write_evidence", {"project_key": project, "session_ref": session_ref,
                                                  "evidence_chain": chain(turn, args.schema, mark)})
                st = status(got)
                with lock:
                    if st == "appended":
                        last_mark[(project, session_ref, turn["turn_ref"])] = mark
                        committed.append((project, session_ref, turn))
                        counts["evidence"] += 1
                    elif got is None or got[0] or "trigger line" not in got[1]:
                        counts["no answer" if got is None else "refused"] += 1
                        loop_failures.append(f"writer {k} write_evidence: {st} {got[1][:300] if got else ''}")
                    else:
                        counts["refused"] += 1  # an edge-case line as the 0.2.20 trigger
            if gaps and seq % 2 == 0:
                project, session_ref, turn_ref = gaps.pop()
                ref = f"W{k}{len(gaps):03d}"  # prompt-diary wants W and four digits
                got = raw.tool("write_work_item", {"project_key": project,
                                                   "work_item": gap_item(ref, session_ref, turn_ref)})
                with lock:
                    if status(got) == "appended":
                        acked_items.setdefault(project, set()).add(ref)
                        counts["work_item"] += 1
                    else:
                        counts["refused"] += 1
                        loop_failures.append(f"writer {k} write_work_item {ref}: {status(got)} {got[1][:300] if got else ''}")
            if k in (0, 1) and committed and (seq % 3 == 0 or not mine):
                project, session_ref, turn = committed[0]
                t = time.time()
                if k == 0:
                    text = f"TITLE {mark}"
                    got = raw.tool("write_report_title", {"title": {"text": text, "citations": [
                        {"project_key": project, "session_ref": session_ref, "turn_ref": turn["turn_ref"]}]}})
                else:
                    text = f"SUMMARY {mark}"
                    got = raw.tool("write_project_summary", {"project_key": project, "summary": {
                        "text": text, "citations": [{"session_ref": session_ref, "turn_ref": turn["turn_ref"]}]}})
                with lock:
                    if status(got) == "written":
                        if k == 0:
                            titles.append((t, text))
                            counts["title"] += 1
                        else:
                            summaries[project] = (t, text)
                            counts["summary"] += 1
                    else:
                        counts["refused"] += 1
                        loop_failures.append(f"writer {k} slot write: {status(got)} {got[1][:300] if got else ''}")
            if not mine and not gaps and k not in (0, 1):
                time.sleep(0.05)
        code = raw.close(60)
        if code != 0:
            with lock:
                loop_failures.append(f"writer {k} exited {code}")

    def looper(n: int) -> None:
        rng = random.Random(100 + n)
        while not stop.is_set():
            command = ["export"] if n == 0 else rng.choice(LOOP_COMMANDS)
            if command == ["build"]:
                with lock:
                    build_starts.append(time.time())
            done = cli(args.bin, ws, *command)
            with lock:
                loop_runs[0] += 1
                if done.returncode != 0:
                    loop_failures.append(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()[:400]}")

    def cycler(k: int) -> None:
        while not stop.is_set():
            raw = Raw(args.bin, ws)
            raw.initialize(f"cycler-{k}")
            got = raw.tool("prompt_diary_ping", {})
            code = raw.close(60)
            with lock:
                cycles[0] += 1
                if got is None or got[0] or '"ok"' not in got[1]:
                    loop_failures.append(f"cycler {k} ping: {status(got)} {got[1][:300] if got else ''}")
                if code != 0:
                    loop_failures.append(f"cycler {k} serve exited {code}")

    def dedicated(command: str) -> None:
        while not stop.is_set():
            done = cli(args.bin, ws, *command.split())
            with lock:
                dedicated_runs[command] += 1
                if done.returncode != 0:
                    said = (done.stdout.strip()[-400:] + " " + done.stderr.strip()[-400:]).strip()
                    loop_failures.append(f"{command} exited {done.returncode}: {said}")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(args.writers)]
    threads += [threading.Thread(target=looper, args=(n,)) for n in range(args.loopers)]
    threads += [threading.Thread(target=cycler, args=(k,)) for k in range(args.cyclers)]
    threads += [threading.Thread(target=dedicated, args=(c,)) for c in args.dedicated]
    for t in threads:
        t.start()
    time.sleep(args.seconds)
    stop.set()
    for t in threads:
        t.join(300)
    print(f"acknowledged: {counts}; CLI runs: {loop_runs[0]}; server starts and stops: {cycles[0]}; "
          f"dedicated loops: {dedicated_runs}; failures during the run: {len(loop_failures)}")
    for f in loop_failures[:20]:
        print("  during:", f)
    failures += loop_failures

    for command in (["import"], ["export"], ["verify"], ["verify-citations"], ["verify"]):
        done = cli(args.bin, ws, *command)
        print(f"after: {' '.join(command)} -> {done.returncode} {done.stdout.strip().splitlines()[-1:]}")
        if done.returncode != 0:
            failures.append(f"after the run, {' '.join(command)} exited {done.returncode}: {done.stderr[:400]}")

    lost = 0
    for (project, session_ref, turn_ref), mark in last_mark.items():
        card = ws / "projects" / project / "evidence" / f"{session_ref}.json"
        text = card.read_text(encoding="utf-8") if card.exists() else ""
        try:
            json.loads(text)
        except ValueError:
            failures.append(f"{card} is not whole JSON")
        if f'"{mark}"' not in text:
            lost += 1
            if lost <= 5:
                failures.append(f"acknowledged evidence {mark} for {project}/{session_ref}/{turn_ref} is not in {card.name}")
    lost_items = 0
    for project, refs in acked_items.items():
        syn = ws / "projects" / project / "project-synthesis.json"
        text = syn.read_text(encoding="utf-8") if syn.exists() else ""
        for ref in refs:
            if f'"{ref}"' not in text:
                lost_items += 1
                if lost_items <= 5:
                    failures.append(f"acknowledged work item {ref} of {project} is not in project-synthesis.json")
    report = (ws / "daily-report.json").read_text(encoding="utf-8")
    if titles:
        t, text = titles[-1]
        if text not in report and not any(b > t for b in build_starts):
            failures.append(f"the last acknowledged title {text!r} is not in daily-report.json and no build ran after it")
        print(f"last title {text!r} in report: {text in report}; builds after it: {sum(b > t for b in build_starts)}")
    for project, (t, text) in summaries.items():
        print(f"last summary {text!r} in report: {text in report}; builds after it: {sum(b > t for b in build_starts)}")
        if text not in report and not any(b > t for b in build_starts):
            failures.append(f"the last acknowledged summary {text!r} is not in daily-report.json and no build ran after it")
    print(f"evidence: {len(last_mark)} turns checked, {lost} lost; work items: "
          f"{sum(map(len, acked_items.values()))} checked, {lost_items} lost")

    # The store alone gives back the same files.
    copy = args.work / f"copy{args.schema}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(ws, copy, symlinks=True)
    documents = [*copy.glob("projects/*/evidence/*.json"), *copy.glob("projects/*/project-synthesis.json"),
                 copy / "daily-report.json", *copy.glob("projects/*/receipts/*.json")]
    for p in documents:
        p.unlink()
    done = cli(args.bin, copy, "export")
    # Receipts are left out: the copy's session files are other files (new inodes), which
    # export refuses to write receipts for, as it should.
    diff = subprocess.run(["diff", "-rq", "-x", ".evidence-store", "-x", "receipts", str(ws), str(copy)],
                          capture_output=True, text=True)
    print(f"store-only export: {done.returncode}; differences: {diff.stdout.strip() or 'none'}")
    if done.returncode or diff.returncode:
        failures.append(f"the store does not give back the files: {diff.stdout[:400]} {done.stderr[:400]}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
