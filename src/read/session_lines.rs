//! `read_session_lines`: a line range of one indexed session, compact or full.
//!
//! The store says where the requested lines are; the session file is then read at exactly
//! those bytes, in parts of adjacent lines (one positioned read each, shared by two
//! threads), and every line is checked against its stored SHA-256. The cost depends on
//! the lines asked for, not on the session's size, and the memory an answer holds on a
//! constant, not on the range: a full read's long line is read in segments.

use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;

use crate::read::Located;
use crate::read::handle::{self, Handle};
use crate::session::{LineFailure, SessionFile, check_lines, for_each_line};
use crate::store::{Store, StoreError};
use crate::util::lines::{self, LineEntry};
use crate::util::parallel;
use compact::{CompactRecord, EntryKind};

use super::*;

/// Answers one read from `store`; session files are found under `root`. The same
/// pipeline as [`read_session_pieces`], ending in records instead of text (every part's
/// bytes kept: the records hold them anyway).
pub fn read_session_lines(store: &Store, root: &Path, req: &ReadRequest) -> ReadResult {
    let plan = match plan(store, root, req) {
        Planned::Read(plan) => plan,
        Planned::Answer(answer) => return answer,
    };
    let parts = match plan.check(false, u64::MAX, &|| false) {
        Ok(parts) => parts,
        Err(failure) => return failure.answer(&req.session_ref),
    };
    let records = match req.mode {
        Mode::Compact => Records::Compact(
            plan.map_checked(&parts, |line, entry, text| plan.compact(line, entry, text)),
        ),
        Mode::Full => Records::Full(plan.map_checked(&parts, full_record)),
    };
    ReadResult::Ok(ReadOk::new(req, records))
}

/// [`read_session_lines`]'s result as prompt-diary prints it (JSON indented by two
/// spaces, byte-identical to `serde_json::to_string_pretty` of the result), handed to
/// `emit` in pieces, in order, each as soon as it is printed, so that a transport can
/// send the first while the rest are made.
///
/// Every requested line is read and checked first (on two threads, part by part, each
/// one positioned read; a full read's line longer than [`SEGMENT_BYTES`] in segments,
/// each segment's digest noted), so that a rejected read is one whole answer. Up to
/// [`KEEP_BYTES`] of the checked bytes are kept; the rest are read again as they are
/// sent, each part checked again before any of its bytes is printed (lines against their
/// stored SHA-256, segments against the SHA-256 of the line up to their end as checked). The records are
/// printed straight from the bytes, part by part on two threads, at most
/// [`PIECES_AHEAD`] pieces ahead of the one handed out, in `form`: one printer writes
/// either the text or, for a transport that sends it inside a JSON message, the text
/// already escaped as JSON string content. `emit` returns false when the rest is not
/// wanted. A part that no longer matches once sending has begun (the file changed
/// between the check and the send) ends the text with a note saying so; no piece is
/// ever taken back.
pub fn read_session_pieces(
    store: &Store,
    root: &Path,
    req: &ReadRequest,
    form: TextForm,
    stopped: &(dyn Fn() -> bool + Sync),
    emit: impl FnMut(String) -> bool,
) {
    match form {
        TextForm::Text => print_pieces::<String>(store, root, req, stopped, emit),
        TextForm::JsonString => {
            print_pieces::<pretty::JsonString>(store, root, req, stopped, emit);
        }
    }
}

/// How a read's text is handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextForm {
    /// The pretty JSON text itself.
    Text,
    /// The content of the JSON string that holds the text, without its quotes: what a
    /// transport that sends the text inside a JSON message writes.
    JsonString,
}

fn print_pieces<O: pretty::Out>(
    store: &Store,
    root: &Path,
    req: &ReadRequest,
    stopped: &(dyn Fn() -> bool + Sync),
    mut emit: impl FnMut(String) -> bool,
) {
    let whole = |answer: ReadResult| {
        let mut out = O::with_capacity(256);
        answer.print(&mut out);
        out.into_text()
    };
    let plan = match plan(store, root, req) {
        Planned::Read(plan) => plan,
        Planned::Answer(answer) => {
            emit(whole(answer));
            return;
        }
    };
    let parts = match plan.check(req.mode == Mode::Full, KEEP_BYTES, stopped) {
        Ok(parts) => parts,
        Err(_) if stopped() => return,
        Err(failure) => {
            emit(whole(failure.answer(&req.session_ref)));
            return;
        }
    };
    let mut head = O::with_capacity(256);
    pretty::ok_members(&mut head, &ReadOk::new(req, Records::Full(Vec::new())));
    head.plain("[");
    if !emit(head.into_text()) {
        return;
    }
    let mut failed = None;
    let all = parallel::for_each_ordered(
        parts.len(),
        PIECES_AHEAD,
        Vec::new,
        |buf, i| plan.print_part::<O>(&parts[i], req.mode, buf),
        |piece| match piece {
            Ok(piece) => emit(piece),
            Err(failure) => {
                failed = Some(failure);
                false
            }
        },
    );
    if let Some(failure) = failed {
        let line = match failure {
            LineFailure::Changed(line) => {
                format!("line {line} no longer matches its recorded SHA-256")
            }
            LineFailure::Io(e) => format!("it could not be read again: {e}"),
        };
        tracing::warn!(
            session = req.session_ref,
            "{line}, after the check; the answer is cut"
        );
        let mut note = O::with_capacity(256);
        note.text(&format!(
            "\n[evidence-store: the session file changed while this answer was sent ({line}); \
             the answer ends here: run `evidence-store import`, then read again]"
        ));
        emit(note.into_text());
        return;
    }
    if all {
        let mut tail = O::with_capacity(16);
        tail.newline(2);
        tail.plain("]");
        pretty::close_ok(&mut tail);
        emit(tail.into_text());
    }
}

