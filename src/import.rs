//! `import`: validate the prepared workspace and bring the store in line with it, in one
//! write transaction. Session files whose size and mtime are unchanged keep their line
//! tables; the others are streamed once (hashing every line) into new ones.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::lines;
use crate::store::{
    DocumentRecord, FileRecord, FileState, Lookup, ProjectRecord, SessionRecord, Store, StoreError,
    WorkspaceRecord, Writer,
};
use crate::workspace::WorkspaceRoot;
use crate::workspace::{self, LoadError, Workspace};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// Re-hash files whose size and mtime look unchanged (their line tables are replaced
    /// only if the lines differ).
    pub rehash: bool,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ImportReport {
    pub projects: usize,
    pub sessions: usize,
    /// Session files streamed and hashed in this run.
    pub files_indexed: usize,
    /// Session files whose line tables were kept.
    pub files_unchanged: usize,
    /// Index rows whose session file is absent (reads of them report it missing).
    pub files_missing: usize,
    pub bytes_indexed: u64,
    pub lines_indexed: u64,
    /// Evidence cards, envelopes and daily reports now mirrored in the store.
    pub documents: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Workspace(#[from] LoadError),
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Receives import progress; the CLI draws a bar with it when on a terminal.
pub trait Progress {
    fn start(&self, total_bytes: u64);
    fn advance(&self, bytes: u64);
    fn finish(&self);
}

/// Progress that goes nowhere.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// One session file's identity on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    Some(Stamp {
        size: meta.len(),
        mtime_ns,
    })
}

/// Validates the workspace and imports it. Nothing is written unless everything succeeds.
pub fn import(
    root: &WorkspaceRoot,
    store: &Store,
    options: ImportOptions,
    progress: &dyn Progress,
) -> Result<ImportReport, ImportError> {
    let workspace = workspace::load(root)?;
    // Stat every file and work out the bytes to hash before taking the write lock.
    let plan = plan(root, store, &workspace, options)?;
    progress.start(
        plan.iter()
            .filter(|p| p.needs_index)
            .map(|p| p.stamp.map_or(0, |s| s.size))
            .sum(),
    );

    let mut writer = store.writer()?;
    let mut report = ImportReport {
        projects: workspace.projects.len(),
        ..ImportReport::default()
    };
    let mut done_bytes = 0;
    let sessions = workspace
        .projects
        .iter()
        .flat_map(|p| p.sessions.iter().map(move |s| (p, s)));
    for ((project, session), item) in sessions.zip(plan) {
        let file = match item.stamp {
            None => {
                report.files_missing += 1;
                FileState::Missing
            }
            Some(stamp) if !item.needs_index => {
                report.files_unchanged += 1;
                match item.previous {
                    Some(record) => FileState::Indexed(FileRecord {
                        mtime_ns: stamp.mtime_ns,
                        ..record
                    }),
                    None => FileState::Missing,
                }
            }
            Some(stamp) => {
                let record = index_file(&mut writer, &item.path, stamp, &mut |n| {
                    progress.advance(done_bytes + n);
                })?;
                done_bytes += stamp.size;
                match item.previous {
                    // Same lines as before (a re-hash or a touch): keep the old table.
                    Some(old) if old.digest == record.digest && old.lines == record.lines => {
                        writer.delete_lines(record.file_id)?;
                        report.files_unchanged += 1;
                        FileState::Indexed(FileRecord {
                            size: stamp.size,
                            mtime_ns: stamp.mtime_ns,
                            ..old
                        })
                    }
                    previous => {
                        if let Some(old) = previous {
                            writer.delete_lines(old.file_id)?;
                        }
                        report.files_indexed += 1;
                        report.bytes_indexed += record.size;
                        report.lines_indexed += record.lines;
                        FileState::Indexed(record)
                    }
                }
            }
        };
        writer.put_session(
            &project.key,
            &SessionRecord {
                session: session.clone(),
                file,
            },
        )?;
        report.sessions += 1;
    }
    remove_stale(&mut writer, &workspace)?;
    report.documents = sync_documents(&mut writer, root, &workspace)?;
    for project in &workspace.projects {
        writer.put_project(&ProjectRecord {
            key: project.key.clone(),
            label: project.label.clone(),
            session_refs: project
                .sessions
                .iter()
                .map(|s| s.session_ref.clone())
                .collect(),
        })?;
    }
    writer.put_workspace(&WorkspaceRecord {
        root_display: root.display.clone(),
        metadata: workspace.metadata.clone(),
        project_keys: workspace.projects.iter().map(|p| p.key.clone()).collect(),
    })?;
    writer.commit()?;
    progress.finish();
    Ok(report)
}

/// What to do with one session's file.
struct Planned {
    path: PathBuf,
    stamp: Option<Stamp>,
    previous: Option<FileRecord>,
    needs_index: bool,
}

