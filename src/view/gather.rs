//! What the page shows, gathered from one read snapshot: the workspace, its projects,
//! sessions and turns, which turns have a chain (read from every card, one chain's
//! `turn_ref` at a time), which a work item accounts for without one, the stored agent
//! citations, and a digest naming the state read. Documents are not kept: each part of
//! the page reads the one it shows when it shows it ([`super::docs`]).

use std::collections::{HashMap, HashSet};

use sha2::{Digest, Sha256};

use crate::store::citations::{CitationLookup, SessionCitations};
use crate::store::{FileState, Lookup, Reader, SessionRecord};
use crate::view::ViewError;
use crate::view::docs::{self, Doc, Part};
use crate::workspace::layout;

/// The day as the snapshot holds it.
pub struct Day {
    pub store_shown: String,
    pub workspace: String,
    pub report_date: String,
    pub status: String,
    pub timezone: String,
    pub contract: String,
    pub paged: bool,
    pub projects: Vec<ProjectDay>,
    /// SHA-256 over every session's line-table digest, every document's checksum and
    /// every citation's check, in key order: equal digests, equal pages.
    pub state: String,
    pub sessions: usize,
    pub turns: usize,
}

/// Whether a document is in the store, and readable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    Absent,
    Unreadable(String),
    Readable,
}

impl Held {
    fn of(doc: &Doc) -> Held {
        match doc {
            Doc::Absent => Held::Absent,
            Doc::Unreadable(why) => Held::Unreadable(why.clone()),
            Doc::Text(_) => Held::Readable,
        }
    }
}

pub struct ProjectDay {
    pub key: String,
    pub label: String,
    pub sessions: Vec<SessionRecord>,
    /// The ordinal (from 1, over the whole day) of this project's first session.
    pub first: usize,
    /// Session ref to its position in `sessions`.
    by_ref: HashMap<String, usize>,
    /// Each indexed session's card, by session ref (a card that is absent is left out).
    pub cards: HashMap<String, Held>,
    /// `project-synthesis.json`.
    pub envelope: Held,
    /// Turns (session ref, turn ref) that a card holds a chain for.
    pub written: HashSet<(String, String)>,
    /// Turns a work item accounts for without a chain (`evidence_gap_item`,
    /// `excluded_with_reason`).
    pub not_needed: HashSet<(String, String)>,
    pub citations: Vec<SessionCitations>,
}

/// Whether a turn has its evidence chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    Written,
    NotWritten,
    NotNeeded,
}

impl Coverage {
    pub fn class(self) -> &'static str {
        match self {
            Coverage::Written => "written",
            Coverage::NotWritten => "missing",
            Coverage::NotNeeded => "notneeded",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Coverage::Written => "chain written",
            Coverage::NotWritten => "no chain written",
            Coverage::NotNeeded => "no chain needed",
        }
    }
}

impl ProjectDay {
    pub fn coverage(&self, session_ref: &str, turn_ref: &str) -> Coverage {
        let key = (session_ref.to_owned(), turn_ref.to_owned());
        if self.written.contains(&key) {
            Coverage::Written
        } else if self.not_needed.contains(&key) {
            Coverage::NotNeeded
        } else {
            Coverage::NotWritten
        }
    }

    /// The session `session_ref` and its position, when the index lists it.
    pub fn session(&self, session_ref: &str) -> Option<(usize, &SessionRecord)> {
        let at = *self.by_ref.get(session_ref)?;
        Some((at, &self.sessions[at]))
    }

    /// How many indexed turns have a chain.
    pub fn chained(&self) -> usize {
        self.sessions
            .iter()
            .flat_map(|s| s.session.turns.iter().map(move |t| (s, t)))
            .filter(|(s, t)| {
                self.coverage(&s.session.session_ref, &t.turn_ref) == Coverage::Written
            })
            .count()
    }

    /// The day's ordinal of the session at `at`.
    pub fn ordinal(&self, at: usize) -> usize {
        self.first + at
    }
}

impl Day {
    pub fn project(&self, key: &str) -> Option<&ProjectDay> {
        self.projects.iter().find(|p| p.key == key)
    }
}

