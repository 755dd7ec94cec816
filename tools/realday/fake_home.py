#!/usr/bin/env python3
"""A fake home holding one day of Claude Code and Codex session histories, for `run.sh`.

  fake_home.py --out HOME --date YYYY-MM-DD [--one-turn]

Writes `HOME/.claude/projects/<cwd with / as ->/<session id>.jsonl` (Claude Code) and
`HOME/.codex/sessions/YYYY/MM/DD/rollout-...-<id>.jsonl` (Codex), the files prompt-diary's
`prepare` discovers, for three projects whose working directories are `/home/dev/<project>`
(so the projects' keys do not depend on where HOME is). What the day holds, on purpose:

- Claude Code and Codex sessions, several with more than one turn, one project with both;
- a turn whose tool output (a 60 KB test log) is trimmed in compact reads;
- a turn whose assistant answer is long enough (about 70 KB) that its compact read takes
  more than one page and arrives as fragments, so a reader must follow `next_cursor`;
- `**Evidence**:` markers in the agents' answers (files and test results);
- a correction, a "continue" and a plain approval as human turns; Codex's echo of each user
  message as an `event_msg`.

Every record is stamped at noon UTC of the date and after, so any timezone within 11 hours of
UTC holds the whole day. Nothing is random: the same date gives the same files, byte for byte.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import histories  # noqa: E402


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Clock:
    """Timestamps one second apart from noon UTC of the date."""

    def __init__(self, date: str, hour: int) -> None:
        self.date, self.hour, self.second = date, hour, 0

    def next(self) -> str:
        s = self.second
        self.second += 1
        return f"{self.date}T{self.hour:02d}:{s // 60 % 60:02d}:{s % 60:02d}.000Z"


def test_log(failing: int) -> str:
    """A long pytest log, `failing` failures in its middle."""
    lines = [f"tests/test_tokens.py::test_case_{i:04d} PASSED" + " " * 20 + f"[{i * 100 // 1200:3d}%]"
             for i in range(1200)]
    for k in range(failing):
        lines[600 + k] = f"tests/test_tokens.py::test_case_{600 + k:04d} FAILED - AssertionError: off by one"
    return "\n".join(lines) + f"\n===== {failing} failed, {1200 - failing} passed in 3.21s ====="


def design_note() -> str:
    """A long assistant answer (a design note of numbered sections)."""
    parts = ["Here is the design note for the report cache.\n"]
    for i in range(1, 121):
        parts.append(f"\n### {i}. Section {i}\n\nThe cache keeps entry {i} keyed by its content digest; "
                     f"readers check the digest before use, and a writer replaces the entry atomically. "
                     f"Eviction is least-recently-used with a bound of {i * 64} entries for this tier. "
                     "Every step is logged, and a stale entry is refused rather than served.\n")
    parts.append("\n**Evidence**: docs/cache-design.md:1-400\n")
    return "".join(parts)


class Claude:
    def __init__(self, cwd: str, sid: str, clock: Clock) -> None:
        self.cwd, self.sid, self.clock, self.records, self.n = cwd, sid, clock, [], 0

    def _add(self, record: dict) -> None:
        self.n += 1
        self.records.append(histories.stamp_claude(record, self.cwd, self.sid, self.n, self.clock.next()))

    def user(self, text: str) -> None:
        self._add({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}})

    def tool(self, name: str, tool_input: dict, output: str) -> None:
        tool_id = f"toolu_{self.n:04d}"
        self._add({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}]}})
        self._add({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": output}]},
            "toolUseResult": {"stdout": output[:200], "stderr": "", "interrupted": False}})

    def say(self, text: str) -> None:
        self._add({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})

    def write(self, home: Path) -> None:
        _, projects = histories.home_roots(home)
        dest = histories.claude_path(projects, self.cwd, self.sid)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(histories.dumps_records(self.records, compact=True), encoding="utf-8")


class Codex:
    def __init__(self, cwd: str, sid: str, clock: Clock) -> None:
        self.cwd, self.sid, self.clock, self.calls = cwd, sid, clock, 0
        self.started = clock.next()
        self.records = [histories.codex_meta(sid, cwd, self.started)]

    def _add(self, kind: str, payload: dict) -> None:
        self.records.append({"timestamp": self.clock.next(), "type": kind, "payload": payload})

    def user(self, text: str) -> None:
        self._add("event_msg", {"type": "user_message", "message": text})
        self._add("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})

    def tool(self, command: list[str], output: str) -> None:
        self.calls += 1
        call_id = f"call_{self.calls:03d}"
        self._add("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"})
        self._add("response_item", {"type": "function_call", "name": "shell", "call_id": call_id,
                                    "arguments": dumps({"command": command})})
        self._add("response_item", {"type": "function_call_output", "call_id": call_id, "output": output})

    def say(self, text: str) -> None:
        self._add("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
        self._add("event_msg", {"type": "agent_message", "message": text})

    def write(self, home: Path) -> None:
        sessions, _ = histories.home_roots(home)
        dest = histories.codex_path(sessions, self.sid, self.started)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(histories.dumps_records(self.records, compact=True), encoding="utf-8")


def make(home: Path, date: str, one_turn: bool = False) -> dict:
    def sid(name: str) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"evidence-store/realday/{date}/{name}"))

    sessions = []
    if one_turn:
        # One Claude Code session of one short turn (for a real, slow model).
        s = Claude("/home/dev/parser", sid("one-turn"), Clock(date, 12))
        s.user("Run the tokenizer tests.")
        s.tool("Bash", {"command": "pytest -q tests/test_tokens.py", "timeout": 120000}, "12 passed in 0.31s")
        s.say("All 12 tokenizer tests pass.\n\n**Evidence**: pytest tests/test_tokens.py - PASS")
        s.write(home)
        return {"home": str(home), "date": date, "sessions": 1}
    # parser: two Claude Code sessions; a correction; a trimmed test log.
    s = Claude("/home/dev/parser", sid("parser-1"), Clock(date, 12))
    s.user("The tokenizer drops the last token of every line. Find out why and fix it.")
    s.tool("Bash", {"command": "pytest -q tests/test_tokens.py", "timeout": 120000}, test_log(3))
    s.tool("Read", {"file_path": "src/tokens.py"}, "40    for i in range(len(chars) - 1):\n41        emit(chars[i])")
    s.say("The loop stops one short: `range(len(chars) - 1)` skips the last character.\n\n"
          "**Evidence**: src/tokens.py:40-41\n**Evidence**: pytest tests/test_tokens.py - FAIL")
    s.user("No, don't touch the loop bounds; the caller strips the newline already. Fix it in emit().")
    s.tool("Edit", {"file_path": "src/tokens.py", "old_string": "emit(chars[i])", "new_string": "emit(chars[i], last=i == n)"},
           "The file src/tokens.py has been updated.")
    s.tool("Bash", {"command": "pytest -q tests/test_tokens.py", "timeout": 120000}, "1200 passed in 3.02s")
    s.say("Fixed in emit(): the last token is flushed when the line ends; the loop is unchanged. All 1200 tests pass.\n\n"
          "**Evidence**: src/tokens.py:41\n**Evidence**: pytest tests/test_tokens.py - PASS")
    s.user("Good, commit it.")
    s.tool("Bash", {"command": "git commit -am 'tokens: flush the last token in emit()'"}, "[main 4f2a9c1] tokens: flush the last token in emit()\n 1 file changed, 1 insertion(+), 1 deletion(-)")
    s.say("Committed as 4f2a9c1.")
    sessions.append(s)
    s = Claude("/home/dev/parser", sid("parser-2"), Clock(date, 14))
    s.user("Write a design note for the report cache, with one section per tier.")
    s.tool("Bash", {"command": "ls docs"}, "README.md\narchitecture.md")
    s.say(design_note())
    sessions.append(s)

    # webapp: a Codex session of three turns (one "continue") and a Claude Code one.
    s = Codex("/home/dev/webapp", sid("webapp-1"), Clock(date, 15))
    s.user("Add a /health endpoint that returns the build version.")
    s.tool(["bash", "-lc", "rg -n 'app.get' src"], "src/server.ts:12:app.get('/', index)")
    s.say("Added GET /health returning {version} from package.json.\n\n**Evidence**: src/server.ts:13-16")
    s.user("continue: add a test for it")
    s.tool(["bash", "-lc", "npm test -- health"], "PASS tests/health.test.ts\n  ✓ returns the version (12 ms)")
    s.say("Added tests/health.test.ts; it passes.\n\n**Evidence**: npm test health - PASS")
    s.user("thanks")
    sessions.append(s)
    s = Claude("/home/dev/webapp", sid("webapp-2"), Clock(date, 16))
    s.user("Why does the login page flash white on load?")
    s.tool("Read", {"file_path": "src/login.css"}, "body { background: #fff; transition: background 0.3s; }")
    s.say("The body starts white and transitions to the dark theme after the stylesheet loads; "
          "set the dark background inline in index.html to avoid the flash.\n\n**Evidence**: src/login.css:1")
    sessions.append(s)

    # infra: a Codex session of two turns, the second an unanswered question.
    s = Codex("/home/dev/infra", sid("infra-1"), Clock(date, 17))
    s.user("Bump the base image to debian 13 and rebuild.")
    s.tool(["bash", "-lc", "docker build -t app ."], "Step 1/9 : FROM debian:13-slim\n...\nSuccessfully built 8c1d2e3f")
    s.say("Bumped to debian:13-slim; the image builds.\n\n**Evidence**: Dockerfile:1\n**Evidence**: docker build - PASS")
    s.user("Does the CI cache still hit after the bump?")
    sessions.append(s)

    for session in sessions:
        session.write(home)
    return {"home": str(home), "date": date, "sessions": len(sessions)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the home to create (must not exist)")
    parser.add_argument("--date", required=True, help="the day, YYYY-MM-DD")
    parser.add_argument("--one-turn", action="store_true", help="only one session of one turn")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=False)
    print(json.dumps(make(args.out, args.date, args.one_turn)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
