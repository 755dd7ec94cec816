//! The page's markup, streamed one part at a time. Every part is a complete `maud`
//! fragment: the document leaves out the optional `<html>`, `<head>` and `<body>` tags
//! (HTML allows it), so no part opens an element another part closes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::citations::stored::counted;
use crate::store::citations::CitationRecord;
use crate::store::{FileState, Reader, SessionRecord};
use crate::view::gather::{Coverage, Day, Doc, ProjectDay, turn_key};
use crate::view::lines::{Body, Line, SessionLines};
use crate::view::{FIELD_CUT, LINES_PER_RANGE, TEXT_CUT, ViewError, Written, anchor, cut};

const CSS: &str = include_str!("view.css");
const SCRIPT: &str = include_str!("view.js");

/// How deep the generic view of a document goes before it shows `…`.
const DEPTH_MAX: usize = 12;

fn csp() -> String {
    let hash = |text: &str| super::base64(&Sha256::digest(text.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{}'; script-src 'sha256-{}'; \
         img-src 'none'; font-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'",
        hash(CSS),
        hash(SCRIPT)
    )
}

fn put(out: &mut impl Write, markup: Markup) -> Result<(), ViewError> {
    out.write_all(markup.into_string().as_bytes())?;
    Ok(())
}

pub fn render(
    out: &mut impl Write,
    reader: &Reader,
    root: &Path,
    day: &Day,
    now: SystemTime,
    written: &mut Written,
) -> Result<(), ViewError> {
    put(out, head(day, now))?;
    put(out, glance(day))?;
    put(
        out,
        html! { h2 #chains { "Evidence chains" } p.muted { "Each turn in index order, its chain in full, and beside each cited range the session lines themselves (at most " (LINES_PER_RANGE) " per range; full text cut at " (TEXT_CUT) " bytes)." } },
    )?;
    for project in &day.projects {
        written.projects += 1;
        put(
            out,
            html! { h3 id=(anchor(&["chains", &project.key])) { "Project " (project.label) " " code { (project.key) } } },
        )?;
        for session in &project.sessions {
            written.sessions += 1;
            let lines = SessionLines::open(
                reader,
                root,
                &project.key,
                &session.session.session_ref,
                day.paged,
            )?;
            put(out, session_head(project, session, &lines))?;
            // The card's chains by turn ref, in card order (a turn may have several).
            let mut by_turn: HashMap<&str, Vec<&Map<String, Value>>> = HashMap::new();
            let mut unplaced = Vec::new();
            let indexed: HashSet<&str> = session
                .session
                .turns
                .iter()
                .map(|t| t.turn_ref.as_str())
                .collect();
            for chain in project.chains(&session.session.session_ref) {
                match chain.get("turn_ref").and_then(Value::as_str) {
                    Some(t) if indexed.contains(t) => {
                        by_turn.entry(t).or_default().push(chain);
                    }
                    _ => unplaced.push(chain),
                }
            }
            for turn in &session.session.turns {
                written.turns += 1;
                let mut markup = Vec::new();
                for chain in by_turn.get(turn.turn_ref.as_str()).into_iter().flatten() {
                    written.chains += 1;
                    markup.push(chain_view(
                        reader, project, session, &lines, chain, written,
                    )?);
                }
                put(out, turn_view(project, session, turn, &markup))?;
            }
            for chain in unplaced {
                written.chains += 1;
                let body = chain_view(reader, project, session, &lines, chain, written)?;
                put(
                    out,
                    html! { article.chain.s { p.cut { "A chain for no indexed turn of this session (turn_ref " (short(chain.get("turn_ref").unwrap_or(&Value::Null))) "):" } (body) } },
                )?;
            }
            if let Some(Doc::Unreadable(why)) = project.cards.get(&session.session.session_ref) {
                put(
                    out,
                    html! { p.cut { "The evidence card of " (session.session.session_ref) " cannot be read: " (why) } },
                )?;
            }
        }
    }
    put(out, synthesis(day))?;
    citations(out, reader, root, day, written)?;
    put(
        out,
        html! { footer.muted { p { "Written by evidence-store " (env!("CARGO_PKG_VERSION")) " from the store snapshot of " (super::utc_text(now)) "." } } script { (PreEscaped(SCRIPT)) } },
    )?;
    Ok(())
}

fn head(day: &Day, now: SystemTime) -> Markup {
    html! {
        (DOCTYPE)
        meta charset="utf-8";
        meta http-equiv="Content-Security-Policy" content=(csp());
        meta name="referrer" content="no-referrer";
        meta name="viewport" content="width=device-width, initial-scale=1";
        title { "Evidence of " (day.report_date) }
        style { (PreEscaped(CSS)) }
        header {
            h1 { "Evidence of " (day.report_date) }
            p.moment {
                "This page shows the store as it stood at " (super::utc_text(now))
                ": one read snapshot of " code { (day.store_shown) }
                ", state " code.state { (day.state) }
                " (SHA-256 over every session's line table, document and citation check read). Serving processes may have written since."
            }
            nav {
                a href="#glance" { "At a glance" }
                a href="#chains" { "Evidence chains" }
                a href="#synthesis" { "Work items and report" }
                a href="#citations" { "Agent citations" }
            }
            input #q type="search" placeholder="Search this page (chains, lines, work items, citations)" autocomplete="off";
            span #qn {}
        }
    }
}

struct Counts {
    turns: usize,
    written: usize,
    missing: usize,
    not_needed: usize,
    citations: usize,
}

fn counts(project: &ProjectDay) -> Counts {
    let mut c = Counts {
        turns: 0,
        written: 0,
        missing: 0,
        not_needed: 0,
        citations: project
            .citations
            .iter()
            .map(|g| counted(&g.citations).len())
            .sum(),
    };
    for s in &project.sessions {
        for t in &s.session.turns {
            c.turns += 1;
            match project.coverage(&s.session.session_ref, &t.turn_ref) {
                Coverage::Written => c.written += 1,
                Coverage::NotWritten => c.missing += 1,
                Coverage::NotNeeded => c.not_needed += 1,
            }
        }
    }
    c
}

fn turn_anchor(project: &str, session: &str, turn: &str) -> String {
    anchor(&["turn", project, session, turn])
}

fn glance(day: &Day) -> Markup {
    html! {
        h2 #glance { "The day at a glance" }
        dl.kv {
            dt { "report date" } dd { (day.report_date) }
            dt { "status" } dd { (day.status) }
            dt { "timezone" } dd { (day.timezone) }
            dt { "contract" } dd { (day.contract) }
            dt { "workspace" } dd { code { (day.workspace) } }
        }
        table {
            tr { th { "project" } th { "sessions" } th { "turns" } th { "chain written" } th { "no chain written" } th { "no chain needed" } th { "agent citations" } }
            @for p in &day.projects {
                @let c = counts(p);
                tr {
                    td { a href=(format!("#{}", anchor(&["chains", &p.key]))) { (p.label) } " " code { (p.key) } }
                    td.num { (p.sessions.len()) }
                    td.num { (c.turns) }
                    td.num { (c.written) }
                    td.num { (c.missing) }
                    td.num { (c.not_needed) }
                    td.num { (c.citations) }
                }
            }
        }
        p.muted {
            "Each cell is a turn: " span.badge.written { "chain written" } " " span.badge.missing { "no chain written" } " "
            span.badge.notneeded { "no chain needed" } " (a work item accounts for the turn as an evidence gap or excluded with a reason). A cell links to the turn."
        }
        @for p in &day.projects {
            h3 { (p.label) " " code { (p.key) } }
            div.grid {
                @for s in &p.sessions {
                    div.row.s {
                        span.sref {
                            a href=(format!("#{}", anchor(&["session", &p.key, &s.session.session_ref]))) { (s.session.session_ref) }
                            " " (s.session.source) " · " (file_text(s))
                        }
                        @for t in &s.session.turns {
                            @let cov = p.coverage(&s.session.session_ref, &t.turn_ref);
                            a.cell.(cov.class()) href=(format!("#{}", turn_anchor(&p.key, &s.session.session_ref, &t.turn_ref)))
                                title=(format!("{} lines {}-{}: {}", t.turn_ref, t.span.start, t.span.end, cov.label())) { (t.turn_ref) }
                        }
                    }
                }
            }
        }
    }
}

fn file_text(s: &SessionRecord) -> String {
    match &s.file {
        FileState::Indexed(f) => format!("{} lines, {} bytes", f.lines, f.size),
        FileState::Missing => "file missing".to_owned(),
    }
}

fn session_head(project: &ProjectDay, s: &SessionRecord, lines: &SessionLines) -> Markup {
    html! {
        h3 id=(anchor(&["session", &project.key, &s.session.session_ref])) {
            "Session " (s.session.session_ref) " "
            span.muted { (s.session.source) " · " code { (s.session.session_path) } " · " (file_text(s)) }
        }
        @if let Err(why) = lines.count() {
            p.cut { "Its lines cannot be read: " (why.to_string()) }
        }
    }
}

fn turn_view(
    project: &ProjectDay,
    s: &SessionRecord,
    turn: &crate::workspace::Turn,
    chains: &[Markup],
) -> Markup {
    let cov = project.coverage(&s.session.session_ref, &turn.turn_ref);
    let class = match cov {
        Coverage::Written => "chain",
        Coverage::NotWritten => "nochain",
        Coverage::NotNeeded => "excused",
    };
    html! {
        article.s.(class) id=(turn_anchor(&project.key, &s.session.session_ref, &turn.turn_ref)) {
            h4 {
                (s.session.session_ref) " / " (turn.turn_ref) " · lines " (turn.span.start) "-" (turn.span.end) " "
                span.badge.(cov.class()) { (cov.label()) }
            }
            @for chain in chains { (chain) }
        }
    }
}

/// A JSON value as short text: a string as itself, anything else as JSON.
fn short(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    };
    cut(&text, FIELD_CUT).0.to_owned()
}

/// `text` cut at [`FIELD_CUT`], with a note saying so.
fn field(text: &str) -> Markup {
    let (shown, was_cut) = cut(text, FIELD_CUT);
    html! {
        (shown)
        @if was_cut { span.cut { " … [cut at " (FIELD_CUT) " of " (text.len()) " bytes]" } }
    }
}

/// A cited `lines` that is no span `a-b` with `1 <= a <= b`: its text, cut as shown.
/// Shown only as markup (the text in `<code>`, see [`range_view`]), so it carries no
/// message of its own.
#[derive(Debug)]
struct NotASpan(String);

/// The spans `"a-b"` of a part's `citations`.
fn spans(part: &Map<String, Value>) -> Vec<Result<(u64, u64), NotASpan>> {
    part.get("citations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let lines = c.get("lines").map(short).unwrap_or_default();
            lines
                .split_once('-')
                .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
                .filter(|(a, b): &(u64, u64)| *a >= 1 && a <= b)
                .ok_or(NotASpan(lines))
        })
        .collect()
}

