//! `verify`: is the store whole? The file is opened read-only; every record of every
//! table is decoded, every indexed file's line table is checked against its digest, every
//! document against its checksum, and redb's own integrity check (page checksums, the
//! allocator) runs on a private copy of the file, since that check writes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use redb::{Database, ReadableTable};
use sha2::{Digest, Sha256};

use super::error::OrStore;
use super::error::{OpenError, StoreError};
use super::open::Store;
use super::reader::Tables;
use super::schema::{DOCUMENTS, LINE_BLOCKS, PROJECTS, SESSIONS, WORKSPACE};
use super::types::{DocumentRecord, FileState, ProjectRecord, SessionRecord};
use super::{backend, citations, guard};

/// What `verify` looked at, and every problem it found (empty: the store is whole).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verified {
    pub projects: u64,
    pub sessions: u64,
    pub line_blocks: u64,
    pub lines: u64,
    pub documents: u64,
    /// A killed writer left the file needing redb's repair (one of the problems; the
    /// next writable open repairs it, so it is no reason to rebuild).
    pub unclean: bool,
    pub problems: Vec<String>,
    /// Why the store could not be fully checked (no private copy could be made, or the
    /// writers could not be held off): the store is then neither whole nor damaged.
    pub cannot_check: Option<String>,
}

/// Why `verify` cannot judge the store (recorded as [`Verified::cannot_check`]).
#[derive(Debug, thiserror::Error)]
enum Unchecked<E> {
    /// The writers could not be held off: `hold_writers`' own error.
    #[error(transparent)]
    Writers(E),
    #[error("the store's gate: {0}; a writer is opening or closing it")]
    Gate(backend::LockWaitTimedOut),
}

/// Why no private copy of the store could be made for redb's integrity check.
/// Each I/O error is the message's own last part, not a cause printed after it.
#[derive(Debug, thiserror::Error)]
enum CopyError {
    #[error("cannot copy the store for redb's integrity check: {0}")]
    Read(std::io::Error),
    #[error("cannot copy the store for redb's integrity check: not a regular file")]
    NotRegular,
    /// No directory took the copy: each one tried, and why.
    #[error("cannot copy the store for redb's integrity check ({})", tried_text(.tried))]
    NoPlace {
        tried: Vec<(PathBuf, std::io::Error)>,
    },
}

fn tried_text(tried: &[(PathBuf, std::io::Error)]) -> String {
    tried
        .iter()
        .map(|(dir, e)| format!("{}: {e}", dir.display()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What redb's integrity check found wrong with the copy.
#[derive(Debug, thiserror::Error)]
enum IntegrityProblem {
    #[error(
        "redb integrity check: the file needed repair (a writer was killed, or one is running)"
    )]
    NeededRepair,
    #[error("redb integrity check: {0}")]
    Failed(StoreError),
}

/// Verifies the store at `path` without writing to it. `hold_writers` is called first,
/// and what it returns is kept, with the store's gate ([`super::backend::Gate`]), while
/// the store's header is read and the file is copied for redb's check: what a writer
/// writes in a commit (under the document lock) or in its open or close (behind the gate)
/// would otherwise be seen half done, and be reported as damage, or as a killed writer,
/// the store does not have. When they cannot be held, or no copy can be made, the store
/// is not judged: [`Verified::cannot_check`] says why.
/// `scratch` is where the copy goes when the store's own directory does not take it (the
/// store on read-only media). `lock_wait` bounds each wait for a lock another process holds.
pub fn verify<G, E: std::error::Error + 'static>(
    path: &Path,
    scratch: &Path,
    lock_wait: std::time::Duration,
    hold_writers: impl FnOnce() -> Result<G, E>,
) -> Verified {
    let mut out = Verified::default();
    remove_stale_copies(path, scratch);
    let held = match hold_writers()
        .map_err(Unchecked::Writers)
        .and_then(|writers| {
            backend::hold_shared(path, lock_wait)
                .map(|gate| (writers, gate))
                .map_err(Unchecked::Gate)
        }) {
        Ok(held) => held,
        Err(why) => {
            out.cannot_check = Some(why.to_string());
            return out;
        }
    };
    let opened = Store::open_read_only(path, lock_wait);
    let copy = match &opened {
        // The copy would be repaired like the file will be; checking it proves nothing.
        Err(OpenError::NeedsRepair { .. }) => None,
        _ => Some(make_copy(path, scratch)),
    };
    drop(held);
    match opened {
        Ok(store) => {
            if let Err(e) = walk(&store, &mut out) {
                out.problems.push(e.to_string());
            }
        }
        Err(e) => {
            out.unclean = matches!(e, OpenError::NeedsRepair { .. });
            out.problems.push(e.to_string());
        }
    }
    match copy {
        None => {}
        Some(Ok(copy)) => {
            if let Err(problem) = redb_check(path, copy) {
                out.problems.push(problem.to_string());
            }
        }
        Some(Err(why)) => out.cannot_check = Some(why.to_string()),
    }
    out
}

