//! The stored records: how every value the store keeps is encoded, apart from the types
//! the rest of the program uses.
//!
//! bincode is positional: a record's bytes are its fields in declaration order, with no
//! names. So the layout of a stored value must not follow a type from outside this file
//! (adding a field to `workspace::Turn` or to [`super::FileRecord`] would change every
//! stored session). The records below are that layout, and change only with the schema
//! version (a step in [`super::migrate`], a note under `migrations/`). Each is the twin of
//! one type the store hands out; values cross between the two here (`twins!`, and by hand
//! for the one enum), by exhaustive destructuring, so a field or variant added on either
//! side does not compile until it is placed.
//!
//! Each table of [`super::schema`] names its record as its value type (through
//! [`super::codec::Bincode`]); line tables are packed by hand in [`super::codec`]. The
//! fixture store `tests/fixtures/store-v8.redb` pins every one of these layouts
//! (`format_tests`).

use std::marker::PhantomData;

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::codec::{Encoded, Record};
use super::error::CodecError;
use super::types;
use crate::workspace;

/// The `workspace` table's record: [`types::WorkspaceRecord`].
#[derive(Serialize, Deserialize)]
pub struct Workspace {
    root_display: String,
    metadata: Metadata,
    project_keys: Vec<String>,
}

/// How `metadata.json` is stored, inside [`Workspace`].
#[derive(Serialize, Deserialize)]
pub struct Metadata {
    report_date: String,
    status: String,
    timezone: String,
    text: String,
}

/// The `projects` table's record: [`types::ProjectRecord`].
#[derive(Serialize, Deserialize)]
pub struct Project {
    key: String,
    label: String,
    session_refs: Vec<String>,
}

/// The `sessions` table's record: [`types::SessionRecord`].
#[derive(Serialize, Deserialize)]
pub struct SessionRecord {
    pub(super) session: Session,
    pub(super) file: FileState,
}

/// How an index row is stored, inside [`SessionRecord`].
#[derive(Serialize, Deserialize)]
pub struct Session {
    session_ref: String,
    source: String,
    source_session_id: String,
    session_path: String,
    target: Span,
    turns: Vec<Turn>,
    index_line: u64,
}

#[derive(Serialize, Deserialize)]
pub struct Turn {
    turn_ref: String,
    span: Span,
}

/// An inclusive 1-based line span, as stored.
#[derive(Clone, Copy, Serialize, Deserialize)]
pub struct Span {
    start: i64,
    end: i64,
}

/// [`types::FileState`], inside [`SessionRecord`]. bincode stores the variant's index: the
/// order of the variants is part of the layout.
#[derive(Serialize, Deserialize)]
pub enum FileState {
    Missing,
    Indexed(FileRecord),
}

/// [`types::FileRecord`], inside [`FileState`].
#[derive(Serialize, Deserialize)]
pub struct FileRecord {
    pub(super) file_id: u64,
    pub(super) size: u64,
    pub(super) mtime_ns: u64,
    pub(super) lines: u64,
    pub(super) digest: [u8; 32],
    pub(super) ctime_ns: u64,
    pub(super) inode: u64,
}

/// The `documents` table's record: [`types::DocumentRecord`].
#[derive(Serialize, Deserialize)]
pub struct Document {
    bytes: Vec<u8>,
    sha256: [u8; 32],
}

/// One citation of the `citations` table's records (a line's citations, in order):
/// [`types::StoredCitation`].
#[derive(Serialize, Deserialize)]
pub struct Citation {
    turn_ref: Option<String>,
    content_index: Option<u64>,
    offset: u64,
    len: u64,
    kind: String,
    reference: String,
    context: Option<String>,
    check: Check,
}

/// [`types::StoredCheck`], inside [`Citation`].
#[derive(Serialize, Deserialize)]
pub struct Check {
    status: String,
    cwd: Option<String>,
    sha256: Option<[u8; 32]>,
    file_lines: Option<u64>,
    detail: Option<String>,
}

