//! The assistant messages one session line carries, for [`super::extract()`] to scan.
//!
//! - Claude Code: a record of `type` `assistant` with a `message` object whose `content`
//!   is a list; each element of `type` `text` with non-blank `text` is one message text.
//! - Codex: a `response_item` whose `payload` is a `message` of `role` `assistant`; each
//!   element of its `content` list with non-blank `text` (`output_text`) is one message
//!   text. Codex writes the same message again as an `event_msg` whose `payload` is an
//!   `agent_message` with a non-blank `message`; that copy is returned marked as an echo,
//!   so a caller that counts citations skips it (it counts each message once, from the
//!   `response_item`).
//!
//! Fields are read as prompt-diary's compact records read them: a field is present when
//! it is a non-blank string, and a repeated key means its last value.

use std::borrow::Cow;

use crate::util::pyjson::Node;

/// One assistant message text found in a session line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantText<'a> {
    /// The decoded text; citation offsets are byte offsets into it.
    pub text: Cow<'a, str>,
    /// Its position in the record's `content` list; `None` for a Codex `agent_message`.
    pub content_index: Option<usize>,
    /// A Codex `event_msg` `agent_message`: a copy of a `response_item` message.
    pub echo: bool,
}

/// The assistant message texts in one parsed session line of `source` (`claude-code`
/// or `codex`); empty for any other line or source.
pub fn assistant_texts<'a>(source: &str, record: &Node<'a>) -> Vec<AssistantText<'a>> {
    match (source, nb(record, "type").as_deref()) {
        ("claude-code", Some("assistant")) => record
            .get("message")
            .filter(|m| m.is_object())
            .and_then(|m| m.get("content"))
            .and_then(Node::as_array)
            .map(|items| {
                items
                    .iter()
                    .enumerate()
                    .filter(|(_, item)| nb(item, "type").as_deref() == Some("text"))
                    .filter_map(|(i, item)| content_text(i, item))
                    .collect()
            })
            .unwrap_or_default(),
        ("codex", Some("response_item")) => {
            let Some(payload) = record.get("payload").filter(|p| p.is_object()) else {
                return Vec::new();
            };
            if nb(payload, "type").as_deref() != Some("message")
                || nb(payload, "role").as_deref() != Some("assistant")
            {
                return Vec::new();
            }
            payload
                .get("content")
                .and_then(Node::as_array)
                .map(|items| {
                    items
                        .iter()
                        .enumerate()
                        .filter_map(|(i, item)| content_text(i, item))
                        .collect()
                })
                .unwrap_or_default()
        }
        ("codex", Some("event_msg")) => {
            let Some(payload) = record.get("payload").filter(|p| p.is_object()) else {
                return Vec::new();
            };
            if nb(payload, "type").as_deref() != Some("agent_message") {
                return Vec::new();
            }
            nb(payload, "message")
                .map(|text| AssistantText {
                    text,
                    content_index: None,
                    echo: true,
                })
                .into_iter()
                .collect()
        }
        _ => Vec::new(),
    }
}

/// One session line's decoded text as a record: a JSON object, or `None` (a line that is
/// not one carries no message, citation, user text or timestamp).
pub fn object_of_line(line: &str) -> Option<Node<'_>> {
    crate::util::pyjson::parse_borrowed(line)
        .ok()
        .filter(Node::is_object)
}

/// [`assistant_texts`] of one session line's text.
#[cfg(test)]
pub fn assistant_texts_of_line<'a>(source: &str, line: &'a str) -> Vec<AssistantText<'a>> {
    object_of_line(line).map_or_else(Vec::new, |record| assistant_texts(source, &record))
}

fn content_text<'a>(index: usize, item: &Node<'a>) -> Option<AssistantText<'a>> {
    if !item.is_object() {
        return None;
    }
    nb(item, "text").map(|text| AssistantText {
        text,
        content_index: Some(index),
        echo: false,
    })
}

/// A non-blank string field, decoded.
fn nb<'a>(obj: &Node<'a>, key: &str) -> Option<Cow<'a, str>> {
    obj.get(key)
        .and_then(Node::as_str)
        .filter(|s| !s.is_blank())
        .map(|s| s.decode())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(source: &str, line: &str) -> Vec<(String, Option<usize>, bool)> {
        assistant_texts_of_line(source, line)
            .into_iter()
            .map(|t| (t.text.into_owned(), t.content_index, t.echo))
            .collect()
    }

    #[test]
    fn claude_text_items_each_once() {
        let line = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"a\n**Evidence**: x.py:1"},{"type":"tool_use","name":"Bash","input":{}},{"type":"text","text":"  "},{"type":"text","text":"b"}]}}"#;
        assert_eq!(
            texts("claude-code", line),
            [
                ("a\n**Evidence**: x.py:1".to_owned(), Some(1), false),
                ("b".to_owned(), Some(4), false)
            ]
        );
        // User records, string content and other sources carry no assistant text.
        let user =
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"}]}}"#;
        assert!(texts("claude-code", user).is_empty());
        let string = r#"{"type":"assistant","message":{"content":"a"}}"#;
        assert!(texts("claude-code", string).is_empty());
        assert!(texts("codex", line).is_empty());
        assert!(texts("claude-code", "not json").is_empty());
        assert!(texts("claude-code", "[1]").is_empty());
    }

    #[test]
    fn codex_message_and_its_echo() {
        let item = r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"All tests pass."}]}}"#;
        let echo = r#"{"type":"event_msg","payload":{"type":"agent_message","message":"All tests pass."}}"#;
        assert_eq!(
            texts("codex", item),
            [("All tests pass.".to_owned(), Some(0), false)]
        );
        assert_eq!(
            texts("codex", echo),
            [("All tests pass.".to_owned(), None, true)]
        );
        let user = r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}}"#;
        assert!(texts("codex", user).is_empty());
        let user_msg = r#"{"type":"event_msg","payload":{"type":"user_message","message":"x"}}"#;
        assert!(texts("codex", user_msg).is_empty());
    }

    #[test]
    fn escapes_are_decoded_and_last_key_wins() {
        let line = r#"{"type":"user","type":"assistant","message":{"content":[{"type":"text","text":"a\r\nb \u00e9"}]}}"#;
        assert_eq!(
            texts("claude-code", line),
            [("a\r\nb é".to_owned(), Some(0), false)]
        );
    }
}
