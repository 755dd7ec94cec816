//! `run -- COMMAND` and the `report` shim: prompt-diary's own pipeline, with its MCP
//! server (`report mcp serve`) replaced by `serve`. Part of the CLI edge, as `app.rs` is.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::cli::args::{self, Config};
use crate::cli::export::{ExportError, export_all};
use crate::cli::progress::{Bar, Status};
use crate::cli::run_dir::{self, RUN_DIR_ENV};
use crate::cli::serve::run_serve;
use crate::import::{self, ImportOptions};
use crate::store::Store;
use crate::workspace::{WorkspaceRoot, python_path_display};

/// `run -- COMMAND...`: COMMAND runs with a private directory first on PATH holding a
/// `report` link to this binary; afterwards every workspace a `report mcp serve` served
/// (and `--workspace`, when it has a store) is imported, adopting what prompt-diary's own
/// steps wrote, and exported. The exit code is the command's.
pub(crate) fn run_wrapped(config: &Config, command: &[OsString]) -> anyhow::Result<ExitCode> {
    let Some((program, args)) = command.split_first() else {
        bail!("run needs a command after `--`");
    };
    // The key's value is never written down: the servers read it from their environment.
    if let Some(var) = run_dir::missing_key(&config.tool_output) {
        bail!(
            "--model-api-key-env names {var}, which is not set (or empty): the servers the \
             command starts could not reach the model endpoint; set it, or leave out \
             --model-api-key-env for an endpoint that needs no key"
        );
    }
    let exe = std::env::current_exe().context("cannot locate this binary")?;
    let settings: Vec<(&str, String)> = args::settings_env(&config.tool_output)
        .into_iter()
        .chain(std::iter::once({
            let (name, value) = args::citations_env(config.citations);
            (name, value.to_owned())
        }))
        .collect();
    let dir = run_dir::Private::create(&exe, &settings)?;
    let original = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::iter::once(dir.path().to_owned()).chain(std::env::split_paths(&original)),
    )
    .context("PATH cannot hold run's private directory")?;

    let mut child = std::process::Command::new(program);
    child
        .args(args)
        .env("PATH", path)
        .env(RUN_DIR_ENV, dir.path())
        .envs(settings);
    let status = match wait_forwarding_signals(child) {
        Ok(status) => status,
        Err(Waited::NotStarted(e)) => {
            // As a shell does: 127 for a command that does not exist, 126 for one that
            // cannot be executed; nothing ran, so there is nothing to import or export.
            eprintln!("evidence-store: {}", not_started(program, &e));
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return Ok(ExitCode::from(code));
        }
        Err(Waited::Failed(e)) => {
            return Err(e).with_context(|| format!("cannot run {}", program.to_string_lossy()));
        }
    };
    let code = exit_code(status);
    // Stopped while the command ran: nothing more is done (the import and export that
    // would follow are what `run` was asked not to finish).
    if let Some(signal) = crate::util::stop::requested() {
        return Ok(crate::cli::signals::interrupted_command(signal));
    }

    let mut targets: Vec<(WorkspaceRoot, PathBuf)> = dir
        .servers_told()
        .into_iter()
        .map(|path| {
            let store = args::default_store(&path);
            let root = WorkspaceRoot {
                display: python_path_display(&path),
                path,
            };
            (root, store)
        })
        .collect();
    if !targets.iter().any(|(_, store)| *store == config.store) {
        targets.push((config.workspace.clone(), config.store.clone()));
    }
    let mut failed = false;
    for (root, store) in targets.iter().filter(|(_, store)| store.exists()) {
        if crate::util::stop::requested().is_some() {
            break;
        }
        crate::cli::signals::remove_abandoned_scratch(store);
        if let Err(e) = import_and_export(root, store, config.citations, &config.locks) {
            if crate::util::stop::requested().is_none() {
                eprintln!("evidence-store: {}", crate::cli::chain_text(&e));
            }
            failed = true;
        }
    }
    if let Some(signal) = crate::util::stop::requested() {
        return Ok(crate::cli::signals::interrupted(config, signal, !failed));
    }
    Ok(match code {
        0 if failed => ExitCode::FAILURE,
        code => ExitCode::from(code),
    })
}