/// The `citation_scans` table's record: [`types::CitationScan`].
#[derive(Serialize, Deserialize)]
pub struct Scan {
    digest: [u8; 32],
    lines: u64,
    citations: u64,
}

impl Record for Workspace {
    const WHAT: &'static str = "workspace";
}

impl Record for Project {
    const WHAT: &'static str = "project";
}

impl Record for SessionRecord {
    const WHAT: &'static str = "session";
}

impl Record for Document {
    const WHAT: &'static str = "document";
}

impl Record for Vec<Citation> {
    const WHAT: &'static str = "citations";
}

impl Record for Scan {
    const WHAT: &'static str = "citation scan";
}

/// `From` both ways between a stored record and its twin, field by field. Both sides are
/// destructured in full, so a field added to either does not compile until it is named
/// here. A field converts with `.into()`, or with the function after `via`.
macro_rules! twins {
    ($stored:ident <-> $domain:path { $($field:ident $(via $conv:ident)?),* $(,)? }) => {
        impl From<$domain> for $stored {
            fn from(value: $domain) -> Self {
                let $domain { $($field),* } = value;
                $stored { $($field: convert!($field $(, $conv)?)),* }
            }
        }

        impl From<$stored> for $domain {
            fn from(value: $stored) -> Self {
                let $stored { $($field),* } = value;
                $domain { $($field: convert!($field $(, $conv)?)),* }
            }
        }
    };
}

macro_rules! convert {
    ($value:expr) => {
        $value.into()
    };
    ($value:expr, $conv:ident) => {
        $conv($value)
    };
}

/// Every element converted.
fn each<A: Into<B>, B>(items: Vec<A>) -> Vec<B> {
    items.into_iter().map(Into::into).collect()
}

twins!(Workspace <-> types::WorkspaceRecord { root_display, metadata, project_keys });
twins!(Metadata <-> workspace::Metadata { report_date, status, timezone, text });
twins!(Project <-> types::ProjectRecord { key, label, session_refs });
twins!(SessionRecord <-> types::SessionRecord { session, file });
twins!(Session <-> workspace::Session {
    session_ref,
    source,
    source_session_id,
    session_path,
    target,
    turns via each,
    index_line,
});
twins!(Turn <-> workspace::Turn { turn_ref, span });
twins!(Span <-> workspace::Span { start, end });
twins!(FileRecord <-> types::FileRecord {
    file_id,
    size,
    mtime_ns,
    lines,
    digest,
    ctime_ns,
    inode,
});
twins!(Document <-> types::DocumentRecord { bytes, sha256 });
twins!(Citation <-> types::StoredCitation {
    turn_ref,
    content_index,
    offset,
    len,
    kind,
    reference,
    context,
    check,
});
twins!(Check <-> types::StoredCheck { status, cwd, sha256, file_lines, detail });
twins!(Scan <-> types::CitationScan { digest, lines, citations });

impl From<types::FileState> for FileState {
    fn from(value: types::FileState) -> Self {
        match value {
            types::FileState::Missing => FileState::Missing,
            types::FileState::Indexed(file) => FileState::Indexed(file.into()),
        }
    }
}

impl From<FileState> for types::FileState {
    fn from(value: FileState) -> Self {
        match value {
            FileState::Missing => types::FileState::Missing,
            FileState::Indexed(file) => types::FileState::Indexed(file.into()),
        }
    }
}

/// What a read needs of a stored `SessionRecord`: how to read its file, and the file
/// record. Decoded in place, stepping over the turns (a long session has thousands)
/// without building them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFile {
    pub source: String,
    pub session_path: String,
    pub file: types::FileState,
}

/// [`SessionRecord`]'s layout with borrowed strings and the turns skipped. It
/// must follow `SessionRecord` and `Session` field for field (a test
/// decodes both ways).
#[derive(Deserialize)]
struct SessionRecordView<'a> {
    #[serde(borrow)]
    session: SessionView<'a>,
    file: FileState,
}

