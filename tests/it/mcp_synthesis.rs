//! `write_work_item`, the daily-report Build and the slot writers through the real
//! binary, compared byte for byte with prompt-diary's answers and files.

use crate::common;

use common::{Workspace, call_ok, connect};
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    common::fixture(&format!("synthesis/{name}"))
}

/// A one-project workspace: one session with a committed chain.
fn mini() -> Workspace {
    let ws = Workspace::empty();
    let p = "projects/Demo-0123456789ab";
    ws.write("metadata.json", fixture("metadata.json"));
    ws.write(&format!("{p}/project.json"), fixture("project.json"));
    ws.write(
        &format!("{p}/sessions.index.jsonl"),
        fixture("sessions.index.jsonl"),
    );
    ws.write(
        &format!("{p}/evidence/S0001.json"),
        fixture("card_S0001.json"),
    );
    ws
}

/// Two work items on a one-project workspace; the envelope is byte-exact.
#[tokio::test]
async fn envelope_matches_the_reference_byte_for_byte() {
    let ws = mini();
    let p = "projects/Demo-0123456789ab";
    let client = connect(&ws).await;
    let envelope = format!("{p}/project-synthesis.json");

    let first = call_ok(
        &client,
        "write_work_item",
        serde_json::from_str(&fixture("call1.json")).unwrap(),
    )
    .await;
    assert_eq!(
        first,
        serde_json::from_str::<Value>(&fixture("call1_result.json")).unwrap()
    );
    let bytes = ws.read(&envelope);
    assert_eq!(
        (bytes.len(), common::hex_sha256(&bytes)),
        (
            1548,
            "62b1974ef68a216568c8a1bc7ab95088ce8f48378d51abf99b4537faa96f1eda".to_owned()
        )
    );

    let second = call_ok(
        &client,
        "write_work_item",
        serde_json::from_str(&fixture("call2.json")).unwrap(),
    )
    .await;
    assert_eq!(
        second,
        json!({"status": "appended", "project_key": "Demo-0123456789ab", "work_item_ref": "W0002", "uncovered_turns": []})
    );
    assert_eq!(
        ws.read(&envelope),
        fixture("envelope_after_call2.json").into_bytes()
    );
    client.cancel().await.unwrap();
}

const ALPHA: &str = "Alpha-aaaaaaaaaaaa";

