#!/usr/bin/env python3
"""Hostile file systems: symlinks, hard links and FIFOs planted at every path the tools
read or write, traversal in the workspace's own strings, a racing directory swap.

Each scenario starts from a fresh copy of one imported workspace (schema 2 or 7, with
agent citations), plants something, runs the commands and tools that touch that path
(with a timeout, so a hang is a failure), and checks that nothing outside the workspace
was created, changed or read into an answer (an `OUT` directory beside the workspace
holds the victims, and its tree and bytes are compared before and after). Each scenario
prints what it saw; exit 1 when any scenario failed.

Usage: tools/.venv/bin/python tools/attack/hostile_fs.py --schema 7 [--only NAME] [--race-seconds 20]
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Raw, add_citations, arguments, chain, cli, gap_item, indexes, make_workspace, parse  # noqa: E402

SECRET = "SECRET-OUTSIDE-0123456789"


def tree(path: Path) -> dict[str, str]:
    """Every entry under `path` with what it is and a digest of regular files."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for p in sorted(path.rglob("*")):
        rel = str(p.relative_to(path))
        if p.is_symlink():
            out[rel] = "link " + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        else:
            out[rel] = "dir"
    return out


class Ctx:
    """One scenario's workspace, victim directory and helpers."""

    def __init__(self, base: Path, work: Path, name: str, binary: Path, schema: int):
        self.ws = work / name / "ws"
        self.out = work / name / "OUT"
        shutil.rmtree(work / name, ignore_errors=True)
        (work / name).mkdir(parents=True)
        shutil.copytree(base, self.ws, symlinks=True)
        self.out.mkdir()
        (self.out / "victim.json").write_text(json.dumps({"secret": SECRET}) + "\n")
        self.bin = binary
        self.schema = schema
        self.project, rows = next(iter(indexes(self.ws).items()))
        self.rows = rows
        self.notes: list[str] = []
        self.failures: list[str] = []
        self.before = tree(self.out)

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess | None:
        try:
            done = cli(self.bin, self.ws, *args, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.failures.append(f"`{' '.join(args)}` hung (no exit within {timeout} s)")
            return None
        text = (done.stdout + done.stderr).strip().replace("\n", " | ")
        self.notes.append(f"{' '.join(args)} -> {done.returncode}: {text[:260]}")
        if SECRET in done.stdout + done.stderr:
            self.failures.append(f"`{' '.join(args)}` printed the outside secret")
        return done

    def serve(self) -> Raw:
        raw = Raw(self.bin, self.ws)
        raw.initialize()
        return raw

    def tool(self, raw: Raw, name: str, arguments: dict) -> tuple[bool, str] | None:
        got = raw.tool(name, arguments, timeout=30)
        if got is None:
            self.failures.append(f"{name} got no answer within 30 s")
            return None
        self.notes.append(f"{name} -> {'isError ' if got[0] else ''}{got[1][:260]!r}")
        if SECRET in got[1]:
            self.failures.append(f"{name} answered with the outside secret")
        return got

    def write_evidence(self, raw: Raw, row: int = 0, turn: int = 0) -> tuple[bool, str] | None:
        r = self.rows[row]
        return self.tool(raw, "write_evidence", {"project_key": self.project, "session_ref": r["session_ref"],
                                                 "evidence_chain": chain(r["turns"][turn], self.schema, "hostile")})

    def serve_and_write(self) -> None:
        """One server that writes evidence for the first turn, then exits."""
        raw = self.serve()
        self.write_evidence(raw)
        raw.close()

    def card(self) -> Path:
        """The first session's evidence card, its directory made."""
        (p_dir(self) / "evidence").mkdir(exist_ok=True)
        return p_dir(self) / "evidence" / f"{self.rows[0]['session_ref']}.json"

    def finish(self) -> None:
        after = tree(self.out)
        if after != self.before:
            changed = {k: (self.before.get(k), after.get(k)) for k in set(after) | set(self.before)
                       if after.get(k) != self.before.get(k)}
            self.failures.append(f"outside directory changed: {changed}")
        outside_store = [p for p in self.out.rglob("*") if p.name.endswith(".redb") or p.name == "documents.lock"]
        if outside_store:
            self.failures.append(f"created outside: {outside_store}")


def p_dir(c: Ctx) -> Path:
    return c.ws / "projects" / c.project


def s_evidence_dir_symlink(c: Ctx) -> None:
    shutil.rmtree(p_dir(c) / "evidence", ignore_errors=True)
    os.symlink(c.out, p_dir(c) / "evidence")
    c.serve_and_write()
    c.run("export")


def s_card_symlink(c: Ctx) -> None:
    os.symlink(c.out / "victim.json", c.card())
    c.serve_and_write()
    c.run("import")
    c.run("export")


def s_card_symlink_dangling(c: Ctx) -> None:
    os.symlink(c.out / "new.json", c.card())
    c.serve_and_write()
    c.run("export")


def s_card_fifo(c: Ctx) -> None:
    os.mkfifo(c.card())
    c.serve_and_write()
    c.run("import")
    c.run("export")


def s_synthesis_symlink(c: Ctx) -> None:
    os.symlink(c.out / "victim.json", p_dir(c) / "project-synthesis.json")
    raw = c.serve()
    r = c.rows[0]
    c.tool(raw, "write_work_item", {"project_key": c.project,
                                    "work_item": gap_item("W0001", r["session_ref"], r["turns"][1]["turn_ref"])})
    raw.close()
    c.run("build")
    c.run("export")


def s_report_symlink(c: Ctx) -> None:
    (c.ws / "daily-report.json").unlink(missing_ok=True)
    os.symlink(c.out / "victim.json", c.ws / "daily-report.json")
    c.run("build")
    c.run("export")


def s_receipts_dir_symlink(c: Ctx) -> None:
    shutil.rmtree(p_dir(c) / "receipts", ignore_errors=True)
    for d in c.ws.glob("projects/*/receipts"):
        shutil.rmtree(d)
    for p in c.ws.glob("projects/*"):
        os.symlink(c.out, p / "receipts")
    c.run("export")


def s_receipt_file_symlink(c: Ctx) -> None:
    c.run("import")  # the copied session files are other files than the ones the store saw
    c.run("export")
    receipts = sorted(c.ws.glob("projects/*/receipts/evidence-*.json"))
    if not receipts:
        c.failures.append("setup: no receipts were written")
        return
    for r in receipts[:3]:
        r.unlink()
        os.symlink(c.out / "victim.json", r)
    c.run("export")
    left = [r for r in receipts[:3] if r.is_symlink()]
    c.notes.append(f"planted receipt links still links: {len(left)} of 3")
    c.run("export")


def s_receipt_dir_is_file(c: Ctx) -> None:
    for d in c.ws.glob("projects/*/receipts"):
        shutil.rmtree(d)
    (p_dir(c) / "receipts").write_text("not a directory")
    c.run("export")


def s_store_dir_symlink(c: Ctx) -> None:
    shutil.rmtree(c.ws / ".evidence-store")
    os.symlink(c.out, c.ws / ".evidence-store")
    c.run("import")
    c.serve_and_write()
    c.run("export")


def s_store_file_symlink(c: Ctx) -> None:
    shutil.rmtree(c.ws / ".evidence-store")
    (c.ws / ".evidence-store").mkdir()
    os.symlink(c.out / "victim.json", c.ws / ".evidence-store" / "store.redb")
    c.run("import")
    c.run("verify")
    c.run("dump")


def s_store_file_symlink_dangling(c: Ctx) -> None:
    shutil.rmtree(c.ws / ".evidence-store")
    (c.ws / ".evidence-store").mkdir()
    os.symlink(c.out / "store.redb", c.ws / ".evidence-store" / "store.redb")
    c.run("import")


def s_lock_symlink(c: Ctx) -> None:
    lock = c.ws / ".evidence-store" / "documents.lock"
    lock.unlink(missing_ok=True)
    os.symlink(c.out / "victim.json", lock)
    c.serve_and_write()
    c.run("export")
    c.run("build")


def s_store_is_fifo(c: Ctx) -> None:
    store = c.ws / ".evidence-store" / "store.redb"
    store.unlink()
    os.mkfifo(store)
    c.run("import", timeout=40)
    c.run("verify")
    c.run("dump")
    c.run("import", "--rebuild", timeout=40)


def s_session_fifo(c: Ctx) -> None:
    r = c.rows[1]
    path = p_dir(c) / r["session_path"]
    path.unlink()
    os.mkfifo(path)
    c.run("import", timeout=30)
    raw = c.serve()
    c.tool(raw, "read_session_lines", {"project_key": c.project, "session_ref": r["session_ref"],
                                       "start_line": 1, "end_line": 2})
    raw.close()
    c.run("export")
    c.run("import", "--rebuild", timeout=30)


def s_session_symlink_outside(c: Ctx) -> None:
    r = c.rows[1]
    path = p_dir(c) / r["session_path"]
    (c.out / "session.jsonl").write_bytes(path.read_bytes().replace(b"passed", SECRET.encode(), 50))
    c.before = tree(c.out)
    path.unlink()
    os.symlink(c.out / "session.jsonl", path)
    c.run("import")
    raw = c.serve()
    c.tool(raw, "read_session_lines", {"project_key": c.project, "session_ref": r["session_ref"],
                                       "start_line": 1, "end_line": 40, "mode": "full"})
    raw.close()
    c.run("import", "--rebuild")


def s_session_swapped_after_import(c: Ctx) -> None:
    """The session file becomes a symlink to an outside copy after import (same bytes)."""
    r = c.rows[1]
    path = p_dir(c) / r["session_path"]
    data = path.read_bytes()
    (c.out / "session.jsonl").write_bytes(data)
    c.before = tree(c.out)
    path.unlink()
    os.symlink(c.out / "session.jsonl", path)
    raw = c.serve()  # serve imports first: it must refuse the file now
    c.tool(raw, "read_session_lines", {"project_key": c.project, "session_ref": r["session_ref"],
                                       "start_line": 1, "end_line": 3, "mode": "full"})
    raw.close()


def s_sessions_dir_swapped_live(c: Ctx) -> None:
    """A server that already imported keeps serving while the session's directory is
    replaced by a symlink to an outside copy holding a secret at the same offsets."""
    r = c.rows[1]
    path = p_dir(c) / r["session_path"]
    raw = c.serve()
    c.tool(raw, "read_session_lines", {"project_key": c.project, "session_ref": r["session_ref"],
                                       "start_line": 1, "end_line": 1})
    src_dir = path.parent
    copy = c.out / "sessdir"
    shutil.copytree(src_dir, copy)
    (copy / path.name).write_bytes(path.read_bytes())
    c.before = tree(c.out)
    os.rename(src_dir, src_dir.with_name(src_dir.name + ".moved"))
    os.symlink(copy, src_dir)
    c.tool(raw, "read_session_lines", {"project_key": c.project, "session_ref": r["session_ref"],
                                       "start_line": 1, "end_line": 3, "mode": "full"})
    raw.close()


def s_traversal_in_index(c: Ctx) -> None:
    index = p_dir(c) / "sessions.index.jsonl"
    rows = [json.loads(line) for line in index.read_text().splitlines() if line.strip()]
    rows[0]["turns"][0]["turn_ref"] = "../../../../OUT/x"
    rows[1]["session_ref"] = "../S9"
    index.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c.run("import")
    c.run("export")
    rows[1]["session_ref"] = "S0002"
    rows[1]["session_path"] = "../../../OUT/victim.json"
    index.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c.run("import")
    rows[1]["session_path"] = "/etc/passwd"
    index.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c.run("import")


def s_turn_ref_slash(c: Ctx) -> None:
    """A turn ref that is valid to prompt-diary but holds a path separator: its receipt."""
    index = p_dir(c) / "sessions.index.jsonl"
    rows = [json.loads(line) for line in index.read_text().splitlines() if line.strip()]
    for row in rows:
        for t in row["turns"]:
            t["turn_ref"] = "../../../OUT/" + t["turn_ref"]
    index.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c.run("import")
    c.run("export")


def s_citation_cwd_symlink(c: Ctx) -> None:
    """A cited file inside the citing line's cwd that is a symlink to an outside file."""
    proj = c.ws.parent / "proj"
    shutil.copytree(c.ws.parent.parent / "base-proj", proj)
    (c.out / "mod_1.py").write_text("".join(f"{SECRET} {n}\n" for n in range(60)))
    c.before = tree(c.out)
    for f in (proj / "src").glob("mod_*.py"):
        f.unlink()
        os.symlink(c.out / "mod_1.py", f)
    c.run("verify-citations")
    c.run("dump", "citations")
    c.run("export")
    done = c.run("dump", "--json", "citations")
    if done and hashlib.sha256((c.out / "mod_1.py").read_bytes()).hexdigest() in done.stdout:
        c.failures.append("the outside file's SHA-256 was recorded for a citation")


def s_workspace_root_symlink(c: Ctx) -> None:
    """The workspace given as a symlink to itself: fine; writes must land in the real one."""
    link = c.ws.parent / "wslink"
    os.symlink(c.ws, link)
    done = cli(c.bin, link, "import")
    c.notes.append(f"import via link -> {done.returncode}")


SCENARIOS: dict[str, Callable[[Ctx], None]] = {
    name[2:]: fn for name, fn in globals().items() if name.startswith("s_") and callable(fn)
}


def race(base: Path, work: Path, binary: Path, schema: int, seconds: float) -> list[str]:
    """A thread swaps projects/P/evidence between the real directory and a symlink to OUT
    as fast as it can, while one server writes evidence to fresh turns."""
    big = make_workspace(work / "race-base", schema, projects=1, sessions=8, turns=100, tool_output_max="4K")
    if cli(binary, big, "import").returncode:
        return ["race: setup import failed"]
    c = Ctx(big, work, "race", binary, schema)
    ev = p_dir(c) / "evidence"
    ev.mkdir(exist_ok=True)
    stop = threading.Event()
    swaps = [0]

    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = libc.renameat2
    at_fdcwd, rename_exchange = -100, 2
    link = p_dir(c) / "evidence.link"
    os.symlink(c.out, link)

    def exchange() -> None:
        if renameat2(at_fdcwd, bytes(ev), at_fdcwd, bytes(link), rename_exchange) != 0:
            raise OSError(ctypes.get_errno(), "renameat2")

    def swapper() -> None:
        # Atomic exchanges (renameat2 RENAME_EXCHANGE): `evidence` is the real directory,
        # then for a moment the symlink to OUT, then the real directory again.
        while not stop.is_set():
            exchange()
            exchange()
            swaps[0] += 1
            time.sleep(0.0002)

    t = threading.Thread(target=swapper, daemon=True)
    raw = c.serve()
    # A valid card of the first session waits outside, carrying a marker of its own: a read
    # through the swapped directory would adopt it.
    first = c.rows[0]
    got = raw.tool("write_evidence", {"project_key": c.project, "session_ref": first["session_ref"],
                                      "evidence_chain": chain(first["turns"][-1], schema, "seed")}, timeout=30)
    if got and '"appended"' in got[1]:
        card = (ev / f"{first['session_ref']}.json").read_text(encoding="utf-8")
        (c.out / f"{first['session_ref']}.json").write_text(card.replace('"seed"', '"FROM-OUTSIDE"'), encoding="utf-8")
    planted = set(p.name for p in c.out.iterdir())
    t.start()
    started = time.time()
    writes = acked = 0
    reasons: dict[str, int] = {}
    acked_marks: list[tuple[str, str]] = []
    turns = [(r, k) for r in range(len(c.rows)) for k in range(len(c.rows[r]["turns"]))
             if (r, k) != (0, len(c.rows[0]["turns"]) - 1)]
    while time.time() - started < seconds and turns:
        r, k = turns.pop(0)
        got = raw.tool("write_evidence", {"project_key": c.project, "session_ref": c.rows[r]["session_ref"],
                                          "evidence_chain": chain(c.rows[r]["turns"][k], schema, f"race{r}-{k}")},
                       timeout=30)
        writes += 1
        if got and '"appended"' in got[1]:
            acked += 1
            acked_marks.append((c.rows[r]["session_ref"], f"race{r}-{k}"))
        elif got:
            why = json.loads(got[1])["errors"][0]["message"] if got[1].startswith("{") else got[1]
            why = why.split(":", 1)[-1][:100]
            reasons[why] = reasons.get(why, 0) + 1
        else:
            reasons["no answer"] = reasons.get("no answer", 0) + 1
    stop.set()
    t.join(5)
    raw.close()
    if (p_dir(c) / "evidence.link").is_symlink() and not ev.exists():
        pass
    landed = [str(p.relative_to(c.out)) for p in c.out.rglob("*") if p.name not in planted]
    adopted = [p.name for p in ev.glob("*.json") if "FROM-OUTSIDE" in p.read_text(encoding="utf-8")]
    if adopted:
        print(f"race: the outside card was adopted into the store and written back as {adopted}")
    lost = [m for ref, m in acked_marks
            if f'"{m}"' not in (ev / f"{ref}.json").read_text(encoding="utf-8")]
    if lost:
        print(f"race: {len(lost)} acknowledged writes are not in the workspace's card: {lost[:5]}")
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:5]:
        print(f"race: refused {n}x: {reason!r}")
    print(f"race: {writes} writes ({acked} acknowledged), {swaps[0]} swaps; files that landed outside: {landed[:10]}")
    problems = [f"race: {len(landed)} file(s) written outside the workspace through a swapped directory: {landed[:5]}"] \
        if landed else []
    if adopted:
        problems.append(f"race: an outside file's content was adopted as {adopted}")
    if lost:
        problems.append(f"race: {len(lost)} acknowledged writes missing from the workspace card")
    return problems


