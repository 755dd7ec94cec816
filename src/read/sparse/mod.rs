//! Sparse, source-typed compact records: prompt-diary 0.2.20's record shape.
//!
//! Each physical line becomes at most one record typed by where its content came from
//! (`human_input`, `human_command`, `generated_context`, `assistant_message`,
//! `tool_call`, `tool_result`, `context_compaction`, `duplicate`, `mixed` with `parts`,
//! ...). Recognised metadata lines give no record. The JSON keeps only members with a
//! value: null, false, empty strings and empty arrays are dropped at every depth, except
//! a `text` string (even empty) and integer 0. Keys are sorted, separators compact.
//!
//! Pure: a function of the line, its neighbours (a Codex echo is recognised against the
//! adjacent line, a Claude client-local command against the line before) and the
//! session's `source`.

mod derive;
mod json;
pub mod source;

pub use derive::{EntryMut, compact_record};

use crate::read::compact::{Entry, EntryKind};

/// The record of line `line` as compact, sorted, sparse JSON; `None` for an omitted line.
/// Each tool entry whose whole payload was cut gets `handle(kind, index)` as its
/// `handle`, `index` counting the record's entries of that kind ([`derive::Record::each_entry`]).
pub fn record_json(
    raw: &str,
    line: u64,
    source: &str,
    previous: Option<&str>,
    next: Option<&str>,
    handle: impl Fn(EntryKind, usize) -> Option<String>,
) -> Option<String> {
    let mut record = compact_record(raw, line, source, previous, next)?;
    record.each_entry(|entry, index| match entry {
        EntryMut::Use(u) if u.whole.is_some() => u.handle = handle(EntryKind::ToolUse, index),
        EntryMut::Result(r) if r.whole.is_some() => {
            r.handle = handle(EntryKind::ToolResult, index);
        }
        _ => {}
    });
    let mut out = String::with_capacity(raw.len() / 2 + 64);
    json::write_sparse(&mut out, &record.to_j());
    Some(out)
}

/// The tool entries of one line's record, in record order, with their call ids and whole
/// payloads: what a handle on a sparse record names. A line's tool entries do not depend
/// on its neighbours (they only tell whether an input line is an echo or a local
/// command), so none are needed here.
pub fn entries(raw: &str, source: &str) -> Vec<Entry> {
    let Some(mut record) = compact_record(raw, 0, source, None, None) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    record.each_entry(|entry, index| {
        out.push(match entry {
            EntryMut::Use(u) => Entry {
                kind: EntryKind::ToolUse,
                index,
                call_id: u.call_id.take(),
                tool_name: Some(std::mem::take(&mut u.name)),
                trimmed: u.whole.is_some(),
                payload: u
                    .whole
                    .take()
                    .unwrap_or_else(|| std::mem::take(&mut u.input_summary)),
            },
            EntryMut::Result(r) => Entry {
                kind: EntryKind::ToolResult,
                index,
                call_id: r.call_id.take(),
                tool_name: r.name.take(),
                trimmed: r.whole.is_some(),
                payload: r
                    .whole
                    .take()
                    .unwrap_or_else(|| std::mem::take(&mut r.preview)),
            },
        });
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case prompt-diary 0.2.20 answered (tools/gen/sparse_cases_0220.py): the line
    /// with its neighbours, and the record JSON it derived, or null for an omitted line.
    fn without_lone_surrogates(s: &str) -> String {
        let re = regex::Regex::new(r"\\ud[89a-f][0-9a-f]{2}").unwrap();
        re.replace_all(s, "\u{FFFD}").into_owned()
    }

    #[test]
    fn records_match_prompt_diary_0_2_20() {
        let cases = include_str!("../../../tests/fixtures/sparse_0220.jsonl");
        let mut failures = Vec::new();
        for (i, case) in cases.lines().enumerate() {
            let case: serde_json::Value = serde_json::from_str(case).unwrap();
            let lines = case["lines"].as_array().unwrap();
            let got = record_json(
                lines[1].as_str().unwrap(),
                case["line"].as_u64().unwrap(),
                case["source"].as_str().unwrap(),
                lines[0].as_str(),
                lines[2].as_str(),
                |_, _| None,
            );
            // A lone surrogate escape is read as U+FFFD here (a Rust string cannot hold
            // it), where Python keeps it and prints it back as the same escape.
            let expect = case["expect"].as_str().map(without_lone_surrogates);
            if got != expect {
                failures.push(format!(
                    "case {i} ({}): {:.300}\n  got    {:.600}\n  expect {:.600}",
                    case["source"],
                    lines[1].as_str().unwrap(),
                    got.unwrap_or_default(),
                    expect.unwrap_or_default()
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} differ:\n{}",
            failures.len(),
            cases.lines().count(),
            failures.join("\n")
        );
    }

    fn strings_without_lone_surrogates(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::String(s) => serde_json::Value::String(without_lone_surrogates(s)),
            serde_json::Value::Array(items) => {
                items.iter().map(strings_without_lone_surrogates).collect()
            }
            other => other.clone(),
        }
    }

    fn parts_json(parts: &[source::Input]) -> serde_json::Value {
        use serde_json::json;
        parts
            .iter()
            .map(|p| match p {
                source::Input::Text { kind, text, tag } => json!(["text", kind, text, tag]),
                source::Input::Skill { name, path } => json!(["skill", name, path]),
                source::Input::Attachment(t) => json!(["attachment", t]),
                source::Input::Unavailable(t) => json!(["unavailable", t]),
            })
            .collect()
    }

    /// The input parts write_evidence's trigger read sees, and whether they are a human
    /// trigger, as prompt-diary 0.2.20's `parse_claude_input` / `parse_codex_input` give
    /// them for the same cases.
    #[test]
    fn inputs_match_prompt_diary_0_2_20() {
        let cases = include_str!("../../../tests/fixtures/sparse_0220.jsonl");
        let mut failures = Vec::new();
        let mut checked = 0;
        for (i, case) in cases.lines().enumerate() {
            let case: serde_json::Value = serde_json::from_str(case).unwrap();
            let Some(expect) = case.get("input") else {
                continue;
            };
            let lines = case["lines"].as_array().unwrap();
            let parse = |v: &serde_json::Value| match v.as_str().map(crate::util::pyjson::parse) {
                Some(Ok(crate::util::pyjson::Value::Object(m))) => Some(m),
                _ => None,
            };
            let Some(record) = parse(&lines[1]) else {
                continue;
            };
            let previous = parse(&lines[0]);
            let parts = match case["source"].as_str() {
                Some("codex") => source::parse_codex_input(&record),
                _ => source::parse_claude_input(&record, previous.as_ref()),
            };
            let got = parts.as_deref().map(parts_json).unwrap_or_default();
            let trigger = parts.as_deref().is_some_and(source::is_human_trigger);
            let expect = strings_without_lone_surrogates(expect);
            checked += 1;
            if got != expect || trigger != case["human_trigger"] {
                failures.push(format!(
                    "case {i}: {:.300}\n  got {got:?} {trigger}\n  expect {expect} {}",
                    lines[1], case["human_trigger"]
                ));
            }
        }
        assert!(checked > 100);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