/// Either the lines to read or the answer without reading them.
enum Planned {
    Read(Plan),
    Answer(ReadResult),
}

/// A validated read: the session file and the stored entries of the requested lines.
struct Plan {
    file: SessionFile,
    source: String,
    /// The session's key in handles ([`handle::session_key`]).
    session_key: u32,
    first_line: u64,
    entries: Vec<LineEntry>,
}

fn plan(store: &Store, root: &Path, req: &ReadRequest) -> Planned {
    match try_plan(store, root, req) {
        Ok(planned) => planned,
        Err(e) => Planned::Answer(crate::read::store_failure(&e)),
    }
}

fn try_plan(store: &Store, root: &Path, req: &ReadRequest) -> Result<Planned, StoreError> {
    let reader = store.reader()?;
    let found = match crate::read::locate(&reader, root, req)? {
        Located::Found(found) => found,
        Located::Answer(answer) => return Ok(Planned::Answer(answer)),
    };
    if let Some(problem) = crate::read::check_range(req, found.lines, Some(req.mode.cap())) {
        return Ok(Planned::Answer(problem));
    }
    // Validated: 1 <= start <= end <= lines.
    let (first, last) = (
        req.start_line.saturated() as u64,
        req.end_line.saturated() as u64,
    );
    let entries = reader.lines(found.file_id, first, last)?;
    drop(reader);
    if entries.len() as u64 != last - first + 1 {
        return Err(StoreError::Inconsistent(format!(
            "the line table of session {} in project {} is incomplete",
            req.session_ref, req.project_key
        )));
    }
    Ok(Planned::Read(Plan {
        file: found.file,
        source: found.source,
        session_key: handle::session_key(&req.project_key, &req.session_ref),
        first_line: first,
        entries,
    }))
}

impl ReadOk {
    fn new(req: &ReadRequest, records: Records) -> Self {
        ReadOk {
            status: "ok",
            project_key: req.project_key.clone(),
            session_ref: req.session_ref.clone(),
            line_range: LineRange {
                start: req.start_line.saturated(),
                end: req.end_line.saturated(),
            },
            mode: req.mode.name(),
            records,
        }
    }
}

/// Lines are read and processed in runs of adjacent lines of about this many bytes (a
/// longer line is a run of its own): small enough that two threads share a read evenly.
const CHUNK_BYTES: u64 = 64 << 10;
/// Below this many bytes a read is one run, processed on the calling thread.
const PARALLEL_MIN_BYTES: u64 = 256 << 10;
/// A full read's line longer than this is read, checked and sent in segments of about
/// this many bytes (cut where the decoding of the parts is that of the whole), so that
/// the answer holds a few segments at a time, never the line.
pub const SEGMENT_BYTES: usize = 256 << 10;
/// The checked bytes one read keeps from its check to its sending, in order; the parts
/// past them are read again (and checked again) as they are sent.
pub const KEEP_BYTES: u64 = 4 << 20;
/// Pieces printed ahead of the one being handed out.
pub const PIECES_AHEAD: usize = 4;

/// What the check plans to read, before reading: a run of whole lines, or one long line
/// to read in segments.
enum Unit {
    Lines(Range<usize>),
    Long(usize),
}

/// One checked part of a read, in order: what it holds, where its bytes are, and its
/// bytes when kept.
struct Part {
    of: PartOf,
    offset: u64,
    len: usize,
    /// The checked bytes, when kept; else read again when sent.
    kept: Option<Vec<u8>>,
    /// For a segment not kept: how it is checked again when read again (whole lines
    /// are checked again line by line).
    again: Option<Box<Again>>,
}

/// A segment's check when it is read again: the line's hasher as it stood before the
/// segment, and the SHA-256 of the line up to the segment's end as the check read it.
/// The bytes read again, fed to that hasher, must give the same digest (different
/// bytes would be a SHA-256 collision), so the hashing of the check is not done twice.
struct Again {
    before: lines::LineHasher,
    through: [u8; 32],
}

