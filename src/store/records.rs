//! The store's own copies of the domain types it keeps, as it encodes them.
//!
//! bincode is positional: a record's bytes are its fields in declaration order, with no
//! names. So the layout of a stored value must not follow a domain type from outside the
//! store (adding a field to `workspace::Turn` would change every stored session). The
//! records below are that layout, and change only with the schema version (a step in
//! [`super::migrate`], a note under `migrations/`). Domain values cross into and out of
//! them here, by exhaustive destructuring, so a field added on either side does not
//! compile until it is placed.
//!
//! The other stored values (`ProjectRecord`, `FileState`, `FileRecord`, `DocumentRecord`,
//! `StoredCitation`, `StoredCheck`, `CitationScan`) are store types already and are stored
//! as they are; line tables are packed by hand in [`super::codec`]. The fixture store
//! `tests/fixtures/store-v6.redb` pins every one of these layouts (`fixture` tests).

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

impl From<WorkspaceRecord> for StoredWorkspace {
    fn from(record: WorkspaceRecord) -> Self {
        let WorkspaceRecord {
            root_display,
            metadata,
            project_keys,
        } = record;
        let Metadata {
            report_date,
            status,
            timezone,
            text,
        } = metadata;
        StoredWorkspace {
            root_display,
            metadata: StoredMetadata {
                report_date,
                status,
                timezone,
                text,
            },
            project_keys,
        }
    }
}

impl From<StoredWorkspace> for WorkspaceRecord {
    fn from(stored: StoredWorkspace) -> Self {
        let StoredWorkspace {
            root_display,
            metadata,
            project_keys,
        } = stored;
        let StoredMetadata {
            report_date,
            status,
            timezone,
            text,
        } = metadata;
        WorkspaceRecord {
            root_display,
            metadata: Metadata {
                report_date,
                status,
                timezone,
                text,
            },
            project_keys,
        }
    }
}

impl From<SessionRecord> for StoredSessionRecord {
    fn from(record: SessionRecord) -> Self {
        let SessionRecord { session, file } = record;
        StoredSessionRecord {
            session: session.into(),
            file,
        }
    }
}

impl From<StoredSessionRecord> for SessionRecord {
    fn from(stored: StoredSessionRecord) -> Self {
        let StoredSessionRecord { session, file } = stored;
        SessionRecord {
            session: session.into(),
            file,
        }
    }
}

impl From<Session> for StoredSession {
    fn from(session: Session) -> Self {
        let Session {
            session_ref,
            source,
            source_session_id,
            session_path,
            target,
            turns,
            index_line,
        } = session;
        StoredSession {
            session_ref,
            source,
            source_session_id,
            session_path,
            target: target.into(),
            turns: turns
                .into_iter()
                .map(|Turn { turn_ref, span }| StoredTurn {
                    turn_ref,
                    span: span.into(),
                })
                .collect(),
            index_line,
        }
    }
}

impl From<StoredSession> for Session {
    fn from(stored: StoredSession) -> Self {
        let StoredSession {
            session_ref,
            source,
            source_session_id,
            session_path,
            target,
            turns,
            index_line,
        } = stored;
        Session {
            session_ref,
            source,
            source_session_id,
            session_path,
            target: target.into(),
            turns: turns
                .into_iter()
                .map(|StoredTurn { turn_ref, span }| Turn {
                    turn_ref,
                    span: span.into(),
                })
                .collect(),
            index_line,
        }
    }
}

impl From<Span> for StoredSpan {
    fn from(Span { start, end }: Span) -> Self {
        StoredSpan { start, end }
    }
}

impl From<StoredSpan> for Span {
    fn from(StoredSpan { start, end }: StoredSpan) -> Self {
        Span { start, end }
    }
}
