//! Finding the citations of one session file when it is indexed.
//!
//! Parsing every line would cost more than indexing it, so the file's raw bytes are
//! searched (memchr's `memmem`) for what a citation needs, piece by piece as the indexer
//! reads them ([`Searcher`], a [`lines::Observer`]), while they are still in cache:
//! - `**Evidence**:`, which every marker citation contains;
//! - `\"evidence\"` or `\"citations\"`, the key of a JSON evidence block as it appears
//!   inside a JSON string.
//!
//! Only the lines holding one of them (found in the line table just written) are read
//! again, parsed and extracted. JSON writers escape only
//! `"`, `\`, control characters and (optionally) non-ASCII characters, none of which is
//! in these needles, so a line without them carries no citation. (A line that spelled
//! an ASCII letter of the marker as a `\u00XX` escape would be passed over.)
//!
//! The project directory a citation is checked in is, for a Claude Code line, the line's
//! own top-level `cwd`; for a Codex line, the `cwd` of the nearest earlier
//! `turn_context`, else of the session's `session_meta`. No other `"cwd"` key counts (a
//! Codex `exec_command_begin` event names the directory of one command, not the
//! project). So the search also notes where the JSON strings `"turn_context"` and
//! `"session_meta"` are (only the lines holding one can be such a record), and those
//! lines are read back for a Codex session that cites something.

use std::io;
#[cfg(test)]
use std::os::unix::fs::FileExt;

use memchr::memmem::Finder;

use crate::citations::{self, Options, record};
use crate::session::SessionFile;
use crate::store::citations::{CitationRecord, StoredCheck, StoredCitation};
use crate::util::lines::{self, LineEntry};
use crate::util::pyjson::{self, Node};
use crate::workspace::Session;

use super::check::Checker;

