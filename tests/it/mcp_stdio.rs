//! The real `serve` binary driven over stdio by an rmcp client.

use crate::common;

use common::{PROJECT, Workspace, call, connect, fixture, ok_json, text};
use serde_json::{Value, json};

fn read_args(session_ref: &str, start: i64, end: i64) -> Value {
    json!({"project_key": PROJECT, "session_ref": session_ref, "start_line": start, "end_line": end})
}

#[tokio::test]
async fn tools_list_matches_the_golden_file() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    insta::assert_json_snapshot!("tools_list", tools);
    client.cancel().await.expect("clean shutdown");
}

#[tokio::test]
async fn tools_list_on_a_schema_7_workspace_matches_its_golden_file() {
    let ws = Workspace::example();
    ws.to_schema_7();
    let client = connect(&ws).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    insta::assert_json_snapshot!("tools_list_0_2_20", tools);
    client.cancel().await.expect("clean shutdown");
}

/// prompt-diary's tools are listed as each release lists them (as
/// `tools/gen/reference_schemas.py` recorded them from its server), annotations aside; ours
/// follow pydantic's conventions.
#[tokio::test]
async fn tools_list_shows_prompt_diary_s_own_schemas_on_both_contracts() {
    for (schema_7, reference) in [
        (
            false,
            include_str!("../../src/mcp/schemas/prompt-diary-0.2.10.json"),
        ),
        (
            true,
            include_str!("../../src/mcp/schemas/prompt-diary-0.2.20.json"),
        ),
    ] {
        let ws = Workspace::example();
        if schema_7 {
            ws.to_schema_7();
        }
        let client = connect(&ws).await;
        let tools = client.list_all_tools().await.expect("tools/list");
        let listed: Vec<Value> = tools
            .iter()
            .map(|t| {
                let mut t = serde_json::to_value(t).expect("json");
                t.as_object_mut()
                    .expect("a tool object")
                    .remove("annotations");
                t
            })
            .collect();
        let reference: Vec<Value> = serde_json::from_str(reference).expect("reference JSON");
        assert_eq!(
            listed[..reference.len()],
            reference[..],
            "schema 7: {schema_7}"
        );
        for tool in &listed[reference.len()..] {
            let schema = &tool["inputSchema"];
            assert!(schema.get("$schema").is_none(), "{tool}");
            assert!(schema["properties"].is_object(), "{tool}");
            if tool["name"] != "tool_output" {
                assert_eq!(
                    schema["title"],
                    format!("{}Arguments", tool["name"].as_str().expect("name")),
                );
            }
            for (name, property) in schema["properties"].as_object().expect("properties") {
                assert!(property.get("format").is_none(), "{name}: {property}");
                assert_ne!(property.get("items"), Some(&json!(true)), "{name}");
            }
        }
        client.cancel().await.expect("clean shutdown");
    }
}

#[tokio::test]
async fn ping_answers_constant_boilerplate() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    let result = call(&client, "prompt_diary_ping", json!({})).await;
    assert_eq!(
        text(&result),
        "{\n  \"name\": \"prompt-diary\",\n  \"status\": \"ok\"\n}"
    );
    assert_eq!(
        result.structured_content,
        Some(json!({"name": "prompt-diary", "status": "ok"}))
    );
    client.cancel().await.expect("clean shutdown");
}

#[tokio::test]
async fn reads_match_the_worked_examples_byte_for_byte() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    for (args, expect) in [
        (read_args("S0001", 1, 8), "read_s0001_compact.json"),
        (read_args("S0002", 1, 8), "read_s0002_compact.json"),
        (
            json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 7, "end_line": 7, "mode": "full"}),
            "read_s0001_line7_full.json",
        ),
        (read_args("S0001", 7, 9), "read_s0001_past_end.json"),
    ] {
        let result = call(&client, "read_session_lines", args).await;
        assert_eq!(result.is_error, Some(false));
        // prompt-diary's answer, once the handles of trimmed entries are taken out.
        let (stripped, _) = common::strip_handles(text(&result));
        assert_eq!(format!("{stripped}\n"), fixture(expect), "{expect}");
    }
    client.cancel().await.expect("clean shutdown");
}

const RANGE: &str = "request a 1-based line range contained by the session";

/// The case of a read of `session_ref`'s lines `start` to `end` refused with `message`,
/// on the field that starts it, with the hint to ask for a range within the session.
fn out_of_range(
    session_ref: &str,
    start: i64,
    end: i64,
    message: &'static str,
) -> (Value, &'static str, String, &'static str) {
    let field = message.split(' ').next().unwrap_or_default();
    (
        read_args(session_ref, start, end),
        field,
        message.to_owned(),
        RANGE,
    )
}

