#!/usr/bin/env python3
"""The realday tools' own tests: what compare.py, agent.py, mcp_tap.py and summarize.py do with
inputs a real day rarely shows (a key only one day has, an error that repeats, a cursor that
comes back, a server that says what it should not, a tap record that is missing). Stdlib only,
a few seconds; tools/realday/test.sh runs it before the day.

  python3 tools/realday/test_tools.py [-v]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import agent  # noqa: E402


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60, **kwargs)


class Compare(unittest.TestCase):
    """compare.py: keys set aside keep their presence; only evidence-store's own directories
    are set aside; a missing day is exit 2."""

    def day(self, root: Path, name: str, chain: dict, metadata: dict, extra: dict[str, str] | None = None) -> Path:
        ws = root / name / "reports" / "work" / "2026-01-15"
        (ws / "projects" / "P" / "evidence").mkdir(parents=True)
        (ws / "projects" / "P" / "evidence" / "S0001.json").write_text(json.dumps({"evidence_chains": [chain]}))
        (ws / "metadata.json").write_text(json.dumps(metadata))
        for rel, text in (extra or {}).items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text)
        agent_dir = root / name / "agent"
        agent_dir.mkdir()
        (agent_dir / "0001-request.json").write_text(json.dumps({"input": [
            {"type": "function_call", "call_id": "c1", "name": "write_evidence", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": '{"status": "appended"}'}]}))
        return root / name

    def compare(self, a: Path, b: Path) -> subprocess.CompletedProcess:
        return run(str(HERE / "compare.py"), str(a), str(b))

    def test_a_time_key_is_compared_for_presence_and_nothing_else_is_set_aside(self) -> None:
        chain = {"turn_ref": "T0001"}
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            a = self.day(root, "a", chain, {"prepared_at": "2026-01-15T10:00:00Z"})
            b = self.day(root, "b", chain, {"prepared_at": "2026-01-15T11:11:11Z"})
            self.assertEqual(self.compare(a, b).returncode, 0, "prepared_at values differ: set aside")
            c = self.day(root, "c", {**chain, "committed_at": "2026-01-15T10:00:00Z"}, {"prepared_at": "x"})
            out = self.compare(a, c)
            self.assertEqual(out.returncode, 1, out.stdout)
            self.assertIn("committed_at: only in the second", out.stdout)
            d = self.day(root, "d", chain, {})
            out = self.compare(a, d)
            self.assertEqual(out.returncode, 1, out.stdout)
            self.assertIn("prepared_at: only in the first", out.stdout)

    def test_only_evidence_store_s_own_directories_are_set_aside(self) -> None:
        chain = {"turn_ref": "T0001"}
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            a = self.day(root, "a", chain, {}, {".evidence-store/store.redb": "ours",
                                                "projects/P/receipts/S0001.json": "ours"})
            b = self.day(root, "b", chain, {})
            self.assertEqual(self.compare(a, b).returncode, 0)
            for rel in ("projects/P/evidence/receipts/x.json", "projects/.evidence-store/x", "receipts/x",
                        "projects/P/.evidence-store/x"):
                c = self.day(root, f"c{abs(hash(rel))}", chain, {}, {rel: "{}"})
                out = self.compare(b, c)
                self.assertEqual(out.returncode, 1, f"{rel}: {out.stdout}")
                self.assertIn(f"DIFF {rel}: only in", out.stdout)

    def test_a_missing_day_exits_2(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            a = self.day(Path(tmp), "a", {}, {})
            for missing in (Path(tmp) / "none", Path(tmp) / "a" / "agent"):
                out = self.compare(a, missing)
                self.assertEqual(out.returncode, 2, out)
                self.assertIn("compare: ", out.stderr)


EXTRACTION_RULES = """Terminal state types:
  - `material_result`: done.
  - `no_material`: nothing.
  - `evidence_gap`: unseen.
Materiality values:
  - `material`: it matters.
  - `minor`: it does not.
"""
ASSIGNMENT = """- Project key: `P-1`
- Session reference: `S0001`

