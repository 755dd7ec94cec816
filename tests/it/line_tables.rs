//! Line tables against Python's `splitlines`, and import's behaviour when killed.

use crate::common;

use std::process::Command;

use common::{BIN, PROJECT, Workspace};
use serde_json::Value;

/// `(raw_bytes, sha256)` of every line of every indexed session, as `dump` reports them.
fn our_lines(ws: &Workspace, project: &str, session_ref: &str, count: u64) -> Vec<(u64, String)> {
    if count == 0 {
        return Vec::new();
    }
    let out = ws.ok(&[
        "dump",
        "--json",
        "lines",
        project,
        session_ref,
        "1",
        &count.to_string(),
    ]);
    let value: Value = serde_json::from_str(&out).unwrap();
    value["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["raw_bytes"].as_u64().unwrap(),
                l["sha256"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn python3() -> Option<&'static str> {
    Command::new("python3")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| "python3")
}

/// With python3 present: a generated workspace full of edge cases, every line compared
/// with Python's own `bytes.decode("utf-8", "replace").splitlines()`.
#[test]
fn line_tables_agree_with_python_on_generated_edge_cases() {
    let Some(python) = python3() else {
        // Without the oracle, the same property on one fixed example.
        return every_terminator_without_python();
    };
    let ws = Workspace::empty();
    let generator =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/lib/gen_workspace.py");
    for seed in ["1", "7"] {
        let out = Command::new(python)
            .arg(&generator)
            .args([
                "--out",
                ws.root().to_str().unwrap(),
                "--seed",
                seed,
                "--edge-cases",
                "--sessions",
                "4",
            ])
            .args(["--tool-output-max", "4K"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ws.ok(&["import"]);
        let oracle = Command::new(python)
            .arg("-c")
            .arg(
                "import hashlib, json, sys, pathlib\n\
                 out = {}\n\
                 for p in sorted(pathlib.Path(sys.argv[1]).glob('projects/*/sessions/*/*.jsonl')):\n\
                 \x20   lines = p.read_bytes().decode('utf-8', 'replace').splitlines()\n\
                 \x20   out[str(p)] = [[len(l.encode()), hashlib.sha256(l.encode()).hexdigest()] for l in lines]\n\
                 print(json.dumps(out))",
            )
            .arg(ws.root())
            .output()
            .unwrap();
        let oracle: Value = serde_json::from_slice(&oracle.stdout).unwrap();
        let mut compared = 0;
        for project in std::fs::read_dir(ws.path("projects")).unwrap() {
            let project = project.unwrap().file_name().into_string().unwrap();
            let sessions: Value =
                serde_json::from_str(&ws.ok(&["dump", "--json", "project", &project])).unwrap();
            for s in sessions["sessions"].as_array().unwrap() {
                let Some(count) = s["file"]["lines"].as_u64() else {
                    continue;
                };
                let path = ws.path(&format!(
                    "projects/{project}/{}",
                    s["session_path"].as_str().unwrap()
                ));
                let expect: Vec<(u64, String)> = oracle[path.to_str().unwrap()]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| (l[0].as_u64().unwrap(), l[1].as_str().unwrap().to_owned()))
                    .collect();
                let session_ref = s["session_ref"].as_str().unwrap();
                assert_eq!(
                    our_lines(&ws, &project, session_ref, count),
                    expect,
                    "{}",
                    path.display()
                );
                compared += 1;
            }
        }
        assert!(compared >= 6, "compared only {compared} sessions");
    }
}

fn every_terminator_without_python() {
    let ws = Workspace::example();
    let rel = format!("projects/{PROJECT}/sessions/codex/x1.jsonl");
    ws.write(&rel, b"{\"a\":1}\r\n{\"b\":2}\r{\"c\":3}\n\n{\"d\":\"x\xe2\x80\xa8y\"}\n{\"e\":\"\xff\xfe\"}\x0c{\"f\":1}\x1c{\"g\":1}\x0b{\"h\":\"\xc2\x85\"}");
    ws.ok(&["import"]);
    let lens: Vec<u64> = our_lines(&ws, PROJECT, "S0002", 11)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(lens, [7, 7, 7, 0, 7, 3, 14, 7, 7, 6, 2]);
}

/// A `kill -9` of an import whose transaction holds the whole new line table, just
/// before its commit (stopped there by the debug-build pause point, so the kill lands
/// at that step every time), leaves the previous store readable and whole; the next
/// import indexes the change.
#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the pause point exists in debug builds"
)]
fn killed_import_leaves_the_previous_store() {
    use std::io::{BufRead, BufReader};

    let ws = Workspace::example();
    ws.ok(&["import"]);
    let before = ws.ok(&["dump", "--json", "session", PROJECT, "S0002"]);
    let tables_before = ws.ok(&["dump", "--json"]);
    let line = format!(
        "{{\"type\":\"event_msg\",\"payload\":{{\"type\":\"agent_message\",\"message\":\"{}\"}}}}\n",
        "x".repeat(4000)
    );
    ws.write(
        &format!("projects/{PROJECT}/sessions/codex/x1.jsonl"),
        line.repeat(3000),
    );
    let mut child = Command::new(BIN)
        .args(["import", "--workspace"])
        .arg(ws.root())
        .env("EVIDENCE_STORE_PAUSE_AT", "before-commit")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(child.stderr.as_mut().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said, "evidence-store: paused at before-commit\n");
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the import was killed, not finished");

    assert_eq!(
        ws.ok(&["dump", "--json", "session", PROJECT, "S0002"]),
        before
    );
    assert_eq!(ws.ok(&["dump", "--json"]), tables_before);
    let out = ws.ok(&["import"]);
    assert!(out.contains("1 file(s) indexed"), "{out}");
}
