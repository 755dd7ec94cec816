#!/usr/bin/env python3
"""Generate synthetic prompt-diary prepared workspaces for tests and benchmarks.

The output has the layout prepare writes (metadata.json, projects/<key>/project.json,
sessions.index.jsonl, sessions/<source>/<file>.jsonl) with Claude Code and Codex record
shapes. Turn spans are computed from true physical line numbers (Python
`bytes.decode("utf-8", "replace").splitlines()`), so a record holding a raw U+2028 spans
two lines, as it does for prepare.

Deterministic for a given --seed. Files are streamed: a 1 GB session needs little memory.

Examples:
  gen_workspace.py --out /tmp/ws --edge-cases
  gen_workspace.py --out /tmp/big --projects 1 --sessions 1 --session-bytes 1G
  gen_workspace.py --verify /tmp/ws
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

SIZE_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in SIZE_SUFFIXES:
        return int(float(text[:-1]) * SIZE_SUFFIXES[text[-1]])
    return int(text)


def dumps(value: object) -> str:
    """How transcripts are written: compact JSON, non-ASCII raw (so U+2028 stays raw)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def physical_lines(data: bytes) -> int:
    return len(data.decode("utf-8", "replace").splitlines())


class TextPool:
    """A large random text to slice tool outputs from, so big payloads cost no Python loops."""

    WORDS = ["parser", "token", "assert", "failed", "passed", "src/lib.rs", "fn", "let", "println!",
             "테스트", "파서", "日本語", "ünïcödé", "emoji🙂", "λ", "→", "“quoted”", "—", "\t", "{}", "[]"]

    def __init__(self, rng: random.Random, size: int) -> None:
        chunk = " ".join(rng.choice(self.WORDS) for _ in range(20000)) + "\n"
        self.text = (chunk * (size // len(chunk) + 2))[: size + len(chunk)]
        self.rng = rng

    def take(self, length: int) -> str:
        start = self.rng.randrange(0, max(1, len(self.text) - length))
        return self.text[start : start + length]


class SessionWriter:
    """Writes records to one session file and counts the physical lines they occupy."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("wb", buffering=1 << 20)
        self.lines = 0
        self.bytes = 0
        self.turn_starts: list[int] = []

    def write(self, data: bytes, starts_turn: bool = False) -> None:
        # turn_ref is T and four digits: past T9999, user messages continue the last turn.
        if starts_turn and len(self.turn_starts) < 9999:
            self.turn_starts.append(self.lines + 1)
        self.file.write(data)
        self.bytes += len(data)
        self.lines += physical_lines(data)

    def record(self, value: object, starts_turn: bool = False, end: str = "\n") -> None:
        self.write((dumps(value) + end).encode("utf-8"), starts_turn)

    def close(self) -> None:
        self.file.close()


def claude_turn(w: SessionWriter, rng: random.Random, pool: TextPool, max_out: int, edge: bool) -> None:
    prompt = pool.take(rng.randint(10, 200)).strip() or "do it"
    if rng.random() < 0.5:
        content: object = prompt  # typed prompts are plain strings
    else:
        content = [{"type": "text", "text": prompt}]
    w.record({"type": "user", "message": {"role": "user", "content": content}}, starts_turn=True)
    for i in range(rng.randint(1, 4)):
        items: list[dict] = []
        if rng.random() < 0.4:
            items.append({"type": "thinking", "thinking": pool.take(300)})
        tool_id = f"t{rng.randrange(10**9)}"
        command = "pytest -q " + pool.take(rng.randint(5, 600 if edge else 60)).replace("\n", " ")
        tool_input: dict = {"command": command, "timeout": 120000}
        if edge and rng.random() < 0.2:
            tool_input.update({"ratio": float("nan"), "big": 10**30, "limit": 2.0, "tiny": 1e-7})
        items.append({"type": "tool_use", "id": tool_id, "name": rng.choice(["Bash", "Edit", "Read"]), "input": tool_input})
        w.record({"type": "assistant", "message": {"role": "assistant", "content": items}})
        output = pool.take(rng.randint(0, max_out))
        result = {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": output}]}}
        if rng.random() < 0.5:
            result["toolUseResult"] = {"filePath": "src/parser.py"} if i % 2 else {"stdout": output[:100], "command": command[:50]}
        w.record(result)
    w.record({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": pool.take(rng.randint(20, 400))}]}})
    if rng.random() < 0.3:
        w.record({"type": "system", "subtype": "turn_duration", "durationMs": rng.randint(1, 99999)})


def codex_turn(w: SessionWriter, rng: random.Random, pool: TextPool, max_out: int, edge: bool) -> None:
    ts = "2026-01-15T10:00:00Z"
    prompt = pool.take(rng.randint(10, 200)).strip() or "go"
    w.record({"timestamp": ts, "type": "event_msg", "payload": {"type": "user_message", "message": prompt}}, starts_turn=True)
    w.record({"timestamp": ts, "type": "response_item", "payload": {"type": "message", "role": "user",
              "content": [{"type": "input_text", "text": prompt}]}})
    for _ in range(rng.randint(1, 4)):
        w.record({"timestamp": ts, "type": "response_item", "payload": {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"}})
        args = dumps({"command": ["bash", "-lc", pool.take(rng.randint(5, 700 if edge else 80))]})
        w.record({"timestamp": ts, "type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": args, "call_id": "c1"}})
        w.record({"timestamp": ts, "type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1",
                  "output": pool.take(rng.randint(0, max_out))}})
    answer = pool.take(rng.randint(20, 300))
    w.record({"timestamp": ts, "type": "response_item", "payload": {"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": answer}]}})
    w.record({"timestamp": ts, "type": "event_msg", "payload": {"type": "agent_message", "message": answer}})
    w.record({"timestamp": ts, "type": "event_msg", "payload": {"type": "token_count", "info": None}})


def edge_lines(w: SessionWriter) -> None:
    """Every line-splitting and parsing edge case, in one turn."""
    w.record({"type": "user", "message": {"role": "user", "content": "edge cases: U+2028\u2028inside, NEL\x85, PS\u2029"}}, starts_turn=True)
    w.record({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "crlf"}]}}, end="\r\n")
    w.record({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "lone cr"}]}}, end="\r")
    for sep in ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]:
        w.record({"type": "system", "subtype": f"sep{ord(sep):02x}"}, end=sep)
    w.write(b"this is not json\n")
    w.write(b"\n")
    w.write(b'{"type": "user", "message": {"role": "user", "content": [{"type": "text"\n')
    w.write(b"[1,2]\n42\n")
    w.write(b'{"type":"user","message":{"role":"user","content":[{"type":"text","text":"bad \xff\xfe bytes"}]}}\n')
    w.write(b'{"type":"user","message":{"role":"user","content":[{"type":"text","text":"lone \\ud800 surrogate"}]}}\n')
    w.write(b'{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","name":"T","input":{"v":NaN,"w":Infinity,"big":123456789012345678901234567890,"f":1E2}}]}}\n')
    w.write(b'{"type":"assistant","type":"user","message":{"role":"user","content":[{"type":"text","text":"dup keys"}]}}\n')
    w.write('{"type":"user","message":{"role":"user","content":[{"type":"text","text":"\U0001f600 e\u0301 \u200b"}]}}\n'.encode())


def write_session(path: Path, source: str, rng: random.Random, pool: TextPool, args: argparse.Namespace,
                  target_bytes: int | None, last_no_newline: bool) -> tuple[int, int, list[int]]:
    w = SessionWriter(path)
    turn = claude_turn if source == "claude-code" else codex_turn
    if source == "codex":
        w.record({"timestamp": "2026-01-15T10:00:00Z", "type": "session_meta", "payload": {"id": path.stem, "cwd": "/repo"}})
    turns = 0
    while True:
        turn(w, rng, pool, args.tool_output_max, args.edge_cases)
        turns += 1
        if args.edge_cases and turns == 1:
            edge_lines(w)
        if target_bytes is not None:
            if w.bytes >= target_bytes:
                break
        elif turns >= args.turns:
            break
    if last_no_newline:
        w.write(dumps({"type": "system", "subtype": "no_final_newline"}).encode())
    w.close()
    return w.bytes, w.lines, w.turn_starts


def generate(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    pool = TextPool(rng, max(args.tool_output_max * 2, 1 << 20))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    metadata = {
        "schema_version": 2, "report_date": "2026-01-15", "timezone": "UTC", "status": "final",
        "prepared_at": "2026-01-16T09:00:00Z",
        "report_window_local": {"start": "2026-01-15T00:00:00Z", "end": "2026-01-16T00:00:00Z"},
        "report_window_utc": {"start": "2026-01-15T00:00:00Z", "end": "2026-01-16T00:00:00Z"},
    }
    (out / "metadata.json").write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    total_bytes = total_lines = sessions = 0
    for p in range(args.projects):
        label = ["Parser", "Report", "Infra", "Docs", "Web"][p % 5] + (str(p) if p >= 5 else "")
        key = f"{label}-{hashlib.sha256(f'{args.seed}/{p}'.encode()).hexdigest()[:12]}"
        pdir = out / "projects" / key
        pdir.mkdir(parents=True, exist_ok=True)
        (pdir / "project.json").write_text(json.dumps({"schema_version": 2, "project_key": key, "project_label": label}, indent=2) + "\n", encoding="utf-8")
        rows = []
        for s in range(args.sessions):
            source = "claude-code" if (s + p) % 2 == 0 else "codex"
            name = f"{hashlib.sha256(f'{key}/{s}'.encode()).hexdigest()[:16]}.jsonl"
            rel = f"sessions/{source}/{name}"
            session_ref = f"S{s + 1:04d}"
            special = args.edge_cases and p == 0
            if special and s == args.sessions - 1 and s > 0:
                nbytes, nlines, starts = 0, 0, []  # a row whose file is missing
            elif special and s == args.sessions - 2 and s > 0:
                (pdir / rel).parent.mkdir(parents=True, exist_ok=True)
                (pdir / rel).write_bytes(b"")  # an empty session file
                nbytes, nlines, starts = 0, 0, []
            else:
                nbytes, nlines, starts = write_session(pdir / rel, source, rng, pool, args, args.session_bytes,
                                                       last_no_newline=special and s == 0)
            turns = []
            for i, start in enumerate(starts):
                end = starts[i + 1] - 1 if i + 1 < len(starts) else nlines
                turns.append({"target_subagents": [], "turn_end_line": end, "turn_ref": f"T{i + 1:04d}", "turn_start_line": start})
            rows.append({"session_path": rel, "session_ref": session_ref, "source": source,
                         "source_session_id": name.removesuffix(".jsonl"), "subagent_path": "",
                         "target_end_line": max(nlines, 1), "target_start_line": 1, "turns": turns})
            total_bytes += nbytes
            total_lines += nlines
            sessions += 1
        with (pdir / "sessions.index.jsonl").open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
    return {"out": str(out), "projects": args.projects, "sessions": sessions, "bytes": total_bytes, "lines": total_lines}


def relabel_schema_7(out: Path, previous_context: bool = True) -> None:
    """A generated workspace laid out as prompt-diary 0.2.20's `prepare` lays it out:
    metadata `schema_version` 7, index rows without `subagent_path`, turns without
    `target_subagents`, and (when asked) each turn after the first with `previous_context`
    (the turn before it)."""
    metadata = out / "metadata.json"
    meta = json.loads(metadata.read_text(encoding="utf-8"))
    meta["schema_version"] = 7
    metadata.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    for index in out.glob("projects/*/sessions.index.jsonl"):
        rows = []
        for line in index.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            row.pop("subagent_path", None)
            for turn in row["turns"]:
                turn.pop("target_subagents", None)
            if previous_context:
                for before, turn in zip(row["turns"], row["turns"][1:]):
                    turn["previous_context"] = {"start_line": before["turn_start_line"],
                                                "end_line": before["turn_end_line"]}
            rows.append(row)
        index.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")


def indexes(ws: Path) -> dict[str, list[dict]]:
    """Every project's sessions.index.jsonl rows, by project key, projects in name order."""
    return {
        index.parent.name: [json.loads(line) for line in index.read_text(encoding="utf-8").splitlines() if line.strip()]
        for index in sorted(ws.glob("projects/*/sessions.index.jsonl"))
    }


def verify(root: Path) -> int:
    problems = []
    for index in sorted(root.glob("projects/*/sessions.index.jsonl")):
        for n, line in enumerate(index.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            path = index.parent / row["session_path"]
            if not path.is_file():
                continue
            count = physical_lines(path.read_bytes())
            for turn in row["turns"]:
                if not 1 <= turn["turn_start_line"] <= turn["turn_end_line"] <= count:
                    problems.append(f"{index}:{n} {turn['turn_ref']} outside 1-{count}")
    for p in problems:
        print(p)
    print("OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="workspace directory to create")
    parser.add_argument("--verify", metavar="DIR", help="check an existing workspace's turn spans")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--projects", type=int, default=2)
    parser.add_argument("--sessions", type=int, default=3, help="sessions per project")
    parser.add_argument("--turns", type=int, default=5, help="turns per session (unless --session-bytes)")
    parser.add_argument("--session-bytes", type=parse_size, help="grow every session to about this size (e.g. 200M, 1G)")
    parser.add_argument("--tool-output-max", type=parse_size, default=parse_size("8K"), help="largest tool output (e.g. 4M)")
    parser.add_argument("--edge-cases", action="store_true", help="add every line-splitting and parsing edge case")
    args = parser.parse_args()
    if args.verify:
        return verify(Path(args.verify))
    if not args.out:
        parser.error("--out or --verify is required")
    print(json.dumps(generate(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
