//! `read_session_lines`: a line range of one indexed session, compact or full.
//!
//! The store says where the requested lines are; the session file is then read at exactly
//! those bytes, in chunks of adjacent lines (one positioned read each, shared by two
//! threads), and every line is checked against its stored SHA-256. The cost depends on
//! the lines asked for, not on the session's size.

use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use crate::read::Located;
use crate::read::handle::{self, Handle};
use crate::session::{LineFailure, SessionFile, for_each_line};
use crate::store::{Store, StoreError};
use crate::util::lines::{self, LineEntry};
use crate::util::parallel;
use compact::{CompactRecord, EntryKind};

use super::*;

/// Answers one read from `store`; session files are found under `root`. The same
/// pipeline as [`read_session_pieces`], ending in records instead of text.
pub fn read_session_lines(store: &Store, root: &Path, req: &ReadRequest) -> ReadResult {
    let plan = match plan(store, root, req) {
        Planned::Read(plan) => plan,
        Planned::Answer(answer) => return answer,
    };
    let mut buf = Vec::new();
    let chunks = match plan.check_all(&mut buf) {
        Ok(chunks) => chunks,
        Err(failure) => return failure.answer(&req.session_ref),
    };
    let records = match req.mode {
        Mode::Compact => Records::Compact(
            plan.map_checked(&chunks, |line, entry, text| plan.compact(line, entry, text)),
        ),
        Mode::Full => Records::Full(plan.map_checked(&chunks, full_record)),
    };
    ReadResult::Ok(ReadOk::new(req, records))
}

