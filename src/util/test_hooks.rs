//! The test hooks: the only code below `cli/` that reads the environment.
//!
//! Integration tests run the real binary, so the hooks they need are read at run time,
//! each from its own variable, here and nowhere else (`tests/it/layers.rs` fails on an
//! environment read anywhere else below `cli/`). Configuration is not read here: the CLI
//! reads it and passes it down. Every hook but `EVIDENCE_STORE_COUNT_SCANS` is read by
//! debug builds only; a release build never fails, pauses or fakes anything on purpose.
//!
//! | Variable | Effect |
//! |---|---|
//! | `EVIDENCE_STORE_FAULT` | `<step>` or `<step>@<n>`: the file replacement or the commit fails, or the process is killed, at that step ([`crate::util::fsutil::fault`]) |
//! | `EVIDENCE_STORE_FAULT_FULL_DISK_AT_DOCUMENT_COMMIT` | `N`: the N-th commit that stores a document fails as on a full disk, once |
//! | `EVIDENCE_STORE_PAUSE_AT` | an import step, or `view`'s `view-drawing` (its first page half drawn) or `view-before-rename` (a page drawn, not yet in place): the command says so on stderr and waits for a line on stdin |
//! | `EVIDENCE_STORE_COUNT_SCANS` | set (every build): an import prints how many session files it scanned for citations |
//! | `EVIDENCE_STORE_TEST_PAYLOADS` | `DIR`: a `tool_output` handle of letters, digits, `-` and `_` names the file `DIR/<handle>` |
//! | `EVIDENCE_STORE_TEST_NO_TICK` | set: the CLI's spinner never turns |
//! | `PRESCAN_DIR` | `DIR` (unit tests only): the session files of the manual prescan timing |

/// `EVIDENCE_STORE_FAULT`: the fault spec, `<step>` or `<step>@<n>`.
#[cfg(debug_assertions)]
pub fn fault() -> Option<String> {
    std::env::var("EVIDENCE_STORE_FAULT").ok()
}

/// `EVIDENCE_STORE_FAULT_FULL_DISK_AT_DOCUMENT_COMMIT`: which commit of this process
/// (1-based) that stores a document fails with `No space left on device`, once.
pub fn full_disk_at_document_commit() -> Option<u64> {
    if !cfg!(debug_assertions) {
        return None;
    }
    std::env::var("EVIDENCE_STORE_FAULT_FULL_DISK_AT_DOCUMENT_COMMIT")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `EVIDENCE_STORE_PAUSE_AT`: whether an import or `view` pauses at `step`.
pub fn pauses_at(step: &str) -> bool {
    cfg!(debug_assertions) && std::env::var("EVIDENCE_STORE_PAUSE_AT").is_ok_and(|v| v == step)
}

/// `EVIDENCE_STORE_COUNT_SCANS`: whether an import prints its citation scan count (in
/// every build, so that the tests of the incremental scan run on release builds too).
pub fn count_scans() -> bool {
    std::env::var_os("EVIDENCE_STORE_COUNT_SCANS").is_some()
}

/// `EVIDENCE_STORE_TEST_PAYLOADS`: the directory of the stand-in `tool_output` payloads.
#[cfg(debug_assertions)]
pub fn payloads_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("EVIDENCE_STORE_TEST_PAYLOADS").map(std::path::PathBuf::from)
}

/// `EVIDENCE_STORE_TEST_NO_TICK`: whether the spinner stands still.
pub fn no_tick() -> bool {
    cfg!(debug_assertions) && std::env::var_os("EVIDENCE_STORE_TEST_NO_TICK").is_some()
}

/// `PRESCAN_DIR`: the session files of the manual prescan timing.
#[cfg(test)]
pub fn prescan_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("PRESCAN_DIR").map(std::path::PathBuf::from)
}
