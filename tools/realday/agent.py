#!/usr/bin/env python3
"""A scripted, deterministic agent behind an OpenAI Responses endpoint, for prompt-diary's Codex.

  agent.py --port-file FILE [--port 0] [--log-dir DIR]

Loopback only (127.0.0.1). Codex (as prompt-diary 0.2.20's `generate` starts it) sends every
model request here as `POST /v1/responses` with `stream: true`; the answer is a server-sent
event stream of one item: a `function_call` to one of the tools the request offers, or a final
`message`. The endpoint keeps no state between requests: each answer is decided from the
request alone, i.e. prompt-diary's instructions (developer messages), its assignment (user
messages) and the calls made so far with their results (`function_call` and
`function_call_output` items), as a careful agent would read them. Nothing here names a
workspace, a project or a session: every argument sent is taken from the assignment or from
what a tool returned.

What it does, by the tools a request offers:

- `read_session_lines` + `write_evidence` (extraction of one turn): reads the assigned turn in
  compact mode, following `next_cursor` until it is null and joining fragmented records (it
  stops, saying why in its final message, after 2 reads that gave no page, of any kind, on a
  cursor it already followed, or past 200 pages); then
  writes one evidence chain whose citations lie inside the turn (the trigger on the turn's first
  line, the reaction on the agent's lines, an observed check on a tool result, an outcome when
  the agent both acted and answered). On a refusal (`status: invalid`) it corrects the fields the
  errors name and writes again. It makes one deliberate slip on every first turn of a session
  (`T0001`): its first draft's terminal-state citation runs one line past the turn. So every
  session goes through a refusal and its correction, and a differential compares both servers'
  refusals too. After the write is accepted it ends with a short final message.
- `write_work_item` (project synthesis): one work item per session, covering the session's
  turns that have a chain (kind and disposition from the chains' materiality and terminal
  states, values taken from the instructions' lists); turns named without a chain get an
  `evidence_gap_item`. Uncovered turns reported by the tool or the resume prompt are covered next.
- `write_project_summary`, `write_report_title`, `write_engagement`, `write_team_learning` (the
  daily passes): one write each, citing turns the work items in the input cover; a refused one
  is written again without the entries its errors point at, each correction on top of the last.

Every controlled value it sends (kinds, types, categories) is one the instructions list; when
they list none under a heading it needs, it fails loudly (its final message says which).

`--log-dir` keeps every request and answer (`NNNN-request.json`, `NNNN-answer.json`) and a line
per request in `requests.jsonl` (phase, tool called or final, seconds spent deciding).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

READ = "read_session_lines"
WRITE_EVIDENCE = "write_evidence"
WRITE_WORK_ITEM = "write_work_item"
DAILY_WRITERS = ("write_project_summary", "write_report_title", "write_engagement", "write_team_learning")
MAX_REFUSALS = 4  # corrections of one write before the agent gives up and says so
MAX_FAILED_READS = 2  # reads of one turn that gave no page, of any kind, before the agent stops
MAX_PAGES = 200  # pages of one turn's read: past it a cursor that keeps coming is not followed
AGENT_KINDS = {"assistant_message", "subagent_message", "tool_call", "tool_result", "context_compaction"}


class Call:
    """One call the agent already made, with what came back."""

    def __init__(self, name: str, namespace: str | None, arguments: dict, output: Any) -> None:
        self.name, self.namespace, self.arguments, self.output = name, namespace, arguments, output


class Decision:
    """What to answer: a call to `name` with `arguments`, or (name None) a final `text`."""

    def __init__(self, phase: str, name: str | None = None, arguments: dict | None = None,
                 text: str = "", namespace: str | None = None) -> None:
        self.phase, self.name, self.arguments, self.text, self.namespace = phase, name, arguments, text, namespace


# ---------------------------------------------------------------------------------------------
# Reading a request


def offered_tools(body: dict) -> dict[str, str | None]:
    """Every function the request offers, name -> namespace (None at top level): top-level
    `tools` (direct mode) and `additional_tools` input items (code mode), namespaces opened."""
    tools = list(body.get("tools") or [])
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools += item.get("tools") or []
    out: dict[str, str | None] = {}
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    out.setdefault(inner["name"], tool.get("name"))
        elif tool.get("name"):
            out.setdefault(tool["name"], None)
    return out


def message_texts(body: dict, role: str) -> list[str]:
    texts = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == role:
            parts = item.get("content")
            if isinstance(parts, str):
                texts.append(parts)
            else:
                texts.append("".join(p.get("text", "") for p in parts or [] if isinstance(p, dict)))
    return texts


def output_text(output: Any) -> str:
    """A `function_call_output`'s text: a string, or content items of text."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(p.get("text", "") for p in output if isinstance(p, dict))
    if isinstance(output, dict):
        return output_text(output.get("content") or output.get("text") or "")
    return ""


