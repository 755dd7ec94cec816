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

pub use derive::{Part, Record, ToolResult, ToolUse, compact_record};

/// The record of line `line` as compact, sorted, sparse JSON; `None` for an omitted line.
pub fn record_json(
    raw: &str,
    line: u64,
    source: &str,
    previous: Option<&str>,
    next: Option<&str>,
) -> Option<String> {
    let record = compact_record(raw, line, source, previous, next)?;
    let mut out = String::with_capacity(raw.len() / 2 + 64);
    json::write_sparse(&mut out, &record.to_j());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case prompt-diary 0.2.20 answered (tools/sparse_cases_0220.py): the line
    /// with its neighbours, and the record JSON it derived, or null for an omitted line.
    fn without_lone_surrogates(s: &str) -> String {
        let re = regex::Regex::new(r"\\ud[89a-f][0-9a-f]{2}").unwrap();
        re.replace_all(s, "\u{FFFD}").into_owned()
    }

    #[test]
    fn records_match_prompt_diary_0_2_20() {
        let cases = include_str!("../../tests/fixtures/sparse_0220.jsonl");
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
}
