//! `read_session_lines`: a line range of one indexed session, compact or full.
//!
//! The store says where the requested lines are; the session file is then read once, at
//! exactly those bytes, and every line is checked against its stored SHA-256. The cost
//! depends on the lines asked for, not on the session's size.

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::Serialize;

use crate::compact::{self, CompactRecord};
use crate::lines::{self, LineEntry};
use crate::pyjson::py_repr;
use crate::store::{FileState, Lookup, Store, StoreError};
use crate::workspace::Unknown;

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    pub project_key: String,
    pub session_ref: String,
    pub start_line: i64,
    pub end_line: i64,
    pub mode: Mode,
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

/// Answers one read from `store`; session files are found under `root`.
pub fn read_session_lines(store: &Store, root: &Path, req: &ReadRequest) -> ReadResult {
    match try_read(store, root, req) {
        Ok(result) => result,
        Err(e) => ReadResult::invalid(
            "session_ref",
            format!("the evidence store could not be read: {e}"),
            "run `evidence-store import` again; if it persists, remove the store and import",
        ),
    }
}

fn try_read(store: &Store, root: &Path, req: &ReadRequest) -> Result<ReadResult, StoreError> {
    let (project_key, session_ref) = (req.project_key.as_str(), req.session_ref.as_str());
    let reader = store.reader()?;
    if reader.workspace()?.is_none() {
        return Err(StoreError::NotImported);
    }
    if reader.project(project_key)?.is_none() {
        return Ok(Unknown::project(project_key).into());
    }
    let Some(record) = reader.session(project_key, session_ref)? else {
        return Ok(Unknown::session(project_key, session_ref).into());
    };
    let missing = || {
        ReadResult::invalid(
            "session_ref",
            format!(
                "session file for session_ref {} is missing from the prepared workspace",
                py_repr(session_ref)
            ),
            "ensure the prepared workspace still contains the copied session file",
        )
    };
    let path = root
        .join("projects")
        .join(project_key)
        .join(&record.session.session_path);
    let FileState::Indexed(file) = &record.file else {
        return Ok(missing());
    };
    let Ok(meta) = std::fs::metadata(&path) else {
        return Ok(missing());
    };
    if !meta.is_file() {
        return Ok(missing());
    }
    if meta.len() != file.size {
        return Ok(changed(session_ref, "its size changed"));
    }
    if let Some(problem) = check_range(req, file.lines) {
        return Ok(problem);
    }
    // Validated: 1 <= start <= end <= lines.
    let (first, last) = (req.start_line as u64, req.end_line as u64);
    let entries = reader.lines(file.file_id, first, last)?;
    drop(reader);
    if entries.len() as u64 != last - first + 1 {
        return Err(StoreError::Inconsistent(format!(
            "the line table of {} is incomplete",
            path.display()
        )));
    }
    Ok(
        match read_records(&path, req, &record.session.source, first, &entries) {
            Ok(records) => ReadResult::Ok(ReadOk {
                status: "ok",
                project_key: req.project_key.clone(),
                session_ref: req.session_ref.clone(),
                line_range: LineRange {
                    start: req.start_line,
                    end: req.end_line,
                },
                mode: req.mode.name(),
                records,
            }),
            Err(ReadFailure::Io(e)) => ReadResult::invalid(
                "session_ref",
                format!(
                    "session file for session_ref {} could not be read: {e}",
                    py_repr(session_ref)
                ),
                "ensure the prepared workspace still contains the copied session file",
            ),
            Err(ReadFailure::Changed(line)) => changed(
                session_ref,
                &format!("line {line} no longer matches its recorded SHA-256"),
            ),
        },
    )
}

fn changed(session_ref: &str, what: &str) -> ReadResult {
    ReadResult::invalid(
        "session_ref",
        format!(
            "session file for session_ref {} changed since it was imported ({what})",
            py_repr(session_ref)
        ),
        REIMPORT_HINT,
    )
}

