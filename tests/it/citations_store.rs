//! Agent citations through the real binary: taken at import from sessions whose assistant
//! messages carry every kind of marker and JSON blocks, verified against the project
//! directory (symlinks out, FIFOs, missing files, lines out of range), kept when files do
//! not change, re-checked by `verify-citations`, and answered by the two tools.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{BIN, PROJECT, Workspace, call, call_ok, connect, text};
use serde_json::{Value, json};

const C1: &str = "projects/Demo-0123456789ab/sessions/claude-code/c1.jsonl";
const X1: &str = "projects/Demo-0123456789ab/sessions/codex/x1.jsonl";

/// A project directory the sessions ran in: `src/a.py` (3 lines), a symlink to a file
/// outside it, a symlinked directory leading out, and a FIFO.
struct Project {
    dir: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.py"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(outside.path().join("secret.py"), "s1\ns2\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.py"), root.join("link.py")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        let fifo = root.join("pipe.py");
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        Project { dir, outside }
    }

    fn cwd(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }
}

fn claude_text(cwd: &str, text: &str) -> String {
    json!({"type": "assistant", "cwd": cwd, "message": {"role": "assistant",
        "content": [{"type": "text", "text": text}]}})
    .to_string()
}

/// The Claude session S0001 (8 lines, turns 1-6 and 7-8) with citations on lines 2, 4
/// and 7, written with `eol` between lines.
fn claude_session(p: &Project, eol: &str) -> String {
    let cwd = p.cwd();
    let abs = format!("{}:1", p.outside.path().join("secret.py").display());
    let markers = [
        "I fixed it.",
        "**Evidence**: src/a.py:2-3",
        "**Evidence**: src/a.py:9",
        "**Evidence**: src/gone.py:1",
        "**Evidence**: link.py:1",
        "**Evidence**: out/secret.py:1",
        "**Evidence**: pipe.py:1",
        &format!("**Evidence**: {abs}"),
        "**Evidence**: pytest tests/test_a.py::test_x - PASS",
        "**Evidence**: pytest tests/test_a.py::test_y - FAIL",
        "**Evidence**: [Spec](https://example.com/spec)",
        "**Evidence**: src/a.py:2-3",
        "**Evidence**:\n```bash\npytest -q\n4 passed\n```",
    ]
    .join(eol);
    let json_block = "Done.\n```json\n{\"evidence\": [{\"type\": \"file\", \"reference\": \"src/a.py:1\", \"context\": \"the import\"}, {\"reference\": \"notes\"}]}\n```";
    let lines = [
        r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"Fix it."}]}}"#
            .to_owned(),
        claude_text(cwd, &markers),
        r#"{"type":"user","message":{"role":"user","content":"go on"}}"#.to_owned(),
        claude_text(cwd, json_block),
        r#"{"type":"user","message":{"role":"user","content":"thanks"}}"#.to_owned(),
        r#"{"type":"system","subtype":"x","text":"**Evidence**: src/a.py:1"}"#.to_owned(),
        claude_text(cwd, "Also **Evidence**: src/a.py:3"),
        r#"{"type":"system","subtype":"turn_duration","durationMs":5}"#.to_owned(),
    ];
    let mut out = lines.join(eol);
    out.push_str(eol);
    out
}

