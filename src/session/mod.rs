//! Session files (the `sessions/…jsonl` copies in the workspace): the only code that
//! opens them. Import's indexing, the 0.2.10 read and the 0.2.20 pages, handles, the
//! trigger line, the citation scan and the receipts all ask this module.
//!
//! - [`open()`] opens beneath the held-open workspace root (`openat2` with
//!   `RESOLVE_BENEATH`), `O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC`, then checks with
//!   `fstat` on the descriptor that it is a regular file. A FIFO swapped in is an error at
//!   once, a symlink is refused, and nothing leaves the workspace.
//! - [`open_imported`] also requires the size and identity (inode) import recorded: a
//!   file put in place of the indexed one is refused before any of its bytes is read.
//! - [`locate`] finds a session's file for a read and opens it so; [`check_range`] holds
//!   prompt-diary's range checks; [`for_each_line`] and [`SessionFile::read_lines`] check
//!   every line read against its stored SHA-256.

mod open;

use std::ops::Range;
use std::path::Path;

pub use open::{OpenError, ReadBackError, SessionFile, Sessions, open, open_imported};

use crate::lines::{self, LineEntry};
use crate::pyjson::py_repr;
use crate::read::{LineNumber, ReadRequest, ReadResult};
use crate::store::{FileState, Lookup, Reader, StoreError};
use crate::workspace::Unknown;

/// A session file's path relative to the workspace root.
pub fn rel_path(project_key: &str, session_path: &str) -> String {
    format!("projects/{project_key}/{session_path}")
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
    let rel = rel_path(project_key, &record.session_path);
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

/// Why stored lines could not be read from their file.
#[derive(Debug)]
pub enum LineFailure {
    Io(std::io::Error),
    /// The 1-based line whose bytes no longer hash to the stored digest (or lie past the
    /// bytes read).
    Changed(u64),
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

/// Calls `f` with each line's number, entry and place in `bytes`, which run from the
/// first entry's start to the last one's end. A line past the end of `bytes` has changed.
pub fn for_each_line<E: From<LineFailure>>(
    bytes: &[u8],
    entries: &[LineEntry],
    first_line: u64,
    mut f: impl FnMut(u64, &LineEntry, Range<usize>) -> Result<(), E>,
) -> Result<(), E> {
    let base = entries.first().map_or(0, |e| e.offset);
    for (line, entry) in (first_line..).zip(entries) {
        let start = entry
            .offset
            .checked_sub(base)
            .and_then(|at| usize::try_from(at).ok())
            .unwrap_or(usize::MAX);
        let end = start.saturating_add(usize::try_from(entry.len).unwrap_or(usize::MAX));
        if end > bytes.len() {
            return Err(LineFailure::Changed(line).into());
        }
        f(line, entry, start..end)?;
    }
    Ok(())
}

/// Checks every line of `bytes` (from the first entry's start to the last one's end)
/// against its stored digest.
pub fn check_lines(
    bytes: &[u8],
    entries: &[LineEntry],
    first_line: u64,
) -> Result<(), LineFailure> {
    for_each_line(bytes, entries, first_line, |line, entry, span| {
        if lines::matches(&bytes[span], entry) {
            Ok(())
        } else {
            Err(LineFailure::Changed(line))
        }
    })
}

impl SessionFile {
    /// The bytes of adjacent lines `entries` (the first is line `first_line`), one
    /// positioned read, each line checked against its stored digest. A span that a
    /// corrupt entry puts past the file is refused before anything is allocated.
    pub fn read_lines(
        &self,
        first_line: u64,
        entries: &[LineEntry],
    ) -> Result<Vec<u8>, LineFailure> {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return Ok(Vec::new());
        };
        let span = (last.offset.saturating_add(last.len))
            .checked_sub(first.offset)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(LineFailure::Changed(first_line))?;
        let size = self.stat_again().map_err(LineFailure::Io)?.len();
        if first.offset.saturating_add(span as u64) > size {
            return Err(LineFailure::Changed(first_line));
        }
        let mut bytes = vec![0; span];
        self.read_exact_at(&mut bytes, first.offset)
            .map_err(LineFailure::Io)?;
        check_lines(&bytes, entries, first_line)?;
        Ok(bytes)
    }
}