/// Decodes every record of one snapshot and checks line tables and documents.
fn walk(store: &Store, out: &mut Verified) -> Result<(), StoreError> {
    let reader = store.reader()?;
    let shown = store.shown().to_owned();
    let problems = std::cell::RefCell::new(Vec::new());
    let problem = |p: String| problems.borrow_mut().push(p);

    // Each table is walked inside its own guard, so damage in one still lets the others
    // be checked.
    let table_result = |name: &str, r: Result<(), StoreError>| {
        if let Err(e) = r {
            problem(format!("table {name}: {e}"));
        }
    };

    table_result(
        "workspace",
        guard::guard(&shown, || {
            let table = reader.table(WORKSPACE)?;
            for item in table.iter().store()? {
                let (_, value) = item.store()?;
                if let Err(e) = value.value().decode() {
                    problem(e.to_string());
                }
            }
            Ok(())
        }),
    );

    table_result(
        "projects",
        guard::guard(&shown, || {
            let table = reader.table(PROJECTS)?;
            for item in table.iter().store()? {
                let (key, value) = item.store()?;
                out.projects += 1;
                match value.value().decode().map(ProjectRecord::from) {
                    Ok(p) if p.key != key.value() => problem(format!(
                        "project {:?} is stored under the key {:?}",
                        p.key,
                        key.value()
                    )),
                    Ok(_) => {}
                    Err(e) => problem(format!("project {:?}: {e}", key.value())),
                }
            }
            Ok(())
        }),
    );

    // file_id → (session, expected line count and digest)
    let mut files: BTreeMap<u64, (String, u64, [u8; 32])> = BTreeMap::new();
    table_result(
        "sessions",
        guard::guard(&shown, || {
            let table = reader.table(SESSIONS)?;
            for item in table.iter().store()? {
                let (key, value) = item.store()?;
                let (project, session_ref) = key.value();
                let name = format!("{project}/{session_ref}");
                out.sessions += 1;
                match value.value().decode().map(SessionRecord::from) {
                    Ok(record) => {
                        if let FileState::Indexed(file) = record.file {
                            files.insert(file.file_id, (name, file.lines, file.digest));
                        }
                    }
                    Err(e) => problem(format!("session {name}: {e}")),
                }
            }
            Ok(())
        }),
    );

    // file_id → (blocks seen in order, lines, digest over the packed blocks)
    let mut tables: BTreeMap<u64, (u64, u64, Sha256)> = BTreeMap::new();
    let mut gaps: BTreeSet<u64> = BTreeSet::new();
    table_result(
        "line_blocks",
        guard::guard(&shown, || {
            let table = reader.table(LINE_BLOCKS)?;
            for item in table.iter().store()? {
                let (key, value) = item.store()?;
                let (file_id, block) = key.value();
                out.line_blocks += 1;
                let entry = tables
                    .entry(file_id)
                    .or_insert_with(|| (0, 0, Sha256::new()));
                if entry.0 != block {
                    gaps.insert(file_id);
                }
                entry.0 = block + 1;
                match value.value().entries() {
                    Ok(lines) => {
                        entry.1 += lines.len() as u64;
                        entry.2.update(value.value().bytes());
                    }
                    Err(e) => problem(format!("line block {block} of file {file_id}: {e}")),
                }
            }
            Ok(())
        }),
    );
    for (file_id, (name, lines, digest)) in &files {
        match tables.remove(file_id) {
            None if *lines > 0 => problem(format!(
                "session {name}: its line table (file {file_id}) is missing"
            )),
            None => {}
            Some((_, found, hasher)) => {
                out.lines += found;
                if gaps.contains(file_id) {
                    problem(format!(
                        "session {name}: blocks are missing from its line table (file {file_id})"
                    ));
                } else if found != *lines {
                    problem(format!(
                        "session {name}: its line table has {found} lines, the session record says {lines}"
                    ));
                } else if <[u8; 32]>::from(hasher.finalize()) != *digest {
                    problem(format!(
                        "session {name}: its line table (file {file_id}) does not match its digest"
                    ));
                }
            }
        }
    }
    for file_id in tables.keys() {
        problem(format!(
            "line table of file {file_id} belongs to no session"
        ));
    }

    table_result(
        "documents",
        guard::guard(&shown, || {
            let table = reader.table(DOCUMENTS)?;
            for item in table.iter().store()? {
                let (key, value) = item.store()?;
                out.documents += 1;
                match value.value().decode().map(DocumentRecord::from) {
                    Ok(doc) if !doc.intact() => problem(format!(
                        "document {}: its bytes fail their SHA-256 checksum",
                        key.value()
                    )),
                    Ok(_) => {}
                    Err(e) => problem(format!("document {}: {e}", key.value())),
                }
            }
            Ok(())
        }),
    );
    table_result("citations", citations::check(&reader, &|p| problem(p)));
    out.problems.extend(problems.into_inner());
    Ok(())
}