```json
{"turn_ref": "T0002", "turn_start_line": 10, "turn_end_line": 20}
```
"""


def body(offered: list[str], developer: str, user: str, calls: list[tuple[str, dict, object]]) -> dict:
    """A Responses request offering `offered`, with the calls made so far and their outputs."""
    items: list[dict] = [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": developer}]},
                         {"type": "message", "role": "user", "content": [{"type": "input_text", "text": user}]}]
    for n, (name, arguments, output) in enumerate(calls):
        items.append({"type": "function_call", "call_id": f"c{n}", "name": name, "arguments": json.dumps(arguments)})
        text = output if isinstance(output, str) else json.dumps(output)
        items.append({"type": "function_call_output", "call_id": f"c{n}", "output": text})
    return {"tools": [{"type": "function", "name": name} for name in offered], "input": items}


def drive(offered: list[str], developer: str, user: str, answer, most: int = 500) -> tuple[list, agent.Decision]:
    """Calls the agent until it sends a final message, each call answered by `answer(name,
    arguments, n)`; fails past `most` calls (the agent would loop)."""
    calls: list[tuple[str, dict, object]] = []
    for n in range(most):
        decision = agent.decide(body(offered, developer, user, calls))
        if decision.name is None:
            return calls, decision
        calls.append((decision.name, decision.arguments, answer(decision.name, decision.arguments, n)))
    raise AssertionError(f"no final message after {most} calls: {calls[-3:]}")


class Agent(unittest.TestCase):
    """agent.py: every loop has an end, corrections add up, values come from the instructions."""

    offered = ["read_session_lines", "write_evidence"]

    def test_a_read_that_keeps_failing_is_given_up_after_two(self) -> None:
        for failure in ({"error": "busy"}, "plain text", [1, 2], {"records": "not a list"}):
            calls, final = drive(self.offered, EXTRACTION_RULES, ASSIGNMENT, lambda *_: failure)
            self.assertEqual(len(calls), 2, f"{failure!r}: {calls}")
            self.assertIn("read_session_lines failed 2 times", final.text)
        # Failures need not be in a row: a page between them does not reset the count.
        answers = [{"error": "busy"}, {"records": [], "next_cursor": "a"}, {"error": "busy"}]
        calls, final = drive(self.offered, EXTRACTION_RULES, ASSIGNMENT, lambda _n, _a, n: answers[n])
        self.assertEqual(len(calls), 3, calls)
        self.assertIn("failed 2 times", final.text)

    def test_a_cursor_that_comes_back_or_never_ends_is_not_followed(self) -> None:
        cursors = ["a", "b", "a"]
        calls, final = drive(self.offered, EXTRACTION_RULES, ASSIGNMENT,
                             lambda _n, _a, n: {"records": [], "next_cursor": cursors[n]})
        self.assertEqual(len(calls), 3, calls)
        self.assertIn('gave the cursor "a" again', final.text)
        calls, final = drive(self.offered, EXTRACTION_RULES, ASSIGNMENT,
                             lambda _n, _a, n: {"records": [], "next_cursor": f"c{n}"})
        self.assertEqual(len(calls), agent.MAX_PAGES, len(calls))
        self.assertIn(f"more than {agent.MAX_PAGES} pages", final.text)

    def test_a_write_answer_that_is_a_list_is_no_crash(self) -> None:
        def answer(name: str, _arguments: dict, _n: int) -> object:
            return {"records": [{"line": 10, "kind": "user_message", "text": "hi"}], "next_cursor": None} \
                if name == "read_session_lines" else [{"unexpected": "list"}]
        calls, final = drive(self.offered, EXTRACTION_RULES, ASSIGNMENT, answer)
        self.assertEqual([c[0] for c in calls], ["read_session_lines", "write_evidence"])
        self.assertIn("write_evidence gave no result", final.text)
        for writer in agent.DAILY_WRITERS:
            calls, final = drive([writer], "", "cite: P-1/S0001/T0001\n", answer)
            self.assertEqual(len(calls), 1, calls)
            self.assertIn(f"{writer} gave no result", final.text)

    def test_a_heading_the_instructions_lack_fails_loudly(self) -> None:
        page = {"records": [{"line": 10, "kind": "user_message", "text": "run it"},
                            {"line": 11, "kind": "tool_result", "text": "ok"}], "next_cursor": None}
        request = body(self.offered, EXTRACTION_RULES, ASSIGNMENT, [("read_session_lines", {
            "project_key": "P-1", "session_ref": "S0001", "start_line": 10, "end_line": 20, "mode": "compact"}, page)])
        with self.assertRaisesRegex(agent.NoValues, "'Check type values:'"):
            agent.decide(request)

    def test_daily_corrections_add_up(self) -> None:
        user = "- Project key: `P-1`\n" + "".join(f"cite: P-1/S0001/T000{n}\n" for n in (1, 2, 3))
        written: list[dict] = []

        def answer(_name: str, arguments: dict, n: int) -> object:
            written.append(arguments)
            if n < 2:  # the first citation of each draft is refused
                return {"status": "invalid", "errors": [{"path": "overall_reading.citations[0]", "message": "no"}]}
            return {"status": "updated"}
        calls, final = drive(["write_engagement"], "", user, answer)
        self.assertEqual(final.text, "Done.")
        turns = [[c["turn_ref"] for c in w["overall_reading"]["citations"]] for w in written]
        self.assertEqual(turns, [["T0001", "T0002", "T0003"], ["T0002", "T0003"], ["T0003"]])


class Tap(unittest.TestCase):
    """mcp_tap.py counts what a server must not say on its stdout."""

    def test_non_json_lines_and_answers_to_unknown_ids_are_protocol_errors(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            server_dir = root / "server"
            server_dir.mkdir()
            server = server_dir / "report"
            server.write_text(f"""#!{sys.executable}
