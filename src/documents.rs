//! Workspace documents (evidence cards, envelopes, the daily report): the store's copy
//! and the file on disk.
//!
//! The store is the truth while a run is live, but prompt-diary's own steps also change
//! these files (its extraction runner deletes an incomplete card before re-extracting and
//! writes empty cards itself). So before a tool uses a document, [`sync`] brings the store
//! in line with the file: deleted means forgotten, changed means re-read. A tool that
//! writes replaces the file atomically inside its store transaction, before committing.

use std::io;
use std::path::Path;

use crate::fsutil;
use crate::store::{DocumentRecord, Lookup, Store, StoreError, Writer};

#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("{rel} cannot be read: {source}")]
    Unreadable { rel: String, source: io::Error },
    #[error("{rel} cannot be written: {source}")]
    Unwritable { rel: String, source: io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The document as it is on disk now, recorded in the write transaction if the store's
/// copy differs. `None` when the file does not exist.
pub fn sync(writer: &mut Writer, root: &Path, rel: &str) -> Result<Option<Vec<u8>>, DocumentError> {
    match std::fs::read(root.join(rel)) {
        Ok(bytes) => {
            if writer
                .document(rel)?
                .is_none_or(|stored| stored.bytes != bytes)
            {
                tracing::info!(rel, "document changed on disk; adopting it");
                writer.put_document(rel, &DocumentRecord::new(bytes.clone()))?;
            }
            Ok(Some(bytes))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if writer.document(rel)?.is_some() {
                tracing::info!(rel, "document deleted on disk; forgetting it");
                writer.remove_document(rel)?;
            }
            Ok(None)
        }
        Err(source) => Err(DocumentError::Unreadable {
            rel: rel.to_owned(),
            source,
        }),
    }
}

/// Replaces the file and records it, in the caller's transaction (commit follows).
pub fn write(
    writer: &mut Writer,
    root: &Path,
    rel: &str,
    bytes: Vec<u8>,
) -> Result<(), DocumentError> {
    fsutil::atomic_write(&root.join(rel), &bytes).map_err(|source| DocumentError::Unwritable {
        rel: rel.to_owned(),
        source,
    })?;
    writer.put_document(rel, &DocumentRecord::new(bytes))?;
    Ok(())
}

/// What `export` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportReport {
    pub written: usize,
    pub unchanged: usize,
    pub temp_files_removed: usize,
}

/// Materialises every stored document under `root` (atomically, skipping files that are
/// already identical) and removes temp files a killed writer left behind.
pub fn export(store: &Store, root: &Path) -> Result<ExportReport, DocumentError> {
    let reader = store.reader()?;
    let mut report = ExportReport {
        temp_files_removed: remove_temp_files(root, &reader)?,
        ..ExportReport::default()
    };
    for rel in reader.document_paths()? {
        let Some(doc) = reader.document(&rel)? else {
            continue;
        };
        let path = root.join(&rel);
        if std::fs::read(&path).is_ok_and(|on_disk| on_disk == doc.bytes) {
            report.unchanged += 1;
            continue;
        }
        fsutil::atomic_write(&path, &doc.bytes).map_err(|source| DocumentError::Unwritable {
            rel: rel.clone(),
            source,
        })?;
        report.written += 1;
    }
    Ok(report)
}

/// Removes `<document>.tmp` files (left by a writer killed between writing and renaming)
/// wherever documents live.
fn remove_temp_files(root: &Path, reader: &crate::store::Reader) -> Result<usize, DocumentError> {
    let mut dirs = vec![root.to_path_buf()];
    if let Some(workspace) = reader.workspace()? {
        for key in &workspace.project_keys {
            let project = root.join("projects").join(key);
            dirs.push(project.join("evidence"));
            dirs.push(project);
        }
    }
    let mut removed = 0;
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let temp_of = name.to_string_lossy();
            let temp_of = temp_of
                .strip_suffix(fsutil::TEMP_SUFFIX)
                .unwrap_or_default();
            if temp_of.ends_with(".json") {
                std::fs::remove_file(entry.path()).map_err(|source| DocumentError::Unwritable {
                    rel: entry.path().display().to_string(),
                    source,
                })?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}