enum PartOf {
    /// Adjacent whole lines: the indices of their entries in [`Plan::entries`].
    Lines(Range<usize>),
    /// A segment of one long line (its entry's index): whether it starts or ends it.
    Segment {
        entry: usize,
        first: bool,
        last: bool,
    },
}

/// `buf` holding `len` bytes, or an error when that much memory cannot be had: asked for
/// before it is used, so that a failed allocation is an answer, never an abort.
fn sized(buf: &mut Vec<u8>, len: usize) -> Result<(), LineFailure> {
    // Bytes already there are read over, not cleared first.
    if let Some(more) = len.checked_sub(buf.len()) {
        buf.try_reserve_exact(more).map_err(|_| {
            LineFailure::Io(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("{len} bytes of memory to hold the lines are not available now; retry, or read fewer lines"),
            ))
        })?;
    }
    buf.resize(len, 0);
    Ok(())
}

impl Plan {
    /// The bytes from the first requested line's start to the last one's end.
    fn span(&self) -> u64 {
        match (self.entries.first(), self.entries.last()) {
            (Some(first), Some(last)) => (last.offset + last.len).saturating_sub(first.offset),
            _ => 0,
        }
    }

    /// The line numbers and the file offset and length of `range`'s entries (a corrupt
    /// entry is a changed line, not a panic).
    fn run_span(&self, range: &Range<usize>) -> Result<(u64, u64, usize), LineFailure> {
        let first_line = self.first_line + range.start as u64;
        let entries = &self.entries[range.clone()];
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return Err(LineFailure::Changed(first_line));
        };
        let len = (last.offset + last.len)
            .checked_sub(first.offset)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(LineFailure::Changed(first_line))?;
        Ok((first_line, first.offset, len))
    }

    /// The units the check reads: runs of adjacent lines of about [`CHUNK_BYTES`] (one
    /// run when the read is small), and, when `segmented`, each line longer than
    /// [`SEGMENT_BYTES`] alone, to be read in segments.
    fn units(&self, segmented: bool) -> Vec<Unit> {
        let entries = &self.entries;
        if entries.is_empty() {
            return Vec::new();
        }
        if self.span() < PARALLEL_MIN_BYTES {
            return vec![Unit::Lines(0..entries.len())];
        }
        let mut units = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for (i, entry) in entries.iter().enumerate() {
            if segmented && entry.len > SEGMENT_BYTES as u64 {
                if start < i {
                    units.push(Unit::Lines(start..i));
                }
                units.push(Unit::Long(i));
                (start, bytes) = (i + 1, 0);
                continue;
            }
            bytes += entry.len;
            if bytes >= CHUNK_BYTES {
                units.push(Unit::Lines(start..i + 1));
                (start, bytes) = (i + 1, 0);
            }
        }
        if start < entries.len() {
            units.push(Unit::Lines(start..entries.len()));
        }
        units
    }

    /// Reads every requested line and checks each against its entry, on two threads,
    /// unit by unit; keeps the bytes of the units that fit in `keep` bytes, in order. Of
    /// several failures, the first line's is reported. Lines past the end of the file
    /// are refused before anything is read. Between units and segments it asks
    /// `stopped`, and ends when the read is no longer wanted.
    fn check(
        &self,
        segmented: bool,
        keep: u64,
        stopped: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<Part>, LineFailure> {
        let Some(last) = self.entries.last() else {
            return Ok(Vec::new());
        };
        let size = self.file.stat_again().map_err(LineFailure::Io)?.len();
        if last.offset.saturating_add(last.len) > size {
            let beyond = self
                .entries
                .iter()
                .position(|e| e.offset.saturating_add(e.len) > size)
                .unwrap_or(0);
            return Err(LineFailure::Changed(self.first_line + beyond as u64));
        }
        let units = self.units(segmented);
        let mut used = 0u64;
        let kept: Vec<bool> = units
            .iter()
            .map(|unit| {
                used = used.saturating_add(match unit {
                    Unit::Lines(range) => self.run_span(range).map_or(u64::MAX, |s| s.2 as u64),
                    Unit::Long(i) => self.entries[*i].len,
                });
                used <= keep
            })
            .collect();
        let checked = parallel::map_claimed(units.len(), Vec::new, |buf, i| {
            self.check_unit(&units[i], kept[i], buf, stopped)
        });
        let mut parts = Vec::with_capacity(units.len());
        for unit in checked {
            parts.extend(unit?);
        }
        Ok(parts)
    }

    /// Reads and checks one unit (into `buf`, unless its bytes are kept).
    fn check_unit(
        &self,
        unit: &Unit,
        keep: bool,
        buf: &mut Vec<u8>,
        stopped: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<Part>, LineFailure> {
        let no_longer_wanted = || LineFailure::Io(std::io::ErrorKind::Interrupted.into());
        if stopped() {
            return Err(no_longer_wanted());
        }
        match unit {
            Unit::Lines(range) => {
                let (first_line, offset, len) = self.run_span(range)?;
                let mut kept = Vec::new();
                let bytes = if keep { &mut kept } else { &mut *buf };
                sized(bytes, len)?;
                self.file
                    .read_exact_at(bytes, offset)
                    .map_err(LineFailure::Io)?;
                check_lines(bytes, &self.entries[range.clone()], first_line)?;
                Ok(vec![Part {
                    of: PartOf::Lines(range.clone()),
                    offset,
                    len,
                    kept: keep.then_some(kept),
                    again: None,
                }])
            }
            Unit::Long(i) => {
                let entry = &self.entries[*i];
                let line = self.first_line + *i as u64;
                let len = usize::try_from(entry.len).map_err(|_| LineFailure::Changed(line))?;
                let mut hasher = lines::LineHasher::default();
                let mut parts = Vec::new();
                let mut at = 0;
                while at < len {
                    if stopped() {
                        return Err(no_longer_wanted());
                    }
                    let want = (len - at).min(SEGMENT_BYTES);
                    // One byte past the segment, to cut where the decoding allows.
                    sized(buf, (len - at).min(want + 1))?;
                    let offset = entry.offset + at as u64;
                    self.file
                        .read_exact_at(buf, offset)
                        .map_err(LineFailure::Io)?;
                    let cut = if at + want < len {
                        lines::lossless_cut(buf, want)
                    } else {
                        want
                    };
                    let segment = &buf[..cut];
                    let before = (!keep).then(|| hasher.clone());
                    hasher.update(segment);
                    parts.push(Part {
                        of: PartOf::Segment {
                            entry: *i,
                            first: at == 0,
                            last: at + cut == len,
                        },
                        offset,
                        len: cut,
                        kept: keep.then(|| segment.to_vec()),
                        again: before.map(|before| {
                            Box::new(Again {
                                before,
                                through: hasher.so_far(),
                            })
                        }),
                    });
                    at += cut;
                }
                if !hasher.matches(entry) {
                    return Err(LineFailure::Changed(line));
                }
                Ok(parts)
            }
        }
    }

    /// A checked part's text, its bytes read again and checked again unless kept.
    fn print_part<O: pretty::Out>(
        &self,
        part: &Part,
        mode: Mode,
        buf: &mut Vec<u8>,
    ) -> Result<String, LineFailure> {
        let bytes: &[u8] = match &part.kept {
            Some(bytes) => bytes,
            None => {
                sized(buf, part.len)?;
                self.file
                    .read_exact_at(buf, part.offset)
                    .map_err(LineFailure::Io)?;
                buf
            }
        };
        match &part.of {
            PartOf::Lines(range) => {
                let first_line = self.first_line + range.start as u64;
                if part.kept.is_none() {
                    check_lines(bytes, &self.entries[range.clone()], first_line)?;
                }
                let checked = Checked {
                    first_line,
                    entries: range.clone(),
                    bytes,
                };
                Ok(self.print_checked::<O>(&checked, mode))
            }
            &PartOf::Segment { entry, first, last } => {
                let line = self.first_line + entry as u64;
                if let Some(again) = &part.again {
                    let mut hasher = again.before.clone();
                    hasher.update(bytes);
                    if hasher.so_far() != again.through {
                        return Err(LineFailure::Changed(line));
                    }
                }
                let e = &self.entries[entry];
                let mut out = O::with_capacity(bytes.len() + bytes.len() / 4 + 256);
                if first {
                    if line != self.first_line {
                        out.plain(",");
                    }
                    out.newline(4);
                    pretty::full_open(&mut out, line, 4);
                    out.quote();
                }
                out.string_part(&lines::decode(bytes));
                if last {
                    out.quote();
                    pretty::full_close(&mut out, e.decoded_len, &lines::hex(&e.sha256), 4);
                }
                Ok(out.into_text())
            }
        }
    }

    /// Calls `f` with each line of a checked run: its number, entry and text.
    fn each_checked(&self, chunk: &Checked, mut f: impl FnMut(u64, &LineEntry, &str)) {
        let bytes = chunk.bytes;
        let entries = self.entries.get(chunk.entries.clone()).unwrap_or_default();
        // Valid UTF-8 (the common case) is checked once for the run. A line is decoded
        // alone, as Python decodes invalid bytes, when the run is not valid UTF-8 or the
        // line does not end on one of its character boundaries (its terminator, which no
        // digest covers, was edited into a continuation byte).
        let whole = simdutf8::basic::from_utf8(bytes).ok();
        let _ =
            for_each_line::<LineFailure>(bytes, entries, chunk.first_line, |line, entry, span| {
                let text = match whole.and_then(|whole| whole.get(span.clone())) {
                    Some(text) => Cow::Borrowed(text),
                    None => lines::decode(bytes.get(span).unwrap_or_default()),
                };
                f(line, entry, &text);
                Ok(())
            });
    }

    /// A checked run's lines printed as items of the records array, each on its own
    /// line after its separator (none before the first requested line).
    fn print_checked<O: pretty::Out>(&self, chunk: &Checked, mode: Mode) -> String {
        let mut out = O::with_capacity(piece_capacity(chunk.bytes));
        self.each_checked(chunk, |line, entry, text| {
            if line != self.first_line {
                out.plain(",");
            }
            out.newline(4);
            match mode {
                Mode::Compact => pretty::compact(&mut out, &self.compact(line, entry, text), 4),
                Mode::Full => pretty::full(&mut out, &full_record(line, entry, text), 4),
            }
        });
        out.into_text()
    }

    /// `make` applied to every line of the checked parts (whole lines, their bytes
    /// kept), in order (parts on two threads).
    fn map_checked<T: Send>(
        &self,
        parts: &[Part],
        make: impl Fn(u64, &LineEntry, &str) -> T + Sync,
    ) -> Vec<T> {
        let per_part = parallel::map_claimed(
            parts.len(),
            || (),
            |(), i| {
                let mut out = Vec::new();
                if let (PartOf::Lines(range), Some(bytes)) = (&parts[i].of, &parts[i].kept) {
                    let checked = Checked {
                        first_line: self.first_line + range.start as u64,
                        entries: range.clone(),
                        bytes,
                    };
                    self.each_checked(&checked, |line, entry, text| {
                        out.push(make(line, entry, text));
                    });
                }
                out
            },
        );
        per_part.into_iter().flatten().collect()
    }

    /// The line's compact record, every trimmed entry given its handle.
    fn compact(&self, line: u64, entry: &LineEntry, text: &str) -> CompactRecord {
        let mut record = compact::compact_line(
            text,
            line,
            &self.source,
            entry.decoded_len,
            lines::hex(&entry.sha256),
        );
        if record.truncated {
            let handle = |kind, index| {
                Handle::new(self.session_key, line, kind, index, &entry.sha256).map(Handle::to_uuid)
            };
            for (i, used) in record.tool_uses.iter_mut().enumerate() {
                if used.truncated {
                    used.handle = handle(EntryKind::ToolUse, i);
                }
            }
            for (i, result) in record.tool_results.iter_mut().enumerate() {
                if result.truncated {
                    result.handle = handle(EntryKind::ToolResult, i);
                }
            }
        }
        record
    }
}

/// Room to print the records of lines of `bytes`: compact records print to about half
/// their lines' size, and starting with that saves most of the copies of growing (full
/// records grow from it).
fn piece_capacity(bytes: &[u8]) -> usize {
    bytes.len() / 2 + bytes.len() / 8 + 256
}

/// A run of adjacent requested lines whose bytes have been read and checked.
struct Checked<'b> {
    first_line: u64,
    /// Indices of the lines' entries in [`Plan::entries`].
    entries: Range<usize>,
    /// From the first line's start to the last one's end.
    bytes: &'b [u8],
}

