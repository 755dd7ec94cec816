//! `ralph_gold.evidence.v1` receipts: one per turn that cites something.
//!
//! Pure: the caller reads the session's lines and the stored citations and hands them in;
//! [`Receipt::build`] returns the receipt and [`Receipt::to_bytes`] its file content.
//!
//! Field order is Ralph's: `_schema`, `attempt_id`, `timestamp`, `citation_count`,
//! `citations`, `raw_output_hash`, `metadata`. The file is the receipt as JSON indented by
//! two spaces and ending in a newline. Every field is taken from the session file and the
//! store, never from the clock, so exporting an unchanged store again writes the same bytes.
//!
//! - `attempt_id` is `<session_ref>-<turn_ref>`.
//! - `timestamp` is the last `timestamp` of the turn's lines that parses as an ISO 8601
//!   date-time, in UTC with milliseconds (`2026-01-20T12:34:56.789Z`, digits beyond the
//!   millisecond dropped); `null` when no line of the turn has one.
//! - `citations` are the turn's citations in line order, then position in the message.
//!   A citation repeated within the turn (same `type` and `reference`, also across two
//!   messages of the turn) is kept once, at its first place, with its first context.
//! - `raw_output_hash` is the SHA-256 (lowercase hex) of the text the citations were
//!   extracted from: the decoded text of each assistant message of the turn that carries
//!   one of them, in line order then content order, joined by one `\n`. A turn citing
//!   from one message (the usual case) hashes exactly that message.
//! - `metadata`: `task_id` (the turn ref), `task_title` (the turn's first user text, with
//!   surrounding whitespace removed, cut to 80 characters; `null` when the turn has none),
//!   `project_key`, `session_ref`, `lines` (the session line of each citation, parallel to
//!   `citations`) and `verification` (the check of each citation, parallel to `citations`).

use crate::util::calendar::{civil_from_days, days_from_civil};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::Citation;
use crate::util::pyjson::Node;

/// The receipt schema Ralph reads.
pub const SCHEMA: &str = "ralph_gold.evidence.v1";
/// How many characters of the turn's first user text make its `task_title`.
pub const TITLE_CHARS: usize = 80;

/// One stored citation of a turn, as a receipt needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cited {
    /// The 1-based session line the citation was found on.
    pub line: u64,
    pub citation: Citation,
    pub check: Verification,
}

/// The verification result of one citation, as a receipt shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// `ok`, `missing_file`, `line_out_of_range`, `outside_project` or `unchecked`.
    pub status: String,
    /// The directory the cited path was resolved against.
    pub cwd: Option<String>,
    /// SHA-256 (lowercase hex) of the cited file, when it was read.
    pub sha256: Option<String>,
    /// Lines of the cited file, when it was read.
    pub file_lines: Option<u64>,
    /// Why the citation is `unchecked`.
    pub detail: Option<String>,
}

