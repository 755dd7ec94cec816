//! The tools, independent of any transport: one method per MCP tool, taking and returning
//! plain Rust values. The MCP adapter ([`crate::mcp`]) only converts to and from JSON.

use std::path::Path;

use serde::Serialize;

use crate::cli::WorkspaceRoot;
use crate::import::{self, ImportOptions, Quiet};
use crate::read::{self, ReadRequest, ReadResult};
use crate::store::Store;

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
}