/// The Codex session S0002: its `cwd` only in `turn_context`, a message with a citation
/// and the same message again as an `agent_message` echo.
fn codex_session(p: &Project) -> String {
    let msg = "All tests pass.\n**Evidence**: src/a.py:1";
    [
        json!({"type": "session_meta", "payload": {"id": "x1", "cwd": "/nonexistent"}}),
        json!({"type": "turn_context", "payload": {"cwd": p.cwd()}}),
        json!({"type": "event_msg", "payload": {"type": "user_message", "message": "run"}}),
        json!({"type": "response_item", "payload": {"type": "reasoning", "summary": []}}),
        json!({"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}}),
        json!({"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": msg}]}}),
        json!({"type": "event_msg", "payload": {"type": "agent_message", "message": msg}}),
        json!({"type": "event_msg", "payload": {"type": "token_count", "info": null}}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect()
}

fn workspace(p: &Project, eol: &str) -> Workspace {
    let ws = Workspace::example();
    ws.write(C1, claude_session(p, eol));
    ws.write(X1, codex_session(p));
    ws
}

fn read_args(session_ref: &str) -> Value {
    json!({"project_key": PROJECT, "session_ref": session_ref})
}

/// `(line, turn, type, reference, status)` of each citation in an answer.
fn summary(answer: &Value) -> Vec<(u64, String, String, String, String)> {
    answer["citations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["line"].as_u64().unwrap(),
                c["turn_ref"].as_str().unwrap_or("-").to_owned(),
                c["type"].as_str().unwrap().to_owned(),
                c["reference"].as_str().unwrap().to_owned(),
                c["verification"]["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn row(line: u64, turn: &str, kind: &str, reference: &str, status: &str) -> Vec<String> {
    vec![
        line.to_string(),
        turn.to_owned(),
        kind.to_owned(),
        reference.to_owned(),
        status.to_owned(),
    ]
}

fn rows(answer: &Value) -> Vec<Vec<String>> {
    summary(answer)
        .into_iter()
        .map(|(l, t, k, r, s)| row(l, &t, &k, &r, &s))
        .collect()
}

#[tokio::test]
async fn markers_of_every_type_are_indexed_verified_and_served() {
    let p = Project::new();
    let ws = workspace(&p, "\n");
    ws.ok(&["import"]);
    // The store with citations verifies clean.
    let verified = ws.ok(&["verify"]);
    assert!(verified.contains("no problems found"), "{verified}");
    let client = connect(&ws).await;

    let s1 = call_ok(&client, "read_agent_citations", read_args("S0001")).await;
    let abs = format!("{}:1", p.outside.path().join("secret.py").display());
    assert_eq!(s1["status"], "ok");
    assert_eq!(
        rows(&s1),
        [
            row(2, "T0001", "file", "src/a.py:2-3", "ok"),
            row(2, "T0001", "file", "src/a.py:9", "line_out_of_range"),
            row(2, "T0001", "file", "src/gone.py:1", "missing_file"),
            row(2, "T0001", "file", "link.py:1", "outside_project"),
            row(2, "T0001", "file", "out/secret.py:1", "outside_project"),
            row(2, "T0001", "file", "pipe.py:1", "unchecked"),
            row(2, "T0001", "file", &abs, "outside_project"),
            row(
                2,
                "T0001",
                "test",
                "pytest tests/test_a.py::test_x - PASS",
                "unchecked"
            ),
            row(
                2,
                "T0001",
                "test",
                "pytest tests/test_a.py::test_y - FAIL",
                "unchecked"
            ),
            row(
                2,
                "T0001",
                "url",
                "Spec: https://example.com/spec",
                "unchecked"
            ),
            row(2, "T0001", "command", "pytest -q", "unchecked"),
            row(4, "T0001", "file", "src/a.py:1", "ok"),
            row(4, "T0001", "unknown", "notes", "unchecked"),
            row(7, "T0002", "file", "src/a.py:3", "ok"),
        ]
    );
    assert_eq!(s1["citation_count"], 14);
    let first = &s1["citations"][0];
    assert_eq!(first["verification"]["cwd"], p.cwd());
    assert_eq!(first["verification"]["file_lines"], 3);
    assert_eq!(
        first["verification"]["sha256"],
        file_sha256(&p.dir.path().join("src/a.py"))
    );
    assert!(first["context"].as_str().unwrap().contains("src/a.py:2-3"));
    assert_eq!(s1["citations"][11]["context"], "the import");
    // Every citation's span is inside its message and starts at its marker or object.
    let message = serde_json::from_str::<Value>(
        String::from_utf8(ws.read(C1))
            .unwrap()
            .lines()
            .nth(1)
            .unwrap(),
    )
    .unwrap()["message"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    for c in s1["citations"].as_array().unwrap().iter().take(11) {
        let (offset, len) = (
            c["offset"].as_u64().unwrap() as usize,
            c["len"].as_u64().unwrap() as usize,
        );
        assert!(offset + len <= message.len());
        assert!(message[offset..offset + len].starts_with("**Evidence**:"));
    }

    // One turn only.
    let t2 = call_ok(
        &client,
        "read_agent_citations",
        json!({"project_key": PROJECT, "session_ref": "S0001", "turn_ref": "T0002"}),
    )
    .await;
    assert_eq!(rows(&t2), [row(7, "T0002", "file", "src/a.py:3", "ok")]);

    // Codex: the message is counted once, checked against the turn_context's cwd.
    let s2 = call_ok(&client, "read_agent_citations", read_args("S0002")).await;
    assert_eq!(rows(&s2), [row(6, "T0001", "file", "src/a.py:1", "ok")]);
    assert_eq!(s2["citations"][0]["verification"]["cwd"], p.cwd());

    // Structured errors.
    let unknown = call_ok(
        &client,
        "read_agent_citations",
        json!({"project_key": "Nope", "session_ref": "S0001"}),
    )
    .await;
    assert_eq!(unknown["status"], "invalid");
    assert_eq!(unknown["errors"][0]["field"], "project_key");
    let bad_turn = call_ok(
        &client,
        "read_agent_citations",
        json!({"project_key": PROJECT, "session_ref": "S0001", "turn_ref": "T9"}),
    )
    .await;
    assert_eq!(bad_turn["errors"][0]["field"], "turn_ref");
    let missing = call(
        &client,
        "read_agent_citations",
        json!({"project_key": PROJECT}),
    )
    .await;
    assert_eq!(missing.is_error, Some(true));
    assert!(text(&missing).contains("session_ref\n  Field required"));
    client.cancel().await.unwrap();
}

/// The lowercase hex SHA-256 of a file, by `sha256sum`.
fn file_sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

#[tokio::test]
async fn search_ranks_filters_and_says_when_it_is_cut() {
    let p = Project::new();
    let ws = workspace(&p, "\n");
    ws.ok(&["import"]);
    let client = connect(&ws).await;
    let search = |args: Value| {
        let client = &client;
        async move { call_ok(client, "search_agent_citations", args).await }
    };
    let all = search(json!({"query": "a.py"})).await;
    assert_eq!(all["status"], "ok");
    assert_eq!(all["total_matches"], 7);
    assert_eq!(all["truncated"], false);
    let refs: Vec<(&str, &str, u64)> = all["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["session_ref"].as_str().unwrap(),
                r["reference"].as_str().unwrap(),
                r["line"].as_u64().unwrap(),
            )
        })
        .collect();
    // Whole-component path matches first (in workspace order), then substrings.
    assert_eq!(
        refs,
        [
            ("S0001", "src/a.py:2-3", 2),
            ("S0001", "src/a.py:9", 2),
            ("S0001", "src/a.py:1", 4),
            ("S0001", "src/a.py:3", 7),
            ("S0002", "src/a.py:1", 6),
            ("S0001", "pytest tests/test_a.py::test_x - PASS", 2),
            ("S0001", "pytest tests/test_a.py::test_y - FAIL", 2),
        ]
    );
    let exact = search(json!({"query": "SRC/A.PY:1"})).await;
    assert_eq!(exact["results"][0]["reference"], "src/a.py:1");
    let tests = search(json!({"query": "test_a", "type": "test"})).await;
    assert_eq!(tests["total_matches"], 2);
    let cut = search(json!({"query": "a.py", "limit": 2})).await;
    assert_eq!(cut["results"].as_array().unwrap().len(), 2);
    assert_eq!(cut["truncated"], true);
    assert_eq!(cut["total_matches"], all["total_matches"]);
    let project = search(json!({"query": "a.py", "project_key": "Nope"})).await;
    assert_eq!(project["errors"][0]["field"], "project_key");
    let limit = search(json!({"query": "a.py", "limit": 0})).await;
    assert_eq!(limit["errors"][0]["field"], "limit");
    let empty = search(json!({"query": " "})).await;
    assert_eq!(empty["errors"][0]["field"], "query");
    client.cancel().await.unwrap();
}

/// The same session with CRLF line ends (between lines and inside the messages) gives
/// the same citations as with LF.
#[tokio::test]
async fn crlf_and_lf_sessions_give_the_same_citations() {
    let p = Project::new();
    let lf = workspace(&p, "\n");
    let crlf = workspace(&p, "\r\n");
    lf.ok(&["import"]);
    crlf.ok(&["import"]);
    let a = connect(&lf).await;
    let b = connect(&crlf).await;
    let strip = |v: Value| -> Vec<Value> {
        v["citations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let mut c = c.clone();
                let o = c.as_object_mut().unwrap();
                o.remove("offset");
                o.remove("len");
                c
            })
            .collect()
    };
    let from_lf = strip(call_ok(&a, "read_agent_citations", read_args("S0001")).await);
    let from_crlf = strip(call_ok(&b, "read_agent_citations", read_args("S0001")).await);
    assert_eq!(from_lf.len(), 14);
    assert_eq!(from_lf, from_crlf);
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

/// Runs `import` with the debug-build scan counter on; returns how many session files it
/// scanned for citations (0 when nothing was written).
fn import_scans(ws: &Workspace) -> usize {
    let out = Command::new(BIN)
        .args(["import", "--workspace"])
        .arg(ws.root())
        .env("EVIDENCE_STORE_COUNT_SCANS", "1")
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("evidence-store: citation scans: "))
        .map_or(0, |n| n.parse().unwrap())
}

fn count_citations(ws: &Workspace, session_ref: &str) -> usize {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = connect(ws).await;
        let v = call_ok(&client, "read_agent_citations", read_args(session_ref)).await;
        client.cancel().await.unwrap();
        v["citation_count"].as_u64().unwrap() as usize
    })
}

