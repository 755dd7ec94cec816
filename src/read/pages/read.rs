//! `read_session_lines` under the paged contract: one page of a line range, read from
//! the session file as the page needs it.
//!
//! From the cursor's line on, lines are read in small batches (each one positioned read
//! of exactly its lines' bytes) and every line is checked against its stored SHA-256
//! before it is used. A compact record also sees the lines beside it (a Codex echo is
//! recognised against its neighbour), so a page reads one line before its first and one
//! past the record that ends it. No byte of the answer exists before its lines are
//! checked: the page is built whole, then returned.

use std::collections::VecDeque;
use std::path::Path;

use super::{CURSOR_HINT, Cursor, Format, OUTSIDE_RANGE, Record, full_record, page};
use crate::read::Located;
use crate::read::handle::{self, Handle};
use crate::read::sparse;
use crate::read::{Mode, ReadRequest, ReadResult};
use crate::session::{LineFailure, SessionFile};
use crate::store::{Reader, Store, StoreError};
use crate::util::lines::{self, LineEntry};
use crate::util::pyjson::write_string;

/// A cursor as the client sent it, checked against the range before use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawCursor {
    pub line: i64,
    pub offset: i64,
}

/// How a read answers, decided once, where the arguments are read: the whole range (the
/// unpaged contract, which takes no cursor), or one page from a cursor (from the range's
/// start when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paging {
    Unpaged,
    Page(Option<RawCursor>),
}

/// One page of `req` from `cursor` (the range's start when absent), as the tool's text:
/// `{"next_cursor":…,"records":[…]}`, or the invalid result, both compact with sorted
/// keys.
pub fn read_session_page(
    store: &Store,
    root: &Path,
    req: &ReadRequest,
    cursor: Option<RawCursor>,
) -> String {
    match try_page(store, root, req, cursor) {
        Ok(text) => text,
        Err(e) => invalid_text(&crate::read::store_failure(&e)),
    }
}

fn try_page(
    store: &Store,
    root: &Path,
    req: &ReadRequest,
    cursor: Option<RawCursor>,
) -> Result<String, StoreError> {
    let reader = store.reader()?;
    let found = match crate::read::locate(&reader, root, req)? {
        Located::Found(found) => found,
        Located::Answer(answer) => return Ok(invalid_text(&answer)),
    };
    if let Some(problem) = crate::read::check_range(req, found.lines, None) {
        return Ok(invalid_text(&problem));
    }
    // The range is inside the session here, so its ends are exact as i64.
    let (start, end) = (req.start_line.saturated(), req.end_line.saturated());
    let cursor = cursor.unwrap_or(RawCursor {
        line: start,
        offset: 0,
    });
    if !(start <= cursor.line && cursor.line <= end) || cursor.offset < 0 {
        return Ok(invalid_text(&ReadResult::invalid(
            "cursor",
            OUTSIDE_RANGE,
            CURSOR_HINT,
        )));
    }
    // Validated: 1 <= start <= cursor.line <= end <= lines, offset >= 0.
    let cursor = Cursor {
        line: cursor.line as u64,
        offset: cursor.offset as u64,
    };
    let end = end as u64;
    let mut window = Window {
        reader: &reader,
        file: found.file,
        file_id: found.file_id,
        total: found.lines,
        session_key: handle::session_key(&req.project_key, &req.session_ref),
        // A compact record also reads the line before its own.
        first: match req.mode {
            Mode::Compact => cursor.line.saturating_sub(1).max(1),
            Mode::Full => cursor.line,
        },
        texts: VecDeque::new(),
    };
    let mut failure = None;
    let source = found.source.as_str();
    let mode = req.mode;
    let records = (cursor.line..=end).filter_map(|line| {
        let record = match mode {
            Mode::Full => window.text(line).map(|t| Some(full_record(line, t))),
            Mode::Compact => window.compact(line, source),
        };
        match record {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => None,
            Err(e) => {
                failure = Some(e);
                Some(Err(()))
            }
        }
    });
    let format = match mode {
        Mode::Compact => Format::CompactJson,
        Mode::Full => Format::RawLine,
    };
    let paged = page(records, cursor, end, format);
    Ok(match (paged, failure) {
        (Ok(Ok(page)), _) => page.text,
        (Ok(Err(e)), _) => invalid_text(&ReadResult::invalid("cursor", e.to_string(), CURSOR_HINT)),
        (Err(()), Some(Failure::Store(e))) => return Err(e),
        (Err(()), Some(Failure::Line(e))) => invalid_text(&e.answer(&req.session_ref)),
        (Err(()), None) => invalid_text(&crate::read::changed(
            &req.session_ref,
            "it could not be read",
        )),
    })
}

enum Failure {
    Store(StoreError),
    Line(LineFailure),
}

