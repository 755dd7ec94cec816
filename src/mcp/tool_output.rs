//! The `tool_output` tool: extracts what the caller asks for from a stored large tool output
//! named by its handle, and answers in plain text.
//!
//! The model comes, in order, from the client's sampling (when it declared the capability,
//! and declared tool use too or no endpoint is configured), from the configured
//! OpenAI-compatible endpoint, or from nowhere (then only `truncate` runs).

use std::sync::Arc;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use serde_json::Value;

use super::sampling::Sampling;
use super::{Server, argument_error};
use crate::read::handle::strip_extension;
use crate::tool_output::lookup::{self, Lookup};
use crate::tool_output::model::Model;
use crate::tool_output::service::{ClientModel, Request, Search};
use crate::tool_output::{Mode, text_tools};
use crate::util::stop_flag::{Stop, StopReason};
use crate::util::text::echo_cut;

const TOOL_OUTPUT_SCHEMA: &str = include_str!("schemas/tool_output.json");

impl Server {
    /// What `handle` names, found by the service.
    async fn lookup(&self, handle: &str) -> Result<Result<Lookup, String>, ErrorData> {
        // A handle written as a file name (`<uuid>.txt`) names the same output.
        let handle = strip_extension(handle.trim()).to_owned();
        let found = self
            .call(move |service| service.tool_output_lookup(&handle))
            .await?;
        Ok(found.map_err(|e| e.to_string()))
    }
}

/// The input schema, exactly as published (kept as data, as prompt-diary's are).
pub fn tool_output_schema() -> Arc<JsonObject> {
    // Compiled-in data, pinned by a test: a bad file is a build defect, never published
    // as an empty schema.
    Arc::new(
        serde_json::from_str(TOOL_OUTPUT_SCHEMA)
            .expect("the compiled-in tool_output schema is a JSON object"),
    )
}

/// The checked arguments, or the message naming every problem.
fn check_args(args: &JsonObject) -> Result<(String, String, Mode), String> {
    let mut problems = known_keys(args, &["handle", "extract", "mode"]);
    let handle = string_arg(args, "handle", &mut problems);
    let extract = string_arg(args, "extract", &mut problems);
    let mode = match args.get("mode") {
        None => Some(Mode::Auto),
        Some(Value::String(s)) => Mode::parse(s).or_else(|| {
            problems.push(format!(
                "mode: must be one of auto, full-chunked, read-grep, truncate (got {:?})",
                echo_cut(s)
            ));
            None
        }),
        Some(_) => {
            problems.push("mode: must be a string".to_string());
            None
        }
    };
    match (handle, extract, mode) {
        (Some(h), Some(e), Some(m)) if problems.is_empty() => Ok((h, e, m)),
        _ => Err(problems.join("; ")),
    }
}

/// The client's own model (MCP sampling), when it declared the capability.
fn client_model(context: &RequestContext<RoleServer>) -> Option<ClientModel> {
    Sampling::of(&context.peer).map(|s| ClientModel {
        runs_tools: s.supports_tools(),
        model: Arc::new(s),
    })
}