#[test]
fn unchanged_files_are_not_scanned_again() {
    let p = Project::new();
    let ws = workspace(&p, "\n");
    assert_eq!(import_scans(&ws), 2);
    assert_eq!(import_scans(&ws), 0, "nothing changed");
    // Touched, same lines: the line table and the citations are kept.
    let bytes = ws.read(C1);
    std::fs::write(ws.path(C1), &bytes).unwrap();
    assert_eq!(import_scans(&ws), 0);
    // Changed: that file alone is scanned, and its citations replaced.
    ws.write(
        C1,
        claude_session(&p, "\n").replace("src/a.py:3\"", "src/a.py:2\""),
    );
    assert_eq!(import_scans(&ws), 1);
    assert_eq!(count_citations(&ws, "S0001"), 14);
    // A changed index (turns) with unchanged files re-labels turns without a scan.
    let index = "projects/Demo-0123456789ab/sessions.index.jsonl";
    let text = String::from_utf8(ws.read(index)).unwrap();
    ws.write(
        index,
        text.replace("\"turn_end_line\": 6", "\"turn_end_line\": 3")
            .replace("\"turn_start_line\": 7", "\"turn_start_line\": 4"),
    );
    assert_eq!(import_scans(&ws), 0);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = connect(&ws).await;
        let v = call_ok(&client, "read_agent_citations", read_args("S0001")).await;
        assert_eq!(v["citations"][11]["line"], 4);
        assert_eq!(v["citations"][11]["turn_ref"], "T0002");
        client.cancel().await.unwrap();
    });
    // A removed file takes its citations with it.
    std::fs::remove_file(ws.path(X1)).unwrap();
    assert_eq!(import_scans(&ws), 0);
    assert_eq!(count_citations(&ws, "S0002"), 0);
    // It comes back: scanned again.
    ws.write(X1, codex_session(&p));
    assert_eq!(import_scans(&ws), 1);
    assert_eq!(count_citations(&ws, "S0002"), 1);
}

