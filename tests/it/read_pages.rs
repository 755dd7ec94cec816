//! `read_session_lines` on a schema-7 (prompt-diary 0.2.20) workspace, through `serve`:
//! cursor pages of at most 32 KiB, byte for byte as prompt-diary 0.2.20 answers them
//! (tests/fixtures/pages_0220, written by tools/gen/pages_fixture_0220.py from the package).
//!
//! The workspace is built by hand as 0.2.20's prepare writes it: the example workspace
//! with `schema_version` 7, index rows without the subagent fields, and long lines added
//! to S0001 so that both modes cut records into fragments.

use crate::common;

use common::{PROJECT, Workspace, call, connect, fixture, text};
use serde_json::{Value, json};

fn schema_7_workspace() -> Workspace {
    let ws = Workspace::example();
    ws.to_schema_7();
    let session = format!("projects/{PROJECT}/sessions/claude-code/c1.jsonl");
    let mut bytes = ws.read(&session);
    bytes.extend_from_slice(fixture("pages_0220/long_lines.jsonl").as_bytes());
    ws.write(&session, bytes);
    ws
}

#[tokio::test]
async fn pages_match_prompt_diary_0_2_20_byte_for_byte() {
    let ws = schema_7_workspace();
    let client = connect(&ws).await;
    let cases: Vec<Value> = serde_json::from_str(&fixture("pages_0220/expected.json")).unwrap();
    let mut handles = 0;
    for case in cases {
        let mut args = case["args"].clone();
        args["project_key"] = json!(PROJECT);
        for (i, expect) in case["pages"].as_array().unwrap().iter().enumerate() {
            let result = call(&client, "read_session_lines", args.clone()).await;
            assert_eq!(result.is_error, Some(false));
            let got = text(&result);
            assert!(got.len() <= 32 * 1024);
            // Beyond 0.2.20: a cut tool payload's entry carries its handle.
            let (without, n) = common::strip_sparse_handles(got);
            handles += n;
            assert_eq!(
                without,
                expect.as_str().unwrap(),
                "{} page {i}",
                case["args"]
            );
            let page: Value = serde_json::from_str(got).unwrap();
            args["cursor"] = page["next_cursor"].clone();
        }
        if case["args"].get("cursor").is_none() {
            assert!(args["cursor"].is_null(), "the walk ends with a null cursor");
        }
    }
    assert!(handles > 0, "the fixture's cut tool output has its handle");
    client.cancel().await.expect("clean shutdown");
}

#[tokio::test]
async fn fragments_rebuild_the_record_and_the_line() {
    let ws = schema_7_workspace();
    let client = connect(&ws).await;
    let lines: Vec<String> =
        String::from_utf8(ws.read(&format!("projects/{PROJECT}/sessions/claude-code/c1.jsonl")))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
    for mode in ["compact", "full"] {
        let mut args = json!({"project_key": PROJECT, "session_ref": "S0001",
            "start_line": 9, "end_line": 9, "mode": mode});
        let mut content = String::new();
        loop {
            let page: Value = serde_json::from_str(text(
                &call(&client, "read_session_lines", args.clone()).await,
            ))
            .unwrap();
            for record in page["records"].as_array().unwrap() {
                content.push_str(record["content"].as_str().unwrap());
            }
            if page["next_cursor"].is_null() {
                break;
            }
            args["cursor"] = page["next_cursor"].clone();
        }
        if mode == "full" {
            assert_eq!(content, lines[8]);
        } else {
            let record: Value = serde_json::from_str(&content).unwrap();
            let source: Value = serde_json::from_str(&lines[8]).unwrap();
            assert_eq!(record["kind"], "assistant_message");
            assert_eq!(record["text"], source["message"]["content"][0]["text"]);
        }
    }
    client.cancel().await.expect("clean shutdown");
}

#[tokio::test]
async fn the_schema_shows_the_cursor_and_bad_cursors_are_argument_errors() {
    let ws = schema_7_workspace();
    let client = connect(&ws).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let read = tools
        .iter()
        .find(|t| t.name == "read_session_lines")
        .unwrap();
    assert!(read.input_schema["properties"]["cursor"].is_object());
    for (cursor, problem) in [
        (
            json!("x"),
            "cursor\n  Input should be a dictionary or an instance of ReadCursor [type=dataclass_type, \
             input_value='x', input_type=str]\n    For further information visit \
             https://errors.pydantic.dev/2.14/v/dataclass_type",
        ),
        (
            json!({"offset": 1}),
            "cursor.line\n  Field required [type=missing, input_value={'offset': 1}, \
             input_type=dict]\n    For further information visit \
             https://errors.pydantic.dev/2.14/v/missing",
        ),
        (
            json!({"line": 1, "offset": 2.5}),
            "cursor.offset\n  Input should be a valid integer, got a number with a fractional part \
             [type=int_from_float, input_value=2.5, input_type=float]\n    For further information \
             visit https://errors.pydantic.dev/2.14/v/int_from_float",
        ),
    ] {
        let args = json!({"project_key": PROJECT, "session_ref": "S0001",
            "start_line": 1, "end_line": 2, "cursor": cursor});
        let result = call(&client, "read_session_lines", args).await;
        assert_eq!(result.is_error, Some(true));
        assert!(text(&result).ends_with(problem), "{}", text(&result));
    }
    client.cancel().await.expect("clean shutdown");
}

#[tokio::test]
async fn a_0_2_10_workspace_ignores_the_cursor_and_keeps_its_schema() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let read = tools
        .iter()
        .find(|t| t.name == "read_session_lines")
        .unwrap();
    assert!(read.input_schema["properties"].get("cursor").is_none());
    let args = json!({"project_key": PROJECT, "session_ref": "S0001",
        "start_line": 1, "end_line": 8, "cursor": {"line": 3}});
    let result = call(&client, "read_session_lines", args).await;
    assert_eq!(
        format!("{}\n", text(&result)),
        fixture("read_s0001_compact.json")
    );
    client.cancel().await.expect("clean shutdown");
}

#[tokio::test]
async fn a_line_changed_under_the_server_is_refused_not_served() {
    let ws = schema_7_workspace();
    let client = connect(&ws).await;
    let args =
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 3});
    let first = call(&client, "read_session_lines", args.clone()).await;
    assert!(text(&first).starts_with("{\"next_cursor\":"));
    // Same size, other bytes: only the line's digest can tell.
    let session = format!("projects/{PROJECT}/sessions/claude-code/c1.jsonl");
    let bytes = ws.read(&session);
    let at = bytes.iter().position(|b| *b == b'a').unwrap();
    let mut edited = bytes.clone();
    edited[at] = b'b';
    ws.write(&session, edited);
    let result = call(&client, "read_session_lines", args).await;
    assert_eq!(result.is_error, Some(false));
    let answer: Value = serde_json::from_str(text(&result)).unwrap();
    assert_eq!(answer["status"], "invalid");
    assert_eq!(answer["errors"][0]["field"], "session_ref");
    let message = answer["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("no longer matches its recorded SHA-256"),
        "{message}"
    );
    client.cancel().await.expect("clean shutdown");
}
