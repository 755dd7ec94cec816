//! `tool_output` end to end through `serve`: the model is a scripted fake, either a loopback
//! OpenAI-compatible HTTP server that asserts the exact prompts and tool definitions it gets,
//! or the MCP client itself answering `sampling/createMessage`.
//!
//! Payloads come from debug builds' `EVIDENCE_STORE_TEST_PAYLOADS` directory (handle = file
//! name), so the extraction is tested apart from how handles are issued.
#![allow(deprecated)] // Sampling is deprecated in the newest MCP revision; clients still offer it.

use crate::common;

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

use common::{BIN, PROJECT, Workspace, bin, eventually};

/// A loopback endpoint that reads each request and never answers; counts the requests
/// received and the connections the client closed (the request was dropped).
struct Hanging {
    url: String,
    received: Arc<std::sync::atomic::AtomicUsize>,
    closed: Arc<std::sync::atomic::AtomicUsize>,
}

fn hanging_endpoint() -> Hanging {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback listener");
    let url = format!("http://{}/v1", listener.local_addr().expect("address"));
    let received = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (r, c) = (received.clone(), closed.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (r, c) = (r.clone(), c.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                let Some(request) = common::http::read_request(&mut reader) else {
                    return;
                };
                if !request.is_chat() {
                    let _ = reader.get_mut().write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    return;
                }
                r.fetch_add(1, Ordering::SeqCst);
                // Never answer; the read ends when the client closes the connection.
                let mut rest = Vec::new();
                let _ = reader.read_to_end(&mut rest);
                c.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    Hanging {
        url,
        received,
        closed,
    }
}

/// One scripted model answer; `{N}` in a text becomes the nonce of the request's prompt.
#[derive(Clone)]
enum Say {
    Text(String),
    Calls(Vec<(&'static str, Value)>),
    /// A raw reply: status line and body, sent as is.
    Raw(&'static str, String),
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
    /// The request line of every request that was not a chat completion.
    other: Arc<Mutex<Vec<String>>>,
}

fn fake_endpoint(script: Vec<Say>) -> FakeEndpoint {
    fake_endpoint_with(script, Vec::new())
}

/// [`fake_endpoint`] that also answers `routes` (request line start, status line, body);
/// other requests that are not chat completions get a 404.
fn fake_endpoint_with(
    script: Vec<Say>,
    routes: Vec<(&'static str, &'static str, String)>,
) -> FakeEndpoint {
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback listener");
    let url = format!("http://{}/v1", listener.local_addr().expect("address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let auth = Arc::new(Mutex::new(Vec::new()));
    let auth_log = auth.clone();
    let other = Arc::new(Mutex::new(Vec::new()));
    let other_log = other.clone();
    std::thread::spawn(move || {
        let mut script = script.into_iter();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let Some(common::http::Request {
                first,
                authorization,
                body,
            }) = common::http::read_request(&mut reader)
            else {
                continue;
            };
            let reply = |stream: &mut std::net::TcpStream, status: &str, text: &str| {
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
            };
            if !first.starts_with("POST /v1/chat/completions ") {
                other_log
                    .lock()
                    .expect("other")
                    .push(first.trim().to_string());
                match routes.iter().find(|(start, _, _)| first.starts_with(start)) {
                    Some((_, status, text)) => reply(&mut stream, status, text),
                    None => reply(&mut stream, "404 Not Found", "{\"error\":\"no route\"}"),
                }
                continue;
            }
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let nonce = nonce_in(request["messages"][0]["content"].as_str().unwrap_or(""));
            log.lock().expect("log").push(request);
            auth_log.lock().expect("auth").push(authorization);
            let (status, answer) = match script.next() {
                Some(Say::Text(t)) => (
                    "200 OK",
                    json!({"choices": [{"message": {"role": "assistant",
                        "content": t.replace("{N}", &nonce)}}]})
                    .to_string(),
                ),
                Some(Say::Calls(calls)) => (
                    "200 OK",
                    json!({"choices": [{"message": {"role": "assistant", "content": null,
                        "tool_calls": calls.iter().enumerate().map(|(i, (name, args))| json!({
                            "id": format!("call_{i}"), "type": "function",
                            "function": {"name": name, "arguments": args.to_string()}
                        })).collect::<Vec<_>>()}}]})
                    .to_string(),
                ),
                Some(Say::Raw(status, text)) => (status, text),
                None => (
                    "500 Internal Server Error",
                    json!({"error": "script exhausted"}).to_string(),
                ),
            };
            reply(&mut stream, status, &answer);
        }
    });
    FakeEndpoint {
        url,
        seen,
        auth,
        other,
    }
}

/// A client named `name` that offers sampling, with tool use when `tools`.
fn sampling_client(name: &str, tools: bool) -> ClientInfo {
    let caps = ClientCapabilities::builder().enable_sampling();
    let caps = if tools {
        caps.enable_sampling_tools().build()
    } else {
        caps.build()
    };
    ClientInfo::new(caps, Implementation::new(name, "0"))
}

/// A client whose model is a script, offered through sampling.
struct Sampler {
    tools: bool,
    script: Mutex<Vec<Say>>,
    seen: Arc<Mutex<Vec<CreateMessageRequestParams>>>,
}

impl ClientHandler for Sampler {
    fn get_info(&self) -> ClientInfo {
        sampling_client("scripted-sampler", self.tools)
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
            Some(Say::Raw(..)) | None => {
                return Err(ErrorData::internal_error("script exhausted", None));
            }
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
    let transport = common::serve_transport(&s.ws, envs, |cmd| {
        cmd.env("EVIDENCE_STORE_TEST_PAYLOADS", s.payloads.path())
            .env_remove("EVIDENCE_STORE_MODEL_URL")
            .env_remove("EVIDENCE_STORE_MODEL");
    });
    client.serve(transport).await.expect("initialize succeeds")
}

/// Serves `s` with the endpoint at `url` and its model `model`, and `envs`.
async fn serve_model(
    s: &Setup,
    url: &str,
    model: &str,
    envs: &[(&str, &str)],
) -> RunningService<RoleClient, ()> {
    let mut envs = envs.to_vec();
    envs.push(("EVIDENCE_STORE_MODEL_URL", url));
    envs.push(("EVIDENCE_STORE_MODEL", model));
    serve_with(s, (), &envs).await
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

const CONTEXT_12288: (&str, &str) = ("EVIDENCE_STORE_MODEL_CONTEXT_TOKENS", "12288");
const ANSWER_1024: (&str, &str) = ("EVIDENCE_STORE_MODEL_MAX_OUTPUT_TOKENS", "1024");
const SMALL_MODEL: [(&str, &str); 2] = [CONTEXT_12288, ANSWER_1024];
/// The small model, allowed at most 4 chunks.
const FOUR_CHUNKS: [(&str, &str); 3] = [
    CONTEXT_12288,
    ANSWER_1024,
    ("EVIDENCE_STORE_TOOL_OUTPUT_MAX_CHUNKS", "4"),
];
/// A model timeout far past every deadline the tests set.
const PATIENT: (&str, &str) = ("EVIDENCE_STORE_MODEL_TIMEOUT_SECS", "300");

/// The setting of each call's deadline to `secs` seconds.
fn deadline(secs: &str) -> (&'static str, &str) {
    ("EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS", secs)
}

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
- If no relevant data exists, output inside the wrapper:
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
        // A `<think>` prefix and no closing tag: still this call's final report, with a
        // note that it may be cut short.
        say(
            "<think>two errors</think>\n<ai-agent-{N}-FINAL format=\"text\">1500: ERROR disk full on /var\n2750: ERROR retry failed",
        ),
    ]);
    let client = serve_model(&s, &model.url, "fake-model", &SMALL_MODEL).await;
    let result = tool_output(
        &client,
        json!({"handle": "log-1", "extract": "every ERROR line with its line number"}),
    )
    .await;
    assert_ne!(result.is_error, Some(true));
    assert_eq!(
        text_of(&result),
        "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE log-1, STRATEGY:read-grep:\n\n\
         NOTE: the model's report ended without its closing tag, so it may be cut short \
         (an answer may hold at most 1024 tokens).\n\n\
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
        say(
            "<think>item 400</think><ai-agent-{N}-FINAL format=\"text\">item 400 is broken</ai-agent-{N}-FINAL>",
        ),
        say(
            "<ai-agent-{N}-FINAL format=\"text\">item-400 (id 400) has status broken</ai-agent-{N}-FINAL>",
        ),
    ]);
    let client = serve_model(&s, &model.url, "fake-model", &FOUR_CHUNKS).await;
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
- If no relevant data exists, output inside the wrapper:
  NO RELEVANT DATA FOUND
  <short description of what kind of information is available in this chunk>"#,
            doc.len(),
            (doc.len() * 10).div_ceil(25)
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

/// The chunk overlap is a setting (10% by default): at 25% the map prompt says so and two
/// chunks share a quarter of their size.
#[tokio::test]
async fn the_chunk_overlap_is_configurable() {
    let doc = huge_json();
    let s = setup(&[("json-1", "exec_command", &doc)]);
    let model = fake_endpoint(vec![
        say(
            "<ai-agent-{N}-FINAL format=\"text\">NO RELEVANT DATA FOUND\nnone</ai-agent-{N}-FINAL>",
        ),
        say("<ai-agent-{N}-FINAL format=\"text\">item 400</ai-agent-{N}-FINAL>"),
        say("<ai-agent-{N}-FINAL format=\"text\">item 400</ai-agent-{N}-FINAL>"),
    ]);
    let mut envs = FOUR_CHUNKS.to_vec();
    envs.push(("EVIDENCE_STORE_TOOL_OUTPUT_CHUNK_OVERLAP_PERCENT", "25"));
    let client = serve_model(&s, &model.url, "fake-model", &envs).await;
    let result = tool_output(
        &client,
        json!({"handle": "json-1", "extract": "broken items"}),
    )
    .await;
    assert!(
        text_of(&result).ends_with("item 400"),
        "{}",
        text_of(&result)
    );
    let seen = model.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 3, "two maps and one reduce");
    let map1 = seen[0]["messages"][0]["content"].as_str().expect("system");
    assert!(
        map1.contains("CHUNK INFO\n- Index: 1 of 2\n- Overlap: 25%\n"),
        "{map1}"
    );
    let c1 = seen[0]["messages"][1]["content"].as_str().expect("chunk 1");
    let c2 = seen[1]["messages"][1]["content"].as_str().expect("chunk 2");
    assert!(doc.starts_with(c1) && doc.ends_with(c2));
    let shared = c1.len() + c2.len() - doc.len();
    assert!(
        (24..=26).contains(&(shared * 100 / c1.len())),
        "{shared} of {}",
        c1.len()
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
    let client = serve_model(&s, &model.url, "fake-model", &SMALL_MODEL).await;

    let result = tool_output(&client, json!({"handle": "log-1", "extract": "errors"})).await;
    let body = text_of(&result);
    let head = "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE log-1, STRATEGY:truncate:\n\n\
                WARNING: tool_output fallback to truncate (read-grep: turn 1: no final report produced; \
                the answer began: \"I looked around and everything seems fine.\").\n\
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
            "STRATEGY:truncate:\n\nWARNING: tool_output fallback to truncate (full-chunked: chunk 1 of 2: no final report produced; the answer began: \"Here are the items: none.\").\n"
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
/// and the map prompt (at 2.5 bytes a token).
fn chunk_bytes_for(tool: &str, doc: &str, extract: &str) -> usize {
    let prompt = format!(
        "You are an internal extraction agent. You must extract information from a document chunk.\n\n\
         SOURCE TOOL\n- Name: {tool}\n- Arguments (verbatim JSON): {{\"command\":\"make test\"}}\n\n\
         DOCUMENT STATS\n- Bytes: {}\n- Lines: 1\n- Tokens (estimate): {}\n\n\
         CHUNK INFO\n- Index: 1 of 1\n- Overlap: 10%\n\n\
         WHAT TO EXTRACT\n{extract}\n\n\
         OUTPUT FORMAT (required)\n- Emit exactly one XML final-report wrapper:\n  \
         <ai-agent--FINAL format=\"text\"> ... </ai-agent--FINAL>\n\
         - Put your extracted result inside the wrapper.\n- If no relevant data exists, output inside the wrapper:\n  \
         NO RELEVANT DATA FOUND\n  \
         <short description of what kind of information is available in this chunk>",
        doc.len(),
        (doc.len() * 10).div_ceil(25)
    );
    ((12288 - 1024 - ((prompt.len() + 64) * 10).div_ceil(25)) * 25 / 10).max(1024)
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
            "<think>easy</think>\n<ai-agent-{N}-FINAL format=\"text\">ERROR one</ai-agent-{N}-FINAL>",
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
         The stored output of this handle is stale: line 12 of the session changed on disk."
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
    // A session whose trimmed output has a handle in the store.
    let handle = real_session(&s, &test_log());
    assert!(!handle.is_empty());
    let client = serve_with(&s, (), &[]).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let tool = tools
        .iter()
        .find(|t| t.name == "tool_output")
        .expect("tool_output listed");
    // The input schema exactly as published (the snapshot holds it whole).
    insta::assert_json_snapshot!(
        "tool_output_schema",
        serde_json::to_value(&*tool.input_schema).expect("json")
    );
    let annotations = tool.annotations.clone().expect("annotations");
    assert_eq!(annotations.read_only_hint, Some(true));
    client.cancel().await.ok();
}

const KEY_SECRET: &str = "sk-KEYSECRET-4242";
const URL_SECRET: &str = "PWSECRET-7777";

/// Runs `serve` with `args`, the API key in `EVIDENCE_STORE_TEST_API_KEY` and every log
/// level on; calls `tool_output` once on `small`; returns the answer and the whole log.
async fn serve_logged(s: &Setup, args: &[String]) -> (String, String) {
    let root = s.ws.root().to_owned();
    let payloads = s.payloads.path().to_owned();
    let (transport, stderr) =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            cmd.arg("serve")
                .args(args)
                .env("PROMPT_DIARY_WORKSPACE", &root)
                .env("EVIDENCE_STORE_TEST_PAYLOADS", &payloads)
                .env("EVIDENCE_STORE_TEST_API_KEY", KEY_SECRET)
                .env_remove("EVIDENCE_STORE_MODEL_URL")
                .env_remove("EVIDENCE_STORE_MODEL")
                .env("RUST_LOG", "trace");
        }))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("server starts");
    let client = ().serve(transport).await.expect("initialize succeeds");
    let result = tool_output(&client, json!({"handle": "small", "extract": "errors"})).await;
    client.cancel().await.ok();
    let mut log = String::new();
    if let Some(mut stderr) = stderr {
        use tokio::io::AsyncReadExt;
        stderr.read_to_string(&mut log).await.expect("stderr");
    }
    (text_of(&result), log)
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [KEY_SECRET, URL_SECRET] {
        assert!(!text.contains(secret), "{what} holds a secret: {text}");
    }
}

#[tokio::test]
async fn a_misconfigured_endpoint_stops_serve_with_a_clear_message_and_no_secret() {
    let ws = Workspace::example();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin())
            .arg("serve")
            .args(args)
            .arg("--workspace")
            .arg(ws.root())
            .env("EVIDENCE_STORE_TEST_API_KEY", KEY_SECRET)
            .env("RUST_LOG", "trace")
            .env_remove("PROMPT_DIARY_WORKSPACE")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("binary runs");
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8(out.stderr).expect("utf-8 stderr");
        assert_no_secret("the error", &err);
        assert_no_secret("stdout", &String::from_utf8_lossy(&out.stdout));
        err
    };
    let err = run(&[
        "--model-url",
        &format!("http://user:{URL_SECRET}@127.0.0.1:9/v1"),
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
    let err = run(&[
        "--model-url",
        &format!("ftp://user:{URL_SECRET}@x/v1"),
        "--model",
        "m",
        "--model-api-key-env",
        "EVIDENCE_STORE_TEST_API_KEY",
    ]);
    assert!(
        err.contains("\"ftp://***@x/v1\" is not an http:// or https:// URL"),
        "{err}"
    );

    // Set up, but the endpoint echoes both secrets in its error; nothing listens at the
    // second. Neither answers nor any log line (every level) show them.
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    let model = fake_endpoint(vec![Say::Raw(
        "401 Unauthorized",
        format!("{{\"error\":\"bad key {KEY_SECRET} for user:{URL_SECRET}\"}}"),
    )]);
    let with_user = model
        .url
        .replace("http://", &format!("http://user:{URL_SECRET}@"));
    let closed = TcpListener::bind("127.0.0.1:0").expect("port");
    let refused = format!(
        "http://user:{URL_SECRET}@{}/v1",
        closed.local_addr().expect("addr")
    );
    drop(closed);
    for (url, reason) in [
        (
            with_user,
            "full-chunked: chunk 1 of 1: model endpoint answered HTTP 401: {\"error\":\"bad key *** for ***\"}",
        ),
        (
            refused,
            "full-chunked: chunk 1 of 1: model request failed: connection refused",
        ),
    ] {
        let args = [
            "--model-url".to_string(),
            url,
            "--model".into(),
            "m".into(),
            "--model-api-key-env".into(),
            "EVIDENCE_STORE_TEST_API_KEY".into(),
        ];
        let (answer, log) = serve_logged(&s, &args).await;
        assert_eq!(reason_of(&answer), reason);
        assert_no_secret("the answer", &answer);
        assert!(log.contains("http://***@127.0.0.1:"), "{log}");
        assert!(log.contains("tool_output fallback to truncate"), "{log}");
        assert_no_secret("the log", &log);
    }
    assert_eq!(
        model.auth.lock().expect("auth").clone(),
        vec![Some(format!("Bearer {KEY_SECRET}"))]
    );
}

#[tokio::test]
async fn the_api_key_is_sent_as_a_bearer_token_and_never_logged() {
    const SECRET: &str = "sk-test-SECRET-0123456789";
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    let model = fake_endpoint(vec![say(
        "<ai-agent-{N}-FINAL format=\"text\">ERROR one</ai-agent-{N}-FINAL>",
    )]);
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

/// A loopback endpoint whose chat completions `answer` writes raw onto the connection,
/// after the request was read; other paths get a 404.
fn raw_endpoint(answer: fn(&mut std::net::TcpStream)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback listener");
    let url = format!("http://{}/v1", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let Some(request) = common::http::read_request(&mut reader) else {
                    return;
                };
                if request.is_chat() {
                    answer(&mut stream);
                } else {
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            });
        }
    });
    url
}

/// The reason of a truncate-fallback body.
fn reason_of(body: &str) -> &str {
    let start = body
        .find("WARNING: tool_output fallback to truncate (")
        .map(|i| i + "WARNING: tool_output fallback to truncate (".len())
        .unwrap_or_else(|| panic!("no fallback: {body}"));
    let end = body[start..].find(").\n").map_or(body.len(), |i| start + i);
    &body[start..end]
}

async fn fallback_reason(s: &Setup, envs: &[(&str, &str)]) -> String {
    let client = serve_with(s, (), envs).await;
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tool_output(&client, json!({"handle": "small", "extract": "errors"})),
    )
    .await
    .expect("answered within 60 s");
    client.cancel().await.ok();
    reason_of(&text_of(&result)).to_string()
}