/// redb's integrity check, on a private copy of the file (the check repairs what it can,
/// so it never runs on the store itself); the copy is removed when it is done.
fn redb_check(path: &Path, copy: Copy) -> Result<(), IntegrityProblem> {
    let shown = path.display().to_string();
    let checked = guard::guard(&shown, || {
        let mut db = Database::open(&copy.0).store()?;
        db.check_integrity().store()
    });
    drop(copy);
    match checked {
        Ok(true) => Ok(()),
        Ok(false) => Err(IntegrityProblem::NeededRepair),
        Err(e) => Err(IntegrityProblem::Failed(e)),
    }
}

/// The private copy, removed when dropped.
struct Copy(PathBuf);

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Where copies are made: beside the store (its directory is the workspace's own, writable
/// wherever the store is), else in `scratch` (the store on read-only media).
fn copy_dirs(path: &Path, scratch: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = path.parent() {
        dirs.push(if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir.to_path_buf()
        });
    }
    dirs.push(scratch.to_path_buf());
    dirs
}

const COPY_SUFFIX: &str = ".evidence-store-verify.tmp";

/// A copy's name: `.<store name>.<pid>.<nanoseconds>.evidence-store-verify.tmp`.
fn copy_name(store_name: &str, pid: u32) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(".{store_name}.{pid}.{nanos}{COPY_SUFFIX}")
}

/// The pid in a copy's name, if `name` is one of ours for this store.
fn copy_owner(store_name: &str, name: &str) -> Option<u32> {
    let middle = name
        .strip_prefix('.')?
        .strip_prefix(store_name)?
        .strip_prefix('.')?
        .strip_suffix(COPY_SUFFIX)?;
    let (pid, nanos) = middle.split_once('.')?;
    if nanos.is_empty() || !nanos.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Removes copies a killed `verify` left: only names of our pattern for this store, only
/// when the process that made them no longer exists (a running `verify`'s copy stays).
/// `scratch` is the other directory [`verify`] makes copies in.
pub fn remove_stale_copies(path: &Path, scratch: &Path) {
    let Some(store_name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    for dir in copy_dirs(path, scratch) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = copy_owner(&store_name, &name) else {
                continue;
            };
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                match std::fs::remove_file(entry.path()) {
                    Ok(()) => {
                        tracing::info!(copy = %entry.path().display(), "removed a copy a killed verify left")
                    }
                    Err(e) => {
                        tracing::warn!(copy = %entry.path().display(), error = %e, "cannot remove a copy a killed verify left")
                    }
                }
            }
        }
    }
}

