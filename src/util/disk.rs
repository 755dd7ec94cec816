//! The disk the program's own durable writes go through: every write, length change and
//! fsync of the store file, and every create, link, rename, removal and directory fsync
//! of a document replacement, is a [`Step`] shown to the [`Disk`] first.
//!
//! The real disk ([`Disk::real`], what every command runs on) looks at nothing: a step
//! costs one test of an `Option`. A test passes in a disk of its own ([`Disk::faulty`]),
//! whose [`Faults`] sees each step before it happens and may fail it (an I/O error, a full
//! disk) or stop the program's disk there (a simulated crash: it fails every later step,
//! and can then put back what the writes since the last fsync changed). The disk is a
//! value the caller passes in, never a global: a test runs many simulated processes, each
//! on a disk of its own, in one process.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// One durable step, shown to the disk just before it is taken.
#[derive(Clone, Copy)]
pub enum Step<'a> {
    /// `data` is written at `offset` of the open file `file`.
    Write {
        file: BorrowedFd<'a>,
        offset: u64,
        data: &'a [u8],
    },
    /// The open file `file` is cut or extended (with zeros) to `len` bytes.
    SetLen { file: BorrowedFd<'a>, len: u64 },
    /// The open file `file`'s data is flushed to the device (`fsync`, `fdatasync`).
    Sync { file: BorrowedFd<'a> },
    /// A new file `name` is created (exclusively) in the directory `dir`.
    Create {
        dir: BorrowedFd<'a>,
        name: &'a OsStr,
    },
    /// The file `from` in `dir` gets a second name, `to`, in the same directory.
    Link {
        dir: BorrowedFd<'a>,
        from: &'a OsStr,
        to: &'a OsStr,
    },
    /// `from` in `dir` is renamed to `to` in the same directory, over any file there.
    Rename {
        dir: BorrowedFd<'a>,
        from: &'a OsStr,
        to: &'a OsStr,
    },
    /// The name `name` in `dir` is removed.
    Remove {
        dir: BorrowedFd<'a>,
        name: &'a OsStr,
    },
    /// The directory `dir`'s entries are flushed to the device.
    SyncDir { dir: BorrowedFd<'a> },
}

impl fmt::Debug for Step<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Write { offset, data, .. } => {
                write!(f, "write {} bytes at {offset}", data.len())
            }
            Step::SetLen { len, .. } => write!(f, "set length {len}"),
            Step::Sync { .. } => write!(f, "fsync"),
            Step::Create { name, .. } => write!(f, "create {}", name.display()),
            Step::Link { from, to, .. } => write!(f, "link {} to {}", from.display(), to.display()),
            Step::Rename { from, to, .. } => {
                write!(f, "rename {} to {}", from.display(), to.display())
            }
            Step::Remove { name, .. } => write!(f, "remove {}", name.display()),
            Step::SyncDir { .. } => write!(f, "fsync the directory"),
        }
    }
}

/// What a test's disk does with each step: `Ok` lets it happen, `Err` fails it (the step
/// does not happen; the caller sees the error as the system call's own).
pub trait Faults: Send + Sync + fmt::Debug {
    fn before(&self, step: Step<'_>) -> io::Result<()>;
}

/// The disk writes go through: the real one, or a test's ([`Faults`]). Cheap to clone.
#[derive(Clone, Default)]
pub struct Disk(Option<Arc<dyn Faults>>);

impl fmt::Debug for Disk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("Disk::real"),
            Some(faults) => write!(f, "Disk::faulty({faults:?})"),
        }
    }
}

impl Disk {
    /// The real disk: every step simply happens.
    pub fn real() -> Disk {
        Disk(None)
    }

    /// A test's disk, which sees every step first.
    pub fn faulty(faults: Arc<dyn Faults>) -> Disk {
        Disk(Some(faults))
    }

    /// Whether this is a test's disk (which wants to see every step).
    pub fn is_faulty(&self) -> bool {
        self.0.is_some()
    }

    /// Shows the step `step` makes to the disk before it is taken; `Err` means: do not
    /// take it, fail with this error. The real disk never builds the step.
    #[inline]
    pub fn before<'a>(&self, step: impl FnOnce() -> Step<'a>) -> io::Result<()> {
        match &self.0 {
            None => Ok(()),
            Some(faults) => faults.before(step()),
        }
    }
}
