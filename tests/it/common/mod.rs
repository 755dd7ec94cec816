//! Helpers shared by the integration tests: temp workspaces and the real binary.

pub mod cards;
pub mod http;
pub mod rng;
pub mod stdio;
pub mod terminal;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_evidence-store");

/// The binary the tests that can name another build run: `EVIDENCE_STORE_TEST_BIN` when
/// set (to show a test fails on a build before a fix), else this crate's [`BIN`]. The
/// variable is read by the test process and names the child to start; it is never passed
/// to the child.
pub fn bin() -> PathBuf {
    std::env::var_os("EVIDENCE_STORE_TEST_BIN").map_or_else(|| PathBuf::from(BIN), PathBuf::from)
}

/// The SHA-256 of `bytes` as lowercase hex, as receipts and documents record it.
pub fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What `dump --json ARGS` prints on the workspace, parsed.
pub fn dump_json(ws: &Workspace, args: &[&str]) -> Value {
    let mut all = vec!["dump", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ws.ok(&all)).expect("dump --json prints JSON")
}

/// At least `bytes` of log entries with words, numbers and non-ASCII text, 50 to a line:
/// a payload that costly greps are slow over.
pub fn wordy_log(bytes: usize) -> String {
    let mut out = String::new();
    let mut i = 0usize;
    while out.len() < bytes {
        out.push_str(&format!(
            "2026-01-15T10:{:02}:{:02} INFO worker-{} handled request {i} for café user-{} in {} ms{}",
            i / 60 % 60,
            i % 60,
            i % 7,
            i % 250,
            i * 31 % 1000,
            if i % 50 == 49 { "\n" } else { " " }
        ));
        i += 1;
    }
    out
}

/// Whether `f` holds, polled every 20 ms for at most `secs` seconds (then once more).
pub async fn eventually(secs: u64, f: impl Fn() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    f()
}
pub const PROJECT: &str = "Demo-0123456789ab";
/// Lines of the session [`Workspace::add_large_session`] adds, and where it is.
pub const LARGE_SESSION_LINES: usize = 2000;
pub const LARGE_SESSION_PATH: &str = "projects/Demo-0123456789ab/sessions/claude-code/large.jsonl";

