//! `write_evidence` and `export` through the real binary.

use crate::common;

use common::{Client, PROJECT, Workspace, call_ok, cards, connect};
use serde_json::{Value, json};

fn fixture(name: &str) -> Vec<u8> {
    common::fixture_bytes(name)
}

async fn write(client: &Client, args: &Value) -> Value {
    call_ok(client, "write_evidence", args.clone()).await
}

const CARD: &str = "projects/Demo-0123456789ab/evidence/S0001.json";

fn chain(turn_ref: &str, lines: &str) -> Value {
    json!({
        "turn_ref": turn_ref,
        "trigger": {"type": "user_approval", "summary": "ok", "citations": [{"lines": lines}]},
        "terminal_state": {"type": "clarification_only", "summary": "ok", "citations": [{"lines": lines}]},
        "materiality": "minor"
    })
}

/// prompt-diary's answers to a sequence of `write_evidence` calls, in order, and the card they
/// leave behind, byte for byte (2357 bytes).
#[tokio::test]
async fn worked_examples_and_the_card_they_write() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    let cases: Value = serde_json::from_slice(&fixture("write_evidence_cases.json")).unwrap();
    for case in cases.as_array().unwrap() {
        let got = write(&client, &case["arguments"]).await;
        assert_eq!(got, case["expected"], "case ({})", case["name"]);
    }
    assert_eq!(ws.read(CARD), fixture("card_S0001_after_a_e.json"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn rejected_writes_change_nothing_and_bad_cards_are_structured() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    let args = json!({"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": chain("T0002", "7-7")});
    assert_eq!(write(&client, &args).await["status"], "appended");
    let before = ws.read(CARD);
    // Outside the turn: rejected, the card is byte-for-byte the same.
    let outside = json!({"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": chain("T0001", "7-7")});
    assert_eq!(write(&client, &outside).await["status"], "invalid");
    assert_eq!(ws.read(CARD), before);

    // A card that is not JSON is reported, not replaced, and nothing is written.
    ws.write(CARD, "{bad");
    let got = write(&client, &json!({"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": chain("T0001", "1-1")})).await;
    assert_eq!(got["errors"][0]["path"], "evidence_card");
    assert_eq!(
        got["errors"][0]["message"],
        "evidence card projects/Demo-0123456789ab/evidence/S0001.json is not valid JSON: Expecting property name enclosed in double quotes"
    );
    assert_eq!(ws.read(CARD), b"{bad");
    // A card for another session is reported too.
    ws.write(CARD, "{\"project_key\": \"Demo-0123456789ab\", \"session_ref\": \"S0002\", \"evidence_chains\": []}\n");
    let got = write(&client, &json!({"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": chain("T0001", "1-1")})).await;
    assert_eq!(
        got["errors"][0]["message"],
        "evidence card projects/Demo-0123456789ab/evidence/S0001.json has session_ref 'S0002', not 'S0001'"
    );
    // The evidence chain may arrive as a JSON string (LLM clients do that).
    std::fs::remove_file(ws.path(CARD)).unwrap();
    let as_text = json!({"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": chain("T0001", "1-1").to_string()});
    assert_eq!(write(&client, &as_text).await["status"], "appended");
    client.cancel().await.unwrap();
}

/// The file operations prompt-diary's extraction runner performs between agent turns.
#[tokio::test]
async fn the_card_files_stay_authoritative() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    let t1 = json!({"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": chain("T0001", "1-1")});
    let t2 = json!({"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": chain("T0002", "7-8")});
    assert_eq!(write(&client, &t1).await["status"], "appended");
    // The runner deletes an incomplete card before re-extracting the session...
    std::fs::remove_file(ws.path(CARD)).unwrap();
    // ...so T0001 can be written again, into a fresh card holding only it.
    assert_eq!(write(&client, &t1).await["status"], "appended");
    let card: Value = serde_json::from_slice(&ws.read(CARD)).unwrap();
    assert_eq!(card["evidence_chains"].as_array().unwrap().len(), 1);
    // It writes empty cards itself for sessions without turns; an edit on disk is seen.
    ws.write(CARD, "{\n  \"schema_version\": 1,\n  \"project_key\": \"Demo-0123456789ab\",\n  \"session_ref\": \"S0001\",\n  \"evidence_chains\": []\n}\n");
    assert_eq!(write(&client, &t2).await["status"], "appended");
    assert_eq!(
        write(&client, &t1).await["status"],
        "appended",
        "T0001 was dropped from the file, so it is new again"
    );
    assert_eq!(cards::turn_refs(&ws.read(CARD)), ["T0002", "T0001"]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn export_materialises_the_store_and_removes_temp_files() {
    let ws = Workspace::example();
    let client = connect(&ws).await;
    let t2 = json!({"project_key": PROJECT, "session_ref": "S0001", "evidence_chain": chain("T0002", "7-7")});
    assert_eq!(write(&client, &t2).await["status"], "appended");
    client.cancel().await.unwrap();
    let card = ws.read(CARD);
    std::fs::remove_file(ws.path(CARD)).unwrap();
    // A temp file of a killed writer of ours, and prompt-diary's own temp name.
    let ours = "projects/Demo-0123456789ab/evidence/.S0001.json.4242.7.0123456789abcdef.evidence-store.tmp";
    ws.write(ours, "{\"half");
    ws.write(&format!("{CARD}.tmp"), "{\"half");
    let out = ws.ok(&["export"]);
    assert_eq!(
        out,
        "exported 1 file(s) (0 already current), removed 1 stale temp file(s)\n\
         receipts: 1 written (0 already current), 0 stale removed, 0 skipped\n"
    );
    assert_eq!(ws.read(CARD), card);
    assert!(!ws.path(ours).exists());
    assert!(
        ws.path(&format!("{CARD}.tmp")).exists(),
        "only our own temp files are removed"
    );
    let out = ws.ok(&["export"]);
    assert_eq!(
        out,
        "exported 0 file(s) (1 already current), removed 0 stale temp file(s)\n\
         receipts: 0 written (1 already current), 0 stale removed, 0 skipped\n"
    );
}
