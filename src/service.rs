//! The tools, independent of any transport: one method per MCP tool, taking and returning
//! plain Rust values. The MCP adapter ([`crate::mcp`]) only converts to and from JSON.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use serde::Serialize;

use crate::citations::query;
use crate::documents::evidence::{self, Appended, WriteResult};
use crate::documents::problems::Problem;
use crate::documents::report::{self, Context, IndexedTurn, ProjectContext, Written};
use crate::documents::synthesis::{self, CommittedChain, TurnKey, WorkItemAppended};
use crate::documents::{self, DocumentError};
use crate::import::{self, ImportError, ImportOptions, Quiet};
use crate::read::pages::{self, Paging};
use crate::read::{self, ReadRequest, ReadResult};
use crate::store::{Lookup, Writer};
use crate::store::{OpenError, OwnStoreError, Store, StoreError};
use crate::tool_output::handles;
use crate::tool_output::lookup;
use crate::tool_output::service::ToolOutput;
use crate::util::disk::Disk;
use crate::util::kind::Kind;
use crate::util::pyjson::{Value, py_repr};
use crate::util::wait::Locks;
use crate::workspace::Unknown;
use crate::workspace::contract::Contract;
use crate::workspace::{LoadError, WorkspaceRoot, layout};

/// The tools' shared state: the store, or the reason there is none.
///
/// The store is opened and brought in line with the workspace at start. Some failures
/// there are retried by later calls instead of being kept for the server's life:
/// - the start-up import found the document lock held: it does not wait for it (reads
///   never wait for another process's write), the store is served as it stands, and every
///   later call tries the import again; a write waits for the lock as writes do;
/// - a transient shortage (too many open files, in the process or the system): the next
///   call starts again.
///
/// Any other failure (an invalid workspace, a damaged store, a full disk) is the answer
/// of every call until the server is restarted.
pub struct Service {
    root: WorkspaceRoot,
    store_path: PathBuf,
    /// The contract of the served workspace, once it has loaded.
    contract: OnceLock<Contract>,
    store: OnceLock<Store>,
    /// A read-only view of the store, for reads while the writable open must wait
    /// (another process holds the store's gate or redb's write lock).
    view: OnceLock<Store>,
    /// The start-up import has not completed yet (deferred or failed transiently).
    pending: AtomicBool,
    /// The last start problem: a transient one is retried, any other kept.
    problem: Mutex<Option<Arc<Unavailable>>>,
    /// Held by whoever is (re)starting, so that one call at a time does.
    starting: Mutex<()>,
    /// How its imports run (how citations are extracted).
    import: ImportOptions,
    /// The `tool_output` tools' settings and model endpoint.
    tool_output: ToolOutput,
    /// How long lock waits last, and this process's name in the document lock file.
    locks: Locks,
    /// What the store and the documents are written through.
    disk: Disk,
}

/// What a service runs with, built by the caller (the CLI, from its flags and environment)
/// and passed in: nothing below reads configuration of its own.
#[derive(Debug, Clone)]
pub struct Config {
    /// The workspace served.
    pub workspace: WorkspaceRoot,
    /// Its store file.
    pub store: PathBuf,
    /// How its imports run (a re-hash aside: every import of a server is incremental).
    pub import: ImportOptions,
    /// The `tool_output` tools' settings and model endpoint.
    pub tool_output: ToolOutput,
    /// How long lock waits last, and this process's name in the document lock file.
    pub locks: Locks,
    /// What the store and the documents are written through: the real disk, but for
    /// tests that inject faults.
    pub disk: Disk,
}

impl Config {
    /// `workspace` and `store` with every other setting at its default.
    pub fn new(workspace: WorkspaceRoot, store: &Path) -> Config {
        Config {
            workspace,
            store: store.to_path_buf(),
            import: ImportOptions::default(),
            tool_output: ToolOutput::default(),
            locks: Locks::default(),
            disk: Disk::real(),
        }
    }
}

/// Why a start attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The workspace's own store is not a file of its own.
    #[error(transparent)]
    OwnStore(OwnStoreError),
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Neither a writable nor (on read-only media) a read-only open succeeded.
    #[error("{writable} (and read-only: {read_only})")]
    ReadOnly {
        writable: OpenError,
        read_only: OpenError,
    },
    #[error(transparent)]
    Import(#[from] ImportError),
    #[error("the store is not open")]
    NotOpen,
}

impl StartError {
    /// Whether the next call starts again: a lock on the store held past the wait's
    /// bound, or a shortage of open files, found by variant and OS error code.
    pub fn kind(&self) -> Kind {
        match self {
            StartError::Load(e) => e.kind,
            StartError::Open(e) => e.kind(),
            StartError::ReadOnly {
                writable,
                read_only,
            } => writable.kind().or(read_only.kind()),
            StartError::Import(e) => e.kind(),
            StartError::OwnStore(_) | StartError::NotOpen => Kind::Lasting,
        }
    }
}

/// Why the workspace cannot be served: the start's failure, naming the workspace (and,
/// for a busy store, who holds the document lock).
#[derive(Debug, thiserror::Error)]
#[error("the prepared workspace {workspace} cannot be served: {cause}{hint}")]
pub struct Unavailable {
    workspace: String,
    cause: StartError,
    hint: String,
}

