//! What a new user meets in the first hour, through the real binary: the messages of
//! the usual first mistakes, `--version`, `dump`'s views, `run` without prompt-diary,
//! Ctrl-C during an import, and the example workspace the README's commands write into.

use crate::common;
use crate::common::terminal;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{BIN, PROJECT, Workspace};
use serde_json::Value;

/// The binary in `cwd`, with neither `--workspace` nor `PROMPT_DIARY_WORKSPACE`.
fn in_dir(cwd: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "off")
        .output()
        .expect("binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn import_outside_a_workspace_says_how_to_name_or_make_one() {
    let dir = Workspace::empty();
    let out = in_dir(dir.root(), &["import"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    insta::assert_snapshot!("import_outside_a_workspace", dir.redact(&err));
    assert_eq!(
        std::fs::read_dir(dir.root()).unwrap().count(),
        0,
        "nothing is created outside a workspace"
    );
}

#[test]
fn verify_without_a_store_says_to_import_first() {
    let ws = Workspace::example();
    let err = ws.redact(&ws.fails(&["verify"]));
    assert_eq!(
        err,
        "evidence-store: no store at <W>/.evidence-store/store.redb: run `evidence-store import` first\n"
    );
}

#[test]
fn refs_that_are_not_found_list_the_valid_ones() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let err = ws.fails(&["dump", "turn", PROJECT, "S0001", "T001"]);
    assert_eq!(
        err,
        format!(
            "evidence-store: no such turn \"T001\" in the store; turns of {PROJECT}/S0001: T0001, T0002\n"
        )
    );
    let err = ws.fails(&["dump", "session", PROJECT, "S1"]);
    assert_eq!(
        err,
        format!(
            "evidence-store: no such session \"{PROJECT}/S1\" in the store; sessions of {PROJECT}: S0001, S0002\n"
        )
    );
    let err = ws.fails(&["dump", "lines", "Demo", "S0001", "1", "2"]);
    assert_eq!(
        err,
        format!("evidence-store: no such project \"Demo\" in the store; projects: {PROJECT}\n")
    );
    let err = ws.fails(&["dump", "project", "Demo"]);
    assert!(err.ends_with(&format!("projects: {PROJECT}\n")), "{err}");
    let err = ws.fails(&["dump", "citations", "Demo"]);
    assert!(err.ends_with(&format!("projects: {PROJECT}\n")), "{err}");
}

#[test]
fn dump_turn_help_shows_a_turn_ref_as_the_index_writes_it() {
    let ws = Workspace::empty();
    let help = ws.ok(&["dump", "turn", "--help"]);
    assert!(help.contains("(e.g. T0001)"), "{help}");
    assert!(!help.contains("T001)"), "{help}");
}

#[test]
fn dump_lines_shows_the_text_or_the_compact_record_on_request() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let json = |args: &[&str]| -> Value {
        let mut all = vec!["dump", "--json", "lines", PROJECT, "S0002"];
        all.extend_from_slice(args);
        serde_json::from_str(&ws.ok(&all)).expect("JSON")
    };
    let file = String::from_utf8(ws.read(&format!("projects/{PROJECT}/sessions/codex/x1.jsonl")))
        .expect("UTF-8");
    let file_lines: Vec<&str> = file.lines().collect();

    let plain = json(&["4", "5"]);
    assert!(plain["lines"][0].get("text").is_none());
    assert!(plain["lines"][0].get("compact").is_none());

    let text = json(&["4", "5", "--text"]);
    assert_eq!(text["lines"][0]["text"], file_lines[3]);
    assert_eq!(text["lines"][1]["text"], file_lines[4]);
    assert_eq!(text["lines"][1]["offset"], plain["lines"][1]["offset"]);

    let compact = json(&["5", "5", "--compact"]);
    let record = &compact["lines"][0]["compact"];
    assert_eq!(record["line"], 5);
    assert_eq!(record["tool_results"][0]["truncated"], true);
    let handle = record["tool_results"][0]["handle"]
        .as_str()
        .expect("a handle");
    // The handle is the one `dump handles` lists for that line.
    let handles = ws.ok(&["dump", "handles", PROJECT, "S0002", "5"]);
    assert!(handles.contains(handle), "{handles}");

    // As text for people too.
    let shown = ws.ok(&["dump", "lines", PROJECT, "S0002", "7", "7", "--text"]);
    assert!(
        shown.contains(&format!("text: {}", file_lines[6])),
        "{shown}"
    );
    let err = ws.fails(&[
        "dump",
        "lines",
        PROJECT,
        "S0002",
        "1",
        "1",
        "--text",
        "--compact",
    ]);
    insta::assert_snapshot!("dump_lines_text_and_compact", err);
}

