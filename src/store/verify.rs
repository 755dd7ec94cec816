//! `verify`: is the store whole? The file is opened read-only; every record of every
//! table is decoded, every indexed file's line table is checked against its digest, every
//! document against its checksum, and redb's own integrity check (page checksums, the
//! allocator) runs on a private copy of the file, since that check writes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use redb::{Database, ReadableTable};
use sha2::{Digest, Sha256};

use super::schema::{DOCUMENTS, LINE_BLOCKS, PROJECTS, SESSIONS, WORKSPACE};
use super::{
    DocumentRecord, FileState, Lookup, OrStore, ProjectRecord, SessionRecord, Store, StoreError,
    WorkspaceRecord, codec, guard,
};

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
}

/// Verifies the store at `path` without writing to it. `hold_writers` is called just
/// before the store file is copied for redb's check, and what it returns is kept until
/// the copy is taken: a copy made while a writer commits could be torn, and be reported
/// as damage the store does not have.
pub fn verify<G>(path: &Path, hold_writers: impl FnOnce() -> G) -> Verified {
    let mut out = Verified::default();
    match Store::open_read_only(path) {
        Ok(store) => {
            if let Err(e) = walk(&store, &mut out) {
                out.problems.push(e.to_string());
            }
        }
        Err(e) => {
            out.unclean = matches!(e, super::OpenError::NeedsRepair { .. });
            out.problems.push(e.to_string());
        }
    }
    if out.unclean {
        // The copy would be repaired like the file will be; checking it proves nothing.
        return out;
    }
    if let Err(problem) = redb_check(path, hold_writers) {
        out.problems.push(problem);
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
                if let Err(e) = codec::decode::<WorkspaceRecord>("workspace", value.value()) {
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
                match codec::decode::<ProjectRecord>("project", value.value()) {
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
                match codec::decode::<SessionRecord>("session", value.value()) {
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
                match codec::decode_lines(value.value()) {
                    Ok(lines) => {
                        entry.1 += lines.len() as u64;
                        entry.2.update(value.value());
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
                match codec::decode::<DocumentRecord>("document", value.value()) {
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
    table_result(
        "citations",
        super::citations::check(&reader, &|p| problem(p)),
    );
    out.problems.extend(problems.into_inner());
    Ok(())
}

/// redb's integrity check, on a copy of the file in a private temp directory (the check
/// repairs what it can, so it never runs on the store itself).
fn redb_check<G>(path: &Path, hold_writers: impl FnOnce() -> G) -> Result<(), String> {
    // Copying a FIFO would wait for a writer forever.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(
            "cannot copy the store for redb's integrity check: not a regular file".to_owned(),
        );
    }
    let dir =
        scratch_dir().map_err(|e| format!("cannot make a temp directory for the check: {e}"))?;
    let copy = dir.join("store.redb");
    let held = hold_writers();
    let copied = std::fs::copy(path, &copy);
    drop(held);
    let result = copied
        .map_err(|e| format!("cannot copy the store for redb's integrity check: {e}"))
        .and_then(|_| {
            let shown = path.display().to_string();
            guard::guard(&shown, || {
                let mut db = Database::open(&copy).store()?;
                db.check_integrity().store()
            })
            .map_err(|e| format!("redb integrity check: {e}"))
        });
    let _ = std::fs::remove_dir_all(&dir);
    match result? {
        true => Ok(()),
        false => Err(
            "redb integrity check: the file needed repair (a writer was killed, or one is running)"
                .to_owned(),
        ),
    }
}

fn scratch_dir() -> std::io::Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "evidence-store-verify-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir(&dir)?;
    Ok(dir)
}
