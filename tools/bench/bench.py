#!/usr/bin/env python3
"""Benchmarks of evidence-store, each beside its reference in the same run.

  import   import throughput on a generated workspace (default 1 GiB) beside
           `openssl dgst -sha256` over the same files, and import's peak RSS;
  read     median latency of a 2000-line compact and a 100-line full read in the middle
           of a 200 MB session, evidence-store vs prompt-diary 0.2.10's server;
  scale    the same reads on a 1 MB and a 1 GB session;
  startup  time from process start to the `initialize` answer.

Servers are driven by a minimal JSON-RPC client over stdio (one request line, one response
line), so client overhead is the same for both and small. Results are printed as Markdown.

Usage: tools/.venv/bin/python tools/bench/bench.py [import|read|scale|startup ...] [--work DIR]
       (build first: cargo build --release)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import smoke  # noqa: E402
from mcp_client import LockstepClient  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BIN = cargo_target.binary("release")
REFERENCE_ROWS = True
SMOKE = False  # --smoke: every section at its smallest (a second or so), so that CI runs it


def pick(full, small):
    """`full`, or under --smoke the small stand-in."""
    return small if SMOKE else full


GEN = ROOT / "tools" / "lib" / "gen_workspace.py"
REFERENCE = [sys.executable, "-c",
             "import logging; logging.disable(logging.CRITICAL); "
             "from prompt_diary.mcp.server import serve_mcp_server; serve_mcp_server()"]


def generate(out: Path, *args: str) -> dict:
    if (out / "summary.json").exists():
        return json.loads((out / "summary.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    result = subprocess.run([sys.executable, str(GEN), "--out", str(out), *args], check=True, capture_output=True, text=True)
    summary = json.loads(result.stdout)
    (out / "summary.json").write_text(json.dumps(summary))
    return summary


def session_files(ws: Path) -> list[Path]:
    return sorted(p for p in ws.glob("projects/*/sessions/*/*.jsonl") if p.is_file())


def timed(cmd: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(cmd, check=True, capture_output=True, **kw)
    return time.perf_counter() - start, done


def child_peak_rss_mb(cmd: list[str]) -> tuple[float, float]:
    """Runs `cmd` in a fresh Python child, so RUSAGE_CHILDREN measures only it."""
    code = ("import resource, subprocess, sys, time, json; t = time.perf_counter(); "
            "subprocess.run(sys.argv[1:], check=True, capture_output=True); "
            "print(json.dumps([time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024]))")
    out = subprocess.run([sys.executable, "-c", code, *cmd], check=True, capture_output=True, text=True).stdout
    seconds, mb = json.loads(out)
    return seconds, mb


def bench_import(work: Path, size: str) -> list[str]:
    ws = work / f"import-{size}"
    # Eight sessions, two of them the edge cases' empty and missing files: six carry the size.
    summary = generate(ws, "--projects", "2", "--sessions", "4", "--session-bytes", str(int(parse_size(size) / 6)),
                       "--tool-output-max", "1M", "--edge-cases")
    files = [str(p) for p in session_files(ws)]
    total = sum(os.path.getsize(f) for f in files)
    subprocess.run(["cat", *files], check=True, stdout=subprocess.DEVNULL)  # warm the page cache for both
    rows = []
    for attempt in range(pick(3, 1)):
        ossl, _ = timed(["openssl", "dgst", "-sha256", *files])
        store = ws / ".evidence-store"
        shutil.rmtree(store, ignore_errors=True)
        seconds, rss = child_peak_rss_mb([str(BIN), "--workspace", str(ws), "import"])
        rows.append((ossl, seconds, rss))
    best_ossl = min(r[0] for r in rows)
    best_import = min(r[1] for r in rows)
    peak = max(r[2] for r in rows)
    gib = total / (1 << 30)
    # Peak memory must not grow with the session: import one 1 GiB session on its own.
    single_size = pick("1G", "1M")
    single = work / f"import-single-{single_size}"
    generate(single, "--projects", "1", "--sessions", "1", "--session-bytes", single_size, "--tool-output-max", "4M")
    shutil.rmtree(single / ".evidence-store", ignore_errors=True)
    single_seconds, single_rss = child_peak_rss_mb([str(BIN), "--workspace", str(single), "import"])
    single_bytes = sum(os.path.getsize(f) for f in session_files(single))
    return [
        f"Workspace: {summary['sessions']} sessions, {total / 1e9:.2f} GB, {summary['lines']} lines (best of 3, warm page cache).",
        "",
        "| | seconds | throughput | peak RSS |",
        "|---|---|---|---|",
        f"| `openssl dgst -sha256` (all session files) | {best_ossl:.2f} | {gib / best_ossl:.2f} GiB/s | |",
        f"| `evidence-store import` (new store) | {best_import:.2f} | {gib / best_import:.2f} GiB/s | {peak:.0f} MB |",
        f"| `evidence-store import`, one {single_bytes / 1e9:.2f} GB session (tool outputs up to 4 MiB) | {single_seconds:.2f} | "
        f"{single_bytes / (1 << 30) / single_seconds:.2f} GiB/s | {single_rss:.0f} MB |",
        "",
        f"Import runs at **{best_ossl / best_import * 100:.0f}%** of openssl's hashing throughput.",
    ]


def read_latency(client: LockstepClient, args: dict, repeat: int) -> tuple[float, int]:
    times = []
    size = 0
    for _ in range(repeat):
        start = time.perf_counter()
        line = client.request_raw("tools/call", {"name": "read_session_lines", "arguments": args})
        times.append(time.perf_counter() - start)
        text = json.loads(line)["result"]["content"][0]["text"]
        size = len(text)
        assert json.loads(text)["status"] == "ok", text[:300]
    return statistics.median(times) * 1000, size


def middle_reads(ws: Path, compact_width: int = 2000) -> tuple[dict, dict]:
    index = next(ws.glob("projects/*/sessions.index.jsonl"))
    row = json.loads(index.read_text().splitlines()[0])
    n = row["target_end_line"]
    base = {"project_key": index.parent.name, "session_ref": row["session_ref"]}
    def window(width: int) -> tuple[int, int]:
        """`width` lines centred in the session, or the whole session when it is shorter."""
        start = max(1, n // 2 - width // 2)
        return start, min(n, start + width - 1)

    (cs, ce), (fs, fe) = window(compact_width), window(100)
    compact = dict(base, start_line=cs, end_line=ce, mode="compact")
    full = dict(base, start_line=fs, end_line=fe, mode="full")
    return compact, full


def serve(ws: Path, reference: bool) -> LockstepClient:
    cmd = REFERENCE if reference else [str(BIN), "serve"]
    client = LockstepClient(cmd, {"PROMPT_DIARY_WORKSPACE": str(ws)})
    client.initialize()
    return client


SESSION_ARGS = ["--projects", "1", "--sessions", "1", "--tool-output-max", "8K"]


def read_workspace(work: Path) -> Path:
    """The one long session the read benchmarks read (`read`, `startup`, ab_read.py,
    bench_pipelined.py): 200 MB, or 1 MB under --smoke. Generated once, then kept."""
    size = pick("200M", "1M")
    ws = work / f"read-{size}"
    generate(ws, *SESSION_ARGS, "--session-bytes", size)
    return ws


def bench_read(work: Path) -> list[str]:
    ws = read_workspace(work)
    subprocess.run([str(BIN), "--workspace", str(ws), "import"], check=True, capture_output=True)
    compact, full = middle_reads(ws)
    results = {}
    for name, reference, repeat in (("evidence-store", False, pick(30, 2)), ("prompt-diary 0.2.10", True, pick(5, 1))):
        client = serve(ws, reference)
        results[name] = (read_latency(client, compact, repeat), read_latency(client, full, repeat))
        client.close()
    (ours_c, size_c), (ours_f, size_f) = results["evidence-store"]
    (ref_c, _), (ref_f, _) = results["prompt-diary 0.2.10"]
    return [
        f"Session: {(ws / 'summary.json').read_text().strip()}; compact lines {compact['start_line']}-{compact['end_line']} "
        f"({size_c / 1e6:.1f} MB of result text), full lines {full['start_line']}-{full['end_line']} ({size_f / 1e6:.1f} MB). Median of 30 (ours) / 5 (reference).",
        "",
        "| read | evidence-store | prompt-diary 0.2.10 | speed-up |",
        "|---|---|---|---|",
        f"| 2000 lines, compact | {ours_c:.1f} ms | {ref_c:.0f} ms | {ref_c / ours_c:.0f}x |",
        f"| 100 lines, full | {ours_f:.1f} ms | {ref_f:.0f} ms | {ref_f / ours_f:.0f}x |",
    ]


def bench_scale(work: Path) -> list[str]:
    sessions = []
    for size in pick(("1M", "1G"), ("1M", "2M")):
        ws = work / f"scale-{size}"
        generate(ws, *SESSION_ARGS, "--session-bytes", size)
        subprocess.run([str(BIN), "--workspace", str(ws), "import"], check=True, capture_output=True)
        sessions.append((size, ws, json.loads((ws / "summary.json").read_text())["lines"]))
    # The same number of lines from both: as many as the small session has, up to 2000.
    width = min(2000, min(lines for _, _, lines in sessions) - 2)
    rows = [f"| session | {width} lines, compact | 100 lines, full |", "|---|---|---|"]
    for size, ws, lines in sessions:
        compact, full = middle_reads(ws, width)
        client = serve(ws, False)
        repeat = pick(30, 2)
        (c, _), (f, _) = read_latency(client, compact, repeat), read_latency(client, full, repeat)
        client.close()
        rows.append(f"| {size}B ({lines} lines) | {c:.1f} ms | {f:.1f} ms |")
    return [f"Median of 30 reads of the same number of lines in the middle of each session.", "", *rows]


def bench_startup(work: Path) -> list[str]:
    ws = read_workspace(work)
    subprocess.run([str(BIN), "--workspace", str(ws), "import"], check=True, capture_output=True)
    rows = ["| server | process start to `initialize` answer (median of 20) |", "|---|---|"]
    for name, reference, repeat in (("evidence-store", False, pick(20, 1)), ("prompt-diary 0.2.10", True, pick(5, 1))):
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            client = LockstepClient(REFERENCE if reference else [str(BIN), "serve"], {"PROMPT_DIARY_WORKSPACE": str(ws)})
            client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}})
            times.append(time.perf_counter() - start)
            client.close()
        rows.append(f"| {name} | {statistics.median(times) * 1000:.1f} ms |")
    # tools/list waits for the store (an import of what changed) and, once per server,
    # for the search for a tool-output handle that decides whether the handle tools are
    # listed: measured on the imported store and on a workspace never imported.
    rows += ["", "| server | process start to `tools/list` answer (median) |", "|---|---|"]
    store = ws / ".evidence-store"
    for name, reference, fresh, repeat in (("evidence-store, store imported", False, False, pick(20, 1)),
                                           ("evidence-store, never imported (imports 200 MB first)", False, True, pick(5, 1)),
                                           ("prompt-diary 0.2.10", True, False, pick(5, 1))):
        times = []
        for _ in range(repeat):
            if fresh:
                shutil.rmtree(store, ignore_errors=True)
            start = time.perf_counter()
            client = LockstepClient(REFERENCE if reference else [str(BIN), "serve"], {"PROMPT_DIARY_WORKSPACE": str(ws)})
            client.initialize()
            client.notify("notifications/initialized")
            listed = client.request("tools/list", {})
            times.append(time.perf_counter() - start)
            assert listed["result"]["tools"], listed
            client.close()
        rows.append(f"| {name} | {statistics.median(times) * 1000:.1f} ms |")
    return rows


def write_workspace(ws: Path, sessions: int, turns: int) -> str:
    """A fresh workspace of `sessions` x `turns` turns (no session files: writes need none)."""
    shutil.rmtree(ws, ignore_errors=True)
    key = "Load-000000000000"
    project = ws / "projects" / key
    project.mkdir(parents=True)
    (ws / "metadata.json").write_text(json.dumps({"report_date": "2026-01-15", "status": "final", "timezone": "UTC"}))
    (project / "project.json").write_text(json.dumps({"project_key": key, "project_label": "Load"}))
    with (project / "sessions.index.jsonl").open("w") as f:
        for s in range(1, sessions + 1):
            row = {"session_ref": f"S{s:04d}", "source": "codex", "source_session_id": "x",
                   "session_path": f"sessions/codex/{s}.jsonl", "target_start_line": 1, "target_end_line": 2 * turns,
                   "turns": [{"turn_ref": f"T{t:04d}", "turn_start_line": 2 * t - 1, "turn_end_line": 2 * t} for t in range(1, turns + 1)]}
            f.write(json.dumps(row) + "\n")
    return key


def evidence_args(key: str, s: int, t: int) -> dict:
    lines = f"{2 * t - 1}-{2 * t}"
    return {"project_key": key, "session_ref": f"S{s:04d}", "evidence_chain": {
        "turn_ref": f"T{t:04d}",
        "trigger": {"type": "explicit_user_message", "summary": "asked", "citations": [{"lines": lines}]},
        "agent_reactions": [{"summary": "did it", "citations": [{"lines": lines}]}],
        "outcomes": [{"category": "code_outcome", "summary": "done", "citations": [{"lines": lines}]}],
        "terminal_state": {"type": "material_result", "summary": "done", "citations": [{"lines": lines}]},
        "materiality": "material"}}


def run_writers(ws: Path, key: str, servers: int, todo: list[tuple[int, int]], reference: bool) -> tuple[list[float], set, int, float]:
    """`servers` processes write `todo` (interleaved, so they share cards) as fast as they can."""
    import threading
    clients = [serve(ws, reference) for _ in range(servers)]
    latencies: list[float] = []
    acked: set = set()
    errors = 0
    lock = threading.Lock()

    def work(i: int) -> None:
        nonlocal errors
        for s, t in todo[i::servers]:
            start = time.perf_counter()
            line = clients[i].request_raw("tools/call", {"name": "write_evidence", "arguments": evidence_args(key, s, t)})
            took = time.perf_counter() - start
            result = json.loads(line).get("result", {})
            try:
                ok = not result.get("isError") and json.loads(result["content"][0]["text"]).get("status") == "appended"
            except (KeyError, IndexError, ValueError):
                ok = False  # a tool error (the reference raises on a card another writer tore)
            with lock:
                latencies.append(took)
                if ok:
                    acked.add((s, t))
                else:
                    errors += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(servers)]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - start
    for c in clients:
        c.close()
    return latencies, acked, errors, wall


def cards_on_disk(ws: Path) -> tuple[set, int]:
    """Chains found in the card files, and how many cards are not valid JSON (torn)."""
    found, torn = set(), 0
    for card in ws.glob("projects/*/evidence/*.json"):
        s = int(card.stem[1:])
        try:
            chains = json.loads(card.read_text()).get("evidence_chains", [])
        except ValueError:
            torn += 1
            continue
        for chain in chains:
            found.add((s, int(chain["turn_ref"][1:])))
    return found, torn


def bench_writes(work: Path) -> list[str]:
    rows = ["| server | servers | writes | median | p99 | writes/s | errors | acknowledged but lost | cards left torn |",
            "|---|---|---|---|---|---|---|---|---|"]
    servers_of = (("evidence-store", False), ("prompt-diary 0.2.10", True)) if REFERENCE_ROWS else (("evidence-store", False),)
    for name, reference in servers_of:
        for servers in pick((1, 8, 32), (1, 2)):
            ws = work / f"writes-{'ref' if reference else 'ours'}-{servers}"
            sessions, turns = (2, 3) if SMOKE else (16, {1: 25, 8: 50, 32: 100}[servers])
            key = write_workspace(ws, sessions, turns)
            if not reference:
                subprocess.run([str(BIN), "--workspace", str(ws), "import"], check=True, capture_output=True)
            todo = [(s, t) for s in range(1, sessions + 1) for t in range(1, turns + 1)]
            latencies, acked, errors, wall = run_writers(ws, key, servers, todo, reference)
            if not reference:
                subprocess.run([str(BIN), "--workspace", str(ws), "export"], check=True, capture_output=True)
            found, torn = cards_on_disk(ws)
            lost = len(acked - found)
            latencies.sort()
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
            rows.append(f"| {name} | {servers} | {len(todo)} | {statistics.median(latencies) * 1000:.1f} ms | {p99 * 1000:.1f} ms | "
                        f"{len(todo) / wall:.0f} | {errors} | {lost} | {torn} |")
    return ["Each write is a `write_evidence` of a material chain; with 8 servers the turns are interleaved so that "
            "several processes append to the same card at once. Durable: evidence-store fsyncs the redb commit and "
            "the card (file and directory) before answering; the reference writes without fsync and without a lock.", "", *rows]


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def main() -> int:
    global BIN, REFERENCE_ROWS, SMOKE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", nargs="*", default=["import", "read", "scale", "startup", "writes"])
    parser.add_argument("--work", type=Path, default=Path("/tmp/evidence-store-bench"))
    parser.add_argument("--import-size", default="1G")
    parser.add_argument("--bin", type=Path, default=BIN, help="the evidence-store binary (A/B runs of two builds)")
    parser.add_argument("--no-reference", action="store_true", help="writes: evidence-store's rows only")
    args = smoke.parse(parser)
    SMOKE = args.smoke
    BIN = args.bin.resolve()
    REFERENCE_ROWS = not args.no_reference
    args.work.mkdir(parents=True, exist_ok=True)
    if not BIN.exists():
        sys.exit("build first: cargo build --release")
    sections = {
        "import": lambda: bench_import(args.work, pick(args.import_size, "1M")),
        "read": lambda: bench_read(args.work),
        "scale": lambda: bench_scale(args.work),
        "startup": lambda: bench_startup(args.work),
        "writes": lambda: bench_writes(args.work),
    }
    for which in args.which:
        print(f"### {which}\n")
        print("\n".join(sections[which]()))
        print()
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