/// What one turn's receipt is made of.
#[derive(Debug, Clone, Default)]
pub struct TurnInput<'a> {
    pub project_key: &'a str,
    pub session_ref: &'a str,
    pub turn_ref: &'a str,
    /// The turn's last timestamp, already formatted ([`format_timestamp`]).
    pub timestamp: Option<String>,
    /// The turn's first user text, uncut.
    pub user_text: Option<&'a str>,
    /// The assistant message texts the citations were extracted from, in order.
    pub messages: Vec<&'a str>,
    /// The turn's citations in line order, then position.
    pub cited: Vec<Cited>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Receipt {
    #[serde(rename = "_schema")]
    pub schema: &'static str,
    pub attempt_id: String,
    pub timestamp: Option<String>,
    pub citation_count: usize,
    pub citations: Vec<Citation>,
    pub raw_output_hash: String,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Metadata {
    pub task_id: String,
    pub task_title: Option<String>,
    pub project_key: String,
    pub session_ref: String,
    pub lines: Vec<u64>,
    pub verification: Vec<Verification>,
}

impl Receipt {
    pub fn build(input: &TurnInput<'_>) -> Receipt {
        let mut citations: Vec<Citation> = Vec::with_capacity(input.cited.len());
        let mut lines = Vec::with_capacity(input.cited.len());
        let mut verification = Vec::with_capacity(input.cited.len());
        for cited in &input.cited {
            let c = &cited.citation;
            if citations
                .iter()
                .any(|seen| seen.kind == c.kind && seen.reference == c.reference)
            {
                continue;
            }
            citations.push(c.clone());
            lines.push(cited.line);
            verification.push(cited.check.clone());
        }
        let mut hasher = Sha256::new();
        for (i, message) in input.messages.iter().enumerate() {
            if i > 0 {
                hasher.update(b"\n");
            }
            hasher.update(message.as_bytes());
        }
        let digest: [u8; 32] = hasher.finalize().into();
        Receipt {
            schema: SCHEMA,
            attempt_id: attempt_id(input.session_ref, input.turn_ref),
            timestamp: input.timestamp.clone(),
            citation_count: citations.len(),
            citations,
            raw_output_hash: crate::util::lines::hex(&digest),
            metadata: Metadata {
                task_id: input.turn_ref.to_owned(),
                task_title: input.user_text.map(task_title),
                project_key: input.project_key.to_owned(),
                session_ref: input.session_ref.to_owned(),
                lines,
                verification,
            },
        }
    }

    /// The receipt file's bytes: JSON indented by two spaces, then a newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serialising plain strings, numbers and vectors cannot fail.
        let mut out = serde_json::to_vec_pretty(self).unwrap_or_default();
        out.push(b'\n');
        out
    }
}

/// `<session_ref>-<turn_ref>`.
pub fn attempt_id(session_ref: &str, turn_ref: &str) -> String {
    format!("{session_ref}-{turn_ref}")
}

/// The receipt's file name, `evidence-<session_ref>-<turn_ref>.json`, when it is one plain
/// path component of at most 255 bytes (a turn ref with `/`, a NUL, or a name that long
/// has no receipt).
pub fn file_name(session_ref: &str, turn_ref: &str) -> Option<String> {
    let name = format!("evidence-{}.json", attempt_id(session_ref, turn_ref));
    let plain = !session_ref.is_empty()
        && !turn_ref.is_empty()
        && !name.contains(['/', '\0'])
        && name.len() <= 255;
    plain.then_some(name)
}

/// Whether `name` could be a receipt file name ([`file_name`]).
pub fn is_receipt_name(name: &str) -> bool {
    name.len() > "evidence-.json".len() && name.starts_with("evidence-") && name.ends_with(".json")
}

/// Surrounding whitespace removed, cut to [`TITLE_CHARS`] characters.
pub fn task_title(text: &str) -> String {
    text.trim().chars().take(TITLE_CHARS).collect()
}

/// A session line's top-level `timestamp`, formatted; `None` when absent or not an
/// ISO 8601 date-time.
pub fn line_timestamp(record: &Node<'_>) -> Option<String> {
    record
        .get("timestamp")
        .and_then(Node::as_str)
        .and_then(|s| format_timestamp(&s.decode()))
}

/// The first user text a session line carries (`source` `claude-code` or `codex`):
/// - Claude Code: a `user` record's `message.content` when it is a non-blank string, else
///   the first `text` element of its list with non-blank text (tool results are not user
///   text);
/// - Codex: an `event_msg` `user_message`'s non-blank `message` (what the user typed; the
///   `response_item` user messages also carry injected instructions and context).
pub fn line_user_text(source: &str, record: &Node<'_>) -> Option<String> {
    let field = |obj: &Node<'_>, key: &str| {
        obj.get(key)
            .and_then(Node::as_str)
            .filter(|s| !s.is_blank())
            .map(|s| s.decode().into_owned())
    };
    match (source, field(record, "type").as_deref()) {
        ("claude-code", Some("user")) => {
            let content = record
                .get("message")
                .filter(|m| m.is_object())?
                .get("content")?;
            if let Some(text) = content.as_str() {
                return (!text.is_blank()).then(|| text.decode().into_owned());
            }
            content.as_array()?.iter().find_map(|item| {
                (item.is_object() && field(item, "type").as_deref() == Some("text"))
                    .then(|| field(item, "text"))
                    .flatten()
            })
        }
        ("codex", Some("event_msg")) => {
            let payload = record.get("payload").filter(|p| p.is_object())?;
            (field(payload, "type").as_deref() == Some("user_message"))
                .then(|| field(payload, "message"))
                .flatten()
        }
        _ => None,
    }
}

