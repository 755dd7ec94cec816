//! Pure validation of workspace files, with prompt-diary's exact messages.
//!
//! Nothing here touches the filesystem: callers pass file bytes, the path as it should be
//! printed, and (for `session_path`) a callback that answers the one question needing I/O.

use super::{LoadError, Metadata, Session, Span, Turn};
use crate::util::lines::splitlines;
use crate::util::pyjson::{self, Map, Value, py_repr};
use crate::workspace::contract::{self, Contract, Rules};

/// Decodes a workspace file strictly as UTF-8, as prompt-diary does.
pub fn utf8<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, LoadError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let byte = bytes.get(at).copied().unwrap_or_default();
        LoadError::new(format!(
            "{file} is not valid UTF-8: can't decode byte 0x{byte:02x} at offset {at}"
        ))
    })
}

/// A JSON file that must hold one object (`metadata.json`, `project.json`).
pub fn json_object(file: &str, bytes: &[u8]) -> Result<Map, LoadError> {
    let text = utf8(file, bytes)?;
    match pyjson::parse(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(LoadError::new(format!("{file} must contain a JSON object"))),
        Err(e) => Err(LoadError::new(format!(
            "{file} contains invalid JSON: {}",
            e.message()
        ))),
    }
}

fn string_field(file: &str, map: &Map, field: &str) -> Result<String, LoadError> {
    match map.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(LoadError::new(format!(
            "{file} missing string field '{field}'"
        ))),
    }
}

/// `metadata.json` with the contract its `schema_version` selects, checked right after the
/// file parses as an object and before any other field; an unsupported version is refused.
pub fn workspace_metadata(file: &str, bytes: &[u8]) -> Result<(Contract, Metadata), LoadError> {
    let map = json_object(file, bytes)?;
    let version = map.get("schema_version");
    let contract = contract::select(version)
        .ok_or_else(|| LoadError::new(contract::unsupported_message(file, version)))?;
    Ok((
        contract,
        Metadata {
            report_date: string_field(file, &map, "report_date")?,
            status: string_field(file, &map, "status")?,
            timezone: string_field(file, &map, "timezone")?,
            text: String::from_utf8_lossy(bytes).into_owned(),
        },
    ))
}

/// `projects/<dir>/project.json`: returns `(project_key, project_label)`.
pub fn project(file: &str, dir: &str, bytes: &[u8]) -> Result<(String, String), LoadError> {
    let map = json_object(file, bytes)?;
    let key = string_field(file, &map, "project_key")?;
    if key != dir {
        return Err(LoadError::new(format!(
            "{file} project_key {} must match directory {}",
            py_repr(&key),
            py_repr(dir)
        )));
    }
    let label = string_field(file, &map, "project_label")?;
    Ok((key, label))
}

/// Where a `session_path` really leads, when that is somewhere it must not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Escape {
    /// Outside `<project>/sessions`; carries the resolved sessions directory.
    SessionsDir(String),
    /// Inside the sessions directory, but that directory (or the project directory) is
    /// outside the workspace root; carries the resolved path and the resolved root.
    Workspace { resolved: String, root: String },
}

/// What the `session_path` escape checks need from the filesystem: given the normalised
/// path, where it resolves when that is outside its sessions directory or the workspace.
pub type EscapeCheck<'a> = dyn FnMut(&str) -> Option<Escape> + 'a;

/// `sessions.index.jsonl`: every non-blank physical line is one session row, checked by
/// the rules of the workspace's contract.
pub fn index_for(
    rules: Rules,
    file: &str,
    bytes: &[u8],
    escapes: &mut EscapeCheck<'_>,
) -> Result<Vec<Session>, LoadError> {
    let text = utf8(file, bytes)?;
    let mut sessions: Vec<Session> = Vec::new();
    let mut seen = Seen::default();
    for (i, line) in splitlines(text).enumerate() {
        let n = i as u64 + 1;
        if pyjson::is_blank(line) {
            continue;
        }
        let at = |what: String| LoadError::new(format!("{file}:{n} {what}"));
        let row = match pyjson::parse(line) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(at("must contain a JSON object".into())),
            Err(e) => return Err(at(format!("contains invalid JSON: {}", e.message()))),
        };
        let session = session_row(rules, &row, n, escapes).map_err(|e| at(e.to_string()))?;
        if !seen.first(&session.session_ref) {
            return Err(at(format!(
                "duplicate session_ref {}",
                py_repr(&session.session_ref)
            )));
        }
        sessions.push(session);
    }
    Ok(sessions)
}

