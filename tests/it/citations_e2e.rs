//! Agent citations end to end, through the real binary: a generated workspace whose
//! assistant messages carry markers of every type and a JSON evidence block (Claude Code,
//! a CRLF twin of it, and Codex with its echoed `agent_message`) is imported, read and
//! searched with both MCP tools, exported to receipts, queried with the `jq` lines Ralph
//! documents, and exported again byte for byte.

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use common::{Workspace, call_ok, connect, hex_sha256};
use serde_json::{Value, json};

const P: &str = "Cite-0123456789ab";
const RECEIPTS: &str = "projects/Cite-0123456789ab/receipts";

const T001_A: &str = "I've implemented the authentication feature.

**Evidence**: src/auth.py:2-3
**Evidence**: src/nope.py:1
**Evidence**: src/auth.py:999
**Evidence**: pytest tests/test_auth.py::test_login - PASS
**Evidence**: pytest tests/test_api.py::test_create_user - FAIL
**Evidence**: lint - PASS
**Evidence**: [OWASP ASVS](https://owasp.org/asvs/)
**Evidence**: src/auth.py:2-3
**Evidence**:
```bash
pytest tests/test_auth.py -v
2 passed
```
Done.";

const T001_B: &str = "One more thing.\n**Evidence**: src/auth.py:1\n**Evidence**: src/nope.py:1";

const T002: &str = "Task complete. Evidence:

```json
{\"evidence\": [
  {\"type\": \"file\", \"reference\": \"src/auth.py:42\", \"context\": \"Added JWT validation\"},
  {\"type\": \"test\", \"reference\": \"pytest tests/test_auth.py - PASS\"},
  {\"reference\": \"no type here\"}
]}
```";

const CODEX: &str = "All tests pass.\n**Evidence**: pytest tests/test_auth.py::test_logout - PASS\n**Evidence**: src/auth.py:10";

fn claude_user(ts: &str, cwd: &str, text: &str) -> Value {
    json!({"type": "user", "timestamp": ts, "cwd": cwd, "message": {"role": "user", "content": text}})
}

fn claude_assistant(ts: &str, cwd: &str, text: &str) -> Value {
    json!({"type": "assistant", "timestamp": ts, "cwd": cwd,
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})
}

fn index_row(
    session_ref: &str,
    source: &str,
    path: &str,
    lines: u64,
    turns: &[(&str, u64, u64)],
) -> String {
    let turns: Vec<Value> = turns
        .iter()
        .map(|(t, s, e)| json!({"turn_ref": t, "turn_start_line": s, "turn_end_line": e, "target_subagents": []}))
        .collect();
    format!(
        "{}\n",
        json!({"session_ref": session_ref, "source": source, "source_session_id": session_ref,
            "session_path": path, "subagent_path": "", "target_start_line": 1, "target_end_line": lines, "turns": turns})
    )
}

/// The Claude session's lines; `crlf` writes CRLF line ends, in the file and in the texts.
fn claude_session(cwd: &str, crlf: bool, t002: &str) -> Vec<u8> {
    let nl = |s: &str| {
        if crlf {
            s.replace('\n', "\r\n")
        } else {
            s.to_owned()
        }
    };
    let lines = [
        claude_user(
            "2026-01-20T12:00:00.000Z",
            cwd,
            "Implement authentication for the login endpoint",
        ),
        claude_assistant("2026-01-20T12:01:00.123456Z", cwd, &nl(T001_A)),
        claude_assistant("2026-01-20T12:02:00+01:00", cwd, &nl(T001_B)),
        claude_user("2026-01-20T12:03:00Z", cwd, "Now cite as JSON"),
        claude_assistant("2026-01-20T12:04:00.5Z", cwd, &nl(t002)),
    ];
    let end = if crlf { "\r\n" } else { "\n" };
    lines
        .iter()
        .map(|l| format!("{l}{end}"))
        .collect::<String>()
        .into_bytes()
}

fn codex_session(cwd: &str) -> Vec<u8> {
    let lines = [
        json!({"type": "session_meta", "timestamp": "2026-01-20T13:00:00Z", "payload": {"id": "x", "cwd": cwd}}),
        json!({"type": "event_msg", "timestamp": "2026-01-20T13:00:01Z", "payload": {"type": "user_message", "message": "Run the tests"}}),
        json!({"type": "response_item", "timestamp": "2026-01-20T13:00:02Z",
            "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": CODEX}]}}),
        json!({"type": "event_msg", "timestamp": "2026-01-20T13:00:03Z", "payload": {"type": "agent_message", "message": CODEX}}),
    ];
    lines
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into_bytes()
}

