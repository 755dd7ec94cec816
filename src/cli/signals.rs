//! SIGINT, SIGTERM and SIGHUP, for every command that works on a store (`serve` and `run`
//! included). The first one asks the work to stop at its next safe point
//! ([`crate::util::stop`]): an import or rebuild rolls back, a short write finishes, a
//! server stops taking calls and lets its running ones end; either way the store is
//! closed and scratch files removed before the process exits with 128 + the signal and
//! one line saying what state the store is in ([`interrupted`]). A second signal ends the
//! process at once, as a user pressing Ctrl-C twice expects.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::args::{Command, Config};
use crate::util::stop;

/// Starts watching (the handlers are registered before this returns, so no signal after
/// it falls to the default action).
pub fn watch() -> std::io::Result<()> {
    watch_with(|_| {})
}

/// [`watch`], calling `on_first` with the first signal once it is recorded as the stop
/// request (a server wakes its own loop with it).
pub fn watch_with(on_first: impl Fn(i32) + Send + 'static) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (mut interrupt, mut terminate, mut hangup) = {
        let _inside = runtime.enter();
        (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
            signal(SignalKind::hangup())?,
        )
    };
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            runtime.block_on(async {
                loop {
                    let signal = tokio::select! {
                        _ = interrupt.recv() => libc::SIGINT,
                        _ = terminate.recv() => libc::SIGTERM,
                        _ = hangup.recv() => libc::SIGHUP,
                    };
                    if !stop::request(signal) {
                        eprintln!(
                            "evidence-store: {} again; stopping now, unfinished: run `evidence-store verify`",
                            stop::signal_name(signal)
                        );
                        std::process::exit(128 + signal);
                    }
                    tracing::info!("{}: stopping at the next safe point", stop::signal_name(signal));
                    on_first(signal);
                }
            });
        })?;
    Ok(())
}

/// Scratch files that killed runs left beside the store (a rebuild's, a `verify`'s copy):
/// removed by the next command of any kind, when the process that made them is gone
/// (a `verify` on read-only media copies the store to the temp directory).
pub(crate) fn remove_abandoned_scratch(store: &Path) {
    crate::import::rebuild::remove_abandoned_scratch(store);
    crate::store::verify::remove_stale_copies(store, &std::env::temp_dir());
}

/// The line and exit code (128 + the signal) of a command a signal stopped: what state
/// the store is in. `finished`: the command ran to its end (it was past its last safe
/// point, or has none).
pub(crate) fn interrupted(config: &Config, signal: i32, finished: bool) -> ExitCode {
    let state = match (&config.command, finished) {
        (Command::Import { rebuild: true, .. }, false) => {
            "the store is unchanged (the partial rebuild was removed)"
        }
        (Command::Import { rebuild: true, .. }, true) => {
            "the rebuild had finished: the rebuilt store is in place"
        }
        (Command::Import { .. }, false) if !config.store.exists() => {
            "nothing was imported and no store was left"
        }
        (Command::Import { .. }, true) => "the import had finished and is committed",
        (
            Command::Build
            | Command::Export
            | Command::VerifyCitations { .. }
            | Command::Run { .. },
            true,
        ) => "it had finished: the store and the files hold its result",
        (Command::Export, false) => {
            "the store is unchanged, and every file written is whole: run `evidence-store export` again"
        }
        (Command::Build, false) => "the store and daily-report.json are unchanged",
        _ => "the store is unchanged",
    };
    eprintln!(
        "evidence-store: interrupted by {}; {state}",
        stop::signal_name(signal)
    );
    ExitCode::from(u8::try_from(128 + signal).unwrap_or(1))
}

/// [`interrupted`] for `run` stopped while its command ran (its own import and export
/// not begun): what its servers wrote is in the store, what the command wrote is adopted
/// by the next import.
pub(crate) fn interrupted_command(signal: i32) -> ExitCode {
    eprintln!(
        "evidence-store: interrupted by {}; every write its servers acknowledged is kept; run \
         `evidence-store import`, then `evidence-store export`, to adopt what the command \
         wrote and write the store's documents back",
        stop::signal_name(signal)
    );
    ExitCode::from(u8::try_from(128 + signal).unwrap_or(1))
}

/// [`interrupted`] for `serve`: every write it answered is committed; `closed` says
/// whether the store was closed (else work still running held it at the bound, and the
/// next open repairs it).
pub(crate) fn interrupted_serve(signal: i32, closed: bool) -> ExitCode {
    let state = if closed {
        "every write it acknowledged is kept, and the store was closed"
    } else {
        "every write it acknowledged is kept, but a call still running kept the store open: \
         run `evidence-store verify`"
    };
    eprintln!(
        "evidence-store serve: interrupted by {}; {state}",
        stop::signal_name(signal)
    );
    ExitCode::from(u8::try_from(128 + signal).unwrap_or(1))
}