/// A prepared workspace in a temp dir, starting as a copy of `examples/workspace`.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    /// An empty temp dir, for tests that write their own workspace.
    pub fn empty() -> Self {
        Workspace {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A workspace of one project, `project_key` labelled `label`, final for
    /// `report_date` in UTC, with no session yet.
    pub fn one_project(report_date: &str, project_key: &str, label: &str) -> Self {
        let ws = Workspace::empty();
        ws.write(
            "metadata.json",
            format!(r#"{{"report_date": "{report_date}", "status": "final", "timezone": "UTC"}}"#),
        );
        ws.write(
            &format!("projects/{project_key}/project.json"),
            format!(r#"{{"project_key": "{project_key}", "project_label": "{label}"}}"#),
        );
        ws
    }

    /// A copy of the example workspace's prepared inputs (what `prompt-diary prepare`
    /// writes: metadata, project, index, sessions): neither the documents it ships (the
    /// cards, project synthesis and daily report `tools/gen/example_documents.py` writes
    /// through the tools) nor what the README's commands write there (the store,
    /// receipts) is copied.
    pub fn example() -> Self {
        let ws = Self::example_with_documents();
        for document in EXAMPLE_DOCUMENTS {
            let path = ws.path(document);
            if path.is_dir() {
                std::fs::remove_dir_all(path).expect("remove the example's cards");
            } else if path.exists() {
                std::fs::remove_file(path).expect("remove an example document");
            }
        }
        ws
    }

    /// A copy of the example workspace as it ships: its prepared inputs and its
    /// documents (what git tracks there).
    pub fn example_with_documents() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        copy_example(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workspace"),
            dir.path(),
        );
        Workspace { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).expect("read")
    }

    pub fn store(&self) -> PathBuf {
        self.path(".evidence-store/store.redb")
    }

    /// Runs the binary ([`bin`]) with `--workspace` set to this workspace.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .args(args)
            .arg("--workspace")
            .arg(self.root())
            .env_remove("PROMPT_DIARY_WORKSPACE")
            .env_remove("RUST_LOG")
            .output()
            .expect("binary runs")
    }

    /// Runs the binary and insists it succeeds; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs the binary and insists it fails; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "{args:?} should fail");
        String::from_utf8(out.stderr).expect("utf-8 stderr")
    }

    /// Adds session `S0009` (`sessions/claude-code/large.jsonl`, 2000 lines, about
    /// 1.5 MB): tool results long enough to be trimmed, texts, tool uses, non-JSON lines
    /// and plain-string messages, all full of characters JSON must escape, surrogate
    /// pairs and a lone surrogate. Large enough that reads of it run in chunks on two
    /// threads.
    /// The workspace as prompt-diary 0.2.20's prepare lays it out: `schema_version` 7
    /// and index rows without the subagent fields (every project's). Rows are rewritten
    /// as compact JSON; their members keep their order.
    pub fn to_schema_7(&self) {
        let mut meta: Value =
            serde_json::from_slice(&self.read("metadata.json")).expect("metadata JSON");
        meta["schema_version"] = serde_json::json!(7);
        self.write("metadata.json", format!("{meta}\n"));
        for project in std::fs::read_dir(self.path("projects"))
            .expect("projects")
            .flatten()
        {
            let index = project.path().join("sessions.index.jsonl");
            let Ok(text) = std::fs::read_to_string(&index) else {
                continue;
            };
            let mut rows = String::new();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let mut row: Value = serde_json::from_str(line).expect("index row");
                let row_map = row.as_object_mut().expect("row object");
                row_map.remove("subagent_path");
                for turn in row_map["turns"].as_array_mut().into_iter().flatten() {
                    turn.as_object_mut().map(|t| t.remove("target_subagents"));
                }
                rows.push_str(&format!("{row}\n"));
            }
            std::fs::write(&index, rows).expect("index written");
        }
    }

    pub fn add_large_session(&self) {
        let awkward = "quote \\\" backslash \\\\ newline \\n é 😀 \\u2028 \\ud83d\\ude00 \\ud800";
        let session: String = (0..LARGE_SESSION_LINES)
            .map(|i| match i % 4 {
                0 => format!(
                    "{{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"tool_result\",\"content\":\"{}\"}}]}}}}\n",
                    format!("{awkward} {i} ").repeat(40)
                ),
                1 => format!(
                    "{{\"type\":\"assistant\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"{awkward} {i}\"}},{{\"type\":\"tool_use\",\"name\":\"Bash\",\"input\":{{\"command\":\"{}\"}}}}]}}}}\n",
                    "x".repeat(i % 700)
                ),
                2 => format!("{{\"type\":\"system\",\"subtype\":\"s{i}\"}} trailing\n"),
                _ => format!("{{\"type\":\"user\",\"message\":\"{awkward} {i}\"}}\n"),
            })
            .collect();
        // Some lines hold bytes that are not UTF-8 (read as U+FFFD, as Python decodes).
        let session: Vec<u8> = session
            .split_inclusive('\n')
            .enumerate()
            .flat_map(|(i, line)| {
                let mut bytes = line.as_bytes().to_vec();
                if i % 97 == 7 {
                    let at = bytes.len() - 3;
                    bytes.splice(at..at, *b"\xff\xfe\xe2\x82");
                }
                bytes
            })
            .collect();
        self.write(LARGE_SESSION_PATH, session);
        let index = format!("projects/{PROJECT}/sessions.index.jsonl");
        let mut rows = String::from_utf8(self.read(&index)).expect("utf-8 index");
        rows.push_str("{\"session_ref\": \"S0009\", \"source\": \"claude-code\", \"source_session_id\": \"large\", \"session_path\": \"sessions/claude-code/large.jsonl\", \"target_start_line\": 1, \"target_end_line\": 1, \"turns\": []}\n");
        self.write(&index, rows);
    }

    /// Replaces `root` in text with `<W>`, so snapshots do not depend on the temp dir.
    pub fn redact(&self, text: &str) -> String {
        text.replace(&self.root().display().to_string(), "<W>")
    }
}

