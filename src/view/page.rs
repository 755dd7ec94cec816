//! The pages and their frame. A day is first drawn as one page (the story, the grid, the
//! chains, the agent citations); when that page would pass [`ONE_PAGE_MAX`] bytes the
//! attempt is dropped (its temp file removed) and the day is drawn as a first page (the
//! story and the grid, with links) and one page per session, `<stem>.<state>.<n>.html`
//! beside it, where `<state>` is the first 12 hex digits of the state read: the session
//! pages are written first, the first page last, and the pages of other states are
//! removed once it is in place, so a reader never follows a link into another state.
//!
//! Each part is written as soon as it is drawn; an element that spans parts (a section,
//! a turn's `<details>`) is opened and closed by [`open`] and a closing tag, whose bytes
//! this module chooses.

use std::collections::{BTreeMap, HashSet};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::SystemTime;

use maud::{DOCTYPE, Markup, PreEscaped, html};
use sha2::{Digest, Sha256};

use crate::citations::stored::counted;
use crate::store::citations::CitationRecord;
use crate::store::{FileState, Reader, SessionRecord, Store, StoreError};
use crate::util::stop::{self, Stopped};
use crate::view::docs::{self, Doc, Part};
use crate::view::gather::{self, Coverage, Day, ProjectDay};
use crate::view::lines::SessionLines;
use crate::view::text::{Cut, T, attr};
use crate::view::{
    FIELD_CUT, FIRST_PAGE_MAX, ONE_PAGE_MAX, PAGE_MAX, Target, ViewError, Written, anchor,
};
use crate::workspace::layout;

const CSS: &str = include_str!("view.css");
const SCRIPT: &str = include_str!("view.js");

/// The grid stops drawing cells past this many bytes of it (the rest is counted).
const GRID_MAX: u64 = 3 << 20;
/// The list of session pages on a first page stops past this many bytes.
const LIST_MAX: u64 = 1 << 20;
/// A session page stops drawing turns and citations past this many bytes, which leaves
/// room under [`PAGE_MAX`] for the part being drawn and the footer.
const SESSION_PAGE_BOUND: u64 = PAGE_MAX - (4 << 20);
/// The most agent citations of one session listed.
const CITATION_ROWS_MAX: usize = 1000;
/// A tooltip's first user message is cut here.
const TIP_CUT: usize = 200;

/// Why drawing a page stopped early.
pub enum Halt {
    /// The one-page attempt passed its bound: the day gets a page per session.
    Over,
    Failed(ViewError),
}

impl From<ViewError> for Halt {
    fn from(e: ViewError) -> Halt {
        Halt::Failed(e)
    }
}

impl From<io::Error> for Halt {
    fn from(e: io::Error) -> Halt {
        Halt::Failed(ViewError::Io(e))
    }
}

impl From<StoreError> for Halt {
    fn from(e: StoreError) -> Halt {
        Halt::Failed(ViewError::Store(e))
    }
}

impl From<Stopped> for Halt {
    fn from(e: Stopped) -> Halt {
        Halt::Failed(ViewError::Stopped(e))
    }
}

/// A page being written: where its bytes go, how many there are, the lines it shows.
pub struct Page<'w> {
    out: &'w mut dyn Write,
    pub bytes: u64,
    /// Passing this many bytes ends the page with [`Halt::Over`].
    abort_at: u64,
    /// Lines this page shows, by session ordinal and line: each is drawn once.
    pub shown: HashSet<(usize, u64)>,
    pub stats: Written,
}

impl Page<'_> {
    pub fn put(&mut self, markup: Markup) -> Result<(), Halt> {
        self.raw(&markup.into_string())
    }

    /// Writes markup this module made (never untrusted text).
    pub fn raw(&mut self, markup: &str) -> Result<(), Halt> {
        self.bytes += markup.len() as u64;
        if self.bytes > self.abort_at {
            return Err(Halt::Over);
        }
        self.out.write_all(markup.as_bytes())?;
        Ok(())
    }
}