/// Brings the store in line with the workspace (the files prompt-diary's own steps wrote,
/// such as its Build's `daily-report.json`, are adopted), then writes every stored
/// document back, so files and store agree when `run` returns.
fn import_and_export(
    root: &WorkspaceRoot,
    store_path: &Path,
    citations: crate::citations::Options,
    locks: &crate::util::wait::Locks,
) -> anyhow::Result<()> {
    let shown = root.path.display();
    let status = Status::new(format!("importing {shown}"));
    crate::store::check_own_store(&root.path, store_path)?;
    let store = Store::open(store_path, locks.timeout)?;
    let options = ImportOptions {
        rehash: false,
        citations,
    };
    import::import(root, &store, options, &Bar::new("import"), locks).with_context(|| {
        format!("after the command: import of {shown} failed; nothing exported")
    })?;
    status.set(format!("exporting {shown}"));
    let (report, receipts) = export_all(&store, &root.path, locks).map_err(|e| {
        let what = match e {
            ExportError::Documents(_) => "export",
            ExportError::Receipts(_) => "receipt export",
        };
        e.into_cause()
            .context(format!("after the command: {what} of {shown} failed"))
    })?;
    for reason in &receipts.skipped {
        tracing::warn!("no receipt for {reason}");
    }
    status.finish(format!(
        "evidence-store: exported {shown}: {} file(s) written, {} already current",
        report.written, report.unchanged
    ));
    Ok(())
}

/// Why `run` has no exit status of the command.
enum Waited {
    /// The command could not be started (it does not exist, or is not executable).
    NotStarted(std::io::Error),
    /// `run` could not set up its own waiting.
    Failed(std::io::Error),
}

/// The message for a command that could not be started, with what to do about it.
fn not_started(program: &OsStr, e: &std::io::Error) -> String {
    let shown = program.to_string_lossy();
    let found_on_path = !shown.contains('/');
    match e.kind() {
        std::io::ErrorKind::NotFound if shown == "prompt-diary" => {
            format!(
                "cannot run prompt-diary: `prompt-diary` was not found on PATH; install a release \
                 evidence-store serves into a venv (`python3 -m venv VENV && VENV/bin/pip install \
                 prompt-diary=={}`) and activate it (`source VENV/bin/activate`), so that \
                 `prompt-diary` and `report` are on PATH",
                crate::workspace::contract::Contract::NEWEST.release()
            )
        }
        std::io::ErrorKind::NotFound if found_on_path => {
            format!("cannot run {shown}: `{shown}` was not found on PATH")
        }
        std::io::ErrorKind::NotFound => format!("cannot run {shown}: no such file"),
        _ => format!("cannot run {shown}: {e}"),
    }
}

