//! `import` when the workspace changed, when it did not, and when several run at once.

use crate::common;

use std::process::{Child, Command, Stdio};

use common::{BIN, PROJECT, Paused, Workspace, call_ok, connect, dump_json};
use serde_json::json;

const X1: &str = "projects/Demo-0123456789ab/sessions/codex/x1.jsonl";
const C1: &str = "projects/Demo-0123456789ab/sessions/claude-code/c1.jsonl";

/// The stored line blocks, and how many the stored sessions' line tables need: equal
/// when no import left a table behind that no session refers to.
fn blocks_stored_and_needed(ws: &Workspace) -> (u64, u64) {
    let stored = dump_json(ws, &[])["tables"]["line_blocks"]
        .as_u64()
        .unwrap();
    let project = dump_json(ws, &["project", PROJECT]);
    let needed = project["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["file"]["lines"].as_u64())
        .map(|lines| lines.div_ceil(1024))
        .sum();
    (stored, needed)
}

/// A session of `n` lines, each naming `tag`, so that a change of tag changes every line.
fn session(tag: &str, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "{{\"type\":\"event_msg\",\"payload\":{{\"type\":\"agent_message\",\"message\":\"{tag} {i}\"}}}}\n"
            )
        })
        .collect()
}

/// An import that planned on a snapshot before another import committed the same change
/// plans again under the write lock: it keeps the table the other one wrote and deletes
/// nothing it does not see superseded.
#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the pause point exists in debug builds"
)]
fn an_import_overtaken_by_another_keeps_its_line_tables() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    ws.write(X1, session("changed", 3000));

    let late = Paused::start(&ws, &["import"], "before-write-lock");
    let first = ws.ok(&["import"]);
    assert!(first.contains("1 file(s) indexed"), "{first}");
    let file_after_first = dump_json(&ws, &["session", PROJECT, "S0002"])["file"].clone();

    let out = late.release();
    assert_eq!(blocks_stored_and_needed(&ws), (4, 4), "{out}");
    assert_eq!(
        dump_json(&ws, &["session", PROJECT, "S0002"])["file"],
        file_after_first
    );
    assert!(out.contains("0 file(s) indexed"), "{out}");
    assert!(out.contains("nothing written"), "{out}");
}

