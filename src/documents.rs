//! Workspace documents (evidence cards, envelopes, the daily report): the store's copy
//! and the file on disk.
//!
//! The store is the truth while a run is live, but prompt-diary's own steps also change
//! these files (its extraction runner deletes an incomplete card before re-extracting and
//! writes empty cards itself). So before a tool uses a document, [`sync`] brings the store
//! in line with the file: deleted means forgotten, changed means re-read. A tool that
//! writes replaces the file atomically inside its store transaction, before committing,
//! and puts the previous file back if the commit fails.

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

/// The document as it is on disk now (read only if its real location is inside the
/// workspace), recorded in the write transaction if the store's copy differs. `None` when
/// the file does not exist.
pub fn sync(writer: &mut Writer, root: &Path, rel: &str) -> Result<Option<Vec<u8>>, DocumentError> {
    match fsutil::read_confined(root, rel) {
        Ok(Some(bytes)) => {
            if writer
                .document(rel)?
                .is_none_or(|stored| stored.bytes != bytes)
            {
                tracing::info!(rel, "document changed on disk; adopting it");
                writer.put_document(rel, &DocumentRecord::new(bytes.clone()))?;
            }
            Ok(Some(bytes))
        }
        Ok(None) => {
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

/// Where the workspace's document lock lives, relative to the workspace root.
pub const LOCK_FILE: &str = ".evidence-store/documents.lock";

/// The workspace's document lock (an exclusive `flock`, dropped by the kernel when the
/// process dies). Every write of a document holds it from before its store transaction
/// starts until the file is kept or put back, and so do `export` and `import`: nobody
/// reads or replaces a document file while another process's write of it is undecided,
/// and no temp file exists outside a holder of the lock.
pub struct DocumentLock {
    _file: std::fs::File,
}

/// Takes the document lock, waiting while another process holds it.
pub fn lock(root: &Path) -> Result<DocumentLock, DocumentError> {
    let file =
        fsutil::open_lock_file(root, LOCK_FILE).map_err(|source| DocumentError::Unwritable {
            rel: LOCK_FILE.to_owned(),
            source,
        })?;
    file.lock().map_err(|source| DocumentError::Unwritable {
        rel: LOCK_FILE.to_owned(),
        source,
    })?;
    Ok(DocumentLock { _file: file })
}

/// A document file replaced inside a write transaction that is not committed yet.
#[must_use = "pass it to `commit`, which keeps the file or puts the previous one back"]
pub struct Written {
    rel: String,
    replacement: fsutil::Replacement,
}

/// Replaces the file and records it, in the caller's transaction, under the document lock
/// ([`lock`]); [`commit`] follows.
pub fn write(
    writer: &mut Writer,
    root: &Path,
    rel: &str,
    bytes: Vec<u8>,
) -> Result<Written, DocumentError> {
    let replacement =
        fsutil::replace(root, rel, &bytes).map_err(|source| DocumentError::Unwritable {
            rel: rel.to_owned(),
            source,
        })?;
    let written = Written {
        rel: rel.to_owned(),
        replacement,
    };
    if let Err(e) = writer.put_document(rel, &DocumentRecord::new(bytes)) {
        undo(written);
        return Err(e.into());
    }
    Ok(written)
}

/// Commits the transaction that replaced a document. Either both the store and the file
/// hold the new document, or neither does: when the commit fails, the previous file is put
/// back (or the new one removed) before the error is returned.
pub fn commit(writer: Writer, written: Written) -> Result<(), DocumentError> {
    fsutil::fault::die("die-before-commit");
    let result = match fsutil::fault::inject("commit") {
        Ok(()) => writer.commit().map_err(DocumentError::from),
        Err(e) => {
            drop(writer);
            Err(DocumentError::Unwritable {
                rel: written.rel.clone(),
                source: e,
            })
        }
    };
    match result {
        Ok(()) => {
            fsutil::fault::die("die-after-commit");
            written.replacement.keep();
            Ok(())
        }
        Err(e) => {
            undo(written);
            Err(e)
        }
    }
}

fn undo(written: Written) {
    let path = written.replacement.path().display().to_string();
    if let Err(e) = written.replacement.undo() {
        // The file is then one unacknowledged write ahead of the store; the next sync
        // adopts it or `export` replaces it.
        tracing::error!(rel = written.rel, path, error = %e, "could not put the previous file back");
    }
}

/// What `export` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportReport {
    pub written: usize,
    pub unchanged: usize,
    pub temp_files_removed: usize,
}

/// Materialises every stored document under `root` (atomically, skipping files that are
/// already identical) and removes temp files a killed writer left behind. Runs under the
/// document lock and inside the store's write transaction, which it never commits: no
/// writer is between replacing a file and keeping or undoing it while export runs, and no
/// temp file it removes belongs to a live writer (writers have them only under the lock).
pub fn export(store: &Store, root: &Path) -> Result<ExportReport, DocumentError> {
    let _lock = lock(root)?;
    let writer = store.writer()?;
    let mut report = ExportReport {
        temp_files_removed: remove_temp_files(root, &writer)?,
        ..ExportReport::default()
    };
    for rel in writer.document_paths()? {
        let Some(doc) = writer.document(&rel)? else {
            continue;
        };
        let unwritable = |source| DocumentError::Unwritable {
            rel: rel.clone(),
            source,
        };
        if fsutil::read_confined(root, &rel)
            .map_err(unwritable)?
            .is_some_and(|on_disk| on_disk == doc.bytes)
        {
            report.unchanged += 1;
            continue;
        }
        fsutil::atomic_write(root, &rel, &doc.bytes).map_err(unwritable)?;
        report.written += 1;
    }
    drop(writer);
    Ok(report)
}

/// Removes this program's temp files ([`fsutil::is_temp_name`]; never prompt-diary's
/// `<name>.tmp` nor anything else) wherever documents live, in directories whose real
/// location is inside the workspace.
fn remove_temp_files(root: &Path, writer: &Writer) -> Result<usize, DocumentError> {
    let mut dirs = vec![String::new()];
    if let Some(workspace) = writer.workspace()? {
        for key in &workspace.project_keys {
            dirs.push(format!("projects/{key}/evidence"));
            dirs.push(format!("projects/{key}"));
        }
    }
    let real_root = fsutil::real_root(root).map_err(|source| DocumentError::Unreadable {
        rel: root.display().to_string(),
        source,
    })?;
    let mut removed = 0;
    for dir in dirs {
        let Ok(real) = root.join(&dir).canonicalize() else {
            continue;
        };
        if !real.starts_with(&real_root) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&real) else {
            continue;
        };
        for entry in entries.flatten() {
            if !fsutil::is_temp_name(&entry.file_name().to_string_lossy()) {
                continue;
            }
            std::fs::remove_file(entry.path()).map_err(|source| DocumentError::Unwritable {
                rel: entry.path().display().to_string(),
                source,
            })?;
            removed += 1;
        }
    }
    Ok(removed)
}
