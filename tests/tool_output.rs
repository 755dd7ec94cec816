//! `tool_output` end to end through `serve`: the model is a scripted fake, either a loopback
//! OpenAI-compatible HTTP server that asserts the exact prompts and tool definitions it gets,
//! or the MCP client itself answering `sampling/createMessage`.
//!
//! Payloads come from debug builds' `EVIDENCE_STORE_TEST_PAYLOADS` directory (handle = file
//! name), so the extraction is tested apart from how handles are issued.
#![allow(deprecated)] // Sampling is deprecated in the newest MCP revision; clients still offer it.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientInfo,
    CreateMessageRequestParams, CreateMessageResult, Implementation, Role, SamplingMessage,
    SamplingMessageContentBlock,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use serde_json::{Value, json};

use common::{BIN, PROJECT, Workspace};

/// One scripted model answer; `{N}` in a text becomes the nonce of the request's prompt.
#[derive(Clone)]
enum Say {
    Text(String),
    Calls(Vec<(&'static str, Value)>),
}

fn say(text: &str) -> Say {
    Say::Text(text.to_string())
}

fn nonce_in(system: &str) -> String {
    let start = system
        .find("<ai-agent-")
        .map_or(0, |i| i + "<ai-agent-".len());
    let end = system[start..].find("-FINAL").map_or(start, |i| start + i);
    system[start..end].to_string()
}

/// A loopback OpenAI-compatible endpoint answering from a script; records every request
/// body. One request per connection (`Connection: close`).
struct FakeEndpoint {
    url: String,
    seen: Arc<Mutex<Vec<Value>>>,
    /// The `Authorization` header of each request, if any.
    auth: Arc<Mutex<Vec<Option<String>>>>,
}

fn fake_endpoint(script: Vec<Say>) -> FakeEndpoint {
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback listener");
    let url = format!("http://{}/v1", listener.local_addr().expect("address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let auth = Arc::new(Mutex::new(Vec::new()));
    let auth_log = auth.clone();
    std::thread::spawn(move || {
        let mut script = script.into_iter();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut length = 0usize;
            let mut authorization = None;
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        length = v.trim().parse().unwrap_or(0);
                    } else if k.eq_ignore_ascii_case("authorization") {
                        authorization = Some(v.trim().to_string());
                    }
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            assert!(first.starts_with("POST /v1/chat/completions "), "{first}");
            let nonce = nonce_in(request["messages"][0]["content"].as_str().unwrap_or(""));
            log.lock().expect("log").push(request);
            auth_log.lock().expect("auth").push(authorization);
            let (status, answer) = match script.next() {
                Some(Say::Text(t)) => (
                    "200 OK",
                    json!({"choices": [{"message": {"role": "assistant",
                        "content": t.replace("{N}", &nonce)}}]}),
                ),
                Some(Say::Calls(calls)) => (
                    "200 OK",
                    json!({"choices": [{"message": {"role": "assistant", "content": null,
                        "tool_calls": calls.iter().enumerate().map(|(i, (name, args))| json!({
                            "id": format!("call_{i}"), "type": "function",
                            "function": {"name": name, "arguments": args.to_string()}
                        })).collect::<Vec<_>>()}}]}),
                ),
                None => (
                    "500 Internal Server Error",
                    json!({"error": "script exhausted"}),
                ),
            };
            let text = answer.to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    FakeEndpoint { url, seen, auth }
}

/// A client whose model is a script, offered through sampling.
struct Sampler {
    tools: bool,
    script: Mutex<Vec<Say>>,
    seen: Arc<Mutex<Vec<CreateMessageRequestParams>>>,
}

impl ClientHandler for Sampler {
    fn get_info(&self) -> ClientInfo {
        let caps = ClientCapabilities::builder().enable_sampling();
        let caps = if self.tools {
            caps.enable_sampling_tools().build()
        } else {
            caps.build()
        };
        ClientInfo::new(caps, Implementation::new("scripted-sampler", "0"))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let nonce = nonce_in(params.system_prompt.as_deref().unwrap_or(""));
        self.seen.lock().expect("log").push(params);
        let next = {
            let mut script = self.script.lock().expect("script");
            (!script.is_empty()).then(|| script.remove(0))
        };
        let message = match next {
            Some(Say::Text(t)) => SamplingMessage::assistant_text(t.replace("{N}", &nonce)),
            Some(Say::Calls(calls)) => SamplingMessage::new_multiple(
                Role::Assistant,
                calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, args))| {
                        let Value::Object(args) = args else {
                            panic!("object arguments")
                        };
                        SamplingMessageContentBlock::tool_use(format!("use_{i}"), name, args)
                    })
                    .collect(),
            ),
            None => return Err(ErrorData::internal_error("script exhausted", None)),
        };
        Ok(CreateMessageResult::new(message, "scripted".into()))
    }
}

/// A workspace plus a payload directory with the given handles.
struct Setup {
    ws: Workspace,
    payloads: tempfile::TempDir,
}

fn setup(payloads: &[(&str, &str, &str)]) -> Setup {
    let ws = Workspace::example();
    let dir = tempfile::tempdir().expect("payload dir");
    for (handle, tool, text) in payloads {
        std::fs::write(dir.path().join(handle), text).expect("payload");
        std::fs::write(dir.path().join(format!("{handle}.tool")), tool).expect("tool");
        std::fs::write(
            dir.path().join(format!("{handle}.args")),
            r#"{"command":"make test"}"#,
        )
        .expect("args");
    }
    Setup { ws, payloads: dir }
}

async fn serve_with<C: ClientHandler>(
    s: &Setup,
    client: C,
    envs: &[(&str, &str)],
) -> RunningService<RoleClient, C> {
    let root = s.ws.root().to_owned();
    let payloads = s.payloads.path().to_owned();
    let envs: Vec<(String, String)> = envs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let transport = TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
        cmd.arg("serve")
            .env("PROMPT_DIARY_WORKSPACE", &root)
            .env("EVIDENCE_STORE_TEST_PAYLOADS", &payloads)
            .env("RUST_LOG", "off")
            .env_remove("EVIDENCE_STORE_MODEL_URL")
            .env_remove("EVIDENCE_STORE_MODEL")
            .envs(envs);
    }))
    .expect("server starts");
    client.serve(transport).await.expect("initialize succeeds")
}

