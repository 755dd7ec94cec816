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
//! - [`for_each_line`] and [`SessionFile::read_lines`] check every line read against its
//!   stored SHA-256.

mod open;

use std::ops::Range;
use std::path::Path;

pub use open::{OpenError, ReadBackError, SessionFile, Sessions, open, open_imported};

use crate::util::lines::{self, LineEntry};

/// Why stored lines could not be read from their file.
#[derive(Debug)]
pub enum LineFailure {
    Io(std::io::Error),
    /// The 1-based line whose bytes no longer hash to the stored digest (or lie past the
    /// bytes read).
    Changed(u64),
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

/// The decoded text of each entry's line in the session file `rel` under `root`, which
/// must be the file `record` describes ([`open_imported`]), each line
/// checked against its stored digest.
pub fn read_texts(
    root: &Path,
    rel: &str,
    record: &crate::store::FileRecord,
    entries: &[LineEntry],
) -> Result<Vec<String>, ReadBackError> {
    let file = open_imported(root, rel, record)?;
    entries.iter().map(|entry| file.read_text(entry)).collect()
}

/// An I/O error as Python's `OSError.strerror` prints it: the description alone.
pub fn strerror(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strerror_drops_the_os_error_number() {
        let err = std::io::Error::from_raw_os_error(2);
        assert_eq!(strerror(&err), "No such file or directory");
    }
}