/// The documents the example workspace ships beside its prepared inputs.
pub const EXAMPLE_DOCUMENTS: [&str; 3] = [
    "daily-report.json",
    "projects/Demo-0123456789ab/project-synthesis.json",
    "projects/Demo-0123456789ab/evidence",
];

/// Copies the files of `from` that git tracks (as they are in the work tree), so that
/// nothing a command wrote into the example reaches a test; without git (a source copy
/// outside a checkout), the whole tree but its store directories.
pub fn copy_example(from: &Path, to: &Path) {
    let listed = Command::new("git")
        .arg("-C")
        .arg(from)
        .args(["ls-files", "-z", "--", "."])
        .output()
        .ok()
        .filter(|out| out.status.success() && !out.stdout.is_empty());
    let Some(listed) = listed else {
        return copy_workspace(from, to);
    };
    std::fs::create_dir_all(to).expect("mkdir");
    for rel in listed.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let rel = Path::new(std::str::from_utf8(rel).expect("UTF-8 path"));
        let source = from.join(rel);
        // Tracked but deleted in the work tree: not part of the example now.
        if !source.is_file() {
            continue;
        }
        let target = to.join(rel);
        std::fs::create_dir_all(target.parent().expect("has parent")).expect("mkdir");
        std::fs::copy(&source, &target).expect("copy");
    }
}

/// Copies a workspace tree without its store directory (`.evidence-store`).
pub fn copy_workspace(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read example") {
        let entry = entry.expect("entry");
        if entry.file_name() == ".evidence-store" {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_workspace(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// A file under `tests/fixtures`.
pub fn fixture_bytes(rel: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(rel),
    )
    .expect("fixture")
}

/// A text file under `tests/fixtures`.
pub fn fixture(rel: &str) -> String {
    String::from_utf8(fixture_bytes(rel)).expect("utf-8 fixture")
}

/// An rmcp client connected to a `serve` process.
pub type Client = RunningService<RoleClient, ()>;

/// Starts `serve` on the workspace and initializes; also returns the server's pid.
pub async fn spawn_server(ws: &Workspace) -> (Client, Option<u32>) {
    let root = ws.root().to_owned();
    let transport = TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
        // Logs off: a test's expected warnings are not noise in the test run's output.
        cmd.arg("serve")
            .env("PROMPT_DIARY_WORKSPACE", &root)
            .env("RUST_LOG", "off");
    }))
    .expect("server starts");
    let pid = transport.id();
    (().serve(transport).await.expect("initialize succeeds"), pid)
}

pub async fn connect(ws: &Workspace) -> Client {
    spawn_server(ws).await.0
}

/// `tools/call`; an error only if the server does not answer (it may have been killed).
pub async fn try_call(client: &Client, tool: &str, args: Value) -> Result<CallToolResult, String> {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .map_err(|e| e.to_string())
}

pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    try_call(client, tool, args)
        .await
        .expect("tools/call answers")
}

/// The result's text content.
pub fn text(result: &CallToolResult) -> &str {
    match result.content.first().expect("one content item") {
        ContentBlock::Text(t) => &t.text,
        other => panic!("expected text content, got {other:?}"),
    }
}

/// The result's text, which must be a normal (not `isError`) result, as JSON.
pub fn ok_json(result: &CallToolResult) -> Value {
    assert_ne!(
        result.is_error,
        Some(true),
        "unexpected tool error: {}",
        text(result)
    );
    serde_json::from_str(text(result)).expect("result text is JSON")
}

/// `tools/call` answered by a normal result, as JSON.
pub async fn call_ok(client: &Client, tool: &str, args: Value) -> Value {
    ok_json(&call(client, tool, args).await)
}

/// `serve` ([`bin`]) on `ws`, logs off, as a client's transport: `setup` adjusts the
/// command, then `envs` are set (so they win).
pub fn serve_transport(
    ws: &Workspace,
    envs: &[(&str, &str)],
    setup: impl FnOnce(&mut tokio::process::Command),
) -> TokioChildProcess {
    TokioChildProcess::new(tokio::process::Command::new(bin()).configure(|cmd| {
        cmd.arg("serve")
            .env("PROMPT_DIARY_WORKSPACE", ws.root())
            // Logs off: the faults a test injects are expected, not noise in its output.
            .env("RUST_LOG", "off");
        setup(cmd);
        cmd.envs(envs.iter().copied());
    }))
    .expect("server starts")
}

