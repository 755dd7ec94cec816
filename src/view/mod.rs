//! `view`: the HTML page of the day's evidence, written from one read snapshot of the
//! store. It opens with the day's story (the report title, each project's summary and
//! work items, engagement and team learning), then the coverage grid (every turn, whether
//! it has its chain, its first user message as the tooltip), then the chains, each
//! collapsed until opened, beside the session lines it cites, then the agents' own
//! citations; the state read is named in the footer.
//!
//! Every string on the page comes from sessions, cards, reports or the index and is
//! untrusted, so markup is made only by `maud`'s `html!` macro (every spliced value is
//! HTML-escaped, attributes included; raw markup needs an explicit `PreEscaped`, used only
//! for the page's constant CSS and script and for tags whose every byte this module
//! chose), and each text is spliced as [`text::T`]: in its own `<bdi>`, with control and
//! direction characters shown as visible escapes. (maud rather than askama: no template
//! files beside the code, escaping that cannot be switched off by a file extension, and
//! one small proc-macro dependency.)
//!
//! Nothing is fetched: the CSS and the script are inline, and the page's
//! Content-Security-Policy allows exactly those two (by their SHA-256) and nothing else.
//!
//! Bounded by design. Documents are read one part at a time ([`docs`]); each chain is
//! drawn and written before the next is read, and shows at most [`CHAIN_LINES_MAX`] lines
//! and [`CHAIN_BYTES_MAX`] bytes; each cited line's text is in a page once, and every
//! range that cites it links to it. A day that would not fit in [`ONE_PAGE_MAX`] bytes
//! becomes a first page (the story and the grid, at most [`FIRST_PAGE_MAX`]) and one page
//! per session (at most [`PAGE_MAX`]), all self-contained and linked. Every page is
//! streamed to a temp file and renamed into place; a stop asked for by a signal
//! ([`crate::util::stop`]) ends the work at the next chain, leaving the old pages.

mod chains;
mod docs;
mod gather;
mod lines;
mod page;
mod story;
mod text;

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::store::{Store, StoreError};
use crate::util::stop::Stopped;

/// The first page, and a day on one page, stay within this many bytes.
pub const FIRST_PAGE_MAX: u64 = 8 << 20;
/// Every page stays within this many bytes.
pub const PAGE_MAX: u64 = 32 << 20;
/// A day whose single page would pass this many bytes gets a page per session.
pub const ONE_PAGE_MAX: u64 = 6 << 20;
/// The most distinct session lines one chain shows (the rest are counted).
pub const CHAIN_LINES_MAX: u64 = 60;
/// The most bytes one chain's markup may take before the rest of it is counted, not shown.
pub const CHAIN_BYTES_MAX: usize = 1 << 20;
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
    #[error(transparent)]
    Stopped(#[from] Stopped),
}

/// What the written pages hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Written {
    /// Bytes of every page written.
    pub bytes: u64,
    /// Bytes of the first page.
    pub first_page: u64,
    /// Pages written: 1, or the first page and one per session.
    pub pages: usize,
    pub projects: usize,
    pub sessions: usize,
    pub turns: usize,
    pub chains: usize,
    pub lines_shown: u64,
    pub citations: usize,
}

/// Where `view` writes: the first page's directory and name (checked by [`target`]).
#[derive(Debug, Clone)]
pub struct Target {
    pub dir: PathBuf,
    pub name: String,
}

impl Target {
    /// The name without `.html`: session pages are `<stem>.<state>.<n>.html`.
    pub fn stem(&self) -> &str {
        self.name.strip_suffix(".html").unwrap_or(&self.name)
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }
}

/// Why `--out` names no place `view` may write.
#[derive(Debug, thiserror::Error)]
pub enum OutError {
    #[error("--out {shown} names no file")]
    NoName { shown: String },
    #[error(
        "--out {shown}: the file name is not valid UTF-8; view names its pages after it, in UTF-8, so give a UTF-8 name"
    )]
    NotUtf8 { shown: String },
    #[error("--out {shown}: the directory {dir} cannot be used: {source}")]
    Dir {
        shown: String,
        dir: String,
        source: io::Error,
    },
    #[error("--out {shown} is {what}; view writes only its own pages, so choose another name")]
    Refused { shown: String, what: String },
}