pub fn gather(reader: &Reader, store_shown: &str) -> Result<Day, ViewError> {
    let workspace = reader.workspace()?.ok_or(ViewError::NotImported)?;
    let contract = reader.contract()?;
    let mut state = Sha256::new();
    let mut projects = Vec::new();
    let mut first = 1;
    for key in &workspace.project_keys {
        let Some(project) = reader.project(key)? else {
            continue;
        };
        let sessions = reader.sessions(&project)?;
        for s in &sessions {
            state.update(key.as_bytes());
            state.update([0]);
            state.update(s.session.session_ref.as_bytes());
            match &s.file {
                FileState::Indexed(f) => state.update(f.digest),
                FileState::Missing => state.update(b"missing"),
            }
        }
        let citations = reader.workspace_citations(Some(key))?;
        for group in &citations {
            for c in &group.citations {
                state.update(group.session_ref.as_bytes());
                state.update(c.line.to_le_bytes());
                state.update(c.citation.check.status.as_bytes());
            }
        }
        let by_ref = sessions
            .iter()
            .enumerate()
            .map(|(i, s)| (s.session.session_ref.clone(), i))
            .collect();
        let count = sessions.len();
        projects.push(ProjectDay {
            key: project.key.clone(),
            label: project.label.clone(),
            sessions,
            first,
            by_ref,
            cards: HashMap::new(),
            envelope: Held::Absent,
            written: HashSet::new(),
            not_needed: HashSet::new(),
            citations,
        });
        first += count;
    }
    for rel in reader.document_paths()? {
        if let Some(doc) = reader.document(&rel)? {
            state.update(rel.as_bytes());
            state.update(doc.sha256);
        }
    }
    for project in &mut projects {
        let envelope = docs::read(reader, &layout::envelope_path(&project.key))?;
        project.envelope = Held::of(&envelope);
        if let Doc::Text(text) = &envelope {
            for raw in docs::member_elements(text, "work_items") {
                let kind = docs::string_member(raw, "kind").unwrap_or_default();
                if kind != "evidence_gap_item" && kind != "excluded_with_reason" {
                    continue;
                }
                let Some(covered) = docs::member(raw, "covered_turns") else {
                    continue;
                };
                for turn in docs::elements(covered) {
                    if let (Some(s), Some(t)) = (
                        docs::string_member(turn, "session_ref"),
                        docs::string_member(turn, "turn_ref"),
                    ) {
                        project.not_needed.insert((s, t));
                    }
                }
            }
        }
        for i in 0..project.sessions.len() {
            let session_ref = project.sessions[i].session.session_ref.clone();
            let card = docs::read(reader, &layout::card_path(&project.key, &session_ref))?;
            if let Doc::Text(text) = &card {
                for raw in docs::member_elements(text, "evidence_chains") {
                    if !raw.starts_with('{') {
                        continue;
                    }
                    // A chain's key is its string turn_ref, else "" (which no turn has).
                    let turn = docs::string_member(raw, "turn_ref").unwrap_or_default();
                    project.written.insert((session_ref.clone(), turn));
                }
            }
            if !matches!(card, Doc::Absent) {
                project.cards.insert(session_ref, Held::of(&card));
            }
        }
    }
    let sessions = projects.iter().map(|p| p.sessions.len()).sum();
    let turns = projects
        .iter()
        .flat_map(|p| &p.sessions)
        .map(|s| s.session.turns.len())
        .sum();
    Ok(Day {
        store_shown: store_shown.to_owned(),
        workspace: workspace.root_display,
        report_date: workspace.metadata.report_date,
        status: workspace.metadata.status,
        timezone: workspace.metadata.timezone,
        contract: format!(
            "prompt-diary {} (workspace schema {})",
            contract.release(),
            contract.workspace_schema()
        ),
        paged: contract.rules().paged_reads,
        projects,
        state: crate::util::lines::hex(&state.finalize().into()),
        sessions,
        turns,
    })
}

/// A card's chains by turn ref (raw JSON text, in card order), and the chains that name
/// no turn the session indexes.
pub struct Chains<'t> {
    pub by_turn: HashMap<String, Vec<&'t str>>,
    pub unplaced: Vec<&'t str>,
}

pub fn chains<'t>(card: &'t str, session: &SessionRecord) -> Chains<'t> {
    let indexed: HashSet<&str> = session
        .session
        .turns
        .iter()
        .map(|t| t.turn_ref.as_str())
        .collect();
    let mut out = Chains {
        by_turn: HashMap::new(),
        unplaced: Vec::new(),
    };
    for raw in docs::member_elements(card, "evidence_chains") {
        if !raw.starts_with('{') {
            continue;
        }
        match docs::string_member(raw, "turn_ref") {
            Some(t) if indexed.contains(t.as_str()) => out.by_turn.entry(t).or_default().push(raw),
            _ => out.unplaced.push(raw),
        }
    }
    out
}

/// A chain's parsed value (an object), or its size when it is too large to parse.
pub fn chain_value(raw: &str) -> Part {
    docs::part(raw)
}