/// Workspace `ws1`: S0001 has turns T0001-T0003, S0002 has T0001; the S0001
/// card holds chains for T0002 then T0001.
fn ws1() -> Workspace {
    let ws = Workspace::empty();
    ws.write(
        "metadata.json",
        r#"{"report_date": "2026-03-04", "status": "final", "timezone": "UTC"}"#,
    );
    let p = format!("projects/{ALPHA}");
    ws.write(
        &format!("{p}/project.json"),
        format!(r#"{{"project_key": "{ALPHA}", "project_label": "Alpha"}}"#),
    );
    let row = |s: &str, turns: &[(&str, i64, i64)]| {
        let turns: Vec<Value> = turns
            .iter()
            .map(|(t, a, b)| json!({"turn_ref": t, "turn_start_line": a, "turn_end_line": b}))
            .collect();
        json!({"session_ref": s, "source": "claude-code", "source_session_id": s, "session_path": format!("sessions/c/{s}.jsonl"),
               "target_start_line": 1, "target_end_line": 99, "turns": turns})
    };
    let index = format!(
        "{}\n{}\n",
        row(
            "S0001",
            &[("T0001", 42, 60), ("T0002", 61, 80), ("T0003", 81, 99)]
        ),
        row("S0002", &[("T0001", 5, 9)])
    );
    ws.write(&format!("{p}/sessions.index.jsonl"), index);
    let chain = |t: &str| json!({"turn_ref": t, "trigger": {"quoted_messages": [{"text": format!("msg {t}")}]}});
    ws.write(
        &format!("{p}/evidence/S0001.json"),
        json!({"evidence_chains": [chain("T0002"), chain("T0001")]}).to_string(),
    );
    ws
}

fn item(v: Value) -> Value {
    json!({"project_key": ALPHA, "work_item": v})
}

/// The `key` (`path`, `message`) of each error of a rejected write, in order.
fn each_error<'a>(got: &'a Value, key: &str) -> Vec<&'a str> {
    got["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[key].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn every_rule_in_the_reference_order() {
    let ws = ws1();
    let client = connect(&ws).await;
    let envelope_rel = format!("projects/{ALPHA}/project-synthesis.json");

    // (a) an empty item: five parse errors.
    let got = call_ok(&client, "write_work_item", item(json!({}))).await;
    let paths = each_error(&got, "path");
    assert_eq!(
        paths,
        [
            "work_item.kind",
            "work_item.work_item_ref",
            "work_item.title",
            "work_item.covered_turns",
            "work_item.confidence"
        ]
    );
    assert_eq!(
        got["errors"][0]["hint"],
        "use a controlled value such as evidence_gap_item, excluded_with_reason, material_work_item, no_material_work_item"
    );
    assert_eq!(
        got["errors"][3]["message"],
        "work_item.covered_turns must list at least one entry"
    );

    // (b) a material item without its parts, and a bad ref.
    let got = call_ok(&client, "write_work_item", item(json!({"kind":"material_work_item","work_item_ref":"W0001\n","title":"t",
        "covered_turns":[{"session_ref":"S0001","turn_ref":"T0001"}],"outcomes":[],"terminal_states":[],"confidence":"low"}))).await;
    let messages = each_error(&got, "message");
    assert_eq!(
        messages,
        [
            "material_work_item requires trigger",
            "material_work_item requires agent_reaction",
            "material_work_item requires at least one outcome or terminal_state",
            "work_item.work_item_ref must match W0001"
        ]
    );

    // (c) a gap item carrying narrative fields.
    let got = call_ok(&client, "write_work_item", item(json!({"kind":"evidence_gap_item","work_item_ref":"W0001","title":"t",
        "covered_turns":[{"session_ref":"S0001","turn_ref":"T0003"}],"trigger":{"summary":"s"},"agent_reaction":{"summary":"s"},
        "outcomes":[{"category":"other","summary":"x","confidence":"low"}],"terminal_states":[{"type":"other","summary":"x"}],"confidence":"low"}))).await;
    let messages = each_error(&got, "message");
    assert_eq!(
        messages,
        [
            "evidence_gap_item must leave trigger empty",
            "evidence_gap_item must leave agent_reaction empty",
            "evidence_gap_item must leave outcomes empty",
            "evidence_gap_item must leave terminal_states empty"
        ]
    );
    assert!(!ws.path(&envelope_rel).exists(), "rejections write nothing");

    // W0001 covers S0001/T0001 and S0001/T0002.
    let w1 = json!({"work_item_ref":"W0001","kind":"material_work_item","title":"Fix",
        "covered_turns":[{"session_ref":"S0001","turn_ref":"T0001"},{"session_ref":"S0001","turn_ref":"T0002"}],
        "trigger":{"summary":"asked","evidence_refs":[{"session_ref":"S0001","turn_ref":"T0001"}]},
        "agent_reaction":{"summary":"did","main_actions":["edit"]},
        "outcomes":[{"category":"code_outcome","summary":"fixed","evidence_refs":[{"session_ref":"S0001","turn_ref":"T0002"}],"confidence":"high"}],
        "confidence":"medium"});
    let got = call_ok(&client, "write_work_item", item(w1)).await;
    assert_eq!(
        got["uncovered_turns"],
        json!([{"session_ref":"S0001","turn_ref":"T0003"},{"session_ref":"S0002","turn_ref":"T0001"}])
    );
    let before = ws.read(&envelope_rel);

    // (d) the workspace checks, all reported together.
    let d = json!({"work_item_ref":"W0001","kind":"no_material_work_item","title":"dup",
        "covered_turns":[{"session_ref":"S0001","turn_ref":"T0001"},{"session_ref":"S0009","turn_ref":"T0001"},
                         {"session_ref":"S0001","turn_ref":"T0003"},{"session_ref":"S0001","turn_ref":"T0003"}],
        "trigger":{"summary":"s","evidence_refs":[{"session_ref":"S0001","turn_ref":"T0003"},{"session_ref":"S0001","turn_ref":"T0002"},{"session_ref":"S0009","turn_ref":"T0001"}]},
        "outcomes":[{"category":"other","summary":"x","confidence":"low","evidence_refs":[{"session_ref":"S0001","turn_ref":"T0001"}]}],
        "terminal_states":[{"type":"no_material","summary":"x","evidence_refs":[{"session_ref":"S0002","turn_ref":"T0001"}]}],
        "confidence":"low"});
    let got = call_ok(&client, "write_work_item", item(d)).await;
    let expect = json!({"status": "invalid", "errors": [
        {"path": "work_item.work_item_ref", "message": "work_item_ref 'W0001' is already used in the envelope", "hint": "each work_item_ref must be unique within the envelope"},
        {"path": "work_item.covered_turns[0]", "message": "turn S0001/T0001 is already covered by another work item", "hint": "every indexed turn belongs to exactly one work item"},
        {"path": "work_item.covered_turns[1]", "message": "covered turn S0009/T0001 is not an indexed turn", "hint": "cover only turns listed in sessions.index.jsonl"},
        {"path": "work_item.covered_turns[2]", "message": "S0001/T0003 has no committed evidence chain; only an evidence_gap_item may cover it", "hint": "cover turns without a chain using an evidence_gap_item"},
        {"path": "work_item.covered_turns[3]", "message": "turn S0001/T0003 is already covered by another work item", "hint": "every indexed turn belongs to exactly one work item"},
        {"path": "work_item.covered_turns[3]", "message": "S0001/T0003 has no committed evidence chain; only an evidence_gap_item may cover it", "hint": "cover turns without a chain using an evidence_gap_item"},
        {"path": "work_item.trigger.evidence_refs[0]", "message": "evidence ref S0001/T0003 has no committed evidence chain and cannot be cited", "hint": "a turn with no chain cannot be cited"},
        {"path": "work_item.trigger.evidence_refs[1]", "message": "evidence ref S0001/T0002 must be one of this work item's covered_turns", "hint": "cite only turns in this item's covered_turns"},
        {"path": "work_item.trigger.evidence_refs[2]", "message": "evidence ref S0009/T0001 must be one of this work item's covered_turns", "hint": "cite only turns in this item's covered_turns"},
        {"path": "work_item.terminal_states[0].evidence_refs[0]", "message": "evidence ref S0002/T0001 must be one of this work item's covered_turns", "hint": "cite only turns in this item's covered_turns"}
    ]});
    assert_eq!(got, expect);
    assert_eq!(
        ws.read(&envelope_rel),
        before,
        "a rejected write leaves the envelope byte-for-byte unchanged"
    );

    // (e) a gap item over a committed, already covered turn: two errors at one path.
    let got = call_ok(
        &client,
        "write_work_item",
        item(
            json!({"work_item_ref":"W0002","kind":"evidence_gap_item","title":"gap",
        "covered_turns":[{"session_ref":"S0001","turn_ref":"T0002"}],"confidence":"low"}),
        ),
    )
    .await;
    let messages = each_error(&got, "message");
    assert_eq!(
        messages,
        [
            "turn S0001/T0002 is already covered by another work item",
            "evidence_gap_item cannot cover S0001/T0002, which has a committed evidence chain"
        ]
    );

    // (f) a gap item over the rest: accepted, stored without the absent keys.
    let got = call_ok(&client, "write_work_item", item(json!({"work_item_ref":"W0002","kind":"evidence_gap_item","title":"No evidence",
        "covered_turns":[{"session_ref":"S0002","turn_ref":"T0001"},{"session_ref":"S0001","turn_ref":"T0003"}],"limits":[],"confidence":"low"}))).await;
    assert_eq!(
        got,
        json!({"status":"appended","project_key":ALPHA,"work_item_ref":"W0002","uncovered_turns":[]})
    );
    let envelope: Value = serde_json::from_slice(&ws.read(&envelope_rel)).unwrap();
    assert_eq!(
        envelope["work_items"][1],
        json!({"work_item_ref":"W0002","kind":"evidence_gap_item","title":"No evidence",
        "covered_turns":[{"session_ref":"S0002","turn_ref":"T0001"},{"session_ref":"S0001","turn_ref":"T0003"}],
        "outcomes":[],"terminal_states":[],"limits":[],"confidence":"low"})
    );
    // source_user_messages come from the chains, sorted by turn, when the envelope is made.
    assert_eq!(
        envelope["source_user_messages"],
        json!([
        {"session_ref":"S0001","turn_ref":"T0001","messages":["msg T0001"]},
        {"session_ref":"S0001","turn_ref":"T0002","messages":["msg T0002"]}])
    );
    client.cancel().await.unwrap();
}

