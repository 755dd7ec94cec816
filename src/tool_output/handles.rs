//! Handles in the store: what a handle names, and the handles of a session (for `dump handles`).
//!
//! A handle describes itself ([`crate::read::handle`]), so resolving one is a
//! lookup of its session (the sessions whose 32-bit key matches), then one line read and
//! checked as a read checks it, then that line's tool entries: the cost follows the
//! payload, never the session. A result's producing tool is found through its call id in
//! the lines before it, looking back at most [`LINK_LINES`] lines and [`LINK_BYTES`].

use std::collections::HashMap;
use std::path::Path;

use crate::read::compact::{self, Entry, EntryKind};
use crate::read::handle::{self, Handle};
use crate::read::sparse;
use crate::read::{Found, Located};
use crate::read::{Mode, ReadRequest, ReadResult};
use crate::session::{ReadBackError, SessionFile};
use crate::store::{Lookup, Reader, Store, StoreError};
use crate::util::lines::LineEntry;
use crate::workspace::contract::Contract;

/// How far back a tool result's producing tool use is looked for.
pub const LINK_LINES: u64 = 500;
pub const LINK_BYTES: u64 = 32 << 20;

/// What a handle names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    Found(Payload),
    /// The handle named a stored output that is no longer there as it was: its line
    /// changed or is gone, or its session cannot be read. `detail` says which, and what
    /// to do, once.
    Stale {
        tool_name: String,
        detail: String,
    },
    /// Not a handle this store gave, but a character or two away from `nearest`, a
    /// handle of the line it names: most likely mistyped.
    Mistyped {
        nearest: String,
    },
    /// No stored output has this handle: it is not a handle, or it names no session of
    /// the workspace, or no trimmed entry of its line.
    Unknown,
}

/// The advice a stale handle's detail ends with.
const READ_AGAIN: &str =
    "read the session lines again (read_session_lines, compact) for a current handle";

/// A trimmed payload and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    pub project_key: String,
    pub session_ref: String,
    pub line: u64,
    pub kind: EntryKind,
    pub index: usize,
    /// The whole payload.
    pub text: String,
    /// The tool that produced it (`Bash`, `exec_command`, ...), or `unknown`.
    pub tool_name: String,
    /// That tool's input as compaction renders it, or `null` when it was not found.
    pub tool_input: String,
}

/// Why a session's file cannot be used now: a read of the session is refused with this
/// answer (its first message says why, and what to do).
#[derive(Debug, thiserror::Error)]
#[error("{}", crate::read::first_message(.0))]
pub struct Refused(Box<ReadResult>);

/// Why a stored line cannot be read back from its session file now.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error(
        "the session file changed since it was imported; run `evidence-store import`, \
         then read the lines again for current handles"
    )]
    Changed,
    #[error("the session file could not be read: {}", crate::session::strerror(.0))]
    Io(std::io::Error),
}

impl From<ReadBackError> for LineError {
    fn from(e: ReadBackError) -> LineError {
        match e {
            ReadBackError::Changed => LineError::Changed,
            ReadBackError::Io(e) => LineError::Io(e),
        }
    }
}

/// Why the handles of a session cannot be listed.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("lines {first}-{last} are not lines of the session (it has {lines})")]
    Range { first: u64, last: u64, lines: u64 },
    #[error(transparent)]
    Line(#[from] LineError),
}

/// A session whose key a handle names.
struct Candidate {
    project_key: String,
    session_ref: String,
}

/// Resolves `text` (a handle) against the store; session files are under `root`.
pub fn resolve(store: &Store, root: &Path, text: &str) -> Result<Resolved, StoreError> {
    let Some(h) = Handle::parse(text.trim()) else {
        return Ok(Resolved::Unknown);
    };
    let reader = store.reader()?;
    let contract = reader.contract()?;
    let mut stale = None;
    for c in candidates(&reader, h.session)? {
        match resolve_in(&reader, contract, root, &c, h, text.trim())? {
            Resolved::Unknown => {}
            other @ (Resolved::Stale { .. } | Resolved::Mistyped { .. }) => {
                stale.get_or_insert(other);
            }
            found => return Ok(found),
        }
    }
    Ok(stale.unwrap_or(Resolved::Unknown))
}