async fn tool_output<C: ClientHandler>(
    client: &RunningService<RoleClient, C>,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("object arguments")
    };
    client
        .call_tool(CallToolRequestParams::new("tool_output").with_arguments(args))
        .await
        .expect("tools/call answers")
}

fn text_of(result: &CallToolResult) -> String {
    assert_eq!(result.content.len(), 1, "one text block");
    common::text(result).to_string()
}

/// 3000 short lines (about 40 KB) with two errors: too big for one chunk of a small model.
fn test_log() -> String {
    (1..=3000)
        .map(|i| match i {
            1500 => "line 1500: ERROR disk full on /var\n".to_string(),
            2750 => "line 2750: ERROR retry failed\n".to_string(),
            _ => format!("line {i}: ok\n"),
        })
        .collect()
}

/// One line of JSON, about 40 KB.
fn huge_json() -> String {
    let items: Vec<Value> = (0..800)
        .map(|i| json!({"id": i, "name": format!("item-{i}"), "status": if i == 400 { "broken" } else { "fine" }}))
        .collect();
    serde_json::to_string(&json!({"items": items})).expect("json")
}

const SMALL_MODEL: [(&str, &str); 2] = [
    ("EVIDENCE_STORE_MODEL_CONTEXT_TOKENS", "8192"),
    ("EVIDENCE_STORE_MODEL_MAX_OUTPUT_TOKENS", "1024"),
];

fn read_grep_prompt(nonce: &str) -> String {
    format!(
        r#"You are an internal extraction agent. You can only use Read and Grep tools.

IMPORTANT: The handle is the filename.
Use the filename exactly as given when calling Read or Grep.

SOURCE TOOL
- Name: Bash
- Arguments (verbatim JSON): {{"command":"make test"}}
- Handle/filename: log-1
- Root directory: (none: the server resolves the handle to the stored output)

WHAT TO EXTRACT
every ERROR line with its line number

OUTPUT FORMAT (required)
- Emit exactly one XML final-report wrapper:
  <ai-agent-{nonce}-FINAL format="text"> ... </ai-agent-{nonce}-FINAL>
- If no relevant data exists, output:
  NO RELEVANT DATA FOUND
  <short description of what kind of information is available in the file>"#
    )
}

fn expected_openai_tools() -> Value {
    json!([
        {"type": "function", "function": {
            "name": "Read",
            "description": "Read numbered lines of a file. The file is the handle. Lines are 1-based and inclusive; without end_line, 200 lines are returned.",
            "parameters": {
                "type": "object", "additionalProperties": false, "required": ["file"],
                "properties": {
                    "file": {"type": "string", "description": "The handle, exactly as given."},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line (default 1)."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line, inclusive."}
                }
            }
        }},
        {"type": "function", "function": {
            "name": "Grep",
            "description": "Search a file for a regular expression (Rust regex syntax); returns matching lines with line numbers. The file is the handle.",
            "parameters": {
                "type": "object", "additionalProperties": false, "required": ["file", "pattern"],
                "properties": {
                    "file": {"type": "string", "description": "The handle, exactly as given."},
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "context_lines": {"type": "integer", "minimum": 0, "description": "Lines of context around each match (default 0)."},
                    "max_matches": {"type": "integer", "minimum": 1, "description": "Most matches returned (default 50)."}
                }
            }
        }}
    ])
}

