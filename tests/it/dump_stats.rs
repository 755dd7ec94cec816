//! `dump --stats`: what the store holds, in one screen, as text and as JSON.

use crate::common;

use common::Workspace;
use serde_json::Value;

/// The store size varies with redb's allocation; everything else is fixed by the example.
fn redact_size(text: &str) -> String {
    text.lines()
        .map(|line| {
            if line.starts_with("store size") {
                "store size      <SIZE>".to_owned()
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn stats_text_fits_one_screen() {
    let ws = Workspace::example();
    ws.write(
        "projects/Demo-0123456789ab/evidence/S0001.json",
        common::fixture_bytes("card_S0001_after_a_e.json"),
    );
    ws.ok(&["import"]);
    let text = ws.redact(&ws.ok(&["dump", "--stats"]));
    assert!(text.lines().count() <= 24, "{text}");
    insta::assert_snapshot!("dump_stats", redact_size(&text));
}

#[test]
fn stats_json_agrees_with_the_store() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let stats: Value = serde_json::from_str(&ws.ok(&["dump", "--stats", "--json"])).unwrap();
    let size = std::fs::metadata(ws.store()).unwrap().len();
    assert_eq!(stats["store_bytes"], size);
    assert_eq!(
        stats["store_schema"],
        evidence_store::harness::SCHEMA_VERSION
    );
    assert_eq!(stats["sessions_indexed"], 2);
    assert_eq!(stats["lines_indexed"], 16);
    let covered: u64 = ["c1.jsonl", "x1.jsonl"]
        .iter()
        .zip(["claude-code", "codex"])
        .map(|(f, src)| {
            std::fs::metadata(ws.path(&format!("projects/Demo-0123456789ab/sessions/{src}/{f}")))
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(stats["bytes_covered"], covered);
    assert_eq!(stats["documents"], 0);
    assert_eq!(stats["tables"]["sessions"], 2);
}
