//! `write_work_item`'s rules and the project-synthesis envelope
//! (`projects/<key>/project-synthesis.json`).
//!
//! Pure: the service gathers the universe of indexed turns, the committed chains and the
//! existing envelope inside its store transaction and hands them here.

use std::collections::HashSet;

use serde::Serialize;

use crate::documents::evidence::outcome_fields;
use crate::documents::problems::{
    Problem, Problems, REF_HINT, STRING_HINT, as_list, as_object, non_empty, objects,
};
use crate::util::pyjson::{self, Map, Value, py_repr};
use crate::workspace::contract::Rules;

pub const WORK_ITEM_KINDS: &[&str] = &[
    "material_work_item",
    "no_material_work_item",
    "evidence_gap_item",
    "excluded_with_reason",
];
pub const TERMINAL_STATES: &[&str] = crate::documents::evidence::TERMINAL_STATES;
pub const CONFIDENCE: &[&str] = &["high", "medium", "low"];
/// A material work item's task-level status against its final effective scope.
pub const DISPOSITIONS: &[&str] = &[
    "completed",
    "in_progress",
    "blocked",
    "interrupted",
    "failed",
    "cancelled",
    "unknown",
];

/// A turn's identity within a project.
pub type TurnKey = (String, String);

/// `write_work_item`'s success result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkItemAppended {
    pub status: &'static str,
    pub project_key: String,
    pub work_item_ref: String,
    pub uncovered_turns: Vec<TurnRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnRef {
    pub session_ref: String,
    pub turn_ref: String,
}

/// A committed chain as the synthesis steps see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedChain {
    pub key: TurnKey,
    /// `trigger.quoted_messages[*].text` strings that are not empty.
    pub messages: Vec<String>,
}

/// The committed chains of one card file's parsed value: non-objects count for nothing.
pub fn card_chains(session_ref: &str, card: &Value) -> Vec<CommittedChain> {
    as_list(as_object(Some(card)).get("evidence_chains"))
        .iter()
        .filter_map(Value::as_object)
        .map(|chain| {
            let turn_ref = chain
                .get("turn_ref")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let quoted = as_list(as_object(chain.get("trigger")).get("quoted_messages"));
            let messages = quoted
                .iter()
                .filter_map(|q| q.as_object()?.get("text")?.as_str())
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect();
            CommittedChain {
                key: (session_ref.to_owned(), turn_ref.to_owned()),
                messages,
            }
        })
        .collect()
}

/// A work item that passed the chain-only parse.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkItem {
    pub work_item_ref: String,
    pub kind: String,
    pub covered: Vec<TurnKey>,
    /// `(path, key)` of every evidence ref, in check order.
    pub evidence_refs: Vec<(String, TurnKey)>,
    /// The item as the envelope stores it.
    pub stored: Value,
}

struct Checker {
    problems: Problems,
}

impl Checker {
    /// A turn reference (rule TR): both parts non-empty strings.
    fn turn_ref(&mut self, path: &str, v: &Value) -> Option<TurnKey> {
        let obj = as_object(Some(v));
        let mut part = |field: &str| {
            let p = format!("{path}.{field}");
            match non_empty(obj.get(field)) {
                Some(s) => Some(s.to_owned()),
                None => {
                    self.problems
                        .push(&p, format!("{p} must be a non-empty string"), REF_HINT);
                    None
                }
            }
        };
        let (s, t) = (part("session_ref"), part("turn_ref"));
        Some((s?, t?))
    }

    fn refs(&mut self, path: &str, obj: &Map, out: &mut Vec<(String, TurnKey)>) -> Value {
        let mut stored = Vec::new();
        for (j, r) in as_list(obj.get("evidence_refs")).iter().enumerate() {
            let p = format!("{path}.evidence_refs[{j}]");
            if let Some(key) = self.turn_ref(&p, r) {
                stored.push(ref_value(&key));
                out.push((p, key));
            }
        }
        Value::Array(stored)
    }
}

