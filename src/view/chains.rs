//! One evidence chain as a card: its parts (what set it off, what the agent did, what
//! came of it, what was checked, how it ended) on one side, and beside them the session
//! lines they cite, each once. A part's cited ranges are listed once each (how many times
//! the card repeats one is counted, not drawn) and link to their first line; a line the
//! page already shows is a link to it. One chain shows at most [`CHAIN_LINES_MAX`]
//! lines and [`CHAIN_BYTES_MAX`] bytes of markup, and says what it leaves out.

use maud::{Markup, PreEscaped, html};

use crate::read::compact::CompactRecord;
use crate::util::pyjson::{Map, Value};
use crate::view::docs::{self, list, object, text};
use crate::view::gather::ProjectDay;
use crate::view::lines::{Body, Line, SessionLines};
use crate::view::page::{Ctx, Halt, Page};
use crate::view::text::{Cut, T};
use crate::view::{CHAIN_BYTES_MAX, CHAIN_LINES_MAX, FIELD_CUT, TEXT_CUT, anchor};

/// The most entries of one list of a chain shown (reactions, outcomes, quoted messages,
/// fields of a part), and the most distinct ranges one part lists.
const LIST_MAX: usize = 20;
/// The most tool uses or results of one line's compact record shown.
const ENTRIES_MAX: usize = 8;

/// A cited `lines` value: a span `a-b` with `1 <= a <= b`, or the text that is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cited {
    Span(u64, u64),
    NotASpan(String),
}

/// The distinct `lines` a part's `citations` name, in order, each with how often.
pub fn cited(part: &Map) -> Vec<(Cited, usize)> {
    let mut out: Vec<(Cited, usize)> = Vec::new();
    for c in list(part.get("citations")) {
        let Some(lines) = c.get("lines") else {
            continue;
        };
        let shown = docs::short(lines);
        let one = shown
            .split_once('-')
            .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
            .filter(|(a, b): &(u64, u64)| *a >= 1 && a <= b)
            .map_or_else(
                || Cited::NotASpan(crate::view::cut(&shown, FIELD_CUT).0.to_owned()),
                |(a, b)| Cited::Span(a, b),
            );
        match out.iter_mut().find(|(c, _)| *c == one) {
            Some((_, n)) => *n += 1,
            None => out.push((one, 1)),
        }
    }
    out
}

/// A chain part to draw: its heading, the tag beside it, its id, the part itself.
struct PartView<'c> {
    heading: &'static str,
    tag: Option<String>,
    id: String,
    part: &'c Map,
}

/// The parts of a chain, in reading order, and how many list entries were left out.
fn parts(chain: &Map) -> (Vec<PartView<'_>>, usize) {
    let mut out = Vec::new();
    let mut left = 0;
    let tag = |p: &Map, key: &str| text(p.get(key)).map(|t| t.replace('_', " "));
    if let Some(trigger) = object(chain.get("trigger")) {
        out.push(PartView {
            heading: "What set it off",
            tag: tag(trigger, "type"),
            id: "trigger".into(),
            part: trigger,
        });
    }
    for (key, heading, tag_key) in [
        ("agent_reactions", "What the agent did", None),
        ("outcomes", "What came of it", Some("category")),
        ("observed_checks", "What was checked", Some("type")),
    ] {
        let items = list(chain.get(key));
        for (i, item) in items.iter().enumerate() {
            let Some(item) = item.as_object() else {
                continue;
            };
            if i >= LIST_MAX {
                left += items.len() - LIST_MAX;
                break;
            }
            out.push(PartView {
                heading,
                tag: tag_key.and_then(|k| tag(item, k)),
                id: format!("{key}-{i}"),
                part: item,
            });
        }
    }
    if let Some(terminal) = object(chain.get("terminal_state")) {
        out.push(PartView {
            heading: "How it ended",
            tag: tag(terminal, "type"),
            id: "terminal_state".into(),
            part: terminal,
        });
    }
    (out, left)
}

