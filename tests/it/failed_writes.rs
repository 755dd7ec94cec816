//! A write answered as failed leaves nothing behind: not in the store, not in any file.
//! Faults are injected at known steps through `EVIDENCE_STORE_FAULT` (debug builds only).

use crate::common;

use std::path::Path;

use common::cards;
use common::{Client, Workspace, call_ok, connect, spawn_server_env};
use serde_json::Value;

const CARD: &str = "projects/Demo-0123456789ab/evidence/S0001.json";

fn args(turn_ref: &str, lines: &str) -> Value {
    cards::minor_chain("S0001", turn_ref, lines)
}

async fn write(client: &Client, turn_ref: &str, lines: &str) -> Value {
    call_ok(client, "write_evidence", args(turn_ref, lines)).await
}

/// The names in a directory, sorted (none when it does not exist).
fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    out.sort();
    out
}

/// The store's documents as `export` materialises them into an empty directory.
fn stored_card(ws: &Workspace) -> Option<Vec<u8>> {
    std::fs::read(cards::exported(&ws.store()).path().join(CARD)).ok()
}

#[tokio::test]
async fn a_failed_commit_leaves_no_card_and_the_retry_succeeds() {
    let ws = Workspace::example();
    let (client, _) = spawn_server_env(&ws, &[("EVIDENCE_STORE_FAULT", "commit")]).await;
    let got = write(&client, "T0002", "7-7").await;
    client.cancel().await.unwrap();
    assert_eq!(got["status"], "invalid", "{got}");
    assert!(
        got["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("injected fault at commit"),
        "{got}"
    );
    assert!(!ws.path(CARD).exists(), "no card file");
    assert_eq!(stored_card(&ws), None, "no card in the store");
    assert!(names(&ws.path("projects/Demo-0123456789ab/evidence")).is_empty());

    // The retry is a first write, not a duplicate.
    let client = connect(&ws).await;
    assert_eq!(write(&client, "T0002", "7-7").await["status"], "appended");
    client.cancel().await.unwrap();
    assert_eq!(stored_card(&ws).as_deref(), Some(ws.read(CARD).as_slice()));
}

#[tokio::test]
async fn a_failed_commit_puts_the_previous_card_back() {
    let ws = Workspace::example();
    let (client, _) = spawn_server_env(&ws, &[("EVIDENCE_STORE_FAULT", "commit@2")]).await;
    assert_eq!(write(&client, "T0002", "7-7").await["status"], "appended");
    let before = ws.read(CARD);
    let got = write(&client, "T0001", "1-1").await;
    assert_eq!(got["status"], "invalid", "{got}");
    assert_eq!(ws.read(CARD), before, "the card is as it was");
    assert_eq!(
        names(&ws.path("projects/Demo-0123456789ab/evidence")),
        ["S0001.json"],
        "no temp or backup file left"
    );
    // The same server goes on: the retry is appended once.
    assert_eq!(write(&client, "T0001", "1-1").await["status"], "appended");
    client.cancel().await.unwrap();
    assert_eq!(cards::turn_refs(&ws.read(CARD)), ["T0002", "T0001"]);
    assert_eq!(stored_card(&ws).as_deref(), Some(ws.read(CARD).as_slice()));
}

#[tokio::test]
async fn a_failed_replacement_leaves_nothing() {
    let ws = Workspace::example();
    let (client, _) = spawn_server_env(&ws, &[("EVIDENCE_STORE_FAULT", "rename")]).await;
    let got = write(&client, "T0002", "7-7").await;
    client.cancel().await.unwrap();
    assert_eq!(got["status"], "invalid", "{got}");
    assert!(names(&ws.path("projects/Demo-0123456789ab/evidence")).is_empty());
    assert_eq!(stored_card(&ws), None);
}

#[test]
fn a_failed_build_commit_leaves_the_previous_report() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let out = std::process::Command::new(common::BIN)
        .args(["build", "--workspace"])
        .arg(ws.root())
        .env("EVIDENCE_STORE_FAULT", "commit")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the build reports the failure");
    assert!(!ws.path("daily-report.json").exists());
    assert_eq!(
        names(ws.root()),
        [".evidence-store", "metadata.json", "projects"]
    );
    // A previous report the build would replace (not a valid skeleton, so it differs).
    let previous = b"{\"previous\": true}\n";
    ws.write("daily-report.json", previous);
    let out = std::process::Command::new(common::BIN)
        .args(["build", "--workspace"])
        .arg(ws.root())
        .env("EVIDENCE_STORE_FAULT", "commit")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(ws.read("daily-report.json"), previous);
    assert_eq!(
        names(ws.root()),
        [
            ".evidence-store",
            "daily-report.json",
            "metadata.json",
            "projects"
        ]
    );
}
