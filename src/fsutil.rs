//! File replacement confined to the workspace.
//!
//! A reader sees the old file or the new one, never a mix. Every temp file has a name of
//! its own (`.<name>.<pid>.<n>.<random>.evidence-store.tmp`), is created exclusively and
//! never through a symlink, and lives in the target's own directory; a crash leaves at
//! most such a file, which `export` removes. Paths are resolved before use, and a path
//! whose real location is outside the workspace root is refused with an error naming it.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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
    let Some(stem) = name
        .strip_prefix('.')
        .and_then(|s| s.strip_suffix(TEMP_SUFFIX))
    else {
        return false;
    };
    let mut parts = stem.rsplitn(4, '.');
    let (Some(random), Some(n), Some(pid), Some(target)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    random.len() == 16
        && random.bytes().all(|b| b.is_ascii_hexdigit())
        && digits(n)
        && digits(pid)
        && !target.is_empty()
}

/// A path whose real location is outside the workspace root.
#[derive(Debug, thiserror::Error)]
#[error("it resolves to {real}, outside the workspace {root}")]
pub struct Escape {
    pub real: String,
    pub root: String,
}

fn escape(real: &Path, root: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        Escape {
            real: real.display().to_string(),
            root: root.display().to_string(),
        },
    )
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

/// Reads `<root>/<rel>` if its real location is inside the root: `None` when there is no
/// such file, an [`Escape`] error when a symlink anywhere on the way leads outside.
pub fn read_confined(root: &Path, rel: &str) -> io::Result<Option<Vec<u8>>> {
    let root = real_root(root)?;
    let path = root.join(plain(rel)?);
    let real = match path.canonicalize() {
        Ok(real) => real,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !real.starts_with(&root) {
        return Err(escape(&real, &root));
    }
    // Non-blocking, so that a FIFO planted at the name cannot hang the open.
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// The real directory `<root>/<rel>` names, created if missing, refused (before anything is
/// created) when it is or would be outside the root.
fn confined_dir(root: &Path, rel: &Path) -> io::Result<PathBuf> {
    let root = real_root(root)?;
    let wanted = resolve_lenient(&root.join(rel));
    if !wanted.starts_with(&root) {
        return Err(escape(&wanted, &root));
    }
    fs::create_dir_all(&wanted)?;
    // Resolved again now that it exists: a symlink planted meanwhile is caught here.
    let real = wanted.canonicalize()?;
    if !real.starts_with(&root) {
        return Err(escape(&real, &root));
    }
    Ok(real)
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
    // Nothing exists (not even the root): fall back to a lexical absolute path.
    let base = std::env::current_dir().unwrap_or_default();
    base.join(path)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// The real directory of `<root>/<rel>` (created if missing; refused when outside the
/// root) and the file's name in it.
fn confined_parent<'r>(root: &Path, rel: &'r str) -> io::Result<(PathBuf, &'r OsStr)> {
    let rel = plain(rel)?;
    let (Some(name), Some(parent)) = (rel.file_name(), rel.parent()) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no file name"));
    };
    let dir = if parent.as_os_str().is_empty() {
        real_root(root)?
    } else {
        confined_dir(root, parent)?
    };
    Ok((dir, name))
}

/// Opens (creating it and its directory if missing) the lock file `<root>/<rel>`, refused
/// when its real location is outside the root.
pub fn open_lock_file(root: &Path, rel: &str) -> io::Result<File> {
    let (dir, name) = confined_parent(root, rel)?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(name))
}

/// A file replaced by [`replace`]: kept, or put back as it was.
#[derive(Debug)]
#[must_use = "a replacement is either kept or undone"]
pub struct Replacement {
    dir: PathBuf,
    target: PathBuf,
    /// A hard link to the file that was there before (`None` when there was none).
    backup: Option<PathBuf>,
}

impl Replacement {
    /// The new file stays; the link to the previous one goes.
    pub fn keep(self) {
        if let Some(backup) = &self.backup
            && let Err(e) = fs::remove_file(backup)
            && e.kind() != io::ErrorKind::NotFound
        {
            // A stray temp file only; `export` removes it.
            tracing::warn!(path = %backup.display(), error = %e, "could not remove a backup link");
        }
    }

    /// Puts the previous file back (or removes the new one when there was none). Needs no
    /// free space: it renames the hard link made before the replacement.
    pub fn undo(self) -> io::Result<()> {
        match &self.backup {
            Some(backup) => fs::rename(backup, &self.target)?,
            None => match fs::remove_file(&self.target) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            },
        }
        File::open(&self.dir)?.sync_all()
    }

    pub fn path(&self) -> &Path {
        &self.target
    }
}

/// Creates a new temp file next to `target` (exclusively, never through a symlink).
fn create_temp(dir: &Path, name: &OsStr) -> io::Result<(PathBuf, File)> {
    let temp = dir.join(temp_name(name));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)?;
    Ok((temp, file))
}

/// Replaces `<root>/<rel>` with `bytes` atomically and durably (temp file in the same real
/// directory, fsync, rename, fsync the directory), keeping a hard link to the previous file
/// so that [`Replacement::undo`] can put it back. Missing directories are created. Refused
/// when the real directory is outside the root.
pub fn replace(root: &Path, rel: &str, bytes: &[u8]) -> io::Result<Replacement> {
    let (dir, name) = confined_parent(root, rel)?;
    let target = dir.join(name);
    let (temp, mut file) = create_temp(&dir, name)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written.and_then(|()| fault::inject("rename")) {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    let backup = match fs::symlink_metadata(&target) {
        Ok(_) => {
            let backup = dir.join(temp_name(name));
            if let Err(e) = fs::hard_link(&target, &backup) {
                let _ = fs::remove_file(&temp);
                return Err(e);
            }
            Some(backup)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
    };
    let replacement = Replacement {
        dir,
        target,
        backup,
    };
    if let Err(e) = fs::rename(&temp, &replacement.target) {
        let _ = fs::remove_file(&temp);
        if let Some(backup) = &replacement.backup {
            let _ = fs::remove_file(backup);
        }
        return Err(e);
    }
    if let Err(e) = File::open(&replacement.dir).and_then(|d| d.sync_all()) {
        let _ = replacement.undo();
        return Err(e);
    }
    Ok(replacement)
}

/// Writes `<root>/<rel>` atomically and durably, for good ([`replace`], then kept).
pub fn atomic_write(root: &Path, rel: &str, bytes: &[u8]) -> io::Result<()> {
    replace(root, rel, bytes).map(Replacement::keep)
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
        let Ok(spec) = std::env::var("EVIDENCE_STORE_FAULT") else {
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

    #[test]
    fn replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        atomic_write(dir.path(), "a/b/card.json", b"{}\n").unwrap();
        atomic_write(dir.path(), "a/b/card.json", b"{\"x\": 1}\n").unwrap();
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
        atomic_write(dir.path(), &name, b"{}").unwrap();
        assert_eq!(fs::read(dir.path().join(&name)).unwrap(), b"{}");
    }

    #[test]
    fn undo_puts_the_previous_file_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("card.json");
        replace(dir.path(), "new.json", b"x")
            .unwrap()
            .undo()
            .unwrap();
        assert!(!dir.path().join("new.json").exists());
        fs::write(&path, b"old").unwrap();
        let r = replace(dir.path(), "card.json", b"new").unwrap();
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
        let err = atomic_write(dir.path(), "evidence/a.json", b"x").unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
        fs::write(outside.path().join("a.json"), b"secret").unwrap();
        let err = read_confined(dir.path(), "evidence/a.json").unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        assert!(read_confined(dir.path(), "../x").is_err());
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
