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

/// `serve` on `root`, spoken to until its `prompt_diary_ping` is answered, then its input
/// closed. The ping waits for the start, so whatever the start says on stderr has been
/// said by then (with no client at all the process may end before its start does).
/// Returns stdout's lines and stderr.
fn serve_until_a_ping(root: &Path) -> (Vec<String>, String) {
    use std::io::{BufRead, BufReader, Write};
    let (mut child, log) = common::spawn_logged(
        Command::new(BIN)
            .arg("--workspace")
            .arg(root)
            .arg("serve")
            .env("RUST_LOG", "off"),
    );
    let mut stdin = child.stdin.take().expect("stdin");
    for message in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "prompt_diary_ping", "arguments": {}}}),
    ] {
        writeln!(stdin, "{message}").expect("write");
    }
    let mut lines = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
        let line = line.expect("read");
        let answered = line.contains(r#""id":1"#);
        lines.push(line);
        if answered {
            break;
        }
    }
    drop(stdin);
    let status = common::exit_or_hang(&mut child, std::time::Duration::from_secs(60));
    assert!(status.is_some(), "serve exits at the end of its input");
    let stderr = std::fs::read_to_string(log.path()).expect("stderr");
    (lines, stderr)
}

/// A client shows a server on a wrong workspace as connected: `serve` says so on stderr
/// as it starts, whatever `RUST_LOG` says, and names the fix.
#[test]
fn serve_on_a_wrong_workspace_warns_on_stderr_at_start() {
    let cwd = Workspace::empty();
    let (stdout, stderr) = serve_until_a_ping(cwd.root());
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
    let (stdout, stderr) = serve_until_a_ping(ws.root());
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
