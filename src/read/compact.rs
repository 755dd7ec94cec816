//! Compact records: a bounded, structured summary of one physical line.
//!
//! A pure function of (line text, line number, the session's `source`), following
//! prompt-diary 0.2.10's derivation with one deliberate difference: a plain-string message
//! `content` (how Claude Code stores a typed prompt) is user text and is shown, never
//! dropped, since user text in compact mode is never lost; prompt-diary drops it.
//!
//! Lines are parsed into a borrowed tree ([`pyjson::parse_borrowed`]): a tool result of
//! megabytes is measured and its two ends decoded, never copied whole.

use std::borrow::Cow;

use serde::Serialize;

use crate::util::pyjson::{self, Node, Str};

/// Tool result payloads above this many bytes are trimmed.
const RESULT_LIMIT: usize = 1024;
const RESULT_HEAD: usize = 320;
const RESULT_TAIL: usize = 160;
/// Tool inputs above this many bytes are trimmed (head only).
const INPUT_LIMIT: usize = 320;
const ELISION: &str = "\n...[trimmed]...\n";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompactRecord {
    pub line: u64,
    pub record_type: String,
    pub role: Option<String>,
    pub content_kinds: Vec<&'static str>,
    pub summary: String,
    pub text_preview: Option<String>,
    pub tool_uses: Vec<ToolUse>,
    pub tool_results: Vec<ToolResult>,
    pub raw_bytes: u64,
    pub raw_sha256: String,
    pub truncated: bool,
    /// The line's tool entries, collected only by [`entries`].
    #[serde(skip)]
    pub entries: Option<Vec<Entry>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolUse {
    pub name: String,
    pub input_summary: String,
    pub truncated: bool,
    /// The handle of the whole input, on a trimmed entry only (set by the read, which
    /// knows the session and the line's digest); prompt-diary's records have no such key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolResult {
    pub kind: &'static str,
    pub status: Option<String>,
    pub file_path: Option<String>,
    pub command: Option<String>,
    pub preview: String,
    pub raw_bytes: u64,
    pub truncated: bool,
    /// The handle of the whole result text, on a trimmed entry only (see [`ToolUse`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
}

/// Which list of a compact record an entry is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    ToolUse,
    ToolResult,
}

/// One tool entry of a line as the compact record derives it, with what the record
/// leaves out: the call id that links a result to its use, and the whole payload (a tool
/// result's text, or a tool input's JSON exactly as compaction renders it before
/// cutting it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    /// Position in `tool_uses` or `tool_results`.
    pub index: usize,
    /// Claude's `tool_use.id` / `tool_result.tool_use_id`, Codex's `call_id`.
    pub call_id: Option<String>,
    /// A tool use's name.
    pub tool_name: Option<String>,
    /// The whole payload.
    pub payload: String,
    /// Whether the record trims it (then the entry has a handle).
    pub trimmed: bool,
}

/// Derives the compact record of one line. `raw_bytes` and `raw_sha256` describe the
/// decoded line and are passed through.
pub fn compact_line(
    text: &str,
    line: u64,
    source: &str,
    raw_bytes: u64,
    raw_sha256: String,
) -> CompactRecord {
    derive(text, line, source, raw_bytes, raw_sha256, false)
}

/// The tool entries of one line, in record order, with their call ids and whole
/// payloads: what a handle names.
pub fn entries(text: &str, source: &str) -> Vec<Entry> {
    derive(text, 0, source, 0, String::new(), true)
        .entries
        .unwrap_or_default()
}

fn derive(
    text: &str,
    line: u64,
    source: &str,
    raw_bytes: u64,
    raw_sha256: String,
    collect: bool,
) -> CompactRecord {
    let mut record = CompactRecord {
        line,
        record_type: "unknown".into(),
        role: None,
        content_kinds: Vec::new(),
        summary: "Malformed JSONL line.".into(),
        text_preview: None,
        tool_uses: Vec::new(),
        tool_results: Vec::new(),
        raw_bytes,
        raw_sha256,
        truncated: false,
        entries: collect.then(Vec::new),
    };
    let rec = match pyjson::parse_borrowed(text) {
        Ok(rec) if rec.is_object() => rec,
        _ => return record,
    };
    match source {
        "claude-code" => claude_code(&rec, &mut record),
        "codex" => codex(&rec, &mut record),
        _ => generic(&rec, &mut record),
    }
    record
}

