#!/usr/bin/env python3
"""A full disk and read-only media, for real: the workspace on a small tmpfs (needs root).

Full disk: writes, `build`, `export` (documents and receipts) and `import` run while a
filler file takes every free byte, then the filler goes and writing resumes. Every
answer must be an answer (a refusal naming the full disk, never a hang or a crash), every
file whole JSON, every acknowledged write present, and `verify` clean at the end.

Read-only: the same tmpfs remounted read-only: `dump`, `verify` and reads must work,
writes must be refused with an answer.

Usage: tools/.venv/bin/python tools/attack/diskfull.py --schema 2 [--size-mb 14]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (Raw, add_citations, arguments, broken_or_lost, chain, cli, gap_item, indexes,  # noqa: E402
                    make_workspace, parse)


def fill(path: Path) -> int:
    """Writes zeros to `path` until the file system is full; returns the bytes written."""
    n = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (64 << 10, 512, 1):
            block = b"\0" * size
            while True:
                try:
                    n += os.write(fd, block)
                except OSError:
                    break
    finally:
        os.close(fd)
    return n


def main() -> int:
    parser = arguments(__doc__, None, schema=2)
    parser.add_argument("--mnt", type=Path, default=Path("/tmp/attack-diskfull"))
    parser.add_argument("--size-mb", type=int, default=14)
    args = parse(parser)
    failures: list[str] = []
    src = make_workspace(args.mnt.parent / f"{args.mnt.name}-src{args.schema}", args.schema)  # beside the mount
    add_citations(src)
    args.mnt.mkdir(parents=True, exist_ok=True)
    subprocess.run(["umount", str(args.mnt)], capture_output=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.size_mb}m", "tmpfs", str(args.mnt)], check=True)
    try:
        ws = args.mnt / "ws"
        shutil.copytree(src, ws)
        for step in (["import"], ["build"], ["export"]):
            done = cli(args.bin, ws, *step)
            if done.returncode:
                print(f"setup {step}: {done.stderr}")
                return 1
        rows = [(p, r) for p, rs in indexes(ws).items() for r in rs]
        turns = [(p, r["session_ref"], t) for p, r in rows for t in r["turns"]]
        evidence = turns[0::2]
        gaps = turns[1::2]
        acked: dict[tuple[str, str, str], str] = {}
        items: dict[str, set[str]] = {}
        raw = Raw(args.bin, ws)
        raw.initialize()

        def write_some(n: int, tag: str) -> dict[str, int]:
            seen: dict[str, int] = {}
            for i in range(n):
                if not evidence:
                    break
                project, session_ref, turn = evidence.pop()
                got = raw.tool("write_evidence", {"project_key": project, "session_ref": session_ref,
                                                  "evidence_chain": chain(turn, args.schema, f"{tag}-{i}")}, timeout=60)
                if got is None:
                    failures.append(f"{tag}: write_evidence got no answer")
                    seen["no answer"] = seen.get("no answer", 0) + 1
                    continue
                if '"appended"' in got[1]:
                    acked[(project, session_ref, turn["turn_ref"])] = f"{tag}-{i}"
                    key = "appended"
                else:
                    key = got[1].replace("\n", " ")[:200]
                seen[key] = seen.get(key, 0) + 1
                if gaps and i % 2 == 0:
                    project, session_ref, turn = gaps.pop()
                    ref = f"W{len(gaps):04d}"
                    got = raw.tool("write_work_item", {"project_key": project, "work_item": gap_item(
                        ref, session_ref, turn["turn_ref"])}, timeout=60)
                    if got and '"appended"' in got[1]:
                        items.setdefault(project, set()).add(ref)
            return seen

        print("before filling:", write_some(6, "pre"))
        filler = args.mnt / "filler"
        print(f"filler: {fill(filler)} bytes; df: {shutil.disk_usage(args.mnt).free} free")
        print("full:", write_some(10, "full"))
        for step in (["build"], ["export"], ["import"], ["verify"], ["verify-citations"]):
            done = cli(args.bin, ws, *step)
            print(f"full: {' '.join(step)} -> {done.returncode}: {(done.stdout + done.stderr).strip()[-220:]}")
        got = raw.tool("write_report_title", {"title": {"text": "full", "citations": []}}, timeout=60)
        print("full: write_report_title ->", got and got[1][:200].replace("\n", " "))
        # Nearly full: the card may fit where the store's commit does not (or the reverse).
        for free_kb in (4, 8, 16, 32, 64, 128, 256, 512):
            os.truncate(filler, max(0, filler.stat().st_size - free_kb * 1024))
            print(f"{free_kb} KiB free:", write_some(3, f"near{free_kb}"))
            done = cli(args.bin, ws, "export")
            print(f"{free_kb} KiB free: export -> {done.returncode}: {(done.stdout + done.stderr).strip()[-160:]}")
            filler.unlink()
            fill(filler)
        filler.unlink()
        print("freed:", write_some(10, "post"))
        code = raw.close(60)
        if code != 0:
            failures.append(f"serve exited {code}")
        for step in (["import"], ["export"], ["verify"]):
            done = cli(args.bin, ws, *step)
            print(f"after: {' '.join(step)} -> {done.returncode}: {(done.stdout + done.stderr).strip()[-220:]}")
            if done.returncode:
                failures.append(f"after freeing space, {' '.join(step)} exited {done.returncode}")
        failures += broken_or_lost(ws, acked, items)
        print(f"acknowledged: {len(acked)} evidence, {sum(map(len, items.values()))} work items")

        # Read-only media.
        subprocess.run(["mount", "-o", "remount,ro", str(args.mnt)], check=True)
        for step in (["dump", "--stats"], ["verify"], ["export"], ["import"], ["build"]):
            try:
                done = cli(args.bin, ws, *step, timeout=60)
                print(f"read-only: {' '.join(step)} -> {done.returncode}: {(done.stdout + done.stderr).strip()[-200:]}")
                if step[0] in ("dump", "verify") and done.returncode:
                    failures.append(f"read-only: {' '.join(step)} exited {done.returncode}")
            except subprocess.TimeoutExpired:
                failures.append(f"read-only: {' '.join(step)} hung")
        raw = Raw(args.bin, ws)
        init = raw.initialize()
        if init is None:
            failures.append("read-only: serve did not answer initialize")
        else:
            project, row = rows[0]
            got = raw.tool("read_session_lines", {"project_key": project, "session_ref": row["session_ref"],
                                                  "start_line": 1, "end_line": 3}, timeout=60)
            print("read-only: read ->", got and got[1][:160].replace("\n", " "))
            if got is None:
                failures.append("read-only: read_session_lines got no answer")
            project, session_ref, turn = evidence.pop() if evidence else turns[0]
            got = raw.tool("write_evidence", {"project_key": project, "session_ref": session_ref,
                                              "evidence_chain": chain(turn, args.schema, "ro")}, timeout=60)
            print("read-only: write ->", got and got[1][:200].replace("\n", " "))
            if got is None:
                failures.append("read-only: write_evidence got no answer")
        raw.close(30)
    finally:
        subprocess.run(["umount", str(args.mnt)], capture_output=True)
    for f in failures:
        print("FAILURE:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
