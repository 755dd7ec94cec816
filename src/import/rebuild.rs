//! `import --rebuild`: a fresh store built from the workspace files alone, put in place
//! of the old one (damaged, or simply distrusted) in one rename.
//!
//! Servers must not be running, and a rebuild refuses to start while another process has
//! the store open for writing. One that starts during the rebuild (the check is not a
//! lock) keeps the old file open, its inode living on after the rename: it goes on
//! answering reads from the old store, but it refuses every write once the file at the
//! store's path is no longer the one it opened, and a write it completed before the
//! rename is adopted from its file by the import that follows the rename. Stop every
//! `serve`, rebuild, then start them again.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::import::{self, ImportError, ImportOptions, ImportReport, Progress};
use crate::store::{OpenError, Store};
use crate::util::disk::Disk;
use crate::util::fsutil;
use crate::workspace::WorkspaceRoot;

#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Import(#[from] ImportError),
    #[error(
        "another process (an `evidence-store serve` or `import`) has {path} open; stop every \
         server first: a server left running would keep answering from, and writing to, \
         the replaced file"
    )]
    InUse { path: String },
    #[error("cannot put the rebuilt store {temp} in place of {path}: {source}")]
    Replace {
        temp: String,
        path: String,
        source: std::io::Error,
    },
}

/// The scratch file a rebuild of `store` writes before renaming it into place:
/// `.<store name>.rebuild-<pid>.<random>`, new to this run (created exclusively, so a
/// file planted at a name that can be guessed is never opened).
pub fn temp_store_path(store: &Path) -> PathBuf {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let mut name = std::ffi::OsString::from(".");
    name.push(store.file_name().unwrap_or_default());
    name.push(format!(".rebuild-{}.{random:016x}", std::process::id()));
    store.with_file_name(name)
}

/// Builds a new store from the workspace (every session file hashed, every document
/// adopted from disk) beside `store_path`, then renames it over `store_path`. On any
/// failure the old store is left as it was and the scratch file is removed. Every write
/// goes through `disk`.
pub fn rebuild(
    root: &WorkspaceRoot,
    store_path: &Path,
    citations: crate::citations::Options,
    progress: &dyn Progress,
    locks: &crate::util::wait::Locks,
    disk: &Disk,
) -> Result<ImportReport, RebuildError> {
    // Loaded before anything is made: a directory that is no workspace gets nothing.
    let workspace = crate::workspace::load(root).map_err(ImportError::from)?;
    if crate::store::open_by_a_writer(store_path) {
        return Err(RebuildError::InUse {
            path: store_path.display().to_string(),
        });
    }
    let temp = temp_store_path(store_path);
    remove_abandoned_scratch(store_path);
    let ends = Ends {
        store: store_path,
        temp: &temp,
    };
    let result = build_and_replace(root, &workspace, ends, citations, progress, locks, disk);
    // The name is this run's own (pid and random): whatever is there, this run made it.
    if result.is_err() {
        let _ = fsutil::remove_file(disk, &temp);
    }
    result
}

/// The two ends of a rebuild's rename: the store it replaces and the scratch file it
/// builds first.
#[derive(Clone, Copy)]
struct Ends<'a> {
    store: &'a Path,
    temp: &'a Path,
}

fn build_and_replace(
    root: &WorkspaceRoot,
    workspace: &crate::workspace::Workspace,
    Ends {
        store: store_path,
        temp,
    }: Ends<'_>,
    citations: crate::citations::Options,
    progress: &dyn Progress,
    locks: &crate::util::wait::Locks,
    disk: &Disk,
) -> Result<ImportReport, RebuildError> {
    let report = {
        let store = Store::create_new(temp, locks.timeout, disk.clone())?;
        import::import_loaded(
            root,
            workspace,
            &store,
            ImportOptions {
                rehash: true,
                citations,
            },
            progress,
            locks,
        )?
    };
    let replace_error = |source| RebuildError::Replace {
        temp: temp.display().to_string(),
        path: store_path.display().to_string(),
        source,
    };
    File::open(temp)
        .and_then(|f| fsutil::sync_file(disk, &f))
        .map_err(replace_error)?;
    import::pause_point("before-rename");
    // The last point at which a stop leaves the old store in place.
    crate::util::stop::check().map_err(|e| RebuildError::Import(e.into()))?;
    let dir = store_path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let (Some(from), Some(to)) = (temp.file_name(), store_path.file_name()) else {
        return Err(replace_error(std::io::ErrorKind::InvalidInput.into()));
    };
    fsutil::rename_durably(disk, dir, from, to).map_err(replace_error)?;
    // A server that had the old store open may have written a document after the rebuild
    // read the files and before the rename (later writes it refuses: the file it opened
    // is no longer the store). That document is on disk; an ordinary import, under the
    // document lock, adopts it into the new store before anything can export over it.
    let adopted = Store::open_on(store_path, locks.timeout, disk.clone())
        .map_err(RebuildError::from)
        .and_then(|store| {
            import::import(
                root,
                &store,
                ImportOptions {
                    rehash: false,
                    citations,
                },
                progress,
                locks,
            )
            .map_err(RebuildError::from)
        });
    if let Err(e) = adopted {
        tracing::warn!(error = %e, "the rebuilt store is in place, but adopting documents written meanwhile failed: run `evidence-store import`");
    }
    Ok(report)
}

/// Removes scratch files of rebuilds that were killed: those whose process is gone. (A
/// reused process id only leaves a file behind for a later command to remove.) Every
/// command that names a store calls it, not only a later rebuild.
pub fn remove_abandoned_scratch(store_path: &Path) {
    let (Some(dir), Some(name)) = (store_path.parent(), store_path.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!(".{}.rebuild-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_string_lossy()
            .strip_prefix(&prefix)
            .map(str::to_owned)
        else {
            continue;
        };
        // `<pid>` (before the random part was added) or `<pid>.<random>`.
        let pid = pid.split_once('.').map_or(pid.as_str(), |(pid, _)| pid);
        let alive = pid.parse::<u32>().is_ok_and(|pid| {
            pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists()
        });
        if !alive {
            tracing::info!(path = %entry.path().display(), "removing an abandoned rebuild");
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
