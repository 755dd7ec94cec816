//! Checking a file citation against the project directory it was written in.
//!
//! The directory is the citing line's `cwd`. Nothing outside it is read: the cited path
//! is joined to the directory's real path and resolved; a path that leads elsewhere
//! (absolute, `..`, or through a symlink) is `outside_project` and is not opened. Only a
//! regular file is read, opened `O_NOFOLLOW | O_NONBLOCK` (a FIFO cannot hang the check)
//! and checked again with `fstat` after the open. A check never fails: what cannot be
//! decided is `unchecked`, with the reason.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::citations::verify::{self, Status};

/// Cited files larger than this are not read (`unchecked`).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// The result of checking one citation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub status: Status,
    pub sha256: Option<[u8; 32]>,
    pub file_lines: Option<u64>,
    pub detail: Option<String>,
}

impl Checked {
    fn unchecked(detail: impl Into<String>) -> Checked {
        Checked {
            status: Status::Unchecked,
            sha256: None,
            file_lines: None,
            detail: Some(detail.into()),
        }
    }

    fn status(status: Status) -> Checked {
        Checked {
            status,
            sha256: None,
            file_lines: None,
            detail: None,
        }
    }
}

/// What a resolved file holds: its digest and line count, or why it was not read.
#[derive(Debug, Clone)]
enum Resolved {
    Read { sha256: [u8; 32], lines: u64 },
    Status(Status),
    Unchecked(String),
}

/// Checks file citations, remembering each file it read for the life of the checker (one
/// import or one re-verification), so a file cited many times is read once.
#[derive(Default)]
pub struct Checker {
    roots: HashMap<String, Result<PathBuf, String>>,
    files: HashMap<(String, String), Resolved>,
}

impl Checker {
    /// Checks a citation of `kind` with `reference`, written in directory `cwd`.
    pub fn check(&mut self, kind: &str, reference: &str, cwd: Option<&str>) -> Checked {
        if kind != crate::citations::FILE {
            return Checked::unchecked("not a file citation");
        }
        let Some(file_ref) = verify::file_reference(reference) else {
            return Checked::unchecked("not a path with a line number");
        };
        let Some(cwd) = cwd else {
            return Checked::unchecked("the session records no working directory");
        };
        let root = self
            .roots
            .entry(cwd.to_owned())
            .or_insert_with(|| real_dir(cwd))
            .clone();
        let root = match root {
            Ok(root) => root,
            Err(why) => return Checked::unchecked(why),
        };
        let resolved = self
            .files
            .entry((cwd.to_owned(), file_ref.path.to_owned()))
            .or_insert_with(|| resolve_and_read(&root, file_ref.path))
            .clone();
        match resolved {
            Resolved::Read { sha256, lines } => Checked {
                status: verify::line_status(file_ref.lines, lines),
                sha256: Some(sha256),
                file_lines: Some(lines),
                detail: None,
            },
            Resolved::Status(status) => Checked::status(status),
            Resolved::Unchecked(why) => Checked::unchecked(why),
        }
    }
}

/// The real path of an absolute working directory.
fn real_dir(cwd: &str) -> Result<PathBuf, String> {
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(format!("the working directory {cwd} is not absolute"));
    }
    match path.canonicalize() {
        // Every path is inside `/`: confinement to it would confine nothing.
        Ok(real) if real.parent().is_none() => Err(format!(
            "the working directory {cwd} is the filesystem root; files are checked only inside a project directory"
        )),
        Ok(real) if real.is_dir() => Ok(real),
        Ok(_) => Err(format!("the working directory {cwd} is not a directory")),
        Err(e) => Err(format!(
            "the working directory {cwd} cannot be resolved: {e}"
        )),
    }
}

