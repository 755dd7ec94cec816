//! Checking a file citation against the project directory it was written in.
//!
//! The project directory is the citing line's working directory. It is opened once and
//! held; a cited file is opened beneath that descriptor (`openat2` with
//! `RESOLVE_BENEATH`, `O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC`), so the kernel
//! resolves every component inside the held directory and a directory swapped for a
//! symlink between two steps cannot lead the open elsewhere. The file is then checked on
//! its descriptor (`fstat`: a regular file of at most [`MAX_FILE_BYTES`]) and its lines
//! are counted from that same descriptor. Nothing is ever opened by a name resolved
//! earlier.
//!
//! - The cited path is first joined to the project directory and normalised by name (`.`
//!   and repeated `/` dropped, each `..` taking away the component before it, as Python's
//!   `os.path.normpath`); what lies inside the directory (by its real location or as
//!   written) is opened by its part below it, so an absolute path inside, or one that
//!   leaves with `..` and comes back, is checked like the plain relative one.
//! - A path that leads outside (absolute elsewhere, `..` above the directory, a symlink
//!   that leaves it, even one that dangles) is `outside_project` and nothing outside is
//!   opened.
//! - A file is read at most once per checker, whatever path names it: results are kept by
//!   the normalised path, digests by the file's identity (`fstat`: device, inode, size,
//!   modification time). It is read in 1 MiB chunks: the SHA-256 of its raw bytes and its
//!   line count (Python's `splitlines` over its lossy UTF-8 decoding) never need the
//!   whole file in memory.
//! - A final symlink is followed by reading it and opening its target beneath the
//!   directory again; an absolute one is followed only when it names a place inside.
//! - A working directory that is `/`, or under `/proc`, `/sys`, `/dev`, `/etc`, `/boot`
//!   or `/run` (as written or where it really is), or on a proc or sysfs filesystem, or
//!   not a directory, checks nothing: every citation in it is `unchecked`, with the
//!   reason.
//!
//! A check never fails: what cannot be decided is `unchecked`, with the reason.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use rustix::fs::OFlags;
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::citations::verify::{self, Status};
use crate::util::fsutil::HeldDir;

/// Cited files larger than this are not read (`unchecked`).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// System directories: a working directory at or under one of them is no project.
const SYSTEM_DIRS: [&str; 6] = ["/proc", "/sys", "/dev", "/etc", "/boot", "/run"];

/// Symlinks followed for one cited path before it is given up (the kernel's own limit).
const MAX_SYMLINKS: usize = 40;

/// How a cited file is opened.
const OPEN_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

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

/// What a cited file holds: its digest and line count, or why it was not read.
#[derive(Debug, Clone)]
enum Resolved {
    Read { sha256: [u8; 32], lines: u64 },
    Status(Status),
    Unchecked(String),
}

/// A cited file's identity from `fstat` of its descriptor: device, inode, size and
/// modification time. Two paths to one unchanged file have the same.
type FileId = (u64, u64, u64, i64, i64);

/// Checks file citations, remembering each file it read for the life of the checker (one
/// import or one re-verification), so a file cited many times is read once: results are
/// kept by the project's real location and the cited path normalised beneath it, and
/// digests by the identity of the file opened, whatever path led to it. Only the last
/// project directory is held open (a session has one, usually), so a workspace of many
/// projects never holds many descriptors.
#[derive(Default)]
pub struct Checker {
    project: Option<(String, Result<Project, NoProject>)>,
    paths: HashMap<(PathBuf, PathBuf), Resolved>,
    files: HashMap<FileId, ([u8; 32], u64)>,
}

