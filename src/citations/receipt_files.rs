//! Writing receipts: one `ralph_gold.evidence.v1` file per turn that cites something, at
//! `projects/<key>/receipts/evidence-<session_ref>-<turn_ref>.json` (the content is
//! [`crate::citations::receipt`]'s).
//!
//! - The stored citations say which turns cite and where; the session file is read again
//!   for the lines a receipt needs (the turn's first user text, its last timestamp, the
//!   cited messages), each line read checked against its stored digest. A session whose file changed since import gets no
//!   receipt and keeps the ones it has (run `import`, then `export`).
//! - Each receipt is written atomically ([`fsutil::atomic_write`]: a temp file of our own
//!   name created `O_EXCL|O_NOFOLLOW` in the real directory, fsync, rename) and only when
//!   its bytes differ, so an unchanged store exports nothing and a re-export is
//!   byte-identical. A `receipts/` whose real location is outside the workspace (a
//!   symlink) is refused and nothing is written or removed through it.
//! - Stale receipts: a receipt this export did not write is removed when it is ours, that
//!   is a regular file named `evidence-*.json` whose JSON has `_schema`
//!   `ralph_gold.evidence.v1` and `metadata.project_key` equal to the project's key (Ralph
//!   itself writes no `project_key`). So a turn that no longer cites anything, a turn
//!   renamed and a session gone from the index lose their receipts; every other file in
//!   `receipts/` is left alone. Receipts of a session skipped because its file changed
//!   are kept.
//! - Citations on a line outside every turn have no receipt (`dump citations` counts them).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;

use serde::Serialize;

use crate::citations::receipt::{self, Cited, Receipt, TurnInput};
use crate::citations::{Citation, record};
use crate::documents::{self, DocumentError};
use crate::store::citations::{CitationLookup, CitationRecord};
use crate::store::{FileState, Lookup, Reader, SessionRecord, Store, StoreError};
use crate::util::fsutil;
use crate::util::lines::{self, LineEntry};

/// What [`export_receipts`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReceiptsReport {
    pub written: usize,
    pub unchanged: usize,
    /// Stale receipts of ours removed.
    pub removed: usize,
    /// Our temp files (from a killed export) removed.
    pub temp_files_removed: usize,
    /// Why a session or turn got no receipt (`<project>/<session>[/<turn>]: reason`).
    pub skipped: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error(transparent)]
    Document(#[from] DocumentError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{rel} cannot be written: {source}")]
    Unwritable { rel: String, source: io::Error },
}

