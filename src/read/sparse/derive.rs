//! The sparse record of one line: what a Claude or Codex line shows as evidence, typed
//! by where it came from, with recognised metadata omitted.

use super::json::{
    HEAD_BYTES, J, bounded_keeping, json_text, preview as trim, preview_keeping, truthy,
};
use super::source::{
    self, Input, is, is_claude_local_command, is_compaction_output, is_pre_trigger_context, lstrip,
    object, parse_claude_input_text, parse_codex_input, parse_codex_message, present,
};
use crate::util::pyjson::{self, Map, Value, is_blank};

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolUse {
    pub name: String,
    pub input_summary: String,
    pub truncated: bool,
    /// The id a result names its use by (Claude's `id`, Codex's `call_id`); not shown.
    pub call_id: Option<String>,
    /// The whole input when `input_summary` was cut from it; not shown.
    pub whole: Option<String>,
    /// The handle of `whole`, given by the read that shows the record.
    pub handle: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct FileChange {
    pub path: String,
    pub operation: String,
    pub preview: String,
    pub move_path: Option<String>,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolResult {
    pub kind: &'static str,
    pub status: Option<String>,
    pub file_path: Option<String>,
    pub command: Option<String>,
    pub preview: String,
    pub truncated: bool,
    /// An integer as decimal text.
    pub exit_code: Option<String>,
    pub stderr: Option<String>,
    pub error: Option<String>,
    pub changes: Vec<FileChange>,
    pub name: Option<String>,
    /// The id of the use this answers (Claude's `tool_use_id`, Codex's `call_id`); not
    /// shown.
    pub call_id: Option<String>,
    /// The whole output when `preview` was cut from it; not shown. (A cut `stderr`,
    /// `error`, `command` or change preview is not kept: the handle names the output.)
    pub whole: Option<String>,
    /// The handle of `whole`, given by the read that shows the record.
    pub handle: Option<String>,
}

/// One part of a mixed record.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text {
        kind: &'static str,
        text: String,
        tag: Option<String>,
        truncated: bool,
    },
    Call(ToolUse),
    Result(ToolResult),
    Unavailable(String),
    Skill {
        name: String,
        path: Option<String>,
    },
    Attachment(String),
}

/// The evidence of one physical line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Record {
    pub line: u64,
    pub kind: &'static str,
    pub text: Option<String>,
    pub tool_uses: Vec<ToolUse>,
    pub tool_results: Vec<ToolResult>,
    pub truncated: bool,
    pub duplicate_of: Option<u64>,
    pub source_type: Option<String>,
    pub unavailable: Vec<String>,
    pub source_tag: Option<String>,
    pub name: Option<String>,
    pub path: Option<String>,
    pub parts: Vec<Part>,
}

fn rec(line: u64, kind: &'static str) -> Record {
    Record {
        line,
        kind,
        ..Record::default()
    }
}

const CODEX_METADATA: [&str; 5] = [
    "session_meta",
    "turn_context",
    "token_usage_record",
    "world_state",
    "inter_agent_communication_metadata",
];
/// Conversation lifecycle and transport diagnostics, which say nothing of tool work.
const CODEX_EVENT_METADATA: [&str; 6] = [
    "token_count",
    "task_started",
    "thread_settings_applied",
    "task_complete",
    "error",
    "task_failed",
];
const TEXT_TYPES: [&str; 4] = ["text", "Text", "input_text", "output_text"];

/// A non-blank string member.
fn string<'m>(m: &'m Map, key: &str) -> Option<&'m str> {
    m.get(key).and_then(Value::as_str).filter(|s| !is_blank(s))
}

fn owned(m: &Map, key: &str) -> Option<String> {
    string(m, key).map(str::to_owned)
}