/// The keys of a chain a card draws as its parts (the rest are shown as they are).
const CHAIN_KEYS: [&str; 7] = [
    "turn_ref",
    "trigger",
    "agent_reactions",
    "outcomes",
    "observed_checks",
    "terminal_state",
    "materiality",
];

/// The keys of a part drawn by its heading, text and citations.
const PART_KEYS: [&str; 6] = [
    "type",
    "category",
    "summary",
    "text",
    "citations",
    "quoted_messages",
];

/// A chain's one-line gist: its trigger's summary, else its first quoted message.
pub fn gist(chain: &Map) -> Option<&str> {
    let trigger = object(chain.get("trigger"))?;
    text(trigger.get("summary")).or_else(|| {
        list(trigger.get("quoted_messages"))
            .iter()
            .find_map(|q| text(q.get("text")))
    })
}

impl Ctx<'_> {
    /// The card of one chain of the turn `turn_ref` of the session at `at`.
    #[allow(clippy::too_many_arguments)]
    pub fn chain_card(
        &self,
        page: &mut Page,
        p: &ProjectDay,
        at: usize,
        lines: &SessionLines,
        chain: &Map,
        turn_ref: &str,
        k: usize,
    ) -> Result<Markup, Halt> {
        let session_ref = &p.sessions[at].session.session_ref;
        let ordinal = p.ordinal(at);
        let k_text = k.to_string();
        let mut base = vec!["chain", p.key.as_str(), session_ref.as_str(), turn_ref];
        if k > 0 {
            base.push(&k_text);
        }
        let line_href = |n: u64| {
            format!(
                "#{}",
                anchor(&["line", &p.key, session_ref, &n.to_string()])
            )
        };
        let (parts, left_parts) = parts(chain);
        // Every span the parts cite, for the lines beside them.
        let mut spans: Vec<(u64, u64)> = Vec::new();
        let mut drawn = String::new();
        let mut dropped = 0;
        for part in &parts {
            if drawn.len() > CHAIN_BYTES_MAX / 2 {
                dropped += 1;
                continue;
            }
            let view = html! {
                div.part id=(anchor(&[&base[..], &[part.id.as_str()]].concat())) {
                    h5 { (part.heading) @if let Some(t) = &part.tag { " " span.tag { (T(t)) } } }
                    @if let Some(s) = text(part.part.get("summary")) { p { (Cut(s, FIELD_CUT)) } }
                    @if let Some(s) = text(part.part.get("text")) { p { (Cut(s, FIELD_CUT)) } }
                    @for q in list(part.part.get("quoted_messages")).iter().take(LIST_MAX) {
                        @if let Some(t) = text(q.get("text")) {
                            blockquote { (Cut(t, FIELD_CUT)) (self.cites(q.as_object(), &line_href, &mut spans)) }
                        }
                    }
                    @if list(part.part.get("quoted_messages")).len() > LIST_MAX {
                        p.cut { (list(part.part.get("quoted_messages")).len() - LIST_MAX) " more quoted message(s) not shown" }
                    }
                    (extra(part.part, &PART_KEYS))
                    (self.cites(Some(part.part), &line_href, &mut spans))
                }
            };
            drawn.push_str(&view.into_string());
        }
        let left_parts = left_parts + dropped;
        let materiality = text(chain.get("materiality"));
        let head = html! {
            p.tags {
                @if let Some(m) = materiality { span.tag { (T(m)) } " " }
                @if let Some(t) = object(chain.get("terminal_state")).and_then(|t| text(t.get("type"))) {
                    span.tag { "ended: " (T(&t.replace('_', " "))) }
                }
            }
            (extra(chain, &CHAIN_KEYS))
            @if left_parts > 0 { p.cut { (left_parts) " more part(s) of this chain are not shown (at most " (LIST_MAX) " of a kind, and " (CHAIN_BYTES_MAX >> 21) " MiB of parts)" } }
        };
        let cited_lines = self.cited_lines(page, lines, ordinal, &p.key, session_ref, &spans)?;
        Ok(html! {
            div.chain id=(anchor(&base)) {
                div.parts { (head) (PreEscaped(drawn)) }
                div.cited { (cited_lines) }
            }
        })
    }

    /// "rests on lines 2–5, line 6 (cited 3 times)", each linking to its first line;
    /// the spans are added to `spans`.
    fn cites(
        &self,
        part: Option<&Map>,
        line_href: &dyn Fn(u64) -> String,
        spans: &mut Vec<(u64, u64)>,
    ) -> Markup {
        let Some(part) = part else {
            return html! {};
        };
        let all = cited(part);
        if all.is_empty() {
            return html! {};
        }
        for (c, _) in &all {
            if let Cited::Span(a, b) = c {
                spans.push((*a, *b));
            }
        }
        html! {
            p.cites {
                "rests on "
                @for (i, (c, n)) in all.iter().take(LIST_MAX).enumerate() {
                    @if i > 0 { ", " }
                    @match c {
                        Cited::Span(a, b) => {
                            a href=(line_href(*a)) { @if a == b { "line " (a) } @else { "lines " (a) "–" (b) } }
                        }
                        Cited::NotASpan(t) => { code { (T(t)) } " (not a line span)" }
                    }
                    @if *n > 1 { " " span.muted { "(cited " (n) " times)" } }
                }
                @if all.len() > LIST_MAX { " and " (all.len() - LIST_MAX) " more range(s)" }
            }
        }
    }

    /// The lines `spans` cite, each once: at most [`CHAIN_LINES_MAX`] and
    /// [`CHAIN_BYTES_MAX`] bytes of them; a line this page already shows is a link.
    fn cited_lines(
        &self,
        page: &mut Page,
        lines: &SessionLines,
        ordinal: usize,
        project: &str,
        session_ref: &str,
        spans: &[(u64, u64)],
    ) -> Result<Markup, Halt> {
        let count = match lines.count() {
            Ok(n) => Some(n),
            Err(why) => {
                return Ok(
                    html! { p.cut { "The cited lines cannot be read: " (T(&why.to_string())) } },
                );
            }
        };
        let mut merged: Vec<(u64, u64)> = spans
            .iter()
            .filter_map(|&(a, b)| {
                let b = count.map_or(b, |n| b.min(n));
                (a <= b).then_some((a, b))
            })
            .collect();
        merged.sort_unstable();
        let mut union: Vec<(u64, u64)> = Vec::new();
        for (a, b) in merged {
            match union.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => union.push((a, b)),
            }
        }
        let total: u64 = union.iter().map(|(a, b)| b - a + 1).sum();
        let past_end = count.is_some_and(|n| spans.iter().any(|&(_, b)| b > n));
        let mut out = String::new();
        let mut taken = 0u64;
        // A run of lines this page already shows, drawn as one link.
        let mut seen: Option<(u64, u64)> = None;
        let stub = |out: &mut String, (a, b): (u64, u64)| {
            let href = format!(
                "#{}",
                anchor(&["line", project, session_ref, &a.to_string()])
            );
            out.push_str(
                &html! {
                    p.seen { a href=(href) { @if a == b { "line " (a) } @else { "lines " (a) "–" (b) } } " shown above" }
                }
                .into_string(),
            );
        };
        'spans: for (a, b) in union {
            for n in a..=b {
                if taken >= CHAIN_LINES_MAX || out.len() > CHAIN_BYTES_MAX {
                    break 'spans;
                }
                taken += 1;
                if page.shown.contains(&(ordinal, n)) {
                    seen = Some(match seen {
                        Some((s, e)) if e + 1 == n => (s, n),
                        Some(run) => {
                            stub(&mut out, run);
                            (n, n)
                        }
                        None => (n, n),
                    });
                    continue;
                }
                if let Some(run) = seen.take() {
                    stub(&mut out, run);
                }
                crate::util::stop::check()?;
                for line in lines.read(self.reader, n, n)? {
                    page.shown.insert((ordinal, line.n));
                    page.stats.lines_shown += 1;
                    let id = anchor(&["line", project, session_ref, &line.n.to_string()]);
                    out.push_str(&line_view(&line, Some(id)).into_string());
                }
            }
        }
        if let Some(run) = seen.take() {
            stub(&mut out, run);
        }
        Ok(html! {
            (PreEscaped(out))
            @if taken < total {
                p.cut { (total - taken) " more cited line(s) are not shown: one chain shows at most " (CHAIN_LINES_MAX) " lines and " (CHAIN_BYTES_MAX >> 20) " MiB" }
            }
            @if past_end { p.cut { "Some ranges run past the session's end (it has " (count.unwrap_or(0)) " lines)." } }
        })
    }
}

