//! How cited files are checked, through the real binary (`import`, `verify-citations`,
//! `dump citations`, `read_agent_citations`, `export`): only beneath the session's project
//! directory, never in a system directory, never through a symlink or a swapped directory
//! that leads outside, and with the project directory taken from the right record.
//!
//! Where strace is installed, the binary runs under `strace -f -y -e trace=openat,openat2`
//! and the tests assert on what the process actually opened, not only on the statuses.
//! Without strace these tests fail, saying so, unless `EVIDENCE_STORE_SKIP_STRACE=1` is
//! set (then only the statuses are checked).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{BIN, Workspace, call_ok, connect, hex_sha256};
use serde_json::{Value, json};

const P: &str = "Check-0123456789ab";

fn index_row(session_ref: &str, source: &str, path: &str, lines: usize) -> String {
    format!(
        "{}\n",
        json!({"session_ref": session_ref, "source": source, "source_session_id": session_ref,
            "session_path": path, "subagent_path": "", "target_start_line": 1,
            "target_end_line": lines,
            "turns": [{"turn_ref": "T0001", "turn_start_line": 1, "turn_end_line": lines, "target_subagents": []}]})
    )
}

/// A workspace of one project whose sessions are `(session_ref, source, lines)`.
fn workspace(sessions: &[(&str, &str, Vec<Value>)]) -> Workspace {
    let ws = Workspace::one_project("2026-01-20", P, "Check");
    let mut index = String::new();
    for (session_ref, source, lines) in sessions {
        let rel = format!("sessions/{source}/{session_ref}.jsonl");
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        ws.write(&format!("projects/{P}/{rel}"), text);
        index.push_str(&index_row(session_ref, source, &rel, lines.len()));
    }
    ws.write(&format!("projects/{P}/sessions.index.jsonl"), index);
    ws
}

fn claude(cwd: &str, text: &str) -> Vec<Value> {
    vec![
        json!({"type": "user", "timestamp": "2026-01-20T12:00:00Z", "cwd": cwd,
            "message": {"role": "user", "content": "Check it"}}),
        json!({"type": "assistant", "timestamp": "2026-01-20T12:01:00Z", "cwd": cwd,
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}),
    ]
}

fn codex_message(text: &str) -> Value {
    json!({"type": "response_item", "timestamp": "2026-01-20T13:00:02Z",
        "payload": {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text}]}})
}

/// The binary's runs under strace, when strace is here.
struct Trace {
    dir: tempfile::TempDir,
    runs: usize,
}

impl Trace {
    /// `None` only when strace is missing and `EVIDENCE_STORE_SKIP_STRACE=1` says to go on
    /// without it.
    fn new() -> Option<Trace> {
        let here = Command::new("strace")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !here {
            assert!(
                std::env::var("EVIDENCE_STORE_SKIP_STRACE").as_deref() == Ok("1"),
                "strace is not installed: these tests assert on what the binary opens and need it \
                 (apt-get install strace), or set EVIDENCE_STORE_SKIP_STRACE=1 to check only the statuses"
            );
            eprintln!("strace is not installed; checking the statuses only");
            return None;
        }
        Some(Trace {
            dir: tempfile::tempdir().expect("temp dir"),
            runs: 0,
        })
    }

    /// Runs the binary with `args` under strace; returns its stdout and the trace.
    fn run(&mut self, ws: &Workspace, args: &[&str]) -> (String, String) {
        self.run_tracing(ws, args, "trace=openat,openat2,?open")
    }

