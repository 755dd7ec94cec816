//! Every wait has an end, through the real binary: a stopped holder of the document lock
//! makes every other command fail with a message naming it instead of waiting for ever;
//! `serve` answers its ping and reads meanwhile; closing stdin ends `serve` even with a
//! request that never finishes; `verify` never calls a healthy store damaged because of
//! its temp directory, and cleans up after a killed run.

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{BIN, PROJECT, Workspace};
use serde_json::json;

/// A generous bound: the bug was "never".
const NEVER: Duration = Duration::from_secs(30);

/// A process stopped with SIGSTOP; continued and killed when dropped, even when the test
/// fails, so that no test leaves a stopped lock holder behind.
struct Stopped(Child);

impl Stopped {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let pid = self.0.id() as libc::pid_t;
        unsafe {
            libc::kill(pid, libc::SIGCONT);
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An `import` of a changed workspace, paused inside its write transaction (holding the
/// document lock and the store's write lock), then stopped.
fn stopped_import(ws: &Workspace) -> Stopped {
    let mut child = Command::new(BIN)
        .args(["import", "--workspace"])
        .arg(ws.root())
        .env("EVIDENCE_STORE_PAUSE_AT", "before-commit")
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env_remove("EVIDENCE_STORE_LOCK_TIMEOUT_SECS")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("import starts");
    let mut line = String::new();
    BufReader::new(child.stderr.as_mut().expect("piped"))
        .read_line(&mut line)
        .expect("reads stderr");
    assert_eq!(line, "evidence-store: paused at before-commit\n");
    let stopped = Stopped(child);
    unsafe {
        libc::kill(stopped.pid() as libc::pid_t, libc::SIGSTOP);
    }
    stopped
}

/// A workspace imported once, then changed (a line appended to a session), so that the
/// next import has something to write.
fn changed_workspace() -> Workspace {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let rel = "projects/Demo-0123456789ab/sessions/claude-code/c1.jsonl";
    let mut bytes = ws.read(rel);
    bytes.extend_from_slice(
        b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"more\"}}\n",
    );
    ws.write(rel, bytes);
    ws
}

/// What a command printed and how it ended; a command still running after `bound` is
/// killed and the test fails.
fn run_bounded(mut cmd: Command, bound: Duration) -> (ExitStatus, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        let _ = err.read_to_string(&mut text);
        text
    });
    let Some(status) = common::exit_or_hang(&mut child, bound) else {
        panic!("{cmd:?} still running after {bound:?}");
    };
    (status, reader.join().expect("reader"))
}

fn command(ws: &Workspace, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .arg("--workspace")
        .arg(ws.root())
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "warn")
        .env("EVIDENCE_STORE_LOCK_TIMEOUT_SECS", "2");
    cmd
}

/// A `serve` driven line by line: requests out, answers in, each with a bound.
type Server = common::stdio::LineServer;

/// `serve` on `ws` with `envs`, past its handshake.
fn start_server(ws: &Workspace, envs: &[(&str, &str)]) -> Server {
    Server::start(
        common::stdio::serve_command(ws, envs),
        "bounded-waits",
        NEVER,
    )
}

#[test]
fn a_stopped_lock_holder_is_named_by_every_command_that_would_wait_for_it() {
    let ws = changed_workspace();
    let holder = stopped_import(&ws);
    let named = format!("process {}", holder.pid());
    for args in [&["export"][..], &["build"], &["import"], &["verify"]] {
        let (status, said) = run_bounded(command(&ws, args), NEVER);
        assert!(!status.success(), "{args:?} succeeded: {said}");
        assert!(
            said.contains(&named),
            "{args:?} does not name the holder: {said}"
        );
        assert!(
            said.contains("stop it"),
            "{args:?} does not say what to do: {said}"
        );
        assert!(!said.contains("damaged"), "{args:?}: {said}");
    }
    let (status, said) = run_bounded(command(&ws, &["verify"]), NEVER);
    assert_eq!(status.code(), Some(2), "{said}");
    assert!(said.contains("cannot check: "), "{said}");
    // While it waited, it said once whom for.
    let waiting = format!("waiting for the workspace's document lock, held by {named}");
    assert_eq!(said.matches(&waiting).count(), 1, "{said}");
}