const CITE_NEEDLES: [&[u8]; 3] = [b"**Evidence**:", br#"\"evidence\""#, br#"\"citations\""#];
/// The `type` values of the Codex records that name the project directory, as JSON
/// strings (a quote inside a JSON string is escaped, so these bytes are a string token).
const CONTEXT_NEEDLES: [&[u8]; 2] = [br#""turn_context""#, br#""session_meta""#];
/// The first two needles share this; one search finds both, then the bytes around each
/// hit tell which (if either) it is.
const VIDENCE: &[u8] = b"vidence";
/// Where `VIDENCE` sits in the first two needles (both start 3 bytes before it).
const VIDENCE_AT: usize = 3;
/// Bytes searched per read.
#[cfg(test)]
const CHUNK: usize = 256 << 10;
/// Longest line read back to be parsed: import's memory stays bounded whatever a session
/// holds. A longer line (a huge tool output that happens to hold a needle) is passed
/// over; no agent writes an assistant message of this size.
pub const MAX_LINE_BYTES: u64 = 32 << 20;

/// Where a file may cite something (byte offsets of needle hits), and where it may name
/// its project directory (offsets of `CONTEXT_NEEDLES`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Prescan {
    /// Sorted, one per hit.
    hits: Vec<u64>,
    /// Sorted, one per context needle.
    contexts: Vec<u64>,
}

impl Prescan {
    pub fn is_empty(&self) -> bool {
        self.hits.is_empty()
    }

    /// Every offset whose line must be found: hits and context needles, sorted, once.
    fn wanted(&self) -> Vec<u64> {
        if self.hits.is_empty() {
            return Vec::new();
        }
        let mut out: Vec<u64> = self.hits.iter().chain(&self.contexts).copied().collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Longest needle, less one: the bytes kept from one piece to find needles that
/// straddle it and the next.
const OVERLAP: usize = 14;

/// Searches the bytes of one stretch of a file (a segment, as the indexer reads it) for
/// the needles, piece by piece as they are read.
pub struct Searcher {
    vidence: Finder<'static>,
    citations: Finder<'static>,
    contexts: [Finder<'static>; 2],
    hits: Vec<u64>,
    context_hits: Vec<u64>,
    /// The last bytes seen (at most [`OVERLAP`]) and their offset.
    carry: Vec<u8>,
    carry_at: u64,
}

impl Default for Searcher {
    fn default() -> Self {
        Searcher {
            vidence: Finder::new(VIDENCE),
            citations: Finder::new(CITE_NEEDLES[2]),
            contexts: CONTEXT_NEEDLES.map(Finder::new),
            hits: Vec::new(),
            context_hits: Vec::new(),
            carry: Vec::with_capacity(2 * OVERLAP),
            carry_at: 0,
        }
    }
}

impl lines::Observer for Searcher {
    fn observe(&mut self, offset: u64, bytes: &[u8]) {
        if self.carry_at + self.carry.len() as u64 != offset {
            self.carry.clear();
        }
        if !self.carry.is_empty() {
            // Needles that start in the carried bytes and end in these.
            let split = self.carry.len();
            let mut window = std::mem::take(&mut self.carry);
            window.extend_from_slice(&bytes[..bytes.len().min(OVERLAP)]);
            self.search(&window, self.carry_at, Some(split));
            window.truncate(split);
            self.carry = window;
        }
        self.search(bytes, offset, None);
        // The last OVERLAP bytes of everything seen: they hold the start of any needle
        // not yet complete.
        self.carry
            .extend_from_slice(&bytes[bytes.len().saturating_sub(OVERLAP)..]);
        let cut = self.carry.len().saturating_sub(OVERLAP);
        self.carry.drain(..cut);
        self.carry_at = offset + bytes.len() as u64 - self.carry.len() as u64;
    }
}

impl Searcher {
    /// Records the needles in `data` (at file offset `base`); with `straddle`, only those
    /// that start before it and end after it.
    fn search(&mut self, data: &[u8], base: u64, straddle: Option<usize>) {
        let keep = |start: usize, len: usize| straddle.is_none_or(|s| start < s && start + len > s);
        let mut found: Vec<u64> = self
            .vidence
            .find_iter(data)
            .filter_map(|i| i.checked_sub(VIDENCE_AT))
            .filter_map(|start| {
                CITE_NEEDLES[..2]
                    .iter()
                    .find(|n| data[start..].starts_with(n))
                    .map(|n| (start, n.len()))
            })
            .chain(
                self.citations
                    .find_iter(data)
                    .map(|i| (i, CITE_NEEDLES[2].len())),
            )
            .filter(|&(start, len)| keep(start, len))
            .map(|(start, _)| base + start as u64)
            .collect();
        found.sort_unstable();
        found.dedup();
        self.hits.extend(found);
        let mut contexts: Vec<u64> = self
            .contexts
            .iter()
            .zip(CONTEXT_NEEDLES)
            .flat_map(|(finder, needle)| {
                finder
                    .find_iter(data)
                    .filter(move |&i| keep(i, needle.len()))
            })
            .map(|i| base + i as u64)
            .collect();
        contexts.sort_unstable();
        self.context_hits.extend(contexts);
    }
}

/// The hits of a file's stretches, in file order.
pub fn merge(searchers: Vec<Searcher>) -> Prescan {
    let mut out = Prescan::default();
    for searcher in searchers {
        out.hits.extend(searcher.hits);
        out.contexts.extend(searcher.context_hits);
    }
    // Stretches come in file order; sorted again in case they did not.
    out.hits.sort_unstable();
    out.hits.dedup();
    out.contexts.sort_unstable();
    out.contexts.dedup();
    out
}

/// Searches the first `len` bytes of `file` for the needles, reading it in pieces.
#[cfg(test)]
pub fn prescan(file: &std::fs::File, len: u64) -> io::Result<Prescan> {
    let mut searcher = Searcher::default();
    let mut buf = vec![0u8; CHUNK];
    let mut at = 0u64;
    while at < len {
        let want = usize::try_from(len - at).unwrap_or(usize::MAX).min(CHUNK);
        let n = match file.read_at(&mut buf[..want], at) {
            Ok(0) => break, // the file is shorter than its stamp said
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        lines::Observer::observe(&mut searcher, at, &buf[..n]);
        at += n as u64;
    }
    Ok(merge(vec![searcher]))
}

/// Collects, as a file's lines are reported in order, the lines that hold the wanted
/// offsets.
pub struct Capture {
    wanted: Vec<u64>,
    next: usize,
    line: u64,
    /// `(line number, entry)` of each line holding a wanted offset, in order.
    found: Vec<(u64, LineEntry)>,
}

impl Capture {
    pub fn new(prescan: &Prescan) -> Capture {
        Capture {
            wanted: prescan.wanted(),
            next: 0,
            line: 0,
            found: Vec::new(),
        }
    }

    /// Receives the next line of the file.
    pub fn push(&mut self, entry: &LineEntry) {
        self.line += 1;
        let end = entry.offset + entry.len;
        let mut holds = false;
        while let Some(&offset) = self.wanted.get(self.next) {
            if offset >= end {
                break;
            }
            holds |= offset >= entry.offset;
            self.next += 1;
        }
        if holds {
            self.found.push((self.line, *entry));
        }
    }

    fn line_of(&self, offset: u64) -> Option<(u64, LineEntry)> {
        let i = self
            .found
            .partition_point(|(_, e)| e.offset + e.len <= offset);
        self.found
            .get(i)
            .filter(|(_, e)| e.offset <= offset)
            .copied()
    }
}

/// The citations of one session, from the lines the prescan and capture found, checked
/// against each citing line's working directory. Lines are read again from `file` (the
/// session file as import opened and hashed it).
pub fn citations(
    file: &SessionFile,
    session: &Session,
    prescan: &Prescan,
    capture: &Capture,
    checker: &mut Checker,
    options: &Options,
) -> io::Result<Vec<CitationRecord>> {
    let mut out = Vec::new();
    let mut done_line = 0;
    let mut contexts: Option<Vec<Context>> = None;
    for &hit in &prescan.hits {
        let Some((line, entry)) = capture.line_of(hit) else {
            continue;
        };
        if line == done_line {
            continue;
        }
        done_line = line;
        let Some(bytes) = read_line(file, &entry)? else {
            continue;
        };
        let text = lines::decode(&bytes);
        let Some(node) = record::object_of_line(&text) else {
            continue;
        };
        let texts = record::assistant_texts(&session.source, &node);
        if texts.iter().all(|t| t.echo) {
            continue;
        }
        let cwd = if session.source == "codex" {
            if contexts.is_none() {
                contexts = Some(codex_contexts(file, prescan, capture)?);
            }
            codex_cwd(contexts.as_deref().unwrap_or_default(), line)
        } else {
            own_cwd(&node)
        };
        let turn_ref = turn_of(session, line);
        for message in texts.iter().filter(|t| !t.echo) {
            for found in citations::extract(&message.text, options) {
                let c = found.citation;
                let checked = checker.check(&c.kind, &c.reference, cwd.as_deref());
                out.push(CitationRecord {
                    line,
                    citation: StoredCitation {
                        turn_ref: turn_ref.clone(),
                        content_index: message.content_index.map(|i| i as u64),
                        offset: found.offset as u64,
                        len: found.len as u64,
                        kind: c.kind,
                        reference: c.reference,
                        context: c.context,
                        check: StoredCheck {
                            status: checked.status.as_str().to_owned(),
                            cwd: cwd.clone(),
                            sha256: checked.sha256,
                            file_lines: checked.file_lines,
                            detail: checked.detail,
                        },
                    },
                });
            }
        }
    }
    Ok(out)
}

/// A line's bytes; `None` for a line longer than [`MAX_LINE_BYTES`].
fn read_line(file: &SessionFile, entry: &LineEntry) -> io::Result<Option<Vec<u8>>> {
    if entry.len > MAX_LINE_BYTES {
        return Ok(None);
    }
    let mut bytes = vec![0u8; usize::try_from(entry.len).unwrap_or(usize::MAX)];
    file.read_exact_at(&mut bytes, entry.offset)?;
    Ok(Some(bytes))
}

/// A non-blank string `cwd` of `node`.
fn cwd_of(node: &Node<'_>) -> Option<String> {
    node.get("cwd")
        .and_then(Node::as_str)
        .filter(|s| !s.is_blank())
        .map(|s| s.decode().into_owned())
}

/// A Claude Code line's working directory: its own top-level `cwd`.
pub fn own_cwd(node: &Node<'_>) -> Option<String> {
    cwd_of(node)
}

/// A Codex record that names the project directory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Context {
    line: u64,
    /// `turn_context` (else `session_meta`).
    turn: bool,
    /// Its payload's `cwd`.
    cwd: Option<String>,
}

/// The Codex `turn_context` and `session_meta` records of a file, in line order: the
/// lines holding a context needle, read back, parsed, and kept when their top-level
/// `type` is one of the two.
fn codex_contexts(
    file: &SessionFile,
    prescan: &Prescan,
    capture: &Capture,
) -> io::Result<Vec<Context>> {
    let mut out: Vec<Context> = Vec::new();
    for &at in &prescan.contexts {
        let Some((line, entry)) = capture.line_of(at) else {
            continue;
        };
        if out.last().is_some_and(|c| c.line == line) {
            continue;
        }
        let Some(bytes) = read_line(file, &entry)? else {
            continue;
        };
        let text = lines::decode(&bytes);
        let Ok(node) = pyjson::parse_borrowed(&text) else {
            continue;
        };
        if !node.is_object() {
            continue;
        }
        let kind = node.get("type").and_then(Node::as_str).map(|s| s.decode());
        let turn = match kind.as_deref() {
            Some("turn_context") => true,
            Some("session_meta") => false,
            _ => continue,
        };
        let cwd = node
            .get("payload")
            .filter(|p| p.is_object())
            .and_then(cwd_of);
        out.push(Context { line, turn, cwd });
    }
    Ok(out)
}

/// A Codex line's working directory: the `cwd` of the nearest `turn_context` before it,
/// else of the session's (first) `session_meta`.
fn codex_cwd(contexts: &[Context], line: u64) -> Option<String> {
    let before = contexts.partition_point(|c| c.line < line);
    let turn = contexts[..before].iter().rev().find(|c| c.turn);
    turn.and_then(|c| c.cwd.clone()).or_else(|| {
        contexts
            .iter()
            .find(|c| !c.turn)
            .and_then(|c| c.cwd.clone())
    })
}

/// The turn whose span holds `line`, first in `turns[]` order.
pub fn turn_of(session: &Session, line: u64) -> Option<String> {
    let line = i64::try_from(line).ok()?;
    session
        .turns
        .iter()
        .find(|t| t.span.start <= line && line <= t.span.end)
        .map(|t| t.turn_ref.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(bytes: &[u8]) -> Vec<u64> {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, bytes).unwrap();
        prescan(&file, bytes.len() as u64).unwrap().hits
    }

    #[test]
    fn the_shared_part_is_where_it_is_said_to_be() {
        for needle in &CITE_NEEDLES[..2] {
            assert_eq!(&needle[VIDENCE_AT..VIDENCE_AT + VIDENCE.len()], VIDENCE);
        }
        assert_eq!(
            scan(b"vidence**: \\\"Evidence\\\" *Evidence**:"),
            [] as [u64; 0]
        );
    }

    #[test]
    fn needles_across_chunk_edges_are_found_once() {
        for pad in [
            CHUNK - 20,
            CHUNK - 13,
            CHUNK - 12,
            CHUNK - 1,
            CHUNK,
            CHUNK + 3,
        ] {
            let mut bytes = vec![b'x'; pad];
            bytes.extend_from_slice(b"**Evidence**: a.py:1 \\\"evidence\\\"");
            bytes.extend(std::iter::repeat_n(b'y', 50));
            let hits = scan(&bytes);
            assert_eq!(hits, [pad as u64, pad as u64 + 21], "pad {pad}");
        }
        assert!(scan(b"Evidence: a.py:1 evidence citations").is_empty());
    }

    /// Python's `ensure_ascii`: every non-ASCII character as `\uXXXX` escapes.
    fn ensure_ascii(line: &str) -> String {
        let mut out = String::new();
        for c in line.chars() {
            if c.is_ascii() {
                out.push(c);
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
        out
    }

    const PIECES: &[&str] = &[
        "**Evidence**:",
        "**Evidence**: ",
        "**Evidence** :",
        "Evidence: ",
        "src/a.py:1",
        "tests/t.py::x - PASS",
        "pytest ",
        "[t](u)",
        "```bash\n",
        "\n```",
        "```json\n",
        "{",
        "}",
        "\"evidence\": [",
        "\"citations\": [",
        "\"Evidence\": [",
        "{\"type\": \"file\", \"reference\": \"a.py:1\"}",
        "]",
        "\n",
        "\r\n",
        " ",
        "\u{e9}",
        "\u{1F600}",
        "\"",
        "\\",
    ];

    proptest::proptest! {
        /// A line the byte search passes over carries no citation, whichever way a JSON
        /// writer escaped it.
        #[test]
        fn lines_without_needles_cite_nothing(
            picks in proptest::collection::vec(0..PIECES.len(), 0..24),
            ascii in proptest::bool::ANY,
            codex in proptest::bool::ANY,
        ) {
            let text: String = picks.iter().map(|&i| PIECES[i]).collect();
            let (source, value) = if codex {
                ("codex", serde_json::json!({"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}}))
            } else {
                ("claude-code", serde_json::json!({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}))
            };
            let mut line = value.to_string();
            if ascii {
                line = ensure_ascii(&line);
            }
            let hit = CITE_NEEDLES
                .iter()
                .any(|n| memchr::memmem::find(line.as_bytes(), n).is_some());
            let found: Vec<_> = record::assistant_texts_of_line(source, &line)
                .iter()
                .flat_map(|t| citations::extract(&t.text, &Options::default()))
                .collect();
            proptest::prop_assert!(hit || found.is_empty(), "{line}");
        }
    }

    /// Pieces of every small size find what one whole search finds.
    #[test]
    fn pieces_of_any_size_find_the_same() {
        let text = br#"{"type":"session_meta"}
x**Evidence**: a.py:1 \"evidence\" \"citations\" "turn_context" **Evidence**:**Evidence**:
\"evidence\"\"citations\"**Evidence \"turn_context\""#;
        let whole = {
            let mut s = Searcher::default();
            lines::Observer::observe(&mut s, 0, text);
            merge(vec![s])
        };
        assert_eq!(whole.hits.len(), 7, "{whole:?}");
        assert_eq!(whole.contexts.len(), 2, "{whole:?}");
        for size in 1..30 {
            let mut s = Searcher::default();
            for (i, piece) in text.chunks(size).enumerate() {
                lines::Observer::observe(&mut s, (i * size) as u64, piece);
            }
            assert_eq!(merge(vec![s]), whole, "pieces of {size}");
        }
        // Two stretches, searched apart: the same hits.
        let (a, b) = text.split_at(40);
        let mut first = Searcher::default();
        lines::Observer::observe(&mut first, 0, a);
        let mut second = Searcher::default();
        lines::Observer::observe(&mut second, 40, b);
        assert_eq!(merge(vec![first, second]).hits, whole.hits);
    }

    fn context(line: u64, turn: bool, cwd: &str) -> Context {
        Context {
            line,
            turn,
            cwd: Some(cwd.to_owned()).filter(|c| !c.is_empty()),
        }
    }

    #[test]
    fn codex_cwd_is_the_turn_context_before_else_the_session_meta() {
        let contexts = [
            context(1, false, "/meta"),
            context(3, true, "/t1"),
            context(9, true, ""),
        ];
        assert_eq!(codex_cwd(&contexts, 2).as_deref(), Some("/meta"));
        assert_eq!(codex_cwd(&contexts, 4).as_deref(), Some("/t1"));
        // The line's own turn context names no cwd: the session's, not an older turn's.
        assert_eq!(codex_cwd(&contexts, 10).as_deref(), Some("/meta"));
        assert_eq!(codex_cwd(&contexts[1..2], 2), None);
        assert_eq!(codex_cwd(&[], 2), None);
    }
}

#[cfg(test)]
mod timing {
    /// A session file, opened as session files are.
    fn open(path: &std::path::Path) -> crate::session::SessionFile {
        let (dir, name) = (path.parent().unwrap(), path.file_name().unwrap());
        crate::session::open(dir, &name.to_string_lossy()).unwrap()
    }

    /// Manual: `PRESCAN_DIR=... cargo test --release --lib prescan_timing -- --ignored --nocapture`.
    #[test]
    #[ignore = "manual timing"]
    fn prescan_timing() {
        let Some(dir) = crate::util::test_hooks::prescan_dir() else {
            return;
        };
        let mut files = Vec::new();
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    files.push(p);
                }
            }
        }
        for round in 0..3 {
            let t = std::time::Instant::now();
            let mut hits = 0;
            let mut bytes = 0;
            for f in &files {
                let file = open(f);
                let len = file.size();
                bytes += len;
                hits += super::prescan(file.file(), len).unwrap().hits.len();
            }
            let prescan = t.elapsed();
            let t = std::time::Instant::now();
            let mut buf = vec![0u8; 4 << 20];
            for f in &files {
                use std::os::unix::fs::FileExt;
                let file = open(f);
                let len = file.size();
                let mut at = 0;
                while at < len {
                    at += file.file().read_at(&mut buf, at).unwrap() as u64;
                }
            }
            let read = t.elapsed();
            eprintln!(
                "round {round}: {bytes} bytes, {hits} hits, prescan {prescan:?}, read only {read:?}"
            );
            for needle in [
                &b"vidence"[..],
                br#"\"citations\""#,
                b"itations",
                br#""cwd""#,
                b"**Evidence**:",
            ] {
                let finder = memchr::memmem::Finder::new(needle);
                let t = std::time::Instant::now();
                let mut n = 0;
                for f in &files {
                    use std::os::unix::fs::FileExt;
                    let file = open(f);
                    let len = file.size();
                    let mut at = 0;
                    while at < len {
                        let k = file.file().read_at(&mut buf[..super::CHUNK], at).unwrap();
                        n += finder.find_iter(&buf[..k]).count();
                        at += k as u64;
                    }
                }
                eprintln!(
                    "  {:?}: {n} hits, read and search {:?}",
                    String::from_utf8_lossy(needle),
                    t.elapsed()
                );
            }
        }
    }
}
