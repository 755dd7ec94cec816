//! Work shared by the calling thread and one helper, claimed one piece at a time.
//!
//! A thread woken on an idle core starts late: on the project's 2-core VM about 1.2 ms
//! after it is spawned or signalled, when a server has been waiting for its next call
//! (BENCHMARKS.md, "the compact read, fourth session"). Splitting work in two fixed halves
//! makes the whole call wait for that late start. Here the caller starts on the first
//! piece at once and the helper claims pieces from the same counter whenever it runs, so
//! its lateness costs at most half of itself. (rayon's pool is no fit: a thread outside
//! the pool that calls it waits for a pool thread instead of working.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// Runs `work(state, i)` for every `i` in `0..n` and returns the results in order of `i`.
/// Each thread makes its own `state` (a reusable buffer, say) once. With fewer than two
/// pieces everything runs on the calling thread.
pub fn map_claimed<S, T: Send>(
    n: usize,
    state: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, usize) -> T + Sync,
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let run = || {
        let mut state = state();
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return done;
            }
            done.push((i, work(&mut state, i)));
        }
    };
    let (mine, theirs) = if n < 2 {
        (run(), None)
    } else {
        std::thread::scope(|scope| {
            // Without a helper (the system refused a thread) the caller does everything.
            let helper = std::thread::Builder::new()
                .name("evidence-store-helper".into())
                .spawn_scoped(scope, run)
                .ok();
            let mine = run();
            (mine, helper.and_then(|h| h.join().ok()))
        })
    };
    let mut slots: Vec<Option<T>> = std::iter::repeat_with(|| None).take(n).collect();
    for (i, value) in mine.into_iter().chain(theirs.into_iter().flatten()) {
        slots[i] = Some(value);
    }
    // Pieces a panicking helper had claimed are done again here.
    let mut redo = None;
    slots
        .into_iter()
        .enumerate()
        .map(|(i, slot)| match slot {
            Some(value) => value,
            None => work(redo.get_or_insert_with(&state), i),
        })
        .collect()
}

/// Runs `work(state, i)` for every `i` in `0..n` on the calling thread and one helper,
/// and hands the results to `emit` on the calling thread in order of `i`, each as soon as
/// it and every one before it are done, so that the caller can pass results on while the
/// rest are made. No piece is started more than `window` places ahead of the next one to
/// emit, so at most about `window` results wait at a time, however slowly `emit` takes
/// them. When `emit` returns false nothing more is emitted or started, and this returns
/// false. A piece a panicking helper had claimed is done again on the calling thread.
pub fn for_each_ordered<S, T: Send>(
    n: usize,
    window: usize,
    state: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, usize) -> T + Sync,
    mut emit: impl FnMut(T) -> bool,
) -> bool {
    let window = window.max(1);
    let shared = Mutex::new(Ordered {
        next: 0,
        emitted: 0,
        slots: std::iter::repeat_with(|| None).take(n).collect(),
        stopped: false,
        helper_gone: n < 2,
    });
    let changed = std::sync::Condvar::new();
    let lock = || shared.lock().unwrap_or_else(PoisonError::into_inner);
    let wait = |guard| changed.wait(guard).unwrap_or_else(PoisonError::into_inner);
    let helper_run = || {
        // Says, even on a panic, that the helper is gone and which piece it left undone.
        struct Gone<'a, T>(&'a Mutex<Ordered<T>>, &'a std::sync::Condvar);
        impl<T> Drop for Gone<'_, T> {
            fn drop(&mut self) {
                self.0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .helper_gone = true;
                self.1.notify_all();
            }
        }
        let _gone = Gone(&shared, &changed);
        let mut state = state();
        loop {
            let i = {
                let mut s = lock();
                while !s.stopped && s.next < n && s.next >= s.emitted + window {
                    s = wait(s);
                }
                if s.stopped || s.next >= n {
                    return;
                }
                s.next += 1;
                s.next - 1
            };
            let value = work(&mut state, i);
            lock().slots[i] = Some(value);
            changed.notify_all();
        }
    };
    let mut state_here = None;
    std::thread::scope(|scope| {
        let helper = (n >= 2)
            .then(|| {
                std::thread::Builder::new()
                    .name("evidence-store-helper".into())
                    .spawn_scoped(scope, helper_run)
                    .ok()
            })
            .flatten();
        // Without a helper (the system refused a thread) the caller does everything.
        if helper.is_none() {
            lock().helper_gone = true;
        }
        let state = state_here.get_or_insert_with(&state);
        let stop = || {
            lock().stopped = true;
            changed.notify_all();
        };
        let all = loop {
            let mut s = lock();
            if s.emitted == n {
                break true;
            }
            let at = s.emitted;
            if let Some(value) = s.slots[at].take() {
                s.emitted += 1;
                drop(s);
                changed.notify_all();
                if !emit(value) {
                    stop();
                    break false;
                }
                continue;
            }
            // The next to emit: the caller's to make when nobody makes it (unclaimed,
            // or left by a helper that is gone), else the helper's to finish.
            // (A piece the caller claimed it made before coming back here.)
            let orphan = s.next > at && s.helper_gone;
            let i = if orphan {
                at
            } else if s.next < n && s.next < at + window {
                s.next += 1;
                s.next - 1
            } else {
                drop(wait(s));
                continue;
            };
            drop(s);
            let value = work(state, i);
            lock().slots[i] = Some(value);
        };
        // Joined here, so that its panic is not the scope's (its piece was done again).
        if let Some(helper) = helper {
            let _ = helper.join();
        }
        all
    })
}

