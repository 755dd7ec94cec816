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

impl ReadResult {
    /// The result as prompt-diary prints a tool result: JSON indented by two spaces,
    /// byte-identical to `serde_json::to_string_pretty` of this value. Written directly
    /// rather than through serde (a 2000-line read prints over a megabyte), and on two
    /// threads when there are many records.
    pub fn to_pretty_json(&self) -> String {
        let mut out = String::new();
        match self {
            ReadResult::Ok(ok) => pretty::ok(&mut out, ok),
            ReadResult::Invalid(invalid) => pretty::invalid(&mut out, invalid),
        }
        out
    }
}

/// Pretty JSON writers for the read result's shapes. Each writes a value whose first line
/// continues the current one and whose inner lines are indented from `indent`.
mod pretty {
    use std::fmt::Write as _;

    use super::{CompactRecord, FullRecord, Invalid, ReadOk, Records};
    use crate::compact::{ToolResult, ToolUse};
    use crate::pyjson::write_string;

    /// Below this many bytes of text the records are printed on one thread.
    const PARALLEL_MIN_BYTES: usize = 256 << 10;

    /// An object being written: `{`, members, then `}` on its own line.
    struct Object<'o> {
        out: &'o mut String,
        indent: usize,
        empty: bool,
    }

    impl<'o> Object<'o> {
        fn open(out: &'o mut String, indent: usize) -> Self {
            out.push('{');
            Object {
                out,
                indent,
                empty: true,
            }
        }

        /// Starts the member `key` and returns the output for its value.
        fn key(&mut self, key: &str) -> &mut String {
            self.out.push_str(if self.empty { "\n" } else { ",\n" });
            self.empty = false;
            spaces(self.out, self.indent + 2);
            write_string(self.out, key);
            self.out.push_str(": ");
            self.out
        }

        fn str(&mut self, key: &str, value: &str) {
            write_string(self.key(key), value);
        }

        fn opt_str(&mut self, key: &str, value: Option<&str>) {
            match value {
                Some(v) => self.str(key, v),
                None => self.key(key).push_str("null"),
            }
        }

        fn num(&mut self, key: &str, value: impl std::fmt::Display) {
            let out = self.key(key);
            let _ = write!(out, "{value}");
        }

        fn bool(&mut self, key: &str, value: bool) {
            self.key(key).push_str(if value { "true" } else { "false" });
        }

        /// An array member whose items `item` writes at the given indent.
        fn array<T>(&mut self, key: &str, items: &[T], item: impl Fn(&mut String, &T, usize)) {
            let indent = self.indent + 2;
            let out = self.key(key);
            array(out, indent, items, item);
        }

        fn close(self) {
            if !self.empty {
                self.out.push('\n');
                spaces(self.out, self.indent);
            }
            self.out.push('}');
        }
    }

    fn spaces(out: &mut String, n: usize) {
        const SPACES: &str = "                                ";
        let mut n = n;
        while n > 0 {
            let k = n.min(SPACES.len());
            out.push_str(&SPACES[..k]);
            n -= k;
        }
    }

    fn array<T>(
        out: &mut String,
        indent: usize,
        items: &[T],
        item: impl Fn(&mut String, &T, usize),
    ) {
        if items.is_empty() {
            out.push_str("[]");
            return;
        }
        out.push('[');
        for (i, value) in items.iter().enumerate() {
            out.push_str(if i == 0 { "\n" } else { ",\n" });
            spaces(out, indent + 2);
            item(out, value, indent + 2);
        }
        out.push('\n');
        spaces(out, indent);
        out.push(']');
    }

    pub(super) fn invalid(out: &mut String, invalid: &Invalid) {
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

    pub(super) fn ok(out: &mut String, ok: &ReadOk) {
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
        let out = o.key("records");
        match &ok.records {
            Records::Compact(records) => records_in_parallel(out, records, compact_size, compact),
            Records::Full(records) => records_in_parallel(out, records, full_size, full),
        }
        o.close();
    }

    /// The `records` array at indent 2: its items printed in two halves of about equal
    /// size when there is enough to print, joined in order.
    fn records_in_parallel<T: Sync>(
        out: &mut String,
        records: &[T],
        size: fn(&T) -> usize,
        item: fn(&mut String, &T, usize),
    ) {
        let total: usize = records.iter().map(size).sum();
        out.reserve(total + total / 2);
        if total < PARALLEL_MIN_BYTES || records.len() < 2 {
            array(out, 2, records, item);
            return;
        }
        let mut acc = 0;
        let split = records
            .iter()
            .position(|r| {
                acc += size(r);
                acc * 2 >= total
            })
            .map_or(records.len() / 2, |i| (i + 1).clamp(1, records.len() - 1));
        let (left, right) = records.split_at(split);
        let print = |part: &[T], out: &mut String| {
            for value in part {
                out.push_str(",\n    ");
                item(out, value, 4);
            }
        };
        // Items after the first are each preceded by ",\n" and the indent; the first
        // item's comma is replaced by the array's opening.
        let second = std::thread::scope(|scope| {
            let other = scope.spawn(|| {
                let mut text = String::with_capacity(total);
                print(right, &mut text);
                text
            });
            let start = out.len();
            print(left, out);
            out.replace_range(start..start + 1, "[");
            other.join().ok()
        });
        match second {
            Some(text) => out.push_str(&text),
            // Printing does not panic; if it ever did, print the half here.
            None => print(right, out),
        }
        out.push_str("\n  ]");
    }

    /// About the number of bytes a record's strings take.
    fn compact_size(r: &CompactRecord) -> usize {
        r.text_preview.as_ref().map_or(0, String::len)
            + r.tool_uses
                .iter()
                .map(|u| u.input_summary.len())
                .sum::<usize>()
            + r.tool_results
                .iter()
                .map(|t| t.preview.len())
                .sum::<usize>()
            + 300
    }

    fn full_size(r: &FullRecord) -> usize {
        r.raw_line.len() + 150
    }

    fn compact(out: &mut String, r: &CompactRecord, indent: usize) {
        let mut o = Object::open(out, indent);
        o.num("line", r.line);
        o.str("record_type", &r.record_type);
        o.opt_str("role", r.role.as_deref());
        o.array("content_kinds", &r.content_kinds, |out, kind, _| {
            write_string(out, kind)
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

    fn tool_use(out: &mut String, u: &ToolUse, indent: usize) {
        let mut o = Object::open(out, indent);
        o.str("name", &u.name);
        o.str("input_summary", &u.input_summary);
        o.bool("truncated", u.truncated);
        o.close();
    }

    fn tool_result(out: &mut String, t: &ToolResult, indent: usize) {
        let mut o = Object::open(out, indent);
        o.str("kind", t.kind);
        o.opt_str("status", t.status.as_deref());
        o.opt_str("file_path", t.file_path.as_deref());
        o.opt_str("command", t.command.as_deref());
        o.str("preview", &t.preview);
        o.num("raw_bytes", t.raw_bytes);
        o.bool("truncated", t.truncated);
        o.close();
    }

    fn full(out: &mut String, r: &FullRecord, indent: usize) {
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
    use crate::compact::{ToolResult, ToolUse};

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
                })
                .collect(),
            raw_bytes: line * 1000,
            raw_sha256: "ab".repeat(32),
            truncated: line % 2 == 1,
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
        }
    }
}