/// A project directory: held open, with its location as written (normalised, when that
/// is a name for it without `..`).
struct Project {
    dir: HeldDir,
    written: Option<PathBuf>,
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
        if self.project.as_ref().is_none_or(|(held, _)| held != cwd) {
            self.project = Some((cwd.to_owned(), project_dir(cwd)));
        }
        let resolved = match self.project.as_ref().map(|(_, project)| project) {
            Some(Ok(project)) => match beneath(project, file_ref.path) {
                Some(rel) => {
                    let key = (project.dir.real_path().to_path_buf(), rel);
                    match self.paths.get(&key) {
                        Some(resolved) => resolved.clone(),
                        None => {
                            let resolved = resolve_and_read(
                                &project.dir,
                                &key.1,
                                file_ref.path,
                                &mut self.files,
                            );
                            self.paths.insert(key, resolved.clone());
                            resolved
                        }
                    }
                }
                None => Resolved::Status(Status::OutsideProject),
            },
            Some(Err(why)) => Resolved::Unchecked(why.to_string()),
            None => Resolved::Unchecked("no project directory".to_owned()),
        };
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

/// Why a working directory is no project directory: every citation written in it is
/// `unchecked` with this as the reason.
#[derive(Debug, thiserror::Error)]
enum NoProject {
    #[error("the working directory {cwd} is not absolute")]
    NotAbsolute { cwd: String },
    #[error(
        "the working directory {cwd} is the filesystem root; files are checked only inside a project directory"
    )]
    Root { cwd: String },
    #[error(
        "the working directory {cwd} is under {system}, a system directory; files are checked only inside a project directory"
    )]
    System { cwd: String, system: &'static str },
    #[error("the working directory {cwd} is not a directory")]
    NotDirectory { cwd: String },
    #[error("the working directory {cwd} cannot be opened: {error}")]
    Unopenable { cwd: String, error: std::io::Error },
    #[error(
        "the working directory {cwd} is on a proc or sysfs filesystem; files are checked only inside a project directory"
    )]
    PseudoFilesystem { cwd: String },
}

/// Why `dir` (absolute, without `.` or `..`) is no project directory, if it is none.
fn system_dir(cwd: &str, dir: &Path) -> Option<NoProject> {
    if dir.parent().is_none() {
        return Some(NoProject::Root {
            cwd: cwd.to_owned(),
        });
    }
    SYSTEM_DIRS
        .iter()
        .find(|system| dir.starts_with(system))
        .map(|system| NoProject::System {
            cwd: cwd.to_owned(),
            system,
        })
}

/// The working directory, opened and held, when it can be a project directory.
fn project_dir(cwd: &str) -> Result<Project, NoProject> {
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(NoProject::NotAbsolute {
            cwd: cwd.to_owned(),
        });
    }
    // As written: a system directory is refused before anything in it is opened.
    let written = lexical(path);
    if let Some(why) = system_dir(cwd, &written) {
        return Err(why);
    }
    let dir = HeldDir::open(path).map_err(|error| match error.raw_os_error() {
        Some(libc::ENOTDIR) => NoProject::NotDirectory {
            cwd: cwd.to_owned(),
        },
        _ => NoProject::Unopenable {
            cwd: cwd.to_owned(),
            error,
        },
    })?;
    // Where it really is (a symlink to a system directory is one too).
    if let Some(why) = system_dir(cwd, dir.real_path()) {
        return Err(why);
    }
    match rustix::fs::fstatfs(dir.as_fd()) {
        Ok(fs) if [libc::PROC_SUPER_MAGIC, libc::SYSFS_MAGIC].contains(&(fs.f_type as _)) => {
            Err(NoProject::PseudoFilesystem {
                cwd: cwd.to_owned(),
            })
        }
        _ => Ok(Project {
            dir,
            // With `..` in it, the written name and the directory opened can differ.
            written: (!path.components().any(|c| c == Component::ParentDir)).then_some(written),
        }),
    }
}

/// The cited path beneath the project directory: joined to it and normalised without
/// looking at the filesystem (`.` and repeated `/` dropped, each `..` taking away the
/// component before it), then taken below the directory's real location, or else below
/// its location as written. `None` when it lies outside both. The project directory
/// itself is `.`.
fn beneath(project: &Project, cited: &str) -> Option<PathBuf> {
    let real = project.dir.real_path();
    [Some(real), project.written.as_deref()]
        .into_iter()
        .flatten()
        .find_map(|root| {
            let rel = lexical(&root.join(cited))
                .strip_prefix(root)
                .ok()?
                .to_path_buf();
            Some(if rel.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                rel
            })
        })
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

