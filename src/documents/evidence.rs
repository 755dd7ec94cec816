//! `write_evidence`'s rules: the chain-only parse, the turn checks, and the card it writes.
//!
//! Pure: everything here takes values and returns values. The service runs these inside
//! one store write transaction.

use serde::Serialize;

use crate::documents::problems::{Problem, Problems, as_list, as_object, objects};
use crate::util::pyjson::{self, Map, Value, py_repr};
use crate::workspace::Span;
use crate::workspace::contract::Rules;

/// The result of a write tool: written, or why not.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum WriteResult<T> {
    Done(T),
    Invalid {
        status: &'static str,
        errors: Vec<Problem>,
    },
}

impl<T> WriteResult<T> {
    pub fn invalid(errors: Vec<Problem>) -> Self {
        WriteResult::Invalid {
            status: "invalid",
            errors,
        }
    }

    pub fn one(path: &str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::invalid(vec![Problem::new(path, message, hint)])
    }
}

impl<T> From<crate::workspace::Unknown> for WriteResult<T> {
    fn from(unknown: crate::workspace::Unknown) -> Self {
        Self::one(unknown.field, unknown.message, unknown.hint)
    }
}

/// `write_evidence`'s success result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Appended {
    pub status: &'static str,
    pub project_key: String,
    pub session_ref: String,
    pub turn_ref: String,
}

pub const TRIGGER_TYPES: &[&str] = &[
    "explicit_user_message",
    "implicit_context",
    "user_correction",
    "user_approval",
    "resume_or_continue",
];
pub const OUTCOME_CATEGORIES: &[&str] = &[
    "code_outcome",
    "document_outcome",
    "decision_outcome",
    "validation_outcome",
    "process_outcome",
    "research_outcome",
    "blocker_outcome",
    "other",
];
pub const CHECK_TYPES: &[&str] = &[
    "command_output",
    "test_output",
    "artifact_inspection",
    "user_feedback",
    "other",
];
pub const TERMINAL_STATES: &[&str] = &[
    "material_result",
    "no_material",
    "blocked",
    "interrupted",
    "failed",
    "clarification_only",
    "evidence_gap",
    "other",
];
pub const MATERIALITY: &[&str] = &["material", "minor", "none"];

const SUMMARY_HINT: &str = "provide a concise non-empty summary";
const SPAN_HINT: &str = "write the span as \"start-end\" with start <= end";

/// A citation span `start-end`, as parsed and normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lines {
    pub start: u64,
    pub end: u64,
}

impl Lines {
    /// `"<start>-<end>"`: split at the first `-`, both parts decimal digits of any script
    /// (Unicode category Nd, as Python's `int` reads them: `０７-１２` is `7-12`), start <=
    /// end. Leading zeros are dropped; numbers beyond `u64` saturate (always outside a
    /// turn). Other numeric characters (`²`, `①`) are no span.
    pub fn parse(v: Option<&Value>) -> Option<Lines> {
        let (a, b) = v?.as_str()?.split_once('-')?;
        let number = |s: &str| -> Option<u64> {
            if s.is_empty() {
                return None;
            }
            s.chars().try_fold(0u64, |n, c| {
                let digit = decimal_digit(c)?;
                Some(n.saturating_mul(10).saturating_add(digit))
            })
        };
        let (start, end) = (number(a)?, number(b)?);
        (start <= end).then_some(Lines { start, end })
    }

    fn text(self) -> String {
        format!("{}-{}", self.start, self.end)
    }
}

/// The first code point of every run of ten decimal digits `0..=9` (Unicode category Nd,
/// version 14.0, the one Python 3.11 reads). Every Nd character belongs to one such run.
const DECIMAL_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
    0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// The value of a decimal digit of any script, as Python's `int` reads it.
fn decimal_digit(c: char) -> Option<u64> {
    let c = u32::from(c);
    let run = DECIMAL_ZEROS
        .partition_point(|&zero| zero <= c)
        .checked_sub(1)?;
    let digit = c - DECIMAL_ZEROS[run];
    (digit < 10).then_some(u64::from(digit))
}

/// Collects problems in the order the rules run.
struct Checker {
    problems: Problems,
}

