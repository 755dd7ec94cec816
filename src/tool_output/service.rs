//! The `tool_output` tools as a core service: the engine's settings and endpoint, given by
//! the caller (the CLI builds them from its flags), the model choice, the extraction and
//! the deterministic reads and searches. The MCP adapter checks arguments, finds what a
//! handle names through the service, and runs these on its blocking pool.

use std::sync::Arc;

use super::Mode;
use super::engine::{self, EngineConfig, Job, TextTools};
use super::handles::Resolved;
use super::lookup::{self, Lookup};
use super::model::Model;
use super::model::openai::Endpoint;
use super::prompts::Source;
use super::text_tools;
use crate::util::stop_flag::{Stop, StopReason};

/// The `tool_output` settings a server runs with: the engine's thresholds and the
/// OpenAI-compatible endpoint, if one is configured.
#[derive(Clone, Default)]
pub struct ToolOutput {
    engine: EngineConfig,
    endpoint: Option<Arc<Endpoint>>,
}

impl std::fmt::Debug for ToolOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolOutput")
            .field("engine", &self.engine)
            .field("endpoint", &self.endpoint.as_ref().map(|e| e.describe()))
            .finish()
    }
}

/// What the client's own model (MCP sampling) offers, when it declared the capability.
pub struct ClientModel {
    pub model: Arc<dyn Model>,
    /// It takes tool definitions too (so it can run read-grep).
    pub runs_tools: bool,
}

impl ToolOutput {
    /// `engine`'s thresholds; the model besides the client's is `endpoint`, if any.
    pub fn new(engine: EngineConfig, endpoint: Option<Endpoint>) -> ToolOutput {
        ToolOutput {
            engine,
            endpoint: endpoint.map(Arc::new),
        }
    }

    /// The engine's thresholds.
    pub fn engine(&self) -> &EngineConfig {
        &self.engine
    }

    /// Cap of every answer, in bytes.
    pub fn cap(&self) -> usize {
        self.engine.max_bytes
    }

    /// The model a call uses: the client's sampling when it can run read-grep or when no
    /// endpoint is configured, else the endpoint, else none.
    pub fn model(&self, client: Option<ClientModel>) -> Option<Arc<dyn Model>> {
        match (client, &self.endpoint) {
            (Some(c), Some(_)) if c.runs_tools => Some(c.model),
            (Some(c), None) => Some(c.model),
            (_, Some(e)) => Some(e.clone()),
            (None, None) => None,
        }
    }

    /// `tool_output`'s answer for what `handle` names: the extraction with `model`, or the
    /// unknown or stale handle's body. The extraction's awaits are driven by
    /// `runtime.block_on`, so it runs on the calling (blocking) thread, never on an async
    /// worker. `None`: `stop` was set (its deadline, a cancel, the end of input) before it
    /// finished.
    pub fn answer(
        &self,
        request: Request,
        found: Lookup,
        model: Option<Arc<dyn Model>>,
        stop: &Stop,
        runtime: &tokio::runtime::Handle,
    ) -> Option<String> {
        let Request {
            handle,
            extract,
            mode,
        } = request;
        let config = self.engine;
        match found {
            Lookup::Unknown { nearest } => Some(lookup::unknown_body(
                &handle,
                nearest.as_deref(),
                mode,
                config.max_bytes,
            )),
            Lookup::Stale { tool_name, detail } => Some(lookup::stale_body(
                &tool_name,
                &handle,
                mode,
                &detail,
                config.max_bytes,
            )),
            Lookup::Found { text, source } => {
                if let Some(m) = &model {
                    tracing::info!(
                        handle,
                        model = m.describe(),
                        mode = mode.as_str(),
                        "tool_output"
                    );
                }
                let tools = text_tools::Tools::new(stop.clone());
                let tools: &dyn TextTools = &tools;
                let job = Job {
                    handle: &handle,
                    source,
                    text: &text,
                    extract: &extract,
                    mode,
                };
                runtime.block_on(async {
                    tokio::select! {
                        biased;
                        () = stop.wait() => None,
                        outcome = engine::extract(&job, &config, model.as_deref(), tools) => Some(outcome.body),
                    }
                })
            }
        }
    }