/// The sessions whose handle key is `key` (one, unless two keys collide).
fn candidates(reader: &Reader, key: u32) -> Result<Vec<Candidate>, StoreError> {
    let mut out = Vec::new();
    let Some(workspace) = reader.workspace()? else {
        return Ok(out);
    };
    for project_key in &workspace.project_keys {
        let Some(project) = reader.project(project_key)? else {
            continue;
        };
        for s in reader.sessions(&project)? {
            if handle::session_key(project_key, &s.session.session_ref) == key {
                out.push(Candidate {
                    project_key: project_key.clone(),
                    session_ref: s.session.session_ref,
                });
            }
        }
    }
    Ok(out)
}

/// The session file of a candidate, checked as a read checks it; `Err` is why it cannot
/// be read now.
fn locate(
    reader: &Reader,
    root: &Path,
    project_key: &str,
    session_ref: &str,
) -> Result<Result<Found, Refused>, StoreError> {
    let req = ReadRequest {
        project_key: project_key.to_owned(),
        session_ref: session_ref.to_owned(),
        start_line: 1.into(),
        end_line: 1.into(),
        mode: Mode::Compact,
    };
    Ok(match crate::read::locate(reader, root, &req)? {
        Located::Found(found) => Ok(found),
        Located::Answer(answer) => Err(Refused(Box::new(answer))),
    })
}

fn resolve_in(
    reader: &Reader,
    contract: Contract,
    root: &Path,
    c: &Candidate,
    h: Handle,
    given: &str,
) -> Result<Resolved, StoreError> {
    let found = match locate(reader, root, &c.project_key, &c.session_ref)? {
        Ok(found) => found,
        Err(refused) => {
            return Ok(Resolved::Stale {
                tool_name: "unknown".into(),
                detail: refused.to_string(),
            });
        }
    };
    let line = u64::from(h.line);
    let gone = || Resolved::Stale {
        tool_name: "unknown".into(),
        detail: format!(
            "line {line} of session {} in project {} is gone (the session has {} lines now); \
             {READ_AGAIN}",
            c.session_ref, c.project_key, found.lines
        ),
    };
    if line == 0 {
        return Ok(Resolved::Unknown);
    }
    if line > found.lines {
        return Ok(gone());
    }
    let entries = reader.lines(found.file_id, line, line)?;
    let Some(entry) = entries.first() else {
        return Ok(gone());
    };
    if !h.matches(&entry.sha256) {
        // One or two characters off a handle of this line: a typo, not a change.
        let key = handle::session_key(&c.project_key, &c.session_ref);
        let nearest = read_one(&found.file, entry)
            .ok()
            .into_iter()
            .flat_map(|text| tool_entries(&text, &found.source, contract))
            .filter(|e| e.trimmed)
            .filter_map(|e| Handle::new(key, line, e.kind, e.index, &entry.sha256))
            .map(Handle::to_uuid)
            .find(|real| near(real, given));
        if let Some(nearest) = nearest {
            return Ok(Resolved::Mistyped { nearest });
        }
        return Ok(Resolved::Stale {
            tool_name: "unknown".into(),
            detail: format!(
                "line {line} of session {} in project {} no longer holds the output this \
                 handle was given for (or the handle is mistyped: copy it exactly); {READ_AGAIN}",
                c.session_ref, c.project_key
            ),
        });
    }
    let text = match read_one(&found.file, entry) {
        Ok(text) => text,
        Err(e) => {
            return Ok(Resolved::Stale {
                tool_name: "unknown".into(),
                detail: e.to_string(),
            });
        }
    };
    let all = tool_entries(&text, &found.source, contract);
    let Some(target) = all
        .into_iter()
        .find(|e| e.kind == h.kind && e.index == usize::from(h.index) && e.trimmed)
    else {
        return Ok(Resolved::Unknown);
    };
    let (tool_name, tool_input) = match target.kind {
        EntryKind::ToolUse => (
            target.tool_name.clone().unwrap_or_else(|| "unknown".into()),
            target.payload.clone(),
        ),
        EntryKind::ToolResult => {
            producer(reader, contract, &found, line, target.call_id.as_deref())?
                .unwrap_or_else(|| ("unknown".into(), "null".into()))
        }
    };
    Ok(Resolved::Found(Payload {
        project_key: c.project_key.clone(),
        session_ref: c.session_ref.clone(),
        line,
        kind: target.kind,
        index: target.index,
        text: target.payload,
        tool_name,
        tool_input,
    }))
}

/// Whether `given` differs from the handle `real` in at most two characters (either case).
fn near(real: &str, given: &str) -> bool {
    real.len() == given.len()
        && real
            .bytes()
            .zip(given.bytes())
            .filter(|(a, b)| !a.eq_ignore_ascii_case(b))
            .count()
            <= 2
}