fn full_record(line: u64, entry: &LineEntry, text: &str) -> FullRecord {
    FullRecord {
        line,
        raw_line: text.to_owned(),
        raw_bytes: entry.decoded_len,
        raw_sha256: lines::hex(&entry.sha256),
    }
}

impl ReadResult {
    /// The result as prompt-diary prints a tool result: JSON indented by two spaces,
    /// byte-identical to `serde_json::to_string_pretty` of this value. Written directly
    /// rather than through serde, so that a read's records can be printed straight from
    /// its lines, chunk by chunk ([`read_session_pieces`]).
    pub fn to_pretty_json(&self) -> String {
        let mut out = String::new();
        self.print(&mut out);
        out
    }

    fn print(&self, out: &mut impl pretty::Out) {
        match self {
            ReadResult::Ok(ok) => pretty::ok(out, ok),
            ReadResult::Invalid(invalid) => pretty::invalid(out, invalid),
        }
    }
}

/// Pretty JSON writers for the read result's shapes. Each writes a value whose first line
/// continues the current one and whose inner lines are indented from `indent`.
mod pretty {
    use super::{CompactRecord, FullRecord, Invalid, ReadOk, Records};
    use crate::read::compact::{ToolResult, ToolUse};
    use crate::util::pyjson::{write_string, write_string_content, write_string_content_twice};