impl Unavailable {
    pub fn kind(&self) -> Kind {
        self.cause.kind()
    }
}

/// Why a tool cannot answer: the workspace cannot be served, or the store failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Unavailable(Arc<Unavailable>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How long a read or `prompt_diary_ping` waits for a lock on the store held by another
/// process (a commit takes milliseconds; a stopped or stuck holder must not stop reads).
const READ_WAIT: Duration = Duration::from_secs(2);

/// How long a read's attempt to open the store for writing and import waits for redb's
/// locks: a commit takes milliseconds, and past this the read is answered from the view.
const START_FOR_READS_WAIT: Duration = Duration::from_millis(250);

/// Why a write cannot start.
#[derive(Debug, thiserror::Error)]
pub enum NotWritable {
    /// The start-up import still waits for the document lock.
    #[error(transparent)]
    Busy(ImportError),
    #[error(transparent)]
    Unavailable(Arc<Unavailable>),
}

impl NotWritable {
    fn into_problem(self) -> Problem {
        match self {
            NotWritable::Busy(e) => Problem::new("document_lock", e.to_string(), BUSY_HINT),
            NotWritable::Unavailable(u) => Problem::new("workspace", u.to_string(), WORKSPACE_HINT),
        }
    }
}

/// `prompt_diary_ping`'s answer: every value a string, as its output schema says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ping {
    pub name: &'static str,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

const WORKSPACE_HINT: &str =
    "fix the prepared workspace as the message says, then call the tool again";

/// What to do when another process holds a lock a write needs.
const BUSY_HINT: &str = "retry when the named process is done; if it is stuck, stop it";

/// The store, writable; on read-only media, read-only when it exists: it can still answer
/// reads if it is up to date (the import then writes nothing), and every write is refused
/// naming it. `for_reads`: refused while another process holds the store's gate, rather
/// than opened without it after the wait (reads have the view meanwhile). Writes go
/// through `disk`.
fn open_store(
    path: &Path,
    lock_wait: Duration,
    disk: &Disk,
    for_reads: bool,
) -> Result<Store, StartError> {
    let opened = if for_reads {
        Store::open_if_ungated(path, lock_wait, disk.clone())
    } else {
        Store::open_on(path, lock_wait, disk.clone())
    };
    match opened {
        Ok(store) => Ok(store),
        Err(e) if e.kind() == Kind::StoreBusy => Err(e.into()),
        Err(e) if crate::store::on_read_only_media(path) && path.is_file() => {
            tracing::warn!(error = %e, "the store is on read-only media: serving it read-only");
            Store::open_read_only(path, lock_wait).map_err(|read_only| StartError::ReadOnly {
                writable: e,
                read_only,
            })
        }
        Err(e) => Err(e.into()),
    }
}

impl Service {
    /// Opens the store and brings it in line with the workspace (an incremental import:
    /// a new store is filled, an existing one only re-checks what changed). A workspace
    /// that does not load leaves the service up, answering every call with the problem
    /// (naming the resolved workspace), and creates no store: nothing is written outside a
    /// valid workspace.
    pub fn start(root: WorkspaceRoot, store_path: &Path) -> Service {
        Service::new(Config::new(root, store_path))
    }

    /// [`Service::start`] with every setting `config` gives.
    pub fn new(config: Config) -> Service {
        let Config {
            workspace: root,
            store: store_path,
            import,
            tool_output,
            locks,
            disk,
        } = config;
        let service = Service {
            root,
            store_path,
            contract: OnceLock::new(),
            store: OnceLock::new(),
            view: OnceLock::new(),
            pending: AtomicBool::new(true),
            problem: Mutex::new(None),
            starting: Mutex::new(()),
            import: ImportOptions {
                rehash: false,
                ..import
            },
            tool_output,
            locks,
            disk,
        };
        if let Ok(guard) = service.starting.lock() {
            let _ = service.try_start_for_reads(&guard);
        }
        if let Some(problem) = service.current_problem() {
            tracing::debug!(%problem, "workspace unavailable; every call will report it");
        }
        service
    }

    /// Why the workspace cannot be served, when the problem lasts until someone fixes it
    /// (every call answers with it); `None` when it is served or a later call may succeed
    /// (a lock held by another process).
    pub fn unavailable(&self) -> Option<String> {
        self.current_problem()
            .filter(|p| !p.kind().is_transient())
            .map(|p| p.to_string())
    }