/// K imports at once after a change, several times: exactly the blocks the sessions need.
#[test]
fn parallel_imports_leave_exactly_the_line_blocks_needed() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    for round in 0..4 {
        ws.write(X1, session(&format!("round {round}"), 2100 + round));
        ws.write(C1, session(&format!("other {round}"), 1500 + round));
        let imports: Vec<Child> = (0..4)
            .map(|_| {
                Command::new(BIN)
                    .args(["import", "--workspace"])
                    .arg(ws.root())
                    .env_remove("PROMPT_DIARY_WORKSPACE")
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut indexed = 0;
        for child in imports {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{out:?}");
            let out = String::from_utf8(out.stdout).unwrap();
            if out.contains("2 file(s) indexed") {
                indexed += 1;
            }
        }
        assert_eq!(blocks_stored_and_needed(&ws), (5, 5), "round {round}");
        // Exactly one import indexes the change; the others find it done.
        assert_eq!(indexed, 1, "round {round}");
    }
}

/// A start with nothing changed takes no write transaction: `import` says so, and so
/// does `serve` in its log.
#[test]
fn an_unchanged_workspace_commits_nothing() {
    let ws = Workspace::example();
    let first = ws.ok(&["import"]);
    assert!(!first.contains("nothing written"), "{first}");
    let again = ws.ok(&["import"]);
    assert!(again.contains("2 unchanged"), "{again}");
    assert!(again.contains("nothing written"), "{again}");

    // A ping waits for the start-up import, and the server answers it before it exits at
    // the end of its input, so the log is complete whatever the timing.
    let mut child = Command::new(BIN)
        .args(["serve", "--workspace"])
        .arg(ws.root())
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "evidence_store=info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(
                concat!(
                    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
                    "\n",
                    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                    "\n",
                    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"prompt_diary_ping","arguments":{}}}"#,
                    "\n",
                )
                .as_bytes(),
            )
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let answers = String::from_utf8(out.stdout).unwrap();
    assert!(answers.contains(r#""id":2"#), "{answers}");
    let log = String::from_utf8(out.stderr).unwrap();
    assert!(log.contains("workspace imported"), "{log}");
    assert!(log.contains("committed: false"), "{log}");

    // A document that appears is a change.
    ws.write(
        "projects/Demo-0123456789ab/evidence/S0001.json",
        "{\"evidence_chains\": []}\n",
    );
    let out = ws.ok(&["import"]);
    assert!(
        !out.contains("nothing written") && out.contains("1 document(s)"),
        "{out}"
    );
    assert!(ws.ok(&["import"]).contains("nothing written"));
}

/// An edit that keeps the size and sets the mtime back is still seen by `import`: the
/// read that finds the line changed names `import` as the fix, and after it the read
/// answers the new line.
#[tokio::test]
async fn a_same_size_edit_with_its_mtime_restored_is_imported() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    let args = json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 1, "mode": "full"});
    // The server imports on its first call: let it, before the edit.
    let first = call_ok(&client, "read_session_lines", args.clone()).await;
    assert!(
        first.to_string().contains("Fix the failing parser test."),
        "{first}"
    );
    let path = ws.path(C1);
    let before = ws.read(C1);
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let after = String::from_utf8(before.clone()).unwrap().replacen(
        "Fix the failing parser test.",
        "Fix the passing parser test.",
        1,
    );
    assert_eq!(after.len(), before.len());
    std::fs::write(&path, &after).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);

    let stale = call_ok(&client, "read_session_lines", args.clone()).await;
    assert_eq!(stale["status"], "invalid", "{stale}");
    assert!(
        stale["errors"][0]["hint"]
            .as_str()
            .unwrap()
            .contains("run `evidence-store import`"),
        "{stale}"
    );

    let out = ws.ok(&["import"]);
    assert!(out.contains("1 file(s) indexed"), "{out}");
    let fresh = call_ok(&client, "read_session_lines", args).await;
    assert!(
        fresh.to_string().contains("Fix the passing parser test."),
        "{fresh}"
    );
    client.cancel().await.unwrap();
}

/// A store of schema version 1 is upgraded on open; its first import re-hashes each file
/// once (the old records have no ctime) and keeps every line table, then commits
/// nothing on the next.
#[test]
fn a_version_1_store_is_upgraded_and_keeps_its_line_tables() {
    let ws = Workspace::example();
    // The fixture store was made before the example's line 6 of S0001 gained its evidence
    // markers: give the session back the text the store holds, so both files are unchanged.
    let c1 = "projects/Demo-0123456789ab/sessions/claude-code/c1.jsonl";
    let markers = r"\n\n**Evidence**: src/parser.py:41-42\n**Evidence**: pytest tests/test_parser.py::test_parse_tokens - PASS";
    let text = String::from_utf8(ws.read(c1)).unwrap();
    assert!(text.contains(markers), "{text}");
    ws.write(c1, text.replace(markers, ""));
    std::fs::create_dir_all(ws.path(".evidence-store")).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1.redb"),
        ws.store(),
    )
    .unwrap();
    // A read-only command cannot upgrade it, and says what does.
    let refused = ws.fails(&["dump"]);
    assert!(
        refused.contains("run `evidence-store import` first"),
        "{refused}"
    );
    let out = ws.ok(&["import"]);
    assert!(
        out.contains("0 file(s) indexed") && out.contains("2 unchanged"),
        "{out}"
    );
    assert!(!out.contains("nothing written"), "{out}");
    assert!(ws.ok(&["import"]).contains("nothing written"));
}
