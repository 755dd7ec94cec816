#!/usr/bin/env python3
"""The smallest address-space limit (`ulimit -v`) under which `serve` still answers 40
concurrent full reads and a write, for several builds side by side.

For each binary and each limit (largest first), `serve` is started under
`ulimit -v LIMIT`, sent 40 `read_session_lines` full reads of 100 lines (pipelined, all in
flight at once) and one `write_report_title`, and every answer is awaited (up to --give-up
seconds). A limit "holds" when all 41 answers arrive and none is an error. Without a limit,
the same load reports the process's peak RSS (VmHWM) and peak address space (VmPeak).

With --huge MB, the load is instead 16 full reads of one range of MB lines of 1 MB each (a
session added for it), all in flight at once: each answer is over MB megabytes. A limit
"holds" when every read is answered whole or refused with a structured error and `serve`
is still running; the peak RSS and address space are measured without a limit, as above.

Usage: tools/.venv/bin/python tools/bench/bench_address_space.py BIN [BIN ...] [--limits 1024,512,...]
       tools/.venv/bin/python tools/bench/bench_address_space.py OLD NEW --huge 100 --limits 512
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
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


HUGE_READS = 16
HUGE_REF = "S9100"


def add_huge_session(ws: Path, lines: int) -> str:
    """Adds session HUGE_REF to the first project: `lines` lines of about 1 MB, full of
    characters JSON escapes. Returns the project's key."""
    project, _ = next(iter(indexes(ws).items()))
    filler = 'quote " backslash \\ tab \t é 😀 plain text ' * (2**20 // 48 + 1)
    rel = "sessions/claude-code/huge.jsonl"
    path = ws / "projects" / project / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(json.dumps({"type": "user", "message": {"role": "user", "content": f"{i} {filler}"}},
                               ensure_ascii=False) + "\n")
    with (ws / "projects" / project / "sessions.index.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"session_ref": HUGE_REF, "source": "claude-code", "source_session_id": "huge",
                            "session_path": rel, "target_start_line": 1, "target_end_line": 1, "turns": []}) + "\n")
    return project


def peak_of(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return f"VmHWM {int(fields['VmHWM'].split()[0]) // 1024} MB, VmPeak {int(fields['VmPeak'].split()[0]) // 1024} MB"
    except (OSError, KeyError, ValueError):
        return ""


def run_huge_load(bin_: str, ws: Path, store: Path, project: str, lines: int, limit_mib: int | None,
                  give_up: float) -> tuple[str, str]:
    """16 full reads of lines 1..`lines` of HUGE_REF, in flight at once; every answer is
    read as it comes, raw (a line of over 100 MB is not parsed), and counted whole (a result
    longer than the range) or refused (a structured error)."""
    prefix = f"ulimit -v {limit_mib * 1024}; " if limit_mib else ""
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(["bash", "-c", prefix + 'exec "$0" --workspace "$1" --store "$2" serve', bin_, str(ws),
                             str(store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(message(0, "initialize", initialize_params("b"))).encode() + b"\n")
    proc.stdin.write(json.dumps(INITIALIZED).encode() + b"\n")
    for i in range(1, HUGE_READS + 1):
        proc.stdin.write(json.dumps(message(i, "tools/call", tool_call("read_session_lines", {
            "project_key": project, "session_ref": HUGE_REF, "start_line": 1, "end_line": lines,
            "mode": "full"}))).encode() + b"\n")
    proc.stdin.flush()
    whole, refused, peak, started = 0, 0, "", time.monotonic()
    while whole + refused < HUGE_READS and time.monotonic() - started < give_up:
        line = proc.stdout.readline()
        if not line.endswith(b"\n"):
            break
        head = line[:200].decode(errors="replace")
        if '"id":0,' in head:
            continue
        if len(line) > lines << 20:
            whole += 1
        elif '\\"status\\": \\"invalid\\"' in line.decode(errors="replace") or '"error"' in head:
            refused += 1
        peak = peak_of(proc.pid) or peak
    alive = proc.poll() is None
    proc.kill()
    proc.wait()
    err.seek(0)
    tail = err.read().decode(errors="replace").strip().splitlines()[-1:]
    took = time.monotonic() - started
    if alive and whole + refused == HUGE_READS:
        return f"holds ({whole} whole, {refused} refused, all answered in {took:.1f} s)", peak
    how = "running" if alive else f"exited {proc.returncode}"
    return (f"fails ({whole} whole, {refused} refused of {HUGE_READS}; serve {how}"
            f"{'; ' + tail[0][:80] if tail else ''})"), peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bins", nargs="+")
    parser.add_argument("--limits", default="1024,512,384,256,192,160,128")
    parser.add_argument("--work", type=Path, default=Path("/tmp/evidence-store-bench-address-space"))
    parser.add_argument("--give-up", type=float, default=120.0)
    parser.add_argument("--huge", type=int, metavar="MB", help="16 full reads of a range of MB lines of 1 MB instead")
    args = parse(parser, limits="1024", give_up=30.0)
    if args.smoke and args.huge:
        args.huge = 4
    ws = args.work / ("ws" if not args.huge else f"ws-huge-{args.huge}")
    if not ws.exists():
        make_workspace(ws, 2, projects=1, sessions=2, turns=60, tool_output_max="64K")
        if args.huge:
            add_huge_session(ws, args.huge)
    if args.huge:
        project = next(iter(indexes(ws)))
        for n, bin_ in enumerate(args.bins):
            store = args.work / f"store-huge-{n}.redb"
            subprocess.run([bin_, "--workspace", str(ws), "--store", str(store), "import"], check=True,
                           capture_output=True)
            verdict, peak = run_huge_load(bin_, ws, store, project, args.huge, None, args.give_up)
            print(f"{bin_}: {HUGE_READS} full reads of {args.huge} MB, no limit: {verdict}, {peak}", flush=True)
            for limit in map(int, args.limits.split(",")):
                verdict, _ = run_huge_load(bin_, ws, store, project, args.huge, limit, args.give_up)
                print(f"{bin_}: {HUGE_READS} full reads of {args.huge} MB, ulimit -v {limit} MiB: {verdict}", flush=True)
        return 0
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
