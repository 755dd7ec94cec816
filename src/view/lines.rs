//! The session lines the page shows: found through the read layer (the file import
//! indexed, by size and identity), read by the session module one line at a time with a
//! positioned read, each checked against its stored SHA-256. A line that no longer
//! matches is marked, never shown.

use std::path::Path;

use crate::read::compact::{self, CompactRecord, EntryKind};
use crate::read::handle::{self, Handle};
use crate::read::{self, Found, Located, Mode, ReadRequest, ReadResult};
use crate::session::ReadBackError;
use crate::store::{Reader, StoreError};
use crate::util::lines as line_util;
use crate::view::{TEXT_CUT, cut};

/// How many lines from a turn's start are looked at for its first user message.
const FIRST_MESSAGE_LINES: u64 = 4;

/// One session's file, open for the lines the page shows, or why it cannot be read.
pub struct SessionLines {
    found: Result<Found, Unreadable>,
    key: u32,
    paged: bool,
}

/// Why a session's lines cannot be read: the read layer's answer refusing the read,
/// shown as its first message and hint.
#[derive(Debug, thiserror::Error)]
#[error("{}", read::first_message(.0))]
pub struct Unreadable(ReadResult);

/// One shown line.
pub struct Line {
    pub n: u64,
    pub body: Body,
}

pub enum Body {
    Verified(Box<Verified>),
    /// The line's bytes no longer hash to the digest import stored.
    Changed,
    Unreadable(String),
}

pub struct Verified {
    /// The decoded line's length in bytes.
    pub bytes: u64,
    pub sha256: String,
    /// The text, cut at [`TEXT_CUT`] bytes.
    pub text: String,
    pub cut: bool,
    pub compact: CompactRecord,
    /// The line's trimmed tool entries: (kind, index, handle, payload bytes).
    pub handles: Vec<(&'static str, usize, String, usize)>,
}

impl SessionLines {
    pub fn open(
        reader: &Reader,
        root: &Path,
        project_key: &str,
        session_ref: &str,
        paged: bool,
    ) -> Result<SessionLines, StoreError> {
        let request = ReadRequest {
            project_key: project_key.to_owned(),
            session_ref: session_ref.to_owned(),
            start_line: 1.into(),
            end_line: 1.into(),
            mode: Mode::Full,
        };
        let found = match read::locate(reader, root, &request)? {
            Located::Found(found) => Ok(found),
            Located::Answer(answer) => Err(Unreadable(answer)),
        };
        Ok(SessionLines {
            found,
            key: handle::session_key(project_key, session_ref),
            paged,
        })
    }

    /// The session's number of lines, or why it cannot be read.
    pub fn count(&self) -> Result<u64, &Unreadable> {
        self.found.as_ref().map(|f| f.lines)
    }

    /// Lines `first..=last` (both within the session), each read and checked alone.
    pub fn read(&self, reader: &Reader, first: u64, last: u64) -> Result<Vec<Line>, StoreError> {
        let found = match &self.found {
            Ok(found) => found,
            Err(why) => {
                let why = why.to_string();
                return Ok((first..=last)
                    .map(|n| Line {
                        n,
                        body: Body::Unreadable(why.clone()),
                    })
                    .collect());
            }
        };
        let entries = reader.lines(found.file_id, first, last)?;
        Ok((first..)
            .zip(&entries)
            .map(|(n, entry)| {
                let body = match found.file.read_back(entry) {
                    Ok(bytes) => {
                        let text = line_util::decode(&bytes);
                        Body::Verified(Box::new(self.verified(&found.source, n, &text, entry)))
                    }
                    Err(ReadBackError::Changed) => Body::Changed,
                    Err(ReadBackError::Io(e)) => Body::Unreadable(e.to_string()),
                };
                Line { n, body }
            })
            .collect())
    }

    /// The first user message among the first [`FIRST_MESSAGE_LINES`] lines of the span
    /// `first..=last`: the text of the first line whose compact record is a user
    /// message with text, cut at `max` bytes. None when the lines cannot be read, or
    /// none is one.
    pub fn first_user_text(
        &self,
        reader: &Reader,
        first: u64,
        last: u64,
        max: usize,
    ) -> Result<Option<String>, StoreError> {
        let Ok(found) = &self.found else {
            return Ok(None);
        };
        let last = last
            .min(found.lines)
            .min(first.saturating_add(FIRST_MESSAGE_LINES - 1));
        if first == 0 || first > last {
            return Ok(None);
        }
        for (n, entry) in (first..).zip(reader.lines(found.file_id, first, last)?) {
            let Ok(bytes) = found.file.read_back(&entry) else {
                continue;
            };
            let text = line_util::decode(&bytes);
            let record =
                compact::compact_line(&text, n, &found.source, entry.decoded_len, String::new());
            if record.role.as_deref() == Some("user")
                && let Some(preview) = record.text_preview.filter(|t| !t.trim().is_empty())
            {
                return Ok(Some(cut(&preview, max).0.to_owned()));
            }
        }
        Ok(None)
    }

    fn verified(&self, source: &str, n: u64, text: &str, entry: &line_util::LineEntry) -> Verified {
        let sha256 = line_util::hex(&entry.sha256);
        let compact = compact::compact_line(text, n, source, entry.decoded_len, sha256.clone());
        let entries = if self.paged {
            read::sparse::entries(text, source)
        } else {
            compact::entries(text, source)
        };
        let handles = entries
            .iter()
            .filter(|e| e.trimmed)
            .filter_map(|e| {
                let h = Handle::new(self.key, n, e.kind, e.index, &entry.sha256)?;
                let kind = match e.kind {
                    EntryKind::ToolUse => "tool_use",
                    EntryKind::ToolResult => "tool_result",
                };
                Some((kind, e.index, h.to_uuid(), e.payload.len()))
            })
            .collect();
        let (shown, was_cut) = cut(text, TEXT_CUT);
        Verified {
            bytes: entry.decoded_len,
            sha256,
            text: shown.to_owned(),
            cut: was_cut,
            compact,
            handles,
        }
    }
}
