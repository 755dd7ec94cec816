//! The redb store: the only module that knows redb.
//!
//! Every process opens the file in redb's multi-writer mode, so any number of `serve`
//! processes (and an `import`) share it: reads run on snapshots, and write transactions
//! are serialised by redb across processes. A killed process leaves no lock behind (the
//! kernel drops its byte-range locks) and no torn state (redb's commits are atomic).

mod backend;
pub mod citations;
pub mod codec;
pub mod contract;
#[cfg(test)]
mod format_tests;
mod guard;
mod kind;
mod migrate;
mod records;
pub mod schema;
pub mod verify;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use redb::backends::FileBackend;
use redb::{
    ConcurrencyMode, Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, TableDefinition, WriteTransaction,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::util::lines::LineEntry;
use crate::workspace::{Metadata, Session};
use codec::{CodecError, LINES_PER_BLOCK};
use schema::*;

pub use schema::SCHEMA_VERSION;

/// Page cache per process: enough for the hot tables, small enough that several servers
/// and a large import stay well under their memory budget.
const CACHE_BYTES: usize = 32 << 20;

/// The imported workspace as a whole; stored as `records::StoredWorkspace`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "records::StoredWorkspace", into = "records::StoredWorkspace")]
pub struct WorkspaceRecord {
    /// The workspace root as messages print it.
    pub root_display: String,
    pub metadata: Metadata,
    /// Project keys in directory-name order.
    pub project_keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectRecord {
    pub key: String,
    pub label: String,
    /// Session refs in index-file order.
    pub session_refs: Vec<String>,
}

/// A session's index row and file record; stored as `records::StoredSessionRecord`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    from = "records::StoredSessionRecord",
    into = "records::StoredSessionRecord"
)]
pub struct SessionRecord {
    pub session: Session,
    pub file: FileState,
}

/// What import found at a session's `session_path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileState {
    /// Not there, or not a regular file: reads answer "missing from the prepared workspace".
    Missing,
    Indexed(FileRecord),
}

/// An indexed session file: how to recognise it unchanged, and where its lines are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create the store directory {path}: {source}")]
    CreateDir {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot open the store {path}: {source}")]
    Database {
        path: String,
        source: Box<redb::Error>,
    },
    #[error(
        "the store {path} has schema version {found}, newer than this evidence-store supports ({supported}); \
         upgrade evidence-store, or if no newer one wrote it the store is damaged: \
         run evidence-store verify or evidence-store import --rebuild"
    )]
    NewerSchema {
        path: String,
        found: u64,
        supported: u64,
    },
    #[error(
        "the store {path} has schema version {found}, older than this evidence-store's ({supported}); \
         a read-only open cannot upgrade it: run `evidence-store import` first"
    )]
    OlderSchema {
        path: String,
        found: u64,
        supported: u64,
    },
    #[error(
        "{path} is a redb file but not an evidence-store store (it has tables but no schema version); \
         if it was one, it is damaged: run evidence-store verify or evidence-store import --rebuild"
    )]
    Foreign { path: String },
    #[error(
        "the store {path} was not closed cleanly (a writer was killed) and a read-only open cannot \
         repair it: run `evidence-store import` once (it repairs the file), then retry"
    )]
    NeedsRepair { path: String },
    #[error(
        "the store {path} cannot be used: {why}; nothing was written through it (remove what is at that name, then run `evidence-store import`)"
    )]
    NotOwnFile { path: String, why: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A failure reading or writing an open store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store error: {0}")]
    Db(#[from] Box<redb::Error>),
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error("the store has no workspace yet: run `evidence-store import`")]
    NotImported,
    #[error("the store is inconsistent: {0}")]
    Inconsistent(String),
    #[error(
        "the store at {path} is damaged: {detail}; run evidence-store verify or evidence-store import --rebuild"
    )]
    Damaged { path: String, detail: String },
    #[error(
        "the disk holding the store at {path} is full ({detail}); nothing was written: free space and retry"
    )]
    DiskFull { path: String, detail: String },
    #[error(
        "another write transaction has held the store's write lock ({path}) for the last {waited_secs} s \
         ({var} sets how long to wait): if an evidence-store process is stuck, stop it, then retry; \
         nothing was written",
        var = crate::util::wait::TIMEOUT_VAR
    )]
    Busy { path: String, waited_secs: u64 },
    #[error("the store at {path} is open read-only")]
    ReadOnly { path: String },
    #[error(
        "the store at {path} was replaced (by `evidence-store import --rebuild`) after this process opened it; nothing was written: run the command again, or restart this server"
    )]
    Replaced { path: String },
}

impl StoreError {
    /// redb latched an I/O failure: the database must be closed and opened again.
    fn needs_reopen(&self) -> bool {
        match self {
            StoreError::Db(e) => matches!(e.as_ref(), redb::Error::PreviousIo),
            StoreError::DiskFull { .. } => true,
            _ => false,
        }
    }
}

/// Turns any of redb's per-operation error types into a [`StoreError`].
trait OrStore<T> {
    fn store(self) -> Result<T, StoreError>;
}

impl<T, E: Into<redb::Error>> OrStore<T> for Result<T, E> {
    fn store(self) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::Db(Box::new(e.into())))
    }
}

/// The open database: writable (the normal case), or read-only for `dump` and `verify`.
enum Db {
    Write(Writable),
    ReadOnly(ReadOnlyDatabase),
}

