//! The workspace's `metadata.json` `schema_version` chooses the prompt-diary contract: 2 is
//! 0.2.10, 7 is 0.2.20, anything else is refused; the store keeps the contract it imported.

mod common;

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
    ws.ok(&["verify"]);
}

#[test]
fn unsupported_schema_versions_are_refused_naming_the_served_ones() {
    for (version, shown) in [("3", "3"), ("6", "6"), ("\"7\"", "\"7\""), ("null", "null")] {
        let ws = example_with_schema(version);
        let err = ws.redact(&ws.fails(&["import"]));
        assert!(
            err.contains(&format!(
                "Unsupported prepared workspace schema at <W>/metadata.json. Run prompt-diary \
                 prepare --force for this report date and timezone to rebuild it. evidence-store \
                 serves workspace schema_version 2 (prompt-diary 0.2.10) and 7 (prompt-diary \
                 0.2.20); this workspace has schema_version {shown}."
            )),
            "{err}"
        );
        assert!(!ws.store().exists(), "nothing stored for {version}");
    }
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
    assert!(
        err.contains(
            "holds a prompt-diary 0.2.10 workspace (schema_version 2), but the workspace is now \
             prompt-diary 0.2.20 (schema_version 7); a store serves one contract: run \
             `evidence-store import --rebuild`"
        ),
        "{err}"
    );
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
