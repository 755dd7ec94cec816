//! What the page shows, gathered from one read snapshot: the workspace, its projects,
//! sessions and turns, the documents (cards, envelopes, the daily report) parsed as
//! plain JSON values (the page shows whatever they hold, valid or not), the stored agent
//! citations, and a digest naming the state read.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::store::citations::{CitationLookup, SessionCitations};
use crate::store::{FileState, Lookup, Reader, SessionRecord};
use crate::view::ViewError;

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
    /// `daily-report.json`, when the store holds it.
    pub report: Option<Doc>,
    /// SHA-256 over every session's line-table digest, every document's checksum and
    /// every citation's check, in key order: equal digests, equal pages.
    pub state: String,
}

pub struct ProjectDay {
    pub key: String,
    pub label: String,
    pub sessions: Vec<SessionRecord>,
    /// Each indexed session's evidence card, by session ref.
    pub cards: BTreeMap<String, Doc>,
    /// `project-synthesis.json`, when the store holds it.
    pub envelope: Option<Doc>,
    /// Turns (session ref, turn ref) that a card holds a chain for.
    pub written: HashSet<(String, String)>,
    /// Turns a work item accounts for without a chain (`evidence_gap_item`,
    /// `excluded_with_reason`).
    pub not_needed: HashSet<(String, String)>,
    pub citations: Vec<SessionCitations>,
}

/// A stored document: its JSON value, or why it could not be read as JSON.
pub enum Doc {
    Parsed(Value),
    Unreadable(String),
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

    /// The chains of a session's card (objects of `evidence_chains`), in card order.
    pub fn chains(&self, session_ref: &str) -> Vec<&serde_json::Map<String, Value>> {
        match self.cards.get(session_ref) {
            Some(Doc::Parsed(card)) => card
                .get("evidence_chains")
                .and_then(Value::as_array)
                .map(|chains| chains.iter().filter_map(Value::as_object).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// The envelope's work items (object rows), in envelope order.
    pub fn work_items(&self) -> Vec<&serde_json::Map<String, Value>> {
        match &self.envelope {
            Some(Doc::Parsed(envelope)) => envelope
                .get("work_items")
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(Value::as_object).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }
}

fn parse(bytes: &[u8]) -> Doc {
    match serde_json::from_slice(bytes) {
        Ok(value) => Doc::Parsed(value),
        Err(e) => Doc::Unreadable(format!("not JSON as stored: {e}")),
    }
}

/// `(session_ref, turn_ref)` of a `{session_ref, turn_ref}` object, when both are strings.
pub fn turn_key(value: &Value) -> Option<(&str, &str)> {
    Some((
        value.get("session_ref")?.as_str()?,
        value.get("turn_ref")?.as_str()?,
    ))
}

pub fn gather(reader: &Reader, store_shown: &str) -> Result<Day, ViewError> {
    let workspace = reader.workspace()?.ok_or(ViewError::NotImported)?;
    let contract = reader.contract()?;
    let mut state = Sha256::new();
    let mut projects = Vec::new();
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
        projects.push(ProjectDay {
            key: project.key.clone(),
            label: project.label.clone(),
            sessions,
            cards: BTreeMap::new(),
            envelope: None,
            written: HashSet::new(),
            not_needed: HashSet::new(),
            citations,
        });
    }
    let mut report = None;
    for rel in reader.document_paths()? {
        let Some(doc) = reader.document(&rel)? else {
            continue;
        };
        state.update(rel.as_bytes());
        state.update(doc.sha256);
        if rel == "daily-report.json" {
            report = Some(parse(&doc.bytes));
            continue;
        }
        let Some(rest) = rel.strip_prefix("projects/") else {
            continue;
        };
        let Some((key, file)) = rest.split_once('/') else {
            continue;
        };
        let Some(project) = projects.iter_mut().find(|p| p.key == key) else {
            continue;
        };
        if file == "project-synthesis.json" {
            project.envelope = Some(parse(&doc.bytes));
        } else if let Some(session_ref) = file
            .strip_prefix("evidence/")
            .and_then(|f| f.strip_suffix(".json"))
            && project
                .sessions
                .iter()
                .any(|s| s.session.session_ref == session_ref)
        {
            project
                .cards
                .insert(session_ref.to_owned(), parse(&doc.bytes));
        }
    }
    for project in &mut projects {
        let mut written = HashSet::new();
        for session_ref in project.cards.keys() {
            for chain in project.chains(session_ref) {
                if let Some(turn_ref) = chain.get("turn_ref").and_then(Value::as_str) {
                    written.insert((session_ref.clone(), turn_ref.to_owned()));
                }
            }
        }
        let mut not_needed = HashSet::new();
        for item in project.work_items() {
            let kind = item.get("kind").and_then(Value::as_str).unwrap_or("");
            if kind != "evidence_gap_item" && kind != "excluded_with_reason" {
                continue;
            }
            for turn in item
                .get("covered_turns")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some((s, t)) = turn_key(turn) {
                    not_needed.insert((s.to_owned(), t.to_owned()));
                }
            }
        }
        project.written = written;
        project.not_needed = not_needed;
    }
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
        report,
        state: crate::util::lines::hex(&state.finalize().into()),
    })
}
