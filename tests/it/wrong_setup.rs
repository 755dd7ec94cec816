//! Wrong set-ups say so, through the real binary, and leave nothing behind.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{BIN, PROJECT, Workspace, call, ok_json, text};
use rmcp::ServiceExt;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::json;

/// Every path under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            out.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn import_of_a_wrong_workspace_creates_nothing() {
    let dir = Workspace::empty();
    // A directory that is not a prepared workspace, and a typo'd one that does not exist.
    let err = dir.redact(&dir.fails(&["import"]));
    insta::assert_snapshot!(err.trim_end(), @"evidence-store: import of <W> failed; the store is unchanged: required JSON file is missing: <W>/metadata.json; this is not a prepared workspace; name one with `--workspace DIR` or `PROMPT_DIARY_WORKSPACE=DIR`, or make one with `prompt-diary prepare`");
    let typo = dir.path("example/workspace");
    let out = Command::new(BIN)
        .args(["import", "--workspace"])
        .arg(&typo)
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert_eq!(tree(dir.root()), Vec::<String>::new(), "nothing created");
    // A later dump does not pretend there is an (empty) store.
    let err = dir.redact(&dir.fails(&["dump"]));
    insta::assert_snapshot!("dump_without_a_store", err);
}

#[tokio::test]
async fn serve_outside_a_workspace_says_so_and_creates_nothing() {
    let cwd = Workspace::empty();
    let root = cwd.root().to_owned();
    let transport = TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
        cmd.arg("serve")
            .current_dir(&root)
            .env_remove("PROMPT_DIARY_WORKSPACE")
            .env("RUST_LOG", "off");
    }))
    .expect("server starts");
    let client = ().serve(transport).await.expect("initialize succeeds");

    let ping = call(&client, "prompt_diary_ping", json!({})).await;
    let shown = root.display().to_string();
    let problem = format!(
        "the prepared workspace {shown} cannot be served: required JSON file is missing: {shown}/metadata.json"
    );
    let want = json!({"name": "prompt-diary", "status": "unavailable", "workspace": shown, "problem": problem});
    assert_eq!(ping.structured_content, Some(want.clone()));
    assert_eq!(ok_json(&ping), want);

    let read =
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 1});
    let got = ok_json(&call(&client, "read_session_lines", read).await);
    assert_eq!(got["status"], "invalid");
    assert_eq!(got["errors"][0]["field"], "workspace");
    assert_eq!(got["errors"][0]["message"], problem);
    let title = json!({"title": {"text": "t", "citations": []}});
    let got = call(&client, "write_report_title", title).await;
    insta::assert_snapshot!("write_outside_a_workspace", cwd.redact(text(&got)));
    client.cancel().await.expect("clean shutdown");

    assert_eq!(tree(cwd.root()), Vec::<String>::new(), "nothing created");
}

