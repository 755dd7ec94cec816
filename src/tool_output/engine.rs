//! The extraction engine: runs one `tool_output` call's strategy over one payload and
//! always ends with a body to return.
//!
//! - `truncate` keeps the top and bottom around a marker; it needs no model.
//! - `full-chunked` maps each uniform chunk with the map prompt and reduces the answers with
//!   the reduce prompt (no reduce for one chunk). Every answer must hold this call's final
//!   report.
//! - `read-grep` runs a sub-agent with exactly two tools, Read and Grep, over this payload
//!   only (the handle is the filename), for at most [`MAX_TOOL_CALLS`] tool calls; the turn
//!   after the limit offers no tools, so a run has at most `MAX_TOOL_CALLS + 1` turns. A
//!   tool call repeating one of an earlier turn ends the run. Each turn is fitted to the model's
//!   context ([`super::context`]). Only a final report the model wrote itself counts:
//!   reaching the limit is a failure, never a synthesized report.
//! - A strategy that cannot execute (no model, a model error, no final report, limits hit)
//!   yields the truncate fallback with `WARNING: tool_output fallback to truncate (<reason>).`
//!   and a warning log carrying the handle, strategy, reason and sizes. "Nothing relevant
//!   found" is an answer, not a failure.
//!
//! Every body, header included, stays within the configured byte cap.

use std::time::Duration;

use serde_json::{Value, json};

use super::context::{self, Budget, CallLog};
use super::model::{Message, Model, ModelError, Request, ToolCall, ToolDef};
use super::prompts::{self, Source};
use super::report::{Report, ReportError, parse_final_report};
use super::route::{self, Abilities, Route, RouteConfig, Stats};
use super::{Mode, chunk, format_failure, format_success, truncate};

/// Most Read and Grep calls of the read-grep sub-agent; the turn after them has no tools.
pub const MAX_TOOL_CALLS: usize = 10;
/// Most chunks an explicit `full-chunked` request may use (`auto` uses `max_chunks`).
pub const FORCED_MAX_CHUNKS: usize = 64;
/// Default context window of the extraction model, in tokens.
pub const DEFAULT_CONTEXT_TOKENS: usize = 32768;
/// Default most tokens of one model answer.
pub const DEFAULT_MAX_OUTPUT_TOKENS: usize = 4096;
/// Lines a Read call without an end returns.
pub const READ_DEFAULT_LINES: u64 = 200;
/// Default longest one `tool_output` call may take before it answers with the truncate
/// fallback.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(120);

/// The engine's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// Cap of every body, header included (`tool_response_max_bytes`).
    pub max_bytes: usize,
    /// Most chunks `auto` lets full-chunked use.
    pub max_chunks: usize,
    /// Average line size above which full-chunked is preferred.
    pub long_line_bytes: usize,
    /// The model's context window, in tokens.
    pub context_tokens: usize,
    /// Most tokens of one model answer.
    pub max_output_tokens: usize,
    /// Chunk overlap, in percent.
    pub overlap_pct: usize,
    /// Longest one call may take; past it the answer is the truncate fallback.
    pub deadline: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_bytes: truncate::DEFAULT_MAX_BYTES,
            max_chunks: route::DEFAULT_MAX_CHUNKS,
            long_line_bytes: route::DEFAULT_LONG_LINE_BYTES,
            context_tokens: DEFAULT_CONTEXT_TOKENS,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            overlap_pct: chunk::DEFAULT_OVERLAP_PCT,
            deadline: DEFAULT_DEADLINE,
        }
    }
}

pub use super::context::{bytes_for, tokens_for};

impl EngineConfig {
    /// Payload bytes one map call can take: the context left after the answer and the
    /// prompt (estimated at [`context::BYTES_PER_TOKEN_TENTHS`]), at least 1 KiB.
    pub fn chunk_bytes(&self, prompt_bytes: usize) -> usize {
        let tokens = self
            .context_tokens
            .saturating_sub(self.max_output_tokens)
            .saturating_sub(tokens_for(prompt_bytes));
        bytes_for(tokens).max(1024)
    }
}

/// Deterministic Read and Grep over one payload's text, as the sub-agent (and the calling
/// agent) use them. Answers are plain text within `cap` bytes; a bad pattern is an error.
pub trait TextTools: Send + Sync {
    fn read(&self, text: &str, start_line: u64, end_line: u64, cap: usize) -> String;
    fn grep(
        &self,
        text: &str,
        pattern: &str,
        context_lines: usize,
        max_matches: usize,
        cap: usize,
    ) -> Result<String, BadPattern>;

    /// Whether the call's deadline has stopped these tools. Their stop and the run's
    /// timeout read one deadline on two clocks: a run that ends in a failure once the
    /// tools were stopped by it ended at the deadline, whichever noticed first.
    fn past_deadline(&self) -> bool {
        false
    }
}

/// Why a Grep searched nothing: its pattern is not valid; the parser's message says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad pattern: {0}")]
pub struct BadPattern(pub String);

/// One extraction request over a resolved payload.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    pub handle: &'a str,
    pub source: Source,
    pub text: &'a str,
    pub extract: &'a str,
    pub mode: Mode,
}

/// What an extraction produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The strategy whose output the body holds.
    pub mode_used: Mode,
    /// The whole plain-text result, header included, within the cap.
    pub body: String,
    /// Set when the body is the truncate fallback: why the strategy could not run.
    pub fallback: Option<String>,
}

/// Why a strategy could not execute; the truncate fallback quotes it.
#[derive(Debug, thiserror::Error)]
enum Failed {
    /// No model is in reach.
    #[error("{}", route::NO_MODEL)]
    NoModel,
    /// The strategy `mode` could not start or ended without a report, for `reason`.
    #[error("{}: {reason}", mode.as_str())]
    In { mode: Mode, reason: Reason },
}

/// Why full-chunked or read-grep ended without a report.
#[derive(Debug, thiserror::Error)]
enum Reason {
    /// Read-grep needs a model that can call tools.
    #[error("the model cannot call tools (the client's sampling does not support tool use)")]
    NoTools,
    /// The payload needs more chunks of `chunk_bytes` than the `limit`.
    #[error("{needed} chunks of {chunk_bytes} bytes needed, more than the {limit} allowed")]
    TooManyChunks {
        needed: usize,
        chunk_bytes: usize,
        limit: usize,
    },
    /// The model call of step `at` got no reply.
    #[error("{at}: {error}")]
    Model { at: Step, error: CallError },
    /// The model's `answer` at step `at` held no final report; the reason quotes its start.
    #[error("{at}: {error}{}", said(answer))]
    NoReport {
        at: Step,
        error: ReportError,
        answer: String,
    },
    /// A one-chunk pass produced no output.
    #[error("no chunk")]
    NoChunk,
    /// The pass after a context error, with chunks of `chunk_bytes`, failed too.
    #[error("{reason} (after a retry with chunks of {chunk_bytes} bytes)")]
    Retried {
        reason: Box<Reason>,
        chunk_bytes: usize,
    },
    /// The sub-agent repeated, on `turn`, its tool call of turn `earlier`.
    #[error("{}", context::repeated(call, *turn, *earlier))]
    Repeated {
        call: ToolCall,
        turn: usize,
        earlier: usize,
    },
}

/// The model call a reason names.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// The map call of chunk `index` (1-based) of `total`.
    Chunk {
        index: usize,
        total: usize,
    },
    Reduce,
    /// A read-grep turn; `past_limit` when it came after the limit of tool calls.
    Turn {
        turn: usize,
        past_limit: bool,
    },
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Chunk { index, total } => write!(f, "chunk {index} of {total}"),
            Step::Reduce => f.write_str("reduce"),
            Step::Turn {
                turn,
                past_limit: false,
            } => write!(f, "turn {turn}"),
            Step::Turn {
                turn,
                past_limit: true,
            } => write!(
                f,
                "turn {turn}, after the limit of {MAX_TOOL_CALLS} tool calls"
            ),
        }
    }
}