#[test]
fn verify_citations_stores_what_changed() {
    let p = Project::new();
    let ws = workspace(&p, "\n");
    ws.ok(&["import"]);
    let out = ws.ok(&["verify-citations"]);
    assert!(
        out.contains("checked 15 citation(s) in 2 session(s)"),
        "{out}"
    );
    assert!(out.contains(": 0 changed, nothing written"), "{out}");
    // The missing file appears and the cited file grows.
    std::fs::write(p.dir.path().join("src/gone.py"), "x\n").unwrap();
    std::fs::write(p.dir.path().join("src/a.py"), "1\n2\n3\n4\n5\n6\n7\n8\n9\n").unwrap();
    let out = ws.ok(&["verify-citations", PROJECT, "S0002"]);
    assert!(
        out.contains("checked 1 citation(s) in 1 session(s)"),
        "{out}"
    );
    assert!(out.contains(": 1 changed, new results stored"), "{out}");
    let out = ws.ok(&["verify-citations"]);
    // S0001: a.py:2-3, a.py:9 (now ok), gone.py, a.py:1, a.py:3 changed.
    assert!(out.contains(": 5 changed, new results stored"), "{out}");
    assert!(out.contains("ok 6"), "{out}");
    let out = ws.ok(&["verify-citations"]);
    assert!(out.contains(": 0 changed"), "{out}");
    let err = ws.fails(&["verify-citations", "Nope"]);
    assert!(err.contains("unknown project_key: Nope"), "{err}");
    let err = ws.fails(&["verify-citations", PROJECT, "S0404"]);
    assert!(err.contains("unknown session_ref S0404"), "{err}");
}

