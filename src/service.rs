//! The tools, independent of any transport: one method per MCP tool, taking and returning
//! plain Rust values. The MCP adapter ([`crate::mcp`]) only converts to and from JSON.

use std::path::Path;

use serde::Serialize;

use crate::cli::WorkspaceRoot;
use crate::documents::{self, DocumentError};
use crate::evidence::{self, Appended, Problem, WriteResult};
use crate::import::{self, ImportOptions, Quiet};
use crate::pyjson::{Value, py_repr};
use crate::read::{self, ReadRequest, ReadResult};
use crate::store::{Store, StoreError};

/// The tools' shared state: the store, or the reason there is none.
pub struct Service {
    root: WorkspaceRoot,
    state: Result<Store, String>,
}

/// `prompt_diary_ping`'s constant answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ping {
    pub name: &'static str,
    pub status: &'static str,
}

const WORKSPACE_HINT: &str =
    "fix the prepared workspace as the message says, then call the tool again";

impl Service {
    /// Opens the store and brings it in line with the workspace (an incremental import:
    /// a new store is filled, an existing one only re-checks what changed). A workspace
    /// that does not load leaves the service up, answering every call with the problem.
    pub fn start(root: WorkspaceRoot, store_path: &Path) -> Service {
        let state =
            Store::open(store_path).map_err(|e| e.to_string()).and_then(
                |store| match import::import(&root, &store, ImportOptions::default(), &Quiet) {
                    Ok(report) => {
                        tracing::info!(?report, "workspace imported");
                        Ok(store)
                    }
                    Err(e) => Err(e.to_string()),
                },
            );
        if let Err(problem) = &state {
            tracing::warn!(%problem, "workspace unavailable; every call will report it");
        }
        Service { root, state }
    }

    /// The connectivity check; needs no store, so it answers even while one is opening.
    pub fn ping() -> Ping {
        Ping {
            name: "prompt-diary",
            status: "ok",
        }
    }

    pub fn read_session_lines(&self, request: &ReadRequest) -> ReadResult {
        match &self.state {
            Ok(store) => read::read_session_lines(store, &self.root.path, request),
            Err(problem) => ReadResult::invalid("workspace", problem.clone(), WORKSPACE_HINT),
        }
    }

    /// `write_evidence`: parse the chain, then in one store transaction resolve it, sync
    /// and check the existing card, replace the card file and commit.
    pub fn write_evidence(
        &self,
        project_key: &str,
        session_ref: &str,
        chain: &Value,
    ) -> WriteResult<Appended> {
        let chain = match evidence::parse_chain(chain) {
            Ok(chain) => chain,
            Err(problems) => return WriteResult::invalid(problems),
        };
        let store = match &self.state {
            Ok(store) => store,
            Err(problem) => return WriteResult::one("workspace", problem.clone(), WORKSPACE_HINT),
        };
        match self.append_chain(store, project_key, session_ref, &chain) {
            Ok(result) => result,
            Err(e) => WriteResult::invalid(vec![document_problem(e)]),
        }
    }

    fn append_chain(
        &self,
        store: &Store,
        project_key: &str,
        session_ref: &str,
        chain: &evidence::Chain,
    ) -> Result<WriteResult<Appended>, DocumentError> {
        let mut writer = store.writer()?;
        if writer.project(project_key)?.is_none() {
            return Ok(WriteResult::one(
                "project_key",
                format!("unknown project_key {}", py_repr(project_key)),
                "use the project_key from the prepared workspace",
            ));
        }
        let Some(record) = writer.session(project_key, session_ref)? else {
            return Ok(WriteResult::one(
                "session_ref",
                format!(
                    "unknown session_ref {} for project {}",
                    py_repr(session_ref),
                    py_repr(project_key)
                ),
                "use a session_ref listed in sessions.index.jsonl",
            ));
        };
        let Some(turn) = record.session.turn(&chain.turn_ref) else {
            return Ok(WriteResult::one(
                "evidence_chain.turn_ref",
                format!(
                    "unknown turn_ref {} in the session index",
                    py_repr(&chain.turn_ref)
                ),
                "use the assigned turn_ref from the target turn",
            ));
        };
        let rel = import::card_path(project_key, session_ref);
        let existing = match documents::sync(&mut writer, &self.root.path, &rel)? {
            Some(bytes) => match evidence::existing_card(&rel, &bytes, project_key, session_ref) {
                Ok(card) => Some(card),
                Err(problem) => return Ok(WriteResult::invalid(vec![problem])),
            },
            None => None,
        };
        if existing
            .as_ref()
            .is_some_and(|card| evidence::has_chain(card, &chain.turn_ref))
        {
            return Ok(WriteResult::one(
                "evidence_chain.turn_ref",
                format!(
                    "turn_ref {} already has a committed evidence chain (duplicate)",
                    py_repr(&chain.turn_ref)
                ),
                "each turn may have only one evidence chain",
            ));
        }
        let problems = evidence::check_turn(chain, turn.span);
        if !problems.is_empty() {
            return Ok(WriteResult::invalid(problems));
        }
        let bytes = evidence::append(existing, project_key, session_ref, chain);
        documents::write(&mut writer, &self.root.path, &rel, bytes)?;
        writer.commit()?;
        Ok(WriteResult::Done(Appended {
            status: "appended",
            project_key: project_key.to_owned(),
            session_ref: session_ref.to_owned(),
            turn_ref: chain.turn_ref.clone(),
        }))
    }
}

/// A store or file failure during a write, as a structured rejection (nothing committed).
fn document_problem(e: DocumentError) -> Problem {
    match e {
        DocumentError::Store(StoreError::NotImported) => {
            Problem::new("workspace", e.to_string(), WORKSPACE_HINT)
        }
        DocumentError::Store(_) => Problem::new(
            "evidence_store",
            format!("the evidence store could not complete the write: {e}"),
            "retry the call; if it persists, run `evidence-store import` and retry",
        ),
        DocumentError::Unreadable { .. } | DocumentError::Unwritable { .. } => Problem::new(
            "evidence_card",
            e.to_string(),
            "fix the file's permissions or remove it, then write again; nothing was changed",
        ),
    }
}