    /// [`Trace::run`], tracing the system calls `calls` names (an strace `-e` argument).
    fn run_tracing(&mut self, ws: &Workspace, args: &[&str], calls: &str) -> (String, String) {
        self.runs += 1;
        let log = self.dir.path().join(format!("trace.{}", self.runs));
        let out = Command::new("strace")
            .args(["-f", "-y", "-qq", "-e", calls, "-o"])
            .arg(&log)
            .arg(BIN)
            .args(args)
            .arg("--workspace")
            .arg(ws.root())
            .env_remove("PROMPT_DIARY_WORKSPACE")
            .env_remove("RUST_LOG")
            .output()
            .expect("strace runs");
        assert!(
            out.status.success(),
            "{args:?} under strace failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let trace = std::fs::read_to_string(&log).expect("trace");
        (String::from_utf8_lossy(&out.stdout).into_owned(), trace)
    }
}

/// Runs `args`, under strace when there is one; returns stdout and the trace (empty
/// without strace).
fn run(trace: &mut Option<Trace>, ws: &Workspace, args: &[&str]) -> (String, String) {
    match trace {
        Some(t) => t.run(ws, args),
        None => (ws.ok(args), String::new()),
    }
}

/// The calls of a trace that opened something (their result is a descriptor), with the
/// path strace names for it.
fn opened(trace: &str) -> Vec<(&str, &str)> {
    trace
        .lines()
        .filter_map(|line| {
            let (_, result) = line.rsplit_once(") = ")?;
            let path = result.split_once('<')?.1;
            let path = path.strip_suffix('>').unwrap_or(path);
            Some((line, path))
        })
        .collect()
}

/// Asserts that no call in `trace` opened anything at or under `outside`, and that no call
/// names any of `names` at all.
fn assert_never_opened(trace: &str, outside: &[&Path], names: &[&str]) {
    for (line, path) in opened(trace) {
        for dir in outside {
            assert!(
                !Path::new(path).starts_with(dir),
                "opened {path}, outside the project: {line}"
            );
        }
    }
    for line in trace.lines() {
        for name in names {
            assert!(!line.contains(name), "the binary touched {name}: {line}");
        }
    }
}

/// `(reference, status, sha256, detail)` of every citation of one session, as the tool
/// answers.
async fn citations_of(ws: &Workspace, session_ref: &str) -> Vec<(String, String, Value, Value)> {
    verifications_of(ws, session_ref)
        .await
        .into_iter()
        .map(|(reference, v)| {
            (
                reference,
                v["status"].as_str().unwrap_or_default().to_owned(),
                v["sha256"].clone(),
                v["detail"].clone(),
            )
        })
        .collect()
}

/// Working directories that are system directories, the filesystem root or not a
/// directory check nothing: every citation in them is `unchecked` with the reason, no file
/// in them is opened, and no digest of one reaches the tool, `dump` or the receipts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_working_directories_are_unchecked_and_never_read() {
    let mut trace = Trace::new();
    let scratch = tempfile::tempdir().expect("temp dir");
    let etc_link = scratch.path().join("etc-link");
    std::os::unix::fs::symlink("/etc", &etc_link).expect("symlink");
    let a_file = scratch.path().join("a-file");
    std::fs::write(&a_file, "x\n").expect("write");
    let cases: Vec<(&str, String, &str, &str)> = vec![
        ("S0001", "/etc".to_owned(), "shadow:1", "under /etc"),
        ("S0002", "/proc/self".to_owned(), "environ:1", "under /proc"),
        ("S0003", "/".to_owned(), "etc/hostname:1", "filesystem root"),
        (
            "S0004",
            etc_link.display().to_string(),
            "passwd:1",
            "under /etc",
        ),
        (
            "S0005",
            a_file.display().to_string(),
            "group:1",
            "not a directory",
        ),
        ("S0006", "/run".to_owned(), "utmp:1", "under /run"),
    ];
    let sessions: Vec<(&str, &str, Vec<Value>)> = cases
        .iter()
        .map(|(s, cwd, cited, _)| {
            (
                *s,
                "claude-code",
                claude(cwd, &format!("**Evidence**: {cited}")),
            )
        })
        .collect();
    let ws = workspace(&sessions);
    let names = [
        "shadow",
        "environ",
        "hostname",
        "passwd",
        "\"group\"",
        "utmp",
    ];

    let (_, import) = run(&mut trace, &ws, &["import"]);
    assert_never_opened(&import, &[], &names);
    let (out, verify) = run(&mut trace, &ws, &["verify-citations"]);
    assert!(out.contains("(unchecked 6)"), "{out}");
    assert_never_opened(&verify, &[], &names);

