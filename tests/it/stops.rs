//! How the program stops when someone else decides it should, and what one answer may
//! hold, through the real binary (each test names the build it runs with
//! `EVIDENCE_STORE_TEST_BIN`, so that it can be shown to fail on a build before the fix):
//! every signal stops `serve` with writes in flight and leaves a store `verify` passes;
//! `run` passes a SIGINT sent to it on and waits for its command a bounded time; a write
//! sent during a long `export` is answered while the export still runs, and a signal
//! stops the export between documents; closing stdin ends a `serve` whose client reads
//! nothing; sixteen full reads of 100 MB ranges are answered within 512 MiB of address
//! space; and a `serve` answers ping and reads while stopped processes hold the store's
//! gate and the document lock.

use crate::common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use common::stdio::LineServer;
use common::{PROJECT, Workspace, bin, cards, exit_or_hang};
use serde_json::{Value, json};

/// A generous bound: the bugs were "never" (or minutes).
const NEVER: Duration = Duration::from_secs(60);

/// SIGTERM first: what a client such as Codex sends.
const SIGNALS: [(rustix::process::Signal, &str, i32); 3] = [
    (rustix::process::Signal::TERM, "SIGTERM", 143),
    (rustix::process::Signal::HUP, "SIGHUP", 129),
    (rustix::process::Signal::INT, "SIGINT", 130),
];

fn signal(child: &Child, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, signal).expect("signal sent");
}

/// `serve` of the build under test on `ws`, logs at `warn` kept, with `envs`.
fn serve_command(ws: &Workspace, envs: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("serve")
        .env("PROMPT_DIARY_WORKSPACE", ws.root())
        .env("RUST_LOG", "warn")
        .envs(envs.iter().copied());
    cmd
}

/// The build under test on `ws` with `args`.
fn command(ws: &Workspace, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .arg("--workspace")
        .arg(ws.root())
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "warn");
    cmd
}

fn verify_text(ws: &Workspace) -> String {
    let out = ws.run(&["verify"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `write_evidence` arguments of session `s`, turn `t` of a load-test workspace.
fn chain(s: usize, t: usize) -> Value {
    let lines = format!("{}-{}", 2 * t - 1, 2 * t);
    cards::material_chain(
        common::LOAD_PROJECT,
        s,
        t,
        cards::user_trigger("asked", &lines),
        &lines,
    )
}

fn appended(answer: &Value) -> bool {
    answer["result"]["content"][0]["text"]
        .as_str()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .is_some_and(|v| v["status"] == "appended")
}

/// SIGINT, SIGTERM and SIGHUP (Codex ends each server it started with SIGTERM) stop a
/// `serve` with writes in flight alike: it exits 128 + the signal, saying so, `verify`
/// right after finds the store healthy (not "not closed cleanly"), and every write is in
/// both its card file and the store, or in neither, the acknowledged ones in both.
#[test]
fn every_signal_stops_serve_with_writes_in_flight_and_verify_finds_the_store_healthy() {
    const SESSIONS: usize = 4;
    const TURNS: usize = 30;
    for (sig, name, code) in SIGNALS {
        let ws = Workspace::load_test(SESSIONS, TURNS);
        ws.ok(&["import"]);
        let mut server = LineServer::start_logged(serve_command(&ws, &[]), "stops", NEVER);
        let mut calls = Vec::new();
        for s in 1..=SESSIONS {
            for t in 1..=TURNS {
                calls.push((server.call("write_evidence", chain(s, t)), (s, t)));
            }
        }
        // Writes are going on: the first is answered, most are still to come.
        let first = server.answer(calls[0].0, NEVER);
        assert!(appended(&first), "{name}: {first}");
        signal(&server.child, sig);
        let status = exit_or_hang(&mut server.child, NEVER)
            .unwrap_or_else(|| panic!("{name}: serve still running {NEVER:?} after the signal"));
        assert_eq!(status.code(), Some(code), "{name}: {status:?}");
        let mut acked = BTreeSet::new();
        for (id, chain) in &calls {
            if let Some(answer) = server.try_answer(*id, Duration::from_millis(50))
                && appended(&answer)
            {
                acked.insert(*chain);
            }
        }
        assert!(
            acked.len() < calls.len(),
            "{name}: every write was answered before the signal stopped the server"
        );
        let log = server.log.lock().unwrap().clone();
        assert!(
            log.contains(&format!(
                "evidence-store serve: interrupted by {name}; every write it acknowledged is kept, and the store was closed"
            )),
            "{name}: {log}"
        );
        let verified = verify_text(&ws);
        assert!(verified.contains("no problems found"), "{name}: {verified}");
        let in_files = cards::chains_in(ws.root(), common::LOAD_PROJECT);
        let exported = cards::exported(&ws.store());
        let in_store = cards::chains_in(exported.path(), common::LOAD_PROJECT);
        assert_eq!(in_files, in_store, "{name}: a write is half there");
        assert!(
            acked.is_subset(&in_files),
            "{name}: acknowledged writes lost: {:?}",
            acked.difference(&in_files).collect::<Vec<_>>()
        );
    }
}

/// SIGTERM while reads stream to a client that reads nothing (its stdout full, the
/// reads' makers waiting to hand on their next pieces): the makers see the stop, let the
/// store go, and it is closed cleanly.
#[test]
fn sigterm_stops_serve_while_reads_stream_to_a_client_that_reads_nothing() {
    let ws = Workspace::example();
    ws.add_large_session();
    ws.ok(&["import"]);
    let mut child = serve_command(&ws, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    // Compact reads of the whole session: each answer is made in more pieces than the
    // transport takes ahead of its writer.
    for id in 1..=12 {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "read_session_lines",
            "arguments": {"project_key": PROJECT, "session_ref": "S0009", "start_line": 1, "end_line": 2000}}});
        writeln!(stdin, "{call}").unwrap();
    }
    // Answers have filled stdout once a first one has begun and nothing more comes.
    let mut begun = [0u8; 4096];
    stdout.read_exact(&mut begun).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    signal(&child, rustix::process::Signal::TERM);
    let status = exit_or_hang(&mut child, NEVER).expect("serve ends after SIGTERM");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("and the store was closed"), "{err}");
    drop((stdin, stdout));
    assert!(verify_text(&ws).contains("no problems found"));
}