fn plan(
    root: &WorkspaceRoot,
    store: &Store,
    workspace: &Workspace,
    options: ImportOptions,
) -> Result<Vec<Planned>, ImportError> {
    let reader = store.reader()?;
    let mut out = Vec::new();
    for project in &workspace.projects {
        for session in &project.sessions {
            let path = root
                .path
                .join("projects")
                .join(&project.key)
                .join(&session.session_path);
            let stamp = stamp(&path);
            let previous = match reader.session(&project.key, &session.session_ref)? {
                Some(SessionRecord {
                    file: FileState::Indexed(record),
                    session: old,
                }) if old.session_path == session.session_path => Some(record),
                _ => None,
            };
            let unchanged = matches!((&previous, stamp), (Some(old), Some(now)) if old.size == now.size && old.mtime_ns == now.mtime_ns);
            let needs_index = stamp.is_some() && (options.rehash || !unchanged);
            out.push(Planned {
                path,
                stamp,
                previous,
                needs_index,
            });
        }
    }
    Ok(out)
}

/// Streams one session file into a new line table.
fn index_file(
    writer: &mut Writer,
    path: &Path,
    stamp: Stamp,
    on_progress: &mut dyn FnMut(u64),
) -> Result<FileRecord, ImportError> {
    let mut done = 0;
    let io_error = |source| ImportError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = File::open(path).map_err(io_error)?;
    let file_id = writer.new_file_id()?;
    let mut sink = writer.line_sink(file_id)?;
    let summary = lines::index_file::<IndexError>(
        &file,
        stamp.size,
        |entry| Ok(sink.push(entry)?),
        |n| {
            done += n;
            on_progress(done);
        },
    )
    .map_err(|e| match e {
        IndexError::Io(source) => io_error(source),
        IndexError::Store(e) => ImportError::Store(e),
    })?;
    let digest = sink.finish()?;
    Ok(FileRecord {
        file_id,
        size: summary.bytes,
        mtime_ns: stamp.mtime_ns,
        lines: summary.lines,
        digest,
    })
}

/// Errors while streaming a file into the store.
enum IndexError {
    Io(io::Error),
    Store(StoreError),
}

impl From<io::Error> for IndexError {
    fn from(e: io::Error) -> Self {
        IndexError::Io(e)
    }
}

impl From<StoreError> for IndexError {
    fn from(e: StoreError) -> Self {
        IndexError::Store(e)
    }
}

/// Drops projects and sessions that left the workspace, with their line tables.
fn remove_stale(writer: &mut Writer, workspace: &Workspace) -> Result<(), StoreError> {
    for (project_key, record) in writer.all_sessions()? {
        let present = workspace
            .projects
            .iter()
            .any(|p| p.key == project_key && p.session(&record.session.session_ref).is_some());
        if !present {
            if let FileState::Indexed(file) = &record.file {
                writer.delete_lines(file.file_id)?;
            }
            writer.remove_session(&project_key, &record.session.session_ref)?;
        }
    }
    for key in writer.all_projects()? {
        if !workspace.projects.iter().any(|p| p.key == key) {
            writer.remove_project(&key)?;
        }
    }
    Ok(())
}

/// Relative paths of the workspace documents the store mirrors.
pub fn document_paths(workspace: &Workspace) -> Vec<String> {
    let mut paths = Vec::new();
    for project in &workspace.projects {
        for session in &project.sessions {
            paths.push(card_path(&project.key, &session.session_ref));
        }
        paths.push(envelope_path(&project.key));
    }
    paths.push(DAILY_REPORT.to_owned());
    paths
}

pub const DAILY_REPORT: &str = "daily-report.json";

pub fn card_path(project_key: &str, session_ref: &str) -> String {
    format!("projects/{project_key}/evidence/{session_ref}.json")
}

pub fn envelope_path(project_key: &str) -> String {
    format!("projects/{project_key}/project-synthesis.json")
}

/// Mirrors the documents on disk: files present are stored as they are (the tools that
/// use them validate them), files absent are forgotten. Returns how many are stored.
fn sync_documents(
    writer: &mut Writer,
    root: &WorkspaceRoot,
    workspace: &Workspace,
) -> Result<usize, ImportError> {
    let wanted = document_paths(workspace);
    for stale in writer.document_paths()? {
        if !wanted.contains(&stale) {
            writer.remove_document(&stale)?;
        }
    }
    let mut stored = 0;
    for rel in &wanted {
        let path = root.path.join(rel);
        match std::fs::read(&path) {
            Ok(bytes) => {
                writer.put_document(rel, &DocumentRecord::new(bytes))?;
                stored += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => writer.remove_document(rel)?,
            Err(source) => {
                return Err(ImportError::Io {
                    path: path.display().to_string(),
                    source,
                });
            }
        }
    }
    Ok(stored)
}