    for (session_ref, cwd, cited, says) in &cases {
        let found = citations_of(&ws, session_ref).await;
        assert_eq!(found.len(), 1, "{session_ref}");
        let (reference, status, sha256, detail) = &found[0];
        assert_eq!(reference, cited);
        assert_eq!(status, "unchecked", "{cwd}");
        assert!(sha256.is_null(), "{cwd}: {sha256}");
        let detail = detail.as_str().unwrap_or_default();
        assert!(detail.contains(says), "{cwd}: {detail}");
    }
    let dump: Value =
        serde_json::from_str(&ws.ok(&["dump", "citations", "--json"])).expect("dump is JSON");
    assert_eq!(dump["citations"], 6);
    assert_eq!(dump["by_status"], json!({"unchecked": 6}));
    ws.ok(&["export"]);
    for (session_ref, ..) in &cases {
        let rel = format!("projects/{P}/receipts/evidence-{session_ref}-T0001.json");
        let receipt: Value = serde_json::from_slice(&ws.read(&rel)).expect("receipt");
        let check = &receipt["metadata"]["verification"][0];
        assert_eq!(check["status"], "unchecked");
        assert!(check["sha256"].is_null() && check["file_lines"].is_null());
    }
}

/// Symlinks are judged by where they lead: one to a file outside, one dangling outside,
/// a directory link outside are `outside_project` (not `missing_file`), and nothing outside
/// is opened; the cited file inside is opened beneath the project with the confined flags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_out_of_the_project_are_outside_and_never_opened() {
    let mut trace = Trace::new();
    let outside = tempfile::tempdir().expect("temp dir");
    std::fs::write(outside.path().join("secret.py"), "s\n").expect("write");
    let code = tempfile::tempdir().expect("temp dir");
    let project = code.path();
    std::fs::create_dir_all(project.join("src")).expect("mkdir");
    std::fs::write(project.join("src/a.py"), "1\n2\n3\n").expect("write");
    let link = |target: &Path, name: &str| {
        std::os::unix::fs::symlink(target, project.join(name)).expect("symlink");
    };
    link(&outside.path().join("secret.py"), "link.py");
    link(&outside.path().join("none.py"), "gone.py");
    link(Path::new("../../../../../../../../none.py"), "gone_rel.py");
    link(outside.path(), "out");
    link(Path::new("src/none.py"), "gone_inside.py");
    // A FIFO where a file is cited: opened without blocking, then refused by fstat.
    let made = Command::new("mkfifo")
        .arg(project.join("src/pipe.py"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let text = "**Evidence**: src/a.py:3\n**Evidence**: link.py:1\n**Evidence**: gone.py:1\n\
                **Evidence**: gone_rel.py:1\n**Evidence**: out/secret.py:1\n\
                **Evidence**: gone_inside.py:1\n**Evidence**: src/pipe.py:1";
    let ws = workspace(&[(
        "S0001",
        "claude-code",
        claude(&project.display().to_string(), text),
    )]);

    let (_, import) = run(&mut trace, &ws, &["import"]);
    let (_, verify) = run(&mut trace, &ws, &["verify-citations"]);
    let statuses: Vec<(String, String)> = citations_of(&ws, "S0001")
        .await
        .into_iter()
        .map(|(r, s, ..)| (r, s))
        .collect();
    let want = [
        ("src/a.py:3", "ok"),
        ("link.py:1", "outside_project"),
        ("gone.py:1", "outside_project"),
        ("gone_rel.py:1", "outside_project"),
        ("out/secret.py:1", "outside_project"),
        ("gone_inside.py:1", "missing_file"),
        ("src/pipe.py:1", "unchecked"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(r, s)| ((*r).to_owned(), (*s).to_owned()))
        .collect();
    assert_eq!(statuses, want);
    if trace.is_some() {
        for log in [&import, &verify] {
            assert_never_opened(log, &[outside.path()], &[]);
            // The one cited file read: opened beneath the project's descriptor, not by name.
            let real_project = project.canonicalize().expect("real");
            let reads: Vec<&str> = opened(log)
                .into_iter()
                .filter(|(_, path)| Path::new(path) == real_project.join("src/a.py"))
                .map(|(line, _)| line)
                .collect();
            assert_eq!(reads.len(), 1, "{log}");
            let read = reads[0];
            assert!(read.contains("openat2("), "{read}");
            assert!(
                read.contains(&format!("<{}>, \"src/a.py\"", real_project.display())),
                "{read}"
            );
            for flag in [
                "O_RDONLY",
                "O_NONBLOCK",
                "O_NOFOLLOW",
                "O_CLOEXEC",
                "RESOLVE_BENEATH",
            ] {
                assert!(read.contains(flag), "{flag}: {read}");
            }
        }
    }
}

/// A Codex session's project directory is its turn context's (else its session_meta's);
/// the `cwd` of an `exec_command_begin` event between them is not taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_takes_the_turn_context_cwd_not_an_exec_command_cwd() {
    let project = tempfile::tempdir().expect("temp dir");
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let second = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(project.path().join("src")).expect("mkdir");
    std::fs::write(project.path().join("src/a.py"), "1\n2\n3\n").expect("write");
    // Elsewhere holds no src/a.py; the second project's is one line long.
    std::fs::create_dir_all(second.path().join("src")).expect("mkdir");
    std::fs::write(second.path().join("src/a.py"), "only\n").expect("write");
    let dir = |d: &tempfile::TempDir| d.path().display().to_string();
    let lines = vec![
        json!({"type": "session_meta", "timestamp": "2026-01-20T13:00:00Z",
            "payload": {"id": "x", "cwd": dir(&project)}}),
        json!({"type": "event_msg", "timestamp": "2026-01-20T13:00:01Z",
            "payload": {"type": "exec_command_begin", "call_id": "c1", "command": ["ls"], "cwd": dir(&elsewhere)}}),
        codex_message("**Evidence**: src/a.py:3"),
        json!({"type": "turn_context", "timestamp": "2026-01-20T13:01:00Z",
            "payload": {"cwd": dir(&second), "approval_policy": "never"}}),
        json!({"type": "event_msg", "timestamp": "2026-01-20T13:01:01Z",
            "payload": {"type": "exec_command_begin", "call_id": "c2", "command": ["ls"], "cwd": dir(&project)}}),
        codex_message("**Evidence**: src/a.py:1"),
        json!({"cwd": dir(&elsewhere), "type": "response_item", "timestamp": "2026-01-20T13:01:02Z",
            "payload": {"type": "message", "role": "assistant", "cwd": dir(&elsewhere),
                "content": [{"type": "output_text", "text": "**Evidence**: src/a.py:2"}]}}),
    ];
    let ws = workspace(&[("S0001", "codex", lines)]);
    ws.ok(&["import"]);
    let found = citations_of(&ws, "S0001").await;
    let project_sha = hex_sha256(b"1\n2\n3\n");
    let second_sha = hex_sha256(b"only\n");
    assert_eq!(found.len(), 3, "{found:?}");
    // Before any turn_context: the session_meta's project.
    assert_eq!(
        (found[0].0.as_str(), found[0].1.as_str()),
        ("src/a.py:3", "ok")
    );
    assert_eq!(found[0].2, json!(project_sha));
    // After the turn_context: its directory, whatever the commands' cwd or a stray
    // top-level `cwd` on the Codex line says.
    assert_eq!(
        (found[1].0.as_str(), found[1].1.as_str()),
        ("src/a.py:1", "ok")
    );
    assert_eq!(found[1].2, json!(second_sha));
    assert_eq!(
        (found[2].0.as_str(), found[2].1.as_str()),
        ("src/a.py:2", "line_out_of_range")
    );
    let out = ws.ok(&["verify-citations"]);
    assert!(out.contains("0 changed"), "{out}");
}

/// How many files the swap test cites: each is one more chance for a check to meet the
/// swap between two steps.
const SWAPPED_FILES: usize = 64;

/// `<project>/src` is swapped, over and over, for a symlink to a directory outside whose
/// files have the cited line (the project's have not). While that runs,
/// `verify-citations` never records `ok` (which only an outside file could give) and never
/// opens anything outside. Bounded by time.
#[test]
fn a_directory_swapped_for_a_symlink_never_gives_an_outside_file() {
    let mut trace = Trace::new();
    let outside = tempfile::tempdir().expect("temp dir");
    let outside_src = outside.path().join("src");
    let code = tempfile::tempdir().expect("temp dir");
    let project: PathBuf = code.path().join("proj");
    std::fs::create_dir_all(&outside_src).expect("mkdir");
    std::fs::create_dir_all(project.join("src")).expect("mkdir");
    let mut text = String::new();
    for i in 0..SWAPPED_FILES {
        std::fs::write(
            outside_src.join(format!("a{i}.py")),
            "1\n2\n3\n4\n5\n6\n7\n",
        )
        .expect("write");
        std::fs::write(project.join(format!("src/a{i}.py")), "1\n2\n3\n").expect("write");
        text.push_str(&format!("**Evidence**: src/a{i}.py:5\n"));
    }
    let ws = workspace(&[(
        "S0001",
        "claude-code",
        claude(&project.display().to_string(), &text),
    )]);
    ws.ok(&["import"]);

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = Arc::clone(&stop);
        let project = project.clone();
        let outside_src = outside_src.clone();
        std::thread::spawn(move || {
            let (src, aside) = (project.join("src"), project.join("src.real"));
            let mut swaps = 0u64;
            // At least one swap, however late this thread runs. Stops at the first error
            // too: the directories go when the test fails.
            loop {
                let swapped = std::fs::rename(&src, &aside)
                    .and_then(|()| std::os::unix::fs::symlink(&outside_src, &src))
                    .map(|()| std::thread::yield_now())
                    .and_then(|()| std::fs::remove_file(&src))
                    .and_then(|()| std::fs::rename(&aside, &src));
                if swapped.is_err() {
                    return swaps;
                }
                std::thread::yield_now();
                swaps += 1;
                if stop.load(Ordering::Relaxed) {
                    return swaps;
                }
            }
        })
    };
    let started = Instant::now();
    let mut runs = 0;
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    // At least 5 runs, and more while the swapping lasts (8 s); each run is one command.
    while runs < 5 || started.elapsed() < Duration::from_secs(8) {
        let (out, log) = run(&mut trace, &ws, &["verify-citations"]);
        let by_status = out
            .split_once("session(s) (")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map_or("", |(counts, _)| counts)
            .to_owned();
        for count in by_status.split(", ") {
            let (status, n) = count.rsplit_once(' ').unwrap_or((count, "0"));
            *seen.entry(status.to_owned()).or_default() += n.parse::<usize>().unwrap_or(0);
        }
        assert!(
            !seen.contains_key("ok"),
            "run {runs}: an outside file was checked: {out}"
        );
        assert_never_opened(&log, &[outside.path()], &[]);
        runs += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper");
    assert!(swaps > 0);
    eprintln!("{runs} runs against {swaps} swaps; statuses seen: {seen:?}");
    // With the directory back in place, the project's own files are what is checked.
    let out = ws.ok(&["verify-citations"]);
    assert!(
        out.contains(&format!("(line_out_of_range {SWAPPED_FILES})")),
        "{out}"
    );
}

/// Each citation of one session with its whole verification, as the tool answers.
async fn verifications_of(ws: &Workspace, session_ref: &str) -> Vec<(String, Value)> {
    let client = connect(ws).await;
    let answer = call_ok(
        &client,
        "read_agent_citations",
        json!({"project_key": P, "session_ref": session_ref}),
    )
    .await;
    client.cancel().await.expect("server stops");
    answer["citations"]
        .as_array()
        .expect("citations")
        .iter()
        .map(|c| {
            (
                c["reference"].as_str().unwrap_or_default().to_owned(),
                c["verification"].clone(),
            )
        })
        .collect()
}

/// A cited path that is absolute, or that leaves the project with `..` and comes back,
/// names a file inside the project: it is checked like the plain relative path (`ok`, the
/// file's line count and digest), opened beneath the held project directory by its
/// relative part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_and_dotdot_spellings_inside_the_project_are_checked() {
    let mut trace = Trace::new();
    let code = tempfile::tempdir().expect("temp dir");
    let project = code.path().canonicalize().expect("real").join("proj");
    std::fs::create_dir_all(project.join("src")).expect("mkdir");
    let bytes = b"1\n2\n3\n4\n";
    std::fs::write(project.join("src/a.py"), bytes).expect("write");
    let cited = [
        "src/a.py:2".to_owned(),
        format!("{}:2", project.join("src/a.py").display()),
        "src/../../proj/src/a.py:2".to_owned(),
        format!("{}//./src/../src/a.py:3", project.display()),
        "./src//a.py:4".to_owned(),
    ];
    let text: String = cited
        .iter()
        .map(|c| format!("**Evidence**: {c}\n"))
        .collect();
    let ws = workspace(&[(
        "S0001",
        "claude-code",
        claude(&project.display().to_string(), &text),
    )]);
    let (_, import) = run(&mut trace, &ws, &["import"]);
    let found = verifications_of(&ws, "S0001").await;
    assert_eq!(found.len(), cited.len(), "{found:?}");
    for ((reference, v), want) in found.iter().zip(&cited) {
        assert_eq!(reference, want);
        assert_eq!(v["status"], "ok", "{reference}: {v}");
        assert_eq!(v["file_lines"], 4, "{reference}: {v}");
        assert_eq!(v["sha256"], json!(hex_sha256(bytes)), "{reference}");
    }
    let out = ws.ok(&["verify-citations"]);
    assert!(out.contains("0 changed"), "{out}");
    if trace.is_some() {
        for (line, path) in opened(&import) {
            if Path::new(path) == project.join("src/a.py") {
                assert!(
                    line.contains(&format!("<{}>, \"src/a.py\"", project.display())),
                    "opened by its part beneath the project: {line}"
                );
                assert!(line.contains("RESOLVE_BENEATH"), "{line}");
            }
        }
    }
}

