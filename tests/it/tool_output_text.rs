//! `tool_output_grep`, `tool_output_read` and `tool_output`'s routing through `serve`, on
//! real handles: every payload is a tool result in a session, imported, and its handle comes
//! from a compact `read_session_lines`.
//!
//! `EVIDENCE_STORE_TEST_BIN` runs these tests against another build of the binary (such as
//! the build before a fix, to see them fail there).

use crate::common;

use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};

use common::{Client, PROJECT, Workspace, bin, eventually, text};

/// The size cap of every answer (the default `--tool-output-max-bytes`).
const CAP: usize = 12_288;

/// Starts `serve` on the workspace with extra environment variables.
async fn serve(ws: &Workspace, envs: &[(&str, &str)]) -> Client {
    common::spawn_server_env(ws, envs).await.0
}

/// `tools/call`, failing the test when no answer comes within `limit` (the bug some tests
/// guard against is an answer that takes minutes or never comes).
async fn call_within(client: &Client, tool: &str, args: Value, limit: Duration) -> (String, bool) {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let started = Instant::now();
    let result = tokio::time::timeout(
        limit,
        client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)),
    )
    .await
    .unwrap_or_else(|_| panic!("{tool}: no answer within {limit:?}"))
    .expect("tools/call answers");
    eprintln!("{tool}: answered in {:?}", started.elapsed());
    (text(&result).to_owned(), result.is_error == Some(true))
}

async fn call(client: &Client, tool: &str, args: Value) -> String {
    let (body, is_error) = call_within(client, tool, args, Duration::from_secs(60)).await;
    assert!(!is_error, "{tool}: {body}");
    body
}