#[test]
fn dump_names_the_store_schema_apart_from_the_workspace_schema() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let tables: Value = serde_json::from_str(&ws.ok(&["dump", "--json"])).unwrap();
    assert_eq!(
        tables["store_schema"],
        evidence_store::harness::SCHEMA_VERSION
    );
    assert_eq!(tables["workspace_schema"], 2);
    assert!(tables.get("schema_version").is_none(), "{tables}");
    let text = ws.ok(&["dump"]);
    assert!(text.contains("\nworkspace_schema: 2\n"), "{text}");
    assert!(!text.contains("schema_version"), "{text}");

    let ws7 = Workspace::example();
    ws7.to_schema_7();
    ws7.ok(&["import"]);
    let stats = ws7.ok(&["dump", "--stats"]);
    assert!(stats.contains("(workspace_schema 7)"), "{stats}");
    assert!(
        stats.contains(&format!(
            "store schema    {}\n",
            evidence_store::harness::SCHEMA_VERSION
        )),
        "{stats}"
    );
}

/// An export that cannot write says "export failed" and names the workspace by its
/// absolute path, even when it was given as a relative one.
#[test]
fn a_failed_export_names_the_absolute_workspace() {
    let parent = Workspace::empty();
    common::copy_example(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workspace"),
        &parent.path("ws"),
    );
    std::fs::write(parent.path("ws/daily-report.json"), "{}\n").unwrap();
    let out = in_dir(parent.root(), &["--workspace", "ws", "import"]);
    assert!(out.status.success(), "{out:?}");
    // The report's place is taken by a directory: the write fails (also for root,
    // whom a read-only mode would not stop).
    std::fs::remove_file(parent.path("ws/daily-report.json")).unwrap();
    std::fs::create_dir(parent.path("ws/daily-report.json")).unwrap();
    let out = in_dir(parent.root(), &["--workspace", "ws", "export"]);
    assert_eq!(out.status.code(), Some(1));
    let absolute = parent.root().join("ws");
    assert!(
        stderr(&out).starts_with(&format!(
            "evidence-store: export to {} failed: ",
            absolute.display()
        )),
        "{}",
        stderr(&out)
    );
}

/// `run -- prompt-diary ...` without prompt-diary on PATH: the shell's 127 and what to
/// install; a command that is not executable: 126.
#[test]
fn run_without_the_command_exits_as_a_shell_does_with_a_hint() {
    let ws = Workspace::empty();
    let empty_path = ws.path("nothing-here");
    std::fs::create_dir(&empty_path).unwrap();
    let run = |args: &[&str]| {
        Command::new(common::bin())
            .arg("run")
            .arg("--")
            .args(args)
            .current_dir(ws.root())
            .env("PATH", &empty_path)
            .env_remove("PROMPT_DIARY_WORKSPACE")
            .env("RUST_LOG", "off")
            .output()
            .expect("run starts")
    };
    let out = run(&["prompt-diary", "generate", "--today"]);
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    insta::assert_snapshot!("run_without_prompt_diary", ws.redact(&stderr(&out)));
    let out = run(&["no-such-command"]);
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    insta::assert_snapshot!("run_without_the_command", ws.redact(&stderr(&out)));
    let out = run(&["/nonexistent/cmd"]);
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    ws.write("not-executable", "#!/bin/sh\n");
    let out = run(&[ws.path("not-executable").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(126), "{out:?}");
    insta::assert_snapshot!("run_of_a_file_not_executable", ws.redact(&stderr(&out)));
}

/// On a terminal, `run`'s last line (what it exported) ends with a newline, so the
/// shell's prompt starts on a line of its own.
#[test]
fn run_on_a_terminal_ends_its_last_line_with_a_newline() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let mut command = Command::new(BIN);
    command
        .args(["run", "--workspace"])
        .arg(ws.root())
        .args(["--", "true"])
        .env("RUST_LOG", "off");
    let (status, shown) = terminal::run(command);
    assert!(status.success(), "{shown}");
    let expected = format!(
        "evidence-store: exported {}: 0 file(s) written, 0 already current\r\n",
        ws.root().display()
    );
    assert!(shown.ends_with(&expected), "{shown:?}");
}

/// SIGINT while an import works (here: stopped just before its commit) ends it with
/// 130 and the message, and nothing of it is committed: the next import indexes the
/// new session file again.
#[test]
fn ctrl_c_during_import_says_the_store_is_unchanged_and_it_is() {
    use rustix::process::Signal;
    let ws = Workspace::example();
    ws.ok(&["import"]);
    ws.add_large_session();
    let (code, _, rest) = signalled_at(&ws, &["import"], "before-commit", Signal::INT);
    assert_eq!(code, Some(130), "{rest}");
    assert_eq!(
        rest,
        "evidence-store: interrupted by SIGINT; the store is unchanged\n"
    );

    let sessions: Value = serde_json::from_str(&ws.ok(&["dump", "--json"])).unwrap();
    assert_eq!(sessions["tables"]["sessions"], 2, "{sessions}");
    let out = ws.ok(&["import"]);
    assert!(
        out.contains("1 file(s) indexed") && out.contains("2 unchanged"),
        "{out}"
    );
}