#[tool_router(router = tool_output_router, vis = "pub(super)")]
impl Server {
    #[tool(
        description = "Extract what you need from a large tool output that a compact read_session_lines record trimmed. Pass the entry's \"handle\" and precise instructions in `extract`. Answers in plain text.",
        input_schema = tool_output_schema(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn tool_output(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<JsonObject>,
    ) -> Result<CallToolResult, ErrorData> {
        let (handle, extract, mode) = match check_args(&args) {
            Ok(checked) => checked,
            Err(message) => return Ok(argument_error("tool_output", message)),
        };
        let handle = strip_extension(handle.trim()).to_string();
        let found = match self.lookup(&handle).await? {
            Ok(found) => found,
            Err(problem) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "tool_output: the evidence store cannot answer: {problem}"
                ))]));
            }
        };
        let service = self.service.get().await?;
        let tool_output = service.tool_output();
        let model = match &found {
            Lookup::Found { .. } => tool_output.model(client_model(&context)),
            _ => None,
        };
        // The whole extraction runs on the blocking pool, its awaits driven from there:
        // the sub-agent's searches, the chunking and the prompts never take an async
        // worker. Its one stop flag is set by the deadline, the call's cancel and the end
        // of input; the searches ask it between lines and spans, and a cancel or the end
        // of input also drops the extraction at its next await (its model request with
        // it).
        let stop = Stop::within(tool_output.engine().deadline);
        let _watch = self.watch(context.ct.clone().cancelled_owned(), &stop);
        let runtime = tokio::runtime::Handle::current();
        let work_stop = stop.clone();
        let request = Request {
            handle: handle.clone(),
            extract,
            mode,
        };
        let work = tokio::task::spawn_blocking(move || {
            service
                .tool_output()
                .answer(request, found, model, &work_stop, &runtime)
        });
        let body = match work.await {
            Ok(Some(body)) => body,
            Ok(None) => {
                let reason = stop.reason().map_or("stopped", StopReason::as_str);
                tracing::info!(handle, reason, "tool_output stopped");
                return Err(ErrorData::invalid_request(
                    format!("the request was stopped: {reason}"),
                    None,
                ));
            }
            Err(e) => {
                return Err(ErrorData::internal_error(
                    format!("tool_output panicked: {e}"),
                    None,
                ));
            }
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(body)]))
    }
}

/// `tool_output_read`'s input schema.
fn read_schema() -> Arc<JsonObject> {
    object_schema(serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["handle", "start_line", "end_line"],
        "properties": {
            "handle": {"type": "string", "minLength": 1, "description": "The \"handle\" of a trimmed tool_uses or tool_results entry of a compact read_session_lines record."},
            "start_line": {"type": "integer", "minimum": 1, "description": "First line of the payload to show (1-based)."},
            "end_line": {"type": "integer", "minimum": 1, "description": "Last line to show (inclusive)."},
            "byte_offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Byte of start_line to start at, for a long line (a cut line says where to continue)."},
            "byte_length": {"type": "integer", "minimum": 1, "description": "Most bytes shown of each line (default: as many as fit the size cap)."}
        }
    }))
}

/// `tool_output_grep`'s input schema.
fn grep_schema() -> Arc<JsonObject> {
    object_schema(serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["handle", "pattern"],
        "properties": {
            "handle": {"type": "string", "minLength": 1, "description": "The \"handle\" of a trimmed tool_uses or tool_results entry of a compact read_session_lines record."},
            "pattern": {"type": "string", "minLength": 1, "description": "A regular expression (Rust regex syntax, linear time)."},
            "context_lines": {"type": "integer", "minimum": 0, "maximum": 20, "default": 0, "description": "Lines shown before and after each matching line."},
            "max_matches": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50, "description": "Matches shown at most."},
            "start_line": {"type": "integer", "minimum": 1, "default": 1, "description": "Line to search from (an answer that was cut says where to continue)."},
            "start_byte": {"type": "integer", "minimum": 0, "default": 0, "description": "Byte of start_line to search from."}
        }
    }))
}

fn object_schema(schema: Value) -> Arc<JsonObject> {
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// A problem for each argument the tool does not take.
fn known_keys(args: &JsonObject, keys: &[&str]) -> Vec<String> {
    args.keys()
        .filter(|k| !keys.contains(&k.as_str()))
        .map(|k| format!("{}: unexpected argument", echo_cut(k)))
        .collect()
}

fn string_arg(args: &JsonObject, key: &str, problems: &mut Vec<String>) -> Option<String> {
    match args.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::String(_)) => {
            problems.push(format!("{key}: must not be empty"));
            None
        }
        Some(_) => {
            problems.push(format!("{key}: must be a string"));
            None
        }
        None => {
            problems.push(format!("{key}: required"));
            None
        }
    }
}