fn chain_view(
    reader: &Reader,
    project: &ProjectDay,
    s: &SessionRecord,
    lines: &SessionLines,
    chain: &Map<String, Value>,
    written: &mut Written,
) -> Result<Markup, ViewError> {
    let turn_ref = chain.get("turn_ref").map(short).unwrap_or_default();
    let base = ["chain", &project.key, &s.session.session_ref, &turn_ref];
    let mut parts: Vec<(String, String, &Map<String, Value>)> = Vec::new();
    if let Some(trigger) = object(chain.get("trigger")) {
        parts.push(("trigger".into(), "trigger".into(), trigger));
        for (i, q) in list(trigger.get("quoted_messages")).enumerate() {
            if let Some(q) = q.as_object() {
                parts.push((
                    format!("quoted message {}", i + 1),
                    format!("quoted-{i}"),
                    q,
                ));
            }
        }
    }
    for (key, name) in [
        ("agent_reactions", "agent reaction"),
        ("outcomes", "outcome"),
        ("observed_checks", "observed check"),
    ] {
        for (i, item) in list(chain.get(key)).enumerate() {
            if let Some(item) = item.as_object() {
                parts.push((format!("{name} {}", i + 1), format!("{key}-{i}"), item));
            }
        }
    }
    if let Some(terminal) = object(chain.get("terminal_state")) {
        parts.push(("terminal state".into(), "terminal_state".into(), terminal));
    }
    let mut rendered = Vec::new();
    for (name, id, part) in parts {
        let mut ranges = Vec::new();
        for span in spans(part) {
            ranges.push(range_view(reader, lines, span, written)?);
        }
        let mut ids = base.to_vec();
        ids.push(&id);
        rendered.push(html! {
            div.part id=(anchor(&ids)) {
                h5 {
                    (name)
                    @for key in ["type", "category"] {
                        @if let Some(v) = part.get(key) { " · " span.mono { (short(v)) } }
                    }
                }
                @for (key, v) in part.iter().filter(|(k, _)| !["type", "category", "citations", "quoted_messages"].contains(&k.as_str())) {
                    @if v.is_string() {
                        p { @if key != "summary" && key != "text" { span.muted { (key) ": " } } (field(v.as_str().unwrap_or(""))) }
                    } @else {
                        div { span.muted { (key) ": " } (value_view(v, &project.key, 0)) }
                    }
                }
                @for r in &ranges { (r) }
            }
        });
    }
    let other: Vec<(&String, &Value)> = chain
        .iter()
        .filter(|(k, _)| {
            ![
                "turn_ref",
                "trigger",
                "agent_reactions",
                "outcomes",
                "observed_checks",
                "terminal_state",
                "materiality",
            ]
            .contains(&k.as_str())
        })
        .collect();
    Ok(html! {
        div.chainbody id=(anchor(&base)) {
            dl.kv {
                dt { "materiality" } dd { (chain.get("materiality").map(short).unwrap_or_default()) }
                dt { "terminal state" } dd { (object(chain.get("terminal_state")).and_then(|t| t.get("type")).map(short).unwrap_or_default()) }
                @for (k, v) in &other { dt { (k) } dd { (value_view(v, &project.key, 0)) } }
            }
            @for part in &rendered { (part) }
        }
    })
}

