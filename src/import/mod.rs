//! `import`: validate the prepared workspace and bring the store in line with it, in one
//! write transaction. Session files whose stamp (size, mtime, ctime, inode) is unchanged
//! keep their line tables; the others are streamed once (hashing every line) into new
//! ones.
//!
//! Any number of processes import at once (every `serve` imports when it starts), so:
//! - what to do is decided on a read snapshot first, and when nothing changed no write
//!   transaction is taken at all;
//! - otherwise the plan is made again inside the write transaction, against what it sees
//!   (a concurrent import may have committed meanwhile): a file it already indexed with
//!   the same stamp is kept, and only line tables this transaction sees as superseded
//!   are deleted.

pub mod rebuild;

use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::citations::check::Checker;
use crate::citations::{scan, stored};
use crate::session::{self, SessionFile, Sessions};
use crate::store::citations::{CitationLookup, CitationScan};
use crate::store::{
    DocumentRecord, FileRecord, FileState, Lookup, ProjectRecord, SessionRecord, Store, StoreError,
    WorkspaceRecord, Writer,
};
use crate::util::kind::Kind;
use crate::util::lines;
use crate::workspace::WorkspaceRoot;
use crate::workspace::contract::Contract;
use crate::workspace::{self, LoadError, Workspace, layout};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// Re-hash files whose stamp looks unchanged (their line tables are replaced only if
    /// the lines differ).
    pub rehash: bool,
    /// How citations are extracted. Stored citations taken with other options are taken
    /// again (every session file is read once more).
    pub citations: crate::citations::Options,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ImportReport {
    pub projects: usize,
    pub sessions: usize,
    /// Session files streamed and hashed in this run.
    pub files_indexed: usize,
    /// Session files whose line tables were kept.
    pub files_unchanged: usize,
    /// Index rows whose session file is absent (reads of them report it missing).
    pub files_missing: usize,
    pub bytes_indexed: u64,
    pub lines_indexed: u64,
    /// Evidence cards, envelopes and daily reports now mirrored in the store.
    pub documents: usize,
    /// Whether a write transaction was committed (false: the store already matched).
    pub committed: bool,
    /// Session files scanned for agent citations in this run (files whose citations were
    /// already current are not).
    pub citation_scans: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Workspace(#[from] LoadError),
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Busy(#[from] crate::documents::LockBusy),
    #[error(transparent)]
    Lock(crate::documents::DocumentError),
    #[error(transparent)]
    Stopped(#[from] crate::util::stop::Stopped),
    #[error(
        "the store {store} holds a prompt-diary {} workspace (schema_version {}), but the workspace \
         is now prompt-diary {} (schema_version {}); a store serves one contract: run \
         `evidence-store import --rebuild` to rebuild it from the workspace",
        stored.release(), stored.workspace_schema(), found.release(), found.workspace_schema()
    )]
    ContractChanged {
        store: String,
        stored: Contract,
        found: Contract,
    },
    #[error(
        "the store {store} holds the workspace {holds}, not {this}: a store serves one \
         workspace, since each workspace's writers lock out only their own; give {this} a \
         store of its own (leave out --store, so that it is {this}/.evidence-store/store.redb, \
         or name another file), or, if {holds} was moved to {this}, run \
         `evidence-store import --rebuild` to make the store this workspace's"
    )]
    AnotherWorkspace {
        store: String,
        holds: String,
        this: String,
    },
}

impl ImportError {
    /// Whether another attempt may succeed by itself; the document lock's holder
    /// ([`ImportError::Busy`]) is its own variant.
    pub fn kind(&self) -> Kind {
        match self {
            ImportError::Workspace(e) => e.kind,
            ImportError::Io { source, .. } => Kind::of_io(source),
            ImportError::Store(e) => e.kind(),
            ImportError::Lock(e) => e.kind(),
            ImportError::Busy(_)
            | ImportError::Stopped(_)
            | ImportError::ContractChanged { .. }
            | ImportError::AnotherWorkspace { .. } => Kind::Lasting,
        }
    }
}

