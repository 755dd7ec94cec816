//! Agent-cited evidence: the `**Evidence**:` markers and JSON evidence blocks that agents
//! write in their assistant messages, turned into citations.
//!
//! Everything here is pure: it takes text (or one parsed session line) and returns values.
//! [`extract`] scans one assistant message; [`record::assistant_texts`] finds the assistant
//! messages a session line carries.
//!
//! A [`Citation`] has exactly the fields of a citation in a `ralph_gold.evidence.v1`
//! receipt (`type`, `reference`, `context`); where it was found travels beside it in
//! [`Located`], so the receipt shape stays independent of how citations are stored.

pub mod aggregate;
mod extract;
pub mod receipt;
pub mod record;
pub mod verify;

pub use extract::{Options, extract};

use serde::{Deserialize, Serialize};

/// A file and line (or range): `**Evidence**: src/auth.py:42-45`.
pub const FILE: &str = "file";
/// A fenced `bash`/`sh` block after the marker; the reference is the block's text.
pub const COMMAND: &str = "command";
/// A test result: `**Evidence**: [pytest ]tests/test_auth.py::test_login - PASS`.
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

#[cfg(test)]
mod golden;
#[cfg(test)]
mod props;
