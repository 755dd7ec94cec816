//! `view`: one self-contained HTML page of the day's evidence, written from one read
//! snapshot of the store: the day at a glance (every turn's coverage), each evidence
//! chain beside the session lines it cites, the work items and daily report linked to
//! the turns they cite, and the agents' own citations with their checks.
//!
//! Every string on the page comes from sessions, cards, reports or the index and is
//! untrusted, so markup is made only by `maud`'s `html!` macro: the markup is Rust code
//! the compiler checks, every `(value)` spliced into it is HTML-escaped (attributes
//! included), and raw markup needs an explicit `PreEscaped`, used only for the page's own
//! constant CSS and script. (maud rather than askama: no template files beside the code,
//! escaping that cannot be switched off by a file extension, and one small proc-macro
//! dependency.)
//!
//! Nothing is fetched: the CSS and the script are inline, and the page's
//! Content-Security-Policy allows exactly those two (by their SHA-256) and nothing else.
//!
//! Bounded: the page is streamed to a temp file (one part at a time) and renamed into
//! place. Only cited lines are read, at most [`LINES_PER_RANGE`] per cited range, each
//! through the session module (positioned reads, checked against the stored SHA-256);
//! shown text is cut at [`TEXT_CUT`] bytes per line and [`FIELD_CUT`] per field.

mod gather;
mod lines;
mod page;

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::SystemTime;

use crate::store::{Store, StoreError};

/// The most lines shown for one cited range (the rest are counted, not read).
pub const LINES_PER_RANGE: u64 = 40;
/// A line's full text is shown up to this many bytes; its byte count says how long it is.
pub const TEXT_CUT: usize = 8 * 1024;
/// Every other shown text field (summaries, previews, citation references) is cut here.
pub const FIELD_CUT: usize = 2 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write the page: {0}")]
    Io(#[from] io::Error),
    #[error("the store holds no imported workspace: run `evidence-store import` first")]
    NotImported,
}

/// What a written page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Written {
    pub bytes: u64,
    pub projects: usize,
    pub sessions: usize,
    pub turns: usize,
    pub chains: usize,
    pub lines_shown: u64,
    pub citations: usize,
}

/// Writes the page of the store's current state to `<dir>/<name>`, atomically and
/// streaming; `now` is the moment the page says it shows.
pub fn write_page(
    store: &Store,
    root: &Path,
    dir: &Path,
    name: &str,
    now: SystemTime,
) -> Result<Written, ViewError> {
    let reader = store.reader()?;
    let day = gather::gather(&reader, store.shown())?;
    let mut written = Written::default();
    crate::util::fsutil::atomic_write_with(dir, name, |file| {
        let mut out = Counting {
            inner: BufWriter::with_capacity(1 << 16, file),
            bytes: 0,
        };
        page::render(&mut out, &reader, root, &day, now, &mut written)?;
        out.inner.flush()?;
        written.bytes = out.bytes;
        Ok::<(), ViewError>(())
    })?;
    Ok(written)
}

/// A writer that counts what passes through it.
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// An HTML id (and URL fragment) made of `parts`: letters, digits, `_` and `-` are kept,
/// every other byte is `.` and two hex digits, and parts are joined by `:`. Distinct
/// parts give distinct ids, and an id never needs escaping in a link.
pub fn anchor(parts: &[&str]) -> String {
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        for b in part.bytes() {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
                out.push(char::from(b));
            } else {
                out.push_str(&format!(".{b:02x}"));
            }
        }
    }
    out
}

/// `text` cut to at most `max` bytes at a character boundary, and whether it was cut.
pub fn cut(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let at = crate::util::text::floor_char_boundary(text, max);
    (&text[..at], true)
}

/// `2026-01-15 09:30:00 UTC` for `t`.
pub fn utc_text(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let secs = i64::try_from(secs).unwrap_or(i64::MAX);
    let (y, m, d) = crate::util::calendar::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Standard base64 of `bytes` (for the Content-Security-Policy hashes).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_keep_plain_names_and_encode_the_rest() {
        assert_eq!(
            anchor(&["turn", "Demo-0123", "S0001", "T0001"]),
            "turn:Demo-0123:S0001:T0001"
        );
        assert_eq!(anchor(&["a\"b", "<x>:"]), "a.22b:.3cx.3e.3a");
    }

    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain}");
        }
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        assert_eq!(cut("héllo", 2), ("h", true));
        assert_eq!(cut("hi", 2), ("hi", false));
    }

    #[test]
    fn utc_text_of_a_known_moment() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_768_469_400);
        assert_eq!(utc_text(t), "2026-01-15 09:30:00 UTC");
    }
}
