//! Opening the store file: the checks on it before redb sees it, the writable and the
//! read-only open, reopening after an I/O error, and handing out readers and writers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use redb::backends::FileBackend;
use redb::{ConcurrencyMode, Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase};

use super::error::{OpenError, OrStore, OwnStoreError, StoreError};
use super::reader::{Lookup, Reader};
use super::schema::SCHEMA_VERSION;
use super::writer::{self, Writer};
use super::{backend, guard, migrate};
use crate::util::disk::Disk;

/// Page cache per process: enough for the hot tables, small enough that several servers
/// and a large import stay well under their memory budget.
const CACHE_BYTES: usize = 32 << 20;

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
        guard::guarded_drop(&self.shown, self.db.take());
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
    /// What the store's writes, and the writes of the documents committed with them, go
    /// through.
    disk: Disk,
    /// Longest wait for a lock on the store another process holds.
    lock_wait: std::time::Duration,
    /// The (device, inode) of the file opened for writing, or `None` read-only.
    file_id: RwLock<Option<(u64, u64)>>,
}

/// Where a workspace's own store is, relative to the workspace (`--store` may choose
/// another place).
pub const WORKSPACE_STORE: &str = ".evidence-store/store.redb";

/// Refuses the workspace's own store when its real location is outside the workspace: a
/// symlink planted at `.evidence-store` or at the store file (dangling or not) would make
/// this program create or take over a store elsewhere; and when it leads, within the
/// workspace, to another workspace's `.evidence-store` (one nested inside it), whose
/// writers take that workspace's document lock. Checked before the store is opened. A
/// store at any other path was named with `--store`, the user's choice, and is checked by
/// the workspace identity it records (`import::check_same_workspace`).
pub fn check_own_store(root: &Path, store_path: &Path) -> Result<(), OwnStoreError> {
    if store_path != root.join(WORKSPACE_STORE) {
        return Ok(());
    }
    match crate::util::fsutil::check_confined(root, WORKSPACE_STORE) {
        Err(reason) if reason.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(OwnStoreError::Outside {
                path: store_path.display().to_string(),
                reason,
            });
        }
        // Anything else (no workspace there, say) is for the opening to report.
        Err(_) => return Ok(()),
        Ok(()) => {}
    }
    // Where the store directory really is: `<workspace>/.evidence-store` of which one.
    let own_dir = Path::new(WORKSPACE_STORE).parent();
    let (Some(dir), Ok(real_root)) = (own_dir, std::fs::canonicalize(root)) else {
        return Ok(());
    };
    let Ok(real_dir) = std::fs::canonicalize(root.join(dir)) else {
        return Ok(());
    };
    match real_dir.parent() {
        Some(holder) if real_dir.file_name() == dir.file_name() && holder != real_root => {
            Err(OwnStoreError::OtherWorkspace {
                path: store_path.display().to_string(),
                holder: holder.display().to_string(),
            })
        }
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
    pub fn open(path: &Path, lock_wait: std::time::Duration) -> Result<Store, OpenError> {
        Store::open_on(path, lock_wait, Disk::real())
    }

    /// [`Store::open`], writing through `disk`.
    pub fn open_on(
        path: &Path,
        lock_wait: std::time::Duration,
        disk: Disk,
    ) -> Result<Store, OpenError> {
        Store::open_as(path, Access::Write, lock_wait, disk)
    }

    /// [`Store::open`], unless another process holds the store's gate past the wait
    /// ([`OpenError::Gated`]), where `open` would go on without it: for a server that
    /// can read from a view meanwhile ([`Store::open_view`]) and open it later.
    pub fn open_if_ungated(
        path: &Path,
        lock_wait: std::time::Duration,
        disk: Disk,
    ) -> Result<Store, OpenError> {
        Store::open_as(path, Access::WriteIfUngated, lock_wait, disk)
    }

    /// Creates a new store at `path`, which must not exist (a rebuild's scratch file):
    /// nothing planted at the name is ever opened. It writes through `disk`.
    pub fn create_new(
        path: &Path,
        lock_wait: std::time::Duration,
        disk: Disk,
    ) -> Result<Store, OpenError> {
        Store::open_as(path, Access::New, lock_wait, disk)
    }

    fn open_as(
        path: &Path,
        access: Access,
        lock_wait: std::time::Duration,
        disk: Disk,
    ) -> Result<Store, OpenError> {
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
            Access::New => {
                try_open_writable_as(path, &shown, fault.clone(), &disk, lock_wait, Access::New)?
            }
            access => open_writable_as(path, &shown, fault.clone(), &disk, lock_wait, access)?,
        };
        // Still behind the gate: an upgrade commits outside any document write.
        let guarded = guard::guard(&shown, || {
            match migrate::ensure_current(&db, &shown, lock_wait) {
                Err(OpenError::Database { source, .. }) => Err(StoreError::Db(source)),
                Err(OpenError::Store(e)) => Err(e),
                Err(other) => Ok(Err(other)),
                Ok(()) => Ok(Ok(())),
            }
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
            disk,
            lock_wait,
            file_id: RwLock::new(Some(file_id)),
        })
    }

    /// Opens an existing store without writing to it (no migration, no repair), so that
    /// it can be inspected on read-only media or while it must not change.
    pub fn open_read_only(path: &Path, lock_wait: std::time::Duration) -> Result<Store, OpenError> {
        Store::open_read_only_gated(path, lock_wait, lock_wait)
    }

    /// A read-only view for a server whose writable open must wait (another process
    /// holds the store's gate, or redb's write lock): [`Store::open_read_only`], but the
    /// gate is held only when it is free at once. A header read beside a writer's open
    /// or close at worst fails ([`OpenError::NeedsRepair`]), for the next call to retry;
    /// a read-only handle never writes.
    pub fn open_view(path: &Path, lock_wait: std::time::Duration) -> Result<Store, OpenError> {
        Store::open_read_only_gated(path, lock_wait, std::time::Duration::ZERO)
    }

    fn open_read_only_gated(
        path: &Path,
        lock_wait: std::time::Duration,
        gate_wait: std::time::Duration,
    ) -> Result<Store, OpenError> {
        let shown = path.display().to_string();
        let db = open_read_only(path, &shown, lock_wait, gate_wait)?;
        let store = Store {
            path: path.to_path_buf(),
            shown: shown.clone().into(),
            read_only: true,
            db: RwLock::new(Some(Arc::new(Db::ReadOnly(db)))),
            fault: None,
            disk: Disk::real(),
            lock_wait,
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

    /// The disk the store writes through, which the documents it commits are written
    /// through too.
    pub fn disk(&self) -> &Disk {
        &self.disk
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
            Db::ReadOnly(
                open_read_only(&self.path, &self.shown, self.lock_wait, self.lock_wait)
                    .map_err(open_to_store)?,
            )
        } else {
            let (db, file_id, held) = open_writable(
                &self.path,
                &self.shown,
                self.fault.clone(),
                &self.disk,
                self.lock_wait,
            )
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
            guard::guarded_drop(&self.shown, old);
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
    /// most its lock wait ([`StoreError::Busy`] then).
    pub fn writer(&self) -> Result<Writer, StoreError> {
        self.check_not_replaced()?;
        self.with_db(|db| {
            let Db::Write(db) = db else {
                return Err(StoreError::ReadOnly {
                    path: self.shown.to_string(),
                });
            };
            let mut txn = writer::begin_write_within(
                db,
                &self.shown,
                crate::util::wait::bounded(self.lock_wait),
            )?;
            // Saves the allocator state with each commit, so that the next open after a
            // crash does not have to walk the whole file to repair it.
            txn.set_quick_repair(true);
            Ok(Writer {
                txn: Some(txn),
                shown: self.shown.clone(),
                fault: self.fault.clone(),
                disk: self.disk.clone(),
                stores_document: false,
            })
        })
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
pub fn remove_if_unused(path: &Path, lock_wait: std::time::Duration) -> bool {
    if open_by_a_writer(path) {
        return false;
    }
    // Anything that does not open as an empty store of ours is left alone.
    let unused = Store::open_read_only(path, lock_wait)
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
        guard::guarded_drop(&self.shown, db);
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
    disk: &Disk,
    lock_wait: std::time::Duration,
) -> Result<Opened, OpenError> {
    open_writable_as(path, shown, fault, disk, lock_wait, Access::Write)
}

fn open_writable_as(
    path: &Path,
    shown: &str,
    fault: Option<Arc<backend::Fault>>,
    disk: &Disk,
    lock_wait: std::time::Duration,
    access: Access,
) -> Result<Opened, OpenError> {
    // How long a writable open waits while another process has the store open read-only
    // (`dump`, `verify`, a rebuild's in-use probe): redb refuses a writer beside a
    // read-only handle, and those commands hold theirs only briefly.
    let deadline = std::time::Instant::now() + crate::util::wait::bounded(lock_wait);
    let mut said = false;
    loop {
        match try_open_writable_as(path, shown, fault.clone(), disk, lock_wait, access) {
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
    /// [`Access::Write`], refused rather than done without the store's gate.
    WriteIfUngated,
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
                Access::Write | Access::WriteIfUngated => {
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

fn try_open_writable_as(
    path: &Path,
    shown: &str,
    fault: Option<Arc<backend::Fault>>,
    disk: &Disk,
    lock_wait: std::time::Duration,
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
    let gate =
        Arc::new(
            backend::Gate::beside(&file, lock_wait).map_err(|e| OpenError::Database {
                path: shown.to_owned(),
                source: Box::new(e.into()),
            })?,
        );
    // The open writes the file (the live-writer flag, a repair) before any transaction.
    let held = match access {
        Access::WriteIfUngated => Some(gate.hold(true).map_err(|_| OpenError::Gated {
            path: shown.to_owned(),
        })?),
        _ => gate.hold_for_writing(shown),
    };
    let opened = guard::guard(shown, || {
        let backend = backend::Backend::new(file, disk.clone(), fault, lock_wait).store()?;
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
/// redb's own locks are waited for at most `lock_wait` ([`backend::Backend`]): a stopped
/// holder of its header lock (mid-commit) must not hang a read.
fn open_read_only(
    path: &Path,
    shown: &str,
    lock_wait: std::time::Duration,
    gate_wait: std::time::Duration,
) -> Result<ReadOnlyDatabase, OpenError> {
    let file = store_file(path, shown, Access::Read)?;
    // Behind the gate, the header read is never one a writer's open or close is halfway
    // through; past the wait's bound the open goes ahead without it.
    let _held = backend::Gate::beside(&file, gate_wait)
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
            .open_read_only_with_backend(
                backend::Backend::new(file, Disk::real(), None, lock_wait).store()?,
            )
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