fn object(value: Option<&Value>) -> Option<&Map<String, Value>> {
    value.and_then(Value::as_object)
}

fn list(value: Option<&Value>) -> impl Iterator<Item = &Value> {
    value.and_then(Value::as_array).into_iter().flatten()
}

/// One cited range: its lines (at most [`LINES_PER_RANGE`]), or why it shows none.
fn range_view(
    reader: &Reader,
    lines: &SessionLines,
    span: Result<(u64, u64), NotASpan>,
    written: &mut Written,
) -> Result<Markup, ViewError> {
    let (first, last) = match span {
        Ok(span) => span,
        Err(NotASpan(text)) => {
            return Ok(
                html! { div.range { span.rhead { "cites " code { (text) } ", which is not a line span" } } },
            );
        }
    };
    let count = lines.count().unwrap_or(u64::MAX);
    let shown_last = last
        .min(count)
        .min(first.saturating_add(LINES_PER_RANGE - 1));
    let shown = if first <= shown_last {
        lines.read(reader, first, shown_last)?
    } else {
        Vec::new()
    };
    written.lines_shown += shown.len() as u64;
    let unshown = (last - first)
        .saturating_add(1)
        .saturating_sub(shown.len() as u64);
    Ok(html! {
        div.range {
            div.rhead { "lines " (first) "-" (last) }
            @for line in &shown { (line_view(line, None)) }
            @if unshown > 0 {
                p.cut {
                    (unshown) " more line(s) not shown"
                    @if last > count && count != u64::MAX { " (the session has " (count) " lines)" }
                    @else { " (at most " (LINES_PER_RANGE) " per range)" }
                }
            }
        }
    })
}