impl From<LineFailure> for Failure {
    fn from(e: LineFailure) -> Self {
        Failure::Line(e)
    }
}

/// Lines are read in batches of at most this many lines...
const BATCH_LINES: u64 = 64;
/// ...and of about this many bytes (a longer line is a batch of its own).
const BATCH_BYTES: u64 = 64 << 10;

/// The checked, decoded lines from `first` on that a page has read and may still need.
struct Window<'r> {
    reader: &'r Reader,
    file: SessionFile,
    file_id: u64,
    /// The file's number of lines.
    total: u64,
    /// The session's key in handles ([`handle::session_key`]).
    session_key: u32,
    /// The line of `texts[0]`.
    first: u64,
    texts: VecDeque<Line>,
}

/// A checked, decoded line and its SHA-256 (part of the handles its record gives).
struct Line {
    text: String,
    sha256: [u8; 32],
}

impl Window<'_> {
    /// The compact record of `line` (`None`: omitted), from it and its neighbours.
    fn compact(&mut self, line: u64, source: &str) -> Result<Option<Record>, Failure> {
        if line < self.total {
            self.load(line + 1)?;
        }
        self.load(line)?;
        let get = |l: u64| {
            l.checked_sub(self.first)
                .and_then(|i| self.texts.get(i as usize))
        };
        let previous = if line > 1 { get(line - 1) } else { None };
        let next = get(line + 1);
        let (text, sha256) = get(line).map_or(("", [0; 32]), |l| (l.text.as_str(), l.sha256));
        let key = self.session_key;
        let json = sparse::record_json(
            text,
            line,
            source,
            previous.map(|l| l.text.as_str()),
            next.map(|l| l.text.as_str()),
            |kind, index| Handle::new(key, line, kind, index, &sha256).map(Handle::to_uuid),
        );
        // What is behind the previous line is no longer needed.
        while self.first + 1 < line && !self.texts.is_empty() {
            self.texts.pop_front();
            self.first += 1;
        }
        Ok(json.map(|json| Record {
            line,
            json,
            content: None,
        }))
    }

    fn text(&mut self, line: u64) -> Result<&str, Failure> {
        self.load(line)?;
        while self.first < line && !self.texts.is_empty() {
            self.texts.pop_front();
            self.first += 1;
        }
        Ok(self.texts.front().map_or("", |l| l.text.as_str()))
    }

    /// Reads batches until `line` is in the window.
    fn load(&mut self, line: u64) -> Result<(), Failure> {
        while self.first + (self.texts.len() as u64) <= line {
            let from = self.first + self.texts.len() as u64;
            let to = (from + BATCH_LINES - 1).min(self.total);
            let entries = self
                .reader
                .lines(self.file_id, from, to)
                .map_err(Failure::Store)?;
            if entries.is_empty() {
                return Err(LineFailure::Changed(from).into());
            }
            // Lines while they stay within the batch's bytes (always at least one).
            let mut take = 1;
            let base = entries[0].offset;
            // Offsets come from the store; a corrupt one ends the batch, and `read` then
            // reports its line as changed, never a panic.
            while take < entries.len()
                && (entries[take].offset.saturating_add(entries[take].len))
                    .checked_sub(base)
                    .is_some_and(|n| n <= BATCH_BYTES)
            {
                take += 1;
            }
            self.read(from, &entries[..take])?;
        }
        Ok(())
    }

    /// Reads the bytes of `entries` (lines from `from` on) at once and checks each line.
    fn read(&mut self, from: u64, entries: &[LineEntry]) -> Result<(), Failure> {
        let bytes = self.file.read_lines(from, entries)?;
        crate::session::for_each_line::<LineFailure>(&bytes, entries, from, |_, entry, span| {
            self.texts.push_back(Line {
                text: lines::decode(&bytes[span]).into_owned(),
                sha256: entry.sha256,
            });
            Ok(())
        })?;
        Ok(())
    }
}

/// Most characters of an error message in a paged answer.
const MESSAGE_CHARS: usize = 1024;

/// An invalid result as the paged contract prints it: compact JSON with sorted keys,
/// each message cut to 1024 characters.
pub fn invalid_text(result: &ReadResult) -> String {
    let ReadResult::Invalid(invalid) = result else {
        return String::new();
    };
    let mut out = String::from("{\"errors\":[");
    for (i, e) in invalid.errors.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"field\":");
        write_string(&mut out, &e.field);
        out.push_str(",\"hint\":");
        write_string(&mut out, &e.hint);
        out.push_str(",\"message\":");
        let cut = e
            .message
            .char_indices()
            .nth(MESSAGE_CHARS)
            .map_or(e.message.as_str(), |(at, _)| &e.message[..at]);
        write_string(&mut out, cut);
        out.push('}');
    }
    out.push_str("],\"status\":");
    write_string(&mut out, invalid.status);
    out.push('}');
    out
}