/// Bytes read from `path` in a trace of `read` calls (strace `-y` names each descriptor).
fn bytes_read(trace: &str, path: &Path) -> u64 {
    let fd_tag = format!("<{}>", path.display());
    trace
        .lines()
        .filter(|line| line.contains("read(") && line.contains(&fd_tag))
        .filter_map(|line| line.rsplit_once(") = ")?.1.trim().parse::<u64>().ok())
        .sum()
}

/// One file cited under many spellings of its path (and of the working directory) is
/// opened once per distinct normalised path and read once per run, whatever it is
/// called: the checker remembers it by its path beneath the project and by its identity.
#[test]
fn a_file_cited_under_many_spellings_is_read_once() {
    let mut trace = Trace::new();
    let code = tempfile::tempdir().expect("temp dir");
    let project = code.path().canonicalize().expect("real").join("proj");
    std::fs::create_dir_all(project.join("src")).expect("mkdir");
    // `d` is the project itself: `d/big.txt` is another path to the same file.
    std::os::unix::fs::symlink(".", project.join("d")).expect("symlink");
    let big = project.join("big.txt");
    let size: usize = 3 << 20;
    let mut bytes = Vec::with_capacity(size);
    while bytes.len() < size {
        bytes.extend_from_slice(b"some line of text\n");
    }
    bytes.truncate(size);
    std::fs::write(&big, &bytes).expect("write");
    let mut spellings = vec![
        "big.txt".to_owned(),
        "./big.txt".to_owned(),
        ".//big.txt".to_owned(),
        "src/../big.txt".to_owned(),
        "../proj/big.txt".to_owned(),
        format!("{}", big.display()),
        format!("{}/./big.txt", project.display()),
    ];
    for i in 1..=6 {
        spellings.push(format!("d{}big.txt", "/".repeat(i)));
        spellings.push(format!("d/.{}big.txt", "/".repeat(i)));
    }
    let text: String = spellings
        .iter()
        .map(|s| format!("**Evidence**: {s}:1\n"))
        .collect();
    let dir = project.display().to_string();
    let sessions: Vec<(String, Vec<Value>)> = [
        dir.clone(),
        format!("{dir}/"),
        format!("/{dir}"),
        format!("{dir}/."),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, cwd)| (format!("S000{}", i + 1), claude(&cwd, &text)))
    .collect();
    let sessions: Vec<(&str, &str, Vec<Value>)> = sessions
        .iter()
        .map(|(s, lines)| (s.as_str(), "claude-code", lines.clone()))
        .collect();
    let ws = workspace(&sessions);
    let mut logs = Vec::new();
    for args in [&["import"][..], &["verify-citations"][..]] {
        let (out, log) = match trace.as_mut() {
            Some(t) => t.run_tracing(&ws, args, "trace=openat,openat2,read"),
            None => (ws.ok(args), String::new()),
        };
        logs.push((args[0], out, log));
    }
    let all = spellings.len() * sessions.len();
    assert!(
        logs[1].1.contains(&format!("(ok {all})")),
        "every spelling is ok: {}",
        logs[1].1
    );
    if trace.is_some() {
        for (command, _, log) in &logs {
            let opens = opened(log)
                .into_iter()
                .filter(|(_, path)| Path::new(path) == big)
                .count();
            // `big.txt` and `d/big.txt`: two paths beneath the project, one file.
            assert_eq!(opens, 2, "{command}: opens of the cited file");
            assert_eq!(
                bytes_read(log, &big),
                size as u64,
                "{command}: the cited file is read once"
            );
        }
    }
}