fn line_view(line: &Line, id: Option<String>) -> Markup {
    html! {
        div.line.s id=[id] {
            @match &line.body {
                Body::Verified(v) => {
                    div.lhead {
                        "line " (line.n) " · " (v.bytes) " bytes · sha256 " span.mono { (&v.sha256[..16]) } "…"
                        @if v.cut { " · " span.cut { "full text cut at " (TEXT_CUT) " bytes" } }
                    }
                    div.compact { (compact_view(&v.compact)) }
                    @if !v.handles.is_empty() {
                        ul.v {
                            @for (kind, index, handle, bytes) in &v.handles {
                                li.mono { "tool_output handle of " (kind) " " (index) " (" (bytes) " bytes): " (handle) }
                            }
                        }
                    }
                    details {
                        summary { "full text" }
                        pre { (v.text) }
                        @if v.cut { p.cut { "cut at " (TEXT_CUT) " of " (v.bytes) " bytes" } }
                    }
                }
                Body::Changed => {
                    div.lhead { "line " (line.n) " " span.badge.changed { "no longer matches its stored hash" } " not shown; run `evidence-store import` to index the file as it is now" }
                }
                Body::Unreadable(why) => {
                    div.lhead { "line " (line.n) " " span.badge.unreadable { "unreadable" } " " (why) }
                }
            }
        }
    }
}

