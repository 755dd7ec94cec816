//! `evidence-store run -- COMMAND`: the command sees evidence-store as prompt-diary's
//! `report mcp serve`, every other `report` call is the real one, and afterwards the
//! workspace is imported and exported. Through the real binary.

use crate::common;
use crate::common::terminal;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};

use common::{BIN, PROJECT, Workspace};
use serde_json::json;

/// `evidence-store run ARGS` with PATH = `extra:$PATH`, in `cwd`, stderr not a terminal.
fn run(cwd: &Path, extra_path: Option<&Path>, args: &[&str]) -> Output {
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(extra) = extra_path {
        path = std::env::join_paths(
            std::iter::once(extra.to_owned()).chain(std::env::split_paths(&path)),
        )
        .unwrap();
    }
    Command::new(BIN)
        .arg("run")
        .args(args)
        .current_dir(cwd)
        .env("PATH", path)
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "off")
        .output()
        .expect("run starts")
}

/// A directory holding an executable `report` script with `body`.
fn fake_report(dir: &Path, body: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("report");
    std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What `out` said on stderr, the workspace's path shown as `<W>`.
fn stderr_in(ws: &Workspace, out: &Output) -> String {
    ws.redact(&String::from_utf8_lossy(&out.stderr))
}

#[test]
fn the_command_runs_with_report_first_on_path_and_its_exit_code_is_returned() {
    let ws = Workspace::empty();
    let out = run(
        ws.root(),
        None,
        &[
            "--",
            "sh",
            "-c",
            r#"d=$(dirname "$(command -v report)"); echo "$d"; readlink "$d/report"; exit 7"#,
        ],
    );
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let text = stdout(&out);
    let mut lines = text.lines();
    let dir = lines.next().expect("the private dir");
    assert_eq!(
        std::fs::canonicalize(lines.next().expect("link target")).unwrap(),
        std::fs::canonicalize(BIN).unwrap(),
        "`report` is this binary"
    );
    assert!(!Path::new(dir).exists(), "the private dir is removed");
    assert!(out.stderr.is_empty(), "nothing on a non-terminal stderr");
    // A command that cannot be started is an error, not a silent success.
    let out = run(ws.root(), None, &["--", "/nonexistent/cmd"]);
    assert!(!out.status.success());
    insta::assert_snapshot!("run_of_a_missing_command", stderr_in(&ws, &out));
}

#[test]
fn other_report_calls_reach_the_real_report_unchanged() {
    let ws = Workspace::empty();
    let bin = fake_report(
        ws.root(),
        r#"printf '<%s>' "$0" "$@"; printf '%s' "$MARK"; exit 5"#,
    );
    let out = Command::new(BIN)
        .args(["run", "--", "report", "generate", "daily", "a b", "--x", ""])
        .current_dir(ws.root())
        .env(
            "PATH",
            std::env::join_paths(
                std::iter::once(bin.clone())
                    .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
            )
            .unwrap(),
        )
        .env("MARK", "env passes")
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert_eq!(
        stdout(&out),
        format!(
            "<{}><generate><daily><a b><--x><>env passes",
            bin.join("report").display()
        )
    );
    // `report mcp serve --flag` is not the exact server command: also the real one.
    let out = run(
        ws.root(),
        Some(&bin),
        &["--", "report", "mcp", "serve", "--flag"],
    );
    assert_eq!(out.status.code(), Some(5));
    assert!(stdout(&out).ends_with("<mcp><serve><--flag>"), "{out:?}");
    // Another evidence-store linked as `report` further on PATH is skipped, not called
    // (two of them would hand the call back and forth forever).
    let other = ws.path("other");
    std::fs::create_dir_all(&other).unwrap();
    // A second copy of the binary (a hard link: another path to the same file).
    if std::fs::hard_link(BIN, other.join("evidence-store")).is_err() {
        std::fs::copy(BIN, other.join("evidence-store")).unwrap();
    }
    std::os::unix::fs::symlink(other.join("evidence-store"), other.join("report")).unwrap();
    let path = std::env::join_paths([other.clone(), bin.clone()]).unwrap();
    let out = Command::new(BIN)
        .args(["run", "--", "report", "x"])
        .env("PATH", &path)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(stdout(&out).ends_with("<x>"), "{out:?}");
    // Without a real one, the shim says so and exits 127, as a shell would.
    let out = run(ws.root(), None, &["--", "report", "--version"]);
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    insta::assert_snapshot!("report_without_a_real_one", stderr_in(&ws, &out));
}

/// prompt-diary's server command under `run`, with the workspace only in
/// `PROMPT_DIARY_WORKSPACE` and the current directory elsewhere, the workspace created by
/// the command (as prompt-diary's `prepare` does) after `run` started: it is
/// evidence-store (server name, 8 tools, a read), and once the client closes stdin and
/// `run` has exited, `run` has adopted the report prompt-diary's own Build wrote meanwhile.
#[test]
fn report_mcp_serve_is_evidence_store_and_run_adopts_what_prompt_diary_wrote() {
    use std::io::{BufRead, BufReader, Write};
    let example = Workspace::example();
    let parent = Workspace::empty();
    let ws = Workspace {
        dir: tempfile::tempdir_in(parent.root()).unwrap(),
    };
    std::fs::remove_dir(ws.root()).unwrap();
    let elsewhere = Workspace::empty();
    let mut child = Command::new(BIN)
        .args(["run", "--", "sh", "-c"])
        .arg(r#"cp -r "$EXAMPLE" "$PROMPT_DIARY_WORKSPACE" && exec report mcp serve"#)
        .current_dir(elsewhere.root())
        .env("EXAMPLE", example.root())
        .env("PROMPT_DIARY_WORKSPACE", ws.root())
        .env("RUST_LOG", "off")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |request: serde_json::Value| -> serde_json::Value {
        writeln!(stdin, "{request}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).expect("a JSON-RPC answer")
    };
    let init = ask(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "evidence-store");
    let tools = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    // prompt-diary's 8 tools, the two agent-citation tools and (the example holds trimmed
    // tool entries) the three tool-output tools.
    assert_eq!(tools["result"]["tools"].as_array().map(Vec::len), Some(13));
    let read = ask(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "read_session_lines",
        "arguments": {"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 8}}}),
    );
    let text = read["result"]["content"][0]["text"].as_str().expect("text");
    let (text, _) = common::strip_handles(text);
    assert_eq!(text, common::fixture("read_s0001_compact.json").trim_end());
    // prompt-diary's Build writes the report file itself while the server runs.
    ws.write("daily-report.json", "{\"written_by\": \"prompt-diary\"}\n");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");

    assert!(ws.store().exists(), "the store is in the workspace");
    assert_eq!(std::fs::read_dir(elsewhere.root()).unwrap().count(), 0);
    assert_eq!(
        ws.read("daily-report.json"),
        b"{\"written_by\": \"prompt-diary\"}\n"
    );
    // The store adopted it: without the file, export writes it back.
    std::fs::remove_file(ws.path("daily-report.json")).unwrap();
    assert!(ws.ok(&["export"]).starts_with("exported 1 file(s)"));
    assert_eq!(
        ws.read("daily-report.json"),
        b"{\"written_by\": \"prompt-diary\"}\n"
    );
}

/// `--workspace` names a workspace to bring in line after the command even if no server
/// ran: a card prompt-diary deleted stays deleted (the store forgets it), a file it
/// rewrote is adopted.
#[test]
fn after_the_command_the_workspace_is_imported_then_exported() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let card = format!("projects/{PROJECT}/evidence/S0001.json");
    ws.write(&card, "{\"old\": true}\n");
    ws.ok(&["import"]);
    let root = ws.root().display().to_string();
    let script = format!("rm {root}/{card}; echo new > {root}/daily-report.json");
    let out = run(
        ws.root(),
        None,
        &["--workspace", &root, "--", "sh", "-c", &script],
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        !ws.path(&card).exists(),
        "a deleted card is not brought back"
    );
    assert_eq!(ws.read("daily-report.json"), b"new\n");
    assert!(ws.ok(&["export"]).starts_with("exported 0 file(s)"));
    // An export that fails after a successful command makes `run` fail.
    ws.write("metadata.json", "[]");
    let out = run(ws.root(), None, &["--workspace", &root, "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(
        "run_whose_import_after_the_command_fails",
        stderr_in(&ws, &out)
    );
}

/// An error after the command is printed as the other commands print theirs: each cause
/// once, even where the message already says its cause.
#[test]
fn a_failure_after_the_command_says_its_cause_once() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let root = ws.root().display().to_string();
    let lock = format!("{root}/.evidence-store/documents.lock");
    let script = format!("rm -f {lock}; mkdir {lock}");
    let out = run(
        ws.root(),
        None,
        &["--workspace", &root, "--", "sh", "-c", &script],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    insta::assert_snapshot!(
        "run_whose_lock_is_not_a_file_after_the_command",
        stderr_in(&ws, &out)
    );
}

/// SIGTERM sent to `run` goes to the command (which dies of it: 128 + 15), and `run`
/// itself survives to clean up. If `run` did not pass it on, `sleep` would finish and
/// the exit code would be 0.
#[test]
fn sigterm_is_passed_on_and_the_exit_code_says_so() {
    let ws = Workspace::empty();
    let out = run(
        ws.root(),
        None,
        &["--", "sh", "-c", "kill -TERM $PPID; exec sleep 30"],
    );
    assert_eq!(out.status.code(), Some(143), "{out:?}");
}

/// The terminals a status line is drawn on: one that redraws lines (a spinner, its ticks
/// turned off so that only the status line's own draws show), and ones that cannot (`TERM`
/// unset or `dumb`: plain lines).
fn on_each_terminal(command: impl Fn() -> Command) -> Vec<(&'static str, ExitStatus, String)> {
    let terms: [(&str, Option<&str>); 3] = [
        ("xterm", Some("xterm")),
        ("no TERM", None),
        ("dumb", Some("dumb")),
    ];
    terms
        .into_iter()
        .map(|(name, term)| {
            let mut command = command();
            command.env("EVIDENCE_STORE_TEST_NO_TICK", "1");
            match term {
                Some(term) => command.env("TERM", term),
                None => command.env_remove("TERM"),
            };
            let (status, shown) = terminal::run(command);
            (name, status, shown)
        })
        .collect()
}

/// On a terminal `run` shows what it imports and exports, then what it exported; not on
/// a pipe (tested above).
#[test]
fn progress_is_shown_on_a_terminal() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let root = ws.root().display().to_string();
    for (term, status, shown) in on_each_terminal(|| {
        let mut command = Command::new(BIN);
        command
            .args(["run", "--workspace", &root, "--", "true"])
            .env("RUST_LOG", "off");
        command
    }) {
        assert!(status.success(), "{term}: {shown}");
        let importing = shown.find(&format!("importing {root}"));
        let exporting = shown.find(&format!("exporting {root}"));
        let exported = shown.find(&format!(
            "evidence-store: exported {root}: 0 file(s) written"
        ));
        assert!(importing.is_some(), "{term}: {shown:?}");
        assert!(importing < exporting, "{term}: {shown:?}");
        assert!(exporting < exported, "{term}: {shown:?}");
    }
}

/// `verify` shows what it checks on a terminal before its result; through a pipe its
/// stderr is empty.
#[test]
fn verify_shows_progress_on_a_terminal_only() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let root = ws.root().display().to_string();
    for (term, status, shown) in on_each_terminal(|| {
        let mut command = Command::new(BIN);
        command
            .args(["verify", "--workspace", &root])
            .env("RUST_LOG", "off");
        command
    }) {
        assert!(status.success(), "{term}: {shown}");
        let verifying = shown.find("verifying ");
        let found = shown.find("no problems found");
        assert!(verifying.is_some(), "{term}: {shown:?}");
        assert!(verifying < found, "{term}: {shown:?}");
    }

    let piped = Command::new(BIN)
        .args(["verify", "--workspace", &root])
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert!(piped.stderr.is_empty(), "{piped:?}");
}

/// A client may start its MCP servers with a cleared environment (Codex, as prompt-diary
/// 0.2.20 runs it, keeps little more than PATH and HOME): the server `run` starts so still
/// takes `run`'s settings (here its model endpoint, which `serve` logs at start), and `run`
/// still learns which workspace it served, so it adopts what prompt-diary wrote after the
/// server stopped.
#[test]
fn a_server_started_with_a_cleared_environment_keeps_run_s_settings_and_is_adopted() {
    let example = Workspace::example();
    let parent = Workspace::empty();
    let ws = parent.root().join("day");
    let log = parent.root().join("serve.log");
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ]
    .map(|r| r.to_string())
    .join("\n");
    let script = r#"cp -r "$EXAMPLE" "$WS" &&
        printf '%s\n' "$REQUESTS" |
        env -i PATH="$PATH" HOME="$HOME" PROMPT_DIARY_WORKSPACE="$WS" RUST_LOG=info report mcp serve >/dev/null 2>"$LOG" &&
        echo '{"written_by": "prompt-diary"}' >"$WS/daily-report.json""#;
    let out = Command::new(BIN)
        .args([
            "run",
            "--model-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ])
        .args(["--", "sh", "-c", script])
        .current_dir(parent.root())
        .env("EXAMPLE", example.root())
        .env("WS", &ws)
        .env("LOG", &log)
        .env("REQUESTS", requests)
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "off")
        .output()
        .expect("run starts");
    assert!(out.status.success(), "{out:?}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("tool_output model endpoint") && logged.contains("http://127.0.0.1:9/v1"),
        "the server did not get run's model endpoint: {logged}"
    );
    // `run` imported the workspace after the command: the store adopted the report file,
    // so without the file, export writes it back.
    std::fs::remove_file(ws.join("daily-report.json")).unwrap();
    let export = Command::new(BIN)
        .args(["--workspace"])
        .arg(&ws)
        .arg("export")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&export.stdout).starts_with("exported 1 file(s)"),
        "{export:?}"
    );
    assert_eq!(
        std::fs::read(ws.join("daily-report.json")).unwrap(),
        b"{\"written_by\": \"prompt-diary\"}\n"
    );
}