/// The refs one index (or one row's turns) has named so far, for the duplicate checks: a
/// set, so that a row costs the same however many rows came before it.
#[derive(Default)]
struct Seen(std::collections::HashSet<Ref>);

impl Seen {
    /// Whether `r` is named here for the first time (it is remembered).
    fn first(&mut self, r: &str) -> bool {
        self.0.insert(Ref(r.to_owned()))
    }
}

/// A ref as [`Seen`] holds it; tests count how often two are compared.
#[derive(Eq)]
struct Ref(String);

impl PartialEq for Ref {
    fn eq(&self, other: &Ref) -> bool {
        #[cfg(test)]
        tests::COMPARED.with(|c| c.set(c.get() + 1));
        self.0 == other.0
    }
}

impl std::hash::Hash for Ref {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

/// Python's `isinstance(x, int)`: integers of any size (saturated to `i64`) and booleans.
fn int_value(value: Option<&Value>) -> Option<i64> {
    match value? {
        Value::Bool(b) => Some(i64::from(*b)),
        Value::Int(text) => Some(text.parse().unwrap_or(if text.starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        })),
        _ => None,
    }
}

/// The last line a session file can have: one line per byte of the largest file
/// (2^63 - 1 bytes). The store keeps line numbers as they are, so a larger one is refused
/// rather than changed.
pub const MAX_LINE: i64 = i64::MAX;

/// Why one index row is refused, worded as prompt-diary words it; the caller puts the
/// `<file>:<line>` before it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum RowError {
    #[error("{field} {text} is beyond the last line a session file can have ({MAX_LINE})")]
    BeyondLastLine { field: &'static str, text: String },
    #[error("missing integer field '{field}'")]
    MissingInt { field: &'static str },
    #[error("missing string field '{field}'")]
    MissingString { field: &'static str },
    #[error("missing array field 'turns'")]
    MissingTurns,
    #[error("missing object field 'previous_context'")]
    MissingPreviousContext,
    #[error("{of} start line must be positive")]
    StartNotPositive { of: SpanOf },
    #[error("{of} end line must be >= start line")]
    EndBeforeStart { of: SpanOf },
    #[error("session_ref {} must be a plain file name", py_repr(.session_ref))]
    NotPlainRef { session_ref: String },
    #[error(
        "session_ref {}... is {} bytes, longer than the {MAX_REF_BYTES} a session_ref may have \
         (its receipt file name evidence-<session_ref>-<turn_ref>.json must fit in 255 bytes)",
        py_repr(ref_head(.session_ref)),
        .session_ref.len()
    )]
    RefTooLong { session_ref: String },
    #[error("session_path must be a relative sessions/ path")]
    NotSessionsPath,
    #[error("session_path must resolve under {dir}")]
    OutsideSessionsDir { dir: String },
    #[error("session_path resolves to {resolved}, outside the workspace {root}")]
    OutsideWorkspace { resolved: String, root: String },
    #[error("turns[{position}] must be a JSON object")]
    TurnNotObject { position: usize },
    #[error("turns[{position}] turn_ref {} must match T0001", py_repr(.turn_ref))]
    BadTurnRef { position: usize, turn_ref: String },
    #[error("duplicate turn_ref {}", py_repr(.turn_ref))]
    DuplicateTurnRef { turn_ref: String },
    #[error("previous_context for turn {turn_ref} must end before the assigned turn starts")]
    ContextNotBefore { turn_ref: String },
}

/// The span a [`RowError`] is about, named as the message names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SpanOf {
    /// The row's `target_start_line`..`target_end_line`.
    Target,
    /// A turn's span.
    Turn(String),
    /// A turn's `previous_context`.
    PreviousContext(String),
}

impl std::fmt::Display for SpanOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpanOf::Target => f.write_str("target span"),
            SpanOf::Turn(turn_ref) => write!(f, "turn {turn_ref}"),
            SpanOf::PreviousContext(turn_ref) => write!(f, "previous_context for turn {turn_ref}"),
        }
    }
}

/// The first 40 bytes of a too long `session_ref` (cut back to a character boundary), as
/// its message shows it.
fn ref_head(session_ref: &str) -> &str {
    &session_ref[..crate::util::text::floor_char_boundary(session_ref, 40)]
}

/// A line number: an integer (as [`int_value`] reads it) no larger than [`MAX_LINE`].
fn int(map: &Map, field: &'static str) -> Result<i64, RowError> {
    if let Some(Value::Int(text)) = map.get(field)
        && !text.starts_with('-')
        && text.parse::<i64>().is_err()
    {
        return Err(RowError::BeyondLastLine {
            field,
            text: text.clone(),
        });
    }
    int_value(map.get(field)).ok_or(RowError::MissingInt { field })
}