def tool_result(output: Any) -> Any:
    """The JSON a tool returned, out of Codex's rendering of it (`Wall time: ...\\nOutput:\\n`
    before it, sometimes a list of MCP content items around it); None if none is found."""
    text = output_text(output)
    head = re.match(r"(?s)\s*Wall time:[^\n]*\n(?:Output:\n)?", text)
    if head:
        text = text[head.end():]
    text = text.strip()
    value = first_json(text)
    # MCP content items: [{"type": "text", "text": "<the tool's JSON>"}], or a CallToolResult.
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        value = value["content"]
    if isinstance(value, list) and value and all(isinstance(v, dict) and "text" in v for v in value):
        inner = first_json("".join(v["text"] for v in value))
        if inner is not None:
            return inner
    return value


def first_json(text: str) -> Any:
    text = text.strip()
    for start in range(len(text)):
        if text[start] in "{[":
            try:
                value, _ = json.JSONDecoder().raw_decode(text[start:])
                return value
            except ValueError:
                continue
    return None


def calls_so_far(body: dict) -> list[Call]:
    """The calls made in this conversation, in order, each with its output (None if none yet)."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    outputs = {i.get("call_id"): i.get("output") for i in items if i.get("type") == "function_call_output"}
    calls = []
    for item in items:
        if item.get("type") == "function_call":
            try:
                arguments = json.loads(item.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            calls.append(Call(item.get("name", ""), item.get("namespace"), arguments,
                              tool_result(outputs.get(item.get("call_id")))))
    return calls


def json_blocks(text: str) -> list[Any]:
    blocks = []
    for match in re.finditer(r"```json\n(.*?)\n```", text, re.S):
        try:
            blocks.append(json.loads(match.group(1)))
        except ValueError:
            blocks.append(None)
    return blocks


def bullet(text: str, label: str) -> str | None:
    match = re.search(rf"^- {re.escape(label)}: `?([^`\n]+?)`?\s*$", text, re.M)
    return match.group(1).strip() if match else None


def listed_values(instructions: str, heading: str) -> list[str]:
    """The controlled values the instructions list under `heading` (lines "- `value`: ...")."""
    at = instructions.find(heading)
    if at < 0:
        return []
    values = []
    for line in instructions[at + len(heading):].splitlines()[1:]:
        match = re.match(r"\s*- `([^`]+)`", line)
        if match:
            values.append(match.group(1))
        elif values and line.strip():
            break
    return values


class NoValues(Exception):
    """The instructions list no controlled values under a heading the agent needs: prompt-diary's
    prompt changed, and the agent must say so rather than send values of its own."""


def pick(instructions: str, heading: str, *preferred: str) -> str:
    """The first of `preferred` the instructions list under `heading`, else the first value
    they list there; NoValues when they list none."""
    values = listed_values(instructions, heading)
    if not values:
        raise NoValues(f"the instructions list no values under {heading!r}")
    for value in preferred:
        if value in values:
            return value
    return values[0]


def status(output: Any) -> Any:
    """The `status` of a tool's answer, None when it is not a JSON object."""
    return output.get("status") if isinstance(output, dict) else None


def refused(writes: list["Call"]) -> list["Call"]:
    """The writes the server refused (`status: invalid`)."""
    return [w for w in writes if status(w.output) == "invalid"]


