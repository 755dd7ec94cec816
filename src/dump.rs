//! `dump`: what the store holds, as JSON values (printed as JSON or as indented text).

use serde_json::{Value, json};

use crate::lines;
use crate::store::{FileState, Lookup, Reader, SessionRecord, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no such {0} in the store")]
    NotFound(String),
    #[error("{0}")]
    Range(String),
}

/// What `dump` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpTarget {
    Tables,
    Project {
        project_key: String,
    },
    Session {
        project_key: String,
        session_ref: String,
    },
    Turn {
        project_key: String,
        session_ref: String,
        turn_ref: String,
    },
    Lines {
        project_key: String,
        session_ref: String,
        start_line: u64,
        end_line: u64,
    },
}

pub fn dump(reader: &Reader, target: &DumpTarget) -> Result<Value, DumpError> {
    match target {
        DumpTarget::Tables => {
            let tables: serde_json::Map<String, Value> = reader
                .counts()?
                .into_iter()
                .map(|(name, n)| (name.to_owned(), json!(n)))
                .collect();
            let workspace = reader.workspace()?;
            Ok(json!({
                "schema_version": reader.schema_version()?,
                "workspace": workspace.as_ref().map(|w| &w.root_display),
                "report_date": workspace.as_ref().map(|w| &w.metadata.report_date),
                "projects": workspace.as_ref().map(|w| &w.project_keys),
                "tables": tables,
            }))
        }
        DumpTarget::Project { project_key } => {
            let project = reader
                .project(project_key)?
                .ok_or_else(|| not_found("project", project_key))?;
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
            let turn = record
                .session
                .turn(turn_ref)
                .ok_or_else(|| not_found("turn", turn_ref))?;
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
        } => {
            let record = session(reader, project_key, session_ref)?;
            let FileState::Indexed(file) = &record.file else {
                return Err(not_found("indexed file for session", session_ref));
            };
            check_range(*start_line, *end_line, file.lines)?;
            let lines: Vec<Value> = reader
                .lines(file.file_id, *start_line, *end_line)?
                .iter()
                .zip(*start_line..)
                .map(|(e, n)| {
                    json!({"line": n, "offset": e.offset, "len": e.len, "raw_bytes": e.decoded_len, "sha256": lines::hex(&e.sha256)})
                })
                .collect();
            Ok(json!({"project_key": project_key, "session_ref": session_ref, "lines": lines}))
        }
    }
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
    DumpError::NotFound(format!("{what} {name:?}"))
}

fn session(
    reader: &Reader,
    project_key: &str,
    session_ref: &str,
) -> Result<SessionRecord, DumpError> {
    reader
        .session(project_key, session_ref)?
        .ok_or_else(|| not_found("session", &format!("{project_key}/{session_ref}")))
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

/// Indented `key: value` text for people.
pub fn to_text(value: &Value) -> String {
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