/// An existing envelope keeps its keys and rows; non-object rows are dropped.
#[tokio::test]
async fn an_existing_envelope_is_preserved() {
    let ws = ws1();
    let envelope_rel = format!("projects/{ALPHA}/project-synthesis.json");
    ws.write(&envelope_rel, r#"{"foo":1,"work_items":[5,{"work_item_ref":"W0009","covered_turns":[{"session_ref":"S0001","turn_ref":"T0002"}]}],"zzz":true}"#);
    let client = connect(&ws).await;
    let got = call_ok(&client, "write_work_item", item(json!({"work_item_ref":"W0001","kind":"material_work_item","title":"Fix",
        "covered_turns":[{"session_ref":"S0001","turn_ref":"T0001"}],"trigger":{"summary":"s"},"agent_reaction":{"summary":"a"},
        "terminal_states":[{"type":"material_result","summary":"done"}],"confidence":"high"}))).await;
    assert_eq!(got["status"], "appended");
    assert_eq!(
        got["uncovered_turns"],
        json!([{"session_ref":"S0001","turn_ref":"T0003"},{"session_ref":"S0002","turn_ref":"T0001"}])
    );
    let envelope: Value = serde_json::from_slice(&ws.read(&envelope_rel)).unwrap();
    let keys: Vec<&String> = envelope.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["foo", "work_items", "zzz"]);
    assert_eq!(envelope["work_items"].as_array().unwrap().len(), 2);
    assert_eq!(envelope["work_items"][0]["work_item_ref"], "W0009");
    client.cancel().await.unwrap();
}

