//! Tool-output handles through the real binary: every trimmed entry of a compact read has
//! one, every server on the store gives and resolves the same one, a changed line makes it
//! stale, and `tool_output`, `tool_output_read`, `tool_output_grep` and `dump handles`
//! work on it.

use crate::common;

use common::{PROJECT, Workspace, call, connect, text};
use serde_json::{Value, json};

const SESSION: &str = "projects/Demo-0123456789ab/sessions/claude-code/tools.jsonl";

/// The test log a `Bash` call printed: 600 lines, one failure in the middle.
fn log() -> String {
    (1..=600)
        .map(|n| {
            if n == 150 {
                "FAILED tests/test_auth.py::test_login - AssertionError".to_owned()
            } else {
                format!("tests/test_{n}.py::test_case PASSED")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A Claude session: a prompt, a `Bash` call with a long command, its long result, and
/// one huge single-line result of an unnamed tool.
fn session(log: &str) -> String {
    let command = format!("pytest -q {}", "tests/ ".repeat(60));
    let lines = [
        json!({"type": "user", "message": {"role": "user", "content": "run the tests"}}),
        json!({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": command}}]}}),
        json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": log}]}}),
        json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": format!("{}NEEDLE{}", "a".repeat(3000), "b".repeat(3000))}]}}),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn add_session(ws: &Workspace, log: &str) {
    ws.write(SESSION, session(log));
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut rows = String::from_utf8(ws.read(&index)).expect("utf-8 index");
    rows.push_str("{\"session_ref\": \"S0010\", \"source\": \"claude-code\", \"source_session_id\": \"tools\", \"session_path\": \"sessions/claude-code/tools.jsonl\", \"subagent_path\": \"\", \"target_start_line\": 1, \"target_end_line\": 4, \"turns\": [{\"target_subagents\": [], \"turn_end_line\": 4, \"turn_ref\": \"T0001\", \"turn_start_line\": 1}]}\n");
    ws.write(&index, rows);
}

async fn records(client: &common::Client) -> Vec<Value> {
    let result = call(
        client,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0010", "start_line": 1, "end_line": 4}),
    )
    .await;
    let read: Value = serde_json::from_str(text(&result)).expect("JSON");
    read["records"].as_array().expect("records").clone()
}

/// The handles of the read, in order: (line, list, handle), after checking that an
/// entry has one exactly when `cut(list, entry)`.
fn handles_where(
    records: &[Value],
    cut: impl Fn(&str, &Value) -> bool,
) -> Vec<(u64, &'static str, String)> {
    let mut out = Vec::new();
    for r in records {
        for list in ["tool_uses", "tool_results"] {
            for e in r[list].as_array().into_iter().flatten() {
                assert_eq!(e.get("handle").is_some(), cut(list, e), "{e}");
                if let Some(h) = e.get("handle") {
                    out.push((
                        r["line"].as_u64().expect("line"),
                        list,
                        h.as_str().expect("str").to_owned(),
                    ));
                }
            }
        }
    }
    out
}

/// The handles of a 0.2.10 compact read: exactly the trimmed entries have one.
fn handles(records: &[Value]) -> Vec<(u64, &'static str, String)> {
    handles_where(records, |_, e| e["truncated"] == true)
}

/// The handles of a 0.2.20 page's sparse records: a use has one when its input summary
/// was cut, a result when its preview was.
fn sparse_handles(records: &[Value]) -> Vec<(u64, &'static str, String)> {
    handles_where(records, |list, e| {
        let shown = if list == "tool_uses" {
            "input_summary"
        } else {
            "preview"
        };
        e[shown]
            .as_str()
            .is_some_and(|s| s.contains("\n...[trimmed]...\n"))
    })
}

async fn tool_names(client: &common::Client) -> Vec<String> {
    let tools = client.list_all_tools().await.expect("tools/list");
    tools.into_iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test]
async fn handles_are_stable_and_name_the_whole_payload() {
    let ws = Workspace::example();
    add_session(&ws, &log());
    ws.ok(&["import"]);
    let a = connect(&ws).await;
    let names = tool_names(&a).await;
    for tool in ["tool_output", "tool_output_read", "tool_output_grep"] {
        assert!(names.iter().any(|n| n == tool), "{tool} listed: {names:?}");
    }
    let first = handles(&records(&a).await);
    assert_eq!(
        first.iter().map(|(l, k, _)| (*l, *k)).collect::<Vec<_>>(),
        [(2, "tool_uses"), (3, "tool_results"), (4, "tool_results")]
    );
    // Another server, and one after a re-import of the unchanged workspace: same handles.
    let b = connect(&ws).await;
    assert_eq!(handles(&records(&b).await), first);
    ws.ok(&["import"]);
    let c = connect(&ws).await;
    assert_eq!(handles(&records(&c).await), first);

    let (use_h, result_h, huge_h) = (&first[0].2, &first[1].2, &first[2].2);
    // The tool input's whole JSON, as compaction renders it.
    let got = call(
        &c,
        "tool_output_read",
        json!({"handle": use_h, "start_line": 1, "end_line": 5}),
    )
    .await;
    let body = text(&got);
    assert!(body.starts_with(&format!("TOOL OUTPUT Bash WITH HANDLE {use_h}, LINES 1-5 OF 1:\n\n1: {{\"command\": \"pytest -q tests/ ")), "{body}");
    // The result's text; its tool found through the tool-use id.
    let got = call(
        &a,
        "tool_output_read",
        json!({"handle": result_h, "start_line": 149, "end_line": 151}),
    )
    .await;
    assert_eq!(
        text(&got),
        format!(
            "TOOL OUTPUT Bash WITH HANDLE {result_h}, LINES 149-151 OF 600:\n\n149: tests/test_149.py::test_case PASSED\n150: FAILED tests/test_auth.py::test_login - AssertionError\n151: tests/test_151.py::test_case PASSED\n"
        )
    );
    let got = call(
        &b,
        "tool_output_grep",
        json!({"handle": result_h, "pattern": "^FAILED", "context_lines": 1}),
    )
    .await;
    assert!(text(&got).ends_with("149- tests/test_149.py::test_case PASSED\n150: FAILED tests/test_auth.py::test_login - AssertionError\n151- tests/test_151.py::test_case PASSED\n"), "{}", text(&got));
    // One huge line: a window around the match, with its byte offset; no producing tool.
    let got = call(
        &b,
        "tool_output_grep",
        json!({"handle": huge_h, "pattern": "NEEDLE"}),
    )
    .await;
    assert!(
        text(&got).starts_with(&format!("TOOL OUTPUT unknown WITH HANDLE {huge_h}")),
        "{}",
        text(&got)
    );
    assert!(
        text(&got).contains("1@3000: ...") && text(&got).len() < 700,
        "{}",
        text(&got)
    );
    // tool_output's truncate strategy on the same payload, named by its tool.
    let got = call(
        &c,
        "tool_output",
        json!({"handle": result_h, "extract": "the failures", "mode": "truncate"}),
    )
    .await;
    assert!(
        text(&got).starts_with(&format!(
            "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {result_h}, STRATEGY:truncate:\n\n"
        )),
        "{}",
        text(&got)
    );
    assert!(text(&got).contains("[···TRUNCATED "), "{}", text(&got));

    // `dump handles` lists the same handles with sizes and tool names.
    let dump = ws.ok(&["dump", "handles", PROJECT, "S0010", "--json"]);
    let listed: Value = serde_json::from_str(&dump).expect("json");
    let listed = listed.as_array().expect("array");
    assert_eq!(listed.len(), 3, "{dump}");
    assert_eq!(listed[1]["handle"], json!(result_h));
    assert_eq!(listed[1]["tool_name"], json!("Bash"));
    assert_eq!(listed[1]["bytes"], json!(log().len()));
    let one = ws.ok(&["dump", "handles", PROJECT, "S0010", "3"]);
    assert!(
        one.contains(result_h.as_str()) && !one.contains(use_h.as_str()),
        "{one}"
    );
    // The text view names its columns.
    let header = one.lines().next().unwrap_or_default();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["LINE", "ENTRY", "INDEX", "HANDLE", "BYTES", "TOOL"],
        "{one}"
    );
}

#[tokio::test]
async fn changed_unknown_and_bad_requests_are_answered_clearly() {
    let ws = Workspace::example();
    add_session(&ws, &log());
    ws.ok(&["import"]);
    let a = connect(&ws).await;
    let old = handles(&records(&a).await);
    let result_h = old[1].2.clone();

    for (args, expect) in [
        (
            json!({"handle": result_h, "pattern": "("}),
            "pattern: regex parse error",
        ),
        (json!({"handle": result_h}), "pattern: required"),
        (
            json!({"handle": result_h, "pattern": "x", "max_matches": 0}),
            "max_matches: must be an integer from 1 to 500",
        ),
        (
            json!({"handle": "../../etc/passwd", "pattern": "x"}),
            "No stored tool output has the handle",
        ),
        (
            json!({"handle": "123e4567-e89b-82d3-a456-426614174000", "pattern": "x"}),
            "No stored tool output has the handle",
        ),
    ] {
        let got = call(&a, "tool_output_grep", args.clone()).await;
        assert_eq!(got.is_error, Some(true), "{args}");
        assert!(text(&got).contains(expect), "{args}: {}", text(&got));
    }
    let got = call(
        &a,
        "tool_output_read",
        json!({"handle": result_h, "start_line": 5, "end_line": 4}),
    )
    .await;
    assert!(
        got.is_error == Some(true) && text(&got).contains("end_line: must be >= start_line 5"),
        "{}",
        text(&got)
    );
    let got = call(
        &a,
        "tool_output",
        json!({"handle": "no-such-handle", "extract": "x"}),
    )
    .await;
    assert_ne!(got.is_error, Some(true));
    assert!(
        text(&got).contains("No stored tool output has the handle no-such-handle"),
        "{}",
        text(&got)
    );

    // The result's line changes on disk: before an import the old handle is refused as
    // changed; after it, the line's digest no longer matches the handle.
    ws.write(SESSION, session(&log().replace("FAILED", "PASSED")));
    let got = call(
        &a,
        "tool_output_read",
        json!({"handle": result_h, "start_line": 1, "end_line": 1}),
    )
    .await;
    assert!(
        got.is_error == Some(true) && text(&got).contains("is stale"),
        "{}",
        text(&got)
    );
    // Word for word: why a session or its line cannot be read is told as it always was.
    const CHANGED: &str = "the session file changed since it was imported; run \
                           `evidence-store import`, then read the lines again for current handles";
    assert_eq!(
        text(&got),
        format!("tool_output_read: the handle {result_h} is stale: {CHANGED}.")
    );
    assert_eq!(
        ws.fails(&["dump", "handles", PROJECT, "S0010"]),
        format!("evidence-store: {CHANGED}\n")
    );
    assert_eq!(
        ws.fails(&["dump", "handles", PROJECT, "S0001", "99"]),
        "evidence-store: lines 99-99 are not lines of the session (it has 8)\n"
    );
    ws.ok(&["import"]);
    let b = connect(&ws).await;
    let got = call(
        &b,
        "tool_output_grep",
        json!({"handle": result_h, "pattern": "x"}),
    )
    .await;
    assert!(
        got.is_error == Some(true)
            && text(&got).contains("no longer holds the output this handle was given for"),
        "{}",
        text(&got)
    );
    let new = handles(&records(&b).await);
    assert_eq!(new[0], old[0], "the unchanged line keeps its handle");
    assert_ne!(new[1].2, result_h);
    std::fs::remove_file(ws.path(SESSION)).expect("remove");
    const MISSING: &str = "session file for session_ref 'S0010' is missing from the prepared \
                           workspace; ensure the prepared workspace still contains the copied \
                           session file";
    assert_eq!(
        ws.fails(&["dump", "handles", PROJECT, "S0010"]),
        format!("evidence-store: {MISSING}\n")
    );
    let got = call(
        &b,
        "tool_output_read",
        json!({"handle": new[1].2, "start_line": 1, "end_line": 1}),
    )
    .await;
    assert_eq!(
        text(&got),
        format!(
            "tool_output_read: the handle {} is stale: {MISSING}.",
            new[1].2
        )
    );
}

#[tokio::test]
async fn handle_tools_are_listed_even_when_no_handle_exists_yet() {
    let ws = Workspace::example();
    // The example's sessions with short lines only: no entry is trimmed.
    let short =
        "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n".repeat(8);
    for session in ["claude-code/c1.jsonl", "codex/x1.jsonl"] {
        ws.write(&format!("projects/{PROJECT}/sessions/{session}"), &short);
    }
    ws.ok(&["import"]);
    let client = connect(&ws).await;
    let names = tool_names(&client).await;
    for tool in ["tool_output", "tool_output_read", "tool_output_grep"] {
        assert!(names.iter().any(|n| n == tool), "{tool} missing: {names:?}");
    }
    // A handle the workspace does not hold is still answered, not refused.
    let h = "00000000-0000-8000-8000-000000000000";
    let got = call(&client, "tool_output", json!({"handle": h, "extract": "x"})).await;
    assert_ne!(got.is_error, Some(true), "{}", text(&got));
    assert!(
        text(&got).contains(&format!("No stored tool output has the handle {h}")),
        "{}",
        text(&got)
    );
}

#[tokio::test]
async fn a_0_2_20_page_gives_handles_that_name_the_whole_payload() {
    let ws = Workspace::example();
    add_session(&ws, &log());
    ws.to_schema_7();
    ws.ok(&["import"]);
    let a = connect(&ws).await;
    let names = tool_names(&a).await;
    assert!(names.iter().any(|n| n == "tool_output_read"), "{names:?}");
    let page = call(
        &a,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0010", "start_line": 1, "end_line": 4}),
    )
    .await;
    let page: Value = serde_json::from_str(text(&page)).expect("a page");
    assert!(page["next_cursor"].is_null());
    let found = sparse_handles(page["records"].as_array().expect("records"));
    assert_eq!(
        found.iter().map(|(l, k, _)| (*l, *k)).collect::<Vec<_>>(),
        [(2, "tool_uses"), (3, "tool_results"), (4, "tool_results")]
    );
    // Another server gives the same handles.
    let b = connect(&ws).await;
    let again = call(
        &b,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0010", "start_line": 3, "end_line": 3}),
    )
    .await;
    assert!(text(&again).contains(&found[1].2), "{}", text(&again));

    let (use_h, result_h) = (&found[0].2, &found[1].2);
    // The use's whole input (sorted compact JSON, as the sparse record renders it).
    let got = call(
        &b,
        "tool_output_read",
        json!({"handle": use_h, "start_line": 1, "end_line": 1}),
    )
    .await;
    assert!(
        text(&got).starts_with(&format!("TOOL OUTPUT Bash WITH HANDLE {use_h}, LINES 1-1 OF 1:\n\n1: {{\"command\": \"pytest -q tests/ ")),
        "{}",
        text(&got)
    );
    // The result's whole text, its tool found through the tool-use id.
    let got = call(
        &a,
        "tool_output_grep",
        json!({"handle": result_h, "pattern": "^FAILED", "context_lines": 1}),
    )
    .await;
    assert!(
        text(&got).starts_with(&format!("TOOL OUTPUT Bash WITH HANDLE {result_h}"))
            && text(&got).ends_with("149- tests/test_149.py::test_case PASSED\n150: FAILED tests/test_auth.py::test_login - AssertionError\n151- tests/test_151.py::test_case PASSED\n"),
        "{}",
        text(&got)
    );
    // `dump handles` lists the handles the page gave, with the whole payload's size.
    let dump = ws.ok(&["dump", "handles", PROJECT, "S0010", "--json"]);
    let listed: Value = serde_json::from_str(&dump).expect("json");
    let listed: Vec<&str> = listed
        .as_array()
        .expect("array")
        .iter()
        .map(|h| h["handle"].as_str().expect("handle"))
        .collect();
    assert_eq!(
        listed,
        found.iter().map(|f| f.2.as_str()).collect::<Vec<_>>()
    );

    // A changed line makes its handle stale, not another payload.
    let mut lines: Vec<String> = String::from_utf8(ws.read(SESSION))
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect();
    lines[2] = lines[2].replace("PASSED", "passed");
    ws.write(SESSION, lines.join("\n") + "\n");
    ws.ok(&["import"]);
    let c = connect(&ws).await;
    let got = call(
        &c,
        "tool_output_read",
        json!({"handle": result_h, "start_line": 1, "end_line": 1}),
    )
    .await;
    assert_eq!(got.is_error, Some(true), "{}", text(&got));
}

/// A record too large for one page is cut into fragments; the handles inside them still
/// name their payloads once the fragments are put back together.
#[tokio::test]
async fn handles_survive_fragments_of_a_0_2_20_record() {
    let ws = Workspace::example();
    // One user line answering 80 tool uses, each output 2,000 bytes: a record of about
    // 80 × 560 bytes, more than a 32 KiB page.
    let results: Vec<Value> = (0..80)
        .map(|i| {
            json!({"type": "tool_result", "tool_use_id": format!("toolu_{i}"),
                "content": format!("output {i}\n{}", "x".repeat(2000))})
        })
        .collect();
    let uses: Vec<Value> = (0..80)
        .map(|i| json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": format!("Tool{i}"), "input": {}}))
        .collect();
    let lines = [
        json!({"type": "user", "message": {"role": "user", "content": "go"}}),
        json!({"type": "assistant", "message": {"role": "assistant", "content": uses}}),
        json!({"type": "user", "message": {"role": "user", "content": results}}),
        json!({"type": "assistant", "message": {"role": "assistant", "content": "done"}}),
    ];
    ws.write(
        SESSION,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    );
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut rows = String::from_utf8(ws.read(&index)).expect("utf-8 index");
    rows.push_str("{\"session_ref\": \"S0010\", \"source\": \"claude-code\", \"source_session_id\": \"tools\", \"session_path\": \"sessions/claude-code/tools.jsonl\", \"subagent_path\": \"\", \"target_start_line\": 1, \"target_end_line\": 4, \"turns\": [{\"target_subagents\": [], \"turn_end_line\": 4, \"turn_ref\": \"T0001\", \"turn_start_line\": 1}]}\n");
    ws.write(&index, rows);
    ws.to_schema_7();
    ws.ok(&["import"]);
    let client = connect(&ws).await;

    let mut args =
        json!({"project_key": PROJECT, "session_ref": "S0010", "start_line": 3, "end_line": 3});
    let (mut content, mut pages) = (String::new(), 0);
    loop {
        let page = call(&client, "read_session_lines", args.clone()).await;
        let page: Value = serde_json::from_str(text(&page)).expect("a page");
        pages += 1;
        for r in page["records"].as_array().expect("records") {
            assert_eq!(r["record_format"], "compact_json", "{r}");
            content.push_str(r["content"].as_str().expect("content"));
        }
        if page["next_cursor"].is_null() {
            break;
        }
        args["cursor"] = page["next_cursor"].clone();
    }
    assert!(pages > 1, "the record is cut into fragments");
    let record: Value = serde_json::from_str(&content).expect("the fragments rebuild the record");
    let found = sparse_handles(std::slice::from_ref(&record));
    assert_eq!(found.len(), 80);
    let (_, _, h57) = &found[57];
    let got = call(
        &client,
        "tool_output_read",
        json!({"handle": h57, "start_line": 1, "end_line": 1}),
    )
    .await;
    assert_eq!(
        text(&got),
        format!("TOOL OUTPUT Tool57 WITH HANDLE {h57}, LINES 1-1 OF 2:\n\n1: output 57\n")
    );
}
