//! Nothing is read from or written outside the workspace: planted symlinks at temp names,
//! at the evidence or project directory, at a card or at `sessions/`, and session refs that
//! are paths, are refused with an error naming the path, and leave the outside untouched.

use crate::common;

use std::os::unix::fs::symlink;
use std::path::Path;

use common::cards;
use common::{Client, PROJECT, Workspace, call_ok, connect};
use serde_json::{Value, json};

const CARD: &str = "projects/Demo-0123456789ab/evidence/S0001.json";
const SECRET: &str = "outside-secret-0f1e2d3c";

fn chain_args() -> Value {
    cards::minor_chain("S0001", "T0002", "7-7")
}

/// Returns once the server has imported the workspace (a read needs the store).
async fn ready(client: &Client) {
    let got = call_ok(
        client,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 1}),
    )
    .await;
    assert_eq!(got["status"], "ok", "{got}");
}

async fn write(client: &Client) -> Value {
    call_ok(client, "write_evidence", chain_args()).await
}

/// A directory outside the workspace holding one file with known bytes.
fn outside() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("victim.json");
    std::fs::write(&file, SECRET).unwrap();
    (dir, file)
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether the store file holds `needle` anywhere (documents are stored verbatim).
fn store_holds(ws: &Workspace, needle: &str) -> bool {
    let bytes = std::fs::read(ws.store()).unwrap_or_default();
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The names in a directory, sorted.
/// `text` with the workspace's path shown as `<W>` and the directory outside as `<OUT>`.
fn shown(ws: &Workspace, outside: &Path, text: &str) -> String {
    ws.redact(text)
        .replace(&outside.display().to_string(), "<OUT>")
}

fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn a_planted_temp_symlink_is_never_written_through() {
    let ws = Workspace::example();
    let (out, victim) = outside();
    std::fs::create_dir_all(ws.path("projects/Demo-0123456789ab/evidence")).unwrap();
    symlink(&victim, ws.path(&format!("{CARD}.tmp"))).unwrap();
    let client = connect(&ws).await;
    assert_eq!(write(&client).await["status"], "appended");
    client.cancel().await.unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), SECRET);
    assert!(!is_symlink(&ws.path(CARD)), "the card is a regular file");
    let card: Value = serde_json::from_slice(&ws.read(CARD)).unwrap();
    assert_eq!(card["evidence_chains"][0]["turn_ref"], "T0002");
    // prompt-diary's temp name is not ours: export leaves it alone.
    ws.ok(&["export"]);
    assert!(is_symlink(&ws.path(&format!("{CARD}.tmp"))));
    assert_eq!(names(out.path()), ["victim.json"]);
}

#[test]
fn a_planted_report_temp_symlink_is_never_written_through() {
    let ws = Workspace::example();
    let (_out, victim) = outside();
    symlink(&victim, ws.path("daily-report.json.tmp")).unwrap();
    ws.ok(&["import"]);
    ws.ok(&["build"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), SECRET);
    assert!(!is_symlink(&ws.path("daily-report.json")));
    let report: Value = serde_json::from_slice(&ws.read("daily-report.json")).unwrap();
    assert!(report["projects"].is_array());
}

/// An evidence directory that is a symlink outside: its cards cannot be read, so the
/// workspace is refused, naming the card; nothing is written there or committed.
#[tokio::test]
async fn no_card_is_written_into_an_evidence_dir_outside() {
    let ws = Workspace::example();
    let out = tempfile::tempdir().unwrap();
    symlink(out.path(), ws.path("projects/Demo-0123456789ab/evidence")).unwrap();
    let client = connect(&ws).await;
    let got = write(&client).await;
    client.cancel().await.unwrap();
    insta::assert_snapshot!(
        "write_into_an_evidence_dir_outside",
        shown(&ws, out.path(), &format!("{got:#}"))
    );
    assert!(names(out.path()).is_empty(), "nothing written outside");
    assert!(!store_holds(&ws, "clarification_only"), "nothing committed");
}

#[tokio::test]
async fn no_card_is_written_into_a_project_dir_moved_outside() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    ready(&client).await;
    // After the import, the project directory becomes a symlink to a copy outside.
    let out = tempfile::tempdir().unwrap();
    let moved = out.path().join(PROJECT);
    std::fs::rename(ws.path(&format!("projects/{PROJECT}")), &moved).unwrap();
    symlink(&moved, ws.path(&format!("projects/{PROJECT}"))).unwrap();
    let got = write(&client).await;
    client.cancel().await.unwrap();
    insta::assert_snapshot!(
        "write_into_a_project_dir_moved_outside",
        shown(&ws, out.path(), &format!("{got:#}"))
    );
    assert!(!moved.join("evidence").exists(), "nothing written outside");
    assert!(!store_holds(&ws, "clarification_only"), "nothing committed");
}