/// How long `run` waits for its command to end once it passed a signal on to it; then
/// the command is killed.
const CHILD_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits for the child. SIGINT, SIGTERM and SIGHUP sent to `run` are its stop request
/// ([`crate::util::stop`]) and are passed on to the command, which gets [`CHILD_GRACE`]
/// to end before it is killed; a second signal kills it at once. A SIGINT the terminal
/// sent (to the whole foreground process group, the command included) is not sent again.
/// Once the command has ended, signals are watched as every command's are.
fn wait_forwarding_signals(
    command: std::process::Command,
) -> Result<std::process::ExitStatus, Waited> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::signal::unix::{SignalKind, signal};
    // Registered before tokio's own handler, so it has run when tokio reports the signal.
    let from_terminal = std::sync::Arc::new(AtomicBool::new(false));
    let seen = from_terminal.clone();
    // SAFETY: the action only stores to an atomic, which is async-signal-safe.
    let origin = unsafe {
        signal_hook_registry::register_sigaction(libc::SIGINT, move |info| {
            seen.store(info.si_code == libc::SI_KERNEL, Ordering::SeqCst);
        })
    };
    if let Err(e) = &origin {
        tracing::debug!(error = %e, "a terminal's SIGINT will be passed on to the command too");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Waited::Failed)?;
    let waited = runtime.block_on(async {
        let mut interrupt = signal(SignalKind::interrupt()).map_err(Waited::Failed)?;
        let mut terminate = signal(SignalKind::terminate()).map_err(Waited::Failed)?;
        let mut hangup = signal(SignalKind::hangup()).map_err(Waited::Failed)?;
        let mut child = tokio::process::Command::from(command)
            .spawn()
            .map_err(Waited::NotStarted)?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw);
        let send = |sig| {
            if let Some(pid) = pid {
                let _ = rustix::process::kill_process(pid, sig);
            }
        };
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            let signal = tokio::select! {
                status = child.wait() => break status.map_err(Waited::Failed),
                () = async { tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)).await },
                    if deadline.is_some() =>
                {
                    tracing::warn!("the command did not end within {} s of the signal; killing it", CHILD_GRACE.as_secs());
                    send(rustix::process::Signal::KILL);
                    deadline = None;
                    continue;
                }
                _ = interrupt.recv() => libc::SIGINT,
                _ = terminate.recv() => libc::SIGTERM,
                _ = hangup.recv() => libc::SIGHUP,
            };
            if !crate::util::stop::request(signal) {
                eprintln!(
                    "evidence-store: {} again; killing the command",
                    crate::util::stop::signal_name(signal)
                );
                send(rustix::process::Signal::KILL);
                continue;
            }
            let terminal = signal == libc::SIGINT && from_terminal.load(Ordering::SeqCst);
            if !terminal {
                send(match signal {
                    libc::SIGINT => rustix::process::Signal::INT,
                    libc::SIGHUP => rustix::process::Signal::HUP,
                    _ => rustix::process::Signal::TERM,
                });
            }
            deadline = Some(tokio::time::Instant::now() + CHILD_GRACE);
        }
    });
    // From here on `run` does its own writing: a signal stops it at a safe point. Watched
    // before this wait's own handlers go, so that no signal falls between the two.
    if let Err(e) = crate::cli::signals::watch() {
        tracing::warn!(%e, "signals will stop this command without cleaning up");
    }
    drop(runtime);
    if let Ok(id) = origin {
        signal_hook_registry::unregister(id);
    }
    waited
}

/// The command's exit code; a command killed by a signal gets 128 + its number, as in a
/// shell.
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(1),
        (None, None) => 1,
    }
}

/// This binary invoked as `report`: `report mcp serve` is `serve` on
/// `$PROMPT_DIARY_WORKSPACE`; anything else runs the real `report` found later on PATH,
/// with the same arguments and environment.
pub(crate) fn run_report(
    config: Config,
    argv0: &OsStr,
    args: &[OsString],
) -> anyhow::Result<ExitCode> {
    if args == ["mcp", "serve"] {
        return run_serve(run_dir::server_config(config)?);
    }
    let Some(real) = real_report() else {
        eprintln!(
            "evidence-store: `report` is evidence-store here, and there is no other `report` on PATH \
             to run `report {}` (is prompt-diary installed in this environment?)",
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        );
        return Ok(ExitCode::from(127));
    };
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(&real)
        .arg0(argv0)
        .args(args)
        .exec();
    bail!("cannot run {}: {err}", real.display())
}

/// The first `report` on PATH that is not this binary, nor any other evidence-store
/// binary (two of them handing the call to each other would never end).
fn real_report() -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let me = std::env::current_exe().and_then(std::fs::canonicalize).ok();
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(args::REPORT_NAME))
        .find(|candidate| {
            let executable = std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
            let target = std::fs::canonicalize(candidate).ok();
            let ours = target.as_ref().is_some_and(|t| {
                Some(t) == me.as_ref() || t.file_name().is_some_and(|n| n == "evidence-store")
            });
            executable && !ours
        })
}
