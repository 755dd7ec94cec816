//! Runs one command. The CLI edge: errors here are `anyhow`, printed once by `main`.

use std::process::ExitCode;

use anyhow::{Context, bail};
use tracing_subscriber::EnvFilter;

use crate::cli::args::{Command, Config};
use crate::cli::dump;
use crate::cli::export::{ExportError, export_all};
use crate::cli::progress::{Bar, Status};
use crate::cli::serve::run_serve;
use crate::cli::signals;
use crate::import::{self, ImportOptions, ImportReport};
use crate::service::Service;
use crate::store::{OpenError, Store, verify};
use crate::util::kind::Kind;
use crate::util::wait::{Locks, TIMEOUT_VAR};
use crate::workspace::WorkspaceRoot;

pub fn run(mut config: Config) -> anyhow::Result<ExitCode> {
    init_tracing();
    // Read once logging is on, so that a value that is not a number is warned of, and only
    // by commands that may wait for a lock.
    let waits = match &config.command {
        Command::Help { .. } => false,
        Command::Report { args, .. } => *args == ["mcp", "serve"],
        _ => true,
    };
    config.locks = Locks {
        timeout: if waits {
            lock_timeout_from_env()
        } else {
            crate::util::wait::DEFAULT_TIMEOUT
        },
        holder: format!("evidence-store {}", command_name(&config.command)),
    };
    check_store_inside(&config)?;
    let (watched, names_a_store) = match &config.command {
        Command::Help { .. } | Command::Report { .. } => (false, false),
        // `serve` ends with its input; `run` watches once its command has ended.
        Command::Serve | Command::Run { .. } => (false, true),
        _ => (true, true),
    };
    if names_a_store {
        signals::remove_abandoned_scratch(&config.store);
        // `export` removes them itself, under the document lock, and counts them.
        if !matches!(config.command, Command::Export) {
            crate::documents::remove_abandoned_temp_files(&config.workspace.path);
        }
        crate::view::remove_abandoned_default_temp_files(&config.workspace.path);
    }
    if watched && let Err(e) = signals::watch() {
        tracing::warn!(%e, "signals will stop this command without cleaning up");
    }
    let result = run_command(&config);
    // (`run` says it itself.)
    if watched && let Some(signal) = crate::util::stop::requested() {
        return Ok(signals::interrupted(&config, signal, result.is_ok()));
    }
    result.map_err(|e| {
        // A lock on the store held past the wait's bound: name who holds it, when the
        // document lock's holder (which a writer takes first) says.
        let busy = e.chain().any(|c| kind(c) == Kind::StoreBusy);
        let e = match busy
            .then(|| crate::documents::holder(&config.workspace.path))
            .flatten()
        {
            Some(holder) => e.context(format!("the workspace's document lock is held by {holder}")),
            None => e,
        };
        // A document lock that is not a file of this user's own refuses every writer:
        // say how to fix it (the tool answers say it too).
        match lock_fix(&config.workspace.path) {
            Some(fix) => anyhow::anyhow!("{}; {fix}", crate::cli::chain_text(&e)),
            None => e,
        }
    })
}

/// What to do about a document lock that is not a regular file of one link owned by
/// this user (which every writer refuses, never writing through it); `None` when it is
/// one, or there is none.
fn lock_fix(root: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let path = root.join(crate::documents::LOCK_FILE);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    let shown = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
    let shown = shown.display();
    let me = rustix::process::geteuid().as_raw();
    let again = "evidence-store makes it again";
    if meta.file_type().is_dir() {
        Some(format!(
            "to fix it, remove that directory (`rmdir {shown}`); {again}"
        ))
    } else if !meta.file_type().is_file() {
        Some(format!(
            "to fix it, remove what is at that name (`rm {shown}`); {again}"
        ))
    } else if meta.nlink() != 1 {
        Some(format!(
            "to fix it, remove that name (`rm {shown}`): the file it is linked to keeps its \
             content; {again}"
        ))
    } else if meta.uid() != me {
        Some(format!(
            "to fix it, run evidence-store as the user who owns the workspace (uid {}), or, if \
             no evidence-store of that user is working in it, remove the lock file \
             (`rm {shown}`); {again}",
            meta.uid()
        ))
    } else {
        None
    }
}

