//! SIGINT, SIGTERM and SIGHUP for the commands that run to an end (all but `serve`, which
//! ends with its input, and `report`). The first one asks the work to stop at its next
//! safe point ([`crate::util::stop`]): an import or rebuild rolls back, a short write
//! finishes; either way the store is closed and scratch files removed before the process
//! exits with 128 + the signal and one line saying what state the store is in. A second
//! signal ends the process at once, as a user pressing Ctrl-C twice expects.

use crate::util::stop;

/// Starts watching (the handlers are registered before this returns, so no signal after
/// it falls to the default action).
pub fn watch() -> std::io::Result<()> {
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
                }
            });
        })?;
    Ok(())
}
