//! A real full disk under the store (a small tmpfs, when this process may mount one) while
//! the card files still fit: every write answered `appended` is in the store and the card
//! file, and no write answered as failed is in either, though commits fail after the card
//! was replaced. They need root to mount, so they are `#[ignore]`d in a plain `cargo test`;
//! `tools/test.sh` runs them as root (CI must), and there a failed mount fails the test.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::cards;
use common::{Client, text, try_call};
use serde_json::{Value, json};

const PROJECT: &str = "Full-000000000000";

/// A tmpfs mounted on a temp dir, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts one, or fails the test: the tests that call this are `#[ignore]`d for want
    /// of root, and one that is run must not pass without its file system.
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status();
        assert!(
            status.as_ref().is_ok_and(|s| s.success()),
            "cannot mount a tmpfs ({status:?}): this test needs root; run it as root \
             (tools/test.sh does, in CI) or leave it ignored"
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn write_file(root: &Path, rel: &str, bytes: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn workspace(root: &Path, sessions: usize, turns: usize) {
    write_file(
        root,
        "metadata.json",
        r#"{"report_date": "2026-01-15", "status": "final", "timezone": "UTC"}"#,
    );
    write_file(
        root,
        &format!("projects/{PROJECT}/project.json"),
        format!(r#"{{"project_key": "{PROJECT}", "project_label": "Full"}}"#),
    );
    let mut index = String::new();
    for s in 1..=sessions {
        let turns: Vec<Value> = (1..=turns)
            .map(|t| json!({"turn_ref": format!("T{t:04}"), "turn_start_line": t, "turn_end_line": t}))
            .collect();
        let row = json!({"session_ref": format!("S{s:04}"), "source": "codex", "source_session_id": "x",
            "session_path": format!("sessions/{s}.jsonl"), "target_start_line": 1, "target_end_line": turns.len(), "turns": turns});
        index.push_str(&format!("{row}\n"));
    }
    write_file(
        root,
        &format!("projects/{PROJECT}/sessions.index.jsonl"),
        index,
    );
}

async fn write(client: &Client, session: usize, turn: usize) -> Option<String> {
    let lines = format!("{turn}-{turn}");
    let long = "x".repeat(4000);
    let trigger = cards::user_trigger(&long, &lines);
    let args = cards::material_chain(PROJECT, session, turn, trigger, &lines);
    let result = try_call(client, "write_evidence", args)
        .await
        .expect("every write is answered");
    let value: Value = serde_json::from_str(text(&result)).unwrap();
    (value["status"] != "appended").then(|| text(&result).to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root to mount a tmpfs; tools/test.sh runs it (and CI, as root, must)"]
async fn a_full_disk_loses_no_acknowledged_write_and_keeps_no_failed_one() {
    let fs = Tmpfs::mount("1m");
    let ws = tempfile::tempdir().unwrap();
    let root: PathBuf = ws.path().to_owned();
    workspace(&root, 4, 200);
    let store = fs.path().join("store.redb");
    let (client, _) = spawn_on(&root, &store).await;
    let (mut acked, mut failed, mut answers) = (BTreeSet::new(), BTreeSet::new(), Vec::new());
    'outer: for t in 1..=200 {
        for s in 1..=4 {
            match write(&client, s, t).await {
                None => {
                    acked.insert((s, t));
                }
                Some(answer) => {
                    failed.insert((s, t));
                    answers.push(answer);
                    if failed.len() >= 20 {
                        break 'outer;
                    }
                }
            }
        }
    }
    client.cancel().await.unwrap();
    assert!(
        failed.len() >= 20,
        "the disk filled up ({} written)",
        acked.len()
    );
    assert!(
        answers[0].contains("No space left on device"),
        "the first failure is the full disk: {}",
        answers[0]
    );
    eprintln!(
        "{} appended, {} failed; first failure: {}",
        acked.len(),
        failed.len(),
        answers[0]
    );
    // The store (exported elsewhere) and the files.
    let copy = cards::exported(&store);
    let in_files = cards::chains_in(&root, PROJECT);
    let in_store = cards::chains_in(copy.path(), PROJECT);
    cards::assert_hold_exactly(&in_files, &in_store, &acked);
}

/// `serve` on a workspace outside [`common::Workspace`].
async fn spawn_on(root: &Path, store: &Path) -> (Client, Option<u32>) {
    use rmcp::ServiceExt;
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
    let (root, store) = (root.to_owned(), store.to_owned());
    let transport =
        TokioChildProcess::new(tokio::process::Command::new(common::BIN).configure(|cmd| {
            cmd.arg("serve")
                .arg("--store")
                .arg(&store)
                .env("PROMPT_DIARY_WORKSPACE", &root)
                .env("RUST_LOG", "off");
        }))
        .unwrap();
    let pid = transport.id();
    (().serve(transport).await.unwrap(), pid)
}

/// Read-only media (the tmpfs holding the store remounted read-only): `serve` opens the
/// store read-only and answers reads; every write is refused naming the store, and
/// nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root to mount a tmpfs; tools/test.sh runs it (and CI, as root, must)"]
async fn on_read_only_media_reads_are_answered_and_writes_refused() {
    let fs = Tmpfs::mount("8m");
    let root = fs.path().join("ws");
    workspace(&root, 1, 3);
    let session = format!("projects/{PROJECT}/sessions/1.jsonl");
    write_file(&root, &session, "{\"type\":\"x\"}\n".repeat(3));
    let store = root.join(".evidence-store/store.redb");
    let (client, _) = spawn_on(&root, &store).await;
    assert_eq!(write(&client, 1, 1).await, None, "written while writable");
    client.cancel().await.unwrap();
    let remount = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(fs.path())
        .status()
        .unwrap();
    assert!(remount.success());
    let before = std::fs::read(&store).unwrap();

    let (client, _) = spawn_on(&root, &store).await;
    let read = try_call(
        &client,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 3}),
    )
    .await
    .expect("answered");
    let read: Value = serde_json::from_str(text(&read)).unwrap();
    assert_eq!(read["status"], "ok", "{read}");
    let refused = write(&client, 1, 2).await.expect("refused");
    client.cancel().await.unwrap();
    assert!(
        refused.contains("Read-only file system") || refused.contains("open read-only"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read(&store).unwrap(),
        before,
        "the store is unchanged"
    );
    assert_eq!(cards::chains_in(&root, PROJECT).len(), 1);
}