    /// Where printed JSON goes: the text itself ([`String`]), or the JSON string that
    /// holds the text ([`JsonString`], without its quotes). One printer writes both, so
    /// a transport that sends the text inside a JSON message gets it escaped as it is
    /// printed rather than in a second pass over the text.
    pub(super) trait Out: Sized {
        /// Empty output with room for about `capacity` bytes of text.
        fn with_capacity(capacity: usize) -> Self;
        /// What was written.
        fn into_text(self) -> String;
        /// ASCII no JSON string escapes: punctuation, numbers, literals.
        fn plain(&mut self, s: &str);
        /// A line break, then `indent` spaces.
        fn newline(&mut self, indent: usize);
        /// `s` as a JSON string.
        fn string(&mut self, s: &str);
        /// A member name and its colon: `"key": `. Names are identifiers of ASCII
        /// letters, digits and underscores, which JSON strings never escape.
        fn key(&mut self, key: &'static str);
        /// The quote that opens or closes a string written in parts.
        fn quote(&mut self);
        /// A part of a string's content (between [`Out::quote`]s): escaping is per
        /// character, so the parts' content is the whole's.
        fn string_part(&mut self, s: &str);
        /// Text as it is (a note after the JSON: not JSON itself).
        fn text(&mut self, s: &str);

        fn integer(&mut self, n: impl itoa::Integer) {
            self.plain(itoa::Buffer::new().format(n));
        }
    }