/// Starts `args` stopped at the pause point `step`, sends it `signal` once it says it is
/// paused (the pause ends at the signal, as work reaches its next safe point), and
/// returns its exit code (`None` when it had to be killed), stdout and the rest of its
/// stderr. stdin stays open throughout:
/// only the signal can end the pause.
fn signalled_at(
    ws: &Workspace,
    args: &[&str],
    step: &str,
    signal: rustix::process::Signal,
) -> (Option<i32>, String, String) {
    use std::io::{BufRead, Read};
    let mut child = Command::new(BIN)
        .arg("--workspace")
        .arg(ws.root())
        .args(args)
        .env("EVIDENCE_STORE_PAUSE_AT", step)
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let _stdin = child.stdin.take().expect("piped");
    let mut err = std::io::BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    err.read_line(&mut line).expect("reads stderr");
    assert_eq!(line, format!("evidence-store: paused at {step}\n"));
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, signal).expect("signal sent");
    // A process that ignores the signal would wait at the pause for ever: killed after a
    // generous bound, and then it has no exit code.
    let status = common::exit_or_hang(&mut child, std::time::Duration::from_secs(60));
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut out)
        .unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    (status.and_then(|s| s.code()), out, rest)
}

const SIGNALS: [(rustix::process::Signal, &str, i32); 3] = [
    (rustix::process::Signal::INT, "SIGINT", 130),
    (rustix::process::Signal::TERM, "SIGTERM", 143),
    (rustix::process::Signal::HUP, "SIGHUP", 129),
];

/// SIGINT, SIGTERM and SIGHUP during an import are handled alike: the import stops at a
/// safe point without committing, closes the store, exits 128 + the signal with one line
/// saying the store is unchanged, and `verify` right after finds the store healthy (not
/// "not closed cleanly", as after a process that exits without closing it).
#[test]
fn every_signal_stops_an_import_cleanly_and_verify_finds_the_store_healthy() {
    for (signal, name, code) in SIGNALS {
        let ws = Workspace::example();
        ws.ok(&["import"]);
        ws.add_large_session();
        let (got, _, err) = signalled_at(&ws, &["import"], "before-commit", signal);
        assert_eq!(got, Some(code), "{name}: {err}");
        let verified = ws.run(&["verify"]);
        let text = String::from_utf8_lossy(&verified.stdout);
        assert!(text.contains("no problems found"), "{name}: {text}");
        assert_eq!(
            err,
            format!("evidence-store: interrupted by {name}; the store is unchanged\n")
        );
        let sessions: Value = serde_json::from_str(&ws.ok(&["dump", "--json"])).unwrap();
        assert_eq!(sessions["tables"]["sessions"], 2, "{name}: {sessions}");
    }
}

/// A first import that a signal stops leaves no store behind (not an empty one that
/// `dump` would show as `workspace: -`), so the next command says to import.
#[test]
fn an_interrupted_first_import_leaves_no_store() {
    let ws = Workspace::example();
    let (got, _, err) = signalled_at(
        &ws,
        &["import"],
        "before-commit",
        rustix::process::Signal::INT,
    );
    assert_eq!(got, Some(130), "{err}");
    assert!(!ws.store().exists(), "no store left");
    assert_eq!(
        err,
        "evidence-store: interrupted by SIGINT; nothing was imported and no store was left\n"
    );
    let dumped = ws.redact(&ws.fails(&["dump"]));
    insta::assert_snapshot!("dump_after_an_interrupted_first_import", dumped);
    ws.ok(&["import"]);
    assert!(ws.ok(&["verify"]).contains("no problems found"));
}

/// A signal during `import --rebuild` (here just before its rename) stops it: the old
/// store stays in place, the scratch file is removed, the exit code is 128 + the signal.
#[test]
fn a_signal_during_a_rebuild_keeps_the_store_and_removes_the_scratch_file() {
    for (signal, name, code) in SIGNALS {
        let ws = Workspace::example();
        ws.ok(&["import"]);
        let before = std::fs::read(ws.store()).unwrap();
        let (got, out, err) = signalled_at(&ws, &["import", "--rebuild"], "before-rename", signal);
        assert_eq!(got, Some(code), "{name}: {out}{err}");
        assert_eq!(
            err,
            format!(
                "evidence-store: interrupted by {name}; the store is unchanged (the partial rebuild was removed)\n"
            )
        );
        assert_eq!(std::fs::read(ws.store()).unwrap(), before, "{name}");
        let mut left: Vec<String> = std::fs::read_dir(ws.path(".evidence-store"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["documents.lock", "store.redb"], "{name}");
        assert!(ws.ok(&["verify"]).contains("no problems found"), "{name}");
    }
}

/// `run`'s own import after its command has ended is stopped by a signal like any
/// import: nothing committed, nothing exported, 128 + the signal, the store healthy.
#[test]
fn a_signal_during_runs_own_import_stops_it_cleanly() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    ws.add_large_session();
    let (got, _, err) = signalled_at(
        &ws,
        &["run", "--", "true"],
        "before-commit",
        rustix::process::Signal::TERM,
    );
    assert_eq!(got, Some(143), "{err}");
    assert!(ws.ok(&["verify"]).contains("no problems found"));
    assert_eq!(
        err,
        "evidence-store: interrupted by SIGTERM; the store is unchanged\n"
    );
    assert!(!ws.path("daily-report.json").exists(), "nothing exported");
}