    fn current_problem(&self) -> Option<Arc<Unavailable>> {
        match self.problem.lock() {
            Ok(slot) => slot.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set_problem(&self, problem: Option<Arc<Unavailable>>) {
        match self.problem.lock() {
            Ok(mut slot) => *slot = problem,
            Err(poisoned) => *poisoned.into_inner() = problem,
        }
    }

    /// The workspace cannot be served because of `cause`; a lock on the store held past
    /// the wait's bound names who holds the document lock, when it says.
    fn unavailable_for(&self, cause: StartError) -> Arc<Unavailable> {
        let hint = if cause.kind() == Kind::StoreBusy {
            documents::holder_hint(&self.root.path)
        } else {
            String::new()
        };
        Arc::new(Unavailable {
            workspace: self.root.display.clone(),
            cause,
            hint,
        })
    }

    /// The attempt to start that a read (or `prompt_diary_ping`) makes: no wait for the
    /// document lock, none for the store's gate (held by another process's open or close:
    /// the writable open is left for later), and a short one for redb's own locks. A
    /// store it cannot open for writing is read through the view ([`Service::readable`]).
    fn try_start_for_reads(&self, starting: &MutexGuard<'_, ()>) -> Result<(), ImportError> {
        crate::util::wait::within(START_FOR_READS_WAIT, || {
            self.try_start(starting, Duration::ZERO, true)
        })
    }

    /// One attempt to finish starting (under `starting`): load and open what is not open
    /// yet, then the import, waiting at most `lock_wait` for the document lock; `for_reads`:
    /// no writable open while another process holds the store's gate. `Err` is the
    /// import's lock wait, for [`NotWritable::Busy`].
    fn try_start(
        &self,
        _starting: &MutexGuard<'_, ()>,
        lock_wait: Duration,
        for_reads: bool,
    ) -> Result<(), ImportError> {
        if !self.pending.load(Ordering::Acquire) {
            return Ok(());
        }
        if self
            .current_problem()
            .is_some_and(|p| !p.kind().is_transient())
        {
            return Ok(());
        }
        let failed = |cause: StartError| {
            let problem = self.unavailable_for(cause);
            if problem.kind().is_transient() {
                tracing::warn!(%problem, "workspace unavailable for now; the next call tries again");
            }
            self.set_problem(Some(problem));
        };
        // Loaded once per attempt, for the store's open and the import both.
        let workspace = match crate::workspace::load(&self.root) {
            Ok(workspace) => workspace,
            Err(e) => {
                failed(e.into());
                return Ok(());
            }
        };
        let store = match self.store.get() {
            Some(store) => store,
            None => {
                let _ = self.contract.set(workspace.contract);
                let opened = crate::store::check_own_store(&self.root.path, &self.store_path)
                    .map_err(StartError::OwnStore)
                    .and_then(|()| {
                        open_store(&self.store_path, self.locks.timeout, &self.disk, for_reads)
                    });
                match opened {
                    Ok(store) => self.store.get_or_init(|| store),
                    Err(problem) => {
                        failed(problem);
                        return Ok(());
                    }
                }
            }
        };
        match import::import_loaded(
            &self.root,
            &workspace,
            store,
            self.import,
            &Quiet,
            &self.locks.waiting(lock_wait),
        ) {
            Ok(report) => {
                tracing::info!(?report, "workspace imported");
                self.set_problem(None);
                self.pending.store(false, Ordering::Release);
                Ok(())
            }
            Err(e @ ImportError::Busy(_))
            | Err(e @ ImportError::Store(StoreError::Busy { .. })) => {
                self.set_problem(None);
                if lock_wait.is_zero() {
                    tracing::warn!(
                        error = %e,
                        "the workspace changed but another process holds its document lock: \
                         serving the store as it stands; the next call imports again"
                    );
                }
                Err(e)
            }
            Err(e) => {
                failed(e.into());
                Ok(())
            }
        }
    }

    /// The store for a read: while the start is unfinished, one more attempt first that
    /// never waits (not for the document lock, the store's gate, nor another call's
    /// attempt). While the store cannot be opened for writing because another process
    /// holds a lock on it, reads are answered from a read-only view of it as it stands.
    fn readable(&self) -> Result<&Store, Arc<Unavailable>> {
        if self.pending.load(Ordering::Acquire)
            && let Ok(guard) = self.starting.try_lock()
        {
            let _ = self.try_start_for_reads(&guard);
        }
        match self.settled() {
            Err(problem) if self.store.get().is_none() && problem.kind() == Kind::StoreBusy => {
                self.view().ok_or(problem)
            }
            settled => settled,
        }
    }

    /// The read-only view, opened on first use; `None` when it cannot be opened now (the
    /// file is missing, or mid-repair in another process).
    fn view(&self) -> Option<&Store> {
        if let Some(view) = self.view.get() {
            return Some(view);
        }
        match Store::open_view(&self.store_path, READ_WAIT) {
            Ok(view) => Some(self.view.get_or_init(|| view)),
            Err(e) => {
                tracing::debug!(error = %e, "no read-only view of the store");
                None
            }
        }
    }

    /// The store for a write: while the start is unfinished, the import first, waiting
    /// for the document lock as a write does.
    fn writable(&self) -> Result<&Store, NotWritable> {
        if self.pending.load(Ordering::Acquire) {
            let guard = match self.starting.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            if let Err(busy) = self.try_start(&guard, self.locks.wait(), false) {
                return Err(NotWritable::Busy(busy));
            }
        }
        self.settled().map_err(NotWritable::Unavailable)
    }

    /// The store, or the problem the last start attempt left.
    fn settled(&self) -> Result<&Store, Arc<Unavailable>> {
        if let Some(problem) = self.current_problem() {
            return Err(problem);
        }
        self.store
            .get()
            .ok_or_else(|| self.unavailable_for(StartError::NotOpen))
    }

    /// The prompt-diary contract the served workspace uses: it decides validation rules,
    /// record shapes and messages. 0.2.10 when no workspace is served (every call then
    /// answers the problem).
    pub fn contract(&self) -> Contract {
        self.contract.get().copied().unwrap_or(Contract::V0_2_10)
    }

    /// What a tool-output handle names ([`handles::resolve`]); `Err` is why the store
    /// cannot answer.
    fn resolve_handle(&self, handle: &str) -> Result<handles::Resolved, ServiceError> {
        let store = self.readable().map_err(ServiceError::Unavailable)?;
        Ok(handles::resolve(store, &self.root.path, handle)?)
    }

    /// The `tool_output` tools: their settings, model choice, extraction and reads.
    pub fn tool_output(&self) -> &ToolOutput {
        &self.tool_output
    }

    /// What a `tool_output` handle names, as those tools need it: debug builds' test
    /// stand-in first ([`lookup::test_lookup`]), then the store. `Err` is why the store
    /// cannot answer.
    pub fn tool_output_lookup(&self, handle: &str) -> Result<lookup::Lookup, ServiceError> {
        if let Some(found) = lookup::test_lookup(handle) {
            return Ok(found);
        }
        self.resolve_handle(handle).map(lookup::Lookup::from)
    }

    /// The connectivity check: prompt-diary's constant answer while the workspace is
    /// served; otherwise status `unavailable` with the resolved workspace and the problem.
    pub fn ping(&self) -> Ping {
        match self.readable() {
            Ok(_) => Ping {
                name: "prompt-diary",
                status: "ok",
                workspace: None,
                problem: None,
            },
            Err(problem) => Ping {
                name: "prompt-diary",
                status: "unavailable",
                workspace: Some(self.root.display.clone()),
                problem: Some(problem.to_string()),
            },
        }
    }

    /// `read_session_lines`, the one read entry point: its answer's text handed to `sink`.
    /// Paged (`paging` as the caller read the arguments under the served contract), one
    /// page, made whole ([`pages::read_session_page`]); unpaged, the records printed in
    /// pieces as they are made ([`read::session_lines::read_session_pieces`]).
    pub fn read(&self, request: &ReadRequest, paging: Paging, sink: &mut impl read::Sink) {
        let store = match self.readable() {
            Ok(store) => store,
            Err(problem) => {
                let answer = unavailable(&problem);
                let text = match paging {
                    Paging::Page(_) => pages::invalid_text(&answer),
                    Paging::Unpaged => answer.to_pretty_json(),
                };
                return read::whole(sink, text);
            }
        };
        if let Paging::Page(cursor) = paging {
            read::whole(
                sink,
                pages::read_session_page(store, &self.root.path, request, cursor),
            );
        } else {
            let form = sink.form();
            let stops = sink.stops();
            read::session_lines::read_session_pieces(
                store,
                &self.root.path,
                request,
                form,
                &|| stops.iter().any(crate::util::stop_flag::Stop::is_set),
                |piece| sink.piece(piece),
            );
        }
    }

    /// The unpaged read ending in records instead of text: the oracle the tests and
    /// benches compare [`Service::read`]'s text with.
    #[doc(hidden)]
    pub fn read_records(&self, request: &ReadRequest) -> ReadResult {
        match self.readable() {
            Ok(store) => read::session_lines::read_session_lines(store, &self.root.path, request),
            Err(problem) => unavailable(&problem),
        }
    }

    /// `write_evidence`: parse the chain, then in one store transaction resolve it, sync
    /// and check the existing card, replace the card file and commit.
    pub fn write_evidence(
        &self,
        project_key: &str,
        session_ref: &str,
        chain: &Value,
    ) -> WriteResult<Appended> {
        let chain = match evidence::parse_chain_for(self.contract().rules(), chain) {
            Ok(chain) => chain,
            Err(problems) => return WriteResult::invalid(problems),
        };
        let store = match self.writable() {
            Ok(store) => store,
            Err(e) => return WriteResult::invalid(vec![e.into_problem()]),
        };
        match self.append_chain(store, project_key, session_ref, &chain) {
            Ok(result) => result,
            Err(e) => WriteResult::invalid(vec![document_problem(&self.root.path, e)]),
        }
    }

    fn append_chain(
        &self,
        store: &Store,
        project_key: &str,
        session_ref: &str,
        chain: &evidence::Chain,
    ) -> Result<WriteResult<Appended>, DocumentError> {
        let rules = self.contract().rules();
        let _lock = documents::lock(&self.root.path, &self.locks)?;
        let mut writer = store.writer()?;
        if writer.project(project_key)?.is_none() {
            return Ok(Unknown::project(project_key).into());
        }
        let Some(record) = writer.session(project_key, session_ref)? else {
            return Ok(Unknown::session(project_key, session_ref).into());
        };
        let Some(turn) = record.session.turn(&chain.turn_ref) else {
            return Ok(WriteResult::one(
                "evidence_chain.turn_ref",
                format!(
                    "unknown turn_ref {} in the session index",
                    py_repr(&chain.turn_ref)
                ),
                "use the assigned turn_ref from the target turn",
            ));
        };
        if rules.server_quoted_trigger
            && !matches!(record.session.source.as_str(), "codex" | "claude-code")
        {
            return Ok(WriteResult::one(
                "session_ref",
                "session source is unsupported",
                "re-prepare the source session",
            ));
        }
        let rel = layout::card_path(project_key, session_ref);
        let existing = match documents::sync(&mut writer, &self.root.path, &rel)? {
            Some(bytes) => {
                match evidence::existing_card_for(rules, &rel, &bytes, project_key, session_ref) {
                    Ok(card) => Some(card),
                    Err(problem) => return Ok(WriteResult::invalid(vec![problem])),
                }
            }
            None => None,
        };
        if existing
            .as_ref()
            .is_some_and(|card| evidence::has_chain(card, &chain.turn_ref))
        {
            return Ok(WriteResult::one(
                "evidence_chain.turn_ref",
                format!(
                    "turn_ref {} already has a committed evidence chain (duplicate)",
                    py_repr(&chain.turn_ref)
                ),
                "each turn may have only one evidence chain",
            ));
        }
        let problems = evidence::check_turn_for(rules, chain, turn.span);
        if !problems.is_empty() {
            return Ok(WriteResult::invalid(problems));
        }
        let mut chain = chain.clone();
        if rules.server_quoted_trigger {
            match self.trigger_text(store, project_key, session_ref, &record, turn.span.start)? {
                Ok(messages) => chain.quote(messages),
                Err(problem) => return Ok(WriteResult::invalid(vec![problem])),
            }
        }
        let chain = &chain;
        let bytes = evidence::append(rules, existing, project_key, session_ref, chain);
        let written = documents::write(&mut writer, &self.root.path, &rel, bytes)?;
        documents::commit(store, writer, written)?;
        Ok(WriteResult::Done(Appended {
            status: "appended",
            project_key: project_key.to_owned(),
            session_ref: session_ref.to_owned(),
            turn_ref: chain.turn_ref.clone(),
        }))
    }
}

impl Service {
    /// The human text of the trigger line `line` of the session, read from its file and
    /// checked against the store; or the problem to answer.
    fn trigger_text(
        &self,
        store: &Store,
        project_key: &str,
        session_ref: &str,
        record: &crate::store::SessionRecord,
        line: i64,
    ) -> Result<Result<Vec<String>, Problem>, DocumentError> {
        let field = "evidence_chain.trigger.citations";
        let restore =
            "restore or re-prepare the copied session, then retry the indexed human trigger";
        let crate::store::FileState::Indexed(file) = &record.file else {
            return Ok(Err(Problem::new(
                field,
                "could not read the copied session file: No such file or directory",
                restore,
            )));
        };
        let line = u64::try_from(line).unwrap_or(0);
        if line == 0 || line > file.lines {
            return Ok(Err(Problem::new(
                field,
                crate::documents::trigger::NotATrigger::Outside { line }.to_string(),
                restore,
            )));
        }
        let entries = store.reader()?.lines(file.file_id, line.max(2) - 1, line)?;
        let rel = layout::session_path(project_key, &record.session.session_path);
        let texts = match crate::session::read_texts(&self.root.path, &rel, file, &entries) {
            Ok(texts) => texts,
            Err(crate::session::ReadBackError::Io(e)) => {
                return Ok(Err(Problem::new(
                    field,
                    format!(
                        "could not read the copied session file: {}",
                        crate::session::strerror(&e)
                    ),
                    restore,
                )));
            }
            Err(crate::session::ReadBackError::Changed) => {
                return Ok(Err(Problem::new(
                    "session_ref",
                    format!(
                        "session file for session_ref {} changed since it was imported",
                        py_repr(session_ref)
                    ),
                    "run `evidence-store import` so the store matches the prepared workspace, then retry",
                )));
            }
        };
        let (previous, current) = match texts.as_slice() {
            [previous, current] if line > 1 => (Some(previous.as_str()), current.as_str()),
            [.., current] => (None, current.as_str()),
            [] => (None, ""),
        };
        Ok(crate::documents::trigger::human_text(
            &record.session.source,
            line,
            Some(current),
            previous,
        )
        .map_err(|e| Problem::new(field, e.to_string(), restore)))
    }

    /// `write_work_item`: parse the item, then in one store transaction gather the
    /// project's indexed turns, committed chains and envelope (each synced with its file),
    /// check the item against them, replace the envelope file and commit.
    pub fn write_work_item(
        &self,
        project_key: &str,
        item: &Value,
    ) -> WriteResult<WorkItemAppended> {
        let item = match synthesis::parse_work_item_for(self.contract().rules(), item) {
            Ok(item) => item,
            Err(problems) => return WriteResult::invalid(problems),
        };
        let store = match self.writable() {
            Ok(store) => store,
            Err(e) => return WriteResult::invalid(vec![e.into_problem()]),
        };
        self.append_work_item(store, project_key, &item)
            .unwrap_or_else(|f| f.into_result(&self.root.path))
    }

    fn append_work_item(
        &self,
        store: &Store,
        project_key: &str,
        item: &synthesis::WorkItem,
    ) -> Result<WriteResult<WorkItemAppended>, Failure> {
        let _lock = documents::lock(&self.root.path, &self.locks)?;
        let mut writer = store.writer()?;
        let Some(project) = writer.project(project_key)? else {
            return Ok(Unknown::project(project_key).into());
        };
        let (turns, chains) =
            self.project_evidence(&mut writer, project_key, &project.session_refs)?;
        let universe: Vec<TurnKey> = turns.into_iter().map(|(key, _)| key).collect();
        let committed = chains.iter().map(|c| c.key.clone()).collect();
        let rel = layout::envelope_path(project_key);
        let envelope = match documents::sync(&mut writer, &self.root.path, &rel)? {
            Some(bytes) => match parse_document(&rel, &bytes) {
                Ok(Value::Object(map))
                    if synthesis::envelope_is_current(self.contract().rules(), &map) =>
                {
                    Some(map)
                }
                Ok(_) => None,
                Err(e) => {
                    return Ok(WriteResult::one(
                        "project_synthesis",
                        e.to_string(),
                        "repair or delete the project-synthesis.json file, then write the work item again",
                    ));
                }
            },
            None => None,
        };
        let problems = synthesis::check_work_item(
            item,
            &universe,
            &committed,
            &synthesis::rows(envelope.as_ref()),
        );
        if !problems.is_empty() {
            return Ok(WriteResult::invalid(problems));
        }
        let envelope = synthesis::append_item(
            self.contract().rules(),
            envelope,
            project_key,
            &project.label,
            &chains,
            item,
        );
        let written = documents::write(
            &mut writer,
            &self.root.path,
            &rel,
            synthesis::envelope_bytes(&envelope),
        )?;
        documents::commit(store, writer, written)?;
        Ok(WriteResult::Done(WorkItemAppended {
            status: "appended",
            project_key: project_key.to_owned(),
            work_item_ref: item.work_item_ref.clone(),
            uncovered_turns: synthesis::uncovered(&universe, &envelope),
        }))
    }
}

/// Why a synthesis tool or Build could not run: problems for the caller, or a failure of
/// the store or a file.
enum Failure {
    Rejected(Vec<Problem>),
    Document(DocumentError),
}

impl From<DocumentError> for Failure {
    fn from(e: DocumentError) -> Self {
        Failure::Document(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Document(e.into())
    }
}

impl Failure {
    /// The write's answer; `root` names who holds the lock a busy store was waited for.
    fn into_result<T>(self, root: &Path) -> WriteResult<T> {
        match self {
            Failure::Rejected(problems) => WriteResult::invalid(problems),
            Failure::Document(e) => WriteResult::invalid(vec![document_problem(root, e)]),
        }
    }
}

/// Why `build` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    NotWritable(#[from] NotWritable),
    /// The problems found, their messages joined.
    #[error("{}", .0.iter().map(|p| p.message.as_str()).collect::<Vec<_>>().join("; "))]
    Rejected(Vec<Problem>),
    /// A lock on the store held past the wait's bound, naming who holds the document lock.
    #[error("{error}{hint}")]
    StoreBusy { error: DocumentError, hint: String },
    #[error(transparent)]
    Document(DocumentError),
}

/// What `build` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Built {
    pub projects: usize,
    pub work_items: usize,
    /// Synthesized slots carried over from the previous report.
    pub preserved: Vec<String>,
}

impl Service {
    /// One project's indexed turns (in universe order, with their spans) and the chains
    /// its evidence cards commit, each card synced with its file first.
    fn project_evidence(
        &self,
        writer: &mut Writer,
        key: &str,
        session_refs: &[String],
    ) -> Result<(Vec<IndexedTurn>, Vec<CommittedChain>), Failure> {
        let mut turns = Vec::new();
        let mut chains = Vec::new();
        for session_ref in session_refs {
            // A safe point per card: a stop leaves the transaction uncommitted.
            crate::util::stop::check().map_err(DocumentError::from)?;
            if let Some(record) = writer.session(key, session_ref)? {
                turns.extend(record.session.turns.iter().map(|t| {
                    (
                        (session_ref.clone(), t.turn_ref.clone()),
                        (t.span.start, t.span.end),
                    )
                }));
            }
            let rel = layout::card_path(key, session_ref);
            if let Some(bytes) = documents::sync(writer, &self.root.path, &rel)? {
                let card = parse_document(&rel, &bytes)
                    .map_err(|e| Failure::Rejected(vec![evidence::card_problem(e.to_string())]))?;
                chains.extend(synthesis::card_chains(session_ref, &card));
            }
        }
        Ok((turns, chains))
    }

