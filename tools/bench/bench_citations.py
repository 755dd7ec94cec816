#!/usr/bin/env python3
"""Agent-citation benchmark: import of a session carrying N citations (taken and verified
at import), and `search_agent_citations` latency over them.

The workspace is the example workspace with S0001 replaced by N/10 assistant lines of ten
`**Evidence**:` markers each (eight file citations into a small project directory, one test,
one URL). Searches go over stdio JSON-RPC, one request line and one answer line at a time.

Usage: tools/.venv/bin/python tools/bench/bench_citations.py [--bin target/release/evidence-store]
       [--citations 10000] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import example  # noqa: E402
import smoke  # noqa: E402
from mcp_client import LockstepClient  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "Demo-0123456789ab"


def make(work: Path, citations: int) -> Path:
    ws = work / "ws"
    proj = work / "proj"
    shutil.rmtree(work, ignore_errors=True)
    example.copy(ws)
    (proj / "src").mkdir(parents=True)
    for i in range(50):
        (proj / "src" / f"mod_{i}.py").write_text("".join(f"line {n}\n" for n in range(200)))
    lines = []
    for k in range(citations // 10):
        marks = [f"**Evidence**: src/mod_{(k + j) % 60}.py:{(k * 7 + j) % 250 + 1}" for j in range(8)]
        marks.append(f"**Evidence**: pytest tests/test_{k % 40}.py::test_case_{k} - PASS")
        marks.append(f"**Evidence**: [Issue {k}](https://example.com/issues/{k})")
        text = f"Step {k} done.\n" + "\n".join(marks)
        lines.append(json.dumps({"type": "assistant", "cwd": str(proj),
                                 "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}))
    session = ws / "projects" / PROJECT / "sessions" / "claude-code" / "c1.jsonl"
    session.write_text("\n".join(lines) + "\n")
    return ws


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=str(cargo_target.binary("release")))
    parser.add_argument("--citations", type=int, default=10_000)
    parser.add_argument("--work", default="/tmp/evidence-store-bench-citations")
    args = smoke.parse(parser, citations=100)
    ws = make(Path(args.work), args.citations)
    start = time.perf_counter()
    subprocess.run([args.bin, "--workspace", str(ws), "import"], check=True, stdout=subprocess.DEVNULL)
    import_s = time.perf_counter() - start

    client = LockstepClient([args.bin, "serve"], {"PROMPT_DIARY_WORKSPACE": str(ws)})
    request = client.request
    client.initialize("b")

    def timed(arguments: dict, runs: int = 30) -> tuple[float, dict]:
        answer = {}
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            reply = request("tools/call", {"name": "search_agent_citations", "arguments": arguments})
            times.append(time.perf_counter() - t)
            answer = json.loads(reply["result"]["content"][0]["text"])
        return statistics.median(times) * 1000, answer

    total = json.loads(request("tools/call", {"name": "read_agent_citations", "arguments": {
        "project_key": PROJECT, "session_ref": "S0001"}})["result"]["content"][0]["text"])["citation_count"]
    print(f"{total} citations stored; import (take and verify) {import_s:.2f} s")
    print("| query | matches | returned | median ms (30 calls) |")
    print("|---|---|---|---|")
    for arguments in ({"query": "src/mod_7.py"}, {"query": "mod_7", "type": "file"},
                      {"query": "src/", "limit": 200}, {"query": "no-such-thing"}):
        ms, answer = timed(arguments)
        print(f"| `{json.dumps(arguments)}` | {answer['total_matches']} | {len(answer['results'])} | {ms:.1f} |")
    client.finish()


if __name__ == "__main__":
    main()