    const SPACES: &str = "                                ";

    fn spaces(out: &mut String, indent: usize) {
        let mut n = indent;
        while n > 0 {
            let k = n.min(SPACES.len());
            out.push_str(&SPACES[..k]);
            n -= k;
        }
    }

    impl Out for String {
        fn with_capacity(capacity: usize) -> Self {
            String::with_capacity(capacity)
        }

        fn into_text(self) -> String {
            self
        }

        fn plain(&mut self, s: &str) {
            self.push_str(s);
        }

        fn newline(&mut self, indent: usize) {
            self.push('\n');
            spaces(self, indent);
        }

        fn string(&mut self, s: &str) {
            write_string(self, s);
        }

        fn key(&mut self, key: &'static str) {
            debug_assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
            self.push('"');
            self.push_str(key);
            self.push_str("\": ");
        }

        fn quote(&mut self) {
            self.push('"');
        }

        fn string_part(&mut self, s: &str) {
            write_string_content(self, s);
        }

        fn text(&mut self, s: &str) {
            self.push_str(s);
        }
    }

    /// The text written as the content of the JSON string that holds it: structure in
    /// its escaped spelling, each string value escaped twice; no surrounding quotes.
    /// Escaping is per character, so the content of a text is the concatenation of its
    /// pieces' contents.
    pub(super) struct JsonString(pub(super) String);

    impl Out for JsonString {
        /// Escaping grows the text by about a quarter.
        fn with_capacity(capacity: usize) -> Self {
            JsonString(String::with_capacity(capacity + capacity / 4))
        }

        fn into_text(self) -> String {
            self.0
        }

        fn plain(&mut self, s: &str) {
            self.0.push_str(s);
        }

        fn newline(&mut self, indent: usize) {
            self.0.push_str("\\n");
            spaces(&mut self.0, indent);
        }

        fn string(&mut self, s: &str) {
            self.0.reserve(s.len() + 4);
            self.0.push_str("\\\"");
            write_string_content_twice(&mut self.0, s);
            self.0.push_str("\\\"");
        }

        fn key(&mut self, key: &'static str) {
            debug_assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
            self.0.push_str("\\\"");
            self.0.push_str(key);
            self.0.push_str("\\\": ");
        }

        fn quote(&mut self) {
            self.0.push_str("\\\"");
        }

        fn string_part(&mut self, s: &str) {
            write_string_content_twice(&mut self.0, s);
        }

        fn text(&mut self, s: &str) {
            write_string_content(&mut self.0, s);
        }
    }

    /// An object being written: `{`, members, then `}` on its own line.
    struct Object<'o, O: Out> {
        out: &'o mut O,
        indent: usize,
        empty: bool,
    }

    impl<'o, O: Out> Object<'o, O> {
        fn open(out: &'o mut O, indent: usize) -> Self {
            out.plain("{");
            Object {
                out,
                indent,
                empty: true,
            }
        }

        /// Starts the member `key` and returns the output for its value.
        fn key(&mut self, key: &'static str) -> &mut O {
            if !self.empty {
                self.out.plain(",");
            }
            self.empty = false;
            self.out.newline(self.indent + 2);
            self.out.key(key);
            self.out
        }

        fn str(&mut self, key: &'static str, value: &str) {
            self.key(key).string(value);
        }

        fn opt_str(&mut self, key: &'static str, value: Option<&str>) {
            match value {
                Some(v) => self.str(key, v),
                None => self.key(key).plain("null"),
            }
        }

        fn num(&mut self, key: &'static str, value: impl itoa::Integer) {
            self.key(key).integer(value);
        }

        fn bool(&mut self, key: &'static str, value: bool) {
            self.key(key).plain(if value { "true" } else { "false" });
        }

        /// An array member whose items `item` writes at the given indent.
        fn array<T>(&mut self, key: &'static str, items: &[T], item: impl Fn(&mut O, &T, usize)) {
            let indent = self.indent + 2;
            let out = self.key(key);
            array(out, indent, items, item);
        }

        fn close(self) {
            if !self.empty {
                self.out.newline(self.indent);
            }
            self.out.plain("}");
        }
    }