    /// The projects, their indexed turns and committed chains (cards synced with their
    /// files), and with `envelopes` their project-synthesis envelopes.
    fn context(&self, writer: &mut Writer, envelopes: bool) -> Result<Context, Failure> {
        let workspace = writer.workspace()?.ok_or(StoreError::NotImported)?;
        let metadata = crate::util::pyjson::parse(&workspace.metadata.text).unwrap_or(Value::Null);
        let mut ctx = Context {
            report_date: workspace.metadata.report_date.clone(),
            status: workspace.metadata.status.clone(),
            timezone: workspace.metadata.timezone.clone(),
            metadata,
            projects: Vec::new(),
        };
        for key in &workspace.project_keys {
            let Some(project) = writer.project(key)? else {
                continue;
            };
            let mut p = ProjectContext {
                key: key.to_string(),
                label: project.label.clone(),
                ..ProjectContext::default()
            };
            let (turns, chains) = self.project_evidence(writer, key, &project.session_refs)?;
            p.turns = turns;
            p.committed = chains.into_iter().map(|c| c.key).collect();
            if envelopes {
                let rel = layout::envelope_path(key);
                if let Some(bytes) = documents::sync(writer, &self.root.path, &rel)? {
                    let parsed = parse_document(&rel, &bytes).map_err(|e| {
                        Failure::Rejected(vec![Problem::new(
                            "project_synthesis",
                            e.to_string(),
                            "repair or delete the envelope, or re-run project synthesis",
                        )])
                    })?;
                    p.envelope = Some(parsed);
                }
            }
            ctx.projects.push(p);
        }
        Ok(ctx)
    }