#[tokio::test]
async fn large_multi_line_output_goes_to_read_grep_over_the_endpoint() {
    let log = test_log();
    let s = setup(&[("log-1", "Bash", &log)]);
    let model = fake_endpoint(vec![
        Say::Calls(vec![("Grep", json!({"file": "log-1", "pattern": "ERROR"}))]),
        Say::Calls(vec![(
            "Read",
            json!({"file": "log-1", "start_line": 1499, "end_line": 1501}),
        )]),
        // A `<think>` prefix and no closing tag: still this call's final report.
        say(
            "<think>two errors</think>\n<ai-agent-{N}-FINAL format=\"text\">1500: ERROR disk full on /var\n2750: ERROR retry failed",
        ),
    ]);
    let mut envs = SMALL_MODEL.to_vec();
    envs.push(("EVIDENCE_STORE_MODEL_URL", &model.url));
    envs.push(("EVIDENCE_STORE_MODEL", "fake-model"));
    let client = serve_with(&s, (), &envs).await;
    let result = tool_output(
        &client,
        json!({"handle": "log-1", "extract": "every ERROR line with its line number"}),
    )
    .await;
    assert_ne!(result.is_error, Some(true));
    assert_eq!(
        text_of(&result),
        "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE log-1, STRATEGY:read-grep:\n\n\
         1500: ERROR disk full on /var\n2750: ERROR retry failed"
    );
    let seen = model.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 3);
    let system = seen[0]["messages"][0]["content"].as_str().expect("system");
    assert_eq!(system, read_grep_prompt(&nonce_in(system)));
    assert_eq!(seen[0]["model"], "fake-model");
    assert_eq!(seen[0]["max_tokens"], 1024);
    assert_eq!(seen[0]["tools"], expected_openai_tools());
    assert_eq!(
        seen[0]["messages"][1],
        json!({"role": "user", "content": format!(
            "The file log-1 holds {} bytes in 3000 lines. Use Read and Grep on it, then answer with the final report.",
            log.len()
        )})
    );
    // The Grep result went back as a tool message, answered from the payload.
    assert_eq!(
        seen[1]["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_0",
               "content": "1500: line 1500: ERROR disk full on /var\n2750: line 2750: ERROR retry failed\n"})
    );
    assert_eq!(
        seen[2]["messages"][5]["content"],
        "1499: line 1499: ok\n1500: line 1500: ERROR disk full on /var\n1501: line 1501: ok\n"
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn huge_single_line_json_goes_to_full_chunked() {
    let doc = huge_json();
    let s = setup(&[("json-1", "exec_command", &doc)]);
    let model = fake_endpoint(vec![
        say(
            "<ai-agent-{N}-FINAL format=\"text\">NO RELEVANT DATA FOUND\nitems 0-399, all fine</ai-agent-{N}-FINAL>",
        ),
        say("<think>item 400</think><ai-agent-{N}-FINAL format=\"text\">item 400 is broken"),
        say(
            "<ai-agent-{N}-FINAL format=\"text\">item-400 (id 400) has status broken</ai-agent-{N}-FINAL>",
        ),
    ]);
    let mut envs = SMALL_MODEL.to_vec();
    envs.push(("EVIDENCE_STORE_MODEL_URL", &model.url));
    envs.push(("EVIDENCE_STORE_MODEL", "fake-model"));
    envs.push(("EVIDENCE_STORE_TOOL_OUTPUT_MAX_CHUNKS", "4"));
    let client = serve_with(&s, (), &envs).await;
    let result = tool_output(
        &client,
        json!({"handle": "json-1", "extract": "items whose status is not fine"}),
    )
    .await;
    assert_eq!(
        text_of(&result),
        "ABSTRACT FROM TOOL OUTPUT exec_command WITH HANDLE json-1, STRATEGY:full-chunked:\n\n\
         item-400 (id 400) has status broken"
    );
    let seen = model.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 3, "two maps and one reduce");
    let map1 = seen[0]["messages"][0]["content"].as_str().expect("system");
    let n = nonce_in(map1);
    assert_eq!(
        map1,
        format!(
            r#"You are an internal extraction agent. You must extract information from a document chunk.

SOURCE TOOL
- Name: exec_command
- Arguments (verbatim JSON): {{"command":"make test"}}

DOCUMENT STATS
- Bytes: {}
- Lines: 1
- Tokens (estimate): {}

CHUNK INFO
- Index: 1 of 2
- Overlap: 10%

WHAT TO EXTRACT
items whose status is not fine

OUTPUT FORMAT (required)
- Emit exactly one XML final-report wrapper:
  <ai-agent-{n}-FINAL format="text"> ... </ai-agent-{n}-FINAL>
- Put your extracted result inside the wrapper.
- If no relevant data exists, output:
  NO RELEVANT DATA FOUND
  <short description of what kind of information is available in this chunk>"#,
            doc.len(),
            doc.len().div_ceil(4)
        )
    );
    assert!(seen[0].get("tools").is_none(), "map calls offer no tools");
    // The chunks are the payload, in order, overlapping, of uniform size.
    let c1 = seen[0]["messages"][1]["content"].as_str().expect("chunk 1");
    let c2 = seen[1]["messages"][1]["content"].as_str().expect("chunk 2");
    assert!(doc.starts_with(c1) && doc.ends_with(c2));
    assert!(c1.len() + c2.len() > doc.len());
    assert!(c1.len().abs_diff(c2.len()) <= 4);
    let n2 = nonce_in(seen[1]["messages"][0]["content"].as_str().expect("map 2"));
    assert_ne!(n, n2, "a fresh nonce per call");
    let reduce = seen[2]["messages"][0]["content"].as_str().expect("reduce");
    assert!(reduce.contains(
        "CHUNK OUTPUTS\n--- Chunk 1 of 2 ---\nNO RELEVANT DATA FOUND\nitems 0-399, all fine\n\n--- Chunk 2 of 2 ---\nitem 400 is broken\n\nOUTPUT FORMAT"
    ));
    assert_eq!(
        seen[2]["messages"][1],
        json!({"role": "user", "content": "Synthesize the chunk outputs above into one final answer."})
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn failing_extractions_fall_back_to_truncate_with_the_reason() {
    let log = test_log();
    let doc = huge_json();
    let s = setup(&[("log-1", "Bash", &log), ("json-1", "Bash", &doc)]);
    // A read-grep sub-agent that never writes a final report, then a map answer without one.
    let model = fake_endpoint(vec![
        say("I looked around and everything seems fine."),
        say("Here are the items: none."),
    ]);
    let mut envs = SMALL_MODEL.to_vec();
    envs.push(("EVIDENCE_STORE_MODEL_URL", &model.url));
    envs.push(("EVIDENCE_STORE_MODEL", "fake-model"));
    let client = serve_with(&s, (), &envs).await;

    let result = tool_output(&client, json!({"handle": "log-1", "extract": "errors"})).await;
    let body = text_of(&result);
    let head = "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE log-1, STRATEGY:truncate:\n\n\
                WARNING: tool_output fallback to truncate (read-grep: turn 1: no final report produced).\n\
                line 1: ok\nline 2: ok\n";
    assert!(body.starts_with(head), "{body}");
    assert!(body.contains("[···TRUNCATED "));
    assert!(body.ends_with("line 3000: ok\n"));
    assert!(body.len() <= 12288);

    let result = tool_output(
        &client,
        json!({"handle": "log-1", "extract": "errors", "mode": "full-chunked"}),
    )
    .await;
    assert!(
        text_of(&result).contains(
            "STRATEGY:truncate:\n\nWARNING: tool_output fallback to truncate (full-chunked: chunk 1 of 2: no final report produced).\n"
        ),
        "{}",
        &text_of(&result)[..300]
    );

    // One huge line needing more chunks than max_chunks: its lines are long, so auto runs
    // full-chunked anyway (map and reduce); the script is spent, so it falls back with why.
    assert!(
        chunk_bytes_for("Bash", &doc, "errors") < doc.len(),
        "two chunks"
    );
    let result = tool_output(&client, json!({"handle": "json-1", "extract": "errors"})).await;
    let body = text_of(&result);
    assert!(
        body.starts_with(
            "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE json-1, STRATEGY:truncate:\n\n\
             WARNING: tool_output fallback to truncate (full-chunked: chunk 1 of 2: "
        ),
        "{body}"
    );
    let seen = model.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 3, "one map call for the huge line");
    let map = seen[2]["messages"][0]["content"].as_str().expect("map");
    assert!(map.contains("CHUNK INFO\n- Index: 1 of 2\n"), "{map}");
    client.cancel().await.ok();
}

/// The chunk size the server uses with `SMALL_MODEL`: the context left after the answer
/// and the map prompt (at 4 bytes a token).
fn chunk_bytes_for(tool: &str, doc: &str, extract: &str) -> usize {
    let prompt = format!(
        "You are an internal extraction agent. You must extract information from a document chunk.\n\n\
         SOURCE TOOL\n- Name: {tool}\n- Arguments (verbatim JSON): {{\"command\":\"make test\"}}\n\n\
         DOCUMENT STATS\n- Bytes: {}\n- Lines: 1\n- Tokens (estimate): {}\n\n\
         CHUNK INFO\n- Index: 1 of 1\n- Overlap: 10%\n\n\
         WHAT TO EXTRACT\n{extract}\n\n\
         OUTPUT FORMAT (required)\n- Emit exactly one XML final-report wrapper:\n  \
         <ai-agent--FINAL format=\"text\"> ... </ai-agent--FINAL>\n\
         - Put your extracted result inside the wrapper.\n- If no relevant data exists, output:\n  \
         NO RELEVANT DATA FOUND\n  \
         <short description of what kind of information is available in this chunk>",
        doc.len(),
        doc.len().div_ceil(4)
    );
    ((8192 - 1024 - (prompt.len() + 64).div_ceil(4)) * 4).max(1024)
}

#[tokio::test]
async fn no_model_anywhere_falls_back_and_truncate_needs_none() {
    let s = setup(&[("log-1", "Bash", &test_log())]);
    let client = serve_with(&s, (), &[]).await;
    let result = tool_output(&client, json!({"handle": "log-1", "extract": "errors"})).await;
    assert!(text_of(&result).starts_with(
        "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE log-1, STRATEGY:truncate:\n\n\
         WARNING: tool_output fallback to truncate (no language model: the client does not support sampling and no endpoint is configured).\nline 1: ok\n"
    ));
    let result = tool_output(
        &client,
        json!({"handle": "log-1", "extract": "errors", "mode": "truncate"}),
    )
    .await;
    let body = text_of(&result);
    assert!(body.starts_with(
        "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE log-1, STRATEGY:truncate:\n\nline 1: ok\n"
    ));
    assert!(body.len() <= 12288 && body.contains("TRUNCATED"));
    client.cancel().await.ok();
}

#[tokio::test]
async fn sampling_client_runs_read_grep_with_tool_use() {
    let s = setup(&[("log-1", "Bash", &test_log())]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sampler = Sampler {
        tools: true,
        script: Mutex::new(vec![
            Say::Calls(vec![
                (
                    "Grep",
                    json!({"file": "log-1", "pattern": "ERROR", "max_matches": 1}),
                ),
                ("Read", json!({"file": "wrong-name", "start_line": 1})),
            ]),
            say(
                "<ai-agent-{N}-FINAL format=\"text\">1500: ERROR disk full on /var</ai-agent-{N}-FINAL>",
            ),
        ]),
        seen: seen.clone(),
    };
    // An endpoint is configured too, but a sampling client that can use tools comes first.
    let unused = fake_endpoint(vec![]);
    let mut envs = SMALL_MODEL.to_vec();
    envs.push(("EVIDENCE_STORE_MODEL_URL", &unused.url));
    envs.push(("EVIDENCE_STORE_MODEL", "unused"));
    let client = serve_with(&s, sampler, &envs).await;
    let result = tool_output(
        &client,
        json!({"handle": "log-1", "extract": "every ERROR line with its line number"}),
    )
    .await;
    assert_eq!(
        text_of(&result),
        "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE log-1, STRATEGY:read-grep:\n\n1500: ERROR disk full on /var"
    );
    let seen = seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 2);
    let system = seen[0].system_prompt.clone().expect("system prompt");
    assert_eq!(system, read_grep_prompt(&nonce_in(&system)));
    let tools: Vec<String> = seen[0]
        .tools
        .iter()
        .flatten()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(tools, ["Read", "Grep"]);
    assert_eq!(
        serde_json::to_value(&seen[0].tools.as_ref().expect("tools")[0].input_schema)
            .expect("json"),
        expected_openai_tools()[0]["function"]["parameters"]
    );
    // Both tool results went back in one user message.
    let last = serde_json::to_value(&seen[1].messages[2]).expect("json");
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["toolUseId"], "use_0");
    assert_eq!(
        last["content"][0]["content"][0]["text"],
        "1500: line 1500: ERROR disk full on /var\n[stopped after 1 matches: raise max_matches or narrow the pattern]\n"
    );
    assert_eq!(
        last["content"][1]["content"][0]["text"],
        "ERROR: no file named \"wrong-name\"; the only file is \"log-1\""
    );
    assert!(unused.seen.lock().expect("log").is_empty());
    client.cancel().await.ok();
}