/// The `mini` workspace after the two work items of
/// `envelope_matches_the_reference_byte_for_byte`.
fn mini_with_envelope() -> Workspace {
    let ws = mini();
    ws.write(
        "projects/Demo-0123456789ab/project-synthesis.json",
        fixture("envelope_after_call2.json"),
    );
    ws
}

/// Build, the four synthesis writes, and a rebuild, byte for byte.
#[tokio::test]
async fn daily_report_build_and_slots_match_the_reference() {
    let ws = mini_with_envelope();
    ws.ok(&["import"]);
    let out = ws.ok(&["build"]);
    assert_eq!(
        out,
        "built daily-report.json: 1 project(s), 2 work item(s); kept from the previous report: none\n"
    );
    assert_eq!(
        ws.read("daily-report.json"),
        fixture("daily_built.json").into_bytes()
    );

    let client = connect(&ws).await;
    let calls: Value = serde_json::from_str(&fixture("daily_calls.json")).unwrap();
    let tools = [
        "write_project_summary",
        "write_report_title",
        "write_engagement",
        "write_team_learning",
    ];
    for (tool, args) in tools.iter().zip(calls.as_array().unwrap()) {
        let got = call_ok(&client, tool, args.clone()).await;
        let expect = if *tool == "write_project_summary" {
            json!({"status": "written", "project_key": "Demo-0123456789ab"})
        } else {
            json!({"status": "written"})
        };
        assert_eq!(got, expect, "{tool}");
    }
    client.cancel().await.unwrap();
    let patched = ws.read("daily-report.json");
    assert_eq!(
        (patched.len(), common::hex_sha256(&patched)),
        (
            4496,
            "622715ccd1b9e81d42e2ef49c9c364efc7701ca21ae295c356e10b822cf226a6".to_owned()
        )
    );
    // Finalize would only set overall_confidence: prompt-diary's finalized file differs
    // from ours in exactly that line.
    let finalized = fixture("daily_finalized.json").replace(
        "\"overall_confidence\": \"medium\",",
        "\"overall_confidence\": null,",
    );
    assert_eq!(patched, finalized.into_bytes());

    // `export` materialises the report from the store, byte for byte.
    std::fs::remove_file(ws.path("daily-report.json")).unwrap();
    ws.ok(&["export"]);
    assert_eq!(ws.read("daily-report.json"), patched);

    // A rebuild keeps all four slots.
    let out = ws.ok(&["build"]);
    assert!(
        out.ends_with(
            "kept from the previous report: Demo-0123456789ab summary, report_title, engagement_assessment, team_learning\n"
        ),
        "{out}"
    );
    assert_eq!(ws.read("daily-report.json"), patched);
}

