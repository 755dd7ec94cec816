//! The `tool_output` tool: extracts what the caller asks for from a stored large tool output
//! named by its handle, and answers in plain text.
//!
//! The model comes, in order, from the client's sampling (when it declared the capability,
//! and declared tool use too or no endpoint is configured), from the configured
//! OpenAI-compatible endpoint, or from nowhere (then only `truncate` runs).

use std::sync::{Arc, OnceLock};

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use serde_json::Value;

use super::sampling::Sampling;
use super::{Server, argument_error};
use crate::tool_output::engine::{self, EngineConfig, Job, TextTools};
use crate::tool_output::lookup::{self, Lookup};
use crate::tool_output::model::Model;
use crate::tool_output::model::openai::Endpoint;
use crate::tool_output::{Mode, text_tools};

/// The engine settings and endpoint of this process's server.
struct Configured {
    engine: EngineConfig,
    endpoint: Option<Arc<Endpoint>>,
}

static CONFIGURED: OnceLock<Configured> = OnceLock::new();

/// Sets this process's `tool_output` settings; the first call wins. Unset: the defaults and
/// no endpoint.
pub fn configure(engine: EngineConfig, endpoint: Option<Endpoint>) {
    let _ = CONFIGURED.set(Configured {
        engine,
        endpoint: endpoint.map(Arc::new),
    });
}

fn configured() -> &'static Configured {
    CONFIGURED.get_or_init(|| Configured {
        engine: EngineConfig::default(),
        endpoint: None,
    })
}

/// Tools listed only when the workspace holds at least one handle.
pub const NEEDS_HANDLES: [&str; 1] = ["tool_output"];

impl Server {
    /// Whether the workspace holds at least one handle (then the handle tools are listed).
    pub(super) async fn workspace_has_handles(&self) -> bool {
        // Debug builds: a test payload directory stands for a workspace with handles.
        cfg!(debug_assertions) && std::env::var_os("EVIDENCE_STORE_TEST_PAYLOADS").is_some()
    }
}

/// The input schema, exactly as published.
pub fn tool_output_schema() -> Arc<JsonObject> {
    let schema = serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["handle", "extract"],
        "properties": {
            "handle": {
                "type": "string",
                "minLength": 1,
                "description": "UUID handle of the stored tool output (provided in the tool-result message: tool_output(handle = \"<uuid>\", ...))."
            },
            "extract": {
                "type": "string",
                "minLength": 1,
                "description": "Provide precise, detailed instructions about what you need from the tool output (be specific, include keys/fields/sections if known)."
            },
            "mode": {
                "type": "string",
                "enum": ["auto", "full-chunked", "read-grep", "truncate"],
                "description": "Optional override. auto=module decides; full-chunked=LLM chunk+reduce; read-grep=dynamic sub-agent with Read/Grep; truncate=keeps top and bottom, truncates in the middle."
            }
        }
    });
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The checked arguments, or the message naming every problem.
fn check_args(args: &JsonObject) -> Result<(String, String, Mode), String> {
    let mut problems = Vec::new();
    for key in args.keys() {
        if !matches!(key.as_str(), "handle" | "extract" | "mode") {
            problems.push(format!("{key}: unexpected argument"));
        }
    }
    let mut string = |key: &str| match args.get(key) {
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
    };
    let handle = string("handle");
    let extract = string("extract");
    let mode = match args.get("mode") {
        None => Some(Mode::Auto),
        Some(Value::String(s)) => Mode::parse(s).or_else(|| {
            problems.push(format!(
                "mode: must be one of auto, full-chunked, read-grep, truncate (got {s:?})"
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

/// The model this call uses: the client's sampling when it can run read-grep or when no
/// endpoint is configured, else the endpoint, else none.
fn pick_model(context: &RequestContext<RoleServer>) -> Option<Arc<dyn Model>> {
    let endpoint = configured().endpoint.clone();
    match (Sampling::of(&context.peer), endpoint) {
        (Some(s), Some(_)) if s.supports_tools() => Some(Arc::new(s)),
        (Some(s), None) => Some(Arc::new(s)),
        (_, Some(e)) => Some(e),
        (None, None) => None,
    }
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
        let config = configured().engine;
        let h = handle.clone();
        let found = self
            .call(move |service| lookup::resolve(service, &h))
            .await?;
        let body = match found {
            Lookup::Unknown => lookup::unknown_body(&handle, mode, config.max_bytes),
            Lookup::Stale { tool_name, detail } => {
                lookup::stale_body(&tool_name, &handle, mode, &detail, config.max_bytes)
            }
            Lookup::Found { text, source } => {
                let model = pick_model(&context);
                if let Some(m) = &model {
                    tracing::info!(
                        handle,
                        model = m.describe(),
                        mode = mode.as_str(),
                        "tool_output"
                    );
                }
                let job = Job {
                    handle: &handle,
                    source,
                    text: &text,
                    extract: &extract,
                    mode,
                };
                let tools: &dyn TextTools = &text_tools::Tools;
                engine::extract(&job, &config, model.as_deref(), tools)
                    .await
                    .body
            }
        };
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