/// A string field that is present and not blank (Python's `isinstance(v, str) and
/// v.strip()`), not yet decoded.
fn nb_str<'n, 'a>(obj: &'n Node<'a>, key: &str) -> Option<&'n Str<'a>> {
    obj.get(key)
        .and_then(Node::as_str)
        .filter(|s| !s.is_blank())
}

/// The decoded value of a non-blank string field.
fn nb<'a>(obj: &Node<'a>, key: &str) -> Option<Cow<'a, str>> {
    nb_str(obj, key).map(Str::decode)
}

fn owned(obj: &Node<'_>, key: &str) -> Option<String> {
    nb(obj, key).map(Cow::into_owned)
}

/// The member `key` if it is an object.
fn obj<'n, 'a>(parent: &'n Node<'a>, key: &str) -> Option<&'n Node<'a>> {
    parent.get(key).filter(|n| n.is_object())
}

/// Non-blank `text` of each object element, in order.
fn texts<'a>(items: &[Node<'a>]) -> Vec<Cow<'a, str>> {
    items
        .iter()
        .filter(|item| item.is_object())
        .filter_map(|item| nb(item, "text"))
        .collect()
}

fn add_kind(record: &mut CompactRecord, kind: &'static str) {
    if !record.content_kinds.contains(&kind) {
        record.content_kinds.push(kind);
    }
}

/// The generic rule, also the fallback of the source-specific ones.
fn generic(rec: &Node<'_>, record: &mut CompactRecord) {
    record.role = owned(rec, "role");
    record.record_type = record
        .role
        .clone()
        .or_else(|| owned(rec, "type"))
        .unwrap_or_else(|| "unknown".into());
    record.summary = format!("{} record.", record.record_type);
}

/// A tool payload: one JSON string, read in place, or text assembled from parts.
enum Payload<'a> {
    Str(Str<'a>),
    Text(Cow<'a, str>),
}

impl Payload<'_> {
    fn len(&self) -> usize {
        match self {
            Payload::Str(s) => s.len(),
            Payload::Text(t) => t.len(),
        }
    }

    fn head(&self, max: usize) -> Cow<'_, str> {
        match self {
            Payload::Str(s) => s.head(max),
            Payload::Text(t) => Cow::Borrowed(pyjson::floor_prefix(t, max)),
        }
    }

    fn tail(&self, max: usize) -> Cow<'_, str> {
        match self {
            Payload::Str(s) => s.tail(max),
            Payload::Text(t) => Cow::Borrowed(pyjson::ceil_suffix(t, max)),
        }
    }

    fn whole(&self) -> String {
        match self {
            Payload::Str(s) => s.decode().into_owned(),
            Payload::Text(t) => t.clone().into_owned(),
        }
    }
}

fn tool_result(payload: &Payload<'_>, kind: &'static str, meta: &ResultMeta) -> ToolResult {
    let len = payload.len();
    let truncated = len > RESULT_LIMIT;
    let preview = if truncated {
        format!(
            "{}{ELISION}{}",
            payload.head(RESULT_HEAD),
            payload.tail(RESULT_TAIL)
        )
    } else {
        payload.whole()
    };
    ToolResult {
        kind,
        status: meta.status.clone(),
        file_path: meta.file_path.clone(),
        command: meta.command.clone(),
        preview,
        raw_bytes: len as u64,
        truncated,
        handle: None,
    }
}

fn tool_use(name: &str, input: &Payload<'_>) -> ToolUse {
    let truncated = input.len() > INPUT_LIMIT;
    let input_summary = if truncated {
        format!("{}{ELISION}", input.head(INPUT_LIMIT))
    } else {
        input.whole()
    };
    ToolUse {
        name: name.to_owned(),
        input_summary,
        truncated,
        handle: None,
    }
}

