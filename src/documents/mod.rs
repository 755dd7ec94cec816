//! Workspace documents (evidence cards, envelopes, the daily report): the store's copy
//! and the file on disk.
//!
//! The store is the truth while a run is live, but prompt-diary's own steps also change
//! these files (its extraction runner deletes an incomplete card before re-extracting and
//! writes empty cards itself). So before a tool uses a document, [`sync`] brings the store
//! in line with the file: deleted means forgotten, changed means re-read. A tool that
//! writes replaces the file atomically inside its store transaction, before committing,
//! and puts the previous file back if the commit fails.

pub mod evidence;
pub mod problems;
pub mod report;
pub mod synthesis;
pub mod trigger;

use std::io;
use std::path::Path;

use crate::store::{DocumentRecord, Lookup, Store, StoreError, Writer};
use crate::util::fsutil;
use crate::util::kind::Kind;
use crate::util::wait::Locks;
use crate::workspace::layout;

#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("{rel} cannot be read: {source}")]
    Unreadable { rel: String, source: io::Error },
    #[error("{rel} cannot be written: {source}")]
    Unwritable { rel: String, source: io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Busy(#[from] LockBusy),
    /// A signal asked the process to stop, at a safe point between two documents.
    #[error(transparent)]
    Stopped(#[from] crate::util::stop::Stopped),
}

impl DocumentError {
    /// Whether another attempt may succeed by itself; the document lock's holder
    /// ([`DocumentError::Busy`]) is its own variant.
    pub fn kind(&self) -> Kind {
        match self {
            DocumentError::Unreadable { source, .. } | DocumentError::Unwritable { source, .. } => {
                Kind::of_io(source)
            }
            DocumentError::Store(e) => e.kind(),
            DocumentError::Busy(_) | DocumentError::Stopped(_) => Kind::Lasting,
        }
    }
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
                writer.put_document(rel, DocumentRecord::new(bytes.clone()))?;
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
///
/// The holder writes one line into the lock file, `<pid> <unix seconds> <what>`, right
/// after taking it, and empties the file before letting it go, so that a waiter can say
/// who it waits for. A holder killed with SIGKILL leaves its line behind; it is believed
/// only while that process exists, and the next holder overwrites it.
pub struct DocumentLock {
    file: std::fs::File,
}

impl Drop for DocumentLock {
    fn drop(&mut self) {
        // Still locked here: the kernel lets the lock go when the file is closed.
        let _ = self.file.set_len(0);
    }
}

/// The document lock was not free within the wait's bound
/// ([`crate::util::wait::Locks`]).
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the workspace's document lock ({LOCK_FILE}) is held by {holder}; waited {waited_secs} s for it \
     ({var} sets how long): if that process is stuck, stop it, then retry; nothing was changed",
    holder = self.holder_text(),
    var = crate::util::wait::TIMEOUT_VAR
)]
pub struct LockBusy {
    /// The process that holds the lock, when it said so and still exists.
    pub holder: Option<Holder>,
    pub waited_secs: u64,
}

impl LockBusy {
    fn holder_text(&self) -> String {
        match &self.holder {
            Some(h) => h.to_string(),
            None => "another process (which one is unknown)".to_owned(),
        }
    }
}

/// Who holds the document lock, as its holder wrote it into the lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// What the holder is (`evidence-store import`, `evidence-store serve`).
    pub what: String,
    /// Since when it holds the lock, in seconds since the Unix epoch.
    pub since: u64,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "process {} ({})", self.pid, self.what)?;
        if let Some(held) = unix_now().checked_sub(self.since) {
            write!(f, " since {held} s ago")?;
        }
        Ok(())
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The holder line of this process, named `holder` (`evidence-store <command>`, as the
/// CLI passes it in [`Locks`]): one line of at most 200 bytes, no newline inside.
fn holder_line(holder: &str) -> String {
    let what = holder.replace(['\n', '\r'], " ");
    let mut what: String = what.chars().take(160).collect();
    if what.is_empty() {
        what.push_str("evidence-store");
    }
    format!("{} {} {what}\n", std::process::id(), unix_now())
}

/// The holder named in the lock file, if that process still exists.
fn read_holder(file: &std::fs::File) -> Option<Holder> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 256];
    let n = file.read_at(&mut buf, 0).ok()?;
    parse_holder(&buf[..n])
}