/// Copies the store to a new file of our own name, in the first directory that takes it.
fn make_copy(path: &Path, scratch: &Path) -> Result<Copy, CopyError> {
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking and then checked: copying a FIFO would wait for a writer forever.
    let mut source = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(CopyError::Read)?;
    if !source.metadata().map_err(CopyError::Read)?.is_file() {
        return Err(CopyError::NotRegular);
    }
    let store_name = path
        .file_name()
        .map_or_else(|| "store".to_owned(), |n| n.to_string_lossy().into_owned());
    let mut tried = Vec::new();
    for dir in copy_dirs(path, scratch) {
        let target = dir.join(copy_name(&store_name, std::process::id()));
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&target);
        let mut file = match made {
            Ok(file) => file,
            Err(e) => {
                tried.push((dir, e));
                continue;
            }
        };
        let copy = Copy(target);
        use std::io::Seek;
        source.rewind().map_err(CopyError::Read)?;
        match std::io::copy(&mut source, &mut file) {
            Ok(_) => return Ok(copy),
            Err(e) => tried.push((dir, e)),
        }
    }
    Err(CopyError::NoPlace { tried })
}

#[cfg(test)]
mod copy_tests {
    use super::*;

    #[test]
    fn copy_names_are_recognised_for_their_store_only() {
        let name = copy_name("store.redb", 42);
        assert_eq!(copy_owner("store.redb", &name), Some(42));
        assert_eq!(copy_owner("other.redb", &name), None);
        assert_eq!(
            copy_owner("store.redb", ".store.redb.42.evidence-store-verify.tmp"),
            None
        );
        assert_eq!(copy_owner("store.redb", "store.redb"), None);
        assert_eq!(
            copy_owner("store.redb", ".store.redb.1.2.3.evidence-store.tmp"),
            None
        );
    }

    #[test]
    fn copies_go_beside_the_store_then_to_the_scratch_directory() {
        let scratch = Path::new("/scratch");
        assert_eq!(
            copy_dirs(Path::new("/ws/.evidence-store/store.redb"), scratch),
            [PathBuf::from("/ws/.evidence-store"), scratch.to_path_buf()]
        );
        assert_eq!(
            copy_dirs(Path::new("store.redb"), scratch),
            [PathBuf::from("."), scratch.to_path_buf()]
        );
    }

    #[test]
    fn stale_copies_in_the_scratch_directory_are_removed_and_live_ones_kept() {
        let beside = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        // Above any pid_max: no such process.
        let dead = scratch.path().join(copy_name("store.redb", 4_000_000_000));
        let live = scratch
            .path()
            .join(copy_name("store.redb", std::process::id()));
        let other = scratch.path().join(copy_name("other.redb", 4_000_000_000));
        for file in [&dead, &live, &other] {
            std::fs::write(file, b"").unwrap();
        }
        remove_stale_copies(&beside.path().join("store.redb"), scratch.path());
        assert!(!dead.exists(), "a dead verify's copy is removed");
        assert!(live.exists(), "a running verify's copy stays");
        assert!(other.exists(), "another store's copy stays");
    }

    #[test]
    fn a_failed_copy_says_why_in_its_old_words() {
        let dir = tempfile::tempdir().unwrap();
        let not_file = make_copy(dir.path(), dir.path()).err().unwrap();
        assert_eq!(
            not_file.to_string(),
            "cannot copy the store for redb's integrity check: not a regular file"
        );
        let missing = make_copy(&dir.path().join("missing.redb"), dir.path())
            .err()
            .unwrap();
        assert_eq!(
            missing.to_string(),
            "cannot copy the store for redb's integrity check: No such file or directory (os error 2)"
        );
        let nowhere = CopyError::NoPlace {
            tried: vec![
                (
                    PathBuf::from("/ws"),
                    std::io::Error::from_raw_os_error(libc::EROFS),
                ),
                (
                    PathBuf::from("/tmp"),
                    std::io::Error::from_raw_os_error(libc::ENOSPC),
                ),
            ],
        };
        assert_eq!(
            nowhere.to_string(),
            "cannot copy the store for redb's integrity check (/ws: Read-only file system (os error 30); \
             /tmp: No space left on device (os error 28))"
        );
        assert_eq!(
            IntegrityProblem::NeededRepair.to_string(),
            "redb integrity check: the file needed repair (a writer was killed, or one is running)"
        );
    }

    #[test]
    fn writers_not_held_leave_the_store_unchecked_with_their_own_words() {
        let dir = tempfile::tempdir().unwrap();
        let verified = verify(
            &dir.path().join("store.redb"),
            dir.path(),
            crate::util::wait::DEFAULT_TIMEOUT,
            || Err::<(), _>(std::io::Error::other("the lock is held")),
        );
        assert_eq!(verified.cannot_check.as_deref(), Some("the lock is held"));
        assert!(verified.problems.is_empty());
    }
}