/// Python's `len(bytes.decode("utf-8", errors="replace").splitlines())`, written out
/// character by character here, apart from the binary's own line finder.
fn python_line_count(bytes: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(bytes);
    let mut chars = text.chars().peekable();
    let (mut lines, mut open) = (0, false);
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                lines += 1;
                open = false;
            }
            '\n' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => {
                lines += 1;
                open = false;
            }
            _ => open = true,
        }
    }
    lines + u64::from(open)
}

/// A cited file of invalid UTF-8, with line breaks of every kind (some straddling the
/// binary's 1 MiB read chunks), gets the digest of its raw bytes and Python's line count
/// of its lossy decoding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cited_file_of_invalid_utf8_is_counted_as_python_counts_it() {
    let code = tempfile::tempdir().expect("temp dir");
    let project = code.path().join("proj");
    std::fs::create_dir_all(&project).expect("mkdir");
    let pieces: [&[u8]; 9] = [
        b"\xff\xfe bad\r\n",
        b"\xe2\x80\n",
        "ls\u{2028}ps\u{2029}nel\u{85}".as_bytes(),
        b"\xe2\x80\xe2\x80\xa8\xf0\xc2\x85",
        b"\x0b\x0c\x1c\x1d\x1e",
        b"\r\r\n\n",
        b"\xc2",
        b"plain text ",
        b"\xed\xa0\x80 surrogate\n",
    ];
    let mut bytes = Vec::new();
    let mut i = 0;
    while bytes.len() < (3 << 20) + 77 {
        bytes.extend_from_slice(pieces[i % pieces.len()]);
        i += 1;
    }
    // Breaks split across the 1 MiB chunks: `\r\n`, LS and NEL.
    for (at, piece) in [
        ((1 << 20) - 1, &b"\r\n"[..]),
        ((2 << 20) - 2, "\u{2028}".as_bytes()),
        ((3 << 20) - 1, "\u{85}".as_bytes()),
    ] {
        bytes[at..at + piece.len()].copy_from_slice(piece);
    }
    bytes.extend_from_slice(b"\xff last line, no break \xe2\x80");
    std::fs::write(project.join("bad.txt"), &bytes).expect("write");
    let lines = python_line_count(&bytes);
    let ws = workspace(&[(
        "S0001",
        "claude-code",
        claude(
            &project.display().to_string(),
            &format!(
                "**Evidence**: bad.txt:{lines}\n**Evidence**: bad.txt:{}",
                lines + 1
            ),
        ),
    )]);
    ws.ok(&["import"]);
    let found = verifications_of(&ws, "S0001").await;
    assert_eq!(found.len(), 2, "{found:?}");
    for (v, status) in [(&found[0].1, "ok"), (&found[1].1, "line_out_of_range")] {
        assert_eq!(v["status"], status, "{v}");
        assert_eq!(v["file_lines"], lines, "{v}");
        assert_eq!(v["sha256"], json!(hex_sha256(&bytes)), "{v}");
    }
}

