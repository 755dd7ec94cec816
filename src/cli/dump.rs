//! `dump`: what the store holds, as JSON values (printed as JSON or as indented text).

use std::path::Path;

use serde_json::{Value, json};

use crate::citations::aggregate;
use crate::read::{self, Mode, ReadRequest, ReadResult, Records};
use crate::store::citations::CitationLookup;
use crate::store::{FileState, Lookup, Reader, SessionRecord, Store, StoreError};
use crate::tool_output::handles;
use crate::util::lines;

#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no such {0}")]
    NotFound(String),
    #[error("{0}")]
    Range(String),
    #[error(transparent)]
    Handles(#[from] handles::ListError),
}

/// What `dump` shows: its subcommands, with their help (`Stats` is the `--stats` flag).
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand)]
pub enum DumpTarget {
    /// Tables and their entry counts (the default)
    Tables,
    #[command(skip)]
    Stats,
    /// One project and its sessions
    Project {
        /// Project key, the directory name under projects/ (e.g. Demo-0123456789ab)
        project_key: String,
    },
    /// One session: its index row, turns and file record
    Session {
        /// Project key, the directory name under projects/
        project_key: String,
        /// Session reference from sessions.index.jsonl (e.g. S0001)
        session_ref: String,
    },
    /// One turn of a session
    Turn {
        /// Project key, the directory name under projects/
        project_key: String,
        /// Session reference from sessions.index.jsonl (e.g. S0001)
        session_ref: String,
        /// Turn reference within the session (e.g. T0001)
        turn_ref: String,
    },
    /// The line index (offset, length, SHA-256) of a range of a session's lines
    Lines {
        /// Project key, the directory name under projects/
        project_key: String,
        /// Session reference from sessions.index.jsonl (e.g. S0001)
        session_ref: String,
        /// First line, 1-based
        start_line: u64,
        /// Last line, inclusive; at most the session's line count
        end_line: u64,
        // What each line shows besides its index entry.
        #[command(flatten)]
        show: LineFlags,
    },
    /// The tool-output handles of a session's trimmed tool entries, with sizes and tool
    /// names (what `tool_output`, `tool_output_read` and `tool_output_grep` take)
    Handles {
        /// Project key, the directory name under projects/
        project_key: String,
        /// Session reference from sessions.index.jsonl (e.g. S0001)
        session_ref: String,
        /// Only this line, 1-based
        line: Option<u64>,
    },
    /// Agent citation counts per turn, session, project and workspace, by type and by
    /// verification status
    Citations {
        /// Only this project (the directory name under projects/)
        project_key: Option<String>,
        /// Only this session of the project (e.g. S0001)
        session_ref: Option<String>,
    },
}

/// The flags of `dump lines` that choose its [`LineView`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::Args)]
pub struct LineFlags {
    /// Also show each line's text (at most 100 lines, as a full read)
    #[arg(long, conflicts_with = "compact")]
    pub text: bool,
    /// Also show each line's compact record, as `read_session_lines` returns it
    /// (trimmed tool entries with their handles)
    #[arg(long)]
    pub compact: bool,
}

impl LineFlags {
    pub fn view(self) -> LineView {
        match (self.text, self.compact) {
            (true, _) => LineView::Text,
            (_, true) => LineView::Compact,
            _ => LineView::Index,
        }
    }
}

/// What `dump lines` adds to each line's index entry (offset, length, SHA-256).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LineView {
    /// The index entry only.
    #[default]
    Index,
    /// The line's text, as a full read returns it (`raw_line`).
    Text,
    /// The line's compact record, as a compact read returns it.
    Compact,
}

