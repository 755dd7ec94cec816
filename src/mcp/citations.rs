//! The read-only agent-citation tools: `read_agent_citations` and
//! `search_agent_citations`. They are additions to prompt-diary's tools, listed after
//! them; their answers are the core's values as pretty JSON, with the value also as
//! structured content.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Extensions};
use rmcp::schemars::{self, JsonSchema};
use rmcp::{ErrorData, tool, tool_router};
use serde::Serialize;

use super::args::{Arg, Call};
use super::{Server, text_result};
use crate::citations::query::{Answer, SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX};

#[derive(JsonSchema)]
#[allow(
    dead_code,
    reason = "a schema only: the arguments are read by name (args::ArgErrors)"
)]
#[schemars(title = "read_agent_citationsArguments")]
pub struct ReadAgentCitationsArgs {
    #[schemars(title = "Project Key")]
    project_key: Arg<String>,
    #[schemars(title = "Session Ref")]
    session_ref: Arg<String>,
    #[serde(default)]
    #[schemars(
        title = "Turn Ref",
        description = "Only the citations of this turn (e.g. T0001); all turns when omitted."
    )]
    turn_ref: Arg<String>,
}

#[derive(JsonSchema)]
#[allow(
    dead_code,
    reason = "a schema only: the arguments are read by name (args::ArgErrors)"
)]
#[schemars(title = "search_agent_citationsArguments")]
pub struct SearchAgentCitationsArgs {
    #[schemars(
        title = "Query",
        description = "A path, file name or any part of a citation's reference (case-insensitive)."
    )]
    query: Arg<String>,
    #[serde(default, rename = "type")]
    #[schemars(
        title = "Type",
        description = "Only citations of this type: file, command, test, url, or a JSON citation's own type."
    )]
    kind: Arg<String>,
    #[serde(default)]
    #[schemars(
        title = "Project Key",
        description = "Only this project; the whole workspace when omitted."
    )]
    project_key: Arg<String>,
    #[serde(default)]
    #[schemars(
        title = "Limit",
        description = "Most results to return, 1 to 200 (default 50).",
        extend("default" = 50)
    )]
    limit: Arg<i64>,
}

/// A tool answer: pretty JSON text, with the same value as structured content.
fn answer<T: Serialize>(value: &Answer<T>) -> Result<CallToolResult, ErrorData> {
    let mut result = text_result(value)?;
    result.structured_content = serde_json::to_value(value).ok();
    Ok(result)
}

#[tool_router(router = citation_router, vis = "pub(super)")]
impl Server {
    #[tool(
        description = "List the evidence citations an agent wrote in one session's assistant messages \
(`**Evidence**:` markers and JSON evidence blocks), optionally of one turn, each citation once per turn: physical line, content block (`content_index`), \
turn, type, reference, context, and whether the cited file and lines exist in the session's working directory \
(verification status ok, missing_file, line_out_of_range, outside_project or unchecked, with the file's \
SHA-256 when it was read).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn read_agent_citations(
        &self,
        extensions: Extensions,
        Parameters(call): Parameters<Call<ReadAgentCitationsArgs>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut errors = call.errors(&extensions);
        let project_key = errors.string("project_key");
        let session_ref = errors.string("session_ref");
        let turn_ref = errors.optional_string("turn_ref");
        if let Some(refusal) = super::refuse("read_agent_citations", errors) {
            return Ok(refusal);
        }
        // The answer's JSON is built on the blocking pool too: a session's citations can be
        // megabytes of it.
        self.call(move |service| {
            answer(&service.read_agent_citations(&project_key, &session_ref, turn_ref.as_deref()))
        })
        .await?
    }

    #[tool(
        description = "Search the evidence citations agents wrote across the whole workspace (or one \
project) by their reference: which sessions cited a file, a test or a URL. Case-insensitive. Ranked: \
first references (or their path before `:`) equal to the query, then paths ending with the query as \
whole path components (`auth/login.py` finds `src/auth/login.py:42`), then references containing it; \
ties in workspace order (project, session, line). At most `limit` results (default 50, at most 200); \
`total_matches` counts all of them and `truncated` says when results were cut.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search_agent_citations(
        &self,
        extensions: Extensions,
        Parameters(call): Parameters<Call<SearchAgentCitationsArgs>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut errors = call.errors(&extensions);
        let query = errors.string("query");
        let kind = errors.optional_string("type");
        let project_key = errors.optional_string("project_key");
        let limit = errors.optional_integer("limit");
        if let Some(refusal) = super::refuse("search_agent_citations", errors) {
            return Ok(refusal);
        }
        self.call(move |service| {
            answer(&service.search_agent_citations(
                &query,
                kind.as_deref(),
                project_key.as_deref(),
                limit,
            ))
        })
        .await?
    }
}

// The limits the description states are the core's.
const _: () = assert!(SEARCH_LIMIT_DEFAULT == 50 && SEARCH_LIMIT_MAX == 200);
