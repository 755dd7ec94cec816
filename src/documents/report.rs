//! The daily report: the deterministic Build step and the four synthesis slot writers
//! (`write_project_summary`, `write_report_title`, `write_engagement`, `write_team_learning`).
//!
//! Pure: the service loads a [`Context`] (projects, indexed turns, committed chains,
//! envelopes) inside its store transaction; everything here works on values.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::documents::problems::{
    Problem, Problems, REF_HINT, STRING_HINT, as_list, as_object, non_empty, objects,
};
use crate::documents::synthesis::{self, TurnKey};
use crate::util::pyjson::{self, Map, Value, py_repr};
use crate::workspace::contract::Rules;

pub const CONFIDENCE: &[&str] = synthesis::CONFIDENCE;
pub const ENGAGEMENT_DIMENSIONS: &[&str] = &["direction", "review", "correction", "recovery"];
pub const PATTERN_KINDS: &[&str] = &["promote", "avoid", "reuse"];

const CITE_HINT: &str = "every synthesized claim must cite the turns it rests on";
const RESOLVE_HINT: &str = "cite only turns with committed evidence in the named project";
const TITLE_HINT: &str =
    "write a concise, specific title without date, Markdown, or generic report wording";

/// An indexed turn and its line span.
pub type IndexedTurn = (TurnKey, (i64, i64));

/// One project as Build and the slot writers see it.
#[derive(Debug, Clone, Default)]
pub struct ProjectContext {
    pub key: String,
    pub label: String,
    /// Indexed turns in universe order, with their spans.
    pub turns: Vec<IndexedTurn>,
    pub committed: HashSet<TurnKey>,
    /// The parsed `project-synthesis.json`, if there is one.
    pub envelope: Option<Value>,
}

/// Everything Build and the slot writers read.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub report_date: String,
    pub status: String,
    pub timezone: String,
    /// The parsed `metadata.json` (for `report_window_local`).
    pub metadata: Value,
    /// Projects in workspace (directory-name) order.
    pub projects: Vec<ProjectContext>,
}

impl Context {
    fn project(&self, key: &str) -> Option<&ProjectContext> {
        self.projects.iter().find(|p| p.key == key)
    }

    fn span(&self, key: &str, s: &str, t: &str) -> Option<(i64, i64)> {
        let p = self.project(key)?;
        p.turns
            .iter()
            .find(|((ts, tt), _)| ts == s && tt == t)
            .map(|(_, span)| *span)
    }

    /// Index mode: the turn is indexed in the project.
    fn resolve_indexed(&self, key: &str, s: &str, t: &str) -> Option<Value> {
        self.span(key, s, t).map(|span| citation(key, s, t, span))
    }

    /// Committed mode: the turn is indexed and has a committed chain in the project.
    fn resolve_committed(&self, key: &str, s: &str, t: &str) -> Option<Value> {
        let committed = self
            .project(key)?
            .committed
            .contains(&(s.to_owned(), t.to_owned()));
        if committed {
            self.resolve_indexed(key, s, t)
        } else {
            None
        }
    }
}

fn citation(key: &str, s: &str, t: &str, (a, b): (i64, i64)) -> Value {
    object(vec![
        ("project_key", Value::String(key.to_owned())),
        ("session_ref", Value::String(s.to_owned())),
        ("turn_ref", Value::String(t.to_owned())),
        ("lines", Value::String(format!("{a}-{b}"))),
    ])
}

fn object(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

fn s(text: &str) -> Value {
    Value::String(text.to_owned())
}

/// Why Build cannot run: a project's synthesis must be run again first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error(
        "project {} requires project-synthesis schema version {schema}; re-run project synthesis to assess task dispositions",
        py_repr(.project)
    )]
    EnvelopeSchema { project: String, schema: i64 },
    #[error(
        "project {} has a structurally invalid work item ({item}); re-run project synthesis to repair the envelope",
        py_repr(.project)
    )]
    InvalidWorkItem { project: String, item: String },
}

/// The disposition a build derives for a material work item whose contract has no judged
/// one, from its terminal-state types and whether it has outcomes: `failed`, `blocked`,
/// `interrupted` (in that precedence), `completed` with an outcome or a material result,
/// else `clarification`.
pub fn derived_disposition(terminal_types: &[&str], has_outcomes: bool) -> &'static str {
    let has = |t: &str| terminal_types.contains(&t);
    if has("failed") {
        "failed"
    } else if has("blocked") {
        "blocked"
    } else if has("interrupted") {
        "interrupted"
    } else if has_outcomes || has("material_result") {
        "completed"
    } else {
        "clarification"
    }
}