/// A daily-report.json that prompt-diary itself finalized, present before the import:
/// the store takes it in, a slot writer patches it as prompt-diary would, and a rebuild
/// keeps every slot (only `overall_confidence` returns to null).
#[tokio::test]
async fn a_report_written_by_prompt_diary_is_imported_and_patched() {
    let ws = mini_with_envelope();
    let finalized = fixture("daily_finalized.json");
    ws.write("daily-report.json", &finalized);
    ws.ok(&["import"]);
    let dumped: Value = serde_json::from_str(&ws.ok(&["dump", "--json"])).unwrap();
    assert_eq!(
        dumped["tables"]["documents"], 3,
        "card, envelope and report stored"
    );

    let client = connect(&ws).await;
    let calls: Value = serde_json::from_str(&fixture("daily_calls.json")).unwrap();
    let got = call_ok(&client, "write_report_title", calls[1].clone()).await;
    assert_eq!(got, json!({"status": "written"}));
    // The same title again: prompt-diary rewrites the file to the same bytes.
    assert_eq!(ws.read("daily-report.json"), finalized.clone().into_bytes());
    let title = json!({"title": {"text": "Nested quotes parse", "citations": calls[1]["title"]["citations"]}});
    assert_eq!(
        call_ok(&client, "write_report_title", title).await,
        json!({"status": "written"})
    );
    client.cancel().await.unwrap();
    assert_eq!(
        ws.read("daily-report.json"),
        finalized
            .replacen("Parser handles nested quotes", "Nested quotes parse", 1)
            .into_bytes()
    );

    ws.ok(&["build"]);
    let rebuilt: Value = serde_json::from_slice(&ws.read("daily-report.json")).unwrap();
    assert_eq!(rebuilt["report_title"]["text"], "Nested quotes parse");
    assert!(rebuilt["overall_confidence"].is_null());
    for slot in ["engagement_assessment", "team_learning"] {
        assert!(!rebuilt[slot].is_null(), "{slot} kept");
    }
    assert!(!rebuilt["projects"][0]["summary"].is_null(), "summary kept");
}

/// Build's hard failures name the project and the item, and leave the previous
/// report as it was.
#[test]
fn build_fails_on_a_broken_envelope_and_keeps_the_report() {
    let envelope = "projects/Demo-0123456789ab/project-synthesis.json";
    let broken_item = fixture("envelope_after_call2.json").replacen(
        "\"kind\": \"material_work_item\"",
        "\"kind\": \"bogus\"",
        1,
    );
    let cases = [
        (
            broken_item.as_str(),
            "project 'Demo-0123456789ab' has a structurally invalid work item (W0001); re-run project synthesis to repair the envelope",
        ),
        (
            "{\"work_items\": [7]}",
            "project 'Demo-0123456789ab' has a structurally invalid work item (index 0); re-run project synthesis to repair the envelope",
        ),
        (
            "{bad",
            "projects/Demo-0123456789ab/project-synthesis.json is not valid JSON: Expecting property name enclosed in double quotes",
        ),
    ];
    for (content, message) in cases {
        let ws = mini_with_envelope();
        ws.ok(&["import"]);
        ws.ok(&["build"]);
        let before = ws.read("daily-report.json");
        ws.write(envelope, content);
        let err = ws.fails(&["build"]);
        assert_eq!(
            err,
            format!("evidence-store: build failed; daily-report.json is unchanged: {message}\n")
        );
        assert_eq!(ws.read("daily-report.json"), before);
    }
}

