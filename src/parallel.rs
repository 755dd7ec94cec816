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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

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

    #[test]
    fn pieces_of_a_panicking_helper_are_done_again() {
        // The helper panics on the first piece it claims (its panic message shows in the
        // test output); the caller must still return every result. Pieces are slow enough
        // that the helper gets one, however late it starts.
        let helper_failed = AtomicBool::new(false);
        let got = map_claimed(
            40,
            || (),
            |(), i| {
                let on_helper = std::thread::current().name() == Some("evidence-store-helper");
                if on_helper && !helper_failed.swap(true, Ordering::SeqCst) {
                    panic!("helper fails on piece {i}");
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
                i + 1
            },
        );
        assert!(helper_failed.load(Ordering::SeqCst), "the helper never ran");
        assert_eq!(got, (1..=40).collect::<Vec<_>>());
    }
}
