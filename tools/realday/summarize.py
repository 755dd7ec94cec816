#!/usr/bin/env python3
"""DIR/summary.json of one run.sh day, from what the run left in DIR.

  summarize.py --out DIR --workspace WS --server S --rc N --started T --ended T
               [--verify-rc N] [--endpoint URL]

Fields:
- generate_rc, seconds (generate's wall time), server, endpoint;
- turns (indexed turns in every sessions.index.jsonl), chains (chains in the evidence cards),
  turns_without_chain (indexed turns no card holds), work_items (in project-synthesis.json);
- report: what generate rendered (report.md: present, bytes, its first heading) and whether
  daily-report.json is finalized;
- requests: the MCP requests the servers answered, by method (tools/call by tool as
  `tools/call:NAME`), counted from the servers' own logs: evidence-store's `received request`
  lines (RUST_LOG=debug) and `Service initialized` for initialize; prompt-diary's `Processing
  request of type ...` lines (its log has no line for initialize, counted from the tap);
- protocol_errors: JSON-RPC error answers, what the tap saw on a server's stdout that is not a
  JSON-RPC message or answers an id no request was waiting on, and error lines in the servers'
  logs (rmcp's `response error`, any `ERROR` line, a Python traceback), with the first few
  quoted;
- servers: how many MCP servers Codex started, the seconds they spent answering (each request
  from its line in to its answer out, plus each start until `initialize` was answered, summed
  over servers running at once), the wall time during which at least one was so busy and
  that as a share of the day; how Codex stopped them (signals, whether stdin was closed
  before the signal) and how they ended; requests never answered; and the servers whose tap
  record is missing (a `serve-<pid>.stderr` without its `serve-<pid>.json`: the tap did not
  finish), which the other figures cannot count;
- verify: for evidence-store, `evidence-store verify` on the store as Codex left it (inside
  the command `run` runs, after generate, before `run`'s own import) and after `run`;
- agent: the endpoint's requests, the tools it called, and the refusals it got and corrected.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

TYPE_TO_METHOD = {
    "InitializeRequest": "initialize", "ListToolsRequest": "tools/list", "CallToolRequest": "tools/call",
    "PingRequest": "ping", "ListResourcesRequest": "resources/list",
    "ListResourceTemplatesRequest": "resources/templates/list", "ListPromptsRequest": "prompts/list",
    "CompleteRequest": "completion/complete", "SetLevelRequest": "logging/setLevel",
}


def indexed_turns(ws: Path) -> set[tuple[str, str, str]]:
    turns = set()
    for index in ws.glob("projects/*/sessions.index.jsonl"):
        for line in index.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                turns |= {(index.parent.name, row["session_ref"], t["turn_ref"]) for t in row.get("turns") or []}
    return turns


def load(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def server_log_requests(text: str, server: str) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    if server == "evidence-store":
        counts["initialize"] += len(re.findall(r"Service initialized as server", text))
        for kind, rest in re.findall(r"received request id=\S+ request=(\w+)\((.*)", text):
            method = TYPE_TO_METHOD.get(kind, kind)
            if method == "tools/call":
                name = re.search(r'name: "([^"]+)"', rest)
                method += f":{name.group(1) if name else '?'}"
            counts[method] += 1
    else:
        for kind in re.findall(r"Processing request of type\s+(?:\S+\.py:\d+\s+)?(\w+)", text):
            counts[TYPE_TO_METHOD.get(kind, kind)] += 1
    return counts


def error_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if re.search(r"response error|\bERROR\b|Traceback \(most recent call last\)|\bpanicked\b", line):
            out.append(line.strip()[:300])
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--server", required=True)
    p.add_argument("--rc", type=int, required=True)
    p.add_argument("--started", type=float, required=True)
    p.add_argument("--ended", type=float, required=True)
    p.add_argument("--verify-rc", default="")
    p.add_argument("--endpoint", default="")
    a = p.parse_args()
    ws, out = a.workspace, a.out
    seconds = a.ended - a.started

    turns = indexed_turns(ws)
    chained = set()
    chains = 0
    for card in ws.glob("projects/*/evidence/*.json"):
        doc = load(card) or {}
        for chain in doc.get("evidence_chains") or []:
            chains += 1
            chained.add((card.parent.parent.name, doc.get("session_ref"), chain.get("turn_ref")))
    work_items = sum(len((load(f) or {}).get("work_items") or []) for f in ws.glob("projects/*/project-synthesis.json"))
    report_md = ws / "report.md"
    text = report_md.read_text(encoding="utf-8") if report_md.is_file() else ""
    heading = next((line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("# ")), None)
    daily = load(ws / "daily-report.json") or {}

    logs = sorted((out / "tap").glob("serve-*.stderr"))
    log_counts: collections.Counter = collections.Counter()
    errors: list[str] = []
    for log in logs:
        body = log.read_text(encoding="utf-8", errors="replace")
        log_counts += server_log_requests(body, a.server)
        errors += [f"{log.name}: {line}" for line in error_lines(body)]

    taps_by_name = {f.name.removesuffix(".json"): load(f) for f in sorted((out / "tap").glob("serve-*.json"))}
    taps = [t for t in taps_by_name.values() if isinstance(t, dict)]
    without_record = sorted(log.name.removesuffix(".stderr") for log in logs
                            if not isinstance(taps_by_name.get(log.name.removesuffix(".stderr")), dict))
    tap_counts: collections.Counter = collections.Counter()
    busy = 0.0
    signals: collections.Counter = collections.Counter()
    exits: collections.Counter = collections.Counter()
    stdin_first = 0
    unanswered = 0
    intervals: list[tuple[float, float]] = []
    for t in taps:
        for r in t["requests"]:
            method = r["method"] + (f":{r['tool']}" if r.get("tool") else "")
            tap_counts[method] += 1
            busy += r.get("seconds") or 0.0
            begin = t["started"] + (0.0 if r["method"] == "initialize" else r["at"])
            if r["method"] == "initialize":
                busy += r["at"]  # the start: spawn until the initialize line came in
            intervals.append((begin, t["started"] + r["at"] + (r.get("seconds") or 0.0)))
            if "error" in r:
                errors.append(f"JSON-RPC error answer to {method}: {json.dumps(r['error'])[:300]}")
        for e in t.get("protocol_errors") or []:
            errors.append(f"serve-{t['pid']} stdout at {e.get('at')} s: {e.get('what')}: {e.get('line')}")
        for s in t["signals"]:
            signals[s["signal"]] += 1
        first_signal = min((s["at"] for s in t["signals"]), default=None)
        if t["stdin_closed_at"] is not None and (first_signal is None or t["stdin_closed_at"] < first_signal - 0.001):
            stdin_first += 1
        exits[json.dumps(t["exit"], sort_keys=True)] += 1
        unanswered += len(t["unanswered"])
    # The wall time during which at least one server was starting or answering.
    covered, reach = 0.0, None
    for begin, end in sorted(intervals):
        if reach is None or begin > reach:
            covered += end - begin
            reach = end
        elif end > reach:
            covered += end - reach
            reach = end
    if a.server == "prompt-diary":
        log_counts["initialize"] += tap_counts["initialize"]

    agent_lines = []
    requests_jsonl = out / "agent" / "requests.jsonl"
    if requests_jsonl.is_file():
        agent_lines = [json.loads(line) for line in requests_jsonl.read_text().splitlines() if line.strip()]
    # Refusals: the write tools' `status: invalid` answers, as the agent saw them (each once,
    # though later requests of the conversation repeat it).
    refusals = 0
    refused_tools: collections.Counter = collections.Counter()
    if (out / "agent").is_dir():
        last = {}
        for f in sorted((out / "agent").glob("*-request.json")):
            body = load(f) or {}
            items = body.get("input") or []
            names = {i.get("call_id"): i.get("name") for i in items if isinstance(i, dict) and i.get("type") == "function_call"}
            for i in items:
                if isinstance(i, dict) and i.get("type") == "function_call_output":
                    text_out = json.dumps(i.get("output"))
                    if '\\"status\\": \\"invalid\\"' in text_out or '\\"status\\":\\"invalid\\"' in text_out:
                        last[(body.get("prompt_cache_key"), i.get("call_id"))] = names.get(i.get("call_id"))
        refused_tools = collections.Counter(last.values())
        refusals = sum(refused_tools.values())

    verify = None
    if a.verify_rc != "":
        left = out / "verify-as-codex-left-it.log"
        verify = {"after_run": {"rc": int(a.verify_rc),
                                "output": (out / "verify.log").read_text(errors="replace").strip()[-600:]},
                  "as_codex_left_it": None}
        if left.is_file():
            rc_file = left.with_name(left.name + ".rc")
            verify["as_codex_left_it"] = {
                "rc": int(rc_file.read_text().strip()) if rc_file.is_file() else None,
                "output": left.read_text(errors="replace").strip()[-600:]}
    summary = {
        "server": a.server,
        "endpoint": a.endpoint,
        "generate_rc": a.rc,
        "seconds": round(seconds, 3),
        "turns": len(turns),
        "chains": chains,
        "turns_without_chain": sorted("/".join(t) for t in turns - chained),
        "work_items": work_items,
        "report": {"path": str(report_md.relative_to(out)) if report_md.is_file() else None,
                   "rendered": bool(text), "bytes": len(text.encode()), "title": heading,
                   "daily_report_status": daily.get("status"),
                   "overall_confidence": daily.get("overall_confidence")},
        "requests": dict(sorted(log_counts.items())),
        "protocol_errors": len(errors),
        "protocol_error_lines": errors[:10],
        "servers": {
            "started": len(taps),
            "without_tap_record": without_record,
            "requests_seen_by_tap": dict(sorted(tap_counts.items())),
            "unanswered_requests": unanswered,
            "seconds_in_server": round(busy, 3),
            "wall_seconds_with_a_server_busy": round(covered, 3),
            "share_of_day": round(covered / seconds, 4) if seconds > 0 else None,
            "stopped_by_signal": dict(signals),
            "stdin_closed_before_signal": stdin_first,
            "ended": {k: v for k, v in exits.items()},
        },
        "verify": verify,
        "agent": {
            "requests": len(agent_lines),
            "calls": dict(collections.Counter(l["call"] for l in agent_lines if l.get("call"))),
            "final_messages": sum(1 for l in agent_lines if not l.get("call")),
            "refusals": refusals,
            "refused_by_tool": dict(refused_tools),
            "seconds_deciding": round(sum(l.get("seconds") or 0 for l in agent_lines), 3),
        },
    }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
