//! The file backend the store opens redb with: redb's own file backend, with every write,
//! length change and fsync shown first to the disk it runs on ([`Disk`]: the real one, or
//! a test's, which may fail or crash there), plus (in debug builds only) a fault that
//! makes one commit fail as if the disk were full, so that the recovery from a full disk
//! can be tested deterministically through the real binary.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

use crate::util::disk::{Disk, Step};

type BackendIoError = std::io::Error;

/// A planned disk-full failure, shared by every open of the store in this process.
#[derive(Debug)]
pub struct Fault {
    at_commit: u64,
    commits: AtomicU64,
    armed: AtomicBool,
}

impl Fault {
    /// The fault the environment asks for; always `None` in release builds.
    pub fn from_env() -> Option<Arc<Fault>> {
        let at_commit = crate::util::test_hooks::full_disk_at_document_commit()?;
        Some(Arc::new(Fault {
            at_commit,
            commits: AtomicU64::new(0),
            armed: AtomicBool::new(false),
        }))
    }

    /// Counts a commit that stores a document; the planned one makes the next write to
    /// the file fail.
    pub fn before_commit(&self) {
        if self.commits.fetch_add(1, Ordering::SeqCst) + 1 == self.at_commit {
            self.armed.store(true, Ordering::SeqCst);
        }
    }

    fn fire(&self) -> Result<(), BackendIoError> {
        if self.armed.swap(false, Ordering::SeqCst) {
            tracing::warn!("injected fault: the disk is full");
            return Err(std::io::Error::from_raw_os_error(28));
        }
        Ok(())
    }
}

/// redb's file backend, with the disk and the optional fault in front of its writes.
#[derive(Debug)]
pub struct Backend {
    inner: FileBackend,
    fault: Option<Arc<Fault>>,
    /// Longest wait for a lock on the file another process holds.
    lock_wait: std::time::Duration,
    disk: Disk,
    /// The file as the disk is shown it: a duplicate of the descriptor `inner` owns, kept
    /// only for a test's disk (`None` on the real one).
    seen: Option<std::fs::File>,
}

impl Backend {
    /// The backend of `file`, whose writes go through `disk`.
    pub fn new(
        file: std::fs::File,
        disk: Disk,
        fault: Option<Arc<Fault>>,
        lock_wait: std::time::Duration,
    ) -> Result<Backend, redb::DatabaseError> {
        let seen = if disk.is_faulty() {
            Some(file.try_clone()?)
        } else {
            None
        };
        Ok(Backend {
            inner: FileBackend::new(file)?,
            fault,
            lock_wait,
            disk,
            seen,
        })
    }

    /// Shows `step` on the file to the disk; only a test's disk has a file to show.
    fn step<'a>(
        &'a self,
        step: impl FnOnce(std::os::fd::BorrowedFd<'a>) -> Step<'a>,
    ) -> Result<(), BackendIoError> {
        use std::os::fd::AsFd;
        match &self.seen {
            Some(file) => self.disk.before(|| step(file.as_fd())),
            None => Ok(()),
        }
    }
}

impl StorageBackend for Backend {
    fn len(&self) -> Result<u64, BackendIoError> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), BackendIoError> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), BackendIoError> {
        self.step(|file| Step::SetLen { file, len })?;
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> Result<(), BackendIoError> {
        self.step(|file| Step::Sync { file })?;
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), BackendIoError> {
        if let Some(fault) = &self.fault {
            fault.fire()?;
        }
        self.step(|file| Step::Write { file, offset, data })?;
        self.inner.write(offset, data)
    }

    fn close(&self) -> Result<(), BackendIoError> {
        self.inner.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        bounded(self.lock_wait, || self.inner.try_lock_range(start, end))
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        bounded(self.lock_wait, || {
            self.inner.try_lock_shared_range(start, end)
        })
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

/// A lock on the store file that another process held past the wait's bound
/// (the store's lock wait); `guard::classify` makes it [`super::StoreError::Busy`].
#[derive(Debug, thiserror::Error)]
#[error("another process held a lock on the store for {waited_secs} s")]
pub struct LockWaitTimedOut {
    pub waited_secs: u64,
}

/// Takes a byte-range lock the way redb's blocking call would, but polling, so that a
/// holder that is stopped or stuck (its write transaction open, at the open's repair lock
/// or mid-commit) makes this process fail with a message instead of waiting for ever.
fn bounded(
    timeout: std::time::Duration,
    mut try_lock: impl FnMut() -> Result<bool, BackendError>,
) -> Result<(), BackendError> {
    if try_lock()? {
        return Ok(());
    }
    let mut poll = crate::util::wait::Poll::new(crate::util::wait::bounded(timeout));
    let mut said = false;
    loop {
        if !poll.sleep() {
            return Err(BackendError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                LockWaitTimedOut {
                    waited_secs: crate::util::wait::secs(poll.waited()),
                },
            )));
        }
        if try_lock()? {
            return Ok(());
        }
        if !said && poll.waited() >= std::time::Duration::from_millis(500) {
            tracing::warn!(
                "waiting for another process's lock on the store; giving up after {} s",
                crate::util::wait::secs(poll.timeout())
            );
            said = true;
        }
    }
}

