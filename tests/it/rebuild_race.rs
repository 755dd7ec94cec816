//! A server that opened the store before `import --rebuild` replaced it never acknowledges
//! a write the rebuilt store lacks: every acknowledged chain survives a later `export`.

use crate::common;

use common::cards;
use common::{PROJECT, Paused, Workspace, call_ok, connect, text, try_call};
use serde_json::{Value, json};

const CARD: &str = "projects/Demo-0123456789ab/evidence/S0001.json";

fn chain(turn: &str, lines: &str) -> Value {
    cards::minor_chain("S0001", turn, lines)
}

#[tokio::test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the pause point exists in debug builds"
)]
async fn a_write_to_a_store_replaced_by_a_rebuild_is_never_acknowledged_and_lost() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let first = connect(&ws).await;
    assert_eq!(
        call_ok(&first, "write_evidence", chain("T0001", "1-1")).await["status"],
        "appended"
    );
    first.cancel().await.unwrap();

    // The rebuild passes its in-use check, then stops before taking any lock.
    let rebuild = Paused::start(&ws, &["import", "--rebuild"], "before-write-lock");

    // A server starts meanwhile: it has the old store file open.
    let server = connect(&ws).await;
    call_ok(
        &server,
        "read_session_lines",
        json!({"project_key": PROJECT, "session_ref": "S0001", "start_line": 1, "end_line": 1}),
    )
    .await;
    rebuild.release();

    let answer = try_call(&server, "write_evidence", chain("T0002", "7-7")).await;
    let acknowledged = answer
        .as_ref()
        .is_ok_and(|r| text(r).contains("\"status\": \"appended\""));
    server.cancel().await.unwrap();
    ws.ok(&["export"]);
    let card = String::from_utf8(ws.read(CARD)).unwrap();
    assert!(card.contains("T0001"), "{card}");
    if acknowledged {
        assert!(card.contains("T0002"), "acknowledged, then lost: {card}");
    }
    // The write is refused, saying why, and changes nothing.
    let message = match &answer {
        Ok(r) => text(r).to_owned(),
        Err(e) => e.clone(),
    };
    assert!(!acknowledged && message.contains("replaced"), "{message}");
    assert!(!card.contains("T0002"), "{card}");
}

/// A write a server completes after the rebuild read the workspace files but before it
/// renamed the new store into place is adopted into the new store, so `export` keeps it.
#[tokio::test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the pause point exists in debug builds"
)]
async fn a_write_just_before_the_rebuild_renames_is_kept() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let first = connect(&ws).await;
    assert_eq!(
        call_ok(&first, "write_evidence", chain("T0001", "1-1")).await["status"],
        "appended"
    );
    first.cancel().await.unwrap();

    let rebuild = Paused::start(&ws, &["import", "--rebuild"], "before-rename");

    let server = connect(&ws).await;
    assert_eq!(
        call_ok(&server, "write_evidence", chain("T0002", "7-7")).await["status"],
        "appended"
    );
    server.cancel().await.unwrap();
    rebuild.release();

    ws.ok(&["export"]);
    let card = String::from_utf8(ws.read(CARD)).unwrap();
    assert!(
        card.contains("T0001") && card.contains("T0002"),
        "acknowledged, then lost: {card}"
    );
}
