//! Reading a line range of one indexed session, in either contract's tool:
//! `read_session_lines` (0.2.10, [`session_lines`]) and `read_session_page` (0.2.20,
//! [`pages`]). This file holds what both share: the request, the answer, finding the
//! session's file ([`locate`]) and prompt-diary's range checks ([`check_range`]).

pub mod compact;
pub mod handle;
pub mod pages;
pub mod session_lines;
pub mod sparse;

use std::path::Path;

use serde::Serialize;

use crate::session::{LineFailure, OpenError, SessionFile, open_imported};
use crate::store::{FileState, Lookup, Reader, StoreError};
use crate::util::pyjson::py_repr;
use crate::workspace::{Unknown, layout};
use compact::CompactRecord;

/// Most lines one compact read may return.
pub const COMPACT_CAP: i64 = 2000;
/// Most lines one full read may return.
pub const FULL_CAP: i64 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Compact,
    Full,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Compact => "compact",
            Mode::Full => "full",
        }
    }

    fn cap(self) -> i64 {
        match self {
            Mode::Compact => COMPACT_CAP,
            Mode::Full => FULL_CAP,
        }
    }
}

pub use session_lines::TextForm;

/// Where a read's answer goes: its text, in pieces, in order, each as soon as it is
/// made, in the form the sink asks for. A transport implements it (sending each piece
/// as it comes, or keeping the whole text).
pub trait Sink {
    /// The form the pieces are wanted in.
    fn form(&self) -> TextForm;
    /// Takes the next piece; false when the rest is not wanted (the read stops).
    fn piece(&mut self, piece: String) -> bool;
    /// The flags that say the rest is not wanted, asked between the parts of a read
    /// before any piece is made (a large read's check takes a while).
    fn stops(&self) -> Vec<crate::util::stop_flag::Stop> {
        Vec::new()
    }
}

/// The whole text, in one string.
impl Sink for String {
    fn form(&self) -> TextForm {
        TextForm::Text
    }

    fn piece(&mut self, piece: String) -> bool {
        if self.is_empty() {
            *self = piece;
        } else {
            self.push_str(&piece);
        }
        true
    }
}

/// Hands `sink` an answer made whole (a page, a refusal), in the sink's form.
pub fn whole(sink: &mut impl Sink, text: String) {
    match sink.form() {
        TextForm::Text => sink.piece(text),
        TextForm::JsonString => {
            let mut content = String::with_capacity(text.len() + text.len() / 8);
            crate::util::pyjson::write_string_content(&mut content, &text);
            sink.piece(content)
        }
    };
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    pub project_key: String,
    pub session_ref: String,
    pub start_line: LineNumber,
    pub end_line: LineNumber,
    pub mode: Mode,
}

/// A requested line number: any integer, as Python holds it, so that a range error names
/// the number the client sent (`start_line 1000000000000000000000000000000 ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineNumber(Repr);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    Small(i64),
    /// Beyond `i64`: the digits, without leading zeros.
    Big {
        negative: bool,
        digits: Box<str>,
    },
}

impl LineNumber {
    /// The number written in decimal: an optional sign, then ASCII digits (leading zeros
    /// allowed); `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let (negative, digits) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let digits = digits.trim_start_matches('0');
        let magnitude = if digits.is_empty() {
            Some(0)
        } else {
            digits.parse::<u64>().ok()
        };
        let small = magnitude.and_then(|m| {
            if negative {
                0i64.checked_sub_unsigned(m)
            } else {
                i64::try_from(m).ok()
            }
        });
        Some(match small {
            Some(n) => LineNumber(Repr::Small(n)),
            None => LineNumber(Repr::Big {
                negative,
                digits: digits.into(),
            }),
        })
    }

    /// The number, saturated to `i64`: exact for every number inside a session's range.
    pub fn saturated(&self) -> i64 {
        match &self.0 {
            Repr::Small(n) => *n,
            Repr::Big { negative: true, .. } => i64::MIN,
            Repr::Big { .. } => i64::MAX,
        }
    }
}