fn compact_view(c: &crate::read::compact::CompactRecord) -> Markup {
    html! {
        span.mono { (c.record_type) @if let Some(role) = &c.role { " · " (role) } }
        " " (c.summary)
        @if c.truncated { span.cut { " (compact record trimmed)" } }
        @if let Some(text) = &c.text_preview { br; (field(text)) }
        @for u in &c.tool_uses { br; "tool use " span.mono { (u.name) } ": " (field(&u.input_summary)) }
        @for r in &c.tool_results {
            br; "tool result " span.mono { (r.kind) }
            @if let Some(status) = &r.status { " (" (status) ")" }
            " " (r.raw_bytes) " bytes: " (field(&r.preview))
        }
    }
}

/// A JSON value as nested lists. An object holding `session_ref` and `turn_ref` strings
/// also links to that turn (of its own `project_key`, else of `project`).
fn value_view(value: &Value, project: &str, depth: usize) -> Markup {
    if depth >= DEPTH_MAX {
        return html! { span.muted { "…" } };
    }
    match value {
        Value::Object(map) => {
            let project = map
                .get("project_key")
                .and_then(Value::as_str)
                .unwrap_or(project);
            html! {
                @if let Some((s, t)) = turn_key(value) {
                    a href=(format!("#{}", turn_anchor(project, s, t))) { "→ " (s) "/" (t) }
                    @if let Some(lines) = map.get("lines") { " lines " (short(lines)) }
                } @else {
                    ul.v {
                        @for (k, v) in map {
                            li { span.muted { (k) ": " } (value_view(v, project, depth + 1)) }
                        }
                    }
                }
            }
        }
        Value::Array(items) if items.is_empty() => html! { span.muted { "none" } },
        Value::Array(items) => html! {
            ol.v { @for v in items { li { (value_view(v, project, depth + 1)) } } }
        },
        Value::String(s) => field(s),
        other => html! { (other.to_string()) },
    }
}

fn synthesis(day: &Day) -> Markup {
    html! {
        h2 #synthesis { "Work items and daily report" }
        @for p in &day.projects {
            h3 { "Work items of " (p.label) " " code { (p.key) } }
            @match &p.envelope {
                None => p.muted { "The store holds no project-synthesis.json for this project." },
                Some(Doc::Unreadable(why)) => p.cut { "project-synthesis.json cannot be read: " (why) },
                Some(Doc::Parsed(_)) => {
                    @for item in p.work_items() { (work_item(p, item)) }
                    @if p.work_items().is_empty() { p.muted { "No work items." } }
                }
            }
        }
        h3 #report { "Daily report" }
        @match &day.report {
            None => p.muted { "The store holds no daily-report.json." },
            Some(Doc::Unreadable(why)) => p.cut { "daily-report.json cannot be read: " (why) },
            Some(Doc::Parsed(report)) => {
                article.s {
                    @if let Some(title) = report.get("report_title") { h4 { "Title" } (value_view(title, "", 0)) }
                    @if let Value::Object(map) = report {
                        dl.kv {
                            @for (k, v) in map.iter().filter(|(_, v)| !v.is_object() && !v.is_array()) {
                                dt { (k) } dd { (value_view(v, "", 0)) }
                            }
                        }
                        @for (k, v) in map.iter().filter(|(k, v)| k.as_str() != "report_title" && (v.is_object() || v.is_array())) {
                            h4 { (k) }
                            (value_view(v, "", 0))
                        }
                    }
                }
            }
        }
    }
}

fn work_item(p: &ProjectDay, item: &Map<String, Value>) -> Markup {
    let item_ref = item.get("work_item_ref").map(short).unwrap_or_default();
    let covered: Vec<(String, String)> = list(item.get("covered_turns"))
        .filter_map(turn_key)
        .map(|(s, t)| (s.to_owned(), t.to_owned()))
        .collect();
    html! {
        article.s id=(anchor(&["work_item", &p.key, &item_ref])) {
            h4 {
                (item_ref) " · " span.mono { (item.get("kind").map(short).unwrap_or_default()) } " · "
                (item.get("title").map(short).unwrap_or_default())
            }
            p {
                "covers "
                @for (s, t) in &covered {
                    @let cov = p.coverage(s, t);
                    a.cell.(cov.class()) href=(format!("#{}", turn_anchor(&p.key, s, t))) title=(cov.label()) { (s) "/" (t) }
                    " "
                }
            }
            ul.v {
                @for (k, v) in item.iter().filter(|(k, _)| !["work_item_ref", "kind", "title", "covered_turns"].contains(&k.as_str())) {
                    li { span.muted { (k) ": " } (value_view(v, &p.key, 0)) }
                }
            }
        }
    }
}