/// The view `target` of the store, as a JSON value; session files are under `root`.
pub fn dump(store: &Store, root: &Path, target: &DumpTarget) -> Result<Value, DumpError> {
    let reader = &store.reader()?;
    match target {
        DumpTarget::Handles {
            project_key,
            session_ref,
            line,
        } => {
            session(reader, project_key, session_ref)?;
            let listed = handles::session_handles(
                store,
                root,
                project_key,
                session_ref,
                line.map(|l| (l, l)),
            )??;
            Ok(json!(listed))
        }
        DumpTarget::Stats => stats(store),
        DumpTarget::Citations {
            project_key,
            session_ref,
        } => citations(reader, project_key.as_deref(), session_ref.as_deref()),
        DumpTarget::Tables => {
            let tables: serde_json::Map<String, Value> = reader
                .counts()?
                .into_iter()
                .map(|(name, n)| (name.to_owned(), json!(n)))
                .collect();
            let workspace = reader.workspace()?;
            Ok(json!({
                "store_schema": reader.schema_version()?,
                "workspace": workspace.as_ref().map(|w| &w.root_display),
                "workspace_schema": workspace_schema(reader)?,
                "report_date": workspace.as_ref().map(|w| &w.metadata.report_date),
                "projects": workspace.as_ref().map(|w| &w.project_keys),
                "tables": tables,
            }))
        }
        DumpTarget::Project { project_key } => {
            let project = match reader.project(project_key)? {
                Some(project) => project,
                None => return Err(no_project(reader, project_key)?),
            };
            let sessions: Vec<Value> = reader
                .sessions(&project)?
                .iter()
                .map(session_summary)
                .collect();
            Ok(
                json!({"project_key": project.key, "project_label": project.label, "sessions": sessions}),
            )
        }
        DumpTarget::Session {
            project_key,
            session_ref,
        } => {
            let record = session(reader, project_key, session_ref)?;
            let mut value = session_summary(&record);
            value["turns"] = record
                .session
                .turns
                .iter()
                .map(|t| json!({"turn_ref": t.turn_ref, "start_line": t.span.start, "end_line": t.span.end}))
                .collect();
            Ok(value)
        }
        DumpTarget::Turn {
            project_key,
            session_ref,
            turn_ref,
        } => {
            let record = session(reader, project_key, session_ref)?;
            let Some(turn) = record.session.turn(turn_ref) else {
                let refs: Vec<&str> = record
                    .session
                    .turns
                    .iter()
                    .map(|t| t.turn_ref.as_str())
                    .collect();
                return Err(not_found_among(
                    "turn",
                    turn_ref,
                    &format!("turns of {project_key}/{session_ref}"),
                    &refs,
                ));
            };
            Ok(json!({
                "project_key": project_key,
                "session_ref": session_ref,
                "turn_ref": turn.turn_ref,
                "start_line": turn.span.start,
                "end_line": turn.span.end,
            }))
        }
        DumpTarget::Lines {
            project_key,
            session_ref,
            start_line,
            end_line,
            show,
        } => {
            let show = show.view();
            let record = session(reader, project_key, session_ref)?;
            let FileState::Indexed(file) = &record.file else {
                return Err(not_found("indexed file for session", session_ref));
            };
            check_range(*start_line, *end_line, file.lines)?;
            let mut lines: Vec<Value> = reader
                .lines(file.file_id, *start_line, *end_line)?
                .iter()
                .zip(*start_line..)
                .map(|(e, n)| {
                    json!({"line": n, "offset": e.offset, "len": e.len, "raw_bytes": e.decoded_len, "sha256": lines::hex(&e.sha256)})
                })
                .collect();
            if show != LineView::Index {
                let request = ReadRequest {
                    project_key: project_key.clone(),
                    session_ref: session_ref.clone(),
                    start_line: i64::try_from(*start_line).unwrap_or(i64::MAX).into(),
                    end_line: i64::try_from(*end_line).unwrap_or(i64::MAX).into(),
                    mode: if show == LineView::Text {
                        Mode::Full
                    } else {
                        Mode::Compact
                    },
                };
                add_records(
                    &mut lines,
                    show,
                    read::session_lines::read_session_lines(store, root, &request),
                )?;
            }
            Ok(json!({"project_key": project_key, "session_ref": session_ref, "lines": lines}))
        }
    }
}

