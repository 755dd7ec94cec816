//! Every table of the store, in one place. Each names its key type and its value type:
//! a stored record of `records.rs` through [`Bincode`] (or packed line entries), so a
//! table takes and gives only its own record, checked by the compiler.
//!
//! Changing a table's key or value layout (a field of a stored record too) is a schema
//! change: bump [`SCHEMA_VERSION`], add a step to `store/migrate.rs`, a note under
//! `migrations/`, and a fixture store of the new version beside `store-v8.redb` (the
//! `format_tests` fail until then).

use redb::TableDefinition;

use super::codec::{Bincode, PackedLines};
use super::records;

/// The schema this build reads and writes.
pub const SCHEMA_VERSION: u64 = 8;

/// Store-level counters: `schema_version`, `next_file_id`, and `workspace_schema` (the
/// imported workspace's contract, key [`CONTRACT_KEY`]).
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// `meta` key: which prompt-diary contract the imported workspace uses, recorded as the
/// workspace `schema_version` that selected it (2 or 7). A store without the record holds
/// a prompt-diary 0.2.10 workspace: stores before schema step 6 only ever imported those
/// (the step writes the record for them).
pub const CONTRACT_KEY: &str = "workspace_schema";

/// `meta` key: which workspace the store holds, as the first 8 bytes (big-endian) of the
/// SHA-256 of its root's real path. Written by every import that commits. A store outside
/// its workspace (`--store`) serves that workspace alone: another workspace's document
/// lock would not keep its writers off this one's.
pub const WORKSPACE_ROOT_KEY: &str = "workspace_root";

/// The imported workspace: key [`WORKSPACE_KEY`] → [`records::Workspace`].
pub const WORKSPACE: TableDefinition<&str, Bincode<records::Workspace>> =
    TableDefinition::new("workspace");
pub const WORKSPACE_KEY: &str = "workspace";

/// `project_key` → [`records::Project`] (label, position, session refs in index order).
pub const PROJECTS: TableDefinition<&str, Bincode<records::Project>> =
    TableDefinition::new("projects");

/// `(project_key, session_ref)` → [`records::SessionRecord`] (index row, turns, file record).
pub const SESSIONS: TableDefinition<(&str, &str), Bincode<records::SessionRecord>> =
    TableDefinition::new("sessions");

/// `(file_id, block)` → up to [`super::codec::LINES_PER_BLOCK`] packed line entries.
/// Line `n` (1-based) of a file lives in block `(n - 1) / LINES_PER_BLOCK`.
pub const LINE_BLOCKS: TableDefinition<(u64, u64), PackedLines> =
    TableDefinition::new("line_blocks");

/// Workspace documents the store mirrors, by path relative to the workspace root
/// (`projects/<key>/evidence/<ref>.json`, `projects/<key>/project-synthesis.json`,
/// `daily-report.json`) → [`records::Document`].
pub const DOCUMENTS: TableDefinition<&str, Bincode<records::Document>> =
    TableDefinition::new("documents");

/// `(project_key, session_ref, line)` → the citations found on that physical line, in
/// order of position ([`records::Citation`]s). Lines are 1-based.
pub const CITATIONS: TableDefinition<(&str, &str, u64), Bincode<Vec<records::Citation>>> =
    TableDefinition::new("citations");

/// `(project_key, session_ref)` → [`records::Scan`]: the line table the session's citations
/// were taken from. A session without one has not been scanned.
pub const CITATION_SCANS: TableDefinition<(&str, &str), Bincode<records::Scan>> =
    TableDefinition::new("citation_scans");

/// Names of every table, for `dump` and integrity tests.
pub const TABLE_NAMES: [&str; 8] = [
    "meta",
    "workspace",
    "projects",
    "sessions",
    "line_blocks",
    "documents",
    "citations",
    "citation_scans",
];