/// Starts `serve` ([`bin`]) with extra environment variables (such as
/// `EVIDENCE_STORE_FAULT`, which debug builds read to fail at a known step); also returns
/// the server's pid.
pub async fn spawn_server_env(ws: &Workspace, envs: &[(&str, &str)]) -> (Client, Option<u32>) {
    let transport = serve_transport(ws, envs, |_| {});
    let pid = transport.id();
    (().serve(transport).await.expect("initialize succeeds"), pid)
}

/// A command that stops at a pause point (`EVIDENCE_STORE_PAUSE_AT`, a debug-build test
/// hook) and waits there until released; started only once it has said where it stopped.
pub struct Paused(std::process::Child);

impl Paused {
    pub fn start(ws: &Workspace, args: &[&str], step: &str) -> Paused {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = Command::new(BIN)
            .args(args)
            .arg("--workspace")
            .arg(ws.root())
            .env("EVIDENCE_STORE_PAUSE_AT", step)
            .env_remove("PROMPT_DIARY_WORKSPACE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stderr.as_mut().expect("piped"))
            .read_line(&mut line)
            .expect("reads stderr");
        assert_eq!(line, format!("evidence-store: paused at {step}\n"));
        Paused(child)
    }

    /// Lets it go on; returns its stdout once it has succeeded.
    pub fn release(mut self) -> String {
        use std::io::Write;
        self.0
            .stdin
            .take()
            .expect("piped")
            .write_all(b"\n")
            .expect("released");
        let out = self.0.wait_with_output().expect("waits");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).expect("UTF-8")
    }
}

/// The project of [`Workspace::load_test`].
pub const LOAD_PROJECT: &str = "Load-000000000000";

impl Workspace {
    /// A workspace of one project, `LOAD_PROJECT`, with `sessions` sessions of `turns`
    /// two-line turns each, for load tests (session files are not needed to write evidence).
    pub fn load_test(sessions: usize, turns: usize) -> Workspace {
        let ws = Workspace::one_project("2026-01-15", LOAD_PROJECT, "Load");
        let mut index = String::new();
        for s in 1..=sessions {
            let turns: Vec<Value> = (1..=turns)
                .map(|t| serde_json::json!({"turn_ref": format!("T{t:04}"), "turn_start_line": 2 * t - 1, "turn_end_line": 2 * t}))
                .collect();
            let row = serde_json::json!({"session_ref": format!("S{s:04}"), "source": "codex", "source_session_id": "x",
                "session_path": format!("sessions/codex/{s}.jsonl"), "target_start_line": 1, "target_end_line": 2 * turns.len(), "turns": turns});
            index.push_str(&format!("{row}\n"));
        }
        ws.write(
            &format!("projects/{LOAD_PROJECT}/sessions.index.jsonl"),
            index,
        );
        ws
    }

