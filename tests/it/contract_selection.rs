//! The workspace's `metadata.json` `schema_version` chooses the prompt-diary contract: 2 is
//! 0.2.10, 7 is 0.2.20, anything else is refused; the store keeps the contract it imported.

use crate::common;

use common::Workspace;

/// The example workspace with `schema_version` set to the JSON `version`.
fn example_with_schema(version: &str) -> Workspace {
    let ws = Workspace::example();
    let text = String::from_utf8(ws.read("metadata.json")).unwrap();
    ws.write(
        "metadata.json",
        text.replace(
            "\"schema_version\": 2",
            &format!("\"schema_version\": {version}"),
        ),
    );
    ws
}

#[test]
fn a_schema_7_workspace_imports_dumps_and_verifies() {
    let ws = example_with_schema("7");
    ws.ok(&["import"]);
    let dump = ws.ok(&["dump"]);
    assert!(dump.contains(common::PROJECT), "{dump}");
    let stats = ws.ok(&["dump", "--stats"]);
    assert!(
        stats.contains("contract        prompt-diary 0.2.20 (workspace_schema 7)"),
        "{stats}"
    );
    ws.ok(&["verify"]);
}

#[test]
fn unsupported_schema_versions_are_refused_naming_the_served_ones() {
    let mut refusals = String::new();
    for version in ["3", "6", "\"7\"", "null"] {
        let ws = example_with_schema(version);
        refusals.push_str(&ws.redact(&ws.fails(&["import"])));
        assert!(!ws.store().exists(), "nothing stored for {version}");
    }
    insta::assert_snapshot!("unsupported_schema_versions", refusals);
}

/// A workspace a newer prompt-diary prepared is not fixed by preparing it again: the
/// refusal names the release to install, or to upgrade evidence-store.
#[test]
fn a_newer_schema_names_the_release_to_install() {
    let ws = example_with_schema("99");
    let err = ws.redact(&ws.fails(&["import"]));
    insta::assert_snapshot!("a_newer_schema", err);
}

#[test]
fn a_store_keeps_its_contract_until_rebuilt() {
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let text = String::from_utf8(ws.read("metadata.json")).unwrap();
    ws.write(
        "metadata.json",
        text.replace("\"schema_version\": 2", "\"schema_version\": 7"),
    );
    let err = ws.redact(&ws.fails(&["import"]));
    insta::assert_snapshot!("a_store_of_the_other_contract", err);
    // Nothing changed: the workspace as it was still imports without a rebuild.
    ws.write("metadata.json", &text);
    ws.ok(&["import"]);
    ws.write(
        "metadata.json",
        text.replace("\"schema_version\": 2", "\"schema_version\": 7"),
    );
    ws.ok(&["import", "--rebuild"]);
    ws.ok(&["import"]);
    ws.ok(&["verify"]);
}

/// On a schema-7 workspace `write_evidence` takes only the trigger's citations, reads the
/// human text of the turn's first line itself and writes a schema-2 card; the 0.2.10
/// trigger shape is refused field by field.
#[tokio::test]
async fn write_evidence_quotes_the_trigger_line_on_a_schema_7_workspace() {
    use serde_json::json;
    let ws = example_with_schema("7");
    let client = common::connect(&ws).await;
    let chain = |trigger: serde_json::Value| {
        json!({"project_key": common::PROJECT, "session_ref": "S0001", "evidence_chain": {
            "turn_ref": "T0001", "trigger": trigger,
            "agent_reactions": [{"summary": "ran the tests", "citations": [{"lines": "2-6"}]}],
            "outcomes": [{"category": "code_outcome", "summary": "fixed", "citations": [{"lines": "3-6"}]}],
            "observed_checks": [],
            "terminal_state": {"type": "material_result", "summary": "done", "citations": [{"lines": "6-6"}]},
            "materiality": "material"}})
    };
    let old = common::call_ok(
        &client,
        "write_evidence",
        chain(json!({"type": "explicit_user_message", "summary": "s", "citations": [{"lines": "1-1"}]})),
    )
    .await;
    assert_eq!(
        old["errors"],
        json!([
            {"path": "evidence_chain.trigger.summary", "message": "evidence_chain.trigger.summary is not an accepted field",
             "hint": "submit only trigger.citations; write_evidence retrieves the human text"},
            {"path": "evidence_chain.trigger.type", "message": "evidence_chain.trigger.type is not an accepted field",
             "hint": "submit only trigger.citations; write_evidence retrieves the human text"}
        ])
    );
    let wide = common::call_ok(
        &client,
        "write_evidence",
        chain(json!({"citations": [{"lines": "1-2"}]})),
    )
    .await;
    assert_eq!(
        wide["errors"][0]["message"],
        "trigger.citations must contain exactly the indexed human trigger line 1-1"
    );
    let ok = common::call_ok(
        &client,
        "write_evidence",
        chain(json!({"citations": [{"lines": "1-1"}]})),
    )
    .await;
    assert_eq!(ok["status"], "appended", "{ok}");
    let card: serde_json::Value = serde_json::from_slice(
        &ws.read(&format!("projects/{}/evidence/S0001.json", common::PROJECT)),
    )
    .unwrap();
    assert_eq!(card["schema_version"], 2);
    assert_eq!(
        card["evidence_chains"][0]["trigger"],
        json!({"citations": [{"lines": "1-1"}], "quoted_messages": [{"text": "Fix the failing parser test."}]})
    );
    client.cancel().await.unwrap();
}

