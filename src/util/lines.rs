//! Physical lines, numbered exactly as prompt-diary numbers them.
//!
//! prepare, the index and every citation count lines of
//! `bytes.decode("utf-8", errors="replace").splitlines()`: eleven line boundaries
//! (`\n`, `\r\n`, `\r`, VT, FF, FS, GS, RS, NEL, LS, PS), no empty line after a final
//! boundary, invalid UTF-8 replaced by U+FFFD. Rust's `str::lines` is not that.
//!
//! Every boundary is a complete, valid UTF-8 character and lossy decoding never merges
//! bytes across a valid character, so boundaries can be found in the raw bytes and each
//! decoded line is the lossy decoding of one contiguous byte range of the file. That is
//! what lets the store keep `(offset, len)` per line and answer a read with positioned
//! reads of exactly the requested bytes.

use std::borrow::Cow;
use std::io::{self, Read};

use sha2::{Digest, Sha256};

/// One physical line of a file: where its bytes are and what its decoded text hashes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LineEntry {
    /// Byte offset of the line's first byte in the file.
    pub offset: u64,
    /// Length in file bytes, without the terminator.
    pub len: u64,
    /// UTF-8 length of the decoded line (differs from `len` only where bytes were invalid).
    pub decoded_len: u64,
    /// SHA-256 of the decoded line's UTF-8 bytes.
    pub sha256: [u8; 32],
}

/// Finds the next line boundary in `bytes` at or after `from`: `(position, length)`.
///
/// `bytes` must not end inside a multi-byte character that the caller has not seen whole
/// yet, and a final `\r` is reported as a lone CR: callers streaming a file hold back a
/// trailing `\r` and incomplete sequence until more bytes (or the end) arrive.
pub fn find_boundary(bytes: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from;
    while i < bytes.len() {
        i = skip_plain(bytes, i);
        let Some(&b) = bytes.get(i) else { break };
        match b {
            b'\n' | 0x0B | 0x0C | 0x1C..=0x1E => return Some((i, 1)),
            b'\r' => {
                let len = if bytes.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                return Some((i, len));
            }
            0xC2 if bytes.get(i + 1) == Some(&0x85) => return Some((i, 2)),
            0xE2 if bytes.get(i + 1) == Some(&0x80)
                && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)) =>
            {
                return Some((i, 3));
            }
            _ => i += 1,
        }
    }
    None
}

/// Skips bytes that cannot start a boundary, eight at a time.
///
/// A boundary starts with a byte below 0x20, with `C2 85` or with `E2 80 A8`/`E2 80 A9`.
/// JSON lines hold almost none of them, but typographic text is full of other `E2 80 xx`
/// characters (quotes, dashes), so all three bytes are tested at once: three overlapping
/// word loads, one per byte position. The test may stop early (the caller checks exactly)
/// but never skips a boundary.
fn skip_plain(bytes: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(w)
    };
    while i + 10 <= bytes.len() {
        let (w0, w1, w2) = (word(i), word(i + 1), word(i + 2));
        // Bytes < 0x20: subtracting 0x20 borrows into the high bit only for them (and for
        // bytes >= 0x80, which `!w0` masks out).
        let control = w0.wrapping_sub(ONES * 0x20) & !w0 & HIGHS;
        let nel = zero(w0 ^ (ONES * 0xC2)) & zero(w1 ^ (ONES * 0x85));
        let separator =
            zero(w0 ^ (ONES * 0xE2)) & zero(w1 ^ (ONES * 0x80)) & zero((w2 | ONES) ^ (ONES * 0xA9));
        if control | nel | separator != 0 {
            return i;
        }
        i += 8;
    }
    i
}

/// Python `str.splitlines()` over text that is already decoded.
pub fn splitlines(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let (end, next) = match find_boundary(bytes, start) {
            Some((pos, len)) => (pos, pos + len),
            None => (bytes.len(), bytes.len()),
        };
        // Boundaries are whole characters, so both cuts are on char boundaries.
        let line = text.get(start..end).unwrap_or_default();
        start = next;
        Some(line)
    })
}

