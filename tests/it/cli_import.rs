//! `import` and `dump` through the real binary.

use crate::common;

use common::{PROJECT, Workspace, dump_json};

#[test]
fn imports_the_example_workspace() {
    let ws = Workspace::example();
    let out = ws.ok(&["import"]);
    insta::assert_snapshot!(out, @"imported 1 project(s), 2 session(s): 2 file(s) indexed (0.0 MiB, 16 lines), 0 unchanged, 0 missing; 0 document(s)");

    let tables = dump_json(&ws, &[]);
    assert_eq!(
        tables["store_schema"],
        evidence_store::harness::SCHEMA_VERSION
    );
    assert_eq!(tables["workspace_schema"], 2);
    assert_eq!(tables["projects"], serde_json::json!([PROJECT]));
    assert_eq!(tables["tables"]["sessions"], 2);
    assert_eq!(tables["tables"]["line_blocks"], 2);

    let session = dump_json(&ws, &["session", PROJECT, "S0001"]);
    assert_eq!(session["source"], "claude-code");
    assert_eq!(session["file"]["lines"], 8);
    assert_eq!(session["turns"][1]["turn_ref"], "T0002");

    // Offsets, lengths and hashes of physical lines, as prompt-diary computes them.
    let lines = dump_json(&ws, &["lines", PROJECT, "S0001", "6", "8"]);
    let got: Vec<(u64, u64, &str)> = lines["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .map(|l| {
            (
                l["offset"].as_u64().unwrap(),
                l["raw_bytes"].as_u64().unwrap(),
                l["sha256"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                971,
                250,
                "1ac246f9ea0bc88d5caab527f07289ee4df422e4de3f5c767a1da1b3090a2047"
            ),
            (
                1222,
                69,
                "790a498b33daa4a9b3eeceb833687d0623470547489ff830ebbfcf54bd9733ef"
            ),
            (
                1292,
                61,
                "4833b6e5fe35876c9d523754d64cda3afb4c9000261a6dd8e4631a4621ddd61c"
            ),
        ]
    );

    let turn = dump_json(&ws, &["turn", PROJECT, "S0002", "T0001"]);
    assert_eq!(
        (turn["start_line"].as_i64(), turn["end_line"].as_i64()),
        (Some(2), Some(8))
    );
}

#[test]
fn dump_text_is_readable() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let text = ws.redact(&ws.ok(&["dump", "project", PROJECT]));
    // Modification times differ from run to run.
    let text: String = text
        .lines()
        .filter(|l| !l.contains("mtime_ns"))
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!(text);
}

#[test]
fn reimport_reindexes_only_changed_files() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let mut summaries = vec![ws.ok(&["import"])];

    // Append a line to one session: only that file is streamed again.
    let rel = format!("projects/{PROJECT}/sessions/codex/x1.jsonl");
    let mut bytes = ws.read(&rel);
    bytes.extend_from_slice(
        b"{\"type\":\"event_msg\",\"payload\":{\"type\":\"agent_message\",\"message\":\"more\"}}\n",
    );
    ws.write(&rel, &bytes);
    summaries.push(ws.ok(&["import"]));
    assert_eq!(
        dump_json(&ws, &["session", PROJECT, "S0002"])["file"]["lines"],
        9
    );

    // --rehash reads everything again but keeps tables whose lines did not change.
    summaries.push(ws.ok(&["import", "--rehash"]));
    // Unchanged, one file appended to, everything hashed again.
    insta::assert_snapshot!("reimport_summaries", summaries.concat());
}

#[test]
fn failed_import_leaves_the_store_as_it_was() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let before = dump_json(&ws, &["session", PROJECT, "S0001"]);

    // A new session file and a broken index row in the same import: nothing is applied.
    ws.write(
        &format!("projects/{PROJECT}/sessions/codex/x2.jsonl"),
        "{}\n",
    );
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut text = String::from_utf8(ws.read(&index)).unwrap();
    text.push_str("{\"session_ref\": \"S0003\"}\n");
    ws.write(&index, text);
    let err = ws.redact(&ws.fails(&["import"]));
    insta::assert_snapshot!(err.trim_end(), @"evidence-store: import of <W> failed; the store is unchanged: <W>/projects/Demo-0123456789ab/sessions.index.jsonl:3 missing integer field 'target_start_line'");
    assert_eq!(dump_json(&ws, &["session", PROJECT, "S0001"]), before);
    assert_eq!(dump_json(&ws, &[])["tables"]["sessions"], 2);
}