impl Db {
    fn begin_read(&self) -> Result<ReadTransaction, redb::TransactionError> {
        match self {
            Db::Write(db) => db.begin_read(),
            Db::ReadOnly(db) => db.begin_read(),
        }
    }
}

/// A database open for writing, closed (when the last user lets it go) behind the
/// store's gate ([`backend::Gate`]): the close writes the file outside any write
/// transaction.
struct Writable {
    /// `Some` until dropped.
    db: Option<Database>,
    gate: Arc<backend::Gate>,
    shown: Arc<str>,
}

impl std::ops::Deref for Writable {
    type Target = Database;

    fn deref(&self) -> &Database {
        match &self.db {
            Some(db) => db,
            None => unreachable!("the database is taken only by drop"),
        }
    }
}

impl Drop for Writable {
    fn drop(&mut self) {
        let held = self.gate.hold_for_writing(&self.shown);
        guarded_drop(&self.shown, self.db.take());
        drop(held);
    }
}

/// An open store.
pub struct Store {
    path: PathBuf,
    shown: Arc<str>,
    read_only: bool,
    /// Replaced by a fresh open when redb latches an I/O error (a full disk), so one
    /// failed commit does not fail every later call.
    /// Always `Some` until drop.
    db: RwLock<Option<Arc<Db>>>,
    fault: Option<Arc<backend::Fault>>,
    /// The (device, inode) of the file opened for writing, or `None` read-only.
    file_id: RwLock<Option<(u64, u64)>>,
}

/// Where a workspace's own store is, relative to the workspace (`--store` may choose
/// another place).
pub const WORKSPACE_STORE: &str = ".evidence-store/store.redb";

/// Refuses the workspace's own store when its real location is outside the workspace: a
/// symlink planted at `.evidence-store` or at the store file (dangling or not) would make
/// this program create or take over a store elsewhere. A store at any other path was
/// named with `--store`, the user's choice, and is not checked.
pub fn check_own_store(root: &Path, store_path: &Path) -> Result<(), String> {
    if store_path != root.join(WORKSPACE_STORE) {
        return Ok(());
    }
    match crate::util::fsutil::check_confined(root, WORKSPACE_STORE) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(format!(
            "the store {} cannot be used: {e}",
            store_path.display()
        )),
        // Anything else (no workspace there, say) is for the opening to report.
        _ => Ok(()),
    }
}

/// Whether `path` (or its directory, when it does not exist) is on a file system mounted
/// read-only.
pub fn on_read_only_media(path: &Path) -> bool {
    let existing = if path.exists() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    rustix::fs::statvfs(existing)
        .is_ok_and(|s| s.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY))
}

impl Store {
    /// Opens the store at `path`, creating it (and its directory) when missing, and
    /// bringing an older schema up to date.
    pub fn open(path: &Path) -> Result<Store, OpenError> {
        Store::open_as(path, Access::Write)
    }

    /// Creates a new store at `path`, which must not exist (a rebuild's scratch file):
    /// nothing planted at the name is ever opened.
    pub fn create_new(path: &Path) -> Result<Store, OpenError> {
        Store::open_as(path, Access::New)
    }

    fn open_as(path: &Path, access: Access) -> Result<Store, OpenError> {
        let shown = path.display().to_string();
        // A workspace's own store directory is made beneath the root when it is opened.
        if let Some(dir) = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty() && workspace_of_store(path).is_none())
        {
            std::fs::create_dir_all(dir).map_err(|source| OpenError::CreateDir {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let fault = backend::Fault::from_env();
        let (db, file_id, held) = match access {
            Access::New => try_open_writable_as(path, &shown, fault.clone(), Access::New)?,
            _ => open_writable(path, &shown, fault.clone())?,
        };
        // Still behind the gate: an upgrade commits outside any document write.
        let guarded = guard::guard(&shown, || match migrate::ensure_current(&db, &shown) {
            Err(OpenError::Database { source, .. }) => Err(StoreError::Db(source)),
            Err(OpenError::Store(e)) => Err(e),
            Err(other) => Ok(Err(other)),
            Ok(()) => Ok(Ok(())),
        });
        // Let go before `db` can be dropped: its close takes the gate itself.
        drop(held);
        guarded.map_err(|e| open_error(&shown, e))??;
        Ok(Store {
            path: path.to_path_buf(),
            shown: shown.into(),
            read_only: false,
            db: RwLock::new(Some(Arc::new(Db::Write(db)))),
            fault,
            file_id: RwLock::new(Some(file_id)),
        })
    }

    /// Opens an existing store without writing to it (no migration, no repair), so that
    /// it can be inspected on read-only media or while it must not change.
    pub fn open_read_only(path: &Path) -> Result<Store, OpenError> {
        let shown = path.display().to_string();
        let db = open_read_only(path, &shown)?;
        let store = Store {
            path: path.to_path_buf(),
            shown: shown.clone().into(),
            read_only: true,
            db: RwLock::new(Some(Arc::new(Db::ReadOnly(db)))),
            fault: None,
            file_id: RwLock::new(None),
        };
        match store.reader()?.schema_version()? {
            Some(SCHEMA_VERSION) => Ok(store),
            Some(found) if found > SCHEMA_VERSION => Err(OpenError::NewerSchema {
                path: shown,
                found,
                supported: SCHEMA_VERSION,
            }),
            Some(found) => Err(OpenError::OlderSchema {
                path: shown,
                found,
                supported: SCHEMA_VERSION,
            }),
            None => Err(OpenError::Foreign { path: shown }),
        }
    }

    /// The store's path as messages print it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The store file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn current(&self) -> Result<Arc<Db>, StoreError> {
        let slot = match self.db.read() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        };
        slot.clone()
            .ok_or_else(|| StoreError::Inconsistent("the store is closed".to_owned()))
    }