/// Puts each line's text (`text`) or compact record (`compact`) of `read` beside its
/// index entry; a read the store refuses (a file changed since import, a range over the
/// read's cap) is the error, with its message.
fn add_records(lines: &mut [Value], show: LineView, read: ReadResult) -> Result<(), DumpError> {
    let ok = match read {
        ReadResult::Ok(ok) => ok,
        ReadResult::Invalid(invalid) => {
            let problems: Vec<String> = invalid
                .errors
                .iter()
                .map(|e| format!("{}: {} ({})", e.field, e.message, e.hint))
                .collect();
            return Err(DumpError::Range(problems.join("; ")));
        }
    };
    let records = match ok.records {
        Records::Full(full) => full.into_iter().map(|r| json!(r.raw_line)).collect(),
        Records::Compact(compact) => compact
            .iter()
            .map(|r| serde_json::to_value(r).map_err(|e| DumpError::Range(e.to_string())))
            .collect::<Result<Vec<Value>, _>>()?,
    };
    let key = if show == LineView::Text {
        "text"
    } else {
        "compact"
    };
    for (line, record) in lines.iter_mut().zip(records) {
        line[key] = record;
    }
    Ok(())
}

/// `dump citations [P [S]]`: citation counts per turn, session, project and workspace,
/// by type and by verification status ([`aggregate`]). An unknown project or session is an
/// error; one without citations counts 0.
fn citations(
    reader: &Reader,
    project_key: Option<&str>,
    session_ref: Option<&str>,
) -> Result<Value, DumpError> {
    if let Some(p) = project_key {
        if !reader.has_project(p)? {
            return Err(no_project(reader, p)?);
        }
        if let Some(s) = session_ref {
            session(reader, p, s)?;
        }
    }
    let groups = reader.workspace_citations(project_key)?;
    let items = groups
        .iter()
        .filter(|g| session_ref.is_none_or(|s| s == g.session_ref))
        .flat_map(|g| {
            crate::citations::stored::counted(&g.citations)
                .into_iter()
                .map(|c| aggregate::Item {
                    project_key: &g.project_key,
                    session_ref: &g.session_ref,
                    turn_ref: c.citation.turn_ref.as_deref(),
                    kind: &c.citation.kind,
                    status: &c.citation.check.status,
                })
        });
    let mut value = serde_json::to_value(aggregate::aggregate(items))
        .map_err(|e| DumpError::Range(e.to_string()))?;
    value["project_key"] = json!(project_key);
    value["session_ref"] = json!(session_ref);
    Ok(value)
}

/// `dump --stats`: what the store holds and how big it is, in one screen.
fn stats(store: &Store) -> Result<Value, DumpError> {
    let reader = store.reader()?;
    let totals = reader.totals()?;
    let tables: serde_json::Map<String, Value> = reader
        .counts()?
        .into_iter()
        .map(|(name, n)| (name.to_owned(), json!(n)))
        .collect();
    let store_bytes = std::fs::metadata(store.path()).map_or(0, |m| m.len());
    Ok(json!({
        "store": store.shown(),
        "store_bytes": store_bytes,
        "store_schema": reader.schema_version()?,
        "workspace": reader.workspace()?.map(|w| w.root_display),
        "contract": contract_name(&reader)?,
        "sessions_indexed": totals.sessions_indexed,
        "sessions_missing": totals.sessions_missing,
        "lines_indexed": totals.lines_indexed,
        "bytes_covered": totals.bytes_covered,
        "documents": totals.documents,
        "document_bytes": totals.document_bytes,
        // `null` for a store from before citations were indexed (read-only, not migrated).
        "citations": crate::citations::stored::counted_total(&reader).ok(),
        "tables": tables,
    }))
}

