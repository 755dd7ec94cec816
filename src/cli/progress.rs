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

/// A one-line status on stderr for steps without a byte count (`run`'s import and
/// export): a spinner with a message, left as a final line when done; nothing at all
/// when stderr is not a terminal.
pub struct Status {
    bar: Option<ProgressBar>,
}

impl Status {
    pub fn new(message: String) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar.set_message(message);
            bar.enable_steady_tick(std::time::Duration::from_millis(100));
            bar
        });
        Status { bar }
    }

    pub fn set(&self, message: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(message);
        }
    }

    /// Replaces the spinner with `message` as a plain line, ended by a newline (a bar
    /// left drawn would leave the cursor at the end of its line, and the shell's prompt
    /// after it).
    pub fn finish(self, message: String) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
            eprintln!("{message}");
        }
    }

    /// Removes the spinner, leaving nothing behind.
    pub fn clear(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