    /// Opens the file again in place of `failed` (unless another caller already did).
    fn reopen(&self, failed: &Arc<Db>) -> Result<(), StoreError> {
        let mut slot = match self.db.write() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !slot.as_ref().is_some_and(|db| Arc::ptr_eq(db, failed)) {
            return Ok(());
        }
        tracing::warn!(store = %self.shown, "reopening the store after an I/O error");
        let fresh = if self.read_only {
            Db::ReadOnly(open_read_only(&self.path, &self.shown).map_err(open_to_store)?)
        } else {
            let (db, file_id, held) = open_writable(&self.path, &self.shown, self.fault.clone())
                .map_err(open_to_store)?;
            // Let go before the old database is dropped: its close takes the gate.
            drop(held);
            match self.file_id.write() {
                Ok(mut slot) => *slot = Some(file_id),
                Err(poisoned) => *poisoned.into_inner() = Some(file_id),
            }
            Db::Write(db)
        };
        if let Some(old) = slot.replace(Arc::new(fresh)) {
            guarded_drop(&self.shown, old);
        }
        Ok(())
    }

    /// Runs `f` on the open database; when redb reports that an earlier I/O error (a
    /// full disk) poisoned it, opens the file again and runs `f` once more.
    fn with_db<T>(&self, f: impl Fn(&Db) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let db = self.current()?;
        match guard::guard(&self.shown, || f(&db)) {
            Err(e) if e.needs_reopen() => {
                self.reopen(&db)?;
                let db = self.current()?;
                guard::guard(&self.shown, || f(&db))
            }
            other => other,
        }
    }

    /// A consistent snapshot of the latest commit.
    pub fn reader(&self) -> Result<Reader, StoreError> {
        self.with_db(|db| {
            Ok(Reader {
                txn: Some(db.begin_read().store()?),
                shown: self.shown.clone(),
            })
        })
    }

    /// Starts the (cross-process) write transaction; waits while another one is open, at
    /// most [`crate::util::wait::lock_timeout`] ([`StoreError::Busy`] then).
    pub fn writer(&self) -> Result<Writer, StoreError> {
        self.check_not_replaced()?;
        self.with_db(|db| {
            let Db::Write(db) = db else {
                return Err(StoreError::ReadOnly {
                    path: self.shown.to_string(),
                });
            };
            let mut txn = begin_write_within(db, &self.shown, crate::util::wait::lock_timeout())?;
            // Saves the allocator state with each commit, so that the next open after a
            // crash does not have to walk the whole file to repair it.
            txn.set_quick_repair(true);
            Ok(Writer {
                txn: Some(txn),
                shown: self.shown.clone(),
                fault: self.fault.clone(),
                stores_document: false,
            })
        })
    }
}

/// Begins a write transaction, waiting while another (in any process) is open, at most
/// `timeout`: a writer that is stopped (SIGSTOP, a debugger) or stuck must not stop every
/// other writer for ever.
pub(super) fn begin_write_within(
    db: &Database,
    shown: &str,
    timeout: std::time::Duration,
) -> Result<redb::WriteTransaction, StoreError> {
    let mut poll = crate::util::wait::Poll::new(timeout);
    let mut said = false;
    loop {
        match db.try_begin_write() {
            Err(redb::TransactionError::WouldBlock) => {}
            other => return other.store(),
        }
        if !said && poll.waited() >= std::time::Duration::from_millis(500) {
            tracing::warn!(
                store = shown,
                "waiting for another write transaction on the store to end; giving up after {} s",
                crate::util::wait::secs(poll.timeout())
            );
            said = true;
        }
        if !poll.sleep() {
            return Err(StoreError::Busy {
                path: shown.to_owned(),
                waited_secs: crate::util::wait::secs(poll.waited()),
            });
        }
    }
}

impl Store {
    /// A write must reach the file at the store's path: one that `import --rebuild` renamed
    /// a new store over (or that was removed) after this process opened it would take the
    /// write with it, so the write is refused instead. Callers start their write after
    /// taking the document lock, which the rebuild's final step holds too.
    fn check_not_replaced(&self) -> Result<(), StoreError> {
        let opened = match self.file_id.read() {
            Ok(slot) => *slot,
            Err(poisoned) => *poisoned.into_inner(),
        };
        let Some(opened) = opened else {
            return Ok(());
        };
        let now = std::fs::metadata(&self.path).ok().map(|m| file_id(&m));
        if now == Some(opened) {
            Ok(())
        } else {
            Err(StoreError::Replaced {
                path: self.shown.to_string(),
            })
        }
    }
}