fn parse_object(raw: &str) -> Option<Map> {
    match pyjson::parse(raw) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// An integer that is not a boolean, as decimal text.
fn int(v: Option<&Value>) -> Option<String> {
    match v {
        Some(Value::Int(n)) => Some(n.clone()),
        _ => None,
    }
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// The record of one line (`None`: recognised metadata, omitted). Codex echoes are
/// recognised against the neighbouring lines.
pub fn compact_record(
    raw: &str,
    line: u64,
    source: &str,
    previous: Option<&str>,
    next: Option<&str>,
) -> Option<Record> {
    let Some(record) = parse_object(raw) else {
        return Some(fallback(
            line,
            "malformed",
            json_text(Some(&Value::String(raw.into()))),
            None,
        ));
    };
    match source {
        "codex" => {
            if let Some(compaction) = codex_compaction_record(&record, line) {
                return Some(compaction);
            }
            let input = parse_codex_input(&record);
            if input.as_ref().is_some_and(Vec::is_empty) {
                return None;
            }
            if let Some(of) = codex_duplicate_of(&record, input.as_deref(), line, previous, next) {
                let mut r = rec(line, "duplicate");
                r.duplicate_of = Some(of);
                return Some(r);
            }
            if let Some(input) = input {
                return parts_record(line, input.into_iter().map(input_part).collect());
            }
            compact_codex(&record, line)
        }
        "claude-code" => {
            let previous = previous.and_then(parse_object);
            if is_claude_local_command(&record, previous.as_ref()) {
                return None;
            }
            compact_claude(&record, line)
        }
        _ => {
            let t = owned(&record, "type");
            Some(fallback_value(line, "unknown", &Value::Object(record), t))
        }
    }
}

fn fallback(line: u64, kind: &'static str, text: String, source_type: Option<String>) -> Record {
    let (text, truncated) = trim(text);
    let mut r = rec(line, kind);
    r.text = Some(text);
    r.truncated = truncated;
    r.source_type = source_type;
    r
}

fn fallback_value(line: u64, kind: &'static str, v: &Value, source_type: Option<String>) -> Record {
    fallback(line, kind, json_text(Some(v)), source_type)
}

fn fallback_map(line: u64, kind: &'static str, m: &Map, source_type: Option<String>) -> Record {
    fallback(
        line,
        kind,
        pyjson::to_sorted_compact(&Value::Object(m.clone())),
        source_type,
    )
}

fn compact_codex(record: &Map, line: u64) -> Option<Record> {
    let record_type = owned(record, "type");
    if record_type
        .as_deref()
        .is_some_and(|t| CODEX_METADATA.contains(&t))
    {
        return None;
    }
    let Some(payload) = object(record.get("payload")) else {
        return Some(fallback_map(line, "unknown", record, record_type));
    };
    let subtype = string(payload, "type");
    if record_type.as_deref() == Some("event_msg") {
        return codex_event(payload, line);
    }
    if record_type.as_deref() != Some("response_item") {
        return Some(fallback_map(line, "unknown", payload, record_type));
    }
    match subtype {
        Some("reasoning") => None,
        Some("message") => message(line, string(payload, "role"), payload.get("content")),
        Some(t @ ("function_call" | "custom_tool_call")) => {
            let value = payload.get(if t == "function_call" {
                "arguments"
            } else {
                "input"
            });
            let mut r = rec(line, "tool_call");
            r.tool_uses = vec![tool_use(payload, value)];
            Some(r)
        }
        Some("function_call_output" | "custom_tool_call_output") => {
            let mut result = output_result(payload.get("output"));
            result.call_id = call_id(payload);
            let mut r = rec(line, "tool_result");
            r.tool_results = vec![result];
            Some(r)
        }
        Some("agent_message") => {
            let parts = content_parts(payload.get("content"), "subagent_message", None, false);
            let mut r = rec(line, "subagent_message");
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            r.text = non_empty(texts.join("\n"));
            r.unavailable = parts
                .iter()
                .filter_map(|p| match p {
                    Part::Unavailable(u) => Some(u.clone()),
                    _ => None,
                })
                .collect();
            Some(r)
        }
        _ => Some(fallback_map(
            line,
            "unknown",
            payload,
            subtype.map(str::to_owned),
        )),
    }
}

fn codex_compaction_record(record: &Map, line: u64) -> Option<Record> {
    let empty = Map::new();
    let payload = object(record.get("payload")).unwrap_or(&empty);
    if is(record, "type", "compacted") {
        return Some(codex_compaction(payload, line));
    }
    if is(record, "type", "response_item")
        && is(payload, "type", "message")
        && is(payload, "role", "assistant")
        && is_compaction_output(record)
    {
        let summary = compaction_text(payload.get("content"));
        let mut r = rec(line, "context_compaction");
        r.source_type = Some("compaction_output".into());
        if summary.is_none() {
            r.unavailable = vec!["compaction_summary".into()];
        }
        r.text = summary;
        return Some(r);
    }
    None
}

fn codex_compaction(payload: &Map, line: u64) -> Record {
    let mut summary = owned(payload, "message");
    let mut encrypted = false;
    if summary.is_none()
        && let Some(Value::Array(history)) = payload.get("replacement_history")
    {
        let mut summaries = Vec::new();
        for item in history.iter().filter_map(Value::as_object) {
            encrypted |= is(item, "type", "compaction") && item.contains_key("encrypted_content");
            summaries.extend(tagged_compaction_summary(item));
        }
        summary = Some(summaries.join("\n"));
    }
    let summary = summary.and_then(non_empty);
    let mut r = rec(line, "context_compaction");
    r.source_type = Some("compacted".into());
    if encrypted && summary.is_none() {
        r.unavailable = vec!["encrypted_compaction_summary".into()];
    }
    r.text = summary;
    r
}

/// Only text explicitly tagged as the summary; retained history is never replayed.
fn tagged_compaction_summary(item: &Map) -> Vec<String> {
    let empty = Map::new();
    let metadata = object(item.get("internal_chat_message_metadata_passthrough")).unwrap_or(&empty);
    let (Some(Value::Array(tags)), Some(Value::Array(content))) =
        (metadata.get("content_item_kinds"), item.get("content"))
    else {
        return Vec::new();
    };
    if !is(item, "type", "message")
        || tags.len() != content.len()
        || tags.iter().any(|t| t.as_str().is_none())
    {
        return Vec::new();
    }
    tags.iter()
        .zip(content)
        .filter(|(tag, _)| tag.as_str() == Some("compaction.summary"))
        .filter_map(|(_, part)| compaction_text(Some(&Value::Array(vec![part.clone()]))))
        .collect()
}

/// Context text kept exactly; reasoning and opaque payloads are not summary text.
fn compaction_text(content: Option<&Value>) -> Option<String> {
    match content {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(items)) => {
            let texts: Vec<&str> = items
                .iter()
                .filter_map(Value::as_object)
                .filter(|p| {
                    p.get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| TEXT_TYPES.contains(&t))
                })
                .filter_map(|p| string(p, "text"))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

fn codex_event(payload: &Map, line: u64) -> Option<Record> {
    let subtype = string(payload, "type");
    match subtype {
        Some(t) if CODEX_EVENT_METADATA.contains(&t) => None,
        Some("context_compacted") => {
            let mut r = rec(line, "context_compaction");
            r.source_type = Some("context_compacted".into());
            Some(r)
        }
        Some(t @ ("user_message" | "agent_message")) => {
            let role = if t == "user_message" {
                "user"
            } else {
                "assistant"
            };
            message(line, Some(role), payload.get("message"))
        }
        Some("item_completed") => match object(payload.get("item")) {
            Some(item) => codex_item(item, line),
            None => Some(fallback_map(
                line,
                "unknown",
                payload,
                Some("item_completed".into()),
            )),
        },
        Some("exec_command_end") => {
            let mut r = rec(line, "tool_result");
            r.tool_results = vec![command_result(payload)];
            Some(r)
        }
        Some("turn_aborted") => {
            let reason = string(payload, "reason").or_else(|| string(payload, "message"));
            let error = payload.get("error");
            let text = if truthy(error) {
                json_text(error)
            } else {
                reason.unwrap_or("turn_aborted").to_owned()
            };
            Some(fallback(line, "terminal", text, None))
        }
        _ => Some(fallback_map(
            line,
            "unknown",
            payload,
            subtype.map(str::to_owned),
        )),
    }
}

fn keys_within(item: &Map, allowed: &[&str]) -> bool {
    item.keys().all(|k| allowed.contains(&k.as_str()))
}

fn codex_item(item: &Map, line: u64) -> Option<Record> {
    let kind = string(item, "type");
    let result = match kind {
        Some("Reasoning") => return None,
        Some("ContextCompaction") => {
            let mut r = rec(line, "context_compaction");
            r.source_type = Some("ContextCompaction".into());
            return Some(r);
        }
        Some("SubAgentActivity")
            if ["started", "interacted", "completed"]
                .iter()
                .any(|k| is(item, "kind", k))
                && keys_within(
                    item,
                    &["type", "id", "kind", "agent_thread_id", "agent_path"],
                ) =>
        {
            return None;
        }
        Some("Extension")
            if is(item, "kind", "clock.sleep")
                && keys_within(item, &["type", "kind", "id", "durationMs"]) =>
        {
            return None;
        }
        Some(t @ ("UserMessage" | "AgentMessage")) => {
            let role = if t == "UserMessage" {
                "user"
            } else {
                "assistant"
            };
            return message(line, Some(role), item.get("content"));
        }
        Some("CommandExecution") => command_result(item),
        Some("FileChange") => file_result(item),
        Some("McpToolCall") => mcp_result(item),
        _ => return Some(fallback_map(line, "unknown", item, kind.map(str::to_owned))),
    };
    let mut r = rec(line, "tool_result");
    r.tool_results = vec![result];
    Some(r)
}

fn command_result(item: &Map) -> ToolResult {
    let stdout = item.get("stdout");
    let out = if truthy(stdout) {
        stdout
    } else {
        item.get("aggregated_output")
    };
    let (output, whole) = preview_keeping(output_text(out));
    let (stderr, stderr_trimmed) = trim(output_text(item.get("stderr")));
    let (error, error_trimmed) = trim(output_text(item.get("error")));
    let (command, command_trimmed) = trim(command(item.get("command")));
    ToolResult {
        kind: "command",
        status: owned(item, "status"),
        command: non_empty(command),
        preview: output,
        truncated: whole.is_some() || stderr_trimmed || error_trimmed || command_trimmed,
        call_id: call_id(item),
        whole,
        exit_code: int(item.get("exit_code")),
        stderr: non_empty(stderr),
        error: non_empty(error),
        ..ToolResult::default()
    }
}

/// A command: an argument list joined as a shell would read it, or its JSON text.
fn command(value: Option<&Value>) -> String {
    if let Some(Value::Array(items)) = value
        && let Some(args) = items.iter().map(Value::as_str).collect::<Option<Vec<_>>>()
    {
        return args
            .iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ");
    }
    json_text(value)
}

/// Python's `shlex.quote`.
fn shell_quote(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if s.chars().all(safe) {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

fn file_result(item: &Map) -> ToolResult {
    let mut changes = Vec::new();
    match item.get("changes") {
        Some(Value::Object(raw)) => {
            let empty = Map::new();
            for (path, change) in raw {
                changes.push(file_change(
                    path.clone(),
                    change.as_object().unwrap_or(&empty),
                ));
            }
        }
        Some(Value::Array(raw)) => {
            for change in raw {
                match change.as_object() {
                    Some(c) => changes.push(file_change(
                        owned(c, "path").unwrap_or_else(|| "unknown".into()),
                        c,
                    )),
                    None => {
                        let (preview, truncated) = trim(json_text(Some(change)));
                        changes.push(FileChange {
                            path: "unknown".into(),
                            operation: "unknown".into(),
                            preview,
                            move_path: None,
                            truncated,
                        });
                    }
                }
            }
        }
        _ => {}
    }
    let out = match present(item, "stdout") {
        Some(v) => Some(v),
        None => item.get("output"),
    };
    let (output, whole) = preview_keeping(output_text(out));
    let (stderr, stderr_trimmed) = trim(output_text(item.get("stderr")));
    let (error, error_trimmed) = trim(output_text(item.get("error")));
    let changed = changes.iter().any(|c| c.truncated);
    ToolResult {
        kind: "file_change",
        status: owned(item, "status"),
        changes,
        preview: output,
        stderr: non_empty(stderr),
        error: non_empty(error),
        truncated: whole.is_some() || stderr_trimmed || error_trimmed || changed,
        call_id: call_id(item),
        whole,
        ..ToolResult::default()
    }
}

fn file_change(path: String, change: &Map) -> FileChange {
    let kind = object(change.get("kind"));
    let operation = owned(change, "type").or_else(|| match kind {
        Some(k) => owned(k, "type"),
        None => owned(change, "kind"),
    });
    let content = change
        .get("unified_diff")
        .or_else(|| change.get("diff"))
        .or_else(|| change.get("content"));
    let (preview, truncated) = trim(json_text(content));
    let move_path = owned(change, "move_path").or_else(|| kind.and_then(|k| owned(k, "move_path")));
    FileChange {
        path,
        operation: operation.unwrap_or_else(|| "unknown".into()),
        preview,
        move_path,
        truncated,
    }
}

fn mcp_result(item: &Map) -> ToolResult {
    let result = object(item.get("result"));
    let whole;
    let mut output = match result {
        Some(r) => match r.get("content") {
            Some(c) => Some(c),
            None => {
                whole = Value::Object(r.clone());
                Some(&whole)
            }
        },
        None => item.get("result"),
    };
    let structured;
    if let Some(r) = result
        && let Some(s) = r.get("structuredContent")
    {
        let mut m = Map::new();
        m.insert(
            "content".into(),
            Value::String(output_text(r.get("content"))),
        );
        m.insert("structuredContent".into(), s.clone());
        structured = Value::Object(m);
        output = Some(&structured);
    }
    let (preview, whole) = preview_keeping(output_text(output));
    let (error, error_trimmed) = trim(output_text(item.get("error")));
    let failed = result.is_some_and(|r| matches!(r.get("isError"), Some(Value::Bool(true))));
    ToolResult {
        kind: "mcp",
        name: owned(item, "tool"),
        status: if failed {
            Some("failed".into())
        } else {
            owned(item, "status")
        },
        preview,
        error: non_empty(error),
        truncated: whole.is_some() || error_trimmed,
        call_id: call_id(item),
        whole,
        ..ToolResult::default()
    }
}

fn compact_claude(record: &Map, line: u64) -> Option<Record> {
    let record_type = owned(record, "type");
    let rt = record_type.as_deref();
    if rt == Some("system") && is(record, "subtype", "compact_boundary") {
        let mut r = rec(line, "context_compaction");
        r.source_type = Some("compact_boundary".into());
        r.text = compaction_text(record.get("content"));
        return Some(r);
    }
    if rt == Some("system")
        && (is(record, "subtype", "turn_duration") || is(record, "subtype", "stop_hook_summary"))
    {
        return None;
    }
    if !matches!(rt, Some("user" | "assistant")) {
        return Some(fallback_map(line, "unknown", record, record_type));
    }
    let message_obj = object(record.get("message"));
    if matches!(record.get("isCompactSummary"), Some(Value::Bool(true))) {
        let summary = message_obj.and_then(|m| compaction_text(m.get("content")));
        let mut r = rec(line, "context_compaction");
        r.source_type = Some("isCompactSummary".into());
        if summary.is_none() {
            r.unavailable = vec!["compaction_summary".into()];
        }
        r.text = summary;
        return Some(r);
    }
    let Some(message_obj) = message_obj else {
        return Some(fallback_map(line, "unknown", record, record_type));
    };
    if matches!(record.get("isMeta"), Some(Value::Bool(true))) {
        return None;
    }
    if present(message_obj, "content").is_none() {
        return Some(fallback_map(line, "unknown", message_obj, record_type));
    }
    let role = string(message_obj, "role").or(rt);
    let text_kind = if role == Some("user") && present(record, "sourceToolAssistantUUID").is_some()
    {
        "tool_result"
    } else {
        message_kind(role)
    };
    let parts = content_parts(
        message_obj.get("content"),
        text_kind,
        object(record.get("toolUseResult")),
        true,
    );
    parts_record(line, parts)
}

fn message(line: u64, role: Option<&str>, content: Option<&Value>) -> Option<Record> {
    if matches!(role, Some("system" | "developer")) {
        return None;
    }
    let Some(content) = content.filter(|c| !matches!(c, Value::Null)) else {
        let mut m = Map::new();
        m.insert(
            "role".into(),
            role.map_or(Value::Null, |r| Value::String(r.into())),
        );
        m.insert("content".into(), Value::Null);
        return Some(fallback_map(line, "unknown", &m, None));
    };
    parts_record(
        line,
        content_parts(Some(content), message_kind(role), None, false),
    )
}

fn message_kind(role: Option<&str>) -> &'static str {
    match role {
        Some("user") => "human_input",
        Some("assistant") => "assistant_message",
        _ => "unknown",
    }
}

fn input_part(part: Input) -> Part {
    match part {
        Input::Skill { name, path } => Part::Skill { name, path },
        Input::Attachment(t) => Part::Attachment(t),
        Input::Unavailable(t) => Part::Unavailable(t),
        Input::Text { kind, text, tag } => {
            let generated = kind == "generated_context";
            let stripped = lstrip(&text);
            if generated && tag.as_deref() == Some("skills.selected_skill_instructions") {
                return Part::Text {
                    kind: "skill_context",
                    text,
                    tag,
                    truncated: false,
                };
            }
            if generated && stripped.starts_with("<subagent_notification>") {
                return Part::Text {
                    kind: "subagent_message",
                    text,
                    tag,
                    truncated: false,
                };
            }
            if generated && stripped.starts_with("<turn_aborted>") {
                let (text, truncated) = trim(text);
                return Part::Text {
                    kind: "terminal",
                    text,
                    tag,
                    truncated,
                };
            }
            Part::Text {
                kind,
                text,
                tag,
                truncated: false,
            }
        }
    }
}

fn parts_record(line: u64, parts: Vec<Part>) -> Option<Record> {
    let first = parts.first()?;
    if let Part::Text { kind, tag, .. } = first {
        let same = parts
            .iter()
            .all(|p| matches!(p, Part::Text { kind: k, tag: t, .. } if k == kind && t == tag));
        if same {
            let (kind, tag) = (*kind, tag.clone());
            let mut texts = Vec::new();
            let mut truncated = false;
            for p in &parts {
                if let Part::Text {
                    text, truncated: t, ..
                } = p
                {
                    texts.push(text.as_str());
                    truncated |= *t;
                }
            }
            let text = texts.join("\n");
            if kind == "generated_context" && is_pre_trigger_context(&text) {
                return None;
            }
            let mut r = rec(line, kind);
            r.text = Some(text);
            r.source_tag = tag;
            r.truncated = truncated;
            return Some(r);
        }
    }
    if parts.iter().all(|p| matches!(p, Part::Call(_))) {
        let mut r = rec(line, "tool_call");
        r.tool_uses = parts
            .into_iter()
            .filter_map(|p| match p {
                Part::Call(u) => Some(u),
                _ => None,
            })
            .collect();
        return Some(r);
    }
    if parts.iter().all(|p| matches!(p, Part::Result(_))) {
        let mut r = rec(line, "tool_result");
        r.tool_results = parts
            .into_iter()
            .filter_map(|p| match p {
                Part::Result(u) => Some(u),
                _ => None,
            })
            .collect();
        return Some(r);
    }
    if parts.iter().all(|p| matches!(p, Part::Unavailable(_))) {
        let mut r = rec(line, "unknown");
        r.unavailable = parts
            .into_iter()
            .filter_map(|p| match p {
                Part::Unavailable(u) => Some(u),
                _ => None,
            })
            .collect();
        return Some(r);
    }
    if parts.len() == 1 {
        match &parts[0] {
            Part::Skill { name, path } => {
                let mut r = rec(line, "skill_invocation");
                r.name = Some(name.clone());
                r.path = path.clone();
                return Some(r);
            }
            Part::Attachment(t) => {
                let mut r = rec(line, "human_attachment");
                r.source_type = Some(t.clone());
                return Some(r);
            }
            _ => {}
        }
    }
    let mut r = rec(line, "mixed");
    r.parts = parts;
    Some(r)
}

fn content_parts(
    content: Option<&Value>,
    text_kind: &'static str,
    meta: Option<&Map>,
    claude: bool,
) -> Vec<Part> {
    match content {
        Some(Value::String(s)) => text_parts(s, text_kind, claude),
        Some(Value::Array(items)) => items
            .iter()
            .flat_map(|raw| content_item(raw, text_kind, meta, claude))
            .collect(),
        None | Some(Value::Null) => Vec::new(),
        Some(other) => vec![Part::Unavailable(trim(json_text(Some(other))).0)],
    }
}

fn content_item(
    raw: &Value,
    text_kind: &'static str,
    meta: Option<&Map>,
    claude: bool,
) -> Vec<Part> {
    let Some(item) = raw.as_object() else {
        return vec![Part::Unavailable(trim(json_text(Some(raw))).0)];
    };
    let kind = string(item, "type");
    if kind.is_some_and(|k| TEXT_TYPES.contains(&k))
        && let Some(Value::String(t)) = item.get("text")
    {
        return text_parts(t, text_kind, claude);
    }
    match kind {
        Some("tool_use") => vec![Part::Call(tool_use(item, item.get("input")))],
        Some("tool_result") => vec![Part::Result(claude_tool_result(item, meta))],
        Some("image") if text_kind == "human_input" && claude => {
            vec![Part::Attachment("image".into())]
        }
        Some("thinking" | "redacted_thinking") => Vec::new(),
        _ => vec![Part::Unavailable(
            kind.unwrap_or("unknown content").to_owned(),
        )],
    }
}

fn text_parts(text: &str, kind: &'static str, claude: bool) -> Vec<Part> {
    if kind == "tool_result" {
        return vec![Part::Result(output_result(Some(&Value::String(
            text.into(),
        ))))];
    }
    if kind == "human_input" && claude {
        return parse_claude_input_text(text)
            .into_iter()
            .map(input_part)
            .collect();
    }
    vec![Part::Text {
        kind,
        text: text.to_owned(),
        tag: None,
        truncated: false,
    }]
}

fn tool_use(item: &Map, value: Option<&Value>) -> ToolUse {
    let (input_summary, whole) = bounded_keeping(json_text(value), HEAD_BYTES, 0);
    ToolUse {
        name: owned(item, "name").unwrap_or_else(|| "unknown".into()),
        input_summary,
        truncated: whole.is_some(),
        call_id: call_id(item),
        whole,
        handle: None,
    }
}

/// The id linking a tool use and its result: Codex's `call_id`, else the item's `id`
/// (Claude's `tool_use` items, Codex's completed items).
fn call_id(item: &Map) -> Option<String> {
    owned(item, "call_id").or_else(|| owned(item, "id"))
}

fn output_result(output: Option<&Value>) -> ToolResult {
    let (preview, whole) = preview_keeping(output_text(output));
    ToolResult {
        kind: "output",
        preview,
        truncated: whole.is_some(),
        whole,
        ..ToolResult::default()
    }
}

fn claude_tool_result(item: &Map, meta: Option<&Map>) -> ToolResult {
    let empty = Map::new();
    let meta = meta.unwrap_or(&empty);
    let file = object(meta.get("file")).unwrap_or(&empty);
    let file_path = owned(meta, "filePath").or_else(|| owned(file, "filePath"));
    let (command, command_trimmed) = trim(json_text(meta.get("command")));
    let (preview, whole) = preview_keeping(output_text(item.get("content")));
    let code = if meta.contains_key("exitCode") {
        meta.get("exitCode")
    } else {
        meta.get("exit_code")
    };
    let kind = if file_path.is_some() {
        "file"
    } else if !command.is_empty() {
        "command"
    } else {
        "output"
    };
    let failed = matches!(item.get("is_error"), Some(Value::Bool(true)));
    ToolResult {
        kind,
        status: if failed {
            Some("failed".into())
        } else {
            owned(meta, "status")
        },
        file_path,
        command: non_empty(command),
        preview,
        truncated: whole.is_some() || command_trimmed,
        exit_code: int(code),
        call_id: owned(item, "tool_use_id"),
        whole,
        ..ToolResult::default()
    }
}

fn output_text(output: Option<&Value>) -> String {
    let Some(Value::Array(items)) = output else {
        return json_text(output);
    };
    let values: Vec<String> = items
        .iter()
        .map(|raw| {
            let item = raw.as_object();
            if let Some(Value::String(t)) = item.and_then(|i| i.get("text")) {
                return t.clone();
            }
            if let Some(t) = item
                .and_then(|i| i.get("type"))
                .and_then(Value::as_str)
                .filter(|t| ["image", "input_image", "audio", "encrypted_content"].contains(t))
            {
                return format!("[{t} content unavailable]");
            }
            json_text(Some(raw))
        })
        .collect();
    values.join("\n")
}

fn codex_duplicate_of(
    record: &Map,
    input: Option<&[Input]>,
    line: u64,
    previous: Option<&str>,
    following: Option<&str>,
) -> Option<u64> {
    // A text echo does not prove the selected skill is on the canonical line.
    if input.is_some_and(|parts| parts.iter().any(|p| matches!(p, Input::Skill { .. }))) {
        return None;
    }
    let echo = echo_record(record);
    let message = parse_codex_message(echo.as_ref().unwrap_or(record))?;
    if !message.event {
        return None;
    }
    let neighbour = if message.user { previous } else { following };
    let parsed = parse_codex_message(&parse_object(neighbour?)?)?;
    let (first, second) = if message.user {
        (&parsed, &message)
    } else {
        (&message, &parsed)
    };
    if !source::is_echo(first, second) {
        return None;
    }
    // Scaffolding whose canonical form is omitted leaves no dangling echo marker.
    if message.user && is_pre_trigger_context(&message.text) {
        return None;
    }
    Some(if message.user { line - 1 } else { line + 1 })
}

/// A completed user or agent message item of text parts only, as the equivalent event
/// message; `None` leaves the record as it is.
fn echo_record(record: &Map) -> Option<Map> {
    let empty = Map::new();
    let payload = object(record.get("payload")).unwrap_or(&empty);
    let item = object(payload.get("item")).unwrap_or(&empty);
    let user = is(item, "type", "UserMessage");
    if !is(record, "type", "event_msg")
        || !is(payload, "type", "item_completed")
        || !(user || is(item, "type", "AgentMessage"))
    {
        return None;
    }
    let Some(Value::Array(content)) = item.get("content") else {
        return None;
    };
    if content.is_empty() {
        return None;
    }
    let mut texts = Vec::new();
    for raw in content {
        let part = raw.as_object()?;
        if !(is(part, "type", "text") || is(part, "type", "Text")) {
            return None;
        }
        texts.push(part.get("text")?.as_str()?);
    }
    let mut p = Map::new();
    let event = if user {
        "user_message"
    } else {
        "agent_message"
    };
    p.insert("type".into(), Value::String(event.into()));
    p.insert("message".into(), Value::String(texts.join("\n")));
    let mut m = Map::new();
    m.insert("type".into(), Value::String("event_msg".into()));
    m.insert(
        "timestamp".into(),
        record.get("timestamp").cloned().unwrap_or(Value::Null),
    );
    m.insert("payload".into(), Value::Object(p));
    Some(m)
}

impl ToolUse {
    fn to_j(&self) -> J {
        J::Obj(vec![
            ("name", J::Str(self.name.clone())),
            ("input_summary", J::Str(self.input_summary.clone())),
            ("truncated", J::Bool(self.truncated)),
            ("handle", J::opt_str(self.handle.clone())),
        ])
    }
}

impl ToolResult {
    fn to_j(&self) -> J {
        J::Obj(vec![
            ("kind", J::Str(self.kind.into())),
            ("status", J::opt_str(self.status.clone())),
            ("file_path", J::opt_str(self.file_path.clone())),
            ("command", J::opt_str(self.command.clone())),
            ("preview", J::Str(self.preview.clone())),
            ("truncated", J::Bool(self.truncated)),
            ("exit_code", self.exit_code.clone().map_or(J::Null, J::Int)),
            ("stderr", J::opt_str(self.stderr.clone())),
            ("error", J::opt_str(self.error.clone())),
            (
                "changes",
                J::Arr(
                    self.changes
                        .iter()
                        .map(|c| {
                            J::Obj(vec![
                                ("path", J::Str(c.path.clone())),
                                ("operation", J::Str(c.operation.clone())),
                                ("preview", J::Str(c.preview.clone())),
                                ("move_path", J::opt_str(c.move_path.clone())),
                                ("truncated", J::Bool(c.truncated)),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("name", J::opt_str(self.name.clone())),
            ("handle", J::opt_str(self.handle.clone())),
        ])
    }
}

impl Part {
    fn to_j(&self) -> J {
        match self {
            Part::Text {
                kind,
                text,
                tag,
                truncated,
            } => J::Obj(vec![
                ("kind", J::Str((*kind).into())),
                ("text", J::Str(text.clone())),
                ("source_tag", J::opt_str(tag.clone())),
                ("truncated", J::Bool(*truncated)),
            ]),
            Part::Call(u) => J::Obj(vec![
                ("kind", J::Str("tool_call".into())),
                ("tool_use", u.to_j()),
            ]),
            Part::Result(r) => J::Obj(vec![
                ("kind", J::Str("tool_result".into())),
                ("tool_result", r.to_j()),
            ]),
            Part::Unavailable(u) => J::Obj(vec![
                ("kind", J::Str("unknown".into())),
                ("unavailable", J::Str(u.clone())),
            ]),
            Part::Skill { name, path } => J::Obj(vec![
                ("name", J::Str(name.clone())),
                ("path", J::opt_str(path.clone())),
                ("kind", J::Str("skill_invocation".into())),
            ]),
            Part::Attachment(t) => J::Obj(vec![
                ("source_type", J::Str(t.clone())),
                ("kind", J::Str("human_attachment".into())),
            ]),
        }
    }
}

/// A tool entry of a record.
pub enum EntryMut<'r> {
    Use(&'r mut ToolUse),
    Result(&'r mut ToolResult),
}

impl Record {
    /// Calls `f` with each tool entry of the record in order (its tool uses, its tool
    /// results, then its parts), with the entry's position among the entries of its kind.
    pub fn each_entry(&mut self, mut f: impl FnMut(EntryMut<'_>, usize)) {
        let in_parts = self.parts.iter_mut().filter_map(|p| match p {
            Part::Call(u) => Some(EntryMut::Use(u)),
            Part::Result(r) => Some(EntryMut::Result(r)),
            _ => None,
        });
        let entries = (self.tool_uses.iter_mut().map(EntryMut::Use))
            .chain(self.tool_results.iter_mut().map(EntryMut::Result))
            .chain(in_parts);
        let (mut uses, mut results) = (0, 0);
        for entry in entries {
            let count = match entry {
                EntryMut::Use(_) => &mut uses,
                EntryMut::Result(_) => &mut results,
            };
            let index = *count;
            *count += 1;
            f(entry, index);
        }
    }

    /// The record as a JSON tree before the sparse rule.
    pub fn to_j(&self) -> J {
        J::Obj(vec![
            ("line", J::int(self.line)),
            ("kind", J::Str(self.kind.into())),
            ("text", J::opt_str(self.text.clone())),
            (
                "tool_uses",
                J::Arr(self.tool_uses.iter().map(ToolUse::to_j).collect()),
            ),
            (
                "tool_results",
                J::Arr(self.tool_results.iter().map(ToolResult::to_j).collect()),
            ),
            ("truncated", J::Bool(self.truncated)),
            ("duplicate_of", self.duplicate_of.map_or(J::Null, J::int)),
            ("source_type", J::opt_str(self.source_type.clone())),
            (
                "unavailable",
                J::Arr(self.unavailable.iter().cloned().map(J::Str).collect()),
            ),
            ("source_tag", J::opt_str(self.source_tag.clone())),
            ("name", J::opt_str(self.name.clone())),
            ("path", J::opt_str(self.path.clone())),
            ("parts", J::Arr(self.parts.iter().map(Part::to_j).collect())),
        ])
    }
}