/// The opening tag of an element that spans parts: `class` is the page's own, the id is
/// [`anchor`] of `id` (letters, digits, `_`, `-`, `.` and `:` only).
pub fn open(tag: &'static str, class: &str, id: &[&str]) -> PreEscaped<String> {
    debug_assert!(
        class
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b' ' || b == b'-')
    );
    if class.is_empty() {
        PreEscaped(format!("<{tag} id=\"{}\">", anchor(id)))
    } else {
        PreEscaped(format!("<{tag} class=\"{class}\" id=\"{}\">", anchor(id)))
    }
}

/// How pages link to a turn: within the one page, or into its session's page.
pub enum Links {
    One,
    Split {
        first: String,
        stem: String,
        state: String,
    },
}

/// A session page's name: `<stem>.<state>.<ordinal>.html`.
fn session_page_name(stem: &str, state: &str, ordinal: usize) -> String {
    format!("{stem}.{state}.{ordinal:04}.html")
}

/// The state and ordinal of `name`, when it is a session page of the page `stem`.
pub fn session_page_of<'n>(stem: &str, name: &'n str) -> Option<(&'n str, usize)> {
    let rest = name
        .strip_prefix(stem)?
        .strip_prefix('.')?
        .strip_suffix(".html")?;
    let (state, ordinal) = rest.split_once('.')?;
    let hex = state.len() == 12 && state.bytes().all(|b| b.is_ascii_hexdigit());
    let digits = ordinal.len() >= 4 && ordinal.bytes().all(|b| b.is_ascii_digit());
    (hex && digits)
        .then(|| ordinal.parse().ok().map(|n| (state, n)))
        .flatten()
}

/// `name` as a relative URL: every byte but unreserved ones percent-encoded.
fn href_of(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Links {
    /// The session page of the session with `ordinal`, when the day is split.
    pub fn page(&self, ordinal: usize) -> Option<String> {
        match self {
            Links::One => None,
            Links::Split { stem, state, .. } => Some(session_page_name(stem, state, ordinal)),
        }
    }

    fn to(&self, ordinal: usize, id: &str) -> String {
        match self.page(ordinal) {
            None => format!("#{id}"),
            Some(page) => format!("{}#{id}", href_of(&page)),
        }
    }

    pub fn turn(&self, p: &ProjectDay, at: usize, turn: &str) -> String {
        let s = &p.sessions[at].session.session_ref;
        self.to(p.ordinal(at), &anchor(&["turn", &p.key, s, turn]))
    }

    pub fn session(&self, p: &ProjectDay, at: usize) -> String {
        let s = &p.sessions[at].session.session_ref;
        self.to(p.ordinal(at), &anchor(&["session", &p.key, s]))
    }
}

/// What every part of a page is drawn from.
pub struct Ctx<'a> {
    pub reader: &'a Reader,
    pub root: &'a Path,
    pub day: &'a Day,
    pub links: Links,
    now: SystemTime,
    /// The report title's text, when the report has one.
    title: Option<String>,
}