/// The Build step: the daily-report skeleton, with still-valid slots of `previous` kept,
/// by the rules of the workspace's contract. Where work items carry a disposition, each
/// item's `disposition` and `disposition_assessment` are copied from it, an envelope of
/// another schema is refused, and a previous report of another schema keeps nothing.
pub fn build_for(
    rules: Rules,
    ctx: &Context,
    previous: Option<&Value>,
) -> Result<Value, BuildError> {
    let mut projects = Vec::new();
    for p in &ctx.projects {
        projects.push((material_count_and_entry(rules, ctx, p)?, p.label.clone()));
    }
    // Significance: most material items first, then label; stable for ties.
    let mut order: Vec<usize> = (0..projects.len()).collect();
    order.sort_by(|&a, &b| {
        projects[b]
            .0
            .0
            .cmp(&projects[a].0.0)
            .then_with(|| projects[a].1.cmp(&projects[b].1))
    });
    let reportable = projects
        .iter()
        .any(|((_, _, has_reportable), _)| *has_reportable);
    let entries: Vec<Value> = order.iter().map(|&i| projects[i].0.1.clone()).collect();

    let window = as_object(ctx.metadata.get("report_window_local"));
    let title = if reportable {
        Value::Null
    } else {
        object(vec![
            ("text", s("No Supported Work Evidence")),
            ("citations", Value::Array(Vec::new())),
        ])
    };
    let mut report = Map::new();
    report.insert(
        "schema_version".into(),
        Value::Int(rules.report_schema.to_string()),
    );
    report.insert("report_date".into(), s(&ctx.report_date));
    report.insert("status".into(), s(&ctx.status));
    report.insert(
        "window".into(),
        object(vec![
            ("start", window.get("start").cloned().unwrap_or(Value::Null)),
            ("end", window.get("end").cloned().unwrap_or(Value::Null)),
            ("timezone", s(&ctx.timezone)),
        ]),
    );
    report.insert("report_title".into(), title);
    report.insert("overall_confidence".into(), Value::Null);
    report.insert("projects".into(), Value::Array(entries));
    report.insert("engagement_assessment".into(), Value::Null);
    report.insert("team_learning".into(), Value::Null);
    if let Some(Value::Object(prev)) = previous
        && (!rules.work_item_disposition
            || pyjson::int_equals(prev.get("schema_version"), rules.report_schema))
    {
        preserve(ctx, &mut report, prev);
    }
    Ok(Value::Object(report))
}

fn confidence_rank(v: Option<&Value>) -> i32 {
    match v.and_then(Value::as_str) {
        Some("high") => 3,
        Some("medium") => 2,
        Some("low") => 1,
        _ => 0,
    }
}

/// A project's entry, its number of material items, and whether it has reportable work.
fn material_count_and_entry(
    rules: Rules,
    ctx: &Context,
    p: &ProjectContext,
) -> Result<(usize, Value, bool), BuildError> {
    let envelope = match &p.envelope {
        Some(Value::Object(map)) => Some(map),
        _ => None,
    };
    let current = |e: &Map| pyjson::int_equals(e.get("schema_version"), rules.envelope_schema);
    if rules.replaces_other_envelopes && p.envelope.is_some() && !envelope.is_some_and(current) {
        return Err(BuildError::EnvelopeSchema {
            project: p.key.clone(),
            schema: rules.envelope_schema,
        });
    }
    let rows = envelope.map_or(&[][..], |e| as_list(e.get("work_items")));
    let mut items = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let parsed = synthesis::parse_work_item_for(rules, row).map_err(|_| {
            let item = non_empty(as_object(Some(row)).get("work_item_ref"))
                .map_or_else(|| format!("index {i}"), str::to_owned);
            BuildError::InvalidWorkItem {
                project: p.key.clone(),
                item,
            }
        })?;
        items.push(parsed);
    }
    let is_material = |k: &str| k == "material_work_item";
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&items[a], &items[b]);
        let (mx, my) = (is_material(&x.kind), is_material(&y.kind));
        my.cmp(&mx).then_with(|| {
            if mx && my {
                confidence_rank(y.stored.get("confidence"))
                    .cmp(&confidence_rank(x.stored.get("confidence")))
                    .then_with(|| x.work_item_ref.cmp(&y.work_item_ref))
            } else {
                x.work_item_ref.cmp(&y.work_item_ref)
            }
        })
    });
    let views: Vec<Value> = order
        .iter()
        .map(|&i| work_item_view(rules, ctx, &p.key, &items[i]))
        .collect();
    let material = items.iter().filter(|i| is_material(&i.kind)).count();
    let reportable = items
        .iter()
        .any(|i| is_material(&i.kind) || i.kind == "no_material_work_item");
    let messages = envelope.map_or_else(Vec::new, |e| {
        as_list(e.get("source_user_messages"))
            .iter()
            .map(|m| {
                if m.as_object().is_some() {
                    m.clone()
                } else {
                    Value::Object(Map::new())
                }
            })
            .collect()
    });
    let entry = object(vec![
        ("project_key", s(&p.key)),
        ("project_label", s(&p.label)),
        ("summary", Value::Null),
        ("work_items", Value::Array(views)),
        ("source_user_messages", Value::Array(messages)),
    ]);
    Ok((material, entry, reportable))
}

