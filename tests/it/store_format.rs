//! How `tests/fixtures/store-v8.redb` was made: a store of schema version 8 with a value in
//! every table, written by the real binary's `import`. The test that reads it back and
//! pins every stored layout is `store::format_tests` (src/store/format_tests.rs).
//!
//! The fixture is made once per schema version and then never again: it stands for the
//! stores users already have. Run by hand only for a new schema version, with
//! `cargo test --test it store_format:: -- --ignored`, then commit the new file under a new name
//! beside the old one and write its expected values.

use crate::common;

use std::path::Path;

use common::{PROJECT, Workspace};
use serde_json::json;

/// The example workspace plus:
/// - `S0003`, a Claude session whose assistant line cites a file of the project directory
///   `repo/` (an `ok` citation with its SHA-256 and line count, a `missing_file` one, and
///   a JSON evidence block with a context);
/// - `S0004`, an index row whose session file is missing;
/// - a card, an envelope and a daily report on disk, which import mirrors.
fn fixture_workspace() -> Workspace {
    let ws = Workspace::example();
    let repo = ws.path("repo");
    ws.write("repo/src/a.py", "one\ntwo\nthree\n");
    let cwd = repo.to_str().expect("utf-8 temp path");
    let text = "Fixed.\n\n**Evidence**: src/a.py:2\n**Evidence**: src/gone.py:1\n\
                ```json\n{\"evidence\": [{\"type\": \"file\", \"reference\": \"src/a.py:1-3\", \
                \"context\": \"the whole file\"}]}\n```";
    let lines = [
        json!({"type": "user", "cwd": cwd, "message": {"role": "user",
            "content": [{"type": "text", "text": "Fix a.py."}]}}),
        json!({"type": "assistant", "cwd": cwd, "message": {"role": "assistant",
            "content": [{"type": "text", "text": text}]}}),
    ];
    let session: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let dir = format!("projects/{PROJECT}");
    ws.write(&format!("{dir}/sessions/claude-code/c3.jsonl"), session);
    let mut index =
        String::from_utf8(ws.read(&format!("{dir}/sessions.index.jsonl"))).expect("utf-8 index");
    for (session_ref, path, end) in [
        ("S0003", "sessions/claude-code/c3.jsonl", 2),
        ("S0004", "sessions/claude-code/gone.jsonl", 4),
    ] {
        let row = json!({"session_path": path, "session_ref": session_ref,
            "source": "claude-code", "source_session_id": session_ref.to_lowercase(),
            "subagent_path": "", "target_end_line": end, "target_start_line": 1,
            "turns": [{"target_subagents": [], "turn_end_line": end, "turn_ref": "T0001",
                "turn_start_line": 1}]});
        index.push_str(&format!("{row}\n"));
    }
    ws.write(&format!("{dir}/sessions.index.jsonl"), index);
    ws.write(
        &format!("{dir}/evidence/S0001.json"),
        "{\"card\": \"S0001\"}\n",
    );
    ws.write(
        &format!("{dir}/project-synthesis.json"),
        "{\"envelope\": 1}\n",
    );
    ws.write("daily-report.json", "{\"report\": \"2026-01-15\"}\n");
    ws
}

#[test]
#[ignore = "regenerates tests/fixtures/store-v8.redb, which must stay as schema 8 wrote it"]
fn regenerate_the_schema_8_fixture() {
    let ws = fixture_workspace();
    let out = ws.ok(&["import"]);
    assert!(out.contains("imported"), "{out}");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v8.redb");
    std::fs::copy(ws.store(), &fixture).expect("fixture written");
}

