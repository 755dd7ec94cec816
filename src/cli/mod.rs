//! The command line: arguments (clap stops here), the commands, progress bars.

pub mod app;
pub mod args;
pub mod dump;
pub mod progress;
pub mod run;
pub mod serve;