fn file_id(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// Whether another process has the store at `path` open for writing (a `serve`, an
/// `import`). A damaged or missing file counts as not in use.
pub fn open_by_a_writer(path: &Path) -> bool {
    let shown = path.display().to_string();
    let Ok(file) = store_file(path, &shown, Access::Read) else {
        return false;
    };
    let probe = guard::guard(&shown, || {
        match Database::builder().open_read_only_with_backend(FileBackend::new(file).store()?) {
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => Ok(true),
            _ => Ok(false),
        }
    });
    probe.unwrap_or(false)
}

/// Removes the store at `path` if it holds no workspace and no other process has it
/// open: what a first import leaves when it fails or is stopped. Returns whether it did.
pub fn remove_if_unused(path: &Path) -> bool {
    if open_by_a_writer(path) {
        return false;
    }
    // Anything that does not open as an empty store of ours is left alone.
    let unused = Store::open_read_only(path)
        .and_then(|store| Ok(!store.reader()?.has_workspace()?))
        .unwrap_or(false);
    if unused {
        tracing::info!(store = %path.display(), "removing the store a failed first import created");
        let _ = std::fs::remove_file(path);
    }
    unused
}

impl Drop for Store {
    fn drop(&mut self) {
        let db = match self.db.get_mut() {
            Ok(slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        guarded_drop(&self.shown, db);
    }
}

fn open_to_store(e: OpenError) -> StoreError {
    match e {
        OpenError::Store(e) => e,
        OpenError::Database { source, .. } => StoreError::Db(source),
        other => StoreError::Inconsistent(other.to_string()),
    }
}

/// A writable open: the database, the file's (device, inode), and the store's gate while
/// it is still held.
type Opened = (Writable, (u64, u64), Option<backend::GateHold>);

/// Opens (or creates) the file for reading and writing, in multi-writer mode; the
/// store's gate is still held (when it could be had), for the caller to let go once its
/// own first writes (an upgrade) are done.
fn open_writable(
    path: &Path,
    shown: &str,
    fault: Option<Arc<backend::Fault>>,
) -> Result<Opened, OpenError> {
    // How long a writable open waits while another process has the store open read-only
    // (`dump`, `verify`, a rebuild's in-use probe): redb refuses a writer beside a
    // read-only handle, and those commands hold theirs only briefly.
    let deadline = std::time::Instant::now() + crate::util::wait::lock_timeout();
    let mut said = false;
    loop {
        match try_open_writable(path, shown, fault.clone()) {
            Err(OpenError::Database { source, .. })
                if matches!(*source, redb::Error::DatabaseAlreadyOpen)
                    && std::time::Instant::now() < deadline
                    && crate::util::stop::requested().is_none() =>
            {
                if !said {
                    tracing::warn!(
                        store = shown,
                        "the store is open in another process that excludes writers (a `dump` or `verify`); waiting"
                    );
                    said = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// How the store file is opened by [`store_file`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// An existing file, read only.
    Read,
    /// Read and write, created when missing.
    Write,
    /// A new file (a rebuild's scratch file): created here, never an existing one.
    New,
}

/// Opens the store file and checks it by its descriptor before redb sees it: a regular
/// file with one link, owned by this user ([`fsutil::check_own`]); redb then works on
/// this very descriptor, never on the path again. A workspace's own store
/// (`<root>/.evidence-store/store.redb`) is opened beneath the workspace root, never
/// through a symlink at its name; a `--store` path is the user's choice and is followed.
fn store_file(path: &Path, shown: &str, access: Access) -> Result<std::fs::File, OpenError> {
    use crate::util::fsutil::{self, OwnOpen};
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |e: std::io::Error| match fsutil::not_own_file(&e) {
        Some(why) => OpenError::NotOwnFile {
            path: shown.to_owned(),
            why: why.to_string(),
        },
        None => OpenError::Database {
            path: shown.to_owned(),
            source: Box::new(e.into()),
        },
    };
    let own_root = (access != Access::New)
        .then(|| workspace_of_store(path))
        .flatten();
    let file = match own_root {
        Some(root) => {
            let how = match access {
                Access::Read => OwnOpen::Read,
                _ => OwnOpen::ReadWrite,
            };
            fsutil::open_own(&root, WORKSPACE_STORE, how)
                .and_then(|f| f.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound)))
                .map_err(failed)?
        }
        None => {
            let mut options = std::fs::OpenOptions::new();
            options.read(true).custom_flags(libc::O_NONBLOCK);
            match access {
                Access::Read => {}
                Access::Write => {
                    options.write(true).create(true).truncate(false);
                }
                Access::New => {
                    options.write(true).create_new(true);
                }
            }
            let file = options.open(path).map_err(failed)?;
            fsutil::check_own(&file).map_err(failed)?;
            let flags = rustix::fs::fcntl_getfl(&file).map_err(|e| failed(e.into()))?;
            rustix::fs::fcntl_setfl(&file, flags.difference(rustix::fs::OFlags::NONBLOCK))
                .map_err(|e| failed(e.into()))?;
            file
        }
    };
    Ok(file)
}

/// The workspace root of a workspace's own store path (`<root>/.evidence-store/store.redb`).
fn workspace_of_store(path: &Path) -> Option<PathBuf> {
    if !path.ends_with(WORKSPACE_STORE) {
        return None;
    }
    let root = path.parent()?.parent()?;
    Some(if root.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        root.to_path_buf()
    })
}

fn try_open_writable(
    path: &Path,
    shown: &str,
    fault: Option<Arc<backend::Fault>>,
) -> Result<Opened, OpenError> {
    try_open_writable_as(path, shown, fault, Access::Write)
}

fn try_open_writable_as(
    path: &Path,
    shown: &str,
    fault: Option<Arc<backend::Fault>>,
    access: Access,
) -> Result<Opened, OpenError> {
    let file = store_file(path, shown, access)?;
    let id = file
        .metadata()
        .map(|m| file_id(&m))
        .map_err(|e| OpenError::Database {
            path: shown.to_owned(),
            source: Box::new(e.into()),
        })?;
    let gate = Arc::new(
        backend::Gate::beside(&file).map_err(|e| OpenError::Database {
            path: shown.to_owned(),
            source: Box::new(e.into()),
        })?,
    );
    // The open writes the file (the live-writer flag, a repair) before any transaction.
    let held = gate.hold_for_writing(shown);
    let opened = guard::guard(shown, || {
        let backend = backend::Backend::new(FileBackend::new(file).store()?, fault);
        Database::builder()
            .set_concurrency_mode(ConcurrencyMode::MultiWriter)
            .set_cache_size(CACHE_BYTES)
            .create_with_backend(backend)
            .store()
    });
    let db = opened.map_err(|e| open_error(shown, e))?;
    let writable = Writable {
        db: Some(db),
        gate,
        shown: shown.into(),
    };
    Ok((writable, id, held))
}

/// Opens an existing file without writing to it; a store that needs repair (a writer
/// was killed) is refused by redb rather than repaired. The file is opened non-blocking
/// and checked first ([`store_file`]): a FIFO at the path would wait for a writer forever.
fn open_read_only(path: &Path, shown: &str) -> Result<ReadOnlyDatabase, OpenError> {
    let file = store_file(path, shown, Access::Read)?;
    // Behind the gate, the header read is never one a writer's open or close is halfway
    // through; past the wait's bound the open goes ahead without it.
    let _held = backend::Gate::beside(&file)
        .map(std::sync::Arc::new)
        .ok()
        .and_then(|gate| match gate.hold(false) {
            Ok(held) => Some(held),
            Err(e) => {
                tracing::warn!(store = shown, error = %e, "reading the store without its gate");
                None
            }
        });
    let opened = guard::guard(shown, || {
        Database::builder()
            .set_concurrency_mode(ConcurrencyMode::MultiWriter)
            .set_cache_size(CACHE_BYTES)
            .open_read_only_with_backend(FileBackend::new(file).store()?)
            .store()
    });
    opened.map_err(|e| match e {
        StoreError::Db(db) if matches!(*db, redb::Error::RepairAborted) => OpenError::NeedsRepair {
            path: shown.to_owned(),
        },
        other => open_error(shown, other),
    })
}

fn open_error(shown: &str, e: StoreError) -> OpenError {
    match e {
        StoreError::Db(source) => OpenError::Database {
            path: shown.to_owned(),
            source,
        },
        other => OpenError::Store(other),
    }
}

/// The record stored under `key` in `table`, decoded; `None` when there is none.
fn decoded<'k, K: redb::Key + 'static, T: serde::de::DeserializeOwned>(
    table: &impl ReadableTable<K, &'static [u8]>,
    key: impl std::borrow::Borrow<K::SelfType<'k>>,
    what: &'static str,
) -> Result<Option<T>, StoreError> {
    let value = table.get(key).store()?;
    Ok(value.map(|v| codec::decode(what, v.value())).transpose()?)
}

/// The lookups a snapshot and a write transaction both answer (a write transaction sees
/// its own uncommitted changes). Every lookup runs inside the store boundary's guard.
pub trait Lookup {
    /// Opens a table for reading.
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<impl ReadableTable<K, V>, StoreError>;

    /// The store's path as messages print it.
    fn shown(&self) -> &str;

    fn workspace(&self) -> Result<Option<WorkspaceRecord>, StoreError> {
        guard::guard(self.shown(), || {
            decoded(&self.table(WORKSPACE)?, WORKSPACE_KEY, "workspace")
        })
    }

    fn project(&self, key: &str) -> Result<Option<ProjectRecord>, StoreError> {
        guard::guard(self.shown(), || {
            decoded(&self.table(PROJECTS)?, key, "project")
        })
    }

    /// The prompt-diary contract of the imported workspace (0.2.10 when none is recorded).
    fn contract(&self) -> Result<crate::workspace::contract::Contract, StoreError> {
        contract::recorded(self)
    }

    /// Whether a workspace was imported, without decoding it.
    fn has_workspace(&self) -> Result<bool, StoreError> {
        guard::guard(self.shown(), || {
            Ok(self.table(WORKSPACE)?.get(WORKSPACE_KEY).store()?.is_some())
        })
    }

    /// Whether the project exists, without decoding it.
    fn has_project(&self, key: &str) -> Result<bool, StoreError> {
        guard::guard(self.shown(), || {
            Ok(self.table(PROJECTS)?.get(key).store()?.is_some())
        })
    }

    fn session(
        &self,
        project_key: &str,
        session_ref: &str,
    ) -> Result<Option<SessionRecord>, StoreError> {
        guard::guard(self.shown(), || {
            decoded(
                &self.table(SESSIONS)?,
                (project_key, session_ref),
                "session",
            )
        })
    }

    /// A session's file and how to read it ([`codec::SessionFile`]), without its turns.
    fn session_file(
        &self,
        project_key: &str,
        session_ref: &str,
    ) -> Result<Option<codec::SessionFile>, StoreError> {
        guard::guard(self.shown(), || {
            let table = self.table(SESSIONS)?;
            let value = table.get((project_key, session_ref)).store()?;
            Ok(value
                .map(|v| codec::decode_session_file(v.value()))
                .transpose()?)
        })
    }

    /// How many sessions are stored, over all projects.
    fn session_count(&self) -> Result<u64, StoreError> {
        self.table(SESSIONS)?.len().store()
    }

    /// How many projects are stored.
    fn project_count(&self) -> Result<u64, StoreError> {
        self.table(PROJECTS)?.len().store()
    }

    /// The stored document, refused as damaged when its bytes fail their checksum.
    fn document(&self, rel_path: &str) -> Result<Option<DocumentRecord>, StoreError> {
        guard::guard(self.shown(), || {
            let record: Option<DocumentRecord> =
                decoded(&self.table(DOCUMENTS)?, rel_path, "document")?;
            match record {
                Some(doc) if !doc.intact() => Err(StoreError::Damaged {
                    path: self.shown().to_owned(),
                    detail: format!("the stored copy of {rel_path} fails its SHA-256 checksum"),
                }),
                other => Ok(other),
            }
        })
    }

    /// Relative paths of every stored document, sorted.
    fn document_paths(&self) -> Result<Vec<String>, StoreError> {
        guard::guard(self.shown(), || {
            let mut out = Vec::new();
            for item in self.table(DOCUMENTS)?.iter().store()? {
                out.push(item.store()?.0.value().to_owned());
            }
            Ok(out)
        })
    }
}

impl Lookup for Reader {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<impl ReadableTable<K, V>, StoreError> {
        self.txn()?.open_table(def).store()
    }

    fn shown(&self) -> &str {
        &self.shown
    }
}

impl Lookup for Writer {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<impl ReadableTable<K, V>, StoreError> {
        self.txn()?.open_table(def).store()
    }

    fn shown(&self) -> &str {
        &self.shown
    }
}

/// What [`Reader::totals`] counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub sessions_indexed: u64,
    pub sessions_missing: u64,
    pub lines_indexed: u64,
    /// Bytes of the session files the line tables cover.
    pub bytes_covered: u64,
    pub documents: u64,
    pub document_bytes: u64,
}

/// Read access to one snapshot.
pub struct Reader {
    /// Always `Some` until drop.
    txn: Option<ReadTransaction>,
    shown: Arc<str>,
}

/// Drops a redb value inside the guard: after redb panicked once, its destructors may
/// panic too (a poisoned lock), and that must not abort the process.
fn guarded_drop<T>(shown: &str, value: T) {
    let _ = guard::guard(shown, move || {
        drop(value);
        Ok(())
    });
}

fn ended() -> StoreError {
    StoreError::Inconsistent("the transaction has already ended".to_owned())
}

impl Drop for Reader {
    fn drop(&mut self) {
        guarded_drop(&self.shown, self.txn.take());
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        guarded_drop(&self.shown, self.txn.take());
    }
}

impl Drop for LineSink<'_> {
    fn drop(&mut self) {
        guarded_drop(&self.shown, self.table.take());
    }
}

impl Reader {
    fn txn(&self) -> Result<&ReadTransaction, StoreError> {
        self.txn.as_ref().ok_or_else(ended)
    }

    /// Every session of a project, in index order.
    pub fn sessions(&self, project: &ProjectRecord) -> Result<Vec<SessionRecord>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut out = Vec::with_capacity(project.session_refs.len());
            for session_ref in &project.session_refs {
                if let Some(record) = self.session(&project.key, session_ref)? {
                    out.push(record);
                }
            }
            Ok(out)
        })
    }

    /// Line entries `first..=last` (1-based) of an indexed file.
    pub fn lines(&self, file_id: u64, first: u64, last: u64) -> Result<Vec<LineEntry>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut out = Vec::with_capacity(last.saturating_sub(first) as usize + 1);
            if first == 0 || last < first {
                return Ok(out);
            }
            let table = self.txn()?.open_table(LINE_BLOCKS).store()?;
            let (first_block, last_block) =
                ((first - 1) / LINES_PER_BLOCK, (last - 1) / LINES_PER_BLOCK);
            for item in table
                .range((file_id, first_block)..=(file_id, last_block))
                .store()?
            {
                let (key, value) = item.store()?;
                let block_first = key.value().1 * LINES_PER_BLOCK + 1;
                // The entries of lines first..=last that this block holds, decoded alone.
                let skip = first.saturating_sub(block_first);
                let take = (last + 1).saturating_sub(block_first.max(first));
                out.extend(codec::decode_lines_range(value.value(), skip, take)?);
            }
            Ok(out)
        })
    }

    /// Entry count of every table, for `dump`.
    pub fn counts(&self) -> Result<Vec<(&'static str, u64)>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            Ok(vec![
                ("meta", self.txn()?.open_table(META).store()?.len().store()?),
                (
                    "workspace",
                    self.txn()?.open_table(WORKSPACE).store()?.len().store()?,
                ),
                (
                    "projects",
                    self.txn()?.open_table(PROJECTS).store()?.len().store()?,
                ),
                (
                    "sessions",
                    self.txn()?.open_table(SESSIONS).store()?.len().store()?,
                ),
                (
                    "line_blocks",
                    self.txn()?.open_table(LINE_BLOCKS).store()?.len().store()?,
                ),
                (
                    "documents",
                    self.txn()?.open_table(DOCUMENTS).store()?.len().store()?,
                ),
            ])
        })
    }

    /// Totals over every session's file record and every document, for `dump --stats`.
    pub fn totals(&self) -> Result<Totals, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut totals = Totals::default();
            for item in self.txn()?.open_table(SESSIONS).store()?.iter().store()? {
                let (_, value) = item.store()?;
                match codec::decode_session_file(value.value())?.file {
                    FileState::Indexed(file) => {
                        totals.sessions_indexed += 1;
                        totals.lines_indexed += file.lines;
                        totals.bytes_covered += file.size;
                    }
                    FileState::Missing => totals.sessions_missing += 1,
                }
            }
            for item in self.txn()?.open_table(DOCUMENTS).store()?.iter().store()? {
                let (_, value) = item.store()?;
                let doc: DocumentRecord = codec::decode("document", value.value())?;
                totals.documents += 1;
                totals.document_bytes += doc.bytes.len() as u64;
            }
            Ok(totals)
        })
    }

    pub fn schema_version(&self) -> Result<Option<u64>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let table = self.txn()?.open_table(META).store()?;
            Ok(table.get("schema_version").store()?.map(|v| v.value()))
        })
    }
}