/// The kind of one error of a command's chain, from the core error types that carry one
/// (a wrapped error forwards its kind through them, not through its source).
fn kind(e: &(dyn std::error::Error + 'static)) -> Kind {
    if let Some(e) = e.downcast_ref::<crate::store::StoreError>() {
        e.kind()
    } else if let Some(e) = e.downcast_ref::<OpenError>() {
        e.kind()
    } else if let Some(e) = e.downcast_ref::<import::ImportError>() {
        e.kind()
    } else {
        Kind::Lasting
    }
}

/// Why `verify` cannot hold this workspace's writers off (the store is then not judged).
#[derive(Debug, thiserror::Error)]
enum WritersNotHeld {
    #[error(transparent)]
    Busy(crate::documents::LockBusy),
    /// What is at the document lock's name is not a lock file of its own; `reason` is
    /// the message's own last part.
    #[error("{rel} cannot be used: {reason}; {fix}")]
    NotOwnLock {
        rel: String,
        reason: std::io::Error,
        fix: String,
    },
}

fn run_command(config: &Config) -> anyhow::Result<ExitCode> {
    let config = config.clone();
    workspace_must_exist(&config)?;
    match &config.command {
        Command::Import { rehash, rebuild } => run_import(&config, *rehash, *rebuild),
        Command::Verify => {
            store_must_exist(&config)?;
            // A spinner on a terminal (nothing otherwise): a large store takes seconds.
            let status = Status::new(format!("verifying {}", config.store.display()));
            // Writers of this workspace commit under its document lock (which the first
            // of them creates); none can be halfway through a commit while the store is
            // copied. No lock file, or read-only media: no writer either. A lock held past
            // the wait's bound leaves the store unchecked.
            let root = &config.workspace.path;
            let hold_writers = || {
                // Anything at the name is taken as the lock, so that what is not a lock
                // file of its own is refused rather than passed by.
                if std::fs::symlink_metadata(root.join(crate::documents::LOCK_FILE)).is_err() {
                    return Ok(None);
                }
                match crate::documents::lock(root, &config.locks) {
                    Ok(lock) => Ok(Some(lock)),
                    Err(crate::documents::DocumentError::Busy(e)) => Err(WritersNotHeld::Busy(e)),
                    // Not the lock file of its own (a hard link, a FIFO): never written.
                    Err(crate::documents::DocumentError::Unwritable { rel, source })
                        if crate::util::fsutil::not_own_file(&source).is_some() =>
                    {
                        Err(WritersNotHeld::NotOwnLock {
                            rel,
                            reason: source,
                            fix: lock_fix(root).unwrap_or_else(|| "remove it".to_owned()),
                        })
                    }
                    Err(_) => Ok(None),
                }
            };
            let verified = verify::verify(
                &config.store,
                &std::env::temp_dir(),
                config.locks.timeout,
                hold_writers,
            );
            status.clear();
            print!(
                "{}",
                verify_text(&config.store.display().to_string(), &verified)
            );
            Ok(if !verified.problems.is_empty() {
                ExitCode::FAILURE
            } else if verified.cannot_check.is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Dump { json, target } => {
            store_must_exist(&config)?;
            // Read-only: a dump works on read-only media and never changes the file, except
            // that a store a killed writer left is repaired first when the file is writable
            // (as any writer would), so a dump after a crash still answers.
            let store = match Store::open_read_only(&config.store, config.locks.timeout) {
                Err(OpenError::NeedsRepair { .. }) => {
                    tracing::info!("the store needs repair; opening it for writing");
                    Store::open(&config.store, config.locks.timeout)?
                }
                other => other?,
            };
            let value = dump::dump(&store, &config.workspace.path, target)?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                print!("{}", dump::to_text(target, &value));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::View { out } => run_view(&config, out),
        Command::Serve => run_serve(config),
        Command::Run { command } => crate::cli::run::run_wrapped(&config, command),
        Command::Report { argv0, args } => crate::cli::run::run_report(config.clone(), argv0, args),
        Command::Help { text } => {
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Build => {
            store_must_exist(&config)?;
            let service = Service::new(crate::service::Config {
                import: ImportOptions {
                    rehash: false,
                    citations: config.citations,
                },
                locks: config.locks.clone(),
                ..crate::service::Config::new(config.workspace.clone(), &config.store)
            });
            let built = service.build().map_err(|e| {
                anyhow::anyhow!("build failed; daily-report.json is unchanged: {e}")
            })?;
            let kept = if built.preserved.is_empty() {
                "none".to_owned()
            } else {
                built.preserved.join(", ")
            };
            println!(
                "built daily-report.json: {} project(s), {} work item(s); kept from the previous report: {kept}",
                built.projects, built.work_items
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::VerifyCitations {
            project_key,
            session_ref,
        } => run_verify_citations(&config, project_key.as_deref(), session_ref.as_deref()),
        Command::Export => {
            store_must_exist(&config)?;
            let store = Store::open(&config.store, config.locks.timeout)?;
            import::check_same_workspace(&store.reader()?, &config.workspace, &config.store)?;
            let shown = std::path::absolute(&config.workspace.path)
                .unwrap_or_else(|_| config.workspace.path.clone());
            let failed = || format!("export to {} failed", shown.display());
            let (report, receipts) = export_all(&store, &config.workspace.path, &config.locks)
                .map_err(ExportError::into_cause)
                .with_context(failed)?;
            println!(
                "exported {} file(s) ({} already current), removed {} stale temp file(s)",
                report.written, report.unchanged, report.temp_files_removed
            );
            print_receipts(&receipts);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `view`: the pages of one read snapshot, written at `out` atomically; prints the first
/// page's URL. Read-only on the store, as `dump` is, so it runs beside `serve` processes
/// writing. `--out` is checked before the store is opened ([`crate::view::target`]), and
/// temp files of killed views in its directory are removed first. A signal stops it at
/// its next chain, leaving the old pages in place.
fn run_view(config: &Config, out: &std::path::Path) -> anyhow::Result<ExitCode> {
    store_must_exist(config)?;
    let target = crate::view::target(&config.workspace.path, &config.store, out)?;
    crate::view::remove_abandoned_temp_files(&target.dir, &target.name);
    let store = match Store::open_read_only(&config.store, config.locks.timeout) {
        Err(OpenError::NeedsRepair { .. }) => Store::open(&config.store, config.locks.timeout)?,
        other => other?,
    };
    let path = target.path();
    let written = match crate::view::write_pages(
        &store,
        &config.workspace.path,
        &target,
        std::time::SystemTime::now(),
    ) {
        Err(crate::view::ViewError::Stopped(stopped)) => {
            eprintln!(
                "view: stopped before {} was replaced; the page there is the one written before",
                path.display()
            );
            return Err(stopped.into());
        }
        other => other.with_context(|| format!("view: {} was not written", path.display()))?,
    };
    eprintln!(
        "view: {} project(s), {} session(s), {} turn(s), {} chain(s), {} line(s) shown, {} agent citation(s); {} page(s), {} bytes (first page {} bytes)",
        written.projects,
        written.sessions,
        written.turns,
        written.chains,
        written.lines_shown,
        written.citations,
        written.pages,
        written.bytes,
        written.first_page,
    );
    println!("file://{}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// A directory that does not exist is named as such, with what named it and what to do.
pub(crate) fn missing_workspace(config: &Config) -> String {
    let shown = std::path::absolute(&config.workspace.path).map_or_else(
        |_| config.workspace.display.clone(),
        |p| p.display().to_string(),
    );
    format!(
        "the workspace directory {shown} (from {}) does not exist: give --workspace (or \
         PROMPT_DIARY_WORKSPACE) a workspace `prompt-diary prepare` made \
         (<reports root>/work/<date>; `prompt-diary list` lists them)",
        config.workspace_from.shown()
    )
}

/// The commands that work in the workspace (import, rebuild, build, export,
/// verify-citations) refuse a workspace directory that does not exist, before anything
/// is made; the read-only ones need only the store ([`store_must_exist`]), and `serve`
/// starts anyway, saying so on stderr.
fn workspace_must_exist(config: &Config) -> anyhow::Result<()> {
    let works_in_it = matches!(
        config.command,
        Command::Import { .. } | Command::Build | Command::Export | Command::VerifyCitations { .. }
    );
    if works_in_it && !config.workspace.path.is_dir() {
        bail!("{}", missing_workspace(config));
    }
    Ok(())
}

/// The commands that read a store refuse to make one: without it, they say to import,
/// or, when the workspace directory itself does not exist, that it does not.
fn store_must_exist(config: &Config) -> anyhow::Result<()> {
    let workspace = &config.workspace.path;
    if !config.store.exists() && !workspace.exists() {
        bail!("{}", missing_workspace(config));
    }
    if !config.store.exists() {
        bail!(
            "no store at {}: run `evidence-store import` first",
            config.store.display()
        );
    }
    Ok(())
}

/// What the receipt export did: one line (none when the workspace has no receipts and
/// none were touched), then each skipped session or turn on stderr.
pub(crate) fn print_receipts(r: &crate::citations::receipt_files::ReceiptsReport) {
    if *r == crate::citations::receipt_files::ReceiptsReport::default() {
        return;
    }
    println!(
        "receipts: {} written ({} already current), {} stale removed, {} skipped",
        r.written,
        r.unchanged,
        r.removed,
        r.skipped.len()
    );
    for reason in &r.skipped {
        eprintln!("evidence-store: no receipt for {reason}");
    }
}

/// The workspace's own store must really be inside it ([`crate::store::check_own_store`]);
/// `serve` and `run` check it themselves, `serve` answering every call with the refusal.
fn check_store_inside(config: &Config) -> anyhow::Result<()> {
    let checked_here = match &config.command {
        Command::Help { .. } | Command::Serve | Command::Run { .. } => false,
        // Every other `report` call is prompt-diary's own; `report mcp serve` is `serve`.
        Command::Report { .. } => false,
        _ => true,
    };
    if checked_here {
        crate::store::check_own_store(&config.workspace.path, &config.store)?;
    }
    Ok(())
}

/// How long a lock is waited for: [`TIMEOUT_VAR`] (whole or fractional seconds, at
/// least 0), else [`crate::util::wait::DEFAULT_TIMEOUT`]; a value that is not a number is
/// ignored with a warning.
fn lock_timeout_from_env() -> std::time::Duration {
    let raw = std::env::var_os(TIMEOUT_VAR).map(|v| v.to_string_lossy().into_owned());
    crate::util::wait::parse_timeout(raw.as_deref())
}

/// Logs go to stderr (stdout belongs to MCP in `serve`), filtered by `RUST_LOG`.
fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// The command as its user typed it, for the document lock's holder line.
fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Import { rebuild: true, .. } => "import --rebuild",
        Command::Import { .. } => "import",
        Command::Verify => "verify",
        Command::Dump { .. } => "dump",
        Command::Serve => "serve",
        Command::Export => "export",
        Command::Build => "build",
        Command::View { .. } => "view",
        Command::Run { .. } => "run",
        Command::Report { .. } => "report",
        Command::Help { .. } => "help",
        Command::VerifyCitations { .. } => "verify-citations",
    }
}

/// `verify`'s report: what was checked, then one line per problem.
fn verify_text(shown: &str, v: &verify::Verified) -> String {
    let mut out = format!(
        "checked {shown}: {} project(s), {} session(s), {} line block(s) ({} lines), {} document(s)\n",
        v.projects, v.sessions, v.line_blocks, v.lines, v.documents
    );
    if v.problems.is_empty() {
        match &v.cannot_check {
            Some(why) => out.push_str(&format!(
                "cannot check: {why}; the store was not judged (run `verify` again once that is fixed)\n"
            )),
            None => out.push_str("no problems found\n"),
        }
    } else {
        if let Some(why) = &v.cannot_check {
            out.push_str(&format!("cannot check: {why}\n"));
        }
        out.push_str(&format!("{} problem(s):\n", v.problems.len()));
        for problem in &v.problems {
            out.push_str(&format!("- {problem}\n"));
        }
        if v.problems.len() > usize::from(v.unclean) {
            out.push_str("repair: stop every `evidence-store serve`, then run `evidence-store import --rebuild`\n");
        }
    }
    out
}

fn run_import(config: &Config, rehash: bool, rebuild: bool) -> anyhow::Result<ExitCode> {
    if rebuild {
        let report = crate::import::rebuild::rebuild(
            &config.workspace,
            &config.store,
            config.citations,
            &Bar::new("rebuild"),
            &config.locks,
            &crate::util::disk::Disk::real(),
        )
        .map_err(|e| {
            let failed = format!(
                "rebuild of {} failed; the store is unchanged",
                config.store.display()
            );
            if config.workspace.path.join("metadata.json").exists() {
                anyhow::Error::new(e).context(failed)
            } else {
                anyhow::anyhow!("{failed}: {e}; {NOT_A_WORKSPACE}")
            }
        })?;
        println!("rebuilt {}: {}", config.store.display(), summary(&report));
        return Ok(ExitCode::SUCCESS);
    }
    // A workspace that does not load gets no store: nothing is created for a wrong path.
    let workspace = match crate::workspace::load(&config.workspace) {
        Ok(workspace) => workspace,
        Err(e) => {
            let failed = import_failed(&config.workspace);
            if config.workspace.path.join("metadata.json").exists() {
                return Err(e).context(failed);
            }
            bail!("{failed}: {e}; {NOT_A_WORKSPACE}");
        }
    };
    let fresh = std::fs::symlink_metadata(&config.store).is_err();
    let store = Store::open(&config.store, config.locks.timeout)?;
    let imported = import::import_loaded(
        &config.workspace,
        &workspace,
        &store,
        ImportOptions {
            rehash,
            citations: config.citations,
        },
        &Bar::new("import"),
        &config.locks,
    );
    if imported.is_err() && fresh {
        // A first import that failed or was stopped leaves no store behind (closed first).
        drop(store);
        crate::store::remove_if_unused(&config.store, config.locks.timeout);
    }
    let report = imported.with_context(|| import_failed(&config.workspace))?;
    println!("{}", summary(&report));
    Ok(ExitCode::SUCCESS)
}

fn run_verify_citations(
    config: &Config,
    project_key: Option<&str>,
    session_ref: Option<&str>,
) -> anyhow::Result<ExitCode> {
    store_must_exist(config)?;
    let store = Store::open(&config.store, config.locks.timeout)?;
    import::check_same_workspace(&store.reader()?, &config.workspace, &config.store)?;
    let done = crate::citations::stored::verify_citations(
        &config.workspace.path,
        &store,
        &config.locks,
        project_key,
        session_ref,
    )?;
    let by_status: Vec<String> = done
        .by_status
        .iter()
        .map(|(status, n)| format!("{status} {n}"))
        .collect();
    let by_status = if by_status.is_empty() {
        String::new()
    } else {
        format!(" ({})", by_status.join(", "))
    };
    println!(
        "checked {} citation(s) in {} session(s){by_status}: {} changed{}",
        done.citations,
        done.sessions,
        done.changed,
        if done.written {
            ", new results stored"
        } else {
            ", nothing written"
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// What to do when the workspace has no `metadata.json`: the wrong directory, or none
/// prepared yet.
const NOT_A_WORKSPACE: &str = "this is not a prepared workspace; name one with `--workspace DIR` or \
     `PROMPT_DIARY_WORKSPACE=DIR`, or make one with `prompt-diary prepare`";

fn import_failed(root: &WorkspaceRoot) -> String {
    format!(
        "import of {} failed; the store is unchanged",
        root.path.display()
    )
}

fn summary(r: &ImportReport) -> String {
    let committed = if r.committed {
        ""
    } else {
        "; the store already matched, nothing written"
    };
    format!(
        "imported {} project(s), {} session(s): {} file(s) indexed ({:.1} MiB, {} lines), {} unchanged, {} missing; {} document(s){committed}",
        r.projects,
        r.sessions,
        r.files_indexed,
        r.bytes_indexed as f64 / (1 << 20) as f64,
        r.lines_indexed,
        r.files_unchanged,
        r.files_missing,
        r.documents
    )
}