/// What a citation's status means, with its stored detail.
fn reason(c: &CitationRecord) -> String {
    let check = &c.citation.check;
    let cwd = check
        .cwd
        .as_deref()
        .unwrap_or("the session's working directory");
    let base = match check.status.as_str() {
        "ok" => format!("the file holds the cited lines (under {cwd})"),
        "missing_file" => format!("missing: no such file under {cwd}"),
        "line_out_of_range" => match check.file_lines {
            Some(n) => format!("line out of range: the file has {n} lines"),
            None => "line out of range".to_owned(),
        },
        "outside_project" => format!("the path leads out of {cwd}"),
        "unchecked" => "unchecked".to_owned(),
        other => other.to_owned(),
    };
    match &check.detail {
        Some(detail) if check.status == "unchecked" => format!("unchecked because {detail}"),
        Some(detail) => format!("{base}; {detail}"),
        None => base,
    }
}

fn status_class(status: &str) -> &'static str {
    match status {
        "ok" => "st-ok",
        "missing_file" => "st-missing_file",
        "line_out_of_range" => "st-line_out_of_range",
        "outside_project" => "st-outside_project",
        "unchecked" => "st-unchecked",
        _ => "st-other",
    }
}

fn citations(
    out: &mut impl Write,
    reader: &Reader,
    root: &Path,
    day: &Day,
    written: &mut Written,
) -> Result<(), ViewError> {
    let mut table: BTreeMap<(String, String), usize> = BTreeMap::new();
    for p in &day.projects {
        for g in &p.citations {
            for c in counted(&g.citations) {
                *table
                    .entry((c.citation.kind.clone(), c.citation.check.status.clone()))
                    .or_default() += 1;
            }
        }
    }
    put(
        out,
        html! {
            h2 #citations { "Agent citations" }
            p.muted { "The " code { "**Evidence**:" } " markers the agents wrote in their messages, each counted once per turn, with the check import made of it. Each links to the line that made it." }
            @if table.is_empty() { p.muted { "No agent citations." } }
            @else {
                table {
                    tr { th { "type" } th { "status" } th { "count" } }
                    @for ((kind, status), n) in &table {
                        tr { td.mono { (kind) } td { span.badge.(status_class(status)) { (status) } } td.num { (n) } }
                    }
                }
            }
        },
    )?;
    for p in &day.projects {
        for g in &p.citations {
            let kept = counted(&g.citations);
            if kept.is_empty() {
                continue;
            }
            written.citations += kept.len();
            put(
                out,
                html! {
                    h3 { (p.label) " / " (g.session_ref) }
                    table {
                        tr { th { "type" } th { "status" } th { "reference" } th { "reason" } th { "made by" } }
                        @for (i, c) in kept.iter().enumerate() {
                            tr.s id=(anchor(&["citation", &p.key, &g.session_ref, &c.line.to_string(), &i.to_string()])) {
                                td.mono { (c.citation.kind) }
                                td { span.badge.(status_class(&c.citation.check.status)) { (c.citation.check.status) } }
                                td.mono { (field(&c.citation.reference)) }
                                td { (field(&reason(c))) }
                                td {
                                    a href=(format!("#{}", anchor(&["line", &p.key, &g.session_ref, &c.line.to_string()]))) { "line " (c.line) }
                                    @if let Some(t) = &c.citation.turn_ref {
                                        " of " a href=(format!("#{}", turn_anchor(&p.key, &g.session_ref, t))) { (t) }
                                    }
                                }
                            }
                        }
                    }
                },
            )?;
            let lines = SessionLines::open(reader, root, &p.key, &g.session_ref, day.paged)?;
            let mut numbers: Vec<u64> = kept.iter().map(|c| c.line).collect();
            numbers.dedup();
            for n in numbers {
                let shown = lines.read(reader, n, n)?;
                written.lines_shown += shown.len() as u64;
                for line in &shown {
                    let id = anchor(&["line", &p.key, &g.session_ref, &line.n.to_string()]);
                    put(out, line_view(line, Some(id)))?;
                }
            }
        }
    }
    Ok(())
}
