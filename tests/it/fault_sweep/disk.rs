//! The sweep's disk: it counts every durable step the program takes (each write, length
//! change and fsync of the store, each create, link, rename, removal and directory fsync of
//! a document replacement) and, at the planned one, fails it or stops there.
//!
//! A failed step (`EIO`, `ENOSPC`) fails once and the program goes on. A stop is a crash
//! of the whole machine, every simulated process at once: the step and every later one
//! fail with `EIO`, so nothing more reaches the disk, and then either nothing is lost (every
//! process was killed) or the power failed: every write since its file's last fsync is put
//! back, every directory change since its directory's last fsync is undone, and the
//! stopped step, when it was a write, is torn (its first half of sectors reached the disk).
//! A disk may also have written some of what was not fsynced, in any order: in the last
//! kind of crash each such write and directory change is lost or kept by a coin of its own.
//! What is to be put back is recorded as the steps pass: the bytes a write overwrote, the
//! length a file had, the file a rename replaced or a removal took away.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, MutexGuard};

use evidence_store::harness::fault::{Faults, Step};
use rustix::fs::{AtFlags, Mode, OFlags};

/// What happens at the planned step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The step fails with this `errno`, once; the program goes on.
    Error(i32),
    /// Every process is killed at the step: nothing more is written, nothing is lost.
    Kill,
    /// The power fails at the step: what was not yet fsynced is lost, the step torn.
    PowerLoss,
    /// The power fails at the step: each write and directory change not yet fsynced is
    /// lost or kept, by a coin seeded with the step; the step is torn.
    PowerLossSome,
}

impl Fault {
    pub fn is_crash(self) -> bool {
        !matches!(self, Fault::Error(_))
    }

    fn loses_power(self) -> bool {
        matches!(self, Fault::PowerLoss | Fault::PowerLossSome)
    }
}

/// A file or directory, by device and inode.
type Id = (u64, u64);

fn id_of(fd: BorrowedFd<'_>) -> io::Result<Id> {
    let st = rustix::fs::fstat(fd)?;
    #[allow(clippy::useless_conversion)]
    Ok((u64::from(st.st_dev), u64::from(st.st_ino)))
}

/// A handle of our own on what `fd` has open: a new open file description (through
/// `/proc/self/fd`), so that the program's locks never live on in it.
fn reopen(fd: BorrowedFd<'_>, write: bool) -> io::Result<File> {
    File::options()
        .read(true)
        .write(write)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// How to put a file's contents back as they were at its last fsync.
enum FileUndo {
    Bytes(u64, Vec<u8>),
    Len(u64),
}

struct FileLog {
    file: File,
    undo: Vec<FileUndo>,
}

/// How to put a directory's entries back as they were at its last fsync.
enum DirUndo {
    Created(OsString),
    Linked(OsString),
    Renamed {
        from: OsString,
        to: OsString,
        replaced: Option<Vec<u8>>,
    },
    Removed {
        name: OsString,
        content: Option<Vec<u8>>,
    },
}

struct DirLog {
    dir: File,
    undo: Vec<DirUndo>,
}

#[derive(Default)]
struct State {
    plan: Option<(u64, Fault)>,
    steps: u64,
    /// The planned step, as it was described when it fired.
    fired: Option<String>,
    /// Crashed: every step fails.
    dead: bool,
    files: HashMap<Id, FileLog>,
    dirs: HashMap<Id, DirLog>,
    /// The torn part of the step the power failed at: the file, where, and the bytes.
    torn: Option<(Id, u64, Vec<u8>)>,
    /// Whether what a power loss undoes is recorded (only a power-loss plan needs it).
    recording: bool,
    /// Whether every step is said on stderr.
    trace: bool,
    /// Every step's description, in order, on a disk with no plan (the sound run).
    log: Vec<String>,
}

/// The sweep's disk; see the module's documentation.
pub struct SimDisk(Mutex<State>);

impl std::fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        write!(f, "SimDisk(step {}, plan {:?})", state.steps, state.plan)
    }
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