/// A cited file at the size limit (64 MiB) of invalid UTF-8 is read in chunks, not
/// decoded whole: `import` under a 256 MiB address-space limit (`ulimit -v`) finishes
/// and checks it (decoding it whole took over 400 MB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_cited_file_of_invalid_utf8_imports_within_256_mib() {
    let code = tempfile::tempdir().expect("temp dir");
    let project = code.path().join("proj");
    std::fs::create_dir_all(&project).expect("mkdir");
    let bytes = vec![0xFFu8; 64 << 20];
    std::fs::write(project.join("big.txt"), &bytes).expect("write");
    let ws = workspace(&[(
        "S0001",
        "claude-code",
        claude(&project.display().to_string(), "**Evidence**: big.txt:1"),
    )]);
    let out = Command::new("bash")
        .arg("-c")
        .arg("ulimit -v 262144 && exec \"$0\" import --workspace \"$1\"")
        .arg(BIN)
        .arg(ws.root())
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env_remove("RUST_LOG")
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "import under ulimit -v 256 MiB: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let found = verifications_of(&ws, "S0001").await;
    assert_eq!(found.len(), 1, "{found:?}");
    let v = &found[0].1;
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["file_lines"], 1, "{v}");
    assert_eq!(v["sha256"], json!(hex_sha256(&bytes)), "{v}");
}