/// A store of an older schema gains the citation tables when opened, and the next import
/// scans every session once.
#[test]
fn the_upgrade_to_4_scans_every_session_once() {
    let ws = Workspace::example();
    std::fs::create_dir_all(ws.path(".evidence-store")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1.redb"),
        ws.store(),
    )
    .unwrap();
    assert_eq!(import_scans(&ws), 2);
    assert_eq!(import_scans(&ws), 0);
}

/// A version-5 store keeps its line tables, but its citations were taken under older
/// rules: the upgrade drops them and the next import takes every session's citations
/// again, once.
#[test]
fn the_upgrade_to_6_takes_every_session_s_citations_again() {
    let p = Project::new();
    let ws = workspace(&p, "\n");
    assert_eq!(import_scans(&ws), 2);
    let before = ws.ok(&["dump", "citations", "--json"]);
    {
        let db = redb::Database::open(ws.store()).unwrap();
        let txn = db.begin_write().unwrap();
        let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
        txn.open_table(meta)
            .unwrap()
            .insert("schema_version", 5)
            .unwrap();
        txn.commit().unwrap();
    }
    let refused = ws.fails(&["dump", "citations"]);
    assert!(refused.contains("evidence-store import"), "{refused}");
    assert_eq!(import_scans(&ws), 2);
    assert_eq!(import_scans(&ws), 0);
    assert_eq!(ws.ok(&["dump", "citations", "--json"]), before);
}