def main() -> int:
    parser = arguments(__doc__, "attack-fs", schema=2)
    parser.add_argument("--only", action="append")
    parser.add_argument("--race-seconds", type=float, default=20.0)
    args = parse(parser, race_seconds=1.0, only=["card_symlink", "receipt_file_symlink", "store_dir_symlink", "race"])
    work = args.work / f"s{args.schema}"
    shutil.rmtree(work, ignore_errors=True)
    base = make_workspace(work / "base", args.schema)
    proj = add_citations(base)
    shutil.move(str(proj), work / "base-proj")
    # Citations point at the project directory each scenario copies beside its workspace.
    for f in base.glob("projects/*/sessions/claude-code/*.jsonl"):
        f.write_bytes(f.read_bytes().replace(str(proj).encode(), str(work / "SCEN" / "proj").encode()))
    if cli(args.bin, base, "import").returncode or cli(args.bin, base, "build").returncode:
        print("setup failed")
        return 1
    failed = 0
    for name, fn in SCENARIOS.items():
        if args.only and name not in args.only:
            continue
        c = Ctx(base, work, "SCEN", args.bin, args.schema)
        try:
            fn(c)
        except Exception as e:  # noqa: BLE001 - a scenario's own crash is reported, not fatal
            c.failures.append(f"scenario raised {type(e).__name__}: {e}")
        c.finish()
        verdict = "FAIL" if c.failures else "held"
        print(f"== {name}: {verdict}")
        for n in c.notes:
            print(f"   {n}")
        for f in c.failures:
            print(f"   FAILURE: {f}")
        failed += bool(c.failures)
        shutil.rmtree(work / "SCEN", ignore_errors=True)
    if not args.only or "race" in args.only:
        problems = race(base, work, args.bin, args.schema, args.race_seconds)
        for p in problems:
            print("FAILURE:", p)
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