#[tokio::test]
async fn endpoint_errors_and_garbage_fall_back_with_the_reason() {
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    let model = fake_endpoint(vec![
        Say::Raw("200 OK", "this is not JSON {\"choices\"".into()),
        Say::Calls(vec![]),
        Say::Raw(
            "400 Bad Request",
            format!("{{\"error\":\"{}\"}}", "x".repeat(500)),
        ),
    ]);
    let client = serve_model(&s, &model.url, "m", &[]).await;
    let mut reasons = Vec::new();
    for _ in 0..4 {
        let result = tool_output(&client, json!({"handle": "small", "extract": "errors"})).await;
        let body = text_of(&result);
        assert!(body.ends_with(").\nERROR one\n"), "{body}");
        reasons.push(reason_of(&body).to_string());
    }
    client.cancel().await.ok();
    assert_eq!(
        reasons[0],
        "full-chunked: chunk 1 of 1: model answer could not be read: not JSON (expected ident at \
         line 1 column 2); it began: \"this is not JSON {\\\"choices\\\"\""
    );
    // An answer with an empty tool-call list and no text: no final report.
    assert_eq!(
        reasons[1],
        "full-chunked: chunk 1 of 1: no final report produced; the answer was empty"
    );
    // HTTP errors quote the first 200 bytes of the body.
    assert_eq!(
        reasons[2],
        format!(
            "full-chunked: chunk 1 of 1: model endpoint answered HTTP 400: {{\"error\":\"{}",
            "x".repeat(190)
        )
    );
    assert_eq!(
        reasons[3],
        "full-chunked: chunk 1 of 1: model endpoint answered HTTP 500: {\"error\":\"script exhausted\"}"
    );

    // Nothing listening.
    let closed = TcpListener::bind("127.0.0.1:0").expect("port");
    let url = format!("http://{}/v1", closed.local_addr().expect("addr"));
    drop(closed);
    let reason = fallback_reason(
        &s,
        &[
            ("EVIDENCE_STORE_MODEL_URL", &url),
            ("EVIDENCE_STORE_MODEL", "m"),
        ],
    )
    .await;
    assert_eq!(
        reason,
        "full-chunked: chunk 1 of 1: model request failed: connection refused"
    );

    // No answer within the model timeout.
    let silent = hanging_endpoint();
    let reason = fallback_reason(
        &s,
        &[
            ("EVIDENCE_STORE_MODEL_URL", &silent.url),
            ("EVIDENCE_STORE_MODEL", "m"),
            ("EVIDENCE_STORE_MODEL_TIMEOUT_SECS", "1"),
        ],
    )
    .await;
    assert_eq!(
        reason,
        "full-chunked: chunk 1 of 1: model request failed: timed out after 1 s"
    );

    // Headers at once, then a body that trickles in past the timeout: still a timeout.
    let trickle = raw_endpoint(|stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
        );
        for _ in 0..100 {
            std::thread::sleep(std::time::Duration::from_millis(100));
            if stream.write_all(b" ").is_err() {
                return;
            }
        }
    });
    let reason = fallback_reason(
        &s,
        &[
            ("EVIDENCE_STORE_MODEL_URL", &trickle),
            ("EVIDENCE_STORE_MODEL", "m"),
            ("EVIDENCE_STORE_MODEL_TIMEOUT_SECS", "1"),
        ],
    )
    .await;
    assert_eq!(
        reason,
        "full-chunked: chunk 1 of 1: model request failed: timed out after 1 s"
    );
}