/// A `run` started in a workspace-less temp dir with `script` as its command.
fn run_script(script: &str) -> (Child, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(bin())
        .args(["run", "--", "sh", "-c", script])
        .current_dir(dir.path())
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run starts");
    (child, dir)
}

/// SIGINT sent to `run`'s own pid (by `timeout -s INT`, a supervisor, a parent's
/// `send_signal`) is its stop request, as SIGTERM is: passed on to the command, which
/// dies of it, and `run` exits 130 without importing or exporting. A command that
/// ignores it is killed once `run`'s bounded wait is over.
#[test]
fn a_sigint_sent_to_run_is_passed_on_and_a_command_that_ignores_it_is_killed() {
    // The command signals `run` (its parent), then would sleep ten minutes.
    for script in [
        "kill -INT $PPID; exec sleep 600",
        "trap '' INT; kill -INT $PPID; exec sleep 600",
    ] {
        let (mut child, _dir) = run_script(script);
        let status = exit_or_hang(&mut child, NEVER)
            .unwrap_or_else(|| panic!("{script}: run still waiting {NEVER:?} after SIGINT"));
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status.code(), Some(130), "{script}: {err}");
        assert!(err.contains("interrupted by SIGINT"), "{script}: {err}");
    }
}

/// A workspace of `n` sessions whose cards (about 2 KB each) are in the store but not
/// on disk, so that `export` writes every one of them (each an atomic replace with its
/// fsyncs): a long export. A `serve` started on it first (it imports at start, which
/// would forget the cards once their files are gone) is returned ready to write.
fn long_export_workspace(n: usize) -> (Workspace, LineServer) {
    let ws = Workspace::load_test(n, 2);
    for s in 1..=n {
        let card = json!({"project_key": common::LOAD_PROJECT, "session_ref": format!("S{s:04}"),
            "evidence_chains": [{"turn_ref": "T0001", "summary": "x".repeat(2000)}]});
        ws.write(
            &format!("projects/{}/evidence/S{s:04}.json", common::LOAD_PROJECT),
            card.to_string(),
        );
    }
    ws.ok(&["import"]);
    let mut server = LineServer::start_logged(serve_command(&ws, &[]), "stops", NEVER);
    let ping = server.call("prompt_diary_ping", json!({}));
    server.answer(ping, NEVER);
    for s in 1..=n {
        std::fs::remove_file(ws.path(&format!(
            "projects/{}/evidence/S{s:04}.json",
            common::LOAD_PROJECT
        )))
        .unwrap();
    }
    (ws, server)
}