/// An ISO 8601 date-time (`YYYY-MM-DDTHH:MM:SS[.fraction][Z|±HH:MM|±HHMM]`, `T` or a
/// space between date and time, no offset meaning UTC) as UTC with milliseconds:
/// `2026-01-20T12:34:56.789Z`. Digits beyond the millisecond are dropped, not rounded.
pub fn format_timestamp(text: &str) -> Option<String> {
    let b = text.trim().as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(range)?;
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || !matches!(b.get(10), Some(b'T' | b't' | b' '))
    {
        return None;
    }
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let mut at = 19;
    let mut millis = 0i64;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        if at == start {
            return None;
        }
        let mut ms = 0;
        for i in 0..3 {
            ms = ms * 10
                + b.get(start + i)
                    .filter(|_| start + i < at)
                    .map_or(0, |d| i64::from(d - b'0'));
        }
        millis = ms;
    }
    let offset_minutes = match b.get(at) {
        None => 0,
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let h = num(at + 1..at + 3)?;
            let (m, end) = if b.get(at + 3) == Some(&b':') {
                (num(at + 4..at + 6)?, at + 6)
            } else {
                (num(at + 3..at + 5)?, at + 5)
            };
            if end != b.len() || h > 23 || m > 59 {
                return None;
            }
            let total = h * 60 + m;
            if sign == b'-' { -total } else { total }
        }
        _ => return None,
    };
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day < 1
        || day > month_days[(month - 1) as usize]
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_minutes * 60;
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return None;
    }
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::pyjson;

    #[test]
    fn timestamps() {
        let check = |input: &str, expect: Option<&str>| {
            assert_eq!(format_timestamp(input).as_deref(), expect, "{input}");
        };
        check("2026-01-20T12:34:56.789Z", Some("2026-01-20T12:34:56.789Z"));
        check("2026-01-20T12:34:56Z", Some("2026-01-20T12:34:56.000Z"));
        check("2026-01-20T12:34:56.7Z", Some("2026-01-20T12:34:56.700Z"));
        check(
            "2025-09-10T12:34:56.123456Z",
            Some("2025-09-10T12:34:56.123Z"),
        );
        check(
            "2026-01-20T12:34:56.999999Z",
            Some("2026-01-20T12:34:56.999Z"),
        );
        check(
            "2026-01-20T00:30:00+01:00",
            Some("2026-01-19T23:30:00.000Z"),
        );
        check("2024-02-29T23:30:00-0100", Some("2024-03-01T00:30:00.000Z"));
        check(
            "2026-12-31T23:59:59.5-00:30",
            Some("2027-01-01T00:29:59.500Z"),
        );
        check("2026-01-20 12:34:56", Some("2026-01-20T12:34:56.000Z"));
        check("1970-01-01T00:00:00Z", Some("1970-01-01T00:00:00.000Z"));
        for bad in [
            "",
            "yesterday",
            "2026-01-20",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-01-20T24:00:00Z",
            "2026-01-20T12:34:56.Z",
            "2026-01-20T12:34:56Zjunk",
            "2026-01-20T12:34:56+01",
            "2026-01-20T12:34:56+0100x",
            "2026-1-20T12:34:56Z",
            "２０２６-01-20T12:34:56Z",
        ] {
            check(bad, None);
        }
    }

    fn cited(line: u64, kind: &str, reference: &str, context: Option<&str>) -> Cited {
        Cited {
            line,
            citation: Citation {
                kind: kind.to_owned(),
                reference: reference.to_owned(),
                context: context.map(str::to_owned),
            },
            check: Verification {
                status: "unchecked".to_owned(),
                cwd: None,
                sha256: None,
                file_lines: None,
                detail: Some("not a file citation".to_owned()),
            },
        }
    }

    #[test]
    fn receipt_fields_order_and_dedup() {
        let title = "  Implement authentication, then add tests for the login and logout flows and the JWT parsing  ";
        let receipt = Receipt::build(&TurnInput {
            project_key: "Demo-0123456789ab",
            session_ref: "S0001",
            turn_ref: "T001",
            timestamp: Some("2026-01-20T12:34:56.789Z".to_owned()),
            user_text: Some(title),
            messages: vec!["a", "b"],
            cited: vec![
                cited(4, "file", "src/a.py:1", Some("first")),
                cited(4, "test", "tests/t.py - PASS", None),
                cited(9, "file", "src/a.py:1", Some("second")),
            ],
        });
        assert_eq!(receipt.citation_count, 2);
        assert_eq!(receipt.metadata.lines, [4, 4]);
        assert_eq!(receipt.citations[0].context.as_deref(), Some("first"));
        assert_eq!(
            receipt
                .metadata
                .task_title
                .as_deref()
                .map(|t| t.chars().count()),
            Some(80)
        );
        // SHA-256 of "a\nb".
        let mut h = Sha256::new();
        h.update(b"a\nb");
        assert_eq!(
            receipt.raw_output_hash,
            crate::util::lines::hex(&h.finalize().into())
        );
        let text = String::from_utf8(receipt.to_bytes()).unwrap();
        let keys: Vec<usize> = [
            "\"_schema\": \"ralph_gold.evidence.v1\"",
            "\"attempt_id\": \"S0001-T001\"",
            "\"timestamp\": \"2026-01-20T12:34:56.789Z\"",
            "\"citation_count\": 2",
            "\"citations\": [",
            "\"raw_output_hash\"",
            "\"metadata\": {",
            "\"task_id\": \"T001\"",
            "\"task_title\"",
            "\"project_key\": \"Demo-0123456789ab\"",
            "\"session_ref\": \"S0001\"",
            "\"lines\"",
            "\"verification\"",
        ]
        .iter()
        .map(|k| {
            text.find(k)
                .unwrap_or_else(|| panic!("{k} missing in {text}"))
        })
        .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(text.ends_with("}\n"));
        // The citation objects have exactly a receipt's three fields.
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let first = value["citations"][1].as_object().unwrap();
        assert_eq!(
            first.keys().collect::<Vec<_>>(),
            ["type", "reference", "context"]
        );
        assert!(first["context"].is_null());
    }

    #[test]
    fn file_names() {
        assert_eq!(
            file_name("S0001", "T001").as_deref(),
            Some("evidence-S0001-T001.json")
        );
        assert_eq!(file_name("S0001", "a/b"), None);
        assert_eq!(file_name("S0001", ""), None);
        assert_eq!(file_name("S0001", "a\0"), None);
        assert_eq!(file_name("S0001", &"x".repeat(250)), None);
        assert!(is_receipt_name("evidence-S0001-T001.json"));
        assert!(!is_receipt_name("evidence-.json"));
        assert!(!is_receipt_name("notes.json"));
    }

    #[test]
    fn user_texts() {
        let check = |source: &str, line: &str, expect: Option<&str>| {
            let node = pyjson::parse_borrowed(line).unwrap();
            assert_eq!(line_user_text(source, &node).as_deref(), expect, "{line}");
        };
        check(
            "claude-code",
            r#"{"type":"user","message":{"role":"user","content":"Fix the bug"}}"#,
            Some("Fix the bug"),
        );
        check(
            "claude-code",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"x"},{"type":"text","text":"Then this"}]}}"#,
            Some("Then this"),
        );
        check(
            "claude-code",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"x"}]}}"#,
            None,
        );
        check(
            "claude-code",
            r#"{"type":"user","message":{"content":"  "}}"#,
            None,
        );
        check(
            "claude-code",
            r#"{"type":"assistant","message":{"content":"x"}}"#,
            None,
        );
        check(
            "codex",
            r#"{"type":"event_msg","payload":{"type":"user_message","message":"Do it"}}"#,
            Some("Do it"),
        );
        check(
            "codex",
            r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<env>"}]}}"#,
            None,
        );
        let ts = pyjson::parse_borrowed(r#"{"timestamp":"2026-01-20T12:34:56.1234Z"}"#).unwrap();
        assert_eq!(
            line_timestamp(&ts).as_deref(),
            Some("2026-01-20T12:34:56.123Z")
        );
    }
}
