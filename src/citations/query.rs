//! The read-only citation tools' core: `read_agent_citations` and
//! `search_agent_citations`, answered from one store snapshot.
//!
//! Answers are `{"status": "ok", ...}` or, for a bad request, prompt-diary's
//! `{"status": "invalid", "errors": [{field, message, hint}]}`.

use serde::Serialize;

use crate::read::ReadResult;
use crate::store::citations::{CitationLookup, CitationRecord};
use crate::store::{Lookup, Store, StoreError};
use crate::workspace::Unknown;

/// Most results a search returns, and its default.
pub const SEARCH_LIMIT_MAX: usize = 200;
pub const SEARCH_LIMIT_DEFAULT: usize = 50;

/// One citation as the tools show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CitationView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_ref: Option<String>,
    pub line: u64,
    /// Which content block of the line's message list the citation is in (`null` for a
    /// message that is not in a list).
    pub content_index: Option<u64>,
    pub turn_ref: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub reference: String,
    pub context: Option<String>,
    /// Byte offset and length of the citation in the assistant message text.
    pub offset: u64,
    pub len: u64,
    pub verification: Verification,
}

/// A citation's verification, as receipts show it too.
pub use crate::citations::receipt::Verification;

fn view(record: &CitationRecord, place: Option<(&str, &str)>) -> CitationView {
    let c = &record.citation;
    CitationView {
        project_key: place.map(|p| p.0.to_owned()),
        session_ref: place.map(|p| p.1.to_owned()),
        line: record.line,
        content_index: c.content_index,
        turn_ref: c.turn_ref.clone(),
        kind: c.kind.clone(),
        reference: c.reference.clone(),
        context: c.context.clone(),
        offset: c.offset,
        len: c.len,
        verification: super::stored::verification(&c.check),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionAnswer {
    pub status: &'static str,
    pub project_key: String,
    pub session_ref: String,
    pub turn_ref: Option<String>,
    pub citation_count: usize,
    pub citations: Vec<CitationView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchAnswer {
    pub status: &'static str,
    pub query: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub project_key: Option<String>,
    pub limit: usize,
    /// How many citations matched in all.
    pub total_matches: usize,
    /// Whether `results` stops short of `total_matches`.
    pub truncated: bool,
    pub results: Vec<CitationView>,
}

/// An answer: the tool's value, or an `invalid` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Answer<T> {
    Ok(T),
    Invalid(ReadResult),
}

fn invalid<T>(field: &str, message: impl Into<String>, hint: &str) -> Answer<T> {
    Answer::Invalid(ReadResult::invalid(field, message, hint))
}

fn unknown<T>(u: Unknown) -> Answer<T> {
    Answer::Invalid(u.into())
}

fn store_problem<T>(e: StoreError) -> Answer<T> {
    invalid(
        "workspace",
        format!("the evidence store could not be read: {e}"),
        "run `evidence-store import` again; if it persists, run `evidence-store verify`",
    )
}

/// `read_agent_citations`: a session's citations, or one turn's.
pub fn read_agent_citations(
    store: &Store,
    project_key: &str,
    session_ref: &str,
    turn_ref: Option<&str>,
) -> Answer<SessionAnswer> {
    let result = (|| -> Result<Answer<SessionAnswer>, StoreError> {
        let reader = store.reader()?;
        if !reader.has_workspace()? {
            return Err(StoreError::NotImported);
        }
        if !reader.has_project(project_key)? {
            return Ok(unknown(Unknown::project(project_key)));
        }
        let Some(session) = reader.session(project_key, session_ref)? else {
            return Ok(unknown(Unknown::session(project_key, session_ref)));
        };
        if let Some(t) = turn_ref
            && session.session.turn(t).is_none()
        {
            return Ok(invalid(
                "turn_ref",
                format!(
                    "unknown turn_ref {} for session {}",
                    crate::util::pyjson::py_repr(t),
                    crate::util::pyjson::py_repr(session_ref)
                ),
                "use a turn_ref listed in the session's turns in sessions.index.jsonl",
            ));
        }
        let stored = reader.session_citations(project_key, session_ref)?;
        let citations: Vec<CitationView> = super::stored::counted(&stored)
            .into_iter()
            .filter(|r| turn_ref.is_none() || r.citation.turn_ref.as_deref() == turn_ref)
            .map(|r| view(r, None))
            .collect();
        Ok(Answer::Ok(SessionAnswer {
            status: "ok",
            project_key: project_key.to_owned(),
            session_ref: session_ref.to_owned(),
            turn_ref: turn_ref.map(str::to_owned),
            citation_count: citations.len(),
            citations,
        }))
    })();
    result.unwrap_or_else(store_problem)
}

/// How well a reference matches a query; higher is better, `None` for no match.
///
/// Case-insensitive. Ranks: 3 the whole reference (or its path, before `:`) equals the
/// query; 2 the path ends with the query as whole path components (`auth/login.py`
/// matches `src/auth/login.py:42`); 1 the reference contains the query.
pub fn rank(reference: &str, query: &str) -> Option<u8> {
    let reference = reference.to_lowercase();
    let query = query.trim().to_lowercase();
    if query.is_empty() {
        return None;
    }
    let path = reference.split(':').next().unwrap_or_default();
    if reference == query || path == query {
        return Some(3);
    }
    let query_path = query.split(':').next().unwrap_or_default();
    if !query_path.is_empty()
        && path.ends_with(query_path)
        && path[..path.len() - query_path.len()].ends_with('/')
        && reference.contains(&query)
    {
        return Some(2);
    }
    reference.contains(&query).then_some(1)
}

/// `search_agent_citations`: citations whose reference matches `query`, over the whole
/// workspace or one project, best first.
pub fn search_agent_citations(
    store: &Store,
    query: &str,
    kind: Option<&str>,
    project_key: Option<&str>,
    limit: Option<i64>,
) -> Answer<SearchAnswer> {
    if query.trim().is_empty() {
        return invalid(
            "query",
            "query must be a non-empty string",
            "give a path, a file name or part of a reference",
        );
    }
    let limit = match limit {
        None => SEARCH_LIMIT_DEFAULT,
        Some(n) if n >= 1 && n <= SEARCH_LIMIT_MAX as i64 => n as usize,
        Some(n) => {
            return invalid(
                "limit",
                format!("limit must be between 1 and {SEARCH_LIMIT_MAX}, got {n}"),
                "omit limit for the default of 50",
            );
        }
    };
    let result = (|| -> Result<Answer<SearchAnswer>, StoreError> {
        let reader = store.reader()?;
        if !reader.has_workspace()? {
            return Err(StoreError::NotImported);
        }
        if let Some(p) = project_key
            && !reader.has_project(p)?
        {
            return Ok(unknown(Unknown::project(p)));
        }
        let mut hits: Vec<(u8, CitationView)> = Vec::new();
        for group in reader.workspace_citations(project_key)? {
            for record in super::stored::counted(&group.citations) {
                if kind.is_some_and(|k| k != record.citation.kind) {
                    continue;
                }
                if let Some(score) = rank(&record.citation.reference, query) {
                    let place = Some((group.project_key.as_str(), group.session_ref.as_str()));
                    hits.push((score, view(record, place)));
                }
            }
        }
        // Best rank first; within a rank, workspace order (project, session, line).
        hits.sort_by_key(|h| std::cmp::Reverse(h.0));
        let total = hits.len();
        let results: Vec<CitationView> = hits.into_iter().take(limit).map(|h| h.1).collect();
        Ok(Answer::Ok(SearchAnswer {
            status: "ok",
            query: query.to_owned(),
            kind: kind.map(str::to_owned),
            project_key: project_key.map(str::to_owned),
            limit,
            total_matches: total,
            truncated: total > results.len(),
            results,
        }))
    })();
    result.unwrap_or_else(store_problem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranking() {
        for (reference, query, expect) in [
            ("src/auth/login.py:42", "src/auth/login.py", Some(3)),
            ("src/auth/login.py:42", "SRC/AUTH/LOGIN.PY:42", Some(3)),
            ("src/auth/login.py:42", "auth/login.py", Some(2)),
            ("src/auth/login.py:42", "login.py", Some(2)),
            ("src/auth/login.py:42", "ogin.py", Some(1)),
            ("src/auth/login.py:42", "auth", Some(1)),
            ("src/auth/login.py:42", "logout", None),
            ("src/auth/login.py:42", "  ", None),
            ("pytest tests/a.py - PASS", "tests/a.py", Some(1)),
        ] {
            assert_eq!(rank(reference, query), expect, "{reference} / {query}");
        }
    }
}
