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
//! The search also notes where `"cwd"` keys are, so that a citing line without a `cwd`
//! of its own (a Codex message) gets the one of the nearest earlier line that has one
//! (a Codex `turn_context` or `session_meta`).

use std::io;
use std::os::unix::fs::FileExt;

use memchr::memmem::Finder;

use crate::citations::{self, Options, record};
use crate::lines::{self, LineEntry};
use crate::pyjson::{self, Node};
use crate::session::SessionFile;
use crate::store::citations::{CitationRecord, StoredCheck, StoredCitation};
use crate::workspace::Session;

use super::check::Checker;

const CITE_NEEDLES: [&[u8]; 3] = [b"**Evidence**:", br#"\"evidence\""#, br#"\"citations\""#];
const CWD_NEEDLE: &[u8] = br#""cwd""#;
/// The first two needles share this; one search finds both, then the bytes around each
/// hit tell which (if either) it is.
const VIDENCE: &[u8] = b"vidence";
/// Where `VIDENCE` sits in the first two needles (both start 3 bytes before it).
const VIDENCE_AT: usize = 3;
/// Bytes searched per read.
const CHUNK: usize = 256 << 10;
/// Longest line read back to be parsed: import's memory stays bounded whatever a session
/// holds. A longer line (a huge tool output that happens to hold a needle) is passed
/// over; no agent writes an assistant message of this size.
pub const MAX_LINE_BYTES: u64 = 32 << 20;

/// Where a file may cite something: byte offsets of needle hits, each with the offset of
/// the last `"cwd"` key before it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Prescan {
    /// Sorted, one per hit.
    hits: Vec<(u64, Option<u64>)>,
}

impl Prescan {
    pub fn is_empty(&self) -> bool {
        self.hits.is_empty()
    }

