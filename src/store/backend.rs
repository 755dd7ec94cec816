//! The file backend the store opens redb with: redb's own file backend, plus (in debug
//! builds only) a fault that makes one commit fail as if the disk were full, so that the
//! recovery from a full disk can be tested deterministically through the real binary.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

type BackendIoError = std::io::Error;

/// Debug builds only: `N` makes the N-th commit of this process (1-based) that stores a
/// document fail with `No space left on device`, once.
pub const FULL_DISK_ENV: &str = "EVIDENCE_STORE_FAULT_FULL_DISK_AT_DOCUMENT_COMMIT";

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
        if !cfg!(debug_assertions) {
            return None;
        }
        let at_commit = std::env::var(FULL_DISK_ENV).ok()?.trim().parse().ok()?;
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

/// redb's file backend, with the optional fault in front of its writes.
#[derive(Debug)]
pub struct Backend {
    inner: FileBackend,
    fault: Option<Arc<Fault>>,
}

impl Backend {
    pub fn new(inner: FileBackend, fault: Option<Arc<Fault>>) -> Backend {
        Backend { inner, fault }
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
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> Result<(), BackendIoError> {
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), BackendIoError> {
        if let Some(fault) = &self.fault {
            fault.fire()?;
        }
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
        bounded(|| self.inner.try_lock_range(start, end))
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        bounded(|| self.inner.try_lock_shared_range(start, end))
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

/// A lock on the store file that another process held past the wait's bound
/// ([`crate::util::wait::lock_timeout`]); `guard::classify` makes it [`super::StoreError::Busy`].
#[derive(Debug, thiserror::Error)]
#[error("another process held a lock on the store for {waited_secs} s")]
pub struct LockWaitTimedOut {
    pub waited_secs: u64,
}

/// Takes a byte-range lock the way redb's blocking call would, but polling, so that a
/// holder that is stopped or stuck (its write transaction open, at the open's repair lock
/// or mid-commit) makes this process fail with a message instead of waiting for ever.
fn bounded(mut try_lock: impl FnMut() -> Result<bool, BackendError>) -> Result<(), BackendError> {
    if try_lock()? {
        return Ok(());
    }
    let mut poll = crate::util::wait::Poll::new(crate::util::wait::lock_timeout());
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
