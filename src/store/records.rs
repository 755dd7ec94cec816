//! The store's own copies of the domain types it keeps, as it encodes them.
//!
//! bincode is positional: a record's bytes are its fields in declaration order, with no
//! names. So the layout of a stored value must not follow a domain type from outside the
//! store (adding a field to `workspace::Turn` would change every stored session). The
//! records below are that layout, and change only with the schema version (a step in
//! [`super::migrate`], a note under `migrations/`). Domain values cross into and out of
//! them here (`twins!`), by exhaustive destructuring, so a field added on either side
//! does not compile until it is placed.
//!
//! The other stored values (`ProjectRecord`, `FileState`, `FileRecord`, `DocumentRecord`,
//! `StoredCitation`, `StoredCheck`, `CitationScan`) are store types already and are stored
//! as they are; line tables are packed by hand in [`super::codec`]. The fixture store
//! `tests/fixtures/store-v7.redb` pins every one of these layouts (`format_tests`).

use serde::{Deserialize, Serialize};

use super::{FileState, SessionRecord, WorkspaceRecord};
use crate::workspace::{Metadata, Session, Span, Turn};

/// How [`WorkspaceRecord`] is stored (the `workspace` table).
#[derive(Serialize, Deserialize)]
pub(super) struct StoredWorkspace {
    root_display: String,
    metadata: StoredMetadata,
    project_keys: Vec<String>,
}

/// How `metadata.json` is stored, inside [`StoredWorkspace`].
#[derive(Serialize, Deserialize)]
struct StoredMetadata {
    report_date: String,
    status: String,
    timezone: String,
    text: String,
}

/// How [`SessionRecord`] is stored (the `sessions` table).
#[derive(Serialize, Deserialize)]
pub(super) struct StoredSessionRecord {
    pub(super) session: StoredSession,
    pub(super) file: FileState,
}

/// How an index row is stored, inside [`StoredSessionRecord`].
#[derive(Serialize, Deserialize)]
pub(super) struct StoredSession {
    session_ref: String,
    source: String,
    source_session_id: String,
    session_path: String,
    target: StoredSpan,
    turns: Vec<StoredTurn>,
    index_line: u64,
}

#[derive(Serialize, Deserialize)]
struct StoredTurn {
    turn_ref: String,
    span: StoredSpan,
}

/// An inclusive 1-based line span, as stored.
#[derive(Clone, Copy, Serialize, Deserialize)]
pub(super) struct StoredSpan {
    start: i64,
    end: i64,
}

/// `From` both ways between a stored record and its domain twin, field by field. Both
/// sides are destructured in full, so a field added to either does not compile until it
/// is named here. A field converts with `.into()`, or with the function after `via`.
macro_rules! twins {
    ($stored:ident <-> $domain:ident { $($field:ident $(via $conv:ident)?),* $(,)? }) => {
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

twins!(StoredWorkspace <-> WorkspaceRecord { root_display, metadata, project_keys });
twins!(StoredMetadata <-> Metadata { report_date, status, timezone, text });
twins!(StoredSessionRecord <-> SessionRecord { session, file });
twins!(StoredSession <-> Session {
    session_ref,
    source,
    source_session_id,
    session_path,
    target,
    turns via each,
    index_line,
});
twins!(StoredTurn <-> Turn { turn_ref, span });
twins!(StoredSpan <-> Span { start, end });