fn cards_on_disk(ws: &Workspace) -> usize {
    std::fs::read_dir(ws.path(&format!("projects/{}/evidence", common::LOAD_PROJECT))).map_or(
        0,
        |d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .count()
        },
    )
}

/// Waits until `export` has written its first card (it holds the document lock then).
fn export_under_way(ws: &Workspace, export: &mut Child) {
    let started = std::time::Instant::now();
    while cards_on_disk(ws) == 0 {
        assert!(
            export.try_wait().unwrap().is_none(),
            "the export ended before writing a card"
        );
        assert!(started.elapsed() < NEVER, "the export wrote nothing");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `export` lets the document lock go between batches: a write sent while a long export
/// runs is answered while the export is still running, not after it (it held the lock
/// and a write transaction for the whole export).
#[test]
fn a_write_sent_during_a_long_export_is_answered_while_the_export_runs() {
    const CARDS: usize = 400;
    let (ws, mut server) = long_export_workspace(CARDS);
    let mut export = command(&ws, &["export"])
        .env("EVIDENCE_STORE_LOCK_TIMEOUT_SECS", "600")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    export_under_way(&ws, &mut export);
    let write = server.call("write_evidence", chain(1, 2));
    let answer = server.answer(write, NEVER);
    let export_running = export.try_wait().unwrap().is_none();
    let written = cards_on_disk(&ws);
    assert!(appended(&answer), "{answer}");
    assert!(
        export_running,
        "the write was answered only after the export ended"
    );
    let status = exit_or_hang(&mut export, Duration::from_secs(600)).expect("export ends");
    assert!(status.success(), "{status:?}");
    assert!(
        written < CARDS,
        "{written} cards were written before the answer"
    );
    // The card the write appended to (to the exported one, or to none when the write
    // came first) is the store's: no batch wrote an older copy over it.
    let rel = format!("projects/{}/evidence/S0001.json", common::LOAD_PROJECT);
    let card = ws.read(&rel);
    assert!(cards::turn_refs(&card).contains(&"T0002".to_owned()));
    let exported = cards::exported(&ws.store());
    assert_eq!(
        card,
        std::fs::read(exported.path().join(&rel)).unwrap(),
        "the card file is the store's"
    );
    assert_eq!(cards_on_disk(&ws), CARDS);
    assert!(verify_text(&ws).contains("no problems found"));
}

/// Every signal stops a long `export` at its next document: it exits 128 + the signal
/// saying the store is unchanged and every file written is whole, with cards still
/// unwritten; the next `export` writes the rest.
#[test]
fn a_signal_stops_a_long_export_between_documents() {
    const CARDS: usize = 300;
    for (sig, name, code) in SIGNALS {
        let (ws, server) = long_export_workspace(CARDS);
        drop(server);
        let mut export = command(&ws, &["export"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        export_under_way(&ws, &mut export);
        signal(&export, sig);
        let status = exit_or_hang(&mut export, NEVER)
            .unwrap_or_else(|| panic!("{name}: export still running {NEVER:?} after it"));
        let mut err = String::new();
        export
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status.code(), Some(code), "{name}: {err}");
        assert!(
            err.contains(&format!(
                "interrupted by {name}; the store is unchanged, and every file written is whole"
            )),
            "{name}: {err}"
        );
        assert!(
            cards_on_disk(&ws) < CARDS,
            "{name}: the export ran to its end"
        );
        let out = ws.ok(&["export"]);
        assert!(out.starts_with("exported "), "{out}");
        assert_eq!(cards_on_disk(&ws), CARDS, "{name}");
    }
}

/// A client that sends requests, reads no answer and closes stdin: with every request
/// slot taken, every hold full and stdout full, `serve` still sees the end of its input
/// and exits (non-zero: requests went unanswered), as the README promises.
#[test]
fn closing_stdin_ends_serve_while_every_slot_is_held_and_stdout_is_full() {
    let ws = Workspace::example();
    ws.add_large_session();
    ws.ok(&["import"]);
    let mut child = Command::new(bin())
        .arg("serve")
        .env("PROMPT_DIARY_WORKSPACE", ws.root())
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"result\""), "{line}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    // 16 running, 16 held, one waiting in the reader's hand and a few more in the pipe:
    // full reads of 100 long lines, whose answers (about 300 KB each) fill stdout.
    for id in 1..=40 {
        let start = 1 + (id * 37) % 1900;
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "read_session_lines",
            "arguments": {"project_key": PROJECT, "session_ref": "S0009", "start_line": start, "end_line": start + 99, "mode": "full"}}});
        writeln!(stdin, "{call}").unwrap();
    }
    drop(stdin);
    // Nothing is read from stdout (it is kept open, full).
    let status = exit_or_hang(&mut child, NEVER);
    drop(stdout);
    let status: ExitStatus =
        status.unwrap_or_else(|| panic!("serve still running {NEVER:?} after stdin closed"));
    assert!(!status.success(), "requests went unanswered: {status:?}");
    assert!(
        status.code().is_some(),
        "serve exited, not killed: {status:?}"
    );
}