/// Scratch files that killed rebuilds left (their process is gone) are removed by the
/// next command of any kind, here a `dump`; one of a live process stays.
#[test]
fn scratch_files_of_killed_rebuilds_are_removed_by_the_next_command() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let dead = [
        ".evidence-store/.store.redb.rebuild-4000000000",
        ".evidence-store/.store.redb.rebuild-4000000001.0123456789abcdef",
    ];
    for rel in dead {
        ws.write(rel, "partial");
    }
    let live = format!(".evidence-store/.store.redb.rebuild-{}", std::process::id());
    ws.write(&live, "partial");
    ws.ok(&["dump"]);
    for rel in dead {
        assert!(!ws.path(rel).exists(), "{rel} removed");
    }
    assert!(
        ws.path(&live).exists(),
        "a live process's scratch file stays"
    );
}

/// Temp files of document writers that were killed mid-write (cards, envelopes, the
/// daily report) are removed by the next command of any kind, not only by `export`: this
/// program's temp names whose process is gone. A live writer's temp file, prompt-diary's
/// own `<name>.tmp` and anything else stay.
#[test]
fn temp_files_of_killed_document_writers_are_removed_by_the_next_command() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let project = "projects/Demo-0123456789ab";
    let dead = [
        ".daily-report.json.4000000000.0.0123456789abcdef.evidence-store.tmp".to_owned(),
        format!(
            "{project}/.project-synthesis.json.4000000001.3.0123456789abcdef.evidence-store.tmp"
        ),
        format!("{project}/evidence/.S0001.json.4000000002.7.fedcba9876543210.evidence-store.tmp"),
    ];
    let kept = [
        format!(
            "{project}/evidence/.S0002.json.{}.0.0123456789abcdef.evidence-store.tmp",
            std::process::id()
        ),
        format!("{project}/evidence/S0002.json.tmp"),
        format!("{project}/evidence/.S0002.json.4000000003.x.0123456789abcdef.evidence-store.tmp"),
    ];
    for rel in dead.iter().chain(&kept) {
        ws.write(rel, "partial");
    }
    ws.ok(&["dump"]);
    for rel in &dead {
        assert!(!ws.path(rel).exists(), "{rel} removed");
    }
    for rel in &kept {
        assert!(ws.path(rel).exists(), "{rel} kept");
    }
}

