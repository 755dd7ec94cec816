//! Progress bars for long work: drawn on a terminal, silent otherwise.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::import::Progress;

/// A byte-counting bar on stderr, or nothing when stderr is not a terminal (CI, pipes,
/// MCP clients reading `serve`'s stderr).
pub struct Bar {
    bar: Option<ProgressBar>,
    label: &'static str,
}

impl Bar {
    pub fn new(label: &'static str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{msg:>8} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar
        });
        Bar { bar, label }
    }
}

impl Progress for Bar {
    fn start(&self, total_bytes: u64) {
        if let Some(bar) = &self.bar {
            // Small imports finish before a bar is worth drawing.
            if total_bytes < 64 << 20 {
                bar.set_draw_target(ProgressDrawTarget::hidden());
            }
            bar.set_length(total_bytes);
            bar.set_message(self.label);
        }
    }

    fn advance(&self, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(bytes);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A one-line status on stderr for steps without a byte count (`verify`, `run`'s import
/// and export): nothing at all when stderr is not a terminal. On a terminal the line is
/// drawn the moment the step starts and whenever its message changes (so what is being
/// done is shown however soon the step ends), and a spinner then turns in front of it.
/// A terminal that cannot redraw a line (`TERM` unset or `dumb`) gets each message as a
/// plain line instead. Done, the line is replaced by a final one or removed.
pub struct Status {
    shown: Shown,
}

enum Shown {
    Nothing,
    Lines,
    Spinner(ProgressBar),
}

/// How often the spinner turns; `None`: never.
fn steady_tick() -> Option<std::time::Duration> {
    // A test hook: the spinner stands still, so a test sees exactly the draws the status
    // line makes itself.
    if crate::util::test_hooks::no_tick() {
        return None;
    }
    Some(std::time::Duration::from_millis(100))
}

impl Status {
    pub fn new(message: String) -> Self {
        if !std::io::stderr().is_terminal() {
            return Status {
                shown: Shown::Nothing,
            };
        }
        let style = ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
            .with_style(style)
            .with_message(message.clone());
        // indicatif hides its bars on a terminal it cannot redraw on.
        if bar.is_hidden() {
            eprintln!("{message}");
            return Status {
                shown: Shown::Lines,
            };
        }
        // The first draw, now: a tick may come only after the step is done.
        bar.force_draw();
        if let Some(interval) = steady_tick() {
            bar.enable_steady_tick(interval);
        }
        Status {
            shown: Shown::Spinner(bar),
        }
    }

    pub fn set(&self, message: String) {
        match &self.shown {
            Shown::Nothing => {}
            Shown::Lines => eprintln!("{message}"),
            Shown::Spinner(bar) => {
                bar.set_message(message);
                // Drawn now, as the first one was.
                bar.force_draw();
            }
        }
    }

    /// Replaces the status with `message` as a plain line, ended by a newline (a spinner
    /// left drawn would leave the cursor at the end of its line, and the shell's prompt
    /// after it).
    pub fn finish(self, message: String) {
        match self.shown {
            Shown::Nothing => {}
            Shown::Lines => eprintln!("{message}"),
            Shown::Spinner(bar) => {
                bar.finish_and_clear();
                eprintln!("{message}");
            }
        }
    }

    /// Removes the spinner, leaving nothing behind (a plain line stays: it cannot be
    /// taken back).
    pub fn clear(self) {
        if let Shown::Spinner(bar) = self.shown {
            bar.finish_and_clear();
        }
    }
}