/// A session of `lines` lines of about `line_bytes` each (JSON lines whose text is full
/// of characters JSON escapes), added to the example workspace as `S0010`.
fn add_huge_session(ws: &Workspace, lines: usize, line_bytes: usize) {
    let rel = "projects/Demo-0123456789ab/sessions/claude-code/huge.jsonl";
    let path = ws.path(rel);
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let filler = "quote \" backslash \\ tab \t é 😀 plain text ".repeat(line_bytes / 48 + 1);
    for i in 0..lines {
        let text = json!({"type": "user", "message": {"role": "user", "content": format!("{i} {filler}")}});
        writeln!(file, "{text}").unwrap();
    }
    file.flush().unwrap();
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut rows = String::from_utf8(ws.read(&index)).unwrap();
    rows.push_str("{\"session_ref\": \"S0010\", \"source\": \"claude-code\", \"source_session_id\": \"huge\", \"session_path\": \"sessions/claude-code/huge.jsonl\", \"target_start_line\": 1, \"target_end_line\": 1, \"turns\": []}\n");
    ws.write(&index, rows);
}

/// Sixteen full reads of a 100 MB range (100 lines of 1 MB), all in flight at once,
/// under `ulimit -v 512 MiB`: each is answered whole, or refused with a structured
/// error; none aborts the process (a read held its whole range in one buffer: 16 of
/// them needed 1.6 GB, and the allocation failure aborted `serve`).
#[test]
fn sixteen_full_reads_of_100_mb_ranges_are_answered_within_512_mib() {
    const READS: usize = 16;
    let ws = Workspace::example();
    add_huge_session(&ws, 100, 1 << 20);
    ws.ok(&["import"]);
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" serve", 512 << 10))
        .arg(bin())
        .env("PROMPT_DIARY_WORKSPACE", ws.root())
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
    let mut stderr = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})).unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    for id in 1..=READS {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "read_session_lines",
            "arguments": {"project_key": PROJECT, "session_ref": "S0010", "start_line": 1, "end_line": 100, "mode": "full"}}});
        writeln!(stdin, "{call}").unwrap();
    }
    // Each answer is read as it comes (a line of over 100 MB): whole answers, or
    // structured refusals, one for each read.
    let (mut whole, mut refused) = (BTreeSet::new(), BTreeSet::new());
    let mut line = Vec::new();
    let mut answered_text: Option<(usize, [u8; 32])> = None;
    while whole.len() + refused.len() < READS {
        line.clear();
        stdout.read_until(b'\n', &mut line).unwrap();
        if !line.ends_with(b"\n") {
            let status = exit_or_hang(&mut child, NEVER);
            panic!(
                "serve ended ({status:?}) with {} of {READS} reads answered, {} bytes into the next: {}",
                whole.len() + refused.len(),
                line.len(),
                errors.join().unwrap()
            );
        }
        let head = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
        let id: usize = head
            .split("\"id\":")
            .nth(1)
            .and_then(|rest| rest.split([',', '}']).next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        if id == 0 {
            continue;
        }
        if line.len() > 100_000_000 {
            // The text of every whole answer is the same: its bytes after the id.
            let at = head.find(",\"result\"").expect("a result");
            let digest: [u8; 32] = sha2::Digest::finalize(
                <sha2::Sha256 as sha2::Digest>::new_with_prefix(&line[at..]),
            )
            .into();
            match answered_text {
                None => answered_text = Some((line.len() - at, digest)),
                Some(seen) => assert_eq!(seen, (line.len() - at, digest), "read {id}"),
            }
            assert!(
                line.ends_with(b"}}\n") || line.ends_with(b"}\n"),
                "read {id} is not whole"
            );
            whole.insert(id);
        } else {
            let answer: Value = serde_json::from_slice(&line).expect("a JSON answer");
            let text = answer["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or("");
            assert!(
                text.contains("\"status\": \"invalid\"") || answer["error"].is_object(),
                "read {id}: neither whole nor refused: {}",
                &text[..text.len().min(300)]
            );
            refused.insert(id);
        }
    }
    drop(stdin);
    let status = exit_or_hang(&mut child, NEVER).expect("serve ends");
    let log = errors.join().unwrap();
    assert!(status.success(), "{status:?}: {log}");
    assert!(!whole.is_empty(), "no read was answered: {log}");
    // The full text is the session's lines, checked: one of them decoded.
    let (len, _) = answered_text.unwrap();
    assert!(len > 100 << 20, "an answer of {len} bytes");
}

/// Holds the store's gate (the byte-range lock every writable open and close of the
/// store takes, on the last byte redb leaves to its storage backend) as another process
/// in its open or close would, until dropped.
struct GateHeld {
    _file: std::fs::File,
}

fn hold_gate(store: &std::path::Path) -> GateHeld {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(store)
        .unwrap();
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = ((1i64 << 62) + 1023) as libc::off_t;
    lock.l_len = 1;
    let done = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &raw mut lock) };
    assert_eq!(done, 0, "the gate is free to take");
    GateHeld { _file: file }
}