/// `--version`: the package version, the commit built from (what git says here; a
/// build outside a checkout says "unknown") and the prompt-diary releases served.
#[test]
fn version_names_the_commit_and_the_prompt_diary_releases() {
    let ws = Workspace::empty();
    let version = ws.ok(&["--version"]);
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown".to_owned(), |o| {
            String::from_utf8_lossy(&o.stdout).trim().to_owned()
        });
    assert_eq!(
        version,
        format!(
            "evidence-store {} (commit {commit}; serves prompt-diary 0.2.10 and 0.2.20)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// What the README's commands write into `examples/workspace` is ignored by git, but for
/// the documents it ships (which they write back unchanged:
/// `the_readme_steps_write_the_example_s_documents_back_unchanged`), and the tests copy
/// only what git tracks there: `build`, `export` or `run` on the example cannot change
/// what the tests see.
#[test]
fn the_example_outputs_are_ignored_and_never_copied_into_tests() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workspace");
    let git = |args: &[&str], dir: &Path| {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs")
    };
    let ignored = |rel: &str| {
        git(&["check-ignore", "-q", "--no-index", rel], &example)
            .status
            .success()
    };
    for output in [
        ".evidence-store/store.redb",
        ".evidence-store/documents.lock",
        ".evidence-store/view.html",
        &format!("projects/{PROJECT}/receipts/evidence-S0001-T0001.json"),
    ] {
        assert!(ignored(output), "{output} is not ignored");
    }
    for input in [
        "metadata.json",
        &format!("projects/{PROJECT}/project.json"),
        &format!("projects/{PROJECT}/sessions.index.jsonl"),
        &format!("projects/{PROJECT}/sessions/codex/new.jsonl"),
        "daily-report.json",
        &format!("projects/{PROJECT}/evidence/S0001.json"),
        &format!("projects/{PROJECT}/project-synthesis.json"),
    ] {
        assert!(!ignored(input), "{input} is ignored");
    }

    // In a repository of its own: tracked files are copied, others are not.
    let repo = Workspace::empty();
    assert!(git(&["init", "-q"], repo.root()).status.success());
    repo.write("metadata.json", "{}");
    repo.write("projects/P/sessions.index.jsonl", "");
    assert!(git(&["add", "."], repo.root()).status.success());
    repo.write("daily-report.json", "written by build");
    repo.write("projects/P/evidence/S0001.json", "written by export");
    let copy = Workspace::empty();
    common::copy_example(repo.root(), copy.root());
    assert!(copy.path("metadata.json").exists());
    assert!(copy.path("projects/P/sessions.index.jsonl").exists());
    assert!(!copy.path("daily-report.json").exists());
    assert!(!copy.path("projects/P/evidence").exists());
}

/// The page `view` wrote to its default place, checked to be the one it printed.
fn view_page(ws: &Workspace) -> String {
    let printed = ws.ok(&["view"]);
    let page = ws.path(".evidence-store/view.html");
    assert_eq!(printed.trim(), format!("file://{}", page.display()));
    String::from_utf8(std::fs::read(page).expect("page written")).expect("UTF-8 page")
}

#[test]
fn view_of_the_example_shows_both_sessions_their_turns_and_both_agent_citations() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let page = view_page(&ws);
    for id in [
        "session:Demo-0123456789ab:S0001",
        "session:Demo-0123456789ab:S0002",
        "turn:Demo-0123456789ab:S0001:T0001",
        "turn:Demo-0123456789ab:S0001:T0002",
        "turn:Demo-0123456789ab:S0002:T0001",
        // The line that made the two citations, which they link to.
        "line:Demo-0123456789ab:S0001:6",
    ] {
        assert!(page.contains(&format!("id=\"{id}\"")), "no {id}");
    }
    // No chain is written yet: all three turns stand out as uncovered.
    assert_eq!(page.matches("class=\"cell missing\"").count(), 3);
    // The two citations, one file and one test result, both unchecked, each with its reason.
    for reference in [
        "src/parser.py:41-42",
        "pytest tests/test_parser.py::test_parse_tokens - PASS",
    ] {
        assert!(page.contains(reference), "no citation {reference}");
    }
    let rows: Vec<&str> = page
        .split("<tr class=\"s\" id=\"citation:")
        .skip(1)
        .collect();
    assert_eq!(rows.len(), 2, "two citation rows");
    for row in &rows {
        assert!(
            row.contains("st-unchecked\"><bdi>unchecked</bdi><"),
            "{row}"
        );
        assert!(row.contains("unchecked because"), "{row}");
        assert!(
            row.contains("href=\"#line:Demo-0123456789ab:S0001:6\""),
            "{row}"
        );
    }
    assert!(rows[0].contains("<bdi>file</bdi>") && rows[1].contains("<bdi>test</bdi>"));
    // Nothing from outside: one inline script and style, a policy forbidding the rest.
    assert!(page.contains("http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"));
    assert!(!page.contains(" src="), "the page loads nothing");
    assert!(
        !page.contains("href=\"http"),
        "the page links nowhere outside"
    );
}

#[test]
fn view_shows_a_chain_beside_its_lines_and_marks_a_line_that_changed() {
    let ws = Workspace::example();
    // A hand-edited card may cite anything: past the session's end, or no span at all.
    let mut card: Value =
        serde_json::from_slice(&common::fixture_bytes("card_S0001_after_a_e.json")).unwrap();
    card["evidence_chains"][1]["terminal_state"]["citations"] =
        serde_json::json!([{"lines": "7-18446744073709551615"}, {"lines": "seven"}]);
    ws.write(
        "projects/Demo-0123456789ab/evidence/S0001.json",
        serde_json::to_string_pretty(&card).unwrap(),
    );
    ws.ok(&["import"]);
    // Line 1 edited in place after import, same size: it no longer matches its hash.
    let session = "projects/Demo-0123456789ab/sessions/claude-code/c1.jsonl";
    let text = String::from_utf8(ws.read(session)).unwrap();
    ws.write(
        session,
        text.replacen(
            "Fix the failing parser test.",
            "Fix the failing parser TEST.",
            1,
        ),
    );
    // S0002's file grew after import: the read layer refuses it, and the page says why.
    let grown = "projects/Demo-0123456789ab/sessions/codex/x1.jsonl";
    let mut bytes = ws.read(grown);
    bytes.extend_from_slice(b"{}\n");
    ws.write(grown, bytes);
    let page = view_page(&ws);
    assert!(
        page.contains(
            "<p class=\"cut\">Its lines cannot be read: <bdi>session file for session_ref 'S0002' \
             changed since it was imported (its size changed); run `evidence-store import` to \
             re-index the prepared workspace, then read again</bdi></p>"
        ),
        "{page}"
    );
    assert_eq!(page.matches("class=\"cell written\"").count(), 2);
    assert_eq!(page.matches("class=\"cell missing\"").count(), 1);
    let chain = page
        .split("id=\"turn:Demo-0123456789ab:S0001:T0001\"")
        .nth(1)
        .and_then(|rest| rest.split("id=\"turn:").next())
        .expect("the turn's block");
    for shown in [
        "User asked to fix the failing parser test.",
        "Off-by-one in parse_tokens fixed.",
        "ended: <bdi>material result</bdi>",
        // Lines 2-5, cited by the agent reaction, as the session holds them.
        "pytest -q tests/test_parser.py",
        "The file src/parser.py has been updated.",
    ] {
        assert!(chain.contains(shown), "the chain lacks {shown:?}");
    }
    assert!(
        chain.contains("line 1 <span class=\"badge changed\">no longer matches its stored hash")
    );
    assert!(
        page.contains("<code><bdi>seven</bdi></code> (not a line span)"),
        "{page}"
    );
    assert!(
        !page.contains("parser TEST."),
        "a changed line's text is never shown"
    );
}