/// The prompt-diary release whose contract the imported workspace is served by.
fn contract_name(reader: &impl Lookup) -> Result<Option<String>, DumpError> {
    if !reader.has_workspace()? {
        return Ok(None);
    }
    let contract = reader.contract()?;
    Ok(Some(format!(
        "prompt-diary {} (workspace_schema {})",
        contract.release(),
        contract.workspace_schema()
    )))
}

/// The `schema_version` of the imported workspace's `metadata.json` that chose its
/// contract (absent means 2); `null` before any import.
fn workspace_schema(reader: &impl Lookup) -> Result<Option<i64>, DumpError> {
    if !reader.has_workspace()? {
        return Ok(None);
    }
    Ok(Some(reader.contract()?.workspace_schema()))
}

/// [`stats`] as aligned text for people.
fn stats_text(stats: &Value) -> String {
    let n = |key: &str| stats[key].as_u64().unwrap_or(0);
    let text = |key: &str| stats[key].as_str().unwrap_or("-").to_owned();
    let mut out = String::new();
    let mut row = |label: &str, value: String| out.push_str(&format!("{label:<16}{value}\n"));
    row("store", text("store"));
    row("store size", size(n("store_bytes")));
    row(
        "store schema",
        stats["store_schema"]
            .as_u64()
            .map_or("-".to_owned(), |v| v.to_string()),
    );
    row("workspace", text("workspace"));
    row("contract", text("contract"));
    row(
        "sessions",
        format!(
            "{} indexed, {} missing",
            n("sessions_indexed"),
            n("sessions_missing")
        ),
    );
    row("lines indexed", n("lines_indexed").to_string());
    row("bytes covered", size(n("bytes_covered")));
    row(
        "documents",
        format!("{}, {}", n("documents"), size(n("document_bytes"))),
    );
    out.push_str(&format!(
        "Evidence citations: {}\n",
        stats["citations"]
            .as_u64()
            .map_or("-".to_owned(), |v| v.to_string())
    ));
    out.push_str("tables\n");
    if let Some(tables) = stats["tables"].as_object() {
        for (name, count) in tables {
            out.push_str(&format!("  {name:<14}{}\n", count.as_u64().unwrap_or(0)));
        }
    }
    out
}

/// `1234567` → `1234567 bytes (1.2 MiB)`.
fn size(bytes: u64) -> String {
    if bytes < 1 << 10 {
        return format!("{bytes} bytes");
    }
    let (unit, scale) = if bytes < 1 << 20 {
        ("KiB", (1u64 << 10) as f64)
    } else if bytes < 1 << 30 {
        ("MiB", (1u64 << 20) as f64)
    } else {
        ("GiB", (1u64 << 30) as f64)
    };
    format!("{bytes} bytes ({:.1} {unit})", bytes as f64 / scale)
}

/// The line range rules `read_session_lines` applies, with its messages.
fn check_range(start: u64, end: u64, lines: u64) -> Result<(), DumpError> {
    let problem = if start < 1 {
        format!("start_line {start} must be a positive 1-based line number")
    } else if end < start {
        format!("end_line {end} must be >= start_line {start}")
    } else if start > lines {
        format!("start_line {start} is past the session's last line {lines}")
    } else if end > lines {
        format!("end_line {end} is past the session's last line {lines}")
    } else {
        return Ok(());
    };
    Err(DumpError::Range(problem))
}

fn not_found(what: &str, name: &str) -> DumpError {
    DumpError::NotFound(format!("{what} {name:?} in the store"))
}

/// Not found, with the names that would have been found.
fn not_found_among(what: &str, name: &str, among: &str, valid: &[&str]) -> DumpError {
    let valid = if valid.is_empty() {
        "none".to_owned()
    } else {
        valid.join(", ")
    };
    DumpError::NotFound(format!("{what} {name:?} in the store; {among}: {valid}"))
}