#[tokio::test]
async fn a_session_ref_that_is_a_path_is_refused_at_import() {
    let ws = Workspace::example();
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let text = String::from_utf8(ws.read(&index)).unwrap();
    ws.write(&index, text.replacen("\"S0002\"", "\"../../x/escaped\"", 1));
    insta::assert_snapshot!(
        "import_of_a_session_ref_that_is_a_path",
        ws.redact(&ws.fails(&["import"]))
    );
    // A server on it answers every write with the same problem and creates nothing.
    let client = connect(&ws).await;
    let got = call_ok(
        &client,
        "write_evidence",
        json!({"project_key": PROJECT, "session_ref": "../../x/escaped", "evidence_chain": chain_args()["evidence_chain"]}),
    )
    .await;
    client.cancel().await.unwrap();
    insta::assert_snapshot!(
        "write_to_a_session_ref_that_is_a_path",
        ws.redact(&format!("{got:#}"))
    );
    // Where the old card path led: `projects/<key>/evidence/../../x/escaped.json`.
    assert!(!ws.path("projects/x").exists());
}

#[tokio::test]
async fn a_card_symlinked_outside_is_never_copied_into_the_store() {
    let ws = Workspace::example();
    let (out, victim) = outside();
    std::fs::create_dir_all(ws.path("projects/Demo-0123456789ab/evidence")).unwrap();
    symlink(&victim, ws.path(CARD)).unwrap();
    let err = ws.fails(&["import"]);
    insta::assert_snapshot!(
        "import_of_a_card_symlinked_outside",
        shown(&ws, out.path(), &err)
    );
    assert!(!store_holds(&ws, SECRET));

    // Planted while a server runs: the write that would sync the card refuses.
    std::fs::remove_file(ws.path(CARD)).unwrap();
    let client = connect(&ws).await;
    ready(&client).await;
    symlink(&victim, ws.path(CARD)).unwrap();
    let got = write(&client).await;
    client.cancel().await.unwrap();
    insta::assert_snapshot!(
        "write_over_a_card_symlinked_outside",
        shown(&ws, out.path(), &format!("{got:#}"))
    );
    assert!(!store_holds(&ws, SECRET));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), SECRET);
}

#[test]
fn a_sessions_dir_symlinked_outside_is_refused_at_import() {
    let ws = Workspace::example();
    let out = tempfile::tempdir().unwrap();
    let sessions = ws.path(&format!("projects/{PROJECT}/sessions"));
    let moved = out.path().join("sessions");
    std::fs::rename(&sessions, &moved).unwrap();
    symlink(&moved, &sessions).unwrap();
    let err = ws.fails(&["import"]);
    assert!(
        err.contains("sessions.index.jsonl:1 session_path resolves to ")
            && err.contains(&moved.canonicalize().unwrap().display().to_string())
            && err.contains("outside the workspace"),
        "{err}"
    );
    assert!(!store_holds(&ws, "c1.jsonl"), "nothing imported");
}

/// `metadata.json`, `project.json` and `sessions.index.jsonl` symlinked to files outside:
/// import refuses each, naming where it leads, and stores nothing of them.
#[test]
fn workspace_files_symlinked_outside_are_refused_at_import() {
    for rel in [
        "metadata.json".to_owned(),
        format!("projects/{PROJECT}/project.json"),
        format!("projects/{PROJECT}/sessions.index.jsonl"),
    ] {
        let ws = Workspace::example();
        let out = tempfile::tempdir().unwrap();
        let moved = out.path().join("moved");
        std::fs::rename(ws.path(&rel), &moved).unwrap();
        symlink(&moved, ws.path(&rel)).unwrap();
        let err = ws.fails(&["import"]);
        assert!(
            err.contains(&moved.canonicalize().unwrap().display().to_string())
                && err.contains("outside the workspace"),
            "{rel}: {err}"
        );
        assert!(
            !ws.store().exists() || !store_holds(&ws, "c1.jsonl"),
            "{rel}"
        );
    }
}

/// A FIFO planted at `sessions.index.jsonl` is refused; it cannot hang `import` (nor
/// every `serve`, which imports at start).
#[test]
fn a_fifo_at_the_session_index_does_not_hang_import() {
    let ws = Workspace::example();
    let index = ws.path(&format!("projects/{PROJECT}/sessions.index.jsonl"));
    std::fs::remove_file(&index).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&index)
        .status()
        .unwrap();
    assert!(made.success());
    let out = import_or_kill(&ws);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("sessions.index.jsonl") && err.contains("not a regular file"),
        "{err}"
    );
}

