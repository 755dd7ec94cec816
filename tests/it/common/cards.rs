//! Evidence chains to write, and the chains that card files and the store hold.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};

/// `write_evidence` arguments of a minor chain: a `user_approval` trigger and a
/// `clarification_only` end, both citing `lines`, in session `session_ref` of the example
/// project.
pub fn minor_chain(session_ref: &str, turn_ref: &str, lines: &str) -> Value {
    json!({"project_key": super::PROJECT, "session_ref": session_ref, "evidence_chain": {
        "turn_ref": turn_ref,
        "trigger": {"type": "user_approval", "summary": "ok", "citations": [{"lines": lines}]},
        "terminal_state": {"type": "clarification_only", "summary": "ok", "citations": [{"lines": lines}]},
        "materiality": "minor"}})
}

/// `write_evidence` arguments of a material chain for session `S{session}`, turn
/// `T{turn}` of `project`: `trigger` as given, then a reaction, an outcome and a
/// `material_result` end, each citing `lines`.
pub fn material_chain(
    project: &str,
    session: usize,
    turn: usize,
    trigger: Value,
    lines: &str,
) -> Value {
    json!({"project_key": project, "session_ref": format!("S{session:04}"), "evidence_chain": {
        "turn_ref": format!("T{turn:04}"),
        "trigger": trigger,
        "agent_reactions": [{"summary": "did it", "citations": [{"lines": lines}]}],
        "outcomes": [{"category": "code_outcome", "summary": "done", "citations": [{"lines": lines}]}],
        "terminal_state": {"type": "material_result", "summary": "done", "citations": [{"lines": lines}]},
        "materiality": "material"}})
}

/// An `explicit_user_message` trigger with `summary`, citing `lines`.
pub fn user_trigger(summary: &str, lines: &str) -> Value {
    json!({"type": "explicit_user_message", "summary": summary, "citations": [{"lines": lines}]})
}

/// The `(session, turn)` chains writer `i` of `writers` writes, of `sessions` sessions of
/// `turns` turns each: interleaved, so that several writers append to the same card at once.
pub fn share_of(i: usize, writers: usize, sessions: usize, turns: usize) -> Vec<(usize, usize)> {
    (1..=sessions)
        .flat_map(|s| (1..=turns).map(move |t| (s, t)))
        .skip(i)
        .step_by(writers)
        .collect()
}

/// The card files and the store each hold exactly the acknowledged chains.
pub fn assert_hold_exactly<T: PartialEq + std::fmt::Debug>(in_files: &T, in_store: &T, acked: &T) {
    assert_eq!(
        in_files, acked,
        "the files hold exactly the acknowledged writes"
    );
    assert_eq!(
        in_store, acked,
        "the store holds exactly the acknowledged writes"
    );
}

/// Every `(session, turn)` in the card files of `project` under `root` (files not ending
/// in `.json` are passed over); every card must be whole JSON and no chain may appear
/// twice.
pub fn chains_in(root: &Path, project: &str) -> BTreeSet<(usize, usize)> {
    let mut found = BTreeSet::new();
    let dir = root.join(format!("projects/{project}/evidence"));
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().into_string().unwrap();
        if !name.ends_with(".json") {
            continue;
        }
        let card: Value =
            serde_json::from_slice(&std::fs::read(entry.path()).unwrap()).expect("whole JSON card");
        let session: usize = name[1..5].parse().unwrap();
        for chain in card["evidence_chains"].as_array().unwrap() {
            let turn: usize = chain["turn_ref"].as_str().unwrap()[1..].parse().unwrap();
            assert!(
                found.insert((session, turn)),
                "duplicate chain S{session:04}/T{turn:04}"
            );
        }
    }
    found
}

/// The `turn_ref` of each chain of the card file `card`, in the card's order.
pub fn turn_refs(card: &[u8]) -> Vec<String> {
    let card: Value = serde_json::from_slice(card).expect("whole JSON card");
    card["evidence_chains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["turn_ref"].as_str().unwrap().to_owned())
        .collect()
}

/// The documents of the store at `store`, as `export` writes them into an empty
/// directory (which the caller keeps while it reads them). The store is copied there as
/// that directory's own: a store serves one workspace, and a `--store` that another
/// workspace imported is refused.
pub fn exported(store: &Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    std::fs::create_dir(copy.path().join(".evidence-store")).unwrap();
    std::fs::copy(store, copy.path().join(".evidence-store/store.redb")).unwrap();
    let out = std::process::Command::new(super::BIN)
        .args(["export", "--workspace"])
        .arg(copy.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    copy
}