/// A map's other members (not in `drawn`), null and empty ones left out, each as short
/// text.
fn extra(map: &Map, drawn: &[&str]) -> Markup {
    let rest: Vec<(&String, &Value)> = map
        .iter()
        .filter(|(k, v)| !drawn.contains(&k.as_str()) && !docs::is_empty(v))
        .collect();
    html! {
        @if !rest.is_empty() {
            dl.extra {
                @for (k, v) in rest.iter().take(LIST_MAX) {
                    dt { (T(&k.replace('_', " "))) } dd { (Cut(&docs::short(v), FIELD_CUT)) }
                }
            }
            @if rest.len() > LIST_MAX { p.cut { (rest.len() - LIST_MAX) " more field(s) not shown" } }
        }
    }
}

/// One session line: its head, its compact record, its trimmed entries' handles and its
/// full text (cut at [`TEXT_CUT`]), or why it is not shown.
pub fn line_view(line: &Line, id: Option<String>) -> Markup {
    html! {
        div.line.s id=[id] {
            @match &line.body {
                Body::Verified(v) => {
                    div.lhead {
                        "line " (line.n) " · " (v.bytes) " bytes · sha256 " span.mono { (&v.sha256[..16]) } "…"
                    }
                    div.compact { (compact_view(&v.compact)) }
                    @if !v.handles.is_empty() {
                        ul.v {
                            @for (kind, index, handle, bytes) in v.handles.iter().take(ENTRIES_MAX) {
                                li.mono { "tool_output handle of " (kind) " " (index) " (" (bytes) " bytes): " (handle) }
                            }
                            @if v.handles.len() > ENTRIES_MAX { li.muted { (v.handles.len() - ENTRIES_MAX) " more handle(s)" } }
                        }
                    }
                    details {
                        summary { "full text" }
                        pre { (T(&v.text)) }
                        @if v.cut { p.cut { "cut at " (TEXT_CUT) " of " (v.bytes) " bytes" } }
                    }
                }
                Body::Changed => {
                    div.lhead { "line " (line.n) " " span.badge.changed { "no longer matches its stored hash" } " not shown; run `evidence-store import` to index the file as it is now" }
                }
                Body::Unreadable(why) => {
                    div.lhead { "line " (line.n) " " span.badge.unreadable { "unreadable" } " " (T(why)) }
                }
            }
        }
    }
}

