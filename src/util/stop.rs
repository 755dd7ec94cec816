//! A stop asked for by a signal (SIGINT, SIGTERM or SIGHUP). The CLI watches for them and
//! records the first here; work that writes checks at its safe points and returns
//! [`Stopped`], so that an open write transaction is dropped without a commit, the store
//! is closed (redb marks it closed cleanly), and scratch files are removed on the way
//! out. Waits for locks end early too. The process then exits with 128 + the signal.

use std::sync::atomic::{AtomicI32, Ordering};

/// The first signal received (0: none). Process-wide, as signals are.
static REQUESTED: AtomicI32 = AtomicI32::new(0);

/// Records that `signal` asked the process to stop; `false` when one had already asked.
pub fn request(signal: i32) -> bool {
    REQUESTED
        .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
}

/// The signal that asked for a stop, if one did.
pub fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::Relaxed) {
        0 => None,
        signal => Some(signal),
    }
}

/// A safe point: `Err` once a stop was asked for.
pub fn check() -> Result<(), Stopped> {
    match requested() {
        None => Ok(()),
        Some(signal) => Err(Stopped { signal }),
    }
}

/// The work stopped at a safe point because a signal asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by {}", signal_name(self.signal))]
pub struct Stopped {
    pub signal: i32,
}

/// `SIGINT`, `SIGTERM`, `SIGHUP`, or `signal N`.
pub fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT".to_owned(),
        libc::SIGTERM => "SIGTERM".to_owned(),
        libc::SIGHUP => "SIGHUP".to_owned(),
        other => format!("signal {other}"),
    }
}