/// Runs `job` and returns its body. `model` is `None` when no model is in reach.
///
/// The whole run, model requests included, ends by `config.deadline`: then the answer is
/// the truncate fallback saying so, and the request in flight is dropped. Dropping the
/// returned future (a cancelled call) drops the request in flight as well.
pub async fn extract(
    job: &Job<'_>,
    config: &EngineConfig,
    model: Option<&dyn Model>,
    tools: &dyn TextTools,
) -> Outcome {
    match tokio::time::timeout(config.deadline, run(job, config, model, tools)).await {
        Ok(outcome) if outcome.fallback.is_none() || !tools.past_deadline() => outcome,
        _ => {
            let reason = format!("deadline of {} s reached", config.deadline.as_secs());
            fallback(job, config, Stats::of(job.text), job.mode.as_str(), &reason)
        }
    }
}

async fn run(
    job: &Job<'_>,
    config: &EngineConfig,
    model: Option<&dyn Model>,
    tools: &dyn TextTools,
) -> Outcome {
    let stats = Stats::of(job.text);
    let abilities = Abilities {
        model: model.is_some(),
        tools: model.is_some_and(|m| m.supports_tools()),
    };
    let sized;
    let config = match model {
        Some(m) if job.mode != Mode::Truncate => {
            sized = with_context(config, m).await;
            tracing::info!(
                handle = job.handle,
                context_tokens = sized.0.context_tokens,
                source = sized.1,
                "tool_output context size"
            );
            &sized.0
        }
        _ => config,
    };
    let map_prompt_bytes = prompts::map_system(
        &job.source,
        stats,
        1,
        1,
        config.overlap_pct,
        job.extract,
        "",
    )
    .len()
        + 64;
    let chunk_bytes = config.chunk_bytes(map_prompt_bytes);
    let mode = match job.mode {
        Mode::Auto => {
            let routed = route::route(
                stats,
                RouteConfig {
                    max_chunks: config.max_chunks,
                    long_line_bytes: config.long_line_bytes,
                    chunk_bytes,
                },
                abilities,
            );
            tracing::info!(
                handle = job.handle,
                bytes = stats.bytes,
                lines = stats.lines,
                tokens = stats.tokens,
                avg_line_bytes = stats.avg_line_bytes(),
                long_line_bytes = config.long_line_bytes,
                chunk_bytes,
                max_chunks = config.max_chunks,
                route = ?routed,
                "tool_output auto routing"
            );
            match routed {
                Route::Run(mode) => mode,
                Route::Fallback(reason) => return fallback(job, config, stats, "auto", &reason),
            }
        }
        mode => mode,
    };
    let result = match (mode, model) {
        (Mode::Truncate, _) | (Mode::Auto, _) => {
            let header = format_success(&job.source.tool_name, job.handle, Mode::Truncate, "");
            let text = truncate::truncate(job.text, config.max_bytes.saturating_sub(header.len()));
            return Outcome {
                mode_used: Mode::Truncate,
                body: header + &text,
                fallback: None,
            };
        }
        (_, None) => Err(Failed::NoModel),
        (Mode::FullChunked, Some(model)) => full_chunked(job, config, stats, chunk_bytes, model)
            .await
            .map_err(|reason| Failed::In { mode, reason }),
        (Mode::ReadGrep, Some(model)) if !model.supports_tools() => Err(Failed::In {
            mode,
            reason: Reason::NoTools,
        }),
        (Mode::ReadGrep, Some(model)) => read_grep(job, config, stats, model, tools)
            .await
            .map_err(|reason| Failed::In { mode, reason }),
    };
    match result {
        Ok(report) => {
            let mut header = format_success(&job.source.tool_name, job.handle, mode, "");
            if !report.closed {
                header.push_str(&context::unclosed_note(config.max_output_tokens));
            }
            let text =
                truncate::truncate(&report.text, config.max_bytes.saturating_sub(header.len()));
            Outcome {
                mode_used: mode,
                body: header + &text,
                fallback: None,
            }
        }
        Err(failed) => fallback(job, config, stats, mode.as_str(), &failed.to_string()),
    }
}

/// `config` with the context size the model's server publishes, when it does (a model's
/// most only lowers the configured size), and where the size used comes from.
async fn with_context(config: &EngineConfig, model: &dyn Model) -> (EngineConfig, String) {
    let configured = *config;
    match model.published_context().await {
        Some(p) if p.limit_only && p.tokens >= config.context_tokens => (
            configured,
            format!(
                "configured ({} allows {})",
                p.source.trim_start_matches("the endpoint's "),
                p.tokens
            ),
        ),
        Some(p) => (
            EngineConfig {
                context_tokens: p.tokens,
                ..configured
            },
            p.source,
        ),
        None => (configured, "configured".to_string()),
    }
}

/// The failure body for a payload that cannot be read (such as a stale handle).
pub fn failure(tool_name: &str, handle: &str, mode: Mode, error: &str, cap: usize) -> String {
    let header = format_failure(tool_name, handle, mode, "");
    let text = truncate::truncate(error, cap.saturating_sub(header.len()));
    truncate::truncate(&(header + &text), cap)
}

fn fallback(
    job: &Job<'_>,
    config: &EngineConfig,
    stats: Stats,
    strategy: &str,
    reason: &str,
) -> Outcome {
    tracing::warn!(
        handle = job.handle,
        strategy,
        reason,
        bytes = stats.bytes,
        lines = stats.lines,
        tokens = stats.tokens,
        "tool_output fallback to truncate"
    );
    let header = format_success(&job.source.tool_name, job.handle, Mode::Truncate, "");
    let text = truncate::truncate_fallback(
        job.text,
        reason,
        config.max_bytes.saturating_sub(header.len()),
    );
    Outcome {
        mode_used: Mode::Truncate,
        body: header + &text,
        fallback: Some(reason.to_string()),
    }
}

fn max_tokens(config: &EngineConfig) -> u32 {
    u32::try_from(config.max_output_tokens).unwrap_or(u32::MAX)
}

/// Why one map-reduce pass failed.
enum PassError {
    /// A map prompt did not fit: its bytes, and the endpoint's numbers when given.
    Context {
        prompt_bytes: usize,
        chunk_len: usize,
        n_prompt_tokens: Option<u64>,
        n_ctx: Option<u64>,
        failed: Reason,
    },
    Other(Reason),
}

async fn full_chunked(
    job: &Job<'_>,
    config: &EngineConfig,
    stats: Stats,
    chunk_bytes: usize,
    model: &dyn Model,
) -> Result<Report, Reason> {
    match map_reduce(job, config, stats, chunk_bytes, model).await {
        Ok(text) => Ok(text),
        Err(PassError::Other(failed)) => Err(failed),
        // The context is smaller than the estimate: one more pass, with chunks sized from
        // the endpoint's numbers, else halved.
        Err(PassError::Context {
            prompt_bytes,
            chunk_len,
            n_prompt_tokens,
            n_ctx,
            failed,
        }) => {
            let smaller = resized_chunk(config, prompt_bytes, chunk_len, n_prompt_tokens, n_ctx);
            tracing::info!(
                handle = job.handle,
                reason = failed.to_string(),
                chunk_bytes = smaller,
                previous_chunk_bytes = chunk_bytes,
                "tool_output retrying with smaller chunks"
            );
            match map_reduce(job, config, stats, smaller, model).await {
                Ok(text) => Ok(text),
                Err(PassError::Other(f) | PassError::Context { failed: f, .. }) => {
                    Err(Reason::Retried {
                        reason: Box::new(f),
                        chunk_bytes: smaller,
                    })
                }
            }
        }
    }
}