/// A store keeps the contract of the workspace it first imported: its cards, envelopes and
/// report were checked by that contract's rules, so a workspace re-prepared by another
/// prompt-diary release is refused until the store is rebuilt.
fn same_contract(lookup: &impl Lookup, workspace: &Workspace) -> Result<(), ImportError> {
    if !lookup.has_workspace()? {
        return Ok(());
    }
    let stored = lookup.contract()?;
    if stored != workspace.contract {
        return Err(ImportError::ContractChanged {
            store: lookup.shown().to_owned(),
            stored,
            found: workspace.contract,
        });
    }
    Ok(())
}

/// Which workspace a store holds ([`crate::store::schema::WORKSPACE_ROOT_KEY`]): the first
/// 8 bytes of the SHA-256 of the root's real path; `None` when it cannot be resolved.
fn workspace_identity(root: &Path) -> Option<u64> {
    use sha2::{Digest, Sha256};
    use std::os::unix::ffi::OsStrExt;
    let real = std::fs::canonicalize(root).ok()?;
    let digest = Sha256::digest(real.as_os_str().as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    Some(u64::from_be_bytes(first))
}

/// Whether `store_path` is the workspace's own store, `DIR/.evidence-store/store.redb`.
fn is_own_store(root: &WorkspaceRoot, store_path: &Path) -> bool {
    store_path == root.path.join(crate::store::WORKSPACE_STORE)
}

/// A store serves one workspace: the writers of a workspace take its own document lock,
/// which does not keep another workspace's writers off a store they share. A store
/// elsewhere (`--store`) holds the workspace whose identity it recorded first; any other
/// is refused, and it takes a new one only by `import --rebuild`. (A workspace's own
/// store is its own by where it lives, moved or copied with it: `store::check_own_store`
/// refuses one whose `.evidence-store` leads to another workspace's.)
pub fn check_same_workspace(
    lookup: &impl Lookup,
    root: &WorkspaceRoot,
    store_path: &Path,
) -> Result<(), ImportError> {
    if is_own_store(root, store_path) {
        return Ok(());
    }
    let Some(recorded) = lookup.workspace_identity()? else {
        return Ok(());
    };
    if Some(recorded) == workspace_identity(&root.path) {
        return Ok(());
    }
    let holds = lookup
        .workspace()?
        .map_or_else(|| "another workspace".to_owned(), |w| w.root_display);
    Err(ImportError::AnotherWorkspace {
        store: lookup.shown().to_owned(),
        holds,
        this: root.display.clone(),
    })
}

/// Whether the store records `identity` as its workspace, when that matters for an import
/// to be up to date: a store elsewhere must record it before it serves this workspace.
fn identity_recorded(
    lookup: &impl Lookup,
    root: &WorkspaceRoot,
    store_path: &Path,
    identity: Option<u64>,
) -> Result<bool, ImportError> {
    Ok(is_own_store(root, store_path) || lookup.workspace_identity()? == identity)
}

/// Receives import progress; the CLI draws a bar with it when on a terminal.
pub trait Progress {
    fn start(&self, total_bytes: u64);
    fn advance(&self, bytes: u64);
    /// Called just before the commit: from here on the store may change.
    fn committing(&self) {}
    fn finish(&self);
}

/// Progress that goes nowhere.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// One session file's identity on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: u64,
    ctime_ns: u64,
    inode: u64,
    /// Whether a later write would surely change its times. Filesystem times come from a
    /// clock that advances in ticks, so a file written again within the tick of its last
    /// change keeps size, mtime and ctime: an unsettled stamp never proves a file
    /// unchanged.
    settled: bool,
}

/// How long after a change a nanosecond-precision time is trusted: more than one tick of
/// the kernel's coarse clock (at most 10 ms).
const SETTLE_FINE_NS: u64 = 20_000_000;
/// The same for times in whole seconds (filesystems that keep no finer ones).
const SETTLE_COARSE_NS: u64 = 2_000_000_000;

impl Stamp {
    fn matches(self, record: &FileRecord) -> bool {
        self.settled
            && self.size == record.size
            && self.mtime_ns == record.mtime_ns
            && self.ctime_ns == record.ctime_ns
            && self.inode == record.inode
    }