/// A workspace holding one Claude session, `S0020`, whose lines are each a `Bash` call
/// and its result, one pair per payload; imported.
fn workspace_with(payloads: &[&str]) -> Workspace {
    let ws = Workspace::example();
    let mut lines = String::new();
    for (i, payload) in payloads.iter().enumerate() {
        let id = format!("toolu_{i}");
        let call = json!({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": format!("make out{i}")}}]}});
        let result = json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": payload}]}});
        lines.push_str(&format!("{call}\n{result}\n"));
    }
    ws.write(
        &format!("projects/{PROJECT}/sessions/claude-code/payloads.jsonl"),
        lines,
    );
    let n = payloads.len() * 2;
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut rows = String::from_utf8(ws.read(&index)).expect("utf-8 index");
    rows.push_str(&format!("{{\"session_ref\": \"S0020\", \"source\": \"claude-code\", \"source_session_id\": \"payloads\", \"session_path\": \"sessions/claude-code/payloads.jsonl\", \"subagent_path\": \"\", \"target_start_line\": 1, \"target_end_line\": {n}, \"turns\": [{{\"target_subagents\": [], \"turn_end_line\": {n}, \"turn_ref\": \"T0001\", \"turn_start_line\": 1}}]}}\n"));
    ws.write(&index, rows);
    ws.ok(&["import"]);
    ws
}

/// The handles of the payloads' results, in order, from a compact read.
async fn handles(client: &Client, payloads: usize) -> Vec<String> {
    let read = call(
        client,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0020", "start_line": 1,
               "end_line": payloads * 2, "mode": "compact"}),
    )
    .await;
    let read: Value = serde_json::from_str(&read).expect("JSON");
    let found: Vec<String> = read["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter_map(|r| r["tool_results"][0]["handle"].as_str())
        .map(str::to_owned)
        .collect();
    assert_eq!(found.len(), payloads, "{read}");
    found
}

/// A 565 KB one-line JSON document of 12,500 items.
fn items_json() -> String {
    let items: Vec<String> = (0..12_500)
        .map(|i| format!("{{\"id\":{i},\"name\":\"item-{i}\",\"status\":\"ok\"}}"))
        .collect();
    format!("{{\"items\":[{}]}}", items.join(","))
}

/// Byte offset of item `i`'s `"id"` in [`items_json`].
fn item_at(doc: &str, i: usize) -> usize {
    doc.find(&format!("{{\"id\":{i},")).expect("item") + 1
}

/// About 5.4 MB of [`common::wordy_log`].
fn big_log() -> String {
    common::wordy_log(5_400_000)
}

/// A pattern whose search of [`big_log`] costs far more than the 5 s budget whatever the
/// build: a thousand copies of `.` are live at every byte, and the Unicode `\b` over
/// non-ASCII text keeps the lazy DFA out, so every byte steps thousands of NFA states
/// (measured: a debug build searches about 2.4 KB a second of it; see BENCHMARKS.md for
/// the release build). No literal to search for first, and no match.
const SLOW_GREP: &str = r"\b.{0,1000}\b[0-9]{40}";

#[tokio::test]
async fn a_costly_pattern_is_refused_and_a_slow_one_stops_at_the_budget() {
    let log = big_log();
    let ws = workspace_with(&[&log]);
    let client = serve(&ws, &[]).await;
    let h = handles(&client, 1).await.remove(0);
    // A 100-fold repetition of Unicode word classes: refused at once, nothing searched.
    let (body, is_error) = call_within(
        &client,
        "tool_output_grep",
        json!({"handle": h, "pattern": r"\b(?:\w+\W+){100}ZZZ"}),
        Duration::from_secs(20),
    )
    .await;
    assert!(!is_error, "{body}");
    let lines = log.lines().count();
    assert_eq!(
        body,
        format!(
            "TOOL OUTPUT Bash WITH HANDLE {h}, MATCHES OF \"\\\\b(?:\\\\w+\\\\W+){{100}}ZZZ\":\n\n(the pattern was not searched: it compiles to more than 1048576 bytes, the limit. The payload has {lines} lines, {} bytes; narrow the pattern: a literal word to anchor it, fewer or bounded repetitions, ASCII classes such as (?-u:\\w) instead of \\w)\n",
            log.len()
        )
    );
    // A pattern that compiles but whose search of this text outlasts the 5 s budget in any
    // build: the budget ends it with what was searched and how to go on.
    let (body, is_error) = call_within(
        &client,
        "tool_output_grep",
        json!({"handle": h, "pattern": SLOW_GREP}),
        Duration::from_secs(20),
    )
    .await;
    assert!(!is_error, "{body}");
    let notice = body.lines().last().expect("a notice");
    assert!(
        notice.starts_with("[time budget of 5 s reached at line ")
            && notice.contains(" bytes and showed 0 matches; continue with start_line ")
            && notice.contains(&format!(" of {} bytes", log.len()))
            && notice.ends_with(", start_byte 0, or narrow the pattern: a literal word to anchor it, fewer or bounded repetitions, ASCII classes such as (?-u:\\w) instead of \\w]"),
        "{body}"
    );
    // The server still answers at once.
    let (body, _) = call_within(
        &client,
        "tool_output_grep",
        json!({"handle": h, "pattern": "request 4711 ", "max_matches": 1}),
        Duration::from_secs(20),
    )
    .await;
    assert!(body.contains("request 4711 "), "{body}");
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_long_pattern_is_echoed_once_and_the_answer_stays_within_the_cap() {
    let ws = workspace_with(&["a line of output\n".repeat(2000).as_str()]);
    let client = serve(&ws, &[]).await;
    let h = handles(&client, 1).await.remove(0);
    let pattern = "QZ".repeat(6500);
    let body = call(
        &client,
        "tool_output_grep",
        json!({"handle": h, "pattern": pattern}),
    )
    .await;
    assert!(body.len() <= CAP, "{} bytes", body.len());
    assert_eq!(
        body,
        format!(
            "TOOL OUTPUT Bash WITH HANDLE {h}, MATCHES OF \"{}\"... (13000 bytes):\n\n(no line matches the pattern)\n",
            &pattern[..200]
        )
    );
    client.cancel().await.ok();
}

/// Error answers repeat what the caller sent cut to 200 bytes, say so, and stay within
/// the cap: a bad 13,000-byte pattern, an unknown 100 KB handle.
#[tokio::test]
async fn errors_repeat_long_patterns_and_handles_cut_and_stay_within_the_cap() {
    let ws = workspace_with(&["a line of output\n".repeat(2000).as_str()]);
    let client = serve(&ws, &[]).await;
    let h = handles(&client, 1).await.remove(0);
    let pattern = format!("({}", "QZ".repeat(6500));
    let (body, is_error) = call_within(
        &client,
        "tool_output_grep",
        json!({"handle": h, "pattern": pattern}),
        Duration::from_secs(60),
    )
    .await;
    assert!(is_error, "{body}");
    assert_eq!(
        body,
        format!(
            "Error executing tool tool_output_grep: pattern: regex parse error: unclosed group, \
             in the pattern \"{}\"... (13001 bytes)",
            &pattern[..200]
        )
    );
    let unknown = "h".repeat(100_000);
    let cut = format!(
        "{}... (cut: 200 of its 100000 bytes shown)",
        &unknown[..200]
    );
    for (tool, args) in [
        (
            "tool_output_read",
            json!({"handle": unknown, "start_line": 1, "end_line": 2}),
        ),
        (
            "tool_output_grep",
            json!({"handle": unknown, "pattern": "x"}),
        ),
    ] {
        let (body, is_error) = call_within(&client, tool, args, Duration::from_secs(60)).await;
        assert!(is_error, "{body}");
        assert!(body.len() <= CAP, "{tool}: {} bytes", body.len());
        assert!(
            body.starts_with(&format!(
                "{tool}: No stored tool output has the handle {cut}. Handles are"
            )),
            "{tool}: {body}"
        );
    }
    client.cancel().await.ok();
}

#[tokio::test]
async fn every_match_on_a_huge_line_gets_a_window_and_the_rest_can_be_had() {
    let doc = items_json();
    assert!(doc.len() > 560_000 && !doc.contains('\n'));
    let ws = workspace_with(&[&doc]);
    let client = serve(&ws, &[]).await;
    let h = handles(&client, 1).await.remove(0);
    let header = |p: &str| format!("TOOL OUTPUT Bash WITH HANDLE {h}, MATCHES OF {p:?}:\n\n");
    let window = |i: usize| {
        let a = item_at(&doc, i);
        let m = format!("\"id\":{i},");
        format!("1@{a}: ...{}...\n", &doc[a - 100..a + m.len() + 100])
    };
    // Both items on the one line, each with its own window.
    let p = r#""id":(4000|9000),"#;
    let body = call(
        &client,
        "tool_output_grep",
        json!({"handle": h, "pattern": p}),
    )
    .await;
    assert_eq!(
        body,
        format!("{}{}{}", header(p), window(4000), window(9000))
    );

    // More matches than fit: the notice says how many were shown and where the rest start;
    // going on from there shows the next one.
    let p = r#""id":\d+,"#;
    let body = call(
        &client,
        "tool_output_grep",
        json!({"handle": h, "pattern": p, "max_matches": 500}),
    )
    .await;
    assert!(body.len() <= CAP, "{} bytes", body.len());
    let shown = body.lines().filter(|l| l.starts_with("1@")).count();
    assert!(shown > 20, "{body}");
    let next = item_at(&doc, shown);
    assert!(
        body.ends_with(&format!(
            "[cut at the size cap after {shown} matches: the next is at line 1 byte {next}; continue with start_line 1, start_byte {next}, or narrow the pattern]\n"
        )),
        "{body}"
    );
    let body = call(
        &client,
        "tool_output_grep",
        json!({"handle": h, "pattern": p, "start_line": 1, "start_byte": next, "max_matches": 2}),
    )
    .await;
    assert_eq!(
        body,
        format!(
            "{}{}{}[stopped after 2 matches: raise max_matches, continue with start_line 1, start_byte {}, or narrow the pattern]\n",
            header(p),
            window(shown),
            window(shown + 1),
            item_at(&doc, shown + 2)
        )
    );

    // A greedy pattern matching to the end of the line still shows its start.
    let p = r#""id":11000,.*"#;
    let body = call(
        &client,
        "tool_output_grep",
        json!({"handle": h, "pattern": p}),
    )
    .await;
    let a = item_at(&doc, 11000);
    assert_eq!(
        body,
        format!("{}1@{a}: ...{}...\n", header(p), &doc[a - 100..a + 200])
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_huge_line_is_read_piece_by_piece_from_a_byte_offset() {
    let doc = items_json();
    let ws = workspace_with(&[&doc]);
    let client = serve(&ws, &[]).await;
    let h = handles(&client, 1).await.remove(0);
    let header = format!("TOOL OUTPUT Bash WITH HANDLE {h}, LINES 1-1 OF 1:\n\n");
    // Reading on from where each piece says, three times, gives the document's first bytes.
    let mut offset = 0usize;
    let mut got = String::new();
    for _ in 0..3 {
        let body = call(
            &client,
            "tool_output_read",
            json!({"handle": h, "start_line": 1, "end_line": 1, "byte_offset": offset}),
        )
        .await;
        assert!(body.len() <= CAP, "{} bytes", body.len());
        let rest = body.strip_prefix(&header).expect("header");
        let prefix = if offset == 0 {
            "1: ".to_string()
        } else {
            format!("1@{offset}: ")
        };
        let rest = rest.strip_prefix(&prefix).expect("line prefix");
        let (piece, notice) = rest.split_once("[... line cut at byte ").expect("cut");
        let end: usize = notice.split(' ').next().unwrap().parse().expect("byte");
        assert_eq!(
            notice,
            format!(
                "{end} of {}: continue with start_line 1, byte_offset {end}]\n",
                doc.len()
            )
        );
        assert!(
            end - offset > CAP / 2,
            "a one-line read uses most of the cap"
        );
        got.push_str(piece);
        offset = end;
    }
    assert_eq!(got, doc[..offset]);
    // A length asks for less; the end of the line says nothing more.
    let body = call(
        &client,
        "tool_output_read",
        json!({"handle": h, "start_line": 1, "end_line": 1, "byte_offset": doc.len() - 30, "byte_length": 100}),
    )
    .await;
    assert_eq!(
        body,
        format!("{header}1@{}: {}\n", doc.len() - 30, &doc[doc.len() - 30..])
    );
    client.cancel().await.ok();
}

/// A loopback OpenAI-compatible endpoint: every chat completion is answered with a final
/// report holding `answer`, in the wrapper the request's system prompt names; every other
/// request with 404. Records the chat-completion request bodies. With `grep`, a request that
/// offers tools and holds no tool result yet is answered with a call of `Grep` for that
/// pattern on the handle the prompt names, and the report after it holds the tool result.
struct Endpoint {
    url: String,
    seen: Arc<Mutex<Vec<Value>>>,
}

fn endpoint(answer: &'static str, grep: Option<&'static str>) -> Endpoint {
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback listener");
    let url = format!("http://{}/v1", listener.local_addr().expect("address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let Some(common::http::Request { first, body, .. }) =
                common::http::read_request(&mut reader)
            else {
                continue;
            };
            let (status, reply) = if first.starts_with("POST /v1/chat/completions ") {
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let system = request["messages"][0]["content"].as_str().unwrap_or("");
                let start = system
                    .find("<ai-agent-")
                    .map_or(0, |i| i + "<ai-agent-".len());
                let end = system[start..].find("-FINAL").map_or(start, |i| start + i);
                let nonce = system[start..end].to_owned();
                let messages = request["messages"].as_array().cloned().unwrap_or_default();
                let result = messages
                    .iter()
                    .rev()
                    .find(|m| m["role"] == "tool")
                    .and_then(|m| m["content"].as_str().map(str::to_owned));
                let handle = system
                    .split("- Handle/filename: ")
                    .nth(1)
                    .and_then(|rest| rest.lines().next())
                    .unwrap_or("")
                    .to_owned();
                let offers_tools = request["tools"].is_array();
                log.lock().expect("log").push(request);
                let reply = match (grep, offers_tools, result) {
                    (Some(pattern), true, None) => json!({"role": "assistant", "content": null,
                        "tool_calls": [{"id": "call_1", "type": "function", "function": {
                            "name": "Grep",
                            "arguments": json!({"file": handle, "pattern": pattern}).to_string()}}]}),
                    (_, _, result) => {
                        let report = result.unwrap_or_else(|| answer.to_owned());
                        json!({"role": "assistant", "content": format!(
                            "<ai-agent-{nonce}-FINAL format=\"text\">{report}</ai-agent-{nonce}-FINAL>")})
                    }
                };
                ("200 OK", json!({"choices": [{"message": reply}]}))
            } else {
                ("404 Not Found", json!({"error": "no such route"}))
            };
            let reply = reply.to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    Endpoint { url, seen }
}

/// The routing rule: a payload whose average line is over `long_line_bytes` (1000 by
/// default) goes to full-chunked whatever its size; `--tool-output-long-line-bytes` (here
/// its environment variable) moves the threshold.
#[tokio::test]
async fn a_huge_line_with_a_short_one_goes_to_full_chunked_and_the_threshold_is_configurable() {
    let doc = format!("{}\n{{\"total\": 12500}}\n", items_json());
    let ws = workspace_with(&[&doc]);
    let routed = |long_line_bytes: Option<&'static str>| {
        let ws = &ws;
        async move {
            let model = endpoint("items 4000 and 9000", None);
            let mut envs = vec![
                ("EVIDENCE_STORE_MODEL_URL", model.url.as_str()),
                ("EVIDENCE_STORE_MODEL", "fake-model"),
            ];
            if let Some(v) = long_line_bytes {
                envs.push(("EVIDENCE_STORE_TOOL_OUTPUT_LONG_LINE_BYTES", v));
            }
            let client = serve(ws, &envs).await;
            let h = handles(&client, 1).await.remove(0);
            let body = call(
                &client,
                "tool_output",
                json!({"handle": h, "extract": "the items whose status is not ok"}),
            )
            .await;
            client.cancel().await.ok();
            let seen = model.seen.lock().expect("log").clone();
            (h, body, seen)
        }
    };
    // Two lines of about 283 KB on average: full-chunked, map and reduce.
    let (h, body, seen) = routed(None).await;
    assert_eq!(
        body,
        format!(
            "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {h}, STRATEGY:full-chunked:\n\nitems 4000 and 9000"
        )
    );
    let maps = seen.len() - 1;
    assert!(maps > 1, "{} requests", seen.len());
    for (i, request) in seen[..maps].iter().enumerate() {
        let system = request["messages"][0]["content"].as_str().expect("system");
        assert!(
            system.contains(&format!("CHUNK INFO\n- Index: {} of {maps}\n", i + 1)),
            "{system}"
        );
        assert!(request.get("tools").is_none(), "a map call offers no tools");
    }
    let reduce = seen[maps]["messages"][0]["content"]
        .as_str()
        .expect("reduce");
    assert!(reduce.contains("CHUNK OUTPUTS\n"), "{reduce}");
    // The threshold above the average line: read-grep, which the endpoint answers at once.
    let (h, body, seen) = routed(Some("1000000")).await;
    assert_eq!(
        body,
        format!(
            "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {h}, STRATEGY:read-grep:\n\nitems 4000 and 9000"
        )
    );
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0]["tools"].is_array(),
        "read-grep offers Read and Grep"
    );
}

/// The three routing cases, on handles from a compact read of an imported session:
/// a large output is extracted through its handle (it fits one chunk: one map call over the
/// whole payload); a huge single-line JSON goes to full-chunked (map over chunks that cover
/// it, then reduce); a standard multi-line log goes to read-grep, whose Grep runs over the
/// stored payload the handle names.
#[tokio::test]
async fn the_three_routing_cases_run_on_handles_from_a_compact_read() {
    let medium: String = (1..=400)
        .map(|n| {
            format!(
                "build step {n}: compiled module_{n}.rs in {} ms\n",
                n * 7 % 300
            )
        })
        .collect();
    let doc = items_json();
    let log: String = (1..=6000)
        .map(|n| match n {
            1500 => "2026-01-15 10:25:00 ERROR disk full on /var\n".to_owned(),
            4750 => "2026-01-15 11:19:10 ERROR retry failed after 3 attempts\n".to_owned(),
            _ => format!("2026-01-15 10:00:00 INFO request {n} served in 12 ms\n"),
        })
        .collect();
    assert!(medium.len() > 8_000 && log.len() > 250_000);
    let ws = workspace_with(&[&medium, &doc, &log]);
    let model = endpoint("the extracted answer", Some("ERROR"));
    let client = serve(
        &ws,
        &[
            ("EVIDENCE_STORE_MODEL_URL", model.url.as_str()),
            ("EVIDENCE_STORE_MODEL", "fake-model"),
        ],
    )
    .await;
    let h = handles(&client, 3).await;
    let ask = |i: usize| {
        let client = &client;
        let h = h[i].clone();
        async move {
            call(
                client,
                "tool_output",
                json!({"handle": h, "extract": "what went wrong"}),
            )
            .await
        }
    };
    let seen = || model.seen.lock().expect("log").clone();
    let abstract_of = |i: usize, mode: &str| {
        format!(
            "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {}, STRATEGY:{mode}:\n\n",
            h[i]
        )
    };

    // 1. A large output: one map call holding the whole stored payload.
    let body = ask(0).await;
    assert_eq!(
        body,
        abstract_of(0, "full-chunked") + "the extracted answer"
    );
    let requests = seen();
    assert_eq!(requests.len(), 1);
    let user = requests[0]["messages"][1]["content"]
        .as_str()
        .expect("user");
    assert!(user.contains(&medium), "the map call holds the payload");
    assert!(
        requests[0]["messages"][0]["content"].as_str().is_some_and(
            |s| s.contains("- Arguments (verbatim JSON): {\"command\": \"make out0\"}\n")
        ),
        "the producing call's input comes from the session"
    );

    // 2. The huge single-line JSON: full-chunked over chunks covering it, then reduce.
    let body = ask(1).await;
    assert_eq!(
        body,
        abstract_of(1, "full-chunked") + "the extracted answer"
    );
    let requests = seen()[1..].to_vec();
    let maps = requests.len() - 1;
    assert!(maps >= 2, "{maps} map calls");
    let mut covered = 0usize;
    for (i, r) in requests[..maps].iter().enumerate() {
        let chunk = r["messages"][1]["content"].as_str().expect("chunk");
        let at = doc
            .find(chunk)
            .expect("the chunk is a piece of the document");
        assert!(at <= covered, "chunk {} leaves no gap", i + 1);
        covered = at + chunk.len();
    }
    assert_eq!(covered, doc.len(), "the chunks reach the end");
    let reduce = requests[maps]["messages"][0]["content"]
        .as_str()
        .expect("reduce");
    assert!(reduce.contains("CHUNK OUTPUTS\n"), "{reduce}");

    // 3. The multi-line log: read-grep; its Grep ran over the stored payload.
    let body = ask(2).await;
    assert_eq!(
        body,
        abstract_of(2, "read-grep")
            + "1500: 2026-01-15 10:25:00 ERROR disk full on /var\n4750: 2026-01-15 11:19:10 ERROR retry failed after 3 attempts"
    );
    let requests = seen()[1 + maps + 1..].to_vec();
    assert_eq!(requests.len(), 2, "a Grep call, then the report");
    assert!(
        requests[0]["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.contains(&format!("- Handle/filename: {}\n", h[2]))),
        "the handle is the filename"
    );
    client.cancel().await.ok();
}

/// A cancelled grep stops searching at once, well before its time budget would stop it.
#[tokio::test]
async fn a_cancelled_grep_stops_searching() {
    let ws = workspace_with(&[&big_log()]);
    let root = ws.root().to_owned();
    let (transport, stderr) =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            cmd.arg("serve")
                .env("PROMPT_DIARY_WORKSPACE", &root)
                .env("RUST_LOG", "evidence_store=debug");
        }))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("server starts");
    let client = ().serve(transport).await.expect("initialize succeeds");
    let log = Arc::new(Mutex::new(String::new()));
    if let Some(stderr) = stderr {
        let log = log.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                log.lock().expect("log").push_str(&(line + "\n"));
            }
        });
    }
    let logged = |what: &str| log.lock().expect("log").contains(what);
    let h = handles(&client, 1).await.remove(0);
    let Value::Object(args) = json!({"handle": h, "pattern": SLOW_GREP}) else {
        panic!("object")
    };
    let request = client
        .peer()
        .send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                CallToolRequestParams::new("tool_output_grep").with_arguments(args),
            )),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    assert!(
        eventually(20, || logged("tool_output_grep searching")).await,
        "the search began: {}",
        log.lock().expect("log")
    );
    request
        .cancel(Some("test".into()))
        .await
        .expect("cancel sent");
    assert!(
        eventually(20, || logged("tool_output_grep stopped")).await,
        "the search ended: {}",
        log.lock().expect("log")
    );
    assert!(
        logged("tool_output_grep stopped on request") && !logged("at its time budget"),
        "{}",
        log.lock().expect("log")
    );
    client.cancel().await.ok();
}