impl Checker {
    /// `{prefix}.citations[j].lines` for each element of `obj.citations`.
    fn citations(&mut self, prefix: &str, obj: &Map) -> (Value, Vec<Lines>) {
        let mut stored = Vec::new();
        let mut spans = Vec::new();
        for (j, c) in as_list(obj.get("citations")).iter().enumerate() {
            let lines = c.as_object().and_then(|c| Lines::parse(c.get("lines")));
            match lines {
                Some(lines) => {
                    let mut m = Map::new();
                    m.insert("lines".into(), Value::String(lines.text()));
                    stored.push(Value::Object(m));
                    spans.push(lines);
                }
                None => {
                    let path = format!("{prefix}.citations[{j}].lines");
                    self.problems.push(
                        &path,
                        format!("{path} must be a numeric line span"),
                        SPAN_HINT,
                    );
                }
            }
        }
        (Value::Array(stored), spans)
    }
}

/// A chain that passed the chain-only parse: its stored form and its citations by place.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    pub turn_ref: String,
    /// The chain as the card stores it (fixed keys, normalised spans).
    pub stored: Value,
    /// `(path of the citation list, spans)` in the containment-check order.
    pub cited: Vec<(String, Vec<Lines>)>,
    pub trigger: Vec<Lines>,
    pub reactions: Vec<Lines>,
    pub outcomes: Vec<Vec<Lines>>,
}