impl From<i64> for LineNumber {
    fn from(n: i64) -> Self {
        LineNumber(Repr::Small(n))
    }
}

impl Ord for LineNumber {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let magnitude = |d: &str| (d.len(), d.to_owned());
        match (&self.0, &other.0) {
            (Repr::Small(a), Repr::Small(b)) => a.cmp(b),
            (Repr::Small(_), Repr::Big { negative, .. }) => {
                if *negative {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            (Repr::Big { negative, .. }, Repr::Small(_)) => {
                if *negative {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (
                Repr::Big {
                    negative: a_neg,
                    digits: a,
                },
                Repr::Big {
                    negative: b_neg,
                    digits: b,
                },
            ) => match (a_neg, b_neg) {
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                (false, false) => magnitude(a).cmp(&magnitude(b)),
                (true, true) => magnitude(b).cmp(&magnitude(a)),
            },
        }
    }
}

impl PartialOrd for LineNumber {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for LineNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Repr::Small(n) => write!(f, "{n}"),
            Repr::Big { negative, digits } => {
                write!(f, "{}{digits}", if *negative { "-" } else { "" })
            }
        }
    }
}

/// The tool's result: the lines, or why not.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ReadResult {
    Ok(ReadOk),
    Invalid(Invalid),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadOk {
    pub status: &'static str,
    pub project_key: String,
    pub session_ref: String,
    pub line_range: LineRange,
    pub mode: &'static str,
    pub records: Records,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LineRange {
    pub start: i64,
    pub end: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Records {
    Compact(Vec<CompactRecord>),
    Full(Vec<FullRecord>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FullRecord {
    pub line: u64,
    pub raw_line: String,
    pub raw_bytes: u64,
    pub raw_sha256: String,
}

/// `{"status": "invalid", "errors": [...]}` with `field`-keyed errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Invalid {
    pub status: &'static str,
    pub errors: Vec<FieldError>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
    pub hint: String,
}

impl From<Unknown> for ReadResult {
    fn from(unknown: Unknown) -> Self {
        ReadResult::invalid(unknown.field, unknown.message, unknown.hint)
    }
}

impl ReadResult {
    pub fn invalid(field: &str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        ReadResult::Invalid(Invalid {
            status: "invalid",
            errors: vec![FieldError {
                field: field.to_owned(),
                message: message.into(),
                hint: hint.into(),
            }],
        })
    }
}

const RANGE_HINT: &str = "request a 1-based line range contained by the session";
const REIMPORT_HINT: &str =
    "run `evidence-store import` to re-index the prepared workspace, then read again";
const RESTORE_HINT: &str = "ensure the prepared workspace still contains the copied session file";

/// A session file found for a read, before its range is checked.
pub enum Located {
    Found(Found),
    Answer(ReadResult),
}

/// The indexed session file of a read, open.
pub struct Found {
    pub file: SessionFile,
    pub source: String,
    pub file_id: u64,
    /// The file's number of physical lines.
    pub lines: u64,
}

/// Finds the requested session's file: the project, the session, and the file import
/// indexed (same size and identity), opened; any other case is the answer.
pub fn locate(reader: &Reader, root: &Path, req: &ReadRequest) -> Result<Located, StoreError> {
    let (project_key, session_ref) = (req.project_key.as_str(), req.session_ref.as_str());
    let answer = |result: ReadResult| Ok(Located::Answer(result));
    if !reader.has_workspace()? {
        return Err(StoreError::NotImported);
    }
    if !reader.has_project(project_key)? {
        return answer(Unknown::project(project_key).into());
    }
    let Some(record) = reader.session_file(project_key, session_ref)? else {
        return answer(Unknown::session(project_key, session_ref).into());
    };
    let missing = || {
        Ok(Located::Answer(ReadResult::invalid(
            "session_ref",
            format!(
                "session file for session_ref {} is missing from the prepared workspace",
                py_repr(session_ref)
            ),
            RESTORE_HINT,
        )))
    };
    let FileState::Indexed(indexed) = &record.file else {
        return missing();
    };
    let rel = layout::session_path(project_key, &record.session_path);
    let file = match open_imported(root, &rel, indexed) {
        Ok(file) => file,
        Err(OpenError::Missing) => return missing(),
        Err(OpenError::Changed(what)) => return answer(changed(session_ref, what)),
        Err(e) => return answer(io_failure(session_ref, &e.into_io())),
    };
    Ok(Located::Found(Found {
        file,
        source: record.source,
        file_id: indexed.file_id,
        lines: indexed.lines,
    }))
}

/// The answer when the store itself cannot be read.
pub fn store_failure(e: &StoreError) -> ReadResult {
    ReadResult::invalid(
        "session_ref",
        format!("the evidence store could not be read: {e}"),
        "run `evidence-store import` again; if it persists, remove the store and import",
    )
}

/// The answer when the session file cannot be read.
pub fn io_failure(session_ref: &str, e: &std::io::Error) -> ReadResult {
    ReadResult::invalid(
        "session_ref",
        format!(
            "session file for session_ref {} could not be read: {e}",
            py_repr(session_ref)
        ),
        RESTORE_HINT,
    )
}

/// The answer when the session file is not what import indexed.
pub fn changed(session_ref: &str, what: &str) -> ReadResult {
    ReadResult::invalid(
        "session_ref",
        format!(
            "session file for session_ref {} changed since it was imported ({what})",
            py_repr(session_ref)
        ),
        REIMPORT_HINT,
    )
}

/// The answer when line `line` no longer hashes to its stored digest.
pub fn line_changed(session_ref: &str, line: u64) -> ReadResult {
    changed(
        session_ref,
        &format!("line {line} no longer matches its recorded SHA-256"),
    )
}

/// The first error message of a rejected read, with its hint (empty for a read that
/// was not rejected).
pub fn first_message(result: &ReadResult) -> String {
    match result {
        ReadResult::Invalid(invalid) => invalid
            .errors
            .first()
            .map(|e| format!("{}; {}", e.message, e.hint))
            .unwrap_or_default(),
        ReadResult::Ok(_) => String::new(),
    }
}

/// prompt-diary's range checks, in its order; `cap` is the most lines one read may
/// return, when there is such a limit.
pub fn check_range(req: &ReadRequest, lines: u64, cap: Option<i64>) -> Option<ReadResult> {
    let (start, end) = (&req.start_line, &req.end_line);
    let n = LineNumber::from(i64::try_from(lines).unwrap_or(i64::MAX));
    if *start < LineNumber::from(1) {
        return Some(ReadResult::invalid(
            "start_line",
            format!("start_line {start} must be a positive 1-based line number"),
            RANGE_HINT,
        ));
    }
    if end < start {
        return Some(ReadResult::invalid(
            "end_line",
            format!("end_line {end} must be >= start_line {start}"),
            RANGE_HINT,
        ));
    }
    if *start > n {
        return Some(ReadResult::invalid(
            "start_line",
            format!("start_line {start} is past the session's last line {n}"),
            RANGE_HINT,
        ));
    }
    if *end > n {
        return Some(ReadResult::invalid(
            "end_line",
            format!("end_line {end} is past the session's last line {n}"),
            RANGE_HINT,
        ));
    }
    // Here 1 <= start <= end <= lines: both are exact as i64.
    if let Some(cap) = cap
        && end.saturated() - start.saturated() + 1 > cap
    {
        return Some(ReadResult::invalid(
            "end_line",
            format!(
                "line range is too broad for {} mode; at most {cap} lines may be read at once",
                req.mode.name()
            ),
            format!("split the read into a narrower range of at most {cap} lines"),
        ));
    }
    None
}

impl LineFailure {
    /// The read's answer.
    pub fn answer(self, session_ref: &str) -> ReadResult {
        match self {
            LineFailure::Io(e) => io_failure(session_ref, &e),
            LineFailure::Changed(line) => line_changed(session_ref, line),
        }
    }
}
