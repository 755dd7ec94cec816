//! The human text of a turn's trigger line, which `write_evidence` stores as the trigger's
//! `quoted_messages` where the server quotes the trigger (prompt-diary 0.2.20).
//!
//! [`human_text`] is pure: it takes the decoded trigger line and the line before it (a
//! Claude client-local command is recognised by the notice line preceding it).
//! [`crate::session::read_texts`] reads those lines from the session file.

use crate::read::sparse::source::{self, Input};
use crate::util::pyjson::{self, Map, Value};

/// Why a line cannot be a chain's trigger; the message is the write's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotATrigger {
    #[error("trigger line {line} is outside the copied session file")]
    Outside { line: u64 },
    #[error("trigger line {line} is not a JSON object")]
    NotObject { line: u64 },
    #[error("trigger line {line} is not a recognized human input or action")]
    NotHuman { line: u64 },
    #[error("trigger line {line} contains unsupported or malformed input")]
    Unsupported { line: u64 },
}

/// The human text blocks of the trigger line `line` (1-based), in source order: the
/// `human_input` and `human_command` text parts. Attachments and skill selections add no
/// text. `record` is `None` when the file has no such line.
///
/// Refused, with the message to give: a line past the end, a line that is not a JSON
/// object, one that is no human input or action, and one with unsupported or malformed
/// input (an unknown part or one whose provenance is not established).
pub fn human_text(
    source: &str,
    line: u64,
    record: Option<&str>,
    previous: Option<&str>,
) -> Result<Vec<String>, NotATrigger> {
    let Some(record) = record else {
        return Err(NotATrigger::Outside { line });
    };
    let Some(record) = json_object(record) else {
        return Err(NotATrigger::NotObject { line });
    };
    let previous = previous.and_then(json_object);
    let parts = if source == "codex" {
        source::parse_codex_input(&record)
    } else {
        source::parse_claude_input(&record, previous.as_ref())
    };
    let parts = match parts {
        Some(parts) if source::is_human_trigger(&parts) => parts,
        _ => {
            return Err(NotATrigger::NotHuman { line });
        }
    };
    let unsupported = parts.iter().any(|part| {
        matches!(
            part,
            Input::Unavailable(_)
                | Input::Text {
                    kind: "unknown",
                    ..
                }
        )
    });
    if unsupported {
        return Err(NotATrigger::Unsupported { line });
    }
    Ok(parts
        .into_iter()
        .filter_map(|part| match part {
            Input::Text {
                kind: "human_input" | "human_command",
                text,
                ..
            } => Some(text),
            _ => None,
        })
        .collect())
}

fn json_object(text: &str) -> Option<Map> {
    match pyjson::parse(text) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(source, line, previous, expected)`: the text parts, or the refusal.
    #[test]
    fn human_text_of_trigger_lines() {
        let claude = |content: &str| {
            format!(r#"{{"type": "user", "message": {{"role": "user", "content": {content}}}}}"#)
        };
        type Case = (
            &'static str,
            Option<String>,
            Option<String>,
            Result<Vec<&'static str>, &'static str>,
        );
        let cases: Vec<Case> = vec![
            ("claude-code", Some(claude(r#""Fix the bug""#)), None, Ok(vec!["Fix the bug"])),
            (
                "claude-code",
                Some(claude(
                    r#""<command-name>/review</command-name>\n<command-message>review</command-message>\n<command-args>calc.py only</command-args>""#,
                )),
                None,
                Ok(vec!["/review", "calc.py only"]),
            ),
            (
                "claude-code",
                Some(claude(
                    r#"[{"type": "text", "text": "Does this look right?"}, {"type": "image", "source": {}}]"#,
                )),
                None,
                Ok(vec!["Does this look right?"]),
            ),
            (
                "claude-code",
                Some(claude(r#"[{"type": "image", "source": {}}]"#)),
                None,
                Ok(vec![]),
            ),
            ("claude-code", None, None, Err("trigger line 3 is outside the copied session file")),
            ("claude-code", Some("[1]".into()), None, Err("trigger line 3 is not a JSON object")),
            ("claude-code", Some("{bad".into()), None, Err("trigger line 3 is not a JSON object")),
            (
                "claude-code",
                Some(r#"{"type": "assistant", "message": {"role": "assistant", "content": "hi"}}"#.into()),
                None,
                Err("trigger line 3 is not a recognized human input or action"),
            ),
            (
                "claude-code",
                Some(claude("5")),
                None,
                Err("trigger line 3 is not a recognized human input or action"),
            ),
            (
                "claude-code",
                Some(claude(r#"[{"type": "text", "text": "hi"}, 7]"#)),
                None,
                Err("trigger line 3 contains unsupported or malformed input"),
            ),
            (
                "codex",
                Some(
                    r#"{"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Run the tests"}]}}"#.into(),
                ),
                None,
                Ok(vec!["Run the tests"]),
            ),
            (
                "codex",
                Some(r#"{"type": "event_msg", "payload": {"type": "user_message", "message": "Ship it"}}"#.into()),
                None,
                Ok(vec!["Ship it"]),
            ),
            (
                "codex",
                Some(r#"{"type": "session_meta", "payload": {}}"#.into()),
                None,
                Err("trigger line 3 is not a recognized human input or action"),
            ),
        ];
        for (source, record, previous, expect) in cases {
            let got = human_text(source, 3, record.as_deref(), previous.as_deref())
                .map_err(|e| e.to_string());
            let expect = expect
                .map(|v| v.into_iter().map(str::to_owned).collect::<Vec<_>>())
                .map_err(str::to_owned);
            assert_eq!(got, expect, "{record:?}");
        }
    }
}