/// A reply larger than the cap is not read whole: the call falls back saying so, whether
/// the reply announces its length or streams until the connection closes.
#[tokio::test]
async fn a_huge_reply_is_not_read_past_the_cap() {
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    // 512 MiB without a length, written until the client hangs up.
    let streaming = raw_endpoint(|stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"choices\":[{\"message\":{\"content\":\"",
        );
        let block = vec![b'x'; 1 << 16];
        for _ in 0..(512 << 20) / block.len() {
            if stream.write_all(&block).is_err() {
                return;
            }
        }
    });
    let announced = raw_endpoint(|stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 536870912\r\n\r\n{",
        );
    });
    for url in [&streaming, &announced] {
        let reason = fallback_reason(
            &s,
            &[
                ("EVIDENCE_STORE_MODEL_URL", url),
                ("EVIDENCE_STORE_MODEL", "m"),
                ("EVIDENCE_STORE_MODEL_TIMEOUT_SECS", "120"),
            ],
        )
        .await;
        // 4096 output tokens allow 64 KiB; the floor is 1 MiB.
        assert_eq!(
            reason,
            "full-chunked: chunk 1 of 1: the model's reply is larger than 1048576 bytes; it was \
             not read further"
        );
    }
}

/// A sampling client that answers from a script, each answer only once the test lets it.
struct GatedSampler {
    script: Mutex<Vec<Say>>,
    asked: Arc<std::sync::atomic::AtomicUsize>,
    gate: Arc<tokio::sync::Semaphore>,
}