/// Each row: a change to the example workspace and the exact message import prints.
#[test]
fn validation_rules_name_file_line_and_field() {
    let p = format!("projects/{PROJECT}");
    type Change = Box<dyn Fn(&Workspace)>;
    let cases: Vec<(&str, Change, String)> = vec![
        (
            "metadata.json missing",
            Box::new(|ws| std::fs::remove_file(ws.path("metadata.json")).unwrap()),
            "required JSON file is missing: <W>/metadata.json; this is not a prepared workspace; name one with `--workspace DIR` or `PROMPT_DIARY_WORKSPACE=DIR`, or make one with `prompt-diary prepare`".into(),
        ),
        (
            "metadata.json not JSON",
            Box::new(|ws| ws.write("metadata.json", "{bad")),
            "<W>/metadata.json contains invalid JSON: Expecting property name enclosed in double quotes".into(),
        ),
        (
            "metadata.json not an object",
            Box::new(|ws| ws.write("metadata.json", "[]")),
            "<W>/metadata.json must contain a JSON object".into(),
        ),
        (
            "status not a string",
            Box::new(|ws| ws.write("metadata.json", r#"{"report_date": "d", "status": 1, "timezone": "UTC"}"#)),
            "<W>/metadata.json missing string field 'status'".into(),
        ),
        (
            "project key mismatch",
            Box::new(|ws| ws.write(&format!("projects/{PROJECT}/project.json"), r#"{"project_key": "Other", "project_label": "P"}"#)),
            format!("<W>/{p}/project.json project_key 'Other' must match directory '{PROJECT}'"),
        ),
        (
            "stray project directory",
            Box::new(|ws| std::fs::create_dir_all(ws.path("projects/A-dir")).unwrap()),
            "required JSON file is missing: <W>/projects/A-dir/project.json".into(),
        ),
        (
            "index line not JSON",
            Box::new(|ws| ws.write(&format!("projects/{PROJECT}/sessions.index.jsonl"), "\n\n{bad\n")),
            format!("<W>/{p}/sessions.index.jsonl:3 contains invalid JSON: Expecting property name enclosed in double quotes"),
        ),
        (
            "duplicate session_ref",
            Box::new(|ws| {
                let rel = format!("projects/{PROJECT}/sessions.index.jsonl");
                let text = String::from_utf8(ws.read(&rel)).unwrap();
                let first = text.lines().next().unwrap().to_owned();
                ws.write(&rel, format!("{text}{first}\n"));
            }),
            format!("<W>/{p}/sessions.index.jsonl:3 duplicate session_ref 'S0001'"),
        ),
        (
            "index not UTF-8",
            Box::new(|ws| ws.write(&format!("projects/{PROJECT}/sessions.index.jsonl"), b"\xff\n")),
            format!("<W>/{p}/sessions.index.jsonl is not valid UTF-8: can't decode byte 0xff at offset 0"),
        ),
    ];
    for (what, change, expect) in cases {
        let ws = Workspace::example();
        change(&ws);
        let err = ws.redact(&ws.fails(&["import"]));
        let expect =
            format!("evidence-store: import of <W> failed; the store is unchanged: {expect}\n");
        assert_eq!(err, expect, "{what}");
    }
}

#[test]
fn symlinked_session_paths_must_stay_under_sessions() {
    let ws = Workspace::example();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        outside.path(),
        ws.path(&format!("projects/{PROJECT}/sessions/esc")),
    )
    .unwrap();
    let rel = format!("projects/{PROJECT}/sessions.index.jsonl");
    let text = String::from_utf8(ws.read(&rel))
        .unwrap()
        .replace("sessions/codex/x1.jsonl", "sessions/esc/x1.jsonl");
    ws.write(&rel, text);
    let err = ws.redact(&ws.fails(&["import"]));
    let real_sessions = ws
        .path(&format!("projects/{PROJECT}/sessions"))
        .canonicalize()
        .unwrap();
    let real_root = ws.root().canonicalize().unwrap();
    let shown = real_sessions
        .display()
        .to_string()
        .replace(&real_root.display().to_string(), "<W>");
    assert!(
        err.ends_with(&format!(
            "sessions.index.jsonl:2 session_path must resolve under {shown}\n"
        )),
        "{err}"
    );
}

#[test]
fn missing_session_files_are_recorded_not_fatal() {
    let ws = Workspace::example();
    std::fs::remove_file(ws.path(&format!("projects/{PROJECT}/sessions/codex/x1.jsonl"))).unwrap();
    insta::assert_snapshot!("import_with_a_missing_session", ws.ok(&["import"]));
    assert_eq!(
        dump_json(&ws, &["session", PROJECT, "S0002"])["file"],
        "missing"
    );
}

#[test]
fn existing_documents_are_imported_so_a_run_resumes() {
    let ws = Workspace::example();
    ws.write(
        &format!("projects/{PROJECT}/evidence/S0001.json"),
        "{\"evidence_chains\": []}\n",
    );
    ws.write("daily-report.json", "{}\n");
    let out = ws.ok(&["import"]);
    assert!(out.ends_with("2 document(s)\n"), "{out}");
    std::fs::remove_file(ws.path("daily-report.json")).unwrap();
    let out = ws.ok(&["import"]);
    assert!(out.ends_with("1 document(s)\n"), "{out}");
    assert_eq!(dump_json(&ws, &[])["tables"]["documents"], 1);
}

#[test]
fn dump_without_a_store_says_what_to_do() {
    let ws = Workspace::example();
    let err = ws.redact(&ws.fails(&["dump"]));
    assert_eq!(
        err,
        "evidence-store: no store at <W>/.evidence-store/store.redb: run `evidence-store import` first\n"
    );
}

#[test]
fn help_is_stable() {
    let ws = Workspace::example();
    insta::assert_snapshot!("help", ws.ok(&["--help"]));
    insta::assert_snapshot!("dump_help", ws.ok(&["dump", "--help"]));
}

/// A store left in the example by the README's own import is not copied into test
/// workspaces (it made these tests see every file as already indexed).
#[test]
fn test_workspaces_copy_only_the_workspace_files() {
    let src = Workspace::empty();
    src.write("metadata.json", "{}");
    src.write(".evidence-store/store.redb", "not a store");
    src.write("projects/P/.evidence-store/x", "nested: also a store dir");
    let dst = Workspace::empty();
    common::copy_workspace(src.root(), dst.root());
    assert!(dst.path("metadata.json").exists());
    assert!(!dst.path(".evidence-store").exists());
    assert!(!dst.path("projects/P/.evidence-store").exists());
    assert!(!Workspace::example().path(".evidence-store").exists());
}