/// One write transaction: nothing is visible to anyone until [`Writer::commit`].
pub struct Writer {
    /// Always `Some` until commit or drop.
    txn: Option<WriteTransaction>,
    shown: Arc<str>,
    fault: Option<Arc<backend::Fault>>,
    stores_document: bool,
}

impl Writer {
    fn txn(&self) -> Result<&WriteTransaction, StoreError> {
        self.txn.as_ref().ok_or_else(ended)
    }

    /// Stores `record` under `key` in `table`, replacing what was there. Every record
    /// write of the store goes through here, inside the guard.
    fn put<'k, K: redb::Key + 'static>(
        &mut self,
        table: TableDefinition<K, &'static [u8]>,
        key: impl std::borrow::Borrow<K::SelfType<'k>>,
        record: &impl Serialize,
    ) -> Result<(), StoreError> {
        let bytes = codec::encode(record);
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(table).store()?;
            table.insert(key, bytes.as_slice()).store()?;
            Ok(())
        })
    }

    /// Removes what `table` holds under `key`, if anything.
    fn remove<'k, K: redb::Key + 'static>(
        &mut self,
        table: TableDefinition<K, &'static [u8]>,
        key: impl std::borrow::Borrow<K::SelfType<'k>>,
    ) -> Result<(), StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(table).store()?;
            table.remove(key).store()?;
            Ok(())
        })
    }

    pub fn put_workspace(&mut self, record: &WorkspaceRecord) -> Result<(), StoreError> {
        self.put(WORKSPACE, WORKSPACE_KEY, record)
    }

    pub fn put_project(&mut self, record: &ProjectRecord) -> Result<(), StoreError> {
        self.put(PROJECTS, record.key.as_str(), record)
    }

    pub fn remove_project(&mut self, key: &str) -> Result<(), StoreError> {
        self.remove(PROJECTS, key)
    }

    pub fn put_session(
        &mut self,
        project_key: &str,
        record: &SessionRecord,
    ) -> Result<(), StoreError> {
        let key = (project_key, record.session.session_ref.as_str());
        self.put(SESSIONS, key, record)
    }

    /// Every stored `(project_key, session_ref)` with its record.
    pub fn all_sessions(&self) -> Result<Vec<(String, SessionRecord)>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let table = self.txn()?.open_table(SESSIONS).store()?;
            let mut out = Vec::new();
            for item in table.iter().store()? {
                let (key, value) = item.store()?;
                let record: SessionRecord = codec::decode("session", value.value())?;
                out.push((key.value().0.to_owned(), record));
            }
            Ok(out)
        })
    }

    pub fn all_projects(&self) -> Result<Vec<String>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let table = self.txn()?.open_table(PROJECTS).store()?;
            let mut out = Vec::new();
            for item in table.iter().store()? {
                out.push(item.store()?.0.value().to_owned());
            }
            Ok(out)
        })
    }

    pub fn remove_session(
        &mut self,
        project_key: &str,
        session_ref: &str,
    ) -> Result<(), StoreError> {
        self.remove(SESSIONS, (project_key, session_ref))
    }

    /// A fresh file id for a new line table.
    pub fn new_file_id(&mut self) -> Result<u64, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(META).store()?;
            let id = table.get("next_file_id").store()?.map_or(1, |v| v.value());
            table.insert("next_file_id", id + 1).store()?;
            Ok(id)
        })
    }

    /// Starts writing the line table of `file_id`, block by block as lines arrive.
    pub fn line_sink(&mut self, file_id: u64) -> Result<LineSink<'_>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            Ok(LineSink {
                shown: self.shown.clone(),
                table: Some(self.txn()?.open_table(LINE_BLOCKS).store()?),
                file_id,
                next_block: 0,
                pending: Vec::with_capacity(LINES_PER_BLOCK as usize),
                digest: Sha256::new(),
            })
        })
    }

    /// Deletes the line table of `file_id`.
    pub fn delete_lines(&mut self, file_id: u64) -> Result<(), StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(LINE_BLOCKS).store()?;
            table
                .retain_in((file_id, 0)..=(file_id, u64::MAX), |_, _| false)
                .store()?;
            Ok(())
        })
    }

    pub fn put_document(
        &mut self,
        rel_path: &str,
        record: &DocumentRecord,
    ) -> Result<(), StoreError> {
        self.stores_document = true;
        self.put(DOCUMENTS, rel_path, record)
    }

    pub fn remove_document(&mut self, rel_path: &str) -> Result<(), StoreError> {
        self.remove(DOCUMENTS, rel_path)
    }

    /// Makes everything written visible, durably, as one step.
    pub fn commit(mut self) -> Result<(), StoreError> {
        if let Some(fault) = self.fault.as_ref().filter(|_| self.stores_document) {
            fault.before_commit();
        }
        let shown = self.shown.clone();
        guard::guard(&shown, move || match self.txn.take() {
            Some(txn) => txn.commit().store(),
            None => Err(ended()),
        })
    }
}