#[test]
fn serve_answers_ping_and_reads_while_a_stopped_process_holds_the_lock() {
    let ws = changed_workspace();
    let holder = stopped_import(&ws);
    let named = format!("process {}", holder.pid());
    let mut server = start_server(&ws, &[("EVIDENCE_STORE_LOCK_TIMEOUT_SECS", "2")]);
    let ping = server.call("prompt_diary_ping", json!({}));
    let ping = server.answer(ping, NEVER);
    assert!(ping["result"].is_object(), "{ping}");
    // The stopped writer keeps redb from opening the store for writing in this process:
    // reads are answered from a read-only view of the store as it stands (the session
    // whose file the stopped import was to re-index reads as changed), and the next call
    // tries the writable open again.
    let read = server.call(
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0002", "start_line": 1, "end_line": 2}),
    );
    let read = server.text(read, NEVER);
    assert!(read.contains("\"raw_sha256\""), "{read}");
    let read = server.call(
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 2}),
    );
    let read = server.text(read, NEVER);
    assert!(read.contains("changed since it was imported"), "{read}");
    let write = server.call(
        "write_report_title",
        json!({"title": {"title": "A day", "source_user_messages": []}}),
    );
    let write = server.text(write, NEVER);
    assert!(
        write.contains(&named),
        "the write does not name the holder: {write}"
    );
    drop(holder);
    // The holder is gone: the next write gets past the lock.
    let write = server.call(
        "write_report_title",
        json!({"title": {"title": "A day", "source_user_messages": []}}),
    );
    let write = server.text(write, NEVER);
    assert!(!write.contains(&named), "{write}");
    let read = server.call(
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 2}),
    );
    let read = server.text(read, NEVER);
    assert!(read.contains("\"raw_sha256\""), "{read}");
}

/// A model endpoint that accepts connections and never answers; `accepted` says when
/// the server has connected.
fn silent_endpoint() -> (String, mpsc::Receiver<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let url = format!("http://{}/v1", listener.local_addr().expect("address"));
    let (tx, accepted) = mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            held.push(stream);
            let _ = tx.send(());
        }
    });
    (url, accepted)
}

#[test]
fn closing_stdin_ends_serve_while_a_model_call_never_answers() {
    let ws = Workspace::example();
    let payloads = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        payloads.path().join("h1"),
        "line one\nline two\n".repeat(200),
    )
    .expect("payload");
    let (url, accepted) = silent_endpoint();
    let payload_dir = payloads.path().to_string_lossy().into_owned();
    let mut server = start_server(
        &ws,
        &[
            ("EVIDENCE_STORE_TEST_PAYLOADS", &payload_dir),
            ("EVIDENCE_STORE_MODEL_URL", &url),
            ("EVIDENCE_STORE_MODEL", "silent"),
        ],
    );
    server.call(
        "tool_output",
        json!({"handle": "h1", "extract": "every line", "mode": "full-chunked"}),
    );
    accepted.recv_timeout(NEVER).expect("the model call starts");
    drop(server.stdin.take());
    let Some(status) = common::exit_or_hang(&mut server.child, Duration::from_secs(20)) else {
        panic!("serve still running 20 s after stdin closed");
    };
    assert!(
        !status.success(),
        "a request was left unanswered: {status:?}"
    );
}

#[test]
fn verify_without_a_usable_temp_dir_checks_the_store_beside_it() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    for tmpdir in ["/nonexistent/evidence-store-test", "/proc/self"] {
        let mut cmd = command(&ws, &["verify"]);
        cmd.env("TMPDIR", tmpdir);
        let (status, said) = run_bounded(cmd, NEVER);
        assert!(status.success(), "TMPDIR={tmpdir}: {said}");
        assert!(
            said.contains("no problems found"),
            "TMPDIR={tmpdir}: {said}"
        );
    }
}

#[test]
fn verify_removes_the_copies_a_killed_run_left_and_no_other() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    // A process that has ended: its pid names nobody (reuse within the test is unlikely,
    // and would only keep the copy).
    let mut gone = Command::new("true").spawn().expect("true runs");
    let dead = gone.id();
    gone.wait().expect("ends");
    let dir = ws.path(".evidence-store");
    let left = dir.join(format!(".store.redb.{dead}.1.evidence-store-verify.tmp"));
    let live = dir.join(format!(
        ".store.redb.{}.1.evidence-store-verify.tmp",
        std::process::id()
    ));
    let other = dir.join(format!(".store.redb.{dead}.1.something-else.tmp"));
    for path in [&left, &live, &other] {
        std::fs::write(path, b"copy").expect("planted");
    }
    let (status, said) = run_bounded(command(&ws, &["verify"]), NEVER);
    assert!(status.success(), "{said}");
    assert!(!left.exists(), "the killed run's copy is still there");
    assert!(live.exists(), "a running verify's copy was removed");
    assert!(other.exists(), "a file not of our pattern was removed");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("store dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".evidence-store-verify.tmp"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 1, "verify left its own copy: {names:?}");
}

/// Runs a command to its end and returns its output and peak resident memory in bytes.
fn run_measured(mut cmd: Command) -> (ExitStatus, String, u64) {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let pid = child.id() as libc::pid_t;
    let mut child = child;
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = err.read_to_string(&mut text);
        text
    });
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4");
    let status = std::os::unix::process::ExitStatusExt::from_raw(status);
    (
        status,
        reader.join().expect("reader"),
        usage.ru_maxrss as u64 * 1024,
    )
}