/// An `import` of a changed workspace, paused inside its write transaction (holding
/// the document lock and redb's write lock), then stopped; continued and killed when
/// dropped.
struct StoppedImport(Child);

impl Drop for StoppedImport {
    fn drop(&mut self) {
        signal(&self.0, rustix::process::Signal::CONT);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn stopped_import(ws: &Workspace) -> StoppedImport {
    let mut child = Command::new(bin())
        .args(["import", "--workspace"])
        .arg(ws.root())
        .env("EVIDENCE_STORE_PAUSE_AT", "before-commit")
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env_remove("EVIDENCE_STORE_LOCK_TIMEOUT_SECS")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "evidence-store: paused at before-commit\n");
    signal(&child, rustix::process::Signal::STOP);
    StoppedImport(child)
}

/// While stopped processes hold the store's gate and the document lock (an `import`
/// mid-transaction, another process in its open or close), a new `serve` answers
/// `prompt_diary_ping` `ok` and reads from a read-only view of the store as it stands
/// (as before the gate); a write waits its bounded time and names the lock's holder.
#[test]
fn serve_answers_ping_and_reads_while_stopped_processes_hold_the_gate_and_the_lock() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let rel = "projects/Demo-0123456789ab/sessions/claude-code/c1.jsonl";
    let mut bytes = ws.read(rel);
    bytes.extend_from_slice(
        b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"more\"}}\n",
    );
    ws.write(rel, bytes);
    let holder = stopped_import(&ws);
    let named = format!("process {}", holder.0.id());
    let _gate = hold_gate(&ws.store());
    let mut server = LineServer::start(
        serve_command(&ws, &[("EVIDENCE_STORE_LOCK_TIMEOUT_SECS", "2")]),
        "stops",
        NEVER,
    );
    let ping = server.call("prompt_diary_ping", json!({}));
    let ping = server.answer(ping, NEVER);
    assert_eq!(
        ping["result"]["structuredContent"]["status"], "ok",
        "{ping}"
    );
    // S0002's file is as imported (S0001's changed, for the import to have work).
    let read = server.call(
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0002", "start_line": 1, "end_line": 2}),
    );
    let read = server.text(read, NEVER);
    assert!(read.contains("\"raw_sha256\""), "{read}");
    let write = server.call(
        "write_report_title",
        json!({"title": {"text": "A day", "citations": [{"session_ref": "S0001", "turn_ref": "T0001"}]}}),
    );
    let write = server.text(write, NEVER);
    assert!(
        write.contains(&named),
        "the write does not name the holder: {write}"
    );
    // Served again once the holders are gone.
    drop(holder);
    drop(_gate);
    let read = server.call(
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 9}),
    );
    let read = server.text(read, NEVER);
    assert!(read.contains("\"status\": \"ok\""), "{read}");
}