/// The chunk size after a context-size error: the endpoint's context, less the answer,
/// at the bytes a token the failed prompt showed, with a tenth to spare; half the failed
/// chunk when the endpoint gave no numbers. Always smaller than the failed chunk.
fn resized_chunk(
    config: &EngineConfig,
    prompt_bytes: usize,
    chunk_len: usize,
    n_prompt_tokens: Option<u64>,
    n_ctx: Option<u64>,
) -> usize {
    let half = (chunk_len / 2).max(1);
    let (Some(n_prompt), Some(n_ctx)) = (
        n_prompt_tokens.and_then(|n| usize::try_from(n).ok()),
        n_ctx.and_then(|n| usize::try_from(n).ok()),
    ) else {
        return half;
    };
    if n_prompt == 0 {
        return half;
    }
    // Room for the prompt: the context less the answer, or half the context when the
    // answer's budget takes nearly all of it.
    let mut room = n_ctx.saturating_sub(config.max_output_tokens);
    if room < n_ctx / 4 {
        room = n_ctx / 2;
    }
    let fitting_prompt = (prompt_bytes as u128 * room as u128 / n_prompt as u128) * 9 / 10;
    let fitting_prompt = usize::try_from(fitting_prompt).unwrap_or(usize::MAX);
    let system = prompt_bytes.saturating_sub(chunk_len);
    match fitting_prompt.checked_sub(system) {
        Some(n) if n >= 256 => n.min(chunk_len * 9 / 10),
        _ => half,
    }
}

/// One pass: the map over chunks of `chunk_bytes`, then the reduce.
async fn map_reduce(
    job: &Job<'_>,
    config: &EngineConfig,
    stats: Stats,
    chunk_bytes: usize,
    model: &dyn Model,
) -> Result<Report, PassError> {
    let ranges = chunk::chunk(job.text, chunk_bytes, config.overlap_pct);
    let limit = match job.mode {
        Mode::Auto => route::auto_chunk_limit(stats, config.max_chunks, config.long_line_bytes),
        _ => FORCED_MAX_CHUNKS,
    };
    if ranges.len() > limit {
        return Err(PassError::Other(Reason::TooManyChunks {
            needed: ranges.len(),
            chunk_bytes,
            limit,
        }));
    }
    let total = ranges.len();
    let mut outputs = Vec::with_capacity(total);
    for (i, range) in ranges.into_iter().enumerate() {
        let nonce = prompts::nonce();
        let chunk_len = range.len();
        let request = Request {
            system: prompts::map_system(
                &job.source,
                stats,
                i + 1,
                total,
                config.overlap_pct,
                job.extract,
                &nonce,
            ),
            messages: vec![Message::User(prompts::map_user(&job.text[range]))],
            tools: Vec::new(),
            max_tokens: max_tokens(config),
        };
        let prompt_bytes = request.system.len()
            + request
                .messages
                .iter()
                .map(|m| match m {
                    Message::User(t) => t.len(),
                    _ => 0,
                })
                .sum::<usize>();
        let at = Step::Chunk {
            index: i + 1,
            total,
        };
        let reply = match model.complete(request).await {
            Ok(reply) => reply,
            Err(ModelError::ContextExceeded {
                status,
                body,
                n_prompt_tokens,
                n_ctx,
            }) => {
                let e = ModelError::ContextExceeded {
                    status,
                    body,
                    n_prompt_tokens,
                    n_ctx,
                };
                return Err(PassError::Context {
                    prompt_bytes,
                    chunk_len,
                    n_prompt_tokens,
                    n_ctx,
                    failed: Reason::Model {
                        at,
                        error: e.into(),
                    },
                });
            }
            Err(e) => {
                return Err(PassError::Other(Reason::Model {
                    at,
                    error: e.into(),
                }));
            }
        };
        match parse_final_report(&reply.text, &nonce) {
            Ok(report) => outputs.push(report),
            Err(error) => {
                return Err(PassError::Other(Reason::NoReport {
                    at,
                    error,
                    answer: reply.text,
                }));
            }
        }
    }
    if total == 1 {
        return outputs.pop().ok_or(PassError::Other(Reason::NoChunk));
    }
    let outputs: Vec<String> = outputs.into_iter().map(|r| r.text).collect();
    reduce(job, config, &outputs, model)
        .await
        .map_err(PassError::Other)
}

/// The reduce call over the map outputs, cut to fit the model's context (the longest
/// first), and retried once with a smaller prompt after a context error.
async fn reduce(
    job: &Job<'_>,
    config: &EngineConfig,
    outputs: &[String],
    model: &dyn Model,
) -> Result<Report, Reason> {
    let nonce = prompts::nonce();
    let mut budget = Budget::new(config.context_tokens, config.max_output_tokens);
    let bare = Request {
        system: prompts::reduce_system(&job.source, job.extract, &[], &nonce),
        messages: vec![Message::User(prompts::REDUCE_USER.to_string())],
        tools: Vec::new(),
        max_tokens: max_tokens(config),
    };
    // Each output adds its `--- Chunk i of n ---` line and the blank line after it.
    let framing = context::request_bytes(&bare) + outputs.len() * 32;
    loop {
        // At least 1 KiB, as chunks have: a context too small for the prompt is the
        // endpoint's to refuse.
        let room = budget.bytes().saturating_sub(framing).max(1024);
        let (fitted, cut) = context::fit_outputs(outputs, room);
        if cut > 0 {
            tracing::info!(
                handle = job.handle,
                cut,
                room,
                "tool_output reduce: chunk outputs cut to fit the model's context"
            );
        }
        let request = Request {
            system: prompts::reduce_system(&job.source, job.extract, &fitted, &nonce),
            ..bare.clone()
        };
        let sent = context::request_bytes(&request);
        let reply = match model.complete(request).await {
            Ok(reply) => reply,
            Err(ModelError::ContextExceeded {
                n_prompt_tokens,
                n_ctx,
                ..
            }) if budget.shrink(sent, n_prompt_tokens, n_ctx).is_some() => continue,
            Err(error) => {
                return Err(Reason::Model {
                    at: Step::Reduce,
                    error: CallError {
                        error,
                        retried_at: budget.retried_at(),
                    },
                });
            }
        };
        return parse_final_report(&reply.text, &nonce).map_err(|error| Reason::NoReport {
            at: Step::Reduce,
            error,
            answer: reply.text,
        });
    }
}

/// Bytes of an answer without a final report quoted in the reason.
pub const SAID_BYTES: usize = 200;

/// What the model said instead of a final report, for the reason: its first
/// [`SAID_BYTES`] bytes, quoted.
fn said(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "; the answer was empty".to_string();
    }
    let end = crate::util::text::floor_char_boundary(text, SAID_BYTES);
    let more = if end < text.len() { "…" } else { "" };
    format!("; the answer began: {:?}{more}", &text[..end])
}

/// The two tools of the read-grep sub-agent, as the model sees them.
pub fn read_grep_tools() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "Read".to_string(),
            description: format!(
                "Read numbered lines of a file. The file is the handle. Lines are 1-based and \
                 inclusive; without end_line, {READ_DEFAULT_LINES} lines are returned."
            ),
            input_schema: json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["file"],
                "properties": {
                    "file": {"type": "string", "description": "The handle, exactly as given."},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line (default 1)."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line, inclusive."}
                }
            }),
        },
        ToolDef {
            name: "Grep".to_string(),
            description: "Search a file for a regular expression (Rust regex syntax); returns \
                          matching lines with line numbers. The file is the handle."
                .to_string(),
            input_schema: json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["file", "pattern"],
                "properties": {
                    "file": {"type": "string", "description": "The handle, exactly as given."},
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "context_lines": {"type": "integer", "minimum": 0, "description": "Lines of context around each match (default 0)."},
                    "max_matches": {"type": "integer", "minimum": 1, "description": "Most matches returned (default 50)."}
                }
            }),
        },
    ]
}

