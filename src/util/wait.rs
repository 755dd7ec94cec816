//! Bounded waits. Every wait for another process (the workspace's document lock, the
//! store's write lock) polls with short sleeps until a deadline, so a holder that is
//! stopped or stuck makes the waiter fail with a message naming it instead of hanging.

use std::time::{Duration, Instant};

/// The variable that sets how long a lock is waited for, in seconds (read by the CLI).
pub const TIMEOUT_VAR: &str = "EVIDENCE_STORE_LOCK_TIMEOUT_SECS";

/// How long a lock is waited for when [`TIMEOUT_VAR`] is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How this process waits for a lock another process holds, and what it calls itself in
/// the document lock file while it holds that lock. Built by the CLI and passed down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locks {
    /// Longest wait for a lock another process holds.
    pub timeout: Duration,
    /// The holder line's name of this process (`evidence-store <command>`).
    pub holder: String,
}

impl Default for Locks {
    fn default() -> Self {
        Locks {
            timeout: DEFAULT_TIMEOUT,
            holder: "evidence-store".to_owned(),
        }
    }
}

impl Locks {
    /// These settings with `timeout` as the wait's bound.
    pub fn waiting(&self, timeout: Duration) -> Locks {
        Locks {
            timeout,
            holder: self.holder.clone(),
        }
    }

    /// How long a lock is waited for now: the timeout, bounded further by [`within`] on
    /// this thread.
    pub fn wait(&self) -> Duration {
        bounded(self.timeout)
    }
}

/// `timeout`, or less when [`within`] bounds this thread's waits.
pub fn bounded(timeout: Duration) -> Duration {
    BOUND
        .with(|b| b.get())
        .map_or(timeout, |bound| bound.min(timeout))
}

thread_local! {
    static BOUND: std::cell::Cell<Option<Duration>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with every lock wait on this thread bounded by `bound` too (a caller that
/// must answer soon, such as a read, waits less than a write).
pub fn within<T>(bound: Duration, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Duration>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BOUND.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BOUND.with(|b| b.replace(Some(bound))));
    f()
}

/// The lock timeout [`TIMEOUT_VAR`]'s value `raw` sets (whole or fractional seconds, at
/// least 0); [`DEFAULT_TIMEOUT`] when unset, or, with a warning, when not a number.
pub fn parse_timeout(raw: Option<&str>) -> Duration {
    let Some(text) = raw else {
        return DEFAULT_TIMEOUT;
    };
    match text.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => {
            Duration::try_from_secs_f64(secs).unwrap_or(DEFAULT_TIMEOUT)
        }
        _ => {
            tracing::warn!(
                value = %text,
                "{TIMEOUT_VAR} is not a number of seconds; waiting {} s",
                DEFAULT_TIMEOUT.as_secs()
            );
            DEFAULT_TIMEOUT
        }
    }
}

/// One bounded wait: sleeps that grow from 1 ms to 10 ms (short, so that a waiter is not
/// starved by holders that take the lock again quickly), never past the deadline.
pub struct Poll {
    started: Instant,
    timeout: Duration,
    pause: Duration,
}

impl Poll {
    pub fn new(timeout: Duration) -> Poll {
        Poll {
            started: Instant::now(),
            timeout,
            pause: Duration::from_millis(1),
        }
    }

    /// How long this wait has lasted.
    pub fn waited(&self) -> Duration {
        self.started.elapsed()
    }

    /// What is left of the wait's bound (zero once it has passed).
    pub fn left(&self) -> Duration {
        self.timeout.saturating_sub(self.started.elapsed())
    }

    /// The wait's bound.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sleeps once; `false` (without sleeping) once the deadline has passed, or once a
    /// signal asked the process to stop ([`super::stop`]): nobody waits on after that.
    pub fn sleep(&mut self) -> bool {
        if super::stop::requested().is_some() {
            return false;
        }
        let Some(left) = self.timeout.checked_sub(self.started.elapsed()) else {
            return false;
        };
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(self.pause.min(left));
        self.pause = (self.pause * 2).min(Duration::from_millis(10));
        true
    }
}

/// Whole seconds as messages print them (at least 1 for a wait that lasted at all, so a
/// 0.5 s timeout does not read "waited 0 s").
pub fn secs(d: Duration) -> u64 {
    let whole = d.as_secs();
    if whole == 0 && !d.is_zero() { 1 } else { whole }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_ends_at_its_deadline() {
        let mut poll = Poll::new(Duration::from_millis(30));
        let mut sleeps = 0;
        while poll.sleep() {
            sleeps += 1;
            assert!(sleeps < 1000, "the poll never ended");
        }
        assert!(poll.waited() >= Duration::from_millis(30));
    }

    #[test]
    fn seconds_round_up_from_zero_only() {
        assert_eq!(secs(Duration::ZERO), 0);
        assert_eq!(secs(Duration::from_millis(500)), 1);
        assert_eq!(secs(Duration::from_millis(2500)), 2);
    }
}
