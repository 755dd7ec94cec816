//! File replacement confined to the workspace.
//!
//! A reader sees the old file or the new one, never a mix. Every temp file has a name of
//! its own (`.<name>.<pid>.<n>.<random>.evidence-store.tmp`), is created exclusively and
//! never through a symlink, and lives in the target's own directory; a crash leaves at
//! most such a file, which `export` removes. Paths are resolved by the kernel beneath the
//! workspace root, held open, and a path whose real location is outside the root is
//! refused with an error naming it; a replacement's steps all happen in its directory as
//! opened once, so a path component swapped for a symlink meanwhile redirects none.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::util::disk::{Disk, Step};

/// How every temp file this program creates ends. prompt-diary's own `<name>.tmp` does
/// not match, so cleanup never touches it.
pub const TEMP_SUFFIX: &str = ".evidence-store.tmp";

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// How much of the target's name a temp name repeats (the rest is at most 60 bytes).
const TEMP_NAME_PREFIX_MAX: usize = 160;

/// A fresh temp name for a file named `name`: unique per process (pid), per call (counter)
/// and against a stale file of a reused pid (random).
pub fn temp_name(name: &OsStr) -> OsString {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    // Only a prefix of a long name, so that the temp name stays within NAME_MAX (255).
    let name = OsStr::from_bytes(&name.as_bytes()[..name.len().min(TEMP_NAME_PREFIX_MAX)]);
    let mut out = OsString::from(".");
    out.push(name);
    out.push(format!(
        ".{}.{n}.{random:016x}{TEMP_SUFFIX}",
        std::process::id()
    ));
    out
}

/// Whether `name` is one of this program's temp names ([`temp_name`]), and only that.
pub fn is_temp_name(name: &str) -> bool {
    temp_name_pid(name).is_some()
}

/// The id of the process that made the temp file `name`, when `name` is one of this
/// program's temp names ([`temp_name`]).
pub fn temp_name_pid(name: &str) -> Option<u32> {
    temp_name_parts(name).map(|(_, pid)| pid)
}

/// The name a temp file of this program ([`temp_name`]) was made for (its first 160
/// bytes, for a longer one) and the id of the process that made it.
pub fn temp_name_parts(name: &str) -> Option<(&str, u32)> {
    let stem = name
        .strip_prefix('.')
        .and_then(|s| s.strip_suffix(TEMP_SUFFIX))?;
    let mut parts = stem.rsplitn(4, '.');
    let (Some(random), Some(n), Some(pid), Some(target)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let well_formed = random.len() == 16
        && random.bytes().all(|b| b.is_ascii_hexdigit())
        && digits(n)
        && !target.is_empty();
    well_formed
        .then(|| pid.parse().ok().map(|pid| (target, pid)))
        .flatten()
}

/// A path whose real location is outside the workspace root.
#[derive(Debug, thiserror::Error)]
pub enum Escape {
    #[error("it resolves to {real}, outside the workspace {root}")]
    Outside { real: String, root: String },
    /// Resolving it met an absolute symlink, or one that left the root and came back.
    #[error("a symlink on its way is absolute or leaves the workspace {root}")]
    Symlink { root: String },
}

/// The error for `<root>/<rel>`, refused because resolving it left the root: names where
/// it leads when that is outside (it may have changed since, or lead back inside).
fn escape(root: &Path, rel: &Path) -> io::Error {
    let mut real = resolve_lenient(&root.join(rel));
    // A dangling symlink, which that leaves as written: where it leads.
    if let (Ok(target), Some(dir)) = (std::fs::read_link(&real), real.parent()) {
        real = resolve_lenient(&dir.join(target));
    }
    let root_text = root.display().to_string();
    let escape = if real.starts_with(root) {
        Escape::Symlink { root: root_text }
    } else {
        Escape::Outside {
            real: real.display().to_string(),
            root: root_text,
        }
    };
    io::Error::new(io::ErrorKind::PermissionDenied, escape)
}

/// `rel` must be a plain relative path: normal components only.
fn plain(rel: &str) -> io::Result<&Path> {
    let path = Path::new(rel);
    if rel.is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{rel:?} is not a plain relative path"),
        ));
    }
    Ok(path)
}

/// The workspace root with every symlink resolved.
pub fn real_root(root: &Path) -> io::Result<PathBuf> {
    root.canonicalize()
}

/// The workspace root, resolved and held open: every path under it is opened relative to
/// this descriptor, so the checks and the uses see the same directories.
struct Root {
    path: PathBuf,
    fd: OwnedFd,
}

impl Root {
    fn open(root: &Path) -> io::Result<Root> {
        let path = real_root(root)?;
        let fd = rfs::open(
            &path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root { path, fd })
    }

    /// Opens `rel` under the root, never leaving it: every component is resolved by the
    /// kernel beneath the root's descriptor (a symlink is followed only while it stays
    /// inside; an absolute one, or `..` above the root, is refused), so a directory
    /// swapped for a symlink between two steps cannot redirect either.
    fn open_beneath(&self, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        self.open_beneath_errno(rel, flags, mode)
            .map_err(|e| match e {
                Errno::XDEV | Errno::LOOP => escape(&self.path, rel),
                e => e.into(),
            })
    }

    /// [`Root::open_beneath`] with the kernel's own error: `XDEV` when resolving left the
    /// root (or met an absolute symlink), `LOOP` for a final symlink under `NOFOLLOW`.
    fn open_beneath_errno(&self, rel: &Path, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
        let flags = flags | OFlags::CLOEXEC;
        match rfs::openat2(
            &self.fd,
            rel,
            flags,
            mode,
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            // A kernel without openat2 (before Linux 5.6): one component at a time,
            // following no symlink at all.
            Err(Errno::NOSYS) => self.open_without_symlinks(rel, flags, mode),
            other => other,
        }
    }