    /// Every offset whose line must be found: hits and their `cwd` lines, sorted, once.
    fn wanted(&self) -> Vec<u64> {
        let mut out: Vec<u64> = self
            .hits
            .iter()
            .flat_map(|(hit, cwd)| std::iter::once(*hit).chain(*cwd))
            .collect();
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
    cwd: Finder<'static>,
    /// Hits, each with the last `"cwd"` before it in this stretch.
    hits: Vec<(u64, Option<u64>)>,
    last_cwd: Option<u64>,
    /// The last bytes seen (at most [`OVERLAP`]) and their offset.
    carry: Vec<u8>,
    carry_at: u64,
}

impl Default for Searcher {
    fn default() -> Self {
        Searcher {
            vidence: Finder::new(VIDENCE),
            citations: Finder::new(CITE_NEEDLES[2]),
            cwd: Finder::new(CWD_NEEDLE),
            hits: Vec::new(),
            last_cwd: None,
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
        let cwds = self
            .cwd
            .find_iter(data)
            .filter(|&i| keep(i, CWD_NEEDLE.len()))
            .map(|i| base + i as u64);
        if found.is_empty() {
            // Only the last `"cwd"` can matter to a later hit. (A forward search: the
            // reverse one has no vectorised prefilter and is several times slower.)
            if let Some(c) = cwds.last() {
                self.last_cwd = Some(c);
            }
            return;
        }
        let cwds: Vec<u64> = cwds.collect();
        for hit in found {
            let before = cwds.partition_point(|&c| c < hit);
            let cwd = before.checked_sub(1).map(|i| cwds[i]).or(self.last_cwd);
            self.hits.push((hit, cwd));
        }
        if let Some(&c) = cwds.last() {
            self.last_cwd = Some(c);
        }
    }
}

/// The hits of a file's stretches, in file order: a hit with no `"cwd"` before it in its
/// stretch gets the last one of the stretches before.
pub fn merge(searchers: Vec<Searcher>) -> Prescan {
    let mut out = Prescan::default();
    let mut last_cwd = None;
    for searcher in searchers {
        out.hits.extend(
            searcher
                .hits
                .into_iter()
                .map(|(hit, cwd)| (hit, cwd.or(last_cwd))),
        );
        if searcher.last_cwd.is_some() {
            last_cwd = searcher.last_cwd;
        }
    }
    out
}

/// Searches the first `len` bytes of `file` for the needles, reading it in pieces.
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
) -> io::Result<Vec<CitationRecord>> {
    let mut out = Vec::new();
    let mut done_line = 0;
    for &(hit, cwd_hit) in &prescan.hits {
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
        let Ok(node) = pyjson::parse_borrowed(&text) else {
            continue;
        };
        if !node.is_object() {
            continue;
        }
        let texts = record::assistant_texts(&session.source, &node);
        if texts.iter().all(|t| t.echo) {
            continue;
        }
        let cwd = match line_cwd(&node) {
            Some(cwd) => Some(cwd),
            None => match cwd_hit.and_then(|c| capture.line_of(c)) {
                Some((cwd_line, cwd_entry)) if cwd_line != line => read_line(file, &cwd_entry)?
                    .and_then(|bytes| {
                        let text = lines::decode(&bytes);
                        pyjson::parse_borrowed(&text)
                            .ok()
                            .and_then(|n| line_cwd(&n))
                    }),
                _ => None,
            },
        };
        let turn_ref = turn_of(session, line);
        for message in texts.iter().filter(|t| !t.echo) {
            for found in citations::extract(&message.text, &Options::default()) {
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

/// A line's working directory: its own `cwd` (Claude Code), or its payload's (Codex
/// `session_meta`, `turn_context`), when a non-blank string.
pub fn line_cwd(node: &Node<'_>) -> Option<String> {
    let own = node.get("cwd");
    let payload = node
        .get("payload")
        .filter(|p| p.is_object())
        .and_then(|p| p.get("cwd"));
    own.into_iter()
        .chain(payload)
        .filter_map(Node::as_str)
        .find(|s| !s.is_blank())
        .map(|s| s.decode().into_owned())
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
        prescan(&file, bytes.len() as u64)
            .unwrap()
            .hits
            .iter()
            .map(|h| h.0)
            .collect()
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
        let text = br#"{"cwd":"/a"}
x**Evidence**: a.py:1 \"evidence\" \"citations\" "cwd" **Evidence**:**Evidence**:
\"evidence\"\"citations\"**Evidence"#;
        let whole = {
            let mut s = Searcher::default();
            lines::Observer::observe(&mut s, 0, text);
            merge(vec![s])
        };
        assert_eq!(whole.hits.len(), 7, "{whole:?}");
        for size in 1..30 {
            let mut s = Searcher::default();
            for (i, piece) in text.chunks(size).enumerate() {
                lines::Observer::observe(&mut s, (i * size) as u64, piece);
            }
            assert_eq!(merge(vec![s]), whole, "pieces of {size}");
        }
        // Two stretches: the second's first hit takes the first's last cwd.
        let (a, b) = text.split_at(20);
        let mut first = Searcher::default();
        lines::Observer::observe(&mut first, 0, a);
        let mut second = Searcher::default();
        lines::Observer::observe(&mut second, 20, b);
        assert_eq!(merge(vec![first, second]).hits[0].1, Some(1));
    }

    #[test]
    fn cwd_hits_are_the_last_before() {
        let bytes = br#"{"cwd":"/a"}
{"x":"**Evidence**: a.py:1"}
{"cwd":"/b","t":"**Evidence**: b.py:1"}
"#;
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, bytes).unwrap();
        let p = prescan(&file, bytes.len() as u64).unwrap();
        assert_eq!(p.hits.len(), 2);
        assert_eq!(p.hits[0].1, Some(1));
        let second_cwd = bytes.windows(5).rposition(|w| w == b"\"cwd\"").unwrap() as u64;
        assert_eq!(p.hits[1].1, Some(second_cwd));
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
        let Some(dir) = std::env::var_os("PRESCAN_DIR") else {
            return;
        };
        let mut files = Vec::new();
        let mut stack = vec![std::path::PathBuf::from(dir)];
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