impl SimDisk {
    /// A disk that does `fault` at step `at` (1-based), or nothing with `None`.
    pub fn new(plan: Option<(u64, Fault)>, trace: bool) -> SimDisk {
        SimDisk(Mutex::new(State {
            plan,
            trace,
            recording: plan.is_some_and(|(_, fault)| fault.loses_power()),
            ..State::default()
        }))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many steps were taken (or tried) so far.
    pub fn steps(&self) -> u64 {
        self.state().steps
    }

    /// Every step's description, in order (kept on a disk with no plan only).
    pub fn log(&self) -> Vec<String> {
        self.state().log.clone()
    }

    /// The planned step, once it fired.
    pub fn fired(&self) -> Option<String> {
        self.state().fired.clone()
    }

    /// Whether the machine crashed.
    pub fn dead(&self) -> bool {
        self.state().dead
    }

    /// After a crash, once every process's handles are gone: for a power loss, puts back
    /// what was not fsynced (directories first, then file contents, then the torn write).
    /// Drops every handle of the disk's own.
    pub fn settle(&self) -> io::Result<()> {
        let mut state = self.state();
        let plan = state.plan;
        let dirs = std::mem::take(&mut state.dirs);
        let mut files = std::mem::take(&mut state.files);
        let torn = state.torn.take();
        let dead = state.dead;
        drop(state);
        let Some((at, fault)) = plan.filter(|(_, fault)| dead && fault.loses_power()) else {
            return Ok(());
        };
        // Whether one thing not fsynced is lost: always, or by the coin.
        let mut coin = crate::common::rng::Rng(at.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut lost = || fault == Fault::PowerLoss || coin.next() & 1 == 0;
        // Keyed by inode: the same order every time the point is replayed.
        let mut dirs: Vec<_> = dirs.into_iter().collect();
        dirs.sort_by_key(|(id, _)| *id);
        for (_, log) in dirs {
            for undo in log.undo.into_iter().rev() {
                if lost() {
                    undo_dir(&log.dir, undo)?;
                }
            }
        }
        let mut ids: Vec<Id> = files.keys().copied().collect();
        ids.sort();
        for id in ids {
            let log = files.get_mut(&id).expect("listed");
            for undo in log.undo.drain(..).rev() {
                if !lost() {
                    continue;
                }
                match undo {
                    FileUndo::Bytes(offset, bytes) => log.file.write_all_at(&bytes, offset)?,
                    FileUndo::Len(len) => log.file.set_len(len)?,
                }
            }
        }
        if let Some((id, offset, bytes)) = torn
            && let Some(log) = files.get(&id)
        {
            log.file.write_all_at(&bytes, offset)?;
        }
        Ok(())
    }
}

/// Undoes one directory change through the directory's handle.
fn undo_dir(dir: &File, undo: DirUndo) -> io::Result<()> {
    let remove = |name: &OsStr| match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    };
    let put = |name: &OsStr, bytes: &[u8]| -> io::Result<()> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        File::from(fd).write_all_at(bytes, 0)
    };
    match undo {
        DirUndo::Created(name) | DirUndo::Linked(name) => remove(&name),
        DirUndo::Renamed { from, to, replaced } => {
            match rustix::fs::renameat(dir, &to, dir, &from) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
            match replaced {
                Some(bytes) => put(&to, &bytes),
                None => Ok(()),
            }
        }
        DirUndo::Removed { name, content } => match content {
            Some(bytes) => put(&name, &bytes),
            None => Ok(()),
        },
    }
}

/// The bytes of `name` in `dir` now, if it is a regular file.
fn content_at(dir: &File, name: &OsStr) -> io::Result<Option<Vec<u8>>> {
    let fd = match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let file = File::from(fd);
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    std::fs::read(format!("/proc/self/fd/{}", file.as_raw_fd())).map(Some)
}