    fn open_without_symlinks(
        &self,
        rel: &Path,
        flags: OFlags,
        mode: Mode,
    ) -> Result<OwnedFd, Errno> {
        // Only plain names: `..` or an absolute path could leave the root here.
        let mut parts = Vec::new();
        for part in rel.components() {
            match part {
                Component::Normal(name) => parts.push(name),
                _ => return Err(Errno::XDEV),
            }
        }
        let last = parts.pop().ok_or(Errno::INVAL)?;
        let mut dir: Option<OwnedFd> = None;
        for part in parts {
            let at = dir.as_ref().map_or(self.fd.as_fd(), AsFd::as_fd);
            let next = rfs::openat(
                at,
                part,
                OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| {
                // A symlink where a directory is wanted reads as "not a directory".
                let symlink = rfs::statat(at, part, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
                    rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::Symlink
                });
                if symlink { Errno::LOOP } else { e }
            })?;
            dir = Some(next);
        }
        let at = dir.as_ref().map_or(self.fd.as_fd(), AsFd::as_fd);
        rfs::openat(at, last, flags | OFlags::NOFOLLOW, mode)
    }

    /// The directory `rel` under the root, held open, created if missing.
    fn dir(&self, rel: &Path) -> io::Result<Dir> {
        let path = self.path.join(rel);
        let flags = OFlags::DIRECTORY | OFlags::RDONLY;
        match self.open_beneath(rel, flags, Mode::empty()) {
            Ok(fd) => return Ok(Dir { path, fd }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // Made one level at a time, each inside the level before it as opened.
        let mut made = PathBuf::new();
        let mut at: Option<OwnedFd> = None;
        for part in rel {
            made.push(part);
            let opened = match self.open_beneath(&made, flags, Mode::empty()) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let parent = at.as_ref().map_or(self.fd.as_fd(), AsFd::as_fd);
                    match rfs::mkdirat(parent, part, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(e.into()),
                    }
                    self.open_beneath(&made, flags, Mode::empty())
                }
                other => other,
            }?;
            at = Some(opened);
        }
        let fd = at.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no directory"))?;
        Ok(Dir { path, fd })
    }

    /// The directory of `<root>/<rel>` (created if missing) and the file's name in it.
    fn parent_of<'r>(&self, rel: &'r str) -> io::Result<(Dir, &'r OsStr)> {
        let rel = plain(rel)?;
        let (Some(name), Some(parent)) = (rel.file_name(), rel.parent()) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no file name"));
        };
        let dir = if parent.as_os_str().is_empty() {
            Dir {
                path: self.path.clone(),
                fd: self.fd.try_clone()?,
            }
        } else {
            self.dir(parent)?
        };
        Ok((dir, name))
    }
}

/// A directory opened once and held, beneath which paths are opened as under the
/// workspace root: the kernel resolves every component relative to the descriptor and
/// never leaves it (an absolute symlink, or `..` above the directory, is refused), so a
/// component swapped for a symlink between two opens redirects neither.
pub struct HeldDir(Root);

impl HeldDir {
    /// Opens the directory `path` (symlinks in `path` itself are followed) and takes its
    /// real location from the descriptor, so the location named is the one held.
    pub fn open(path: &Path) -> io::Result<HeldDir> {
        let fd = rfs::open(
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let real = match std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
            Ok(real) if real.is_absolute() => real,
            // No /proc: the resolved path, accepted only when it names the same directory.
            _ => {
                let real = path.canonicalize()?;
                let held = rfs::fstat(&fd)?;
                let named = rfs::stat(&real)?;
                if (held.st_dev, held.st_ino) != (named.st_dev, named.st_ino) {
                    return Err(io::Error::other(format!(
                        "{} changed while it was opened",
                        path.display()
                    )));
                }
                real
            }
        };
        Ok(HeldDir(Root { path: real, fd }))
    }

    /// Where the held directory really is.
    pub fn real_path(&self) -> &Path {
        &self.0.path
    }

    /// The held directory's descriptor.
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.fd.as_fd()
    }

    /// Opens `rel` beneath the directory with `flags` (and `O_CLOEXEC`), returning the
    /// kernel's error as it is: `XDEV` when resolving would leave the directory or met an
    /// absolute symlink, `LOOP` for a final symlink when `flags` has `NOFOLLOW`, `NOENT`,
    /// `NOTDIR`.
    pub fn open_beneath(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
        self.0.open_beneath_errno(rel, flags, Mode::empty())
    }

    /// Whether the held directory has an entry `name`, of any type (a symlink there is not
    /// followed).
    pub fn has_entry(&self, name: &OsStr) -> bool {
        rfs::statat(self.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Opens the entry `name` of the held directory (one plain name, no `/`), a file this
    /// program keeps for itself: relative to the held descriptor, `O_NOFOLLOW|O_NONBLOCK|
    /// O_CLOEXEC` (a symlink at the name is refused, a FIFO there cannot block the open),
    /// created with mode 0600 when `how` creates, then checked with [`check_own`] (a regular
    /// file of one link, owned by the effective user) before anything is read or written.
    /// `None`: [`OwnIn::Read`] and there is no such entry.
    pub fn open_own(&self, name: &OsStr, how: OwnIn) -> io::Result<Option<File>> {
        let single = Path::new(name).components().count() == 1
            && matches!(
                Path::new(name).components().next(),
                Some(Component::Normal(_))
            );
        if !single {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a plain file name"),
            ));
        }
        let flags = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let flags = match how {
            OwnIn::Read => flags | OFlags::RDONLY,
            OwnIn::CreateNew => flags | OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            OwnIn::Append => flags | OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE,
        };
        let fd = match rfs::openat(self.as_fd(), name, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if how == OwnIn::Read => return Ok(None),
            Err(Errno::LOOP) => return Err(NotOwnFile::Symlink.into()),
            Err(Errno::ISDIR) => return Err(NotOwnFile::NotRegular.into()),
            Err(e) => return Err(e.into()),
        };
        let file = File::from(fd);
        check_own(&file)?;
        let _ = rfs::fcntl_setfl(&file, rfs::fcntl_getfl(&file)?.difference(OFlags::NONBLOCK));
        Ok(Some(file))
    }

    /// The bytes of the entry `name`, opened as [`HeldDir::open_own`] reads it: `None` when
    /// there is none; a file of more than `max` bytes is refused (`InvalidData`, naming both
    /// sizes), and read no further than that even if it grows meanwhile.
    pub fn read_own_within(&self, name: &OsStr, max: u64) -> io::Result<Option<Vec<u8>>> {
        let Some(file) = self.open_own(name, OwnIn::Read)? else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return Err(too_large(bytes.len() as u64, max));
        }
        Ok(Some(bytes))
    }

    /// The target of the symlink `rel` beneath the directory (its own directory resolved
    /// beneath; the link itself not followed).
    pub fn read_link_beneath(&self, rel: &Path) -> Result<PathBuf, Errno> {
        let name = rel.file_name().ok_or(Errno::INVAL)?;
        let parent = rel.parent().filter(|p| !p.as_os_str().is_empty());
        let target = match parent {
            Some(parent) => {
                let dir = self.open_beneath(parent, OFlags::PATH | OFlags::DIRECTORY)?;
                rfs::readlinkat(&dir, name, Vec::new())?
            }
            None => rfs::readlinkat(&self.0.fd, name, Vec::new())?,
        };
        Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
    }
}