/// A client shows a server on a wrong workspace as connected: `serve` says so on stderr
/// as it starts, whatever `RUST_LOG` says, and names the fix.
#[test]
fn serve_on_a_wrong_workspace_warns_on_stderr_at_start() {
    let cwd = Workspace::empty();
    let (stdout, stderr) = common::serve_until_a_ping(cwd.root());
    assert!(
        stdout.iter().any(|l| l.contains(r#""id":1"#)),
        "the ping is answered: {stdout:?}"
    );
    for line in &stdout {
        let message: serde_json::Value =
            serde_json::from_str(line).expect("stdout carries only MCP messages");
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    insta::assert_snapshot!("serve_on_a_wrong_workspace", cwd.redact(&stderr));
    // A valid workspace starts without it.
    let ws = Workspace::example();
    let (stdout, stderr) = common::serve_until_a_ping(ws.root());
    assert!(
        stdout
            .iter()
            .any(|l| l.contains(r#""id":1"#) && l.contains(r#"\"status\": \"ok\""#)),
        "the ping is answered ok: {stdout:?}"
    );
    assert!(!stderr.contains("WARNING"), "{stderr}");
}

#[test]
fn dump_lines_rejects_ranges_the_read_would_reject() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let mut seen = Vec::new();
    for (start, end) in [("5", "2"), ("0", "2"), ("1", "99"), ("9", "9")] {
        let err = ws.fails(&["dump", "lines", PROJECT, "S0001", start, end]);
        seen.push(format!("{start} {end}: {}", err.trim_end()));
    }
    insta::assert_snapshot!(seen.join("\n"), @r"
    5 2: evidence-store: end_line 2 must be >= start_line 5
    0 2: evidence-store: start_line 0 must be a positive 1-based line number
    1 99: evidence-store: end_line 99 is past the session's last line 8
    9 9: evidence-store: start_line 9 is past the session's last line 8
    ");
    let all = ws.ok(&["dump", "--json", "lines", PROJECT, "S0001", "1", "8"]);
    let all: serde_json::Value = serde_json::from_str(&all).unwrap();
    assert_eq!(all["lines"].as_array().map(Vec::len), Some(8));
}

#[test]
fn help_names_every_command_and_argument() {
    let ws = Workspace::empty();
    let help_help = ws.ok(&["help", "--help"]);
    assert!(
        help_help.contains("Usage: evidence-store help"),
        "{help_help}"
    );
    assert_eq!(ws.ok(&["help"]), ws.ok(&["--help"]));
    assert_eq!(
        ws.ok(&["help", "dump", "lines"]),
        ws.ok(&["dump", "lines", "--help"])
    );
    insta::assert_snapshot!("dump_lines_help", ws.ok(&["dump", "lines", "--help"]));
    insta::assert_snapshot!("run_help", ws.ok(&["run", "--help"]));
    // Every command is listed before `help`, and the summary names each of them.
    let help = ws.ok(&["--help"]);
    let at = |name: &str| help.find(&format!("\n  {name} ")).unwrap_or(usize::MAX);
    assert!(at("verify-citations") < at("help"), "{help}");
    assert!(help.contains("`verify-citations` checks"), "{help}");
    insta::assert_snapshot!("help_nosuch", ws.fails(&["help", "nosuch"]));
}

/// `--workspace` on a directory that does not exist, and on one that is not a prepared
/// workspace: no command, under any flag, creates anything there (`import --rebuild`
/// made `DIR/.evidence-store/`).
#[test]
fn nothing_is_created_where_no_workspace_is_under_any_flag() {
    let commands: [&[&str]; 12] = [
        &["import"],
        &["import", "--rehash"],
        &["import", "--rebuild"],
        &["import", "--citations-json", "off"],
        &["build"],
        &["export"],
        &["verify"],
        &["dump"],
        &["dump", "--stats"],
        &["view"],
        &["verify-citations"],
        &["serve"],
    ];
    for not_prepared in [false, true] {
        let parent = Workspace::empty();
        let dir = parent.path("work/2026-01-15");
        if not_prepared {
            std::fs::create_dir_all(dir.join("projects")).expect("mkdir");
        }
        let before = tree(parent.root());
        for args in commands {
            let out = Command::new(common::bin())
                .args(args)
                .arg("--workspace")
                .arg(&dir)
                .env_remove("PROMPT_DIARY_WORKSPACE")
                .env("RUST_LOG", "off")
                .stdin(std::process::Stdio::null())
                .output()
                .expect("runs");
            assert!(!out.status.success(), "{args:?} on {dir:?} should fail");
            assert_eq!(tree(parent.root()), before, "{args:?} created something");
        }
    }
}

/// Two prepared workspaces, `a` and `b`, in one temp dir.
fn two_workspaces() -> (Workspace, std::path::PathBuf, std::path::PathBuf) {
    let dir = Workspace::empty();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workspace");
    for name in ["a", "b"] {
        common::copy_example(&example, &dir.path(name));
    }
    let (a, b) = (dir.path("a"), dir.path("b"));
    (dir, a, b)
}

fn run_in(workspace: &Path, args: &[&str]) -> std::process::Output {
    Command::new(common::bin())
        .arg("--workspace")
        .arg(workspace)
        .args(args)
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "off")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("runs")
}

/// A store outside its workspace (`--store`) that workspace `a` imported serves `a`
/// alone: `b`'s import, build, export and verify-citations through it are refused with
/// what to do, and nothing in the store changes (what `dump` shows is the same); `b`'s
/// `serve` answers every tool with the refusal. (Before, `b`'s import rewrote `a`'s store under `b`'s
/// document lock, which `a`'s writers do not take.)
#[tokio::test]
async fn a_store_shared_through_store_is_refused_for_the_second_workspace() {
    let (dir, a, b) = two_workspaces();
    let store = dir.path("shared.redb");
    let store_arg = store.to_str().expect("utf-8 path");
    let out = run_in(&a, &["import", "--store", store_arg]);
    assert!(out.status.success(), "{out:?}");
    // A change in `b`, so that its import has something to write.
    std::fs::write(b.join("daily-report.json"), "{}\n").expect("write");
    // What the store holds, as `a` sees it: its tables, the workspace, the documents.
    let held = || {
        let out = run_in(&a, &["dump", "--json", "--store", store_arg]);
        assert!(out.status.success(), "{out:?}");
        out.stdout
    };
    let before = held();
    for args in [
        &["import"][..],
        &["import", "--rehash"],
        &["build"],
        &["export"],
        &["verify-citations"],
    ] {
        let mut all = args.to_vec();
        all.extend(["--store", store_arg]);
        let out = run_in(&b, &all);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            err.contains(&format!(
                "the store {store_arg} holds the workspace {}, not {}",
                a.display(),
                b.display()
            )),
            "{args:?}: {err}"
        );
        if args == ["import"] {
            insta::assert_snapshot!("import_into_another_workspace_s_store", dir.redact(&err));
        }
        assert_eq!(held(), before, "{args:?} changed the store");
    }
    let transport = TokioChildProcess::new(tokio::process::Command::new(common::bin()).configure(
        |cmd| {
            cmd.arg("serve")
                .arg("--store")
                .arg(&store)
                .env("PROMPT_DIARY_WORKSPACE", &b)
                .env("RUST_LOG", "off");
        },
    ))
    .expect("server starts");
    let client = ().serve(transport).await.expect("initialize succeeds");
    let ping = ok_json(&call(&client, "prompt_diary_ping", json!({})).await);
    assert_eq!(ping["status"], "unavailable", "{ping}");
    assert!(
        ping["problem"]
            .as_str()
            .is_some_and(|p| p.contains("holds the workspace")),
        "{ping}"
    );
    client.cancel().await.expect("clean shutdown");
    assert_eq!(held(), before, "serve changed the store");
    // `a` is served as before.
    let out = run_in(&a, &["import", "--store", store_arg]);
    assert!(out.status.success(), "{out:?}");
}

/// A workspace whose `.evidence-store` is a symlink to another workspace's store
/// directory (here one nested inside it, so the link stays within the workspace) is
/// refused before the store is opened (its bytes stay the same): that store is the other
/// workspace's, whose writers take another lock.
#[test]
fn an_evidence_store_linked_to_another_workspace_s_is_refused() {
    let dir = Workspace::empty();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workspace");
    let (outer, inner) = (dir.path("outer"), dir.path("outer/inner"));
    common::copy_example(&example, &outer);
    common::copy_example(&example, &inner);
    let out = run_in(&inner, &["import"]);
    assert!(out.status.success(), "{out:?}");
    std::os::unix::fs::symlink("inner/.evidence-store", outer.join(".evidence-store"))
        .expect("symlink");
    let bytes = std::fs::read(inner.join(".evidence-store/store.redb")).expect("store");
    for args in [&["import"][..], &["export"]] {
        let out = run_in(&outer, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "is the store of the workspace {}",
                inner.display()
            )),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        std::fs::read(inner.join(".evidence-store/store.redb")).expect("store"),
        bytes
    );
}

/// A document lock that is a hard link to a file elsewhere refuses every writer; the CLI
/// says how to fix it (remove that name), not only what is wrong, and once it is removed
/// the command works.
#[test]
fn a_hard_linked_document_lock_says_how_to_fix_it() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let lock = ws.path(".evidence-store/documents.lock");
    std::fs::remove_file(&lock).expect("rm");
    let elsewhere = ws.path("elsewhere");
    std::fs::write(&elsewhere, "kept\n").expect("write");
    std::fs::hard_link(&elsewhere, &lock).expect("hard link");
    ws.write("daily-report.json", "{}\n");
    for args in [&["import"][..], &["export"], &["build"]] {
        let err = ws.fails(args);
        assert!(
            err.contains(&format!(
                "to fix it, remove that name (`rm {}`)",
                lock.display()
            )),
            "{args:?}: {err}"
        );
        if args == ["import"] {
            insta::assert_snapshot!("import_with_a_hard_linked_lock", ws.redact(&err));
        }
    }
    let verified = String::from_utf8(ws.run(&["verify"]).stdout).expect("utf-8");
    assert!(
        verified.contains("to fix it, remove that name"),
        "{verified}"
    );
    assert_eq!(std::fs::read(&elsewhere).expect("kept"), b"kept\n");
    std::fs::remove_file(&lock).expect("the fix");
    ws.ok(&["import"]);
}

/// A document lock owned by another user: the CLI says to run as that user or, when no
/// evidence-store of theirs works there, to remove it.
#[test]
#[ignore = "needs root to give the lock file another owner; tools/test.sh runs it as root"]
fn a_foreign_owned_document_lock_says_how_to_fix_it() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let lock = ws.path(".evidence-store/documents.lock");
    rustix::fs::chown(&lock, Some(rustix::process::Uid::from_raw(65534)), None)
        .expect("chown (needs root)");
    ws.write("daily-report.json", "{}\n");
    let err = ws.fails(&["import"]);
    insta::assert_snapshot!("import_with_a_foreign_owned_lock", ws.redact(&err));
    std::fs::remove_file(&lock).expect("the fix");
    ws.ok(&["import"]);
}