fn object(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

impl Chain {
    /// Stores the human text the server read from the trigger line as the trigger's
    /// `quoted_messages` (`[{"text": ...}]`, in source order).
    pub fn quote(&mut self, messages: Vec<String>) {
        if let Value::Object(chain) = &mut self.stored
            && let Some(Value::Object(trigger)) = chain.get_mut("trigger")
        {
            let quoted = messages
                .into_iter()
                .map(|text| object(vec![("text", Value::String(text))]))
                .collect();
            trigger.insert("quoted_messages".into(), Value::Array(quoted));
        }
    }
}

/// An outcome's `category` and `summary` at `base`, as the evidence chain and the work item
/// check them (in that order).
pub(crate) fn outcome_fields(problems: &mut Problems, base: &str, o: &Map) -> (Value, Value) {
    let category =
        problems.controlled_field(base, o, "category", "outcome category", OUTCOME_CATEGORIES);
    let summary = problems.text_field(base, o, "summary");
    (category, summary)
}

/// The chain-only parse: every structural error, in prompt-diary's order,
/// by the rules of the workspace's contract. Where the server quotes the trigger, the
/// trigger is only `citations` and is checked first; its `quoted_messages` are filled in
/// later ([`Chain::quote`]).
pub fn parse_chain_for(rules: Rules, chain: &Value) -> Result<Chain, Vec<Problem>> {
    let c = as_object(Some(chain));
    let mut ck = Checker {
        problems: Problems::new(SUMMARY_HINT),
    };
    let p = "evidence_chain";
    let tr = as_object(c.get("trigger"));
    let tr_base = format!("{p}.trigger");
    let citations_only = rules
        .server_quoted_trigger
        .then(|| trigger_citations_only(&mut ck, &tr_base, tr));

    let mut outcomes = Vec::new();
    let mut outcome_spans = Vec::new();
    for (base, o) in objects(c.get("outcomes"), &format!("{p}.outcomes")) {
        let (category, summary) = outcome_fields(&mut ck.problems, &base, o);
        let (citations, spans) = ck.citations(&base, o);
        outcomes.push(object(vec![
            ("category", category),
            ("summary", summary),
            ("citations", citations),
        ]));
        outcome_spans.push(spans);
    }
    let ts = as_object(c.get("terminal_state"));
    let ts_base = format!("{p}.terminal_state");
    let ts_type =
        ck.problems
            .controlled_field(&ts_base, ts, "type", "terminal_state.type", TERMINAL_STATES);
    let ts_summary = ck.problems.text_field(&ts_base, ts, "summary");
    let (ts_citations, ts_spans) = ck.citations(&ts_base, ts);
    if ts.get("type").and_then(Value::as_str) == Some("material_result")
        && as_list(c.get("outcomes")).is_empty()
    {
        ck.problems.push(
            format!("{p}.outcomes"),
            "material_result terminal_state requires at least one material outcome; empty outcomes is allowed only when terminal_state explains a non-success ending",
            "add a material outcome, or use a terminal_state.type that explains the non-success ending",
        );
    }
    let turn_ref = ck.problems.text_field(p, c, "turn_ref");

    let (trigger, tr_spans, quoted_spans) = match citations_only {
        Some((citations, spans)) => (
            object(vec![
                ("citations", citations),
                ("quoted_messages", Value::Array(Vec::new())),
            ]),
            spans,
            Vec::new(),
        ),
        None => {
            let tr_type =
                ck.problems
                    .controlled_field(&tr_base, tr, "type", "trigger.type", TRIGGER_TYPES);
            let tr_summary = ck.problems.text_field(&tr_base, tr, "summary");
            let mut quoted = Vec::new();
            let mut quoted_spans = Vec::new();
            for (base, q) in objects(
                tr.get("quoted_messages"),
                &format!("{tr_base}.quoted_messages"),
            ) {
                let text = ck.problems.text_field(&base, q, "text");
                let (citations, spans) = ck.citations(&base, q);
                quoted.push(object(vec![("text", text), ("citations", citations)]));
                quoted_spans.push((base, spans));
            }
            let (tr_citations, tr_spans) = ck.citations(&tr_base, tr);
            let trigger = object(vec![
                ("type", tr_type),
                ("summary", tr_summary),
                ("quoted_messages", Value::Array(quoted)),
                ("citations", tr_citations),
            ]);
            (trigger, tr_spans, quoted_spans)
        }
    };

    let mut reactions = Vec::new();
    let mut reaction_spans = Vec::new();
    for (base, r) in objects(c.get("agent_reactions"), &format!("{p}.agent_reactions")) {
        let summary = ck.problems.text_field(&base, r, "summary");
        let (citations, spans) = ck.citations(&base, r);
        reactions.push(object(vec![("summary", summary), ("citations", citations)]));
        reaction_spans.push((base, spans));
    }
    let mut checks = Vec::new();
    let mut check_spans = Vec::new();
    for (base, k) in objects(c.get("observed_checks"), &format!("{p}.observed_checks")) {
        let kind = ck
            .problems
            .controlled_field(&base, k, "type", "check type", CHECK_TYPES);
        let summary = ck.problems.text_field(&base, k, "summary");
        let (citations, spans) = ck.citations(&base, k);
        checks.push(object(vec![
            ("type", kind),
            ("summary", summary),
            ("citations", citations),
        ]));
        check_spans.push((base, spans));
    }
    let materiality = ck
        .problems
        .controlled_field(p, c, "materiality", "materiality", MATERIALITY);
    ck.problems.finish(())?;

    let turn_ref_text = turn_ref.as_str().unwrap_or_default().to_owned();
    let stored = object(vec![
        ("turn_ref", turn_ref),
        ("trigger", trigger),
        ("agent_reactions", Value::Array(reactions)),
        ("outcomes", Value::Array(outcomes)),
        ("observed_checks", Value::Array(checks)),
        (
            "terminal_state",
            object(vec![
                ("type", ts_type),
                ("summary", ts_summary),
                ("citations", ts_citations),
            ]),
        ),
        ("materiality", materiality),
    ]);
    // Containment order: trigger, quoted messages, reactions, outcomes, checks, terminal.
    let mut cited = vec![(tr_base, tr_spans.clone())];
    cited.extend(quoted_spans);
    cited.extend(reaction_spans.iter().cloned());
    cited.extend(
        outcome_spans
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("{p}.outcomes[{i}]"), s.clone())),
    );
    cited.extend(check_spans);
    cited.push((ts_base, ts_spans));
    Ok(Chain {
        turn_ref: turn_ref_text,
        stored,
        cited,
        trigger: tr_spans,
        reactions: reaction_spans.into_iter().flat_map(|(_, s)| s).collect(),
        outcomes: outcome_spans,
    })
}

/// A trigger that is only `citations`: every other key is refused (in code-point order),
/// then the citations are parsed.
fn trigger_citations_only(ck: &mut Checker, base: &str, trigger: &Map) -> (Value, Vec<Lines>) {
    let mut extra: Vec<&String> = trigger.keys().filter(|k| *k != "citations").collect();
    extra.sort();
    for key in extra {
        let path = format!("{base}.{key}");
        ck.problems.push(
            &path,
            format!("{path} is not an accepted field"),
            "submit only trigger.citations; write_evidence retrieves the human text",
        );
    }
    ck.citations(base, trigger)
}