/// A directory inside the root, held open: the steps of one replacement all happen in it.
#[derive(Debug)]
struct Dir {
    path: PathBuf,
    fd: OwnedFd,
}

impl Dir {
    fn sync(&self, disk: &Disk) -> io::Result<()> {
        disk.before(|| Step::SyncDir {
            dir: self.fd.as_fd(),
        })?;
        rfs::fsync(&self.fd).map_err(Into::into)
    }

    fn remove(&self, disk: &Disk, name: &OsStr) -> io::Result<()> {
        disk.before(|| Step::Remove {
            dir: self.fd.as_fd(),
            name,
        })?;
        rfs::unlinkat(&self.fd, name, AtFlags::empty()).map_err(Into::into)
    }

    /// Gives the file `from` the second name `to` (which must be free).
    fn link(&self, disk: &Disk, from: &OsStr, to: &OsStr) -> io::Result<()> {
        disk.before(|| Step::Link {
            dir: self.fd.as_fd(),
            from,
            to,
        })?;
        rfs::linkat(&self.fd, from, &self.fd, to, AtFlags::empty()).map_err(Into::into)
    }

    /// Renames `from` to `to`, over any file there.
    fn rename(&self, disk: &Disk, from: &OsStr, to: &OsStr) -> io::Result<()> {
        disk.before(|| Step::Rename {
            dir: self.fd.as_fd(),
            from,
            to,
        })?;
        rfs::renameat(&self.fd, from, &self.fd, to).map_err(Into::into)
    }
}

/// Reads `<root>/<rel>` if its real location is inside the root: `None` when there is no
/// such file, an [`Escape`] error when a symlink anywhere on the way leads outside.
pub fn read_confined(root: &Path, rel: &str) -> io::Result<Option<Vec<u8>>> {
    read_confined_within(root, rel, u64::MAX)
}

/// [`read_confined`] for a file that may hold at most `max` bytes: a larger one is
/// refused (`InvalidData`, naming both sizes) before any of it is read.
pub fn read_confined_within(root: &Path, rel: &str, max: u64) -> io::Result<Option<Vec<u8>>> {
    let rel = plain(rel)?;
    let root = Root::open(root)?;
    // Non-blocking, so that a FIFO planted at the name cannot hang the open.
    let fd = match root.open_beneath(rel, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut file = File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is not a regular file",
        ));
    }
    let size = file.metadata()?.len();
    if size > max {
        return Err(too_large(size, max));
    }
    let mut bytes = Vec::new();
    // A file that grows meanwhile is still read no further than the limit allows.
    (&mut file)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64, max));
    }
    Ok(Some(bytes))
}

/// The workspace root held open, for code that opens many files under it in a row (an
/// import stamps every session file): resolved and opened once.
pub struct HeldRoot(Root);

impl HeldRoot {
    pub fn open(root: &Path) -> io::Result<HeldRoot> {
        Root::open(root).map(HeldRoot)
    }

    /// [`open_regular`] beneath this root.
    pub fn open_regular(&self, rel: &str) -> io::Result<Option<(File, std::fs::Metadata)>> {
        let rel = plain(rel)?;
        let root = &self.0;
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW;
        let fd = match root.open_beneath(rel, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // The name itself is a symlink that stays inside (one leading outside is named
            // as such): not followed here either.
            Err(e) if is_symlink_escape(&e) && is_symlink_at(root, rel) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "it is a symlink, not a regular file",
                ));
            }
            Err(e) => return Err(e),
        };
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "it is not a regular file",
            ));
        }
        Ok(Some((file, meta)))
    }
}

/// A directory under the workspace root, opened once beneath the root's descriptor and
/// held: it is listed through that descriptor and every entry is read, removed and the
/// directory fsynced relative to it, so swapping the directory's path for a symlink
/// meanwhile redirects none of these.
#[derive(Debug)]
pub struct ConfinedDir(Dir, Disk);

