//! The stdio protocol edge of the real `serve` binary, driven with raw bytes: every
//! request gets an answer, memory stays bounded while the client does not read, and the
//! end of input finishes every started answer.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{BIN, PROJECT, Workspace};
use evidence_store::harness::DEPTH_MAX;
use serde_json::{Value, json};

/// A `serve` process spoken to line by line.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Raw {
    fn start(ws: &Workspace) -> Raw {
        let mut child = Command::new(BIN)
            .arg("serve")
            .env("PROMPT_DIARY_WORKSPACE", ws.root())
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut raw = Raw {
            child,
            stdin,
            stdout,
        };
        raw.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string());
        assert_eq!(raw.answer()["id"], 0);
        raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        raw
    }

    fn send(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    fn send_bytes(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    /// The next line, which must be a whole JSON message.
    fn answer(&mut self) -> Value {
        let mut line = Vec::new();
        self.stdout.read_until(b'\n', &mut line).expect("read");
        assert_eq!(line.last(), Some(&b'\n'), "a whole line");
        serde_json::from_slice(&line).expect("the answer is JSON")
    }

    fn vm_hwm_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM")
    }

    /// Closes stdin, reads the rest of stdout and waits for the exit.
    fn finish(mut self) -> (Vec<u8>, std::process::ExitStatus) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut self.stdout, &mut rest).expect("read rest");
        let status = self.child.wait().expect("exit");
        (rest, status)
    }
}

fn error_of(answer: &Value) -> (i64, &Value, &str) {
    (
        answer["error"]["code"].as_i64().expect("an error answer"),
        &answer["id"],
        answer["error"]["message"].as_str().expect("message"),
    )
}

fn call(id: u64, tool: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}).to_string()
}

#[test]
fn every_undecodable_request_gets_its_json_rpc_answer() {
    let ws = Workspace::example();
    let mut raw = Raw::start(&ws);
    let read = |extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"read_session_lines","arguments":{{"project_key":"{PROJECT}","session_ref":"S0001","start_line":1,"end_line":1,"x":{extra}}}}}}}"#
        )
    };
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let cases: Vec<(Vec<u8>, i64, Value, &str)> = vec![
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\xfe\"}}"
                .to_vec(),
            -32700,
            json!(7),
            "Parse error",
        ),
        (
            read(r#""\ud800""#).into_bytes(),
            -32602,
            json!(7),
            "Invalid params",
        ),
        (
            read(&"9".repeat(400)).into_bytes(),
            -32602,
            json!(7),
            "Invalid params",
        ),
        (
            read("1e400").into_bytes(),
            -32602,
            json!(7),
            "Invalid params",
        ),
        (read("NaN").into_bytes(), -32700, json!(7), "Parse error"),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["read_session_lines"]}"#
                .to_vec(),
            -32602,
            json!(7),
            "Invalid params",
        ),
        (
            br#"{"jsonrpc":"2.0","id":"seven","params":{}}"#.to_vec(),
            -32600,
            json!("seven"),
            "Invalid Request",
        ),
        (read(&deep).into_bytes(), -32600, json!(7), "Invalid Request"),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":"no/such/method"}"#.to_vec(),
            -32601,
            json!(7),
            "Method not found: no/such/method",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1e2,"method":"ping"}"#.to_vec(),
            -32600,
            Value::Null,
            "Invalid Request",
        ),
        (b"{\"jsonrpc\":".to_vec(), -32700, Value::Null, "Parse error"),
        (b"\x00\x01garbage".to_vec(), -32700, Value::Null, "Parse error"),
        (b"[]".to_vec(), -32600, Value::Null, "Invalid Request"),
    ];
    for (line, code, id, message) in &cases {
        raw.send_bytes(line);
        let answer = raw.answer();
        let what = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
        assert_eq!(answer["jsonrpc"], "2.0", "{what}");
        let got = error_of(&answer);
        assert_eq!((got.0, got.1), (*code, id), "{what}: {answer}");
        assert!(got.2.starts_with(message), "{what}: {answer}");
    }
    // Still serving.
    raw.send(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#);
    assert_eq!(
        raw.answer(),
        json!({"jsonrpc": "2.0", "id": 8, "result": {}})
    );
    let (rest, status) = raw.finish();
    assert!(rest.is_empty() && status.success());
}

/// The error answer to one request line sent after the handshake.
fn error_for(line: &str) -> (i64, String) {
    let ws = Workspace::example();
    let mut raw = Raw::start(&ws);
    raw.send(line);
    let answer = raw.answer();
    let (code, id, message) = error_of(&answer);
    assert_eq!(id, &json!(7), "{answer}");
    let got = (code, message.to_owned());
    let (rest, status) = raw.finish();
    assert!(rest.is_empty() && status.success());
    got
}

