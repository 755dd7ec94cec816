//! Reads a prepared workspace from disk and validates it (see [`super::validate`]).

use std::io;

use super::validate::{self, Escape};
use super::{LoadError, Project, Workspace};
use crate::workspace::contract::Rules;
use crate::workspace::{WorkspaceRoot, display_join, layout};

/// Loads and validates the whole workspace: `metadata.json`, then every project in
/// directory-name order with its `project.json` and `sessions.index.jsonl`.
pub fn load(root: &WorkspaceRoot) -> Result<Workspace, LoadError> {
    let (contract, metadata) = load_metadata(root)?;

    let mut projects = Vec::new();
    for dir in project_dirs(root)? {
        projects.push(load_project(root, &dir, contract.rules())?);
    }
    Ok(Workspace {
        contract,
        metadata,
        projects,
    })
}

/// `metadata.json` alone, validated: the contract it selects and the day it prepares.
pub fn load_metadata(
    root: &WorkspaceRoot,
) -> Result<(crate::workspace::contract::Contract, super::Metadata), LoadError> {
    let metadata_file = display_join(&root.display, "metadata.json");
    let bytes = read_required(root, "metadata.json", &metadata_file)?;
    validate::workspace_metadata(&metadata_file, &bytes)
}

/// Sub-directories of `projects/` (symlinks to directories included), in code-point order.
/// A missing `projects/` is a workspace without projects.
fn project_dirs(root: &WorkspaceRoot) -> Result<Vec<String>, LoadError> {
    let projects = root.path.join(layout::PROJECTS);
    let entries = match std::fs::read_dir(&projects) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(&display_join(&root.display, layout::PROJECTS), &e)),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| io_error(&display_join(&root.display, layout::PROJECTS), &e))?;
        // `metadata()` follows symlinks, so a link to a directory counts as a project.
        if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()) {
            dirs.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn load_project(root: &WorkspaceRoot, dir: &str, rules: Rules) -> Result<Project, LoadError> {
    let rel = layout::project_dir(dir);
    let project_dir = root.path.join(&rel);
    let project_file = display_join(&root.display, &format!("{rel}/project.json"));
    let bytes = read_required(root, &format!("{rel}/project.json"), &project_file)?;
    let (key, label) = validate::project(&project_file, dir, &bytes)?;

    let index_file = display_join(&root.display, &format!("{rel}/sessions.index.jsonl"));
    let sessions = match read_file(root, &format!("{rel}/sessions.index.jsonl"), INDEX_FILE_MAX) {
        Ok(Some(bytes)) => {
            check_rows(&index_file, &bytes)?;
            let sessions_dir = crate::util::fsutil::resolve_lenient(&project_dir.join("sessions"));
            let real_root = crate::util::fsutil::resolve_lenient(&root.path);
            let mut escapes = |session_path: &str| {
                let resolved =
                    crate::util::fsutil::resolve_lenient(&project_dir.join(session_path));
                if !resolved.starts_with(&sessions_dir) {
                    Some(Escape::SessionsDir(sessions_dir.display().to_string()))
                } else if !resolved.starts_with(&real_root) {
                    Some(Escape::Workspace {
                        resolved: resolved.display().to_string(),
                        root: real_root.display().to_string(),
                    })
                } else {
                    None
                }
            };
            validate::index_for(rules, &index_file, &bytes, &mut escapes)?
        }
        Ok(None) => Vec::new(),
        Err(e) => return Err(io_error(&index_file, &e)),
    };
    Ok(Project {
        key,
        label,
        sessions,
    })
}

/// The most bytes `metadata.json` or a `project.json` may have (real ones have well under
/// 10 KB): a larger one is refused before it is read.
pub const JSON_FILE_MAX: u64 = 16 << 20;

/// The most bytes a `sessions.index.jsonl` may have.
pub const INDEX_FILE_MAX: u64 = 256 << 20;

/// The most bytes one row of `sessions.index.jsonl` may have (a row lists one session's
/// turns: real ones have a few KB).
pub const INDEX_ROW_MAX: usize = 1 << 20;

/// `<root>/<rel>`, read only if it is a regular file whose real location is inside the
/// workspace (a symlink leading outside is refused, a FIFO cannot hang the read) of at
/// most `max` bytes; `None` when there is no such file.
fn read_file(root: &WorkspaceRoot, rel: &str, max: u64) -> io::Result<Option<Vec<u8>>> {
    crate::util::fsutil::read_confined_within(&root.path, rel, max)
}

/// Refuses an index with a row longer than [`INDEX_ROW_MAX`] before any row is parsed.
fn check_rows(shown: &str, bytes: &[u8]) -> Result<(), LoadError> {
    for (n, row) in bytes.split(|b| *b == b'\n').enumerate() {
        if row.len() > INDEX_ROW_MAX {
            return Err(LoadError::new(format!(
                "could not read {shown}: row {} is {} bytes, more than the {INDEX_ROW_MAX} bytes a row may have; refused",
                n + 1,
                row.len()
            )));
        }
    }
    Ok(())
}

fn read_required(root: &WorkspaceRoot, rel: &str, shown: &str) -> Result<Vec<u8>, LoadError> {
    if !root.path.join(rel).is_file() {
        return Err(LoadError::new(format!(
            "required JSON file is missing: {shown}"
        )));
    }
    match read_file(root, rel, JSON_FILE_MAX) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(LoadError::new(format!(
            "required JSON file is missing: {shown}"
        ))),
        Err(e) => Err(io_error(shown, &e)),
    }
}

fn io_error(shown: &str, err: &io::Error) -> LoadError {
    LoadError::io(shown, err)
}