impl ClientHandler for GatedSampler {
    fn get_info(&self) -> ClientInfo {
        sampling_client("gated-sampler", true)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let nonce = nonce_in(params.system_prompt.as_deref().unwrap_or(""));
        let next = {
            let mut script = self.script.lock().expect("script");
            (!script.is_empty()).then(|| script.remove(0))
        };
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.gate
            .acquire()
            .await
            .map_err(|_| ErrorData::internal_error("gate closed", None))?
            .forget();
        match next {
            Some(Say::Text(t)) => Ok(CreateMessageResult::new(
                SamplingMessage::assistant_text(t.replace("{N}", &nonce)),
                "scripted".into(),
            )),
            _ => Err(ErrorData::internal_error("script exhausted", None)),
        }
    }
}

#[tokio::test]
async fn concurrent_calls_share_one_sampling_client_and_other_tools_keep_answering() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let s = setup(&[("a", "Bash", "alpha\n"), ("b", "Bash", "beta\n")]);
    let asked = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let sampler = GatedSampler {
        script: Mutex::new(vec![
            say("<ai-agent-{N}-FINAL format=\"text\">one</ai-agent-{N}-FINAL>"),
            say("<ai-agent-{N}-FINAL format=\"text\">two</ai-agent-{N}-FINAL>"),
        ]),
        asked: asked.clone(),
        gate: gate.clone(),
    };
    let client = Arc::new(serve_with(&s, sampler, &[]).await);
    let calls: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|h| {
            let client = client.clone();
            tokio::spawn(
                async move { tool_output(&client, json!({"handle": h, "extract": "x"})).await },
            )
        })
        .collect();
    // Both calls wait for their model, which answers only once the ping was answered: a
    // ping queued behind them would never be.
    assert!(
        eventually(20, || asked.load(Ordering::SeqCst) == 2).await,
        "both calls asked the client's model"
    );
    let ping = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        client.call_tool(CallToolRequestParams::new("prompt_diary_ping")),
    )
    .await
    .expect("ping answered while both calls were still running");
    assert!(ping.is_ok());
    assert!(
        calls.iter().all(|c| !c.is_finished()),
        "the ping's answer came first"
    );
    gate.add_permits(2);
    let mut bodies = Vec::new();
    for (call, h) in calls.into_iter().zip(["a", "b"]) {
        let body = text_of(&call.await.expect("call task"));
        let head =
            format!("ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {h}, STRATEGY:full-chunked:\n\n");
        bodies.push(body.strip_prefix(&head).expect("header").to_string());
    }
    // Which call got which scripted answer depends on arrival order; each got one.
    bodies.sort();
    assert_eq!(bodies, ["one", "two"]);
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    if let Ok(client) = Arc::try_unwrap(client) {
        client.cancel().await.ok();
    }
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

/// The basic `tool_output` case on a real handle: a large multi-line output in a session, its
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
    let client = serve_model(&s, &model.url, "fake-model", &SMALL_MODEL).await;
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

fn call_request(name: &str, args: Value) -> rmcp::model::ClientRequest {
    let Value::Object(args) = args else {
        panic!("object arguments")
    };
    rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new(name.to_string()).with_arguments(args),
    ))
}

/// A call whose model never answers ends at the deadline with the truncate fallback
/// saying so, and its request is dropped.
#[tokio::test]
async fn a_call_ends_at_its_deadline_with_the_truncate_fallback() {
    use std::sync::atomic::Ordering;
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    let model = hanging_endpoint();
    let client = serve_model(&s, &model.url, "m", &[PATIENT, deadline("2")]).await;
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        tool_output(&client, json!({"handle": "small", "extract": "errors"})),
    )
    .await
    .expect("answered within 30 s, long before the 300 s model timeout");
    assert_eq!(
        text_of(&result),
        "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE small, STRATEGY:truncate:\n\n\
         WARNING: tool_output fallback to truncate (deadline of 2 s reached).\nERROR one\n"
    );
    assert!(
        eventually(20, || model.closed.load(Ordering::SeqCst) == 1).await,
        "the model request was dropped"
    );
    client.cancel().await.ok();
}

/// Cancelled calls stop: each drops its model request, gives its slot back, and a ping
/// sent after more cancelled calls than there are slots is answered.
#[tokio::test]
async fn cancelled_calls_drop_their_model_requests_and_free_their_slots() {
    use std::sync::atomic::Ordering;
    const CALLS: usize = 20;
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    let model = hanging_endpoint();
    let client = serve_model(&s, &model.url, "m", &[PATIENT]).await;
    // Sixteen calls take every slot; each is cancelled once its model request arrived.
    for round in 0..CALLS {
        let handle = client
            .peer()
            .send_cancellable_request(
                call_request(
                    "tool_output",
                    json!({"handle": "small", "extract": "errors"}),
                ),
                rmcp::service::PeerRequestOptions::no_options(),
            )
            .await
            .expect("sent");
        assert!(
            eventually(20, || model.received.load(Ordering::SeqCst) > round).await,
            "call {round} reached the model"
        );
        handle
            .cancel(Some("test".into()))
            .await
            .expect("cancel sent");
    }
    assert!(
        eventually(20, || model.closed.load(Ordering::SeqCst) == CALLS).await,
        "every cancelled call dropped its model request: {} of {CALLS}",
        model.closed.load(Ordering::SeqCst)
    );
    let ping = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        client.call_tool(CallToolRequestParams::new("prompt_diary_ping")),
    )
    .await
    .expect("ping answered within 20 s");
    assert!(ping.is_ok());
    client.cancel().await.ok();
}

/// A sampling client whose model never answers, recording the cancels it receives.
struct SilentSampler {
    asked: Arc<std::sync::atomic::AtomicUsize>,
    cancelled: Arc<std::sync::atomic::AtomicUsize>,
}

impl ClientHandler for SilentSampler {
    fn get_info(&self) -> ClientInfo {
        sampling_client("silent-sampler", true)
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::future::pending().await
    }

    async fn on_cancelled(
        &self,
        _params: rmcp::model::CancelledNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.cancelled
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Through sampling too, the deadline ends the call, and the client is told to stop the
/// sampling request it no longer needs to answer.
#[tokio::test]
async fn a_sampling_call_ends_at_its_deadline_and_cancels_its_sampling_request() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    let asked = Arc::new(AtomicUsize::new(0));
    let cancelled = Arc::new(AtomicUsize::new(0));
    let sampler = SilentSampler {
        asked: asked.clone(),
        cancelled: cancelled.clone(),
    };
    let client = serve_with(&s, sampler, &[deadline("2")]).await;
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        tool_output(&client, json!({"handle": "small", "extract": "errors"})),
    )
    .await
    .expect("answered within 30 s, long before the 300 s sampling timeout");
    assert!(
        text_of(&result)
            .contains("WARNING: tool_output fallback to truncate (deadline of 2 s reached).\n"),
        "{}",
        text_of(&result)
    );
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert!(
        eventually(20, || cancelled.load(Ordering::SeqCst) == 1).await,
        "the sampling request was cancelled"
    );
    client.cancel().await.ok();
}

/// A report for every map and reduce request.
fn reports(n: usize) -> Vec<Say> {
    (0..n)
        .map(|i| {
            say(&format!(
                "<ai-agent-{{N}}-FINAL format=\"text\">part {i}</ai-agent-{{N}}-FINAL>"
            ))
        })
        .collect()
}