#[tokio::test]
async fn sampling_without_tool_use_maps_small_outputs_and_never_tries_read_grep() {
    let small = "short output\nERROR one\n";
    let s = setup(&[("small", "Bash", small), ("log-1", "Bash", &test_log())]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sampler = Sampler {
        tools: false,
        script: Mutex::new(vec![say(
            "<think>easy</think>\n<ai-agent-{N}-FINAL format=\"text\">ERROR one",
        )]),
        seen: seen.clone(),
    };
    let client = serve_with(&s, sampler, &SMALL_MODEL).await;
    let result = tool_output(&client, json!({"handle": "small", "extract": "errors"})).await;
    assert_eq!(
        text_of(&result),
        "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE small, STRATEGY:full-chunked:\n\nERROR one"
    );
    {
        let seen = seen.lock().expect("log");
        assert_eq!(seen.len(), 1);
        assert!(seen[0].tools.is_none());
        assert_eq!(
            serde_json::to_value(&seen[0].messages).expect("json"),
            json!([{"role": "user", "content": {"type": "text", "text": small}}])
        );
    }
    let result = tool_output(&client, json!({"handle": "log-1", "extract": "errors"})).await;
    assert!(
        text_of(&result)
            .contains("WARNING: tool_output fallback to truncate (full-chunked needs 2 chunks of"),
        "{}",
        &text_of(&result)[..300]
    );
    assert!(text_of(&result).contains(
        "more than max_chunks 1, and the model cannot call the Read and Grep tools that read-grep needs)."
    ));
    assert_eq!(
        seen.lock().expect("log").len(),
        1,
        "no sampling call for it"
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn unknown_and_stale_handles_and_bad_arguments_are_answered_clearly() {
    let s = setup(&[("stale-1", "Bash", "x")]);
    std::fs::write(
        s.payloads.path().join("stale-1.stale"),
        "line 12 of the session changed on disk",
    )
    .expect("stale marker");
    let client = serve_with(&s, (), &[]).await;
    let result = tool_output(&client, json!({"handle": "nope", "extract": "x"})).await;
    assert_ne!(result.is_error, Some(true));
    assert_eq!(
        text_of(&result),
        "ABSTRACT FROM TOOL OUTPUT unknown WITH HANDLE nope, STRATEGY:auto:\n\n\
         No stored tool output has the handle nope. Handles are the \"handle\" values of trimmed \
         tool_results and tool_uses entries in compact read_session_lines records of this \
         workspace; copy one exactly."
    );
    let result = tool_output(
        &client,
        json!({"handle": "stale-1", "extract": "x", "mode": "read-grep"}),
    )
    .await;
    assert_eq!(
        text_of(&result),
        "TOOL_OUTPUT FAILED FOR Bash WITH HANDLE stale-1, STRATEGY:read-grep:\n\n\
         The stored output of this handle is stale: line 12 of the session changed on disk. \
         Read the session lines again (read_session_lines, compact) to get a current handle."
    );
    let result = tool_output(
        &client,
        json!({"handle": "", "extract": "x", "mode": "fast", "extra": 1}),
    )
    .await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        text_of(&result),
        "Error executing tool tool_output: extra: unexpected argument; handle: must not be empty; \
         mode: must be one of auto, full-chunked, read-grep, truncate (got \"fast\")"
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn tool_output_is_listed_with_its_exact_schema_when_handles_exist() {
    let s = setup(&[]);
    let client = serve_with(&s, (), &[]).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let tool = tools
        .iter()
        .find(|t| t.name == "tool_output")
        .expect("tool_output listed");
    assert_eq!(
        serde_json::to_value(&*tool.input_schema).expect("json"),
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["handle", "extract"],
            "properties": {
                "handle": {
                    "type": "string",
                    "minLength": 1,
                    "description": "UUID handle of the stored tool output (provided in the tool-result message: tool_output(handle = \"<uuid>\", ...))."
                },
                "extract": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Provide precise, detailed instructions about what you need from the tool output (be specific, include keys/fields/sections if known)."
                },
                "mode": {
                    "type": "string",
                    "enum": ["auto", "full-chunked", "read-grep", "truncate"],
                    "description": "Optional override. auto=module decides; full-chunked=LLM chunk+reduce; read-grep=dynamic sub-agent with Read/Grep; truncate=keeps top and bottom, truncates in the middle."
                }
            }
        })
    );
    let annotations = tool.annotations.clone().expect("annotations");
    assert_eq!(annotations.read_only_hint, Some(true));
    client.cancel().await.ok();
}

#[test]
fn a_misconfigured_endpoint_stops_serve_with_a_clear_message_and_no_secret() {
    let ws = Workspace::example();
    let err = ws.fails(&[
        "serve",
        "--model-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--model-api-key-env",
        "EVIDENCE_STORE_TEST_SURELY_UNSET_KEY",
    ]);
    assert!(
        err.contains("cannot set up the tool_output model endpoint")
            && err.contains("the API-key variable EVIDENCE_STORE_TEST_SURELY_UNSET_KEY is not set"),
        "{err}"
    );
    let err = ws.fails(&["serve", "--model-url", "ftp://x", "--model", "m"]);
    assert!(err.contains("is not an http:// or https:// URL"), "{err}");
}

#[tokio::test]
async fn the_api_key_is_sent_as_a_bearer_token_and_never_logged() {
    const SECRET: &str = "sk-test-SECRET-0123456789";
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    let model = fake_endpoint(vec![say("<ai-agent-{N}-FINAL format=\"text\">ERROR one")]);
    let root = s.ws.root().to_owned();
    let payloads = s.payloads.path().to_owned();
    let url = model.url.clone();
    let (transport, stderr) =
        TokioChildProcess::builder(tokio::process::Command::new(BIN).configure(|cmd| {
            cmd.args(["serve", "--model-url", &url, "--model", "m"])
                .args(["--model-api-key-env", "EVIDENCE_STORE_TEST_API_KEY"])
                .env("PROMPT_DIARY_WORKSPACE", &root)
                .env("EVIDENCE_STORE_TEST_PAYLOADS", &payloads)
                .env("EVIDENCE_STORE_TEST_API_KEY", SECRET)
                .env("RUST_LOG", "trace");
        }))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("server starts");
    let client = ().serve(transport).await.expect("initialize succeeds");
    let result = tool_output(&client, json!({"handle": "small", "extract": "errors"})).await;
    assert_eq!(
        text_of(&result),
        "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE small, STRATEGY:full-chunked:\n\nERROR one"
    );
    client.cancel().await.ok();
    let mut log = String::new();
    if let Some(mut stderr) = stderr {
        use tokio::io::AsyncReadExt;
        stderr.read_to_string(&mut log).await.expect("stderr");
    }
    assert_eq!(
        model.auth.lock().expect("auth").clone(),
        vec![Some(format!("Bearer {SECRET}"))]
    );
    assert!(
        log.contains("key from $EVIDENCE_STORE_TEST_API_KEY"),
        "{log}"
    );
    assert!(!log.contains(SECRET), "the key leaked into the log");
}

#[tokio::test]
async fn endpoint_errors_and_garbage_fall_back_with_the_reason() {
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    // Script: one non-JSON-object answer shape, then exhausted (HTTP 500).
    let model = fake_endpoint(vec![Say::Calls(vec![])]);
    let client = serve_with(
        &s,
        (),
        &[
            ("EVIDENCE_STORE_MODEL_URL", &model.url),
            ("EVIDENCE_STORE_MODEL", "m"),
        ],
    )
    .await;
    // An answer with an empty tool-call list and no text: no final report.
    let result = tool_output(&client, json!({"handle": "small", "extract": "errors"})).await;
    assert!(text_of(&result).contains(
        "WARNING: tool_output fallback to truncate (full-chunked: chunk 1 of 1: no final report produced).\nERROR one\n"
    ));
    let result = tool_output(&client, json!({"handle": "small", "extract": "errors"})).await;
    assert!(
        text_of(&result).contains(
            "WARNING: tool_output fallback to truncate (full-chunked: chunk 1 of 1: model endpoint answered HTTP 500: {\"error\":\"script exhausted\"}).\n"
        ),
        "{}",
        text_of(&result)
    );
    client.cancel().await.ok();

    // Nothing listening: a transport error, still an answer.
    let closed = TcpListener::bind("127.0.0.1:0").expect("port");
    let url = format!("http://{}/v1", closed.local_addr().expect("addr"));
    drop(closed);
    let client = serve_with(
        &s,
        (),
        &[
            ("EVIDENCE_STORE_MODEL_URL", &url),
            ("EVIDENCE_STORE_MODEL", "m"),
        ],
    )
    .await;
    let result = tool_output(&client, json!({"handle": "small", "extract": "errors"})).await;
    assert!(
        text_of(&result).contains(
            "WARNING: tool_output fallback to truncate (full-chunked: chunk 1 of 1: model request failed: "
        ),
        "{}",
        text_of(&result)
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn concurrent_calls_share_one_sampling_client_and_other_tools_keep_answering() {
    let s = setup(&[("a", "Bash", "alpha\n"), ("b", "Bash", "beta\n")]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sampler = Sampler {
        tools: true,
        script: Mutex::new(vec![
            say("<ai-agent-{N}-FINAL format=\"text\">one"),
            say("<ai-agent-{N}-FINAL format=\"text\">two"),
        ]),
        seen: seen.clone(),
    };
    let client = serve_with(&s, sampler, &[]).await;
    let (x, y, ping) = tokio::join!(
        tool_output(&client, json!({"handle": "a", "extract": "x"})),
        tool_output(&client, json!({"handle": "b", "extract": "x"})),
        client.call_tool(CallToolRequestParams::new("prompt_diary_ping")),
    );
    // Which call got which scripted answer depends on arrival order; each got one.
    let mut answers = [text_of(&x), text_of(&y)];
    answers.sort();
    let mut bodies: Vec<String> = answers
        .iter()
        .zip(["a", "b"])
        .map(|(a, h)| {
            let head = format!(
                "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {h}, STRATEGY:full-chunked:\n\n"
            );
            a.strip_prefix(&head).expect("header").to_string()
        })
        .collect();
    bodies.sort();
    assert_eq!(bodies, ["one", "two"]);
    assert!(ping.is_ok());
    assert_eq!(seen.lock().expect("log").len(), 2);
    client.cancel().await.ok();
}

#[test]
fn run_hands_the_model_settings_to_the_servers_it_starts() {
    let ws = Workspace::example();
    let out = ws.ok(&[
        "run",
        "--model-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--tool-output-max-chunks",
        "3",
        "--",
        "sh",
        "-c",
        "echo \"$EVIDENCE_STORE_MODEL_URL $EVIDENCE_STORE_MODEL $EVIDENCE_STORE_TOOL_OUTPUT_MAX_CHUNKS\"",
    ]);
    assert_eq!(
        out.lines().next(),
        Some("http://127.0.0.1:9/v1 m 3"),
        "{out}"
    );
}

/// The seed's first case on a real handle: a large multi-line output in a session, its
/// handle from a compact read, then `tool_output` runs read-grep over the stored payload
/// with the model at the endpoint; the producing tool and its input come from the session.
#[tokio::test]
async fn a_real_handle_goes_from_the_read_to_read_grep() {
    let log = test_log();
    let s = setup(&[]);
    let lines = [
        json!({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_7", "name": "Bash", "input": {"command": "make test"}}]}}),
        json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_7", "content": log}]}}),
    ];
    let session: String = lines.iter().map(|l| format!("{l}\n")).collect();
    s.ws.write(
        &format!("projects/{PROJECT}/sessions/claude-code/make.jsonl"),
        session,
    );
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut rows = String::from_utf8(s.ws.read(&index)).expect("utf-8");
    rows.push_str("{\"session_ref\": \"S0011\", \"source\": \"claude-code\", \"source_session_id\": \"make\", \"session_path\": \"sessions/claude-code/make.jsonl\", \"subagent_path\": \"\", \"target_start_line\": 1, \"target_end_line\": 2, \"turns\": [{\"target_subagents\": [], \"turn_end_line\": 2, \"turn_ref\": \"T0001\", \"turn_start_line\": 1}]}\n");
    s.ws.write(&index, rows);
    // The handle a read will give (it is a function of the line), for the model's script.
    s.ws.ok(&["import"]);
    let listed: Value = serde_json::from_str(
        &s.ws
            .ok(&["dump", "handles", PROJECT, "S0011", "2", "--json"]),
    )
    .expect("json");
    let expected = listed[0]["handle"].as_str().expect("one handle").to_owned();
    let model = fake_endpoint(vec![
        Say::Calls(vec![(
            "Grep",
            json!({"file": expected, "pattern": "ERROR"}),
        )]),
        say(
            "<ai-agent-{N}-FINAL format=\"text\">1500: ERROR disk full on /var\n2750: ERROR retry failed</ai-agent-{N}-FINAL>",
        ),
    ]);
    let mut envs = SMALL_MODEL.to_vec();
    envs.push(("EVIDENCE_STORE_MODEL_URL", &model.url));
    envs.push(("EVIDENCE_STORE_MODEL", "fake-model"));
    let client = serve_with(&s, (), &envs).await;
    let Value::Object(args) =
        json!({"project_key": PROJECT, "session_ref": "S0011", "start_line": 2, "end_line": 2})
    else {
        panic!("object")
    };
    let read = client
        .call_tool(CallToolRequestParams::new("read_session_lines").with_arguments(args))
        .await
        .expect("read answers");
    let read: Value = serde_json::from_str(&text_of(&read)).expect("json");
    let handle = read["records"][0]["tool_results"][0]["handle"]
        .as_str()
        .expect("a trimmed result has a handle")
        .to_owned();
    assert_eq!(handle, expected, "dump handles and the read agree");
    let result = tool_output(
        &client,
        json!({"handle": handle, "extract": "every ERROR line with its line number", "mode": "read-grep"}),
    )
    .await;
    assert_eq!(
        text_of(&result),
        format!(
            "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {handle}, STRATEGY:read-grep:\n\n1500: ERROR disk full on /var\n2750: ERROR retry failed"
        )
    );
    let seen = model.seen.lock().expect("log").clone();
    let system = seen[0]["messages"][0]["content"].as_str().expect("system");
    assert!(
        system
            .contains("- Name: Bash\n- Arguments (verbatim JSON): {\"command\": \"make test\"}\n"),
        "{system}"
    );
    assert!(
        system.contains(&format!("- Handle/filename: {handle}\n")),
        "{system}"
    );
    // The Grep ran over the stored payload.
    assert_eq!(
        seen[1]["messages"][3]["content"],
        "1500: line 1500: ERROR disk full on /var\n2750: line 2750: ERROR retry failed\n"
    );
    client.cancel().await.ok();
}