/// `EVIDENCE_STORE_CITATIONS_JSON=OFF` (neither `on` nor `off`) breaks only the commands
/// that import, which name the variable (not the flag) and what to do; every other command
/// works. A flag on the command line wins over it. Another flag's variable that clap
/// refuses is named as that variable too.
#[test]
fn a_bad_environment_variable_is_named_and_breaks_only_the_commands_that_use_it() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let with_env = |var: &str, value: &str, args: &[&str]| {
        Command::new(common::bin())
            .arg("--workspace")
            .arg(ws.root())
            .args(args)
            .env(var, value)
            .env_remove("PROMPT_DIARY_WORKSPACE")
            .env("RUST_LOG", "off")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("runs")
    };
    let var = "EVIDENCE_STORE_CITATIONS_JSON";
    for args in [
        &["dump"][..],
        &["dump", "--stats"],
        &["verify"],
        &["view"],
        &["export"],
        &["verify-citations"],
        &["import", "--citations-json", "on"],
    ] {
        let out = with_env(var, "OFF", args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    for args in [
        &["import"][..],
        &["import", "--rebuild"],
        &["build"],
        &["serve"],
        &["run", "--", "true"],
    ] {
        let out = with_env(var, "OFF", args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            err.starts_with(
                "evidence-store: the environment variable EVIDENCE_STORE_CITATIONS_JSON=\"OFF\""
            ),
            "{args:?}: {err}"
        );
        if args == ["import"] {
            insta::assert_snapshot!("a_bad_citations_variable", err);
        }
    }
    let out = with_env("EVIDENCE_STORE_MODEL_TIMEOUT_SECS", "soon", &["serve"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    insta::assert_snapshot!(
        "a_bad_model_timeout_variable",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = with_env("EVIDENCE_STORE_MODEL_TIMEOUT_SECS", "soon", &["dump"]);
    assert!(out.status.success(), "{out:?}");
}