/// prompt-diary's range checks, in its order (spec reading-and-evidence.md §2.2).
fn check_range(req: &ReadRequest, lines: u64) -> Option<ReadResult> {
    let (start, end) = (req.start_line, req.end_line);
    let n = i64::try_from(lines).unwrap_or(i64::MAX);
    let cap = req.mode.cap();
    if start < 1 {
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
    if start > n {
        return Some(ReadResult::invalid(
            "start_line",
            format!("start_line {start} is past the session's last line {n}"),
            RANGE_HINT,
        ));
    }
    if end > n {
        return Some(ReadResult::invalid(
            "end_line",
            format!("end_line {end} is past the session's last line {n}"),
            RANGE_HINT,
        ));
    }
    if end - start + 1 > cap {
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

enum ReadFailure {
    Io(std::io::Error),
    /// The 1-based line whose bytes no longer hash to the stored digest.
    Changed(u64),
}

/// Below this many bytes a read is processed on one thread.
const PARALLEL_MIN_BYTES: u64 = 256 << 10;

/// One positioned read of the bytes spanning `entries`; then every line is checked
/// against its digest and turned into a record, on two threads for large reads.
fn read_records(
    path: &Path,
    req: &ReadRequest,
    source: &str,
    first_line: u64,
    entries: &[LineEntry],
) -> Result<Records, ReadFailure> {
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return Ok(Records::Full(Vec::new()));
    };
    let base = first.offset;
    let span = usize::try_from(last.offset + last.len - base)
        .map_err(|_| ReadFailure::Changed(first_line))?;
    let mut buf = vec![0u8; span];
    File::open(path)
        .and_then(|f| f.read_exact_at(&mut buf, base))
        .map_err(ReadFailure::Io)?;

    // The line's text, decoded once and checked against the stored digest and length.
    let checked = |line: u64, entry: &LineEntry| -> Result<Cow<'_, str>, ReadFailure> {
        let at = (entry.offset - base) as usize;
        let bytes = buf
            .get(at..at + entry.len as usize)
            .ok_or(ReadFailure::Changed(line))?;
        let (text, sha, decoded_len) = lines::decode_and_hash(bytes);
        if sha != entry.sha256 || decoded_len != entry.decoded_len {
            return Err(ReadFailure::Changed(line));
        }
        Ok(text)
    };
    let numbered: Vec<(u64, &LineEntry)> = (first_line..).zip(entries).collect();
    Ok(match req.mode {
        Mode::Compact => Records::Compact(par_map(&numbered, span as u64, |line, entry| {
            let text = checked(line, entry)?;
            Ok(compact::compact_line(
                &text,
                line,
                source,
                entry.decoded_len,
                lines::hex(&entry.sha256),
            ))
        })?),
        Mode::Full => Records::Full(par_map(&numbered, span as u64, |line, entry| {
            Ok(FullRecord {
                line,
                raw_line: checked(line, entry)?.into_owned(),
                raw_bytes: entry.decoded_len,
                raw_sha256: lines::hex(&entry.sha256),
            })
        })?),
    })
}

/// Maps `f` over `items` in order, splitting the work in two when there is enough of it.
fn par_map<T: Send>(
    items: &[(u64, &LineEntry)],
    total_bytes: u64,
    f: impl Fn(u64, &LineEntry) -> Result<T, ReadFailure> + Sync,
) -> Result<Vec<T>, ReadFailure> {
    let run = |part: &[(u64, &LineEntry)]| {
        part.iter()
            .map(|(line, entry)| f(*line, entry))
            .collect::<Result<Vec<T>, _>>()
    };
    if total_bytes < PARALLEL_MIN_BYTES || items.len() < 2 {
        return run(items);
    }
    // Split where half the bytes are, so both threads get equal work.
    let mut acc = 0;
    let split = items
        .iter()
        .position(|(_, e)| {
            acc += e.len;
            acc * 2 >= total_bytes
        })
        .map_or(items.len() / 2, |i| (i + 1).clamp(1, items.len() - 1));
    let (left, right) = items.split_at(split);
    std::thread::scope(|scope| {
        let other = scope.spawn(|| run(right));
        let mut out = run(left)?;
        match other.join() {
            Ok(rest) => out.extend(rest?),
            // Record building does not panic; if it ever did, redo the work here.
            Err(_) => out.extend(run(right)?),
        }
        Ok(out)
    })
}