/// The byte of the store file that [`Gate`] locks: the last of the bytes redb reserves
/// for its storage backend (`BACKEND_LOCK_RANGE`, 896 to 1023 past 2^62), which is this
/// module's [`Backend`]. redb's core never locks them, and its file backend takes only
/// the first two.
const GATE_BYTE: u64 = (1 << 62) + 1023;

/// The store's gate: a byte-range lock (an open file description lock, so one per open
/// of the file, dropped by the kernel when the process dies) that every writable open
/// and every close of the store holds exclusively, and that `verify` holds shared while
/// it reads the store's header and copies the file.
///
/// A writer's open and close write the file outside any write transaction: the open
/// publishes the "needs recovery" flag of a live writer (and repairs the file when it
/// finds the flag with no live writer), the close commits its allocator state and clears
/// the flag, and a close that finds another process holding redb's writer lock (a peer
/// in its open, say) leaves the flag set for that peer, which marks the file consistent
/// only when its open is done. A `verify` reading the header or copying the file between
/// two of those steps would call a healthy store unclean or damaged; behind the gate it
/// sees only a file at rest.
#[derive(Debug)]
pub struct Gate {
    file: std::fs::File,
    /// Longest wait for the gate while another process holds it.
    wait: std::time::Duration,
}

/// A held [`Gate`], released when dropped.
#[derive(Debug)]
pub struct GateHold(std::sync::Arc<Gate>);

impl Drop for GateHold {
    fn drop(&mut self) {
        if let Err(e) = self.0.set(libc::F_UNLCK as libc::c_short) {
            tracing::warn!(error = %e, "cannot release the store's gate");
        }
    }
}

impl Gate {
    /// The gate of the file `file` has open, on a description of its own (a lock taken
    /// through redb's own description would be one with redb's locks).
    pub fn beside(file: &std::fs::File, wait: std::time::Duration) -> std::io::Result<Gate> {
        use std::os::fd::AsRawFd;
        let reopened = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/self/fd/{}", file.as_raw_fd()));
        let file = match reopened {
            Ok(reopened) => reopened,
            // Without /proc: a duplicate descriptor, whose lock still excludes every
            // other process.
            Err(_) => file.try_clone()?,
        };
        Ok(Gate { file, wait })
    }

    /// The gate of the store at `path`, opened for reading only; `None` when there is no
    /// regular file there (the store's open then says why).
    fn of_path(path: &std::path::Path, wait: std::time::Duration) -> Option<Gate> {
        use std::os::unix::fs::OpenOptionsExt;
        // Non-blocking: opening a FIFO planted at the store's path must not wait.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .ok()?;
        file.metadata()
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map(|_| Gate { file, wait })
    }

    /// Holds the gate, waiting while another process holds it in a conflicting way, at
    /// most its wait.
    pub fn hold(
        self: &std::sync::Arc<Self>,
        exclusive: bool,
    ) -> Result<GateHold, LockWaitTimedOut> {
        let kind = if exclusive {
            libc::F_WRLCK
        } else {
            libc::F_RDLCK
        } as libc::c_short;
        let mut poll = crate::util::wait::Poll::new(crate::util::wait::bounded(self.wait));
        loop {
            match self.set(kind) {
                Ok(()) => return Ok(GateHold(self.clone())),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                // Locks unsupported here (some network file systems): nothing to hold.
                Err(e) => {
                    tracing::debug!(error = %e, "the store's gate cannot be locked here");
                    return Ok(GateHold(self.clone()));
                }
            }
            if !poll.sleep() {
                return Err(LockWaitTimedOut {
                    waited_secs: crate::util::wait::secs(poll.waited()),
                });
            }
        }
    }

    /// Holds the gate for a writer's open or close; past the wait's bound the open or
    /// close goes ahead without it (only a `verify` beside it could then misjudge).
    pub fn hold_for_writing(self: &std::sync::Arc<Self>, shown: &str) -> Option<GateHold> {
        match self.hold(true) {
            Ok(held) => Some(held),
            Err(e) => {
                tracing::warn!(store = shown, error = %e, "going on without the store's gate");
                None
            }
        }
    }

    /// Takes or releases the lock on [`GATE_BYTE`] without waiting.
    fn set(&self, kind: libc::c_short) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: an all-zero `flock` is a valid value of this plain C struct.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = kind;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        lock.l_start = GATE_BYTE as libc::off_t;
        lock.l_len = 1;
        // SAFETY: the descriptor is open for the life of `self.file`, and `lock` is a
        // valid `flock` that outlives the call.
        let done = unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_OFD_SETLK, &raw mut lock) };
        if done == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EACCES) => Err(std::io::ErrorKind::WouldBlock.into()),
            _ => Err(e),
        }
    }
}

/// Holds the gate of the store at `path` shared, so that no writer opens or closes it
/// meanwhile. `Ok(None)`: there is no regular file to hold it on.
pub fn hold_shared(
    path: &std::path::Path,
    wait: std::time::Duration,
) -> Result<Option<GateHold>, LockWaitTimedOut> {
    match Gate::of_path(path, wait) {
        Some(gate) => std::sync::Arc::new(gate).hold(false).map(Some),
        None => Ok(None),
    }
}