fn csp() -> String {
    let hash = |text: &str| super::base64(&Sha256::digest(text.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{}'; script-src 'sha256-{}'; \
         img-src 'none'; font-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'",
        hash(CSS),
        hash(SCRIPT)
    )
}

/// Writes the pages of the store's current state at `target`.
pub fn write(
    store: &Store,
    root: &Path,
    target: &Target,
    now: SystemTime,
) -> Result<Written, ViewError> {
    let reader = store.reader()?;
    let day = gather::gather(&reader, store.shown())?;
    stop::check()?;
    let title = match docs::read(&reader, layout::DAILY_REPORT)? {
        Doc::Text(report) => docs::member(&report, "report_title")
            .and_then(|t| docs::string_member(t, "text"))
            .filter(|t| !t.trim().is_empty()),
        _ => None,
    };
    let mut ctx = Ctx {
        reader: &reader,
        root,
        day: &day,
        links: Links::One,
        now,
        title,
    };
    match write_page(target, &target.name, ONE_PAGE_MAX, true, |page| {
        ctx.first_page(page)
    }) {
        Ok(mut written) => {
            written.first_page = written.bytes;
            remove_stale_pages(target, None, 0);
            return Ok(written);
        }
        Err(Halt::Over) => {}
        Err(Halt::Failed(e)) => return Err(e),
    }
    let state = day.state[..12].to_owned();
    ctx.links = Links::Split {
        first: target.name.clone(),
        stem: target.stem().to_owned(),
        state: state.clone(),
    };
    let mut made: Vec<String> = Vec::new();
    let result = split(&ctx, target, &mut made);
    match result {
        Ok(written) => {
            remove_stale_pages(target, Some(&state), day.sessions);
            Ok(written)
        }
        Err(e) => {
            for name in made {
                let _ = std::fs::remove_file(target.dir.join(name));
            }
            Err(e)
        }
    }
}

/// The session pages, then the first page. `made`: the session pages written that did
/// not exist before (removed if the first page is not written).
fn split(ctx: &Ctx, target: &Target, made: &mut Vec<String>) -> Result<Written, ViewError> {
    let halted = |h: Halt| match h {
        Halt::Failed(e) => e,
        Halt::Over => ViewError::Io(io::Error::other("a page passed its bound")),
    };
    let order: Vec<(usize, usize)> = ctx
        .day
        .projects
        .iter()
        .enumerate()
        .flat_map(|(i, p)| (0..p.sessions.len()).map(move |at| (i, at)))
        .collect();
    let mut written = Written::default();
    for (i, &(pi, at)) in order.iter().enumerate() {
        stop::check()?;
        let p = &ctx.day.projects[pi];
        let name = ctx.links.page(p.ordinal(at)).unwrap_or_default();
        let existed = target.dir.join(&name).symlink_metadata().is_ok();
        let neighbour = |j: Option<usize>| {
            j.and_then(|j| order.get(j))
                .map(|&(pj, aj)| (&ctx.day.projects[pj], aj))
        };
        let (prev, next) = (neighbour(i.checked_sub(1)), neighbour(Some(i + 1)));
        let page = write_page(target, &name, u64::MAX, false, |page| {
            ctx.session_page(page, p, at, prev, next)
        })
        .map_err(halted)?;
        if !existed {
            made.push(name);
        }
        written.bytes += page.bytes;
        written.pages += 1;
        written.chains += page.chains;
        written.lines_shown += page.lines_shown;
        written.citations += page.citations;
    }
    stop::check()?;
    crate::util::fsutil::sync_filesystem(&target.dir)?;
    let first = write_page(target, &target.name, u64::MAX, true, |page| {
        ctx.first_page(page)
    })
    .map_err(halted)?;
    written.first_page = first.bytes;
    written.bytes += first.bytes;
    written.pages += 1;
    written.projects = first.projects;
    written.sessions = first.sessions;
    written.turns = first.turns;
    Ok(written)
}

/// Writes one page atomically, streaming it through `draw`; `durable`: fsynced before it
/// returns (session pages are not, one by one: the file system is synced once, before the
/// first page that links to them is written).
fn write_page(
    target: &Target,
    name: &str,
    abort_at: u64,
    durable: bool,
    draw: impl FnOnce(&mut Page) -> Result<(), Halt>,
) -> Result<Written, Halt> {
    let mut stats = Written::default();
    crate::util::fsutil::atomic_write_with(&target.dir, name, durable, |file| {
        let mut out = BufWriter::with_capacity(1 << 16, file);
        let mut page = Page {
            out: &mut out,
            bytes: 0,
            abort_at,
            shown: HashSet::new(),
            stats: Written::default(),
        };
        draw(&mut page)?;
        stats = page.stats;
        stats.bytes = page.bytes;
        stats.pages = 1;
        crate::import::pause_point("view-before-rename");
        stop::check()?;
        out.flush()?;
        Ok::<(), Halt>(())
    })?;
    Ok(stats)
}

/// Removes the session pages of `target` that are not of `state` (all of them when
/// `None`), or whose ordinal is past `sessions`.
fn remove_stale_pages(target: &Target, state: Option<&str>, sessions: usize) {
    let Ok(entries) = std::fs::read_dir(&target.dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((page_state, ordinal)) = name
            .to_str()
            .and_then(|n| session_page_of(target.stem(), n))
        else {
            continue;
        };
        let current = state == Some(page_state) && ordinal <= sessions;
        if !current && entry.file_type().is_ok_and(|t| !t.is_dir()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl Ctx<'_> {
    fn first_page(&self, page: &mut Page) -> Result<(), Halt> {
        let day = self.day;
        let chained: usize = day.projects.iter().map(ProjectDay::chained).sum();
        let cited: usize = day
            .projects
            .iter()
            .flat_map(|p| &p.citations)
            .map(|g| counted(&g.citations).len())
            .sum();
        let heading = self
            .title
            .clone()
            .unwrap_or_else(|| format!("Evidence of {}", day.report_date));
        page.put(self.head(
            &match &self.title {
                Some(t) => format!("{} · {}", crate::view::cut(t, 200).0, day.report_date),
                None => heading.clone(),
            },
            &heading,
            html! {
                (T(&day.report_date)) " (" (T(&day.timezone)) ") · " (T(&day.status)) " · "
                (day.projects.len()) " project(s), " (day.sessions) " session(s), " (day.turns) " turn(s): "
                (chained) " with an evidence chain · " (cited) " agent citation(s)"
            },
            html! {
                a href="#story" { "The day" }
                a href="#coverage" { "Which turns have a chain" }
                a href="#chains" { "Chains" }
                a href="#citations" { "Agent citations" }
            },
        ))?;
        page.stats.projects = day.projects.len();
        page.stats.sessions = day.sessions;
        page.stats.turns = day.turns;
        self.story(page)?;
        crate::import::pause_point("view-drawing");
        stop::check()?;
        self.grid(page)?;
        match &self.links {
            Links::One => {
                page.put(html! {
                    (open("section", "", &["chains"]))
                    h2 { "The evidence chains, turn by turn" }
                    p.muted { "Each turn opens to its chain: what set it off, what the agent did, what came of it and how it ended, beside the session lines it rests on (each line once; a range links to its first line)." }
                })?;
                for p in &day.projects {
                    page.put(html! { h3.project { (T(&p.label)) " " span.key { (T(&p.key)) } } })?;
                    for at in 0..p.sessions.len() {
                        self.session_body(page, p, at, u64::MAX)?;
                    }
                }
                page.raw("</section>")?;
                self.citations(page, None, u64::MAX)?;
            }
            Links::Split { .. } => {
                self.page_list(page)?;
                self.citations(page, None, FIRST_PAGE_MAX)?;
            }
        }
        page.put(self.footer())
    }

    fn session_page(
        &self,
        page: &mut Page,
        p: &ProjectDay,
        at: usize,
        prev: Option<(&ProjectDay, usize)>,
        next: Option<(&ProjectDay, usize)>,
    ) -> Result<(), Halt> {
        let s = &p.sessions[at].session;
        let Links::Split { first, .. } = &self.links else {
            return Ok(());
        };
        let neighbour = |n: Option<(&ProjectDay, usize)>| {
            n.map(|(q, a)| {
                (
                    self.links.session(q, a),
                    q.sessions[a].session.session_ref.clone(),
                    q.label.clone(),
                )
            })
        };
        let (prev, next) = (neighbour(prev), neighbour(next));
        let heading = format!("Session {} of {}", s.session_ref, p.label);
        page.put(self.head(
            &format!("{} · {}", crate::view::cut(&heading, 200).0, self.day.report_date),
            &heading,
            html! { "One session of " (T(self.title.as_deref().unwrap_or(&self.day.report_date))) }, 
            html! {
                a href=(href_of(first)) { "← The day" }
                @if let Some((href, sref, label)) = &prev { a href=(href) { "← " (T(label)) " " (T(sref)) } }
                @if let Some((href, sref, label)) = &next { a href=(href) { (T(label)) " " (T(sref)) " →" } }
            },
        ))?;
        self.session_body(page, p, at, SESSION_PAGE_BOUND)?;
        self.citations(page, Some((p, at)), SESSION_PAGE_BOUND)?;
        page.put(self.footer())
    }

    fn head(&self, title: &str, heading: &str, sub: Markup, nav: Markup) -> Markup {
        html! {
            (DOCTYPE)
            meta charset="utf-8";
            meta name="generator" content="evidence-store view";
            meta http-equiv="Content-Security-Policy" content=(csp());
            meta name="referrer" content="no-referrer";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (attr(title, 300)) }
            style { (PreEscaped(CSS)) }
            header {
                h1 { (Cut(heading, 300)) }
                p.sub { (sub) }
                nav { (nav) }
                input #q type="search" placeholder="Search this page (work items, chains, lines, citations)" autocomplete="off";
                span #qn {}
            }
        }
    }

    fn footer(&self) -> Markup {
        html! {
            footer.muted {
                p { "State " code.state { (self.day.state) } ": SHA-256 over every session's line table, every document and every citation check this page was drawn from; equal states, equal pages." }
                p { "Written by evidence-store " (env!("CARGO_PKG_VERSION")) " from one read snapshot of " code { (T(&self.day.store_shown)) } " at " span.moment { (super::utc_text(self.now)) } "; serving processes may have written since." }
                p { "Workspace " code { (T(&self.day.workspace)) } " · " (T(&self.day.contract)) }
            }
            script { (PreEscaped(SCRIPT)) }
        }
    }

    /// The coverage grid: a row per session, a cell per turn, each cell's tooltip the
    /// turn's first user message; cells stop past [`GRID_MAX`] bytes.
    fn grid(&self, page: &mut Page) -> Result<(), Halt> {
        let start = page.bytes;
        page.put(html! {
            (open("section", "", &["coverage"]))
                h2 { "Which turns have an evidence chain" }
                p.legend {
                    span.cell.written.legend { "T0001" } " a chain is written · "
                    span.cell.missing.legend { "T0001" } " no chain is written · "
                    span.cell.notneeded.legend { "T0001" } " no chain is needed (a work item accounts for the turn as an evidence gap, or excludes it with a reason). "
                    "A cell's tooltip is the turn's first user message; the cell opens its chain."
                }
        })?;
        let mut left_sessions = 0usize;
        for p in &self.day.projects {
            if page.bytes - start > GRID_MAX {
                left_sessions += p.sessions.len();
                continue;
            }
            page.put(html! { h3.project { (T(&p.label)) " " span.key { (T(&p.key)) } } })?;
            page.raw("<div class=\"grid\">")?;
            for (at, s) in p.sessions.iter().enumerate() {
                if page.bytes - start > GRID_MAX {
                    left_sessions += p.sessions.len() - at;
                    break;
                }
                stop::check()?;
                let room = GRID_MAX.saturating_sub(page.bytes - start) as usize;
                page.put(self.grid_row(p, at, s, room)?)?;
            }
            page.raw("</div>")?;
        }
        if left_sessions > 0 {
            page.put(html! { p.cut { (left_sessions) " more session(s) are not drawn: the grid stops at " (GRID_MAX >> 20) " MiB. Their pages follow one another from the last one drawn." } })?;
        }
        page.raw("</section>")
    }

    /// A session's row of cells, stopping past `room` bytes of them (the rest counted).
    fn grid_row(
        &self,
        p: &ProjectDay,
        at: usize,
        s: &SessionRecord,
        room: usize,
    ) -> Result<Markup, Halt> {
        let session = &s.session;
        let lines = SessionLines::open(
            self.reader,
            self.root,
            &p.key,
            &session.session_ref,
            self.day.paged,
        )?;
        let mut cells = String::new();
        let mut left = 0;
        for t in &session.turns {
            if cells.len() > room {
                left += 1;
                continue;
            }
            let cov = p.coverage(&session.session_ref, &t.turn_ref);
            let (a, b) = (t.span.start.max(0) as u64, t.span.end.max(0) as u64);
            let first = lines.first_user_text(self.reader, a, b, TIP_CUT)?;
            let tip = match &first {
                Some(m) => format!(
                    "{}\n{} · lines {a}–{b} · {}",
                    attr(m, TIP_CUT),
                    t.turn_ref,
                    cov.label()
                ),
                None => format!(
                    "{} · lines {a}–{b} · {} · no user message in its first lines",
                    t.turn_ref,
                    cov.label()
                ),
            };
            let cell = html! {
                a.cell.(cov.class()) href=(self.links.turn(p, at, &t.turn_ref)) title=(tip) { (T(&t.turn_ref)) }
            };
            cells.push_str(&cell.into_string());
        }
        Ok(html! {
            div.row.s {
                span.sref {
                    a href=(self.links.session(p, at)) { (T(&session.session_ref)) }
                    " " span.muted { (T(&session.source)) " · " (file_text(s)) }
                }
                (PreEscaped(cells))
                @if left > 0 { span.cut { (left) " more turn(s) not drawn" } }
            }
        })
    }

    /// A split day's list of session pages, on its first page.
    fn page_list(&self, page: &mut Page) -> Result<(), Halt> {
        page.put(html! {
            (open("section", "", &["chains"]))
            h2 { "The evidence chains, one page per session" }
            p.muted { "This day is too large for one page (more than " (ONE_PAGE_MAX >> 20) " MiB), so each session's chains, the lines they cite and its agent citations are on a page of their own. Each cell of the grid opens its turn there, and each page links to the next." }
        })?;
        let start = page.bytes;
        let mut left = 0;
        page.raw("<ul class=\"pages\">")?;
        for p in &self.day.projects {
            for (at, s) in p.sessions.iter().enumerate() {
                if page.bytes - start > LIST_MAX {
                    left += 1;
                    continue;
                }
                let chains = s
                    .session
                    .turns
                    .iter()
                    .filter(|t| {
                        p.coverage(&s.session.session_ref, &t.turn_ref) == Coverage::Written
                    })
                    .count();
                page.put(html! {
                    li { a href=(self.links.session(p, at)) { (T(&p.label)) " " (T(&s.session.session_ref)) } " "
                        span.muted { (s.session.turns.len()) " turn(s), " (chains) " with a chain · " (file_text(s)) } }
                })?;
            }
        }
        page.raw("</ul>")?;
        if left > 0 {
            page.put(html! { p.cut { (left) " more session page(s): follow them from the last one listed." } })?;
        }
        page.raw("</section>")
    }

    /// One session's turns, each a collapsed `<details>` holding its chains; past `bound`
    /// bytes of the page the rest are counted.
    fn session_body(
        &self,
        page: &mut Page,
        p: &ProjectDay,
        at: usize,
        bound: u64,
    ) -> Result<(), Halt> {
        let s = &p.sessions[at];
        let session = &s.session;
        let lines = SessionLines::open(
            self.reader,
            self.root,
            &p.key,
            &session.session_ref,
            self.day.paged,
        )?;
        let card = match p.cards.get(&session.session_ref) {
            Some(_) => docs::read(
                self.reader,
                &layout::card_path(&p.key, &session.session_ref),
            )?,
            None => Doc::Absent,
        };
        page.put(html! {
            (open("section", "session", &["session", &p.key, &session.session_ref]))
            h3 {
                "Session " (T(&session.session_ref)) " "
                span.muted { (T(&session.source)) " · " code { (T(&session.session_path)) } " · " (file_text(s)) }
            }
            @if let Err(why) = lines.count() { p.cut { "Its lines cannot be read: " (T(&why.to_string())) } }
            @if let Doc::Unreadable(why) = &card { p.cut { "Its evidence card cannot be read: " (T(why)) "." } }
        })?;
        let text = match &card {
            Doc::Text(t) => t.as_str(),
            _ => "{}",
        };
        let chains = gather::chains(text, s);
        let mut left = 0;
        for t in &session.turns {
            if page.bytes > bound {
                left += 1;
                continue;
            }
            stop::check()?;
            let raws = chains
                .by_turn
                .get(&t.turn_ref)
                .map(Vec::as_slice)
                .unwrap_or_default();
            self.turn(page, p, at, &lines, t, raws)?;
        }
        let mut unplaced = 0;
        for (k, raw) in chains.unplaced.iter().enumerate() {
            if page.bytes > bound {
                left += 1;
                continue;
            }
            stop::check()?;
            let turn_ref = docs::string_member(raw, "turn_ref").unwrap_or_default();
            let card = match gather::chain_value(raw) {
                Part::Value(v) => match v.as_object() {
                    Some(chain) => self.chain_card(
                        page,
                        p,
                        at,
                        &lines,
                        chain,
                        &format!("unplaced-{turn_ref}"),
                        k,
                    )?,
                    None => continue,
                },
                Part::TooLarge(n) => too_large(n),
            };
            unplaced += 1;
            page.stats.chains += 1;
            page.put(html! {
                article.turn.stray {
                    p.cut { "A chain for no turn this session's index lists (its turn_ref is " code { (T(&turn_ref)) } "):" }
                    (card)
                }
            })?;
        }
        let _ = unplaced;
        page.put(html! {
            @if left > 0 { p.cut { (left) " more turn(s) or chain(s) of this session are not shown: a page stops at " (PAGE_MAX >> 20) " MiB." } }
        })?;
        page.raw("</section>")
    }

    fn turn(
        &self,
        page: &mut Page,
        p: &ProjectDay,
        at: usize,
        lines: &SessionLines,
        t: &crate::workspace::Turn,
        raws: &[&str],
    ) -> Result<(), Halt> {
        let session_ref = &p.sessions[at].session.session_ref;
        let cov = p.coverage(session_ref, &t.turn_ref);
        let class = match cov {
            Coverage::Written => "turn s covered",
            Coverage::NotWritten => "turn s nochain",
            Coverage::NotNeeded => "turn s excused",
        };
        let mut values = raws.iter().map(|raw| gather::chain_value(raw));
        let first = values.next();
        let gist = match &first {
            Some(Part::Value(v)) => v
                .as_object()
                .and_then(super::chains::gist)
                .map(str::to_owned),
            _ => None,
        };
        page.put(html! {
            (open("details", class, &["turn", &p.key, session_ref, &t.turn_ref]))
            summary {
                span.tref { (T(session_ref)) " " (T(&t.turn_ref)) }
                " · lines " (t.span.start) "–" (t.span.end) " "
                span.badge.(cov.class()) { (cov.label()) }
                @if let Some(g) = &gist { " " span.gist { (Cut(g, 300)) } }
            }
            @match cov {
                Coverage::NotWritten => p.muted { "No evidence chain was written for this turn." },
                Coverage::NotNeeded => p.muted { "A work item accounts for this turn without a chain (an evidence gap, or excluded with a reason)." },
                Coverage::Written => {},
            }
        })?;
        for (k, part) in first.into_iter().chain(values).enumerate() {
            stop::check()?;
            let card = match part {
                Part::Value(v) => match v.as_object() {
                    Some(chain) => self.chain_card(page, p, at, lines, chain, &t.turn_ref, k)?,
                    None => continue,
                },
                Part::TooLarge(n) => too_large(n),
            };
            page.stats.chains += 1;
            page.put(card)?;
        }
        page.raw("</details>")
    }

    /// The agent citations: the table of counts, then each session's (of `only`, or of
    /// every session on the one page; none on a split day's first page), each row linked
    /// to the line that made it, which is shown once on the page.
    fn citations(
        &self,
        page: &mut Page,
        only: Option<(&ProjectDay, usize)>,
        bound: u64,
    ) -> Result<(), Halt> {
        let mut table: BTreeMap<(String, String), usize> = BTreeMap::new();
        let groups: Vec<(&ProjectDay, &crate::store::citations::SessionCitations)> = self
            .day
            .projects
            .iter()
            .flat_map(|p| p.citations.iter().map(move |g| (p, g)))
            .filter(|(p, g)| {
                only.is_none_or(|(q, at)| {
                    q.key == p.key && q.sessions[at].session.session_ref == g.session_ref
                })
            })
            .collect();
        for (_, g) in &groups {
            for c in counted(&g.citations) {
                *table
                    .entry((c.citation.kind.clone(), c.citation.check.status.clone()))
                    .or_default() += 1;
            }
        }
        page.put(html! {
            (open("section", "", &["citations"]))
                h2 { @if only.is_some() { "The agents' own citations in this session" } @else { "The agents' own citations" } }
                p.muted { "The " code { "**Evidence**:" } " markers the agents wrote in their messages, each counted once per turn, with the check import made of it." }
                @if table.is_empty() { p.muted { "No agent citations." } }
                @else {
                    table {
                        tr { th { "type" } th { "status" } th { "count" } }
                        @for ((kind, status), n) in &table {
                            tr { td.mono { (T(kind)) } td { span.badge.(status_class(status)) { (T(status)) } } td.num { (n) } }
                        }
                    }
                }
                @if only.is_none() && matches!(self.links, Links::Split { .. }) && !table.is_empty() {
                    p.muted { "Each session's citations, with the lines that made them, are on its page." }
                }
        })?;
        if only.is_none() && matches!(self.links, Links::Split { .. }) {
            return page.raw("</section>");
        }
        let mut left = 0;
        for (p, g) in groups {
            let kept = counted(&g.citations);
            if kept.is_empty() {
                continue;
            }
            if page.bytes > bound {
                left += 1;
                continue;
            }
            stop::check()?;
            page.stats.citations += kept.len();
            let Some((at, _)) = p.session(&g.session_ref) else {
                continue;
            };
            page.put(html! {
                h3 { (T(&p.label)) " · " (T(&g.session_ref)) }
            })?;
            page.raw("<table>")?;
            page.put(html! { tr { th { "type" } th { "status" } th { "reference" } th { "reason" } th { "made by" } } })?;
            let mut listed = 0;
            for (i, c) in kept.iter().enumerate().take(CITATION_ROWS_MAX) {
                if page.bytes > bound {
                    break;
                }
                listed += 1;
                page.put(html! {
                    tr.s id=(anchor(&["citation", &p.key, &g.session_ref, &c.line.to_string(), &i.to_string()])) {
                        td.mono { (T(&c.citation.kind)) }
                        td { span.badge.(status_class(&c.citation.check.status)) { (T(&c.citation.check.status)) } }
                        td.mono { (Cut(&c.citation.reference, FIELD_CUT)) }
                        td { (Cut(&reason(c), FIELD_CUT)) }
                        td {
                            a href=(format!("#{}", anchor(&["line", &p.key, &g.session_ref, &c.line.to_string()]))) { "line " (c.line) }
                            @if let Some(t) = &c.citation.turn_ref {
                                " of " a href=(self.links.turn(p, at, t)) { (T(t)) }
                            }
                        }
                    }
                })?;
            }
            page.raw("</table>")?;
            let lines = SessionLines::open(
                self.reader,
                self.root,
                &p.key,
                &g.session_ref,
                self.day.paged,
            )?;
            let ordinal = p.ordinal(at);
            let mut numbers: Vec<u64> = kept.iter().take(listed).map(|c| c.line).collect();
            numbers.dedup();
            let mut unshown = 0;
            for n in numbers {
                if page.shown.contains(&(ordinal, n)) {
                    continue;
                }
                if page.bytes > bound {
                    unshown += 1;
                    continue;
                }
                for line in lines.read(self.reader, n, n)? {
                    page.shown.insert((ordinal, line.n));
                    page.stats.lines_shown += 1;
                    let id = anchor(&["line", &p.key, &g.session_ref, &line.n.to_string()]);
                    page.put(super::chains::line_view(&line, Some(id)))?;
                }
            }
            page.put(html! {
                @if kept.len() > listed { p.cut { (kept.len() - listed) " more citation(s) of this session are not listed (at most " (CITATION_ROWS_MAX) ", within the page's " (PAGE_MAX >> 20) " MiB)." } }
                @if unshown > 0 { p.cut { (unshown) " more line(s) that made citations are not shown: a page stops at " (PAGE_MAX >> 20) " MiB." } }
            })?;
        }
        page.put(html! {
            @if left > 0 { p.cut { (left) " more session(s) with citations are not shown: a page stops at " (PAGE_MAX >> 20) " MiB." } }
        })?;
        page.raw("</section>")
    }
}

fn too_large(n: usize) -> Markup {
    html! { p.cut { "This chain is " (n) " bytes of JSON, more than the page reads of one chain (" (docs::PART_MAX >> 20) " MiB); its card holds it whole." } }
}

fn file_text(s: &SessionRecord) -> String {
    match &s.file {
        FileState::Indexed(f) => format!("{} lines, {} bytes", f.lines, f.size),
        FileState::Missing => "file missing".to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_page_names_are_recognised_for_their_page_only() {
        let name = session_page_name("view", "0123456789ab", 7);
        assert_eq!(name, "view.0123456789ab.0007.html");
        assert_eq!(session_page_of("view", &name), Some(("0123456789ab", 7)));
        assert_eq!(session_page_of("vie", &name), None);
        assert_eq!(session_page_of("view", "view.html"), None);
        assert_eq!(session_page_of("view", "view.0123456789ab.7.html"), None);
        assert_eq!(session_page_of("view", "view.xyz456789abc.0007.html"), None);
        assert_eq!(href_of("my page#1.html"), "my%20page%231.html");
    }
}
