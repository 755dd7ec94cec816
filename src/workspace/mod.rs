//! The prepared workspace: its model, its validation rules and the loader that reads it.
//!
//! Validation ([`validate`]) is pure: it turns file text into model values or into the
//! exact message prompt-diary prints. The loader ([`mod@load`]) does the I/O around it.
//! Loading is all-or-nothing: the first problem anywhere aborts with one message.

pub mod contract;
pub mod layout;
pub mod load;
pub mod validate;

use serde::{Deserialize, Serialize};

use crate::util::kind::Kind;

pub use load::load;

/// A validated prepared workspace (everything the index files say; no session bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    /// The prompt-diary contract `metadata.json`'s `schema_version` selects.
    pub contract: crate::workspace::contract::Contract,
    pub metadata: Metadata,
    /// Projects in directory-name order.
    pub projects: Vec<Project>,
}

/// `metadata.json`: the three fields the tools require, and the text for later steps
/// (the Build step reads `report_window_local` from it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    pub report_date: String,
    pub status: String,
    pub timezone: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Project {
    pub key: String,
    pub label: String,
    /// Sessions in index-file order.
    pub sessions: Vec<Session>,
}

/// One row of `sessions.index.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub session_ref: String,
    /// Selects the compaction rules: `claude-code`, `codex`, anything else is generic.
    pub source: String,
    pub source_session_id: String,
    /// Normalised relative path under the project directory (`sessions/...`).
    pub session_path: String,
    pub target: Span,
    /// Turns in `turns[]` order.
    pub turns: Vec<Turn>,
    /// 1-based physical line of the row in the index file.
    pub index_line: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub turn_ref: String,
    pub span: Span,
}

/// An inclusive 1-based line span. Integers beyond `i64` saturate (prompt-diary accepts
/// any size; no real session has that many lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub start: i64,
    pub end: i64,
}

impl Session {
    pub fn turn(&self, turn_ref: &str) -> Option<&Turn> {
        self.turns.iter().find(|t| t.turn_ref == turn_ref)
    }
}

/// Why a workspace did not load: one message naming the file, line and field, worded as
/// prompt-diary words it, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LoadError {
    pub message: String,
    /// Whether loading again may succeed by itself ([`Kind::Shortage`] for a file that could
    /// not be opened for want of descriptors).
    pub kind: Kind,
}

impl LoadError {
    /// A problem with the workspace: it lasts until the workspace is fixed.
    pub fn new(message: impl Into<String>) -> Self {
        LoadError {
            message: message.into(),
            kind: Kind::Lasting,
        }
    }

    /// A failure to read `shown`: its kind is the I/O error's.
    pub fn io(shown: &str, err: &std::io::Error) -> Self {
        LoadError {
            message: format!("could not read {shown}: {err}"),
            kind: Kind::of_io(err),
        }
    }
}

/// A request names a project or session the prepared workspace does not have: the
/// argument, the message and the hint, worded as every prompt-diary tool words them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    pub field: &'static str,
    pub message: String,
    pub hint: &'static str,
}

impl Unknown {
    pub fn project(project_key: &str) -> Self {
        Unknown {
            field: "project_key",
            message: format!(
                "unknown project_key {}",
                crate::util::pyjson::py_repr(project_key)
            ),
            hint: "use the project_key from the prepared workspace",
        }
    }

    pub fn session(project_key: &str, session_ref: &str) -> Self {
        Unknown {
            field: "session_ref",
            message: format!(
                "unknown session_ref {} for project {}",
                crate::util::pyjson::py_repr(session_ref),
                crate::util::pyjson::py_repr(project_key)
            ),
            hint: "use a session_ref listed in sessions.index.jsonl",
        }
    }
}

/// The workspace root: the path used for I/O and the form printed in messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRoot {
    pub path: std::path::PathBuf,
    /// As prompt-diary prints it: a given path normalised lexically like Python's
    /// `pathlib`, or the absolute current directory.
    pub display: String,
}

/// How Python's `pathlib.PurePosixPath` prints a path: repeated and trailing `/` and `.`
/// components dropped, `..` kept, `.` alone printed as the empty prefix (so that
/// `root / "metadata.json"` prints `metadata.json`).
pub fn python_path_display(path: &std::path::Path) -> String {
    let text = path.to_string_lossy();
    let absolute = text.starts_with('/');
    let parts: Vec<&str> = text
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => String::new(),
        (false, false) => joined,
    }
}

/// Joins a displayed root and a relative path the way prompt-diary prints file paths.
pub fn display_join(root: &str, rel: &str) -> String {
    match root {
        "" => rel.to_owned(),
        "/" => format!("/{rel}"),
        _ => format!("{root}/{rel}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_like_pathlib() {
        for (given, shown) in [
            ("/tmp//ws/./", "/tmp/ws"),
            ("./ws", "ws"),
            (".", ""),
            ("..", ".."),
            ("a/../b", "a/../b"),
            ("/", "/"),
        ] {
            assert_eq!(
                python_path_display(std::path::Path::new(given)),
                shown,
                "{given}"
            );
        }
        assert_eq!(display_join("", "metadata.json"), "metadata.json");
        assert_eq!(display_join("/w", "metadata.json"), "/w/metadata.json");
    }
}