fn ref_value((s, t): &TurnKey) -> Value {
    object(vec![
        ("session_ref", Value::String(s.clone())),
        ("turn_ref", Value::String(t.clone())),
    ])
}

fn object(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// `W` and exactly four digits.
fn is_work_item_ref(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 5 && b[0] == b'W' && b[1..].iter().all(u8::is_ascii_digit)
}

/// The chain-only parse of a work item, errors in prompt-diary's order, by the rules of
/// the workspace's contract.
pub fn parse_work_item_for(rules: Rules, item: &Value) -> Result<WorkItem, Vec<Problem>> {
    let w = as_object(Some(item));
    let p = "work_item";
    let mut ck = Checker {
        problems: Problems::new(STRING_HINT),
    };
    let mut refs = Vec::new();

    let kind = ck
        .problems
        .controlled_field(p, w, "kind", "work item kind", WORK_ITEM_KINDS);
    let provided = |key: &str| !matches!(w.get(key), None | Some(Value::Null));

    let trigger = provided("trigger").then(|| {
        let t = as_object(w.get("trigger"));
        let summary = ck
            .problems
            .text(&format!("{p}.trigger.summary"), t.get("summary"));
        let evidence = ck.refs(&format!("{p}.trigger"), t, &mut refs);
        object(vec![("summary", summary), ("evidence_refs", evidence)])
    });
    let reaction = provided("agent_reaction").then(|| {
        let a = as_object(w.get("agent_reaction"));
        let summary = ck
            .problems
            .text(&format!("{p}.agent_reaction.summary"), a.get("summary"));
        let actions = ck.problems.strings(
            &format!("{p}.agent_reaction.main_actions"),
            a.get("main_actions"),
        );
        object(vec![("summary", summary), ("main_actions", actions)])
    });
    let mut outcomes = Vec::new();
    for (base, o) in objects(w.get("outcomes"), &format!("{p}.outcomes")) {
        let (category, summary) = outcome_fields(&mut ck.problems, &base, o);
        let evidence = ck.refs(&base, o, &mut refs);
        let confidence =
            ck.problems
                .controlled_field(&base, o, "confidence", "confidence", CONFIDENCE);
        outcomes.push(object(vec![
            ("category", category),
            ("summary", summary),
            ("evidence_refs", evidence),
            ("confidence", confidence),
        ]));
    }
    let mut states = Vec::new();
    for (base, t) in objects(w.get("terminal_states"), &format!("{p}.terminal_states")) {
        let kind =
            ck.problems
                .controlled_field(&base, t, "type", "terminal_state type", TERMINAL_STATES);
        let summary = ck.problems.text_field(&base, t, "summary");
        let evidence = ck.refs(&base, t, &mut refs);
        states.push(object(vec![
            ("type", kind),
            ("summary", summary),
            ("evidence_refs", evidence),
        ]));
    }

    let kind_text = kind.as_str().unwrap_or_default().to_owned();
    let mut disposition_refs = Vec::new();
    let disposition = if rules.work_item_disposition {
        // Named as given, even when not a controlled kind.
        let kind_given = w.get("kind").and_then(Value::as_str).unwrap_or_default();
        disposition(
            &mut ck,
            kind_given,
            provided("disposition").then(|| as_object(w.get("disposition"))),
            &mut disposition_refs,
        )
    } else {
        None
    };
    match kind_text.as_str() {
        "material_work_item" => {
            let hint = "material_work_item requires trigger and agent_reaction";
            if !provided("trigger") {
                ck.problems.push(
                    format!("{p}.trigger"),
                    "material_work_item requires trigger",
                    hint,
                );
            }
            if !provided("agent_reaction") {
                ck.problems.push(
                    format!("{p}.agent_reaction"),
                    "material_work_item requires agent_reaction",
                    hint,
                );
            }
            if as_list(w.get("outcomes")).is_empty() && as_list(w.get("terminal_states")).is_empty()
            {
                ck.problems.push(
                    format!("{p}.outcomes"),
                    "material_work_item requires at least one outcome or terminal_state",
                    "add a consolidated outcome or a terminal_state describing the result",
                );
            }
        }
        "evidence_gap_item" | "excluded_with_reason" => {
            let hint = "evidence_gap_item and excluded_with_reason carry no trigger, agent_reaction, outcomes, or terminal_states";
            for (field, present) in [
                ("trigger", provided("trigger")),
                ("agent_reaction", provided("agent_reaction")),
                ("outcomes", !as_list(w.get("outcomes")).is_empty()),
                (
                    "terminal_states",
                    !as_list(w.get("terminal_states")).is_empty(),
                ),
            ] {
                if present {
                    ck.problems.push(
                        format!("{p}.{field}"),
                        format!("{kind_text} must leave {field} empty"),
                        hint,
                    );
                }
            }
        }
        _ => {}
    }

    let work_item_ref = match w
        .get("work_item_ref")
        .and_then(Value::as_str)
        .filter(|s| is_work_item_ref(s))
    {
        Some(r) => r.to_owned(),
        None => {
            ck.problems.push(
                format!("{p}.work_item_ref"),
                format!("{p}.work_item_ref must match W0001"),
                "assign refs as W0001, W0002, and so on",
            );
            String::new()
        }
    };
    let title = ck.problems.text_field(p, w, "title");
    let covered_items = as_list(w.get("covered_turns"));
    if covered_items.is_empty() {
        ck.problems.push(
            format!("{p}.covered_turns"),
            format!("{p}.covered_turns must list at least one entry"),
            "every work item must account for at least one indexed turn",
        );
    }
    let mut covered = Vec::new();
    for (i, c) in covered_items.iter().enumerate() {
        if let Some(key) = ck.turn_ref(&format!("{p}.covered_turns[{i}]"), c) {
            covered.push(key);
        }
    }
    let limits = ck.problems.strings(&format!("{p}.limits"), w.get("limits"));
    let reason = match w.get("reason") {
        _ if kind_text == "excluded_with_reason" => Some(ck.problems.text_field(p, w, "reason")),
        Some(Value::String(s)) => Some(Value::String(s.clone())),
        _ => None,
    };
    let confidence = ck
        .problems
        .controlled_field(p, w, "confidence", "confidence", CONFIDENCE);
    ck.problems.finish(())?;

    let mut stored = vec![
        ("work_item_ref", Value::String(work_item_ref.clone())),
        ("kind", kind),
        ("title", title),
        (
            "covered_turns",
            Value::Array(covered.iter().map(ref_value).collect()),
        ),
    ];
    if let Some(trigger) = trigger {
        stored.push(("trigger", trigger));
    }
    if let Some(reaction) = reaction {
        stored.push(("agent_reaction", reaction));
    }
    stored.push(("outcomes", Value::Array(outcomes)));
    stored.push(("terminal_states", Value::Array(states)));
    if let Some(disposition) = disposition {
        stored.push(("disposition", disposition));
    }
    stored.push(("limits", limits));
    if let Some(reason) = reason {
        stored.push(("reason", reason));
    }
    stored.push(("confidence", confidence));
    Ok(WorkItem {
        work_item_ref,
        kind: kind_text,
        covered,
        // The disposition's refs are checked first.
        evidence_refs: disposition_refs.into_iter().chain(refs).collect(),
        stored: object(stored),
    })
}

/// A work item's `disposition`: required of a material item, refused on every other kind
/// (its fields are still checked); `None` when not given.
fn disposition(
    ck: &mut Checker,
    kind: &str,
    given: Option<&Map>,
    refs: &mut Vec<(String, TurnKey)>,
) -> Option<Value> {
    let path = "work_item.disposition";
    let material = kind == "material_work_item";
    let Some(d) = given else {
        if material {
            ck.problems.push(
                path,
                "material_work_item requires disposition",
                "judge the task across its covered turns against the final effective scope",
            );
        }
        return None;
    };
    if !material {
        ck.problems.push(
            path,
            format!("{kind} must leave disposition empty"),
            "only material_work_item carries a task-level disposition",
        );
    }
    let kind = ck
        .problems
        .controlled_field(path, d, "type", "work item disposition", DISPOSITIONS);
    let scope = ck.problems.text_field(path, d, "scope");
    let summary = ck.problems.text_field(path, d, "summary");
    if as_list(d.get("evidence_refs")).is_empty() {
        let refs_path = format!("{path}.evidence_refs");
        ck.problems.push(
            &refs_path,
            format!("{refs_path} must list at least one entry"),
            "cite at least one covered turn supporting the task-level judgment",
        );
    }
    let evidence = ck.refs(path, d, refs);
    Some(object(vec![
        ("type", kind),
        ("scope", scope),
        ("summary", summary),
        ("evidence_refs", evidence),
    ]))
}

/// Whether an existing envelope is one this contract appends to: its `schema_version` equals
/// the contract's as Python compares (`2.0 == 2`). Any other envelope counts as absent and
/// the next write replaces it.
pub fn envelope_is_current(rules: Rules, envelope: &Map) -> bool {
    !rules.replaces_other_envelopes
        || py_int_equals(envelope.get("schema_version"), rules.envelope_schema)
}

/// Python's `value == n` for a JSON value and an integer.
pub fn py_int_equals(value: Option<&Value>, n: i64) -> bool {
    match value {
        Some(Value::Int(text)) => text.parse::<i64>() == Ok(n),
        Some(Value::Float(f)) => *f == n as f64,
        Some(Value::Bool(b)) => i64::from(*b) == n,
        _ => false,
    }
}

/// The object rows of an envelope's `work_items`.
pub fn rows(envelope: Option<&Map>) -> Vec<&Map> {
    envelope.map_or_else(Vec::new, |e| {
        as_list(e.get("work_items"))
            .iter()
            .filter_map(Value::as_object)
            .collect()
    })
}

/// Every covered key of `rows` (non-string parts read as "").
fn covered_keys(rows: &[&Map]) -> HashSet<TurnKey> {
    rows.iter()
        .flat_map(|row| as_list(row.get("covered_turns")))
        .map(|c| {
            let c = as_object(Some(c));
            let part = |k: &str| {
                c.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            (part("session_ref"), part("turn_ref"))
        })
        .collect()
}

/// The workspace checks, in prompt-diary's order: a `work_item_ref` new to the envelope;
/// covered turns that are indexed, covered once, and have a committed chain unless the
/// item is an `evidence_gap_item` (which may cover only turns without one); evidence refs
/// among the covered turns, each with a committed chain.
pub fn check_work_item(
    item: &WorkItem,
    universe: &[TurnKey],
    committed: &HashSet<TurnKey>,
    rows: &[&Map],
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let p = "work_item";
    let in_universe: HashSet<&TurnKey> = universe.iter().collect();
    if rows.iter().any(|r| {
        r.get("work_item_ref").and_then(Value::as_str) == Some(item.work_item_ref.as_str())
    }) {
        problems.push(Problem::new(
            format!("{p}.work_item_ref"),
            format!(
                "work_item_ref {} is already used in the envelope",
                py_repr(&item.work_item_ref)
            ),
            "each work_item_ref must be unique within the envelope",
        ));
    }
    let already = covered_keys(rows);
    let mut mine: HashSet<TurnKey> = HashSet::new();
    for (i, key) in item.covered.iter().enumerate() {
        let path = format!("{p}.covered_turns[{i}]");
        let shown = format!("{}/{}", key.0, key.1);
        if !in_universe.contains(key) {
            problems.push(Problem::new(
                &path,
                format!("covered turn {shown} is not an indexed turn"),
                "cover only turns listed in sessions.index.jsonl",
            ));
            continue;
        }
        if already.contains(key) || mine.contains(key) {
            problems.push(Problem::new(
                &path,
                format!("turn {shown} is already covered by another work item"),
                "every indexed turn belongs to exactly one work item",
            ));
        }
        let has_chain = committed.contains(key);
        if item.kind == "evidence_gap_item" && has_chain {
            problems.push(Problem::new(
                &path,
                format!(
                    "evidence_gap_item cannot cover {shown}, which has a committed evidence chain"
                ),
                "an evidence_gap_item covers only turns with no committed chain",
            ));
        } else if item.kind != "evidence_gap_item" && !has_chain {
            problems.push(Problem::new(
                &path,
                format!("{shown} has no committed evidence chain; only an evidence_gap_item may cover it"),
                "cover turns without a chain using an evidence_gap_item",
            ));
        }
        mine.insert(key.clone());
    }
    for (path, key) in &item.evidence_refs {
        let shown = format!("{}/{}", key.0, key.1);
        if !mine.contains(key) {
            problems.push(Problem::new(
                path,
                format!("evidence ref {shown} must be one of this work item's covered_turns"),
                "cite only turns in this item's covered_turns",
            ));
        } else if !committed.contains(key) {
            problems.push(Problem::new(
                path,
                format!("evidence ref {shown} has no committed evidence chain and cannot be cited"),
                "a turn with no chain cannot be cited",
            ));
        }
    }
    problems
}

/// `source_user_messages`: chains sorted by key (stable), those with messages.
pub fn source_user_messages(chains: &[CommittedChain]) -> Value {
    let mut sorted: Vec<&CommittedChain> = chains.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    Value::Array(
        sorted
            .into_iter()
            .filter(|c| !c.messages.is_empty())
            .map(|c| {
                object(vec![
                    ("session_ref", Value::String(c.key.0.clone())),
                    ("turn_ref", Value::String(c.key.1.clone())),
                    (
                        "messages",
                        Value::Array(c.messages.iter().cloned().map(Value::String).collect()),
                    ),
                ])
            })
            .collect(),
    )
}

/// The envelope after appending `item`: an existing object keeps its keys and rows
/// (non-object rows are dropped); a new one is the base envelope.
pub fn append_item(
    rules: Rules,
    existing: Option<Map>,
    project_key: &str,
    label: &str,
    chains: &[CommittedChain],
    item: &WorkItem,
) -> Map {
    let mut envelope = existing.unwrap_or_else(|| {
        let mut m = Map::new();
        m.insert(
            "schema_version".into(),
            Value::Int(rules.envelope_schema.to_string()),
        );
        m.insert("project_key".into(), Value::String(project_key.into()));
        m.insert("project_label".into(), Value::String(label.into()));
        m.insert("work_items".into(), Value::Array(Vec::new()));
        m.insert("source_user_messages".into(), source_user_messages(chains));
        m
    });
    let mut rows: Vec<Value> = as_list(envelope.get("work_items"))
        .iter()
        .filter(|r| r.as_object().is_some())
        .cloned()
        .collect();
    rows.push(item.stored.clone());
    envelope.insert("work_items".into(), Value::Array(rows));
    envelope
}

/// File bytes of an envelope (indent 2, trailing newline).
pub fn envelope_bytes(envelope: &Map) -> Vec<u8> {
    let mut text = pyjson::to_pretty(&Value::Object(envelope.clone()));
    text.push('\n');
    text.into_bytes()
}

/// Turns of the universe not covered by any row of `envelope`, in universe order.
pub fn uncovered(universe: &[TurnKey], envelope: &Map) -> Vec<TurnRef> {
    let covered = covered_keys(&rows(Some(envelope)));
    universe
        .iter()
        .filter(|k| !covered.contains(*k))
        .map(|(s, t)| TurnRef {
            session_ref: s.clone(),
            turn_ref: t.clone(),
        })
        .collect()
}

#[cfg(test)]
mod contract_tests {
    use super::*;
    use crate::workspace::contract::Contract;

    /// `(name, work item JSON, expected)` where expected is `{"errors": [[path, message,
    /// hint], ...]}` or `{"stored": <the item as the envelope writes it>}`, as prompt-diary
    /// 0.2.20's own parse gives them.
    const CASES: &str = include_str!("../../tests/fixtures/contract/work_items_0_2_20.json");

    fn check(rules: Rules, input: &str, expect: &Value) {
        let item = pyjson::parse(input).expect("case JSON");
        match (parse_work_item_for(rules, &item), expect.get("errors")) {
            (Err(problems), Some(Value::Array(errors))) => {
                let got: Vec<Value> = problems
                    .iter()
                    .map(|p| {
                        Value::Array(vec![
                            Value::String(p.path.clone()),
                            Value::String(p.message.clone()),
                            Value::String(p.hint.clone()),
                        ])
                    })
                    .collect();
                assert_eq!(&got, errors, "{input}");
            }
            (Ok(item), None) => {
                let stored = expect.get("stored").and_then(Value::as_str);
                assert_eq!(
                    Some(pyjson::to_pretty(&item.stored).as_str()),
                    stored,
                    "{input}"
                );
            }
            (got, _) => panic!("{input}: got {got:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn work_item_dispositions_as_0_2_20_parses_them() {
        let Ok(Value::Array(cases)) = pyjson::parse(CASES) else {
            panic!("fixture")
        };
        assert!(cases.len() >= 10);
        for case in &cases {
            let [
                Value::String(_),
                Value::String(input),
                Value::String(expect),
            ] = case.as_array().unwrap_or_default()
            else {
                panic!("case shape")
            };
            let expect = pyjson::parse(expect.as_str()).expect("expected JSON");
            check(Contract::V0_2_20.rules(), input.as_str(), &expect);
        }
    }

    /// The chain-only parse of a 0.2.10 work item.
    fn parse_work_item(item: &Value) -> Result<WorkItem, Vec<Problem>> {
        parse_work_item_for(Contract::V0_2_10.rules(), item)
    }

    #[test]
    fn a_0_2_10_work_item_ignores_a_disposition() {
        let item = r#"{"work_item_ref": "W0001", "kind": "no_material_work_item", "title": "T", "covered_turns": [{"session_ref": "S", "turn_ref": "T0001"}], "confidence": "high", "disposition": 5}"#;
        let parsed = parse_work_item(&pyjson::parse(item).unwrap()).unwrap();
        assert!(parsed.stored.get("disposition").is_none());
    }

    #[test]
    fn disposition_refs_are_checked_first() {
        let item = r#"{"work_item_ref": "W0001", "kind": "material_work_item", "title": "T", "covered_turns": [{"session_ref": "S", "turn_ref": "T0001"}], "trigger": {"summary": "s", "evidence_refs": [{"session_ref": "S", "turn_ref": "T0009"}]}, "agent_reaction": {"summary": "a"}, "terminal_states": [{"type": "material_result", "summary": "x"}], "confidence": "high", "disposition": {"type": "completed", "scope": "s", "summary": "s", "evidence_refs": [{"session_ref": "S", "turn_ref": "T0008"}]}}"#;
        let parsed =
            parse_work_item_for(Contract::V0_2_20.rules(), &pyjson::parse(item).unwrap()).unwrap();
        let paths: Vec<&str> = parsed
            .evidence_refs
            .iter()
            .map(|(p, _)| p.as_str())
            .collect();
        assert_eq!(
            paths,
            [
                "work_item.disposition.evidence_refs[0]",
                "work_item.trigger.evidence_refs[0]"
            ]
        );
    }

    #[test]
    fn envelopes_of_another_version_are_replaced_under_0_2_20() {
        let env = |v: &str| match pyjson::parse(&format!(r#"{{"schema_version": {v}}}"#)) {
            Ok(Value::Object(m)) => m,
            _ => unreachable!(),
        };
        let new = Contract::V0_2_20.rules();
        assert!(envelope_is_current(new, &env("2")));
        assert!(envelope_is_current(new, &env("2.0")));
        assert!(!envelope_is_current(new, &env("1")));
        assert!(!envelope_is_current(new, &env("\"2\"")));
        assert!(envelope_is_current(Contract::V0_2_10.rules(), &env("1")));
    }
}