    /// The Build step: the daily-report skeleton, keeping valid slots of the previous
    /// report, written to `daily-report.json` and the store in one transaction.
    pub fn build(&self) -> Result<Built, BuildError> {
        let store = self.writable()?;
        let run = || -> Result<Built, Failure> {
            let _lock = documents::lock(&self.root.path, &self.locks)?;
            let mut writer = store.writer()?;
            let ctx = self.context(&mut writer, true)?;
            let previous = documents::sync(&mut writer, &self.root.path, layout::DAILY_REPORT)?
                .and_then(|bytes| parse_document(layout::DAILY_REPORT, &bytes).ok());
            let built = report::build_for(self.contract().rules(), &ctx, previous.as_ref())
                .map_err(|e| {
                    Failure::Rejected(vec![Problem::new("project_synthesis", e.to_string(), "")])
                })?;
            // A slot is filled after a build only if it was kept from the previous report.
            let summaries = as_projects(&built).iter().filter_map(|p| {
                let kept = p.get("summary").is_some_and(|v| *v != Value::Null);
                let key = p.get("project_key").and_then(Value::as_str);
                key.filter(|_| kept).map(|key| format!("{key} summary"))
            });
            let slots = ["report_title", "engagement_assessment", "team_learning"]
                .into_iter()
                .filter(|k| {
                    built.get(k).is_some_and(|v| *v != Value::Null)
                        && previous.as_ref().and_then(|p| p.get(k)) == built.get(k)
                })
                .map(str::to_owned);
            let preserved = summaries.chain(slots).collect();
            let work_items = as_projects(&built)
                .iter()
                .map(|p| {
                    p.get("work_items")
                        .and_then(Value::as_array)
                        .map_or(0, <[Value]>::len)
                })
                .sum();
            let projects = as_projects(&built).len();
            let written = documents::write(
                &mut writer,
                &self.root.path,
                layout::DAILY_REPORT,
                report::report_bytes(&built),
            )?;
            documents::commit(store, writer, written)?;
            Ok(Built {
                projects,
                work_items,
                preserved,
            })
        };
        run().map_err(|e| match e {
            Failure::Rejected(problems) => BuildError::Rejected(problems),
            Failure::Document(e) if e.kind() == Kind::StoreBusy => BuildError::StoreBusy {
                hint: documents::holder_hint(&self.root.path),
                error: e,
            },
            Failure::Document(e) => BuildError::Document(e),
        })
    }