/// The chunk lengths of the map requests an endpoint saw.
fn map_chunks(seen: &[Value]) -> Vec<usize> {
    seen.iter()
        .filter(|r| {
            r["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.contains("CHUNK INFO"))
        })
        .map(|r| r["messages"][1]["content"].as_str().map_or(0, str::len))
        .collect()
}

/// Asks for the errors of `log-1` in full-chunked mode: answered in that mode.
async fn full_chunked_log_1(client: &RunningService<RoleClient, ()>) {
    let args = json!({"handle": "log-1", "extract": "errors", "mode": "full-chunked"});
    let body = text_of(&tool_output(client, args).await);
    let head = "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE log-1, STRATEGY:full-chunked:";
    assert!(body.starts_with(head), "{body}");
}

/// The context size is read from the endpoint when it publishes one: llama.cpp's
/// `/props`, else an Ollama model's `context_length` (a most: a smaller configured size
/// wins). Chunks are then sized for it, not for the configured 32768 tokens.
#[tokio::test]
async fn the_context_size_is_read_from_the_endpoint() {
    let log = test_log();
    let s = setup(&[("log-1", "Bash", &log)]);
    let llama = fake_endpoint_with(
        reports(40),
        vec![(
            "GET /props ",
            "200 OK",
            json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}).to_string(),
        )],
    );
    let ollama = fake_endpoint_with(
        reports(40),
        vec![(
            "POST /api/show ",
            "200 OK",
            json!({"parameters": "stop \"<|im_end|>\"", "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 4096}}).to_string(),
        )],
    );
    for model in [&llama, &ollama] {
        let client = serve_model(&s, &model.url, "m", &[ANSWER_1024]).await;
        full_chunked_log_1(&client).await;
        client.cancel().await.ok();
        let chunks = map_chunks(&model.seen.lock().expect("log"));
        // 4096 tokens less 1024 for the answer and the prompt, at 2.5 bytes a token.
        assert!(chunks.len() > 1, "{chunks:?}");
        assert!(
            chunks.iter().all(|c| *c <= (4096 - 1024) * 5 / 2),
            "{chunks:?}"
        );
    }
    assert_eq!(llama.other.lock().expect("other")[0], "GET /props HTTP/1.1");
    assert_eq!(
        ollama.other.lock().expect("other").clone(),
        ["GET /props HTTP/1.1", "POST /api/show HTTP/1.1"]
    );
}

/// A prompt over the endpoint's context (llama.cpp's HTTP 400) is retried once with
/// chunks sized from the numbers in the error; the next call sizes them so at once.
#[tokio::test]
async fn a_context_size_error_is_retried_once_with_smaller_chunks() {
    let log = test_log();
    let s = setup(&[("log-1", "Bash", &log)]);
    let exceeded = json!({"error": {"code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error", "n_prompt_tokens": 16500, "n_ctx": 8192}})
    .to_string();
    let mut script = vec![Say::Raw("400 Bad Request", exceeded)];
    script.extend(reports(40));
    let model = fake_endpoint(script);
    let client = serve_model(&s, &model.url, "m", &[ANSWER_1024]).await;
    for _ in 0..2 {
        full_chunked_log_1(&client).await;
    }
    client.cancel().await.ok();
    let seen = model.seen.lock().expect("log").clone();
    let chunks = map_chunks(&seen);
    // The whole log in one chunk was refused; the retry's chunks fit 8192 - 1024 tokens
    // at the 2.5 bytes a token the refused prompt showed, with a tenth to spare; the
    // second call sent the whole log again (the last chunk).
    assert_eq!(chunks[0], log.len());
    assert!(chunks.len() > 3, "{chunks:?}");
    let fit = (8192 - 1024) * (log.len() + 1200) / 16500;
    let retry = &chunks[1..chunks.len() - 1];
    assert!(retry.iter().all(|c| *c <= fit), "{chunks:?} over {fit}");
    assert_eq!(chunks.last(), Some(&log.len()), "{chunks:?}");
    // Three passes began: the refused one, its retry, and the second call's, which sized
    // its chunks afresh (the endpoint now takes the whole log): one error's numbers size
    // only that call's retry, so an endpoint that once states a tiny context cannot
    // shrink every later call.
    let firsts: Vec<usize> = seen
        .iter()
        .filter(|r| {
            r["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.contains("- Index: 1 of "))
        })
        .map(|r| r["messages"][1]["content"].as_str().map_or(0, str::len))
        .collect();
    assert_eq!(firsts.len(), 3, "{firsts:?}");
    assert_eq!(firsts[2], log.len(), "{firsts:?}");
}

/// Adds session S0011 to `s`: a `Bash` call whose result is `log` (trimmed by compact
/// reads), imported; returns the result's handle.
fn real_session(s: &Setup, log: &str) -> String {
    real_handles(s, &[("Bash", log)]).remove(0)
}

/// Adds session S0011 to `s`: for each `(tool, output)`, a call of `tool` and its result
/// `output` (trimmed by compact reads), imported; returns the results' handles.
fn real_handles(s: &Setup, outputs: &[(&str, &str)]) -> Vec<String> {
    let mut session = String::new();
    for (i, (tool, output)) in outputs.iter().enumerate() {
        let id = format!("toolu_{i}");
        for line in [
            json!({"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": tool, "input": {"command": "make test"}}]}}),
            json!({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": output}]}}),
        ] {
            session.push_str(&format!("{line}\n"));
        }
    }
    let last = 2 * outputs.len();
    s.ws.write(
        &format!("projects/{PROJECT}/sessions/claude-code/make.jsonl"),
        session,
    );
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut rows = String::from_utf8(s.ws.read(&index)).expect("utf-8");
    rows.push_str(&format!("{{\"session_ref\": \"S0011\", \"source\": \"claude-code\", \"source_session_id\": \"make\", \"session_path\": \"sessions/claude-code/make.jsonl\", \"subagent_path\": \"\", \"target_start_line\": 1, \"target_end_line\": {last}, \"turns\": [{{\"target_subagents\": [], \"turn_end_line\": {last}, \"turn_ref\": \"T0001\", \"turn_start_line\": 1}}]}}\n"));
    s.ws.write(&index, rows);
    s.ws.ok(&["import"]);
    let listed: Value =
        serde_json::from_str(&s.ws.ok(&["dump", "handles", PROJECT, "S0011", "--json"]))
            .expect("json");
    let handles: Vec<String> = listed
        .as_array()
        .expect("handles")
        .iter()
        .filter(|h| h["kind"] == "tool_result")
        .map(|h| h["handle"].as_str().expect("handle").to_owned())
        .collect();
    assert_eq!(handles.len(), outputs.len(), "{listed}");
    handles
}

/// The routing cases on real handles, taken from a compact read: a large output's
/// handle goes to `tool_output`; `auto` sends a huge single-line JSON to full-chunked and
/// a standard multi-line log to read-grep.
#[tokio::test]
async fn the_routing_cases_on_real_handles_from_a_compact_read() {
    // 12000 lines: more chunks than the 4 allowed, so read-grep.
    let log = test_log()
        + &(3001..=12000)
            .map(|i| format!("line {i}: ok\n"))
            .collect::<String>();
    let doc = huge_json();
    let s = setup(&[]);
    let expected = real_handles(&s, &[("Bash", &log), ("exec_command", &doc)]);
    let model = fake_endpoint(vec![
        // The JSON: two maps and a reduce.
        say(
            "<ai-agent-{N}-FINAL format=\"text\">NO RELEVANT DATA FOUND\nitems 0-399</ai-agent-{N}-FINAL>",
        ),
        say("<ai-agent-{N}-FINAL format=\"text\">item 400 is broken</ai-agent-{N}-FINAL>"),
        say("<ai-agent-{N}-FINAL format=\"text\">item-400 has status broken</ai-agent-{N}-FINAL>"),
        // The log: the sub-agent greps, then answers.
        Say::Calls(vec![(
            "Grep",
            json!({"file": expected[0], "pattern": "ERROR"}),
        )]),
        say(
            "<ai-agent-{N}-FINAL format=\"text\">1500: ERROR disk full on /var</ai-agent-{N}-FINAL>",
        ),
    ]);
    let client = serve_model(&s, &model.url, "m", &FOUR_CHUNKS).await;
    let Value::Object(args) =
        json!({"project_key": PROJECT, "session_ref": "S0011", "start_line": 1, "end_line": 4})
    else {
        panic!("object")
    };
    let read = client
        .call_tool(CallToolRequestParams::new("read_session_lines").with_arguments(args))
        .await
        .expect("read answers");
    let read: Value = serde_json::from_str(&text_of(&read)).expect("json");
    let from_read: Vec<String> = [1, 3]
        .iter()
        .map(|r| {
            read["records"][*r]["tool_results"][0]["handle"]
                .as_str()
                .expect("a trimmed result has a handle")
                .to_owned()
        })
        .collect();
    assert_eq!(from_read, expected);
    let (log_h, json_h) = (&from_read[0], &from_read[1]);
    // Each handle goes its way: (handle, extract, tool, strategy, answer).
    for (handle, extract, tool, strategy, answer) in [
        (
            json_h,
            "items whose status is not fine",
            "exec_command",
            "full-chunked",
            "item-400 has status broken",
        ),
        (
            log_h,
            "every ERROR line with its line number",
            "Bash",
            "read-grep",
            "1500: ERROR disk full on /var",
        ),
    ] {
        let result = tool_output(&client, json!({"handle": handle, "extract": extract})).await;
        assert_eq!(
            text_of(&result),
            format!(
                "ABSTRACT FROM TOOL OUTPUT {tool} WITH HANDLE {handle}, STRATEGY:{strategy}:\n\n{answer}"
            )
        );
    }
    let seen = model.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 5);
    // The maps carried the stored JSON; the Grep ran over the stored log.
    let c1 = seen[0]["messages"][1]["content"].as_str().expect("chunk 1");
    let c2 = seen[1]["messages"][1]["content"].as_str().expect("chunk 2");
    assert!(doc.starts_with(c1) && doc.ends_with(c2));
    assert_eq!(
        seen[4]["messages"][3]["content"],
        "1500: line 1500: ERROR disk full on /var\n2750: line 2750: ERROR retry failed\n"
    );
    client.cancel().await.ok();
}

