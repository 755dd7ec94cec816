//! One call's stop flag (a process-wide stop asked by a signal is `util::stop`). Whoever ends the call first sets it: its deadline (by time
//! passing), its cancel, the end of input. CPU work asks [`Stop::is_set`] between lines and
//! between pieces of a long line; the async side waits for it with [`Stop::wait`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Why a call was stopped. Code decides by the variant; the words are for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Cancelled,
    EndOfInput,
    DeadlineReached,
    /// The process was asked to stop (a signal).
    Interrupted,
}

impl StopReason {
    /// The reason in words, as answers and logs give it.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Cancelled => "cancelled",
            StopReason::EndOfInput => "end of input",
            StopReason::DeadlineReached => "deadline reached",
            StopReason::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stop flag shared by one call's async side and its work on the blocking pool.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    set: AtomicBool,
    /// Why it was set first.
    reason: OnceLock<StopReason>,
    notify: Notify,
    /// Past this instant the flag reads as set.
    deadline: Option<Instant>,
}

impl Stop {
    /// A flag that only [`Stop::set`] sets.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// A flag that also reads as set once `within` has passed (never, when `within` is
    /// too long to be an instant).
    pub fn within(within: Duration) -> Stop {
        Stop(Arc::new(Inner {
            deadline: Instant::now().checked_add(within),
            ..Inner::default()
        }))
    }

    /// Sets the flag; the first reason given is kept.
    pub fn set(&self, reason: StopReason) {
        let _ = self.0.reason.set(reason);
        if !self.0.set.swap(true, Ordering::SeqCst) {
            self.0.notify.notify_waiters();
        }
    }

    /// Whether the work should stop: the flag is set or the deadline has passed.
    pub fn is_set(&self) -> bool {
        self.0.set.load(Ordering::Relaxed) || self.left() == Some(Duration::ZERO)
    }

    /// Why the flag was set: the first [`Stop::set`]'s reason, else the deadline once it
    /// has passed.
    pub fn reason(&self) -> Option<StopReason> {
        match self.0.reason.get() {
            Some(r) => Some(*r),
            None if self.left() == Some(Duration::ZERO) => Some(StopReason::DeadlineReached),
            None => None,
        }
    }

    /// Time left until the deadline, if there is one.
    pub fn left(&self) -> Option<Duration> {
        self.0
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Resolves once [`Stop::set`] was called (the deadline alone does not wake it).
    pub async fn wait(&self) {
        let notified = self.0.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.0.set.load(Ordering::SeqCst) {
            return;
        }
        notified.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reason_is_kept_and_waiters_wake() {
        let stop = Stop::new();
        assert!(!stop.is_set());
        assert_eq!(stop.reason(), None);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let waiter = stop.clone();
        rt.block_on(async {
            let waited = tokio::spawn(async move { waiter.wait().await });
            tokio::task::yield_now().await;
            stop.set(StopReason::Cancelled);
            stop.set(StopReason::EndOfInput);
            waited.await.expect("woken");
        });
        assert!(stop.is_set());
        assert_eq!(stop.reason(), Some(StopReason::Cancelled));
        // Already set: a new wait ends at once.
        rt.block_on(stop.wait());
    }

    #[test]
    fn a_passed_deadline_reads_as_set() {
        let stop = Stop::within(Duration::ZERO);
        assert!(stop.is_set());
        assert_eq!(stop.reason(), Some(StopReason::DeadlineReached));
        assert_eq!(StopReason::DeadlineReached.to_string(), "deadline reached");
        let stop = Stop::within(Duration::from_secs(u64::MAX));
        assert!(!stop.is_set());
        assert_eq!(stop.left(), None);
    }
}