/// The decoded text of a line's bytes (invalid UTF-8 becomes U+FFFD, as in Python).
pub fn decode(bytes: &[u8]) -> Cow<'_, str> {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// A line's text with the digest and length of that text, decoding once: what a read
/// checks against the entry import stored ([`hash_line`] gives the same digest).
pub fn decode_and_hash(bytes: &[u8]) -> (Cow<'_, str>, [u8; 32], u64) {
    let text = decode(bytes);
    let digest = Sha256::digest(text.as_bytes()).into();
    let len = text.len() as u64;
    (text, digest, len)
}

/// Whether a line's bytes decode to the text `entry` describes, as
/// [`decode_and_hash`] would tell, but without checking UTF-8 first: the bytes are
/// hashed as they are, and a match means they are that text (import stored the digest
/// of the decoded text, and bytes equal to a text are its UTF-8). Only when that fails
/// are they decoded and hashed again, which finds lines that held invalid UTF-8.
pub fn matches(bytes: &[u8], entry: &LineEntry) -> bool {
    let raw = bytes.len() as u64 == entry.decoded_len
        && <[u8; 32]>::from(Sha256::digest(bytes)) == entry.sha256;
    raw || {
        let (_, digest, len) = decode_and_hash(bytes);
        len == entry.decoded_len && digest == entry.sha256
    }
}

/// Feeds the lossy decoding of `bytes` into `hasher`; returns the decoded length.
fn hash_decoded(hasher: &mut Sha256, bytes: &[u8]) -> u64 {
    // The common case, valid UTF-8, checked at SIMD speed (std's check is the bottleneck
    // on non-ASCII text).
    if simdutf8::basic::from_utf8(bytes).is_ok() {
        hasher.update(bytes);
        return bytes.len() as u64;
    }
    let mut decoded = 0;
    for chunk in bytes.utf8_chunks() {
        hasher.update(chunk.valid().as_bytes());
        decoded += chunk.valid().len() as u64;
        if !chunk.invalid().is_empty() {
            hasher.update("\u{FFFD}".as_bytes());
            decoded += 3;
        }
    }
    decoded
}

/// The digest and decoded length of a line fed in parts, each cut where
/// [`lossless_cut`] allows: the same as [`hash_line`] of the whole.
#[derive(Default, Clone)]
pub struct LineHasher {
    hasher: Sha256,
    decoded: u64,
}

impl LineHasher {
    pub fn update(&mut self, part: &[u8]) {
        self.decoded += hash_decoded(&mut self.hasher, part);
    }

    /// The SHA-256 of what was fed so far (decoded), the hasher left as it is: two
    /// hashers fed the same first part then different second parts tell them apart by
    /// it, as SHA-256 tells the two prefixes apart.
    pub fn so_far(&self) -> [u8; 32] {
        self.hasher.clone().finalize().into()
    }

    /// Whether the line fed matches `entry`'s digest and decoded length.
    pub fn matches(self, entry: &LineEntry) -> bool {
        self.decoded == entry.decoded_len
            && <[u8; 32]>::from(self.hasher.finalize()) == entry.sha256
    }
}

/// Where to cut `bytes` at or a few bytes before `at` (`4 <= at < bytes.len()`) so that the
/// lossy decoding of the two parts, one after the other, is that of the whole: before a
/// byte that is not a UTF-8 continuation byte (a character, or an invalid sequence, never
/// runs on past one), or at `at` when the four bytes up to it are all continuations (no
/// sequence is longer than a lead byte and three of them). Always more than `at - 4`.
pub fn lossless_cut(bytes: &[u8], at: usize) -> usize {
    let continuation = |b: u8| b & 0xC0 == 0x80;
    (at.saturating_sub(3)..=at)
        .rev()
        .find(|&p| bytes.get(p).is_some_and(|&b| !continuation(b)))
        .unwrap_or(at)
}

/// SHA-256 and decoded length of one whole line's bytes.
pub fn hash_line(bytes: &[u8]) -> ([u8; 32], u64) {
    let mut hasher = Sha256::new();
    let len = hash_decoded(&mut hasher, bytes);
    (hasher.finalize().into(), len)
}

/// Lowercase hex of a digest.
pub fn hex(digest: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0F)] as char);
    }
    out
}

