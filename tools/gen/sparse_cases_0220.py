#!/usr/bin/env python3
"""Write the data-driven cases of the sparse compact records from prompt-diary 0.2.20.

Each output line is {"source", "lines": [previous, line, next], "expect": json | null}:
the record prompt-diary 0.2.20 derives for the middle line (its canonical JSON), or null
when the line is omitted. Inputs: the handwritten edge lines below plus every line of the
sessions of a generated workspace (tools/lib/gen_workspace.py --edge-cases).

Run with 0.2.20's python: tools/.venv-0.2.20/bin/python tools/gen/sparse_cases_0220.py WS OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prompt_diary.generate.evidence_extraction.session_compaction import (
    compact_record,
    compact_record_to_json,
)
from prompt_diary.generate.evidence_extraction.session_pagination import encode_read_json
from prompt_diary.source_records import (
    HumanAttachment,
    InputPart,
    SkillInvocation,
    parse_claude_input,
    parse_codex_input,
)


def parts_of(parsed) -> list | None:
    """The input parts as [tag, ...] lists, or None when the line is no input."""
    if parsed is None:
        return None
    out = []
    for p in parsed.parts:
        if isinstance(p, InputPart):
            # A lone surrogate is written as its escape text, as the read prints it.
            out.append(["text", p.kind, p.text.encode("utf-8", "backslashreplace").decode(), p.source_tag])
        elif isinstance(p, SkillInvocation):
            out.append(["skill", p.name, p.path])
        elif isinstance(p, HumanAttachment):
            out.append(["attachment", p.source_type])
        else:
            out.append(["unavailable", p.source_type])
    return out


def inputs(source: str, prev: str | None, line: str) -> dict:
    """What write_evidence's trigger read sees: the line's input parts and is_human_trigger."""
    try:
        record = json.loads(line)
        previous = json.loads(prev) if prev is not None else None
    except json.JSONDecodeError:
        return {}
    if not isinstance(record, dict):
        return {}
    previous = previous if isinstance(previous, dict) else None
    if source == "codex":
        parsed = parse_codex_input(record)
    elif source == "claude-code":
        parsed = parse_claude_input(record, previous)
    else:
        return {}
    return {"input": parts_of(parsed), "human_trigger": bool(parsed and parsed.is_human_trigger)}

T0 = "2026-11-20T10:00:00.000Z"
T1 = "2026-11-20T10:00:00.050Z"
T9 = "2026-11-20T10:00:01.000Z"
BIG = "x" * 2000


def d(v):
    return json.dumps(v, ensure_ascii=False)


def codex(t, payload, ts=T0, **extra):
    return d({"timestamp": ts, "type": t, "payload": payload, **extra})


def resp_msg(role, text, ts=T0, typ=None, meta=None):
    p = {"type": "message", "role": role,
         "content": [{"type": typ or ("input_text" if role == "user" else "output_text"), "text": text}]}
    if meta is not None:
        p["internal_chat_message_metadata_passthrough"] = meta
    return codex("response_item", p, ts)


def claude(t, content, **extra):
    return d({"type": t, "message": {"role": t, "content": content}, **extra})


CODEX = [
    [None, codex("session_meta", {"id": "x"}), None],
    [None, codex("turn_context", {"cwd": "/"}), None],
    [None, codex("event_msg", {"type": "token_count"}), None],
    [None, codex("event_msg", {"type": "task_complete"}), None],
    [None, codex("response_item", {"type": "reasoning", "summary": []}), None],
    [None, resp_msg("user", "fix the bug"), None],
    [resp_msg("user", "fix the bug"), codex("event_msg", {"type": "user_message", "message": "fix the bug"}, T1), None],
    [resp_msg("user", "fix the bug"), codex("event_msg", {"type": "user_message", "message": "fix the bug"}, T9), None],
    [None, codex("event_msg", {"type": "agent_message", "message": "done"}), resp_msg("assistant", "done", T1)],
    [None, codex("event_msg", {"type": "agent_message", "message": "done"}), resp_msg("assistant", "other", T1)],
    [None, resp_msg("assistant", "done"), None],
    [None, resp_msg("developer", "rules"), None],
    [None, resp_msg("user", "<environment_context>cwd</environment_context>"), None],
    [None, resp_msg("user", "# AGENTS.md instructions"), None],
    [None, resp_msg("user", "<turn_aborted>stopped</turn_aborted>"), None],
    [None, resp_msg("user", "<subagent_notification>hi</subagent_notification>"), None],
    [None, resp_msg("user", "<user_shell_command><command>ls</command><result>a</result></user_shell_command>"), None],
    [None, resp_msg("user", "<user_shell_command>bad</user_shell_command>"), None],
    [None, resp_msg("user", "<skill><name>x</name><path>/p</path>body</skill>"), None],
    [None, resp_msg("user", "<skill>oops</skill>"), None],
    [None, resp_msg("user", '<send_user_message_question_reply>[{"answer":"yes","question":"ok?","questionItemId":"q1"}]</send_user_message_question_reply>'), None],
    [None, resp_msg("user", "<send_user_message_question_reply>nope</send_user_message_question_reply>"), None],
    [None, resp_msg("user", "hello", meta={"content_item_kinds": ["user.text"]}), None],
    [None, resp_msg("user", "ctx", meta={"content_item_kinds": ["skills.selected_skill_instructions"]}), None],
    [None, resp_msg("user", "ctx", meta={"content_item_kinds": ["other.tag"]}), None],
    [None, resp_msg("user", "ctx", meta={"content_item_kinds": ["a", "b"]}), None],
    [None, resp_msg("user", "ctx", meta="bad"), None],
    [None, codex("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "data:"}]}), None],
    [None, codex("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "look"}, {"type": "input_file", "file": "f"}],
        "internal_chat_message_metadata_passthrough": {"content_item_kinds": ["user.text", "user.file"]}}), None],
    [None, codex("response_item", {"type": "message", "role": "user", "content": [
        {"type": "skill", "name": "pdf", "path": "/s/pdf"}]}), None],
    [None, codex("response_item", {"type": "message", "role": "user", "content": "plain"}), None],
    [None, codex("response_item", {"type": "message", "role": "user", "content": [42, None]}), None],
    [None, codex("response_item", {"type": "function_call", "name": "shell", "arguments": '{"cmd":["ls"]}'}), None],
    [None, codex("response_item", {"type": "function_call", "name": "shell", "arguments": BIG}), None],
    [None, codex("response_item", {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin"}), None],
    [None, codex("response_item", {"type": "function_call_output", "call_id": "c", "output": "ok"}), None],
    [None, codex("response_item", {"type": "function_call_output", "output": "é" * 900}), None],
    [None, codex("response_item", {"type": "function_call_output", "output": [{"type": "input_image"}, {"text": "t"}, 3]}), None],
    [None, codex("response_item", {"type": "agent_message", "content": [{"type": "text", "text": "sub"}, {"type": "odd"}]}), None],
    [None, codex("response_item", {"type": "web_search_call", "q": 1}), None],
    [None, codex("event_msg", {"type": "exec_command_end", "command": ["pytest", "-q", "a b", "it's"], "stdout": "3 passed", "exit_code": 0, "status": "completed"}), None],
    [None, codex("event_msg", {"type": "exec_command_end", "command": "make", "aggregated_output": BIG, "stderr": "warn", "exit_code": 2}), None],
    [None, codex("event_msg", {"type": "context_compacted"}), None],
    [None, codex("event_msg", {"type": "turn_aborted", "reason": "interrupted"}), None],
    [None, codex("event_msg", {"type": "turn_aborted", "error": {"code": 1}}), None],
    [None, codex("event_msg", {"type": "turn_aborted"}), None],
    [None, codex("event_msg", {"type": "weird", "x": [1, 2.5, True]}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "Reasoning"}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "ContextCompaction"}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "SubAgentActivity", "kind": "started", "id": "1"}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "SubAgentActivity", "kind": "started", "more": 1}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "Extension", "kind": "clock.sleep", "durationMs": 5}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "UserMessage", "content": [{"type": "text", "text": "hi"}]}}), None],
    [resp_msg("user", "hi"), codex("event_msg", {"type": "item_completed", "item": {"type": "UserMessage", "content": [{"type": "text", "text": "hi"}]}}, T1), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "AgentMessage", "content": [{"type": "text", "text": "yo"}]}}), resp_msg("assistant", "yo", T1)],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "CommandExecution", "command": "ls", "aggregated_output": "a\nb", "exit_code": 0, "status": "completed"}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "FileChange", "status": "completed", "changes": {"a.py": {"type": "update", "unified_diff": "@@"}, "b.py": {"kind": {"type": "add", "move_path": "c.py"}}}}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "FileChange", "changes": [{"path": "x", "kind": "delete", "diff": BIG}, 7], "output": "ok"}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "McpToolCall", "tool": "search", "status": "completed", "result": {"content": [{"type": "text", "text": "r"}], "isError": True}}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "McpToolCall", "tool": "s", "result": {"content": [], "structuredContent": {"a": 1}}, "error": "e"}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": {"type": "Mystery", "n": None}}), None],
    [None, codex("event_msg", {"type": "item_completed", "item": 3}), None],
    [None, codex("compacted", {"message": "Summary: did things"}), None],
    [None, codex("compacted", {"message": "", "replacement_history": [{"type": "compaction", "encrypted_content": "zz"}]}), None],
    [None, codex("compacted", {"replacement_history": [{"type": "message", "content": [{"type": "input_text", "text": "S1"}, {"type": "input_text", "text": "U"}], "internal_chat_message_metadata_passthrough": {"content_item_kinds": ["compaction.summary", "user.text"]}}]}), None],
    [None, codex("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "sum"}]}, metadata={"compaction_output": True}), None],
    [None, codex("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "sum"}]}, metadata={"compaction_output": True}), None],
    [None, codex("retained_context", {"type": "verified_answer", "questions": [{"question": "q?", "answer": "a"}]}), None],
    [None, codex("retained_context", {"type": "verified_answer", "questions": []}), None],
    [None, codex("mystery", {"a": 1}), None],
    [None, d({"type": "response_item"}), None],
    [None, "not json {", None],
    [None, d([1, 2]), None],
]

CLAUDE = [
    [None, claude("user", "Please fix the failing test"), None],
    [None, claude("user", [{"type": "text", "text": "Does this look right?"}, {"type": "image", "source": {}}]), None],
    [None, claude("user", [{"type": "image", "source": {}}]), None],
    [None, claude("user", "<command-name>/review</command-name>\n<command-message>review</command-message>\n<command-args>calc.py only</command-args>"), None],
    [None, claude("user", "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>"), None],
    [None, claude("user", "<command-name>/bad</command-name>"), None],
    [None, claude("user", "<local-command-stdout>out</local-command-stdout>"), None],
    [d({"type": "user", "isMeta": True, "uuid": "u1", "promptId": "p", "message": {"role": "user", "content": "<local-command-caveat>Caveat</local-command-caveat>"}}),
     d({"type": "user", "parentUuid": "u1", "promptId": "p", "message": {"role": "user", "content": "<command-name>/model</command-name><command-message>model</command-message><command-args></command-args>"}}), None],
    [None, d({"type": "user", "isMeta": True, "message": {"role": "user", "content": "meta"}}), None],
    [None, claude("assistant", [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "I'll run tests."}, {"type": "tool_use", "name": "Bash", "input": {"command": "pytest -q", "description": "run tests"}}]), None],
    [None, claude("assistant", [{"type": "thinking", "thinking": "hmm"}]), None],
    [None, claude("assistant", [{"type": "tool_use", "name": "Read", "input": {"file_path": "/a"}}]), None],
    [None, d({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "FAILED " + BIG, "is_error": True}]}, "toolUseResult": {"exitCode": 1}}), None],
    [None, d({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": [{"type": "text", "text": "file body"}]}]}, "toolUseResult": {"file": {"filePath": "/a.py"}}}), None],
    [None, d({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": "ok"}]}, "toolUseResult": {"command": "ls", "exit_code": 0, "status": "done"}}), None],
    [None, d({"type": "user", "sourceToolAssistantUUID": "a1", "message": {"role": "user", "content": "skill text"}}), None],
    [None, d({"type": "user", "sourceToolAssistantUUID": "a1", "message": {"role": "user", "content": [{"type": "text", "text": "skill text"}]}}), None],
    [None, d({"type": "system", "subtype": "turn_duration", "durationMs": 5}), None],
    [None, d({"type": "system", "subtype": "stop_hook_summary"}), None],
    [None, d({"type": "system", "subtype": "local_command", "content": "x"}), None],
    [None, d({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted"}), None],
    [None, d({"type": "system", "subtype": "informational", "content": "x"}), None],
    [None, d({"type": "user", "isCompactSummary": True, "message": {"role": "user", "content": "This session is being continued"}}), None],
    [None, d({"type": "user", "isCompactSummary": True, "message": {"role": "user", "content": [{"type": "image"}]}}), None],
    [None, d({"type": "file-history-snapshot", "messageId": "m1", "snapshot": {"trackedFileBackups": {}}, "isSnapshotUpdate": False}), None],
    [None, d({"type": "summary", "summary": "s", "leafUuid": "l"}), None],
    [None, d({"type": "user", "message": {"role": "user"}}), None],
    [None, d({"type": "user", "message": "str"}), None],
    [None, claude("user", ""), None],
    [None, claude("assistant", ""), None],
    [None, claude("user", 7), None],
    [None, claude("assistant", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]), None],
    [None, claude("assistant", [{"type": "mystery"}, "raw"]), None],
    [None, "{\"type\": \"user\", \"message\": {\"role\": \"user\", \"content\": \"lone \\ud800 surrogate-free é\"}}".replace("\\ud800 ", ""), None],
]


def case(source, triple):
    prev, line, nxt = triple
    record = compact_record(line, line=5, source=source, previous_line=prev, next_line=nxt)
    expect = encode_read_json(compact_record_to_json(record)) if record is not None else None
    return {"source": source, "lines": [prev, line, nxt], "line": 5, "expect": expect, **inputs(source, prev, line)}


def main() -> None:
    out = []
    out += [case("codex", t) for t in CODEX]
    out += [case("claude-code", t) for t in CLAUDE]
    out += [case("other", [None, d({"type": "x", "n": 1}), None])]
    if len(sys.argv) > 2:
        ws = Path(sys.argv[1])
        for index in ws.glob("projects/*/sessions.index.jsonl"):
            for row in index.read_text().splitlines():
                s = json.loads(row)
                path = index.parent / s["session_path"]
                if not path.is_file():
                    continue
                text = path.read_bytes().decode("utf-8", "replace")
                lines = text.splitlines()
                for i, line in enumerate(lines):
                    if len(line) > 200_000:
                        continue
                    prev = lines[i - 1] if i > 0 else None
                    nxt = lines[i + 1] if i + 1 < len(lines) else None
                    record = compact_record(line, line=i + 1, source=s["source"], previous_line=prev, next_line=nxt)
                    expect = encode_read_json(compact_record_to_json(record)) if record is not None else None
                    out.append({"source": s["source"], "lines": [prev, line, nxt], "line": i + 1, "expect": expect,
                                **inputs(s["source"], prev, line)})
    target = Path(sys.argv[-1])
    with target.open("w") as f:
        for c in out:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    print(f"{len(out)} cases -> {target}")


if __name__ == "__main__":
    main()