impl ConfinedDir {
    /// Opens the directory `<root>/<rel>` beneath the root: `None` when there is none (or
    /// a non-directory is at its name), an [`Escape`] error naming it when resolving it
    /// leaves the root (a symlink leading outside). Its removals go through `disk`.
    pub fn open(disk: &Disk, root: &Path, rel: &str) -> io::Result<Option<ConfinedDir>> {
        let rel_path = plain(rel)?;
        let root = Root::open(root)?;
        let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NONBLOCK;
        match root.open_beneath(rel_path, flags, Mode::empty()) {
            Ok(fd) => Ok(Some(ConfinedDir(
                Dir {
                    path: root.path.join(rel_path),
                    fd,
                },
                disk.clone(),
            ))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The names of the directory's entries (without `.` and `..`), read through its
    /// descriptor.
    pub fn names(&self) -> io::Result<Vec<OsString>> {
        let mut names = Vec::new();
        for entry in rfs::Dir::read_from(&self.0.fd)? {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name != "." && name != ".." {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    /// Whether the entry `name` is a regular file (not followed if a symlink).
    pub fn is_regular(&self, name: &OsStr) -> bool {
        rfs::statat(&self.0.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::RegularFile)
    }

    /// The bytes of the entry `name` if it is a regular file: opened
    /// `O_NOFOLLOW|O_NONBLOCK` relative to the held directory (a symlink or FIFO there is
    /// neither followed nor waited on), checked with `fstat`. `None` when it is missing,
    /// a symlink or not a regular file.
    pub fn read_regular(&self, name: &OsStr) -> io::Result<Option<Vec<u8>>> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match rfs::openat(&self.0.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::LOOP) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Ok(None);
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(Some(bytes))
    }

    /// Removes the entry `name` of the held directory.
    pub fn remove(&self, name: &OsStr) -> io::Result<()> {
        self.0.remove(&self.1, name)
    }

    /// Flushes the held directory's entries to disk.
    pub fn sync(&self) -> io::Result<()> {
        self.0.sync(&self.1)
    }
}

/// Opens `<root>/<rel>` for reading only if it is a regular file reached without leaving
/// the root and is not itself a symlink: resolved beneath the root's descriptor, opened
/// `O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC` (a FIFO planted at the name cannot block the
/// open, a symlink there is not followed), then checked with `fstat` on the descriptor.
/// `None` when there is no such file. The file and its status as opened.
pub fn open_regular(root: &Path, rel: &str) -> io::Result<Option<(File, std::fs::Metadata)>> {
    HeldRoot::open(root)?.open_regular(rel)
}

fn is_symlink_escape(e: &io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<Escape>())
        .is_some_and(|escape| matches!(escape, Escape::Symlink { .. }))
}

/// Whether the last component of `rel` is a symlink (only to word an error).
fn is_symlink_at(root: &Root, rel: &Path) -> bool {
    rfs::statat(&root.fd, rel, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::Symlink)
}

fn too_large(size: u64, max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("it is {size} bytes, more than the {max} bytes such a file may have; refused"),
    )
}

/// Python's `Path.resolve(strict=False)`: the absolute path with every symlink of the
/// existing prefix resolved, and the non-existent rest appended as written.
pub fn resolve_lenient(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest
                .iter()
                .rev()
                .fold(real, |acc: PathBuf, part| acc.join(part));
        }
        match (
            existing.file_name().map(ToOwned::to_owned),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    // Nothing exists (a relative path whose first part is missing, or the empty path:
    // the current directory): fall back to a lexical absolute path, as written when the
    // current directory is unknown.
    let lexical = if path.as_os_str().is_empty() {
        std::path::absolute(".")
    } else {
        std::path::absolute(path)
    };
    lexical
        .unwrap_or_else(|_| path.to_path_buf())
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// Refuses `<root>/<rel>` when resolving it leaves the root (a symlink on the way, the
/// file itself included, even dangling, that leads outside); a path that does not exist
/// yet is fine as far as it resolves. For a path then opened by name by code that takes a
/// path (the store).
pub fn check_confined(root: &Path, rel: &str) -> io::Result<()> {
    let rel = plain(rel)?;
    match Root::open(root)?.open_beneath(rel, OFlags::PATH, Mode::empty()) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Why a file this program keeps for itself (the document lock, the store, a temp file)
/// is not used: only a regular file with one link, owned by this process's effective
/// user, is written. A hard link is not a path: confinement by path cannot see that a
/// name inside the workspace is also a file elsewhere, but its link count can.
#[derive(Debug, thiserror::Error)]
pub enum NotOwnFile {
    #[error("it is a symlink, not a regular file")]
    Symlink,
    #[error("it is not a regular file")]
    NotRegular,
    #[error(
        "it has {links} hard links (a file of the workspace's own has one): writing it would change a file elsewhere too"
    )]
    Links { links: u64 },
    #[error("it is owned by uid {owner}, not by this user (uid {me})")]
    Owner { owner: u32, me: u32 },
}

impl From<NotOwnFile> for io::Error {
    fn from(e: NotOwnFile) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

/// The [`NotOwnFile`] inside `e`, if that is why it failed.
pub fn not_own_file(e: &io::Error) -> Option<&NotOwnFile> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<NotOwnFile>())
}

/// Checks the opened file by its descriptor (`fstat`): a regular file with exactly one
/// link, owned by the effective user. What the descriptor is, not what a path named.
pub fn check_own(file: &impl AsFd) -> io::Result<()> {
    let st = rfs::fstat(file)?;
    if rfs::FileType::from_raw_mode(st.st_mode) != rfs::FileType::RegularFile {
        return Err(NotOwnFile::NotRegular.into());
    }
    #[allow(clippy::useless_conversion)]
    let links = u64::from(st.st_nlink);
    if links != 1 {
        return Err(NotOwnFile::Links { links }.into());
    }
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != me {
        return Err(NotOwnFile::Owner {
            owner: st.st_uid,
            me,
        }
        .into());
    }
    Ok(())
}

/// How [`HeldDir::open_own`] opens a file of the program's own in a held directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnIn {
    /// Read only; `None` when it does not exist.
    Read,
    /// Created, mode 0600; refused when anything is already at the name.
    CreateNew,
    /// Appended to (each write lands at the end), created with mode 0600 when missing.
    Append,
}

/// Why a directory this program keeps its own files in is not used: only a directory owned
/// by the effective user that no one else may write into (nor, when it must be private,
/// list or enter) holds them. A directory another user can write into is one where that
/// user may plant or swap any of its entries.
#[derive(Debug, thiserror::Error)]
pub enum NotOwnDir {
    #[error("it is not a directory")]
    NotDirectory,
    #[error("it is owned by uid {owner}, not by this user (uid {me})")]
    Owner { owner: u32, me: u32 },
    #[error("its mode is {mode:04o}: its group or other users may write into it")]
    Writable { mode: u32 },
    #[error("its mode is {mode:04o}, not 0700: its group or other users may read it")]
    Readable { mode: u32 },
}

impl From<NotOwnDir> for io::Error {
    fn from(e: NotOwnDir) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, e)
    }
}