/// The answer to `line` is an invalid-params error whose message starts with `prefix`.
fn assert_invalid_params(line: &str, prefix: &str) {
    let (code, message) = error_for(line);
    assert_eq!(code, -32602, "{message}");
    assert!(message.starts_with(prefix), "{message}");
}

#[test]
fn tools_call_without_a_tool_name_is_invalid_params() {
    assert_invalid_params(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{}}}"#,
        "Invalid params for tools/call: missing field `name`; tools/call takes {\"name\"",
    );
}

#[test]
fn tools_call_with_a_number_as_tool_name_is_invalid_params() {
    assert_invalid_params(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5}}"#,
        "Invalid params for tools/call: invalid type: integer `5`, expected a string;",
    );
}

#[test]
fn tools_call_with_arguments_that_are_not_an_object_is_invalid_params() {
    assert_invalid_params(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"prompt_diary_ping","arguments":[1]}}"#,
        "Invalid params for tools/call: invalid type: sequence, expected a map;",
    );
}

#[test]
fn resources_read_answers_resource_not_found() {
    let (code, message) = error_for(
        r#"{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"file:///etc/hosts"}}"#,
    );
    assert_eq!(code, -32002, "{message}");
    assert_eq!(
        message,
        "Unknown resource: file:///etc/hosts (this server has no resources; resources/list is empty)"
    );
}

#[test]
fn prompts_get_answers_unknown_prompt_as_invalid_params() {
    let (code, message) = error_for(
        r#"{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"summarize"}}"#,
    );
    assert_eq!(code, -32602, "{message}");
    assert_eq!(
        message,
        "Unknown prompt: summarize (this server has no prompts; prompts/list is empty)"
    );
}

#[test]
fn an_initialized_notification_before_initialize_is_ignored() {
    let ws = Workspace::example();
    let mut child = Command::new(BIN)
        .arg("serve")
        .env("PROMPT_DIARY_WORKSPACE", ws.root())
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut raw = Raw {
        stdin: child.stdin.take(),
        child,
        stdout,
    };
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    raw.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string());
    assert_eq!(raw.answer()["id"], 0);
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_eq!(
        raw.answer(),
        json!({"jsonrpc": "2.0", "id": 1, "result": {}})
    );
    let (rest, status) = raw.finish();
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    assert!(status.success(), "{status}");
}

/// A 200 MB line is drained, not held, and answered with the id found in its head.
#[test]
fn a_200_mb_line_is_answered_without_being_held() {
    let ws = Workspace::example();
    let mut raw = Raw::start(&ws);
    let mut stdin = raw.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        let head = br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"read_session_lines","arguments":{"x":""#;
        stdin.write_all(head).expect("write");
        let block = vec![b'a'; 1 << 20];
        for _ in 0..200 {
            stdin.write_all(&block).expect("write");
        }
        stdin.write_all(b"\"}}}\n").expect("write");
        stdin
    });
    let answer = raw.answer();
    raw.stdin = Some(writer.join().expect("writer"));
    let (code, id, message) = error_of(&answer);
    assert_eq!((code, id), (-32600, &json!(42)), "{answer}");
    assert!(message.starts_with("Invalid Request"), "{message}");
    // The line was never held: far below its 200 MB.
    let hwm = raw.vm_hwm_kib();
    assert!(hwm < 100 << 10, "VmHWM {hwm} kB");
    raw.send(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#);
    assert_eq!(raw.answer()["id"], 8);
    let (_, status) = raw.finish();
    assert!(status.success());
}

/// A chain with an unknown key nested `depth` levels deep.
fn deep_chain(depth: usize) -> Value {
    let mut deep = json!("bottom");
    for i in 0..depth {
        deep = if i % 2 == 0 {
            json!([deep])
        } else {
            json!({ "k": deep })
        };
    }
    json!({
        "turn_ref": "T0002",
        "trigger": {"type": "user_approval", "summary": "ok", "citations": [{"lines": "7-7"}]},
        "terminal_state": {"type": "clarification_only", "summary": "ok", "citations": [{"lines": "7-7"}]},
        "materiality": "minor",
        "unknown": deep,
    })
}

#[test]
fn deeply_nested_arguments_are_answered() {
    let ws = Workspace::example();
    let mut raw = Raw::start(&ws);
    // 200 levels inside a tool argument, and nearly the most a message may have: each is
    // taken whole through the write path (parse, convert, validate, store, drop).
    for (id, depth) in [(1, 200), (2, DEPTH_MAX - 10)] {
        raw.send(&call(
            id,
            "write_evidence",
            json!({"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": deep_chain(depth)}),
        ));
        let answer = raw.answer();
        assert_eq!(answer["id"], id, "{answer}");
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .expect("a tool result");
        let result: Value = serde_json::from_str(text).expect("JSON text");
        assert!(result["status"].is_string(), "{result}");
    }
    // A slot value nested 200 deep.
    let mut deep = json!("t");
    for _ in 0..200 {
        deep = json!({ "k": deep });
    }
    raw.send(&call(
        3,
        "write_report_title",
        json!({"title": {"text": "T", "extra": deep}}),
    ));
    let answer = raw.answer();
    assert_eq!(answer["id"], 3, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"].is_string(),
        "{answer}"
    );
    let (_, status) = raw.finish();
    assert!(status.success());
}