    pub(super) fn array<O: Out, T>(
        out: &mut O,
        indent: usize,
        items: &[T],
        item: impl Fn(&mut O, &T, usize),
    ) {
        if items.is_empty() {
            out.plain("[]");
            return;
        }
        out.plain("[");
        for (i, value) in items.iter().enumerate() {
            if i > 0 {
                out.plain(",");
            }
            out.newline(indent + 2);
            item(out, value, indent + 2);
        }
        out.newline(indent);
        out.plain("]");
    }

    pub(super) fn invalid<O: Out>(out: &mut O, invalid: &Invalid) {
        let mut o = Object::open(out, 0);
        o.str("status", invalid.status);
        o.array("errors", &invalid.errors, |out, e, indent| {
            let mut o = Object::open(out, indent);
            o.str("field", &e.field);
            o.str("message", &e.message);
            o.str("hint", &e.hint);
            o.close();
        });
        o.close();
    }

    pub(super) fn ok<O: Out>(out: &mut O, ok: &ReadOk) {
        ok_members(out, ok);
        match &ok.records {
            Records::Compact(records) => array(out, 2, records, compact),
            Records::Full(records) => array(out, 2, records, full),
        }
        close_ok(out);
    }

    /// The result object up to its `records` value: `{`, the other members, and
    /// `"records": `. The array and [`close_ok`] follow.
    pub(super) fn ok_members<O: Out>(out: &mut O, ok: &ReadOk) {
        let mut o = Object::open(out, 0);
        o.str("status", ok.status);
        o.str("project_key", &ok.project_key);
        o.str("session_ref", &ok.session_ref);
        {
            let out = o.key("line_range");
            let mut range = Object::open(out, 2);
            range.num("start", ok.line_range.start);
            range.num("end", ok.line_range.end);
            range.close();
        }
        o.str("mode", ok.mode);
        o.key("records");
    }

    pub(super) fn close_ok<O: Out>(out: &mut O) {
        out.newline(0);
        out.plain("}");
    }

    pub(super) fn compact<O: Out>(out: &mut O, r: &CompactRecord, indent: usize) {
        let mut o = Object::open(out, indent);
        o.num("line", r.line);
        o.str("record_type", &r.record_type);
        o.opt_str("role", r.role.as_deref());
        o.array("content_kinds", &r.content_kinds, |out, kind, _| {
            out.string(kind)
        });
        o.str("summary", &r.summary);
        o.opt_str("text_preview", r.text_preview.as_deref());
        o.array("tool_uses", &r.tool_uses, tool_use);
        o.array("tool_results", &r.tool_results, tool_result);
        o.num("raw_bytes", r.raw_bytes);
        o.str("raw_sha256", &r.raw_sha256);
        o.bool("truncated", r.truncated);
        o.close();
    }

    fn tool_use<O: Out>(out: &mut O, u: &ToolUse, indent: usize) {
        let mut o = Object::open(out, indent);
        o.str("name", &u.name);
        o.str("input_summary", &u.input_summary);
        o.bool("truncated", u.truncated);
        if let Some(h) = &u.handle {
            o.str("handle", h);
        }
        o.close();
    }

    fn tool_result<O: Out>(out: &mut O, t: &ToolResult, indent: usize) {
        let mut o = Object::open(out, indent);
        o.str("kind", t.kind);
        o.opt_str("status", t.status.as_deref());
        o.opt_str("file_path", t.file_path.as_deref());
        o.opt_str("command", t.command.as_deref());
        o.str("preview", &t.preview);
        o.num("raw_bytes", t.raw_bytes);
        o.bool("truncated", t.truncated);
        if let Some(h) = &t.handle {
            o.str("handle", h);
        }
        o.close();
    }

    pub(super) fn full<O: Out>(out: &mut O, r: &FullRecord, indent: usize) {
        full_open(out, r.line, indent);
        out.string(&r.raw_line);
        full_close(out, r.raw_bytes, &r.raw_sha256, indent);
    }

    /// A full record up to its `raw_line` value: what [`full`] writes before it, so that a
    /// long line's text can follow in parts.
    pub(super) fn full_open<O: Out>(out: &mut O, line: u64, indent: usize) {
        let mut o = Object::open(out, indent);
        o.num("line", line);
        o.key("raw_line");
    }

