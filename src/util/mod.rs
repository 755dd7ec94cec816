//! Ground-level helpers with no knowledge of the store or the workspace.

pub mod calendar;
pub mod disk;
pub mod fsutil;
pub mod kind;
pub mod lines;
pub mod parallel;
pub mod pyjson;
pub mod stop;
pub mod stop_flag;
pub mod test_hooks;
pub mod text;
pub mod wait;