/// Where `view` writes its page by default, relative to the workspace: the only name it
/// writes in the workspace's `.evidence-store/` (with that page's session pages).
pub const DEFAULT_PAGE: &str = ".evidence-store/view.html";
const DEFAULT_NAME: &str = "view.html";

/// Checks where `out` points before anything is written: a UTF-8 file name in a directory
/// that exists, and never one of the store's own files (the store, its scratch and
/// copies `.<store name>.*`), a name in the workspace's `.evidence-store/` other than
/// [`DEFAULT_NAME`], nor one of the workspace's own files (`metadata.json`,
/// `daily-report.json`, anything under `projects/`).
pub fn target(workspace: &Path, store: &Path, out: &Path) -> Result<Target, OutError> {
    let out = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
    let shown = out.display().to_string();
    let (Some(dir), Some(name)) = (out.parent(), out.file_name()) else {
        return Err(OutError::NoName { shown });
    };
    let Some(name) = name.to_str() else {
        return Err(OutError::NotUtf8 { shown });
    };
    let real_dir = dir.canonicalize().map_err(|source| OutError::Dir {
        shown: shown.clone(),
        dir: dir.display().to_string(),
        source,
    })?;
    let refused = |what: String| {
        Err(OutError::Refused {
            shown: shown.clone(),
            what,
        })
    };
    let real = |p: &Path| p.canonicalize().ok();
    if let (Some(store_dir), Some(store_name)) = (
        store.parent().and_then(real),
        store.file_name().and_then(|n| n.to_str()),
    ) && real_dir == store_dir
        && (name == store_name || name.starts_with(&format!(".{store_name}.")))
    {
        return refused(format!(
            "the store's own file ({store_name} or its scratch)"
        ));
    }
    let workspace = real(workspace);
    if let Some(ws) = &workspace {
        let own_dir = Path::new(DEFAULT_PAGE).parent().map(|d| ws.join(d));
        if own_dir
            .as_deref()
            .and_then(real)
            .is_some_and(|d| d == real_dir)
            && name != DEFAULT_NAME
        {
            return refused(format!(
                "in the workspace's .evidence-store/, where only {DEFAULT_NAME} is view's"
            ));
        }
        if real_dir == *ws && (name == "metadata.json" || name == "daily-report.json") {
            return refused(format!("the workspace's own {name}"));
        }
        let projects = ws.join(crate::workspace::layout::PROJECTS);
        if [Some(projects.clone()), real(&projects)]
            .iter()
            .flatten()
            .any(|p| real_dir.starts_with(p))
        {
            return refused(
                "inside the workspace's projects/, which holds its sessions and documents"
                    .to_owned(),
            );
        }
    }
    Ok(Target {
        dir: dir.to_path_buf(),
        name: name.to_owned(),
    })
}

/// Writes the pages of the store's current state at `target`, atomically and streaming;
/// `now` is the moment the pages say they show.
pub fn write_pages(
    store: &Store,
    root: &Path,
    target: &Target,
    now: SystemTime,
) -> Result<Written, ViewError> {
    page::write(store, root, target, now)
}

/// Temp files that killed `view`s left beside the workspace's default page
/// ([`DEFAULT_PAGE`]): removed by every command, as [`remove_abandoned_temp_files`].
pub fn remove_abandoned_default_temp_files(workspace: &Path) -> usize {
    let page = workspace.join(DEFAULT_PAGE);
    match page.parent() {
        Some(dir) => remove_abandoned_temp_files(dir, DEFAULT_NAME),
        None => 0,
    }
}

/// Temp files that killed `view`s left in `dir` for the page `name` or its session pages
/// (this program's temp names whose process no longer runs): removed. Returns how many.
pub fn remove_abandoned_temp_files(dir: &Path, name: &str) -> usize {
    let stem = name.strip_suffix(".html").unwrap_or(name);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some((made_for, pid)) = file.to_str().and_then(crate::util::fsutil::temp_name_parts)
        else {
            continue;
        };
        let ours = made_for == name || page::session_page_of(stem, made_for).is_some();
        let alive = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if ours && !alive && std::fs::remove_file(entry.path()).is_ok() {
            tracing::info!(path = %entry.path().display(), "removed a killed view's temp file");
            removed += 1;
        }
    }
    removed
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