/// Why a sub-agent tool call was not run; the model is answered `ERROR: ` and this.
#[derive(Debug, thiserror::Error)]
enum ToolCallError<'a> {
    #[error("the arguments of {0} must be a JSON object")]
    NotAnObject(&'a str),
    #[error("file is required; the only file is {handle:?}")]
    NoFile { handle: &'a str },
    #[error("no file named {given:?}; the only file is {handle:?}")]
    OtherFile { given: &'a str, handle: &'a str },
    #[error("{0} must be a non-negative integer")]
    NotUint(&'static str),
    #[error("pattern is required")]
    NoPattern,
    #[error("unknown tool {0:?}; only Read and Grep exist")]
    UnknownTool(&'a str),
    #[error(transparent)]
    BadPattern(#[from] BadPattern),
}

fn uint(args: &Value, key: &'static str) -> Result<Option<u64>, ToolCallError<'static>> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or(ToolCallError::NotUint(key)),
    }
}

/// Runs one sub-agent tool call; errors are answers too, so the model can correct itself.
fn run_tool(
    call: &ToolCall,
    handle: &str,
    text: &str,
    tools: &dyn TextTools,
    cap: usize,
) -> String {
    call_tool(call, handle, text, tools, cap).unwrap_or_else(|e| format!("ERROR: {e}"))
}

/// The answer of one sub-agent tool call, or why it was not run.
fn call_tool<'a>(
    call: &'a ToolCall,
    handle: &'a str,
    text: &str,
    tools: &dyn TextTools,
    cap: usize,
) -> Result<String, ToolCallError<'a>> {
    let args = &call.arguments;
    if !args.is_object() {
        return Err(ToolCallError::NotAnObject(&call.name));
    }
    match args.get("file").and_then(Value::as_str) {
        // A model may write the handle as a file name, with an extension.
        Some(f) if f == handle || crate::read::handle::strip_extension(f) == handle => {}
        Some(given) => return Err(ToolCallError::OtherFile { given, handle }),
        None => return Err(ToolCallError::NoFile { handle }),
    }
    match call.name.as_str() {
        "Read" => {
            let start = uint(args, "start_line")?.unwrap_or(1).max(1);
            let end =
                uint(args, "end_line")?.unwrap_or(start.saturating_add(READ_DEFAULT_LINES - 1));
            Ok(tools.read(text, start, end, cap))
        }
        "Grep" => {
            let pattern = args
                .get("pattern")
                .and_then(Value::as_str)
                .ok_or(ToolCallError::NoPattern)?;
            let context = uint(args, "context_lines")?.unwrap_or(0);
            let max = uint(args, "max_matches")?.unwrap_or(50).max(1);
            Ok(tools.grep(
                text,
                pattern,
                usize::try_from(context).unwrap_or(usize::MAX),
                usize::try_from(max).unwrap_or(usize::MAX),
                cap,
            )?)
        }
        other => Err(ToolCallError::UnknownTool(other)),
    }
}

/// What the sub-agent is told when tools are no longer offered.
pub const LIMIT_REACHED: &str = "No more tool calls: the limit of tool calls or turns is reached. \
                                 Answer now with the final report, from what you have read.";

async fn read_grep(
    job: &Job<'_>,
    config: &EngineConfig,
    stats: Stats,
    model: &dyn Model,
    tools: &dyn TextTools,
) -> Result<Report, Reason> {
    let nonce = prompts::nonce();
    let system = prompts::read_grep_system(&job.source, job.handle, job.extract, &nonce);
    let mut messages = vec![Message::User(prompts::read_grep_user(job.handle, stats))];
    let defs = read_grep_tools();
    let mut calls_used = 0usize;
    let mut budget = Budget::new(config.context_tokens, config.max_output_tokens);
    let mut made = CallLog::default();
    // Every turn with tools uses at least one call, so the turn after the limit, which
    // offers none, comes by turn MAX_TOOL_CALLS + 1 and ends the loop.
    let mut turn = 0usize;
    loop {
        turn += 1;
        let offer = calls_used < MAX_TOOL_CALLS;
        if !offer {
            messages.push(Message::User(LIMIT_REACHED.to_string()));
        }
        let at = Step::Turn {
            turn,
            past_limit: !offer,
        };
        let reply = fitted_turn(
            job.handle,
            model,
            Request {
                system: system.clone(),
                messages: Vec::new(),
                tools: if offer { defs.clone() } else { Vec::new() },
                max_tokens: max_tokens(config),
            },
            &mut messages,
            &mut budget,
        )
        .await
        .map_err(|error| Reason::Model { at, error })?;
        if reply.tool_calls.is_empty() || !offer {
            return parse_final_report(&reply.text, &nonce).map_err(|error| Reason::NoReport {
                at,
                error,
                answer: reply.text,
            });
        }
        if let Some((call, earlier)) = reply
            .tool_calls
            .iter()
            .find_map(|c| made.repeat_of(c).map(|earlier| (c, earlier)))
        {
            return Err(Reason::Repeated {
                call: call.clone(),
                turn,
                earlier,
            });
        }
        for call in &reply.tool_calls {
            made.record(call, turn);
        }
        let calls = reply.tool_calls.clone();
        messages.push(Message::Assistant {
            text: reply.text,
            tool_calls: reply.tool_calls,
        });
        for call in calls {
            calls_used += 1;
            let content = if calls_used > MAX_TOOL_CALLS {
                format!(
                    "ERROR: the limit of {MAX_TOOL_CALLS} tool calls is reached; answer now with the final report"
                )
            } else {
                run_tool(&call, job.handle, job.text, tools, config.max_bytes)
            };
            messages.push(Message::ToolResult {
                call_id: call.id,
                name: call.name,
                content,
            });
        }
    }
}

/// Why a model call got no reply: the model's error, after the one retry with a prompt
/// cut to `retried_at` bytes when there was one.
#[derive(Debug, thiserror::Error)]
#[error("{error}{}", context::retry_note(*.retried_at))]
struct CallError {
    error: ModelError,
    retried_at: Option<usize>,
}

impl From<ModelError> for CallError {
    /// An error of a call that was not retried.
    fn from(error: ModelError) -> Self {
        CallError {
            error,
            retried_at: None,
        }
    }
}

/// One read-grep turn: `messages` cut to fit the model's context (the oldest tool results
/// first, each saying so), sent as `bare`'s conversation, and sent once more, cut to a
/// smaller budget, after a context error.
async fn fitted_turn(
    handle: &str,
    model: &dyn Model,
    bare: Request,
    messages: &mut [Message],
    budget: &mut Budget,
) -> Result<super::model::Reply, CallError> {
    let fixed = context::fixed_bytes(&bare);
    loop {
        let cut = context::fit_conversation(messages, fixed, budget.bytes());
        if cut > 0 {
            tracing::info!(
                handle,
                cut,
                budget = budget.bytes(),
                "tool_output read-grep: tool results cut to fit the model's context"
            );
        }
        let request = Request {
            messages: messages.to_vec(),
            ..bare.clone()
        };
        let sent = context::request_bytes(&request);
        match model.complete(request).await {
            Ok(reply) => return Ok(reply),
            Err(ModelError::ContextExceeded {
                n_prompt_tokens,
                n_ctx,
                ..
            }) if budget.shrink(sent, n_prompt_tokens, n_ctx).is_some() => {}
            Err(error) => {
                return Err(CallError {
                    error,
                    retried_at: budget.retried_at(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::tool_output::model::{BoxFuture, ModelError, Reply};

    /// Numbered lines and plain substring matches: enough to drive the loop.
    struct Fake;

    impl TextTools for Fake {
        fn read(&self, text: &str, start: u64, end: u64, _cap: usize) -> String {
            text.lines()
                .enumerate()
                .filter(|(i, _)| (start..=end).contains(&(*i as u64 + 1)))
                .map(|(i, l)| format!("{}: {l}\n", i + 1))
                .collect()
        }
        fn grep(
            &self,
            text: &str,
            pattern: &str,
            _c: usize,
            _m: usize,
            _cap: usize,
        ) -> Result<String, BadPattern> {
            if pattern == "(" {
                return Err(BadPattern("unclosed group".into()));
            }
            Ok(text
                .lines()
                .enumerate()
                .filter(|(_, l)| l.contains(pattern))
                .map(|(i, l)| format!("{}: {l}\n", i + 1))
                .collect())
        }
    }

    /// Answers from a script; `{N}` in an answer becomes the nonce of the request's system
    /// prompt. Records every request.
    struct Scripted {
        tools: bool,
        answers: Mutex<Vec<Result<Reply, ModelError>>>,
        seen: Mutex<Vec<Request>>,
    }

    impl Scripted {
        fn new(tools: bool, answers: Vec<Result<Reply, ModelError>>) -> Scripted {
            Scripted {
                tools,
                answers: Mutex::new(answers.into_iter().rev().collect()),
                seen: Mutex::new(Vec::new()),
            }
        }
    }

    fn nonce_of(system: &str) -> String {
        let start = system
            .find("<ai-agent-")
            .map_or(0, |i| i + "<ai-agent-".len());
        system[start..].chars().take(16).collect()
    }

    impl Model for Scripted {
        fn supports_tools(&self) -> bool {
            self.tools
        }
        fn describe(&self) -> String {
            "scripted".into()
        }
        fn complete(&self, request: Request) -> BoxFuture<'_, Result<Reply, ModelError>> {
            let nonce = nonce_of(&request.system);
            self.seen.lock().unwrap().push(request);
            let next = self
                .answers
                .lock()
                .unwrap()
                .pop()
                .unwrap_or(Ok(Reply::default()));
            Box::pin(async move {
                next.map(|mut r| {
                    r.text = r.text.replace("{N}", &nonce);
                    r
                })
            })
        }
    }

    fn say(text: &str) -> Result<Reply, ModelError> {
        Ok(Reply {
            text: text.into(),
            tool_calls: vec![],
        })
    }

    fn call(name: &str, args: Value) -> Result<Reply, ModelError> {
        Ok(Reply {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: format!("id-{name}"),
                name: name.into(),
                arguments: args,
            }],
        })
    }

    fn job<'a>(text: &'a str, mode: Mode) -> Job<'a> {
        Job {
            handle: "H",
            source: Source {
                tool_name: "Bash".into(),
                tool_args_json: "{}".into(),
            },
            text,
            extract: "the errors",
            mode,
        }
    }

    fn run(text: &str, mode: Mode, config: EngineConfig, model: Option<&Scripted>) -> Outcome {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let m = model.map(|m| m as &dyn Model);
        rt.block_on(extract(&job(text, mode), &config, m, &Fake))
    }

    const HEAD: &str = "ABSTRACT FROM TOOL OUTPUT Bash WITH HANDLE H, STRATEGY:";

    #[test]
    fn no_model_falls_back_with_the_reason() {
        let out = run("abc", Mode::Auto, EngineConfig::default(), None);
        assert_eq!(
            out.body,
            format!(
                "{HEAD}truncate:\n\nWARNING: tool_output fallback to truncate ({}).\nabc",
                route::NO_MODEL
            )
        );
        let out = run("abc", Mode::ReadGrep, EngineConfig::default(), None);
        assert_eq!(out.fallback.as_deref(), Some(route::NO_MODEL));
    }

    #[test]
    fn truncate_needs_no_model_and_stays_in_cap() {
        let text = "x".repeat(5000);
        let config = EngineConfig {
            max_bytes: 1000,
            ..EngineConfig::default()
        };
        let out = run(&text, Mode::Truncate, config, None);
        assert!(out.body.starts_with(&format!("{HEAD}truncate:\n\nxxx")));
        assert!(out.body.contains("TRUNCATED"));
        assert!(out.body.len() <= 1000);
        assert_eq!(out.fallback, None);
    }

    #[test]
    fn one_chunk_maps_once_without_reduce_and_parses_leniently() {
        let m = Scripted::new(
            false,
            vec![say(
                "<think>hmm</think><ai-agent-{N}-FINAL format=\"text\">two errors",
            )],
        );
        let out = run("line\n", Mode::Auto, EngineConfig::default(), Some(&m));
        // Accepted without its closing tag, and the answer says so.
        assert_eq!(
            out.body,
            format!(
                "{HEAD}full-chunked:\n\n{}two errors",
                context::unclosed_note(4096)
            )
        );
        let seen = m.seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].messages, vec![Message::User("line\n".into())]);
        assert!(seen[0].system.contains("- Index: 1 of 1\n"));
        assert!(seen[0].tools.is_empty());
    }

    #[test]
    fn many_chunks_map_then_reduce() {
        let text = "y".repeat(2500);
        let config = EngineConfig {
            context_tokens: 0,
            ..EngineConfig::default()
        };
        // chunk_bytes is then the 1024 floor: 3 chunks.
        let m = Scripted::new(
            false,
            vec![
                say("<ai-agent-{N}-FINAL format=\"text\">a</ai-agent-{N}-FINAL>"),
                say("<ai-agent-{N}-FINAL format=\"text\">b</ai-agent-{N}-FINAL>"),
                say("<ai-agent-{N}-FINAL format=\"text\">c</ai-agent-{N}-FINAL>"),
                say("<ai-agent-{N}-FINAL format=\"text\">abc</ai-agent-{N}-FINAL>"),
            ],
        );
        let out = run(&text, Mode::FullChunked, config, Some(&m));
        assert_eq!(out.body, format!("{HEAD}full-chunked:\n\nabc"));
        let seen = m.seen.lock().unwrap();
        assert_eq!(seen.len(), 4);
        assert!(seen[2].system.contains("- Index: 3 of 3\n"));
        assert!(seen[3].system.contains(
            "CHUNK OUTPUTS\n--- Chunk 1 of 3 ---\na\n\n--- Chunk 2 of 3 ---\nb\n\n--- Chunk 3 of 3 ---\nc\n"
        ));
        // Nonces differ per call.
        assert_ne!(nonce_of(&seen[0].system), nonce_of(&seen[1].system));
    }

    #[test]
    fn a_chunk_without_final_report_falls_back() {
        let m = Scripted::new(false, vec![say("I could not find it")]);
        let out = run("abc", Mode::FullChunked, EngineConfig::default(), Some(&m));
        assert_eq!(
            out.fallback.as_deref(),
            Some(
                "full-chunked: chunk 1 of 1: no final report produced; the answer began: \"I could not find it\""
            )
        );
        assert!(out.body.starts_with(&format!(
            "{HEAD}truncate:\n\nWARNING: tool_output fallback to truncate (full-chunked: chunk 1 of 1: no final report produced; the answer began: \"I could not find it\").\nabc"
        )));
    }

    #[test]
    fn model_errors_fall_back() {
        let m = Scripted::new(
            false,
            vec![Err(ModelError::Status {
                status: 500,
                body: "boom".into(),
            })],
        );
        let out = run("abc", Mode::Auto, EngineConfig::default(), Some(&m));
        assert_eq!(
            out.fallback.as_deref(),
            Some("full-chunked: chunk 1 of 1: model endpoint answered HTTP 500: boom")
        );
    }

    #[test]
    fn read_grep_runs_tools_over_the_handle_only() {
        let text = "ok\nERROR one\nok\nERROR two\n";
        let m = Scripted::new(
            true,
            vec![
                call("Grep", json!({"file": "H", "pattern": "ERROR"})),
                call("Read", json!({"file": "other", "start_line": 1})),
                call("Read", json!({"file": "H", "start_line": 2, "end_line": 2})),
                call("Grep", json!({"file": "H", "pattern": "("})),
                say("<ai-agent-{N}-FINAL format=\"text\">ERROR one; ERROR two"),
            ],
        );
        let out = run(text, Mode::ReadGrep, EngineConfig::default(), Some(&m));
        assert_eq!(
            out.body,
            format!(
                "{HEAD}read-grep:\n\n{}ERROR one; ERROR two",
                context::unclosed_note(4096)
            )
        );
        let seen = m.seen.lock().unwrap();
        assert_eq!(seen.len(), 5);
        assert_eq!(seen[0].tools, read_grep_tools());
        let results: Vec<&str> = seen[4]
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            results,
            vec![
                "2: ERROR one\n4: ERROR two\n",
                "ERROR: no file named \"other\"; the only file is \"H\"",
                "2: ERROR one\n",
                "ERROR: bad pattern: unclosed group",
            ]
        );
    }

    /// Every refused sub-agent tool call is answered with its error, word for word, so the
    /// model can correct itself.
    #[test]
    fn refused_sub_agent_tool_calls_are_answered_with_their_exact_text() {
        let tools = crate::tool_output::text_tools::Tools::new(crate::util::stop_flag::Stop::new());
        let answer = |name: &str, arguments: Value| {
            let call = ToolCall {
                id: "x".into(),
                name: name.into(),
                arguments,
            };
            run_tool(&call, "H", "a\nb\n", &tools, 1000)
        };
        let crate::tool_output::text_tools::PatternError::Syntax(parser) =
            crate::tool_output::text_tools::compile("(").unwrap_err()
        else {
            panic!("a syntax error")
        };
        for (name, args, expect) in [
            (
                "Read",
                json!([1]),
                "ERROR: the arguments of Read must be a JSON object".to_string(),
            ),
            (
                "Read",
                json!({}),
                "ERROR: file is required; the only file is \"H\"".into(),
            ),
            (
                "Read",
                json!({"file": "G"}),
                "ERROR: no file named \"G\"; the only file is \"H\"".into(),
            ),
            (
                "Read",
                json!({"file": "H", "start_line": "1"}),
                "ERROR: start_line must be a non-negative integer".into(),
            ),
            (
                "Read",
                json!({"file": "H", "end_line": -1}),
                "ERROR: end_line must be a non-negative integer".into(),
            ),
            (
                "Grep",
                json!({"file": "H"}),
                "ERROR: pattern is required".into(),
            ),
            (
                "Grep",
                json!({"file": "H", "pattern": "a", "context_lines": 1.5}),
                "ERROR: context_lines must be a non-negative integer".into(),
            ),
            (
                "Grep",
                json!({"file": "H", "pattern": "a", "max_matches": null, "context_lines": null}),
                "1: a\n".into(),
            ),
            (
                "Grep",
                json!({"file": "H", "pattern": "a", "max_matches": true}),
                "ERROR: max_matches must be a non-negative integer".into(),
            ),
            (
                "Grep",
                json!({"file": "H", "pattern": "("}),
                format!("ERROR: bad pattern: {parser}"),
            ),
            (
                "Glob",
                json!({"file": "H"}),
                "ERROR: unknown tool \"Glob\"; only Read and Grep exist".into(),
            ),
        ] {
            assert_eq!(answer(name, args.clone()), expect, "{name} {args}");
        }
    }

    #[test]
    fn read_grep_without_a_final_report_fails() {
        let m = Scripted::new(true, vec![say("done, I think")]);
        let out = run("a\nb\n", Mode::ReadGrep, EngineConfig::default(), Some(&m));
        assert_eq!(
            out.fallback.as_deref(),
            Some(
                "read-grep: turn 1: no final report produced; the answer began: \"done, I think\""
            )
        );
    }

    #[test]
    fn read_grep_stops_offering_tools_at_the_tool_call_limit() {
        // Distinct calls (a repeated one would end the loop first), one a turn.
        let answers = (1..=MAX_TOOL_CALLS + 1)
            .map(|i| call("Read", json!({"file": "H", "start_line": i})))
            .collect();
        let m = Scripted::new(true, answers);
        let out = run("a\nb\n", Mode::ReadGrep, EngineConfig::default(), Some(&m));
        // Ten turns with tools; the eleventh offers none, and its tool call is no answer.
        assert_eq!(
            out.fallback.as_deref(),
            Some(
                "read-grep: turn 11, after the limit of 10 tool calls: no final report produced; \
                 the answer was empty"
            )
        );
        let seen = m.seen.lock().unwrap();
        assert_eq!(seen.len(), MAX_TOOL_CALLS + 1);
        assert_eq!(seen[MAX_TOOL_CALLS - 1].tools, read_grep_tools());
        let last = &seen[MAX_TOOL_CALLS];
        assert!(last.tools.is_empty(), "no tools after the limit");
        assert_eq!(
            last.messages.last(),
            Some(&Message::User(LIMIT_REACHED.to_string()))
        );
    }

    #[test]
    fn read_grep_calls_past_the_limit_in_one_turn_are_refused_then_tools_stop() {
        let many = Ok(Reply {
            text: String::new(),
            tool_calls: (0..MAX_TOOL_CALLS + 2)
                .map(|i| ToolCall {
                    id: format!("c{i}"),
                    name: "Read".into(),
                    arguments: json!({"file": "H.txt", "start_line": i + 1}),
                })
                .collect(),
        });
        let m = Scripted::new(
            true,
            vec![
                many,
                say("<ai-agent-{N}-FINAL format=\"text\">a and b</ai-agent-{N}-FINAL>"),
            ],
        );
        let out = run("a\nb\n", Mode::ReadGrep, EngineConfig::default(), Some(&m));
        assert_eq!(out.body, format!("{HEAD}read-grep:\n\na and b"));
        let seen = m.seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert!(seen[1].tools.is_empty());
        let results: Vec<&str> = seen[1]
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        // `H.txt` names the handle H.
        assert_eq!(results[0], "1: a\n2: b\n");
        assert_eq!(
            results[MAX_TOOL_CALLS],
            "ERROR: the limit of 10 tool calls is reached; answer now with the final report"
        );
    }

    #[test]
    fn a_context_error_without_numbers_halves_the_chunks_once() {
        let text = "z".repeat(3000);
        let exceeded = || {
            Err(ModelError::ContextExceeded {
                status: 400,
                body: "the request exceeds the available context size".into(),
                n_prompt_tokens: None,
                n_ctx: None,
            })
        };
        let m =
            Scripted::new(
                false,
                std::iter::once(exceeded())
                    .chain((0..8).map(|_| {
                        say("<ai-agent-{N}-FINAL format=\"text\">ab</ai-agent-{N}-FINAL>")
                    }))
                    .collect(),
            );
        let out = run(&text, Mode::FullChunked, EngineConfig::default(), Some(&m));
        assert_eq!(out.body, format!("{HEAD}full-chunked:\n\nab"));
        let seen = m.seen.lock().unwrap();
        let lens: Vec<usize> = seen
            .iter()
            .filter_map(|r| match r.messages.first() {
                Some(Message::User(t)) if r.system.contains("CHUNK INFO") => Some(t.len()),
                _ => None,
            })
            .collect();
        assert_eq!(lens[0], 3000);
        assert!(lens.len() > 2, "{lens:?}");
        assert!(lens[1..].iter().all(|l| *l <= 1500), "{lens:?}");

        // A second refusal ends the call: one retry only.
        let m = Scripted::new(false, vec![exceeded(), exceeded()]);
        let out = run(&text, Mode::FullChunked, EngineConfig::default(), Some(&m));
        assert_eq!(
            out.fallback.as_deref(),
            Some(
                "full-chunked: chunk 1 of 3: model endpoint answered HTTP 400: the request exceeds \
                 the available context size (after a retry with chunks of 1500 bytes)"
            )
        );
    }

    #[test]
    fn resized_chunks_follow_the_endpoints_numbers() {
        let config = EngineConfig {
            max_output_tokens: 1024,
            ..EngineConfig::default()
        };
        // 41,000 prompt bytes were 16,400 tokens (2.5 a token); 7168 fit: 17,920 bytes,
        // less a tenth, less the 1000 bytes of system prompt.
        assert_eq!(
            resized_chunk(&config, 41_000, 40_000, Some(16_400), Some(8192)),
            17_920 * 9 / 10 - 1000
        );
        assert_eq!(
            resized_chunk(&config, 41_000, 40_000, None, Some(8192)),
            20_000
        );
        // Never larger than the refused chunk.
        assert_eq!(
            resized_chunk(&config, 2_000, 1_000, Some(100), Some(100_000)),
            900
        );
    }

    #[test]
    fn read_grep_needs_a_model_with_tools() {
        let m = Scripted::new(false, vec![]);
        let out = run("a\nb\n", Mode::ReadGrep, EngineConfig::default(), Some(&m));
        assert!(out.fallback.unwrap().contains("cannot call tools"));
        assert!(m.seen.lock().unwrap().is_empty());
    }

    #[test]
    fn long_answers_are_capped() {
        let long = "z".repeat(20000);
        let m = Scripted::new(
            false,
            vec![say(&format!(
                "<ai-agent-{{N}}-FINAL format=\"text\">{long}"
            ))],
        );
        let out = run("abc", Mode::Auto, EngineConfig::default(), Some(&m));
        assert!(out.body.len() <= truncate::DEFAULT_MAX_BYTES);
        assert!(out.body.contains("TRUNCATED"));
    }

    #[test]
    fn fallbacks_are_logged_with_handle_strategy_reason_and_sizes() {
        #[derive(Clone, Default)]
        struct Sink(std::sync::Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .without_time()
            .finish();
        let m = Scripted::new(false, vec![say("no wrapper here")]);
        tracing::subscriber::with_default(subscriber, || {
            // Another test thread may have registered the callsite, with no subscriber,
            // between this subscriber's creation and here.
            tracing::callsite::rebuild_interest_cache();
            run(
                "a\nb\n",
                Mode::FullChunked,
                EngineConfig::default(),
                Some(&m),
            );
        });
        let log = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert!(
            log.contains(
                "WARN evidence_store::tool_output::engine: tool_output fallback to truncate \
                 handle=\"H\" strategy=\"full-chunked\" \
                 reason=\"full-chunked: chunk 1 of 1: no final report produced; the answer began: \\\"no wrapper here\\\"\" bytes=4 lines=2 tokens=2"
            ),
            "{log}"
        );
    }

    #[test]
    fn failure_body_is_exact() {
        assert_eq!(
            failure("Bash", "H", Mode::Auto, "stale", 100),
            "TOOL_OUTPUT FAILED FOR Bash WITH HANDLE H, STRATEGY:auto:\n\nstale"
        );
    }

    fn numbered(lines: usize) -> String {
        (1..=lines)
            .map(|i| format!("line {i:04} of the stored tool output\n"))
            .collect()
    }

    fn tool_results(request: &Request) -> Vec<&str> {
        request
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect()
    }

    fn request_len(request: &Request) -> usize {
        request.system.len()
            + request
                .messages
                .iter()
                .map(|m| match m {
                    Message::User(t) => t.len(),
                    Message::Assistant { text, tool_calls } => {
                        text.len()
                            + tool_calls
                                .iter()
                                .map(|c| c.arguments.to_string().len())
                                .sum::<usize>()
                    }
                    Message::ToolResult { content, .. } => content.len(),
                })
                .sum::<usize>()
    }

    #[test]
    fn read_grep_stops_on_a_repeated_identical_tool_call() {
        let text = numbered(5);
        let m = Scripted::new(
            true,
            vec![
                call("Read", json!({"file": "H", "start_line": 2})),
                call("Grep", json!({"file": "H", "pattern": "line"})),
                call("Read", json!({"file": "H", "start_line": 2})),
                say("<ai-agent-{N}-FINAL format=\"text\">never asked"),
            ],
        );
        let out = run(&text, Mode::ReadGrep, EngineConfig::default(), Some(&m));
        assert_eq!(
            out.fallback.as_deref(),
            Some(
                "read-grep: turn 3: the model repeated its tool call of turn 1, \
                 Read {\"file\":\"H\",\"start_line\":2}; stopped, as it would only repeat itself"
            )
        );
        assert_eq!(m.seen.lock().unwrap().len(), 3, "no turn after the repeat");
    }

    #[test]
    fn read_grep_cuts_the_oldest_tool_results_to_fit_the_context() {
        // 4000 tokens less 1000 for the answer: 7500 bytes of prompt at 2.5 a token.
        let config = EngineConfig {
            context_tokens: 4000,
            max_output_tokens: 1000,
            ..EngineConfig::default()
        };
        let text = numbered(400);
        let m = Scripted::new(
            true,
            vec![
                call(
                    "Read",
                    json!({"file": "H", "start_line": 1, "end_line": 80}),
                ),
                call(
                    "Read",
                    json!({"file": "H", "start_line": 81, "end_line": 160}),
                ),
                say("<ai-agent-{N}-FINAL format=\"text\">400 lines</ai-agent-{N}-FINAL>"),
            ],
        );
        let out = run(&text, Mode::ReadGrep, config, Some(&m));
        assert_eq!(out.body, format!("{HEAD}read-grep:\n\n400 lines"));
        let seen = m.seen.lock().unwrap();
        let last = &seen[2];
        let tools_len = serde_json::to_string(&read_grep_tools().iter().map(|t| json!({"name": t.name, "description": t.description, "parameters": t.input_schema})).collect::<Vec<_>>()).unwrap().len();
        assert!(
            request_len(last) + tools_len <= 7500,
            "{} bytes sent",
            request_len(last) + tools_len
        );
        let results = tool_results(last);
        // The newest result is whole; the oldest one was cut, and says so.
        assert_eq!(results[1], Fake.read(&text, 81, 160, 0));
        assert!(results[0].len() < Fake.read(&text, 1, 80, 0).len());
        assert!(
            results[0].contains("to fit the model's context"),
            "{}",
            results[0]
        );
    }

    fn exceeded(n_prompt_tokens: Option<u64>, n_ctx: Option<u64>) -> Result<Reply, ModelError> {
        Err(ModelError::ContextExceeded {
            status: 400,
            body: "the request exceeds the available context size".into(),
            n_prompt_tokens,
            n_ctx,
        })
    }

    #[test]
    fn read_grep_retries_a_context_error_once_with_a_smaller_conversation() {
        let text = numbered(400);
        let m = Scripted::new(
            true,
            vec![
                call(
                    "Read",
                    json!({"file": "H", "start_line": 1, "end_line": 150}),
                ),
                exceeded(None, None),
                say("<ai-agent-{N}-FINAL format=\"text\">found</ai-agent-{N}-FINAL>"),
            ],
        );
        let out = run(&text, Mode::ReadGrep, EngineConfig::default(), Some(&m));
        assert_eq!(out.body, format!("{HEAD}read-grep:\n\nfound"));
        let seen = m.seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        assert!(
            request_len(&seen[2]) <= request_len(&seen[1]) / 2 + 1,
            "{} then {}",
            request_len(&seen[1]),
            request_len(&seen[2])
        );
        assert!(tool_results(&seen[2])[0].contains("to fit the model's context"));
        drop(seen);

        // A second refusal ends the call: one retry only.
        let m = Scripted::new(
            true,
            vec![
                call(
                    "Read",
                    json!({"file": "H", "start_line": 1, "end_line": 150}),
                ),
                exceeded(Some(4000), Some(2048)),
                exceeded(Some(2100), Some(2048)),
            ],
        );
        let out = run(&text, Mode::ReadGrep, EngineConfig::default(), Some(&m));
        let reason = out.fallback.unwrap();
        let cut_to = reason
            .strip_prefix(
                "read-grep: turn 2: model endpoint answered HTTP 400: the request exceeds the \
                 available context size (after a retry with the prompt cut to ",
            )
            .and_then(|rest| rest.strip_suffix(" bytes)"));
        assert!(
            cut_to.is_some_and(|n| n.parse::<usize>().is_ok()),
            "{reason}"
        );
        assert_eq!(m.seen.lock().unwrap().len(), 3);
    }

    #[test]
    fn a_model_error_in_a_read_grep_turn_is_the_reason_word_for_word() {
        let m = Scripted::new(
            true,
            vec![Err(ModelError::Status {
                status: 500,
                body: "boom".into(),
            })],
        );
        let out = run("a\nb\n", Mode::ReadGrep, EngineConfig::default(), Some(&m));
        assert_eq!(
            out.fallback.as_deref(),
            Some("read-grep: turn 1: model endpoint answered HTTP 500: boom")
        );
    }

    #[test]
    fn the_reduce_prompt_is_cut_to_fit_the_context() {
        // 2000 tokens less 1000 for the answer: 2500 bytes of prompt at 2.5 a token.
        let config = EngineConfig {
            context_tokens: 2000,
            max_output_tokens: 1000,
            ..EngineConfig::default()
        };
        let text = "q".repeat(4000);
        let long = "w".repeat(2000);
        let m = Scripted::new(
            false,
            (0..8)
                .map(|_| say(&format!("<ai-agent-{{N}}-FINAL format=\"text\">{long}")))
                .chain(std::iter::once(say(
                    "<ai-agent-{N}-FINAL format=\"text\">all w</ai-agent-{N}-FINAL>",
                )))
                .collect(),
        );
        let out = run(&text, Mode::FullChunked, config, Some(&m));
        assert!(out.fallback.is_none(), "{:?}", out.fallback);
        let seen = m.seen.lock().unwrap();
        let reduce = seen.last().unwrap();
        assert!(reduce.system.contains("CHUNK OUTPUTS"), "{}", reduce.system);
        assert!(
            request_len(reduce) <= 2500,
            "{} bytes sent",
            request_len(reduce)
        );
        assert!(reduce.system.contains("to fit the model's context"));
    }

    /// A chunk's report, for the map calls before a reduce.
    fn mapped(text: &str) -> Result<Reply, ModelError> {
        say(&format!(
            "<ai-agent-{{N}}-FINAL format=\"text\">{text}</ai-agent-{{N}}-FINAL>"
        ))
    }

    fn boom() -> Result<Reply, ModelError> {
        Err(ModelError::Status {
            status: 500,
            body: "boom".into(),
        })
    }

    /// Three chunks of the 1024-byte floor, so the reduce runs.
    const THREE_CHUNKS: EngineConfig = EngineConfig {
        context_tokens: 0,
        max_bytes: truncate::DEFAULT_MAX_BYTES,
        max_chunks: route::DEFAULT_MAX_CHUNKS,
        long_line_bytes: route::DEFAULT_LONG_LINE_BYTES,
        max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
        overlap_pct: chunk::DEFAULT_OVERLAP_PCT,
        deadline: DEFAULT_DEADLINE,
    };

    /// Every reason a strategy could not execute, word for word as the fallback quotes it.
    #[test]
    fn each_fallback_reason_is_quoted_word_for_word() {
        let reason = |text: &str, mode: Mode, config: EngineConfig, m: Option<&Scripted>| {
            run(text, mode, config, m).fallback.unwrap_or_default()
        };
        // No model: the same words for either strategy, with no strategy prefix.
        for mode in [Mode::FullChunked, Mode::ReadGrep] {
            assert_eq!(
                reason("abc", mode, EngineConfig::default(), None),
                route::NO_MODEL
            );
        }
        // A model that cannot call tools.
        let m = Scripted::new(false, vec![]);
        assert_eq!(
            reason("a\nb\n", Mode::ReadGrep, EngineConfig::default(), Some(&m)),
            "read-grep: the model cannot call tools (the client's sampling does not support \
             tool use)"
        );
        // More chunks than an explicit full-chunked may use.
        let m = Scripted::new(false, vec![]);
        assert_eq!(
            reason(
                &"y".repeat(100_000),
                Mode::FullChunked,
                THREE_CHUNKS,
                Some(&m)
            ),
            "full-chunked: 109 chunks of 1024 bytes needed, more than the 64 allowed"
        );
        assert!(m.seen.lock().unwrap().is_empty());
        // The reduce: a model error, a context error after its one retry, and no report.
        let text = "y".repeat(2500);
        let m = Scripted::new(false, vec![mapped("a"), mapped("b"), mapped("c"), boom()]);
        assert_eq!(
            reason(&text, Mode::FullChunked, THREE_CHUNKS, Some(&m)),
            "full-chunked: reduce: model endpoint answered HTTP 500: boom"
        );
        // 2000 tokens less 1000 for the answer: a reduce prompt of at most 2500 bytes.
        let small = EngineConfig {
            context_tokens: 2000,
            max_output_tokens: 1000,
            ..EngineConfig::default()
        };
        let probe = Scripted::new(false, (0..20).map(|_| mapped("a")).collect());
        run(&"q".repeat(4000), Mode::FullChunked, small, Some(&probe));
        let maps = probe.seen.lock().unwrap().len() - 1;
        assert!(maps > 1, "{maps} map calls");
        let m = Scripted::new(
            false,
            (0..maps)
                .map(|_| mapped("a"))
                .chain([
                    exceeded(Some(4000), Some(2048)),
                    exceeded(Some(3000), Some(2048)),
                ])
                .collect(),
        );
        assert_eq!(
            reason(&"q".repeat(4000), Mode::FullChunked, small, Some(&m)),
            "full-chunked: reduce: model endpoint answered HTTP 400: the request exceeds the \
             available context size (after a retry with the prompt cut to 162 bytes)"
        );
        let m = Scripted::new(false, vec![mapped("a"), mapped("b"), mapped("c"), say("")]);
        assert_eq!(
            reason(&text, Mode::FullChunked, THREE_CHUNKS, Some(&m)),
            "full-chunked: reduce: no final report produced; the answer was empty"
        );
        // A read-grep answer without a report, quoted to its first 200 bytes.
        let long = format!("{}é and more", "x".repeat(199));
        let m = Scripted::new(true, vec![say(&long)]);
        assert_eq!(
            reason("a\nb\n", Mode::ReadGrep, EngineConfig::default(), Some(&m)),
            format!(
                "read-grep: turn 1: no final report produced; the answer began: \"{}\"…",
                "x".repeat(199)
            )
        );
        // The turn after the limit of tool calls, which offers none.
        let m = Scripted::new(
            true,
            (1..=MAX_TOOL_CALLS)
                .map(|i| call("Read", json!({"file": "H", "start_line": i})))
                .collect(),
        );
        assert_eq!(
            reason("a\nb\n", Mode::ReadGrep, EngineConfig::default(), Some(&m)),
            "read-grep: turn 11, after the limit of 10 tool calls: no final report produced; \
             the answer was empty"
        );
    }

    #[test]
    fn an_echo_of_the_prompts_example_wrapper_is_no_report() {
        let echo = "<ai-agent-{N}-FINAL format=\"text\"> ... </ai-agent-{N}-FINAL>";
        let m = Scripted::new(false, vec![say(echo)]);
        let out = run("abc", Mode::FullChunked, EngineConfig::default(), Some(&m));
        assert_eq!(
            out.fallback.as_deref(),
            Some(
                "full-chunked: chunk 1 of 1: no final report produced (the answer only repeated \
                 the prompt's example wrapper); the answer began: \"<ai-agent-{N}-FINAL format=\\\"text\\\"> ... </ai-agent-{N}-FINAL>\""
                    .replace("{N}", &nonce_of(&m.seen.lock().unwrap()[0].system))
                    .as_str()
            )
        );
        // The example quoted, then a report of its own: the report counts.
        let m = Scripted::new(
            false,
            vec![say(&format!(
                "The format is {echo}. So: <ai-agent-{{N}}-FINAL format=\"text\">abc</ai-agent-{{N}}-FINAL>"
            ))],
        );
        let out = run("abc", Mode::FullChunked, EngineConfig::default(), Some(&m));
        assert_eq!(out.body, format!("{HEAD}full-chunked:\n\nabc"));
    }
}