/// The holder line's process, if it still exists.
fn parse_holder(bytes: &[u8]) -> Option<Holder> {
    let line = bytes.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.splitn(3, ' ');
    let pid: u32 = parts.next()?.parse().ok()?;
    let since: u64 = parts.next()?.parse().ok()?;
    let what = parts.next()?.to_owned();
    if pid == 0 || pid == std::process::id() || !Path::new(&format!("/proc/{pid}")).exists() {
        return None;
    }
    Some(Holder { pid, what, since })
}

/// Who holds the workspace's document lock now, as far as the lock file says (read
/// without taking the lock); `None` when nobody or an ended process is named.
pub fn holder(root: &Path) -> Option<Holder> {
    // Read, never created: asking must not leave a lock file in a directory that has none.
    let bytes = fsutil::read_confined_within(root, LOCK_FILE, 4096).ok()??;
    parse_holder(&bytes)
}

/// For an error caused by a lock on the store: who holds the document lock (a process
/// in a write transaction holds it too), as a sentence to add; empty when nobody does.
pub fn holder_hint(root: &Path) -> String {
    match holder(root) {
        Some(h) => format!(" (the workspace's document lock is held by {h})"),
        None => String::new(),
    }
}

/// Takes the document lock, waiting while another process holds it, at most
/// [`Locks::wait`]: past that, [`DocumentError::Busy`] names the holder. While it waits it
/// logs once which process it waits for. The lock file names this process as
/// `locks.holder`.
pub fn lock(root: &Path, locks: &Locks) -> Result<DocumentLock, DocumentError> {
    lock_saying(root, locks, true)
}

/// [`lock`]; `say`: whether to log which process it waits for (a long export taking the
/// lock again between its batches waits for writers by design, and says nothing).
fn lock_saying(root: &Path, locks: &Locks, say: bool) -> Result<DocumentLock, DocumentError> {
    let timeout = locks.wait();
    use std::os::unix::fs::FileExt;
    let unwritable = |source| DocumentError::Unwritable {
        rel: LOCK_FILE.to_owned(),
        source,
    };
    let file = fsutil::open_lock_file(root, LOCK_FILE).map_err(unwritable)?;
    let mut poll = crate::util::wait::Poll::new(timeout);
    let mut said = false;
    let mut waiting = false;
    loop {
        match file.try_lock() {
            Ok(()) => {
                if waiting {
                    waiting::set(&file, false);
                }
                let line = holder_line(&locks.holder);
                // Who holds it is for messages only: a lock file that cannot take the line
                // (a full disk) still locks.
                if file.write_at(line.as_bytes(), 0).is_ok() {
                    let _ = file.set_len(line.len() as u64);
                }
                return Ok(DocumentLock { file });
            }
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(unwritable(e)),
        }
        if !waiting {
            // Says so to a long export, which lets waiters in between its batches.
            waiting::set(&file, true);
            waiting = true;
        }
        let holder = read_holder(&file);
        // The holder writes its line just after taking the lock: give it a moment before
        // saying that nobody is named.
        if !said && (holder.is_some() || poll.waited() >= std::time::Duration::from_millis(500)) {
            let holder = holder
                .as_ref()
                .map_or_else(|| "another process".to_owned(), ToString::to_string);
            if say {
                tracing::warn!(
                    lock = LOCK_FILE,
                    "waiting for the workspace's document lock, held by {holder}; giving up after {} s",
                    crate::util::wait::secs(poll.timeout())
                );
            }
            said = true;
        }
        if said {
            return wait_in_turn(file, &poll, &locks.holder, unwritable);
        }
        if !poll.sleep() {
            return Err(DocumentError::Busy(LockBusy {
                holder,
                waited_secs: crate::util::wait::secs(poll.waited()),
            }));
        }
    }
}