/// Receives a file's line entries in order and stores them in blocks.
pub struct LineSink<'w> {
    shown: Arc<str>,
    /// Always `Some` until drop.
    table: Option<redb::Table<'w, (u64, u64), &'static [u8]>>,
    file_id: u64,
    next_block: u64,
    pending: Vec<LineEntry>,
    digest: Sha256,
}

impl LineSink<'_> {
    pub fn push(&mut self, entry: LineEntry) -> Result<(), StoreError> {
        self.pending.push(entry);
        if self.pending.len() as u64 == LINES_PER_BLOCK {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        guard::guard(&self.shown.clone(), || {
            if self.pending.is_empty() {
                return Ok(());
            }
            let bytes = codec::encode_lines(&self.pending);
            self.digest.update(&bytes);
            self.table
                .as_mut()
                .ok_or_else(ended)?
                .insert((self.file_id, self.next_block), bytes.as_slice())
                .store()?;
            self.next_block += 1;
            self.pending.clear();
            Ok(())
        })
    }

    /// Stores the last partial block; returns the digest of the whole line table.
    pub fn finish(mut self) -> Result<[u8; 32], StoreError> {
        let shown = self.shown.clone();
        guard::guard(&shown, move || {
            self.flush()?;
            Ok(std::mem::take(&mut self.digest).finalize().into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A small deterministic generator (xorshift), so failures reproduce.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    fn entry(file_id: u64, line: u64) -> LineEntry {
        LineEntry {
            offset: line * 100,
            len: line % 97,
            decoded_len: line % 97 + file_id,
            sha256: [(line % 251) as u8; 32],
        }
    }

    /// Line tables written, replaced and deleted at random, checked against a `BTreeMap`
    /// model after every transaction, including ranges that cross block boundaries.
    #[test]
    fn line_tables_match_a_model() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        let mut model: BTreeMap<u64, Vec<LineEntry>> = BTreeMap::new();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..40 {
            let mut writer = store.writer().unwrap();
            let mut pending = model.clone();
            for _ in 0..rng.below(4) + 1 {
                match rng.below(3) {
                    0 | 1 => {
                        let file_id = writer.new_file_id().unwrap();
                        let count = rng.below(3 * LINES_PER_BLOCK);
                        let mut sink = writer.line_sink(file_id).unwrap();
                        let lines: Vec<LineEntry> =
                            (1..=count).map(|n| entry(file_id, n)).collect();
                        for e in &lines {
                            sink.push(*e).unwrap();
                        }
                        sink.finish().unwrap();
                        pending.insert(file_id, lines);
                    }
                    _ => {
                        if let Some(&id) =
                            pending.keys().nth(rng.below(pending.len() as u64) as usize)
                        {
                            writer.delete_lines(id).unwrap();
                            pending.remove(&id);
                        }
                    }
                }
            }
            // Every other transaction is abandoned, and must leave no trace.
            if rng.below(2) == 0 {
                writer.commit().unwrap();
                model = pending;
            } else {
                drop(writer);
            }
            let reader = store.reader().unwrap();
            for (id, lines) in &model {
                let n = lines.len() as u64;
                assert_eq!(reader.lines(*id, 1, n).unwrap(), *lines);
                for _ in 0..5 {
                    let first = rng.below(n + 2);
                    let last = first + rng.below(LINES_PER_BLOCK + 50);
                    let expect: Vec<LineEntry> = lines
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| first >= 1 && (first..=last).contains(&(*i as u64 + 1)))
                        .map(|(_, e)| *e)
                        .collect();
                    assert_eq!(
                        reader.lines(*id, first, last).unwrap(),
                        expect,
                        "file {id} {first}-{last}"
                    );
                }
            }
        }
    }

    /// A store written by schema version 1 (checked in) is upgraded when opened, and
    /// keeps reading.
    #[test]
    fn version_1_store_fixture_still_opens() {
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1.redb");
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("store.redb");
        std::fs::copy(&fixture, &copy).unwrap();
        let store = Store::open(&copy).unwrap();
        let reader = store.reader().unwrap();
        // Opening migrates it to the current schema.
        assert_eq!(reader.schema_version().unwrap(), Some(SCHEMA_VERSION));
        let workspace = reader.workspace().unwrap().expect("imported workspace");
        assert_eq!(workspace.project_keys, ["Demo-0123456789ab"]);
        let session = reader
            .session("Demo-0123456789ab", "S0001")
            .unwrap()
            .expect("session");
        let FileState::Indexed(file) = session.file else {
            panic!("indexed")
        };
        // Upgraded records carry no ctime or inode yet: the next import re-hashes.
        assert_eq!((file.ctime_ns, file.inode), (0, 0));
        assert!(file.size > 0 && file.mtime_ns > 0 && file.lines > 0);
        let lines = reader.lines(file.file_id, 7, 7).unwrap();
        assert_eq!(
            crate::util::lines::hex(&lines[0].sha256),
            "790a498b33daa4a9b3eeceb833687d0623470547489ff830ebbfcf54bd9733ef"
        );
    }
}