/// How many trailing bytes of `bytes` must wait for more input before they can be split:
/// a final `\r` (it may be the first half of `\r\n`) or an incomplete UTF-8 sequence (it
/// may complete into a NEL, LS or PS, or decode differently once whole).
pub fn held_back(bytes: &[u8]) -> usize {
    match bytes.last() {
        None => return 0,
        Some(b'\r') => return 1,
        Some(_) => {}
    }
    for k in 1..=bytes.len().min(3) {
        let i = bytes.len() - k;
        let b = bytes[i];
        if b < 0x80 {
            return 0;
        }
        if b >= 0xC0 {
            // The last lead byte: hold it back only if what follows is a valid prefix.
            return match std::str::from_utf8(&bytes[i..]) {
                Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => k,
                _ => 0,
            };
        }
    }
    0
}

/// Totals of one indexing pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileSummary {
    pub bytes: u64,
    pub lines: u64,
}

/// Read buffer size: large enough that per-chunk work is amortised, small enough that
/// memory stays flat whatever the session's size.
const CHUNK: usize = 4 << 20;

/// The line being assembled across chunk boundaries.
struct OpenLine {
    offset: u64,
    len: u64,
    decoded_len: u64,
    hasher: Sha256,
}

impl OpenLine {
    fn new(offset: u64) -> Self {
        OpenLine {
            offset,
            len: 0,
            decoded_len: 0,
            hasher: Sha256::new(),
        }
    }

    fn extend(&mut self, bytes: &[u8]) {
        self.len += bytes.len() as u64;
        self.decoded_len += hash_decoded(&mut self.hasher, bytes);
    }

    fn close(self) -> LineEntry {
        LineEntry {
            offset: self.offset,
            len: self.len,
            decoded_len: self.decoded_len,
            sha256: self.hasher.finalize().into(),
        }
    }
}