/// What a rebuild keeps after each kind of change: the completed slots whose inputs did
/// not change.
#[tokio::test]
async fn rebuild_drops_exactly_the_slots_whose_inputs_changed() {
    let ws = mini_with_envelope();
    ws.ok(&["import"]);
    let finished = fixture("daily_finalized.json");
    let slots = |ws: &Workspace| {
        let v: Value = serde_json::from_slice(&ws.read("daily-report.json")).unwrap();
        [
            !v["report_title"].is_null(),
            !v["projects"][0]["summary"].is_null(),
            !v["engagement_assessment"].is_null(),
            !v["team_learning"].is_null(),
        ]
    };
    type Change = Box<dyn Fn(&Workspace)>;
    let cases: Vec<(&str, Change, [bool; 4])> = vec![
        ("none", Box::new(|_| {}), [true, true, true, true]),
        (
            "summary lines tampered",
            Box::new(|ws| {
                let t = String::from_utf8(ws.read("daily-report.json")).unwrap();
                let i = t.find("\"summary\": {").unwrap();
                let j = i + t[i..].find("42-60").unwrap();
                ws.write(
                    "daily-report.json",
                    format!("{}42-59{}", &t[..j], &t[j + 5..]),
                );
            }),
            [false, false, true, true],
        ),
        (
            "window changed",
            Box::new(|ws| {
                let m = String::from_utf8(ws.read("metadata.json"))
                    .unwrap()
                    .replace("2026-03-05T00:00:00+09:00", "2026-03-05T01:00:00+09:00");
                ws.write("metadata.json", m);
            }),
            [false, true, false, false],
        ),
        (
            "generic title",
            Box::new(|ws| {
                // The title comes first in the file; the same words recur in a work item.
                let t = String::from_utf8(ws.read("daily-report.json"))
                    .unwrap()
                    .replacen("Parser handles nested quotes", "Daily Report", 1);
                ws.write("daily-report.json", t);
            }),
            [false, true, true, true],
        ),
        (
            "card lost its chain",
            Box::new(|ws| {
                ws.write(
                    "projects/Demo-0123456789ab/evidence/S0001.json",
                    "{\"evidence_chains\": []}\n",
                );
            }),
            [false, false, false, false],
        ),
        (
            "report unparseable",
            Box::new(|ws| ws.write("daily-report.json", "{bad")),
            [false, false, false, false],
        ),
    ];
    for (what, change, expect) in cases {
        let ws = mini_with_envelope();
        ws.ok(&["import"]);
        ws.write("daily-report.json", &finished);
        change(&ws);
        ws.ok(&["build"]);
        assert_eq!(slots(&ws), expect, "{what}");
        let v: Value = serde_json::from_slice(&ws.read("daily-report.json")).unwrap();
        assert!(
            v["overall_confidence"].is_null(),
            "never preserved ({what})"
        );
    }
}