/// Who besides its owner may use a directory [`check_own_dir`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirAccess {
    /// No one (mode 0700 or less): for a directory holding secrets.
    Private,
    /// Others may read it, no one may write into it.
    NotWritable,
}

/// Checks the opened directory by its descriptor (`fstat`): a directory owned by the
/// effective user, writable by no one else, and with [`DirAccess::Private`] not readable
/// or searchable by anyone else either.
pub fn check_own_dir(dir: &impl AsFd, access: DirAccess) -> io::Result<()> {
    let st = rfs::fstat(dir)?;
    if rfs::FileType::from_raw_mode(st.st_mode) != rfs::FileType::Directory {
        return Err(NotOwnDir::NotDirectory.into());
    }
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != me {
        return Err(NotOwnDir::Owner {
            owner: st.st_uid,
            me,
        }
        .into());
    }
    #[allow(clippy::useless_conversion)]
    let mode = u32::from(st.st_mode) & 0o7777;
    if mode & 0o022 != 0 {
        return Err(NotOwnDir::Writable { mode }.into());
    }
    if access == DirAccess::Private && mode & 0o077 != 0 {
        return Err(NotOwnDir::Readable { mode }.into());
    }
    Ok(())
}

/// How [`open_own`] opens a file of the program's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnOpen {
    /// Read only; it must exist.
    Read,
    /// Read and write, created when missing.
    ReadWrite,
}

/// Opens `<root>/<rel>`, a file this program keeps for itself (the store, the document
/// lock), beneath the root's descriptor (its directory created if missing when writing):
/// never through a symlink at its name, never waiting on a FIFO there, and checked with
/// [`check_own`] before anything is written through it. `None`: there is none (reading).
pub fn open_own(root: &Path, rel: &str, how: OwnOpen) -> io::Result<Option<File>> {
    let root = Root::open(root)?;
    let flags = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let opened = match how {
        OwnOpen::Read => {
            let rel_path = plain(rel)?;
            match root.open_beneath_errno(rel_path, flags | OFlags::RDONLY, Mode::empty()) {
                Err(Errno::NOENT) => return Ok(None),
                Err(Errno::XDEV) => return Err(escape(&root.path, rel_path)),
                other => other,
            }
        }
        OwnOpen::ReadWrite => {
            let (dir, name) = root.parent_of(rel)?;
            rfs::openat(
                &dir.fd,
                name,
                flags | OFlags::RDWR | OFlags::CREATE,
                Mode::from_raw_mode(0o666),
            )
        }
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(Errno::LOOP) => return Err(NotOwnFile::Symlink.into()),
        // A directory at the name, opened for writing.
        Err(Errno::ISDIR) => return Err(NotOwnFile::NotRegular.into()),
        Err(e) => return Err(e.into()),
    };
    let file = File::from(fd);
    check_own(&file)?;
    // Blocking from here on (a regular file never blocks; redb expects plain I/O).
    let _ = rfs::fcntl_setfl(&file, rfs::fcntl_getfl(&file)?.difference(OFlags::NONBLOCK));
    Ok(Some(file))
}

/// Opens (creating it and its directory if missing) the lock file `<root>/<rel>` with
/// [`open_own`]: refused when its real location is outside the root, or when it is not a
/// regular file of one link owned by this user (a hard link planted there would have its
/// other name truncated by the holder line).
pub fn open_lock_file(root: &Path, rel: &str) -> io::Result<File> {
    open_own(root, rel, OwnOpen::ReadWrite)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no lock file"))
}

/// A file replaced by [`replace`]: kept, or put back as it was.
#[derive(Debug)]
#[must_use = "a replacement is either kept or undone"]
pub struct Replacement {
    dir: Dir,
    name: OsString,
    /// The name of a hard link to the file that was there before (`None` when there was none).
    backup: Option<OsString>,
    disk: Disk,
}

impl Replacement {
    /// The new file stays; the link to the previous one goes.
    pub fn keep(self) {
        if let Some(backup) = &self.backup
            && let Err(e) = self.dir.remove(&self.disk, backup)
            && e.kind() != io::ErrorKind::NotFound
        {
            // A stray temp file only; `export` removes it.
            tracing::warn!(path = %self.dir.path.join(backup).display(), error = %e, "could not remove a backup link");
        }
    }

    /// Puts the previous file back (or removes the new one when there was none). Needs no
    /// free space: it renames the hard link made before the replacement.
    pub fn undo(self) -> io::Result<()> {
        match &self.backup {
            Some(backup) => self.dir.rename(&self.disk, backup, &self.name)?,
            None => match self.dir.remove(&self.disk, &self.name) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            },
        }
        self.dir.sync(&self.disk)
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path.join(&self.name)
    }
}