    /// Runs one slot writer: sync and check the skeleton, load the context, patch, write.
    fn patch_report(
        &self,
        project_key: Option<&str>,
        patch: impl FnOnce(
            &Context,
            &crate::util::pyjson::Map,
        ) -> Result<crate::util::pyjson::Map, Vec<Problem>>,
    ) -> WriteResult<Written> {
        let store = match self.writable() {
            Ok(store) => store,
            Err(e) => return WriteResult::invalid(vec![e.into_problem()]),
        };
        let run = || -> Result<WriteResult<Written>, Failure> {
            let _lock = documents::lock(&self.root.path, &self.locks)?;
            let mut writer = store.writer()?;
            let report = match documents::sync(&mut writer, &self.root.path, layout::DAILY_REPORT)?
            {
                None => return Ok(WriteResult::invalid(vec![report::skeleton_problem()])),
                Some(bytes) => match parse_document(layout::DAILY_REPORT, &bytes) {
                    Ok(Value::Object(map)) => map,
                    Ok(_) => return Ok(WriteResult::invalid(vec![report::skeleton_problem()])),
                    Err(e) => {
                        return Ok(WriteResult::one(
                            "daily_report",
                            e.to_string(),
                            "repair daily-report.json or run `evidence-store build` again, then retry",
                        ));
                    }
                },
            };
            let ctx = self.context(&mut writer, false)?;
            let patched = match patch(&ctx, &report) {
                Ok(patched) => patched,
                Err(problems) => return Ok(WriteResult::invalid(problems)),
            };
            let written = documents::write(
                &mut writer,
                &self.root.path,
                layout::DAILY_REPORT,
                report::report_bytes(&Value::Object(patched)),
            )?;
            documents::commit(store, writer, written)?;
            Ok(WriteResult::Done(Written {
                status: "written",
                project_key: project_key.map(str::to_owned),
            }))
        };
        run().unwrap_or_else(|f| f.into_result(&self.root.path))
    }