fn string(map: &Map, field: &'static str) -> Result<String, RowError> {
    match map.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(RowError::MissingString { field }),
    }
}

fn span(of: SpanOf, start: i64, end: i64) -> Result<Span, RowError> {
    if start < 1 {
        return Err(RowError::StartNotPositive { of });
    }
    if end < start {
        return Err(RowError::EndBeforeStart { of });
    }
    Ok(Span { start, end })
}

/// One row, checked in prompt-diary's order (the first failure wins). Errors are returned
/// without the `<file>:<line>` prefix, which the caller adds.
fn session_row(
    rules: Rules,
    row: &Map,
    n: u64,
    escapes: &mut EscapeCheck<'_>,
) -> Result<Session, RowError> {
    let target_start = int(row, "target_start_line")?;
    let target_end = int(row, "target_end_line")?;
    let session_ref = string(row, "session_ref")?;
    if !is_plain_ref(&session_ref) {
        return Err(RowError::NotPlainRef { session_ref });
    }
    if session_ref.len() > MAX_REF_BYTES {
        return Err(RowError::RefTooLong { session_ref });
    }
    let source = string(row, "source")?;
    let source_session_id = string(row, "source_session_id")?;
    let raw_path = string(row, "session_path")?;
    let session_path = normalise_session_path(&raw_path).ok_or(RowError::NotSessionsPath)?;
    match escapes(&session_path) {
        None => {}
        Some(Escape::SessionsDir(dir)) => {
            return Err(RowError::OutsideSessionsDir { dir });
        }
        Some(Escape::Workspace { resolved, root }) => {
            return Err(RowError::OutsideWorkspace { resolved, root });
        }
    }
    let target = span(SpanOf::Target, target_start, target_end)?;
    let Some(Value::Array(items)) = row.get("turns") else {
        return Err(RowError::MissingTurns);
    };
    let mut turns: Vec<Turn> = Vec::with_capacity(items.len());
    let mut seen = Seen::default();
    for (k, item) in items.iter().enumerate() {
        let position = k + 1;
        let Value::Object(turn) = item else {
            return Err(RowError::TurnNotObject { position });
        };
        let turn_ref = string(turn, "turn_ref")?;
        if !is_turn_ref(&turn_ref) {
            return Err(RowError::BadTurnRef { position, turn_ref });
        }
        if !seen.first(&turn_ref) {
            return Err(RowError::DuplicateTurnRef { turn_ref });
        }
        let start = int(turn, "turn_start_line")?;
        let end = int(turn, "turn_end_line")?;
        let span = span(SpanOf::Turn(turn_ref.clone()), start, end)?;
        if rules.previous_context {
            previous_context(turn, &turn_ref, span.start)?;
        }
        turns.push(Turn { turn_ref, span });
    }
    Ok(Session {
        session_ref,
        source,
        source_session_id,
        session_path,
        target,
        turns,
        index_line: n,
    })
}

/// A turn's optional `previous_context {start_line, end_line}` (absent or `null`: none): the
/// human turn before it, which must end before this turn starts. Checked, not kept: no tool
/// reads it.
fn previous_context(turn: &Map, turn_ref: &str, turn_start: i64) -> Result<(), RowError> {
    let context = match turn.get("previous_context") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(context)) => context,
        Some(_) => return Err(RowError::MissingPreviousContext),
    };
    let start = int(context, "start_line")?;
    let end = int(context, "end_line")?;
    let context = span(SpanOf::PreviousContext(turn_ref.to_owned()), start, end)?;
    if context.end >= turn_start {
        return Err(RowError::ContextNotBefore {
            turn_ref: turn_ref.to_owned(),
        });
    }
    Ok(())
}

/// The longest `session_ref` in bytes: the longest file name made of it,
/// `evidence-<session_ref>-T0001.json` (20 bytes more), must fit in a file name (255
/// bytes); the card `<session_ref>.json` and the temp names of both are shorter.
pub const MAX_REF_BYTES: usize = 255 - "evidence--T0001.json".len();

/// A `session_ref` names the card file `evidence/<session_ref>.json`, so it must stay one
/// path component: no `/` and no NUL. Everything else (even `""`, `.` and `..`, which give
/// `.json`, `..json` and `...json`) is a file name inside the evidence directory.
pub fn is_plain_ref(session_ref: &str) -> bool {
    !session_ref.contains(['/', '\0'])
}

/// `T` and exactly four digits. prepare writes ASCII digits; prompt-diary's Python `\d`
/// also accepts other Unicode decimal digits, which only hand-made input contains.
pub fn is_turn_ref(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 5 && b[0] == b'T' && b[1..].iter().all(u8::is_ascii_digit)
}

