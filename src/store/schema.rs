//! Every table of the store, in one place. Values are encoded by [`super::codec`], in the
//! layouts of the store's own record types (`records.rs` and the records it names).
//!
//! Changing a table's key or value layout (a field of a stored record too) is a schema
//! change: bump [`SCHEMA_VERSION`], add a step to `store/migrate.rs`, a note under
//! `migrations/`, and a fixture store of the new version beside `store-v7.redb` (the
//! `format_tests` fail until then).

use redb::TableDefinition;

/// The schema this build reads and writes.
pub const SCHEMA_VERSION: u64 = 7;

/// Store-level counters: `schema_version`, `next_file_id`, and `workspace_schema` (the
/// imported workspace's contract, see [`super::contract`]).
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// The imported workspace: key [`WORKSPACE_KEY`] → `WorkspaceRecord`.
pub const WORKSPACE: TableDefinition<&str, &[u8]> = TableDefinition::new("workspace");
pub const WORKSPACE_KEY: &str = "workspace";

/// `project_key` → `ProjectRecord` (label, position, session refs in index order).
pub const PROJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("projects");

/// `(project_key, session_ref)` → `SessionRecord` (index row, turns, file record).
pub const SESSIONS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("sessions");

/// `(file_id, block)` → up to [`super::codec::LINES_PER_BLOCK`] packed line entries.
/// Line `n` (1-based) of a file lives in block `(n - 1) / LINES_PER_BLOCK`.
pub const LINE_BLOCKS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("line_blocks");

/// Workspace documents the store mirrors, by path relative to the workspace root
/// (`projects/<key>/evidence/<ref>.json`, `projects/<key>/project-synthesis.json`,
/// `daily-report.json`) → `DocumentRecord`.
pub const DOCUMENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("documents");

/// `(project_key, session_ref, line)` → the citations found on that physical line, in
/// order of position (bincode `Vec<StoredCitation>`). Lines are 1-based.
pub const CITATIONS: TableDefinition<(&str, &str, u64), &[u8]> = TableDefinition::new("citations");

/// `(project_key, session_ref)` → `CitationScan`: the line table the session's citations
/// were taken from. A session without one has not been scanned.
pub const CITATION_SCANS: TableDefinition<(&str, &str), &[u8]> =
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
