//! A `serve` process spoken to in raw JSON-RPC lines over its pipes, every wait bounded:
//! for tests that must see exactly what crosses stdio (integers beyond 64 bits, a stalled
//! or closed stdin, a process under `ulimit`), which an MCP client library would hide.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Workspace;

/// `serve` on `ws`, logs off, with `envs` set: the command [`LineServer::start`] takes.
pub fn serve_command(ws: &Workspace, envs: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(super::BIN);
    cmd.arg("serve")
        .env("PROMPT_DIARY_WORKSPACE", ws.root())
        .env("RUST_LOG", "off")
        .envs(envs.iter().copied());
    cmd
}

/// A server process driven line by line: requests out, answers in.
pub struct LineServer {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// Messages received while waiting for another one.
    early: Vec<Value>,
    /// The answer to `initialize`.
    pub initialized: Value,
    /// What the process wrote to stderr so far ([`LineServer::start_logged`] only).
    pub log: Arc<Mutex<String>>,
}

impl LineServer {
    /// Spawns `cmd` with piped stdin and stdout (stderr dropped) and completes the MCP
    /// handshake as client `name`; panics when `initialize` is not answered within `bound`.
    pub fn start(cmd: Command, name: &str, bound: Duration) -> LineServer {
        Self::start_with(cmd, name, bound, false)
    }

    /// [`LineServer::start`], keeping stderr in [`LineServer::log`].
    pub fn start_logged(cmd: Command, name: &str, bound: Duration) -> LineServer {
        Self::start_with(cmd, name, bound, true)
    }

    fn start_with(mut cmd: Command, name: &str, bound: Duration, logged: bool) -> LineServer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if logged {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("serve starts");
        let log = Arc::new(Mutex::new(String::new()));
        if let Some(stderr) = child.stderr.take() {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    log.lock().expect("log").push_str(&(line + "\n"));
                }
            });
        }
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = LineServer {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 1,
            early: Vec::new(),
            initialized: Value::Null,
            log,
        };
        let init = server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": name, "version": "0"}}),
        );
        server.initialized = server.answer(init, bound);
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    /// Writes one line as it is.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("request written");
        stdin.flush().expect("flushed");
    }

    pub fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string());
    }

    /// Sends a request whose params are the JSON text `params`, sent as written; its id.
    pub fn request_text(&mut self, method: &str, params: &str) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
        ));
        id
    }

    /// Sends a request; its id.
    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        self.request_text(method, &params.to_string())
    }

    pub fn call(&mut self, tool: &str, args: Value) -> u64 {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
    }

    /// The answer to request `id`, or `None` when none came within `bound` (or stdout
    /// closed). Every line on stdout must be a JSON message.
    pub fn try_answer(&mut self, id: u64, bound: Duration) -> Option<Value> {
        if let Some(at) = self.early.iter().position(|m| m["id"] == json!(id)) {
            return Some(self.early.swap_remove(at));
        }
        let deadline = Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).ok()?;
            let message: Value = serde_json::from_str(&line).expect("a JSON line on stdout");
            if message["id"] == json!(id) {
                return Some(message);
            }
            self.early.push(message);
        }
    }

    /// The answer to request `id`; panics when none came within `bound`.
    pub fn answer(&mut self, id: u64, bound: Duration) -> Value {
        self.try_answer(id, bound)
            .unwrap_or_else(|| panic!("no answer to request {id} within {bound:?}"))
    }

    /// The text of a tool call's answer.
    pub fn text(&mut self, id: u64, bound: Duration) -> String {
        let answer = self.answer(id, bound);
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("a text result: {answer}"))
            .to_owned()
    }
}

impl Drop for LineServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