#[test]
fn an_oversized_metadata_json_is_refused_before_it_is_read() {
    let ws = Workspace::example();
    // 512 MiB, sparse: nothing to write, and as much to read as the padding attack had.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(ws.path("metadata.json"))
        .expect("metadata.json");
    file.set_len(512 << 20).expect("sized");
    drop(file);
    let (status, said, peak) = run_measured(command(&ws, &["import"]));
    assert!(!status.success(), "{said}");
    assert!(said.contains("metadata.json"), "{said}");
    assert!(said.contains("more than the 16777216 bytes"), "{said}");
    assert!(peak < 128 << 20, "peak RSS {peak} bytes for a refused file");
    assert!(
        !ws.store().exists(),
        "a store was made for an invalid workspace"
    );
}

#[test]
fn an_oversized_index_row_is_refused_by_name() {
    let ws = Workspace::example();
    let rel = "projects/Demo-0123456789ab/sessions.index.jsonl";
    let mut index = ws.read(rel);
    index.extend(std::iter::repeat_n(b' ', (1 << 20) + 1));
    index.push(b'\n');
    ws.write(rel, index);
    let (status, said) = run_bounded(command(&ws, &["import"]), NEVER);
    assert!(!status.success(), "{said}");
    assert!(said.contains("sessions.index.jsonl"), "{said}");
    assert!(
        said.contains("more than the 1048576 bytes a row may have"),
        "{said}"
    );
}

#[test]
fn too_many_open_files_at_start_is_retried_by_the_next_call() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    // The soft limit only, so that this (same-user) test can raise it again.
    let mut server = limited_server(&ws, "-Sn 12");
    let pid = server.child.id();
    let ping = server.call("prompt_diary_ping", json!({}));
    let first = server.answer(ping, NEVER);
    assert_eq!(
        first["result"]["structuredContent"]["status"], "unavailable",
        "the limit did not bite: {first}"
    );
    assert!(
        first.to_string().contains("os error 24"),
        "not too many open files: {first}"
    );
    let raised = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: libc::RLIM_INFINITY,
    };
    let mut hard: libc::rlimit = unsafe { std::mem::zeroed() };
    let got = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            std::ptr::null(),
            &mut hard,
        )
    };
    assert_eq!(got, 0, "prlimit reads the limit");
    let raised = libc::rlimit {
        rlim_cur: raised.rlim_cur.min(hard.rlim_max),
        rlim_max: hard.rlim_max,
    };
    let set = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &raised,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(set, 0, "prlimit raises the limit");
    let ping = server.call("prompt_diary_ping", json!({}));
    let second = server.answer(ping, NEVER);
    assert_eq!(
        second["result"]["structuredContent"]["status"], "ok",
        "{second}"
    );
    let read = server.call(
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 2}),
    );
    let read = server.text(read, NEVER);
    assert!(read.contains("\"raw_sha256\""), "{read}");
}

/// A `serve` started by a shell that first applies `limit` (`ulimit` arguments).
fn limited_server(ws: &Workspace, limit: &str) -> Server {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("ulimit {limit} && exec {BIN} serve"))
        .env("PROMPT_DIARY_WORKSPACE", ws.root())
        .env("RUST_LOG", "off");
    Server::start(cmd, "bounded-waits", NEVER)
}

#[test]
fn serve_answers_40_full_reads_and_a_write_within_512_mib_of_address_space() {
    let ws = Workspace::example();
    ws.add_large_session();
    ws.ok(&["import"]);
    // 512 MiB, and 192 MiB, the least that holds with room to spare (its peak is about
    // 150 MB).
    for limit in ["-v 524288", "-v 196608"] {
        answers_40_full_reads_and_a_write(&ws, limit);
    }
}

fn answers_40_full_reads_and_a_write(ws: &Workspace, limit: &str) {
    let mut server = limited_server(ws, limit);
    let mut ids = Vec::new();
    for i in 0..40 {
        let start = 1 + (i * 50) % 1900;
        ids.push(server.call(
            "read_session_lines",
            json!({"project_key": PROJECT, "session_ref": "S0009",
                   "start_line": start, "end_line": start + 99, "mode": "full"}),
        ));
    }
    let write = server.call(
        "write_report_title",
        json!({"title": {"title": "A day", "source_user_messages": []}}),
    );
    for id in ids {
        let text = server.text(id, Duration::from_secs(120));
        assert!(
            text.contains("\"raw_sha256\""),
            "{limit}, read {id}: {}",
            &text[..text.len().min(300)]
        );
    }
    let answer = server.answer(write, NEVER);
    assert!(answer["result"].is_object(), "{answer}");
    drop(server.stdin.take());
    let status = server.child.wait().expect("serve ends");
    assert!(status.success(), "{status:?}");
}