#[tokio::test]
async fn every_error_case_is_structured_in_the_reference_order() {
    let ws = Workspace::example();
    // A 2500-line session for the caps, and a row whose file does not exist.
    let long: String = (0..2500)
        .map(|i| format!("{{\"type\":\"system\",\"subtype\":\"n{i}\"}}\n"))
        .collect();
    ws.write(
        &format!("projects/{PROJECT}/sessions/codex/long.jsonl"),
        long,
    );
    ws.write(
        &format!("projects/{PROJECT}/sessions/codex/empty.jsonl"),
        "",
    );
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut rows = String::from_utf8(ws.read(&index)).unwrap();
    for (r, path) in [("S0003", "long"), ("S0004", "gone"), ("S0005", "empty")] {
        rows.push_str(&format!(
            "{{\"session_ref\": \"{r}\", \"source\": \"codex\", \"source_session_id\": \"{r}\", \"session_path\": \"sessions/codex/{path}.jsonl\", \"target_start_line\": 1, \"target_end_line\": 1, \"turns\": []}}\n"
        ));
    }
    ws.write(&index, rows);
    let client = connect(&ws).await;
    let cases = [
        (
            json!({"project_key": "Nope", "session_ref": "S0001", "start_line": 1, "end_line": 1}),
            "project_key",
            "unknown project_key 'Nope'".to_owned(),
            "use the project_key from the prepared workspace",
        ),
        (
            read_args("S9999", 1, 1),
            "session_ref",
            format!("unknown session_ref 'S9999' for project '{PROJECT}'"),
            "use a session_ref listed in sessions.index.jsonl",
        ),
        (
            read_args("S0004", 1, 1),
            "session_ref",
            "session file for session_ref 'S0004' is missing from the prepared workspace".into(),
            "ensure the prepared workspace still contains the copied session file",
        ),
        out_of_range(
            "S0001",
            0,
            1,
            "start_line 0 must be a positive 1-based line number",
        ),
        out_of_range(
            "S0001",
            -5,
            -9,
            "start_line -5 must be a positive 1-based line number",
        ),
        out_of_range("S0001", 5, 4, "end_line 4 must be >= start_line 5"),
        out_of_range(
            "S0001",
            9,
            9,
            "start_line 9 is past the session's last line 8",
        ),
        out_of_range("S0001", 9, 8, "end_line 8 must be >= start_line 9"),
        out_of_range(
            "S0001",
            8,
            9,
            "end_line 9 is past the session's last line 8",
        ),
        out_of_range(
            "S0005",
            1,
            1,
            "start_line 1 is past the session's last line 0",
        ),
        (
            read_args("S0003", 1, 2001),
            "end_line",
            "line range is too broad for compact mode; at most 2000 lines may be read at once"
                .into(),
            "split the read into a narrower range of at most 2000 lines",
        ),
        (
            json!({"project_key": PROJECT, "session_ref": "S0003", "start_line": 2400, "end_line": 2500, "mode": "full"}),
            "end_line",
            "line range is too broad for full mode; at most 100 lines may be read at once".into(),
            "split the read into a narrower range of at most 100 lines",
        ),
        (
            json!({"project_key": PROJECT, "session_ref": "S0003", "start_line": 2401, "end_line": 2501, "mode": "full"}),
            "end_line",
            "end_line 2501 is past the session's last line 2500".into(),
            RANGE,
        ),
    ];
    for (args, field, message, hint) in cases {
        let got = ok_json(&call(&client, "read_session_lines", args.clone()).await);
        let expect = json!({"status": "invalid", "errors": [{"field": field, "message": message, "hint": hint}]});
        assert_eq!(got, expect, "{args}");
    }
    // The caps themselves are allowed.
    let compact = ok_json(&call(&client, "read_session_lines", read_args("S0003", 1, 2000)).await);
    assert_eq!(compact["records"].as_array().map(Vec::len), Some(2000));
    let full = json!({"project_key": PROJECT, "session_ref": "S0003", "start_line": 2400, "end_line": 2499, "mode": "full"});
    let full = ok_json(&call(&client, "read_session_lines", full).await);
    assert_eq!(
        full["records"][99]["raw_line"],
        "{\"type\":\"system\",\"subtype\":\"n2498\"}"
    );
    client.cancel().await.expect("clean shutdown");
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_naming_the_argument() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    let cases = [
        (
            json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1}),
            "end_line\n  Field required [type=missing, input_value={'project_key': 'Demo-012...S0001', 'start_line': 1}, input_type=dict]\n    For further information visit https://errors.pydantic.dev/2.14/v/missing",
        ),
        (
            json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 4.5, "end_line": 5}),
            "start_line\n  Input should be a valid integer, got a number with a fractional part [type=int_from_float, input_value=4.5, input_type=float]\n    For further information visit https://errors.pydantic.dev/2.14/v/int_from_float",
        ),
        (
            json!({"project_key": 5, "session_ref": "S0001", "start_line": 1, "end_line": 1}),
            "project_key\n  Input should be a valid string [type=string_type, input_value=5, input_type=int]\n    For further information visit https://errors.pydantic.dev/2.14/v/string_type",
        ),
        (
            json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 1, "mode": "Full"}),
            "mode\n  Input should be 'compact' or 'full' [type=literal_error, input_value='Full', input_type=str]\n    For further information visit https://errors.pydantic.dev/2.14/v/literal_error",
        ),
        // `null` is not absent: prompt-diary rejects it too.
        (
            json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 1, "mode": null}),
            "mode\n  Input should be 'compact' or 'full' [type=literal_error, input_value=None, input_type=NoneType]\n    For further information visit https://errors.pydantic.dev/2.14/v/literal_error",
        ),
    ];
    for (args, detail) in cases {
        let result = call(&client, "read_session_lines", args.clone()).await;
        assert_eq!(result.is_error, Some(true), "{args}");
        let message = text(&result);
        assert!(message.starts_with("Error executing tool read_session_lines: 1 validation error for read_session_linesArguments\n"), "{message}");
        assert!(message.ends_with(detail), "{message}");
    }
    // Lax coercions that LLM clients rely on.
    let lax = json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": "7", "end_line": 8.0, "mode": "full"});
    let got = ok_json(&call(&client, "read_session_lines", lax).await);
    assert_eq!(got["line_range"], json!({"start": 7, "end": 8}));

    let unknown = call(&client, "nope", json!({})).await;
    assert_eq!(
        (unknown.is_error, text(&unknown)),
        (Some(true), "Unknown tool: nope")
    );
    client.cancel().await.expect("clean shutdown");
}