/// One line's text, checked against its stored digest; `Err` says why not.
fn read_one(file: &SessionFile, entry: &LineEntry) -> Result<String, LineError> {
    Ok(file.read_text(entry)?)
}

/// The name and input of the tool use with `call_id` on or before `line` (the same line
/// first, then back at most [`LINK_LINES`] lines and [`LINK_BYTES`]).
fn producer(
    reader: &Reader,
    contract: Contract,
    found: &Found,
    line: u64,
    call_id: Option<&str>,
) -> Result<Option<(String, String)>, StoreError> {
    let Some(call_id) = call_id else {
        return Ok(None);
    };
    let file = &found.file;
    let first = line.saturating_sub(LINK_LINES).max(1);
    let entries = reader.lines(found.file_id, first, line)?;
    let mut bytes = 0;
    for entry in entries.iter().rev() {
        bytes += entry.len;
        if bytes > LINK_BYTES {
            break;
        }
        let Ok(text) = read_one(file, entry) else {
            break;
        };
        if let Some(used) = tool_entries(&text, &found.source, contract)
            .into_iter()
            .find(|e| e.kind == EntryKind::ToolUse && e.call_id.as_deref() == Some(call_id))
        {
            return Ok(Some((
                used.tool_name.unwrap_or_else(|| "unknown".into()),
                used.payload,
            )));
        }
    }
    Ok(None)
}

/// One handle of a session, as `dump handles` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Listed {
    pub line: u64,
    pub kind: &'static str,
    pub index: usize,
    pub handle: String,
    pub bytes: usize,
    pub tool_name: String,
}

/// The handles of a session's lines `first..=last` (every line when `None`), or why the
/// session cannot be read.
pub fn session_handles(
    store: &Store,
    root: &Path,
    project_key: &str,
    session_ref: &str,
    lines: Option<(u64, u64)>,
) -> Result<Result<Vec<Listed>, ListError>, StoreError> {
    let reader = store.reader()?;
    let contract = reader.contract()?;
    let found = match locate(&reader, root, project_key, session_ref)? {
        Ok(found) => found,
        Err(why) => return Ok(Err(why.into())),
    };
    let (first, last) = lines.unwrap_or((1, found.lines));
    if first == 0 || last > found.lines || first > last {
        return Ok(Err(ListError::Range {
            first,
            last,
            lines: found.lines,
        }));
    }
    let key = handle::session_key(project_key, session_ref);
    // Tool names by call id, from every line read so far and, for a result whose use
    // came before `first`, from the lines before it.
    let mut names: HashMap<String, String> = HashMap::new();
    let mut out = Vec::new();
    let file = &found.file;
    let entries = reader.lines(found.file_id, first, last)?;
    for (line, entry) in (first..).zip(&entries) {
        let text = match read_one(file, entry) {
            Ok(text) => text,
            Err(why) => return Ok(Err(why.into())),
        };
        let all: Vec<Entry> = tool_entries(&text, &found.source, contract);
        for e in &all {
            if let (EntryKind::ToolUse, Some(id), Some(name)) = (e.kind, &e.call_id, &e.tool_name) {
                names.insert(id.clone(), name.clone());
            }
        }
        for e in all.into_iter().filter(|e| e.trimmed) {
            let Some(h) = Handle::new(key, line, e.kind, e.index, &entry.sha256) else {
                continue;
            };
            let tool_name = match e.kind {
                EntryKind::ToolUse => e.tool_name.clone(),
                EntryKind::ToolResult => match e.call_id.as_deref().and_then(|id| names.get(id)) {
                    Some(name) => Some(name.clone()),
                    None => producer(&reader, contract, &found, line, e.call_id.as_deref())?
                        .map(|p| p.0),
                },
            };
            out.push(Listed {
                line,
                kind: match e.kind {
                    EntryKind::ToolUse => "tool_use",
                    EntryKind::ToolResult => "tool_result",
                },
                index: e.index,
                handle: h.to_uuid(),
                bytes: e.payload.len(),
                tool_name: tool_name.unwrap_or_else(|| "unknown".into()),
            });
        }
    }
    Ok(Ok(out))
}

/// A line's tool entries as the workspace's reads show them: in 0.2.10's compact records,
/// or in 0.2.20's sparse ones. A handle's index counts these.
fn tool_entries(text: &str, source: &str, contract: Contract) -> Vec<Entry> {
    if contract.rules().paged_reads {
        sparse::entries(text, source)
    } else {
        compact::entries(text, source)
    }
}
