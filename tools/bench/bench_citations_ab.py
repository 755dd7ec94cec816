#!/usr/bin/env python3
"""Agent-citation benchmarks, before and after citation indexing, each beside its reference
in the same run.

  import   import of a new store by the binary before citation indexing (--base) and the
           one with it (--new), paired and alternated, beside `openssl dgst -sha256` over
           the same files, on two workspaces: the generated one `bench.py import` uses
           (few markers) and a cited one (10,000 citations in 2,000 assistant messages);
  search   `search_agent_citations` latency through `serve` over the cited workspace's
           10,000 citations (median and 90th percentile of 30 calls per query).

Extraction throughput in MB/s is measured in process: `cargo bench --bench citations`.

Usage: tools/.venv/bin/python tools/bench/bench_citations_ab.py --base OLD_BIN --new NEW_BIN
           [import] [search] [--work DIR] [--size 512M]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
from bench import generate, session_files, timed  # noqa: E402
import smoke  # noqa: E402
from mcp_client import LockstepClient  # noqa: E402

PROJECT = "Cite-0123456789ab"
CITED_SESSIONS = 20
CITED_TURNS = 100
RUNS, CALLS = 5, 30  # imports of each binary, calls of each query
FILLER = ("The function returns an error when the configuration is missing, so we check the path "
          "before reading it and the tests cover both branches. ") * 12


def cited_message(s: int, t: int) -> str:
    n = (s * CITED_TURNS + t) % 400
    return (f"{FILLER}\n\n**Evidence**: src/mod_{n % 40}/file.py:{t + 1}-{t + 3}\n"
            f"**Evidence**: pytest tests/test_{n}.py::test_case_{t} - PASS\n"
            f"**Evidence**: [Design note {n}](https://example.com/notes/{n})\n"
            f"**Evidence**:\n```bash\ncargo test --lib mod_{n}\ntest result: ok. {t} passed\n```\n"
            f"**Evidence**: src/lib_{n}.rs:{t + 10}\n\nDone with step {t}.")


def cited_workspace(ws: Path) -> dict:
    """One project, 20 Claude Code sessions of 100 two-line turns, 5 citations a turn."""
    if (ws / "summary.json").exists():
        return json.loads((ws / "summary.json").read_text())
    shutil.rmtree(ws, ignore_errors=True)
    proj = ws / "projects" / PROJECT
    (proj / "sessions" / "claude-code").mkdir(parents=True)
    (ws / "metadata.json").write_text(json.dumps({"report_date": "2026-01-20", "status": "final", "timezone": "UTC"}))
    (proj / "project.json").write_text(json.dumps({"project_key": PROJECT, "project_label": "Cite"}))
    code = ws / "code"
    for m in range(0, 40, 2):  # half the cited paths exist, so checks read files
        (code / "src" / f"mod_{m}").mkdir(parents=True)
        (code / "src" / f"mod_{m}" / "file.py").write_text("".join(f"line {i}\n" for i in range(60)))
    rows = []
    for s in range(CITED_SESSIONS):
        lines = []
        for t in range(CITED_TURNS):
            ts = f"2026-01-20T{10 + t // 60:02d}:{t % 60:02d}:{s % 60:02d}.000Z"
            lines.append(json.dumps({"type": "user", "timestamp": ts, "cwd": str(code),
                                     "message": {"role": "user", "content": f"Step {t} of session {s}"}}))
            lines.append(json.dumps({"type": "assistant", "timestamp": ts, "cwd": str(code),
                                     "message": {"role": "assistant",
                                                 "content": [{"type": "text", "text": cited_message(s, t)}]}}))
        (proj / "sessions" / "claude-code" / f"s{s}.jsonl").write_text("\n".join(lines) + "\n")
        turns = [{"turn_ref": f"T{t + 1:04d}", "turn_start_line": 2 * t + 1, "turn_end_line": 2 * t + 2,
                  "target_subagents": []} for t in range(CITED_TURNS)]
        rows.append(json.dumps({"session_ref": f"S{s + 1:04d}", "source": "claude-code", "source_session_id": f"s{s}",
                                "session_path": f"sessions/claude-code/s{s}.jsonl", "subagent_path": "",
                                "target_start_line": 1, "target_end_line": 2 * CITED_TURNS, "turns": turns}))
    (proj / "sessions.index.jsonl").write_text("\n".join(rows) + "\n")
    summary = {"sessions": CITED_SESSIONS, "citations": CITED_SESSIONS * CITED_TURNS * 5}
    (ws / "summary.json").write_text(json.dumps(summary))
    return summary


def import_pair(ws: Path, base: str, new: str, runs: int) -> list[str]:
    files = [str(p) for p in session_files(ws)]
    total = sum(os.path.getsize(f) for f in files)
    subprocess.run(["cat", *files], check=True, stdout=subprocess.DEVNULL)
    times: dict[str, list[float]] = {"openssl": [], "base": [], "new": []}
    for attempt in range(runs):
        order = [("base", base), ("new", new)] if attempt % 2 == 0 else [("new", new), ("base", base)]
        times["openssl"].append(timed(["openssl", "dgst", "-sha256", *files])[0])
        for name, binary in order:
            shutil.rmtree(ws / ".evidence-store", ignore_errors=True)
            times[name].append(timed([binary, "--workspace", str(ws), "import"])[0])
    mb = total / 1e6
    best = {k: min(v) for k, v in times.items()}
    rows = [
        f"{ws.name}: {len(files)} session files, {mb:.0f} MB; best of {runs}, runs alternated, warm page cache.",
        "",
        "| | best s | median s | MB/s | % of openssl |",
        "|---|---|---|---|---|",
    ]
    for name, label in [("openssl", "`openssl dgst -sha256`"), ("base", "import, before (88b2c56)"),
                        ("new", "import, with citation indexing")]:
        rows.append(f"| {label} | {best[name]:.3f} | {statistics.median(times[name]):.3f} | {mb / best[name]:.0f} | "
                    f"{best['openssl'] / best[name] * 100:.0f}% |")
    rows.append("")
    rows.append(f"Citation indexing costs {(best['new'] / best['base'] - 1) * 100:+.1f}% of import time (best vs best).")
    return rows


def bench_import(work: Path, base: str, new: str, size: str) -> list[str]:
    from gen_workspace import parse_size  # type: ignore
    plain = work / f"import-{size}"
    generate(plain, "--projects", "2", "--sessions", "4", "--session-bytes", str(int(parse_size(size) / 6)),
             "--tool-output-max", "1M", "--edge-cases")
    cited = work / "cited-10k"
    cited_workspace(cited)
    return [*import_pair(plain, base, new, RUNS), "", *import_pair(cited, base, new, RUNS)]


def bench_search(work: Path, new: str) -> list[str]:
    ws = work / "cited-10k"
    summary = cited_workspace(ws)
    shutil.rmtree(ws / ".evidence-store", ignore_errors=True)
    subprocess.run([new, "--workspace", str(ws), "import"], check=True, capture_output=True)
    client = LockstepClient([new, "serve"], {"PROMPT_DIARY_WORKSPACE": str(ws), "RUST_LOG": "off"})
    client.initialize()
    queries = [
        ({"query": "src/mod_7/file.py"}, "path substring"),
        ({"query": "test_case_5", "type": "test"}, "substring with type"),
        ({"query": "example.com", "limit": 200}, "every url, limit 200"),
        ({"query": "cargo test", "project_key": PROJECT}, "command blocks, one project"),
        ({"query": "no-such-thing"}, "no match"),
    ]
    rows = [f"{summary['citations']} citations in {summary['sessions']} sessions; {CALLS} calls per query, "
            "timed from request written to response line read.", "",
            "| query | matches | returned | truncated | median ms | p90 ms |", "|---|---|---|---|---|---|"]
    for args, label in queries:
        params = {"name": "search_agent_citations", "arguments": args}
        answer = json.loads(json.loads(client.request_raw("tools/call", params))["result"]["content"][0]["text"])
        samples = []
        for _ in range(CALLS):
            start = time.perf_counter()
            client.request_raw("tools/call", params)
            samples.append((time.perf_counter() - start) * 1000)
        samples.sort()
        rows.append(f"| `{json.dumps(args)}` ({label}) | {answer.get('total_matches')} | {len(answer.get('results', []))} | "
                    f"{answer.get('truncated')} | {statistics.median(samples):.2f} | {samples[int(len(samples) * 0.9)]:.2f} |")
    client.proc.stdin.close()
    client.proc.wait()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="*", default=["import", "search"])
    parser.add_argument("--base", required=True, help="release binary before citation indexing")
    parser.add_argument("--new", required=True, help="release binary with citation indexing")
    parser.add_argument("--work", default="/tmp/evidence-store-bench")
    parser.add_argument("--size", default="512M", help="the generated workspace's size")
    args = smoke.parse(parser, size="1M")
    if args.smoke:  # 2 sessions of 10 turns, one run, two calls
        global CITED_SESSIONS, CITED_TURNS, RUNS, CALLS
        CITED_SESSIONS, CITED_TURNS, RUNS, CALLS = 2, 10, 1, 2
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for what in args.what:
        print(f"\n### {what}\n")
        rows = bench_import(work, args.base, args.new, args.size) if what == "import" else bench_search(work, args.new)
        print("\n".join(rows))
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
