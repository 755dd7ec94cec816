//! A damaged store or a full disk gives an error, never a panic, never a silent copy; and
//! the commands that only look at the store (`dump`, `verify`) never write to it.

use crate::common;

use std::process::Output;

use common::rng::Rng;
use common::{PROJECT, Workspace, call, connect, text};
use serde_json::{Value, json};

const CARD: &str = "projects/Demo-0123456789ab/evidence/S0001.json";
const HINT: &str = "run evidence-store verify or evidence-store import --rebuild";

/// The example workspace, imported, with one evidence card stored as a document.
fn imported_with_card() -> Workspace {
    let ws = Workspace::example();
    ws.write(CARD, common::fixture_bytes("card_S0001_after_a_e.json"));
    ws.ok(&["import"]);
    ws
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The run ended by itself (no signal, no abort), printed no panic, and either succeeded
/// or said the store is damaged and how to repair it. Returns the failure message.
fn succeeded_or_damaged(out: &Output, what: &str) -> Option<String> {
    let err = stderr(out);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{what}: killed or aborted ({:?}): {err}",
        out.status
    );
    assert!(!err.contains("panicked"), "{what}: a panic escaped: {err}");
    if out.status.success() {
        return None;
    }
    assert!(
        err.contains(HINT),
        "{what}: not a damaged-store error: {err}"
    );
    Some(err)
}

/// `verify` ended by itself and either passed (true) or listed problems (false).
fn succeeded_or_verify_failed(out: &Output, trial: usize) -> bool {
    let err = stderr(out);
    assert!(!err.contains("panicked"), "trial {trial} verify: {err}");
    match out.status.code() {
        Some(0) => true,
        Some(1) => {
            let report = String::from_utf8_lossy(&out.stdout);
            assert!(
                report.contains("problem(s):"),
                "trial {trial} verify: {report}{err}"
            );
            false
        }
        other => panic!("trial {trial} verify: killed or aborted ({other:?}): {err}"),
    }
}

/// Seeded bit flips in store.redb, each run through `verify`, `dump --stats` and
/// `import`: every run succeeds or reports the damaged store; a panic inside redb is
/// caught at the store boundary; where `verify` passes, the store reads as before. Then `serve` over a store whose damage makes redb panic answers every tool
/// call with the same message as a structured result.
#[tokio::test]
async fn bit_flips_give_the_damaged_store_error_never_a_panic() {
    let ws = imported_with_card();
    let store = ws.store();
    let pristine = std::fs::read(&store).unwrap();
    let session = ["dump", "--json", "session", PROJECT, "S0001"];
    let pristine_session = ws.ok(&session);
    let mut rng = Rng(0x5EED_B17F_11B5_0001);
    let (mut damaged, mut caught_panics) = (0, 0);
    let mut panicking_store: Option<Vec<u8>> = None;
    let mut verified_whole = 0;
    for trial in 0..90 {
        let mut bytes = pristine.clone();
        for _ in 0..8 {
            let at = rng.below(bytes.len());
            bytes[at] ^= 1 << rng.below(8);
        }
        std::fs::write(&store, &bytes).unwrap();
        // verify passes only where the flips missed everything the store uses.
        let out = ws.run(&["verify"]);
        if succeeded_or_verify_failed(&out, trial) {
            verified_whole += 1;
            assert_eq!(
                ws.ok(&session),
                pristine_session,
                "trial {trial}: verify missed damage"
            );
        }
        for args in [&["dump", "--stats"][..], &["import"][..]] {
            let out = ws.run(args);
            if let Some(err) = succeeded_or_damaged(&out, &format!("trial {trial} {args:?}")) {
                damaged += 1;
                assert!(
                    err.contains(&format!("the store at {} is damaged: ", store.display()))
                        || err.contains("schema version")
                        || err.contains("not an evidence-store store"),
                    "trial {trial} {args:?}: {err}"
                );
                if err.contains("redb failed at") {
                    caught_panics += 1;
                    if args == ["import"] && panicking_store.is_none() {
                        panicking_store = Some(bytes.clone());
                    }
                }
            }
        }
    }
    assert!(damaged > 0, "no trial damaged anything that was read");
    assert!(verified_whole > 0, "no trial left the store whole");
    assert!(
        caught_panics > 0,
        "no trial made redb panic, so the store boundary's guard was not exercised"
    );

    // serve: the start (open + import) meets the damage; every tool answers with it.
    std::fs::write(
        &store,
        panicking_store.expect("a store that makes redb panic"),
    )
    .unwrap();
    let client = connect(&ws).await;
    let read = call(
        &client,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 2}),
    )
    .await;
    let write = call(
        &client,
        "write_evidence",
        json!({"project_key": PROJECT, "session_ref": "S0002", "evidence_chain": chain("T0001", "2-2")}),
    )
    .await;
    for result in [read, write] {
        assert_ne!(result.is_error, Some(true), "{}", text(&result));
        let answer: Value = serde_json::from_str(text(&result)).expect("JSON answer");
        assert_eq!(answer["status"], "invalid", "{answer}");
        let message = answer["errors"][0]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("is damaged: ") && message.contains(HINT),
            "{answer}"
        );
    }
    client.cancel().await.unwrap();
}