/// Why a session gets no receipts now (its old ones are kept); the export reports it.
#[derive(Debug, thiserror::Error)]
enum NoReceipts {
    #[error("its session file is missing")]
    FileMissing,
    #[error("{rel}: it changed since it was imported ({what}); run `evidence-store import`")]
    FileChanged { rel: String, what: &'static str },
    #[error("{rel}: {error}")]
    Unopenable {
        rel: String,
        error: crate::session::OpenError,
    },
    #[error("{rel}: {error}")]
    Unreadable { rel: String, error: io::Error },
    #[error("{rel} changed since it was imported (line {line}); run `evidence-store import`")]
    LineChanged { rel: String, line: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Writes every receipt the store's citations call for under `root`, removes stale ones
/// of ours, and reports what it did. Runs under the document lock, in batches
/// ([`documents::Batches`]), each session read from a snapshot taken under it.
pub fn export_receipts(
    store: &Store,
    root: &Path,
    locks: &crate::util::wait::Locks,
) -> Result<ReceiptsReport, ReceiptError> {
    let mut batches = documents::Batches::begin(root, locks)?;
    let mut reader = store.reader()?;
    let mut report = ReceiptsReport::default();
    let Some(workspace) = reader.workspace()? else {
        return Ok(report);
    };
    for key in &workspace.project_keys {
        let Some(project) = reader.project(key)? else {
            continue;
        };
        let dir = format!("projects/{key}/receipts");
        let mut kept: BTreeSet<String> = BTreeSet::new();
        let mut protected: BTreeSet<String> = BTreeSet::new();
        for session_ref in project.session_refs.clone() {
            if batches.between()? {
                reader = store.reader()?;
            }
            let Some(session) = reader.session(key, &session_ref)? else {
                continue;
            };
            let found = reader.session_citations(key, &session_ref)?;
            if found.is_empty() {
                continue;
            }
            let receipts = match session_receipts(&reader, root, key, &session, &found) {
                Ok(receipts) => receipts,
                Err(reason) => {
                    report
                        .skipped
                        .push(format!("{key}/{session_ref}: {reason}"));
                    protected.insert(session_ref);
                    continue;
                }
            };
            for (turn_ref, receipt) in receipts {
                let Some(name) = receipt::file_name(&session_ref, &turn_ref) else {
                    report.skipped.push(format!(
                        "{key}/{session_ref}/{turn_ref}: the turn ref cannot be part of a file name"
                    ));
                    continue;
                };
                let rel = format!("{dir}/{name}");
                let bytes = receipt.to_bytes();
                let unwritable = |source| ReceiptError::Unwritable {
                    rel: rel.clone(),
                    source,
                };
                if fsutil::read_confined(root, &rel)
                    .map_err(unwritable)?
                    .is_some_and(|on_disk| on_disk == bytes)
                {
                    report.unchanged += 1;
                } else {
                    fsutil::atomic_write(store.disk(), root, &rel, &bytes).map_err(unwritable)?;
                    report.written += 1;
                }
                kept.insert(name);
            }
        }
        clean(
            store.disk(),
            root,
            key,
            &dir,
            &kept,
            &protected,
            &mut report,
        )?;
    }
    Ok(report)
}

/// The receipts of one session's turns, in turn order of first citation; `Err` names why
/// the session has none now.
fn session_receipts(
    reader: &Reader,
    root: &Path,
    key: &str,
    record: &SessionRecord,
    found: &[CitationRecord],
) -> Result<Vec<(String, Receipt)>, NoReceipts> {
    let session = &record.session;
    let FileState::Indexed(file) = &record.file else {
        return Err(NoReceipts::FileMissing);
    };
    let mut by_turn: BTreeMap<&str, Vec<&CitationRecord>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for c in found {
        let Some(turn) = c.citation.turn_ref.as_deref() else {
            continue;
        };
        if !by_turn.contains_key(turn) {
            order.push(turn);
        }
        by_turn.entry(turn).or_default().push(c);
    }
    if order.is_empty() {
        return Ok(Vec::new());
    }
    // The receipt's citations, by the one counting rule; the messages it hashes are all
    // those of the turn that carry a citation, repeated or not.
    let counted = super::stored::counted(found);
    let rel = crate::workspace::layout::session_path(key, &session.session_path);
    let handle = crate::session::open_imported(root, &rel, file).map_err(|error| match error {
        crate::session::OpenError::Changed(what) => NoReceipts::FileChanged {
            rel: rel.clone(),
            what,
        },
        error => NoReceipts::Unopenable {
            rel: rel.clone(),
            error,
        },
    })?;
    let mut out = Vec::new();
    for turn_ref in order {
        let Some(turn) = session.turn(turn_ref) else {
            continue;
        };
        let first = u64::try_from(turn.span.start.max(1)).unwrap_or(1);
        let last = u64::try_from(turn.span.end.max(0))
            .unwrap_or(0)
            .min(file.lines);
        let entries = if first <= last {
            reader.lines(file.file_id, first, last)?
        } else {
            Vec::new()
        };
        let cited = &by_turn[turn_ref];
        // The cited messages: (line, content index) in order, once each.
        let mut wanted: Vec<(u64, Option<u64>)> = cited
            .iter()
            .map(|c| (c.line, c.citation.content_index))
            .collect();
        wanted.dedup();
        let numbered: Vec<(u64, &LineEntry)> = (first..).zip(&entries).collect();
        let checked = |line: u64, entry: &LineEntry| -> Result<Vec<u8>, NoReceipts> {
            handle.read_back(entry).map_err(|e| match e {
                crate::session::ReadBackError::Io(error) => NoReceipts::Unreadable {
                    rel: rel.clone(),
                    error,
                },
                crate::session::ReadBackError::Changed => NoReceipts::LineChanged {
                    rel: rel.clone(),
                    line,
                },
            })
        };
        // Only the lines each field needs are read: from the turn's start up to its first
        // user text, from its end back to its last timestamp, and the cited lines.
        let mut user_text: Option<String> = None;
        for &(line, entry) in &numbered {
            let bytes = checked(line, entry)?;
            let text = lines::decode(&bytes);
            if let Some(node) = record::object_of_line(&text)
                && let Some(found) = receipt::line_user_text(&session.source, &node)
            {
                user_text = Some(found);
                break;
            }
        }
        let mut timestamp = None;
        for &(line, entry) in numbered.iter().rev() {
            let bytes = checked(line, entry)?;
            let text = lines::decode(&bytes);
            if let Some(node) = record::object_of_line(&text)
                && let Some(found) = receipt::line_timestamp(&node)
            {
                timestamp = Some(found);
                break;
            }
        }
        let mut messages: Vec<String> = Vec::new();
        let mut lines_cited: Vec<u64> = wanted.iter().map(|w| w.0).collect();
        lines_cited.dedup();
        for line in lines_cited {
            let Some(&(_, entry)) = line
                .checked_sub(first)
                .and_then(|i| numbered.get(usize::try_from(i).ok()?))
            else {
                continue;
            };
            let bytes = checked(line, entry)?;
            let text = lines::decode(&bytes);
            let Some(node) = record::object_of_line(&text) else {
                continue;
            };
            let texts = record::assistant_texts(&session.source, &node);
            for (_, index) in wanted.iter().filter(|(l, _)| *l == line) {
                if let Some(m) = texts
                    .iter()
                    .find(|t| !t.echo && t.content_index.map(|i| i as u64) == *index)
                {
                    messages.push(m.text.clone().into_owned());
                }
            }
        }
        let input = TurnInput {
            project_key: key,
            session_ref: &session.session_ref,
            turn_ref,
            timestamp,
            user_text: user_text.as_deref(),
            messages: messages.iter().map(String::as_str).collect(),
            cited: counted
                .iter()
                .filter(|c| c.citation.turn_ref.as_deref() == Some(turn_ref))
                .map(|c| Cited {
                    line: c.line,
                    citation: Citation {
                        kind: c.citation.kind.clone(),
                        reference: c.citation.reference.clone(),
                        context: c.citation.context.clone(),
                    },
                    check: super::stored::verification(&c.citation.check),
                })
                .collect(),
        };
        out.push((turn_ref.to_owned(), Receipt::build(&input)));
    }
    Ok(out)
}

/// Removes our stale receipts and temp files from `<dir>`, working only through the
/// directory as opened once beneath the workspace root: it is listed, each entry read and
/// removed, and the directory fsynced relative to that descriptor, so a `receipts/`
/// swapped for a symlink meanwhile redirects nothing. A `receipts/` whose real location is
/// outside the workspace is refused with an error naming it and nothing is removed; a
/// missing directory has nothing to clean.
fn clean(
    disk: &crate::util::disk::Disk,
    root: &Path,
    key: &str,
    dir: &str,
    kept: &BTreeSet<String>,
    protected: &BTreeSet<String>,
    report: &mut ReceiptsReport,
) -> Result<(), ReceiptError> {
    let unwritable = |rel: String| move |source| ReceiptError::Unwritable { rel, source };
    let Some(held) =
        fsutil::ConfinedDir::open(disk, root, dir).map_err(unwritable(dir.to_owned()))?
    else {
        return Ok(());
    };
    let Ok(names) = held.names() else {
        return Ok(());
    };
    let mut removed_any = false;
    for os_name in names {
        let name = os_name.to_string_lossy().into_owned();
        if !held.is_regular(&os_name) {
            continue;
        }
        if fsutil::is_temp_name(&name) {
            held.remove(&os_name)
                .map_err(unwritable(format!("{dir}/{name}")))?;
            report.temp_files_removed += 1;
            removed_any = true;
            continue;
        }
        if !receipt::is_receipt_name(&name) || kept.contains(&name) {
            continue;
        }
        let Ok(Some(bytes)) = held.read_regular(&os_name) else {
            continue;
        };
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        let ours = value["_schema"] == receipt::SCHEMA
            && value["metadata"]["project_key"] == key
            && value["metadata"]["session_ref"]
                .as_str()
                .is_some_and(|s| !protected.contains(s));
        if ours {
            held.remove(&os_name)
                .map_err(unwritable(format!("{dir}/{name}")))?;
            report.removed += 1;
            removed_any = true;
        }
    }
    if removed_any {
        held.sync().map_err(unwritable(dir.to_owned()))?;
    }
    Ok(())
}