    pub fn write_project_summary(
        &self,
        project_key: &str,
        summary: &Value,
    ) -> WriteResult<Written> {
        self.patch_report(Some(project_key), |ctx, r| {
            report::write_summary(ctx, r, project_key, summary)
        })
    }

    pub fn write_report_title(&self, title: &Value) -> WriteResult<Written> {
        self.patch_report(None, |ctx, r| report::write_title(ctx, r, title))
    }

    pub fn write_engagement(
        &self,
        overall: &Value,
        observations: &Value,
        limits: &Value,
    ) -> WriteResult<Written> {
        self.patch_report(None, |ctx, r| {
            report::write_engagement(ctx, r, Some(overall), Some(observations), Some(limits))
        })
    }

    pub fn write_team_learning(
        &self,
        takeaways: &Value,
        patterns: &Value,
        limits: &Value,
    ) -> WriteResult<Written> {
        self.patch_report(None, |ctx, r| {
            report::write_team_learning(ctx, r, Some(takeaways), Some(patterns), Some(limits))
        })
    }
}

fn as_projects(report: &Value) -> &[Value] {
    report
        .get("projects")
        .and_then(Value::as_array)
        .unwrap_or_default()
}

/// Why a workspace JSON document did not parse; the message names the file.
#[derive(Debug, thiserror::Error)]
enum ParseError {
    #[error("{rel} is not valid UTF-8")]
    Utf8 { rel: String },
    #[error("{rel} is not valid JSON: {message}")]
    Json { rel: String, message: &'static str },
}

/// A workspace JSON document, parsed as Python parses it.
fn parse_document(rel: &str, bytes: &[u8]) -> Result<Value, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::Utf8 {
        rel: rel.to_owned(),
    })?;
    crate::util::pyjson::parse(text).map_err(|e| ParseError::Json {
        rel: rel.to_owned(),
        message: e.message(),
    })
}