fn chain(turn_ref: &str, lines: &str) -> Value {
    json!({
        "turn_ref": turn_ref,
        "trigger": {"type": "user_approval", "summary": "ok", "citations": [{"lines": lines}]},
        "terminal_state": {"type": "clarification_only", "summary": "ok", "citations": [{"lines": lines}]},
        "materiality": "minor"
    })
}

/// Flips one byte of the stored card's bytes inside store.redb (found by its text), so
/// the record still decodes but no longer matches its checksum.
fn corrupt_stored_card(ws: &Workspace) {
    let mut bytes = std::fs::read(ws.store()).unwrap();
    let needle = b"\"session_ref\": \"S0001\"";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the card's bytes are in the store file");
    bytes[at + 17] ^= 0x01; // S0001 -> R0001
    std::fs::write(ws.store(), bytes).unwrap();
}

/// A stored card whose bytes changed is never exported over the good file; `verify`
/// lists it (without touching the store file) and `import --rebuild` repairs the store.
#[test]
fn a_corrupted_document_is_refused_listed_by_verify_and_rebuilt() {
    let ws = imported_with_card();
    let good = ws.read(CARD);
    let verified = ws.ok(&["verify"]);
    assert!(verified.contains("no problems found"), "{verified}");

    corrupt_stored_card(&ws);

    let err = ws.fails(&["export"]);
    insta::assert_snapshot!("export_of_a_corrupted_document", ws.redact(&err));
    assert_eq!(ws.read(CARD), good, "export must not copy a corrupted card");

    let before = std::fs::read(ws.store()).unwrap();
    let out = ws.run(&["verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = String::from_utf8(out.stdout).unwrap();
    insta::assert_snapshot!("verify_of_a_corrupted_document", ws.redact(&report));
    assert!(
        std::fs::read(ws.store()).unwrap() == before,
        "verify must not write the store"
    );

    // A scratch file of a killed rebuild (no such process) is cleaned up.
    ws.write(".evidence-store/.store.redb.rebuild-4000000000", "partial");
    let rebuilt = ws.ok(&["import", "--rebuild"]);
    assert!(rebuilt.starts_with("rebuilt "), "{rebuilt}");
    assert!(rebuilt.contains("1 document(s)"), "{rebuilt}");
    assert!(ws.ok(&["verify"]).contains("no problems found"));
    ws.ok(&["export"]);
    assert_eq!(ws.read(CARD), good);
    let leftovers: Vec<_> = std::fs::read_dir(ws.path(".evidence-store"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        // The document lock is a permanent, empty lock file, not scratch.
        .filter(|name| name != "documents.lock")
        .collect();
    assert_eq!(
        leftovers,
        ["store.redb"],
        "the rebuild leaves no scratch file"
    );
}

/// A store that is not even a redb file (its header overwritten) is reported as damaged
/// by every command, and `import --rebuild` replaces it.
#[test]
fn a_store_with_a_wrecked_header_is_rebuilt() {
    let ws = imported_with_card();
    let mut bytes = std::fs::read(ws.store()).unwrap();
    bytes[..64].fill(0xAB);
    std::fs::write(ws.store(), &bytes).unwrap();
    for args in [&["dump"][..], &["import"][..], &["export"][..]] {
        let err = ws.fails(args);
        assert!(
            err.contains("is damaged: ") && err.contains(HINT),
            "{args:?}: {err}"
        );
    }
    let out = ws.run(&["verify"]);
    assert_eq!(out.status.code(), Some(1));
    ws.ok(&["import", "--rebuild"]);
    assert!(ws.ok(&["verify"]).contains("no problems found"));
    let stats = ws.ok(&["dump", "--json", "--stats"]);
    assert!(stats.contains("\"documents\": 1"), "{stats}");
}

/// `dump` and `verify` open the store read-only: the file's bytes and modification time
/// stay as they were.
#[test]
fn dump_and_verify_leave_the_store_file_untouched() {
    let ws = imported_with_card();
    let store = ws.store();
    let before = (
        std::fs::read(&store).unwrap(),
        std::fs::metadata(&store).unwrap().modified().unwrap(),
    );
    ws.ok(&["dump"]);
    ws.ok(&["dump", "--stats"]);
    ws.ok(&["dump", "session", PROJECT, "S0001"]);
    ws.ok(&["verify"]);
    let after = (
        std::fs::read(&store).unwrap(),
        std::fs::metadata(&store).unwrap().modified().unwrap(),
    );
    assert!(before == after, "the store file changed");
}

/// On a read-only mount (a private mount namespace, so nothing leaks), `dump` and
/// `verify` work.
#[test]
#[ignore = "needs root and unshare to make a read-only bind mount; tools/test.sh runs it (and CI, as root, must)"]
fn dump_and_verify_work_on_a_read_only_mount() {
    let ws = imported_with_card();
    let dir = ws.path(".evidence-store");
    let script = format!(
        "mount --bind '{d}' '{d}' && mount -o remount,ro,bind '{d}' '{d}' || exit 99; \
         touch '{d}/probe' 2>/dev/null && exit 98; \
         '{bin}' dump --stats --workspace '{w}' && '{bin}' verify --workspace '{w}'",
        d = dir.display(),
        w = ws.root().display(),
        bin = common::BIN,
    );
    let out = std::process::Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .output();
    let out = out.expect("unshare runs");
    assert_ne!(
        out.status.code(),
        Some(99),
        "cannot make a read-only bind mount ({}): this test needs root and unshare; run it as \
         root (tools/test.sh does, in CI) or leave it ignored",
        stderr(&out)
    );
    assert_ne!(out.status.code(), Some(98), "the mount is not read-only");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", stderr(&out));
    assert!(
        stdout.contains(&format!(
            "store schema    {}",
            evidence_store::harness::SCHEMA_VERSION
        )),
        "{stdout}"
    );
    assert!(stdout.contains("no problems found"), "{stdout}");
}

/// A commit that fails with `No space left on device` (injected at a known step, debug
/// builds only) is answered with the full disk named and nothing committed; the same
/// server then serves the next read and write, instead of failing every later call.
#[tokio::test]
async fn a_full_disk_fails_one_write_and_the_server_recovers() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let root = ws.root().to_owned();
    let transport = rmcp::transport::TokioChildProcess::new(
        tokio::process::Command::new(common::BIN).configure_env(&root),
    )
    .expect("server starts");
    let client = rmcp::ServiceExt::serve((), transport).await.unwrap();

    let first = json!({"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": chain("T0002", "7-7")});
    let answer: Value =
        serde_json::from_str(text(&call(&client, "write_evidence", first).await)).unwrap();
    assert_eq!(answer["status"], "invalid", "{answer}");
    let message = answer["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the disk holding the store at")
            && message.contains("is full (No space left on device"),
        "{answer}"
    );

    let read: Value = serde_json::from_str(text(
        &call(
            &client,
            "read_session_lines",
            json!({"project_key": PROJECT, "session_ref": "S0002", "start_line": 2, "end_line": 2}),
        )
        .await,
    ))
    .unwrap();
    assert_eq!(read["status"], "ok", "{read}");
    let second = json!({"project_key": PROJECT, "session_ref": "S0002", "evidence_chain": chain("T0001", "2-2")});
    let answer: Value =
        serde_json::from_str(text(&call(&client, "write_evidence", second).await)).unwrap();
    assert_eq!(answer["status"], "appended", "{answer}");
    client.cancel().await.unwrap();

    let stored = ws.ok(&["dump", "--json", "--stats"]);
    assert!(stored.contains("\"documents\": 1"), "{stored}");
}

trait ServeEnv {
    fn configure_env(self, root: &std::path::Path) -> Self;
}

impl ServeEnv for tokio::process::Command {
    fn configure_env(mut self, root: &std::path::Path) -> Self {
        self.arg("serve")
            .env("PROMPT_DIARY_WORKSPACE", root)
            .env("EVIDENCE_STORE_FAULT_FULL_DISK_AT_DOCUMENT_COMMIT", "1")
            .env("RUST_LOG", "off");
        self
    }
}

/// Imports `ws` and starts a server on it that has answered one read (so it has the store
/// open); returns the client and the server's pid.
async fn serving_after_a_read(ws: &Workspace) -> (common::Client, Option<u32>) {
    ws.ok(&["import"]);
    let (client, pid) = common::spawn_server(ws).await;
    let read = call(
        &client,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 1}),
    )
    .await;
    assert!(
        text(&read).contains("\"status\": \"ok\""),
        "{}",
        text(&read)
    );
    (client, pid)
}