/// The rest of a lock wait, in the kernel's queue: a helper thread takes the lock with a
/// blocking `flock` on a second descriptor of the same open file, and this thread waits
/// for it at most until the poll's deadline. (Polling alone lets a waiter miss its turn
/// again and again under contention.) At the deadline the helper is abandoned: when it
/// gets the lock at last, it closes the last descriptor of that open file, which lets the
/// lock go at once.
fn wait_in_turn(
    file: std::fs::File,
    poll: &crate::util::wait::Poll,
    holder: &str,
    unwritable: impl Fn(std::io::Error) -> DocumentError,
) -> Result<DocumentLock, DocumentError> {
    use std::os::unix::fs::FileExt;
    let waiter = file.try_clone().map_err(&unwritable)?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("evidence-store-lock".into())
        .spawn(move || {
            let taken = waiter.lock();
            let _ = tx.send(taken);
        })
        .map_err(&unwritable)?;
    // In slices, so that a signal asking this process to stop ends the wait too.
    let taken = loop {
        match rx.recv_timeout(poll.left().min(std::time::Duration::from_millis(50))) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                if !poll.left().is_zero() && crate::util::stop::requested().is_none() => {}
            other => break other,
        }
    };
    // Had, or given up (the helper, abandoned, keeps this open file until it has the
    // lock): this process no longer waits.
    waiting::set(&file, false);
    match taken {
        Ok(Ok(())) => {
            let line = holder_line(holder);
            if file.write_at(line.as_bytes(), 0).is_ok() {
                let _ = file.set_len(line.len() as u64);
            }
            Ok(DocumentLock { file })
        }
        Ok(Err(e)) => Err(unwritable(e)),
        Err(_) => Err(DocumentError::Busy(LockBusy {
            holder: read_holder(&file),
            waited_secs: crate::util::wait::secs(poll.waited()),
        })),
    }
}

/// A document file replaced inside a write transaction that is not committed yet.
#[must_use = "pass it to `commit`, which keeps the file or puts the previous one back"]
pub struct Written {
    root: std::path::PathBuf,
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
    let replacement = fsutil::replace(writer.disk(), root, rel, &bytes).map_err(|source| {
        DocumentError::Unwritable {
            rel: rel.to_owned(),
            source,
        }
    })?;
    let written = Written {
        root: root.to_path_buf(),
        rel: rel.to_owned(),
        replacement,
    };
    if let Err(e) = writer.put_document(rel, DocumentRecord::new(bytes)) {
        undo(written);
        return Err(e.into());
    }
    Ok(written)
}

/// Commits the transaction that replaced a document, of `store`. Either both the store and
/// the file hold the new document, or neither does: when the commit fails, the previous
/// file is put back (or the new one removed), and the store is brought back in line with
/// it, before the error is returned.
pub fn commit(store: &Store, writer: Writer, written: Written) -> Result<(), DocumentError> {
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
            let (root, rel) = (written.root.clone(), written.rel.clone());
            if undo(written) {
                realign(store, &root, &rel);
            }
            Err(e)
        }
    }
}

/// After a failed commit the store may hold the new document all the same: redb reports
/// a failure of the commit's last fsync, or of the header write that follows it, though
/// the commit is in the file and the next open finds it. A write answered as failed must
/// change nothing, so the store takes the document from its file again (just put back), in
/// a transaction of its own; the store is reopened first if redb gave up on it. When even
/// that fails, the store stays ahead until the next sync of the document adopts the file.
/// (Called only once the file was put back: a file still new is adopted by the next sync.)
fn realign(store: &Store, root: &Path, rel: &str) {
    let realigned = (|| -> Result<bool, DocumentError> {
        let mut writer = store.writer()?;
        let on_disk =
            fsutil::read_confined(root, rel).map_err(|source| DocumentError::Unreadable {
                rel: rel.to_owned(),
                source,
            })?;
        if writer.document(rel)?.map(|stored| stored.bytes) == on_disk {
            return Ok(false);
        }
        sync(&mut writer, root, rel)?;
        writer.commit()?;
        Ok(true)
    })();
    match realigned {
        Ok(false) => {}
        Ok(true) => {
            tracing::warn!(
                rel,
                "the failed commit had reached the store; its document was put back there too"
            );
        }
        Err(e) => {
            tracing::error!(rel, error = %e, "after a failed commit, the store could not be brought back in line with the file");
        }
    }
}

/// Puts the previous file back; whether it could.
fn undo(written: Written) -> bool {
    let path = written.replacement.path().display().to_string();
    if let Err(e) = written.replacement.undo() {
        // The file is then one unacknowledged write ahead of the store; the next sync
        // adopts it or `export` replaces it.
        tracing::error!(rel = written.rel, path, error = %e, "could not put the previous file back");
        return false;
    }
    true
}