/// Runs `import`; a hung import is killed after 60 s so that the test fails instead of
/// hanging.
fn import_or_kill(ws: &Workspace) -> std::process::Output {
    let child = std::process::Command::new(common::BIN)
        .args(["import", "--workspace"])
        .arg(ws.root())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::output_or_kill(child, std::time::Duration::from_secs(60))
}

/// A FIFO planted at a card the store already holds is refused by the next import (which
/// first checks whether anything changed); it cannot hang it.
#[tokio::test]
async fn a_fifo_at_a_stored_card_does_not_hang_the_next_import() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    assert_eq!(write(&client).await["status"], "appended");
    client.cancel().await.unwrap();
    std::fs::remove_file(ws.path(CARD)).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(ws.path(CARD))
        .status()
        .unwrap();
    assert!(made.success());
    let out = import_or_kill(&ws);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("S0001.json") && err.contains("not a regular file"),
        "{err}"
    );
}

/// The workspace's own store is refused when a planted symlink puts it outside (an empty
/// file there would become a store, another workspace's store would be taken over); the
/// target is left as it was. A store named with `--store` is the user's choice.
#[tokio::test]
async fn a_store_symlinked_outside_is_refused_and_left_alone() {
    let (out, victim) = outside();
    let ws = Workspace::example();
    std::fs::create_dir_all(ws.path(".evidence-store")).unwrap();
    symlink(&victim, ws.store()).unwrap();
    for args in [
        &["import"][..],
        &["export"],
        &["verify"],
        &["dump", "--stats"],
    ] {
        let err = ws.fails(args);
        assert!(
            err.contains("cannot be used: it resolves to") && err.contains("outside the workspace"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read(&victim).unwrap(), SECRET.as_bytes());

    let ws = Workspace::example();
    let moved = out.path().join("store-dir");
    std::fs::create_dir(&moved).unwrap();
    symlink(&moved, ws.path(".evidence-store")).unwrap();
    let err = ws.fails(&["import"]);
    assert!(err.contains("outside the workspace"), "{err}");
    assert!(names(&moved).is_empty(), "no store created outside");

    // A dangling store symlink would create the store at its target; `serve` answers
    // every call with the refusal.
    let ws = Workspace::example();
    std::fs::create_dir_all(ws.path(".evidence-store")).unwrap();
    let target = out.path().join("created.redb");
    symlink(&target, ws.store()).unwrap();
    let err = ws.fails(&["import"]);
    assert!(err.contains("outside the workspace"), "{err}");
    let client = connect(&ws).await;
    let got = call_ok(
        &client,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 1}),
    )
    .await;
    client.cancel().await.unwrap();
    let message = got["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot be used") && message.contains("outside the workspace"),
        "{got}"
    );
    assert!(!target.exists(), "no store created at the symlink's target");

    let own = out.path().join("chosen.redb");
    ws.ok(&["--store", own.to_str().unwrap(), "import"]);
    assert!(own.exists(), "an explicit --store is used where it says");
}

/// What a planted entry at one of the store's own names is.
#[derive(Debug, Clone, Copy)]
enum Planted {
    /// A hard link to a file outside the workspace.
    HardLink,
    /// A symlink to a file inside the workspace (one outside is refused as outside).
    Symlink,
    Fifo,
    Directory,
}

const PLANTED: [Planted; 4] = [
    Planted::HardLink,
    Planted::Symlink,
    Planted::Fifo,
    Planted::Directory,
];

/// Puts `what` at `rel` in the workspace: a hard link to `victim`, or a relative symlink
/// to a copy of it inside the workspace (`inside-victim`).
fn plant(ws: &Workspace, rel: &str, what: Planted, victim: &Path) {
    let at = ws.path(rel);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    match std::fs::symlink_metadata(&at) {
        Ok(m) if m.is_dir() => std::fs::remove_dir(&at).unwrap(),
        Ok(_) => std::fs::remove_file(&at).unwrap(),
        Err(_) => {}
    }
    match what {
        Planted::HardLink => std::fs::hard_link(victim, &at).unwrap(),
        Planted::Symlink => {
            std::fs::write(ws.path("inside-victim"), SECRET).unwrap();
            // Relative, so that it stays inside (an absolute one is refused as such).
            let up = "../".repeat(rel.matches('/').count());
            symlink(format!("{up}inside-victim"), &at).unwrap();
        }
        Planted::Fifo => {
            let made = std::process::Command::new("mkfifo")
                .arg(&at)
                .status()
                .unwrap();
            assert!(made.success());
        }
        Planted::Directory => std::fs::create_dir(&at).unwrap(),
    }
}

