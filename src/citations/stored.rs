//! Agent citations in the store: which of a turn's citations count, retargeting them
//! when a session changes, and checking them again on demand ([`verify_citations`]).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::store::citations::{CitationLookup, CitationRecord, StoredCheck};
use crate::store::{Lookup, Store, StoreError, Writer};
use crate::workspace::Session;

/// A stored check as the tools and receipts show it.
pub fn verification(check: &StoredCheck) -> crate::citations::receipt::Verification {
    crate::citations::receipt::Verification {
        status: check.status.clone(),
        cwd: check.cwd.clone(),
        sha256: check.sha256.as_ref().map(crate::util::lines::hex),
        file_lines: check.file_lines,
        detail: check.detail.clone(),
    }
}

/// One session's stored citations as they are counted and listed: each once per turn
/// ([`crate::citations::once_per_turn`]).
pub fn counted(records: &[CitationRecord]) -> Vec<&CitationRecord> {
    crate::citations::once_per_turn(records, |r| crate::citations::Place {
        turn_ref: r.citation.turn_ref.as_deref(),
        line: r.line,
        content_index: r.citation.content_index,
        kind: &r.citation.kind,
        reference: &r.citation.reference,
    })
}

/// For each of one session's stored citations, whether [`counted`] keeps it.
fn counted_mask(records: &[CitationRecord]) -> Vec<bool> {
    let mut kept = counted(records).into_iter().peekable();
    records
        .iter()
        .map(|r| {
            let keep = kept.peek().is_some_and(|k| std::ptr::eq(*k, r));
            if keep {
                kept.next();
            }
            keep
        })
        .collect()
}

/// How many citations the store holds, counted by [`counted`], over the workspace.
pub fn counted_total(reader: &impl CitationLookup) -> Result<u64, StoreError> {
    Ok(reader
        .workspace_citations(None)?
        .iter()
        .map(|group| counted(&group.citations).len() as u64)
        .sum())
}

/// Rewrites the turn refs of a session's stored citations after its turns changed in the
/// index (the file, and so the citations, did not).
pub fn retarget_turns(
    writer: &mut Writer,
    project_key: &str,
    session: &Session,
) -> Result<(), StoreError> {
    let Some(scan) = writer.citation_scan(project_key, &session.session_ref)? else {
        return Ok(());
    };
    let mut found = writer.session_citations(project_key, &session.session_ref)?;
    let mut changed = false;
    for record in &mut found {
        let turn = super::scan::turn_of(session, record.line);
        if turn != record.citation.turn_ref {
            record.citation.turn_ref = turn;
            changed = true;
        }
    }
    if changed {
        writer.put_session_citations(project_key, &session.session_ref, &scan, found)?;
    }
    Ok(())
}

/// What [`verify_citations`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reverified {
    pub sessions: usize,
    /// Citations, counted as the tools and `dump` count them ([`counted`]); every stored
    /// entry is checked, a repeat within a turn included.
    pub citations: usize,
    /// Of those, the ones whose result (status, digest, line count or reason) differs
    /// from the stored one.
    pub changed: usize,
    /// Whether new results were stored (a repeat's changed result is stored too).
    pub written: bool,
    /// Citations by status after the check.
    pub by_status: BTreeMap<&'static str, usize>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReverifyError {
    #[error("unknown project_key: {0}")]
    UnknownProject(String),
    #[error("unknown session_ref {session_ref} in project {project_key}")]
    UnknownSession {
        project_key: String,
        session_ref: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lock(crate::documents::DocumentError),
    /// A signal asked the process to stop, at a safe point between two sessions: nothing
    /// was committed.
    #[error(transparent)]
    Stopped(#[from] crate::util::stop::Stopped),
}

/// Checks the stored citations again (all, one project's, or one session's) against the
/// files as they are now, and commits the new results in one transaction when any
/// changed. Citations are not taken from the session files again.
pub fn verify_citations(
    root: &std::path::Path,
    store: &Store,
    locks: &crate::util::wait::Locks,
    project_key: Option<&str>,
    session_ref: Option<&str>,
) -> Result<Reverified, ReverifyError> {
    // The lock order of every writer: the document lock, then the store's write lock.
    let _lock = match crate::documents::lock(root, locks) {
        Ok(lock) => Some(lock),
        // Not the lock file of its own (a hard link, a FIFO): refused, never written.
        Err(crate::documents::DocumentError::Unwritable { rel, source })
            if crate::util::fsutil::not_own_file(&source).is_some() =>
        {
            return Err(ReverifyError::Lock(
                crate::documents::DocumentError::Unwritable { rel, source },
            ));
        }
        Err(e) => {
            tracing::warn!(error = %e, "re-verifying without the document lock");
            None
        }
    };
    let mut writer = store.writer()?;
    if let Some(p) = project_key {
        if !writer.has_project(p)? {
            return Err(ReverifyError::UnknownProject(p.to_owned()));
        }
        if let Some(s) = session_ref
            && writer.session_file(p, s)?.is_none()
        {
            return Err(ReverifyError::UnknownSession {
                project_key: p.to_owned(),
                session_ref: s.to_owned(),
            });
        }
    }
    let mut checker = super::check::Checker::default();
    let mut out = Reverified::default();
    let mut stored_changed = 0;
    for mut group in writer.workspace_citations(project_key)? {
        if session_ref.is_some_and(|s| s != group.session_ref) {
            continue;
        }
        // A safe point per session: a stop leaves the transaction uncommitted.
        crate::util::stop::check()?;
        let Some(scan) = writer.citation_scan(&group.project_key, &group.session_ref)? else {
            continue;
        };
        out.sessions += 1;
        let mut changed = 0;
        let mut changed_counted = 0;
        let mask = counted_mask(&group.citations);
        for (record, counts) in group.citations.iter_mut().zip(mask) {
            let c = &mut record.citation;
            let checked = checker.check(&c.kind, &c.reference, c.check.cwd.as_deref());
            let fresh = StoredCheck {
                status: checked.status.as_str().to_owned(),
                cwd: c.check.cwd.clone(),
                sha256: checked.sha256,
                file_lines: checked.file_lines,
                detail: checked.detail,
            };
            let differs = fresh != c.check;
            if counts {
                *out.by_status.entry(checked.status.as_str()).or_default() += 1;
                out.citations += 1;
                changed_counted += usize::from(differs);
            }
            if differs {
                c.check = fresh;
                changed += 1;
            }
        }
        if changed > 0 {
            writer.put_session_citations(
                &group.project_key,
                &group.session_ref,
                &scan,
                group.citations,
            )?;
            out.changed += changed_counted;
            stored_changed += changed;
        }
    }
    if stored_changed > 0 {
        writer.commit()?;
        out.written = true;
    }
    Ok(out)
}