#[test]
fn view_keeps_planted_markup_as_text() {
    let ws = Workspace::example();
    let payload =
        r#"<script>document.title='PWNED'</script>"><img src=x onerror=alert(1)></textarea>"#;
    let label = serde_json::to_string(&format!("Demo {payload}")).unwrap();
    ws.write(
        "projects/Demo-0123456789ab/project.json",
        format!(r#"{{"schema_version": 2, "project_key": "Demo-0123456789ab", "project_label": {label}}}"#),
    );
    let mut card: Value =
        serde_json::from_slice(&common::fixture_bytes("card_S0001_after_a_e.json")).unwrap();
    card["evidence_chains"][0]["trigger"]["summary"] = Value::String(payload.to_owned());
    ws.write(
        "projects/Demo-0123456789ab/evidence/S0001.json",
        serde_json::to_string_pretty(&card).unwrap(),
    );
    ws.ok(&["import"]);
    let page = view_page(&ws);
    assert_eq!(
        page.matches("<script").count(),
        1,
        "only the page's own script"
    );
    assert!(!page.contains("<img"), "no planted element");
    assert!(!page.contains("</textarea>"));
    assert!(page.contains("&lt;script&gt;document.title='PWNED'&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"));
}

/// The lines of the README a newcomer sees first: a terminal's first screen.
const FIRST_SCREEN_LINES: usize = 45;

/// The fenced `sh` blocks within `text`, each as its lines joined.
fn sh_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        match (&mut current, line) {
            (None, "```sh") => current = Some(Vec::new()),
            (Some(lines), "```") => {
                blocks.push(lines.join("\n"));
                current = None;
            }
            (Some(lines), line) => lines.push(line),
            (None, _) => {}
        }
    }
    blocks
}

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md")
}