#[derive(Deserialize)]
#[allow(dead_code)] // Fields are read to step over them.
struct SessionView<'a> {
    session_ref: &'a str,
    source: &'a str,
    source_session_id: &'a str,
    session_path: &'a str,
    target: Span,
    #[serde(borrow)]
    turns: Skipped<TurnView<'a>>,
    index_line: u64,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct TurnView<'a> {
    turn_ref: &'a str,
    span: Span,
}

/// A sequence read element by element and thrown away.
struct Skipped<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Skipped<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Each<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Each<T> {
            type Value = Skipped<T>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sequence")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<T>()?.is_some() {}
                Ok(Skipped(PhantomData))
            }
        }
        deserializer.deserialize_seq(Each(PhantomData))
    }
}

/// [`Document`]'s layout with its bytes borrowed: a read copies them once, at their exact
/// size, where serde's `Vec<u8>` would grow by doubling to it (a 40 MiB card cost 3.5
/// times its size to read). It must follow `Document` field for field (a test decodes
/// both ways).
#[derive(Deserialize)]
struct DocumentView<'a> {
    bytes: &'a [u8],
    sha256: [u8; 32],
}

impl Encoded<'_, Document> {
    /// The stored document, its bytes copied once.
    pub fn document(&self) -> Result<types::DocumentRecord, CodecError> {
        let view: DocumentView<'_> = self.decode_view()?;
        Ok(types::DocumentRecord {
            bytes: view.bytes.to_vec(),
            sha256: view.sha256,
        })
    }
}

impl Encoded<'_, SessionRecord> {
    /// What a read needs of the record ([`SessionFile`]), without building its turns.
    pub fn session_file(&self) -> Result<SessionFile, CodecError> {
        let view: SessionRecordView<'_> = self.decode_view()?;
        Ok(SessionFile {
            source: view.session.source.to_owned(),
            session_path: view.session.session_path.to_owned(),
            file: view.file.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_read_through_its_view_is_the_record_stored() {
        let stored = types::DocumentRecord::new((0..=255u8).cycle().take(70_000).collect());
        let encoded = Encoded::<Document>::encode(&Document::from(stored.clone())).unwrap();
        assert_eq!(encoded.document().unwrap(), stored);
        let whole: types::DocumentRecord = encoded.decode().unwrap().into();
        assert_eq!(whole, stored);
    }

    #[test]
    fn a_session_file_is_read_from_a_whole_session_record() {
        use crate::store::types::{FileRecord, FileState, SessionRecord};
        use crate::workspace::{Session, Span, Turn};
        let span = |start, end| Span { start, end };
        let session = Session {
            session_ref: "S0001".into(),
            source: "claude-code".into(),
            source_session_id: "x".into(),
            session_path: "sessions/claude-code/é.jsonl".into(),
            target: span(1, 9),
            turns: (1..=300)
                .map(|t| Turn {
                    turn_ref: format!("T{t:04}"),
                    span: span(t, t + 1),
                })
                .collect(),
            index_line: 3,
        };
        let files = [
            FileState::Missing,
            FileState::Indexed(FileRecord {
                file_id: 7,
                size: 1 << 40,
                mtime_ns: u64::MAX,
                lines: 9,
                digest: [5; 32],
                ctime_ns: 1 << 62,
                inode: 12345,
            }),
        ];
        for file in files {
            let record = SessionRecord {
                session: session.clone(),
                file: file.clone(),
            };
            let encoded = Encoded::encode(&super::SessionRecord::from(record.clone())).unwrap();
            let whole: SessionRecord = encoded.decode().unwrap().into();
            assert_eq!(whole, record);
            assert_eq!(
                encoded.session_file().unwrap(),
                SessionFile {
                    source: whole.session.source,
                    session_path: whole.session.session_path,
                    file: whole.file,
                }
            );
            let bytes = encoded.bytes();
            let shorter = Encoded::<super::SessionRecord>::raw(&bytes[..bytes.len() - 1]);
            assert!(shorter.session_file().is_err());
            let mut longer = bytes.to_vec();
            longer.push(0);
            assert!(
                Encoded::<super::SessionRecord>::raw(&longer)
                    .session_file()
                    .is_err()
            );
        }
    }
}