/// Adds `used` to the record, noting its entry when entries are collected.
fn push_use(
    record: &mut CompactRecord,
    used: ToolUse,
    input: &Payload<'_>,
    call_id: Option<String>,
) {
    if let Some(entries) = &mut record.entries {
        entries.push(Entry {
            kind: EntryKind::ToolUse,
            index: record.tool_uses.len(),
            call_id,
            tool_name: Some(used.name.clone()),
            payload: input.whole(),
            trimmed: used.truncated,
        });
    }
    record.tool_uses.push(used);
}

/// Adds `result` to the record, noting its entry when entries are collected.
fn push_result(
    record: &mut CompactRecord,
    result: ToolResult,
    payload: &Payload<'_>,
    call_id: Option<String>,
) {
    if let Some(entries) = &mut record.entries {
        entries.push(Entry {
            kind: EntryKind::ToolResult,
            index: record.tool_results.len(),
            call_id,
            tool_name: None,
            payload: payload.whole(),
            trimmed: result.truncated,
        });
    }
    record.tool_results.push(result);
}

#[derive(Default)]
struct ResultMeta {
    kind: &'static str,
    status: Option<String>,
    file_path: Option<String>,
    command: Option<String>,
}

/// Claude Code's record-level `toolUseResult`, shared by every tool result of the record.
fn claude_result_meta(rec: &Node<'_>) -> ResultMeta {
    let Some(tur) = obj(rec, "toolUseResult") else {
        return ResultMeta {
            kind: "tool_result",
            ..ResultMeta::default()
        };
    };
    let file_path =
        owned(tur, "filePath").or_else(|| obj(tur, "file").and_then(|f| owned(f, "filePath")));
    let command = owned(tur, "command");
    let kind = if file_path.is_some() {
        "file"
    } else if command.is_some() {
        "command"
    } else {
        "tool_result"
    };
    ResultMeta {
        kind,
        status: owned(tur, "status"),
        file_path,
        command,
    }
}

fn claude_code(rec: &Node<'_>, record: &mut CompactRecord) {
    let Some(t) = nb(rec, "type") else {
        return generic(rec, record);
    };
    match &*t {
        "system" => {
            record.record_type = match nb(rec, "subtype") {
                Some(st) => format!("system:{st}"),
                None => "system".into(),
            };
            record.summary = format!("{} record.", record.record_type);
        }
        "user" | "assistant" => claude_message(rec, &t, record),
        _ => generic(rec, record),
    }
}

fn claude_message(rec: &Node<'_>, t: &str, record: &mut CompactRecord) {
    record.record_type = t.to_owned();
    let message = obj(rec, "message");
    record.role = message.and_then(|m| owned(m, "role"));
    let meta = claude_result_meta(rec);
    let mut preview: Vec<Cow<'_, str>> = Vec::new();
    match message.and_then(|m| m.get("content")) {
        Some(Node::Array(items)) => {
            for item in items.iter().filter(|item| item.is_object()) {
                match nb(item, "type").as_deref() {
                    Some("text") => {
                        if let Some(text) = nb(item, "text") {
                            add_kind(record, "text");
                            preview.push(text);
                        }
                    }
                    Some("tool_use") => {
                        add_kind(record, "tool_use");
                        let name = nb(item, "name");
                        let input = match item.get("input") {
                            None | Some(Node::Null) => Payload::Text(Cow::Borrowed("")),
                            Some(Node::String(s)) => Payload::Str(*s),
                            Some(other) => Payload::Text(Cow::Owned(other.to_sorted_compact())),
                        };
                        let used = tool_use(name.as_deref().unwrap_or("unknown"), &input);
                        record.truncated |= used.truncated;
                        let id = record
                            .entries
                            .is_some()
                            .then(|| owned(item, "id"))
                            .flatten();
                        push_use(record, used, &input, id);
                    }
                    Some("tool_result") => {
                        add_kind(record, "tool_result");
                        let payload = match item.get("content") {
                            Some(Node::String(s)) => Payload::Str(*s),
                            Some(Node::Array(parts)) => {
                                Payload::Text(Cow::Owned(texts(parts).join("\n")))
                            }
                            _ => Payload::Text(Cow::Borrowed("")),
                        };
                        let result = tool_result(&payload, meta.kind, &meta);
                        record.truncated |= result.truncated;
                        let id = record
                            .entries
                            .is_some()
                            .then(|| owned(item, "tool_use_id"))
                            .flatten();
                        push_result(record, result, &payload, id);
                    }
                    Some("thinking") => {
                        add_kind(record, "thinking");
                        record.truncated = true;
                    }
                    _ => {}
                }
            }
        }
        // User text is never lost: a typed prompt stored as a plain string is one text item.
        Some(Node::String(text)) if !text.is_blank() => {
            add_kind(record, "text");
            preview.push(text.decode());
        }
        _ => {}
    }
    if !preview.is_empty() {
        record.text_preview = Some(preview.join("\n"));
    }
    record.summary = if !record.tool_results.is_empty() && record.text_preview.is_none() {
        "Tool result.".into()
    } else if record.content_kinds == ["thinking"] {
        "Assistant reasoning omitted.".into()
    } else {
        role_summary(record.role.as_deref()).into()
    };
}

