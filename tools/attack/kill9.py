#!/usr/bin/env python3
"""kill -9 at random moments during writes, `export` (documents and citation receipts),
`import` and `build`: afterwards the store opens, every file is whole JSON, `verify`
agrees, and every acknowledged write is still there.

Each round starts a `serve` writer (write_evidence on fresh turns, evidence-gap work
items, the report title) and a loop of `export` / `import` / `build` processes, waits a
random 0.05-1.5 s, then SIGKILLs a random non-empty subset of them. Then, in order:
`verify` (read-only; a store a killed writer left may need repair first, noted), `import`
(must succeed), `verify` (must say no problems), `export` (must succeed and leave no temp
file of ours), every document and receipt must parse, every acknowledged evidence marker
and work item must be in its file. Exit 1 on any failure.

Usage: tools/.venv/bin/python tools/attack/kill9.py --schema 2 [--rounds 30]
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (Raw, add_citations, arguments, broken_or_lost, chain, cli, gap_item, indexes,  # noqa: E402
                    make_workspace, parse)


def main() -> int:
    parser = arguments(__doc__, "attack-kill9", schema=2)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    args = parse(parser, rounds=2)
    rng = random.Random(args.seed)
    ws = make_workspace(args.work / f"ws{args.schema}", args.schema, projects=3, sessions=8, turns=40)
    add_citations(ws)
    if cli(args.bin, ws, "import").returncode or cli(args.bin, ws, "build").returncode:
        print("setup failed")
        return 1
    evidence_turns = []
    gap_turns = []
    for project, rows in indexes(ws).items():
        for row in rows:
            for k, turn in enumerate(row["turns"]):
                (evidence_turns if k % 2 == 0 else gap_turns).append((project, row["session_ref"], turn))
    rng.shuffle(evidence_turns)
    rng.shuffle(gap_turns)
    acked_marks: dict[tuple[str, str, str], str] = {}
    acked_items: dict[str, set[str]] = {}
    failures: list[str] = []
    needs_repair = 0
    item_no = [0]

    for rnd in range(args.rounds):
        stop = threading.Event()
        raw = Raw(args.bin, ws)
        raw.initialize()

        def write() -> None:
            seq = 0
            while not stop.is_set() and raw.proc.poll() is None:
                seq += 1
                if evidence_turns:
                    project, session_ref, turn = evidence_turns[-1]
                    mark = f"r{rnd}-s{seq}"
                    got = raw.tool("write_evidence", {"project_key": project, "session_ref": session_ref,
                                                      "evidence_chain": chain(turn, args.schema, mark)}, timeout=30)
                    if got is None:
                        return
                    evidence_turns.pop()
                    if not got[0] and '"appended"' in got[1]:
                        acked_marks[(project, session_ref, turn["turn_ref"])] = mark
                if gap_turns and seq % 2 == 0:
                    project, session_ref, turn = gap_turns[-1]
                    item_no[0] += 1
                    ref = f"W{item_no[0]:04d}"
                    got = raw.tool("write_work_item", {"project_key": project, "work_item": gap_item(
                        ref, session_ref, turn["turn_ref"])}, timeout=30)
                    if got is None:
                        return
                    gap_turns.pop()
                    if not got[0] and '"appended"' in got[1]:
                        acked_items.setdefault(project, set()).add(ref)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        procs: list[subprocess.Popen] = []

        def loop() -> None:
            while not stop.is_set():
                command = rng.choice([["export"], ["export"], ["import"], ["build"]])
                p = subprocess.Popen([str(args.bin), "--workspace", str(ws), *command], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                procs.append(p)
                p.wait()

        looper = threading.Thread(target=loop, daemon=True)
        looper.start()
        time.sleep(rng.uniform(0.05, 1.5))
        victims = []
        if rng.random() < 0.7:
            victims.append(raw.proc)
        live = [p for p in procs if p.poll() is None]
        if live and (rng.random() < 0.7 or not victims):
            victims.append(live[-1])
        if not victims:
            victims.append(raw.proc)
        for p in victims:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        stop.set()
        looper.join(60)
        raw.close(30)
        writer.join(60)
        for p in procs:
            if p.poll() is None:
                p.wait(60)

        first = cli(args.bin, ws, "verify")
        if first.returncode != 0:
            if "repair" in (first.stderr + first.stdout).lower():
                needs_repair += 1
                if needs_repair == 1:
                    print(f"verify right after a kill said: {first.stderr.strip()[:300]}")
            else:
                failures.append(f"round {rnd}: verify right after the kill: {first.stderr.strip()[:400]} {first.stdout[-400:]}")
        steps = [("import",), ("verify",), ("export",)]
        for step in steps:
            done = cli(args.bin, ws, *step)
            if done.returncode != 0:
                failures.append(f"round {rnd}: {step[0]} exited {done.returncode}: {done.stderr.strip()[:400]} "
                                f"{done.stdout.strip()[-400:]}")
        temps = [p for p in ws.rglob("*.evidence-store.tmp")]
        if temps:
            failures.append(f"round {rnd}: temp files left after export: {[str(t) for t in temps[:3]]}")
        failures += [f"round {rnd}: {f}" for f in broken_or_lost(ws, acked_marks, acked_items)]
        killed = ",".join("serve" if v is raw.proc else " ".join(v.args[3:]) for v in victims)
        print(f"round {rnd}: killed {killed}; verify first {first.returncode}; acked so far: "
              f"{len(acked_marks)} evidence, {sum(map(len, acked_items.values()))} items; failures {len(failures)}",
              flush=True)
        if len(failures) > 20:
            break
    print(f"{needs_repair} round(s) where verify first asked for a repair")
    for f in failures[:30]:
        print("FAILURE:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