/// Imports racing each other and a server: every answer is one consistent set of
/// citations, never a mix or a doubled set.
#[tokio::test]
async fn concurrent_imports_and_a_server_agree() {
    let p = Project::new();
    let ws = workspace(&p, "\n");
    ws.ok(&["import"]);
    let client = connect(&ws).await;
    for round in 0..3 {
        let extra = "\\n**Evidence**: src/a.py:1".repeat(round);
        let mut session = claude_session(&p, "\n");
        session = session.replace("Also **Evidence**: src/a.py:3", &format!("Also{extra}"));
        ws.write(C1, session);
        let children: Vec<_> = (0..3)
            .map(|_| {
                Command::new(BIN)
                    .args(["import", "--workspace"])
                    .arg(ws.root())
                    .env_remove("PROMPT_DIARY_WORKSPACE")
                    .output()
            })
            .collect();
        for out in children {
            assert!(out.unwrap().status.success());
        }
        let v = call_ok(&client, "read_agent_citations", read_args("S0001")).await;
        let line7 = v["citations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["line"] == 7)
            .count();
        // A repeated citation in one message is kept once.
        assert_eq!(line7, usize::from(round > 0), "round {round}");
    }
    client.cancel().await.unwrap();
}

/// Lines that hold a needle but are not citing messages (broken JSON, invalid UTF-8,
/// nesting far past the parser's limit, a Codex echo alone, a user message) are parsed,
/// found to cite nothing, and the import goes on.
#[tokio::test]
async fn garbage_lines_with_markers_cite_nothing_and_import_goes_on() {
    let p = Project::new();
    let ws = workspace(&p, "\n");
    let deep = format!(
        "{}\"**Evidence**: src/a.py:1\"{}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let mut bytes = Vec::new();
    for line in [
        b"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"**Evidence**: src/a.py:1".to_vec(),
        b"{\"type\":\"assistant\",\"cwd\":\"\xff\xfe\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"\xff **Evidence**: src/a.py:1\"}]}}".to_vec(),
        deep.into_bytes(),
        br#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"**Evidence**: src/a.py:1"}]}}"#.to_vec(),
        b"\x00**Evidence**: src/a.py:1 \\\"evidence\\\" \\\"citations\\\"".to_vec(),
        claude_text(p.cwd(), "ok **Evidence**: src/a.py:2").into_bytes(),
    ] {
        bytes.extend_from_slice(&line);
        bytes.push(b'\n');
    }
    ws.write(C1, &bytes);
    let codex_echo_only = json!({"type": "event_msg", "payload": {"type": "agent_message", "message": "**Evidence**: src/a.py:1"}});
    ws.write(X1, format!("{codex_echo_only}\n"));
    ws.ok(&["import"]);
    let client = connect(&ws).await;
    let s1 = call_ok(&client, "read_agent_citations", read_args("S0001")).await;
    // Line 2 decodes (invalid bytes become U+FFFD) and its cwd is not a directory.
    assert_eq!(
        rows(&s1),
        [
            row(2, "T0001", "file", "src/a.py:1", "unchecked"),
            row(6, "T0001", "file", "src/a.py:2", "ok"),
        ]
    );
    let s2 = call_ok(&client, "read_agent_citations", read_args("S0002")).await;
    assert_eq!(s2["citation_count"], 0);
    client.cancel().await.unwrap();
}

/// With JSON extraction off (`--citations-json off`, Ralph's `enable_json = false`) only
/// the markers are read; a change of the setting makes the next import take every
/// session's citations again, and an unchanged one scans nothing.
#[test]
fn the_json_setting_is_applied_and_a_change_takes_citations_again() {
    let p = Project::new();
    let ws = workspace(&p, "\n");
    let scans = |json: &str| {
        let out = Command::new(BIN)
            .args(["import", "--citations-json", json, "--workspace"])
            .arg(ws.root())
            .env("EVIDENCE_STORE_COUNT_SCANS", "1")
            .env_remove("PROMPT_DIARY_WORKSPACE")
            .env_remove("EVIDENCE_STORE_CITATIONS_JSON")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stderr)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("evidence-store: citation scans: "))
            .map_or(0, |n| n.parse::<usize>().unwrap())
    };
    let s1 = |ws: &Workspace| {
        let dumped: Value = serde_json::from_str(&ws.ok(&["dump", "citations", "--json"])).unwrap();
        dumped["projects"][0]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["session_ref"] == "S0001")
            .map(|s| s["by_type"].clone())
            .unwrap()
    };
    assert_eq!(scans("on"), 2);
    assert_eq!(s1(&ws)["unknown"], 1, "the JSON block's untyped citation");
    assert_eq!(scans("off"), 2);
    assert_eq!(s1(&ws).get("unknown"), None, "no JSON block read");
    assert_eq!(scans("off"), 0);
    assert_eq!(scans("on"), 2);
    assert_eq!(s1(&ws)["unknown"], 1);
}