/// `handle` with its character at `at` replaced by another hex digit.
fn mistype(handle: &str, at: usize) -> String {
    let mut b = handle.as_bytes().to_vec();
    b[at] = if b[at] == b'0' { b'1' } else { b'0' };
    String::from_utf8(b).expect("ascii")
}

/// A handle with a typo is told it was most likely mistyped (with the handle it is
/// closest to), never that its line changed; a handle written as a file name works.
#[tokio::test]
async fn mistyped_handles_and_handles_with_an_extension() {
    let s = setup(&[]);
    let handle = real_session(&s, &test_log());
    let client = serve_with(&s, (), &[]).await;
    // The last characters hold the line digest, the first ones the session.
    for (typo, nearest) in [(mistype(&handle, 35), true), (mistype(&handle, 0), false)] {
        let result = tool_output(&client, json!({"handle": typo, "extract": "x"})).await;
        let body = text_of(&result);
        assert_ne!(result.is_error, Some(true), "{body}");
        assert!(!body.contains("changed since"), "{body}");
        assert!(
            body.contains(&format!("No stored tool output has the handle {typo}")),
            "{body}"
        );
        assert_eq!(
            body.contains(&format!(
                "but {handle} differs from it in one or two characters"
            )),
            nearest,
            "{body}"
        );
    }
    for name in [
        format!("{handle}.txt"),
        format!("{handle}.log"),
        format!("{handle}.json"),
    ] {
        let result = tool_output(
            &client,
            json!({"handle": name, "extract": "x", "mode": "truncate"}),
        )
        .await;
        assert!(
            text_of(&result).starts_with(&format!(
                "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE {handle}, STRATEGY:truncate:\n\nline 1: ok\n"
            )),
            "{}",
            text_of(&result)
        );
    }
    client.cancel().await.ok();
}

/// A handle whose line is gone says so (not "no stored output"); one whose session file
/// changed since the import gives its advice once.
#[tokio::test]
async fn removed_lines_and_changed_files_are_told_apart_with_one_advice() {
    let s = setup(&[]);
    let handle = real_session(&s, &test_log());
    let path = format!("projects/{PROJECT}/sessions/claude-code/make.jsonl");
    let original = s.ws.read(&path);
    // Changed on disk, not imported again.
    let mut changed = original.clone();
    let at = changed.len() - 20;
    changed[at] = b'#';
    s.ws.write(&path, &changed);
    let client = serve_with(&s, (), &[]).await;
    let result = tool_output(&client, json!({"handle": handle, "extract": "x"})).await;
    let body = text_of(&result);
    assert!(
        body.starts_with(&format!("TOOL_OUTPUT FAILED FOR unknown WITH HANDLE {handle}, STRATEGY:auto:\n\nThe stored output of this handle is stale: ")),
        "{body}"
    );
    assert_eq!(
        body.matches("read the").count() + body.matches("read again").count(),
        1,
        "one advice: {body}"
    );
    client.cancel().await.ok();
    // The line is removed and the session imported again.
    let first_line = original
        .split(|b| *b == b'\n')
        .next()
        .expect("a line")
        .to_vec();
    s.ws.write(&path, [first_line, b"\n".to_vec()].concat());
    s.ws.ok(&["import"]);
    let client = serve_with(&s, (), &[]).await;
    let result = tool_output(&client, json!({"handle": handle, "extract": "x"})).await;
    let body = text_of(&result);
    assert!(!body.contains("No stored tool output"), "{body}");
    assert_eq!(
        body,
        format!(
            "TOOL_OUTPUT FAILED FOR unknown WITH HANDLE {handle}, STRATEGY:auto:\n\n\
             The stored output of this handle is stale: line 2 of session S0011 in project \
             {PROJECT} is gone (the session has 1 lines now); read the session lines again \
             (read_session_lines, compact) for a current handle."
        )
    );
    client.cancel().await.ok();
}

/// Past the limit of 10 tool calls the sub-agent is offered no tools, and told to answer.
#[tokio::test]
async fn read_grep_offers_no_tools_past_the_call_limit() {
    let s = setup(&[("log-1", "Bash", &test_log())]);
    let mut script: Vec<Say> = (1..=10)
        .map(|i| {
            Say::Calls(vec![(
                "Read",
                json!({"file": "log-1.txt", "start_line": i, "end_line": i}),
            )])
        })
        .collect();
    script.push(say(
        "<ai-agent-{N}-FINAL format=\"text\">no ERROR in lines 1-10</ai-agent-{N}-FINAL>",
    ));
    let model = fake_endpoint(script);
    let client = serve_model(&s, &model.url, "m", &SMALL_MODEL).await;
    let result = tool_output(
        &client,
        json!({"handle": "log-1", "extract": "errors", "mode": "read-grep"}),
    )
    .await;
    assert_eq!(
        text_of(&result),
        "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE log-1, STRATEGY:read-grep:\n\nno ERROR in lines 1-10"
    );
    client.cancel().await.ok();
    let seen = model.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 11);
    assert!(seen[9].get("tools").is_some());
    assert!(
        seen[10].get("tools").is_none(),
        "no tools on the 11th request"
    );
    let messages = seen[10]["messages"].as_array().expect("messages");
    // `log-1.txt` named the payload: the tenth Read answered line 10.
    assert_eq!(messages[messages.len() - 2]["content"], "10: line 10: ok\n");
    assert_eq!(messages[messages.len() - 1]["role"], "user");
    assert!(
        messages[messages.len() - 1]["content"]
            .as_str()
            .is_some_and(|t| t.contains("Answer now with the final report")),
        "{messages:?}"
    );
}