/// Creates a new temp file for `name` in `dir` (exclusively, never through a symlink).
fn create_temp(disk: &Disk, dir: &Dir, name: &OsStr) -> io::Result<(OsString, File)> {
    let temp = temp_name(name);
    disk.before(|| Step::Create {
        dir: dir.fd.as_fd(),
        name: &temp,
    })?;
    let fd = rfs::openat(
        &dir.fd,
        &temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )?;
    let file = File::from(fd);
    // Created just now, exclusively: one link, ours. Checked all the same before a byte
    // is written through it.
    if let Err(e) = check_own(&file) {
        let _ = dir.remove(disk, &temp);
        return Err(e);
    }
    Ok((temp, file))
}

/// Writes all of `bytes` into the new, empty file `file`, then flushes it to the device.
fn write_new(disk: &Disk, file: &mut File, bytes: &[u8]) -> io::Result<()> {
    disk.before(|| Step::Write {
        file: file.as_fd(),
        offset: 0,
        data: bytes,
    })?;
    file.write_all(bytes)?;
    sync_file(disk, file)
}

/// Flushes the open file `file`'s data to the device (`fsync`).
pub fn sync_file(disk: &Disk, file: &File) -> io::Result<()> {
    disk.before(|| Step::Sync { file: file.as_fd() })?;
    file.sync_all()
}

/// Replaces `<root>/<rel>` with `bytes` atomically and durably (temp file in the same
/// directory, fsync, rename, fsync the directory), keeping a hard link to the previous file
/// so that [`Replacement::undo`] can put it back. Missing directories are created. Refused
/// when the directory's real location is outside the root. Every step happens in the
/// directory as opened once, so swapping a path component meanwhile redirects none.
/// Every step goes through `disk`.
pub fn replace(disk: &Disk, root: &Path, rel: &str, bytes: &[u8]) -> io::Result<Replacement> {
    let (dir, name) = Root::open(root)?.parent_of(rel)?;
    let (temp, mut file) = create_temp(disk, &dir, name)?;
    let written = write_new(disk, &mut file, bytes);
    drop(file);
    if let Err(e) = written.and_then(|()| fault::inject("rename")) {
        let _ = dir.remove(disk, &temp);
        return Err(e);
    }
    let backup = match rfs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(_) => {
            let backup = temp_name(name);
            if let Err(e) = dir.link(disk, name, &backup) {
                let _ = dir.remove(disk, &temp);
                return Err(e);
            }
            Some(backup)
        }
        Err(Errno::NOENT) => None,
        Err(e) => {
            let _ = dir.remove(disk, &temp);
            return Err(e.into());
        }
    };
    if let Err(e) = dir.rename(disk, &temp, name) {
        let _ = dir.remove(disk, &temp);
        if let Some(backup) = &backup {
            let _ = dir.remove(disk, backup);
        }
        return Err(e);
    }
    let replacement = Replacement {
        dir,
        name: name.to_owned(),
        backup,
        disk: disk.clone(),
    };
    if let Err(e) = replacement.dir.sync(disk) {
        let _ = replacement.undo();
        return Err(e);
    }
    Ok(replacement)
}

/// Writes `<root>/<rel>` atomically and durably, for good ([`replace`], then kept).
pub fn atomic_write(disk: &Disk, root: &Path, rel: &str, bytes: &[u8]) -> io::Result<()> {
    replace(disk, root, rel, bytes).map(Replacement::keep)
}

/// Writes `<root>/<rel>` atomically as `write` streams it into a temp file of our own name
/// in the target's directory, then renames it into place, so a large file is never held
/// in memory. `durable`: the file and then the directory are fsynced as well; else a
/// reader still sees the old file or the whole new one, and a later [`sync_filesystem`]
/// makes many such files durable at once. A failed `write` removes the temp file and
/// leaves the target as it was.
pub fn atomic_write_with<E: From<io::Error>>(
    root: &Path,
    rel: &str,
    durable: bool,
    write: impl FnOnce(&mut File) -> Result<(), E>,
) -> Result<(), E> {
    // The page `view` writes is no document: always the real disk.
    let disk = &Disk::real();
    let (dir, name) = Root::open(root)?.parent_of(rel)?;
    let (temp, mut file) = create_temp(disk, &dir, name)?;
    let written = write(&mut file).and_then(|()| {
        if durable {
            file.sync_all().map_err(E::from)
        } else {
            Ok(())
        }
    });
    drop(file);
    if let Err(e) = written {
        let _ = dir.remove(disk, &temp);
        return Err(e);
    }
    if let Err(e) = dir.rename(disk, &temp, name) {
        let _ = dir.remove(disk, &temp);
        return Err(e.into());
    }
    if durable {
        dir.sync(disk)?;
    }
    Ok(())
}