fn compact_view(c: &CompactRecord) -> Markup {
    html! {
        span.mono { (T(&c.record_type)) @if let Some(role) = c.role.as_ref().filter(|r| **r != c.record_type) { " · " (T(role)) } }
        " " (T(&c.summary))
        @if c.truncated { span.cut { " (compact record trimmed)" } }
        @if let Some(text) = &c.text_preview { br; (Cut(text, FIELD_CUT)) }
        @for u in c.tool_uses.iter().take(ENTRIES_MAX) { br; "tool use " span.mono { (T(&u.name)) } ": " (Cut(&u.input_summary, FIELD_CUT)) }
        @if c.tool_uses.len() > ENTRIES_MAX { br; span.muted { (c.tool_uses.len() - ENTRIES_MAX) " more tool use(s)" } }
        @for r in c.tool_results.iter().take(ENTRIES_MAX) {
            br; "tool result " span.mono { (r.kind) }
            @if let Some(status) = &r.status { " (" (T(status)) ")" }
            " " (r.raw_bytes) " bytes: " (Cut(&r.preview, FIELD_CUT))
        }
        @if c.tool_results.len() > ENTRIES_MAX { br; span.muted { (c.tool_results.len() - ENTRIES_MAX) " more tool result(s)" } }
    }
}
