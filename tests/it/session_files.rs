//! Session files are opened by one module, never blocking and never through a symlink:
//! a session file swapped for a FIFO, back and forth, while imports run or while a
//! `serve` answers reads, handles and writes, never stops an answer; a session file
//! replaced by a symlink after import is refused by a `serve` already running, and the
//! file it points to is never opened.
//!
//! The binary is the one cargo built; `EVIDENCE_STORE_TEST_BIN` names another one (to show
//! these tests fail on a build before the change).

use crate::common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{PROJECT, Workspace, bin};
use serde_json::{Value, json};

/// Far longer than any of these commands or requests takes; they used to take forever.
const BOUND: Duration = Duration::from_secs(30);
/// How long each swap loop runs at least.
const SWAPPING: Duration = Duration::from_secs(5);

const SESSION: &str = "projects/Demo-0123456789ab/sessions/claude-code/tools.jsonl";

/// Turns of the tools session: each a human prompt (its trigger), a `Bash` call, its
/// result and an answer, four lines.
const TURNS: usize = 1000;

/// A Claude session of [`TURNS`] turns; the first turn's call and result are long, so
/// that reads give handles for them.
fn tools_session() -> String {
    let log: String = (1..=600)
        .map(|n| format!("tests/test_{n}.py::test_case PASSED\n"))
        .collect();
    let long_command = format!("pytest -q {}", "tests/ ".repeat(60));
    let mut out = String::new();
    for turn in 1..=TURNS {
        let (command, result) = if turn == 1 {
            (long_command.clone(), log.clone())
        } else {
            (
                format!("pytest -q tests/test_{turn}.py"),
                "1 passed".to_owned(),
            )
        };
        for line in [
            json!({"type": "user", "message": {"role": "user", "content": format!("run the tests {turn}")}}),
            json!({"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": format!("toolu_{turn}"), "name": "Bash", "input": {"command": command}}]}}),
            json!({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("toolu_{turn}"), "content": result}]}}),
            json!({"type": "assistant", "message": {"role": "assistant", "content": "all passed"}}),
        ] {
            out.push_str(&format!("{line}\n"));
        }
    }
    out
}

/// The example workspace with a large session (so that indexing takes a while before
/// the swapped one) and the tools session `S0010`, at workspace schema 2 or 7.
fn workspace(schema: u8) -> Workspace {
    let ws = Workspace::example();
    ws.add_large_session();
    ws.write(SESSION, tools_session());
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut rows = String::from_utf8(ws.read(&index)).expect("utf-8 index");
    let turns: Vec<Value> = (1..=TURNS)
        .map(|t| {
            json!({"target_subagents": [], "turn_end_line": 4 * t, "turn_ref": format!("T{t:04}"),
                   "turn_start_line": 4 * t - 3})
        })
        .collect();
    let row = json!({"session_ref": "S0010", "source": "claude-code", "source_session_id": "tools",
                     "session_path": "sessions/claude-code/tools.jsonl", "subagent_path": "",
                     "target_start_line": 1, "target_end_line": 4 * TURNS, "turns": turns});
    rows.push_str(&format!("{row}\n"));
    ws.write(&index, rows);
    if schema == 7 {
        ws.to_schema_7();
    }
    ws
}

fn command(ws: &Workspace, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .arg("--workspace")
        .arg(ws.root())
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "off");
    cmd
}