import json, sys
print("a log line on stdout", flush=True)
print("[1, 2]", flush=True)
print(json.dumps({{"jsonrpc": "2.0", "id": 999, "result": {{}}}}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if "id" in request:
        print(json.dumps({{"jsonrpc": "2.0", "id": request["id"], "result": {{}}}}), flush=True)
        print(json.dumps({{"jsonrpc": "2.0", "id": request["id"], "result": {{}}}}), flush=True)
""")
            server.chmod(0o755)
            env = dict(os.environ, PATH=f"{server_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                       REALDAY_TAP_DIR=str(root / "tap-bin"))
            request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}) + "\n"
            out = run(str(HERE / "mcp_tap.py"), str(root / "log"), "mcp", "serve", input=request, env=env)
            self.assertEqual(out.returncode, 0, out)
            (record_file,) = (root / "log").glob("serve-*.json")
            record = json.loads(record_file.read_text())
            whats = [e["what"] for e in record["protocol_errors"]]
            self.assertEqual(whats, ["a line that is not JSON", "JSON that is not a JSON-RPC message",
                                     "an answer to an id no request is waiting on",
                                     "an answer to an id no request is waiting on"], record)
            self.assertEqual(len(record["requests"]), 1)
            self.assertIn("seconds", record["requests"][0])


class Summarize(unittest.TestCase):
    """summarize.py: a server whose tap record is missing is named, the tap's protocol errors
    are counted."""

    def test_a_missing_tap_record_is_named_and_tap_protocol_errors_counted(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out, ws = Path(tmp) / "day", Path(tmp) / "ws"
            (out / "tap").mkdir(parents=True)
            ws.mkdir()
            for pid in (11, 12, 13):
                (out / "tap" / f"serve-{pid}.stderr").write_text("")
            record = {"pid": 11, "started": 0.0, "requests": [], "signals": [], "stdin_closed_at": None,
                      "exit": {"code": 0}, "unanswered": [],
                      "protocol_errors": [{"at": 0.1, "what": "a line that is not JSON", "line": "x"}]}
            (out / "tap" / "serve-11.json").write_text(json.dumps(record))
            (out / "tap" / "serve-12.json").write_text("{not json")
            done = run(str(HERE / "summarize.py"), "--out", str(out), "--workspace", str(ws), "--server",
                       "evidence-store", "--rc", "0", "--started", "0", "--ended", "1")
            self.assertEqual(done.returncode, 0, done)
            summary = json.loads(done.stdout)
            self.assertEqual(summary["servers"]["without_tap_record"], ["serve-12", "serve-13"])
            self.assertEqual(summary["protocol_errors"], 1, summary["protocol_error_lines"])
            self.assertIn("a line that is not JSON", summary["protocol_error_lines"][0])


if __name__ == "__main__":
    unittest.main()