/// A server killed with SIGKILL leaves the file needing redb's repair: `verify` (strictly
/// read-only) says so and names the fix, which is not a rebuild; `dump` repairs it first.
#[tokio::test]
async fn a_killed_writer_is_named_by_read_only_commands() {
    let ws = Workspace::example();
    let (client, pid) = serving_after_a_read(&ws).await;
    let pid = pid.expect("server pid");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = client.cancel().await;
    wait_dead(pid);

    let out = ws.run(&["verify"]);
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout);
    insta::assert_snapshot!("verify_after_a_killed_writer", ws.redact(&report));
    // dump repairs a writable file first, as any writer would, and then answers.
    ws.ok(&["dump"]);
    assert!(ws.ok(&["verify"]).contains("no problems found"));
}

/// A rebuild that cannot load the workspace leaves the old store as it was and no
/// scratch file behind.
#[test]
fn a_failed_rebuild_changes_nothing() {
    let ws = imported_with_card();
    let before = std::fs::read(ws.store()).unwrap();
    ws.write("metadata.json", "{not json");
    let err = ws.fails(&["import", "--rebuild"]);
    insta::assert_snapshot!("rebuild_of_a_broken_workspace", ws.redact(&err));
    assert!(std::fs::read(ws.store()).unwrap() == before);
    let names: Vec<_> = std::fs::read_dir(ws.path(".evidence-store"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        // The document lock is a permanent, empty lock file, not scratch.
        .filter(|name| name != "documents.lock")
        .collect();
    assert_eq!(names, ["store.redb"]);
}

/// A rebuild refuses while a server has the store open (it would go on using the
/// replaced file) and changes nothing; once the server is gone it goes ahead.
#[tokio::test]
async fn a_rebuild_refuses_while_a_server_has_the_store_open() {
    let ws = Workspace::example();
    let (client, pid) = serving_after_a_read(&ws).await;
    let before = std::fs::read(ws.store()).unwrap();
    let err = ws.fails(&["import", "--rebuild"]);
    assert!(err.contains("open; stop every server first"), "{err}");
    assert!(std::fs::read(ws.store()).unwrap() == before);
    client.cancel().await.unwrap();
    wait_dead(pid.expect("server pid"));
    ws.ok(&["import", "--rebuild"]);
}

/// Waits until the process is dead (a zombie or reaped), so its file locks are gone.
fn wait_dead(pid: u32) {
    while std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.contains(") Z "))
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A FIFO at the store path: `dump` and `verify` (read-only opens) say it is not a regular
/// file instead of waiting for a writer forever, and `import --rebuild` replaces it.
#[test]
fn a_fifo_at_the_store_path_hangs_no_command() {
    let ws = Workspace::example();
    std::fs::create_dir_all(ws.path(".evidence-store")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(ws.store())
        .status()
        .unwrap();
    assert!(made.success());
    for args in [&["dump"][..], &["verify"]] {
        let out = common::run_or_kill(&ws, &[], args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}: {text}");
        assert!(text.contains("not a regular file"), "{args:?}: {text}");
    }
    let out = common::run_or_kill(&ws, &[], &["import", "--rebuild"]);
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::metadata(ws.store()).unwrap().is_file());
    ws.ok(&["verify"]);
}