/// An unknown project, with the projects the store holds.
fn no_project(reader: &Reader, project_key: &str) -> Result<DumpError, DumpError> {
    let keys = reader
        .workspace()?
        .map(|w| w.project_keys)
        .unwrap_or_default();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    Ok(not_found_among("project", project_key, "projects", &keys))
}

fn session(
    reader: &Reader,
    project_key: &str,
    session_ref: &str,
) -> Result<SessionRecord, DumpError> {
    if let Some(record) = reader.session(project_key, session_ref)? {
        return Ok(record);
    }
    let Some(project) = reader.project(project_key)? else {
        return Err(no_project(reader, project_key)?);
    };
    let sessions = reader.sessions(&project)?;
    let refs: Vec<&str> = sessions
        .iter()
        .map(|s| s.session.session_ref.as_str())
        .collect();
    Err(not_found_among(
        "session",
        &format!("{project_key}/{session_ref}"),
        &format!("sessions of {project_key}"),
        &refs,
    ))
}

fn session_summary(record: &SessionRecord) -> Value {
    let s = &record.session;
    let file = match &record.file {
        FileState::Missing => json!("missing"),
        FileState::Indexed(f) => json!({
            "file_id": f.file_id, "bytes": f.size, "lines": f.lines, "mtime_ns": f.mtime_ns,
            "digest": lines::hex(&f.digest),
        }),
    };
    json!({
        "session_ref": s.session_ref,
        "source": s.source,
        "source_session_id": s.source_session_id,
        "session_path": s.session_path,
        "index_line": s.index_line,
        "target_start_line": s.target.start,
        "target_end_line": s.target.end,
        "turn_count": s.turns.len(),
        "file": file,
    })
}

/// The text people read for the view `target`.
pub fn to_text(target: &DumpTarget, value: &Value) -> String {
    if *target == DumpTarget::Stats {
        return stats_text(value);
    }
    if let (DumpTarget::Handles { .. }, Value::Array(listed)) = (target, value) {
        return handles_text(listed);
    }
    if matches!(target, DumpTarget::Citations { .. })
        && let Ok(counts) = serde_json::from_value::<aggregate::Aggregate>(value.clone())
    {
        return aggregate::to_text(&counts);
    }
    indented(value)
}

/// A table of handles under a header: where each is, its size and its tool.
fn handles_text(listed: &[Value]) -> String {
    if listed.is_empty() {
        return "no handles: no tool entry of these lines is trimmed\n".into();
    }
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = format!(
        "{:<7} {:<12} {:<5} {:<36}  {:>10}  {}\n",
        "LINE", "ENTRY", "INDEX", "HANDLE", "BYTES", "TOOL"
    );
    for h in listed {
        out.push_str(&format!(
            "{:<7} {:<12} {:<5} {:<36}  {:>10}  {}\n",
            text(&h["line"]),
            text(&h["kind"]),
            text(&h["index"]),
            text(&h["handle"]),
            text(&h["bytes"]),
            text(&h["tool_name"])
        ));
    }
    out
}

/// Indented `key: value` text for people.
fn indented(value: &Value) -> String {
    let mut out = String::new();
    write_text(&mut out, value, 0);
    out
}

fn write_text(out: &mut String, value: &Value, indent: usize) {
    let pad = "  ".repeat(indent);
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match v {
                    Value::Object(m) if !m.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        write_text(out, v, indent + 1);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        write_text(out, v, indent + 1);
                    }
                    _ => out.push_str(&format!("{pad}{key}: {}\n", scalar(v))),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Object(_) | Value::Array(_) => {
                        out.push_str(&format!("{pad}-\n"));
                        write_text(out, item, indent + 1);
                    }
                    _ => out.push_str(&format!("{pad}- {}\n", scalar(item))),
                }
            }
        }
        _ => out.push_str(&format!("{pad}{}\n", scalar(value))),
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
        other => other.to_string(),
    }
}