/// Opens `rel` (normalised, beneath the project directory) and reads it, unless a file of
/// the same identity was read already (`files`).
fn resolve_and_read(
    dir: &HeldDir,
    rel: &Path,
    cited: &str,
    files: &mut HashMap<FileId, ([u8; 32], u64)>,
) -> Resolved {
    let root = dir.real_path();
    let mut rel = rel.to_path_buf();
    let mut again = 0;
    for _ in 0..=MAX_SYMLINKS {
        match dir.open_beneath(&rel, OPEN_FLAGS) {
            Ok(fd) => return read_file(File::from(fd), cited, files),
            Err(Errno::NOENT | Errno::NOTDIR) => return Resolved::Status(Status::MissingFile),
            Err(Errno::LOOP) => {
                // The last component is a symlink: its target, opened beneath again.
                let target = match dir.read_link_beneath(&rel) {
                    Ok(target) => target,
                    Err(Errno::XDEV) => return escaped(root, &rel),
                    Err(Errno::INVAL) => {
                        return Resolved::Unchecked(format!(
                            "cannot open {cited}: too many levels of symbolic links"
                        ));
                    }
                    Err(e) => {
                        return Resolved::Unchecked(format!(
                            "cannot open {cited}: {}",
                            std::io::Error::from(e)
                        ));
                    }
                };
                rel = if target.is_absolute() {
                    match lexical(&target).strip_prefix(root) {
                        Ok(inside) if !inside.as_os_str().is_empty() => inside.to_path_buf(),
                        _ => return Resolved::Status(Status::OutsideProject),
                    }
                } else {
                    rel.parent().unwrap_or(Path::new("")).join(target)
                };
            }
            Err(Errno::XDEV) => return escaped(root, &rel),
            // A rename elsewhere while the kernel resolved `..`: try again, a few times.
            Err(Errno::AGAIN) if again < 3 => again += 1,
            Err(e) => {
                return Resolved::Unchecked(format!(
                    "cannot open {cited}: {}",
                    std::io::Error::from(e)
                ));
            }
        }
    }
    Resolved::Unchecked(format!(
        "cannot open {cited}: too many levels of symbolic links"
    ))
}

/// A path the kernel would not resolve beneath the project directory: `outside_project`
/// when it leads outside (a dangling symlink by where it points), else `unchecked` (an
/// absolute symlink on the way that comes back inside is not followed). Only names are
/// resolved here; nothing is opened.
fn escaped(root: &Path, rel: &Path) -> Resolved {
    let mut real = lexical(&crate::util::fsutil::resolve_lenient(&root.join(rel)));
    if let (Ok(target), Some(parent)) = (std::fs::read_link(&real), real.parent()) {
        real = lexical(&crate::util::fsutil::resolve_lenient(&parent.join(target)));
    }
    if real.starts_with(root) {
        Resolved::Unchecked(format!(
            "{} has an absolute symlink on its way, which is not followed",
            rel.display()
        ))
    } else {
        Resolved::Status(Status::OutsideProject)
    }
}

/// The digest and line count of an opened file, when it is a regular file within the
/// size limit; everything is read from this descriptor, and only when no file of the same
/// identity was read before.
fn read_file(file: File, cited: &str, files: &mut HashMap<FileId, ([u8; 32], u64)>) -> Resolved {
    use std::os::unix::fs::MetadataExt;
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => return Resolved::Unchecked(format!("cannot stat {cited}: {e}")),
    };
    if !meta.is_file() {
        return Resolved::Unchecked(format!("{cited} is not a regular file"));
    }
    let too_large = || {
        Resolved::Unchecked(format!(
            "{cited} is larger than {} MiB",
            MAX_FILE_BYTES >> 20
        ))
    };
    if meta.len() > MAX_FILE_BYTES {
        return too_large();
    }
    let id = (
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
    );
    if let Some(&(sha256, lines)) = files.get(&id) {
        return Resolved::Read { sha256, lines };
    }
    match digest_and_lines(file.take(MAX_FILE_BYTES + 1), CHUNK) {
        Err(e) => Resolved::Unchecked(format!("cannot read {cited}: {e}")),
        Ok((_, _, read)) if read > MAX_FILE_BYTES => too_large(),
        Ok((sha256, lines, _)) => {
            files.insert(id, (sha256, lines));
            Resolved::Read { sha256, lines }
        }
    }
}

/// How much of a cited file is held at once while it is read.
const CHUNK: usize = 1 << 20;