    /// `record` (the same lines) recognised by this stamp from now on. An unsettled
    /// stamp is stored with ctime 0, which no settled stamp matches: the next import
    /// hashes the file again.
    fn applied_to(self, record: FileRecord) -> FileRecord {
        FileRecord {
            size: self.size,
            mtime_ns: self.mtime_ns,
            ctime_ns: if self.settled { self.ctime_ns } else { 0 },
            inode: self.inode,
            ..record
        }
    }
}

fn nanos_since_epoch(t: std::io::Result<std::time::SystemTime>) -> u64 {
    t.ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The stamp of the session file `rel` under the held-open root, as [`stamp_of`] takes
/// it; `None` when there is no regular file there (missing, a FIFO, a symlink, ...).
fn stamp(sessions: Option<&Sessions>, rel: &str) -> Option<Stamp> {
    sessions?.file(rel).ok().map(|file| stamp_of(&file))
}

/// The stamp of an open session file, from `fstat` on its descriptor. A file changed
/// within the last [`SETTLE_FINE_NS`] is looked at again once that has passed, so that a
/// stamp taken right after a write is still trusted; a file that keeps changing, or whose
/// times are in whole seconds and recent, gets an unsettled stamp.
fn stamp_of(file: &SessionFile) -> Stamp {
    let mut waited = false;
    let mut meta = file.metadata().clone();
    loop {
        let now_ns = nanos_since_epoch(Ok(std::time::SystemTime::now()));
        let mtime_ns = nanos_since_epoch(meta.modified());
        let (ctime_ns, inode) = change_stamp(&meta);
        // Every write moves the ctime; where there is none, the mtime stands in.
        let changed_ns = if ctime_ns == 0 { mtime_ns } else { ctime_ns };
        let settle_ns = if changed_ns % 1_000_000_000 == 0 {
            SETTLE_COARSE_NS
        } else {
            SETTLE_FINE_NS
        };
        let settled_at = changed_ns.saturating_add(settle_ns);
        // (A time in the future, from a skewed clock, is not waited for.)
        if settled_at > now_ns && settled_at - now_ns <= settle_ns.min(SETTLE_FINE_NS) && !waited {
            waited = true;
            std::thread::sleep(std::time::Duration::from_nanos(settled_at - now_ns));
            if let Ok(again) = file.stat_again() {
                meta = again;
                continue;
            }
        }
        return Stamp {
            size: meta.len(),
            mtime_ns,
            ctime_ns,
            inode,
            settled: settled_at <= now_ns,
        };
    }
}

/// Status-change time (ns since the epoch) and inode number.
#[cfg(unix)]
fn change_stamp(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let secs = u64::try_from(meta.ctime()).unwrap_or(0);
    let nanos = u64::try_from(meta.ctime_nsec()).unwrap_or(0);
    (
        secs.saturating_mul(1_000_000_000).saturating_add(nanos),
        meta.ino(),
    )
}

#[cfg(not(unix))]
fn change_stamp(_: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// Debug builds only, for tests that need an import stopped at a known step: when
/// `EVIDENCE_STORE_PAUSE_AT` names `step`, say so on stderr and wait for a line (or the
/// end) on stdin, for a signal asking the process to stop ([`crate::util::stop`]), or
/// for a kill.
pub(crate) fn pause_point(step: &str) {
    if crate::util::test_hooks::pauses_at(step) {
        eprintln!("evidence-store: paused at {step}");
        let (tx, rx) = std::sync::mpsc::channel();
        let _ = std::thread::Builder::new()
            .name("pause".into())
            .spawn(move || {
                let _ = io::stdin().read_line(&mut String::new());
                let _ = tx.send(());
            });
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            rx.recv_timeout(std::time::Duration::from_millis(10))
        {
            if crate::util::stop::requested().is_some() {
                break;
            }
        }
    }
}

/// Validates the workspace and imports it. Nothing is written unless everything succeeds,
/// and nothing at all when the store already matches the workspace.
pub fn import(
    root: &WorkspaceRoot,
    store: &Store,
    options: ImportOptions,
    progress: &dyn Progress,
    locks: &crate::util::wait::Locks,
) -> Result<ImportReport, ImportError> {
    let workspace = workspace::load(root)?;
    import_loaded(root, &workspace, store, options, progress, locks)
}

/// [`import`] of a workspace the caller has just loaded from `root` (loading costs
/// a pass over every index row: a caller that needs the workspace too loads it once).
pub fn import_loaded(
    root: &WorkspaceRoot,
    workspace: &Workspace,
    store: &Store,
    options: ImportOptions,
    progress: &dyn Progress,
    locks: &crate::util::wait::Locks,
) -> Result<ImportReport, ImportError> {
    let identity = workspace_identity(&root.path);
    if !options.rehash {
        // Most starts find nothing changed: check on a snapshot, without the write lock.
        let reader = store.reader()?;
        same_contract(&reader, workspace)?;
        check_same_workspace(&reader, root, store.path())?;
        let plan = plan(root, &reader, workspace, options)?;
        if identity_recorded(&reader, root, store.path(), identity)?
            && let Some(report) = up_to_date(&reader, root, workspace, &plan)?
        {
            return Ok(report);
        }
    }
    pause_point("before-write-lock");

    // The document lock (always before the store's write lock), so that no card is read
    // while another process's write of it is undecided. A workspace where it cannot be
    // created (read-only) has no such writer.
    // A lock held past the wait's bound is an error: the holder may be in the store's
    // write transaction too.
    let _lock = match crate::documents::lock(&root.path, locks) {
        Ok(lock) => Some(lock),
        Err(crate::documents::DocumentError::Busy(busy)) => return Err(busy.into()),
        // Something other than the lock file of its own is at its name (a hard link to a
        // file elsewhere, a FIFO, a directory): refused, never written through.
        Err(crate::documents::DocumentError::Unwritable { rel, source })
            if crate::util::fsutil::not_own_file(&source).is_some() =>
        {
            return Err(ImportError::Lock(
                crate::documents::DocumentError::Unwritable { rel, source },
            ));
        }
        Err(e) => {
            tracing::warn!(error = %e, "importing without the document lock");
            None
        }
    };
    let mut writer = store.writer()?;
    same_contract(&writer, workspace)?;
    check_same_workspace(&writer, root, store.path())?;
    // Planned again against what this transaction sees: another import may have
    // committed since the snapshot, and its line tables are the ones to keep or replace.
    let plan = plan(root, &writer, workspace, options)?;
    if !options.rehash
        && identity_recorded(&writer, root, store.path(), identity)?
        && let Some(report) = up_to_date(&writer, root, workspace, &plan)?
    {
        // Dropped without a commit: nothing is written.
        return Ok(report);
    }
    progress.start(
        plan.iter()
            .filter(|p| p.needs_index)
            .map(|p| p.stamp.map_or(0, |s| s.size))
            .sum(),
    );
    let mut report = ImportReport {
        projects: workspace.projects.len(),
        ..ImportReport::default()
    };
    let mut done_bytes = 0;
    let mut checker = Checker::default();
    let sessions = workspace
        .projects
        .iter()
        .flat_map(|p| p.sessions.iter().map(move |s| (p, s)));
    for ((project, session), item) in sessions.zip(plan) {
        // A safe point: nothing is committed yet, the transaction is dropped on the way out.
        crate::util::stop::check()?;
        // The line table this transaction sees for the session, whatever its path.
        let stored = item.stored.and_then(|s| match s.file {
            FileState::Indexed(record) => Some(record),
            FileState::Missing => None,
        });
        // Citations follow the line table, in this same transaction: kept with it when
        // they were taken from it, else taken again from the lines just indexed.
        let old_turns = item.stored_turns;
        let file = match (item.stamp, item.previous) {
            (None, _) => {
                if let Some(old) = &stored {
                    writer.delete_lines(old.file_id)?;
                }
                writer.delete_session_citations(&project.key, &session.session_ref)?;
                report.files_missing += 1;
                FileState::Missing
            }
            (Some(stamp), Some(previous)) if !item.needs_index => {
                report.files_unchanged += 1;
                if old_turns.as_ref() != Some(&session.turns) {
                    stored::retarget_turns(&mut writer, &project.key, session)?;
                }
                FileState::Indexed(stamp.applied_to(previous))
            }
            (Some(_), previous) => {
                let indexed = index_file(&mut writer, root, &item.path, &item.rel, &mut |n| {
                    progress.advance(done_bytes + n);
                })?;
                // The stamp of the descriptor just hashed, not the plan's.
                let stamp = indexed.stamp;
                let record = indexed.record.clone();
                let record_digest = (record.digest, record.lines);
                done_bytes += stamp.size;
                let same_lines = previous
                    .as_ref()
                    .is_some_and(|old| old.digest == record.digest && old.lines == record.lines);
                let state = match previous {
                    // Same lines as before (a re-hash or a touch): keep the old table.
                    Some(old) if same_lines => {
                        writer.delete_lines(record.file_id)?;
                        report.files_unchanged += 1;
                        FileState::Indexed(stamp.applied_to(old))
                    }
                    _ => {
                        if let Some(old) = &stored {
                            writer.delete_lines(old.file_id)?;
                        }
                        report.files_indexed += 1;
                        report.bytes_indexed += record.size;
                        report.lines_indexed += record.lines;
                        FileState::Indexed(record)
                    }
                };
                if same_lines && item.citations_current {
                    if old_turns.as_ref() != Some(&session.turns) {
                        stored::retarget_turns(&mut writer, &project.key, session)?;
                    }
                } else {
                    // The lines holding the search's hits, from the line table kept.
                    let kept_id = match &state {
                        FileState::Indexed(kept) => kept.file_id,
                        FileState::Missing => indexed.record.file_id,
                    };
                    let mut capture = scan::Capture::new(&indexed.prescan);
                    if !indexed.prescan.is_empty() {
                        writer.each_line(kept_id, |entry| capture.push(entry))?;
                    }
                    let found = scan::citations(
                        &indexed.file,
                        session,
                        &indexed.prescan,
                        &capture,
                        &mut checker,
                        &options.citations,
                    )
                    .map_err(|source| ImportError::Io {
                        path: item.path.display().to_string(),
                        source,
                    })?;
                    let (digest, lines) = match &state {
                        FileState::Indexed(kept) => (kept.digest, kept.lines),
                        FileState::Missing => record_digest,
                    };
                    let scan = CitationScan {
                        digest,
                        lines,
                        citations: found.len() as u64,
                    };
                    writer.put_session_citations(
                        &project.key,
                        &session.session_ref,
                        &scan,
                        found,
                    )?;
                    report.citation_scans += 1;
                }
                state
            }
        };
        writer.put_session(
            &project.key,
            SessionRecord {
                session: session.clone(),
                file,
            },
        )?;
        report.sessions += 1;
    }
    remove_stale(&mut writer, workspace)?;
    report.documents = sync_documents(&mut writer, root, workspace)?;
    for project in &workspace.projects {
        writer.put_project(project_record(project))?;
    }
    writer.put_workspace(workspace_record(root, workspace))?;
    writer.put_contract(workspace.contract)?;
    writer.put_citation_options(options.citations.bits())?;
    if let Some(identity) = identity {
        writer.put_workspace_identity(identity)?;
    }
    pause_point("before-commit");
    // The last safe point: from the commit on, the import finishes.
    crate::util::stop::check()?;
    progress.committing();
    writer.commit()?;
    report.committed = true;
    progress.finish();
    // How many session files were scanned for citations, on stderr, when asked (tests of
    // the incremental scan read it; in every build, so those tests run on release too).
    if crate::util::test_hooks::count_scans() {
        eprintln!("evidence-store: citation scans: {}", report.citation_scans);
    }
    Ok(report)
}

fn project_record(project: &workspace::Project) -> ProjectRecord {
    ProjectRecord {
        key: project.key.clone(),
        label: project.label.clone(),
        session_refs: project
            .sessions
            .iter()
            .map(|s| s.session_ref.clone())
            .collect(),
    }
}

fn workspace_record(root: &WorkspaceRoot, workspace: &Workspace) -> WorkspaceRecord {
    WorkspaceRecord {
        root_display: root.display.clone(),
        metadata: workspace.metadata.clone(),
        project_keys: workspace.projects.iter().map(|p| p.key.clone()).collect(),
    }
}

/// The report of an import that finds the store matching the workspace, or `None` when
/// something would change: a file to index, a record that differs, a session, project
/// or document that came or went, a document whose bytes differ from its file.
fn up_to_date(
    lookup: &impl Lookup,
    root: &WorkspaceRoot,
    workspace: &Workspace,
    plan: &[Planned],
) -> Result<Option<ImportReport>, ImportError> {
    let mut report = ImportReport {
        projects: workspace.projects.len(),
        ..ImportReport::default()
    };
    let sessions = workspace.projects.iter().flat_map(|p| p.sessions.iter());
    for (session, item) in sessions.zip(plan) {
        if item.needs_index {
            return Ok(None);
        }
        let file = match (item.stamp, &item.previous) {
            (None, _) => {
                report.files_missing += 1;
                FileState::Missing
            }
            (Some(stamp), Some(previous)) => {
                report.files_unchanged += 1;
                FileState::Indexed(stamp.applied_to(previous.clone()))
            }
            (Some(_), None) => return Ok(None),
        };
        let same = item
            .stored
            .as_ref()
            .is_some_and(|s| s.file == file && s.session == *session);
        if !same {
            return Ok(None);
        }
        report.sessions += 1;
    }
    if lookup.session_count()? != report.sessions as u64
        || lookup.project_count()? != workspace.projects.len() as u64
    {
        return Ok(None);
    }
    for project in &workspace.projects {
        if lookup.project(&project.key)?.as_ref() != Some(&project_record(project)) {
            return Ok(None);
        }
    }
    if lookup.workspace()?.as_ref() != Some(&workspace_record(root, workspace)) {
        return Ok(None);
    }
    let mut on_disk = Vec::new();
    for rel in document_paths(workspace) {
        // Read as the full import reads documents (regular files inside the workspace
        // only, so a planted FIFO cannot hang this check); a file it cannot read is a
        // change, which the full import then reports.
        match crate::util::fsutil::read_confined(&root.path, &rel) {
            Ok(Some(bytes)) => {
                let stored = lookup.document(&rel)?;
                if stored.is_none_or(|d| d.bytes != bytes) {
                    return Ok(None);
                }
                on_disk.push(rel);
            }
            Ok(None) => {}
            Err(_) => return Ok(None),
        }
    }
    on_disk.sort();
    if lookup.document_paths()? != on_disk {
        return Ok(None);
    }
    report.documents = on_disk.len();
    Ok(Some(report))
}

/// What to do with one session's file.
struct Planned {
    /// Shown in errors.
    path: PathBuf,
    /// Relative to the workspace root.
    rel: String,
    stamp: Option<Stamp>,
    /// The stored record of this session, as the plan's snapshot or transaction sees it.
    stored: Option<SessionRecord>,
    /// Its file record, when it is of the same `session_path`.
    previous: Option<FileRecord>,
    needs_index: bool,
    /// Whether the stored citations were taken from `previous`'s lines with the same
    /// `source`; when not, the file is read again to take them.
    citations_current: bool,
    /// The stored session's turns, which the stored citations' turn refs follow.
    stored_turns: Option<Vec<workspace::Turn>>,
}

fn plan(
    root: &WorkspaceRoot,
    lookup: &impl Lookup,
    workspace: &Workspace,
    options: ImportOptions,
) -> Result<Vec<Planned>, ImportError> {
    let mut out = Vec::new();
    let same_options = lookup.citation_options()? == options.citations.bits();
    // Without a root to open them under, every session file is missing.
    let sessions = Sessions::open(&root.path).ok();
    for project in &workspace.projects {
        for session in &project.sessions {
            let rel = layout::session_path(&project.key, &session.session_path);
            let path = root.path.join(&rel);
            let stamp = stamp(sessions.as_ref(), &rel);
            let stored = lookup.session(&project.key, &session.session_ref)?;
            let previous = match &stored {
                Some(SessionRecord {
                    file: FileState::Indexed(record),
                    session: old,
                }) if old.session_path == session.session_path => Some(record.clone()),
                _ => None,
            };
            let unchanged =
                matches!((&previous, stamp), (Some(old), Some(now)) if now.matches(old));
            let citations_current = match (&previous, &stored) {
                (Some(old), Some(record))
                    if record.session.source == session.source && same_options =>
                {
                    lookup
                        .citation_scan(&project.key, &session.session_ref)?
                        .is_some_and(|scan| scan.digest == old.digest && scan.lines == old.lines)
                }
                _ => false,
            };
            let needs_index =
                stamp.is_some() && (options.rehash || !unchanged || !citations_current);
            let stored_turns = stored.as_ref().map(|s| s.session.turns.clone());
            out.push(Planned {
                path,
                rel,
                stamp,
                stored,
                previous,
                needs_index,
                citations_current,
                stored_turns,
            });
        }
    }
    Ok(out)
}

/// A file just streamed into a line table, with what its citations need.
struct Indexed {
    record: FileRecord,
    /// The stamp of the descriptor that was hashed.
    stamp: Stamp,
    file: SessionFile,
    prescan: scan::Prescan,
}

/// Streams one session file into a new line table, searching its bytes for what a
/// citation needs on the way. The file is opened once ([`session::open`]: never blocking,
/// regular files only) and stamped, hashed and searched through that one descriptor.
fn index_file(
    writer: &mut Writer,
    root: &WorkspaceRoot,
    path: &Path,
    rel: &str,
    on_progress: &mut dyn FnMut(u64),
) -> Result<Indexed, ImportError> {
    let mut done = 0;
    let io_error = |source| ImportError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = session::open(&root.path, rel).map_err(|e| io_error(e.into_io()))?;
    let stamp = stamp_of(&file);
    let file_id = writer.new_file_id()?;
    let mut sink = writer.line_sink(file_id)?;
    // The bytes are searched for what a citation needs as the indexer reads them.
    let (summary, searched) = lines::index_file_observed::<IndexError, _>(
        file.file(),
        stamp.size,
        &scan::Searcher::default,
        |entry| {
            // Within a large file too: every line is a safe point.
            crate::util::stop::check().map_err(IndexError::Stopped)?;
            Ok(sink.push(entry)?)
        },
        |n| {
            done += n;
            on_progress(done);
        },
    )
    .map_err(|e| match e {
        IndexError::Io(source) => io_error(source),
        IndexError::Store(e) => ImportError::Store(e),
        IndexError::Stopped(e) => ImportError::Stopped(e),
    })?;
    let prescan = scan::merge(searched);
    let digest = sink.finish()?;
    let record = stamp.applied_to(FileRecord {
        file_id,
        size: summary.bytes,
        mtime_ns: stamp.mtime_ns,
        lines: summary.lines,
        digest,
        ctime_ns: stamp.ctime_ns,
        inode: stamp.inode,
    });
    Ok(Indexed {
        record: FileRecord {
            size: summary.bytes,
            ..record
        },
        stamp,
        file,
        prescan,
    })
}

/// Errors while streaming a file into the store.
enum IndexError {
    Io(io::Error),
    Store(StoreError),
    Stopped(crate::util::stop::Stopped),
}

impl From<io::Error> for IndexError {
    fn from(e: io::Error) -> Self {
        IndexError::Io(e)
    }
}

impl From<StoreError> for IndexError {
    fn from(e: StoreError) -> Self {
        IndexError::Store(e)
    }
}

/// Drops projects and sessions that left the workspace, with their line tables.
fn remove_stale(writer: &mut Writer, workspace: &Workspace) -> Result<(), StoreError> {
    let present: std::collections::HashSet<(&str, &str)> = workspace
        .projects
        .iter()
        .flat_map(|p| {
            p.sessions
                .iter()
                .map(move |s| (p.key.as_str(), s.session_ref.as_str()))
        })
        .collect();
    for (project_key, record) in writer.all_sessions()? {
        if !present.contains(&(project_key.as_str(), record.session.session_ref.as_str())) {
            if let FileState::Indexed(file) = &record.file {
                writer.delete_lines(file.file_id)?;
            }
            writer.delete_session_citations(&project_key, &record.session.session_ref)?;
            writer.remove_session(&project_key, &record.session.session_ref)?;
        }
    }
    for key in writer.all_projects()? {
        if !workspace.projects.iter().any(|p| p.key == key) {
            writer.remove_project(&key)?;
        }
    }
    Ok(())
}

/// Relative paths of the workspace documents the store mirrors.
pub fn document_paths(workspace: &Workspace) -> Vec<String> {
    let mut paths = Vec::new();
    for project in &workspace.projects {
        for session in &project.sessions {
            paths.push(layout::card_path(&project.key, &session.session_ref));
        }
        paths.push(layout::envelope_path(&project.key));
    }
    paths.push(layout::DAILY_REPORT.to_owned());
    paths
}

/// Mirrors the documents on disk: files present are stored as they are (the tools that
/// use them validate them), files absent are forgotten. Returns how many are stored.
fn sync_documents(
    writer: &mut Writer,
    root: &WorkspaceRoot,
    workspace: &Workspace,
) -> Result<usize, ImportError> {
    let wanted = document_paths(workspace);
    let wanted_set: std::collections::HashSet<&str> = wanted.iter().map(String::as_str).collect();
    for stale in writer.document_paths()? {
        if !wanted_set.contains(stale.as_str()) {
            writer.remove_document(&stale)?;
        }
    }
    let mut stored = 0;
    for rel in &wanted {
        let path = root.path.join(rel);
        // Read only when its real location is inside the workspace.
        match crate::util::fsutil::read_confined(&root.path, rel) {
            Ok(Some(bytes)) => {
                writer.put_document(rel, DocumentRecord::new(bytes))?;
                stored += 1;
            }
            Ok(None) => writer.remove_document(rel)?,
            Err(source) => {
                return Err(ImportError::Io {
                    path: path.display().to_string(),
                    source,
                });
            }
        }
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stamp taken right after a write is taken once the clock has moved on, so that
    /// the next write, however soon, changes it.
    #[test]
    fn a_fresh_file_is_stamped_once_a_later_write_would_show() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "{\"a\":1}\n").unwrap();
        let sessions = Sessions::open(dir.path()).unwrap();
        let first = stamp(Some(&sessions), "s.jsonl").unwrap();
        let after = nanos_since_epoch(Ok(std::time::SystemTime::now()));
        assert!(first.settled, "{first:?}");
        assert!(
            first.ctime_ns + SETTLE_FINE_NS <= after,
            "{first:?} at {after}"
        );
        std::fs::write(&path, "{\"b\":2}\n").unwrap();
        let second = stamp(Some(&sessions), "s.jsonl").unwrap();
        assert_eq!(second.size, first.size);
        assert_ne!(second.ctime_ns, first.ctime_ns);
        assert!(!second.matches(&first.applied_to(record())));
    }

    /// An unsettled stamp proves nothing unchanged, and is stored so that it never will.
    #[test]
    fn an_unsettled_stamp_never_matches() {
        let unsettled = Stamp {
            size: 10,
            mtime_ns: 5_000_000_123,
            ctime_ns: 5_000_000_456,
            inode: 7,
            settled: false,
        };
        let stored = unsettled.applied_to(record());
        assert_eq!(stored.ctime_ns, 0);
        assert!(!unsettled.matches(&stored));
        let settled = Stamp {
            settled: true,
            ..unsettled
        };
        assert!(!settled.matches(&stored));
        assert!(settled.matches(&settled.applied_to(record())));
    }

    fn record() -> FileRecord {
        FileRecord {
            file_id: 1,
            size: 0,
            mtime_ns: 0,
            lines: 1,
            digest: [0; 32],
            ctime_ns: 0,
            inode: 0,
        }
    }
}