#[tokio::test]
async fn a_session_changed_after_import_is_reported_not_misread() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let rel = format!("projects/{PROJECT}/sessions/claude-code/c1.jsonl");
    // Same size, one byte different, on line 7 ("ship it" -> "skip it").
    let bytes = String::from_utf8(ws.read(&rel))
        .unwrap()
        .replace("ship it", "skip it");
    ws.write(&rel, bytes);
    let client = connect(&ws).await;
    // serve re-imports on start; the change is picked up, so reads are right...
    let got = ok_json(&call(&client, "read_session_lines", json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 7, "end_line": 7, "mode": "full"})).await);
    assert!(
        got["records"][0]["raw_line"]
            .as_str()
            .unwrap()
            .contains("skip it")
    );
    // ...and a change while serving is caught by the stored hashes.
    let bytes = String::from_utf8(ws.read(&rel))
        .unwrap()
        .replace("skip it", "ship it");
    ws.write(&rel, bytes);
    let got = ok_json(&call(&client, "read_session_lines", read_args("S0001", 6, 8)).await);
    assert_eq!(got["errors"][0]["field"], "session_ref");
    assert_eq!(
        got["errors"][0]["message"],
        "session file for session_ref 'S0001' changed since it was imported (line 7 no longer matches its recorded SHA-256)"
    );
    assert_eq!(
        got["errors"][0]["hint"],
        "run `evidence-store import` to re-index the prepared workspace, then read again"
    );
    // Lines before the change still read fine.
    let got = ok_json(&call(&client, "read_session_lines", read_args("S0001", 1, 6)).await);
    assert_eq!(got["status"], "ok");
    client.cancel().await.expect("clean shutdown");
}

#[tokio::test]
async fn an_invalid_workspace_still_serves_and_says_why() {
    let ws = Workspace::example();
    ws.write("metadata.json", "[]");
    let client = connect(&ws).await;
    let result = call(&client, "prompt_diary_ping", json!({})).await;
    assert_eq!(result.is_error, Some(false));
    let got = ok_json(&call(&client, "read_session_lines", read_args("S0001", 1, 1)).await);
    let root = ws.root().display();
    let message = format!(
        "the prepared workspace {root} cannot be served: {root}/metadata.json must contain a JSON object"
    );
    assert_eq!(
        got,
        json!({"status": "invalid", "errors": [{"field": "workspace", "message": message, "hint": "fix the prepared workspace as the message says, then call the tool again"}]})
    );
    client.cancel().await.expect("clean shutdown");
}

/// A read large enough to be compacted, printed and escaped on two threads answers
/// exactly what the same lines read one at a time (the single-thread path) answer.
#[tokio::test]
async fn a_large_read_equals_its_lines_read_one_by_one() {
    let ws = Workspace::example();
    ws.add_large_session();
    let client = connect(&ws).await;

    let whole = call(&client, "read_session_lines", read_args("S0009", 1, 2000)).await;
    assert!(
        text(&whole).len() > 1 << 20,
        "large enough for the parallel paths"
    );
    let whole = ok_json(&whole);
    let records = whole["records"].as_array().expect("records");
    assert_eq!(records.len(), 2000);
    for (i, record) in records.iter().enumerate() {
        let line = i as i64 + 1;
        let one = ok_json(
            &call(
                &client,
                "read_session_lines",
                read_args("S0009", line, line),
            )
            .await,
        );
        assert_eq!(&one["records"][0], record, "line {line}");
    }
    client.cancel().await.expect("clean shutdown");
}