/// Runs a command that must not hang on a planted FIFO; stdout and stderr together.
fn outcome(ws: &Workspace, args: &[&str]) -> (Option<i32>, String) {
    let out = common::run_or_kill(ws, &[("RUST_LOG", "off")], args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// The message each kind of planted entry is refused with.
fn refusal(what: Planted) -> &'static str {
    match what {
        Planted::HardLink => "it has 2 hard links",
        Planted::Symlink => "it is a symlink, not a regular file",
        Planted::Fifo | Planted::Directory => "it is not a regular file",
    }
}

/// The document lock is a file of the store's own: a hard link planted at its name (a
/// name inside the workspace for a file outside), a symlink, a FIFO or a directory is
/// refused by every command that takes the lock, with the reason, and nothing is written
/// through it (the holder line would truncate the outside file).
#[test]
fn a_planted_document_lock_is_refused_and_nothing_is_written_through_it() {
    let (_out, victim) = outside();
    for what in PLANTED {
        let ws = Workspace::example();
        ws.ok(&["import"]);
        plant(&ws, ".evidence-store/documents.lock", what, &victim);
        for args in [
            &["import", "--rehash"][..],
            &["export"],
            &["build"],
            &["verify-citations"],
            &["verify"],
        ] {
            let (code, text) = outcome(&ws, args);
            assert_ne!(code, Some(0), "{what:?} {args:?}: {text}");
            assert!(
                text.contains("documents.lock") && text.contains(refusal(what)),
                "{what:?} {args:?}: {text}"
            );
        }
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            SECRET.as_bytes(),
            "{what:?}"
        );
        if let Planted::Symlink = what {
            assert_eq!(ws.read("inside-victim"), SECRET.as_bytes());
        }
        assert!(!ws.path("daily-report.json").exists(), "{what:?}: no build");
    }
}

/// The store file is opened and checked by its descriptor before redb sees it: a hard
/// link planted at `store.redb` (to an empty file outside, or to another workspace's
/// store), a symlink, a FIFO or a directory is refused by every command, and the file it
/// leads to is left as it was.
#[test]
fn a_planted_store_file_is_refused_and_the_file_behind_it_is_untouched() {
    let (out, victim) = outside();
    for what in PLANTED {
        let ws = Workspace::example();
        plant(&ws, ".evidence-store/store.redb", what, &victim);
        for args in [
            &["import"][..],
            &["dump", "--stats"],
            &["export"],
            &["build"],
            &["verify"],
            &["verify-citations"],
        ] {
            let (code, text) = outcome(&ws, args);
            assert_ne!(code, Some(0), "{what:?} {args:?}: {text}");
            assert!(
                text.contains("store.redb") && text.contains(refusal(what)),
                "{what:?} {args:?}: {text}"
            );
        }
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            SECRET.as_bytes(),
            "{what:?}"
        );
        // A rebuild renames its new store over the name: the entry goes, what it led to
        // stays as it was (a directory cannot be renamed over).
        let (code, text) = outcome(&ws, &["import", "--rebuild"]);
        match what {
            Planted::Directory => assert_ne!(code, Some(0), "{text}"),
            _ => {
                assert_eq!(code, Some(0), "{what:?}: {text}");
                ws.ok(&["verify"]);
            }
        }
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            SECRET.as_bytes(),
            "{what:?}"
        );
    }

    // A hard link to an empty file outside: no store is written into it.
    let empty = out.path().join("empty.redb");
    std::fs::write(&empty, b"").unwrap();
    let ws = Workspace::example();
    plant(&ws, ".evidence-store/store.redb", Planted::HardLink, &empty);
    let err = ws.fails(&["import"]);
    assert!(err.contains("it has 2 hard links"), "{err}");
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);

    // A hard link to another workspace's store: that store is not taken over.
    let other = Workspace::example();
    other.ok(&["import"]);
    let before = std::fs::read(other.store()).unwrap();
    let ws = Workspace::example();
    plant(
        &ws,
        ".evidence-store/store.redb",
        Planted::HardLink,
        &other.store(),
    );
    let err = ws.fails(&["import"]);
    assert!(err.contains("it has 2 hard links"), "{err}");
    std::fs::remove_file(ws.store()).unwrap();
    assert_eq!(std::fs::read(other.store()).unwrap(), before);
}