/// The turn checks: where the server quotes the trigger, the trigger must
/// cite exactly the turn's first line; then containment, then outcomes that cite only
/// the trigger.
pub fn check_turn_for(rules: Rules, chain: &Chain, turn: Span) -> Vec<Problem> {
    let mut problems = Vec::new();
    let first = turn.start.max(0) as u64;
    if rules.server_quoted_trigger
        && chain.trigger
            != [Lines {
                start: first,
                end: first,
            }]
    {
        problems.push(Problem::new(
            "evidence_chain.trigger.citations",
            format!("trigger.citations must contain exactly the indexed human trigger line {first}-{first}"),
            format!(r#"cite only {{"lines": "{first}-{first}"}}; exclude generated context and assistant activity"#),
        ));
    }
    let (ts, te) = (turn.start.max(0) as u64, turn.end.max(0) as u64);
    for (base, spans) in &chain.cited {
        for (j, s) in spans.iter().enumerate() {
            if s.start < ts || s.end > te {
                let path = format!("{base}.citations[{j}].lines");
                problems.push(Problem::new(
                    path,
                    format!(
                        "line span {}-{} is outside turn {} span {}-{}",
                        s.start, s.end, chain.turn_ref, turn.start, turn.end
                    ),
                    // This hint is the user's wording, not prompt-diary's.
                    "cite only lines inside the evidence chain's indexed turn",
                ));
            }
        }
    }
    for (i, outcome) in chain.outcomes.iter().enumerate() {
        let covered = |s: &Lines, by: &[Lines]| covers(by, *s);
        let overlaps =
            |s: &Lines, by: &[Lines]| by.iter().any(|b| b.start <= s.end && s.start <= b.end);
        let only_trigger = !outcome.is_empty()
            && outcome.iter().all(|s| covered(s, &chain.trigger))
            && !outcome.iter().any(|s| overlaps(s, &chain.reactions));
        if only_trigger {
            problems.push(Problem::new(
                format!("evidence_chain.outcomes[{i}].citations[0].lines"),
                "a material outcome cites only trigger evidence",
                "cite agent reaction evidence, not only the trigger lines",
            ));
        }
    }
    problems
}

/// Whether the union of `by` covers every line of `span`.
fn covers(by: &[Lines], span: Lines) -> bool {
    let mut sorted = by.to_vec();
    sorted.sort_by_key(|s| s.start);
    let mut next = span.start; // first line not yet covered
    for s in sorted {
        if s.start > next {
            break;
        }
        if s.end >= next {
            if s.end >= span.end {
                return true;
            }
            next = s.end + 1;
        }
    }
    false
}

/// Why an existing card cannot be appended to (not JSON, not an object, or another
/// project or session): a structured error at `evidence_card`, and nothing is written;
/// never an exception, never a silent replacement.
pub fn card_problem(message: String) -> Problem {
    Problem::new(
        "evidence_card",
        message,
        "repair or delete the evidence card file so that it holds this session's card, then write the chain again",
    )
}

/// The existing card under the contract's rules (see [`existing_card`]). Where the card's
/// schema is checked, a card that is not an object of this contract's `schema_version`,
/// project and session, with an `evidence_chains` list, is refused (unreadable JSON
/// counts as such a card); its chains must still be objects.
pub fn existing_card_for(
    rules: Rules,
    rel: &str,
    bytes: &[u8],
    project_key: &str,
    session_ref: &str,
) -> Result<Map, Problem> {
    if !rules.checks_card_schema {
        return existing_card(rel, bytes, project_key, session_ref);
    }
    let card = match std::str::from_utf8(bytes).ok().map(pyjson::parse) {
        Some(Ok(Value::Object(card))) => card,
        _ => Map::new(),
    };
    let matching = pyjson::int_equals(card.get("schema_version"), rules.card_schema)
        && card.get("project_key").and_then(Value::as_str) == Some(project_key)
        && card.get("session_ref").and_then(Value::as_str) == Some(session_ref)
        && matches!(card.get("evidence_chains"), Some(Value::Array(_)));
    if !matching {
        return Err(Problem::new(
            "evidence_card",
            format!(
                "existing evidence card must use schema_version {} and match the prepared session",
                rules.card_schema
            ),
            "re-prepare and regenerate the workspace instead of appending to an incompatible card",
        ));
    }
    existing_card(rel, bytes, project_key, session_ref)
}

/// The existing card's object and its chains, validated; `rel` names it in messages.
pub fn existing_card(
    rel: &str,
    bytes: &[u8],
    project_key: &str,
    session_ref: &str,
) -> Result<Map, Problem> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| card_problem(format!("evidence card {rel} is not valid UTF-8")))?;
    let value = pyjson::parse(text).map_err(|e| {
        card_problem(format!(
            "evidence card {rel} is not valid JSON: {}",
            e.message()
        ))
    })?;
    let Value::Object(card) = value else {
        return Err(card_problem(format!(
            "evidence card {rel} must contain a JSON object"
        )));
    };
    for (field, expect) in [("project_key", project_key), ("session_ref", session_ref)] {
        if let Some(found) = card.get(field)
            && found.as_str() != Some(expect)
        {
            let shown = found
                .as_str()
                .map_or_else(|| pyjson::to_sorted_compact(found), py_repr);
            return Err(card_problem(format!(
                "evidence card {rel} has {field} {shown}, not {}",
                py_repr(expect)
            )));
        }
    }
    if let Some(chains) = card.get("evidence_chains") {
        let Value::Array(chains) = chains else {
            return Err(card_problem(format!(
                "evidence card {rel} evidence_chains must be a JSON array"
            )));
        };
        if let Some(i) = chains.iter().position(|c| !matches!(c, Value::Object(_))) {
            return Err(card_problem(format!(
                "evidence card {rel} evidence_chains[{i}] must be a JSON object"
            )));
        }
    }
    Ok(card)
}