def clip(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# ---------------------------------------------------------------------------------------------
# Extraction


def join_records(pages: list[Any]) -> list[dict]:
    """The records of every page in order, fragmented lines joined (in offset order)."""
    records: list[dict] = []
    fragments: dict[int, list[dict]] = {}
    order: list[tuple[str, Any]] = []
    for page in pages:
        for record in (page or {}).get("records") or []:
            if not isinstance(record, dict):
                continue
            if "record_format" in record and "content" in record:
                line = record.get("line")
                if line not in fragments:
                    fragments[line] = []
                    order.append(("fragment", line))
                fragments[line].append(record)
            else:
                order.append(("record", record))
    for kind, value in order:
        if kind == "record":
            records.append(value)
            continue
        parts = sorted(fragments[value], key=lambda f: f.get("offset", 0))
        whole = "".join(p.get("content", "") for p in parts)
        if parts[0].get("record_format") == "compact_json":
            try:
                joined = json.loads(whole)
                if isinstance(joined, dict):
                    joined.setdefault("line", value)
                    records.append(joined)
                    continue
            except ValueError:
                pass
        records.append({"line": value, "kind": "unknown", "text": whole})
    return records


def record_kinds(record: dict) -> set[str]:
    kinds = {record.get("kind")}
    for part in record.get("parts") or []:
        if isinstance(part, dict):
            kinds.add(part.get("kind"))
    return {k for k in kinds if isinstance(k, str)}


def record_text(record: dict) -> str:
    if isinstance(record.get("text"), str):
        return record["text"]
    return " ".join(p.get("text", "") for p in record.get("parts") or [] if isinstance(p, dict) and isinstance(p.get("text"), str))


def span(lines: list[int]) -> dict:
    return {"lines": f"{min(lines)}-{max(lines)}"}


def draft_chain(turn: dict, records: list[dict], instructions: str) -> dict:
    """One evidence chain for the turn, from its records, every citation inside the turn."""
    start, end = turn["turn_start_line"], turn["turn_end_line"]
    inside = [r for r in records if isinstance(r.get("line"), int) and start <= r["line"] <= end
              and "duplicate_of" not in r]
    agent = [r for r in inside if record_kinds(r) & AGENT_KINDS]
    answers = [r for r in agent if "assistant_message" in record_kinds(r) and record_text(r).strip()]
    calls = [r for r in agent if "tool_call" in record_kinds(r)]
    results = [r for r in agent if "tool_result" in record_kinds(r)]
    terminal = "Terminal state types:"
    materiality = "Materiality values:"
    chain: dict[str, Any] = {
        "turn_ref": turn["turn_ref"],
        "trigger": {"citations": [{"lines": f"{start}-{start}"}]},
    }
    if agent:
        what = []
        if calls:
            what.append(f"ran {len(calls)} tool call(s)")
        if answers:
            what.append(f"answered: {clip(record_text(answers[-1]), 120)}")
        chain["agent_reactions"] = [{"summary": "The agent " + (" and ".join(what) or "reacted") + ".",
                                     "citations": [span([r["line"] for r in agent])]}]
    else:
        chain["agent_reactions"] = []
    if results:
        chain["observed_checks"] = [{"type": pick(instructions, "Check type values:", "command_output"),
                                     "summary": f"Tool output is visible at line {results[0]['line']}.",
                                     "citations": [span([results[0]["line"]])]}]
    if calls and answers:
        cited = [r["line"] for r in calls + answers]
        chain["outcomes"] = [{"category": pick(instructions, "Outcome categories:", "code_outcome"),
                              "summary": f"Reported by the agent: {clip(record_text(answers[-1]), 120)}",
                              "citations": [span(cited)]}]
        chain["terminal_state"] = {"type": pick(instructions, terminal, "material_result"),
                                   "summary": "The agent acted and reported its result.",
                                   "citations": [span([answers[-1]["line"]])]}
        chain["materiality"] = pick(instructions, materiality, "material")
    else:
        last = (answers or agent or inside or [{"line": start}])[-1]["line"]
        chain["outcomes"] = []
        chain["terminal_state"] = {"type": pick(instructions, terminal, "no_material" if agent else "evidence_gap"),
                                   "summary": "The agent reacted without a visible result." if agent
                                   else "No agent reaction is visible in the turn.",
                                   "citations": [span([last])]}
        chain["materiality"] = pick(instructions, materiality, "minor")
    return chain


def slipped(chain: dict, turn: dict) -> dict:
    """The first draft of a session's first turn: the terminal state's citation one line past
    the turn's end (an off-by-one the server must refuse)."""
    out = json.loads(json.dumps(chain))
    first = out["terminal_state"]["citations"][0]["lines"].split("-")[0]
    out["terminal_state"]["citations"][0]["lines"] = f"{first}-{turn['turn_end_line'] + 1}"
    return out


def corrected(chain: dict, errors: list, turn: dict) -> dict:
    """The chain with every field an error names put right: a citation outside the turn is
    clamped into it, a trigger cites exactly the turn's first line, a field the server says is
    not allowed is dropped."""
    out = json.loads(json.dumps(chain))
    start, end = turn["turn_start_line"], turn["turn_end_line"]
    for error in errors:
        path = str((error or {}).get("path") or "") if isinstance(error, dict) else ""
        message = str((error or {}).get("message") or "") if isinstance(error, dict) else str(error)
        if path.startswith("evidence_chain.trigger"):
            out["trigger"] = {"citations": [{"lines": f"{start}-{start}"}]}
            continue
        target, key = locate(out, path.removeprefix("evidence_chain."))
        if target is None:
            continue
        if key == "lines" and isinstance(target.get("lines"), str):
            try:
                a, b = (int(x) for x in target["lines"].split("-"))
            except ValueError:
                a, b = start, start
            a, b = min(max(a, start), end), min(max(b, start), end)
            target["lines"] = f"{min(a, b)}-{max(a, b)}"
        elif "not allowed" in message or "unknown field" in message or "extra" in message:
            target.pop(key, None)
    return out


def locate(value: Any, path: str) -> tuple[Any, Any]:
    """The container and key a dotted path with [index] parts names, or (None, None)."""
    steps: list[Any] = []
    for part in path.split("."):
        match = re.fullmatch(r"([^\[\]]*)((?:\[\d+\])*)", part)
        if not match:
            return None, None
        if match.group(1):
            steps.append(match.group(1))
        steps += [int(i) for i in re.findall(r"\[(\d+)\]", match.group(2))]
    if not steps:
        return None, None
    for step in steps[:-1]:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return None, None
    return (value, steps[-1]) if isinstance(value, (dict, list)) else (None, None)


def extraction(body: dict, tools: dict, instructions: str, calls: list[Call]) -> Decision:
    phase = "extraction"
    assignment = message_texts(body, "user")[0] if message_texts(body, "user") else ""
    project_key = bullet(assignment, "Project key")
    session_ref = bullet(assignment, "Session reference")
    blocks = [b for b in json_blocks(assignment) if isinstance(b, dict)]
    turn = next((b for b in reversed(blocks) if {"turn_ref", "turn_start_line", "turn_end_line"} <= set(b)), None)
    if not (project_key and session_ref and turn):
        return Decision(phase, text="The assignment names no project, session and turn; nothing was written.")
    request = {"project_key": project_key, "session_ref": session_ref, "start_line": turn["turn_start_line"],
               "end_line": turn["turn_end_line"], "mode": "compact"}
    reads = [c for c in calls if c.name == READ and all(c.arguments.get(k) == v for k, v in request.items())]
    if not reads:
        return Decision(phase, READ, request, namespace=tools[READ])
    page = lambda output: isinstance(output, dict) and isinstance(output.get("records"), list)  # noqa: E731
    pages = [c.output for c in reads if page(c.output)]
    failed = [c for c in reads if not page(c.output)]
    if len(failed) >= MAX_FAILED_READS:
        # Any answer that is not a page (an error object, plain text, nothing) counts.
        return Decision(phase, text=f"read_session_lines failed {len(failed)} times; the last answer: "
                                    f"{clip(output_text(failed[-1].output) or json.dumps(failed[-1].output), 300)}")
    if not page(reads[-1].output):
        # A read that failed: once more from where it stood.
        return Decision(phase, READ, dict(reads[-1].arguments), namespace=tools[READ])
    cursor = reads[-1].output.get("next_cursor")
    if cursor is not None:
        followed = [c.arguments.get("cursor") for c in reads if "cursor" in c.arguments]
        if cursor in followed:
            return Decision(phase, text=f"read_session_lines gave the cursor {clip(json.dumps(cursor), 80)} again "
                                        f"after {len(pages)} page(s); the read does not end, nothing was written.")
        if len(pages) >= MAX_PAGES:
            return Decision(phase, text=f"read_session_lines gave more than {MAX_PAGES} pages for one turn "
                                        "and a cursor still; the read does not end, nothing was written.")
        return Decision(phase, READ, {**request, "cursor": cursor}, namespace=tools[READ])
    writes = [c for c in calls if c.name == WRITE_EVIDENCE]
    if writes and isinstance(writes[-1].output, dict):
        result = writes[-1].output
        if result.get("status") == "appended":
            return Decision(phase, text="Done.")
        errors = result.get("errors") or []
        if any("duplicate" in str(e) for e in errors):
            return Decision(phase, text="The turn already has a committed chain.")
        if len(refused(writes)) > MAX_REFUSALS:
            return Decision(phase, text=f"write_evidence kept refusing: {clip(json.dumps(errors), 400)}")
        chain = corrected(writes[-1].arguments.get("evidence_chain") or {}, errors, turn)
        return Decision(phase, WRITE_EVIDENCE, {"project_key": project_key, "session_ref": session_ref,
                                                 "evidence_chain": chain}, namespace=tools[WRITE_EVIDENCE])
    if writes:
        return Decision(phase, text=f"write_evidence gave no result: {clip(str(writes[-1].output), 300)}")
    chain = draft_chain(turn, join_records(pages), instructions)
    if turn["turn_ref"] == "T0001":
        chain = slipped(chain, turn)
    return Decision(phase, WRITE_EVIDENCE, {"project_key": project_key, "session_ref": session_ref,
                                             "evidence_chain": chain}, namespace=tools[WRITE_EVIDENCE])


# ---------------------------------------------------------------------------------------------
# Project synthesis


def chains_in(text: str) -> list[dict]:
    """The evidence chains the project-synthesis input lists, each headed
    `**<session_ref>/<turn_ref>** [<materiality>]` and followed by `reaction: ...` and an
    `outcomes:` list of `- <category>: <summary>` lines."""
    chains: list[dict] = []
    current: dict | None = None
    section = None
    for line in text.splitlines():
        head = re.match(r"^\*\*(S\d+)/(T\d+)\*\*\s*\[([^\]]+)\]", line)
        if head:
            current = {"session_ref": head.group(1), "turn_ref": head.group(2), "materiality": head.group(3),
                       "reactions": [], "outcomes": []}
            chains.append(current)
            section = None
            continue
        if current is None:
            continue
        if line.startswith("#"):
            current, section = None, None
            continue
        if line.startswith("reaction:"):
            current["reactions"].append(line.removeprefix("reaction:").strip())
        elif re.match(r"^[a-z_]+:\s*$", line):
            section = line.rstrip(":").strip()
        elif re.match(r"^[a-z_]+:", line):
            section = None
        elif section == "outcomes" and line.startswith("- "):
            category, _, summary = line[2:].partition(":")
            current["outcomes"].append({"category": category.strip(), "summary": summary.strip()})
    return chains


def uncovered_in(text: str) -> list[tuple[str, str, bool]]:
    """Turns a resume prompt or a tool result says are uncovered: (session, turn, has a chain)."""
    out = []
    for match in re.finditer(r"`(S\d+)/(T\d+)`\s*[—-]\s*(has an evidence chain|no evidence chain)", text):
        out.append((match.group(1), match.group(2), match.group(3) == "has an evidence chain"))
    return out


def work_item(ref: str, session_ref: str, chains: list[dict], instructions: str) -> dict:
    kinds = "Choose exactly one:"
    refs = [{"session_ref": c["session_ref"], "turn_ref": c["turn_ref"]} for c in chains]
    material = [c for c in chains if c.get("materiality") == "material"]
    summaries = [clip(s, 100) for c in chains for s in c.get("reactions") or []]
    item: dict[str, Any] = {
        "work_item_ref": ref,
        "title": f"Work in session {session_ref} ({len(chains)} turn(s))",
        "covered_turns": refs,
        "confidence": "medium",
    }
    trigger = {"summary": f"The user's requests in session {session_ref}.", "evidence_refs": refs[:1]}
    reaction = {"summary": f"The agent worked through {len(chains)} turn(s) of session {session_ref}.",
                "main_actions": summaries[:3] or ["Answered the user's requests."]}
    if material:
        mrefs = [{"session_ref": c["session_ref"], "turn_ref": c["turn_ref"]} for c in material]
        # The project-synthesis prompt lists no categories: it says to reuse the chains' own.
        category = next((o.get("category") for c in material + chains for o in c.get("outcomes") or []
                         if isinstance(o, dict) and o.get("category")), None)
        if category is None:
            raise NoValues(f"no chain of session {session_ref} has an outcome category to reuse")
        item.update(kind=pick(instructions, kinds, "material_work_item"), trigger=trigger, agent_reaction=reaction,
                    outcomes=[{"category": category,
                               "summary": f"Results the agent reported in session {session_ref}.",
                               "evidence_refs": mrefs, "confidence": "medium"}],
                    terminal_states=[],
                    disposition={"type": pick(instructions, "Task dispositions:", "completed"),
                                 "scope": "The requests made in the covered turns.",
                                 "summary": "The agent reported results for the requests; they were not verified here.",
                                 "evidence_refs": mrefs},
                    limits=["Results are as the agent reported them."])
    else:
        item.update(kind=pick(instructions, kinds, "no_material_work_item"), trigger=trigger, agent_reaction=reaction,
                    outcomes=[], terminal_states=[], limits=["No material result is visible."])
    return item


def gap_item(ref: str, turns: list[tuple[str, str]], instructions: str) -> dict:
    return {"work_item_ref": ref, "kind": pick(instructions, "Choose exactly one:", "evidence_gap_item"),
            "title": "Turns without an evidence chain",
            "covered_turns": [{"session_ref": s, "turn_ref": t} for s, t in turns],
            "limits": ["No evidence chain was extracted."], "confidence": "low"}


def project_synthesis(body: dict, tools: dict, instructions: str, calls: list[Call]) -> Decision:
    phase = "project_synthesis"
    users = message_texts(body, "user")
    project_key = bullet(users[0], "Project key") if users else None
    if not project_key:
        return Decision(phase, text="The input names no project; nothing was written.")
    chains = chains_in(users[0])
    writes = [c for c in calls if c.name == WRITE_WORK_ITEM]
    accepted = [c for c in writes if isinstance(c.output, dict) and c.output.get("status") not in ("invalid", None)]
    covered = {(t["session_ref"], t["turn_ref"]) for c in accepted
               for t in (c.arguments.get("work_item") or {}).get("covered_turns") or []}
    committed_refs = re.findall(r"^- (W\d{4}):", users[0], re.M)
    for line in re.findall(r"^- W\d{4}: (.*)$", users[0], re.M):
        covered |= {tuple(x.strip().split("/")) for x in line.split(",") if "/" in x}
    used = [int(r[1:]) for r in committed_refs] + [int(c.arguments["work_item"]["work_item_ref"][1:]) for c in accepted
                                                   if str((c.arguments.get("work_item") or {}).get("work_item_ref", "W0")).startswith("W")]
    next_ref = f"W{(max(used) if used else 0) + 1:04d}"
    if writes and status(writes[-1].output) == "invalid":
        if len(refused(writes)) > MAX_REFUSALS:
            return Decision(phase, text=f"write_work_item kept refusing: {clip(json.dumps(writes[-1].output), 400)}")
        # Retry the refused item as a smaller one: only its own session's turns, fresh ref.
        item = json.loads(json.dumps(writes[-1].arguments.get("work_item") or {}))
        item = fix_work_item(item, writes[-1].output.get("errors") or [], instructions)
        return Decision(phase, WRITE_WORK_ITEM, {"project_key": project_key, "work_item": item},
                        namespace=tools[WRITE_WORK_ITEM])
    # What is still to cover: the chains in the input, then whatever a later prompt or the
    # last tool result says is uncovered.
    todo: dict[str, list[dict]] = {}
    for chain in chains:
        key = (chain["session_ref"], chain["turn_ref"])
        if key not in covered:
            todo.setdefault(chain["session_ref"], []).append(chain)
    gaps: list[tuple[str, str]] = []
    texts = users[1:] + [output_text(c.output) if not isinstance(c.output, (dict, list)) else json.dumps(c.output)
                         for c in writes]
    reported = [u for t in texts for u in uncovered_in(t)]
    last_uncovered = None
    if writes and isinstance(writes[-1].output, dict):
        last_uncovered = writes[-1].output.get("uncovered_turns")
    if isinstance(last_uncovered, list):
        reported += [(u.get("session_ref"), u.get("turn_ref"), None) for u in last_uncovered if isinstance(u, dict)]
    known = {(c["session_ref"], c["turn_ref"]) for c in chains}
    for s, t, has_chain in reported:
        if (s, t) in covered or (s, t) in known:
            continue
        if has_chain:
            # A chain the input did not show: its turn still goes into a work item of its own.
            known.add((s, t))
            todo.setdefault(s, []).append({"session_ref": s, "turn_ref": t, "materiality": "minor",
                                           "reactions": [], "outcomes": []})
        else:
            gaps.append((s, t))
    if todo:
        session_ref = sorted(todo)[0]
        item = work_item(next_ref, session_ref, todo[session_ref], instructions)
        return Decision(phase, WRITE_WORK_ITEM, {"project_key": project_key, "work_item": item},
                        namespace=tools[WRITE_WORK_ITEM])
    if gaps:
        item = gap_item(next_ref, sorted(set(gaps)), instructions)
        return Decision(phase, WRITE_WORK_ITEM, {"project_key": project_key, "work_item": item},
                        namespace=tools[WRITE_WORK_ITEM])
    return Decision(phase, text="Done.")


def fix_work_item(item: dict, errors: list, instructions: str) -> dict:
    """A refused work item put right where the errors point: a field not allowed for its kind
    is dropped, a missing required one is given its empty form."""
    for error in errors:
        if not isinstance(error, dict):
            continue
        path = str(error.get("path") or "").removeprefix("work_item.")
        message = str(error.get("message") or "")
        target, key = locate(item, path)
        if target is None:
            continue
        if "must leave" in message or "not allowed" in message or "must be empty" in message:
            if isinstance(target, dict):
                target.pop(key, None)
        elif "required" in message and isinstance(target, dict) and key not in target:
            target[key] = [] if key in ("limits", "outcomes", "terminal_states") else ""
    return item


# ---------------------------------------------------------------------------------------------
# Daily synthesis


def turn_refs_in(text: str) -> list[dict]:
    """The turns the input cites or its work items cover, as {project_key, session_ref,
    turn_ref}, each turn once: `cite: <project_key>/<session_ref>/<turn_ref>` lines and the
    turns of material work items first. A work item is headed `**W0001** [<kind>]` and lists
    `covered_turns: S0001/T0001, ...`; its project is the one its heading names
    (`**<project_key> · W0001**`), else the last `Project key:` above it."""
    material: list[dict] = []
    other: list[dict] = []
    project = None
    kind = None
    for line in text.splitlines():
        named = re.search(r"(?:Project key|project_key)[`*]*\s*[:=]\s*[`\"]?([A-Za-z0-9_.-]+)", line)
        if named:
            project = named.group(1)
        head = re.match(r"^\*\*(?:([A-Za-z0-9_.-]+) · )?(W\d+)\*\*\s*\[([^\]]+)\]", line)
        if head:
            project = head.group(1) or project
            kind = head.group(3)
        for project_key, session_ref, turn_ref in re.findall(r"\bcite:\s*([A-Za-z0-9_.-]+)/(S\d+)/(T\d+)", line):
            material.append({"project_key": project_key, "session_ref": session_ref, "turn_ref": turn_ref})
        covered = re.match(r"^covered_turns:\s*(.*)$", line)
        if covered:
            for session_ref, turn_ref in re.findall(r"(S\d+)/(T\d+)", covered.group(1)):
                ref = {"project_key": project, "session_ref": session_ref, "turn_ref": turn_ref}
                (material if kind == "material_work_item" else other).append(ref)
    seen, out = set(), []
    for ref in material + other:
        key = tuple(ref.values())
        if key not in seen:
            seen.add(key)
            out.append(ref)
    return out


def daily(body: dict, tools: dict, writer: str, instructions: str, calls: list[Call]) -> Decision:
    phase = writer.removeprefix("write_")
    users = message_texts(body, "user")
    text = "\n".join(users)
    writes = [c for c in calls if c.name == writer]
    if writes and status(writes[-1].output) not in ("invalid", None):
        return Decision(phase, text="Done.")
    if len(refused(writes)) > MAX_REFUSALS:
        return Decision(phase, text=f"{writer} kept refusing: {clip(json.dumps(writes[-1].output), 400)}")
    if writes and status(writes[-1].output) == "invalid":
        # The refused write put right where its errors point: it already holds every earlier
        # correction, so corrections add up.
        args = correct_daily(writes[-1].arguments, writes[-1].output.get("errors") or [])
        return Decision(phase, writer, args, namespace=tools[writer])
    if writes:
        return Decision(phase, text=f"{writer} gave no result: {clip(output_text(writes[-1].output) or str(writes[-1].output), 300)}")
    refs = turn_refs_in(users[0] if users else "")
    project_key = bullet(users[0], "Project key") if users else None
    if writer == "write_project_summary":
        cites = [{k: r[k] for k in ("session_ref", "turn_ref")} for r in refs][:3]
        args: dict[str, Any] = {"project_key": project_key,
                                "summary": {"text": f"Work on {clip(project_label(text) or project_key, 60)}: "
                                                    f"{len(refs)} covered turn(s), as the agents reported it.",
                                            "citations": cites}}
    else:
        cites = [r for r in refs if r.get("project_key")][:3]
        labels = sorted(set(re.findall(r"^label:\s*(.+?)\s*$", text, re.M))) or \
            sorted({r["project_key"].rsplit("-", 1)[0] for r in cites})
        if writer == "write_report_title":
            args = {"title": {"text": "Work on " + ", ".join(labels or ["the day"]), "citations": cites[:2]}}
        elif writer == "write_engagement":
            args = {"overall_reading": {"text": "The user steered the agents through short requests.",
                                        "confidence": "medium", "citations": cites},
                    "observations": [{"dimension": "direction", "statement": "The user stated each request directly.",
                                      "citations": cites[:1], "confidence": "medium"}],
                    "limits": ["Read from the evidence chains only."]}
        else:
            args = {"takeaways": {"text": "Short, concrete requests got direct results.",
                                  "confidence": "medium", "citations": cites},
                    "patterns": [], "limits": ["Read from the evidence chains only."]}
    return Decision(phase, writer, args, namespace=tools[writer])


def project_label(text: str) -> str | None:
    for block in json_blocks(text):
        if isinstance(block, dict) and isinstance(block.get("project_label"), str):
            return block["project_label"]
    return None


def correct_daily(args: dict, errors: list) -> dict:
    """A refused daily write put right: every list entry an error points at (a citation the
    server refuses, an observation or a pattern it cannot take) is dropped; an error at a
    field is left as it is (the next refusal counts towards MAX_REFUSALS)."""
    out = json.loads(json.dumps(args))
    for error in errors:
        if not isinstance(error, dict):
            continue
        target, key = locate(out, str(error.get("path") or ""))
        if target is None:
            continue
        if isinstance(target, list) and isinstance(key, int) and key < len(target):
            target.pop(key)
    return out


# ---------------------------------------------------------------------------------------------
# The endpoint


def decide(body: dict) -> Decision:
    tools = offered_tools(body)
    instructions = "\n".join(message_texts(body, "developer")) + "\n" + str(body.get("instructions") or "")
    calls = calls_so_far(body)
    if READ in tools and WRITE_EVIDENCE in tools:
        return extraction(body, tools, instructions, calls)
    if WRITE_WORK_ITEM in tools:
        return project_synthesis(body, tools, instructions, calls)
    for writer in DAILY_WRITERS:
        if writer in tools:
            return daily(body, tools, writer, instructions, calls)
    return Decision("unknown", text="No prompt-diary tool is offered; nothing can be done.")


class State:
    lock = threading.Lock()
    n = 0
    log_dir: Path | None = None


def sse(kind: str, data: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.split("?")[0].endswith("/models"):
            return self._json(200, {"object": "list", "data": [], "models": []})
        self._json(404, {"error": {"message": f"no route GET {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if not self.path.split("?")[0].endswith("/responses"):
            return self._json(404, {"error": {"message": f"no route POST {self.path}", "type": "not_found"}})
        try:
            body = json.loads(raw)
            assert isinstance(body, dict)
        except (ValueError, AssertionError):
            return self._json(400, {"error": {"message": "the body is not a JSON object", "type": "invalid_request_error"}})
        with State.lock:
            State.n += 1
            n = State.n
        started = time.monotonic()
        try:
            decision = decide(body)
        except Exception as err:  # a bug here must show, not hang the turn
            decision = Decision("error", text=f"the scripted agent failed: {type(err).__name__}: {err}")
            print(f"#{n} agent error: {err!r}", file=sys.stderr, flush=True)
        spent = time.monotonic() - started
        rid = f"resp_{n}"
        if decision.name:
            item: dict[str, Any] = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                                    "name": decision.name, "arguments": json.dumps(decision.arguments, ensure_ascii=False)}
            if decision.namespace:
                item["namespace"] = decision.namespace
        else:
            item = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": decision.text, "annotations": []}]}
        in_tokens = max(1, len(raw) // 4)
        events = [
            sse("response.created", {"response": {"id": rid}}),
            sse("response.output_item.added", {"output_index": 0, "item": item}),
            sse("response.output_item.done", {"output_index": 0, "item": item}),
            sse("response.completed", {"response": {"id": rid, "usage": {
                "input_tokens": in_tokens, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 16, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": in_tokens + 16}}}),
        ]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(b"".join(events))
        self.wfile.flush()
        self.close_connection = True
        if State.log_dir:
            (State.log_dir / f"{n:04d}-request.json").write_text(json.dumps(body, indent=1, ensure_ascii=False))
            (State.log_dir / f"{n:04d}-answer.json").write_text(json.dumps(item, indent=1, ensure_ascii=False))
            line = {"n": n, "phase": decision.phase, "call": decision.name, "final": None if decision.name else decision.text,
                    "session": self.headers.get("session-id"), "seconds": round(spent, 6), "bytes": len(raw)}
            with State.lock, (State.log_dir / "requests.jsonl").open("a") as f:
                f.write(json.dumps(line) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--port-file", type=Path, help="write the port here once listening")
    parser.add_argument("--log-dir", type=Path, help="keep every request and answer here")
    args = parser.parse_args()
    if args.log_dir:
        args.log_dir.mkdir(parents=True, exist_ok=True)
        State.log_dir = args.log_dir
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file.with_name(args.port_file.name + ".tmp")
        tmp.write_text(f"{port}\n")
        tmp.replace(args.port_file)
    print(f"scripted agent listening on http://127.0.0.1:{port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