fn read_args(id: u64, pad: usize) -> String {
    call(
        id,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0009", "start_line": 801, "end_line": 1000, "pad": "p".repeat(pad)}),
    )
}

/// Reads pipelined by a client that stops reading: the server stops reading requests
/// instead of holding their answers, and every one is answered once the client reads.
#[test]
fn pipelined_reads_with_a_stalled_client_are_all_answered_in_bounded_memory() {
    const N: u64 = 100;
    let ws = Workspace::example();
    ws.add_large_session();
    let mut raw = Raw::start(&ws);
    let mut stdin = raw.stdin.take().expect("stdin");
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    // Each request padded to 8 KiB, so that the server cannot take them all into pipes
    // and buffers: it must stop reading.
    let writer = std::thread::spawn(move || {
        for id in 1..=N {
            stdin
                .write_all(format!("{}\n", read_args(id, 8 << 10)).as_bytes())
                .expect("write");
            counter.fetch_add(1, Ordering::SeqCst);
        }
        stdin
    });
    // Not reading. Whatever the timing, the server stops reading stdin before all are
    // sent: they do not fit in the pipes and the requests in flight.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let stalled_at = sent.load(Ordering::SeqCst);
    assert!(
        stalled_at < N as usize,
        "the server read every request while nobody read its answers"
    );
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..N {
        let answer = raw.answer();
        let id = answer["id"].as_u64().expect("numbered answer");
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .expect("tool result");
        assert!(text.starts_with("{\n  \"status\": \"ok\""), "{id}");
        assert!(seen.insert(id), "answered twice: {id}");
    }
    assert_eq!(seen.len(), N as usize);
    raw.stdin = Some(writer.join().expect("writer"));
    let hwm = raw.vm_hwm_kib();
    // The documented bound for this load: requests in flight and their answers (about
    // 150 KB each) on top of the process's own ~40 MB, well under 96 MB; holding every
    // answer would take over 120 MB.
    assert!(
        hwm < 96 << 10,
        "VmHWM {hwm} kB (stalled after {stalled_at} sent)"
    );
    let (rest, status) = raw.finish();
    assert!(rest.is_empty() && status.success());
}

/// Input ends with reads pending: every answer is written whole, then the exit is clean.
/// The reads are short (10 lines): the at most 32 still pending when the input ends must
/// finish within the end-of-input grace (5 s) however loaded the machine, and 32 reads of
/// 200 lines came close to it on a loaded one.
#[test]
fn end_of_input_finishes_every_started_answer() {
    const N: u64 = 120;
    let ws = Workspace::example();
    ws.add_large_session();
    let mut raw = Raw::start(&ws);
    let mut batch = String::new();
    for id in 1..=N {
        batch.push_str(&call(
            id,
            "read_session_lines",
            json!({"project_key": PROJECT, "session_ref": "S0009", "start_line": 801 + id, "end_line": 810 + id}),
        ));
        batch.push('\n');
    }
    let mut stdin = raw.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        stdin.write_all(batch.as_bytes()).expect("write");
        // stdin closes here, with the reads still running.
    });
    let (rest, status) = raw.finish();
    writer.join().expect("writer");
    assert!(status.success(), "{status}");
    assert_eq!(rest.last(), Some(&b'\n'), "the last line is whole");
    let mut ids = std::collections::BTreeSet::new();
    for line in rest.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let answer: Value = serde_json::from_slice(line).expect("every line is whole JSON");
        assert!(answer["result"]["content"][0]["text"].is_string());
        ids.insert(answer["id"].as_u64().expect("id"));
    }
    assert_eq!(ids, (1..=N).collect());
}

/// Answers that cannot be written (the client closed its end of stdout) end the server
/// with a failure, never a clean exit.
#[test]
fn answers_that_cannot_be_written_make_a_failed_exit() {
    let ws = Workspace::example();
    ws.add_large_session();
    let raw = Raw::start(&ws);
    // Nobody reads stdout any more: every later write fails.
    let Raw {
        mut child,
        stdin,
        stdout,
    } = raw;
    drop(stdout);
    let mut stdin = stdin.expect("stdin");
    for id in 1..=4 {
        // The server may already have stopped reading: a failed write here is fine.
        if stdin
            .write_all(format!("{}\n", read_args(id, 0)).as_bytes())
            .is_err()
        {
            break;
        }
    }
    drop(stdin);
    let status = child.wait().expect("exit");
    assert!(!status.success(), "{status}");
}