/// What `export` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportReport {
    pub written: usize,
    pub unchanged: usize,
    pub temp_files_removed: usize,
}

/// How long a long export ([`export`], the receipts') holds the document lock at a time
/// while another process waits for it: a writer waits for about one batch (and one
/// file's write), not for the whole export.
pub const BATCH: std::time::Duration = std::time::Duration::from_millis(200);
/// Longest an export, between two batches, leaves the lock to the processes that wait
/// for it (each takes it in turn) before it waits in the queue itself.
const HANDOFF_MAX: std::time::Duration = std::time::Duration::from_millis(500);

/// Who waits for the document lock: a waiter holds one byte of the lock file shared (an
/// open file description lock, apart from the `flock` that is the lock itself) from its
/// first failed try until it has the lock, so that a holder can ask whether anyone waits.
mod waiting {
    use std::os::fd::AsRawFd;

    const BYTE: libc::off_t = 0;

    fn flock(kind: libc::c_int) -> libc::flock {
        // SAFETY: an all-zero `flock` is a valid value of this plain C struct.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = kind as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        lock.l_start = BYTE;
        lock.l_len = 1;
        lock
    }

    /// Says (or stops saying) through `file` that this process waits. Where such locks
    /// cannot be taken nobody says so, and an export lets the lock go at every batch.
    pub(super) fn set(file: &std::fs::File, waits: bool) {
        let mut lock = flock(if waits { libc::F_RDLCK } else { libc::F_UNLCK });
        // SAFETY: the descriptor is open for the call, and `lock` is a valid `flock`.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &raw mut lock) };
    }

    /// Whether another open of the lock file says it waits; `None` when it cannot be
    /// asked.
    pub(super) fn anyone(file: &std::fs::File) -> Option<bool> {
        let mut lock = flock(libc::F_WRLCK);
        // SAFETY: the descriptor is open for the call, and `lock` is a valid `flock`.
        let asked = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &raw mut lock) };
        (asked == 0).then_some(lock.l_type != libc::F_UNLCK as libc::c_short)
    }
}

/// The document lock held in batches by a long export: once it has been held for
/// [`BATCH`] and another process waits for it, it is let go until the waiters have had
/// their turns (at most [`HANDOFF_MAX`]), then taken again. Each batch reads a snapshot
/// taken after the lock, so no document it writes is older than the store's, and no
/// writer is halfway through a write while a batch runs.
pub struct Batches<'a> {
    root: &'a Path,
    locks: &'a Locks,
    lock: Option<DocumentLock>,
    /// An open of the lock file of its own, to ask who waits.
    probe: std::fs::File,
    since: std::time::Instant,
}

impl<'a> Batches<'a> {
    /// Takes the document lock for the first batch (waiting as [`lock`] does).
    pub fn begin(root: &'a Path, locks: &'a Locks) -> Result<Batches<'a>, DocumentError> {
        let lock = lock(root, locks)?;
        let probe = fsutil::open_lock_file(root, LOCK_FILE).map_err(|source| {
            DocumentError::Unwritable {
                rel: LOCK_FILE.to_owned(),
                source,
            }
        })?;
        Ok(Batches {
            root,
            locks,
            lock: Some(lock),
            probe,
            since: std::time::Instant::now(),
        })
    }

    /// A safe point between two items: a stop asked for ends the work here, and once
    /// the batch has lasted [`BATCH`] the waiting writers get their turn. True when the
    /// lock was let go: the caller's snapshot is then stale.
    pub fn between(&mut self) -> Result<bool, DocumentError> {
        crate::util::stop::check()?;
        if self.since.elapsed() < BATCH {
            return Ok(false);
        }
        self.since = std::time::Instant::now();
        if waiting::anyone(&self.probe) == Some(false) {
            return Ok(false);
        }
        self.lock = None;
        // Each waiter takes the lock in turn and stops saying it waits; whoever has not
        // had it by the bound queues with this export.
        let handoff = crate::util::wait::Poll::new(HANDOFF_MAX);
        std::thread::sleep(std::time::Duration::from_millis(1));
        while waiting::anyone(&self.probe) == Some(true) && !handoff.left().is_zero() {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        self.lock = Some(lock_saying(self.root, self.locks, false)?);
        self.since = std::time::Instant::now();
        Ok(true)
    }
}