/// Whether the card already holds a chain for `turn_ref` (W4).
pub fn has_chain(card: &Map, turn_ref: &str) -> bool {
    as_list(card.get("evidence_chains"))
        .iter()
        .any(|c| c.get("turn_ref").and_then(Value::as_str) == Some(turn_ref))
}

/// The card after appending `chain`, as file bytes (indent 2, trailing newline). A new
/// card is `{schema_version, project_key, session_ref, evidence_chains}`; an existing
/// one keeps its keys and order, with `evidence_chains` extended in place.
pub fn append(
    rules: Rules,
    existing: Option<Map>,
    project_key: &str,
    session_ref: &str,
    chain: &Chain,
) -> Vec<u8> {
    let mut card = existing.unwrap_or_else(|| {
        let mut m = Map::new();
        m.insert(
            "schema_version".into(),
            Value::Int(rules.card_schema.to_string()),
        );
        m.insert("project_key".into(), Value::String(project_key.into()));
        m.insert("session_ref".into(), Value::String(session_ref.into()));
        m.insert("evidence_chains".into(), Value::Array(Vec::new()));
        m
    });
    let mut chains = as_list(card.get("evidence_chains")).to_vec();
    chains.push(chain.stored.clone());
    card.insert("evidence_chains".into(), Value::Array(chains));
    let mut text = pyjson::to_pretty(&Value::Object(card));
    text.push('\n');
    text.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spans as prompt-diary 0.2.10 parses them (`tests/fixtures/span_cases.json`, made
    /// with its `_to_span`): decimal digits of every script are numbers. Where the
    /// reference raises `ValueError` (`²`, `①`: digits that are not decimal) the span is
    /// refused as no span, which answers the writer with a structured problem.
    #[test]
    fn spans_read_digits_as_python_int_does() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/span_cases.json"
        );
        let cases: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let cases = cases.as_array().unwrap();
        assert!(cases.len() > 30);
        for case in cases {
            let text = case["lines"].as_str().unwrap();
            let want = case["reference"].as_array().map(|r| Lines {
                start: r[0].as_u64().unwrap(),
                end: r[1].as_u64().unwrap(),
            });
            let got = Lines::parse(Some(&Value::String(text.into())));
            assert_eq!(got, want, "span {text:?}");
        }
    }

    #[test]
    fn every_decimal_run_reads_zero_to_nine() {
        for zero in DECIMAL_ZEROS {
            for d in 0..10 {
                let c = char::from_u32(zero + d).unwrap();
                assert_eq!(decimal_digit(c), Some(u64::from(d)), "{c:?}");
            }
        }
        for c in ['/', ':', '²', '①', 'Ⅶ', '½', '٫', '\u{65F}', '\u{66A}', 'a'] {
            assert_eq!(decimal_digit(c), None, "{c:?}");
        }
    }
}