impl State {
    fn file(&mut self, fd: BorrowedFd<'_>) -> io::Result<&mut FileLog> {
        match self.files.entry(id_of(fd)?) {
            Entry::Occupied(log) => Ok(log.into_mut()),
            Entry::Vacant(slot) => Ok(slot.insert(FileLog {
                file: reopen(fd, true)?,
                undo: Vec::new(),
            })),
        }
    }

    fn dir(&mut self, fd: BorrowedFd<'_>) -> io::Result<&mut DirLog> {
        match self.dirs.entry(id_of(fd)?) {
            Entry::Occupied(log) => Ok(log.into_mut()),
            Entry::Vacant(slot) => Ok(slot.insert(DirLog {
                dir: reopen(fd, false)?,
                undo: Vec::new(),
            })),
        }
    }

    /// Records how to undo `step`, which is about to happen.
    fn record(&mut self, step: Step<'_>) -> io::Result<()> {
        match step {
            Step::Write { file, offset, data } => {
                let log = self.file(file)?;
                let len = log.file.metadata()?.len();
                let end = (offset + data.len() as u64).min(len.max(offset));
                let mut old = vec![0; (end - offset.min(end)) as usize];
                log.file.read_exact_at(&mut old, offset)?;
                log.undo.push(FileUndo::Bytes(offset, old));
                if offset + data.len() as u64 > len {
                    log.undo.push(FileUndo::Len(len));
                }
            }
            Step::SetLen { file, len } => {
                let log = self.file(file)?;
                let now = log.file.metadata()?.len();
                if len < now {
                    let mut cut = vec![0; (now - len) as usize];
                    log.file.read_exact_at(&mut cut, len)?;
                    log.undo.push(FileUndo::Bytes(len, cut));
                }
                log.undo.push(FileUndo::Len(now));
            }
            Step::Sync { file } => self.file(file)?.undo.clear(),
            Step::Create { dir, name } => {
                self.dir(dir)?.undo.push(DirUndo::Created(name.to_owned()));
            }
            Step::Link { dir, to, .. } => self.dir(dir)?.undo.push(DirUndo::Linked(to.to_owned())),
            Step::Rename { dir, from, to } => {
                let log = self.dir(dir)?;
                let replaced = content_at(&log.dir, to)?;
                log.undo.push(DirUndo::Renamed {
                    from: from.to_owned(),
                    to: to.to_owned(),
                    replaced,
                });
            }
            Step::Remove { dir, name } => {
                let log = self.dir(dir)?;
                let content = content_at(&log.dir, name)?;
                log.undo.push(DirUndo::Removed {
                    name: name.to_owned(),
                    content,
                });
            }
            Step::SyncDir { dir } => self.dir(dir)?.undo.clear(),
        }
        Ok(())
    }
}

/// The first half of `data`'s 512-byte sectors: what a torn write leaves.
fn torn_part(data: &[u8]) -> &[u8] {
    let sectors = data.len().div_ceil(512);
    &data[..((sectors / 2) * 512).min(data.len())]
}

impl Faults for SimDisk {
    fn before(&self, step: Step<'_>) -> io::Result<()> {
        let mut state = self.state();
        if state.dead {
            return Err(eio());
        }
        state.steps += 1;
        if state.trace {
            super::say(&format!("    step {}: {step:?}", state.steps));
        }
        if state.plan.is_none() {
            state.log.push(format!("{step:?}"));
        }
        if let Some((at, fault)) = state.plan
            && at == state.steps
        {
            state.fired = Some(format!("{step:?}"));
            match fault {
                Fault::Error(errno) => return Err(io::Error::from_raw_os_error(errno)),
                Fault::Kill => {
                    state.dead = true;
                    return Err(eio());
                }
                Fault::PowerLoss | Fault::PowerLossSome => {
                    state.dead = true;
                    if let Step::Write { file, offset, data } = step {
                        let id = id_of(file)?;
                        state.file(file)?;
                        state.torn = Some((id, offset, torn_part(data).to_vec()));
                    }
                    return Err(eio());
                }
            }
        }
        if state.recording {
            state.record(step)?;
        }
        Ok(())
    }
}