/// The workspace, with the cited project's code at `<root>/code` (`src/auth.py`, 50 lines).
fn workspace() -> Workspace {
    let ws = Workspace::one_project("2026-01-20", P, "Cite");
    let auth: String = (1..=50).map(|i| format!("line {i}\n")).collect();
    ws.write("code/src/auth.py", auth);
    let cwd = ws.path("code").display().to_string();
    ws.write(
        &format!("projects/{P}/sessions/claude-code/lf.jsonl"),
        claude_session(&cwd, false, T002),
    );
    ws.write(
        &format!("projects/{P}/sessions/claude-code/crlf.jsonl"),
        claude_session(&cwd, true, T002),
    );
    ws.write(
        &format!("projects/{P}/sessions/codex/x.jsonl"),
        codex_session(&cwd),
    );
    let claude_turns = [("T0001", 1, 3), ("T0002", 4, 5)];
    let index = [
        index_row(
            "S0001",
            "claude-code",
            "sessions/claude-code/lf.jsonl",
            5,
            &claude_turns,
        ),
        index_row(
            "S0002",
            "claude-code",
            "sessions/claude-code/crlf.jsonl",
            5,
            &claude_turns,
        ),
        index_row(
            "S0003",
            "codex",
            "sessions/codex/x.jsonl",
            4,
            &[("T0001", 1, 4)],
        ),
    ]
    .concat();
    ws.write(&format!("projects/{P}/sessions.index.jsonl"), index);
    ws
}

/// `(type, reference, context)` of each citation in a tool answer.
fn triples(answer: &Value) -> Vec<(String, String, Value)> {
    answer["citations"]
        .as_array()
        .expect("citations")
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or_default().to_owned(),
                c["reference"].as_str().unwrap_or_default().to_owned(),
                c["context"].clone(),
            )
        })
        .collect()
}

/// Every receipt file's bytes, by name.
fn receipts(ws: &Workspace) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(ws.path(RECEIPTS))
        .expect("receipts dir")
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect()
}

fn receipt(ws: &Workspace, session_ref: &str, turn_ref: &str) -> Value {
    let rel = format!("{RECEIPTS}/evidence-{session_ref}-{turn_ref}.json");
    serde_json::from_slice(&ws.read(&rel)).expect("receipt is JSON")
}

/// Runs `jq -c <filter>` on the receipt files (sorted by name). Without `jq` the test
/// fails, saying so, unless `EVIDENCE_STORE_SKIP_JQ=1` says to go on without it (`None`).
fn jq(ws: &Workspace, filter: &str) -> Option<Vec<String>> {
    let files: Vec<std::path::PathBuf> = receipts(ws)
        .keys()
        .map(|n| ws.path(RECEIPTS).join(n))
        .collect();
    let out = match Command::new("jq")
        .arg("-c")
        .arg(filter)
        .args(&files)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            assert!(
                std::env::var("EVIDENCE_STORE_SKIP_JQ").as_deref() == Ok("1"),
                "jq cannot run ({e}): this test checks the receipts with Ralph's own jq queries \
                 and needs it (apt-get install jq), or set EVIDENCE_STORE_SKIP_JQ=1 to answer \
                 them in Rust only"
            );
            return None;
        }
    };
    assert!(
        out.status.success(),
        "jq {filter}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .lines()
            .map(str::to_owned)
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_tools_export_receipts_and_reexport() {
    receipts_flow(workspace()).await;
}

/// The same on the workspace as prompt-diary 0.2.20 prepares it: citations do not depend
/// on the contract.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_tools_export_receipts_and_reexport_on_a_0_2_20_workspace() {
    let ws = workspace();
    ws.to_schema_7();
    receipts_flow(ws).await;
}