/// Normalises `session_path` like `PurePosixPath` (empty and `.` parts dropped) and checks
/// it is relative, has no `..` and starts with `sessions`. `None` when it breaks a rule.
pub fn normalise_session_path(path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.first() != Some(&"sessions") || parts.contains(&"..") {
        return None;
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// How many times two refs were compared by the duplicate checks on this thread.
        pub(super) static COMPARED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// The duplicate checks cost a bounded number of comparisons per row, not one per
    /// earlier row: 4,000 sessions (and a row of 4,000 turns) are checked with fewer
    /// comparisons than rows. Scanning the rows before would take 8 million.
    #[test]
    fn duplicate_checks_compare_each_ref_a_bounded_number_of_times() {
        const N: usize = 4000;
        let rows: String = (1..=N)
            .map(|k| BASE_ROW.replace("S0001", &format!("S{k:05}")) + "\n")
            .collect();
        COMPARED.with(|c| c.set(0));
        check_index(&rows, Ok(N));
        let sessions = COMPARED.with(std::cell::Cell::get);
        assert!(
            sessions < N as u64,
            "{sessions} comparisons for {N} sessions"
        );

        let turns: Vec<String> = (1..=N)
            .map(|t| {
                format!(r#"{{"turn_ref": "T{t:04}", "turn_start_line": 1, "turn_end_line": 1}}"#)
            })
            .collect();
        let row = row_with("turns", Some(&format!("[{}]", turns.join(","))));
        COMPARED.with(|c| c.set(0));
        check_index(&row, Ok(1));
        let compared = COMPARED.with(std::cell::Cell::get);
        assert!(compared < N as u64, "{compared} comparisons for {N} turns");
    }

    /// `metadata.json`: `report_date`, `status`, `timezone` must be strings (checked in
    /// that order).
    fn metadata(file: &str, bytes: &[u8]) -> Result<Metadata, LoadError> {
        workspace_metadata(file, bytes).map(|(_, metadata)| metadata)
    }

    /// `sessions.index.jsonl` of a 0.2.10 workspace.
    fn index(
        file: &str,
        bytes: &[u8],
        escapes: &mut EscapeCheck<'_>,
    ) -> Result<Vec<Session>, LoadError> {
        index_for(Contract::V0_2_10.rules(), file, bytes, escapes)
    }

    const F: &str = "/w/metadata.json";

    fn check_metadata(text: &str, expect: Result<(&str, &str, &str), &str>) {
        let got = metadata(F, text.as_bytes())
            .map(|m| (m.report_date, m.status, m.timezone))
            .map_err(|e| e.message);
        let expect = expect
            .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
            .map_err(str::to_owned);
        assert_eq!(got, expect, "{text}");
    }

    #[test]
    fn metadata_rules() {
        let ok = r#"{"report_date": "2026-01-15", "status": "final", "timezone": "UTC"}"#;
        check_metadata(ok, Ok(("2026-01-15", "final", "UTC")));
        check_metadata(
            r#"{"report_date": "", "status": "", "timezone": ""}"#,
            Ok(("", "", "")),
        );
        check_metadata(
            "{bad",
            Err(
                "/w/metadata.json contains invalid JSON: Expecting property name enclosed in double quotes",
            ),
        );
        check_metadata(
            "",
            Err("/w/metadata.json contains invalid JSON: Expecting value"),
        );
        check_metadata("[]", Err("/w/metadata.json must contain a JSON object"));
        check_metadata(
            "{}",
            Err("/w/metadata.json missing string field 'report_date'"),
        );
        check_metadata(
            r#"{"report_date": "d", "status": 1, "timezone": "UTC"}"#,
            Err("/w/metadata.json missing string field 'status'"),
        );
        check_metadata(
            r#"{"report_date": "d", "status": "s"}"#,
            Err("/w/metadata.json missing string field 'timezone'"),
        );
        check_metadata(
            "\u{feff}{}",
            Err(
                "/w/metadata.json contains invalid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig)",
            ),
        );
    }

    #[test]
    fn metadata_must_be_utf8() {
        let err = metadata(F, b"\xff{}").unwrap_err();
        assert_eq!(
            err.message,
            "/w/metadata.json is not valid UTF-8: can't decode byte 0xff at offset 0"
        );
    }

    #[test]
    fn project_rules() {
        let f = "/w/projects/P-1/project.json";
        let check = |text: &str, expect: Result<(&str, &str), &str>| {
            let got = project(f, "P-1", text.as_bytes()).map_err(|e| e.message);
            let expect = expect
                .map(|(k, l)| (k.to_owned(), l.to_owned()))
                .map_err(str::to_owned);
            assert_eq!(got, expect, "{text}");
        };
        check(
            r#"{"project_key": "P-1", "project_label": "P"}"#,
            Ok(("P-1", "P")),
        );
        check(
            r#"{"project_key": "Other", "project_label": "P"}"#,
            Err("/w/projects/P-1/project.json project_key 'Other' must match directory 'P-1'"),
        );
        check(
            r#"{"project_label": "P"}"#,
            Err("/w/projects/P-1/project.json missing string field 'project_key'"),
        );
        check(
            r#"{"project_key": "P-1"}"#,
            Err("/w/projects/P-1/project.json missing string field 'project_label'"),
        );
        check(
            "[1]",
            Err("/w/projects/P-1/project.json must contain a JSON object"),
        );
    }

    const BASE_ROW: &str = r#"{"session_ref": "S0001", "source": "codex", "source_session_id": "id1", "session_path": "sessions/codex/a.jsonl", "target_start_line": 1, "target_end_line": 3, "turns": [{"turn_ref": "T0001", "turn_start_line": 1, "turn_end_line": 3}]}"#;
    const I: &str = "/w/projects/P-1/sessions.index.jsonl";

    /// The base row with `key` set to the JSON `value` (or removed when `value` is None).
    fn row_with(key: &str, value: Option<&str>) -> String {
        let Ok(Value::Object(mut map)) = pyjson::parse(BASE_ROW) else {
            unreachable!()
        };
        match value {
            Some(v) => {
                map.insert(key.to_owned(), pyjson::parse(v).expect("test JSON"));
            }
            None => {
                map.shift_remove(key);
            }
        }
        pyjson::to_sorted_compact(&Value::Object(map))
    }

    /// A refused row is told apart by its kind and the data it names, not by its words.
    #[test]
    fn a_refused_row_is_a_kind_carrying_what_it_names() {
        let refused = |key: &str, value: Option<&str>| {
            let Ok(Value::Object(row)) = pyjson::parse(&row_with(key, value)) else {
                unreachable!()
            };
            let rules = Contract::V0_2_10.rules();
            session_row(rules, &row, 1, &mut |_: &str| None).expect_err("refused")
        };
        assert_eq!(
            refused("target_end_line", None),
            RowError::MissingInt {
                field: "target_end_line"
            }
        );
        assert_eq!(
            refused("target_start_line", Some("0")),
            RowError::StartNotPositive { of: SpanOf::Target }
        );
        assert_eq!(
            refused("session_ref", Some(r#""a/b""#)),
            RowError::NotPlainRef {
                session_ref: "a/b".into()
            }
        );
        assert_eq!(
            refused(
                "turns",
                Some(r#"[{"turn_ref": "T0001", "turn_start_line": 4, "turn_end_line": 3}]"#)
            ),
            RowError::EndBeforeStart {
                of: SpanOf::Turn("T0001".into())
            }
        );
        let escaped = {
            let Ok(Value::Object(row)) = pyjson::parse(BASE_ROW) else {
                unreachable!()
            };
            let mut outside = |_: &str| Some(Escape::SessionsDir("/real/sessions".into()));
            session_row(Contract::V0_2_10.rules(), &row, 1, &mut outside).expect_err("refused")
        };
        assert_eq!(
            escaped,
            RowError::OutsideSessionsDir {
                dir: "/real/sessions".into()
            }
        );
        assert_eq!(
            RowError::ContextNotBefore {
                turn_ref: "T0002".into()
            }
            .to_string(),
            "previous_context for turn T0002 must end before the assigned turn starts"
        );
    }

    fn check_index(text: &str, expect: Result<usize, &str>) {
        let mut no_escape = |_: &str| None;
        let got = index(I, text.as_bytes(), &mut no_escape)
            .map(|s| s.len())
            .map_err(|e| e.message);
        assert_eq!(got, expect.map_err(|m| format!("{I}:{m}")), "{text}");
    }

    #[test]
    fn index_rows_in_order_of_checks() {
        let cases: &[(&str, Option<&str>, Result<usize, &str>)] = &[
            (
                "target_start_line",
                None,
                Err("1 missing integer field 'target_start_line'"),
            ),
            (
                "target_start_line",
                Some("1.0"),
                Err("1 missing integer field 'target_start_line'"),
            ),
            ("target_start_line", Some("true"), Ok(1)),
            (
                "target_start_line",
                Some("\"1\""),
                Err("1 missing integer field 'target_start_line'"),
            ),
            (
                "session_ref",
                None,
                Err("1 missing string field 'session_ref'"),
            ),
            ("session_ref", Some("\"\""), Ok(1)),
            ("source", None, Err("1 missing string field 'source'")),
            (
                "source_session_id",
                None,
                Err("1 missing string field 'source_session_id'"),
            ),
            (
                "session_path",
                None,
                Err("1 missing string field 'session_path'"),
            ),
            (
                "session_path",
                Some("\"/tmp/a.jsonl\""),
                Err("1 session_path must be a relative sessions/ path"),
            ),
            (
                "session_path",
                Some("\"sessions/../sessions/codex/a.jsonl\""),
                Err("1 session_path must be a relative sessions/ path"),
            ),
            (
                "session_path",
                Some("\"evidence/a.jsonl\""),
                Err("1 session_path must be a relative sessions/ path"),
            ),
            ("session_path", Some("\"./sessions/codex/a.jsonl\""), Ok(1)),
            ("session_path", Some("\"sessions//codex/./a.jsonl\""), Ok(1)),
            ("session_path", Some("\"sessions\""), Ok(1)),
            (
                "session_path",
                Some("\"\""),
                Err("1 session_path must be a relative sessions/ path"),
            ),
            (
                "session_path",
                Some(r#""sessions\\codex\\a.jsonl""#),
                Err("1 session_path must be a relative sessions/ path"),
            ),
            (
                "target_start_line",
                Some("0"),
                Err("1 target span start line must be positive"),
            ),
            (
                "target_end_line",
                Some("100000000000000000000000"),
                Err(
                    "1 target_end_line 100000000000000000000000 is beyond the last line a session file can have (9223372036854775807)",
                ),
            ),
            ("target_end_line", Some("9223372036854775807"), Ok(1)),
            ("turns", None, Err("1 missing array field 'turns'")),
            ("turns", Some("{}"), Err("1 missing array field 'turns'")),
            ("turns", Some("[]"), Ok(1)),
            (
                "turns",
                Some(r#"[{"turn_ref": "T0001", "turn_start_line": 1, "turn_end_line": 3}, 5]"#),
                Err("1 turns[2] must be a JSON object"),
            ),
            (
                "turns",
                Some(r#"[{"turn_start_line": 1, "turn_end_line": 3}]"#),
                Err("1 missing string field 'turn_ref'"),
            ),
            (
                "turns",
                Some(r#"[{"turn_ref": "T001"}]"#),
                Err("1 turns[1] turn_ref 'T001' must match T0001"),
            ),
            (
                "turns",
                Some(r#"[{"turn_ref": "T00001"}]"#),
                Err("1 turns[1] turn_ref 'T00001' must match T0001"),
            ),
            (
                "turns",
                Some(r#"[{"turn_ref": "t0001"}]"#),
                Err("1 turns[1] turn_ref 't0001' must match T0001"),
            ),
            (
                "turns",
                Some(r#"[{"turn_ref": "T0001\n"}]"#),
                Err("1 turns[1] turn_ref 'T0001\\n' must match T0001"),
            ),
            (
                "turns",
                Some(r#"[{"turn_ref": "T0000", "turn_start_line": 1, "turn_end_line": 1}]"#),
                Ok(1),
            ),
            (
                "turns",
                Some(
                    r#"[{"turn_ref":"T0001","turn_start_line":1,"turn_end_line":1}, {"turn_ref":"T0001"}]"#,
                ),
                Err("1 duplicate turn_ref 'T0001'"),
            ),
            (
                "turns",
                Some(r#"[{"turn_ref": "T0001", "turn_end_line": 3}]"#),
                Err("1 missing integer field 'turn_start_line'"),
            ),
            (
                "turns",
                Some(r#"[{"turn_ref": "T0001", "turn_start_line": 3}]"#),
                Err("1 missing integer field 'turn_end_line'"),
            ),
            (
                "turns",
                Some(r#"[{"turn_ref": "T0002", "turn_start_line": 0, "turn_end_line": 3}]"#),
                Err("1 turn T0002 start line must be positive"),
            ),
            (
                "turns",
                Some(r#"[{"turn_ref": "T0002", "turn_start_line": 3, "turn_end_line": 2}]"#),
                Err("1 turn T0002 end line must be >= start line"),
            ),
            (
                "turns",
                Some(
                    r#"[{"turn_ref": "T0002", "turn_start_line": 50, "turn_end_line": 60}, {"turn_ref": "T0001", "turn_start_line": 2, "turn_end_line": 3}]"#,
                ),
                Ok(1),
            ),
            ("extra", Some("NaN"), Ok(1)),
        ];
        for (key, value, expect) in cases {
            check_index(&row_with(key, *value), *expect);
        }
    }

    /// A schema-7 row whose turn T0001 spans 5-9, with `extra` merged into the turn;
    /// messages as prompt-diary 0.2.20's loader gives them.
    #[test]
    fn previous_context_rules_of_schema_7() {
        let cases: &[(&str, Result<usize, &str>)] = &[
            ("", Ok(1)),
            (r#", "previous_context": null"#, Ok(1)),
            (
                r#", "previous_context": {"start_line": 1, "end_line": 4}"#,
                Ok(1),
            ),
            (
                r#", "previous_context": {"start_line": 1, "end_line": 5}"#,
                Err("1 previous_context for turn T0001 must end before the assigned turn starts"),
            ),
            (
                r#", "previous_context": [1, 4]"#,
                Err("1 missing object field 'previous_context'"),
            ),
            (
                r#", "previous_context": "x""#,
                Err("1 missing object field 'previous_context'"),
            ),
            (
                r#", "previous_context": {}"#,
                Err("1 missing integer field 'start_line'"),
            ),
            (
                r#", "previous_context": {"end_line": 4}"#,
                Err("1 missing integer field 'start_line'"),
            ),
            (
                r#", "previous_context": {"start_line": 1.0, "end_line": 4}"#,
                Err("1 missing integer field 'start_line'"),
            ),
            (
                r#", "previous_context": {"start_line": 1}"#,
                Err("1 missing integer field 'end_line'"),
            ),
            (
                r#", "previous_context": {"start_line": 0, "end_line": 4}"#,
                Err("1 previous_context for turn T0001 start line must be positive"),
            ),
            (
                r#", "previous_context": {"start_line": 4, "end_line": 3}"#,
                Err("1 previous_context for turn T0001 end line must be >= start line"),
            ),
            (
                r#", "previous_context": {"start_line": true, "end_line": true}"#,
                Ok(1),
            ),
            // The turn's own span is checked first.
            (
                r#", "previous_context": {"start_line": 1, "end_line": 4}, "turn_start_line": 0"#,
                Err("1 turn T0001 start line must be positive"),
            ),
            // Subagent fields are neither needed nor refused.
            (r#", "subagent_path": "", "target_subagents": [1]"#, Ok(1)),
        ];
        let row = |extra: &str| {
            format!(
                r#"{{"session_ref": "S0001", "source": "codex", "source_session_id": "id1", "session_path": "sessions/codex/a.jsonl", "target_start_line": 1, "target_end_line": 9, "turns": [{{"turn_ref": "T0001", "turn_start_line": 5, "turn_end_line": 9{extra}}}]}}"#
            )
        };
        for (extra, expect) in cases {
            let got = index_for(
                Contract::V0_2_20.rules(),
                I,
                row(extra).as_bytes(),
                &mut |_: &str| None,
            )
            .map(|s| s.len())
            .map_err(|e| e.message);
            assert_eq!(got, expect.map_err(|m| format!("{I}:{m}")), "{extra}");
            // 0.2.10 never reads the field.
            if !extra.contains("turn_start_line") {
                assert_eq!(
                    index(I, row(extra).as_bytes(), &mut |_: &str| None).map(|s| s.len()),
                    Ok(1),
                    "{extra}"
                );
            }
        }
    }

    #[test]
    fn schema_version_selects_the_contract_before_other_fields() {
        let check = |text: &str, expect: Result<Contract, &str>| {
            let got = workspace_metadata(F, text.as_bytes())
                .map(|(c, _)| c)
                .map_err(|e| e.message);
            assert_eq!(got, expect.map_err(str::to_owned), "{text}");
        };
        let fields = r#""report_date": "d", "status": "s", "timezone": "UTC""#;
        check(&format!("{{{fields}}}"), Ok(Contract::V0_2_10));
        check(
            &format!(r#"{{"schema_version": 2, {fields}}}"#),
            Ok(Contract::V0_2_10),
        );
        check(
            &format!(r#"{{"schema_version": 7, {fields}}}"#),
            Ok(Contract::V0_2_20),
        );
        check(
            &format!(r#"{{"schema_version": 7.0, {fields}}}"#),
            Ok(Contract::V0_2_20),
        );
        let refused = |found: &str| {
            format!(
                "Unsupported prepared workspace schema at {F}. Run prompt-diary prepare --force \
                 for this report date and timezone to rebuild it. evidence-store serves \
                 workspace schema_version 2 (prompt-diary 0.2.10) and 7 (prompt-diary 0.2.20); \
                 this workspace has schema_version {found}. Prepare it again with a prompt-diary \
                 release evidence-store serves (`pip install prompt-diary==0.2.20`)."
            )
        };
        for (version, found) in [
            ("3", "3"),
            ("\"7\"", "\"7\""),
            ("null", "null"),
            ("true", "true"),
        ] {
            check(
                &format!(r#"{{"schema_version": {version}, {fields}}}"#),
                Err(&refused(found)),
            );
        }
        // Refused before the missing report_date is noticed, as 0.2.20 does.
        check(r#"{"schema_version": 5}"#, Err(&refused("5")));
        check(
            r#"{"schema_version": 7}"#,
            Err("/w/metadata.json missing string field 'report_date'"),
        );
    }

    #[test]
    fn index_file_level_rules() {
        check_index("", Ok(0));
        check_index(
            "\n\n{bad\n",
            Err("3 contains invalid JSON: Expecting property name enclosed in double quotes"),
        );
        check_index(
            "{\"a\":1,}",
            Err("1 contains invalid JSON: Expecting property name enclosed in double quotes"),
        );
        check_index("{} {}", Err("1 contains invalid JSON: Extra data"));
        check_index("\n\"str\"\n", Err("2 must contain a JSON object"));
        check_index(
            &format!("{BASE_ROW}\n{BASE_ROW}\n"),
            Err("2 duplicate session_ref 'S0001'"),
        );
        check_index(
            &format!("{BASE_ROW}\n \t\n{BASE_ROW}\n"),
            Err("3 duplicate session_ref 'S0001'"),
        );
        check_index(&format!("{BASE_ROW}\r\n\r\n"), Ok(1));
        check_index(
            &BASE_ROW.replace("\"codex\"", "\"co\u{2028}dex\""),
            Err("1 contains invalid JSON: Unterminated string starting at"),
        );
        // A row that is both malformed and a duplicate reports the malformation.
        let bad_dup = row_with("turns", Some("{}"));
        check_index(
            &format!("{BASE_ROW}\n{bad_dup}\n"),
            Err("2 missing array field 'turns'"),
        );
    }

    #[test]
    fn escaping_session_paths_are_reported_with_the_resolved_dir() {
        let mut escapes = |p: &str| {
            (p == "sessions/esc/a.jsonl").then(|| Escape::SessionsDir("/real/P-1/sessions".into()))
        };
        let row = row_with("session_path", Some("\"sessions/esc/a.jsonl\""));
        let err = index(I, row.as_bytes(), &mut escapes).unwrap_err();
        assert_eq!(
            err.message,
            format!("{I}:1 session_path must resolve under /real/P-1/sessions")
        );
    }

    #[test]
    fn sessions_outside_the_workspace_are_refused() {
        let mut escapes = |_: &str| {
            Some(Escape::Workspace {
                resolved: "/elsewhere/codex/a.jsonl".into(),
                root: "/w".into(),
            })
        };
        let err = index(I, BASE_ROW.as_bytes(), &mut escapes).unwrap_err();
        assert_eq!(
            err.message,
            format!(
                "{I}:1 session_path resolves to /elsewhere/codex/a.jsonl, outside the workspace /w"
            )
        );
    }

    #[test]
    fn session_refs_must_be_plain_file_names() {
        for (given, ok) in [
            ("S0001", true),
            ("", true),
            (".", true),
            ("..", true),
            ("a b", true),
            ("../../x/escaped", false),
            ("a/b", false),
            ("/abs", false),
            ("a\\u0000b", false),
        ] {
            let row = row_with("session_ref", Some(&format!("\"{given}\"")));
            let got = index(I, row.as_bytes(), &mut |_: &str| None);
            match got {
                Ok(_) => assert!(ok, "{given:?} accepted"),
                Err(e) => {
                    assert!(!ok, "{given:?}: {}", e.message);
                    assert!(
                        e.message.starts_with(&format!("{I}:1 session_ref '"))
                            && e.message.ends_with("' must be a plain file name"),
                        "{}",
                        e.message
                    );
                }
            }
        }
    }

    #[test]
    fn session_paths_normalise_like_pathlib() {
        for (given, expect) in [
            ("./sessions/codex/a.jsonl", Some("sessions/codex/a.jsonl")),
            ("sessions/codex/a.jsonl/", Some("sessions/codex/a.jsonl")),
            ("sessions", Some("sessions")),
            (" sessions/x", None),
            ("", None),
        ] {
            assert_eq!(
                normalise_session_path(given).as_deref(),
                expect,
                "{given:?}"
            );
        }
    }
}