/// Streams `reader` once and reports every physical line, in order, to `on_line`.
/// `base` is the file offset of the reader's first byte, which must start a line.
///
/// Memory stays at one chunk however long the file or its lines are. `on_progress`
/// receives the number of bytes consumed since its previous call.
pub fn index_lines<R: Read, E: From<io::Error>>(
    mut reader: R,
    base: u64,
    mut on_line: impl FnMut(LineEntry) -> Result<(), E>,
    mut on_progress: impl FnMut(u64),
) -> Result<FileSummary, E> {
    let mut buf = vec![0u8; CHUNK];
    let mut filled = 0; // bytes of `buf` holding data (held-back bytes first)
    let mut at_offset = base; // file offset of buf[0]
    let mut open = OpenLine::new(base);
    let mut summary = FileSummary::default();
    loop {
        let read = loop {
            match reader.read(&mut buf[filled..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        };
        filled += read;
        let eof = read == 0;
        let usable = if eof {
            filled
        } else {
            filled - held_back(&buf[..filled])
        };
        let data = &buf[..usable];

        let mut start = 0;
        while let Some((pos, len)) = find_boundary(data, start) {
            open.extend(&data[start..pos]);
            start = pos + len;
            let finished = std::mem::replace(&mut open, OpenLine::new(at_offset + start as u64));
            on_line(finished.close())?;
            summary.lines += 1;
        }
        open.extend(&data[start..]);

        at_offset += usable as u64;
        summary.bytes += usable as u64;
        on_progress(usable as u64);
        if eof {
            break;
        }
        buf.copy_within(usable..filled, 0);
        filled -= usable;
    }
    if open.len > 0 {
        on_line(open.close())?;
        summary.lines += 1;
    }
    Ok(summary)
}

/// Files are indexed in segments of about this size, two at a time.
const SEGMENT: u64 = 16 << 20;
/// How many segments may wait, indexed, for their turn to be reported.
const AHEAD: usize = 4;

/// Sees a file's bytes as [`index_file_observed`] reads them, while they are in cache.
pub trait Observer: Send {
    /// `bytes` are the file's bytes at `offset`. One observer sees one segment, in order
    /// and without gaps; a segment starts right after a line boundary (or at 0) and ends
    /// right after one (or at the end).
    fn observe(&mut self, offset: u64, bytes: &[u8]);
}

impl Observer for () {
    fn observe(&mut self, _: u64, _: &[u8]) {}
}

/// Indexes the first `len` bytes of `file`, reporting lines in order, using two threads,
/// and shows every byte read to an observer (one per segment, made by `observer`);
/// returns the observers in file order.
///
/// Line boundaries can be found from any byte offset (see the module docs), so the file is
/// cut into segments that each start right after a boundary and are indexed
/// independently; lines are then reported in file order. A file without boundaries (one
/// huge line) is one segment. Memory stays bounded by `AHEAD` segments of entries.
pub fn index_file_observed<E: From<io::Error> + Send, O: Observer>(
    file: &std::fs::File,
    len: u64,
    observer: &(dyn Fn() -> O + Sync),
    on_line: impl FnMut(LineEntry) -> Result<(), E>,
    on_progress: impl FnMut(u64),
) -> Result<(FileSummary, Vec<O>), E> {
    index_segmented(file, len, SEGMENT, observer, on_line, on_progress)
}

fn index_segmented<E: From<io::Error> + Send, O: Observer>(
    file: &std::fs::File,
    len: u64,
    segment: u64,
    observer: &(dyn Fn() -> O + Sync),
    mut on_line: impl FnMut(LineEntry) -> Result<(), E>,
    mut on_progress: impl FnMut(u64),
) -> Result<(FileSummary, Vec<O>), E> {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Condvar, Mutex, mpsc};

    let cuts = segment_starts(file, len, segment)?;
    let segments: Vec<(u64, u64)> = cuts
        .iter()
        .zip(cuts.iter().skip(1).chain(std::iter::once(&len)))
        .map(|(a, b)| (*a, *b))
        .collect();
    let next_segment = AtomicUsize::new(0);
    let progress = AtomicU64::new(0);
    // The lowest segment not yet reported; workers wait while too far ahead of it.
    let reported = (Mutex::new(0usize), Condvar::new());
    let stop = std::sync::atomic::AtomicBool::new(false);
    type Indexed<O> = io::Result<(Vec<LineEntry>, O)>;
    let (tx, rx) = mpsc::channel::<(usize, Indexed<O>)>();

    std::thread::scope(|scope| {
        for _ in 0..2 {
            let tx = tx.clone();
            let (segments, next_segment, progress, reported, stop) =
                (&segments, &next_segment, &progress, &reported, &stop);
            scope.spawn(move || {
                loop {
                    let k = next_segment.fetch_add(1, Ordering::Relaxed);
                    let Some(&(start, end)) = segments.get(k) else {
                        break;
                    };
                    {
                        let (lock, cvar) = reported;
                        let mut low = lock.lock().unwrap_or_else(|e| e.into_inner());
                        while k >= *low + AHEAD && !stop.load(Ordering::Relaxed) {
                            low = cvar.wait(low).unwrap_or_else(|e| e.into_inner());
                        }
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let mut entries = Vec::new();
                    let mut seen = observer();
                    let reader = SegmentReader {
                        file,
                        pos: start,
                        end,
                        observer: &mut seen,
                    };
                    let result = index_lines::<_, io::Error>(
                        reader,
                        start,
                        |e| {
                            entries.push(e);
                            Ok(())
                        },
                        |n| {
                            progress.fetch_add(n, Ordering::Relaxed);
                        },
                    );
                    if tx.send((k, result.map(|_| (entries, seen)))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);

        // Report segments in order as they arrive.
        let mut waiting = std::collections::BTreeMap::new();
        let mut summary = FileSummary::default();
        let mut observers = Vec::with_capacity(segments.len());
        let mut next = 0;
        let outcome = (|| {
            for (k, result) in &rx {
                waiting.insert(k, result);
                while let Some(result) = waiting.remove(&next) {
                    let (entries, seen) = result?;
                    observers.push(seen);
                    for entry in entries {
                        on_line(entry)?;
                        summary.lines += 1;
                    }
                    next += 1;
                    let (lock, cvar) = &reported;
                    *lock.lock().unwrap_or_else(|e| e.into_inner()) = next;
                    cvar.notify_all();
                    on_progress(progress.swap(0, Ordering::Relaxed));
                }
            }
            summary.bytes = len;
            Ok((summary, std::mem::take(&mut observers)))
        })();
        if outcome.is_err() {
            stop.store(true, Ordering::Relaxed);
            reported.1.notify_all();
        }
        outcome
    })
}

/// Offsets where segments start: 0, then just after the first boundary at or after each
/// multiple of [`SEGMENT`].
fn segment_starts(file: &std::fs::File, len: u64, segment: u64) -> io::Result<Vec<u64>> {
    use std::os::unix::fs::FileExt;
    let mut starts = vec![0];
    let mut window = vec![0u8; 64 << 10];
    let mut cut = segment.max(2);
    while cut < len {
        // Scan from two bytes before the cut, so that a CRLF or multi-byte boundary that
        // straddles it is seen whole. Any boundary found from any offset is a real one.
        let mut at = cut - 2;
        let found = loop {
            let n = file.read_at(&mut window, at)?;
            let bytes = &window[..n];
            let eof = at + n as u64 >= len;
            let usable = if eof { n } else { n - held_back(bytes) };
            match find_boundary(&bytes[..usable], 0) {
                Some((pos, blen)) => break Some(at + (pos + blen) as u64),
                None if eof || n == 0 => break None,
                None => at += usable.max(1) as u64,
            }
        };
        match found {
            Some(start) if start < len => {
                starts.push(start);
                cut = (start + segment).max(cut + segment);
            }
            _ => break,
        }
    }
    Ok(starts)
}

/// `Read` over `[pos, end)` of a file, by positioned reads (no shared cursor), showing
/// what it reads to an observer.
struct SegmentReader<'a, O> {
    file: &'a std::fs::File,
    pos: u64,
    end: u64,
    observer: &'a mut O,
}

impl<O: Observer> Read for SegmentReader<'_, O> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let want = usize::try_from(self.end - self.pos)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.observer.observe(self.pos, &buf[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_cut_where_lossless_cut_says_decodes_and_hashes_as_the_whole() {
        let alphabet: [&[u8]; 9] = [
            b"a",
            b"\xC3\xA9",
            b"\xE2\x82\xAC",
            b"\xF0\x9F\x98\x80",
            b"\x80",
            b"\xE2\x82",
            b"\xF0\x9F",
            b"\xFF",
            b"\xED\xA0\x80",
        ];
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for _ in 0..2000 {
            let mut line = Vec::new();
            while line.len() < 40 {
                line.extend_from_slice(alphabet[next() % alphabet.len()]);
            }
            let at = 4 + next() % (line.len() - 5);
            let cut = lossless_cut(&line, at);
            assert!(cut > at - 4 && cut <= at, "{cut} for {at}");
            let (a, b) = line.split_at(cut);
            assert_eq!(
                format!("{}{}", decode(a), decode(b)),
                decode(&line),
                "{line:x?} at {cut}"
            );
            let mut hasher = LineHasher::default();
            hasher.update(a);
            hasher.update(b);
            let (sha256, decoded_len) = hash_line(&line);
            let entry = LineEntry {
                offset: 0,
                len: line.len() as u64,
                decoded_len,
                sha256,
            };
            assert!(hasher.matches(&entry), "{line:x?} at {cut}");
        }
    }

    fn py_lines(bytes: &[u8]) -> Vec<String> {
        splitlines(&decode(bytes)).map(str::to_owned).collect()
    }

    fn indexed(bytes: &[u8], chunk_reads: usize) -> Vec<(String, LineEntry)> {
        // A reader that returns at most `chunk_reads` bytes per call exercises held-back tails.
        struct Dribble<'a>(&'a [u8], usize);
        impl Read for Dribble<'_> {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(out.len());
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut lines = Vec::new();
        index_lines::<_, io::Error>(
            Dribble(bytes, chunk_reads),
            0,
            |e| {
                let raw = &bytes[e.offset as usize..(e.offset + e.len) as usize];
                lines.push((decode(raw).into_owned(), e));
                Ok(())
            },
            |_| {},
        )
        .expect("in-memory reads do not fail");
        lines
    }

    /// The same file indexed in segments of every small size.
    fn segmented(bytes: &[u8]) {
        let mut file = tempfile::tempfile().expect("temp file");
        std::io::Write::write_all(&mut file, bytes).expect("write");
        let whole: Vec<LineEntry> = indexed(bytes, 1 << 20)
            .into_iter()
            .map(|(_, e)| e)
            .collect();
        for segment in 2..12 {
            let mut got = Vec::new();
            let (summary, _) = index_segmented::<io::Error, ()>(
                &file,
                bytes.len() as u64,
                segment,
                &|| (),
                |e| {
                    got.push(e);
                    Ok(())
                },
                |_| {},
            )
            .expect("indexes");
            assert_eq!(got, whole, "{bytes:?} in segments of {segment}");
            assert_eq!(summary.lines, whole.len() as u64);
        }
    }

    fn check(input: &[u8], expect: &[&str]) {
        assert_eq!(py_lines(input), expect, "splitlines of {input:?}");
        segmented(input);
        for step in [1, 2, 3, 7, 1 << 20] {
            let got = indexed(input, step);
            let texts: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
            assert_eq!(
                texts, expect,
                "index_lines of {input:?} read {step} bytes at a time"
            );
            for (text, entry) in &got {
                let (sha, len) = hash_line(text.as_bytes());
                assert_eq!((entry.sha256, entry.decoded_len), (sha, len), "{text:?}");
            }
        }
    }

    #[test]
    fn python_splitlines_semantics() {
        check(b"", &[]);
        check(b"\n", &[""]);
        check(b"a\nb\n", &["a", "b"]);
        check(b"a\nb", &["a", "b"]);
        check(b"a\n\nb", &["a", "", "b"]);
        check(b"a\r\nb", &["a", "b"]);
        check(b"a\r\rb", &["a", "", "b"]);
        check(b"a\n\rb", &["a", "", "b"]);
        check(b"a\r", &["a"]);
        check(b"a\r\n\n", &["a", ""]);
        check("x\u{85}y".as_bytes(), &["x", "y"]);
        check("x\u{2028}".as_bytes(), &["x"]);
        check("p\u{2029}q".as_bytes(), &["p", "q"]);
        check(
            b"a\x0bb\x0cc\x1cd\x1de\x1ef\x1fg\tg",
            &["a", "b", "c", "d", "e", "f\x1fg\tg"],
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_not_split() {
        // A lone 0x85 is not NEL; C2 followed by a non-continuation is one replacement.
        check(b"a\x85b", &["a\u{FFFD}b"]);
        check(b"a\xc2\nb", &["a\u{FFFD}", "b"]);
        check(b"a\xe2\x80\nb", &["a\u{FFFD}", "b"]);
        check(b"\xe2\x80\xa8", &[""]);
        check(b"\xff\xfe", &["\u{FFFD}\u{FFFD}"]);
        check(b"ok\xf0\x9f\x98", &["ok\u{FFFD}"]);
        check(b"\xf0\x9f\x98\x80!", &["\u{1F600}!"]);
    }

    #[test]
    fn eleven_lines_from_every_terminator_and_invalid_utf8() {
        // CRLF, CR, LF, U+2028, FF, U+001C, VT and U+0085 as terminators, no final newline,
        // invalid UTF-8: eleven lines, two replacement characters.
        let bytes = b"{\"a\":1}\r\n{\"b\":2}\r{\"c\":3}\n\n{\"d\":\"x\xe2\x80\xa8y\"}\n{\"e\":\"\xff\xfe\"}\x0c{\"f\":1}\x1c{\"g\":1}\x0b{\"h\":\"\xc2\x85\"}";
        let got = indexed(bytes, 5);
        let summary: Vec<(&str, u64)> = got
            .iter()
            .map(|(t, e)| (t.as_str(), e.decoded_len))
            .collect();
        assert_eq!(
            summary,
            [
                ("{\"a\":1}", 7),
                ("{\"b\":2}", 7),
                ("{\"c\":3}", 7),
                ("", 0),
                ("{\"d\":\"x", 7),
                ("y\"}", 3),
                ("{\"e\":\"\u{FFFD}\u{FFFD}\"}", 14),
                ("{\"f\":1}", 7),
                ("{\"g\":1}", 7),
                ("{\"h\":\"", 6),
                ("\"}", 2),
            ]
        );
        assert_eq!(
            got[6].1.len, 10,
            "file bytes of the line with invalid UTF-8"
        );
    }

    #[test]
    fn offsets_point_at_file_bytes() {
        let bytes = b"ab\r\ncd\xe2\x80\xa9ef";
        let got = indexed(bytes, 3);
        let spans: Vec<(u64, u64)> = got.iter().map(|(_, e)| (e.offset, e.len)).collect();
        assert_eq!(spans, [(0, 2), (4, 2), (9, 2)]);
    }

    #[test]
    fn many_segments_report_lines_in_file_order() {
        let mut bytes = Vec::new();
        for i in 0..4_000 {
            let end: &[u8] = match i % 4 {
                0 => b"\n",
                1 => b"\r\n",
                2 => "\u{2028}".as_bytes(),
                _ => b"\r",
            };
            bytes.extend_from_slice(
                format!("{{\"n\":{i},\"pad\":\"{}\"}}", "é".repeat(i % 50)).as_bytes(),
            );
            bytes.extend_from_slice(end);
        }
        let mut file = tempfile::tempfile().expect("temp file");
        std::io::Write::write_all(&mut file, &bytes).expect("write");
        let whole: Vec<LineEntry> = indexed(&bytes, 1 << 20)
            .into_iter()
            .map(|(_, e)| e)
            .collect();
        let mut got = Vec::new();
        index_segmented::<io::Error, ()>(
            &file,
            bytes.len() as u64,
            997,
            &|| (),
            |e| {
                got.push(e);
                Ok(())
            },
            |_| {},
        )
        .expect("indexes");
        assert_eq!(got.len(), 4_000);
        assert_eq!(got, whole);
    }

    /// Observers see every byte once, in order, one segment each.
    #[test]
    fn observers_see_every_byte_once_in_order() {
        struct Seen(Vec<(u64, Vec<u8>)>);
        impl Observer for Seen {
            fn observe(&mut self, offset: u64, bytes: &[u8]) {
                self.0.push((offset, bytes.to_vec()));
            }
        }
        let mut bytes = Vec::new();
        for i in 0..3_000 {
            bytes.extend_from_slice(format!("{{\"n\":{i}}}\r\n").as_bytes());
        }
        let mut file = tempfile::tempfile().expect("temp file");
        std::io::Write::write_all(&mut file, &bytes).expect("write");
        for segment in [7, 100, 997, 1 << 20] {
            let (summary, observers) = index_segmented::<io::Error, Seen>(
                &file,
                bytes.len() as u64,
                segment,
                &|| Seen(Vec::new()),
                |_| Ok(()),
                |_| {},
            )
            .expect("indexes");
            assert_eq!(summary.lines, 3_000);
            let mut all = Vec::new();
            for seen in observers {
                for (offset, piece) in seen.0 {
                    assert_eq!(offset, all.len() as u64, "segment size {segment}");
                    all.extend_from_slice(&piece);
                }
            }
            assert_eq!(all, bytes, "segment size {segment}");
        }
    }

    #[test]
    fn a_read_decodes_and_hashes_as_import_hashed() {
        for bytes in [
            &b"{\"a\": 1}"[..],
            "caf\u{e9} \u{1f642}".as_bytes(),
            b"bad \xff\xfe utf-8 \xe2\x82",
            b"",
        ] {
            let (text, digest, len) = decode_and_hash(bytes);
            assert_eq!((digest, len), hash_line(bytes), "{bytes:?}");
            assert_eq!(text, String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn a_line_matches_the_entry_of_its_bytes_only() {
        let lines: [&[u8]; 4] = [
            b"{\"a\": 1}",
            "caf\u{e9} \u{1f642}".as_bytes(),
            b"bad \xff\xfe utf-8 \xe2\x82",
            b"",
        ];
        for (i, bytes) in lines.iter().enumerate() {
            let (sha256, decoded_len) = hash_line(bytes);
            let entry = LineEntry {
                offset: 0,
                len: bytes.len() as u64,
                decoded_len,
                sha256,
            };
            for (j, other) in lines.iter().enumerate() {
                assert_eq!(matches(other, &entry), i == j, "{bytes:?} vs {other:?}");
            }
            // Bytes that are the decoded text of invalid UTF-8 are that text.
            let decoded = String::from_utf8_lossy(bytes);
            assert!(matches(decoded.as_bytes(), &entry), "{bytes:?}");
        }
    }

    #[test]
    fn hex_is_lowercase() {
        assert_eq!(
            hex(&hash_line(b"").0),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