/// Sixteen calls waiting at a model that never answers take every slot; the server still
/// reads stdin: their cancels stop them and a ping is answered long before the deadline.
#[tokio::test]
async fn with_every_slot_taken_cancels_and_a_ping_are_still_read() {
    use std::sync::atomic::Ordering;
    const CALLS: usize = 16;
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    let model = hanging_endpoint();
    let client = serve_model(&s, &model.url, "m", &[PATIENT, deadline("100")]).await;
    let mut calls = Vec::new();
    for _ in 0..CALLS {
        calls.push(
            client
                .peer()
                .send_cancellable_request(
                    call_request(
                        "tool_output",
                        json!({"handle": "small", "extract": "errors"}),
                    ),
                    rmcp::service::PeerRequestOptions::no_options(),
                )
                .await
                .expect("sent"),
        );
    }
    assert!(
        eventually(20, || model.received.load(Ordering::SeqCst) == CALLS).await,
        "every call reached the model: {} of {CALLS}",
        model.received.load(Ordering::SeqCst)
    );
    for call in calls {
        call.cancel(Some("test".into())).await.expect("cancel sent");
    }
    let ping = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        client.call_tool(CallToolRequestParams::new("prompt_diary_ping")),
    )
    .await
    .expect("ping answered within 20 s, long before the 100 s deadline");
    assert!(ping.is_ok());
    assert!(
        eventually(20, || model.closed.load(Ordering::SeqCst) == CALLS).await,
        "every cancelled call dropped its model request: {} of {CALLS}",
        model.closed.load(Ordering::SeqCst)
    );
    client.cancel().await.ok();
}

/// Closing stdin while sixteen calls wait at a model that never answers ends `serve`
/// promptly (after the grace, with an error), not at the calls' deadline.
#[test]
fn closing_stdin_with_every_slot_taken_ends_serve_promptly() {
    use std::process::{Command, Stdio};
    use std::sync::atomic::Ordering;
    const CALLS: usize = 16;
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    let model = hanging_endpoint();
    let mut child = Command::new(bin())
        .arg("serve")
        .env("PROMPT_DIARY_WORKSPACE", s.ws.root())
        .env("EVIDENCE_STORE_TEST_PAYLOADS", s.payloads.path())
        .env("RUST_LOG", "off")
        .env("EVIDENCE_STORE_MODEL_URL", &model.url)
        .env("EVIDENCE_STORE_MODEL", "m")
        .env("EVIDENCE_STORE_MODEL_TIMEOUT_SECS", "300")
        .env("EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut send = |message: Value| writeln!(stdin, "{message}").expect("written");
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}),
    );
    let answer = lines.next().expect("initialize answered").expect("read");
    assert!(answer.contains("\"result\""), "{answer}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for id in 1..=CALLS {
        send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "tool_output", "arguments": {"handle": "small", "extract": "errors"}}}),
        );
    }
    let received = || model.received.load(Ordering::SeqCst);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while received() < CALLS && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(received(), CALLS, "every call reached the model");
    drop(stdin);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if std::time::Instant::now() > end {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    let status =
        status.expect("serve ended within 20 s of stdin closing, not at the 100 s deadline");
    assert!(
        !status.success(),
        "calls left unanswered end serve with an error"
    );
}

/// Sixteen calls through the client's sampling take every slot; the client's answers are
/// still read, so every call ends with its model's answer, long before the deadline.
#[tokio::test]
async fn with_every_slot_taken_sampling_answers_are_still_read() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const CALLS: usize = 16;
    let s = setup(&[("a", "Bash", "alpha\n")]);
    let asked = Arc::new(AtomicUsize::new(0));
    let sampler = GatedSampler {
        script: Mutex::new(
            (0..CALLS)
                .map(|_| say("<ai-agent-{N}-FINAL format=\"text\">done</ai-agent-{N}-FINAL>"))
                .collect(),
        ),
        asked: asked.clone(),
        gate: Arc::new(tokio::sync::Semaphore::new(CALLS)),
    };
    let client = Arc::new(serve_with(&s, sampler, &[deadline("100")]).await);
    let calls: Vec<_> = (0..CALLS)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                tool_output(&client, json!({"handle": "a", "extract": "x"})).await
            })
        })
        .collect();
    let answered = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        let mut bodies = Vec::new();
        for call in calls {
            bodies.push(text_of(&call.await.expect("call task")));
        }
        bodies
    })
    .await
    .expect("every call answered within 20 s, long before the 100 s deadline");
    for body in answered {
        assert_eq!(
            body,
            "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE a, STRATEGY:full-chunked:\n\ndone"
        );
    }
    assert_eq!(asked.load(Ordering::SeqCst), CALLS);
    if let Ok(client) = Arc::try_unwrap(client) {
        client.cancel().await.ok();
    }
}

/// A sub-agent whose tool results outgrow the model's context (4096 tokens, from the
/// endpoint's `/props`, less 1024 for the answer: 7680 bytes at 2.5 a token): each turn is
/// cut to fit, the oldest result first, saying so; then a call made again ends the run.
#[tokio::test]
async fn read_grep_turns_fit_the_published_context_and_a_repeated_call_ends_the_run() {
    let s = setup(&[("log-1", "Bash", &test_log())]);
    let first = json!({"file": "log-1", "start_line": 1, "end_line": 200});
    let model = fake_endpoint_with(
        vec![
            Say::Calls(vec![("Read", first.clone())]),
            Say::Calls(vec![(
                "Read",
                json!({"file": "log-1", "start_line": 201, "end_line": 400}),
            )]),
            Say::Calls(vec![("Read", first)]),
        ],
        vec![(
            "GET /props ",
            "200 OK",
            json!({"default_generation_settings": {"n_ctx": 4096}}).to_string(),
        )],
    );
    let client = serve_model(&s, &model.url, "m", &SMALL_MODEL).await;
    let result = tool_output(
        &client,
        json!({"handle": "log-1", "extract": "errors", "mode": "read-grep"}),
    )
    .await;
    let body = text_of(&result);
    assert!(
        body.starts_with(
            "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE log-1, STRATEGY:truncate:\n\n\
             WARNING: tool_output fallback to truncate (read-grep: turn 3: the model repeated \
             its tool call of turn 1, Read {"
        ),
        "{body}"
    );
    assert!(
        body.contains("stopped, as it would only repeat itself)."),
        "{body}"
    );
    client.cancel().await.ok();
    let seen = model.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 3, "no request after the repeat");
    let sent: usize = seen[2].to_string().len();
    let tools: usize = seen[2]["tools"].to_string().len();
    assert!(
        sent - tools <= 7680,
        "{} bytes of messages sent",
        sent - tools
    );
    let messages = seen[2]["messages"].as_array().expect("messages");
    let results: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().expect("content"))
        .collect();
    assert_eq!(results.len(), 2);
    assert!(
        results[0].contains("to fit the model's context"),
        "the oldest result was cut, saying so: {}",
        results[0]
    );
    assert!(
        results[1].starts_with("201: line 201: ok\n"),
        "{}",
        results[1]
    );
    assert!(!results[1].contains("to fit the model's context"));
}

/// A model that only repeats the prompt's example wrapper (`...`) wrote no report: the
/// answer is the fallback saying so, never the dots.
#[tokio::test]
async fn an_echo_of_the_prompts_example_wrapper_falls_back() {
    let s = setup(&[("small", "Bash", "ERROR one\n")]);
    let model = fake_endpoint(vec![say(
        "<ai-agent-{N}-FINAL format=\"text\"> ... </ai-agent-{N}-FINAL>",
    )]);
    let client = serve_model(&s, &model.url, "m", &SMALL_MODEL).await;
    let result = tool_output(&client, json!({"handle": "small", "extract": "errors"})).await;
    let body = text_of(&result);
    assert!(
        body.starts_with(
            "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE small, STRATEGY:truncate:\n\n\
             WARNING: tool_output fallback to truncate (full-chunked: chunk 1 of 1: no final \
             report produced (the answer only repeated the prompt's example wrapper)"
        ),
        "{body}"
    );
    assert!(body.ends_with("ERROR one\n"), "{body}");
    client.cancel().await.ok();
}

/// A grep that compiles within the size limit but searches a multi-megabyte payload (2 MB
/// of [`common::wordy_log`]) for seconds, longer than one grep's budget in a debug build.
const COSTLY_GREP: &str = r"\b(?:\w+\W+){8}[0-9]{40}";