/// A store schema 6 wrote holds citations taken under the old rules: a test marker without
/// `pytest ` (`tests/test_parser.py::test_parse_tokens - PASS`, the example's line 6 as it
/// was then) stored as a test. The upgrade to 7 drops every citation and scan record, and
/// the next import takes them again under the current rules from the example as it is now:
/// its test marker written `pytest <test> - PASS` is the test citation, with `pytest ` in
/// its reference, the old reference is gone, and the other citations are taken as before.
#[test]
fn the_schema_6_fixture_is_upgraded_and_its_citations_taken_again() {
    let v6 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v6.redb");
    let old = std::fs::read(&v6).expect("the schema 6 fixture");
    let stored = b"tests/test_parser.py::test_parse_tokens - PASS";
    assert!(old.windows(stored.len()).any(|w| w == stored));
    let ws = fixture_workspace();
    std::fs::create_dir_all(ws.path(".evidence-store")).expect("store directory");
    std::fs::copy(&v6, ws.store()).expect("store copied");
    let refused = ws.fails(&["dump", "citations"]);
    assert!(
        refused.contains("schema version 6") && refused.contains("evidence-store import"),
        "{refused}"
    );
    ws.ok(&["import"]);
    let dumped: serde_json::Value =
        serde_json::from_str(&ws.ok(&["dump", "citations", "--json"])).expect("JSON");
    let sessions: Vec<(String, serde_json::Value)> = dumped["projects"][0]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| {
            (
                s["session_ref"].as_str().unwrap_or("").to_owned(),
                s["by_type"].clone(),
            )
        })
        .collect();
    assert_eq!(
        sessions,
        [
            ("S0001".to_owned(), json!({"file": 1, "test": 1})),
            ("S0003".to_owned(), json!({"file": 1})),
        ]
    );
    assert_eq!(dumped["citations"], 3);
    // The page lists each citation's reference in a cell of its own.
    ws.ok(&["view"]);
    let page =
        String::from_utf8(std::fs::read(ws.path(".evidence-store/view.html")).expect("page"))
            .expect("UTF-8 page");
    let cell = |reference: &str| format!("<td class=\"mono\"><bdi>{reference}</bdi></td>");
    assert!(
        page.contains(&cell(
            "pytest tests/test_parser.py::test_parse_tokens - PASS"
        )),
        "no test citation taken under the current rules"
    );
    assert!(
        !page.contains(&cell("tests/test_parser.py::test_parse_tokens - PASS")),
        "the citation taken under the old rules is still there"
    );
}

/// A store schema 7 wrote took no citation from a test marker without `pytest `, even a
/// pytest node id: the session the schema-7 fixture was imported from (its S0001, kept as
/// `store-v7-c1.jsonl`) ends with `**Evidence**: tests/test_parser.py::test_parse_tokens -
/// PASS`, and the store holds only its file citation, with a scan record saying the
/// session's citations are current. The upgrade to 8 drops every citation and scan record,
/// so the next import takes them again from the very same lines: the test citation is
/// there, its reference as written.
#[test]
fn the_schema_7_fixture_is_upgraded_and_its_citations_taken_again() {
    let v7 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v7.redb");
    let ws = fixture_workspace();
    ws.write(
        &format!("projects/{PROJECT}/sessions/claude-code/c1.jsonl"),
        common::fixture_bytes("store-v7-c1.jsonl"),
    );
    std::fs::create_dir_all(ws.path(".evidence-store")).expect("store directory");
    std::fs::copy(&v7, ws.store()).expect("store copied");
    let refused = ws.fails(&["dump", "citations"]);
    assert!(
        refused.contains("schema version 7") && refused.contains("evidence-store import"),
        "{refused}"
    );
    ws.ok(&["import"]);
    let dumped: serde_json::Value =
        serde_json::from_str(&ws.ok(&["dump", "citations", "--json", PROJECT, "S0001"]))
            .expect("JSON");
    assert_eq!(dumped["by_type"], json!({"file": 1, "test": 1}), "{dumped}");
    // The page lists each citation's reference in a cell of its own.
    ws.ok(&["view"]);
    let page =
        String::from_utf8(std::fs::read(ws.path(".evidence-store/view.html")).expect("page"))
            .expect("UTF-8 page");
    for reference in [
        "src/parser.py:41-42",
        "tests/test_parser.py::test_parse_tokens - PASS",
    ] {
        assert!(
            page.contains(&format!("<td class=\"mono\"><bdi>{reference}</bdi></td>")),
            "no citation {reference}"
        );
    }
}