/// The state [`for_each_ordered`]'s two threads share.
struct Ordered<T> {
    /// The next piece to claim.
    next: usize,
    /// How many results were emitted (the next to emit).
    emitted: usize,
    slots: Vec<Option<T>>,
    /// `emit` refused a result: nothing more is started.
    stopped: bool,
    /// The helper has ended (or never started): what it claimed and left is the caller's.
    helper_gone: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Condvar;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    fn on_helper() -> bool {
        std::thread::current().name() == Some("evidence-store-helper")
    }

    /// Holds the calling thread's pieces until the helper has started one, so that both
    /// threads take part however late the helper is scheduled (a test that needs the
    /// helper then never passes without it).
    struct HelperGate {
        started: Mutex<bool>,
        changed: Condvar,
    }

    impl HelperGate {
        /// A gate for `n` pieces: with fewer than two there is no helper to wait for.
        fn new(n: usize) -> Self {
            HelperGate {
                started: Mutex::new(n < 2),
                changed: Condvar::new(),
            }
        }

        /// Called first in every piece; true on the helper.
        fn enter(&self) -> bool {
            let mut started = self.started.lock().unwrap();
            if on_helper() {
                *started = true;
                self.changed.notify_all();
                return true;
            }
            // The limit only turns a helper that never comes (a bug) into a failure.
            let (started, _) = self
                .changed
                .wait_timeout_while(started, Duration::from_secs(120), |s| !*s)
                .unwrap();
            assert!(*started, "the helper never started a piece");
            false
        }
    }

    #[test]
    fn results_come_back_in_order() {
        for n in [0, 1, 2, 3, 100] {
            let got = map_claimed(
                n,
                || 0u32,
                |calls, i| {
                    *calls += 1;
                    i * i
                },
            );
            assert_eq!(got, (0..n).map(|i| i * i).collect::<Vec<_>>(), "n = {n}");
        }
    }

    /// What `ordered` saw: the results emitted, whether all were, whether the helper
    /// panicked, and how many pieces started after `emit` first refused one.
    struct Ordered {
        got: Vec<usize>,
        finished: bool,
        helper_panicked: bool,
        started_after_refusal: usize,
    }