fn role_summary(role: Option<&str>) -> &'static str {
    match role {
        Some("user") => "User message.",
        Some("assistant") => "Assistant message.",
        _ => "Message.",
    }
}

fn codex(rec: &Node<'_>, record: &mut CompactRecord) {
    let t = nb(rec, "type");
    let payload = obj(rec, "payload");
    match (t.as_deref(), payload) {
        (Some("event_msg"), Some(payload)) => {
            let pt = nb(payload, "type");
            record.record_type = format!("event_msg:{}", pt.as_deref().unwrap_or("event"));
            let (role, summary) = match pt.as_deref() {
                Some("user_message") => ("user", "User message."),
                Some("agent_message") => ("assistant", "Agent message."),
                _ => {
                    record.summary = format!("{} record.", record.record_type);
                    return;
                }
            };
            record.role = Some(role.into());
            record.summary = summary.into();
            record.text_preview = owned(payload, "message");
            if record.text_preview.is_some() {
                add_kind(record, "text");
            }
        }
        (Some("response_item"), Some(payload)) => codex_response_item(payload, record),
        _ => generic(rec, record),
    }
}

fn codex_response_item(payload: &Node<'_>, record: &mut CompactRecord) {
    let pt = nb(payload, "type");
    let pt = pt.as_deref().unwrap_or("item");
    record.record_type = format!("response_item:{pt}");
    match pt {
        "message" => {
            record.role = owned(payload, "role");
            let text = match payload.get("content") {
                Some(Node::Array(items)) => Some(texts(items).join("\n")).filter(|t| !t.is_empty()),
                // As for Claude Code, user text is never lost: string content is the message text.
                Some(Node::String(s)) if !s.is_blank() => Some(s.decode().into_owned()),
                _ => None,
            };
            if text.is_some() {
                add_kind(record, "text");
            }
            record.text_preview = text;
            record.summary = role_summary(record.role.as_deref()).into();
        }
        "function_call" => {
            let name = nb(payload, "name");
            let name = name.as_deref().unwrap_or("unknown");
            let arguments = match nb_str(payload, "arguments") {
                Some(s) => Payload::Str(*s),
                None => Payload::Text(Cow::Borrowed("")),
            };
            add_kind(record, "tool_use");
            record.summary = format!("Tool call: {name}.");
            let used = tool_use(name, &arguments);
            record.truncated = used.truncated;
            let id = record
                .entries
                .is_some()
                .then(|| owned(payload, "call_id"))
                .flatten();
            push_use(record, used, &arguments, id);
        }
        "function_call_output" => {
            let output = match payload.get("output").and_then(Node::as_str) {
                Some(s) => Payload::Str(*s),
                None => Payload::Text(Cow::Borrowed("")),
            };
            add_kind(record, "tool_result");
            record.summary = "Tool result.".into();
            let meta = ResultMeta::default();
            let result = tool_result(&output, "output", &meta);
            record.truncated = result.truncated;
            let id = record
                .entries
                .is_some()
                .then(|| owned(payload, "call_id"))
                .flatten();
            push_result(record, result, &output, id);
        }
        "reasoning" => {
            add_kind(record, "thinking");
            record.summary = "Assistant reasoning omitted.".into();
            record.truncated = true;
        }
        _ => record.summary = format!("{} record.", record.record_type),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The record as JSON, without the fields every case shares.
    fn compact(source: &str, line: &str) -> serde_json::Value {
        let mut value =
            serde_json::to_value(compact_line(line, 1, source, 0, String::new())).unwrap();
        let map = value.as_object_mut().unwrap();
        for key in ["line", "raw_bytes", "raw_sha256"] {
            map.remove(key);
        }
        // Drop defaults so that cases list only what differs from them.
        let defaults = json!({"role": null, "content_kinds": [], "text_preview": null, "tool_uses": [], "tool_results": [], "truncated": false});
        for (key, default) in defaults.as_object().unwrap() {
            if map.get(key) == Some(default) {
                map.remove(key);
            }
        }
        value
    }

    fn check(source: &str, line: &str, expect: serde_json::Value) {
        assert_eq!(compact(source, line), expect, "{source}: {line}");
    }

    /// `text` as a JSON string token in which every character is a `\u` escape.
    fn fully_escaped(text: &str) -> String {
        let mut out = String::from("\"");
        for unit in text.encode_utf16() {
            out.push_str(&format!("\\u{unit:04x}"));
        }
        out.push('"');
        out
    }

    /// Trims `text` as assembled text, as a plain JSON string and as an escaped one; all
    /// three must agree (the string forms are measured without being decoded whole).
    fn trimmed(text: &str) -> ToolResult {
        let meta = ResultMeta::default();
        let expect = tool_result(&Payload::Text(Cow::Borrowed(text)), "output", &meta);
        for token in [serde_json::to_string(text).unwrap(), fully_escaped(text)] {
            let Ok(Node::String(s)) = pyjson::parse_borrowed(&token) else {
                panic!("not a string: {token}");
            };
            assert_eq!(
                tool_result(&Payload::Str(s), "output", &meta),
                expect,
                "{token}"
            );
        }
        expect
    }

    fn summarised(input: &str) -> ToolUse {
        let expect = tool_use("Bash", &Payload::Text(Cow::Borrowed(input)));
        for token in [serde_json::to_string(input).unwrap(), fully_escaped(input)] {
            let Ok(Node::String(s)) = pyjson::parse_borrowed(&token) else {
                panic!("not a string: {token}");
            };
            assert_eq!(tool_use("Bash", &Payload::Str(s)), expect, "{token}");
        }
        expect
    }

    #[test]
    fn trimming_is_byte_based_and_char_safe() {
        let payload = format!(
            "{}€{}€{}",
            "a".repeat(319),
            "b".repeat(700),
            "z".repeat(158)
        );
        let r = trimmed(&payload);
        assert_eq!(
            r.preview,
            format!("{}{ELISION}{}", "a".repeat(319), "z".repeat(158))
        );
        assert_eq!((r.raw_bytes, r.truncated), (1183, true));
        let payload = format!(
            "{}{}{}\ntail-part",
            "A".repeat(300),
            "é".repeat(200),
            "Z".repeat(500)
        );
        let r = trimmed(&payload);
        assert_eq!(
            r.preview,
            format!(
                "{}{}{ELISION}{}\ntail-part",
                "A".repeat(300),
                "é".repeat(10),
                "Z".repeat(150)
            )
        );
        let r = trimmed(&"€".repeat(400));
        assert_eq!(
            r.preview,
            format!("{}{ELISION}{}", "€".repeat(106), "€".repeat(53))
        );
        // Astral characters (a surrogate pair when escaped) at both cut points.
        let r = trimmed(&format!("{}{}", "😀".repeat(300), "\"q\"\n".repeat(100)));
        assert_eq!(
            r.preview,
            format!("{}{ELISION}{}", "😀".repeat(80), "\"q\"\n".repeat(40))
        );
        let r = trimmed(&"😀".repeat(300));
        assert_eq!(
            r.preview,
            format!("{}{ELISION}{}", "😀".repeat(80), "😀".repeat(40))
        );
        let exact = "x".repeat(1024);
        assert!(!trimmed(&exact).truncated);
        assert_eq!(trimmed("").preview, "");
        assert_eq!(trimmed("a\\b\"c\u{1}").preview, "a\\b\"c\u{1}");
        let input = format!("{{\"command\": \"echo {}\"}}", "x".repeat(400));
        let used = summarised(&input);
        assert_eq!(
            used.input_summary,
            format!("{{\"command\": \"echo {}{ELISION}", "x".repeat(302))
        );
        assert!(used.truncated);
        assert!(!summarised(&"é".repeat(160)).truncated);
        assert_eq!(
            summarised(&"é".repeat(161)).input_summary,
            format!("{}{ELISION}", "é".repeat(160))
        );
    }

    #[test]
    fn claude_code_rules() {
        let cc = "claude-code";
        check(
            cc,
            r#"{"type": "user", "message": "hi"}"#,
            json!({"record_type": "user", "summary": "Message."}),
        );
        check(
            cc,
            r#"{"type": "assistant", "message": {"content": [{"type": "text", "text": "x"}]}}"#,
            json!({"record_type": "assistant", "content_kinds": ["text"], "summary": "Message.", "text_preview": "x"}),
        );
        check(
            cc,
            r#"{"type": "assistant", "message": {"role": "  ", "content": [{"type": "text", "text": "x"}]}}"#,
            json!({"record_type": "assistant", "content_kinds": ["text"], "summary": "Message.", "text_preview": "x"}),
        );
        check(
            cc,
            r#"{"type": "user", "message": {"role": "system", "content": [{"type": "text", "text": "x"}]}}"#,
            json!({"record_type": "user", "role": "system", "content_kinds": ["text"], "summary": "Message.", "text_preview": "x"}),
        );
        check(
            cc,
            r#"{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use"}]}}"#,
            json!({"record_type": "assistant", "role": "assistant", "content_kinds": ["tool_use"], "summary": "Assistant message.", "tool_uses": [{"name": "unknown", "input_summary": "", "truncated": false}]}),
        );
        check(
            cc,
            r#"{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "name": "  ", "input": "raw text"}]}}"#,
            json!({"record_type": "assistant", "role": "assistant", "content_kinds": ["tool_use"], "summary": "Assistant message.", "tool_uses": [{"name": "unknown", "input_summary": "raw text", "truncated": false}]}),
        );
        check(
            cc,
            r#"{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "name": "T", "input": [1, 1.5, 1e+20, 1e-05, true, null, "é\n"]}]}}"#,
            json!({"record_type": "assistant", "role": "assistant", "content_kinds": ["tool_use"], "summary": "Assistant message.", "tool_uses": [{"name": "T", "input_summary": "[1, 1.5, 1e+20, 1e-05, true, null, \"é\\n\"]", "truncated": false}]}),
        );
        check(
            cc,
            r#"{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "name": "T", "input": null}]}}"#,
            json!({"record_type": "assistant", "role": "assistant", "content_kinds": ["tool_use"], "summary": "Assistant message.", "tool_uses": [{"name": "T", "input_summary": "", "truncated": false}]}),
        );
        check(
            cc,
            r#"{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "tool_use", "name": "A", "input": {}}, {"type": "text", "text": "b"}, {"type": "tool_use", "name": "B", "input": {"z": 1, "a": 2}}]}}"#,
            json!({"record_type": "assistant", "role": "assistant", "content_kinds": ["text", "tool_use"], "summary": "Assistant message.", "text_preview": "a\nb", "tool_uses": [{"name": "A", "input_summary": "{}", "truncated": false}, {"name": "B", "input_summary": "{\"a\": 2, \"z\": 1}", "truncated": false}]}),
        );
        check(
            cc,
            r#"{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]}}"#,
            json!({"record_type": "assistant", "role": "assistant", "summary": "Assistant message."}),
        );
        let empty_result = json!({"kind": "tool_result", "status": null, "file_path": null, "command": null, "preview": "", "raw_bytes": 0, "truncated": false});
        let r = |preview: &str| json!({"kind": "tool_result", "status": null, "file_path": null, "command": null, "preview": preview, "raw_bytes": preview.len(), "truncated": false});
        check(
            cc,
            r#"{"type": "user", "message": {"role": "user", "content": [{"type": "thinking"}, {"type": "tool_result", "content": "r"}]}}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["thinking", "tool_result"], "summary": "Tool result.", "tool_results": [r("r")], "truncated": true}),
        );
        check(
            cc,
            r#"{"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "tool_result", "content": "r"}]}}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["text", "tool_result"], "summary": "User message.", "text_preview": "see", "tool_results": [r("r")]}),
        );
        check(
            cc,
            r#"{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result"}]}}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["tool_result"], "summary": "Tool result.", "tool_results": [empty_result]}),
        );
        check(
            cc,
            r#"{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": [{"type": "text", "text": "l1"}, {"type": "image"}, {"type": "text", "text": " "}, {"text": "l2"}, "str"]}]}}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["tool_result"], "summary": "Tool result.", "tool_results": [r("l1\nl2")]}),
        );
        check(
            cc,
            r#"{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": 5}]}}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["tool_result"], "summary": "Tool result.", "tool_results": [r("")]}),
        );
        let file = |p: &str| json!({"kind": "file", "status": null, "file_path": "/n", "command": "ls", "preview": p, "raw_bytes": 1, "truncated": false});
        check(
            cc,
            r#"{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": "r"}, {"type": "tool_result", "content": "s"}]}, "toolUseResult": {"filePath": "", "file": {"filePath": "/n"}, "command": "ls", "status": " "}}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["tool_result"], "summary": "Tool result.", "tool_results": [file("r"), file("s")]}),
        );
        check(
            cc,
            r#"{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": "r"}]}, "toolUseResult": "Error: boom"}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["tool_result"], "summary": "Tool result.", "tool_results": [r("r")]}),
        );
        check(
            cc,
            r#"{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": "r"}]}, "toolUseResult": {"status": "completed", "command": 5}}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["tool_result"], "summary": "Tool result.", "tool_results": [{"kind": "tool_result", "status": "completed", "file_path": null, "command": null, "preview": "r", "raw_bytes": 1, "truncated": false}]}),
        );
        check(
            cc,
            r#"{"message": {"role": "user"}}"#,
            json!({"record_type": "unknown", "summary": "unknown record."}),
        );
        check(
            cc,
            r#"{"type": "progress", "role": "tool"}"#,
            json!({"record_type": "tool", "role": "tool", "summary": "tool record."}),
        );
        check(
            cc,
            r#"{"type": "system", "subtype": ""}"#,
            json!({"record_type": "system", "summary": "system record."}),
        );
        check(
            cc,
            r#"{"type": " ", "role": ""}"#,
            json!({"record_type": "unknown", "summary": "unknown record."}),
        );
        check(
            cc,
            "42",
            json!({"record_type": "unknown", "summary": "Malformed JSONL line."}),
        );
        check(
            cc,
            "",
            json!({"record_type": "unknown", "summary": "Malformed JSONL line."}),
        );
        check(
            cc,
            "[1,2,3]",
            json!({"record_type": "unknown", "summary": "Malformed JSONL line."}),
        );
        check(
            cc,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_use","name":"n","input":{"v":NaN,"w":Infinity,"big":123456789012345678901234567890,"f":1E2,"g":-0.0,"h":0.00001,"i":1e16,"j":123456789012345.0}}]}}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["tool_use"], "summary": "User message.", "tool_uses": [{"name": "n", "input_summary": "{\"big\": 123456789012345678901234567890, \"f\": 100.0, \"g\": -0.0, \"h\": 1e-05, \"i\": 1e+16, \"j\": 123456789012345.0, \"v\": NaN, \"w\": Infinity}", "truncated": false}]}),
        );
        check(
            cc,
            r#"{"type":"assistant","type":"user","message":{"role":"user","content":[{"type":"text","text":"a"}]}}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["text"], "summary": "User message.", "text_preview": "a"}),
        );
        check(
            cc,
            r#"   {"type":"summary"}  "#,
            json!({"record_type": "summary", "summary": "summary record."}),
        );
        check(
            "Claude-Code",
            r#"{"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "x"}]}}"#,
            json!({"record_type": "user", "summary": "user record."}),
        );
    }

    #[test]
    fn string_content_is_user_text() {
        check(
            "claude-code",
            r#"{"type":"user","message":{"role":"user","content":"thanks, ship it"}}"#,
            json!({"record_type": "user", "role": "user", "content_kinds": ["text"], "summary": "User message.", "text_preview": "thanks, ship it"}),
        );
        check(
            "claude-code",
            r#"{"type":"user","message":{"role":"user","content":"   "}}"#,
            json!({"record_type": "user", "role": "user", "summary": "User message."}),
        );
        check(
            "codex",
            r#"{"type": "response_item", "payload": {"type": "message", "role": "user", "content": "plain"}}"#,
            json!({"record_type": "response_item:message", "role": "user", "content_kinds": ["text"], "summary": "User message.", "text_preview": "plain"}),
        );
    }

    #[test]
    fn codex_rules() {
        let cx = "codex";
        check(
            cx,
            r#"{"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": " "}]}}"#,
            json!({"record_type": "response_item:message", "role": "assistant", "summary": "Assistant message."}),
        );
        check(
            cx,
            r#"{"type": "response_item", "payload": {"type": "function_call", "arguments": {"a": 1}}}"#,
            json!({"record_type": "response_item:function_call", "content_kinds": ["tool_use"], "summary": "Tool call: unknown.", "tool_uses": [{"name": "unknown", "input_summary": "", "truncated": false}]}),
        );
        check(
            cx,
            r#"{"type": "response_item", "payload": {"type": "function_call", "name": "n", "arguments": "   "}}"#,
            json!({"record_type": "response_item:function_call", "content_kinds": ["tool_use"], "summary": "Tool call: n.", "tool_uses": [{"name": "n", "input_summary": "", "truncated": false}]}),
        );
        let out = |p: &str| json!({"kind": "output", "status": null, "file_path": null, "command": null, "preview": p, "raw_bytes": p.len(), "truncated": false});
        check(
            cx,
            r#"{"type": "response_item", "payload": {"type": "function_call_output", "output": {"content": "x"}}}"#,
            json!({"record_type": "response_item:function_call_output", "content_kinds": ["tool_result"], "summary": "Tool result.", "tool_results": [out("")]}),
        );
        check(
            cx,
            r#"{"type": "response_item", "payload": {"type": "function_call_output", "output": "  "}}"#,
            json!({"record_type": "response_item:function_call_output", "content_kinds": ["tool_result"], "summary": "Tool result.", "tool_results": [out("  ")]}),
        );
        check(
            cx,
            r#"{"type": "event_msg", "payload": {}}"#,
            json!({"record_type": "event_msg:event", "summary": "event_msg:event record."}),
        );
        check(
            cx,
            r#"{"type": "event_msg", "payload": {"type": "user_message", "message": ""}}"#,
            json!({"record_type": "event_msg:user_message", "role": "user", "summary": "User message."}),
        );
        check(
            cx,
            r#"{"type": "response_item", "payload": "x"}"#,
            json!({"record_type": "response_item", "summary": "response_item record."}),
        );
        check(
            cx,
            r#"{"type": "compacted", "payload": {"message": "m"}}"#,
            json!({"record_type": "compacted", "summary": "compacted record."}),
        );
        check(
            cx,
            r#"{"type": "x", "role": "user"}"#,
            json!({"record_type": "user", "role": "user", "summary": "user record."}),
        );
        check(
            cx,
            r#"{"type": "response_item", "payload": {"type": "message", "content": [{"type": "input_text", "text": "t"}]}}"#,
            json!({"record_type": "response_item:message", "content_kinds": ["text"], "summary": "Message.", "text_preview": "t"}),
        );
        check(
            cx,
            r#"{"type": "response_item", "payload": {"type": "reasoning", "summary": []}}"#,
            json!({"record_type": "response_item:reasoning", "content_kinds": ["thinking"], "summary": "Assistant reasoning omitted.", "truncated": true}),
        );
        check(
            cx,
            r#"{"type": "response_item", "payload": {"type": "custom_tool_call"}}"#,
            json!({"record_type": "response_item:custom_tool_call", "summary": "response_item:custom_tool_call record."}),
        );
        check(
            cx,
            r#"{"type": "event_msg", "payload": {"type": "agent_message", "message": "done"}}"#,
            json!({"record_type": "event_msg:agent_message", "role": "assistant", "content_kinds": ["text"], "summary": "Agent message.", "text_preview": "done"}),
        );
        check(
            cx,
            r#"{"type": "event_msg"}"#,
            json!({"record_type": "event_msg", "summary": "event_msg record."}),
        );
    }
}