/// Materialises every stored document under `root` (atomically, skipping files that are
/// already identical) and removes temp files a killed writer left behind. Runs under the
/// document lock, in batches ([`Batches`]): no writer is between replacing a file and
/// keeping or undoing it while a batch runs, so no document is written older than the
/// store's, and no temp file it removes belongs to a live writer (writers have them only
/// under the lock). Documents a writer adds meanwhile are in their files already.
pub fn export(store: &Store, root: &Path, locks: &Locks) -> Result<ExportReport, DocumentError> {
    let mut batches = Batches::begin(root, locks)?;
    let mut reader = store.reader()?;
    let mut report = ExportReport {
        temp_files_removed: remove_temp_files(store.disk(), root, &reader)?,
        ..ExportReport::default()
    };
    for rel in reader.document_paths()? {
        if batches.between()? {
            reader = store.reader()?;
        }
        let Some(doc) = reader.document(&rel)? else {
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
        fsutil::atomic_write(store.disk(), root, &rel, &doc.bytes).map_err(unwritable)?;
        report.written += 1;
    }
    Ok(report)
}

/// Removes the temp files of document writers that are gone (killed mid-write): this
/// program's temp names whose process no longer runs, in the directories documents live
/// in (the root, `projects/<key>/` and `projects/<key>/evidence/`) whose real location is
/// inside the workspace. Needs no lock, since a live writer's temp file names a live
/// process; every command calls it, so a killed run's leftovers do not wait for `export`.
/// (A reused process id only leaves a file for a later command.) Returns how many it removed.
pub fn remove_abandoned_temp_files(root: &Path) -> usize {
    let Ok(real_root) = fsutil::real_root(root) else {
        return 0;
    };
    let mut dirs = vec![real_root.clone()];
    if let Ok(projects) = std::fs::read_dir(real_root.join(layout::PROJECTS)) {
        for project in projects.flatten() {
            dirs.push(project.path());
            dirs.push(project.path().join(layout::EVIDENCE));
        }
    }
    let mut removed = 0;
    for (path, pid) in temp_files_in(&real_root, dirs) {
        let alive = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if !alive && std::fs::remove_file(&path).is_ok() {
            tracing::info!(path = %path.display(), "removed a killed writer's temp file");
            removed += 1;
        }
    }
    removed
}

/// This program's temp files ([`fsutil::temp_name_pid`]; never prompt-diary's
/// `<name>.tmp` nor anything else) in `dirs` whose real location is inside `real_root`,
/// each with the process id its name holds.
fn temp_files_in(
    real_root: &Path,
    dirs: Vec<std::path::PathBuf>,
) -> Vec<(std::path::PathBuf, u32)> {
    let mut found = Vec::new();
    for dir in dirs {
        let Ok(real) = dir.canonicalize() else {
            continue;
        };
        if !real.starts_with(real_root) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&real) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Some(pid) = fsutil::temp_name_pid(&entry.file_name().to_string_lossy()) {
                found.push((entry.path(), pid));
            }
        }
    }
    found
}

/// Removes this program's temp files ([`fsutil::is_temp_name`]; never prompt-diary's
/// `<name>.tmp` nor anything else) wherever documents live, in directories whose real
/// location is inside the workspace.
fn remove_temp_files(
    disk: &crate::util::disk::Disk,
    root: &Path,
    store: &impl Lookup,
) -> Result<usize, DocumentError> {
    let mut dirs = vec![String::new()];
    if let Some(workspace) = store.workspace()? {
        for key in &workspace.project_keys {
            dirs.push(layout::evidence_dir(key));
            dirs.push(layout::project_dir(key));
        }
    }
    let real_root = fsutil::real_root(root).map_err(|source| DocumentError::Unreadable {
        rel: root.display().to_string(),
        source,
    })?;
    let dirs = dirs.iter().map(|dir| root.join(dir)).collect();
    let mut removed = 0;
    for (path, _) in temp_files_in(&real_root, dirs) {
        fsutil::remove_file(disk, &path).map_err(|source| DocumentError::Unwritable {
            rel: path.display().to_string(),
            source,
        })?;
        removed += 1;
    }
    Ok(removed)
}