    /// `tool_output_read`'s answer: the header, then the lines asked for (`start`, `end`,
    /// `offset`, `length`) of `text` within the cap.
    pub fn read(
        &self,
        text: &str,
        tool_name: &str,
        handle: &str,
        (start, end, offset, length): (u64, u64, u64, Option<u64>),
        stop: &Stop,
    ) -> String {
        let header = format!(
            "TOOL OUTPUT {tool_name} WITH HANDLE {handle}, LINES {start}-{end} OF {}:\n\n",
            text.lines().count()
        );
        let options = text_tools::ReadOptions {
            from: text_tools::Position {
                line: start,
                byte: usize::try_from(offset).unwrap_or(usize::MAX),
            },
            end_line: end,
            byte_length: length.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
            cap: self.cap().saturating_sub(header.len()),
            resumable: true,
        };
        header + &text_tools::read(text, &options, &|| stop.is_set())
    }

    /// `tool_output_grep`'s answer: the header (the pattern echoed once, cut when long),
    /// then the matches of `pattern` in `text` as `search` asks within the cap, or why the
    /// pattern is too costly (`compiled` is then the limit it exceeded).
    pub fn grep(
        &self,
        text: &str,
        tool_name: &str,
        handle: &str,
        (pattern, compiled): (&str, Result<text_tools::Pattern, usize>),
        search: Search,
        stop: &Stop,
    ) -> String {
        let header = format!(
            "TOOL OUTPUT {tool_name} WITH HANDLE {handle}, MATCHES OF {}:\n\n",
            text_tools::echo(pattern)
        );
        let compiled = match compiled {
            Ok(p) => p,
            Err(limit) => return header + &text_tools::too_costly(limit, text),
        };
        let options = text_tools::GrepOptions {
            context_lines: usize::try_from(search.context_lines).unwrap_or(0),
            max_matches: usize::try_from(search.max_matches).unwrap_or(50),
            cap: self.cap().saturating_sub(header.len()),
            from: text_tools::Position {
                line: search.start_line,
                byte: usize::try_from(search.start_byte).unwrap_or(usize::MAX),
            },
            resumable: true,
            budget: text_tools::GREP_BUDGET,
        };
        let started = std::time::Instant::now();
        tracing::debug!(handle, bytes = text.len(), "tool_output_grep searching");
        let searched = text_tools::grep(text, &compiled, &options, &|| stop.is_set());
        let ms = started.elapsed().as_millis();
        match searched.halted {
            Some(text_tools::Halt::Asked) => {
                let reason = stop.reason().map(StopReason::as_str);
                tracing::info!(handle, ms, reason, "tool_output_grep stopped on request");
            }
            Some(text_tools::Halt::Budget) => {
                tracing::info!(handle, ms, "tool_output_grep stopped at its time budget");
            }
            None => {}
        }
        header + &searched.body
    }
}

/// Where a `tool_output_grep` searches and how much it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Search {
    pub context_lines: u64,
    pub max_matches: u64,
    pub start_line: u64,
    pub start_byte: u64,
}

/// One `tool_output` call's checked arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub handle: String,
    pub extract: String,
    pub mode: Mode,
}

impl From<Resolved> for Lookup {
    fn from(resolved: Resolved) -> Lookup {
        match resolved {
            Resolved::Found(p) => Lookup::Found {
                text: p.text,
                source: Source {
                    tool_name: p.tool_name,
                    tool_args_json: p.tool_input,
                },
            },
            Resolved::Stale { tool_name, detail } => Lookup::Stale { tool_name, detail },
            Resolved::Mistyped { nearest } => Lookup::Unknown {
                nearest: Some(nearest),
            },
            Resolved::Unknown => Lookup::Unknown { nearest: None },
        }
    }
}