    /// `for_each_ordered` with pieces of varied length, the caller's held until the
    /// helper has started one (so both threads take some), emitting into a list until
    /// `stop_after` results.
    fn ordered(n: usize, stop_after: usize, fail_on_helper: bool) -> Ordered {
        let gate = HelperGate::new(n);
        let helper_failed = AtomicBool::new(!fail_on_helper);
        let refused = AtomicBool::new(false);
        let started_after_refusal = AtomicUsize::new(0);
        let mut got = Vec::new();
        let finished = for_each_ordered(
            n,
            4,
            || (),
            |(), i| {
                if refused.load(Ordering::SeqCst) {
                    started_after_refusal.fetch_add(1, Ordering::SeqCst);
                }
                let on_helper = gate.enter();
                if on_helper && !helper_failed.swap(true, Ordering::SeqCst) {
                    panic!("helper fails on piece {i}");
                }
                std::thread::sleep(std::time::Duration::from_micros(500 + (i % 3) as u64 * 700));
                i * 10
            },
            |value| {
                got.push(value);
                let more = got.len() < stop_after;
                if !more {
                    refused.store(true, Ordering::SeqCst);
                }
                more
            },
        );
        Ordered {
            got,
            finished,
            helper_panicked: fail_on_helper && helper_failed.load(Ordering::SeqCst),
            started_after_refusal: started_after_refusal.load(Ordering::SeqCst),
        }
    }

    #[test]
    fn ordered_results_are_emitted_in_order_and_all() {
        for n in [0, 1, 2, 3, 40] {
            let run = ordered(n, usize::MAX, false);
            assert_eq!(
                run.got,
                (0..n).map(|i| i * 10).collect::<Vec<_>>(),
                "n = {n}"
            );
            assert!(run.finished);
        }
    }

    #[test]
    fn a_refused_result_stops_the_emitting_and_the_work() {
        for stop_after in [1, 2, 17] {
            let run = ordered(40, stop_after, false);
            assert_eq!(run.got, (0..stop_after).map(|i| i * 10).collect::<Vec<_>>());
            assert!(!run.finished);
            // Each thread may start the one piece it claimed as the refusal came.
            assert!(
                run.started_after_refusal <= 2,
                "{}",
                run.started_after_refusal
            );
        }
    }

    #[test]
    fn no_piece_starts_more_than_the_window_ahead_of_a_slow_emitter() {
        let started = AtomicUsize::new(0);
        let emitted = AtomicUsize::new(0);
        let most_ahead = AtomicUsize::new(0);
        let all = for_each_ordered(
            60,
            3,
            || (),
            |(), i| {
                started.fetch_add(1, Ordering::SeqCst);
                let ahead = i - emitted.load(Ordering::SeqCst);
                most_ahead.fetch_max(ahead, Ordering::SeqCst);
                i
            },
            |i| {
                std::thread::sleep(std::time::Duration::from_millis(1));
                emitted.store(i + 1, Ordering::SeqCst);
                true
            },
        );
        assert!(all);
        assert_eq!(started.load(Ordering::SeqCst), 60);
        // Ahead of the one being handed out (the emitter counts it when it returns).
        assert!(
            most_ahead.load(Ordering::SeqCst) <= 3,
            "a piece started {} ahead",
            most_ahead.load(Ordering::SeqCst)
        );
    }

    #[test]
    fn ordered_pieces_of_a_panicking_helper_are_done_again() {
        let run = ordered(40, usize::MAX, true);
        assert!(run.helper_panicked, "the helper never ran");
        assert_eq!(run.got, (0..40).map(|i| i * 10).collect::<Vec<_>>());
        assert!(run.finished);
    }

    #[test]
    fn pieces_of_a_panicking_helper_are_done_again() {
        // The helper panics on the first piece it claims (its panic message shows in the
        // test output); the caller must still return every result. The caller's pieces
        // wait until the helper has started one, so it gets one however late it starts.
        let gate = HelperGate::new(40);
        let helper_failed = AtomicBool::new(false);
        let got = map_claimed(
            40,
            || (),
            |(), i| {
                let on_helper = gate.enter();
                if on_helper && !helper_failed.swap(true, Ordering::SeqCst) {
                    panic!("helper fails on piece {i}");
                }
                i + 1
            },
        );
        assert!(helper_failed.load(Ordering::SeqCst), "the helper never ran");
        assert_eq!(got, (1..=40).collect::<Vec<_>>());
    }
}