/// [`read_session_lines`]'s result as prompt-diary prints it (JSON indented by two
/// spaces, byte-identical to `serde_json::to_string_pretty` of the result), handed to
/// `emit` in pieces, in order, each as soon as it is printed, so that a transport can send the first while the rest are made. Every
/// requested line is read and checked first (on two threads, chunk by chunk, each chunk
/// one positioned read of exactly its lines' bytes): a rejected read is one whole
/// answer, and no piece is ever taken back. Then the records are printed straight from
/// the lines, chunk by chunk on two threads, in `form`: one printer writes either the
/// text or, for a transport that sends it inside a JSON message, the text already
/// escaped as JSON string content. `emit` returns false when the rest is not wanted.
pub fn read_session_pieces(
    store: &Store,
    root: &Path,
    req: &ReadRequest,
    form: TextForm,
    emit: impl FnMut(String) -> bool,
) {
    match form {
        TextForm::Text => print_pieces::<String>(store, root, req, emit),
        TextForm::JsonString => print_pieces::<pretty::JsonString>(store, root, req, emit),
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
    let mut buf = Vec::new();
    let chunks = match plan.check_all(&mut buf) {
        Ok(chunks) => chunks,
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
    let all = parallel::for_each_ordered(
        chunks.len(),
        || (),
        |(), i| plan.print_checked::<O>(&chunks[i], req.mode),
        &mut emit,
    );
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

/// Lines are read and processed in chunks of about this many bytes (a longer line is a
/// chunk of its own): small enough that two threads share a read evenly and that memory
/// stays bounded by the longest line, not by the range.
const CHUNK_BYTES: u64 = 64 << 10;
/// Below this many bytes a read is one chunk, processed on the calling thread.
const PARALLEL_MIN_BYTES: u64 = 256 << 10;

impl Plan {
    /// The bytes from the first requested line's start to the last one's end.
    fn span(&self) -> u64 {
        match (self.entries.first(), self.entries.last()) {
            (Some(first), Some(last)) => (last.offset + last.len).saturating_sub(first.offset),
            _ => 0,
        }
    }

    /// Reads every requested line into `buf` and checks each against its entry, on two
    /// threads: chunk by chunk, each one positioned read of exactly its lines' bytes into
    /// its own part of `buf`. Of several failures, the first line's is reported.
    fn check_all<'b>(&self, buf: &'b mut Vec<u8>) -> Result<Vec<Checked<'b>>, LineFailure> {
        let file = &self.file;
        let base = self.entries.first().map_or(0, |e| e.offset);
        let chunks = self.chunks();
        // Where each chunk's bytes go in `buf` (the separators between chunks stay unread).
        let mut spans = Vec::with_capacity(chunks.len());
        for range in &chunks {
            let first_line = self.first_line + range.start as u64;
            let entries = &self.entries[range.clone()];
            let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
                return Err(LineFailure::Changed(first_line));
            };
            // Offsets come from the store; a corrupt one is a changed line, not a panic.
            let start = first.offset.checked_sub(base).map(usize::try_from);
            let len = (last.offset + last.len)
                .checked_sub(first.offset)
                .map(usize::try_from);
            let (Some(Ok(start)), Some(Ok(len))) = (start, len) else {
                return Err(LineFailure::Changed(first_line));
            };
            spans.push(start..start + len);
        }
        buf.clear();
        buf.resize(spans.last().map_or(0, |s| s.end), 0);
        let mut parts = Vec::with_capacity(chunks.len());
        let mut rest = buf.as_mut_slice();
        let mut at = 0;
        for span in &spans {
            let (_, tail) = std::mem::take(&mut rest)
                .split_at_mut_checked(span.start - at)
                .ok_or(LineFailure::Changed(self.first_line))?;
            let (part, tail) = tail
                .split_at_mut_checked(span.len())
                .ok_or(LineFailure::Changed(self.first_line))?;
            parts.push(Mutex::new(part));
            (rest, at) = (tail, span.end);
        }
        let checked = parallel::map_claimed(
            chunks.len(),
            || (),
            |(), i| {
                let entries = &self.entries[chunks[i].clone()];
                let first_line = self.first_line + chunks[i].start as u64;
                let mut part = parts[i].lock().unwrap_or_else(PoisonError::into_inner);
                let offset = entries.first().map_or(0, |e| e.offset);
                file.read_exact_at(&mut part, offset)
                    .map_err(LineFailure::Io)?;
                crate::session::check_lines(&part, entries, first_line)
            },
        );
        checked.into_iter().collect::<Result<(), _>>()?;
        drop(parts);
        let buf: &'b [u8] = buf;
        Ok(chunks
            .into_iter()
            .zip(spans)
            .map(|(entries, span)| Checked {
                first_line: self.first_line + entries.start as u64,
                entries,
                bytes: buf.get(span).unwrap_or_default(),
            })
            .collect())
    }

    /// Calls `f` with each line of a checked chunk: its number, entry and text.
    fn each_checked(&self, chunk: &Checked, mut f: impl FnMut(u64, &LineEntry, &str)) {
        let bytes = chunk.bytes;
        let entries = self.entries.get(chunk.entries.clone()).unwrap_or_default();
        // Valid UTF-8 (the common case) is checked once for the chunk. A line is decoded
        // alone, as Python decodes invalid bytes, when the chunk is not valid UTF-8 or the
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

    /// A checked chunk's lines printed as items of the records array, each on its own
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

    /// `make` applied to every line of the checked chunks, in order (chunks on two
    /// threads).
    fn map_checked<T: Send>(
        &self,
        chunks: &[Checked],
        make: impl Fn(u64, &LineEntry, &str) -> T + Sync,
    ) -> Vec<T> {
        let per_chunk = parallel::map_claimed(
            chunks.len(),
            || (),
            |(), i| {
                let mut out = Vec::new();
                self.each_checked(&chunks[i], |line, entry, text| {
                    out.push(make(line, entry, text));
                });
                out
            },
        );
        per_chunk.into_iter().flatten().collect()
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

    /// The entries split into runs of adjacent lines of about [`CHUNK_BYTES`] each; one
    /// run when the read is small.
    fn chunks(&self) -> Vec<Range<usize>> {
        let entries = &self.entries;
        if entries.is_empty() {
            return Vec::new();
        }
        if self.span() < PARALLEL_MIN_BYTES {
            let whole = 0..entries.len();
            return vec![whole];
        }
        let mut chunks = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for (i, entry) in entries.iter().enumerate() {
            bytes += entry.len;
            if bytes >= CHUNK_BYTES {
                chunks.push(start..i + 1);
                (start, bytes) = (i + 1, 0);
            }
        }
        if start < entries.len() {
            chunks.push(start..entries.len());
        }
        chunks
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
    use crate::util::pyjson::{write_string, write_string_content_twice};

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
        let mut o = Object::open(out, indent);
        o.num("line", r.line);
        o.str("raw_line", &r.raw_line);
        o.num("raw_bytes", r.raw_bytes);
        o.str("raw_sha256", &r.raw_sha256);
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