/// An endpoint that answers every chat request with ten [`COSTLY_GREP`] calls over
/// `handle`, as a careless model might.
fn costly_grep_endpoint(handle: &'static str) -> FakeEndpoint {
    let greps: Vec<(&'static str, Value)> = (0..10)
        .map(|_| ("Grep", json!({"file": handle, "pattern": COSTLY_GREP})))
        .collect();
    fake_endpoint(vec![Say::Calls(greps); 64])
}

/// `serve` over `s` with the model at `url` and the call deadline `deadline`, driven line
/// by line, its log kept.
fn logged_line_server(s: &Setup, url: &str, deadline: &str) -> common::stdio::LineServer {
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("serve")
        .env("PROMPT_DIARY_WORKSPACE", s.ws.root())
        .env("EVIDENCE_STORE_TEST_PAYLOADS", s.payloads.path())
        .env("RUST_LOG", "evidence_store=debug,rmcp=warn")
        .env("EVIDENCE_STORE_MODEL_URL", url)
        .env("EVIDENCE_STORE_MODEL", "m")
        .env("EVIDENCE_STORE_MODEL_TIMEOUT_SECS", "300")
        .env("EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS", deadline);
    common::stdio::LineServer::start_logged(cmd, "costly", std::time::Duration::from_secs(60))
}

/// Waits until `server`'s log holds `what` at least `n` times, for at most `secs`
/// seconds; whether it did.
fn logged_times(server: &common::stdio::LineServer, what: &str, n: usize, secs: u64) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if server.log.lock().expect("log").matches(what).count() >= n {
            return true;
        }
        if std::time::Instant::now() > end {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Far above any normal answer or exit here; reaching it fails the test as a hang.
const HANG: std::time::Duration = std::time::Duration::from_secs(30);

/// Two read-grep calls whose model asks for costly greps hold no async worker: a ping is
/// answered while they search, their cancels stop the searches and free the server, and
/// closing stdin with a third one searching ends `serve`.
#[test]
fn costly_sub_agent_greps_leave_ping_cancel_and_end_of_input_free() {
    let s = setup(&[("big", "Bash", &common::wordy_log(2_000_000))]);
    let model = costly_grep_endpoint("big");
    let mut server = logged_line_server(&s, &model.url, "600");
    let read_grep = json!({"handle": "big", "extract": "errors", "mode": "read-grep"});
    let a = server.call("tool_output", read_grep.clone());
    let b = server.call("tool_output", read_grep.clone());
    // Both are searching once their greps say so (a build without that log line has
    // begun them by the time this wait ends).
    let searching = "read-grep sub-agent's Grep searching";
    logged_times(&server, searching, 2, 10);
    let ping = server.call("prompt_diary_ping", json!({}));
    let answer = server.try_answer(ping, HANG);
    assert!(
        answer.is_some_and(|a| a.get("result").is_some()),
        "the ping was answered while the greps searched"
    );
    assert!(
        server.try_answer(a, std::time::Duration::ZERO).is_none()
            && server.try_answer(b, std::time::Duration::ZERO).is_none(),
        "the ping came first"
    );
    for id in [a, b] {
        server.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "test"}}),
        );
    }
    assert!(
        logged_times(&server, "reason=\"cancelled\"", 2, HANG.as_secs()),
        "the cancels stopped both calls: {}",
        server.log.lock().expect("log")
    );
    let ping = server.call("prompt_diary_ping", json!({}));
    assert!(
        server
            .try_answer(ping, HANG)
            .is_some_and(|a| a.get("result").is_some()),
        "a ping is answered after the cancels"
    );
    // A third call searching when stdin closes: `serve` stops it and exits.
    let searched = server.log.lock().expect("log").matches(searching).count();
    let _c = server.call("tool_output", read_grep);
    logged_times(&server, searching, searched + 1, 10);
    drop(server.stdin.take());
    let status = common::exit_or_hang(&mut server.child, HANG)
        .expect("serve ended after stdin closed while a grep searched");
    assert!(!status.success(), "the unanswered call is reported");
    let log = server.log.lock().expect("log").clone();
    assert!(log.contains("reason=\"end of input\""), "{log}");
    assert!(
        !log.contains("timed out draining in-flight responses"),
        "serve did not wait out rmcp's drain: {log}"
    );
}

/// A read-grep call whose model asks for costly greps ends at its deadline with the
/// truncate fallback saying so: the greps are held to what is left of the deadline.
#[test]
fn costly_sub_agent_greps_end_at_the_call_s_deadline() {
    let s = setup(&[("big", "Bash", &common::wordy_log(2_000_000))]);
    let model = costly_grep_endpoint("big");
    let mut server = logged_line_server(&s, &model.url, "2");
    let call = server.call(
        "tool_output",
        json!({"handle": "big", "extract": "errors", "mode": "read-grep"}),
    );
    let answer = server
        .try_answer(call, HANG)
        .expect("answered, not after ten greps of five seconds each");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("WARNING: tool_output fallback to truncate (deadline of 2 s reached)."),
        "{answer}"
    );
    // The grep's budget is what is left of the deadline, and the call's stop flag reads as
    // set at that same instant: whichever the search notices first stopped it.
    let log = server.log.lock().expect("log").clone();
    assert!(
        log.contains("read-grep sub-agent's Grep stopped halt=Budget")
            || log.contains(
                "read-grep sub-agent's Grep stopped halt=Asked reason=\"deadline reached\""
            ),
        "the grep stopped at what was left of the deadline: {log}"
    );
}

/// A full read of about 12 MB of session lines, answered as one streamed line, is stopped
/// by its cancel while the client has not read it yet, and the next answer follows; a
/// second one in flight when stdin closes does not keep `serve` past its end.
#[test]
fn a_large_full_read_in_flight_is_stopped_by_its_cancel_and_by_the_end_of_input() {
    use std::process::Command;
    let s = setup(&[]);
    let output = "x".repeat(256 << 10);
    let outputs: Vec<(&str, &str)> = (0..48).map(|_| ("Bash", output.as_str())).collect();
    real_handles(&s, &outputs);
    let (mut child, log) = common::spawn_logged(
        Command::new(bin())
            .arg("serve")
            .env("PROMPT_DIARY_WORKSPACE", s.ws.root())
            .env("RUST_LOG", "rmcp=warn,evidence_store=info"),
    );
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").expect("written");
        stdin.flush().expect("flushed");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}),
    );
    let mut line = String::new();
    out.read_line(&mut line).expect("initialize answered");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let read = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "read_session_lines", "arguments": {"project_key": PROJECT,
            "session_ref": "S0011", "start_line": 1, "end_line": 96, "mode": "full"}}})
    };
    send(read(1));
    // Its answer has begun (the client reads no more of it yet): it is in flight.
    let mut begun = vec![0u8; 64 << 10];
    out.read_exact(&mut begun).expect("the answer begins");
    assert!(begun.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":1,"));
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "test"}}),
    );
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "prompt_diary_ping", "arguments": {}}}));
    let mut rest = Vec::new();
    out.read_until(b'\n', &mut rest)
        .expect("the read's answer ends");
    let answer = [begun, rest].concat();
    let answer: Value = serde_json::from_slice(&answer).expect("one whole JSON message");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .expect("a text");
    assert!(
        text.ends_with(
            "\n[evidence-store: this result was stopped before its end: the request was \
             cancelled or the input ended]"
        ),
        "the cancel stopped the read: {} bytes, ending {:?}",
        text.len(),
        &text[text.len().saturating_sub(100)..]
    );
    let mut ping = String::new();
    out.read_line(&mut ping).expect("the ping is answered");
    assert!(
        ping.starts_with("{\"jsonrpc\":\"2.0\",\"id\":2,\"result\""),
        "{ping}"
    );
    // Another read in flight, unread, when stdin closes.
    send(read(3));
    let mut begun = vec![0u8; 64 << 10];
    out.read_exact(&mut begun).expect("the answer begins");
    drop(stdin);
    let status = common::exit_or_hang(&mut child, HANG)
        .expect("serve ended after stdin closed while a read was in flight");
    assert!(!status.success(), "the unanswered read is reported");
    let log = std::fs::read_to_string(log.path()).expect("log");
    assert!(
        !log.contains("timed out draining in-flight responses"),
        "serve did not wait out rmcp's drain: {log}"
    );
}