/// `run` on a schema-7 workspace: imported and exported after the command like any other.
#[test]
fn run_brings_a_schema_7_workspace_in_line() {
    let ws = example_with_schema("7");
    ws.ok(&["import"]);
    let root = ws.root().display().to_string();
    let out = std::process::Command::new(common::BIN)
        .args(["run", "--workspace", &root, "--", "sh", "-c"])
        .arg(format!(
            "echo '{{\"schema_version\": 2}}' > {root}/daily-report.json"
        ))
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::remove_file(ws.path("daily-report.json")).unwrap();
    assert!(ws.ok(&["export"]).starts_with("exported 1 file(s)"));
    assert_eq!(ws.read("daily-report.json"), b"{\"schema_version\": 2}\n");
}

/// The trigger line is read when the chain is written: a session file changed under a
/// running server is refused (nothing written), and a deleted one is named as 0.2.20 names it.
#[tokio::test]
async fn the_trigger_line_must_still_be_the_imported_one() {
    use serde_json::json;
    let ws = example_with_schema("7");
    let client = common::connect(&ws).await;
    let session = format!("projects/{}/sessions/claude-code/c1.jsonl", common::PROJECT);
    let card = format!("projects/{}/evidence/S0001.json", common::PROJECT);
    let args = json!({"project_key": common::PROJECT, "session_ref": "S0001", "evidence_chain": {
        "turn_ref": "T0001", "trigger": {"citations": [{"lines": "1-1"}]},
        "agent_reactions": [{"summary": "ran the tests", "citations": [{"lines": "2-6"}]}],
        "outcomes": [{"category": "code_outcome", "summary": "fixed", "citations": [{"lines": "3-6"}]}],
        "terminal_state": {"type": "material_result", "summary": "done", "citations": [{"lines": "6-6"}]},
        "materiality": "material"}});
    // The server has imported the workspace once it answers a tool.
    common::call_ok(&client, "prompt_diary_ping", json!({})).await;
    let original = ws.read(&session);
    // Same length, other words: only the stored digest can tell.
    let changed = String::from_utf8(original.clone()).unwrap().replacen(
        "Fix the failing parser test.",
        "Fix the passing parser test.",
        1,
    );
    assert_eq!(changed.len(), original.len());
    ws.write(&session, &changed);
    let got = common::call_ok(&client, "write_evidence", args.clone()).await;
    assert_eq!(got["status"], "invalid", "{got}");
    assert!(
        got["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("changed since it was imported"),
        "{got}"
    );
    assert!(!ws.path(&card).exists());
    std::fs::remove_file(ws.path(&session)).unwrap();
    let got = common::call_ok(&client, "write_evidence", args).await;
    assert_eq!(
        got["errors"][0],
        json!({"path": "evidence_chain.trigger.citations",
               "message": "could not read the copied session file: No such file or directory",
               "hint": "restore or re-prepare the copied session, then retry the indexed human trigger"})
    );
    assert!(!ws.path(&card).exists());
    client.cancel().await.unwrap();
}