/// Within the README's first screen: one command that sets everything up and runs the
/// main job on the example (install, import, build, export, view), and one that runs the
/// tests, said with how long they take on 2 cores and what they need. The first one's
/// steps after the install run as written, with this build of the binary on PATH, on a
/// copy of the example, and end with the page's URL.
#[test]
fn the_readme_s_first_screen_holds_the_set_up_and_the_test_command() {
    let text = readme();
    let screen: String = text
        .lines()
        .take(FIRST_SCREEN_LINES)
        .collect::<Vec<_>>()
        .join("\n");
    let blocks = sh_blocks(&screen);
    assert_eq!(
        blocks.len(),
        2,
        "two commands in the first screen: {blocks:?}"
    );
    let (set_up, tests) = (&blocks[0], &blocks[1]);
    let (install, steps) = set_up
        .split_once(" &&")
        .unwrap_or_else(|| panic!("the install, then the steps: {set_up}"));
    assert_eq!(install.trim(), "cargo install --locked --path .");
    for step in ["import", "build", "export", "view"] {
        assert!(
            steps.contains(&format!("evidence-store {step}")),
            "no {step} in {set_up}"
        );
    }
    assert_eq!(tests.trim(), "bash tools/test.sh");
    let after_tests = screen
        .split("bash tools/test.sh")
        .nth(1)
        .expect("text after the test command");
    for said in ["minutes", "2 cores", "Python", "Chromium", "root"] {
        assert!(
            after_tests.contains(said) || screen.contains(said),
            "the first screen does not say {said:?}"
        );
    }

    let dir = Workspace::empty();
    common::copy_example(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workspace"),
        &dir.path("examples/workspace"),
    );
    let bin_dir = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(common::bin(), bin_dir.path().join("evidence-store")).expect("link");
    let path = std::env::join_paths(std::iter::once(bin_dir.path().to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    let out = Command::new("sh")
        .args(["-euc", steps.trim()])
        .current_dir(dir.root())
        .env("PATH", path)
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "off")
        .output()
        .expect("sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{steps}: {}", stderr(&out));
    let page = dir.path("examples/workspace/.evidence-store/view.html");
    assert!(
        stdout
            .trim_end()
            .ends_with(&format!("file://{}", page.display())),
        "{stdout}"
    );
    assert!(dir.path("examples/workspace/daily-report.json").exists());
}

/// The README's claims that were wrong: what prompt-diary's `generate` shows while it
/// waits for a Codex login (its progress board, not nothing), and Chromium, which the
/// tests use, among the prerequisites.
#[test]
fn the_readme_says_what_generate_shows_and_lists_chromium() {
    let text = readme();
    let prerequisites = text
        .split("\n## Prerequisites\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a Prerequisites section");
    assert!(prerequisites.contains("Chromium"), "{prerequisites}");
    assert!(
        !text.contains("neither\nprompt-diary nor `run` prints anything")
            && !text.contains("neither prompt-diary nor `run` prints anything"),
        "the README still says nothing is printed while generate waits"
    );
    assert!(
        text.contains("progress board"),
        "no word of the progress board"
    );
}

/// Every command on a `--workspace` directory that does not exist says that it does not
/// exist (not that `metadata.json` is missing), names what named it, and creates nothing:
/// `serve` says it on its first stderr line and still starts for its client.
#[test]
fn every_command_names_a_missing_workspace_directory_as_missing() {
    let parent = Workspace::empty();
    let missing = parent.path("work/2026-01-15");
    let shown = missing.display().to_string();
    let first_line = |out: &Output| stderr(out).lines().next().unwrap_or("").to_owned();
    for args in [
        &["import"][..],
        &["import", "--rebuild"],
        &["import", "--rehash"],
        &["build"],
        &["export"],
        &["verify"],
        &["dump"],
        &["view"],
        &["verify-citations"],
    ] {
        let out = Command::new(common::bin())
            .args(args)
            .arg("--workspace")
            .arg(&missing)
            .env_remove("PROMPT_DIARY_WORKSPACE")
            .env("RUST_LOG", "off")
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let line = first_line(&out);
        assert!(
            line.contains(&format!(
                "the workspace directory {shown} (from --workspace) does not exist"
            )),
            "{args:?}: {line}"
        );
        assert!(
            !line.contains("required JSON file is missing"),
            "{args:?}: {line}"
        );
        if args == ["import"] {
            insta::assert_snapshot!(
                "import_of_a_missing_directory",
                parent.redact(&stderr(&out))
            );
        }
    }
    // `serve` until its ping is answered, so that its start has said all it says.
    let (answers, err) = common::serve_until_a_ping(&missing);
    assert!(
        answers
            .iter()
            .any(|l| l.contains(r#"\"status\": \"unavailable\""#)),
        "{answers:?}"
    );
    insta::assert_snapshot!("serve_on_a_missing_directory", parent.redact(&err));
    assert_eq!(
        std::fs::read_dir(parent.root()).unwrap().count(),
        0,
        "nothing created"
    );
}

/// `serve`'s first stderr line names the workspace it serves, its report date, the
/// prompt-diary release and the store, so a client's MCP log shows which day a server
/// answers for; `prompt_diary_ping`'s answer stays prompt-diary's own.
#[test]
fn serve_names_its_workspace_and_report_date_first() {
    for schema_7 in [false, true] {
        let ws = Workspace::example();
        if schema_7 {
            ws.to_schema_7();
        }
        let (stdout, err) = common::serve_until_a_ping(ws.root());
        let release = if schema_7 { "0.2.20" } else { "0.2.10" };
        assert_eq!(
            err.lines().next(),
            Some(
                format!(
                    "evidence-store serve: workspace {root}, report date 2026-01-15 (prompt-diary \
                     {release}), store {root}/.evidence-store/store.redb",
                    root = ws.root().display()
                )
                .as_str()
            ),
            "{err}"
        );
        let ping = stdout
            .iter()
            .find(|l| l.contains(r#""id":1"#))
            .expect("the ping's answer");
        let ping: Value = serde_json::from_str(ping).expect("JSON");
        assert_eq!(
            ping["result"]["structuredContent"],
            serde_json::json!({"name": "prompt-diary", "status": "ok"}),
            "{ping}"
        );
    }
}

/// `serve` typed at a terminal says on stderr, before anything is typed, that it is an
/// MCP server a client starts, and points to the README's "Connect a client"; Ctrl-D (the
/// end of input before any client spoke) says that no client spoke.
#[test]
fn serve_on_a_terminal_says_it_is_a_server_for_a_client_at_once() {
    let ws = Workspace::example();
    let mut command = Command::new(common::bin());
    command
        .arg("--workspace")
        .arg(ws.root())
        .arg("serve")
        .env("RUST_LOG", "off");
    let (status, shown) = terminal::run_typing(command, "Connect a client", b"\x04");
    assert_eq!(status.code(), Some(1), "{shown}");
    // Only what evidence-store wrote (the terminal also echoes what was typed).
    let said: Vec<&str> = shown
        .split("\r\n")
        .filter_map(|line| line.find("evidence-store").map(|at| &line[at..]))
        .collect();
    insta::assert_snapshot!("serve_on_a_terminal", ws.redact(&said.join("\n")));
}

/// The evidence document's "For Agent Users" sample, as an agent's message: its file
/// and its test written as a pytest node id without `pytest ` are both cited (the test
/// with its reference as written), and markers that are no test (`lint - PASS`, a CI
/// link then ` - FAIL`) count for nothing.
#[test]
fn the_agent_users_sample_yields_its_test_citation_and_results_of_no_test_do_not() {
    let ws = Workspace::example();
    let text = "I've implemented the authentication feature.\n\n\
                **Evidence**: src/auth/login.py:42-56\n\
                **Evidence**: tests/test_auth.py::test_login - PASS\n\n\
                The login function now validates JWT tokens correctly.\n\n\
                **Evidence**: lint - PASS\n\
                **Evidence**: https://ci.example.com/run/1 - FAIL";
    let lines = [
        serde_json::json!({"type": "user", "message": {"role": "user",
            "content": [{"type": "text", "text": "Add login."}]}}),
        serde_json::json!({"type": "assistant", "message": {"role": "assistant",
            "content": [{"type": "text", "text": text}]}}),
    ];
    let session: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let dir = format!("projects/{PROJECT}");
    ws.write(&format!("{dir}/sessions/claude-code/agent.jsonl"), session);
    let index = format!("{dir}/sessions.index.jsonl");
    let mut rows = String::from_utf8(ws.read(&index)).expect("utf-8 index");
    rows.push_str(&format!(
        "{}\n",
        serde_json::json!({"session_path": "sessions/claude-code/agent.jsonl",
            "session_ref": "S0003", "source": "claude-code", "source_session_id": "agent",
            "subagent_path": "", "target_end_line": 2, "target_start_line": 1,
            "turns": [{"target_subagents": [], "turn_end_line": 2, "turn_ref": "T0001",
                "turn_start_line": 1}]})
    ));
    ws.write(&index, rows);
    ws.ok(&["import"]);
    let dumped: Value =
        serde_json::from_str(&ws.ok(&["dump", "citations", "--json", PROJECT, "S0003"]))
            .expect("JSON");
    assert_eq!(
        dumped["by_type"],
        serde_json::json!({"file": 1, "test": 1}),
        "{dumped}"
    );
    let page = view_page(&ws);
    assert!(
        page.contains("<td class=\"mono\"><bdi>tests/test_auth.py::test_login - PASS</bdi></td>"),
        "the test citation, its reference as written"
    );
    for none in ["lint - PASS", "https://ci.example.com/run/1 - FAIL"] {
        assert!(
            !page.contains(&format!("<td class=\"mono\">{none}</td>")),
            "{none} is no citation"
        );
    }
}

/// Every tool finds the binary where cargo put it: `tools/lib/cargo_target.py` follows
/// `CARGO_TARGET_DIR` as cargo does, and no script of `tools/` or `.ci/run` runs a binary
/// by a fixed `target/debug` or `target/release` path (only usage lines name one).
#[test]
fn tools_find_the_binary_where_cargo_put_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let elsewhere = tempfile::tempdir().expect("temp dir");
    for profile in ["debug", "release"] {
        let out = Command::new("python3")
            .arg(root.join("tools/lib/cargo_target.py"))
            .arg(profile)
            .env("CARGO_TARGET_DIR", elsewhere.path())
            .output()
            .expect("python3 runs");
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            elsewhere
                .path()
                .join(profile)
                .join("evidence-store")
                .display()
                .to_string()
        );
    }
    let listed = Command::new("git")
        .args(["ls-files", "tools", ".ci"])
        .current_dir(root)
        .output()
        .expect("git runs");
    let mut fixed = Vec::new();
    for rel in String::from_utf8_lossy(&listed.stdout).lines() {
        if rel.ends_with(".md") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(rel)) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let usage = line.trim_start().starts_with("Usage:") || line.contains("Usage: ");
            if !usage
                && (line.contains("target/debug/evidence-store")
                    || line.contains("target/release/evidence-store")
                    || line.contains("\"target\" / \"debug\"")
                    || line.contains("\"target\" / \"release\""))
            {
                fixed.push(format!("{rel}:{}: {line}", n + 1));
            }
        }
    }
    assert_eq!(fixed, Vec::<String>::new(), "binaries run by a fixed path");
}
