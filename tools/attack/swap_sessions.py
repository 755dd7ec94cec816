#!/usr/bin/env python3
"""A session file swapped, again and again, for a FIFO and for a symlink to a copy
outside the workspace, while everything that reads session files runs against it.

For `--seconds` (default 60), on a generated workspace of schema 2 or 7 (with agent
citations, so that export writes receipts from the session files):
- a swapper exchanges the session file (renameat2 RENAME_EXCHANGE) with a FIFO, then with
  a symlink to an outside copy of the same bytes, then puts it back, every few ms;
- one loop runs `import --rehash` and `export` (every file opened and hashed again,
  receipts read from the session lines), each with a timeout;
- one `serve` reads the session (compact and full) and its handle (`tool_output_read`);
- another `serve` writes evidence chains for the session's turns (`write_evidence`, which
  on schema 7 reads the trigger line), then work items once the turns are used up.

At the end the file is put back and the workspace must import, verify and read. Reports
requests answered, refused and unanswered, commands ended and hung, whether each `serve`
ended when its stdin closed, and every open or read of the outside copy (inotify).
Exit 1 when anything hung, went unanswered, or the outside copy was opened.

Usage: tools/.venv/bin/python tools/attack/swap_sessions.py --schema 7 [--bin PATH] [--seconds 60]
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Raw, add_citations, arguments, chain, cli, gap_item, indexes, make_workspace, parse  # noqa: E402

LIBC = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
AT_FDCWD = -100
IN_ACCESS, IN_OPEN = 0x1, 0x20
IN_NONBLOCK = 0o4000

# Longer than the document lock's bounded wait: a request still unanswered then is stuck.
ANSWER_TIMEOUT = 60.0


def exchange(a: Path, b: Path) -> None:
    if LIBC.renameat2(AT_FDCWD, bytes(a), AT_FDCWD, bytes(b), RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


class OpenWatch:
    """inotify on one file: counts opens and reads of it by anyone."""

    def __init__(self, path: Path):
        self.fd = LIBC.inotify_init1(IN_NONBLOCK)
        if self.fd < 0 or LIBC.inotify_add_watch(self.fd, bytes(path), IN_OPEN | IN_ACCESS) < 0:
            raise OSError(ctypes.get_errno(), "inotify")
        self.opens = 0
        self.reads = 0

    def poll(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            at = 0
            while at + 16 <= len(data):
                _wd, mask, _cookie, length = struct.unpack_from("iIII", data, at)
                self.opens += bool(mask & IN_OPEN)
                self.reads += bool(mask & IN_ACCESS)
                at += 16 + length


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.failures: list[str] = []
        self.samples: dict[str, list[str]] = {}

    def add(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def sample(self, name: str, text: str) -> None:
        """Keeps the first few distinct refusals of each kind, to show what they said."""
        import re
        short = re.sub(r"\d+", "N", text)[:240]
        with self.lock:
            seen = self.samples.setdefault(name, [])
            if short not in seen and len(seen) < 4:
                seen.append(short)

    def fail(self, what: str) -> None:
        with self.lock:
            if len(self.failures) < 50:
                self.failures.append(what)
            self.counts["failures"] = self.counts.get("failures", 0) + 1


def swapper(path: Path, fifo: Path, link: Path, stop: threading.Event, tally: Tally) -> None:
    """Cycles the name through the FIFO, the symlink and the real file; the real file is
    always back in place when it returns."""
    while not stop.is_set():
        for other in (fifo, link):
            exchange(path, other)
            time.sleep(0.002)
            exchange(path, other)
            tally.add(f"swaps {'fifo' if other == fifo else 'symlink'}")
            time.sleep(0.002)


def command_loop(binary: Path, ws: Path, deadline: float, tally: Tally) -> None:
    n = 0
    while time.time() < deadline:
        n += 1
        args = ("export",) if n % 3 == 0 else ("import", "--rehash")
        name = args[0]
        try:
            done = cli(binary, ws, *args, timeout=ANSWER_TIMEOUT)
        except subprocess.TimeoutExpired:
            tally.fail(f"`{' '.join(args)}` did not end within {ANSWER_TIMEOUT:.0f} s")
            tally.add(f"{name} hung")
            continue
        tally.add(f"{name} {'ok' if done.returncode == 0 else 'refused'}")


def answered(tally: Tally, name: str, got: tuple[bool, str] | None, ok_marker: str) -> None:
    if got is None:
        tally.fail(f"{name} got no answer within {ANSWER_TIMEOUT:.0f} s")
        tally.add(f"{name} unanswered")
        return
    ok = ok_marker in got[1] and not got[0]
    tally.add(f"{name} {'ok' if ok else 'refused'}")
    if not ok:
        tally.sample(name, got[1])


def reader_loop(raw: Raw, project: str, session_ref: str, handle: str | None, deadline: float,
                tally: Tally) -> None:
    while time.time() < deadline:
        for mode in ("compact", "full"):
            got = raw.tool("read_session_lines", {"project_key": project, "session_ref": session_ref,
                                                  "start_line": 1, "end_line": 3, "mode": mode},
                           timeout=ANSWER_TIMEOUT)
            answered(tally, f"read {mode}", got, '"line"')
        if handle:
            got = raw.tool("tool_output_read", {"handle": handle, "start_line": 1, "end_line": 2},
                           timeout=ANSWER_TIMEOUT)
            answered(tally, "tool_output_read", got, "TOOL OUTPUT")


def writer_loop(raw: Raw, schema: int, project: str, row: dict, others: list[dict], deadline: float,
                tally: Tally) -> None:
    turns = list(row["turns"])
    gaps = [(r["session_ref"], t["turn_ref"]) for r in others for t in r["turns"]]
    n = items = 0
    while time.time() < deadline:
        n += 1
        if turns:
            # Round robin: a turn whose trigger line is no human input is refused for
            # good, the others once the file is back.
            turn = turns[n % len(turns)]
            got = raw.tool("write_evidence", {"project_key": project, "session_ref": row["session_ref"],
                                              "evidence_chain": chain(turn, schema, f"swap {n}")},
                           timeout=ANSWER_TIMEOUT)
            answered(tally, "write_evidence", got, '"appended"')
            if got is not None and '"appended"' in got[1]:
                turns.remove(turn)
        elif gaps:
            # Every turn of the session has its chain: work items (each covering one turn
            # of another session of the project) keep the writes going.
            session_ref, turn_ref = gaps[0]
            got = raw.tool("write_work_item", {"project_key": project, "work_item": gap_item(
                f"W{items + 1:04d}", session_ref, turn_ref)}, timeout=ANSWER_TIMEOUT)
            gaps.pop(0)
            answered(tally, "write_work_item", got, '"appended"')
            if got is not None and '"appended"' in got[1]:
                items += 1
        else:
            time.sleep(0.05)


def first_handle(binary: Path, ws: Path, project: str, rows: list[dict]) -> tuple[dict, str | None]:
    """The first session with a handle, and that handle (else the first session)."""
    for row in rows:
        done = cli(binary, ws, "dump", "handles", project, row["session_ref"], "--json", timeout=120)
        if done.returncode == 0:
            listed = json.loads(done.stdout)
            if listed:
                return row, listed[0]["handle"]
    return rows[0], None


def run(binary: Path, schema: int, seconds: float, work: Path) -> int:
    base = make_workspace(work / f"ws{schema}", schema, turns=20)
    add_citations(base)
    ws = base
    done = cli(binary, ws, "import", timeout=300)
    if done.returncode != 0:
        print(done.stderr)
        return 1
    project, rows = next(iter(indexes(ws).items()))
    row, handle = first_handle(binary, ws, project, rows)
    path = ws / "projects" / project / row["session_path"]
    out = work / f"OUT{schema}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    copy = out / path.name
    copy.write_bytes(path.read_bytes())
    watch = OpenWatch(copy)
    fifo = path.with_name(path.name + ".fifo")
    link = path.with_name(path.name + ".link")
    for p in (fifo, link):
        if p.exists() or p.is_symlink():
            p.unlink()
    os.mkfifo(fifo)
    os.symlink(copy, link)

    tally = Tally()
    readers = Raw(binary, ws)
    writers = Raw(binary, ws)
    if readers.initialize() is None or writers.initialize() is None:
        print("serve did not initialize")
        return 1
    # A server imports at its first tool call; that happens before the swapping starts
    # (one whose start-up import meets the symlink refuses the workspace until restarted).
    for raw in (readers, writers):
        got = raw.tool("read_session_lines", {"project_key": project, "session_ref": row["session_ref"],
                                              "start_line": 1, "end_line": 1}, timeout=ANSWER_TIMEOUT)
        if got is None or '"line"' not in got[1]:
            print(f"serve did not read before the swapping: {got!r}"[:400])
            return 1
    stop = threading.Event()
    deadline = time.time() + seconds
    swap = threading.Thread(target=swapper, args=(path, fifo, link, stop, tally))
    loops = [
        threading.Thread(target=command_loop, args=(binary, ws, deadline, tally)),
        threading.Thread(target=reader_loop, args=(readers, project, row["session_ref"], handle, deadline, tally)),
        threading.Thread(target=writer_loop, args=(writers, schema, project, row,
                                                   [r for r in rows if r is not row], deadline, tally)),
    ]
    started = time.time()
    swap.start()
    for t in loops:
        t.start()
    for t in loops:
        t.join()
    stop.set()
    swap.join()
    ran = time.time() - started
    watch.poll()

    # Afterwards: the workspace as it was imports, verifies and reads.
    for args in (("import", "--rehash"), ("verify",), ("export",)):
        try:
            done = cli(binary, ws, *args, timeout=ANSWER_TIMEOUT)
            tally.add(f"after: {' '.join(args)} exit {done.returncode}")
            if done.returncode != 0:
                tally.fail(f"after the loop `{' '.join(args)}` failed: {done.stderr.strip()[:300]}")
        except subprocess.TimeoutExpired:
            tally.fail(f"after the loop `{' '.join(args)}` hung")
    got = readers.tool("read_session_lines", {"project_key": project, "session_ref": row["session_ref"],
                                              "start_line": 1, "end_line": 3, "mode": "full"},
                       timeout=ANSWER_TIMEOUT)
    if got is None or got[0] or '"line"' not in got[1]:
        tally.fail(f"after the loop a read failed: {got!r}"[:400])
    for name, raw in (("reader serve", readers), ("writer serve", writers)):
        code = raw.close(timeout=30)
        tally.add(f"{name} exit {code}")
        if code is None:
            tally.fail(f"{name} did not end within 30 s of closing stdin")
    watch.poll()
    if watch.opens or watch.reads:
        tally.fail(f"the outside copy was opened {watch.opens} times and read {watch.reads} times")

    print(f"schema {schema}: {ran:.0f} s, session {row['session_ref']} ({path.stat().st_size} bytes), "
          f"handle {'yes' if handle else 'no'}")
    for key in sorted(tally.counts):
        print(f"  {key}: {tally.counts[key]}")
    print(f"  outside copy: {watch.opens} opens, {watch.reads} reads")
    for name, seen in sorted(tally.samples.items()):
        for text in seen:
            print(f"  refused {name}: {text}")
    for failure in tally.failures:
        print(f"  FAIL {failure}")
    return 1 if tally.failures else 0


def main() -> int:
    parser = arguments(__doc__, "evidence-store-swap", schema=7, seconds=60.0)
    args = parse(parser, seconds=1.0)
    return run(args.bin.resolve(), args.schema, args.seconds, args.work)


if __name__ == "__main__":
    sys.exit(main())
