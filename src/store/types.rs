//! The values the store hands to the rest of the program. None of them is stored as it
//! is (none is `Serialize`): each has a twin in [`super::records`] that is the stored
//! layout, so a field added here does not compile until its twin places it.

use sha2::{Digest, Sha256};

use crate::workspace::{Metadata, Session};

/// The imported workspace as a whole; stored as `records::Workspace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRecord {
    /// The workspace root as messages print it.
    pub root_display: String,
    pub metadata: Metadata,
    /// Project keys in directory-name order.
    pub project_keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRecord {
    pub key: String,
    pub label: String,
    /// Session refs in index-file order.
    pub session_refs: Vec<String>,
}

/// A session's index row and file record; stored as `records::SessionRecord`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub session: Session,
    pub file: FileState,
}

/// What import found at a session's `session_path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    /// Not there, or not a regular file: reads answer "missing from the prepared workspace".
    Missing,
    Indexed(FileRecord),
}

/// An indexed session file: how to recognise it unchanged, and where its lines are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    pub file_id: u64,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    pub lines: u64,
    /// SHA-256 over the packed line table: equal digests mean equal lines.
    pub digest: [u8; 32],
    /// Status-change time, nanoseconds since the Unix epoch, and inode number. A user can
    /// set a file's mtime back after editing it, but not these, so an edit that keeps the
    /// size and restores the mtime is still seen. 0 where unknown (records from schema 1,
    /// or stamped while the file was still changing): the next import hashes it again.
    pub ctime_ns: u64,
    pub inode: u64,
}

/// A workspace document (evidence card, envelope, daily report) as last synced with disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentRecord {
    pub bytes: Vec<u8>,
    /// SHA-256 of `bytes`, checked every time the record is read.
    pub sha256: [u8; 32],
}

impl DocumentRecord {
    pub fn new(bytes: Vec<u8>) -> DocumentRecord {
        let sha256 = Sha256::digest(&bytes).into();
        DocumentRecord { bytes, sha256 }
    }

    /// Whether `bytes` still hash to the recorded checksum.
    pub fn intact(&self) -> bool {
        <[u8; 32]>::from(Sha256::digest(&self.bytes)) == self.sha256
    }
}

/// What [`Reader::totals`] counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub sessions_indexed: u64,
    pub sessions_missing: u64,
    pub lines_indexed: u64,
    /// Bytes of the session files the line tables cover.
    pub bytes_covered: u64,
    pub documents: u64,
    pub document_bytes: u64,
}

/// One citation as stored, without its line (the key holds it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCitation {
    /// The turn whose span holds the line, when one does.
    pub turn_ref: Option<String>,
    /// The message's position in the record's `content` list (`None`: a message that is
    /// not in a list).
    pub content_index: Option<u64>,
    /// Byte offset and length of the citation in the decoded message text.
    pub offset: u64,
    pub len: u64,
    pub kind: String,
    pub reference: String,
    pub context: Option<String>,
    pub check: StoredCheck,
}

/// The verification result of one citation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCheck {
    /// `ok`, `missing_file`, `line_out_of_range`, `outside_project` or `unchecked`.
    pub status: String,
    /// The directory the path was resolved against (the citing line's `cwd`).
    pub cwd: Option<String>,
    /// SHA-256 of the cited file, when it was read.
    pub sha256: Option<[u8; 32]>,
    /// Physical lines of the cited file, when it was read.
    pub file_lines: Option<u64>,
    /// Why a citation is `unchecked` (not a file citation, no `cwd`, not a regular file).
    pub detail: Option<String>,
}

/// One citation with its line, as the read API returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CitationRecord {
    pub line: u64,
    pub citation: StoredCitation,
}

/// Every citation of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCitations {
    pub project_key: String,
    pub session_ref: String,
    /// In line order, then order of position within the line.
    pub citations: Vec<CitationRecord>,
}

/// Which line table a session's citations were taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CitationScan {
    pub digest: [u8; 32],
    pub lines: u64,
    /// How many citations the scan stored.
    pub citations: u64,
}
