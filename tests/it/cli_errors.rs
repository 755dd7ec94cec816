//! How the CLI reports a failure: one line, every cause once.

use crate::common;

use std::process::Command;

use common::{BIN, Workspace};

fn stderr_of(args: &[&str], workspace: &std::path::Path) -> String {
    let out = Command::new(BIN)
        .args(args)
        .arg("--workspace")
        .arg(workspace)
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    String::from_utf8(out.stderr).unwrap()
}

/// Each operating-system cause appears exactly once in the message.
fn assert_once(err: &str, cause: &str) {
    assert_eq!(err.matches(cause).count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_store_dir_under_a_file_names_the_cause_once() {
    let ws = Workspace::example();
    // `.evidence-store` is a file, so the store's directory cannot be created in it.
    std::fs::write(ws.path(".evidence-store"), "x").unwrap();
    let err = stderr_of(&["import"], ws.root());
    assert_once(&err, "(os error ");
    insta::assert_snapshot!("store_dir_under_a_file", ws.redact(&err));
}

#[test]
fn a_store_path_that_is_a_directory_names_the_cause_once() {
    let ws = Workspace::example();
    std::fs::create_dir_all(ws.store()).unwrap();
    let err = stderr_of(&["import"], ws.root());
    assert_once(&err, "it is not a regular file");
    insta::assert_snapshot!("store_path_is_a_directory", ws.redact(&err));
}

/// `dump` on a directory that does not exist says so, instead of "run import first"
/// (which would fail there too).
#[test]
fn dump_on_a_missing_directory_says_it_does_not_exist() {
    let ws = Workspace::empty();
    let missing = ws.path("work/2026-01-15");
    let err = stderr_of(&["dump"], &missing);
    assert_eq!(
        err,
        format!(
            "evidence-store: the workspace directory {} (from --workspace) does not exist: give \
             --workspace (or PROMPT_DIARY_WORKSPACE) a workspace `prompt-diary prepare` made \
             (<reports root>/work/<date>; `prompt-diary list` lists them)\n",
            missing.display()
        )
    );
}