/// A rebuild's scratch file has a name of its own (pid and random part), created
/// exclusively: a hard link planted at the name an earlier scheme used (`.store.redb.rebuild-<pid>`, here with a live pid so that cleanup keeps
/// it) is neither written nor removed, and the rebuild succeeds beside it.
#[test]
fn a_planted_rebuild_scratch_name_is_never_written_through() {
    let (_out, victim) = outside();
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let planted = format!(".evidence-store/.store.redb.rebuild-{}", std::process::id());
    plant(&ws, &planted, Planted::HardLink, &victim);
    let rebuilt = ws.ok(&["import", "--rebuild"]);
    assert!(rebuilt.starts_with("rebuilt "), "{rebuilt}");
    assert_eq!(std::fs::read(&victim).unwrap(), SECRET.as_bytes());
    assert_eq!(
        ws.read(&planted),
        SECRET.as_bytes(),
        "the planted file stays"
    );
    assert!(ws.ok(&["verify"]).contains("no problems found"));
}

/// Documents and receipts are replaced through fresh temp files renamed over their
/// names: a hard link planted at `daily-report.json` or at a receipt is replaced, never
/// written through, and the file outside keeps its bytes.
#[test]
fn hard_links_at_documents_and_receipts_are_replaced_not_written_through() {
    let (_out, victim) = outside();
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let receipt = "projects/Demo-0123456789ab/receipts/evidence-S0001-T0001.json";
    ws.ok(&["export"]);
    assert!(ws.path(receipt).exists(), "the example exports a receipt");
    plant(&ws, receipt, Planted::HardLink, &victim);
    ws.ok(&["build"]);
    plant(&ws, "daily-report.json", Planted::HardLink, &victim);
    ws.ok(&["export"]);
    assert_eq!(std::fs::read(&victim).unwrap(), SECRET.as_bytes());
    use std::os::unix::fs::MetadataExt;
    for rel in [receipt, "daily-report.json"] {
        assert_eq!(std::fs::metadata(ws.path(rel)).unwrap().nlink(), 1, "{rel}");
        assert_ne!(ws.read(rel), SECRET.as_bytes(), "{rel}");
    }
}

/// Index values no session can have are refused at import with the row and the rule,
/// as other index problems are, rather than stored changed (a line number clamped) or
/// accepted and then failing every write (a `session_ref` too long for a file name).
#[test]
fn index_values_that_cannot_be_served_are_refused_at_import() {
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let huge_ref = format!("S{}", "1".repeat(4000));
    let cases = [
        (
            "\"target_end_line\": 8",
            "\"target_end_line\": 18446744073709551615".to_owned(),
            "target_end_line 18446744073709551615 is beyond the last line a session file can have (9223372036854775807)",
        ),
        (
            "\"target_end_line\": 8",
            format!("\"target_end_line\": 1{}", "0".repeat(30)),
            "target_end_line 1000000000000000000000000000000 is beyond the last line",
        ),
        (
            "\"turn_end_line\": 6",
            "\"turn_end_line\": 99999999999999999999".to_owned(),
            "turn_end_line 99999999999999999999 is beyond the last line",
        ),
        (
            "\"S0001\"",
            format!("\"{huge_ref}\""),
            "is 4001 bytes, longer than the 235 a session_ref may have",
        ),
        (
            "\"S0001\"",
            format!("\"{}\"", "é".repeat(118)),
            "is 236 bytes, longer than the 235 a session_ref may have",
        ),
    ];
    for (from, to, rule) in cases {
        let ws = Workspace::example();
        let text = String::from_utf8(ws.read(&index)).unwrap();
        assert!(text.contains(from), "{from}");
        ws.write(&index, text.replacen(from, &to, 1));
        let err = ws.fails(&["import"]);
        let shown = ws.path(&index).display().to_string();
        assert!(err.contains(&format!("{shown}:1 ")), "{rule}: {err}");
        assert!(err.contains(rule), "{rule}: {err}");
        assert!(!ws.store().exists(), "{rule}: no store");
    }

    // The longest session_ref allowed is served and written: its receipt's name fits.
    let ws = Workspace::example();
    let text = String::from_utf8(ws.read(&index)).unwrap();
    let longest = "S".repeat(235);
    ws.write(
        &index,
        text.replacen("\"S0001\"", &format!("\"{longest}\""), 1),
    );
    ws.ok(&["import"]);
    ws.ok(&["build"]);
    ws.ok(&["export"]);
    let receipt = format!("projects/{PROJECT}/receipts/evidence-{longest}-T0001.json");
    assert!(ws.path(&receipt).exists(), "{receipt}");
}
