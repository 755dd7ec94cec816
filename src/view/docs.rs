//! The stored documents (cards, envelopes, the daily report) as the page reads them: with
//! the Python-compatible reader `serve` uses ([`crate::util::pyjson`]), so a card
//! prompt-diary's Python wrote (a lone surrogate escape, `NaN`, a repeated key) reads here
//! as it reads there, and one part at a time: a document is checked whole without a tree
//! ([`pyjson::check`]), then each part the page shows (a chain, a work item, a report
//! slot) is found by its raw text and parsed alone, and a part larger than
//! [`PART_MAX`] is named, not parsed. What the page holds in memory follows one part,
//! not the document.

use crate::store::{Lookup, Reader, StoreError};
use crate::util::pyjson::{self, Map, Value};

/// The largest part (one chain, work item or report slot, as JSON text) the page parses.
pub const PART_MAX: usize = 1 << 20;

/// A stored document's text, checked to be JSON, or why it cannot be read.
pub enum Doc {
    Absent,
    Unreadable(String),
    Text(String),
}

/// The document `rel` of the snapshot.
pub fn read(reader: &Reader, rel: &str) -> Result<Doc, StoreError> {
    let Some(record) = reader.document(rel)? else {
        return Ok(Doc::Absent);
    };
    Ok(match String::from_utf8(record.bytes) {
        Err(_) => Doc::Unreadable("it is not UTF-8 text".to_owned()),
        Ok(text) => match pyjson::check(&text) {
            Ok(()) => Doc::Text(text),
            Err(e) => Doc::Unreadable(format!("it is not JSON ({e})")),
        },
    })
}

/// The raw text of the member `key` of the checked JSON `text`, when it is an object
/// holding one.
pub fn member<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    pyjson::raw_member(text, key).ok().flatten()
}

/// The raw text of each element of the checked JSON `text`, when it is an array.
pub fn elements(text: &str) -> impl Iterator<Item = &str> {
    pyjson::raw_elements(text).map_while(Result::ok)
}

/// The elements of the member `key` of `text`.
pub fn member_elements<'a>(text: &'a str, key: &str) -> impl Iterator<Item = &'a str> {
    member(text, key).into_iter().flat_map(elements)
}

/// A part of a document, parsed: its value, or its size when it is larger than
/// [`PART_MAX`].
pub enum Part {
    Value(Value),
    TooLarge(usize),
}

pub fn part(raw: &str) -> Part {
    if raw.len() > PART_MAX {
        return Part::TooLarge(raw.len());
    }
    // Checked with its document: a failure cannot happen, and reads as null.
    Part::Value(pyjson::parse(raw).unwrap_or_default())
}

/// The string member `key` of `text`'s object, read alone (however large the rest is).
pub fn string_member(text: &str, key: &str) -> Option<String> {
    let raw = member(text, key)?;
    if !raw.starts_with('"') || raw.len() > PART_MAX {
        return None;
    }
    match pyjson::parse(raw) {
        Ok(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// A value's string, when it is one and not blank.
pub fn text(value: Option<&Value>) -> Option<&str> {
    value
        .and_then(Value::as_str)
        .filter(|s| !pyjson::is_blank(s))
}

/// A value's object members, when it is an object.
pub fn object(value: Option<&Value>) -> Option<&Map> {
    value.and_then(Value::as_object)
}

/// A value's elements, none when it is no array.
pub fn list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).unwrap_or_default()
}

/// Whether a value says nothing: null, a blank string, an empty list or object.
pub fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => pyjson::is_blank(s),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// A value as short text: a string as itself, anything else as compact JSON.
pub fn short(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => pyjson::to_sorted_compact(other),
    }
}

/// A turn reference `{session_ref, turn_ref}` (and `project_key`, when it names one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnRef {
    pub project: Option<String>,
    pub session: String,
    pub turn: String,
}

/// The turn references of a list of `{session_ref, turn_ref[, project_key]}` objects, in
/// order; entries that name no turn are left out.
pub fn turn_refs(value: Option<&Value>) -> Vec<TurnRef> {
    list(value)
        .iter()
        .filter_map(|v| {
            Some(TurnRef {
                project: text(v.get("project_key")).map(str::to_owned),
                session: v.get("session_ref")?.as_str()?.to_owned(),
                turn: v.get("turn_ref")?.as_str()?.to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_surrogate_card_reads_and_a_large_part_is_only_measured() {
        let card = r#"{"evidence_chains": [{"turn_ref": "T0001", "trigger": {"summary": "\ud83d broke"}}, 7], "x": NaN}"#;
        pyjson::check(card).expect("Python reads it");
        let chains: Vec<&str> = member_elements(card, "evidence_chains").collect();
        assert_eq!(chains.len(), 2);
        assert_eq!(
            string_member(chains[0], "turn_ref").as_deref(),
            Some("T0001")
        );
        let Part::Value(chain) = part(chains[0]) else {
            panic!("small part")
        };
        assert_eq!(
            text(chain.get("trigger").and_then(|t| t.get("summary"))),
            Some("\u{FFFD} broke")
        );
        let big = format!(
            "{{\"turn_ref\": \"T0002\", \"pad\": \"{}\"}}",
            "x".repeat(PART_MAX)
        );
        assert!(matches!(part(&big), Part::TooLarge(n) if n == big.len()));
        assert_eq!(string_member(&big, "turn_ref").as_deref(), Some("T0002"));
    }
}