async fn receipts_flow(ws: Workspace) {
    ws.ok(&["import"]);

    // The tools: every marker type and the JSON block; CRLF and LF give the same citations;
    // the Codex echo is counted once.
    let client = connect(&ws).await;
    let read = |s: &str, t: Option<&str>| {
        let mut args = json!({"project_key": P, "session_ref": s});
        if let Some(t) = t {
            args["turn_ref"] = json!(t);
        }
        args
    };
    let lf = call_ok(&client, "read_agent_citations", read("S0001", None)).await;
    let crlf = call_ok(&client, "read_agent_citations", read("S0002", None)).await;
    assert_eq!(triples(&lf), triples(&crlf));
    let kinds: Vec<String> = triples(&lf).into_iter().map(|t| t.0).collect();
    // The repeat of src/nope.py:1 in the turn's second message counts once.
    assert_eq!(
        kinds,
        [
            "file", "file", "file", "test", "test", "url", "command", "file", "file", "test",
            "unknown"
        ]
    );
    assert_eq!(lf["citation_count"], 11);
    let t001 = call_ok(
        &client,
        "read_agent_citations",
        read("S0001", Some("T0001")),
    )
    .await;
    assert_eq!(t001["citation_count"], 8);
    let listed: Vec<(u64, u64, &str, &str)> = t001["citations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["line"].as_u64().unwrap(),
                c["content_index"].as_u64().unwrap(),
                c["reference"].as_str().unwrap(),
                c["verification"]["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (2, 0, "src/auth.py:2-3", "ok"),
            (2, 0, "src/nope.py:1", "missing_file"),
            (2, 0, "src/auth.py:999", "line_out_of_range"),
            (
                2,
                0,
                "pytest tests/test_auth.py::test_login - PASS",
                "unchecked"
            ),
            (
                2,
                0,
                "pytest tests/test_api.py::test_create_user - FAIL",
                "unchecked"
            ),
            (2, 0, "OWASP ASVS: https://owasp.org/asvs/", "unchecked"),
            (2, 0, "pytest tests/test_auth.py -v", "unchecked"),
            (3, 0, "src/auth.py:1", "ok"),
        ]
    );
    // A command block: the command is the reference, its output the context.
    let command = t001["citations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "command")
        .unwrap();
    assert_eq!(command["context"], "2 passed");
    let codex = call_ok(&client, "read_agent_citations", read("S0003", None)).await;
    assert_eq!(
        triples(&codex).into_iter().map(|t| t.1).collect::<Vec<_>>(),
        [
            "pytest tests/test_auth.py::test_logout - PASS",
            "src/auth.py:10"
        ]
    );
    assert_eq!(codex["citations"][0]["verification"]["status"], "unchecked");
    assert_eq!(codex["citations"][1]["verification"]["status"], "ok");
    let search = call_ok(
        &client,
        "search_agent_citations",
        json!({"query": "src/auth.py", "type": "file", "limit": 3}),
    )
    .await;
    let found: Vec<(&str, &str, u64, &str)> = search["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["project_key"].as_str().unwrap(),
                c["session_ref"].as_str().unwrap(),
                c["line"].as_u64().unwrap(),
                c["reference"].as_str().unwrap(),
            )
        })
        .collect();
    // Every one has the path asked for (the best rank): workspace order.
    assert_eq!(
        found,
        [
            (P, "S0001", 2, "src/auth.py:2-3"),
            (P, "S0001", 2, "src/auth.py:999"),
            (P, "S0001", 3, "src/auth.py:1"),
        ]
    );
    assert_eq!(search["truncated"], true);
    // Four in each Claude session (2-3, 999, 1, 42), one in the Codex one.
    assert_eq!(search["total_matches"], 9);
    client.cancel().await.expect("server stops");

    // Export: one receipt per citing turn.
    let out = ws.ok(&["export"]);
    assert!(
        out.contains("receipts: 5 written (0 already current), 0 stale removed, 0 skipped"),
        "{out}"
    );
    let names: Vec<String> = receipts(&ws).into_keys().collect();
    assert_eq!(
        names,
        [
            "evidence-S0001-T0001.json",
            "evidence-S0001-T0002.json",
            "evidence-S0002-T0001.json",
            "evidence-S0002-T0002.json",
            "evidence-S0003-T0001.json"
        ]
    );
    let r = receipt(&ws, "S0001", "T0001");
    assert_eq!(r["_schema"], "ralph_gold.evidence.v1");
    assert_eq!(r["attempt_id"], "S0001-T0001");
    // The turn's last timestamp (line 3, +01:00), in UTC with milliseconds.
    assert_eq!(r["timestamp"], "2026-01-20T11:02:00.000Z");
    // Nine stored citations; the repeat of src/nope.py:1 in the second message is kept once.
    assert_eq!(r["citation_count"], 8);
    assert_eq!(
        r["raw_output_hash"],
        hex_sha256(format!("{T001_A}\n{T001_B}").as_bytes())
    );
    assert_eq!(r["metadata"]["task_id"], "T0001");
    assert_eq!(
        r["metadata"]["task_title"],
        "Implement authentication for the login endpoint"
    );
    assert_eq!(r["metadata"]["project_key"], P);
    assert_eq!(r["metadata"]["session_ref"], "S0001");
    assert_eq!(r["metadata"]["lines"], json!([2, 2, 2, 2, 2, 2, 2, 3]));
    assert_eq!(r["metadata"]["verification"][0]["status"], "ok");
    assert_eq!(
        r["metadata"]["verification"][0]["sha256"],
        hex_sha256(&ws.read("code/src/auth.py"))
    );
    let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "_schema",
            "attempt_id",
            "timestamp",
            "citation_count",
            "citations",
            "raw_output_hash",
            "metadata"
        ]
    );
    let crlf_r = receipt(&ws, "S0002", "T0001");
    assert_eq!(crlf_r["citations"], r["citations"]);
    let codex_r = receipt(&ws, "S0003", "T0001");
    assert_eq!(codex_r["citation_count"], 2);
    assert_eq!(codex_r["timestamp"], "2026-01-20T13:00:03.000Z");
    assert_eq!(codex_r["metadata"]["task_title"], "Run the tests");
    assert_eq!(codex_r["raw_output_hash"], hex_sha256(CODEX.as_bytes()));

    // Ralph's "Parse with jq" queries, answered from the receipts parsed here; where jq
    // is installed, jq's own answers must be the same.
    let parsed: Vec<Value> = receipts(&ws)
        .values()
        .map(|bytes| serde_json::from_slice(bytes).expect("receipt is JSON"))
        .collect();
    let all = |r: &Value| r["citations"].as_array().cloned().unwrap_or_default();
    let counts: Vec<String> = parsed
        .iter()
        .map(|r| r["citation_count"].to_string())
        .collect();
    assert_eq!(counts, ["8", "3", "8", "3", "2"]);
    let listed: Vec<String> = parsed
        .iter()
        .flat_map(all)
        .map(|c| {
            Value::String(format!(
                "{}: {}",
                c["type"].as_str().unwrap_or_default(),
                c["reference"].as_str().unwrap_or_default()
            ))
            .to_string()
        })
        .collect();
    assert_eq!(listed.len(), 24);
    assert_eq!(listed[0], r#""file: src/auth.py:2-3""#);
    assert!(listed.contains(&r#""unknown: no type here""#.to_owned()));
    let files: Vec<Value> = parsed
        .iter()
        .flat_map(all)
        .filter(|c| c["type"] == "file")
        .collect();
    assert_eq!(files.len(), 2 * 5 + 1);
    // The receipts' sum is the count of every citation in a turn, as the tools count.
    let total: u64 = parsed
        .iter()
        .map(|r| r["citation_count"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 24);
    match jq(&ws, ".citation_count") {
        Some(jq_counts) => {
            assert_eq!(jq_counts, counts);
            let jq_listed = jq(&ws, r#".citations[] | "\(.type): \(.reference)""#).unwrap();
            assert_eq!(jq_listed, listed);
            let jq_files: Vec<Value> = jq(&ws, r#".citations[] | select(.type == "file")"#)
                .unwrap()
                .iter()
                .map(|line| serde_json::from_str(line).expect("jq prints JSON"))
                .collect();
            assert_eq!(jq_files, files);
            assert!(
                jq(&ws, r#".citations[] | select(.type == "file")"#)
                    .unwrap()
                    .iter()
                    .all(|f| f.starts_with(r#"{"type":"file","reference":"#))
            );
        }
        None => eprintln!("EVIDENCE_STORE_SKIP_JQ=1: the queries were answered in Rust only"),
    }

    // A re-export writes nothing and leaves every byte as it was.
    let before = receipts(&ws);
    let out = ws.ok(&["export"]);
    assert!(
        out.contains("receipts: 0 written (5 already current), 0 stale removed"),
        "{out}"
    );
    assert_eq!(receipts(&ws), before);
    // Also after the store is rebuilt from scratch.
    std::fs::remove_file(ws.store()).expect("remove store");
    ws.ok(&["import"]);
    ws.ok(&["export"]);
    assert_eq!(receipts(&ws), before);

    // Counts in dump.
    let text = ws.ok(&["dump", "citations"]);
    assert!(text.starts_with("Evidence citations: 24\n"), "{text}");
    assert!(
        text.contains("\n  S0003: 2 (file 1, test 1; ok 1, unchecked 1)\n"),
        "{text}"
    );
    let one: Value =
        serde_json::from_str(&ws.ok(&["dump", "citations", P, "S0001", "--json"])).unwrap();
    assert_eq!(one["citations"], 11);
    assert_eq!(
        one["projects"][0]["sessions"][0]["turns"][0]["citations"],
        8
    );
    assert_eq!(one["by_status"]["missing_file"], 1);
    let stats = ws.ok(&["dump", "--stats"]);
    assert!(stats.contains("\nEvidence citations: 24\n"), "{stats}");
    assert!(
        ws.fails(&["dump", "citations", "Nope-000000000000"])
            .contains("no such project")
    );
    ws.ok(&["verify-citations"]);
    ws.ok(&["verify"]);
}

#[test]
fn stale_receipts_go_and_foreign_files_stay() {
    let ws = workspace();
    ws.ok(&["import"]);
    ws.ok(&["export"]);
    // Files in receipts/ that are not ours: Ralph's own receipt (no project_key), another
    // project's, and a note.
    let ralph =
        r#"{"_schema": "ralph_gold.evidence.v1", "attempt_id": "x", "metadata": {"task_id": "1"}}"#;
    ws.write(&format!("{RECEIPTS}/evidence-ralph-1.json"), ralph);
    ws.write(&format!("{RECEIPTS}/notes.txt"), "keep");
    ws.write(&format!("{RECEIPTS}/evidence-garbage.json"), "{not json");
    // What a killed export leaves: a temp file of ours.
    let temp =
        format!("{RECEIPTS}/.evidence-S0001-T0001.json.4242.7.0123456789abcdef.evidence-store.tmp");
    ws.write(&temp, "{\"half");
    // T002 of S0001 no longer cites anything.
    let cwd = ws.path("code").display().to_string();
    ws.write(
        &format!("projects/{P}/sessions/claude-code/lf.jsonl"),
        claude_session(&cwd, false, "No evidence this time."),
    );
    ws.ok(&["import"]);
    let out = ws.ok(&["export"]);
    let dump = ws.ok(&["dump", "citations"]);
    assert!(out.contains("1 stale removed"), "{out}{dump}");
    assert!(!ws.path(&temp).exists());
    let names: Vec<String> = receipts(&ws).into_keys().collect();
    assert!(!names.contains(&"evidence-S0001-T0002.json".to_owned()));
    for kept in [
        "evidence-S0001-T0001.json",
        "evidence-S0002-T0002.json",
        "evidence-ralph-1.json",
        "notes.txt",
        "evidence-garbage.json",
    ] {
        assert!(names.contains(&kept.to_owned()), "{kept} in {names:?}");
    }

    // A session file changed after import: its receipts are kept, none is written for it.
    let before = ws.read(&format!("{RECEIPTS}/evidence-S0003-T0001.json"));
    let mut codex = codex_session(&cwd);
    codex.extend_from_slice(b"{\"type\":\"event_msg\"}\n");
    ws.write(&format!("projects/{P}/sessions/codex/x.jsonl"), codex);
    let out = ws.run(&["export"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().any(|line| line
            == "evidence-store: no receipt for Cite-0123456789ab/S0003: \
                projects/Cite-0123456789ab/sessions/codex/x.jsonl: it changed since it was \
                imported (its size changed); run `evidence-store import`"),
        "{stderr}"
    );
    assert_eq!(
        ws.read(&format!("{RECEIPTS}/evidence-S0003-T0001.json")),
        before
    );
}

#[test]
fn receipts_never_leave_the_workspace() {
    let ws = workspace();
    ws.ok(&["import"]);
    let outside = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(outside.path(), ws.path(RECEIPTS)).expect("symlink");
    let err = ws.fails(&["export"]);
    assert!(err.contains("outside the workspace"), "{err}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

    // A receipt name that is a symlink to a file outside is replaced, not written through.
    std::fs::remove_file(ws.path(RECEIPTS)).expect("unlink");
    std::fs::create_dir_all(ws.path(RECEIPTS)).expect("mkdir");
    let target = outside.path().join("victim.json");
    std::fs::write(&target, "victim").expect("write");
    std::os::unix::fs::symlink(
        &target,
        ws.path(&format!("{RECEIPTS}/evidence-S0001-T0001.json")),
    )
    .expect("symlink");
    let err = ws.fails(&["export"]);
    assert!(err.contains("outside the workspace"), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"victim");
}

/// `export` racing a `receipts/` swapped back and forth (atomically, renameat2
/// `RENAME_EXCHANGE`) with a symlink to an outside directory that holds files named like
/// our temp files and a stale receipt of ours: nothing outside is ever removed, changed or
/// added, and every export either succeeds or refuses naming the escape.
#[test]
fn receipt_cleanup_never_follows_a_swapped_receipts_dir() {
    use rustix::fs::{CWD, Mode, OFlags, RenameFlags, renameat_with};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    let ws = workspace();
    ws.ok(&["import"]);
    ws.ok(&["export"]);
    let made = receipts(&ws);
    let (_, ours) = made.iter().next().expect("export wrote receipts");
    let outside = tempfile::tempdir().expect("temp dir");
    // Many files named like our temp files (a wider window for a cleanup that lists one
    // directory and removes by path in another), and one receipt that is ours by content
    // (schema and project key) under a turn no receipt is kept for.
    let mut planted: BTreeMap<String, Vec<u8>> = (1..=200)
        .map(|n| {
            (
                format!(".evidence-S0001-T0001.json.99999.{n}.0123456789abcdef.evidence-store.tmp"),
                b"not ours to remove\n".to_vec(),
            )
        })
        .collect();
    let mut stale: Value = serde_json::from_slice(ours).expect("receipt");
    stale["metadata"]["session_ref"] = json!("S9999");
    planted.insert(
        "evidence-S9999-T0001.json".to_owned(),
        serde_json::to_vec(&stale).expect("json"),
    );
    // With every session file gone, each session is skipped and nothing is written, so
    // every export reaches the cleanup.
    std::fs::remove_dir_all(ws.path(&format!("projects/{P}/sessions"))).expect("rm sessions");
    for (name, bytes) in &planted {
        std::fs::write(outside.path().join(name), bytes).expect("plant");
    }
    let dir = ws.path(RECEIPTS);
    let link = ws.path("receipts.link");
    std::os::unix::fs::symlink(outside.path(), &link).expect("symlink");

    let real = rustix::fs::open(&dir, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty())
        .expect("open receipts");
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, dir, link) = (stop.clone(), dir.clone(), link.clone());
        std::thread::spawn(move || {
            let exchange =
                || renameat_with(CWD, &dir, CWD, &link, RenameFlags::EXCHANGE).expect("exchange");
            // At least one swap, however late this thread runs.
            let mut swaps = 0u64;
            loop {
                exchange();
                std::thread::sleep(Duration::from_millis(1));
                exchange();
                swaps += 1;
                std::thread::sleep(Duration::from_millis(1));
                if stop.load(Ordering::Relaxed) {
                    return swaps;
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut runs = 0;
    let mut failures = Vec::new();
    // At least one export, however slow the machine.
    while runs == 0 || Instant::now() < deadline {
        // The same temp names left inside by a killed export, put back before each run
        // through the real directory's descriptor (its path is being swapped): a cleanup
        // that lists the real directory and then removes by path would remove them outside.
        for name in planted.keys().filter(|n| n.starts_with('.')) {
            let fd = rustix::fs::openat(
                &real,
                name.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            )
            .expect("plant inside");
            drop(fd);
        }
        let out = ws.run(&["export"]);
        runs += 1;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success()
            && !stderr.contains("outside the workspace")
            && !stderr.contains("leaves the workspace")
        {
            failures.push(stderr);
        }
        let now: BTreeMap<String, Vec<u8>> = std::fs::read_dir(outside.path())
            .expect("outside dir")
            .flatten()
            .map(|e| {
                let bytes = std::fs::read(e.path()).unwrap_or_default();
                (e.file_name().to_string_lossy().into_owned(), bytes)
            })
            .collect();
        if now != planted {
            stop.store(true, Ordering::Relaxed);
            let _ = swapper.join();
            panic!(
                "export run {runs} changed the outside directory: {:?}",
                now.keys().collect::<Vec<_>>()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper");
    assert!(swaps > 0 && runs > 0, "{swaps} swaps, {runs} runs");
    assert!(failures.is_empty(), "{failures:?}");
    assert!(std::fs::symlink_metadata(&dir).expect("receipts").is_dir());
}

/// A `receipts/` that is a symlink to an outside directory, on an export that writes no
/// receipt (every session is skipped, so the cleanup is all it does there): the export
/// fails naming the directory as outside the workspace, and the temp-named file and the
/// stale receipt of ours there are both left alone.
#[test]
fn receipt_cleanup_refuses_a_receipts_dir_outside() {
    let ws = workspace();
    ws.ok(&["import"]);
    ws.ok(&["export"]);
    let made = receipts(&ws);
    let (_, ours) = made.iter().next().expect("export wrote receipts");
    let mut stale: Value = serde_json::from_slice(ours).expect("receipt");
    stale["metadata"]["session_ref"] = json!("S9999");
    let outside = tempfile::tempdir().expect("temp dir");
    let temp = ".evidence-S0001-T0001.json.99999.1.0123456789abcdef.evidence-store.tmp";
    let stale_name = "evidence-S9999-T0001.json";
    std::fs::write(outside.path().join(temp), "not ours to remove").expect("plant");
    std::fs::write(
        outside.path().join(stale_name),
        serde_json::to_vec(&stale).expect("json"),
    )
    .expect("plant");
    std::fs::remove_dir_all(ws.path(&format!("projects/{P}/sessions"))).expect("rm sessions");
    std::fs::remove_dir_all(ws.path(RECEIPTS)).expect("rm receipts");
    std::os::unix::fs::symlink(outside.path(), ws.path(RECEIPTS)).expect("symlink");

    let err = ws.fails(&["export"]);
    assert!(err.contains(RECEIPTS), "{err}");
    assert!(err.contains("outside the workspace"), "{err}");
    let mut left: Vec<String> = std::fs::read_dir(outside.path())
        .expect("outside dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [temp, stale_name]);
}

/// One count everywhere: a turn whose citations repeat across two content blocks of one
/// line and across two lines counts each citation once, and the read tool, the search
/// tool, `dump citations`, `dump --stats` and the receipts all say the same. Each entry
/// says which content block it came from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_count_agrees_on_multi_block_and_multi_line_turns() {
    let ws = Workspace::one_project("2026-01-20", P, "Cite");
    ws.write("code/src/a.py", "1\n2\n3\n");
    let cwd = ws.path("code").display().to_string();
    let blocks = |texts: &[&str]| -> Value {
        let mut content = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            if i > 0 {
                content.push(json!({"type": "tool_use", "id": "t", "name": "Bash", "input": {}}));
            }
            content.push(json!({"type": "text", "text": text}));
        }
        json!({"type": "assistant", "timestamp": "2026-01-20T12:01:00Z", "cwd": cwd,
            "message": {"role": "assistant", "content": content}})
    };
    let claude = [
        claude_user("2026-01-20T12:00:00Z", &cwd, "First"),
        blocks(&[
            "**Evidence**: src/a.py:1\n**Evidence**: src/a.py:2",
            "**Evidence**: src/a.py:1\n**Evidence**: [d](https://d)",
        ]),
        blocks(&["**Evidence**: src/a.py:2\n**Evidence**: src/a.py:3"]),
        claude_user("2026-01-20T12:03:00Z", &cwd, "Second"),
        blocks(&["**Evidence**: src/a.py:1"]),
        blocks(&["**Evidence**: src/a.py:9", "**Evidence**: src/a.py:9"]),
    ];
    let output = |texts: &[&str]| -> Value {
        let content: Vec<Value> = texts
            .iter()
            .map(|t| json!({"type": "output_text", "text": t}))
            .collect();
        json!({"type": "response_item", "timestamp": "2026-01-20T13:00:02Z",
            "payload": {"type": "message", "role": "assistant", "content": content}})
    };
    let codex = [
        json!({"type": "session_meta", "timestamp": "2026-01-20T13:00:00Z", "payload": {"id": "x", "cwd": cwd}}),
        json!({"type": "event_msg", "timestamp": "2026-01-20T13:00:01Z", "payload": {"type": "user_message", "message": "Go"}}),
        output(&[
            "**Evidence**: src/a.py:1",
            "**Evidence**: src/a.py:1\n**Evidence**: src/a.py:2",
        ]),
        json!({"type": "event_msg", "timestamp": "2026-01-20T13:00:03Z", "payload": {"type": "agent_message", "message": "**Evidence**: src/a.py:3"}}),
        output(&["**Evidence**: src/a.py:2"]),
    ];
    let jsonl = |lines: &[Value]| -> String { lines.iter().map(|l| format!("{l}\n")).collect() };
    ws.write(
        &format!("projects/{P}/sessions/claude-code/c.jsonl"),
        jsonl(&claude),
    );
    ws.write(
        &format!("projects/{P}/sessions/codex/x.jsonl"),
        jsonl(&codex),
    );
    let index = [
        index_row(
            "S0001",
            "claude-code",
            "sessions/claude-code/c.jsonl",
            6,
            &[("T0001", 1, 3), ("T0002", 4, 6)],
        ),
        index_row(
            "S0002",
            "codex",
            "sessions/codex/x.jsonl",
            5,
            &[("T0001", 1, 5)],
        ),
    ]
    .concat();
    ws.write(&format!("projects/{P}/sessions.index.jsonl"), index);
    ws.ok(&["import"]);

    // The tools.
    let client = connect(&ws).await;
    let read = |s: &str, t: Option<&str>| {
        let mut args = json!({"project_key": P, "session_ref": s});
        if let Some(t) = t {
            args["turn_ref"] = json!(t);
        }
        args
    };
    let places = |answer: &Value| -> Vec<(u64, u64, String)> {
        answer["citations"]
            .as_array()
            .expect("citations")
            .iter()
            .map(|c| {
                (
                    c["line"].as_u64().unwrap(),
                    c["content_index"].as_u64().unwrap(),
                    c["reference"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let s1 = call_ok(&client, "read_agent_citations", read("S0001", None)).await;
    assert_eq!(s1["citation_count"], 6);
    let t1 = call_ok(
        &client,
        "read_agent_citations",
        read("S0001", Some("T0001")),
    )
    .await;
    assert_eq!(t1["citation_count"], 4);
    let owned = |v: &[(u64, u64, &str)]| -> Vec<(u64, u64, String)> {
        v.iter()
            .map(|(l, c, r)| (*l, *c, (*r).to_owned()))
            .collect()
    };
    // The link is in the line's second text block (the tool call between is block 1).
    assert_eq!(
        places(&t1),
        owned(&[
            (2, 0, "src/a.py:1"),
            (2, 0, "src/a.py:2"),
            (2, 2, "d: https://d"),
            (3, 0, "src/a.py:3"),
        ])
    );
    let t2 = call_ok(
        &client,
        "read_agent_citations",
        read("S0001", Some("T0002")),
    )
    .await;
    assert_eq!(
        places(&t2),
        owned(&[(5, 0, "src/a.py:1"), (6, 0, "src/a.py:9")])
    );
    let s2 = call_ok(&client, "read_agent_citations", read("S0002", None)).await;
    assert_eq!(
        places(&s2),
        owned(&[(3, 0, "src/a.py:1"), (3, 1, "src/a.py:2")])
    );
    let search = call_ok(
        &client,
        "search_agent_citations",
        json!({"query": "a.py", "limit": 200}),
    )
    .await;
    assert_eq!(search["total_matches"], 7);
    client.cancel().await.expect("server stops");

    // dump citations and dump --stats.
    let dump: Value =
        serde_json::from_str(&ws.ok(&["dump", "citations", "--json"])).expect("dump is JSON");
    assert_eq!(dump["citations"], 8);
    let sessions = &dump["projects"][0]["sessions"];
    assert_eq!(sessions[0]["citations"], 6);
    assert_eq!(sessions[0]["turns"][0]["citations"], 4);
    assert_eq!(sessions[0]["turns"][1]["citations"], 2);
    assert_eq!(sessions[1]["citations"], 2);
    let stats: Value =
        serde_json::from_str(&ws.ok(&["dump", "--stats", "--json"])).expect("stats are JSON");
    assert_eq!(stats["citations"], 8);
    assert!(
        ws.ok(&["dump", "--stats"])
            .contains("\nEvidence citations: 8\n")
    );

    // The receipts.
    ws.ok(&["export"]);
    let counts: Vec<u64> = ["S0001-T0001", "S0001-T0002", "S0002-T0001"]
        .iter()
        .map(|name| {
            let bytes = ws.read(&format!("{RECEIPTS}/evidence-{name}.json"));
            let receipt: Value = serde_json::from_slice(&bytes).expect("receipt");
            assert_eq!(
                receipt["citation_count"].as_u64(),
                receipt["citations"].as_array().map(|c| c.len() as u64)
            );
            receipt["citation_count"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(counts, [4, 2, 2]);
    assert_eq!(receipts(&ws).len(), 3);

    // verify-citations counts the same way (a.py:9 is out of range, the link unchecked).
    let out = ws.ok(&["verify-citations"]);
    assert!(
        out.contains(
            "checked 8 citation(s) in 2 session(s) (line_out_of_range 1, ok 6, unchecked 1): 0 changed, nothing written"
        ),
        "{out}"
    );
    ws.write("code/src/a.py", "1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    let out = ws.ok(&["verify-citations"]);
    // Every entry got the new digest; counted once per turn: 7 of the 8 changed.
    assert!(
        out.contains("(ok 7, unchecked 1): 7 changed, new results stored"),
        "{out}"
    );
}