/// An integer argument within `range`, or `default` when absent (`None`: required).
fn int_arg(
    args: &JsonObject,
    key: &str,
    range: std::ops::RangeInclusive<u64>,
    default: Option<u64>,
    problems: &mut Vec<String>,
) -> Option<u64> {
    match args.get(key) {
        None => default.or_else(|| {
            problems.push(format!("{key}: required"));
            None
        }),
        Some(Value::Number(n)) => match n.as_u64().filter(|v| range.contains(v)) {
            Some(v) => Some(v),
            None => {
                problems.push(format!(
                    "{key}: must be an integer from {} to {} (got {n})",
                    range.start(),
                    range.end()
                ));
                None
            }
        },
        Some(_) => {
            problems.push(format!("{key}: must be an integer"));
            None
        }
    }
}

impl Server {
    /// The payload a deterministic tool works on, or the error result to answer.
    async fn payload_for(
        &self,
        tool: &str,
        handle: &str,
    ) -> Result<Result<(String, String), CallToolResult>, ErrorData> {
        let error = |text: String| Ok(Err(CallToolResult::error(vec![ContentBlock::text(text)])));
        match self.lookup(handle).await? {
            Err(problem) => error(format!(
                "{tool}: the evidence store cannot answer: {problem}"
            )),
            Ok(Lookup::Unknown { nearest }) => error(format!(
                "{tool}: {}",
                lookup::unknown_text(handle, nearest.as_deref())
            )),
            Ok(Lookup::Stale { detail, .. }) => error(format!(
                "{tool}: the handle {} is stale: {detail}.",
                echo_cut(handle)
            )),
            Ok(Lookup::Found { text, source }) => Ok(Ok((text, source.tool_name))),
        }
    }
}

#[tool_router(router = tool_output_text_router, vis = "pub(super)")]
impl Server {
    #[tool(
        description = "Numbered lines of a large tool output that a compact read_session_lines record trimmed, named by the entry's \"handle\". Deterministic; the answer stays within the size cap and says where to continue when it is cut. A long line is read a piece at a time with byte_offset (and byte_length); a piece not from byte 0 is shown as `line@byte:`. Lines of the payload, not of the session.",
        input_schema = read_schema(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn tool_output_read(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<JsonObject>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut problems = known_keys(
            &args,
            &[
                "handle",
                "start_line",
                "end_line",
                "byte_offset",
                "byte_length",
            ],
        );
        let handle = string_arg(&args, "handle", &mut problems);
        let lines = 1..=u64::from(u32::MAX);
        let start = int_arg(&args, "start_line", lines.clone(), None, &mut problems);
        let end = int_arg(&args, "end_line", lines, None, &mut problems);
        let offset = int_arg(&args, "byte_offset", 0..=u64::MAX, Some(0), &mut problems);
        let length = match args.get("byte_length") {
            None => Some(None),
            Some(_) => int_arg(&args, "byte_length", 1..=u64::MAX, None, &mut problems).map(Some),
        };
        let (Some(handle), Some(start), Some(end), Some(offset), Some(length), true) =
            (handle, start, end, offset, length, problems.is_empty())
        else {
            return Ok(argument_error("tool_output_read", problems.join("; ")));
        };
        if end < start {
            return Ok(argument_error(
                "tool_output_read",
                format!("end_line: must be >= start_line {start} (got {end})"),
            ));
        }
        let (text, tool_name) = match self.payload_for("tool_output_read", &handle).await? {
            Ok(found) => found,
            Err(answer) => return Ok(answer),
        };
        let service = self.service.get().await?;
        // Counting and cutting lines of a large payload is CPU work: off the async
        // threads, stopped by the call's cancel and the end of input.
        let stop = Stop::new();
        let _watch = self.watch(context.ct.clone().cancelled_owned(), &stop);
        let body = tokio::task::spawn_blocking(move || {
            service.tool_output().read(
                &text,
                &tool_name,
                &handle,
                (start, end, offset, length),
                &stop,
            )
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("read panicked: {e}"), None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(body)]))
    }