/// `path` with `.` removed and each `..` taking away the component before it, without
/// looking at the filesystem.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn resolve_and_read(root: &Path, cited: &str) -> Resolved {
    let joined = root.join(cited);
    if !lexical(&joined).starts_with(root) {
        return Resolved::Status(Status::OutsideProject);
    }
    let real = match joined.canonicalize() {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Where the existing part of the path leads decides between the two.
            let lenient = lexical(&crate::fsutil::resolve_lenient(&joined));
            return Resolved::Status(if lenient.starts_with(root) {
                Status::MissingFile
            } else {
                Status::OutsideProject
            });
        }
        Err(e) => return Resolved::Unchecked(format!("cannot resolve {cited}: {e}")),
    };
    if !real.starts_with(root) {
        return Resolved::Status(Status::OutsideProject);
    }
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Resolved::Status(Status::MissingFile);
        }
        Err(e) => return Resolved::Unchecked(format!("cannot open {cited}: {e}")),
    };
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => return Resolved::Unchecked(format!("cannot stat {cited}: {e}")),
    };
    if !meta.is_file() {
        return Resolved::Unchecked(format!("{cited} is not a regular file"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Resolved::Unchecked(format!(
            "{cited} is larger than {} MiB",
            MAX_FILE_BYTES >> 20
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    if let Err(e) = (&mut file).take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes) {
        return Resolved::Unchecked(format!("cannot read {cited}: {e}"));
    }
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Resolved::Unchecked(format!(
            "{cited} is larger than {} MiB",
            MAX_FILE_BYTES >> 20
        ));
    }
    let lines = crate::lines::splitlines(&crate::lines::decode(&bytes)).count() as u64;
    Resolved::Read {
        sha256: Sha256::digest(&bytes).into(),
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_in_a_project() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let project = dir.path().join("proj");
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::write(project.join("src/a.py"), "1\n2\r\n3").unwrap();
        std::fs::write(outside.path().join("secret.py"), "x\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.py"), project.join("link.py"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), project.join("out")).unwrap();
        std::os::unix::fs::symlink("src/a.py", project.join("inside.py")).unwrap();
        let fifo = project.join("pipe.py");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let cwd = project.to_str().unwrap();
        let mut checker = Checker::default();
        let mut status = |reference: &str| checker.check("file", reference, Some(cwd)).status;
        assert_eq!(status("src/a.py:3"), Status::Ok);
        assert_eq!(status("src/a.py:1-3"), Status::Ok);
        assert_eq!(status("./src/../src/a.py:2"), Status::Ok);
        assert_eq!(status("inside.py:1"), Status::Ok);
        assert_eq!(status("src/a.py:4"), Status::LineOutOfRange);
        assert_eq!(status("src/b.py:1"), Status::MissingFile);
        assert_eq!(status("nodir/b.py:1"), Status::MissingFile);
        assert_eq!(status("link.py:1"), Status::OutsideProject);
        assert_eq!(status("out/secret.py:1"), Status::OutsideProject);
        assert_eq!(status("out/none.py:1"), Status::OutsideProject);
        assert_eq!(status("../x.py:1"), Status::OutsideProject);
        let abs = format!("{}:1", outside.path().join("secret.py").display());
        assert_eq!(status(&abs), Status::OutsideProject);
        assert_eq!(status("pipe.py:1"), Status::Unchecked);
        assert_eq!(status("src:1"), Status::Unchecked);
        let ok = checker.check("file", "src/a.py:1", Some(cwd));
        assert_eq!(ok.file_lines, Some(3));
        assert_eq!(
            ok.sha256,
            Some(Sha256::digest(b"1\n2\r\n3").into()),
            "the file's bytes as they are"
        );
        assert_eq!(
            checker.check("test", "a - PASS", Some(cwd)).status,
            Status::Unchecked
        );
        assert_eq!(
            checker.check("file", "src/a.py:1", None).status,
            Status::Unchecked
        );
        assert_eq!(
            checker.check("file", "src/a.py:1", Some("relative")).status,
            Status::Unchecked
        );
        for root in ["/", "/.", "//"] {
            let at_root = checker.check("file", "etc/hostname:1", Some(root));
            assert_eq!(at_root.status, Status::Unchecked, "{root}");
            assert_eq!(at_root.sha256, None);
        }
    }
}