/// A store or file failure during a write, as a structured rejection (nothing committed).
fn document_problem(root: &Path, e: DocumentError) -> Problem {
    match e {
        DocumentError::Store(StoreError::NotImported) => {
            Problem::new("workspace", e.to_string(), WORKSPACE_HINT)
        }
        e if e.kind() == Kind::StoreBusy => Problem::new(
            "document_lock",
            format!("{e}{}", documents::holder_hint(root)),
            BUSY_HINT,
        ),
        DocumentError::Store(_) => Problem::new(
            "evidence_store",
            format!("the evidence store could not complete the write: {e}"),
            "retry the call; if it persists, run `evidence-store import` and retry",
        ),
        DocumentError::Busy(_) => Problem::new("document_lock", e.to_string(), BUSY_HINT),
        DocumentError::Stopped(_) => Problem::new(
            "evidence_store",
            format!("the server is stopping ({e}); nothing was changed"),
            "call the tool again once the server is back",
        ),
        DocumentError::Unreadable { .. } | DocumentError::Unwritable { .. } => Problem::new(
            "evidence_card",
            e.to_string(),
            "fix the file's permissions or remove it, then write again; nothing was changed",
        ),
    }
}

/// Every read's answer while the workspace cannot be served.
/// The read-only agent-citation tools.
impl Service {
    pub fn read_agent_citations(
        &self,
        project_key: &str,
        session_ref: &str,
        turn_ref: Option<&str>,
    ) -> query::Answer<query::SessionAnswer> {
        match self.readable() {
            Ok(store) => query::read_agent_citations(store, project_key, session_ref, turn_ref),
            Err(problem) => query::Answer::Invalid(unavailable(&problem)),
        }
    }

    pub fn search_agent_citations(
        &self,
        text: &str,
        kind: Option<&str>,
        project_key: Option<&str>,
        limit: Option<i64>,
    ) -> query::Answer<query::SearchAnswer> {
        match self.readable() {
            Ok(store) => query::search_agent_citations(store, text, kind, project_key, limit),
            Err(problem) => query::Answer::Invalid(unavailable(&problem)),
        }
    }
}

fn unavailable(problem: &Unavailable) -> ReadResult {
    ReadResult::invalid("workspace", problem.to_string(), WORKSPACE_HINT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_busy() -> StoreError {
        StoreError::Busy {
            path: "store.redb".into(),
            waited_secs: 2,
        }
    }

    #[test]
    fn a_start_is_retried_by_the_kind_of_its_failure_not_its_wording() {
        let retried = [
            StartError::Open(OpenError::Store(store_busy())),
            StartError::Import(ImportError::Store(store_busy())),
            StartError::Import(ImportError::Lock(DocumentError::Store(store_busy()))),
            StartError::Load(LoadError::io(
                "projects",
                &std::io::Error::from_raw_os_error(libc::EMFILE),
            )),
        ];
        for cause in retried {
            assert!(cause.kind().is_transient(), "{cause}");
        }
        // A message worded like a busy store or a shortage is neither.
        let kept = [
            StartError::Load(LoadError::new(
                "another write ($EVIDENCE_STORE_LOCK_TIMEOUT sets how long to wait)",
            )),
            StartError::Load(LoadError::new("Too many open files (os error 24)")),
            StartError::Import(ImportError::Store(StoreError::Inconsistent(
                "sets how long to wait".into(),
            ))),
        ];
        for cause in kept {
            assert!(!cause.kind().is_transient(), "{cause}");
        }
    }
}