    /// [`Workspace::load_test`] as prompt-diary 0.2.20 prepares it (`schema_version` 7),
    /// with its Codex session files: each turn a human message, then the agent's answer
    /// (0.2.20's trigger is read from the turn's first line).
    pub fn load_test_0_2_20(sessions: usize, turns: usize) -> Workspace {
        let ws = Workspace::load_test(sessions, turns);
        ws.write(
            "metadata.json",
            r#"{"report_date": "2026-01-15", "schema_version": 7, "status": "final", "timezone": "UTC"}"#,
        );
        for s in 1..=sessions {
            let mut lines = String::new();
            for t in 1..=turns {
                let human = serde_json::json!({"type": "response_item", "payload": {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": format!("please do step {t} of session {s}")}]}});
                let agent = serde_json::json!({"type": "response_item", "payload": {"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": format!("done with step {t}")}]}});
                lines.push_str(&format!("{human}\n{agent}\n"));
            }
            ws.write(
                &format!("projects/{LOAD_PROJECT}/sessions/codex/{s}.jsonl"),
                lines,
            );
        }
        ws
    }
}

/// A compact read's text with its tool-output handles taken out (each is the last member of
/// a trimmed entry), after checking that exactly the trimmed entries have one: what
/// prompt-diary itself answers. Returns the text and how many handles it held.
pub fn strip_handles(text: &str) -> (String, usize) {
    let member = regex::Regex::new(
        r#",\n {10}"handle": "[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}""#,
    )
    .expect("pattern");
    let parsed: Value = serde_json::from_str(text).expect("JSON");
    let mut trimmed = 0;
    for record in parsed["records"].as_array().into_iter().flatten() {
        for list in ["tool_uses", "tool_results"] {
            for entry in record[list].as_array().into_iter().flatten() {
                assert_eq!(
                    entry.get("handle").is_some(),
                    entry["truncated"] == true,
                    "{entry}"
                );
                trimmed += usize::from(entry["truncated"] == true);
            }
        }
    }
    let stripped = member.replace_all(text, "").into_owned();
    assert_eq!(member.find_iter(text).count(), trimmed);
    (stripped, trimmed)
}

/// A 0.2.20 page's text with the handles of its sparse records taken out (each is the
/// first member of its entry, before `input_summary` or `kind`), and how many it held.
/// Only for pages whose boundaries the handles did not move (small sessions).
pub fn strip_sparse_handles(text: &str) -> (String, usize) {
    let member = regex::Regex::new(
        r#""handle":"[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}","#,
    )
    .expect("pattern");
    let count = member.find_iter(text).count();
    (member.replace_all(text, "").into_owned(), count)
}

/// Spawns `cmd` with piped stdin and stdout and its stderr going to a temporary file,
/// returned beside the child (read it once the child is done).
pub fn spawn_logged(
    cmd: &mut std::process::Command,
) -> (std::process::Child, tempfile::NamedTempFile) {
    use std::process::Stdio;
    let log = tempfile::NamedTempFile::new().expect("log file");
    let child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log.reopen().expect("log"))
        .spawn()
        .expect("spawns");
    (child, log)
}

/// Waits for `child` to exit; a child still running after `hang` (a bound far above any
/// normal run, for tests of things that used to wait for ever) is killed and reaped, and
/// `None` says so. Not a timing check: callers fail only on a hang.
pub fn exit_or_hang(
    child: &mut std::process::Child,
    hang: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("waits") {
            return Some(status);
        }
        if started.elapsed() > hang {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Runs the binary on the workspace with `envs` added; one that hangs is killed after
/// 60 s so that the test fails instead.
pub fn run_or_kill(ws: &Workspace, envs: &[(&str, &str)], args: &[&str]) -> Output {
    let child = Command::new(BIN)
        .args(args)
        .arg("--workspace")
        .arg(ws.root())
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .envs(envs.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawns");
    output_or_kill(child, std::time::Duration::from_secs(60))
}

/// The output of `child`; one still running after `hang` (a bound far above any normal
/// run) is killed first, so that a hang fails the test instead of hanging it.
pub fn output_or_kill(
    mut child: std::process::Child,
    hang: std::time::Duration,
) -> std::process::Output {
    let started = std::time::Instant::now();
    while child.try_wait().expect("waits").is_none() && started.elapsed() < hang {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    child.wait_with_output().expect("output")
}

/// `serve` on `root`, spoken to until its `prompt_diary_ping` is answered, then its input
/// closed. The ping waits for the start, so whatever the start says on stderr has been
/// said by then (with no client at all the process may end before its start does).
/// Returns stdout's lines and stderr.
pub fn serve_until_a_ping(root: &Path) -> (Vec<String>, String) {
    use std::io::{BufRead, BufReader, Write};
    let (mut child, log) = spawn_logged(
        Command::new(bin())
            .arg("--workspace")
            .arg(root)
            .arg("serve")
            .env("RUST_LOG", "off"),
    );
    let mut stdin = child.stdin.take().expect("stdin");
    for message in [
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "prompt_diary_ping", "arguments": {}}}),
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
    let status = exit_or_hang(&mut child, std::time::Duration::from_secs(60));
    assert!(status.is_some(), "serve exits at the end of its input");
    let stderr = std::fs::read_to_string(log.path()).expect("stderr");
    (lines, stderr)
}