fn work_item_view(
    rules: Rules,
    ctx: &Context,
    project_key: &str,
    item: &synthesis::WorkItem,
) -> Value {
    let w = &item.stored;
    let resolve = |refs: Option<&Value>| {
        Value::Array(
            as_list(refs)
                .iter()
                .filter_map(|r| {
                    let r = r.as_object()?;
                    ctx.resolve_indexed(
                        project_key,
                        r.get("session_ref")?.as_str()?,
                        r.get("turn_ref")?.as_str()?,
                    )
                })
                .collect(),
        )
    };
    let outcomes: Vec<Value> = as_list(w.get("outcomes"))
        .iter()
        .map(|o| {
            object(vec![
                (
                    "what_changed",
                    o.get("summary").cloned().unwrap_or(Value::Null),
                ),
                (
                    "confidence",
                    o.get("confidence").cloned().unwrap_or(Value::Null),
                ),
                ("citations", resolve(o.get("evidence_refs"))),
            ])
        })
        .collect();
    let states: Vec<Value> = as_list(w.get("terminal_states"))
        .iter()
        .map(|t| {
            object(vec![
                ("summary", t.get("summary").cloned().unwrap_or(Value::Null)),
                ("citations", resolve(t.get("evidence_refs"))),
            ])
        })
        .collect();
    let assessed = rules
        .work_item_disposition
        .then(|| match w.get("disposition") {
            Some(d @ Value::Object(_)) => (
                d.get("type").cloned().unwrap_or(Value::Null),
                object(vec![
                    ("scope", d.get("scope").cloned().unwrap_or(Value::Null)),
                    ("summary", d.get("summary").cloned().unwrap_or(Value::Null)),
                    ("citations", resolve(d.get("evidence_refs"))),
                ]),
            ),
            _ => (Value::Null, Value::Null),
        });
    let disposition = if let Some((kind, _)) = &assessed {
        kind.clone()
    } else if item.kind == "material_work_item" {
        let types: Vec<&str> = as_list(w.get("terminal_states"))
            .iter()
            .filter_map(|t| t.get("type")?.as_str())
            .collect();
        s(derived_disposition(&types, !outcomes.is_empty()))
    } else {
        Value::Null
    };
    let summary_of = |key: &str| {
        w.get(key)
            .and_then(|v| v.get("summary"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let mut view = vec![
        ("work_item_ref", s(&item.work_item_ref)),
        ("title", w.get("title").cloned().unwrap_or(Value::Null)),
        ("kind", s(&item.kind)),
        ("disposition", disposition),
    ];
    if let Some((_, assessment)) = assessed {
        view.push(("disposition_assessment", assessment));
    }
    view.extend([
        (
            "confidence",
            w.get("confidence").cloned().unwrap_or(Value::Null),
        ),
        (
            "covered_turns",
            w.get("covered_turns")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
        ),
        ("trigger_summary", summary_of("trigger")),
        ("agent_reaction_summary", summary_of("agent_reaction")),
        ("outcomes", Value::Array(outcomes)),
        ("terminal_states", Value::Array(states)),
        (
            "limits",
            w.get("limits").cloned().unwrap_or(Value::Array(Vec::new())),
        ),
    ]);
    object(view)
}

/// Python `==` on JSON values: key order ignored, and `1 == 1.0 == true`.
fn py_eq(a: &Value, b: &Value) -> bool {
    fn number(v: &Value) -> Option<f64> {
        match v {
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::Int(t) => t.parse().ok(),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => matches!((number(a), number(b)), (Some(x), Some(y)) if x == y),
    }
}

fn without(report: &Map, keys: &[&str]) -> Value {
    Value::Object(
        report
            .iter()
            .filter(|(k, _)| !keys.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

const TITLE_SUBSTRATE_SKIP: [&str; 4] = [
    "report_title",
    "overall_confidence",
    "engagement_assessment",
    "team_learning",
];

fn report_pass_substrate(report: &Map) -> Value {
    let mut v = without(report, &TITLE_SUBSTRATE_SKIP);
    if let Value::Object(m) = &mut v
        && let Some(Value::Array(projects)) = m.get_mut("projects")
    {
        for p in projects.iter_mut() {
            if let Value::Object(p) = p {
                p.insert("summary".into(), Value::Null);
            }
        }
    }
    v
}

/// A stored citation whose four keys are non-empty strings and which resolves, in
/// committed mode and with the same lines, in `project` (or its own project).
fn sound(ctx: &Context, c: &Value, project: Option<&str>) -> bool {
    let c = as_object(Some(c));
    let part = |k: &str| non_empty(c.get(k));
    let (Some(pk), Some(sr), Some(tr), Some(lines)) = (
        part("project_key"),
        part("session_ref"),
        part("turn_ref"),
        part("lines"),
    ) else {
        return false;
    };
    if project.is_some_and(|p| p != pk) {
        return false;
    }
    ctx.resolve_committed(pk, sr, tr)
        .is_some_and(|r| r.get("lines").and_then(Value::as_str) == Some(lines))
}

fn all_sound(ctx: &Context, citations: Option<&Value>, project: Option<&str>) -> bool {
    let list = as_list(citations);
    !list.is_empty() && list.iter().all(|c| sound(ctx, c, project))
}

/// On a rebuild, copy completed slots of the previous report whose inputs did not change.
fn preserve(ctx: &Context, report: &mut Map, prev: &Map) {
    // 1. Project summaries.
    let prev_projects = as_list(prev.get("projects"));
    if let Some(Value::Array(entries)) = report.get_mut("projects") {
        for entry in entries.iter_mut() {
            let Value::Object(entry) = entry else {
                continue;
            };
            let key = entry
                .get("project_key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let Some(old) = prev_projects
                .iter()
                .rev()
                .filter_map(Value::as_object)
                .find(|p| p.get("project_key").and_then(Value::as_str) == Some(&key))
            else {
                continue;
            };
            let Some(summary) = old.get("summary") else {
                continue;
            };
            let same = py_eq(&without(old, &["summary"]), &without(entry, &["summary"]));
            let complete = parse_summary(summary).is_ok()
                && all_sound(ctx, summary.get("citations"), Some(&key));
            if same && complete {
                entry.insert("summary".into(), summary.clone());
            }
        }
    }
    // 2. The title, on the title substrate (which includes the summaries).
    if let Some(title) = prev.get("report_title")
        && py_eq(
            &without(prev, &TITLE_SUBSTRATE_SKIP),
            &without(report, &TITLE_SUBSTRATE_SKIP),
        )
        && parse_title(title).is_ok()
        && all_sound(ctx, title.get("citations"), None)
    {
        report.insert("report_title".into(), title.clone());
    }
    // 3, 4. Engagement and team learning, on the report-pass substrate.
    if !py_eq(&report_pass_substrate(prev), &report_pass_substrate(report)) {
        return;
    }
    if let Some(e) = prev.get("engagement_assessment")
        && parse_engagement(
            e.get("overall_reading"),
            e.get("observations"),
            e.get("limits"),
        )
        .is_ok()
        && all_sound(
            ctx,
            e.get("overall_reading").and_then(|o| o.get("citations")),
            None,
        )
        && as_list(e.get("observations"))
            .iter()
            .all(|o| all_sound(ctx, o.get("citations"), None))
    {
        report.insert("engagement_assessment".into(), e.clone());
    }
    if let Some(t) = prev.get("team_learning")
        && parse_team_learning(t.get("takeaways"), t.get("patterns"), t.get("limits")).is_ok()
        && all_sound(
            ctx,
            t.get("takeaways").and_then(|o| o.get("citations")),
            None,
        )
        && as_list(t.get("patterns"))
            .iter()
            .all(|p| all_sound(ctx, p.get("citations"), None))
    {
        report.insert("team_learning".into(), t.clone());
    }
}

/// Bytes of a report file (indent 2, trailing newline).
pub fn report_bytes(report: &Value) -> Vec<u8> {
    let mut text = pyjson::to_pretty(report);
    text.push('\n');
    text.into_bytes()
}

// ----- The slot parsers (chain-only) ---------------------------------------------------

/// A citation as submitted: `(project_key if given, session_ref, turn_ref, its path)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cite {
    pub project_key: Option<String>,
    pub session_ref: String,
    pub turn_ref: String,
    pub path: String,
}

struct Parser {
    problems: Problems,
    cites: Vec<Cite>,
}

impl Parser {
    fn new() -> Self {
        Parser {
            problems: Problems::new(STRING_HINT),
            cites: Vec::new(),
        }
    }

    /// A citation list; `cross` requires `project_key` (checked after the refs).
    fn citations(&mut self, path: &str, v: Option<&Value>, cross: bool) {
        let list = as_list(v);
        if list.is_empty() {
            self.problems.push(
                path,
                format!("{path} must cite at least one turn"),
                CITE_HINT,
            );
            return;
        }
        for (i, c) in list.iter().enumerate() {
            let c = as_object(Some(c));
            let base = format!("{path}[{i}]");
            let part = |field: &str, me: &mut Self| {
                let p = format!("{base}.{field}");
                match non_empty(c.get(field)) {
                    Some(x) => Some(x.to_owned()),
                    None => {
                        me.problems
                            .push(&p, format!("{p} must be a non-empty string"), REF_HINT);
                        None
                    }
                }
            };
            let sr = part("session_ref", self);
            let tr = part("turn_ref", self);
            let pk = if cross {
                part("project_key", self)
            } else {
                non_empty(c.get("project_key")).map(str::to_owned)
            };
            if let (Some(session_ref), Some(turn_ref)) = (sr, tr) {
                if cross && pk.is_none() {
                    continue;
                }
                self.cites.push(Cite {
                    project_key: pk,
                    session_ref,
                    turn_ref,
                    path: base,
                });
            }
        }
    }

    fn done<T>(self, value: T) -> Result<(T, Vec<Cite>), Vec<Problem>> {
        self.problems.finish((value, self.cites))
    }
}

/// `write_project_summary`'s `summary`: text and per-project citations.
fn parse_summary(summary: &Value) -> Result<(Value, Vec<Cite>), Vec<Problem>> {
    let m = as_object(Some(summary));
    let mut p = Parser::new();
    let text = p.problems.text("summary.text", m.get("text"));
    p.citations("summary.citations", m.get("citations"), false);
    p.done(text)
}

/// Python's `casefold` for the cases titles meet (full Unicode lowercase plus the
/// expansions of ß and the long s, which `to_lowercase` keeps).
fn casefold(text: &str) -> String {
    text.to_lowercase().replace('ß', "ss").replace('ſ', "s")
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The decimal digits (general category Nd) of Unicode 14.0, the table of the Python the
/// reference was checked with (3.11): what Python's `\d` matches in a `str` pattern.
/// Other numerals (`²`, `Ⅻ`, `½`) are not digits.
const DECIMAL_DIGITS: &[(char, char)] = &[
    ('\u{30}', '\u{39}'),
    ('\u{660}', '\u{669}'),
    ('\u{6f0}', '\u{6f9}'),
    ('\u{7c0}', '\u{7c9}'),
    ('\u{966}', '\u{96f}'),
    ('\u{9e6}', '\u{9ef}'),
    ('\u{a66}', '\u{a6f}'),
    ('\u{ae6}', '\u{aef}'),
    ('\u{b66}', '\u{b6f}'),
    ('\u{be6}', '\u{bef}'),
    ('\u{c66}', '\u{c6f}'),
    ('\u{ce6}', '\u{cef}'),
    ('\u{d66}', '\u{d6f}'),
    ('\u{de6}', '\u{def}'),
    ('\u{e50}', '\u{e59}'),
    ('\u{ed0}', '\u{ed9}'),
    ('\u{f20}', '\u{f29}'),
    ('\u{1040}', '\u{1049}'),
    ('\u{1090}', '\u{1099}'),
    ('\u{17e0}', '\u{17e9}'),
    ('\u{1810}', '\u{1819}'),
    ('\u{1946}', '\u{194f}'),
    ('\u{19d0}', '\u{19d9}'),
    ('\u{1a80}', '\u{1a89}'),
    ('\u{1a90}', '\u{1a99}'),
    ('\u{1b50}', '\u{1b59}'),
    ('\u{1bb0}', '\u{1bb9}'),
    ('\u{1c40}', '\u{1c49}'),
    ('\u{1c50}', '\u{1c59}'),
    ('\u{a620}', '\u{a629}'),
    ('\u{a8d0}', '\u{a8d9}'),
    ('\u{a900}', '\u{a909}'),
    ('\u{a9d0}', '\u{a9d9}'),
    ('\u{a9f0}', '\u{a9f9}'),
    ('\u{aa50}', '\u{aa59}'),
    ('\u{abf0}', '\u{abf9}'),
    ('\u{ff10}', '\u{ff19}'),
    ('\u{104a0}', '\u{104a9}'),
    ('\u{10d30}', '\u{10d39}'),
    ('\u{11066}', '\u{1106f}'),
    ('\u{110f0}', '\u{110f9}'),
    ('\u{11136}', '\u{1113f}'),
    ('\u{111d0}', '\u{111d9}'),
    ('\u{112f0}', '\u{112f9}'),
    ('\u{11450}', '\u{11459}'),
    ('\u{114d0}', '\u{114d9}'),
    ('\u{11650}', '\u{11659}'),
    ('\u{116c0}', '\u{116c9}'),
    ('\u{11730}', '\u{11739}'),
    ('\u{118e0}', '\u{118e9}'),
    ('\u{11950}', '\u{11959}'),
    ('\u{11c50}', '\u{11c59}'),
    ('\u{11d50}', '\u{11d59}'),
    ('\u{11da0}', '\u{11da9}'),
    ('\u{16a60}', '\u{16a69}'),
    ('\u{16ac0}', '\u{16ac9}'),
    ('\u{16b50}', '\u{16b59}'),
    ('\u{1d7ce}', '\u{1d7ff}'),
    ('\u{1e140}', '\u{1e149}'),
    ('\u{1e2f0}', '\u{1e2f9}'),
    ('\u{1e950}', '\u{1e959}'),
    ('\u{1fbf0}', '\u{1fbf9}'),
];

fn is_decimal_digit(c: char) -> bool {
    c.is_ascii_digit()
        || (!c.is_ascii()
            && DECIMAL_DIGITS
                .binary_search_by(|&(lo, hi)| {
                    if hi < c {
                        std::cmp::Ordering::Less
                    } else if lo > c {
                        std::cmp::Ordering::Greater
                    } else {
                        std::cmp::Ordering::Equal
                    }
                })
                .is_ok())
}

/// `\b\d{4}-\d{2}-\d{2}\b` with Unicode digits and word boundaries.
fn has_date(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    let digit = is_decimal_digit;
    chars.windows(10).enumerate().any(|(i, w)| {
        let shape = w
            .iter()
            .enumerate()
            .all(|(k, &c)| if k == 4 || k == 7 { c == '-' } else { digit(c) });
        let before = i == 0 || !is_word(chars[i - 1]);
        let after = chars.get(i + 10).is_none_or(|&c| !is_word(c));
        shape && before && after
    })
}

fn title_rules(p: &mut Parser, v: Option<&Value>) -> Value {
    let path = "title.text";
    let Some(text) = non_empty(v) else {
        p.problems.push(
            path,
            format!("{path} must be a non-empty string"),
            STRING_HINT,
        );
        return Value::Null;
    };
    if text.contains(['\n', '\r']) {
        p.problems.push(
            path,
            format!("{path} must be a single-line report title"),
            TITLE_HINT,
        );
    }
    if text.chars().count() > 80 {
        p.problems.push(
            path,
            format!("{path} must be at most 80 characters"),
            TITLE_HINT,
        );
    }
    if has_date(text) {
        p.problems.push(
            path,
            format!("{path} must not include the report date"),
            TITLE_HINT,
        );
    }
    let folded = casefold(text);
    let normalized = folded
        .split(pyjson::is_py_whitespace)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let generic = [
        "prompt diary report",
        "daily report",
        "work report",
        "work log",
        "updates",
    ];
    if generic.contains(&normalized.as_str()) || normalized.contains("prompt diary report") {
        p.problems.push(
            path,
            format!("{path} must name the day's actual work, not a generic report label"),
            TITLE_HINT,
        );
    }
    s(text)
}

/// `write_report_title`'s `title`.
fn parse_title(title: &Value) -> Result<(Value, Vec<Cite>), Vec<Problem>> {
    let m = as_object(Some(title));
    let mut p = Parser::new();
    let text = title_rules(&mut p, m.get("text"));
    p.citations("title.citations", m.get("citations"), true);
    p.done(text)
}

/// A cited text with confidence (`overall_reading`, `takeaways`): text, confidence.
fn cited_text(p: &mut Parser, base: &str, v: Option<&Value>) -> (Value, Value) {
    let m = as_object(v);
    let text = p.problems.text_field(base, m, "text");
    p.citations(&format!("{base}.citations"), m.get("citations"), true);
    let confidence = p
        .problems
        .controlled_field(base, m, "confidence", "confidence", CONFIDENCE);
    (text, confidence)
}

/// The parsed slot, with `citations` placeholders to be filled once resolved.
type Slot = Value;

/// `write_engagement`'s three arguments.
fn parse_engagement(
    overall: Option<&Value>,
    observations: Option<&Value>,
    limits: Option<&Value>,
) -> Result<(Slot, Vec<Cite>), Vec<Problem>> {
    let mut p = Parser::new();
    let (text, confidence) = cited_text(&mut p, "overall_reading", overall);
    let mut obs = Vec::new();
    for (base, o) in objects(observations, "observations") {
        let dimension = p.problems.controlled_field(
            &base,
            o,
            "dimension",
            "engagement dimension",
            ENGAGEMENT_DIMENSIONS,
        );
        let statement = p.problems.text_field(&base, o, "statement");
        p.citations(&format!("{base}.citations"), o.get("citations"), true);
        let conf = p
            .problems
            .controlled_field(&base, o, "confidence", "confidence", CONFIDENCE);
        obs.push(object(vec![
            ("dimension", dimension),
            ("statement", statement),
            ("citations", Value::Null),
            ("confidence", conf),
        ]));
    }
    let limits = p.problems.strings("limits", limits);
    let slot = object(vec![
        (
            "overall_reading",
            object(vec![
                ("text", text),
                ("citations", Value::Null),
                ("confidence", confidence),
            ]),
        ),
        ("observations", Value::Array(obs)),
        ("limits", limits),
    ]);
    p.done(slot)
}

/// `write_team_learning`'s three arguments.
fn parse_team_learning(
    takeaways: Option<&Value>,
    patterns: Option<&Value>,
    limits: Option<&Value>,
) -> Result<(Slot, Vec<Cite>), Vec<Problem>> {
    let mut p = Parser::new();
    let (text, confidence) = cited_text(&mut p, "takeaways", takeaways);
    let mut pats = Vec::new();
    for (base, x) in objects(patterns, "patterns") {
        let kind = p.problems.controlled_field(
            &base,
            x,
            "kind",
            "team-learning pattern kind",
            PATTERN_KINDS,
        );
        let statement = p.problems.text_field(&base, x, "statement");
        let rationale = p.problems.text_field(&base, x, "rationale");
        let recurrence = p.problems.text_field(&base, x, "recurrence");
        p.citations(&format!("{base}.citations"), x.get("citations"), true);
        let conf = p
            .problems
            .controlled_field(&base, x, "confidence", "confidence", CONFIDENCE);
        pats.push(object(vec![
            ("kind", kind),
            ("statement", statement),
            ("rationale", rationale),
            ("recurrence", recurrence),
            ("citations", Value::Null),
            ("confidence", conf),
        ]));
    }
    let limits = p.problems.strings("limits", limits);
    let slot = object(vec![
        (
            "takeaways",
            object(vec![
                ("text", text),
                ("citations", Value::Null),
                ("confidence", confidence),
            ]),
        ),
        ("patterns", Value::Array(pats)),
        ("limits", limits),
    ]);
    p.done(slot)
}

// ----- Resolution and patching -------------------------------------------------------

/// Resolves cross-project citations in committed mode; `None` problems means all resolved.
fn resolve_cross(ctx: &Context, cites: &[Cite]) -> Result<HashMap<String, Value>, Vec<Problem>> {
    let mut resolved = HashMap::new();
    let mut problems = Vec::new();
    for c in cites {
        let pk = c.project_key.as_deref().unwrap_or_default();
        match ctx.resolve_committed(pk, &c.session_ref, &c.turn_ref) {
            Some(v) => {
                resolved.insert(c.path.clone(), v);
            }
            None => problems.push(Problem::new(
                &c.path,
                format!(
                    "{}/{} has no committed evidence in project {}",
                    c.session_ref,
                    c.turn_ref,
                    py_repr(pk)
                ),
                RESOLVE_HINT,
            )),
        }
    }
    if problems.is_empty() {
        Ok(resolved)
    } else {
        Err(problems)
    }
}

/// The resolved citations whose paths start with `list_path[`, in order.
fn cites_at(cites: &[Cite], resolved: &HashMap<String, Value>, list_path: &str) -> Value {
    let prefix = format!("{list_path}[");
    Value::Array(
        cites
            .iter()
            .filter(|c| c.path.starts_with(&prefix) && !c.path[prefix.len()..].contains('.'))
            .filter_map(|c| resolved.get(&c.path).cloned())
            .collect(),
    )
}

/// The report must exist as a JSON object (seeded by Build).
pub fn skeleton_problem() -> Problem {
    Problem::new(
        "daily_report",
        "daily report skeleton not found",
        "the build step must run before synthesis passes write the daily report",
    )
}

fn slot_problem(slot: &str) -> Problem {
    Problem::new(
        "daily_report",
        format!("daily report skeleton is missing the '{slot}' slot"),
        "the build step seeds this slot as null before synthesis passes run",
    )
}

/// `write_project_summary` on `report`: the patched report, or the problems.
pub fn write_summary(
    ctx: &Context,
    report: &Map,
    project_key: &str,
    summary: &Value,
) -> Result<Map, Vec<Problem>> {
    let (text, cites) = parse_summary(summary)?;
    if ctx.project(project_key).is_none() {
        return Err(vec![Problem::new(
            "project_key",
            format!("unknown project_key {}", py_repr(project_key)),
            "use a project_key from the prepared workspace",
        )]);
    }
    let mut problems = Vec::new();
    let mut resolved = Vec::new();
    for c in &cites {
        if let Some(other) = c.project_key.as_deref().filter(|k| *k != project_key) {
            problems.push(Problem::new(
                format!("{}.project_key", c.path),
                format!(
                    "citation names a different project {}, not {}",
                    py_repr(other),
                    py_repr(project_key)
                ),
                "omit project_key on a per-project pass or name this tool's project",
            ));
            continue;
        }
        match ctx.resolve_committed(project_key, &c.session_ref, &c.turn_ref) {
            Some(v) => resolved.push(v),
            None => problems.push(Problem::new(
                &c.path,
                format!(
                    "{}/{} has no committed evidence in this project",
                    c.session_ref, c.turn_ref
                ),
                RESOLVE_HINT,
            )),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut report = report.clone();
    let entry = match report.get_mut("projects") {
        Some(Value::Array(projects)) => projects
            .iter_mut()
            .filter_map(|p| match p {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .find(|p| p.get("project_key").and_then(Value::as_str) == Some(project_key)),
        _ => None,
    };
    let Some(entry) = entry else {
        return Err(vec![Problem::new(
            "project_key",
            format!(
                "project {} is not present in the daily report skeleton",
                py_repr(project_key)
            ),
            "the build step seeds one projects entry per workspace project",
        )]);
    };
    entry.insert(
        "summary".into(),
        object(vec![("text", text), ("citations", Value::Array(resolved))]),
    );
    Ok(report)
}

/// `write_report_title` on `report`.
pub fn write_title(ctx: &Context, report: &Map, title: &Value) -> Result<Map, Vec<Problem>> {
    if !report.contains_key("report_title") {
        return Err(vec![slot_problem("report_title")]);
    }
    let (text, cites) = parse_title(title)?;
    let resolved = resolve_cross(ctx, &cites)?;
    let mut report = report.clone();
    let citations = cites_at(&cites, &resolved, "title.citations");
    report.insert(
        "report_title".into(),
        object(vec![("text", text), ("citations", citations)]),
    );
    Ok(report)
}

/// Fills the `citations` placeholders of a parsed engagement/team-learning slot.
fn fill(
    slot: &mut Value,
    lead: &str,
    list: &str,
    cites: &[Cite],
    resolved: &HashMap<String, Value>,
) {
    let Value::Object(m) = slot else { return };
    if let Some(Value::Object(lead_obj)) = m.get_mut(lead) {
        lead_obj.insert(
            "citations".into(),
            cites_at(cites, resolved, &format!("{lead}.citations")),
        );
    }
    if let Some(Value::Array(items)) = m.get_mut(list) {
        for (i, item) in items.iter_mut().enumerate() {
            if let Value::Object(item) = item {
                item.insert(
                    "citations".into(),
                    cites_at(cites, resolved, &format!("{list}[{i}].citations")),
                );
            }
        }
    }
}

/// `write_engagement` on `report`.
pub fn write_engagement(
    ctx: &Context,
    report: &Map,
    overall: Option<&Value>,
    observations: Option<&Value>,
    limits: Option<&Value>,
) -> Result<Map, Vec<Problem>> {
    if !report.contains_key("engagement_assessment") {
        return Err(vec![slot_problem("engagement_assessment")]);
    }
    let (mut slot, cites) = parse_engagement(overall, observations, limits)?;
    let resolved = resolve_cross(ctx, &cites)?;
    fill(
        &mut slot,
        "overall_reading",
        "observations",
        &cites,
        &resolved,
    );
    let mut report = report.clone();
    report.insert("engagement_assessment".into(), slot);
    Ok(report)
}

/// `write_team_learning` on `report`.
pub fn write_team_learning(
    ctx: &Context,
    report: &Map,
    takeaways: Option<&Value>,
    patterns: Option<&Value>,
    limits: Option<&Value>,
) -> Result<Map, Vec<Problem>> {
    if !report.contains_key("team_learning") {
        return Err(vec![slot_problem("team_learning")]);
    }
    let (mut slot, cites) = parse_team_learning(takeaways, patterns, limits)?;
    let resolved = resolve_cross(ctx, &cites)?;
    fill(&mut slot, "takeaways", "patterns", &cites, &resolved);
    let mut report = report.clone();
    report.insert("team_learning".into(), slot);
    Ok(report)
}

/// The tools' `{"status": "written", ...}` results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Written {
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_key: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_refusal_names_the_project_and_the_fix() {
        let schema = BuildError::EnvelopeSchema {
            project: "Demo-0123456789ab".into(),
            schema: 2,
        };
        assert_eq!(
            schema.to_string(),
            "project 'Demo-0123456789ab' requires project-synthesis schema version 2; re-run \
             project synthesis to assess task dispositions"
        );
        let item = BuildError::InvalidWorkItem {
            project: "it's".into(),
            item: "index 0".into(),
        };
        assert_eq!(
            item.to_string(),
            "project \"it's\" has a structurally invalid work item (index 0); re-run project \
             synthesis to repair the envelope"
        );
    }

    #[test]
    fn dates_are_found_like_pythons_regex() {
        assert!(
            DECIMAL_DIGITS.windows(2).all(|w| w[0].1 < w[1].0),
            "sorted, disjoint"
        );
        for (text, expect) in [
            ("Shipped parser fix on 2026-03-04", true),
            ("Fixes from 2025-01-01 backlog", true),
            ("Release2026-03-04", false),
            ("v_2026-03-04 notes", false),
            ("2026-3-4 fixes", false),
            ("x ٢٠٢٦-٠٣-٠٤", true),
            ("x ２０２６-０３-０４", true), // fullwidth digits are Nd
            ("x 𝟐𝟎𝟐𝟔-𝟎𝟑-𝟎𝟒", true),         // mathematical bold digits too
            ("x ²⁰²⁶-⁰³-⁰⁴", false),        // superscripts are numerals, not digits
            ("x ⅰⅱⅲⅳ-ⅴⅵ-ⅶⅷ", false),
            ("2026-03-04", true),
            ("2026-03-045", false),
        ] {
            assert_eq!(has_date(text), expect, "{text}");
        }
    }

    #[test]
    fn titles_follow_every_rule_in_order() {
        let check = |text: Value, expect: &[&str]| {
            let got = parse_title(&object(vec![
                ("text", text.clone()),
                (
                    "citations",
                    Value::Array(vec![object(vec![
                        ("project_key", s("P")),
                        ("session_ref", s("S")),
                        ("turn_ref", s("T")),
                    ])]),
                ),
            ]));
            let messages: Vec<String> = got
                .err()
                .unwrap_or_default()
                .into_iter()
                .map(|p| p.message)
                .collect();
            assert_eq!(messages, expect, "{text:?}");
        };
        check(Value::Null, &["title.text must be a non-empty string"]);
        check(s("   "), &["title.text must be a non-empty string"]);
        check(
            s("Line one\rline two"),
            &["title.text must be a single-line report title"],
        );
        check(s(&"x".repeat(80)), &[]);
        check(
            s(&"x".repeat(81)),
            &["title.text must be at most 80 characters"],
        );
        for generic in [
            "Daily Report",
            "  DAILY   report ",
            "Updates",
            "Work Log",
            "work report",
            "My prompt   diary REPORT for parser",
            "UPDATEſ",          // long s folds to s
            "Wor\u{212A}\tLog", // Kelvin sign folds to k; a tab is whitespace
        ] {
            check(
                s(generic),
                &["title.text must name the day's actual work, not a generic report label"],
            );
        }
        for fine in [
            "Daily report: parser fix",
            "Weekly updates",
            "Update",
            "# Parser **fix**",
            "Parser fix — 파서 수정",
        ] {
            check(s(fine), &[]);
        }
        check(
            s(&format!(
                "Prompt Diary Report 2026-03-04\nsecond line {}",
                "y".repeat(80)
            )),
            &[
                "title.text must be a single-line report title",
                "title.text must be at most 80 characters",
                "title.text must not include the report date",
                "title.text must name the day's actual work, not a generic report label",
            ],
        );
    }

    #[test]
    fn python_equality_ignores_key_order_and_number_types() {
        let a = pyjson::parse(r#"{"a": 1, "b": [true, 2.0]}"#).unwrap();
        let b = pyjson::parse(r#"{"b": [1, 2], "a": 1.0}"#).unwrap();
        assert!(py_eq(&a, &b));
        assert!(!py_eq(
            &pyjson::parse("[1, 2]").unwrap(),
            &pyjson::parse("[2, 1]").unwrap()
        ));
    }
}
