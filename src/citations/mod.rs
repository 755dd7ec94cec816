//! Agent-cited evidence: the `**Evidence**:` markers and JSON evidence blocks that agents
//! write in their assistant messages, turned into citations.
//!
//! The rules are pure: they take text (or one parsed session line) and return values.
//! [`extract()`] scans one assistant message; [`record::assistant_texts`] finds the assistant
//! messages a session line carries; [`receipt`] is the receipt's shape.
//!
//! The effectful parts sit beside them: [`scan`] takes citations from session files at
//! import, [`check`] checks a cited file against the project directory, [`stored`] counts
//! and re-verifies what the store holds, [`receipt_files`] writes the receipts, and
//! [`query`] answers the read-only citation tools.
//!
//! A [`Citation`] has exactly the fields of a citation in a `ralph_gold.evidence.v1`
//! receipt (`type`, `reference`, `context`); where it was found travels beside it in
//! [`Located`], so the receipt shape stays independent of how citations are stored.

pub mod aggregate;
pub mod check;
mod extract;
pub mod query;
pub mod receipt;
pub mod receipt_files;
pub mod record;
pub mod scan;
pub mod stored;
pub mod verify;

pub use extract::{Options, extract};

use serde::{Deserialize, Serialize};

/// A file and line (or range): `**Evidence**: src/auth.py:42-45`.
pub const FILE: &str = "file";
/// A fenced `bash`/`sh` block after the marker; the reference is its command (first
/// line), the context its output.
pub const COMMAND: &str = "command";
/// A test result: `**Evidence**: pytest tests/test_auth.py::test_login - PASS`.
pub const TEST: &str = "test";
/// A markdown link: `**Evidence**: [text](url)`.
pub const URL: &str = "url";
/// The type of a JSON citation that names none.
pub const UNKNOWN: &str = "unknown";

/// One citation, with a receipt's field names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Citation {
    /// `file`, `command`, `test`, `url`, or for JSON citations whatever the agent wrote
    /// (`unknown` when it wrote nothing).
    #[serde(rename = "type")]
    pub kind: String,
    pub reference: String,
    /// Text around a file citation, or the JSON citation's `context`; `null` otherwise.
    /// Contexts and command references are taken from the text with its line endings
    /// normalised (LF), so CRLF and LF messages give equal citations.
    pub context: Option<String>,
}

/// A citation and where it was found in the message text it was extracted from.
///
/// `offset` and `len` are byte positions in the message text exactly as given (before
/// line endings are normalised), always on character boundaries and inside the text: a
/// marker citation spans its whole match (from `**Evidence**` to the end of the
/// reference), a JSON citation spans its object in the evidence list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub offset: usize,
    pub len: usize,
    pub citation: Citation,
}

/// Where a stored citation was found, as the counting rule needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Place<'a> {
    /// The turn whose span holds the line, if one does.
    pub turn_ref: Option<&'a str>,
    pub line: u64,
    /// The message's position in its record's `content` list.
    pub content_index: Option<u64>,
    pub kind: &'a str,
    pub reference: &'a str,
}

/// The one rule by which citations are counted and listed (the tools, `dump`, `dump
/// --stats` and receipts all use it): within one turn a citation (its type and
/// reference) counts once, at its first place, in line order then content order then
/// position, whichever messages, content blocks or lines of the turn repeat it. A
/// citation on a line outside every turn counts once per message.
///
/// `items` are one session's citations in that order; the kept ones keep it.
pub fn once_per_turn<'a, T>(
    items: impl IntoIterator<Item = &'a T>,
    place: impl Fn(&'a T) -> Place<'a>,
) -> Vec<&'a T> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|item| {
            let p = place(item);
            let message = match p.turn_ref {
                Some(_) => None,
                None => Some((p.line, p.content_index)),
            };
            seen.insert((p.turn_ref, message, p.kind, p.reference))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_citation_counts_once_per_turn_and_once_per_message_outside_turns() {
        let items = [
            (Some("T1"), 2, Some(0), "file", "a.py:1"),
            (Some("T1"), 2, Some(1), "file", "a.py:1"),
            (Some("T1"), 3, Some(0), "file", "a.py:1"),
            (Some("T1"), 3, Some(0), "test", "a.py:1"),
            (Some("T2"), 5, Some(0), "file", "a.py:1"),
            (None, 7, Some(0), "file", "a.py:1"),
            (None, 7, Some(0), "file", "a.py:1"),
            (None, 7, Some(1), "file", "a.py:1"),
            (None, 8, Some(0), "file", "a.py:1"),
        ];
        let kept: Vec<usize> = once_per_turn(&items, |i| Place {
            turn_ref: i.0,
            line: i.1,
            content_index: i.2,
            kind: i.3,
            reference: i.4,
        })
        .into_iter()
        .map(|k| items.iter().position(|i| std::ptr::eq(i, k)).unwrap_or(99))
        .collect();
        assert_eq!(kept, [0, 3, 4, 5, 7, 8]);
    }
}

#[cfg(test)]
mod golden;
#[cfg(test)]
mod props;