    /// A full record from after its `raw_line` value: what [`full`] writes after it.
    pub(super) fn full_close<O: Out>(out: &mut O, raw_bytes: u64, raw_sha256: &str, indent: usize) {
        let mut o = Object {
            out,
            indent,
            empty: false,
        };
        o.num("raw_bytes", raw_bytes);
        o.str("raw_sha256", raw_sha256);
        o.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::compact::{ToolResult, ToolUse};

    #[test]
    fn line_numbers_of_any_size_compare_and_print_exactly() {
        let n = |t: &str| LineNumber::parse(t).expect(t);
        let ascending = [
            "-100000000000000000000000000001",
            "-100000000000000000000000000000",
            "-9223372036854775809",
            "-9223372036854775808",
            "-1",
            "0",
            "1",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551616",
            "100000000000000000000000000000",
            "100000000000000000000000000001",
        ];
        for (i, a) in ascending.iter().enumerate() {
            assert_eq!(n(a).to_string(), *a);
            for (j, b) in ascending.iter().enumerate() {
                assert_eq!(n(a).cmp(&n(b)), i.cmp(&j), "{a} vs {b}");
            }
        }
        assert_eq!(n("-0"), LineNumber::from(0));
        assert_eq!(n("+007").to_string(), "7");
        assert_eq!(
            n("00009223372036854775808").to_string(),
            "9223372036854775808"
        );
        assert_eq!(n("-9223372036854775809").saturated(), i64::MIN);
        assert_eq!(n("9223372036854775808").saturated(), i64::MAX);
        for bad in ["", "-", "+", "1.0", "1e3", "--1", " 1", "١"] {
            assert_eq!(LineNumber::parse(bad), None, "{bad:?}");
        }
    }

    const AWKWARD: &str = "quote \" backslash \\ slash / newline \n tab \t cr \r bell \u{7} nul \u{0} us \u{1f} del \u{7f} é 😀 \u{2028}";

    fn compact_record(line: u64, text: &str) -> CompactRecord {
        CompactRecord {
            line,
            record_type: format!("user {text}"),
            role: line.is_multiple_of(2).then(|| text.to_owned()),
            content_kinds: ["text", "tool_use", "tool_result", "thinking"][..(line % 5) as usize]
                .to_vec(),
            summary: text.to_owned(),
            text_preview: (!line.is_multiple_of(3)).then(|| text.repeat(line as usize % 7)),
            tool_uses: (0..line % 3)
                .map(|i| ToolUse {
                    name: format!("T{i}{text}"),
                    input_summary: text.into(),
                    truncated: i == 1,
                    handle: (i == 1).then(|| format!("h{text}")),
                })
                .collect(),
            tool_results: (0..line % 4)
                .map(|i| ToolResult {
                    kind: "output",
                    status: (i == 0).then(|| "ok".into()),
                    file_path: (i == 1).then(|| text.into()),
                    command: (i == 2).then(|| text.into()),
                    preview: text.repeat(i as usize),
                    raw_bytes: u64::MAX - i,
                    truncated: i % 2 == 0,
                    handle: (i % 2 == 0).then(|| format!("h{i}")),
                })
                .collect(),
            raw_bytes: line * 1000,
            raw_sha256: "ab".repeat(32),
            truncated: line % 2 == 1,
            entries: None,
        }
    }

    fn ok(records: Records) -> ReadResult {
        ReadResult::Ok(ReadOk {
            status: "ok",
            project_key: format!("p{AWKWARD}"),
            session_ref: "S0001".into(),
            line_range: LineRange {
                start: 1,
                end: i64::MAX,
            },
            mode: "compact",
            records,
        })
    }

    #[test]
    fn pretty_json_is_serde_jsons_pretty_print() {
        let big = AWKWARD.repeat(40);
        let cases = [
            ok(Records::Compact(Vec::new())),
            ok(Records::Full(Vec::new())),
            ok(Records::Compact(vec![compact_record(1, AWKWARD)])),
            // Large enough to be printed on two threads, and with uneven record sizes.
            ok(Records::Compact(
                (1..=2000)
                    .map(|n| compact_record(n, if n % 10 == 0 { &big } else { AWKWARD }))
                    .collect(),
            )),
            ok(Records::Full(
                (1..=100)
                    .map(|n| FullRecord {
                        line: n,
                        raw_line: big.repeat(n as usize % 5 + 1),
                        raw_bytes: n,
                        raw_sha256: "0f".repeat(32),
                    })
                    .collect(),
            )),
            ok(Records::Full(vec![FullRecord {
                line: 7,
                raw_line: String::new(),
                raw_bytes: 0,
                raw_sha256: String::new(),
            }])),
            ReadResult::invalid("end_line", AWKWARD, "hint"),
        ];
        for case in &cases {
            let expect = serde_json::to_string_pretty(case).unwrap();
            let got = case.to_pretty_json();
            let at = got
                .bytes()
                .zip(expect.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(expect.len()));
            let near = |s: &str| {
                let end = (at + 40).min(s.len());
                String::from_utf8_lossy(&s.as_bytes()[at.saturating_sub(40)..end]).into_owned()
            };
            assert!(
                got == expect,
                "differs at byte {at}: got {:?}, expected {:?}",
                near(&got),
                near(&expect)
            );
            // The same printer writing the JSON string that holds the text.
            let mut content = pretty::JsonString(String::new());
            case.print(&mut content);
            let quoted = serde_json::to_string(&expect).unwrap();
            assert!(content.0 == quoted[1..quoted.len() - 1]);
        }
    }
}