    #[tool(
        description = "Regex matches, with line numbers, in a large tool output that a compact read_session_lines record trimmed, named by the entry's \"handle\". On a very long line every match shows about 200 bytes around it, as `line@byte:`. Deterministic, linear-time patterns, bounded in cost (a pattern too costly to compile is refused; a search stops after 5 s) and stopped by a cancel; the answer stays within the size cap and says how many matches it showed and how to get the rest (start_line, start_byte).",
        input_schema = grep_schema(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn tool_output_grep(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<JsonObject>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut problems = known_keys(
            &args,
            &[
                "handle",
                "pattern",
                "context_lines",
                "max_matches",
                "start_line",
                "start_byte",
            ],
        );
        let handle = string_arg(&args, "handle", &mut problems);
        let pattern = string_arg(&args, "pattern", &mut problems);
        let context_lines = int_arg(&args, "context_lines", 0..=20, Some(0), &mut problems);
        let max = int_arg(&args, "max_matches", 1..=500, Some(50), &mut problems);
        let start_line = int_arg(
            &args,
            "start_line",
            1..=u64::from(u32::MAX),
            Some(1),
            &mut problems,
        );
        let start_byte = int_arg(&args, "start_byte", 0..=u64::MAX, Some(0), &mut problems);
        let (
            Some(handle),
            Some(pattern),
            Some(context_lines),
            Some(max),
            Some(start_line),
            Some(start_byte),
            true,
        ) = (
            handle,
            pattern,
            context_lines,
            max,
            start_line,
            start_byte,
            problems.is_empty(),
        )
        else {
            return Ok(argument_error("tool_output_grep", problems.join("; ")));
        };
        // The answer repeats the pattern, cut when long, so it stays within the cap.
        let compiled = match text_tools::compile(&pattern) {
            Ok(p) => Ok(p),
            Err(text_tools::PatternError::Syntax(e)) => {
                return Ok(argument_error("tool_output_grep", format!("pattern: {e}")));
            }
            Err(text_tools::PatternError::TooCostly(limit)) => Err(limit),
        };
        let (text, tool_name) = match self.payload_for("tool_output_grep", &handle).await? {
            Ok(found) => found,
            Err(answer) => return Ok(answer),
        };
        let service = self.service.get().await?;
        let search = Search {
            context_lines,
            max_matches: max,
            start_line,
            start_byte,
        };
        // A search is CPU work: off the async threads, and stopped by the request's cancel
        // and the end of input.
        let stop = Stop::new();
        let _watch = self.watch(context.ct.clone().cancelled_owned(), &stop);
        let body = tokio::task::spawn_blocking(move || {
            service.tool_output().grep(
                &text,
                &tool_name,
                &handle,
                (&pattern, compiled),
                search,
                &stop,
            )
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("grep panicked: {e}"), None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(body)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: Value, expect: Result<(&str, &str, Mode), &str>) {
        let Value::Object(map) = input else {
            panic!("object expected")
        };
        let got = check_args(&map);
        let expect = expect
            .map(|(h, e, m)| (h.to_string(), e.to_string(), m))
            .map_err(str::to_string);
        assert_eq!(got, expect);
    }

    #[test]
    fn arguments_are_checked() {
        use serde_json::json;
        check(
            json!({"handle": "h", "extract": "e"}),
            Ok(("h", "e", Mode::Auto)),
        );
        check(
            json!({"handle": "h", "extract": "e", "mode": "read-grep"}),
            Ok(("h", "e", Mode::ReadGrep)),
        );
        check(
            json!({"handle": "", "extract": 3, "mode": "fast", "x": 1}),
            Err(
                "x: unexpected argument; handle: must not be empty; extract: must be a string; mode: must be one of auto, full-chunked, read-grep, truncate (got \"fast\")",
            ),
        );
        check(json!({}), Err("handle: required; extract: required"));
    }

    #[test]
    fn schema_is_closed() {
        let s = tool_output_schema();
        assert_eq!(s.get("additionalProperties"), Some(&Value::Bool(false)));
        assert_eq!(
            s.get("required"),
            Some(&serde_json::json!(["handle", "extract"]))
        );
    }
}
