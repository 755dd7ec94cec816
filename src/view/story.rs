//! The day's story, at the top of the first page: the report title, then each project's
//! summary and work items as cards (title, disposition, what was asked, done and
//! changed, covered turns as ranges linked to their chains), then engagement and team
//! learning. It is drawn from the daily report when the store holds one, else from each
//! project's work items; fields that are null or empty are left out, and every reference
//! to a turn names its project.

use std::collections::{HashMap, HashSet};

use maud::{Markup, html};

use crate::util::pyjson::Value;
use crate::view::FIELD_CUT;
use crate::view::docs::{self, Doc, Part, TurnRef, list, text};
use crate::view::gather::{Held, ProjectDay};
use crate::view::page::{Ctx, Halt, Page, open};
use crate::view::text::{Cut, T};
use crate::workspace::layout;

/// The story stops adding cards past this many bytes (the rest is counted).
pub const STORY_MAX: u64 = 2 << 20;
/// The most entries of one list a card shows (outcomes, limits, observations, ...).
const LIST_MAX: usize = 20;
/// A day with at most this many work items in its report shows each open.
const OPEN_ITEMS_MAX: usize = 6;
/// The most turn ranges one list of references shows.
const RANGES_MAX: usize = 30;

/// A work item as the story shows it, read from a report's work-item view or an
/// envelope's row (the keys differ; the meaning does not).
struct Item<'v> {
    reference: Option<&'v str>,
    title: Option<&'v str>,
    kind: Option<&'v str>,
    disposition: Option<String>,
    assessment: Option<(Option<&'v str>, Option<&'v str>, Vec<TurnRef>)>,
    confidence: Option<&'v str>,
    covered: Vec<TurnRef>,
    asked: Option<&'v str>,
    did: Option<&'v str>,
    actions: Vec<&'v str>,
    outcomes: Vec<Outcome<'v>>,
    ends: Vec<(Option<&'v str>, Option<&'v str>, Vec<TurnRef>)>,
    limits: Vec<&'v str>,
    reason: Option<&'v str>,
}

/// What changed: its summary, category, confidence and the turns it rests on.
struct Outcome<'v> {
    what: Option<&'v str>,
    category: Option<&'v str>,
    confidence: Option<&'v str>,
    refs: Vec<TurnRef>,
}

fn texts(value: Option<&Value>) -> Vec<&str> {
    list(value).iter().filter_map(|v| text(Some(v))).collect()
}

/// The references of `part`: `citations` (a report's, resolved) or `evidence_refs` (an
/// envelope's).
fn refs_of(part: &Value) -> Vec<TurnRef> {
    let mut refs = docs::turn_refs(part.get("citations"));
    refs.extend(docs::turn_refs(part.get("evidence_refs")));
    refs
}

fn item(value: &Value) -> Item<'_> {
    let summary_of = |key: &str| text(value.get(key).and_then(|v| v.get("summary")));
    let outcomes = list(value.get("outcomes"))
        .iter()
        .map(|o| Outcome {
            what: text(o.get("what_changed")).or_else(|| text(o.get("summary"))),
            category: text(o.get("category")),
            confidence: text(o.get("confidence")),
            refs: refs_of(o),
        })
        .collect();
    let ends: Vec<_> = list(value.get("terminal_states"))
        .iter()
        .map(|t| (text(t.get("type")), text(t.get("summary")), refs_of(t)))
        .collect();
    let kind = text(value.get("kind"));
    // A report's view of a judged disposition (`disposition_assessment`), or an
    // envelope's judged disposition itself (an object with its type).
    let assessment = ["disposition_assessment", "disposition"]
        .into_iter()
        .filter_map(|key| value.get(key).filter(|v| v.as_object().is_some()))
        .map(|v| (text(v.get("scope")), text(v.get("summary")), refs_of(v)))
        .find(|(scope, summary, _)| scope.is_some() || summary.is_some());
    let disposition = match value.get("disposition") {
        Some(Value::String(d)) if !d.trim().is_empty() => Some(d.clone()),
        Some(Value::Object(d)) => text(d.get("type")).map(str::to_owned),
        // An envelope's material item before a report was built: the disposition the
        // build derives from it.
        None if kind == Some("material_work_item") => {
            let types: Vec<&str> = ends.iter().filter_map(|e| e.0).collect();
            let has_outcomes = !list(value.get("outcomes")).is_empty();
            Some(crate::documents::report::derived_disposition(&types, has_outcomes).to_owned())
        }
        _ => None,
    };
    Item {
        reference: text(value.get("work_item_ref")),
        title: text(value.get("title")),
        kind,
        disposition,
        assessment,
        confidence: text(value.get("confidence")),
        covered: docs::turn_refs(value.get("covered_turns")),
        asked: text(value.get("trigger_summary")).or_else(|| summary_of("trigger")),
        did: text(value.get("agent_reaction_summary")).or_else(|| summary_of("agent_reaction")),
        actions: value
            .get("agent_reaction")
            .map(|r| texts(r.get("main_actions")))
            .unwrap_or_default(),
        outcomes,
        ends,
        limits: texts(value.get("limits")),
        reason: text(value.get("reason")),
    }
}

