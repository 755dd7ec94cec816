//! The command line: arguments (clap stops here), the commands, progress bars.

pub mod app;
pub mod args;
pub(crate) mod dump;
pub(crate) mod export;
pub(crate) mod progress;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod signals;