/// Flushes everything written to the file system holding the directory `dir` (one
/// `syncfs`, for many files written by [`atomic_write_with`] without `durable`).
pub fn sync_filesystem(dir: &Path) -> io::Result<()> {
    let held = rfs::open(
        dir,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rfs::syncfs(&held)?;
    Ok(())
}

/// Renames `from` to `to`, two names in the directory `dir`, and flushes the directory:
/// both steps through `disk`.
pub fn rename_durably(disk: &Disk, dir: &Path, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let dir = Dir {
        path: dir.to_path_buf(),
        fd: rfs::open(
            dir,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?,
    };
    dir.rename(disk, from, to)?;
    dir.sync(disk)
}

/// Removes the file at `path` (its directory opened by path), through `disk`.
pub fn remove_file(disk: &Disk, path: &Path) -> io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no file name"));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let dir = Dir {
        path: parent.to_path_buf(),
        fd: rfs::open(
            parent,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?,
    };
    dir.remove(disk, name)
}

/// Faults injected at known steps, for tests of the failure paths through the real binary.
/// Only debug builds read `EVIDENCE_STORE_FAULT`; release builds never fail on purpose.
///
/// The variable holds `<step>` or `<step>@<n>` (the n-th time this process reaches the
/// step, counting from 1; default 1). Steps: `rename` (the file replacement fails before
/// its rename), `commit` (the store commit fails after the file was replaced),
/// `die-before-commit` and `die-after-commit` (the process is killed at that point).
pub mod fault {
    use std::io;

    /// How often this process reached the configured step (only that one is counted).
    #[cfg(debug_assertions)]
    static HITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    /// Whether the fault configured for `step` fires now.
    #[cfg(debug_assertions)]
    pub fn fires(step: &str) -> bool {
        let Some(spec) = crate::util::test_hooks::fault() else {
            return false;
        };
        let (name, at) = match spec.split_once('@') {
            Some((name, n)) => (name, n.parse::<u64>().unwrap_or(1)),
            None => (spec.as_str(), 1),
        };
        name == step && HITS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == at
    }

    #[cfg(not(debug_assertions))]
    pub fn fires(_step: &str) -> bool {
        false
    }

    /// An I/O error when the fault for `step` fires.
    pub fn inject(step: &str) -> io::Result<()> {
        if fires(step) {
            return Err(io::Error::other(format!("injected fault at {step}")));
        }
        Ok(())
    }

    /// Kills the process with SIGKILL (no destructor, no flush, no core file) when the
    /// fault for `step` fires.
    pub fn die(step: &str) {
        if fires(step) {
            tracing::warn!(step, "injected fault: killing this process");
            // SAFETY: kill(2) on our own pid with a valid signal number; no memory involved.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_path_with_nothing_existing_resolves_lexically_against_the_current_directory() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            resolve_lenient(Path::new("no-such-dir-here/./a/../b/")).as_os_str(),
            cwd.join("no-such-dir-here/a/../b").as_os_str()
        );
        assert_eq!(resolve_lenient(Path::new("")).as_os_str(), cwd.as_os_str());
    }

    #[test]
    fn replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        atomic_write(&Disk::real(), dir.path(), "a/b/card.json", b"{}\n").unwrap();
        atomic_write(&Disk::real(), dir.path(), "a/b/card.json", b"{\"x\": 1}\n").unwrap();
        assert_eq!(
            fs::read(dir.path().join("a/b/card.json")).unwrap(),
            b"{\"x\": 1}\n"
        );
        let names: Vec<_> = fs::read_dir(dir.path().join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["card.json"]);
    }

    #[test]
    fn long_names_get_temp_names_within_name_max() {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("{}.json", "é".repeat(120));
        assert_eq!(name.len(), 245);
        let temp = temp_name(OsStr::new(&name));
        assert!(temp.len() <= 255, "{}", temp.len());
        assert!(is_temp_name(&temp.to_string_lossy()));
        atomic_write(&Disk::real(), dir.path(), &name, b"{}").unwrap();
        assert_eq!(fs::read(dir.path().join(&name)).unwrap(), b"{}");
    }

    #[test]
    fn undo_puts_the_previous_file_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("card.json");
        replace(&Disk::real(), dir.path(), "new.json", b"x")
            .unwrap()
            .undo()
            .unwrap();
        assert!(!dir.path().join("new.json").exists());
        fs::write(&path, b"old").unwrap();
        let r = replace(&Disk::real(), dir.path(), "card.json", b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        r.undo().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn temp_names_are_unique_and_recognised() {
        let a = temp_name(OsStr::new("S0001.json"));
        let b = temp_name(OsStr::new("S0001.json"));
        assert_ne!(a, b);
        let a = a.to_str().unwrap();
        assert!(a.starts_with(".S0001.json."), "{a}");
        assert!(is_temp_name(a), "{a}");
        for other in [
            "S0001.json.tmp",
            "S0001.json",
            ".S0001.json.evidence-store.tmp",
            ".S0001.json.1.2.evidence-store.tmp",
            ".S0001.json.x.2.0123456789abcdef.evidence-store.tmp",
            "..1.2.0123456789abcdef.evidence-store.tmp",
        ] {
            assert!(!is_temp_name(other), "{other}");
        }
        assert!(is_temp_name(
            ".S0001.json.12.3.0123456789abcdef.evidence-store.tmp"
        ));
    }

    #[test]
    fn paths_leaving_the_root_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("evidence")).unwrap();
        let err = atomic_write(&Disk::real(), dir.path(), "evidence/a.json", b"x").unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
        fs::write(outside.path().join("a.json"), b"secret").unwrap();
        let err = read_confined(dir.path(), "evidence/a.json").unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        assert!(read_confined(dir.path(), "../x").is_err());
    }

    /// `<dir>/evidence` becomes a symlink to `outside` (the real directory moves aside).
    fn swap_for_symlink(dir: &Path, outside: &Path) -> PathBuf {
        let aside = dir.join("evidence.real");
        fs::rename(dir.join("evidence"), &aside).unwrap();
        std::os::unix::fs::symlink(outside, dir.join("evidence")).unwrap();
        aside
    }

    #[test]
    fn a_replacement_stays_in_the_directory_it_opened() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        atomic_write(&Disk::real(), dir.path(), "evidence/a.json", b"old").unwrap();
        let replaced = replace(&Disk::real(), dir.path(), "evidence/a.json", b"new").unwrap();
        let aside = swap_for_symlink(dir.path(), outside.path());
        replaced.undo().unwrap();
        assert_eq!(fs::read(aside.join("a.json")).unwrap(), b"old");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_outside_is_an_error_not_a_missing_file() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        atomic_write(&Disk::real(), dir.path(), "evidence/a.json", b"x").unwrap();
        swap_for_symlink(dir.path(), outside.path());
        // The file is not outside either: still refused, never read as "no such file".
        let err = read_confined(dir.path(), "evidence/a.json").unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        let err = atomic_write(&Disk::real(), dir.path(), "evidence/b.json", b"x").unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn symlinks_that_stay_inside_are_followed_and_absolute_ones_refused() {
        let dir = tempfile::tempdir().unwrap();
        atomic_write(&Disk::real(), dir.path(), "real/a.json", b"x").unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("rel")).unwrap();
        assert_eq!(
            read_confined(dir.path(), "rel/a.json").unwrap().unwrap(),
            b"x"
        );
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("abs")).unwrap();
        let err = read_confined(dir.path(), "abs/a.json").unwrap_err();
        assert!(
            err.to_string().contains("a symlink on its way is absolute"),
            "{err}"
        );
    }

    #[test]
    fn without_openat2_every_symlink_on_the_way_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        atomic_write(&Disk::real(), dir.path(), "real/a.json", b"x").unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("rel")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        let opened =
            root.open_without_symlinks(Path::new("real/a.json"), OFlags::RDONLY, Mode::empty());
        let mut text = String::new();
        File::from(opened.unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "x");
        for through in ["rel/a.json", "real/../real/a.json"] {
            let err = root
                .open_without_symlinks(Path::new(through), OFlags::RDONLY, Mode::empty())
                .unwrap_err();
            assert!(
                [Errno::LOOP, Errno::XDEV].contains(&err),
                "{through}: {err}"
            );
        }
    }

    #[test]
    fn own_files_in_a_held_directory_are_regular_single_links_made_0600_and_its_own() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let held = HeldDir::open(dir.path()).unwrap();
        let name = OsStr::new("settings");
        held.open_own(name, OwnIn::CreateNew)
            .unwrap()
            .unwrap()
            .write_all(b"a")
            .unwrap();
        let mode = fs::metadata(dir.path().join("settings"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = held.open_own(name, OwnIn::CreateNew).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        held.open_own(name, OwnIn::Append)
            .unwrap()
            .unwrap()
            .write_all(b"b")
            .unwrap();
        assert_eq!(held.read_own_within(name, 2).unwrap().unwrap(), b"ab");
        assert_eq!(
            held.read_own_within(name, 1).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert!(
            held.read_own_within(OsStr::new("none"), 9)
                .unwrap()
                .is_none()
        );
        std::os::unix::fs::symlink("settings", dir.path().join("link")).unwrap();
        fs::hard_link(dir.path().join("settings"), dir.path().join("twin")).unwrap();
        for (refused, why) in [("link", "a symlink"), ("twin", "2 hard links")] {
            let e = held.read_own_within(OsStr::new(refused), 9).unwrap_err();
            assert!(e.to_string().contains(why), "{refused}: {e}");
        }
        assert!(held.open_own(OsStr::new("a/b"), OwnIn::Read).is_err());
        assert!(held.has_entry(OsStr::new("link")) && !held.has_entry(OsStr::new("none")));
    }

    #[test]
    fn an_own_directory_is_this_user_s_and_writable_by_no_one_else() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let set = |mode| fs::set_permissions(dir.path(), fs::Permissions::from_mode(mode)).unwrap();
        let check = |access| check_own_dir(&HeldDir::open(dir.path()).unwrap().as_fd(), access);
        set(0o700);
        assert!(check(DirAccess::Private).is_ok());
        set(0o755);
        assert!(check(DirAccess::NotWritable).is_ok());
        assert!(
            check(DirAccess::Private)
                .unwrap_err()
                .to_string()
                .contains("0755, not 0700")
        );
        for mode in [0o775, 0o757, 0o1777] {
            set(mode);
            let e = check(DirAccess::NotWritable).unwrap_err();
            assert!(e.to_string().contains("may write into it"), "{mode:o}: {e}");
        }
        set(0o700);
        let plain = tempfile::NamedTempFile::new().unwrap();
        let e = check_own_dir(plain.as_file(), DirAccess::NotWritable).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }

    #[test]
    fn a_held_directory_knows_where_it_is_and_opens_only_beneath_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        atomic_write(&Disk::real(), dir.path(), "proj/src/a.py", b"x").unwrap();
        fs::write(outside.path().join("b.py"), b"y").unwrap();
        std::os::unix::fs::symlink(dir.path().join("proj"), dir.path().join("alias")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("proj/out")).unwrap();
        std::os::unix::fs::symlink("src/a.py", dir.path().join("proj/rel.py")).unwrap();
        let held = HeldDir::open(&dir.path().join("alias")).unwrap();
        assert_eq!(
            held.real_path(),
            dir.path().join("proj").canonicalize().unwrap()
        );
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW;
        let mut text = String::new();
        File::from(held.open_beneath(Path::new("src/a.py"), flags).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "x");
        assert_eq!(
            held.open_beneath(Path::new("out/b.py"), flags).unwrap_err(),
            Errno::XDEV
        );
        assert_eq!(
            held.open_beneath(Path::new("../alias/src/a.py"), flags)
                .unwrap_err(),
            Errno::XDEV
        );
        assert_eq!(
            held.open_beneath(Path::new("rel.py"), flags).unwrap_err(),
            Errno::LOOP
        );
        assert_eq!(
            held.read_link_beneath(Path::new("rel.py")).unwrap(),
            Path::new("src/a.py")
        );
        assert_eq!(
            held.read_link_beneath(Path::new("src/a.py")).unwrap_err(),
            Errno::INVAL
        );
        let not_dir = HeldDir::open(&dir.path().join("proj/src/a.py"))
            .err()
            .unwrap();
        assert_eq!(not_dir.raw_os_error(), Some(libc::ENOTDIR));
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("card.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = read_confined(dir.path(), "card.json").unwrap_err();
        assert_eq!(err.to_string(), "it is not a regular file");
        fs::create_dir(dir.path().join("d.json")).unwrap();
        assert!(read_confined(dir.path(), "d.json").is_err());
        assert_eq!(read_confined(dir.path(), "none.json").unwrap(), None);
    }
}