#[tokio::test]
async fn slot_writers_reject_with_exact_errors_and_change_nothing() {
    let ws = mini_with_envelope();
    let client = connect(&ws).await;
    let title = json!({"title": {"text": "Parser fix", "citations": [{"project_key": "Demo-0123456789ab", "session_ref": "S0001", "turn_ref": "T0001"}]}});
    // No skeleton yet.
    let got = call_ok(&client, "write_report_title", title.clone()).await;
    assert_eq!(
        got,
        json!({"status": "invalid", "errors": [{"path": "daily_report", "message": "daily report skeleton not found",
        "hint": "the build step must run before synthesis passes write the daily report"}]})
    );
    assert!(!ws.path("daily-report.json").exists(), "no file is created");
    ws.ok(&["build"]);
    let before = ws.read("daily-report.json");

    let cases = [
        (
            "write_report_title",
            json!({"title": {"text": "Prompt Diary Report 2026-03-04\nsecond line ", "citations": []}}),
            json!([
                [
                    "title.text",
                    "title.text must be a single-line report title"
                ],
                ["title.text", "title.text must not include the report date"],
                [
                    "title.text",
                    "title.text must name the day's actual work, not a generic report label"
                ],
                [
                    "title.citations",
                    "title.citations must cite at least one turn"
                ]
            ]),
        ),
        (
            "write_report_title",
            json!({"title": {"text": "Parser fix", "citations": [
            {"project_key": "Nope", "session_ref": "S0001", "turn_ref": "T0001"},
            {"project_key": "Demo-0123456789ab", "session_ref": "S0001", "turn_ref": "T0002"}]}}),
            json!([
                [
                    "title.citations[0]",
                    "S0001/T0001 has no committed evidence in project 'Nope'"
                ],
                [
                    "title.citations[1]",
                    "S0001/T0002 has no committed evidence in project 'Demo-0123456789ab'"
                ]
            ]),
        ),
        (
            "write_project_summary",
            json!({"project_key": "Demo-0123456789ab", "summary": {"text": "x", "citations": [
            {"session_ref": "S0001", "turn_ref": "T0001", "project_key": "Other-aaaaaaaaaaaa"},
            {"session_ref": "S0001", "turn_ref": "T0002"},
            {"session_ref": "S0001", "turn_ref": "T0001", "project_key": "  "}]}}),
            json!([
                [
                    "summary.citations[0].project_key",
                    "citation names a different project 'Other-aaaaaaaaaaaa', not 'Demo-0123456789ab'"
                ],
                [
                    "summary.citations[1]",
                    "S0001/T0002 has no committed evidence in this project"
                ]
            ]),
        ),
        (
            "write_project_summary",
            json!({"project_key": "Nope", "summary": {"text": "x", "citations": [{"session_ref": "S0001", "turn_ref": "T0001"}]}}),
            json!([["project_key", "unknown project_key 'Nope'"]]),
        ),
        (
            "write_engagement",
            json!({"overall_reading": {"text": "ok", "citations": [{"project_key": "Demo-0123456789ab", "session_ref": "S0001", "turn_ref": "T0001"}], "confidence": "Medium"},
            "observations": [{"dimension": "steering", "statement": "", "citations": [], "confidence": "high"}, "bogus"], "limits": ["", 3, "ok"]}),
            json!([
                [
                    "overall_reading.confidence",
                    "overall_reading.confidence must be a controlled confidence value"
                ],
                [
                    "observations[0].dimension",
                    "observations[0].dimension must be a controlled engagement dimension value"
                ],
                [
                    "observations[0].statement",
                    "observations[0].statement must be a non-empty string"
                ],
                [
                    "observations[0].citations",
                    "observations[0].citations must cite at least one turn"
                ],
                [
                    "observations[1].dimension",
                    "observations[1].dimension must be a controlled engagement dimension value"
                ],
                [
                    "observations[1].statement",
                    "observations[1].statement must be a non-empty string"
                ],
                [
                    "observations[1].citations",
                    "observations[1].citations must cite at least one turn"
                ],
                [
                    "observations[1].confidence",
                    "observations[1].confidence must be a controlled confidence value"
                ],
                ["limits[0]", "limits[0] must be a non-empty string"],
                ["limits[1]", "limits[1] must be a non-empty string"]
            ]),
        ),
        (
            "write_team_learning",
            json!({"takeaways": {"text": "", "citations": [{"project_key": "", "session_ref": "S0001", "turn_ref": "T0001"}], "confidence": "high"},
            "patterns": [{"kind": "adopt", "statement": "s", "rationale": " ", "recurrence": null, "citations": [{"project_key": "Demo-0123456789ab", "session_ref": "S0001", "turn_ref": "T0001"}], "confidence": "high"},
                         {"kind": "avoid", "statement": "s", "rationale": "r", "recurrence": "x", "citations": [{"project_key": "Demo-0123456789ab", "session_ref": "S0001", "turn_ref": "T0001"}]}],
            "limits": [""]}),
            json!([
                [
                    "takeaways.text",
                    "takeaways.text must be a non-empty string"
                ],
                [
                    "takeaways.citations[0].project_key",
                    "takeaways.citations[0].project_key must be a non-empty string"
                ],
                [
                    "patterns[0].kind",
                    "patterns[0].kind must be a controlled team-learning pattern kind value"
                ],
                [
                    "patterns[0].rationale",
                    "patterns[0].rationale must be a non-empty string"
                ],
                [
                    "patterns[0].recurrence",
                    "patterns[0].recurrence must be a non-empty string"
                ],
                [
                    "patterns[1].confidence",
                    "patterns[1].confidence must be a controlled confidence value"
                ],
                ["limits[0]", "limits[0] must be a non-empty string"]
            ]),
        ),
    ];
    for (tool, args, expect) in cases {
        let got = call_ok(&client, tool, args).await;
        let errors: Vec<Value> = got["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| json!([e["path"], e["message"]]))
            .collect();
        assert_eq!(Value::Array(errors), expect, "{tool}");
        assert_eq!(
            ws.read("daily-report.json"),
            before,
            "{tool} changed the report"
        );
    }
    // A skeleton without a slot key.
    let t = String::from_utf8(before.clone())
        .unwrap()
        .replace("\"report_title\": null,\n", "");
    ws.write("daily-report.json", t);
    let got = call_ok(&client, "write_report_title", title.clone()).await;
    assert_eq!(
        got["errors"][0]["message"],
        "daily report skeleton is missing the 'report_title' slot"
    );
    // Slot keys the engagement and team-learning writers need.
    let calls: Value = serde_json::from_str(&fixture("daily_calls.json")).unwrap();
    for (tool, slot, args) in [
        ("write_engagement", "engagement_assessment", &calls[2]),
        ("write_team_learning", "team_learning", &calls[3]),
    ] {
        let mut skeleton: Value = serde_json::from_slice(&before).unwrap();
        skeleton.as_object_mut().unwrap().remove(slot);
        ws.write("daily-report.json", skeleton.to_string());
        let got = call_ok(&client, tool, args.clone()).await;
        assert_eq!(
            got["errors"],
            json!([{"path": "daily_report",
                "message": format!("daily report skeleton is missing the '{slot}' slot"),
                "hint": "the build step seeds this slot as null before synthesis passes run"}]),
            "{tool}"
        );
    }
    // A workspace project without its skeleton entry; a bad citation is reported first.
    let mut skeleton: Value = serde_json::from_slice(&before).unwrap();
    skeleton["projects"] = json!([]);
    ws.write("daily-report.json", skeleton.to_string());
    let got = call_ok(&client, "write_project_summary", calls[0].clone()).await;
    assert_eq!(
        got["errors"],
        json!([{"path": "project_key",
            "message": "project 'Demo-0123456789ab' is not present in the daily report skeleton",
            "hint": "the build step seeds one projects entry per workspace project"}])
    );
    let mut bad = calls[0].clone();
    bad["summary"]["citations"] = json!([{"session_ref": "S0001", "turn_ref": "T0002"}]);
    let got = call_ok(&client, "write_project_summary", bad).await;
    assert_eq!(
        got["errors"][0]["message"],
        "S0001/T0002 has no committed evidence in this project"
    );
    assert_eq!(got["errors"].as_array().unwrap().len(), 1);

    // Every rejected call is structured: where prompt-diary raises, a structured
    // rejection; the file is kept.
    for (content, expect) in [
        (
            "{bad",
            json!({"path": "daily_report",
                "message": "daily-report.json is not valid JSON: Expecting property name enclosed in double quotes",
                "hint": "repair daily-report.json or run `evidence-store build` again, then retry"}),
        ),
        (
            "[]",
            json!({"path": "daily_report", "message": "daily report skeleton not found",
                "hint": "the build step must run before synthesis passes write the daily report"}),
        ),
    ] {
        ws.write("daily-report.json", content);
        let got = call_ok(&client, "write_report_title", title.clone()).await;
        assert_eq!(
            got,
            json!({"status": "invalid", "errors": [expect]}),
            "{content}"
        );
        assert_eq!(ws.read("daily-report.json"), content.as_bytes());
    }
    client.cancel().await.unwrap();
}