fn kind_label(kind: &str) -> &str {
    match kind {
        "material_work_item" => "material work",
        "no_material_work_item" => "no material work",
        "evidence_gap_item" => "evidence gap",
        "excluded_with_reason" => "excluded",
        other => other,
    }
}

/// `n more` when `total` exceeds what a list shows.
fn more(total: usize, shown: usize, what: &str) -> Markup {
    html! {
        @if total > shown { li.muted { (total - shown) " more " (what) " not shown" } }
    }
}

impl Ctx<'_> {
    /// The story: written part by part into `page`.
    pub fn story(&self, page: &mut Page) -> Result<(), Halt> {
        let report = docs::read(self.reader, layout::DAILY_REPORT)?;
        let start = page.bytes;
        // Work items open as cards on a day of few; on a larger day each is its line
        // (title, disposition, covered turns) until opened.
        let items: usize = match &report {
            Doc::Text(report) => docs::member_elements(report, "projects")
                .map(|p| docs::member_elements(p, "work_items").count())
                .sum(),
            _ => 0,
        };
        let open_items = items <= OPEN_ITEMS_MAX;
        let mut seen: Vec<&str> = Vec::new();
        let mut left = 0usize;
        page.put(html! { (open("section", "", &["story"])) h2.hidden { "The day's story" } })?;
        match &report {
            Doc::Text(report) => {
                if let Some(title) = docs::member(report, "report_title").map(docs::part) {
                    page.put(self.title_card(&title))?;
                }
                for raw in docs::member_elements(report, "projects") {
                    let key = docs::string_member(raw, "project_key").unwrap_or_default();
                    if let Some(p) = self.day.project(&key) {
                        seen.push(&p.key);
                    }
                    if page.bytes - start > STORY_MAX {
                        left += 1;
                        continue;
                    }
                    self.report_project(page, raw, &key, start, open_items)?;
                }
            }
            Doc::Unreadable(why) => page.put(html! {
                p.cut { "The daily report cannot be read: " (T(why)) ". The work items below are each project's own." }
            })?,
            Doc::Absent => page.put(html! {
                p.muted { "No daily report has been built yet: "
                    code { "evidence-store build" } " makes one from the work items below." }
            })?,
        }
        for p in &self.day.projects {
            if seen.contains(&p.key.as_str()) {
                continue;
            }
            if page.bytes - start > STORY_MAX {
                left += 1;
                continue;
            }
            self.envelope_project(page, p, matches!(report, Doc::Text(_)), start, open_items)?;
        }
        if left > 0 {
            page.put(html! { p.cut { (left) " more project(s) are not shown: the story stops at " (STORY_MAX >> 20) " MiB." } })?;
        }
        if let Doc::Text(report) = &report {
            if let Some(raw) = docs::member(report, "engagement_assessment") {
                page.put(self.engagement(&docs::part(raw)))?;
            }
            if let Some(raw) = docs::member(report, "team_learning") {
                page.put(self.team_learning(&docs::part(raw)))?;
            }
        }
        page.raw("</section>")
    }

    fn title_card(&self, title: &Part) -> Markup {
        let Part::Value(title) = title else {
            return html! {};
        };
        let refs = docs::turn_refs(title.get("citations"));
        html! {
            @if !refs.is_empty() {
                p.rests { "The title rests on " (self.refs(&refs, "")) "." }
            }
        }
    }

    /// A project as the report lists it: its label, summary and work-item views.
    fn report_project(
        &self,
        page: &mut Page,
        raw: &str,
        key: &str,
        start: u64,
        open_items: bool,
    ) -> Result<(), Halt> {
        let label = docs::string_member(raw, "project_label");
        let project = self.day.project(key);
        let label = label
            .or_else(|| project.map(|p| p.label.clone()))
            .unwrap_or_else(|| key.to_owned());
        let summary = docs::member(raw, "summary").map(docs::part);
        page.put(html! {
            (open("section", "project s", &["project", key]))
            (self.project_head(&label, key, project))
            @match &summary {
                Some(Part::Value(s)) if text(s.get("text")).is_some() => {
                    p.summary { (Cut(text(s.get("text")).unwrap_or_default(), FIELD_CUT * 4)) }
                    @let refs = docs::turn_refs(s.get("citations"));
                    @if !refs.is_empty() { p.rests { "Rests on " (self.refs(&refs, key)) "." } }
                }
                Some(Part::TooLarge(n)) => p.cut { "The summary is " (n) " bytes of JSON, more than the page reads of one part." },
                _ => p.muted { "No summary has been written for this project yet." },
            }
        })?;
        let mut items = 0;
        let mut left = 0;
        let mut listed = HashSet::new();
        for raw in docs::member_elements(raw, "work_items") {
            if let Some(r) = docs::string_member(raw, "work_item_ref") {
                listed.insert(r);
            }
            if page.bytes - start > STORY_MAX {
                left += 1;
                continue;
            }
            items += 1;
            page.put(self.item_card(key, &docs::part(raw), open_items))?;
        }
        // Work items written after the report was built (the envelope's, not listed).
        let (later, later_left) = match project {
            Some(p) => self.envelope_items(
                page,
                p,
                start,
                &listed,
                "Written since the daily report was built:",
                open_items,
            )?,
            None => (0, 0),
        };
        let left = left + later_left;
        page.put(html! {
            @if items + later == 0 && left == 0 { p.muted { "No work items are in the report for this project." } }
            @if left > 0 { p.cut { (left) " more work item(s) are not shown: the story stops at " (STORY_MAX >> 20) " MiB." } }
        })?;
        page.raw("</section>")
    }

    /// The envelope's work items whose refs are not in `listed`, after `intro` (written
    /// before the first): how many were shown, and how many the story's bound left out.
    fn envelope_items(
        &self,
        page: &mut Page,
        p: &ProjectDay,
        start: u64,
        listed: &HashSet<String>,
        intro: &str,
        open_items: bool,
    ) -> Result<(usize, usize), Halt> {
        if p.envelope != Held::Readable {
            return Ok((0, 0));
        }
        let Doc::Text(envelope) = docs::read(self.reader, &layout::envelope_path(&p.key))? else {
            return Ok((0, 0));
        };
        let (mut shown, mut left) = (0, 0);
        for raw in docs::member_elements(&envelope, "work_items") {
            if docs::string_member(raw, "work_item_ref").is_some_and(|r| listed.contains(&r)) {
                continue;
            }
            if page.bytes - start > STORY_MAX {
                left += 1;
                continue;
            }
            if shown == 0 && !intro.is_empty() {
                page.put(html! { p.muted { (intro) } })?;
            }
            shown += 1;
            page.put(self.item_card(&p.key, &docs::part(raw), open_items))?;
        }
        Ok((shown, left))
    }

    /// A project the report does not list (or with no report): its envelope's work items.
    fn envelope_project(
        &self,
        page: &mut Page,
        p: &ProjectDay,
        report: bool,
        start: u64,
        open_items: bool,
    ) -> Result<(), Halt> {
        page.put(html! {
            (open("section", "project s", &["project", &p.key]))
            (self.project_head(&p.label, &p.key, Some(p)))
            @if report { p.muted { "The daily report does not list this project; its work items follow." } }
        })?;
        match &p.envelope {
            Held::Absent => page.put(
                html! { p.muted { "No work items have been written for this project yet." } },
            )?,
            Held::Unreadable(why) => {
                page.put(html! { p.cut { "Its work items cannot be read: " (T(why)) } })?
            }
            Held::Readable => {
                let (shown, left) =
                    self.envelope_items(page, p, start, &HashSet::new(), "", open_items)?;
                page.put(html! {
                    @if shown == 0 && left == 0 { p.muted { "No work items have been written for this project yet." } }
                    @if left > 0 { p.cut { (left) " more work item(s) are not shown: the story stops at " (STORY_MAX >> 20) " MiB." } }
                })?;
            }
        }
        page.raw("</section>")
    }

    fn project_head(&self, label: &str, key: &str, project: Option<&ProjectDay>) -> Markup {
        let counts = project.map(|p| {
            let turns: usize = p.sessions.iter().map(|s| s.session.turns.len()).sum();
            (p.sessions.len(), turns, p.chained())
        });
        html! {
            h2.project {
                (T(label)) " " span.key { (T(key)) }
            }
            @if let Some((sessions, turns, chained)) = counts {
                p.counts { (sessions) " session(s) · " (turns) " turn(s), " (chained) " with an evidence chain" }
            }
        }
    }

    /// A work item's card: its title, disposition and covered turns in the summary line,
    /// the rest below it, open when `open` (a day of few work items).
    fn item_card(&self, project: &str, part: &Part, open_items: bool) -> Markup {
        let value = match part {
            Part::TooLarge(n) => {
                return html! { article.item { p.cut { "A work item of " (n) " bytes of JSON, more than the page reads of one part." } } };
            }
            Part::Value(v) if v.as_object().is_some() => v,
            Part::Value(_) => return html! {},
        };
        let it = item(value);
        let id = crate::view::anchor(&["work_item", project, it.reference.unwrap_or("")]);
        html! {
            details.item.s id=(id) open[open_items] {
                summary {
                    @if let Some(d) = &it.disposition { span.badge.(disposition_class(d)) { (T(d)) } " " }
                    span.title { (Cut(it.title.unwrap_or("(untitled)"), FIELD_CUT)) } " "
                    @if let Some(k) = it.kind { span.tag { (T(kind_label(k))) } " " }
                    @if let Some(c) = it.confidence { span.tag { (T(c)) " confidence" } " " }
                    @if let Some(r) = it.reference { span.ref { (T(r)) } }
                    @if !it.covered.is_empty() {
                        " " span.covers { "· covers " (self.refs(&it.covered, project)) }
                    }
                }
                @if let Some((scope, summary, refs)) = &it.assessment {
                    p { @if let Some(s) = scope { (Cut(s, FIELD_CUT)) " — " } @if let Some(s) = summary { (Cut(s, FIELD_CUT)) }
                        @if !refs.is_empty() { " " span.rests { "(" (self.refs(refs, project)) ")" } } }
                }
                dl.facts {
                    @if let Some(a) = it.asked { dt { "Asked" } dd { (Cut(a, FIELD_CUT)) } }
                    @if let Some(d) = it.did { dt { "Done" } dd { (Cut(d, FIELD_CUT)) } }
                    @if !it.actions.is_empty() {
                        dt { "Steps" } dd { ul {
                            @for a in it.actions.iter().take(LIST_MAX) { li { (Cut(a, FIELD_CUT)) } }
                            (more(it.actions.len(), LIST_MAX, "step(s)"))
                        } }
                    }
                    @if !it.outcomes.is_empty() {
                        dt { "What changed" } dd { ul {
                            @for o in it.outcomes.iter().take(LIST_MAX) {
                                li {
                                    (Cut(o.what.unwrap_or("(no summary)"), FIELD_CUT))
                                    @if let Some(c) = o.category { " " span.tag { (T(c)) } }
                                    @if let Some(c) = o.confidence { " " span.tag { (T(c)) " confidence" } }
                                    @if !o.refs.is_empty() { " " span.rests { "(" (self.refs(&o.refs, project)) ")" } }
                                }
                            }
                            (more(it.outcomes.len(), LIST_MAX, "outcome(s)"))
                        } }
                    }
                    @if !it.ends.is_empty() {
                        dt { "How it ended" } dd { ul {
                            @for (kind, summary, refs) in it.ends.iter().take(LIST_MAX) {
                                li {
                                    @if let Some(k) = kind { span.tag { (T(&k.replace('_', " "))) } " " }
                                    @if let Some(s) = summary { (Cut(s, FIELD_CUT)) }
                                    @if !refs.is_empty() { " " span.rests { "(" (self.refs(refs, project)) ")" } }
                                }
                            }
                            (more(it.ends.len(), LIST_MAX, "end state(s)"))
                        } }
                    }
                    @if let Some(r) = it.reason { dt { "Why excluded" } dd { (Cut(r, FIELD_CUT)) } }
                    @if !it.limits.is_empty() {
                        dt { "Limits" } dd { ul {
                            @for l in it.limits.iter().take(LIST_MAX) { li { (Cut(l, FIELD_CUT)) } }
                            (more(it.limits.len(), LIST_MAX, "limit(s)"))
                        } }
                    }
                }
            }
        }
    }

    fn engagement(&self, part: &Part) -> Markup {
        let Part::Value(v) = part else {
            return html! { p.cut { "The engagement assessment is too large for the page to read." } };
        };
        if docs::is_empty(v) {
            return html! {};
        }
        let overall = v.get("overall_reading");
        let observations = list(v.get("observations"));
        let limits = texts(v.get("limits"));
        html! {
            section.slate #engagement {
                h2 { "How the people worked with the agents" }
                @if let Some(o) = overall {
                    @if let Some(t) = text(o.get("text")) {
                        p.summary { (Cut(t, FIELD_CUT * 4))
                            @if let Some(c) = text(o.get("confidence")) { " " span.tag { (T(c)) " confidence" } } }
                        @let refs = docs::turn_refs(o.get("citations"));
                        @if !refs.is_empty() { p.rests { "Rests on " (self.refs(&refs, "")) "." } }
                    }
                }
                @if !observations.is_empty() {
                    ul.observations {
                        @for o in observations.iter().take(LIST_MAX) {
                            li {
                                @if let Some(d) = text(o.get("dimension")) { span.tag { (T(d)) } " " }
                                (Cut(text(o.get("statement")).unwrap_or("(no statement)"), FIELD_CUT))
                                @if let Some(c) = text(o.get("confidence")) { " " span.tag { (T(c)) " confidence" } }
                                @let refs = docs::turn_refs(o.get("citations"));
                                @if !refs.is_empty() { " " span.rests { "(" (self.refs(&refs, "")) ")" } }
                            }
                        }
                        (more(observations.len(), LIST_MAX, "observation(s)"))
                    }
                }
                @if !limits.is_empty() {
                    p.muted { "Limits: " @for (i, l) in limits.iter().take(LIST_MAX).enumerate() { @if i > 0 { "; " } (Cut(l, FIELD_CUT)) } }
                }
            }
        }
    }

    fn team_learning(&self, part: &Part) -> Markup {
        let Part::Value(v) = part else {
            return html! { p.cut { "The team learning is too large for the page to read." } };
        };
        if docs::is_empty(v) {
            return html! {};
        }
        let takeaways = v.get("takeaways");
        let patterns = list(v.get("patterns"));
        let limits = texts(v.get("limits"));
        html! {
            section.slate #learning {
                h2 { "What the team can take from the day" }
                @if let Some(t) = takeaways {
                    @if let Some(text_) = text(t.get("text")) {
                        p.summary { (Cut(text_, FIELD_CUT * 4))
                            @if let Some(c) = text(t.get("confidence")) { " " span.tag { (T(c)) " confidence" } } }
                        @let refs = docs::turn_refs(t.get("citations"));
                        @if !refs.is_empty() { p.rests { "Rests on " (self.refs(&refs, "")) "." } }
                    }
                }
                @if !patterns.is_empty() {
                    ul.observations {
                        @for pat in patterns.iter().take(LIST_MAX) {
                            li {
                                @if let Some(k) = text(pat.get("kind")) { span.tag { (T(pattern_label(k))) } " " }
                                (Cut(text(pat.get("statement")).unwrap_or("(no statement)"), FIELD_CUT))
                                @if let Some(r) = text(pat.get("rationale")) { br; span.muted { "Why: " } (Cut(r, FIELD_CUT)) }
                                @if let Some(r) = text(pat.get("recurrence")) { br; span.muted { "How often: " } (Cut(r, FIELD_CUT)) }
                                @if let Some(c) = text(pat.get("confidence")) { " " span.tag { (T(c)) " confidence" } }
                                @let refs = docs::turn_refs(pat.get("citations"));
                                @if !refs.is_empty() { " " span.rests { "(" (self.refs(&refs, "")) ")" } }
                            }
                        }
                        (more(patterns.len(), LIST_MAX, "pattern(s)"))
                    }
                }
                @if !limits.is_empty() {
                    p.muted { "Limits: " @for (i, l) in limits.iter().take(LIST_MAX).enumerate() { @if i > 0 { "; " } (Cut(l, FIELD_CUT)) } }
                }
            }
        }
    }

    /// Turn references as ranges, grouped by project and session: `Demo: S0001
    /// T0001–T0003, T0005; S0002 T0001`, each range a link to its first turn's chain.
    /// A reference without a project is of `project`; one the index does not hold is
    /// named as written.
    pub fn refs(&self, refs: &[TurnRef], project: &str) -> Markup {
        // (project, session) groups in order of first appearance.
        let mut groups: Vec<((&str, &str), Vec<&str>)> = Vec::new();
        for r in refs {
            let key = (r.project.as_deref().unwrap_or(project), r.session.as_str());
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, turns)) => turns.push(&r.turn),
                None => groups.push((key, vec![&r.turn])),
            }
        }
        let mut shown = 0;
        let mut markup = String::new();
        let mut last_project: Option<&str> = None;
        let mut hidden = 0;
        for ((project, session), turns) in &groups {
            let p = self.day.project(project);
            let label = p.map_or(*project, |p| p.label.as_str());
            let ranges = self.ranges(p, session, turns);
            if shown >= RANGES_MAX {
                hidden += ranges.len();
                continue;
            }
            let head = if last_project == Some(*project) {
                html! { ", " }
            } else {
                html! { @if last_project.is_some() { "; " } (T(label)) ": " }
            };
            last_project = Some(project);
            markup.push_str(&head.into_string());
            for (i, (text_, href)) in ranges.iter().enumerate() {
                if shown >= RANGES_MAX {
                    hidden += ranges.len() - i;
                    break;
                }
                shown += 1;
                let one = html! {
                    @if i > 0 { ", " }
                    @match href {
                        Some(h) => a href=(h) { (T(text_)) },
                        None => span.unknown title="not a turn the index holds" { (T(text_)) },
                    }
                };
                markup.push_str(&one.into_string());
            }
        }
        if hidden > 0 {
            markup.push_str(&html! { " and " (hidden) " more" }.into_string());
        }
        maud::PreEscaped(markup)
    }

    /// The turns of one session as runs of consecutive indexed turns (`S0001
    /// T0001–T0003`), each with the link to its first turn; unindexed turns as written.
    fn ranges(
        &self,
        p: Option<&ProjectDay>,
        session: &str,
        turns: &[&str],
    ) -> Vec<(String, Option<String>)> {
        let Some((p, (at, record))) = p.and_then(|p| p.session(session).map(|s| (p, s))) else {
            return turns
                .iter()
                .map(|t| (format!("{session} {t}"), None))
                .collect();
        };
        let index: HashMap<&str, usize> = record
            .session
            .turns
            .iter()
            .enumerate()
            .map(|(i, t)| (t.turn_ref.as_str(), i))
            .collect();
        let mut positions: Vec<usize> =
            turns.iter().filter_map(|t| index.get(t).copied()).collect();
        positions.sort_unstable();
        positions.dedup();
        let mut out = Vec::new();
        let mut i = 0;
        while i < positions.len() {
            let mut j = i;
            while j + 1 < positions.len() && positions[j + 1] == positions[j] + 1 {
                j += 1;
            }
            let first = &record.session.turns[positions[i]].turn_ref;
            let last = &record.session.turns[positions[j]].turn_ref;
            let label = if i == j {
                format!("{session} {first}")
            } else {
                format!("{session} {first}–{last}")
            };
            out.push((label, Some(self.links.turn(p, at, first))));
            i = j + 1;
        }
        for t in turns {
            if !index.contains_key(t) {
                out.push((format!("{session} {t} (not indexed)"), None));
            }
        }
        out
    }
}

fn pattern_label(kind: &str) -> &str {
    match kind {
        "promote" => "keep doing",
        "avoid" => "avoid",
        "reuse" => "reuse",
        other => other,
    }
}

pub fn disposition_class(d: &str) -> &'static str {
    match d {
        "completed" => "d-done",
        "blocked" | "failed" | "interrupted" => "d-stuck",
        _ => "d-other",
    }
}