/// Runs a command; panics if it has not ended within [`BOUND`] (it is killed first).
fn run_bounded(ws: &Workspace, args: &[&str]) -> Output {
    let mut child = command(ws, args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    if common::exit_or_hang(&mut child, BOUND).is_none() {
        panic!("`{}` did not end within {BOUND:?}", args.join(" "));
    }
    child.wait_with_output().expect("output")
}

fn ok(ws: &Workspace, args: &[&str]) -> String {
    let out = run_bounded(ws, args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("no NUL")
}

/// Exchanges the two names atomically.
fn exchange(a: &Path, b: &Path) {
    let (a, b) = (c_path(a), c_path(b));
    // SAFETY: two valid NUL-terminated paths; renameat2 touches no memory of ours.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
}

/// Swaps a session file with a FIFO and back, again and again (at least once, however
/// late its thread runs), until stopped; the file is always put back.
struct Swapper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Swapper {
    fn start(file: PathBuf) -> Swapper {
        let fifo = file.with_extension("fifo");
        // SAFETY: a valid NUL-terminated path; mkfifo touches no memory of ours.
        let made = unsafe { libc::mkfifo(c_path(&fifo).as_ptr(), 0o644) };
        assert_eq!(made, 0, "mkfifo: {}", std::io::Error::last_os_error());
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut swaps = 0;
            loop {
                exchange(&file, &fifo);
                std::thread::sleep(Duration::from_micros(1500));
                exchange(&file, &fifo);
                std::thread::sleep(Duration::from_micros(1500));
                swaps += 1;
                if stopped.load(Ordering::Relaxed) {
                    return swaps;
                }
            }
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops; the file is back in place. How many times it was swapped out.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("running")
            .join()
            .expect("swapper ran")
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Imports (`--rehash`, so every file is opened and hashed again) run one after another
/// while the session file is swapped for a FIFO and back. Each ends within the bound,
/// with success or an error naming the file; afterwards the workspace imports and
/// verifies.
fn imports_survive_a_fifo_swap_loop(schema: u8) {
    let ws = workspace(schema);
    ok(&ws, &["import"]);
    let swapper = Swapper::start(ws.path(SESSION));
    let started = Instant::now();
    let (mut succeeded, mut refused) = (0, 0);
    // At least one import, however slow the machine.
    while succeeded + refused == 0 || started.elapsed() < SWAPPING {
        let out = run_bounded(&ws, &["import", "--rehash"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            succeeded += 1;
        } else {
            assert!(
                stderr.contains("tools.jsonl"),
                "a failed import names the file: {stderr}"
            );
            refused += 1;
        }
    }
    let swaps = swapper.stop();
    eprintln!("imports: {succeeded} succeeded, {refused} refused; {swaps} swaps");
    assert!(swaps > 0 && succeeded + refused > 0);
    ok(&ws, &["import", "--rehash"]);
    ok(&ws, &["verify"]);
    let dump = ok(&ws, &["dump", "handles", PROJECT, "S0010", "--json"]);
    assert!(dump.contains("\"handle\""), "{dump}");
}

#[test]
fn imports_survive_a_fifo_swap_loop_on_schema_2() {
    imports_survive_a_fifo_swap_loop(2);
}

#[test]
fn imports_survive_a_fifo_swap_loop_on_schema_7() {
    imports_survive_a_fifo_swap_loop(7);
}

/// `serve` over pipes, spoken to in raw JSON-RPC lines, every wait bounded.
struct Serve(common::stdio::LineServer);

impl Serve {
    fn start(ws: &Workspace) -> Serve {
        let mut cmd = Command::new(bin());
        cmd.arg("serve")
            .env("PROMPT_DIARY_WORKSPACE", ws.root())
            .env("RUST_LOG", "off");
        Serve(common::stdio::LineServer::start(
            cmd,
            "session-files",
            BOUND,
        ))
    }

    /// The answer to one request, or `None` when none came within [`BOUND`].
    fn request(&mut self, method: &str, params: Value) -> Option<Value> {
        let id = self.0.request(method, params);
        self.0.try_answer(id, BOUND)
    }

    /// `(isError, text)` of a tool call; panics when no answer came within the bound.
    fn tool(&mut self, name: &str, arguments: Value) -> (bool, String) {
        let answer = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .unwrap_or_else(|| panic!("{name} got no answer within {BOUND:?}"));
        let result = &answer["result"];
        let text = result["content"][0]["text"]
            .as_str()
            .map_or_else(|| answer.to_string(), str::to_owned);
        (result["isError"] == json!(true), text)
    }

    /// Closes stdin; true when the process then ended within the bound.
    fn close(mut self) -> bool {
        drop(self.0.stdin.take());
        common::exit_or_hang(&mut self.0.child, BOUND).is_some()
    }
}

fn read_args(mode: &str) -> Value {
    json!({"project_key": PROJECT, "session_ref": "S0010", "start_line": 1, "end_line": 8, "mode": mode})
}

/// A schema-7 evidence chain for turn `turn` of `S0010`; `write_evidence` reads its
/// trigger line from the session file (a turn already written is refused before that).
fn chain_args(turn: usize) -> Value {
    let turn = turn.min(TURNS);
    let first = 4 * turn - 3;
    let lines = |a: usize, b: usize| format!("{}-{}", first + a, first + b);
    json!({"project_key": PROJECT, "session_ref": "S0010", "evidence_chain": {
        "turn_ref": format!("T{turn:04}"), "trigger": {"citations": [{"lines": lines(0, 0)}]},
        "agent_reactions": [{"summary": "ran the tests", "citations": [{"lines": lines(1, 2)}]}],
        "outcomes": [{"category": "code_outcome", "summary": "passed", "citations": [{"lines": lines(2, 3)}]}],
        "observed_checks": [],
        "terminal_state": {"type": "material_result", "summary": "done", "citations": [{"lines": lines(3, 3)}]},
        "materiality": "material"}})
}

/// The handles `dump handles` lists for `S0010`.
fn handles(ws: &Workspace) -> Vec<String> {
    let dump = ok(ws, &["dump", "handles", PROJECT, "S0010", "--json"]);
    let listed: Value = serde_json::from_str(&dump).expect("JSON");
    listed
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|h| h["handle"].as_str().map(str::to_owned))
        .collect()
}

/// A running `serve` answers every read, handle read and (schema 7) trigger-reading write
/// while the session file is swapped for a FIFO and back; afterwards it reads the file
/// normally, and closing stdin ends it.
fn serve_survives_a_fifo_swap_loop(schema: u8) {
    let ws = workspace(schema);
    ok(&ws, &["import"]);
    let handle = handles(&ws).into_iter().nth(1).expect("a result handle");
    let mut serve = Serve::start(&ws);
    let (is_error, text) = serve.tool("read_session_lines", read_args("full"));
    assert!(!is_error && text.contains("run the tests"), "{text}");
    let swapper = Swapper::start(ws.path(SESSION));
    let started = Instant::now();
    let (mut n, mut refused) = (0, 0);
    // Until the loop has met the FIFO at least once, however slow the machine (only a
    // loop that never meets it, a hang, fails).
    while refused == 0 || started.elapsed() < SWAPPING {
        assert!(
            started.elapsed() < 4 * BOUND,
            "no read met the FIFO in {:?} ({n} rounds)",
            4 * BOUND
        );
        n += 1;
        for mode in ["compact", "full"] {
            let (_, text) = serve.tool("read_session_lines", read_args(mode));
            if !text.contains("run the tests") {
                refused += 1;
            }
        }
        serve.tool(
            "tool_output_read",
            json!({"handle": handle, "start_line": 1, "end_line": 3}),
        );
        if schema == 7 {
            // A fresh turn each time (the last one is kept for after the loop).
            serve.tool("write_evidence", chain_args(n.min(TURNS - 1)));
        }
    }
    let swaps = swapper.stop();
    eprintln!("{n} rounds, {refused} reads refused, {swaps} swaps");
    let (is_error, text) = serve.tool("read_session_lines", read_args("full"));
    assert!(!is_error && text.contains("run the tests"), "{text}");
    let (is_error, text) = serve.tool(
        "tool_output_read",
        json!({"handle": handle, "start_line": 1, "end_line": 1}),
    );
    assert!(!is_error && text.contains("test_1.py"), "{text}");
    if schema == 7 {
        let (_, text) = serve.tool("write_evidence", chain_args(TURNS));
        assert!(text.contains("\"appended\""), "{text}");
    }
    assert!(serve.close(), "closing stdin ends serve within {BOUND:?}");
}

#[test]
fn serve_survives_a_fifo_swap_loop_on_schema_2() {
    serve_survives_a_fifo_swap_loop(2);
}

#[test]
fn serve_survives_a_fifo_swap_loop_on_schema_7() {
    serve_survives_a_fifo_swap_loop(7);
}

/// Watches one file for opens (inotify), so a test can tell that nothing opened it.
struct OpenWatch {
    fd: std::os::fd::OwnedFd,
}

impl OpenWatch {
    fn new(path: &Path) -> OpenWatch {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscalls on a fresh descriptor and a valid NUL-terminated path.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0, "inotify: {}", std::io::Error::last_os_error());
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let watch = unsafe {
            use std::os::fd::AsRawFd;
            libc::inotify_add_watch(
                fd.as_raw_fd(),
                c_path(path).as_ptr(),
                libc::IN_OPEN | libc::IN_ACCESS,
            )
        };
        assert!(
            watch >= 0,
            "inotify watch: {}",
            std::io::Error::last_os_error()
        );
        OpenWatch { fd }
    }

    /// Whether the file was opened or read since the watch began.
    fn seen(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut buf = [0u8; 4096];
        // SAFETY: reads into a buffer of the given length.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        n > 0
    }
}

/// A session file replaced after import by a symlink to a copy outside the workspace
/// (same bytes, so its stored hashes match): a `serve` that was already running refuses
/// its reads and handles, and never opens the copy.
fn a_session_replaced_by_a_symlink_is_refused(schema: u8) {
    let ws = workspace(schema);
    ok(&ws, &["import"]);
    let handle = handles(&ws).into_iter().nth(1).expect("a result handle");
    let mut serve = Serve::start(&ws);
    let (is_error, text) = serve.tool("read_session_lines", read_args("full"));
    assert!(!is_error && text.contains("run the tests"), "{text}");

    let outside = tempfile::tempdir().expect("temp dir");
    let copy = outside.path().join("tools.jsonl");
    std::fs::write(&copy, ws.read(SESSION)).expect("copy written");
    let watch = OpenWatch::new(&copy);
    std::fs::remove_file(ws.path(SESSION)).expect("removed");
    std::os::unix::fs::symlink(&copy, ws.path(SESSION)).expect("symlink");

    for mode in ["compact", "full"] {
        let (_, text) = serve.tool("read_session_lines", read_args(mode));
        assert!(
            !text.contains("run the tests") && text.contains("\"invalid\""),
            "{mode}: {text}"
        );
        assert!(text.contains("outside the workspace"), "{mode}: {text}");
    }
    let (_, text) = serve.tool(
        "tool_output_read",
        json!({"handle": handle, "start_line": 1, "end_line": 3}),
    );
    assert!(!text.contains("test_1.py"), "{text}");
    assert!(text.contains("outside the workspace"), "{text}");
    assert!(!watch.seen(), "the file outside the workspace was opened");
    assert!(serve.close(), "closing stdin ends serve within {BOUND:?}");
}

#[test]
fn a_session_replaced_by_a_symlink_is_refused_on_schema_2() {
    a_session_replaced_by_a_symlink_is_refused(2);
}

#[test]
fn a_session_replaced_by_a_symlink_is_refused_on_schema_7() {
    a_session_replaced_by_a_symlink_is_refused(7);
}