/// Streams `reader` in chunks of `chunk` bytes: the SHA-256 of its raw bytes, its line
/// count as Python counts `bytes.decode("utf-8", errors="replace").splitlines()`, and how
/// many bytes were read. Line boundaries are found in the raw bytes (they decode to the
/// same boundaries); a `\r` or an incomplete character at the end of a chunk waits for the
/// next one, so a boundary split between two chunks is seen whole.
fn digest_and_lines(mut reader: impl Read, chunk: usize) -> std::io::Result<([u8; 32], u64, u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; chunk.max(4)];
    let (mut filled, mut total, mut lines) = (0, 0u64, 0u64);
    // Whether bytes were seen since the last boundary: a last line without one counts.
    let mut open_line = false;
    loop {
        let read = match reader.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[filled..filled + read]);
        total += read as u64;
        filled += read;
        let eof = read == 0;
        let usable = if eof {
            filled
        } else {
            filled - crate::util::lines::held_back(&buf[..filled])
        };
        let data = &buf[..usable];
        let mut start = 0;
        while let Some((pos, len)) = crate::util::lines::find_boundary(data, start) {
            lines += 1;
            open_line = false;
            start = pos + len;
        }
        open_line |= start < usable;
        if eof {
            break;
        }
        buf.copy_within(usable..filled, 0);
        filled -= usable;
    }
    Ok((
        hasher.finalize().into(),
        lines + u64::from(open_line),
        total,
    ))
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
        let real = project.canonicalize().unwrap();
        assert_eq!(
            status(&format!("{}/src/a.py:2", real.display())),
            Status::Ok
        );
        assert_eq!(status("src/../../proj/src/a.py:2"), Status::Ok);
        assert_eq!(status("src/./x/../../../proj//src/a.py:3"), Status::Ok);
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

    /// Streaming in chunks of any size gives the digest of the raw bytes and the line
    /// count of Python's `splitlines` over the lossily decoded whole, also when a `\r\n`,
    /// a NEL or an LS/PS is split between two chunks, or bytes are invalid UTF-8.
    #[test]
    fn streamed_lines_and_digest_match_the_whole_file() {
        let samples: [&[u8]; 10] = [
            b"",
            b"a",
            b"a\r\nb\rc\n\n",
            b"\r\r\n\n\x0b\x0c\x1c\x1d\x1ex",
            "x\u{85}y\u{2028}z\u{2029}".as_bytes(),
            b"\xff\xfe\r\n\xe2\x80\n\xe2\x80\xa8\xc2",
            b"\xe2\x80\xe2\x80\xa9\xf0\xc2\x85end",
            b"\xe2\x80",
            b"\r",
            b"no break at all \xff",
        ];
        for bytes in samples {
            let lines =
                crate::util::lines::splitlines(&crate::util::lines::decode(bytes)).count() as u64;
            let sha: [u8; 32] = Sha256::digest(bytes).into();
            for chunk in 1..=9 {
                let got = digest_and_lines(bytes, chunk).unwrap();
                assert_eq!(
                    got,
                    (sha, lines, bytes.len() as u64),
                    "{bytes:?} by {chunk}"
                );
            }
        }
    }

    /// A working directory written through a symlink: a cited path is inside when it is
    /// below the directory as written or below where it really is.
    #[test]
    fn paths_below_the_written_or_the_real_directory_are_inside() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap().join("real");
        std::fs::create_dir_all(real.join("src")).unwrap();
        std::fs::write(real.join("src/a.py"), "1\n2\n").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let cwd = link.to_str().unwrap();
        let mut checker = Checker::default();
        let mut check = |cited: String| checker.check("file", &cited, Some(cwd));
        for cited in [
            format!("{}/src/a.py:2", link.display()),
            format!("{}/src/a.py:2", real.display()),
            "../link/src/a.py:2".to_owned(),
            "../real/src/a.py:2".to_owned(),
        ] {
            let got = check(cited.clone());
            assert_eq!(got.status, Status::Ok, "{cited}: {got:?}");
            assert_eq!(got.file_lines, Some(2), "{cited}");
        }
        assert_eq!(
            check("../other/src/a.py:1".to_owned()).status,
            Status::OutsideProject
        );
        // With `..` in the working directory, only its real location counts.
        let dotted = format!("{}/../link", real.display());
        let got = checker.check(
            "file",
            &format!("{}/src/a.py:1", real.display()),
            Some(&dotted),
        );
        assert_eq!(got.status, Status::Ok, "{got:?}");
    }

    #[test]
    fn symlinks_beneath_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let project = dir.path().join("proj");
        std::fs::create_dir_all(project.join("src/deep")).unwrap();
        std::fs::write(project.join("src/a.py"), "1\n2\n").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, project.join(name)).unwrap();
        };
        // Dangling, pointing outside: absolute and relative.
        link(&outside.path().join("none.py"), "gone_abs.py");
        link(Path::new("../../none.py"), "gone_rel.py");
        // Dangling, pointing inside.
        link(Path::new("src/none.py"), "gone_in.py");
        // Absolute, pointing inside: followed beneath the project.
        link(&project.join("src/a.py"), "abs_in.py");
        // Relative through `..` inside, and a chain of two.
        link(Path::new("../a.py"), "src/deep/up.py");
        link(Path::new("src/deep/up.py"), "chain.py");
        // A loop.
        link(Path::new("loop2.py"), "loop1.py");
        link(Path::new("loop1.py"), "loop2.py");
        let cwd = project.to_str().unwrap();
        let mut checker = Checker::default();
        let mut check = |reference: &str| checker.check("file", reference, Some(cwd));
        assert_eq!(check("gone_abs.py:1").status, Status::OutsideProject);
        assert_eq!(check("gone_rel.py:1").status, Status::OutsideProject);
        assert_eq!(check("gone_in.py:1").status, Status::MissingFile);
        assert_eq!(check("abs_in.py:2").status, Status::Ok);
        assert_eq!(check("src/deep/up.py:2").status, Status::Ok);
        assert_eq!(check("chain.py:2").status, Status::Ok);
        assert_eq!(check("src/a.py/x.py:1").status, Status::MissingFile);
        let looped = check("loop1.py:1");
        assert_eq!(looped.status, Status::Unchecked);
        assert!(looped.detail.unwrap().contains("symbolic links"));
    }

    #[test]
    fn system_and_odd_working_directories_check_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("etc_link")).unwrap();
        std::fs::write(dir.path().join("file"), "x").unwrap();
        let etc_link = dir.path().join("etc_link");
        let file = dir.path().join("file");
        let missing = dir.path().join("missing");
        let mut checker = Checker::default();
        for (cwd, says) in [
            ("/etc", "under /etc"),
            ("/etc/", "under /etc"),
            ("/proc/self", "under /proc"),
            ("/proc/../proc/self", "under /proc"),
            ("/sys/kernel", "under /sys"),
            ("/dev", "under /dev"),
            ("/boot", "under /boot"),
            ("/run", "under /run"),
            (etc_link.to_str().unwrap(), "under /etc"),
            (file.to_str().unwrap(), "not a directory"),
            (missing.to_str().unwrap(), "cannot be opened"),
        ] {
            let got = checker.check("file", "passwd:1", Some(cwd));
            assert_eq!(got.status, Status::Unchecked, "{cwd}");
            assert_eq!(got.sha256, None, "{cwd}");
            let detail = got.detail.unwrap_or_default();
            assert!(detail.contains(says), "{cwd}: {detail}");
        }
    }

    /// The reason a refused working directory gives, whole, for each way it is refused.
    #[test]
    fn refused_working_directories_give_their_reason_in_full() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "x").unwrap();
        let file = dir.path().join("file").display().to_string();
        let missing = dir.path().join("missing").display().to_string();
        let only = "files are checked only inside a project directory";
        let mut checker = Checker::default();
        for (cwd, says) in [
            (
                "proj",
                "the working directory proj is not absolute".to_owned(),
            ),
            (
                "/",
                format!("the working directory / is the filesystem root; {only}"),
            ),
            (
                "/etc/../proc/1",
                format!(
                    "the working directory /etc/../proc/1 is under /proc, a system directory; {only}"
                ),
            ),
            (
                &file,
                format!("the working directory {file} is not a directory"),
            ),
            (
                &missing,
                format!(
                    "the working directory {missing} cannot be opened: No such file or directory (os error 2)"
                ),
            ),
        ] {
            let got = checker.check("file", "a.py:1", Some(cwd));
            assert_eq!(got.status, Status::Unchecked, "{cwd}");
            assert_eq!(got.detail.as_deref(), Some(says.as_str()), "{cwd}");
        }
    }

    /// Each refusal is told apart by its kind, not by its words.
    #[test]
    fn refused_working_directories_are_told_apart_by_kind() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "x").unwrap();
        let file = dir.path().join("file");
        let missing = dir.path().join("missing");
        assert!(matches!(
            project_dir("proj"),
            Err(NoProject::NotAbsolute { .. })
        ));
        assert!(matches!(project_dir("/"), Err(NoProject::Root { .. })));
        assert!(matches!(
            project_dir("/sys/kernel"),
            Err(NoProject::System { system: "/sys", .. })
        ));
        assert!(matches!(
            project_dir(file.to_str().unwrap()),
            Err(NoProject::NotDirectory { .. })
        ));
        assert!(matches!(
            project_dir(missing.to_str().unwrap()),
            Err(NoProject::Unopenable { error, .. }) if error.kind() == std::io::ErrorKind::NotFound
        ));
        assert!(project_dir(dir.path().to_str().unwrap()).is_ok());
        let pseudo = NoProject::PseudoFilesystem {
            cwd: "/mnt/p".into(),
        };
        assert_eq!(
            pseudo.to_string(),
            "the working directory /mnt/p is on a proc or sysfs filesystem; files are checked only inside a project directory"
        );
    }
}
